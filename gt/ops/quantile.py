"""``quantile`` and ``nanquantile``, composed on the client from sort, gather and arithmetic.

The same steps as PyTorch's own (``aten/src/ATen/native/Sorting.cpp``): sort along the reduced
dimension (moved last), turn each ``q`` into a fractional rank ``q * (n - 1)``, adjust it for the
interpolation mode, gather the values at the ranks just below and above and interpolate. Since
every step is an ordinary op, the result is differentiable: gradients reach the (one or two)
elements each quantile was read from, as in PyTorch. Nothing here waits for the workers, except
that a ``q`` tensor's values are fetched once to check they lie in ``[0, 1]`` (as PyTorch does on
the CPU).

NaN: ``quantile`` gives NaN for a slice holding one (NaN sorts last; the rank is moved onto it);
``nanquantile`` ranks among the non-NaN values only (NaN if there are none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.ops.arith import where
from gt.ops.base import TensorBase

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: PyTorch's interpolation modes, for a quantile that falls between two sorted values.
MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _check_q(op: str, x: Tensor, q: Any) -> tuple[Any, bool]:
    """``(q as a Python float or a 1-d tensor, whether q was a scalar)``, checked as PyTorch does."""
    if isinstance(q, TensorBase):
        if q.ndim > 1:
            raise ValueError(f"{op}: q must be a scalar or 1D tensor, got shape {list(q.shape)}")
        if q.dtype != x.dtype:
            raise TypeError(
                f"{op}: q tensor must be same dtype as the input tensor (got {q.dtype} and {x.dtype})"
            )
        found = q._host()  # (a sync point, like PyTorch's own check on the CPU)
        if not ((found >= 0) & (found <= 1)).all():
            raise ValueError(f"{op}: q values must be in the range [0, 1]")
        return (q if q.ndim == 1 else q.reshape(1)), q.ndim == 0
    if isinstance(q, bool) or not isinstance(q, (int, float, np.floating, np.integer)):
        raise TypeError(f"{op}: q must be a float or a tensor, got {type(q).__name__}")
    if not 0 <= q <= 1:
        raise ValueError(f"{op}: q must be in the range [0, 1] but got {q}")
    return float(q), True


def _sorted_rows(op: str, x: Tensor, dim: Any, keepdim: bool) -> Tensor:
    """``x`` sorted along ``dim`` (all elements if None), that dimension moved last and the
    others laid out as the result (a size-1 dimension in its place with ``keepdim``)."""
    if dim is None or x.ndim == 0:
        if dim is not None:
            S.normalize_axis(dim, 1, op)  # a 0-d tensor has dimension 0 (and -1), as in PyTorch
        lead = (1,) * x.ndim if keepdim else ()
        return x.reshape(-1).sort().values.reshape((*lead, x.numel()))
    d = S.normalize_axis(dim, x.ndim, op)
    n = x.shape[d]
    reduced = x.shape[:d] + ((1,) if keepdim else ()) + x.shape[d + 1 :]
    return x.unsqueeze(-1).transpose(d, -1).sort(-1).values.reshape((*reduced, n))


def quantile(
    x: Tensor,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
    ignore_nan: bool = False,
) -> Tensor:
    """The ``q``-th quantiles of ``x`` over ``dim`` (PyTorch's ``quantile``/``nanquantile``).

    Args:
        x: a float32 or float64 tensor with at least one element.
        q: a float in ``[0, 1]``, or a 0-d or 1-d tensor of them of ``x``'s dtype; a 1-d ``q``
            puts its dimension first in the result.
        dim: the dimension to reduce; ``None``: all elements.
        keepdim: keep the reduced dimension(s) with size 1.
        interpolation: ``linear``, ``lower``, ``higher``, ``midpoint`` or ``nearest`` (half to
            even), for a quantile between two values.
        ignore_nan: ``nanquantile``: rank among the non-NaN values only.

    Raises:
        TypeError: ``x`` is not float32/float64, or ``q`` has another dtype.
        ValueError: ``q`` outside ``[0, 1]`` or not 0/1-d, an unknown mode, an empty ``x``.
    """
    op = "nanquantile" if ignore_nan else "quantile"
    if x.dtype not in ("float32", "float64"):
        raise TypeError(f"{op}: input tensor must be either float or double dtype, got {x.dtype}")
    if interpolation not in MODES:
        raise ValueError(
            f"{op}: interpolation must be one of linear, lower, higher, midpoint or nearest, "
            f"got {interpolation!r}"
        )
    if x.numel() == 0:
        raise ValueError(f"{op}: input tensor must be non-empty")
    qv, scalar_q = _check_q(op, x, q)
    srt = _sorted_rows(op, x, dim, keepdim)
    last = srt.shape[-1] - 1
    nan = srt.isnan()
    if ignore_nan:
        # Rank among the non-NaN values (which sort first); all NaN: rank 0, which reads a NaN.
        ranks = (~nan).sum(-1, keepdim=True).to(x.dtype).sub(1.0) * qv
        ranks = ranks.masked_fill(ranks < 0, 0.0)
    else:
        if isinstance(qv, float):  # q * last in x's precision, as PyTorch multiplies it
            r = float(np.asarray(qv, dtype=x.dtype) * np.asarray(last, dtype=x.dtype))
            qv = srt.new_full((1,), r)
        else:
            qv = qv * float(last)
        ranks = where(nan.any(-1, keepdim=True), float(last), qv)  # a NaN makes the result NaN
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to("int64")
    out = srt.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weight = 0.5 if interpolation == "midpoint" else ranks - below.to(x.dtype)
        out = out.lerp(srt.gather(-1, ranks.ceil().to("int64")), weight)
    if scalar_q:
        return out.squeeze(-1)
    return out.permute(out.ndim - 1, *range(out.ndim - 1))  # q's dimension first
