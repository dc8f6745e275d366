"""Registry entries: reshaping, permuting, broadcasting, indexing and joining.

Index keys travel as lists of items (see :func:`gt.runtime.ops.base.build_key`); index tensors
are extra arguments after the indexed tensor (and, for ``setitem``, after the value).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.runtime.ops import index_keys
from gt.runtime.ops.base import (
    Op,
    Shape,
    build_key,
    dense_layout,
    first_dtype,
    has_advanced,
    private,
    same_shape,
    sum_to,
)


def key_items(key: list, index_shapes: list) -> tuple:
    """A NumPy index standing in for a wire key (index tensors become zero arrays of their shape,
    one element each)."""
    out: list = []
    for item in key:
        tag = item[0]
        if tag == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif tag == "i":
            out.append(int(item[1]))
        elif tag == "n":
            out.append(None)
        elif tag == "e":
            out.append(Ellipsis)
        elif tag == "l":
            out.append(np.asarray(item[1], dtype=np.int64))
        elif tag == "t":
            out.append(S.index_stand_in(index_shapes[item[1]]))
        else:
            raise ValueError(f"bad index item {item!r}")
    return tuple(out)


def _getitem_shape(shapes: list, attrs: Any) -> Shape:
    return S.index_shape(shapes[0], key_items(attrs["key"], shapes[1:]))


def _transpose_shape(shapes: list, attrs: Any) -> Shape:
    return tuple(shapes[0][p] for p in attrs["perm"])


def _concat_shape(shapes: list, attrs: Any) -> Shape:
    return S.concat(shapes, attrs["axis"] % len(shapes[0]))


def _reshape_shape(shapes: list, attrs: Any) -> Shape:
    return S.reshape(shapes[0], attrs["shape"])


def _expand_shape(shapes: list, attrs: Any) -> Shape:
    return S.expand(shapes[0], attrs["shape"])


# ----------------------------------------------------------------------------- derivatives
def _d_transpose(n: Any, g: Any) -> tuple:
    perm = n.attrs["perm"]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    out = g.permute(inv)
    x = n.saved[0] if n.saved else None
    if getattr(g, "_st", False) is None and hasattr(x, "_st"):
        # PyTorch's gradient of a permuted tensor is mostly laid out as that tensor (an
        # elementwise op's derivative keeps its operands' layout), so permuted back it has the
        # input's layout; GT's elementwise results are row-major, which permuted back would
        # report the permuted strides (``autograd.grad`` of ``x.permute(..).exp().sum()`` would
        # refuse ``g.view(n, -1)``). The input's strides, as ``.grad`` takes them (a matmul's
        # row-major gradient, which PyTorch hands back non-contiguous, is called contiguous).
        out._st = None if x._st is None else dense_layout(tuple(x.shape), tuple(x.stride()))
    return (out,)


def _d_getitem(n: Any, g: Any) -> tuple:
    idx = n.saved
    z = g.new_zeros(n.shapes[0])
    if g.requires_grad:  # backward with create_graph: the scatter must be recorded too
        return (z._apply("scatter_add", [z, g, *idx], {"key": n.attrs["key"]}),) + (None,) * len(
            idx
        )
    # Into the fresh zeros, in place (the output id is z's own), so the worker writes into them.
    z._apply_("index_add", [z, g, *idx], {"key": n.attrs["key"], "inplace": True})
    return (z,) + (None,) * len(idx)


def _d_setitem(n: Any, g: Any) -> tuple:
    idx = n.saved
    key = n.attrs["key"]
    gx = g._apply("setitem", [g, 0.0, *idx], {"key": key}) if n.needs(0) else None
    gv = sum_to(g._apply("getitem", [g, *idx], {"key": key}), n.shapes[1]) if n.needs(1) else None
    return (gx, gv) + (None,) * len(idx)


def _d_concat(n: Any, g: Any) -> tuple:
    axis = n.attrs["axis"] % len(n.shapes[0])
    out = []
    start = 0
    lead = (slice(None),) * axis
    for i, s in enumerate(n.shapes):
        size = s[axis]
        out.append(g[lead + (slice(start, start + size),)] if n.needs(i) else None)
        start += size
    return tuple(out)


# ----------------------------------------------------------------------------- kernels
def _k_reshape(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.reshape(v[0], tuple(at["shape"]))


def _k_transpose(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.transpose(v[0], tuple(at["perm"]))


def _k_expand(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.broadcast_to(v[0], tuple(at["shape"]))


# ----------------------------------------------------------------------------- bounds checks
def index_arrays(key: list, tensors: list, ndim: int) -> list[tuple[int, Any, bool]]:
    """``(axis, index, on_host)`` for every integer index array of a wire key: an int list
    (``on_host``) or an integer index tensor, with the axis of the indexed array it selects
    along (a boolean mask spans as many axes as it has dimensions; ``...`` the rest)."""
    consumed = 0
    for item in key:
        if item[0] == "t":
            t = tensors[item[1]]
            consumed += t.ndim if t.dtype.kind == "b" else 1
        elif item[0] in ("s", "i", "l"):
            consumed += 1
    out: list[tuple[int, Any, bool]] = []
    axis = 0
    for item in key:
        tag = item[0]
        if tag == "e":
            axis += ndim - consumed
        elif tag == "t":
            t = tensors[item[1]]
            if t.dtype.kind == "b":
                axis += t.ndim
                continue
            out.append((axis, t, False))
            axis += 1
        elif tag == "l":
            out.append((axis, item[1], True))
            axis += 1
        elif tag in ("s", "i"):
            axis += 1
    return out


def _out_of_range(axis: int, dim: int, value: Any) -> IndexError:
    return IndexError(f"index {int(value)} is out of bounds for axis {axis} with size {dim}")


def bounds_check(be: Any) -> Any:
    """A check that every integer index array of a key is in range for the indexed shape, raising
    ``IndexError`` as NumPy does; ``None`` on NumPy, which raises by itself.

    CuPy wraps out-of-range indices around instead (documented behaviour), so ``x[[7]] = 1`` on a
    3-vector would write ``x[1]``. The check runs on the device: one fused comparison and
    reduction per index tensor, and one read of the result (a stream synchronization, the price
    of raising at the op that did it); int lists are checked on the host, at no device cost.
    """
    if be.name == "numpy":
        return None
    xp = be.xp

    def check(key: list, tensors: list, shape: tuple) -> None:
        bad_any = None
        found = index_arrays(key, tensors, len(shape))
        for axis, idx, on_host in found:
            if axis >= len(shape):
                continue  # too many indices: the indexing itself raises
            dim = shape[axis]
            if on_host:
                a = np.asarray(idx, dtype=np.int64).reshape(-1)
                bad_host = (a < -dim) | (a >= dim)
                if bad_host.any():
                    raise _out_of_range(axis, dim, a[bad_host][0])
                continue
            if idx.size == 0:
                continue
            bad = xp.any((idx < -dim) | (idx >= dim))
            bad_any = bad if bad_any is None else bad_any | bad
        if bad_any is not None and bool(bad_any):  # one synchronization for every index tensor
            for axis, idx, on_host in found:
                if on_host or axis >= len(shape) or idx.size == 0:
                    continue
                dim = shape[axis]
                mask = (idx < -dim) | (idx >= dim)
                if bool(xp.any(mask)):
                    raise _out_of_range(axis, dim, idx[mask].reshape(-1)[0])

    return check


#: The ops whose out-of-range index PyTorch reports as "index out of range in self".
_IN_SELF = frozenset(
    ("index_select", "embedding", "index_add", "index_add_", "index_reduce", "index_reduce_")
)


def _refused(op: str, axis: int, dim: int, idx: Any, bad: Any) -> IndexError:
    """PyTorch's error for the first entry of ``idx`` (host or device array) that ``bad`` marks,
    an index outside ``[0, dim)`` given to ``op`` (``attrs.index_op``) along ``axis``."""
    flat = np.asarray(bad.get() if hasattr(bad, "get") else bad).reshape(-1)
    pos = int(np.argmax(flat))
    value = int(idx.reshape(-1)[pos])
    if op in _IN_SELF:
        return IndexError(f"{op}(): index out of range in self")
    if op == "masked_scatter_":  # (the source read at the count of ones so far)
        return IndexError("Number of elements of source < number of ones in mask")
    if op == "embedding_bag":
        return IndexError(
            f"embedding_bag(): Index {pos} of input takes value {value} which is not in the "
            f"valid range [0, {dim})"
        )
    return IndexError(
        f"{op}(): index {value} is out of bounds for dimension {axis} with size {dim}"
    )


def unbroadcast(a: Any) -> Any:
    """``a`` with each dimension of stride 0 (an ``expand``) cut to one entry: the same values,
    each once (a minimum of an index expanded over 128 columns read it 128 times)."""
    strides = getattr(a, "strides", None)
    if not strides or 0 not in strides:
        return a
    return a[tuple(slice(0, 1) if s == 0 else slice(None) for s in strides)]


def range_check(be: Any) -> Any:
    """The check of an indexing instruction that carries ``attrs.index_op``: every integer index
    array of its key must lie in ``[0, size)`` (the ops PyTorch made it for, ``gather``,
    ``index_select``, ``scatter_add``, ``embedding`` ..., refuse a negative index, where
    ``x[t]`` wraps it around), raising ``IndexError`` with PyTorch's message for that op.
    Instructions without it get :func:`bounds_check`'s (``None`` on NumPy).

    On CuPy it costs what :func:`bounds_check` does: one fused comparison and reduction per index
    tensor and one read of the result; on NumPy a minimum and a maximum per index array."""
    plain = bounds_check(be)
    xp = be.xp
    on_device = be.name != "numpy"

    def strict(op: str, key: list, tensors: list, shape: tuple) -> None:
        found = [f for f in index_arrays(key, tensors, len(shape)) if f[0] < len(shape)]
        bad_any = None
        for axis, idx, on_host in found:
            dim = shape[axis]
            if on_host or not on_device:
                a = np.asarray(idx, dtype=np.int64) if on_host else unbroadcast(idx)
                if a.size and (a.min() < 0 or a.max() >= dim):
                    raise _refused(op, axis, dim, a, (a < 0) | (a >= dim))
                continue
            if idx.size:
                bad = xp.any((idx < 0) | (idx >= dim))
                bad_any = bad if bad_any is None else bad_any | bad
        if bad_any is not None and bool(bad_any):  # one synchronization for every index tensor
            for axis, idx, on_host in found:
                if not on_host and idx.size:
                    mask = (idx < 0) | (idx >= shape[axis])
                    if bool(xp.any(mask)):
                        raise _refused(op, axis, shape[axis], idx, mask)

    def check(at: dict, tensors: list, shape: tuple) -> None:
        op = at.get("index_op")
        if op is not None:
            strict(op, at["key"], tensors, shape)
        elif plain is not None:
            plain(at["key"], tensors, shape)

    return check


# ----------------------------------------------------------------------------- indexing kernels
def _torch_order(x: Any, key: tuple) -> tuple[Any, tuple]:
    """``(a, k)`` with ``a[k]`` PyTorch's ``x[key]``: the integers of a key that mixes them with
    advanced indices are applied first, as a view (see :func:`gt.shapes.split_int_indices`)."""
    split = S.split_int_indices(key)
    return (x, key) if split is None else (x[split[0]], split[1])


def _at(x: Any, key: tuple) -> Any:
    target, k = _torch_order(x, key)
    return target[k]


def _k_getitem(be: Any) -> Any:
    check = range_check(be)
    fast = be.name == "numpy"

    def h(v: list, at: dict) -> Any:
        if not fast or "index_op" in at:  # (NumPy raises by itself for an index past the end)
            check(at, v[1:], v[0].shape)
        key = build_key(at["key"], v[1:])
        if fast and len(v) > 1:  # (gather's key: as rows, or from flat memory, where it can)
            got = index_keys.take(v[0], key)
            if got is not None:
                return got
        return _at(v[0], key)

    return h


def _k_setitem(be: Any) -> Any:
    check = range_check(be)
    xp_array, asarray = be.xp.ndarray, be.xp.asarray

    def h(v: list, at: dict) -> Any:
        # Write into the array only when the client asked for it (out id == input id) and no other
        # tensor can observe it; otherwise work on a copy, so tensors never share values.
        x = v.pop(0)  # so the argument list no longer refers to it
        if not isinstance(x, xp_array):  # (NumPy's scalar of a full index, ``x[1]``: 0-d)
            x = asarray(x)
        check(at, v[1:], x.shape)
        if not (at.get("inplace") and private(x)):
            x = x.copy()
        target, key = _torch_order(x, build_key(at["key"], v[1:]))
        target[key] = v[0]
        return x

    return h


def _k_index_add(be: Any) -> Any:
    scatter_add = be.scatter_add
    check = range_check(be)

    def h(v: list, at: dict) -> Any:
        out = v.pop(0)
        check(at, v[1:], out.shape)
        if not (at.get("inplace") and private(out)):
            out = out.copy()
        target, key = _torch_order(out, build_key(at["key"], v[1:]))
        if not has_advanced(at["key"]):
            target[key] += v[0]  # basic indexing selects each element once
        else:  # repeated indices accumulate
            scatter_add(target, key, v[0])
        return out

    return h


def _k_concat(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.concatenate(v, axis=at["axis"])


# ----------------------------------------------------------------------------- bit views
def itemsize(dtype: str) -> int:
    """Bytes per element of GT's dtype ``dtype`` (bfloat16 without asking NumPy)."""
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def _view_dtype_shape(shapes: list, attrs: Any) -> Shape:
    """``x.view(dtype)``'s shape: the last dim scaled by the ratio of the element sizes."""
    shape = tuple(shapes[0])
    old, new = itemsize(attrs["from"]), itemsize(attrs["dtype"])
    if old == new:
        return shape
    if not shape:
        raise ShapeError(f"view_dtype: a 0-d tensor cannot be viewed as {attrs['dtype']}")
    last = shape[-1] * old
    if last % new:
        raise ShapeError(
            f"view_dtype: the last dim ({shape[-1]} x {old} bytes) is not a whole number of "
            f"{attrs['dtype']} elements"
        )
    return (*shape[:-1], last // new)


def _k_view_dtype(be: Any) -> Any:
    gpu = be.name != "numpy"

    def run(v: list, at: Any) -> Any:
        x, dt = v[0], be.dtype(at["dtype"])
        size = np.dtype(dt).itemsize
        if x.dtype.itemsize != size and x.ndim and x.shape[-1] != 1:
            if x.strides[-1] != x.dtype.itemsize:  # (the client's strides are bookkeeping)
                x = be.xp.ascontiguousarray(x)
        if gpu and size > x.dtype.itemsize and _misaligned(x, size):
            x = x.copy()  # CuPy does not check; a misaligned wide load faults on the device
        try:
            return x.view(dt)  # a view sharing the input's memory (written only after a copy)
        except ValueError:  # a layout NumPy or CuPy cannot reinterpret in place
            return be.xp.ascontiguousarray(x).view(dt)

    return run


def _misaligned(x: Any, size: int) -> bool:
    """Whether a device array's start or outer strides are not multiples of ``size`` bytes."""
    return bool(x.data.ptr % size) or any(st % size for st in x.strides[:-1])


ENTRIES: list[Op] = [
    Op(
        "reshape",
        41,
        shape=_reshape_shape,
        dtype=first_dtype,
        kernel=_k_reshape,
        grad=lambda n, g: (g.reshape(n.shapes[0]),),
        shard="reshape",
        doc="the same values in attrs.shape",
    ),  # fmt: skip
    Op(
        "transpose",
        42,
        shape=_transpose_shape,
        dtype=first_dtype,
        kernel=_k_transpose,
        grad=_d_transpose,
        saves="inputs",
        shard="transpose",
        doc="axes permuted by attrs.perm",
    ),  # fmt: skip
    Op(
        "expand",
        43,
        shape=_expand_shape,
        dtype=first_dtype,
        kernel=_k_expand,
        grad=lambda n, g: (sum_to(g, n.shapes[0]),),
        shard="expand",
        doc="broadcast to attrs.shape (no copy)",
    ),  # fmt: skip
    Op(
        "getitem",
        44,
        arity=None,
        shape=_getitem_shape,
        dtype=first_dtype,
        kernel=_k_getitem,
        grad=_d_getitem,
        saves=lambda ins, out: ins[1:],
        shard="getitem",
        doc="x[attrs.key]; index tensors follow x",
    ),  # fmt: skip
    Op(
        "setitem",
        45,
        arity=None,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_setitem,
        grad=_d_setitem,
        saves=lambda ins, out: ins[2:],
        doc="x with x[attrs.key] = v; index tensors follow v",
    ),  # fmt: skip
    Op(
        "concat",
        46,
        arity=None,
        shape=_concat_shape,
        dtype=first_dtype,
        kernel=_k_concat,
        grad=_d_concat,
        shard="concat",
        doc="inputs joined along attrs.axis",
    ),  # fmt: skip
    Op(
        "index_add",
        47,
        arity=None,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_index_add,
        doc="x with v added at x[attrs.key] (repeated indices accumulate)",
    ),  # fmt: skip
    Op(
        "view_dtype",
        157,
        shape=_view_dtype_shape,
        dtype=lambda dtypes, attrs: attrs["dtype"],
        kernel=_k_view_dtype,
        shard="elementwise",
        doc="x's bytes seen as attrs.dtype (from attrs['from']); the last dim scales with the sizes",
    ),  # fmt: skip
]
