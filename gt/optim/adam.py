"""``Adam`` and ``AdamW`` with PyTorch's formulas (bias correction, ``amsgrad``, decoupled decay)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.factories import zeros_like
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction; ``weight_decay`` adds ``wd * p`` to the gradient.

    ``m = b1*m + (1-b1)*g``; ``v = b2*v + (1-b2)*g*g``;
    ``p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)``.
    """

    decoupled = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ):
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
            ),
        )

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if wd:
            if self.decoupled:
                p.mul_(1.0 - lr * wd)
            else:
                g = g + p * wd
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        state["step"] += 1
        t = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.mul_(b1).add_(g * (1.0 - b1))
        v.mul_(b2).add_(g * g * (1.0 - b2))
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            vmax.copy_(vmax.maximum(v))
            v = vmax
        bc1 = 1.0 - b1**t
        bc2 = 1.0 - b2**t
        denom = v.sqrt() * (1.0 / bc2**0.5) + eps
        p.sub_(m / denom * (lr / bc1))


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
        maximize: bool = False,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
