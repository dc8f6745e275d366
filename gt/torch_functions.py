"""The ``torch.<name>`` functions that are other modules' functions under a second name
(``torch.conv2d`` is ``F.conv2d``, ``torch.pinverse`` is ``linalg.pinv``, ``torch.vmap`` is
``torch.func.vmap`` ...), PyTorch's older linear-algebra spellings (``torch.svd`` returns ``V``,
``torch.qr`` takes ``some``), and a few small ones: ``logspace``, ``range``, ``frombuffer``,
``histogram``, ``gradient``, ``seed``, ``typename``, ``is_nonzero`` ... Imported by
:mod:`gt._api` only.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt import func as _func
from gt import linalg as _linalg
from gt import shapes as S
from gt.errors import OutOfMemory
from gt.factories import arange, from_numpy, full_like, linspace
from gt.factories import tensor as _tensor
from gt.grad_graph import label
from gt.linalg import toplevel as _toplevel
from gt.nn import functional as F
from gt.ops import views
from gt.ops.arith import where
from gt.ops.autocast import autocast_op, mark_methods
from gt.ops.random import manual_seed
from gt.ops.search import searchsorted
from gt.ops.shaping import cat
from gt.range_ends import as_complex, complex_dtype
from gt.range_values import complex_logspace_values
from gt.runtime.ops import return_types
from gt.spectral import (
    bartlett_window,
    blackman_window,
    hamming_window,
    hann_window,
    istft,
    kaiser_window,
    stft,
)
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input ...)

_builtin_range = range  # (torch.range, below, takes the name)

conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (F.conv_transpose1d, F.conv_transpose2d,
                                                        F.conv_transpose3d)  # fmt: skip
dropout, bilinear, pdist = F.dropout, F.bilinear, F.pdist
celu, selu, threshold, prelu, rrelu = F.celu, F.selu, F.threshold, F.prelu, F.rrelu
hardshrink = F.hardshrink
layer_norm, group_norm, rms_norm = F.layer_norm, F.group_norm, F.rms_norm
adaptive_avg_pool1d, pixel_shuffle, pixel_unshuffle = (F.adaptive_avg_pool1d, F.pixel_shuffle,
                                                       F.pixel_unshuffle)  # fmt: skip
channel_shuffle, pairwise_distance = F.channel_shuffle, F.pairwise_distance
alpha_dropout, feature_alpha_dropout = F.alpha_dropout, F.feature_alpha_dropout
vmap = _func.vmap
pinverse = _linalg.pinv
#: ``torch.OutOfMemoryError``: GT's out-of-memory error (a worker's pool refused an allocation).
OutOfMemoryError = OutOfMemory

SVDResult = return_types.svd  # (the types of gt.return_types, as PyTorch's)
QRResult = return_types.qr
HistogramResult = return_types.histogram


def embedding(weight: Tensor, input: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:  # fmt: skip
    """``torch.embedding(weight, indices)``: :func:`gt.nn.functional.embedding` with its arguments
    in the other order (and ``padding_idx=-1`` for none)."""
    return F.embedding(input, weight, padding_idx=None if padding_idx < 0 else padding_idx)


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> SVDResult:
    """The older ``torch.svd``: ``U, S, V`` with ``input = U diag(S) V^T`` (``V``, not ``Vh``)."""
    if not compute_uv:  # (square zero U and V, whatever ``some`` says, as PyTorch's)
        s = _linalg.svdvals(input)
        m, n, batch = input.shape[-2], input.shape[-1], tuple(input.shape[:-2])
        return SVDResult(input.new_zeros((*batch, m, m)), s, input.new_zeros((*batch, n, n)))
    u, s, vh = _linalg.svd(input, full_matrices=not some)
    # (V: Vh's conjugate transpose, for complex input too; contiguous, as PyTorch's)
    return SVDResult(u, s, views.as_new(vh.mH))


def qr(input: Tensor, some: bool = True) -> QRResult:
    """The older ``torch.qr`` (``some=False``: the complete factorisation)."""
    q, r = _linalg.qr(input, mode="reduced" if some else "complete")
    return QRResult(q, r)


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype: Any = None,
             requires_grad: bool = False, device: Any = None) -> Tensor:  # fmt: skip
    """``base ** linspace(start, end, steps)`` (complex ends or ``dtype``: as PyTorch's complex
    kernel computes them, see :func:`gt.range_values.complex_logspace_values`)."""
    cdt = complex_dtype(start, end, dtype, "logspace")
    if cdt is not None:
        if steps < 0:
            raise ValueError(f"logspace: number of steps must be non-negative, got {steps}")
        values = complex_logspace_values(as_complex(start), as_complex(end), int(steps),
                                          float(base), cdt)  # fmt: skip
        return from_numpy(values, requires_grad)
    exps = linspace(start, end, steps, dtype="float64")
    out = (exps * math.log(base)).exp().to(S.canonical_dtype(dtype))
    return out.requires_grad_(True) if requires_grad else out


def range(start: float = 0, end: float | None = None, step: float = 1, *,  # noqa: A001
          dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:  # fmt: skip
    """The deprecated ``torch.range``: like ``arange`` but including ``end`` (float32 default)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)  # fmt: skip
    if end is None:
        start, end = 0, start
    n = int(math.floor((end - start) / step)) + 1
    out = arange(n, dtype="float64") * step + start
    return out.to(S.canonical_dtype(dtype)).requires_grad_(requires_grad)


def frombuffer(buffer: Any, *, dtype: Any, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:  # fmt: skip
    """A tensor of the bytes of ``buffer`` read as ``dtype`` (copied: GT tensors live on workers)."""
    arr = np.frombuffer(buffer, dtype=np.dtype(S.canonical_dtype(dtype)), count=count,
                        offset=offset)  # fmt: skip
    return _tensor(arr.copy(), requires_grad=requires_grad)


def fill(input: Tensor, value: Any) -> Tensor:
    """A tensor like ``input`` filled with ``value``."""
    return full_like(input, float(value) if input.is_floating_point() else value)


def histogram(input: Tensor, bins: Any = 100, *, range: Any = None,  # noqa: A002
              weight: Tensor | None = None, density: bool = False) -> HistogramResult:  # fmt: skip
    """Counts (or weights) of ``input`` in ``bins`` equal bins over ``range`` (the data's, one
    sync point, when not given) or at the given bin edges, and the edges (``torch.histogram``)."""
    x = input.reshape(-1)
    if isinstance(bins, Tensor):
        edges = bins.to(input.dtype)
    else:
        if range is not None:
            lo, hi = range
        else:  # (no data: PyTorch's range is [0, 1])
            lo, hi = (float(x.min().item()), float(x.max().item())) if x.numel() else (0.0, 1.0)
        edges = bin_edges(lo, hi, int(bins), input.dtype)
    n = edges.shape[0] - 1
    idx, inside = bin_index(x, edges)
    w = inside.to(input.dtype) if weight is None else weight.reshape(-1) * inside.to(input.dtype)
    hist = x.new_zeros((n,)).scatter_add(0, idx, w)
    if density:
        hist = hist / (hist.sum() * edges.diff())
    return HistogramResult(hist, edges)


def bin_edges(lo: float, hi: float, bins: int, dtype: Any) -> Tensor:
    """``bins + 1`` equal bin edges over ``[lo, hi]`` (widened by 1/2 each way if empty, as
    PyTorch's)."""
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return linspace(lo, hi, bins + 1, dtype=dtype)


def bin_index(x: Tensor, edges: Tensor) -> tuple[Tensor, Tensor]:
    """Each value's bin (clamped into range) and whether it lies within the edges: bin ``i`` is
    ``[edges[i], edges[i + 1])``, the last one also takes its right edge."""
    n = edges.shape[0] - 1
    idx = where(x == edges[n], n - 1, searchsorted(edges, x, right=True) - 1).clamp(0, n - 1)
    return idx, (x >= edges[0]) & (x <= edges[n])


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None,
             edge_order: int = 1) -> tuple[Tensor, ...]:  # fmt: skip
    """Second-order central differences along ``dim`` (every dim by default), one-sided at the
    edges to first or second order (``edge_order``); ``spacing`` is a number, or per dim a
    number or a 1-d tensor of coordinates (non-uniform differences, as NumPy's and PyTorch's)."""
    if edge_order not in (1, 2):
        raise ValueError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = (
        list(_builtin_range(input.ndim))
        if dim is None
        else ([dim] if isinstance(dim, int) else list(dim))
    )
    steps = spacing if isinstance(spacing, Sequence) else [spacing] * len(dims)
    if len(steps) != len(dims):
        raise RuntimeError("torch.gradient expected spacing to be unspecified, a scalar or a list "
                           f"of length {len(dims)} but got a list of length {len(steps)}")  # fmt: skip
    out = []
    for d, h in zip(dims, steps):
        d = S.normalize_axis(d, input.ndim, "gradient")
        n = input.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")  # fmt: skip
        if isinstance(h, Tensor) and h.ndim == 1:
            out.append(_gradient_at(input, d, h.to(input.dtype), edge_order))
        else:
            step = float(h.item()) if isinstance(h, Tensor) else float(h)
            out.append(_gradient_uniform(input, d, step, edge_order))
    return tuple(out)


def _gradient_uniform(f: Tensor, d: int, h: float, edge_order: int) -> Tensor:
    n = f.shape[d]

    def at(i: int, length: int = 1) -> Tensor:
        return f.narrow(d, i, length)

    if edge_order == 1:
        first, last = (at(1) - at(0)) / h, (at(n - 1) - at(n - 2)) / h
    else:
        first = (at(0) * -3.0 + at(1) * 4.0 - at(2)) / (2 * h)
        last = (at(n - 1) * 3.0 - at(n - 2) * 4.0 + at(n - 3)) / (2 * h)
    parts = [first]
    if n > 2:
        parts.append((at(2, n - 2) - at(0, n - 2)) / (2 * h))
    parts.append(last)
    return cat(parts, d)


def _gradient_at(f: Tensor, d: int, x: Tensor, edge_order: int) -> Tensor:
    """Differences for samples at coordinates ``x`` along ``d`` (NumPy's formulas)."""
    n = f.shape[d]
    hd = x[1:] - x[:-1]

    def along(c: Tensor) -> Tensor:  # a coefficient per position, broadcast along d
        shape = [1] * f.ndim
        shape[d] = c.shape[0]
        return c.reshape(shape)

    def at(i: int, length: int = 1) -> Tensor:
        return f.narrow(d, i, length)

    if edge_order == 1:
        first = (at(1) - at(0)) / along(hd[:1])
        last = (at(n - 1) - at(n - 2)) / along(hd[-1:])
    else:
        a, b = hd[0], hd[1]
        first = (at(0) * along((-(2 * a + b) / (a * (a + b))).reshape(1))
                 + at(1) * along(((a + b) / (a * b)).reshape(1))
                 + at(2) * along((-a / (b * (a + b))).reshape(1)))  # fmt: skip
        a, b = hd[-2], hd[-1]
        last = (at(n - 3) * along((b / (a * (a + b))).reshape(1))
                + at(n - 2) * along((-(a + b) / (a * b)).reshape(1))
                + at(n - 1) * along(((2 * b + a) / (b * (a + b))).reshape(1)))  # fmt: skip
    parts = [first]
    if n > 2:
        left, right = hd[:-1], hd[1:]
        total = left + right
        parts.append(at(0, n - 2) * along(-right / (left * total))
                     + at(1, n - 2) * along((right - left) / (left * right))
                     + at(2, n - 2) * along(left / (right * total)))  # fmt: skip
    parts.append(last)
    return cat(parts, d)


def real(input: Tensor) -> Tensor:
    """The real part (a real tensor is its own)."""
    return input.real


def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor."""
    return input.imag


def conj(input: Tensor) -> Tensor:
    """The complex conjugate (a real tensor is its own)."""
    return input.conj()


def conj_physical(input: Tensor) -> Tensor:
    """The complex conjugate, a new tensor."""
    return input.conj_physical()


def angle(input: Tensor) -> Tensor:
    """The argument of each value (0 or pi for real ones)."""
    return input.angle()


def isreal(input: Tensor) -> Tensor:
    """Where the imaginary part is 0 (everywhere, for a real tensor)."""
    return input.isreal()


def is_complex(input: Tensor) -> bool:
    """Whether ``input`` has a complex dtype."""
    return input.is_complex()


def view_as_real(input: Tensor) -> Tensor:
    """A complex tensor as real (real, imaginary) pairs in a new last dimension of size 2 (a view:
    a change of either is seen by the other, see :mod:`gt.ops.views`)."""
    if input.dtype not in S.COMPLEX_DTYPES:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    out = input._apply("view_as_real", [input])
    views.link(input, out, "as_real", None)
    return out


def view_as_complex(input: Tensor) -> Tensor:
    """Real pairs in a last dimension of size 2 as a complex tensor (a view)."""
    if input.dtype not in ("float32", "float64"):
        raise RuntimeError(
            "view_as_complex is only supported for float and double tensors, but got a tensor of "
            f"scalar type: {input.dtype}"
        )
    if not input.shape or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    out = input._apply("view_as_complex", [input])
    views.link(input, out, "as_complex", None)
    return out


def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """The complex tensor ``real + i imag`` (both float32 or both float64; they broadcast)."""
    if real.dtype != imag.dtype or real.dtype not in ("float32", "float64"):
        raise RuntimeError(
            "Expected both inputs to be Float or Double tensors but got "
            f"{real.dtype} and {imag.dtype}"
        )
    return real._apply("complex", [real, imag])


@autocast_op("polar")
def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002 - PyTorch's names
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``."""
    return label(complex(abs * angle.cos(), abs * angle.sin()), "PolarBackward0")


# ----------------------------------------------------------------------------- torch.<name> layers
# (the spellings of torch's namespace, whose argument order differs from nn.functional's)
def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:  # fmt: skip
    """``torch.batch_norm``: :func:`gt.nn.functional.batch_norm` with torch's argument order."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                  running_mean: Tensor | None, running_var: Tensor | None, use_input_stats: bool,
                  momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:  # fmt: skip
    """``torch.instance_norm``: :func:`gt.nn.functional.instance_norm`, torch's argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)  # fmt: skip


def _pool(fn: Any) -> Any:
    def pool(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Tensor:  # fmt: skip
        return fn(input, kernel_size, stride or None, padding, dilation, ceil_mode)

    pool.__name__ = fn.__name__
    pool.__doc__ = f"``torch.{fn.__name__}`` (an empty ``stride`` means the kernel size)."
    return pool


max_pool1d, max_pool2d, max_pool3d = _pool(F.max_pool1d), _pool(F.max_pool2d), _pool(F.max_pool3d)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:  # fmt: skip
    """``torch.avg_pool1d`` (an empty ``stride`` means the kernel size)."""
    return F.avg_pool1d(input, kernel_size, stride or None, padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple[Tensor, Tensor]:
    """``torch.adaptive_max_pool1d``: the pooled values and their indices."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``torch.max_pool1d_with_indices``."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode,
                        return_indices=True)  # fmt: skip


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return F.celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    return F.selu(input, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return F.threshold(input, threshold, value, inplace=True)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
           generator: Any = None) -> Tensor:  # fmt: skip
    return F.rrelu(input, lower, upper, training, inplace=True)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return F.dropout(input, p, train, inplace=True)


def unravel_index(indices: Any, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates in ``shape`` of each flat index (a tuple of int64 tensors, one per
    dimension; negative indices count from the end)."""
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    idx = indices if isinstance(indices, Tensor) else _tensor(indices)
    if idx.dtype not in S.INT_DTYPES:
        raise TypeError(f"expected 'indices' to be an integer tensor, but got {idx.dtype}")
    total = math.prod(shape)
    idx = idx.to("int64")
    idx = where(idx < 0, idx + total, idx)
    out = []
    for size in reversed(shape):
        out.append(idx.remainder(size))
        idx = idx.div(size, rounding_mode="floor")
    return tuple(reversed(out))


def seed() -> int:
    """Seed GT's random stream from the system's entropy; returns the seed."""
    s = random.SystemRandom().getrandbits(40)
    manual_seed(s)
    return s


def typename(obj: Any) -> str:
    """PyTorch's type name of a tensor (``torch.FloatTensor`` ...), else the object's type."""
    if isinstance(obj, Tensor):
        names = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                 "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
                 "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
                 "bool": "BoolTensor", "complex64": "ComplexFloatTensor",
                 "complex128": "ComplexDoubleTensor"}  # fmt: skip
        return "torch." + names[obj.dtype]
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


# ``x.svd()``, ``x.matrix_exp()`` ...: PyTorch's tensors have these functions as methods. They are
# built above the tensor class (on gt.linalg, gt.nn), so this module brings them to it, as
# registry entries and gt.spectral bring theirs.
_TENSOR_METHODS = {
    "svd": svd, "qr": qr, "pinverse": pinverse, "histogram": histogram,
    "hardshrink": hardshrink, "prelu": F.prelu, "matrix_exp": _linalg.matrix_exp,
    "cholesky_solve": _toplevel.cholesky_solve, "cholesky_inverse": _toplevel.cholesky_inverse,
    "lu": _toplevel.lu, "lu_solve": _toplevel.lu_solve, "orgqr": _toplevel.orgqr,
    "geqrf": _toplevel.geqrf, "ormqr": _toplevel.ormqr,
}  # fmt: skip
for _name, _fn in _TENSOR_METHODS.items():
    if _name in Tensor.__dict__:
        raise TypeError(f"gt.torch_functions would replace Tensor.{_name}")
    setattr(Tensor, _name, _fn)
mark_methods(Tensor)  # (autocast: svd, qr, pinverse ...)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:  # noqa: A002
    """fairseq's time-batch-channel convolution: ``input`` ``[T, B, C_in]``, ``weight``
    ``[K, C_in, C_out]``, ``bias`` ``[C_out]``, ``pad`` steps of zeros at both ends of time."""
    from gt.nn import functional as F  # noqa: PLC0415 - the layers import the tensor layers too

    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:  # noqa: A002
    """``nonzero`` cut or padded (with ``fill_value``) to ``size`` rows: ``[size, ndim]``.
    (A sync point in GT, as ``nonzero`` is.)"""
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    found = input.nonzero()  # [n, ndim]
    n = found.shape[0]
    if n >= size:
        return found[:size]
    pad = found.new_full((size - n, found.shape[1]), fill_value)
    return cat([found, pad], 0) if n else pad


__all__ = ["OutOfMemoryError", "conv_tbc", "nonzero_static", "angle", "bilinear", "complex", "conj", "conj_physical", "imag",
           "is_complex", "isreal", "istft", "polar", "real", "stft", "view_as_complex",
           "view_as_real", "bartlett_window", "blackman_window", "hamming_window", "hann_window",
           "kaiser_window", "layer_norm", "group_norm", "rms_norm", "batch_norm",
           "instance_norm", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
           "adaptive_avg_pool1d", "adaptive_max_pool1d", "max_pool1d_with_indices",
           "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "pairwise_distance",
           "alpha_dropout", "feature_alpha_dropout", "celu_", "selu_", "threshold_", "rrelu_",
           "dropout_", "unravel_index", "celu", "conv1d", "conv2d", "conv3d",
           "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dropout", "embedding",
           "fill", "frombuffer", "gradient", "hardshrink", "histogram", "logspace", "pdist",
           "pinverse", "prelu", "qr", "range", "rrelu", "seed", "selu", "svd", "threshold",
           "typename", "vmap"]  # fmt: skip
