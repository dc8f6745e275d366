"""Registry entries: max pooling in 1, 2 or 3-d, as its own kernels.

Max pooling composed from ``im2col`` copied every window out (``prod(kernel)`` times the input),
found each maximum with an ``argmax``, and sent the gradient back through a full-size
``index_add`` and a ``col2im``: on the perf probe's CNN (Dec 7) that was a third of the worker's
time. These kernels instead walk the ``prod(kernel)`` window offsets over strided views of the
input: the forward is one ``maximum`` per offset; the picks are one comparison per offset with
the maxima, and the gradient one masked product per offset.

The pick is PyTorch's (its CPU kernel's loop): the first maximum in the window's row-major order,
or the last NaN when the window holds one (``val > max or isnan(val)`` replaces). The offsets are
recomputed from the input where they are needed (backward, the indices) rather than kept: a
comparison per offset costs less than holding and sending an index tensor per call.

Attributes (one entry per spatial dimension): ``kernel``, ``dilation``, ``padding``, ``stride``,
and ``extra``: the padding a ``ceil_mode`` window runs past the right edge. Padding is ``-inf``
(the smallest integer for integer inputs), so it is never picked.

* ``max_pool(x)``: ``[N, C, *spatial]`` -> ``[N, C, *outs]``, the maxima;
* ``max_pool_indices(x)``: each maximum's flat position in its input plane (``return_indices``);
* ``max_pool_grad(x, g)``: ``g`` (``[N, C, *outs]``) routed to the picked positions of ``x``;
* ``max_pool_pick(x, h)``: ``h`` (shaped as ``x``) read at the picked positions, the adjoint of
  ``max_pool_grad`` (so each of the two is the other's derivative, for double backward);
* ``max_unpool_positions(indices)``: max unpooling's flat write positions, each plane's indices
  offset by the plane's start, refusing an index outside its plane with PyTorch's message (the
  check runs on the worker; its error reaches the program at its next sync point, as indexing's
  bounds check does, where a write past a plane would land in the next one).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape, first_dtype, int64_dtype
from gt.runtime.ops.conv import out_size


def _geometry(at: Any) -> tuple[tuple[int, ...], ...]:
    geo = tuple(
        tuple(int(v) for v in at[k]) for k in ("kernel", "dilation", "padding", "stride", "extra")
    )
    if len({len(g) for g in geo}) != 1 or not 1 <= len(geo[0]) <= 3:
        raise ShapeError(
            "max_pool: kernel, dilation, padding, stride and extra must list 1 to 3 sizes each, "
            f"got {[list(g) for g in geo]}"
        )
    return geo


def _outs(sizes: Any, at: Any) -> tuple[int, ...]:
    kernel, dilation, padding, stride, extra = _geometry(at)
    return tuple(
        out_size(n + e, k, d, p, s)
        for n, k, d, p, s, e in zip(sizes, kernel, dilation, padding, stride, extra)
    )


def _pooled_shape(shapes: list, attrs: Any) -> Shape:
    shape = shapes[0]
    dims = len(_geometry(attrs)[0])
    if len(shape) != dims + 2:
        raise ShapeError(
            f"max_pool: a {dims}-d kernel expects a {dims + 2}-d input [N, C, *spatial], "
            f"got shape {list(shape)}"
        )
    outs = _outs(shape[2:], attrs)
    if min(outs) <= 0:
        raise ShapeError(f"max_pool: the kernel does not fit an input of {list(shape[2:])}")
    return (*shape[:2], *outs)


def _routed_shape(shapes: list, attrs: Any) -> Shape:
    x, g = shapes
    if tuple(g) != _pooled_shape([x], attrs):
        raise ShapeError(
            f"max_pool_grad: a gradient of {list(g)} does not match the pooling of {list(x)}"
        )
    return tuple(x)


def _picked_shape(shapes: list, attrs: Any) -> Shape:
    x, h = shapes
    if tuple(h) != tuple(x):
        raise ShapeError(f"max_pool_pick: {list(h)} is not shaped as the input {list(x)}")
    return _pooled_shape([x], attrs)


def _pad(xp: Any, x: Any, at: Any, fill: Any) -> Any:
    """``x`` padded on both sides by ``padding`` and on the right by ``extra``, with ``fill``."""
    _, _, padding, _, extra = _geometry(at)
    if not any(padding) and not any(extra):
        return x
    n, c, *sizes = x.shape
    shape = (n, c, *(s + 2 * p + e for s, p, e in zip(sizes, padding, extra)))
    out = xp.full(shape, fill, x.dtype)
    out[(slice(None), slice(None), *(slice(p, p + s) for p, s in zip(padding, sizes)))] = x
    return out


def _lowest(x: Any) -> Any:
    """The padding value that is never picked: ``-inf``, or the dtype's smallest integer."""
    return np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf


def _slabs(at: Any, outs: tuple) -> list[tuple]:
    """Per window offset (row-major), the slices of the padded input that it reads."""
    kernel, dilation, _, stride, _ = _geometry(at)
    return [
        (slice(None), slice(None),
         *(slice(i * d, i * d + s * (o - 1) + 1, s)
           for i, d, s, o in zip(offset, dilation, stride, outs)))
        for offset in itertools.product(*(range(k) for k in kernel))
    ]  # fmt: skip


def _maxima(xp: Any, x: Any, at: Any) -> tuple[Any, list, Any]:
    """The maximum of every window, the slabs (one per window offset) and the padded input.

    ``maximum(v, best)`` keeps ``best`` on a tie (NumPy returns its second operand), so the first
    of equal values wins, as PyTorch's strict ``>`` keeps it; ``-0.0`` before ``0.0`` stays
    ``-0.0`` (``tests/unit/test_max_pool_kernels.py``). NaN propagates."""
    padded = _pad(xp, x, at, _lowest(x))
    slabs = _slabs(at, _outs(x.shape[2:], at))
    best = padded[slabs[0]].copy()
    for sl in slabs[1:]:
        xp.maximum(padded[sl], best, out=best)
    return best, slabs, padded


def _picks(xp: Any, padded: Any, slabs: list, best: Any) -> list:
    """Per window offset, where it is the window's pick: the first element equal to the maximum
    or, in a window holding NaN, the last NaN (PyTorch's ``val > max || isnan(val)``).

    Boolean masks rather than ``copyto(..., where=)`` or an index per position: on NumPy a masked
    copy costs 5-8x an elementwise compare (branches on random masks)."""
    masks = []
    taken = None
    for sl in slabs:
        hit = padded[sl] == best
        if taken is None:
            taken = hit.copy()
        else:
            hit &= ~taken
            taken |= hit
        masks.append(hit)
    if padded.dtype.kind in "iub":
        return masks
    nan = best != best
    if xp is np and not nan.any():  # (a host check only where it costs no device sync)
        return masks
    later = xp.zeros(best.shape, dtype=bool)
    for k in range(len(slabs) - 1, -1, -1):  # no equality holds in a NaN window: add its pick
        v = padded[slabs[k]]
        last = (v != v) & ~later
        later |= last
        masks[k] |= last
    return masks


def _masked(xp: Any, g: Any, hit: Any) -> Any:
    """``g`` where ``hit``, else 0. A product where ``g`` is finite (``inf * 0`` would be NaN):
    on NumPy half the time of ``where``."""
    if xp is np and np.isfinite(g).all():
        return g * hit
    return xp.where(hit, g, g.dtype.type(0))


def _k_max_pool(be: Any) -> Any:
    def h(v: list, at: Any) -> Any:
        return _maxima(be.xp, v[0], at)[0]

    return h


def _k_max_pool_indices(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        kernel, dilation, padding, stride, _ = _geometry(at)
        sizes = x.shape[2:]
        best, slabs, padded = _maxima(xp, x, at)
        outs = best.shape[2:]
        plane = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]  # row-major strides
        first = np.zeros(outs, dtype=np.int64)  # each window's first element, flat
        for i, (o, s, p, st) in enumerate(zip(outs, stride, padding, plane)):
            shape = [1] * len(outs)
            shape[i] = o
            first = first + ((np.arange(o) * s - p) * st).reshape(shape)
        out = xp.zeros(best.shape, dtype=np.int64) + xp.asarray(first)
        offsets = itertools.product(*(range(k) for k in kernel))
        for off, hit in zip(offsets, _picks(xp, padded, slabs, best)):
            out += hit * sum(i * d * st for i, d, st in zip(off, dilation, plane))
        return out

    return h


def _crop(padded: Any, at: Any, sizes: Any) -> Any:
    _, _, padding, _, _ = _geometry(at)
    return padded[(slice(None), slice(None), *(slice(p, p + s) for p, s in zip(padding, sizes)))]


def _k_max_pool_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, g = v
        kernel, dilation, _, stride, _ = _geometry(at)
        best, slabs, padded = _maxima(xp, x, at)
        masks = _picks(xp, padded, slabs, best)
        out = xp.zeros(padded.shape, dtype=g.dtype)
        # windows that do not overlap write disjoint slabs: no sums
        apart = all(s >= d * (k - 1) + 1 for k, d, s in zip(kernel, dilation, stride))
        # Where windows overlap, an element picked by several sums their gradients in PyTorch's
        # order, its windows' row-major order: the later window reaches it from an earlier
        # offset, so the offsets go last to first.
        for k in range(len(slabs) - 1, -1, -1):
            if apart:
                out[slabs[k]] = _masked(xp, g, masks[k])
            else:
                out[slabs[k]] += _masked(xp, g, masks[k])
        return xp.ascontiguousarray(_crop(out, at, x.shape[2:]))

    return h


def _k_max_pool_pick(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, gx = v
        best, slabs, padded = _maxima(xp, x, at)
        masks = _picks(xp, padded, slabs, best)
        src = _pad(xp, gx, at, gx.dtype.type(0))
        out = xp.zeros(best.shape, dtype=gx.dtype)
        for sl, hit in zip(slabs, masks):
            out += _masked(xp, src[sl], hit)
        return out

    return h


def _unpool_shape(shapes: list, attrs: Any) -> Shape:
    return (math.prod(shapes[0]),)


def _k_max_unpool_positions(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        sizes = [int(n) for n in at["sizes"]]
        plane = math.prod(sizes)
        idx = v[0].reshape(int(at["planes"]), -1)
        bad = (idx < 0) | (idx >= plane)
        if bool(bad.any()):  # (one flag read back: a stream synchronisation on CuPy)
            first = int(idx[bad][0])
            raise RuntimeError(
                f"Found an invalid max index: {first} (output volumes are of size "
                f"{'x'.join(map(str, sizes))})"
            )
        base = xp.arange(idx.shape[0], dtype=np.int64).reshape(-1, 1) * plane
        return (idx + base).reshape(-1)

    return h


def _d_max_pool(n: Any, g: Any) -> tuple:
    (x,) = n.saved
    return (x._apply("max_pool_grad", [x, g], n.attrs),)


def _d_max_pool_grad(n: Any, g: Any) -> tuple:
    (x,) = n.saved
    return (None, x._apply("max_pool_pick", [x, g], n.attrs))


def _d_max_pool_pick(n: Any, g: Any) -> tuple:
    (x,) = n.saved
    return (None, x._apply("max_pool_grad", [x, g], n.attrs))


def _grad_dtype(dtypes: list, attrs: Any) -> str:
    return dtypes[1]


def _first(inputs: tuple, out: Any) -> tuple:
    return (inputs[0],)


ENTRIES: list[Op] = [
    Op(
        "max_pool",
        166,
        shape=_pooled_shape,
        dtype=first_dtype,
        kernel=_k_max_pool,
        grad=_d_max_pool,
        saves="inputs",
        doc="max pooling of [N, C, *spatial] (1 to 3-d), PyTorch's pick (first maximum, last NaN)",
    ),
    Op(
        "max_pool_indices",
        167,
        shape=_pooled_shape,
        dtype=int64_dtype,
        kernel=_k_max_pool_indices,
        doc="the flat position in its input plane of each max-pooling pick (return_indices)",
    ),
    Op(
        "max_pool_grad",
        168,
        arity=2,
        shape=_routed_shape,
        dtype=_grad_dtype,
        kernel=_k_max_pool_grad,
        grad=_d_max_pool_grad,
        saves=_first,
        doc="max pooling's gradient: g sent to the picked positions of x",
    ),
    Op(
        "max_pool_pick",
        169,
        arity=2,
        shape=_picked_shape,
        dtype=_grad_dtype,
        kernel=_k_max_pool_pick,
        grad=_d_max_pool_pick,
        saves=_first,
        doc="h read at each window's max-pooling pick of x (max_pool_grad's adjoint)",
    ),
    Op(
        "max_unpool_positions",
        170,
        shape=_unpool_shape,
        dtype=int64_dtype,
        kernel=_k_max_unpool_positions,
        doc="max unpooling's flat write positions; refuses an index outside its plane",
    ),
]
