"""``RMSprop``, ``Adagrad`` and ``SparseAdam`` with PyTorch's formulas and defaults."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gt.factories import full_like, zeros_like
from gt.optim._options import (
    add_ratio,
    advance,
    group_lr,
    group_momentum,
    like,
    near_p,
    on_worker_when_captured,
    reject_differentiable,
)
from gt.optim.optimizer import Optimizer, ParamState
from gt.tensor import Tensor


class RMSprop(Optimizer):
    """RMSprop: divide the gradient by a running root mean square of recent gradients.

    ``v = alpha*v + (1-alpha)*g*g``; centered: ``avg = sqrt(v - mean_g^2) + eps`` (with
    ``mean_g = alpha*mean_g + (1-alpha)*g``), else ``sqrt(v) + eps``; with momentum
    ``buf = momentum*buf + g/avg; p -= lr*buf``, else ``p -= lr*g/avg``.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False, foreach: Any = None,
                 maximize: bool = False, differentiable: bool = False):  # fmt: skip
        reject_differentiable("RMSprop", differentiable)
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or alpha < 0:
            raise ValueError(
                f"RMSprop: invalid hyperparameters lr={lr}, alpha={alpha}, eps={eps}, "
                f"momentum={momentum}, weight_decay={weight_decay}"
            )
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable,
                                      foreach=foreach))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            if dict.get(group, "momentum") > 0:  # (the group captures again if it turns 0)
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        advance(state)
        alpha, eps = group["alpha"], group["eps"]
        lr = group_lr(group, p)
        if lr is not dict.get(group, "lr"):  # the rate on the worker (float64): rounded to p's
            lr = like(lr, p)  # dtype as the Python number would be where it meets p
        v = state["square_avg"]
        v.mul_(alpha).addcmul_(g, g, value=1.0 - alpha)
        if group["centered"]:
            mean_g = state["grad_avg"]
            mean_g.lerp_(g, 1.0 - alpha)
            avg = v.addcmul(mean_g, mean_g, value=-1.0).sqrt() + eps
        else:
            avg = v.sqrt() + eps
        if dict.get(group, "momentum") > 0:
            buf, mom = state["momentum_buffer"], group_momentum(group, p)
            buf.mul_(near_p(mom, mom, group, p)).addcdiv_(g, avg)
            p.sub_(buf * lr)
        else:
            add_ratio(p, g, avg, -lr)


class Adagrad(Optimizer):
    """Adagrad: per-element step sizes shrinking with the sum of squared gradients.

    ``sum += g*g``; ``p -= lr / (1 + (t-1)*lr_decay) * g / (sqrt(sum) + eps)``.
    """

    SPARSE_GRADIENTS = "dense"

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: Any = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: Any = None):  # fmt: skip
        reject_differentiable("Adagrad", differentiable)
        if lr < 0 or lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
            raise ValueError(
                f"Adagrad: invalid hyperparameters lr={lr}, lr_decay={lr_decay}, eps={eps}, "
                f"weight_decay={weight_decay}, initial_accumulator_value={initial_accumulator_value}"
            )
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      maximize=maximize, differentiable=differentiable,
                                      foreach=foreach, fused=fused))  # fmt: skip
        for group in self.param_groups:  # PyTorch creates the state eagerly
            for p in group["params"]:
                self.state[p] = ParamState(
                    step=0, sum=full_like(p, group["initial_accumulator_value"])
                )

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        if "sum" not in state:  # (a group added after construction: PyTorch's lazy state)
            state.update(step=0, sum=full_like(p, group["initial_accumulator_value"]))
        decay, lr = group["lr_decay"], dict.get(group, "lr")
        if decay and p.dtype in ("float32", "float64") and not isinstance(lr, Tensor):
            on_worker_when_captured(p, state)  # (the decayed rate is then computed there)
        step = advance(state)
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        lr = group_lr(group, p)
        clr = lr / (1 + (step - 1) * decay) if decay else lr  # (lr / 1.0 is lr: no decay, no op)
        if isinstance(clr, Tensor) and clr is not dict.get(group, "lr"):
            clr = like(clr, p)  # computed in float64, rounded to p's dtype as the number would be
        acc = state["sum"]
        acc.addcmul_(g, g, value=1.0)
        add_ratio(p, g, acc.sqrt() + group["eps"], -clr)


class SparseAdam(Optimizer):
    """Adam for sparse gradients (``nn.Embedding(sparse=True)``'s): only the rows a step's
    gradient holds are updated, their moments included, with PyTorch's arithmetic (the moments'
    changes, then ``step_size * (old + change) / (sqrt(old_sq + change_sq) + eps)``).

    Raises:
        RuntimeError: at ``step``, for a parameter whose gradient is dense (as PyTorch's).
    """

    SPARSE_GRADIENTS = "own"
    TENSOR_STEP = False  # PyTorch's SparseAdam counts in a Python int

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False):  # fmt: skip
        if not 0.0 < lr or not 0.0 < eps or not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"SparseAdam: invalid lr={lr}, eps={eps} or betas={betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize))

    def _update(self, p: Tensor, g: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        if getattr(g, "is_sparse", False) is not True:
            raise RuntimeError(
                "SparseAdam does not support dense gradients, please consider Adam instead"
            )
        if not state:
            state.update(step=0, exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
        state["step"] += 1
        g = (-g if group["maximize"] else g).coalesce()
        if g._nnz() == 0:
            return
        beta1, beta2 = group["betas"]
        where = tuple(g._indices().unbind(0))
        values = g._values()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        old = exp_avg[where]
        change = (values - old).mul_(1 - beta1)
        exp_avg.index_put_(where, change, accumulate=True)
        old_sq = exp_avg_sq[where]
        change_sq = values.pow(2).sub_(old_sq).mul_(1 - beta2)
        exp_avg_sq.index_put_(where, change_sq, accumulate=True)
        numer = change.add_(old)
        denom = change_sq.add_(old_sq).sqrt_().add_(group["eps"])
        step = state["step"]
        step_size = group["lr"] * math.sqrt(1 - beta2**step) / (1 - beta1**step)
        p.index_put_(where, numer.div_(denom) * -step_size, accumulate=True)
