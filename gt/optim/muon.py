"""``Muon``: momentum orthogonalised by a Newton-Schulz iteration, for 2-d parameters (PyTorch's
``torch.optim.Muon``, after Keller Jordan's)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from gt.factories import zeros_like
from gt.optim._options import group_lr
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor

#: The quintic's coefficients (chosen to make the slope at zero steep) and the default step count.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
EPS = 1e-7

_ADJUST_LR_FNS = (None, "original", "match_rms_adamw")


def orthogonalize(g: Tensor, coefficients: Any, steps: int, eps: float) -> Tensor:
    """About ``U V^T`` of ``g = U S V^T``: ``steps`` rounds of ``X <- a X + (b A + c A^2) X`` with
    ``A = X X^T``, in bfloat16, on the wide orientation of ``g`` scaled to Frobenius norm 1 (so
    that its spectral norm is at most 1). The result is bfloat16, as PyTorch's."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if g.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    tall = g.shape[0] > g.shape[1]
    x = g.bfloat16()
    if tall:
        x = x.T
    # (the norm of the bfloat16 values exactly, then rounded as PyTorch's float32 one is)
    x = x / x.double().norm().float().bfloat16().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        poly = gram.addmm(gram, gram, beta=b, alpha=c)  # b A + c A A
        x = x.addmm(poly, x, beta=a)  # a X + (b A + c A A) X
    return x.T if tall else x


def _fma(base: Tensor, x: Tensor, scale: Any) -> Tensor:
    """``base + scale * x`` for float32 ``base``, rounded once as PyTorch's CPU kernels round it
    (a fused multiply-add, with ``scale`` a float32 number): computed in float64, where the
    product of two float32 numbers is exact. The orthogonalisation rounds to bfloat16, so a
    float32 ulp of difference here could change a whole step. ``scale`` may be a float64 0-d
    tensor on the worker (the learning rate of a captured step), rounded as the number is."""
    if base.dtype != "float32":  # (``x`` widened first: a bfloat16 update times ``scale``
        return base + x.to(base.dtype) * scale  # rounds in float64, as PyTorch's add_ does)
    scale = scale.float().double() if isinstance(scale, Tensor) else float(np.float32(scale))
    return (base.double() + x.double() * scale).float()


def _lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """``torch.lerp`` with a number weight, rounded as PyTorch rounds it:
    ``start + w (end - start)`` for ``|w| < 0.5``, else ``end + (w - 1) (end - start)``."""
    w = np.float32(weight) if start.dtype == "float32" else weight
    if abs(w) < 0.5:
        return _fma(start, end - start, float(w))
    return _fma(end, end - start, float(w - 1))


def adjusted_lr(lr: Any, adjust_lr_fn: str | None, shape: Any) -> Any:
    """The learning rate scaled for a ``rows x cols`` matrix: ``sqrt(max(1, rows / cols))``
    ("original", the default) or ``0.2 * sqrt(max(rows, cols))`` ("match_rms_adamw": an update
    with AdamW's RMS)."""
    rows, cols = shape[0], shape[1]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """Muon: for each 2-d parameter ``p`` with gradient ``g``,
    ``buf = momentum * buf + (1 - momentum) * g``; the update ``u`` is
    ``g + momentum * (buf - g)`` with Nesterov (the default), else ``buf``; ``O`` is ``u``
    orthogonalised by :func:`orthogonalize`; ``p *= 1 - lr * weight_decay`` (decoupled decay);
    ``p -= adjusted_lr(lr) * O``. Other parameters (biases, embeddings) belong to another
    optimizer, such as AdamW.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        eps: float = EPS,
        ns_steps: int = NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn not in _ADJUST_LR_FNS:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(
            params,
            dict(
                lr=lr,
                weight_decay=weight_decay,
                momentum=momentum,
                nesterov=nesterov,
                ns_coefficients=ns_coefficients,
                eps=eps,
                ns_steps=ns_steps,
                adjust_lr_fn=adjust_lr_fn,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        "Muon only supports 2D parameters whereas we found a parameter with "
                        f"size: {p.size()}"
                    )

    def _update_complex(self, p: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise RuntimeError("Muon does not support complex parameters")

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if g.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        mom = group["momentum"]
        lr = group_lr(group, p)  # (captured: a float64 0-d tensor on the worker, see _fma)
        worker = lr is not dict.get(group, "lr")
        if isinstance(lr, Tensor) and not worker:  # (the program's own tensor)
            lr = float(lr.item())
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = zeros_like(g)
        buf.copy_(_lerp(buf, g, 1.0 - mom))
        u = _lerp(g, buf, mom) if group["nesterov"] else buf
        o = orthogonalize(u, group["ns_coefficients"], group["ns_steps"], group["eps"])
        decay = 1.0 - lr * group["weight_decay"]
        p.mul_(decay.to(p.dtype) if worker else decay)  # (rounded where it meets p, as a number)
        p.copy_(_fma(p, o, -adjusted_lr(lr, group["adjust_lr_fn"], p.shape)))
