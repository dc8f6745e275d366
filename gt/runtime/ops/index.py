"""Registry entries: differentiable scatter.

``scatter_add`` adds ``src`` into a copy of ``x`` at an index key (repeated indices accumulate),
with the same wire keys as ``getitem``. Its derivative is ``g`` for ``x`` and ``g[key]`` for
``src``; ``gt.Tensor.scatter_add``, ``index_add`` and ``scatter_reduce(reduce="sum")`` compose it.
(``index_add``, which backward itself uses, stays non-differentiable.)

``scatter_reduce`` combines ``src`` into a copy of ``x`` with ``attrs.reduce``: ``amax``,
``amin`` or ``prod`` (repeated indices combine). Its derivatives are PyTorch's: a maximum's
gradient is shared evenly among the entries that tie for it, ``x``'s included; a product's is
the product of the others, exact where one factor is zero.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, build_key, first_dtype, private, same_shape, sum_to
from gt.runtime.ops.shape import _k_index_add, range_check


def _d_scatter_add(n: Any, g: Any) -> tuple:
    idx = n.saved
    gx = g if n.needs(0) else None
    gs = None
    if n.needs(1):
        gs = sum_to(g._apply("getitem", [g, *idx], {"key": n.attrs["key"]}), n.shapes[1])
    return (gx, gs) + (None,) * len(idx)


def _k_scatter_reduce(be: Any) -> Any:
    xp = be.xp
    check = range_check(be)
    extreme = {"amax": be.scatter_max, "amin": be.scatter_min}
    multiply_at = getattr(xp.multiply, "at", None) if be.name == "numpy" else None

    def h(v: list, at: dict) -> Any:
        x = v.pop(0)  # (so the argument list no longer refers to it: see ``private``)
        src, idx = v[0], v[1:]
        check(at, idx, x.shape)
        # written in place when the client asked for it (out id == input id) and nothing else
        # can observe the array (as setitem)
        out = x if at.get("inplace") and private(x) else x.copy()
        key = build_key(at["key"], idx)
        reduce = at["reduce"]
        if not at.get("include_self", True):  # addressed positions start from the identity
            out[key] = _identity(xp, reduce, out.dtype)
        if reduce in extreme:
            extreme[reduce](out, key, src)
        elif multiply_at is not None:
            multiply_at(out, key, src)
        else:  # CuPy has no multiply.at: signs, zeros and log-magnitudes added up instead
            out = _product_by_sums(be, out, key, src)
        return out

    return h


#: The dtypes ``cupy.add.at`` (and so ``cupyx.scatter_add``) accumulates in.
CUPY_ADD_AT_DTYPES = frozenset(
    ("int32", "int64", "float16", "float32", "float64", "uint32", "uint64")
)


def scatter_add_any(xp: Any, scatter_add: Any) -> Any:
    """``a[key] += v`` (repeated indices accumulating) for every dtype, given CuPy's
    ``scatter_add``, which takes only :data:`CUPY_ADD_AT_DTYPES`: complex arrays add their real
    and imaginary parts apart (views of ``a``); narrower integers and booleans accumulate in
    int64 and are cast back (wrapping as NumPy's ``add.at`` does; a bool is "any"), bfloat16 in
    float32."""

    def add(a: Any, key: Any, v: Any) -> None:
        name = a.dtype.name
        if name in CUPY_ADD_AT_DTYPES:
            scatter_add(a, key, v)
        elif a.dtype.kind == "c":
            v = xp.asarray(v, dtype=a.dtype)
            scatter_add(a.real, key, v.real)
            scatter_add(a.imag, key, v.imag)
        else:
            wide = xp.int64 if a.dtype.kind in "biu" else xp.float32
            tmp = a.astype(wide)
            scatter_add(tmp, key, xp.asarray(v).astype(wide))
            a[...] = tmp != 0 if a.dtype.kind == "b" else tmp.astype(a.dtype)

    return add


def sorted_scatter_extreme(xp: Any, reduce: str) -> Any:
    """``out[key] = max(out[key], src)`` (or min) with repeated positions combining, exact for every
    dtype and without atomics: the entries are sorted by target position and then by value (two
    stable sorts), and the last (first) entry of each run is the maximum (minimum). A NaN wins, as
    in NumPy's ``maximum.at`` and PyTorch. (CuPy workers use it: CuPy's own ``scatter_max``/``min``
    round float64 through float32, as a run on an H200 showed, and refuse int64 and float16.)"""
    best = xp.maximum if reduce == "amax" else xp.minimum

    def scatter(out: Any, key: tuple, src: Any) -> None:
        pos = xp.arange(out.size).reshape(out.shape)[key]
        if pos.size == 0:
            return
        vals = xp.broadcast_to(xp.asarray(src, dtype=out.dtype), pos.shape).reshape(-1)
        pos = pos.reshape(-1)
        order = xp.argsort(_sort_key(xp, vals), kind="stable")
        order = order[xp.argsort(pos[order], kind="stable")]
        p, v = pos[order], vals[order]
        step = p[1:] != p[:-1]
        edge = xp.ones(1, dtype=bool)
        last = xp.concatenate([step, edge])  # NaN sorts last: a run's last entry is NaN if any is
        pick = v[last] if reduce == "amax" else v[xp.concatenate([edge, step])]
        if v.dtype.kind in "fc":
            pick = xp.where(xp.isnan(v[last]), v[last], pick)
        flat = out.reshape(-1)  # ``out`` is a fresh copy, so this is a view of it
        at = p[last]
        flat[at] = best(flat[at], pick)

    return scatter


def _sort_key(xp: Any, vals: Any) -> Any:
    if vals.dtype == xp.float16:  # (exact in float32, and sorted by every CuPy)
        return vals.astype(xp.float32)
    if vals.dtype.kind == "b":
        return vals.astype(xp.uint8)
    return vals


def _identity(xp: Any, reduce: str, dtype: Any) -> Any:
    if reduce == "prod":
        return 1
    if dtype.kind in "fc":
        return -xp.inf if reduce == "amax" else xp.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = xp.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _product_by_sums(be: Any, out: Any, key: tuple, src: Any) -> Any:
    """``out`` times the product of the ``src`` entries at each position, from three
    ``scatter_add``: the count of zeros, the count of negatives and the sum of ``log|src|``."""
    xp = be.xp
    work = xp.float64 if out.dtype.kind in "biu" or out.dtype == xp.float64 else xp.float32
    zeros = xp.zeros(out.shape, work)
    negatives = xp.zeros(out.shape, work)
    logs = xp.zeros(out.shape, work)
    s = src.astype(work)
    be.scatter_add(zeros, key, (s == 0).astype(work))
    be.scatter_add(negatives, key, (s < 0).astype(work))
    be.scatter_add(logs, key, xp.log(xp.abs(xp.where(s == 0, 1.0, s))))
    sign = 1.0 - 2.0 * (negatives % 2)
    factor = xp.where(zeros > 0, 0.0, sign * xp.exp(logs))
    result = out.astype(work) * factor
    if out.dtype.kind in "biu":
        result = xp.rint(result)
    return result.astype(out.dtype)


def _d_scatter_reduce(n: Any, g: Any) -> tuple:
    x, src, *idx, y = n.saved
    key = {"key": n.attrs["key"]}

    def at_key(t: Any) -> Any:
        return t._apply("getitem", [t, *idx], key)

    if n.attrs["reduce"] == "prod":
        gx, gs = _d_product(n, g, x, src, idx, y, at_key)
    else:  # a maximum (minimum): shared evenly among the entries equal to it
        from_x = (x == y).to(g.dtype)
        from_src = (src == at_key(y)).to(g.dtype)
        count = from_x._apply("scatter_add", [from_x, from_src, *idx], key)
        share = g / count.clamp(min=1.0)
        gx, gs = share * from_x, at_key(share) * from_src
    if not n.attrs.get("include_self", True):  # x's addressed entries did not take part
        none = x.new_zeros(x.shape)
        ones = at_key(x.new_ones(x.shape))
        gx = gx * (none._apply("scatter_add", [none, ones, *idx], key) == 0).to(g.dtype)
    gs = sum_to(gs, n.shapes[1]) if n.needs(1) else None
    return (gx if n.needs(0) else None, gs) + (None,) * len(idx)


def _d_product(n: Any, g: Any, x: Any, src: Any, idx: list, y: Any, at_key: Any) -> tuple:
    attrs = n.attrs

    def reduce_into(base: Any, values: Any) -> Any:
        return base._apply("scatter_reduce", [base, values, *idx], attrs)

    # d/dx: the product of the src entries at that position (x's zeros masked out of x); as in
    # PyTorch, ties below (a maximum) and zeros here count x's entries even where include_self
    # is False, and those entries' own gradients are then dropped
    x_safe = x.masked_fill(x == 0, 1.0)
    gx = g * reduce_into(x_safe, src) / x_safe
    # d/dsrc: the product of everything else; where src holds the position's only zero, that
    # product is the result with that zero read as 1 (elsewhere y / src, which is 0 if another
    # entry is zero)
    src_zero = src == 0
    none = x.new_zeros(x.shape)
    zero_count = none._apply(
        "scatter_add", [none, src_zero.to(x.dtype), *idx], {"key": attrs["key"]}
    )
    lone_zero = src_zero & (at_key(zero_count) == 1)
    without = reduce_into(x, src.masked_fill(lone_zero, 1.0))
    gs = (at_key(g * y) / src.masked_fill(src_zero, 1.0)).where(~lone_zero, at_key(g * without))
    return gx, gs


ENTRIES: list[Op] = [
    Op(
        "scatter_add",
        81,
        arity=None,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_index_add,
        grad=_d_scatter_add,
        saves=lambda ins, out: ins[2:],
        doc="x with src added at x[attrs.key], differentiable; index tensors follow src",
    ),
    Op(
        "scatter_reduce",
        151,
        arity=None,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_scatter_reduce,
        grad=_d_scatter_reduce,
        saves=lambda inputs, out: (*inputs, out._alias()),
        doc="x with src combined in at x[attrs.key] by attrs.reduce (amax, amin, prod)",
    ),
]
