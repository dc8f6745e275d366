"""``repr`` of tensors in PyTorch's style: ``tensor([[ 0.1234, -1.2345]], requires_grad=True)``.

Floats print with 4 decimals in a common width taken from the nonzero finite values (``1.`` when
every value is whole, scientific when the magnitudes span too much), long tensors are summarized
with ``...``, and the suffixes name a non-default dtype, an empty tensor's size, and the autograd
state, wrapped past the line width: PyTorch's rules, so printed output matches. Pure functions of a NumPy array,
so they are tested without a cluster.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt._dtype import name_of

if TYPE_CHECKING:
    from gt.tensor import Tensor

LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3
PRECISION = 4
#: ``True``/``False`` forces scientific notation on or off; ``None`` lets the values decide.
SCI_MODE: bool | None = None


def _default_dtypes() -> tuple[str, ...]:
    """The dtypes a repr does not name: the default float (``set_default_dtype``), its complex
    partner (complex128 for float64, else complex64, as PyTorch's ``_default_complex_dtype``),
    int64 and bool."""
    f = S.DEFAULT_FLOAT
    return (f, "complex128" if f == "float64" else "complex64", "int64", "bool")


class _Formatter:
    """PyTorch's element formatter: one width for all elements, taken from the nonzero finite
    values (so ``nan`` and ``inf`` do not widen the others), in integer, fixed or scientific mode.
    """

    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not self.floating:
            for v in values.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        shown = values[np.isfinite(values) & (values != 0)]
        if shown.size == 0:
            return
        mag = np.abs(shown.astype(np.float64))
        lo, hi = float(mag.min()), float(mag.max())
        items = shown.tolist()
        self.int_mode = all(v == math.ceil(v) for v in items)
        self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if SCI_MODE is not None:
            self.sci_mode = SCI_MODE
        if self.sci_mode:
            width = max(len(f"{v:.{PRECISION}e}") for v in items)
        elif self.int_mode:
            width = max(len(f"{v:.0f}") + 1 for v in items)
        else:
            width = max(len(f"{v:.{PRECISION}f}") for v in items)
        self.max_width = max(self.max_width, width)

    def __call__(self, v: Any) -> str:
        if not self.floating:
            ret = str(v)
        elif self.sci_mode:
            ret = f"{v:{self.max_width}.{PRECISION}e}"
        elif self.int_mode:
            ret = f"{v:.0f}"
            if not (math.isinf(v) or math.isnan(v)):
                ret += "."
        else:
            ret = f"{v:.{PRECISION}f}"
        return (self.max_width - len(ret)) * " " + ret


class _ComplexFormatter:
    """PyTorch's complex elements: the real parts and the imaginary parts each formatted as above
    (one width each), joined as ``1.5000-2.0000j``."""

    def __init__(self, values: np.ndarray):
        self.re, self.im = _Formatter(values.real), _Formatter(values.imag)
        self.max_width = self.re.max_width + self.im.max_width + 1  # (and the j)

    def __call__(self, v: Any) -> str:
        real = self.re(v.real)
        imag = (self.im(v.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _formatter(values: np.ndarray) -> Any:
    return _ComplexFormatter(values) if values.dtype.kind == "c" else _Formatter(values)


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements that will be printed (edges only, when the tensor is summarized)."""
    if a.ndim == 0:
        return a.reshape(1)
    if a.shape[0] > 2 * EDGEITEMS:
        parts = [a[:EDGEITEMS], a[a.shape[0] - EDGEITEMS :]]  # (a[-0:] is all of it)
    else:
        parts = [a]
    return np.concatenate(
        [_summarized(p[i]).reshape(-1) for p in parts for i in range(len(p))]
        or [np.empty(0, a.dtype)]
    )


def _format_body(a: np.ndarray, fmt: _Formatter, indent: int, summarize: bool) -> str:
    if a.ndim == 0:
        return fmt(a.item())
    if a.ndim == 1:
        n = a.shape[0]
        if summarize and not EDGEITEMS:
            items = ["..."]
        elif summarize and n > 2 * EDGEITEMS:
            items = [fmt(v) for v in a[:EDGEITEMS].tolist()] + [" ..."]
            items += [fmt(v) for v in a[n - EDGEITEMS :].tolist()]
        else:
            items = [fmt(v) for v in a.tolist()]
        per_line = max(1, (LINEWIDTH - indent) // (fmt.max_width + 2))
        lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = [_format_body(a[i], fmt, indent + 1, summarize) for i in range(EDGEITEMS)]
        rows.append("...")
        rows += [_format_body(a[i], fmt, indent + 1, summarize) for i in range(n - EDGEITEMS, n)]
    else:
        rows = [_format_body(a[i], fmt, indent + 1, summarize) for i in range(n)]
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(rows) + "]"


def format_array(a: np.ndarray, indent: int = 7) -> str:
    """The bracketed body of a tensor's repr (what goes inside ``tensor(...)``)."""
    if a.dtype.kind == "V" and a.dtype.name.startswith(("bfloat", "float")):
        a = a.astype(np.float32)  # (ml_dtypes' bfloat16, kind "V": printed as float32, as PyTorch)
    if a.size == 0:
        return "[]"
    summarize = a.size > THRESHOLD
    shown = _summarized(a) if summarize else a.reshape(-1)
    return _format_body(a, _formatter(shown), indent, summarize)


def format_tensor(
    a: np.ndarray, dtype: str, extra: list[str] | None = None, prefix: str = "tensor("
) -> str:
    """The whole repr: ``tensor(<body>, <suffixes>)``."""
    body = format_array(a, indent=len(prefix))
    suffixes = []
    if a.size == 0:
        if a.shape != (0,):
            suffixes.append(f"size={tuple(a.shape)}")
        if dtype != S.DEFAULT_FLOAT:
            suffixes.append(f"dtype=gt.{name_of(dtype)}")
    else:
        if not EDGEITEMS:  # (nothing of it is shown: PyTorch names its size)
            suffixes.append(f"size={tuple(a.shape)}")
        if dtype not in _default_dtypes():
            suffixes.append(f"dtype=gt.{name_of(dtype)}")
    suffixes += extra or []
    return _add_suffixes(prefix + body, suffixes, len(prefix))


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """Append ``, suffix`` items, wrapping to a new line past the line width (as PyTorch does).

    A suffix is measured as PyTorch spells it (``dtype=torch.float64``, three columns wider than
    ``dtype=gt.float64``), so lines break where PyTorch's do and the two reprs differ only in the
    library's name."""
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        width = len(suffix.replace("dtype=gt.", "dtype=torch."))
        if last_line_len + width + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + width
        else:
            parts.append(", " + suffix)
            last_line_len += width + 2
    return "".join(parts) + ")"


def tensor_repr(t: Tensor) -> str:
    """``repr(t)``: fetches the data (a sync point)."""
    extra = []
    if t._node is not None:
        # (the node's class name, as PyTorch's: NotImplemented for torch::autograd::NotImplemented)
        extra.append(f"grad_fn=<{t._node.name().rpartition('::')[2]}>")
    elif t.requires_grad:
        extra.append("requires_grad=True")
    text = format_tensor(t._host(), t.dtype, extra)
    if type(t).__name__ == "Parameter":
        return "Parameter containing:\n" + text
    return text
