"""``Adam`` and ``AdamW`` with PyTorch's formulas (bias correction, ``amsgrad``, decoupled decay)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.factories import zeros, zeros_like
from gt.optim._options import (
    advance,
    decay_weights,
    group_betas,
    group_lr,
    near_p,
    on_worker_when_captured,
    reject_differentiable,
)
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction; ``weight_decay`` adds ``wd * p`` to the gradient.

    ``m = b1*m + (1-b1)*g``; ``v = b2*v + (1-b2)*g*g``;
    ``p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)``.

    ``capturable=True`` (as in PyTorch, for CUDA graphs) keeps the step count ``t`` as a tensor
    on the worker and computes the bias corrections there, in float64, so that a step under
    ``@gt.hot`` is the same instructions every call and can be captured; the results are the same
    as without it. By default ``t`` is a Python number, whose corrections change every call.
    """

    decoupled = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ):
        reject_differentiable(type(self).__name__, differentiable)
        if lr < 0 or eps < 0 or not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(
                f"{type(self).__name__}: invalid hyperparameters lr={lr}, betas={betas}, eps={eps}"
            )
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                capturable=capturable,
                decoupled_weight_decay=bool(decoupled_weight_decay or self.decoupled),
                differentiable=differentiable,
                foreach=foreach,
                fused=fused,
            ),
        )

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        (b1, b2), eps = group_betas(group, p), group["eps"]
        lr = group_lr(group, p)
        g = decay_weights(p, g, group, group.get("decoupled_weight_decay", self.decoupled))
        capturable = group.get("capturable", False)
        if not state:
            state["step"] = zeros((), dtype="float64") if capturable else 0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        on_worker_when_captured(p, state)
        t = advance(state)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        # (beta1 on the worker, float64: each factor rounded to p's dtype as the number is)
        m.mul_(near_p(b1, b1, group, p)).add_(g * near_p(1.0 - b1, b1, group, p))
        v.mul_(b2).add_(g * g * (1.0 - b2))
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            vmax.copy_(vmax.maximum(v))
            v = vmax
        bc1 = 1.0 - b1**t
        bc2 = 1.0 - b2**t
        inv_sqrt_bc2, step_size = 1.0 / bc2**0.5, lr / bc1
        if isinstance(t, Tensor):  # float64 on the worker, then in the precision a Python
            # number has next to the parameter (float32, or float64 for a double parameter)
            wide = "float64" if p.dtype in ("float64", "complex128") else "float32"
            inv_sqrt_bc2, step_size = inv_sqrt_bc2.to(wide), step_size.to(wide)
        denom = v.sqrt() * inv_sqrt_bc2 + eps
        p.sub_(m / denom * step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the Adam step."""

    decoupled = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused)  # fmt: skip
