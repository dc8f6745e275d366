"""``Adafactor``: Adam-like steps with a factored second moment, with PyTorch's arguments,
defaults, state names (``step``, ``row_var`` / ``col_var`` for a matrix or batch of them,
``variance`` for a vector) and update (PyTorch's variant, which has no first moment).

PyTorch reads two norms back to the host at every step (``.item()``) to scale the update; GT
computes the same factors on the workers instead, so a step has no sync point.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from gt.factories import zeros, zeros_like
from gt.optim._options import (
    advance,
    decay_weights,
    group_lr,
    like,
    on_worker_when_captured,
    require,
)
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, 2018), as in PyTorch.

    At step ``t``: ``beta2_t = 1 - t^beta2_decay``, ``rho_t = min(lr, 1/sqrt(t))``,
    ``alpha = max(eps2, RMS(p)) * rho_t``; ``p *= 1 - lr*weight_decay``. For a matrix (the last
    two dimensions): ``row_var`` and ``col_var`` follow the row and column means of ``g*g``
    (``lerp`` with weight ``1 - beta2_t``) and ``v = row_var @ col_var / max(mean(row_var),
    eps1)``; for a vector ``variance`` follows ``g*g``. ``u = g / sqrt(max(v, eps1^2))``;
    ``p -= alpha / max(1, RMS(u)/d) * u``.

    Args:
        params: tensors or parameter groups.
        lr: the ceiling of the relative step size ``rho_t``.
        beta2_decay: the decay exponent of ``1 - beta2_t`` (``<= 0``).
        eps: ``(eps1, eps2)``; ``eps1=None`` is the dtype's machine epsilon.
        d: the clipping threshold of the update's RMS (``>= 1``).
        weight_decay: decoupled weight decay.
        foreach: accepted; GT's steps are already batched into worker instructions.
        maximize: ascend instead of descend.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False):  # fmt: skip
        require(0.0 <= lr, f"Learning rate should be >= 0 but is: {lr}")
        require(0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}")
        require(eps[0] is None or 0.0 <= eps[0], f"epsilon1 should be >= 0 but is: {eps[0]}")
        require(0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}")
        require(1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}")
        require(0.0 <= weight_decay, f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        if not state:
            state["step"] = 0.0
            if g.ndim > 1:
                state["row_var"] = zeros((*g.shape[:-1], 1), dtype=g.dtype)
                state["col_var"] = zeros((*g.shape[:-2], 1, g.shape[-1]), dtype=g.dtype)
            else:
                state["variance"] = zeros_like(g)
        decay = group["beta2_decay"]
        if p.dtype in ("float32", "float64") and decay != -1.0:
            # (captured, the count moves to the worker and the factors are computed there, in
            # float64 as the numbers are; but NumPy takes x ** -1.0 as 1 / x, which rounds
            # differently from the C library's pow now and then, so that decay keeps it here)
            on_worker_when_captured(p, state)
        t = advance(state)
        d = group["d"]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = float(np.finfo(np.dtype(p.dtype)).eps)
        if isinstance(t, Tensor):  # float64 on the worker, then rounded to p's dtype where it
            one_minus_beta2 = like(t**decay, p)  # meets p, as the Python numbers would be
            lr, inv_sqrt = group_lr(group, p), 1.0 / t.sqrt()  # (sqrt: correctly rounded both)
            rho = inv_sqrt.minimum(lr) if isinstance(lr, Tensor) else inv_sqrt.clamp(max=lr)
            rho = like(rho, p)
        else:
            one_minus_beta2 = t**decay
            rho = min(group["lr"], 1.0 / math.sqrt(t))
        alpha = (p.norm(2) / math.sqrt(p.numel())).clamp(min=eps2) * rho
        decay_weights(p, g, group, decoupled=True)  # (after alpha: it reads p as it was)
        gg = g * g
        if g.ndim > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(gg.mean(-1, keepdim=True), one_minus_beta2)
            col_var.lerp_(gg.mean(-2, keepdim=True), one_minus_beta2)
            v = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=eps1)
        else:
            v = state["variance"]
            v.lerp_(gg, one_minus_beta2)
        update = v.clamp(min=eps1 * eps1).rsqrt() * g
        denom = (update.norm(2) / (math.sqrt(update.numel()) * d)).clamp(min=1.0)
        p.sub_(update * (alpha / denom))
