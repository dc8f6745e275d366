"""Registry entries: products (``prod``, ``cumprod``) and the exact derivative they share.

The derivative of a product with respect to one factor is the product of the others, which
``out / x`` gets wrong (NaN) where a factor is zero. ``cumprod_grad`` computes the gradient of
``sum(g * cumprod(x))`` exactly, zeros included, with one pass from each end along the axis; the
gradient of ``prod`` over an axis is that of the cumulative product's last element.
"""

from __future__ import annotations

from typing import Any

from gt import shapes as S
from gt.runtime.ops.base import Op, Shape, first_dtype
from gt.runtime.ops.reduce import reduce_axes

_SMALL_INTS = ("bool", "uint8", "int8", "int16", "int32")


def axis_shape(shapes: list, attrs: Any) -> Shape:
    """The input's shape, once attrs.axis is checked against it (ops along one axis)."""
    S.normalize_axis(attrs["axis"], len(shapes[0]), "axis")
    return shapes[0]


def _prod_shape(shapes: list, attrs: Any) -> Shape:
    axes, keep = reduce_axes(attrs, len(shapes[0]))
    return S.reduce(shapes[0], axes if shapes[0] else None, keep)


def _int64_for_small_ints(dtypes: list, attrs: Any) -> str:
    d = first_dtype(dtypes, attrs)
    return "int64" if d in _SMALL_INTS else d


def _k_prod(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        dt = xp.int64 if x.dtype.kind in "biu" and x.dtype != xp.int64 else None
        if not at:
            return xp.asarray(xp.prod(x, dtype=dt))
        return xp.asarray(
            xp.prod(x, axis=at.get("axis"), keepdims=at.get("keepdims", False), dtype=dt)
        )

    return h


def _k_cumprod(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        dt = xp.int64 if x.dtype.kind in "biu" and x.dtype != xp.int64 else None
        return xp.cumprod(x, axis=at["axis"], dtype=dt)

    return h


def _k_cumprod_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, g = xp.moveaxis(v[0], at["axis"], 0), xp.moveaxis(v[1], at["axis"], 0)
        n = x.shape[0]
        # d/dx_i sum_j g_j prod_{k<=j} x_k = (prod_{k<i} x_k) * s_i, s_i = g_i + x_{i+1} s_{i+1}.
        before = xp.ones_like(x)
        if n > 1:
            before[1:] = xp.cumprod(x[:-1], axis=0)
        s = xp.empty_like(x)
        s[n - 1] = g[n - 1]
        for i in range(n - 2, -1, -1):
            s[i] = g[i] + x[i + 1] * s[i + 1]
        return xp.ascontiguousarray(xp.moveaxis(before * s, 0, at["axis"]))

    return h


def _d_cumprod(n: Any, g: Any) -> tuple:
    x = n.saved[0]
    return (x._apply("cumprod_grad", [x, g], {"axis": n.attrs["axis"]}),)


def _cat(a: Any, b: Any, axis: int) -> Any:
    return a._apply("concat", [a, b], {"axis": axis})


def _d_prod(n: Any, g: Any) -> tuple:
    x = n.saved[0]
    shape = n.shapes[0]
    axes, _ = reduce_axes(n.attrs, len(shape))
    if not shape:
        return (g,)
    if axes is None or len(shape) == 1:
        x, ax, shape_kd = x.reshape(-1), 0, (1,)
    else:
        (ax,) = axes
        shape_kd = tuple(1 if i == ax else d for i, d in enumerate(shape))
    size = x.shape[ax]
    # Only the last running product is the result: its gradient is g, the others' zero.
    last = g.reshape(shape_kd)
    if size > 1:
        lead = tuple(size - 1 if i == ax else d for i, d in enumerate(shape_kd))
        last = _cat(last.new_zeros(lead), last, ax)
    out = x._apply("cumprod_grad", [x, last], {"axis": ax})
    return (out.reshape(shape),)


ENTRIES: list[Op] = [
    Op(
        "prod",
        75,
        shape=_prod_shape,
        dtype=_int64_for_small_ints,
        kernel=_k_prod,
        grad=_d_prod,
        saves="inputs",
        shard="reduce",
        doc="product over attrs.axis (one axis or all); exact derivative where factors are 0",
    ),
    Op(
        "cumprod",
        76,
        shape=axis_shape,
        dtype=_int64_for_small_ints,
        kernel=_k_cumprod,
        grad=_d_cumprod,
        saves="inputs",
        shard="along_axis",
        doc="running products along attrs.axis",
    ),
    Op(
        "cumprod_grad",
        77,
        arity=2,
        shape=axis_shape,
        dtype=first_dtype,
        kernel=_k_cumprod_grad,
        shard=None,  # two operands: the along-axis rules place only the first
        doc="gradient of sum(g * cumprod(x)) w.r.t. x along attrs.axis (exact at zeros)",
    ),
]
