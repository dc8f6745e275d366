"""Pooling in 1, 2 and 3-d: max, average and adaptive (functional, PyTorch's names and arguments).

Max pooling is the registry's own kernels (:mod:`gt.runtime.ops.pooling`): the maximum of each
window, PyTorch's pick (the first maximum in the window's row-major order, the last NaN in a
window holding one) and the gradient sent there, with ``return_indices`` each pick's flat
position in its input plane (what :func:`max_unpool2d` takes). Average pooling reduces the window
columns of ``im2col`` (the registry's sliding-window primitive, any of 1-3 spatial dimensions), so
one reduction covers every output position. Adaptive pooling is separable, one spatial dimension
at a time (the mean or max over a box is the mean or max over each of its sides in turn): each
dimension is one reshape, or for uneven windows one gather, then one reduction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.nn.convolution import _batched, _geometry, _pair, pad
from gt.ops.autocast import autocast_op
from gt.runtime.ops.conv import out_size
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _pool_input(input: Tensor, dims: int, op: str) -> tuple[Tensor, bool]:
    """``input`` with a batch dimension, or PyTorch's error for a wrong rank."""
    if input.ndim not in (dims + 1, dims + 2):
        if dims == 1:
            raise ShapeError(
                f"{op}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                f"input, but got:{list(input.shape)}"
            )
        raise ShapeError(
            f"non-empty {dims + 1}D or {dims + 2}D (batch mode) tensor expected for input"
        )
    return _batched(input, dims, op)


def _stride(stride: Any, kernel: tuple, dims: int) -> tuple[int, ...]:
    return kernel if stride is None or stride == [] or stride == () else _pair(stride, dims)


def _ceil_extra(sizes: Any, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                ceil_mode: bool) -> list[int]:  # fmt: skip
    """Per spatial dimension, how far past the right padding the last ``ceil_mode`` window runs
    (PyTorch's rule: a window must start inside the left-padded input), after checking the
    padding as PyTorch does."""
    for k, p, d in zip(kernel, padding, dilation):
        if p * 2 > d * (k - 1) + 1:  # PyTorch's rule and message
            raise ShapeError(
                "pad should be at most half of effective kernel size, but got "
                f"pad={p}, kernel_size={k} and dilation={d}"
            )
    extra = [0] * len(sizes)
    if ceil_mode:
        for i, (size, k, s, p, d) in enumerate(zip(sizes, kernel, stride, padding, dilation)):
            span = size + 2 * p - d * (k - 1) - 1
            outs = -(-span // s) + 1
            if (outs - 1) * s >= size + p:
                outs -= 1
            extra[i] = max(0, (outs - 1) * s + d * (k - 1) + 1 - (size + 2 * p))
    return extra


def _output_sizes(sizes: Any, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                  extra: list) -> list[int]:  # fmt: skip
    """The pooling's output sizes, or PyTorch-style error when the kernel does not fit."""
    outs = [out_size(n + e, k, d, p, s)
            for n, k, d, p, s, e in zip(sizes, kernel, dilation, padding, stride, extra)]  # fmt: skip
    if min(outs) <= 0:
        raise ShapeError(
            f"pooling: a kernel of {list(kernel)} (padding {list(padding)}, dilation "
            f"{list(dilation)}) does not fit an input of {list(sizes)}"
        )
    return outs


def _pool_windows(x: Tensor, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                  ceil_mode: bool, pad_value: float) -> tuple[Tensor, list[int]]:  # fmt: skip
    """``[N, C, prod(kernel), L]`` windows of ``x`` and the output's spatial sizes."""
    n, c, *sizes = x.shape
    extra = _ceil_extra(sizes, kernel, stride, padding, dilation, ceil_mode)
    if any(extra):
        x = pad(x, [v for e in reversed(extra) for v in (0, e)], value=pad_value)
    outs = _output_sizes(sizes, kernel, stride, padding, dilation, extra)
    geo = _geometry(kernel, dilation, padding, stride, len(sizes))
    geo["pad_value"] = pad_value
    cols = x._apply("im2col", [x], geo)
    return cols.reshape(n, c, math.prod(kernel), math.prod(outs)), outs


def _pool_node(out: Tensor, name: str, dims: int) -> Tensor:
    """A pooling's result named as PyTorch's node: ``name``, or ``SqueezeBackward1`` for 1-d
    pooling (PyTorch's is the 2-d one of the input unsqueezed)."""
    return label(out, "SqueezeBackward1" if dims == 1 else name)


def _max_pool(input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
              ceil_mode: bool, return_indices: bool, dims: int) -> Any:  # fmt: skip
    op = f"max_pool{dims}d"
    x, squeeze = _pool_input(input, dims, op)
    k = _pair(kernel_size, dims)
    s, p, d = _stride(stride, k, dims), _pair(padding, dims), _pair(dilation, dims)
    dtype = str(x.dtype).split(".")[-1]
    if dtype == "bool" or x.is_complex():  # PyTorch's refusal
        name = "max_pool1d_impl" if dims == 1 else op
        raise NotImplementedError(f"\"{name}\" not implemented for '{S.SCALAR_NAMES[dtype]}'")
    sizes = x.shape[2:]
    extra = _ceil_extra(sizes, k, s, p, d, ceil_mode)
    _output_sizes(sizes, k, s, p, d, extra)
    # the registry's max-pooling kernels (gt.runtime.ops.pooling): PyTorch's pick, first maximum
    # or last NaN, and its gradient sent there
    attrs = {**_geometry(k, d, p, s, dims), "extra": extra}
    out = x._apply("max_pool", [x], attrs)
    name = f"MaxPool{dims}DWithIndicesBackward0"
    if not return_indices:
        return _pool_node(out.squeeze(0) if squeeze else out, name, dims)
    where = x._apply("max_pool_indices", [x], attrs)
    if squeeze:
        out, where = out.squeeze(0), where.squeeze(0)
    return _pool_node(out, name, dims), where


def _avg_pool(input: Tensor, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
              count_include_pad: bool, divisor_override: int | None, dims: int) -> Tensor:  # fmt: skip
    x, squeeze = _pool_input(input, dims, f"avg_pool{dims}d")
    k, p = _pair(kernel_size, dims), _pair(padding, dims)
    s, one = _stride(stride, k, dims), (1,) * dims
    cols, outs = _pool_windows(x, k, s, p, one, ceil_mode, 0.0)
    total = cols.sum(2)
    if divisor_override:
        div: Any = divisor_override
    elif count_include_pad and not ceil_mode:
        div = math.prod(k)
    else:  # a divisor per window (it depends on the shapes alone: counted here, uploaded)
        counts = _window_counts(x.shape[2:], k, s, p, outs, count_include_pad)
        wide = x.dtype in S.INT_DTYPES or not total.is_floating_point()
        div = x._upload(counts.astype("float64" if wide else total.dtype))
    if x.dtype in S.INT_DTYPES:  # PyTorch's integer pooling divides in integers (toward zero)
        out = (total.to("float64") / div).trunc().to(x.dtype)
    else:
        out = total * (1.0 / div) if isinstance(div, int) else total / div
    out = out.reshape(x.shape[0], x.shape[1], *outs)
    return _pool_node(out.squeeze(0) if squeeze else out, f"AvgPool{dims}DBackward0", dims)


def _window_counts(sizes: Any, kernel: tuple, stride: tuple, padding: tuple, outs: list,
                   count_include_pad: bool) -> np.ndarray:  # fmt: skip
    """The divisor of each window, flattened as ``[1, 1, L]``: the elements it covers, padding
    included or not, never the part a ceil-mode window runs past the right padding (PyTorch's
    rule: a window ends at ``size + padding``)."""
    per_dim = []
    for size, k, s, p, o in zip(sizes, kernel, stride, padding, outs):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        per_dim.append((end - start).astype(np.float64))
    counts = per_dim[0]
    for c in per_dim[1:]:
        counts = np.multiply.outer(counts, c)
    return np.ascontiguousarray(counts.reshape(1, 1, -1))


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:  # fmt: skip
    """1-d max pooling over ``[N, C, L]``."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:  # fmt: skip
    """Largest value of each window of ``[N, C, H, W]`` (the gradient goes to the first maximum)."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


@autocast_op("max_pool3d")
def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:  # fmt: skip
    """Largest value of each window of ``[N, C, D, H, W]`` (``stride`` defaults to the kernel;
    padding is ``-inf`` and at most half the dilated kernel, as PyTorch requires)."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3)


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:  # fmt: skip
    """:func:`max_pool1d` and the flat input position of each maximum."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, True, 1)


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:  # fmt: skip
    """:func:`max_pool2d` and the flat position (``h * W + w``) of each maximum in its plane."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, True, 2)


@autocast_op("max_pool3d")
def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:  # fmt: skip
    """:func:`max_pool3d` and the flat position of each maximum in its volume."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, True, 3)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:  # fmt: skip
    """1-d average pooling over ``[N, C, L]``."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:  # fmt: skip
    """Mean of each window of ``[N, C, H, W]`` (padding counted unless ``count_include_pad=False``)."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 2)  # fmt: skip


@autocast_op("avg_pool3d")
def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:  # fmt: skip
    """Mean of each window of ``[N, C, D, H, W]``: zero padding is counted in the divisor unless
    ``count_include_pad=False``; ``divisor_override`` replaces the divisor."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 3)  # fmt: skip


# ------------------------------------------------------------------ adaptive pooling
def _adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's windows: ``[floor(i*size/out), ceil((i+1)*size/out))``."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _windows(x: Tensor, axis: int, out: int) -> tuple[Tensor, Any]:
    """``x`` with dim ``axis`` cut into ``out`` windows (a new dim after it), and the weights of
    each window's own elements when the windows are uneven (``None`` when they are equal)."""
    size = x.shape[axis]
    if size % out == 0:  # equal, disjoint windows: a reshape
        width = size // out
        return x.reshape(*x.shape[:axis], out, width, *x.shape[axis + 1 :]), None
    # uneven, overlapping windows: one gather, short windows repeat their last element
    bounds = _adaptive_bounds(size, out)
    width = max(e - b for b, e in bounds)
    idx = [min(b + j, e - 1) for b, e in bounds for j in range(width)]
    lead = (slice(None),) * axis
    windows = x[lead + (idx,)].reshape(*x.shape[:axis], out, width, *x.shape[axis + 1 :])
    # The mean weighs each window's own elements only (the repeats get weight 0).
    w = np.array([[1.0 / (e - b) if j < e - b else 0.0 for j in range(width)]
                  for b, e in bounds])  # fmt: skip
    return windows, w.reshape((out, width) + (1,) * (x.ndim - axis - 1))


def _adaptive_dim(x: Tensor, axis: int, out: int, reduce: str, where: Any = None) -> Any:
    """Adaptive pooling along one dimension: ``x.shape[axis]`` becomes ``out``. With ``where``
    (max only), also the input positions of the maxima, carried along: ``(values, where)``."""
    windows, weights = _windows(x, axis, out)
    if reduce == "max":
        best = windows.max(axis + 1)
        if where is None:
            return best.values
        # a repeated last element comes after the original, so the first maximum is a real one
        spots = _windows(where, axis, out)[0]
        picked = spots.gather(axis + 1, best.indices.unsqueeze(axis + 1)).squeeze(axis + 1)
        return best.values, picked
    if weights is None:
        return windows.mean(axis + 1)
    wt = x._upload(np.ascontiguousarray(weights, dtype=np.dtype(x.dtype)))
    return (windows * wt).sum(axis + 1)


def _adaptive_pool(input: Tensor, output_size: Any, reduce: str, dims: int,
                   return_indices: bool = False) -> Any:  # fmt: skip
    kind = "max" if reduce == "max" else "avg"
    op = f"adaptive_{kind}_pool{dims}d"
    if input.ndim not in (dims + 1, dims + 2):
        got = "got: " if reduce == "max" else "got "  # PyTorch's two spellings
        raise ShapeError(
            f"{op}(): Expected {dims + 1}D or {dims + 2}D tensor, but {got}{list(input.shape)}"
        )
    x, squeeze = _batched(input, dims, op)
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,)
    if len(sizes) == 1:
        sizes = sizes * dims
    if len(sizes) != dims:
        raise ShapeError(f"{op}: output_size must be {dims}")
    outs = [x.shape[2 + i] if o is None else int(o) for i, o in enumerate(sizes)]
    if min(outs) <= 0:
        raise ShapeError(f"{op}: output_size must be positive, got {list(sizes)}")
    out = x
    where = None
    if reduce == "mean" and all(o == 1 for o in outs) and min(x.shape[2:], default=1) > 0:
        # to one value per plane: PyTorch's is a mean over the plane, one reduction (a mean per
        # dimension in turn made two passes, and rounded twice)
        out = x.mean(tuple(range(2, 2 + dims)), keepdim=True)
        outs = list(out.shape[2:])
    if reduce == "max" and all(o == 1 for o in outs) and min(x.shape[2:], default=1) > 0:
        # to one value per plane: one reduction over the flattened plane, whose first maximum is
        # the first in row-major order and whose index is its flat position (a reduction per
        # dimension began with one over rows of W elements: 5x the time for a 14 x 14 plane)
        best = x.reshape(*x.shape[:2], -1).max(-1)
        out = best.values.reshape(*x.shape[:2], *outs)
        if return_indices:
            where = best.indices.reshape(*x.shape[:2], *outs)
    elif return_indices:  # each element's flat position in its input plane, pooled with it
        plane = tuple(x.shape[2:])
        where = x._arange(math.prod(plane)).reshape(1, 1, *plane).expand(*x.shape)
    # Last dimension first: for max, ties then resolve to the first maximum in row-major order.
    for i in reversed(range(dims)):
        if out.shape[2 + i] != outs[i]:
            if where is None:
                out = _adaptive_dim(out, 2 + i, outs[i], reduce)
            else:
                out, where = _adaptive_dim(out, 2 + i, outs[i], reduce, where)
    if where is not None and where._st is not None:
        # (no dimension was pooled: still the broadcast positions, stride 0; PyTorch's indices
        # are a tensor of their own, contiguous)
        where = where.clone()
    if squeeze:
        out, where = out.squeeze(0), None if where is None else where.squeeze(0)
    if out is not input:
        if dims >= 2 and reduce != "max" and all(o == 1 for o in outs):
            label(out, "MeanBackward1")  # (PyTorch's adaptive average pools to 1 are means)
        else:
            _pool_node(out, f"Adaptive{kind.capitalize()}Pool{dims}DBackward0", dims)
    return out if where is None else (out, where)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """1-d average pooling of ``[N, C, L]`` to ``output_size``."""
    return _adaptive_pool(input, output_size, "mean", 1)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of ``[N, C, H, W]`` to ``output_size`` (windows as PyTorch chooses them)."""
    return _adaptive_pool(input, output_size, "mean", 2)


@autocast_op("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of ``[N, C, D, H, W]`` to ``output_size`` (an int, or three sizes where
    ``None`` keeps the input's); windows as PyTorch chooses them."""
    return _adaptive_pool(input, output_size, "mean", 3)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """1-d max pooling of ``[N, C, L]`` to ``output_size`` (and each maximum's position)."""
    return _adaptive_pool(input, output_size, "max", 1, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of ``[N, C, H, W]`` to ``output_size`` (``return_indices``: also the flat
    position ``h * W + w`` of each maximum, the first in row-major order)."""
    return _adaptive_pool(input, output_size, "max", 2, return_indices)


@autocast_op("adaptive_max_pool3d")
def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of ``[N, C, D, H, W]`` to ``output_size`` (as :func:`adaptive_avg_pool3d`)."""
    return _adaptive_pool(input, output_size, "max", 3, return_indices)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> Any:  # fmt: skip
    """:func:`adaptive_max_pool1d` with the maxima's positions."""
    return _adaptive_pool(input, output_size, "max", 1, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> Any:  # fmt: skip
    """:func:`adaptive_max_pool2d` with the maxima's positions."""
    return _adaptive_pool(input, output_size, "max", 2, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> Any:  # fmt: skip
    """:func:`adaptive_max_pool3d` with the maxima's positions."""
    return _adaptive_pool(input, output_size, "max", 3, True)


__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_pool2d",
    "max_pool3d",
]
