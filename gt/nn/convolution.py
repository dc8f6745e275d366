"""Convolutions (1, 2 and 3-d), ``pad`` and ``unfold``/``fold`` (functional, PyTorch's names);
pooling is in :mod:`gt.nn.pooling`, ``interpolate`` in :mod:`gt.nn.resize`.

A convolution of any dimension is ``im2col`` (the registry's sliding-window primitive, PyTorch's
``unfold`` generalised to 1-3 spatial dimensions) followed by one batched matmul with the weight; a
transposed convolution is the weight's matmul followed by ``col2im`` (``fold``). Gradients come
from the primitives: ``im2col`` and ``col2im`` are each other's derivative (and linear, so second
derivatives come for free).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.grad_graph import label, labels
from gt.ops.autocast import autocast_op, pad_op
from gt.ops.base import in_float32
from gt.ops.layout import keep_channels_last
from gt.ops.shaping import cat
from gt.runtime.ops.conv import out_size
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _pair(v: Any, n: int = 2) -> tuple[int, ...]:
    """``v`` as ``n`` ints (one int, or a one-element sequence, is repeated)."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return tuple(int(v[0]) for _ in range(n))
        return tuple(int(x) for x in v)
    return tuple(int(v) for _ in range(n))


def _geometry(kernel: Any, dilation: Any, padding: Any, stride: Any, n: int = 2) -> dict:
    """The attrs of ``im2col``/``col2im`` for ``n`` spatial dimensions."""
    geo = {
        "kernel": list(_pair(kernel, n)),
        "dilation": list(_pair(dilation, n)),
        "padding": list(_pair(padding, n)),
        "stride": list(_pair(stride, n)),
    }
    for name, sizes in geo.items():
        if len(sizes) != n:  # PyTorch's message
            raise ShapeError(
                f"expected {name} to be a single integer value or a list of {n} values to match "
                f"the convolution dimensions, but got {name}={sizes}"
            )
    return geo


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
def _pad_node(input: Tensor, pad: Any, mode: str = "constant", value: Any = None) -> str:
    """PyTorch's node for ``F.pad``'s result."""
    n = len(pad) // 2
    if mode == "reflect":
        return f"ReflectionPad{n}DBackward0"
    if mode == "replicate":
        return f"ReplicationPad{n}DBackward0"
    return "CopySlices" if mode == "circular" else "ConstantPadNdBackward0"


@autocast_op(pad_op)
@labels(_pad_node)
def pad(
    input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> Tensor:
    """Pad (or crop, for negative sizes) the last ``len(pad) // 2`` dimensions.

    ``pad`` lists (before, after) pairs from the last dimension backwards, as in PyTorch; modes
    ``"constant"`` (``value``, default 0), ``"reflect"``, ``"replicate"`` and ``"circular"``.
    """
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: padding length {len(pad)} is odd or too long for {input.ndim} dims")
    dims = len(pad) // 2
    if mode in ("reflect", "replicate", "circular"):
        _check_border_pad(input, pad, mode)
        if all(int(p) >= 0 for p in pad) and any(int(p) > 0 for p in pad):
            # one instruction each way (the composition below made a full copy per dimension)
            pads = [[int(pad[2 * k]), int(pad[2 * k + 1])] for k in reversed(range(dims))]
            out = input._apply("pad_border", [input], {"pads": pads, "mode": mode})
            return out if mode == "circular" else keep_channels_last(out, input)
    out = input
    for k in range(dims):
        d = input.ndim - 1 - k
        before, after = int(pad[2 * k]), int(pad[2 * k + 1])
        out = _pad_dim(out, d, before, after, mode, 0.0 if value is None else value)
    if mode != "circular" and any(int(p) > 0 for p in pad):  # a new tensor: PyTorch's layout
        out = keep_channels_last(out, input)
    if out is input:  # (nothing to pad: still a new tensor, as PyTorch's)
        out = input.clone()
    return out


def _check_border_pad(input: Tensor, pad: Sequence[int], mode: str) -> None:
    """PyTorch's rules for the border modes: 1 to 3 padded dimensions, on an input with one or
    two more (a batch and channel, or only a channel); reflection by less than the size, circular
    wrapping at most once."""
    dims = len(pad) // 2
    if not 1 <= dims <= 3 or input.ndim not in (dims + 1, dims + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    for k in range(dims):
        d = input.ndim - 1 - k
        n, before, after = input.shape[d], int(pad[2 * k]), int(pad[2 * k + 1])
        if mode == "reflect" and (before >= n or after >= n):
            raise ShapeError(
                f"Argument #{4 + 2 * k}: Padding size should be less than the corresponding "
                f"input dimension, but got: padding ({before}, {after}) at dimension {d} of "
                f"input {list(input.shape)}"
            )
        if mode == "circular" and (before > n or after > n):
            raise ShapeError("Padding value causes wrapping around more than once.")


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
        source = lambda i: abs(i) if i < 0 else (2 * (n - 1) - i if i >= n else i)  # noqa: E731
    elif mode == "replicate":
        source = lambda i: min(max(i, 0), n - 1)  # noqa: E731
    elif mode == "circular":
        source = lambda i: i % n  # noqa: E731
    else:
        raise ValueError(
            f"pad: mode must be constant, reflect, replicate or circular, not {mode!r}"
        )
    # Only the borders are gathered (the body is joined as it is): a long signal's padding costs
    # what its borders cost, forward and backward.
    parts = [x[lead + ([source(i) for i in range(-before, 0)],)]] if before else []
    parts.append(x)
    if after:
        parts.append(x[lead + ([source(i) for i in range(n, n + after)],)])
    return cat(parts, d)


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
def _conv_input(input: Tensor, dims: int, op: str) -> tuple[Tensor, bool]:
    """``input`` with a batch dimension, or PyTorch's error for a wrong rank."""
    if input.ndim not in (dims + 1, dims + 2):
        raise ShapeError(
            f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {op}, but got "
            f"input of size: {list(input.shape)}"
        )
    return _batched(input, dims, op)


def _check_weight(weight: Tensor, dims: int, groups: int) -> None:
    if weight.ndim != dims + 2:
        raise ShapeError(
            f"expected a {dims + 2}-d weight for a {dims}-d convolution, got weight of size "
            f"{list(weight.shape)}"
        )
    if groups <= 0:
        raise ShapeError("non-positive groups is not supported")
    if weight.shape[0] % groups:  # PyTorch's message, double brackets included
        raise ShapeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
            f"but got weight of size [{list(weight.shape)}] instead"
        )


def _same_padding(x: Tensor, kernel: Sequence, dilation: Sequence) -> tuple[Tensor, tuple]:
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


def _times(sizes: Sequence) -> str:
    return " x ".join(str(int(s)) for s in sizes)


#: PyTorch's C type names in its convolutions' dtype messages.
_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int"}  # fmt: skip


def _check_dtypes(input: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's refusal of an input whose dtype is not the layer's (a float64 batch from NumPy
    into a float32 layer failed in the convolution's internal matmul, naming its shapes)."""
    if bias is not None and input.dtype != bias.dtype:
        a, b = (_C_NAMES.get(str(t.dtype).split(".")[-1], str(t.dtype)) for t in (input, bias))
        raise RuntimeError(f"Input type ({a}) and bias type ({b}) should be the same")
    if input.dtype != weight.dtype:
        a, b = (S.SCALAR_NAMES.get(str(t.dtype).split(".")[-1]) for t in (input, weight))
        raise RuntimeError(f"expected scalar type {a} but found {b}")


def _conv(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
          dilation: Any, groups: int, dims: int) -> Tensor:  # fmt: skip
    """``dims``-d convolution: ``im2col`` then one (grouped) matmul with the weight."""
    op = f"conv{dims}d"
    x, squeeze = _conv_input(input, dims, op)
    _check_weight(weight, dims, groups)
    _check_dtypes(input, weight, bias)
    n, c = x.shape[:2]
    o, cg, *kernel = weight.shape
    if c != cg * groups:
        raise ShapeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
            f"input{list(x.shape)} to have {cg * groups} channels, but got {c} channels instead"
        )
    dil, st = _pair(dilation, dims), _pair(stride, dims)
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(s != 1 for s in st):
                raise ShapeError("padding='same' is not supported for strided convolutions")
            x, padding = _same_padding(x, kernel, dil)
        else:
            raise ShapeError(f"Invalid padding string: {padding!r}")
    geo = _geometry(kernel, dil, padding, st, dims)
    outs = [out_size(*a) for a in zip(x.shape[2:], kernel, dil, geo["padding"], st)]
    if min(outs) <= 0:
        padded = [s + 2 * p for s, p in zip(x.shape[2:], geo["padding"])]
        eff = [d * (k - 1) + 1 for k, d in zip(kernel, dil)]
        raise ShapeError(
            f"Calculated padded input size per channel: ({_times(padded)}). Kernel size: "
            f"({_times(eff)}). Kernel size can't be greater than actual input size"
        )
    length, window = math.prod(outs), cg * math.prod(kernel)
    cols = x._apply("im2col", [x], geo)  # [N, C*prod(kernel), L]
    if groups == 1:
        out = weight.reshape(o, window) @ cols
    else:
        g_cols = cols.reshape(n, groups, window, length)
        out = (weight.reshape(groups, o // groups, window) @ g_cols).reshape(n, o, length)
    out = out.reshape(n, o, *outs)
    if bias is not None:
        out = out + bias.reshape(1, o, *(1,) * dims)
    return out.squeeze(0) if squeeze else keep_channels_last(out, input, weight)


def _conv_node(out: Tensor, input: Tensor, dims: int) -> Tensor:
    """A batched convolution's result, named as PyTorch's node (an unbatched one ends in the
    squeeze of its batch of one, as PyTorch's does)."""
    return label(out, "ConvolutionBackward0") if input.ndim == dims + 2 else out


@autocast_op("conv1d")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:  # fmt: skip
    """1-d convolution of ``[N, C, L]`` with ``weight [O, C/groups, k]``."""
    out = in_float32(_conv, input, weight, bias, stride, padding, dilation, groups, 1)
    return _conv_node(out, input, 1)


@autocast_op("conv2d")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:  # fmt: skip
    """2-d convolution (cross-correlation) of ``[N, C, H, W]`` with ``weight [O, C/groups, kh, kw]``."""
    out = in_float32(_conv, input, weight, bias, stride, padding, dilation, groups, 2)
    return _conv_node(out, input, 2)


@autocast_op("conv3d")
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:  # fmt: skip
    """3-d convolution of ``[N, C, D, H, W]`` with ``weight [O, C/groups, kd, kh, kw]``.

    ``padding`` is sizes, ``"valid"`` or ``"same"`` (stride 1 only, as in PyTorch); unbatched
    ``[C, D, H, W]`` inputs are accepted.
    """
    out = in_float32(_conv, input, weight, bias, stride, padding, dilation, groups, 3)
    return _conv_node(out, input, 3)


def _conv_transpose(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
                    padding: Any, output_padding: Any, groups: int, dilation: Any,
                    dims: int) -> Tensor:  # fmt: skip
    """``dims``-d transposed convolution: a (grouped) matmul with the weight, then ``col2im``."""
    op = f"conv_transpose{dims}d"
    x, squeeze = _conv_input(input, dims, op)
    _check_weight(weight, dims, groups)
    n, c, *sizes = x.shape
    cin, og, *kernel = weight.shape
    if c != cin:
        raise ShapeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected "
            f"input{list(x.shape)} to have {cin} channels, but got {c} channels instead"
        )
    geo = _geometry(kernel, dilation, padding, stride, dims)
    st, pd, dil = geo["stride"], geo["padding"], geo["dilation"]
    extra = _pair(output_padding, dims)
    if any(e >= s and e >= d for e, s, d in zip(extra, st, dil)):
        raise ShapeError(
            f"output padding must be smaller than either stride or dilation, but got "
            f"output_padding={list(extra)}, stride={st}, dilation={dil}"
        )
    # The full (uncropped) scatter of every input position's window, then PyTorch's size.
    full = [(i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip(sizes, st, dil, kernel)]
    size = [f - 2 * p + e for f, p, e in zip(full, pd, extra)]
    if min(size) <= 0:
        raise ShapeError(
            f"Given input size per channel: ({_times(sizes)}). Calculated output size per "
            f"channel: ({_times(size)}). Output size is too small"
        )
    window, length = og * math.prod(kernel), math.prod(sizes)
    xs = x.reshape(n, c, length)
    if groups == 1:
        cols = weight.reshape(cin, window).T @ xs  # [N, O*prod(kernel), L]
    else:
        w = weight.reshape(groups, cin // groups, window).transpose(1, 2)
        cols = (w @ xs.reshape(n, groups, cin // groups, length)).reshape(
            n, groups * window, length
        )
    if all(e < s for e, s in zip(extra, st)):  # col2im's padding crops, its window count fits
        out = cols._apply("col2im", [cols], {**geo, "output_size": size})
    else:  # output_padding >= stride (allowed when below the dilation): crop and pad by hand
        whole = cols._apply("col2im", [cols], {**geo, "padding": [0] * dims, "output_size": full})
        pads = [v for p, e in zip(reversed(pd), reversed(extra)) for v in (-p, e - p)]
        out = pad(whole, pads)
    o = og * groups
    if bias is not None:
        out = out + bias.reshape(1, o, *(1,) * dims)
    return out.squeeze(0) if squeeze else keep_channels_last(out, input, weight)


@autocast_op("conv_transpose1d")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:  # fmt: skip
    """Transposed 1-d convolution of ``[N, C, L]`` with ``weight [C, O/groups, k]``."""
    out = in_float32(_conv_transpose, input, weight, bias, stride, padding, output_padding,
                     groups, dilation, 1)  # fmt: skip
    return _conv_node(out, input, 1)


@autocast_op("conv_transpose2d")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:  # fmt: skip
    """Transposed 2-d convolution of ``[N, C, H, W]`` with ``weight [C, O/groups, kh, kw]``."""
    out = in_float32(_conv_transpose, input, weight, bias, stride, padding, output_padding,
                     groups, dilation, 2)  # fmt: skip
    return _conv_node(out, input, 2)


@autocast_op("conv_transpose3d")
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:  # fmt: skip
    """Transposed 3-d convolution of ``[N, C, D, H, W]`` with ``weight [C, O/groups, kd, kh, kw]``
    (the adjoint of :func:`conv3d`; ``output_padding`` adds planes/rows/columns on one side)."""
    out = in_float32(_conv_transpose, input, weight, bias, stride, padding, output_padding,
                     groups, dilation, 3)  # fmt: skip
    return _conv_node(out, input, 3)


# ------------------------------------------------------------------ interpolation
__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "fold",
    "pad",
    "unfold",
]
