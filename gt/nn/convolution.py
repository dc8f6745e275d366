"""Convolutions, pooling, ``unfold``/``fold`` and ``interpolate`` (functional, PyTorch's names).

A 2-d convolution is ``im2col`` (the registry's sliding-window primitive, PyTorch's ``unfold``)
followed by one batched matmul with the weight; a transposed convolution is the weight's matmul
followed by ``col2im`` (``fold``); pooling reduces the window columns. 1-d versions run the 2-d
ones on a height of 1. Gradients come from the primitives: ``im2col`` and ``col2im`` are each
other's derivative, and max pooling sends the gradient to the first maximum of each window, as
PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt.errors import ShapeError
from gt.runtime.ops.conv import out_size
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _pair(v: Any, n: int = 2) -> tuple[int, ...]:
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return tuple(int(v[0]) for _ in range(n))
        return tuple(int(x) for x in v)
    return tuple(int(v) for _ in range(n))


def _geometry(kernel: Any, dilation: Any, padding: Any, stride: Any) -> dict:
    return {
        "kernel": list(_pair(kernel)),
        "dilation": list(_pair(dilation)),
        "padding": list(_pair(padding)),
        "stride": list(_pair(stride)),
    }


def _batched(input: Tensor, spatial: int, op: str) -> tuple[Tensor, bool]:
    """``input`` with a batch dimension (PyTorch accepts unbatched ``[C, ...]`` inputs)."""
    if input.ndim == spatial + 2:
        return input, False
    if input.ndim == spatial + 1:
        return input.unsqueeze(0), True
    raise ShapeError(
        f"{op}: expected a {spatial + 1}-d (unbatched) or {spatial + 2}-d (batched) input, "
        f"got shape {list(input.shape)}"
    )


# ------------------------------------------------------------------ padding
def pad(
    input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> Tensor:
    """Pad (or crop, for negative sizes) the last ``len(pad) // 2`` dimensions.

    ``pad`` lists (before, after) pairs from the last dimension backwards, as in PyTorch; modes
    ``"constant"`` (``value``, default 0), ``"reflect"``, ``"replicate"`` and ``"circular"``.
    """
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: padding length {len(pad)} is odd or too long for {input.ndim} dims")
    out = input
    for k in range(len(pad) // 2):
        d = input.ndim - 1 - k
        before, after = int(pad[2 * k]), int(pad[2 * k + 1])
        out = _pad_dim(out, d, before, after, mode, 0.0 if value is None else value)
    return out


def _pad_dim(x: Tensor, d: int, before: int, after: int, mode: str, value: float) -> Tensor:
    n = x.shape[d]
    lead = (slice(None),) * d
    if before < 0 or after < 0:  # negative padding crops
        x = x[lead + (slice(max(0, -before), n - max(0, -after)),)]
        before, after, n = max(0, before), max(0, after), x.shape[d]
    if not before and not after:
        return x
    if mode == "constant":
        shape = list(x.shape)
        shape[d] = n + before + after
        out = x.new_full(shape, value)
        out[lead + (slice(before, before + n),)] = x
        return out
    if mode == "reflect":
        idx = [
            abs(i) if i < 0 else (2 * (n - 1) - i if i >= n else i)
            for i in range(-before, n + after)
        ]
    elif mode == "replicate":
        idx = [min(max(i, 0), n - 1) for i in range(-before, n + after)]
    elif mode == "circular":
        idx = [i % n for i in range(-before, n + after)]
    else:
        raise ValueError(
            f"pad: mode must be constant, reflect, replicate or circular, not {mode!r}"
        )
    return x[lead + (idx,)]


# ------------------------------------------------------------------ unfold / fold
def unfold(
    input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """Sliding windows of ``[N, C, H, W]`` as columns ``[N, C*kh*kw, L]``."""
    x, squeeze = _batched(input, 2, "unfold")
    out = x._apply("im2col", [x], _geometry(kernel_size, dilation, padding, stride))
    return out.squeeze(0) if squeeze else out


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:  # fmt: skip
    """Columns ``[N, C*kh*kw, L]`` summed back into ``[N, C, *output_size]`` (overlaps add)."""
    x = input if input.ndim == 3 else input.unsqueeze(0)
    attrs = {
        **_geometry(kernel_size, dilation, padding, stride),
        "output_size": list(_pair(output_size)),
    }
    out = x._apply("col2im", [x], attrs)
    return out if input.ndim == 3 else out.squeeze(0)


# ------------------------------------------------------------------ convolutions
def _same_padding(x: Tensor, kernel: tuple, dilation: tuple) -> tuple[Tensor, tuple[int, ...]]:
    """``padding="same"``: symmetric where it can be, the odd extra element on the right."""
    pads: list[int] = []
    sym: list[int] = []
    for k, d in zip(reversed(kernel), reversed(dilation)):
        total = d * (k - 1)
        left = total // 2
        pads += [0, total - 2 * left]
        sym.insert(0, left)
    if any(pads):
        x = pad(x, pads)
    return x, tuple(sym)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:  # fmt: skip
    """2-d convolution (cross-correlation) of ``[N, C, H, W]`` with ``weight [O, C/groups, kh, kw]``."""
    x, squeeze = _batched(input, 2, "conv2d")
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if c != cg * groups or o % groups:
        raise ShapeError(
            f"conv2d: weight of shape {list(weight.shape)} with groups={groups} expects "
            f"{cg * groups} input channels, got input of shape {list(input.shape)}"
        )
    dil = _pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            x, padding = _same_padding(x, (kh, kw), dil)
        else:
            raise ValueError(f"conv2d: padding must be 'valid', 'same' or sizes, not {padding!r}")
    geo = _geometry((kh, kw), dil, padding, stride)
    oh = out_size(x.shape[2], kh, dil[0], geo["padding"][0], geo["stride"][0])
    ow = out_size(x.shape[3], kw, dil[1], geo["padding"][1], geo["stride"][1])
    cols = x._apply("im2col", [x], geo)  # [N, C*kh*kw, L]
    if groups == 1:
        out = weight.reshape(o, c * kh * kw) @ cols
    else:
        k = cg * kh * kw
        g_cols = cols.reshape(n, groups, k, oh * ow)
        out = (weight.reshape(groups, o // groups, k) @ g_cols).reshape(n, o, oh * ow)
    out = out.reshape(n, o, oh, ow)
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1)
    return out.squeeze(0) if squeeze else out


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:  # fmt: skip
    """1-d convolution of ``[N, C, L]`` with ``weight [O, C/groups, k]``."""
    x, squeeze = _batched(input, 1, "conv1d")
    if isinstance(padding, str):
        pad2: Any = padding
    else:
        pad2 = (0, _pair(padding, 1)[0])
    out = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, _pair(stride, 1)[0]), pad2,
                 (1, _pair(dilation, 1)[0]), groups).squeeze(2)  # fmt: skip
    return out.squeeze(0) if squeeze else out


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:  # fmt: skip
    """Transposed 2-d convolution of ``[N, C, H, W]`` with ``weight [C, O/groups, kh, kw]``."""
    if groups != 1:
        raise NotImplementedError("conv_transpose2d: groups > 1 is not supported")
    x, squeeze = _batched(input, 2, "conv_transpose2d")
    n, c, h, w = x.shape
    cin, o, kh, kw = weight.shape
    if c != cin:
        raise ShapeError(
            f"conv_transpose2d: weight of shape {list(weight.shape)} expects {cin} input channels, "
            f"got input of shape {list(input.shape)}"
        )
    geo = _geometry((kh, kw), dilation, padding, stride)
    op = _pair(output_padding)
    size = [
        (dim - 1) * s - 2 * p + d * (k - 1) + extra + 1
        for dim, s, p, d, k, extra in zip(
            (h, w), geo["stride"], geo["padding"], geo["dilation"], (kh, kw), op
        )
    ]
    cols = weight.reshape(cin, o * kh * kw).T @ x.reshape(n, c, h * w)  # [N, O*kh*kw, H*W]
    out = cols._apply("col2im", [cols], {**geo, "output_size": size})
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1)
    return out.squeeze(0) if squeeze else out


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:  # fmt: skip
    """Transposed 1-d convolution of ``[N, C, L]`` with ``weight [C, O/groups, k]``."""
    x, squeeze = _batched(input, 1, "conv_transpose1d")
    one = lambda v: (1, _pair(v, 1)[0]) if not isinstance(v, str) else v  # noqa: E731
    out = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, one(stride),
                           (0, _pair(padding, 1)[0]), (0, _pair(output_padding, 1)[0]), groups,
                           one(dilation)).squeeze(2)  # fmt: skip
    return out.squeeze(0) if squeeze else out


# ------------------------------------------------------------------ pooling
def _pool_windows(x: Tensor, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                  ceil_mode: bool, pad_value: float) -> tuple[Tensor, int, int]:  # fmt: skip
    """``[N, C, kh*kw, L]`` windows of ``x`` and the output's height and width."""
    n, c, h, w = x.shape
    extra = [0, 0]
    if ceil_mode:  # windows that start inside the (left-padded) input may run past its end
        for i, (size, k, s, p, d) in enumerate(zip((h, w), kernel, stride, padding, dilation)):
            span = size + 2 * p - d * (k - 1) - 1
            outs = -(-span // s) + 1
            if (outs - 1) * s >= size + p:
                outs -= 1
            extra[i] = max(0, (outs - 1) * s + d * (k - 1) + 1 - (size + 2 * p))
        if any(extra):
            x = pad(x, [0, extra[1], 0, extra[0]], value=pad_value)
    geo = _geometry(kernel, dilation, padding, stride)
    geo["pad_value"] = pad_value
    cols = x._apply("im2col", [x], geo)
    oh = out_size(x.shape[2], kernel[0], dilation[0], padding[0], stride[0])
    ow = out_size(x.shape[3], kernel[1], dilation[1], padding[1], stride[1])
    return cols.reshape(n, c, kernel[0] * kernel[1], oh * ow), oh, ow


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:  # fmt: skip
    """Largest value of each window (the gradient goes to the first maximum, as in PyTorch)."""
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices=True is not supported")
    x, squeeze = _batched(input, 2, "max_pool2d")
    k = _pair(kernel_size)
    s = _pair(stride) if stride is not None and stride != [] else k
    cols, oh, ow = _pool_windows(x, k, s, _pair(padding), _pair(dilation), ceil_mode, -math.inf)
    out = cols.max(2).values.reshape(x.shape[0], x.shape[1], oh, ow)
    return out.squeeze(0) if squeeze else out


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:  # fmt: skip
    """Mean of each window (padding counted unless ``count_include_pad=False``)."""
    x, squeeze = _batched(input, 2, "avg_pool2d")
    k, p = _pair(kernel_size), _pair(padding)
    s = _pair(stride) if stride is not None and stride != [] else k
    cols, oh, ow = _pool_windows(x, k, s, p, (1, 1), ceil_mode, 0.0)
    total = cols.sum(2)
    if divisor_override:
        out = total * (1.0 / divisor_override)
    elif count_include_pad and not ceil_mode:
        out = total * (1.0 / (k[0] * k[1]))
    else:
        ones = x.new_ones((1, 1) + tuple(x.shape[2:]))
        if count_include_pad:  # windows count padding, but not the ceil-mode overhang
            ones = pad(ones, [p[1], p[1], p[0], p[0]], value=1.0)
            counted = _pool_windows(ones, k, s, (0, 0), (1, 1), ceil_mode, 0.0)[0].sum(2)
        else:
            counted = _pool_windows(ones, k, s, p, (1, 1), ceil_mode, 0.0)[0].sum(2)
        out = total / counted
    out = out.reshape(x.shape[0], x.shape[1], oh, ow)
    return out.squeeze(0) if squeeze else out


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:  # fmt: skip
    """1-d max pooling over ``[N, C, L]``."""
    x, squeeze = _batched(input, 1, "max_pool1d")
    k = _pair(kernel_size, 1)[0]
    s = k if stride is None or stride == [] else _pair(stride, 1)[0]
    out = max_pool2d(x.unsqueeze(2), (1, k), (1, s), (0, _pair(padding, 1)[0]),
                     (1, _pair(dilation, 1)[0]), ceil_mode, return_indices).squeeze(2)  # fmt: skip
    return out.squeeze(0) if squeeze else out


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:  # fmt: skip
    """1-d average pooling over ``[N, C, L]``."""
    x, squeeze = _batched(input, 1, "avg_pool1d")
    k = _pair(kernel_size, 1)[0]
    s = k if stride is None or stride == [] else _pair(stride, 1)[0]
    out = avg_pool2d(x.unsqueeze(2), (1, k), (1, s), (0, _pair(padding, 1)[0]), ceil_mode,
                     count_include_pad).squeeze(2)  # fmt: skip
    return out.squeeze(0) if squeeze else out


def _adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _adaptive_pool2d(input: Tensor, output_size: Any, reduce: str, op: str) -> Tensor:
    x, squeeze = _batched(input, 2, op)
    h, w = x.shape[2:]
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,)
    if len(sizes) == 1:
        sizes = sizes * 2
    oh = h if sizes[0] is None else int(sizes[0])
    ow = w if sizes[1] is None else int(sizes[1])
    if h % oh == 0 and w % ow == 0:  # equal windows: one ordinary pooling
        k = (h // oh, w // ow)
        out = max_pool2d(x, k, k) if reduce == "max" else avg_pool2d(x, k, k)
    else:
        rows = []
        for r0, r1 in _adaptive_bounds(h, oh):
            cells = []
            for c0, c1 in _adaptive_bounds(w, ow):
                cell = x[:, :, r0:r1, c0:c1]
                cells.append(cell.amax((2, 3)) if reduce == "max" else cell.mean((2, 3)))
            rows.append(_stack(cells, -1))
        out = _stack(rows, -2)
    return out.squeeze(0) if squeeze else out


def _stack(ts: list, dim: int) -> Tensor:
    return ts[0]._apply("concat", [t.unsqueeze(dim) for t in ts], {"axis": dim % (ts[0].ndim + 1)})


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to ``output_size`` (windows as PyTorch chooses them)."""
    return _adaptive_pool2d(input, output_size, "mean", "adaptive_avg_pool2d")


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max pooling to ``output_size``."""
    return _adaptive_pool2d(input, output_size, "max", "adaptive_max_pool2d")


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """1-d average pooling to ``output_size``."""
    x, squeeze = _batched(input, 1, "adaptive_avg_pool1d")
    out = adaptive_avg_pool2d(x.unsqueeze(2), (1, _pair(output_size, 1)[0])).squeeze(2)
    return out.squeeze(0) if squeeze else out


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """1-d max pooling to ``output_size``."""
    x, squeeze = _batched(input, 1, "adaptive_max_pool1d")
    out = adaptive_max_pool2d(x.unsqueeze(2), (1, _pair(output_size, 1)[0])).squeeze(2)
    return out.squeeze(0) if squeeze else out


# ------------------------------------------------------------------ interpolation
def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:  # fmt: skip
    """Resize the spatial dimensions of ``[N, C, *spatial]`` (``"nearest"``, ``"linear"``,
    ``"bilinear"``; PyTorch's source coordinates, ``align_corners`` included)."""
    spatial = input.ndim - 2
    if spatial < 1:
        raise ShapeError(
            f"interpolate: expected at least a 3-d input, got shape {list(input.shape)}"
        )
    ins = input.shape[2:]
    scales: list[float | None]
    if size is not None:
        outs = list(_pair(size, spatial))
        scales = [None] * spatial
    elif scale_factor is not None:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else [scale_factor] * spatial
        outs = [int(math.floor(n * float(f))) for n, f in zip(ins, sf)]
        scales = [None if recompute_scale_factor else float(f) for f in sf]
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    out = input
    for i, (n_in, n_out, sc) in enumerate(zip(ins, outs, scales)):
        out = _resize_dim(out, 2 + i, n_in, n_out, sc, mode, align_corners)
    return out


def _resize_dim(x: Tensor, d: int, n_in: int, n_out: int, scale: float | None, mode: str,
                align_corners: bool | None) -> Tensor:  # fmt: skip
    lead = (slice(None),) * d
    dst = np.arange(n_out, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):
        ratio = (1.0 / scale) if scale else n_in / n_out
        if mode == "nearest":
            src = np.floor(dst * ratio)
        else:
            src = np.floor((dst + 0.5) * ratio)
        idx = np.minimum(src.astype(np.int64), n_in - 1)
        return x[lead + (idx.tolist(),)]
    if mode not in ("linear", "bilinear", "trilinear"):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported")
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros_like(dst)
    else:
        ratio = (1.0 / scale) if scale else n_in / n_out
        src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    frac = (src - i0).astype(np.float64)
    shape = [1] * x.ndim
    shape[d] = n_out
    wgt = x._upload(np.ascontiguousarray(frac.reshape(shape), dtype=np.dtype(x.dtype)))
    a = x[lead + (i0.tolist(),)]
    b = x[lead + (i1.tolist(),)]
    return a + (b - a) * wgt


__all__ = [
    "pad",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "fold",
    "interpolate",
    "max_pool1d",
    "max_pool2d",
    "unfold",
]
