"""Registry entries: running extremes (``cummax``, ``cummin``: the indices; the client gathers the
values, so their gradient is the gather's) and ``logcumsumexp``.

The kernels scan with ``ceil(log2(n))`` shifted elementwise steps along the axis (Hillis and
Steele), which both NumPy and CuPy run as array operations. Indices follow PyTorch: on ties the
latest position wins (its ``>=``), and from the first NaN on, the running value is NaN with that
NaN's index. ``logcumsumexp``'s derivative is computed in log space from the result (two reverse
scans, of the positive and the negative parts of the incoming gradient), so it stays finite where
``exp`` would overflow and is itself differentiable. Complex ``logcumsumexp`` (Heinsen's scan of
signed values) accumulates in order, as PyTorch does: the branch of the log it ends on depends on
the order.
"""

from __future__ import annotations

import math
from typing import Any

from gt import shapes as S
from gt.runtime.ops import return_types
from gt.runtime.ops.base import Op, Shape, first_dtype, int64_dtype

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _axis_shape(shapes: list, attrs: Any) -> Shape:
    S.normalize_axis(attrs["axis"], max(len(shapes[0]), 1), "axis")
    return shapes[0]


def scan(xp: Any, x: Any, axis: int, op: Any) -> Any:
    """Inclusive scan of ``op`` (associative, elementwise) along ``axis``."""
    if x.ndim == 0:
        return x.copy()
    y = xp.moveaxis(x, axis, -1).copy()
    n, d = y.shape[-1], 1
    while d < n:
        y[..., d:] = op(y[..., d:], y[..., :-d])
        d *= 2
    return xp.moveaxis(y, -1, axis)


def running_extreme_indices(xp: Any, x: Any, axis: int, smallest: bool) -> Any:
    """Where each running maximum (``smallest``: minimum) along ``axis`` was found."""
    if x.ndim == 0:
        return xp.zeros((), dtype=xp.int64)
    if x.dtype == xp.bool_:
        x = x.astype(xp.uint8)
    best = scan(xp, x, axis, xp.minimum if smallest else xp.maximum)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    positions = xp.arange(x.shape[axis], dtype=xp.int64).reshape(shape)
    found = x == best
    if x.dtype.kind == "f":
        nan = xp.isnan(x)
        found |= nan & (xp.cumsum(nan, axis=axis) == 1)  # only the first NaN takes over
    return scan(xp, xp.where(found, positions, 0), axis, xp.maximum)


def _k_extreme(smallest: bool) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp
        return lambda v, at: running_extreme_indices(xp, v[0], at["axis"], smallest)

    return make


def complex_logaddexp(xp: Any) -> Any:
    """PyTorch's ``log(exp(new) + exp(acc))`` for complex numbers: ``log1p(exp(lo - hi)) + hi``
    with ``hi`` the one of larger real part (ties: ``new``), both ``-inf``: ``lo``."""

    def op(new: Any, acc: Any) -> Any:
        acc_hi = new.real < acc.real
        hi, lo = xp.where(acc_hi, acc, new), xp.where(acc_hi, new, acc)
        inf = xp.isinf(lo.real) & (lo.real == hi.real)
        out = xp.log1p(xp.exp(xp.where(inf, 0, lo) - xp.where(inf, 0, hi))) + hi
        out = xp.where(inf & (hi.real < 0), lo, out)  # exp is 0 whatever the angle
        both_big = inf & (hi.real > 0)
        big = xp.log(xp.exp(xp.where(both_big, lo, 0)) + xp.exp(xp.where(both_big, hi, 0)))
        return xp.where(both_big, big, out)

    if not hasattr(xp, "errstate"):
        return op

    def quiet_op(new: Any, acc: Any) -> Any:  # (exp of a complex infinity)
        with xp.errstate(invalid="ignore", over="ignore"):
            return op(new, acc)

    return quiet_op


def _k_logcumsumexp(be: Any) -> Any:
    xp = be.xp
    complex_op = complex_logaddexp(xp)

    def h(v: list, at: Any) -> Any:
        x = v[0]
        if x.ndim == 0:
            return x.copy()
        if x.dtype.kind != "c":
            return scan(xp, x, at["axis"], xp.logaddexp)
        # in order, as PyTorch does: the imaginary part (which branch of the log) depends on it
        y = xp.moveaxis(x, at["axis"], 0).copy()
        for i in range(1, y.shape[0]):
            y[i] = complex_op(y[i], y[i - 1])
        return xp.moveaxis(y, 0, at["axis"])

    return h


def _reverse_logcumsumexp(t: Any, axis: int) -> Any:
    return t.flip(axis).logcumsumexp(axis).flip(axis)


def _d_logcumsumexp(n: Any, g: Any) -> tuple:
    # d out_j / d x_i = exp(x_i - out_j) for i <= j, so grad_i = exp(x_i) sum_{j >= i} g_j e^-out_j:
    # summed in log space, the positive and the negative parts of g apart.
    x, out = n.saved
    ax = n.attrs["axis"]
    if x.ndim == 0:
        return (g,)
    if g.dtype in S.COMPLEX_DTYPES:  # (conjugated around by the engine) no sign split needed
        return ((x + _reverse_logcumsumexp(g.log() - out, ax)).exp(),)
    if g.requires_grad:
        # Recorded (a gradient of this gradient will be taken with respect to g: forward mode's
        # double backward, at g = 0, where the log-space sum has no slope). A form linear in g,
        # shifted by the largest output (x_i <= out_j <= m for i <= j): exact unless the outputs
        # span more than float's exponent range.
        m = out.amax(ax, keepdim=True).detach()
        tail = (g * (m - out).exp()).flip(ax).cumsum(ax).flip(ax)
        return ((x - m).exp() * tail,)
    floor = -math.inf
    pos = (g.clamp(min=0.0).log() - out).nan_to_num(nan=floor, neginf=floor)
    neg = ((-g).clamp(min=0.0).log() - out).nan_to_num(nan=floor, neginf=floor)
    up = (x + _reverse_logcumsumexp(pos, ax)).exp()
    down = (x + _reverse_logcumsumexp(neg, ax)).exp()
    return (up - down,)


def logcumsumexp_api(x: Any, dim: int) -> Any:
    """``log(cumsum(exp(x)))`` along ``dim``, stable (``torch.logcumsumexp``)."""
    if x.dtype not in _FLOATS and x.dtype not in S.COMPLEX_DTYPES:
        raise TypeError(f"logcumsumexp: expected a floating point tensor, not {x.dtype}")
    ax = S.normalize_axis(dim, max(x.ndim, 1), "logcumsumexp") if x.ndim else 0
    return x._apply("logcumsumexp", [x], {"axis": ax})


def _extreme_api(name: str) -> Any:
    def api(x: Any, dim: int) -> Any:
        ax = S.normalize_axis(dim, max(x.ndim, 1), name) if x.ndim else 0
        indices = x._apply(f"{name}_indices", [x], {"axis": ax})
        values = x.gather(ax, indices) if x.ndim else x.clone()
        node = values._node
        if node is not None:  # PyTorch's node name (CummaxBackward0), the gather's gradient
            node.label = f"{name.capitalize()}Backward0"
        return return_types.TYPES[name](values, indices)

    api.__name__ = name
    api.__doc__ = (f"The running {'maximum' if name == 'cummax' else 'minimum'} along ``dim`` and "
                   "where each was found (``values, indices``; ties: the latest).")  # fmt: skip
    return api


ENTRIES: list[Op] = [
    Op("cummax_indices", 117, shape=_axis_shape, dtype=int64_dtype, kernel=_k_extreme(False),
       methods=("cummax",), api=_extreme_api("cummax"),
       doc="index of the running maximum along attrs.axis (ties: the latest; NaN wins)"),
    Op("cummin_indices", 118, shape=_axis_shape, dtype=int64_dtype, kernel=_k_extreme(True),
       methods=("cummin",), api=_extreme_api("cummin"),
       doc="index of the running minimum along attrs.axis (ties: the latest; NaN wins)"),
    Op("logcumsumexp", 119, shape=_axis_shape, dtype=first_dtype, kernel=_k_logcumsumexp,
       grad=_d_logcumsumexp, saves=lambda inputs, out: (inputs[0], out._alias()),
       methods=("logcumsumexp",), api=logcumsumexp_api,
       doc="log(cumsum(exp(x))) along attrs.axis, by a log-step scan"),
]  # fmt: skip
