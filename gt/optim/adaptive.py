"""``RMSprop`` and ``Adagrad`` with PyTorch's formulas and defaults."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.factories import full_like, zeros_like
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class RMSprop(Optimizer):
    """RMSprop: divide the gradient by a running root mean square of recent gradients.

    ``v = alpha*v + (1-alpha)*g*g``; centered: ``avg = sqrt(v - mean_g^2) + eps`` (with
    ``mean_g = alpha*mean_g + (1-alpha)*g``), else ``sqrt(v) + eps``; with momentum
    ``buf = momentum*buf + g/avg; p -= lr*buf``, else ``p -= lr*g/avg``.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, capturable: bool = False, foreach: Any = None,
                 maximize: bool = False, differentiable: bool = False):  # fmt: skip
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or alpha < 0:
            raise ValueError(
                f"RMSprop: invalid hyperparameters lr={lr}, alpha={alpha}, eps={eps}, "
                f"momentum={momentum}, weight_decay={weight_decay}"
            )
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        state["step"] += 1
        alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
        v = state["square_avg"]
        v.mul_(alpha).addcmul_(g, g, value=1.0 - alpha)
        if group["centered"]:
            mean_g = state["grad_avg"]
            mean_g.lerp_(g, 1.0 - alpha)
            avg = v.addcmul(mean_g, mean_g, value=-1.0).sqrt() + eps
        else:
            avg = v.sqrt() + eps
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).addcdiv_(g, avg)
            p.sub_(buf * lr)
        else:
            p.addcdiv_(g, avg, value=-lr)


class Adagrad(Optimizer):
    """Adagrad: per-element step sizes shrinking with the sum of squared gradients.

    ``sum += g*g``; ``p -= lr / (1 + (t-1)*lr_decay) * g / (sqrt(sum) + eps)``.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: Any = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: Any = None):  # fmt: skip
        if lr < 0 or lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
            raise ValueError(
                f"Adagrad: invalid hyperparameters lr={lr}, lr_decay={lr_decay}, eps={eps}, "
                f"weight_decay={weight_decay}, initial_accumulator_value={initial_accumulator_value}"
            )
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      maximize=maximize))  # fmt: skip
        for group in self.param_groups:  # PyTorch creates the state eagerly
            for p in group["params"]:
                self.state[p] = {
                    "step": 0,
                    "sum": full_like(p, group["initial_accumulator_value"]),
                }

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        state["step"] += 1
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        acc = state["sum"]
        acc.addcmul_(g, g, value=1.0)
        p.addcdiv_(g, acc.sqrt() + group["eps"], value=-clr)
