"""``repr`` of tensors in PyTorch's style: ``tensor([[ 0.1234, -1.2345]], requires_grad=True)``.

Floats print with 4 decimals in a common width (``1.`` when every value is whole, scientific when
the magnitudes span too much), long tensors are summarized with ``...``, and the suffixes name a
non-default dtype, an empty tensor's size, and the autograd state. Pure functions of a NumPy array,
so they are tested without a cluster.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from gt.tensor import Tensor

LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3
_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _float_formatter(values: np.ndarray) -> Any:
    finite = values[np.isfinite(values)].astype(np.float64)
    nonzero = np.abs(finite[finite != 0])
    if nonzero.size == 0:
        return lambda v: _special(v) or "0."
    lo, hi = float(nonzero.min()), float(nonzero.max())
    if np.all(np.ceil(finite) == finite):
        if hi > 1e8:
            return lambda v: _special(v) or f"{v:.4e}"
        return lambda v: _special(v) or f"{v:.0f}."
    if hi / lo > 1000.0 or hi > 1e8 or lo < 1e-4:
        return lambda v: _special(v) or f"{v:.4e}"
    return lambda v: _special(v) or f"{v:.4f}"


def _special(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return ""


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements that will be printed (edges only, when the tensor is summarized)."""
    if a.ndim == 0:
        return a.reshape(1)
    if a.shape[0] > 2 * EDGEITEMS:
        parts = [a[:EDGEITEMS], a[-EDGEITEMS:]]
    else:
        parts = [a]
    return np.concatenate(
        [_summarized(p[i]).reshape(-1) for p in parts for i in range(len(p))]
        or [np.empty(0, a.dtype)]
    )


def _format_body(a: np.ndarray, fmt: Any, width: int, indent: int, summarize: bool) -> str:
    if a.ndim == 0:
        return fmt(a.item()).rjust(width)
    if a.ndim == 1:
        n = a.shape[0]
        if summarize and n > 2 * EDGEITEMS:
            items = [fmt(v).rjust(width) for v in a[:EDGEITEMS].tolist()] + [" ..."]
            items += [fmt(v).rjust(width) for v in a[-EDGEITEMS:].tolist()]
        else:
            items = [fmt(v).rjust(width) for v in a.tolist()]
        per_line = max(1, (LINEWIDTH - indent) // (width + 2))
        lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = [_format_body(a[i], fmt, width, indent + 1, summarize) for i in range(EDGEITEMS)]
        rows.append("...")
        rows += [
            _format_body(a[i], fmt, width, indent + 1, summarize) for i in range(n - EDGEITEMS, n)
        ]
    else:
        rows = [_format_body(a[i], fmt, width, indent + 1, summarize) for i in range(n)]
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(rows) + "]"


def format_array(a: np.ndarray, indent: int = 7) -> str:
    """The bracketed body of a tensor's repr (what goes inside ``tensor(...)``)."""
    if a.size == 0:
        return "[]"
    summarize = a.size > THRESHOLD
    shown = _summarized(a) if summarize else a.reshape(-1)
    if a.dtype == np.bool_:
        fmt: Any = lambda v: "True" if v else "False"  # noqa: E731
    elif a.dtype.kind in "iu":
        fmt = lambda v: str(int(v))  # noqa: E731
    else:
        fmt = _float_formatter(shown)
    width = max(len(fmt(v)) for v in shown.tolist())
    return _format_body(a, fmt, width, indent, summarize)


def format_tensor(
    a: np.ndarray, dtype: str, extra: list[str] | None = None, prefix: str = "tensor("
) -> str:
    """The whole repr: ``tensor(<body>, <suffixes>)``."""
    body = format_array(a, indent=len(prefix))
    suffixes = []
    if a.size == 0:
        if a.shape != (0,):
            suffixes.append(f"size={tuple(a.shape)}")
        if dtype != "float32":
            suffixes.append(f"dtype=gt.{dtype}")
    elif dtype not in _DEFAULT_DTYPES:
        suffixes.append(f"dtype=gt.{dtype}")
    suffixes += extra or []
    tail = "".join(", " + s for s in suffixes)
    return f"{prefix}{body}{tail})"


def tensor_repr(t: Tensor) -> str:
    """``repr(t)``: fetches the data (a sync point)."""
    extra = []
    if t._node is not None:
        extra.append(f"grad_fn=<{t._node.name()}>")
    elif t.requires_grad:
        extra.append("requires_grad=True")
    text = format_tensor(t.numpy(), t.dtype, extra)
    if type(t).__name__ == "Parameter":
        return "Parameter containing:\n" + text
    return text
