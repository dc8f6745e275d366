"""Registry entries: sliding windows (``im2col``) and their adjoint (``col2im``), in 1, 2 or 3-d.

``im2col`` is PyTorch's ``F.unfold`` generalised to any number of spatial dimensions:
``[N, C, *spatial]`` becomes ``[N, C*prod(kernel), L]``, one column per window position (``L`` is
the product of the output sizes), so a convolution is one matmul and a pooling one reduction
(``gt.nn.functional`` composes them). ``col2im`` is ``F.fold``, which adds every column back into
its window; each is the other's derivative. Attributes (one entry per spatial dimension, so their
length says how many there are): ``kernel``, ``dilation``, ``padding``, ``stride``; ``im2col``
takes ``pad_value`` (``-inf`` for max pooling), ``col2im`` the ``output_size``.

The kernels loop over the ``prod(kernel)`` window offsets and move whole strided slices, so the
work per offset is one vectorised copy on NumPy or CuPy, whatever the number of dimensions; when
there are fewer window positions than offsets (a long kernel on a short signal: an STFT's frames),
they loop over the positions instead and move one window per step.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape, first_dtype


def out_size(size: int, k: int, d: int, p: int, s: int) -> int:
    """Number of window positions along one spatial dimension."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _geometry(at: Any) -> tuple[tuple[int, ...], ...]:
    geo = tuple(tuple(int(v) for v in at[k]) for k in ("kernel", "dilation", "padding", "stride"))
    if len({len(g) for g in geo}) != 1 or not 1 <= len(geo[0]) <= 3:
        raise ShapeError(
            f"im2col/col2im: kernel, dilation, padding and stride must list 1 to 3 sizes each, "
            f"got {[list(g) for g in geo]}"
        )
    return geo


def _out_sizes(sizes: Any, at: Any) -> tuple[int, ...]:
    kernel, dilation, padding, stride = _geometry(at)
    return tuple(map(out_size, sizes, kernel, dilation, padding, stride))


def _x(sizes: Any) -> str:
    return "x".join(str(int(v)) for v in sizes)


def _im2col_shape(shapes: list, attrs: Any) -> Shape:
    shape = shapes[0]
    kernel, dilation, padding, _ = _geometry(attrs)
    dims = len(kernel)
    if len(shape) != dims + 2:
        raise ShapeError(
            f"im2col: a {dims}-d kernel expects a {dims + 2}-d input [N, C, *spatial], "
            f"got shape {list(shape)}"
        )
    outs = _out_sizes(shape[2:], attrs)
    if min(outs) <= 0:
        raise ShapeError(
            f"im2col: a kernel of {_x(kernel)} (dilation {_x(dilation)}, padding {_x(padding)}) "
            f"does not fit an input of {_x(shape[2:])}"
        )
    return (shape[0], shape[1] * math.prod(kernel), math.prod(outs))


def _col2im_shape(shapes: list, attrs: Any) -> Shape:
    shape = shapes[0]
    kernel = _geometry(attrs)[0]
    size = [int(v) for v in attrs["output_size"]]
    k, count = math.prod(kernel), math.prod(_out_sizes(size, attrs))
    if len(size) != len(kernel) or len(shape) != 3 or shape[1] % k or shape[2] != count:
        raise ShapeError(
            f"col2im: expected an input [N, C*{k}, {count}] for output size {size}, "
            f"got shape {list(shape)}"
        )
    return (shape[0], shape[1] // k, *size)


def _moves(sizes: Any, at: Any) -> Any:
    """``(column index, input slices)`` pairs that together move every window: one per kernel
    offset (:func:`_windows`) or, when there are fewer, one per window position."""
    kernel, dilation, _, stride = _geometry(at)
    outs = _out_sizes(sizes, at)
    every = (slice(None),) * len(kernel)
    if math.prod(outs) >= math.prod(kernel):
        for offset, window in _windows(sizes, at):
            yield (*offset, *every), window
        return
    for pos in itertools.product(*(range(o) for o in outs)):
        yield (
            (*every, *pos),
            tuple(
                slice(p * s, p * s + d * (k - 1) + 1, d)
                for p, s, d, k in zip(pos, stride, dilation, kernel)
            ),
        )


def _windows(sizes: Any, at: Any) -> Any:
    """Per window offset (a tuple of indices into the kernel): the slices of the padded input
    that it reads, one per spatial dimension."""
    kernel, dilation, _, stride = _geometry(at)
    outs = _out_sizes(sizes, at)
    for offset in itertools.product(*(range(k) for k in kernel)):
        yield (
            offset,
            tuple(
                slice(i * d, i * d + s * (o - 1) + 1, s)
                for i, d, s, o in zip(offset, dilation, stride, outs)
            ),
        )


def _k_im2col(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        kernel, _, padding, _ = _geometry(at)
        n, c, *sizes = x.shape
        if any(padding):
            shape = (n, c, *(s + 2 * p for s, p in zip(sizes, padding)))
            padded = xp.full(shape, at.get("pad_value", 0.0), x.dtype)
            inner = tuple(slice(p, p + s) for p, s in zip(padding, sizes))
            padded[(slice(None), slice(None), *inner)] = x
        else:
            padded = x
        outs = _out_sizes(sizes, at)
        if xp is np and padded.size:  # every window as a strided view, then one copy (1.5x the
            cols = _windows_view(padded, at, outs)  # slab per kernel offset: perf probe, Dec 7)
        else:
            cols = xp.empty((n, c, *kernel, *outs), dtype=x.dtype)
            for col, window in _moves(sizes, at):
                cols[(slice(None), slice(None), *col)] = padded[(slice(None), slice(None), *window)]
        return cols.reshape(n, c * math.prod(kernel), math.prod(outs))

    return h


def _windows_view(padded: np.ndarray, at: Any, outs: tuple) -> np.ndarray:
    """``[n, c, *kernel, *outs]``: each output position's window of ``padded`` (NumPy), copied
    once from a strided view (the same elements the per-offset slabs copy)."""
    kernel, dilation, _, stride = _geometry(at)
    d = len(kernel)
    spans = tuple(dl * (k - 1) + 1 for k, dl in zip(kernel, dilation))
    view = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=tuple(range(2, 2 + d)))
    view = view[(slice(None), slice(None),
                 *(slice(None, s * (o - 1) + 1, s) for s, o in zip(stride, outs)),
                 *(slice(None, None, dl) for dl in dilation))]  # fmt: skip
    order = (0, 1, *range(2 + d, 2 + 2 * d), *range(2, 2 + d))  # (n, c, kernel..., outs...)
    return np.ascontiguousarray(view.transpose(order))


def _k_col2im(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        kernel, _, padding, _ = _geometry(at)
        sizes = [int(s) for s in at["output_size"]]
        n, ckk, _ = x.shape
        c = ckk // math.prod(kernel)
        if xp is np and n > 1 and x.strides[0] == x.itemsize and x.strides[2] == n * x.itemsize:
            return _col2im_batch_last(x, at, c, sizes)
        cols = x.reshape(n, c, *kernel, *_out_sizes(sizes, at))
        out = xp.zeros((n, c, *(s + 2 * p for s, p in zip(sizes, padding))), dtype=x.dtype)
        for col, window in _moves(sizes, at):
            out[(slice(None), slice(None), *window)] += cols[(slice(None), slice(None), *col)]
        inner = tuple(slice(p, p + s) for p, s in zip(padding, sizes))
        return xp.ascontiguousarray(out[(slice(None), slice(None), *inner)])

    return h


def _col2im_batch_last(x: np.ndarray, at: Any, c: int, sizes: list) -> np.ndarray:
    """``col2im`` of columns laid out ``[C*prod(k), L, N]`` (the batch innermost, as
    ``matmul`` leaves a weight's transpose times a batch of gradients): the same sums in the same
    order, each offset's slab added as whole rows of windows times the batch."""
    kernel, _, padding, _ = _geometry(at)
    n, dims = x.shape[0], len(kernel)
    cols = x.transpose(1, 2, 0).reshape(c, *kernel, *_out_sizes(sizes, at), n)  # a view
    out = np.zeros((c, *(s + 2 * p for s, p in zip(sizes, padding)), n), dtype=x.dtype)
    for col, window in _moves(sizes, at):
        out[(slice(None), *window)] += cols[(slice(None), *col)]
    inner = tuple(slice(p, p + s) for p, s in zip(padding, sizes))
    return np.ascontiguousarray(np.moveaxis(out[(slice(None), *inner)], dims + 1, 0))


def _geometry_attrs(at: Any) -> dict:
    return {k: at[k] for k in ("kernel", "dilation", "padding", "stride")}


def _d_im2col(n: Any, g: Any) -> tuple:
    attrs = {**_geometry_attrs(n.attrs), "output_size": list(n.shapes[0][2:])}
    return (g._apply("col2im", [g], attrs),)


def _d_col2im(n: Any, g: Any) -> tuple:
    return (g._apply("im2col", [g], _geometry_attrs(n.attrs)),)


ENTRIES: list[Op] = [
    Op(
        "im2col",
        79,
        shape=_im2col_shape,
        dtype=first_dtype,
        kernel=_k_im2col,
        grad=_d_im2col,
        doc="sliding windows of [N, C, *spatial] (1 to 3-d) as columns [N, C*prod(k), L] (F.unfold)",
    ),
    Op(
        "col2im",
        80,
        shape=_col2im_shape,
        dtype=first_dtype,
        kernel=_k_col2im,
        grad=_d_col2im,
        doc="columns [N, C*prod(k), L] summed back into [N, C, *output_size] (F.fold), 1 to 3-d",
    ),
]
