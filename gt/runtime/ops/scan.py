"""Registry entries: products (``prod``, ``cumprod``) and the exact derivative they share.

The derivative of a product with respect to one factor is the product of the others, which
``out / x`` gets wrong (NaN) where a factor is zero. ``cumprod_grad`` computes the gradient of
``sum(g * cumprod(x))`` exactly, zeros included, with one pass from each end along the axis; the
gradient of ``prod`` over an axis is that of the cumulative product's last element.

Second derivatives run through ``cumprod_grad``'s own rule, two more one-pass scans, also without a
division: ``cumprod_grad(x, g)`` is ``J(x)^T g`` (``J`` the Jacobian of ``cumprod``), so its
derivative towards ``g`` is the forward-mode product ``J(x) u`` (``cumprod_jvp``) and towards ``x``
the gradient of ``<g, J(x) u>`` (``cumprod_grad_grad``). Third derivatives are not implemented.
"""

from __future__ import annotations

from typing import Any

from gt import shapes as S
from gt.runtime.ops.base import Op, Shape, first_dtype, half_in_float32
from gt.runtime.ops.reduce import reduce_axes

_SMALL_INTS = ("bool", "uint8", "int8", "int16", "int32", *S.LIMITED_UINTS)


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
    xp, cpu = be.xp, be.name == "numpy"

    def h(v: list, at: Any) -> Any:
        x = v[0]
        if x.dtype.itemsize == 2 and x.dtype.kind in "fV" and x.size:
            return _half_prod(xp, x, at) if cpu else _half_prod_gpu(xp, x, at)
        dt = xp.int64 if x.dtype.kind in "biu" and x.dtype != xp.int64 else None
        if not at:
            return xp.asarray(xp.prod(x, dtype=dt))
        return xp.asarray(
            xp.prod(x, axis=at.get("axis"), keepdims=at.get("keepdims", False), dtype=dt)
        )

    return h


def _half_prod(xp: Any, x: Any, at: Any) -> Any:
    """A half-precision product as PyTorch's CPU kernel makes it: one factor after another, each
    partial product rounded to half (a running product's last value)."""
    axis = at.get("axis") if at else None
    if axis is None:
        keep = bool(at and at.get("keepdims"))
        return xp.cumprod(x.reshape(-1))[-1:].reshape((1,) * x.ndim if keep else ())
    if x.shape[axis] == 0:
        return xp.prod(x, axis=axis, keepdims=at.get("keepdims", False))
    last = xp.take(xp.cumprod(x, axis=axis), [x.shape[axis] - 1], axis=axis)
    return last if at.get("keepdims", False) else xp.squeeze(last, axis=axis)


def _half_prod_gpu(xp: Any, x: Any, at: Any) -> Any:
    """A half-precision product as PyTorch's CUDA kernel makes it: accumulated in float32, rounded
    once (CuPy's ``cumprod`` is a tree scan, so the CPU's running product cannot be had there)."""
    axis = at.get("axis") if at else None
    keep = bool(at and at.get("keepdims"))
    return xp.prod(x.astype(xp.float32), axis=axis, keepdims=keep).astype(x.dtype)


def _k_cumprod(be: Any) -> Any:
    xp, cpu = be.xp, be.name == "numpy"

    def h(v: list, at: Any) -> Any:
        x = v[0]
        dt = xp.int64 if x.dtype.kind in "biu" and x.dtype != xp.int64 else None
        if cpu and x.dtype in (xp.float32, xp.complex64):
            # running products kept in double, each rounded once (as PyTorch on the CPU; its
            # CUDA kernels scan in float, as CuPy's do)
            wide = xp.float64 if x.dtype == xp.float32 else xp.complex128
            return xp.cumprod(x, axis=at["axis"], dtype=wide).astype(x.dtype)
        return xp.cumprod(x, axis=at["axis"], dtype=dt)

    return h


def _k_cumprod_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, g = xp.moveaxis(v[0], at["axis"], 0), xp.moveaxis(v[1], at["axis"], 0)
        n = x.shape[0]
        if n == 0:  # (an empty scan: an empty gradient)
            return xp.zeros_like(v[0])
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


def _along_front(xp: Any, arrays: list, axis: int) -> list:
    return [xp.moveaxis(a, axis, 0) for a in arrays]


def _k_cumprod_jvp(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, u = _along_front(xp, v, at["axis"])
        if x.shape[0] == 0:
            return xp.zeros_like(v[0])
        # c_j = c_{j-1} x_j, so dc_j = dc_{j-1} x_j + c_{j-1} u_j: exact where factors are 0.
        c = xp.cumprod(x, axis=0)
        d = xp.empty_like(x)
        d[0] = u[0]
        for j in range(1, x.shape[0]):
            d[j] = d[j - 1] * x[j] + c[j - 1] * u[j]
        return xp.ascontiguousarray(xp.moveaxis(d, 0, at["axis"]))

    return h


def _k_cumprod_grad_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, g, u = _along_front(xp, v, at["axis"])
        n = x.shape[0]
        if n == 0:
            return xp.zeros_like(v[0])
        # F = sum_j g_j D_j with D = J(x) u from the recurrence of cumprod_jvp; reverse mode
        # through it: b_j = dF/dD_j, a_j = dF/dc_j, dF/dx_j = a_j c_{j-1} + b_j D_{j-1}.
        c = xp.cumprod(x, axis=0)
        d = xp.empty_like(x)
        d[0] = u[0]
        for j in range(1, n):
            d[j] = d[j - 1] * x[j] + c[j - 1] * u[j]
        a, b = xp.zeros_like(x), xp.empty_like(x)
        b[n - 1] = g[n - 1]
        for j in range(n - 2, -1, -1):
            b[j] = g[j] + b[j + 1] * x[j + 1]
            a[j] = a[j + 1] * x[j + 1] + b[j + 1] * u[j + 1]
        out = xp.empty_like(x)
        out[0] = a[0]  # c_{-1} = 1 and D_{-1} = 0
        if n > 1:
            out[1:] = a[1:] * c[:-1] + b[1:] * d[:-1]
        return xp.ascontiguousarray(xp.moveaxis(out, 0, at["axis"]))

    return h


def _d_cumprod_grad(n: Any, u: Any) -> tuple:
    x, g = n.saved
    at = {"axis": n.attrs["axis"]}
    return (x._apply("cumprod_grad_grad", [x, g, u], at), x._apply("cumprod_jvp", [x, u], at))


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
        kernel=half_in_float32(_k_cumprod),
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
        grad=_d_cumprod_grad,
        saves="inputs",
        shard=None,  # two operands: the along-axis rules place only the first
        doc="gradient of sum(g * cumprod(x)) w.r.t. x along attrs.axis (exact at zeros)",
    ),
    # cumprod_grad's derivative: backward-only scans along attrs.axis, not differentiable again
    *(
        Op(name, code, arity=arity, shape=axis_shape, dtype=first_dtype, kernel=kernel, doc=doc)
        for name, code, arity, kernel, doc in (
            ("cumprod_jvp", 149, 2, _k_cumprod_jvp, "J(x) u, J the Jacobian of cumprod (in g)"),
            ("cumprod_grad_grad", 150, 3, _k_cumprod_grad_grad, "grad in x of <g, J(x) u>"),
        )
    ),
]
