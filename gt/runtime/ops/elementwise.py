"""Registry entries: elementwise primitives (arithmetic, comparisons, math, activations, where).

Every binary op broadcasts its operands (the client has already promoted them to one dtype; an
immediate is a Python number). Kernels take ``{"inplace": True}`` when the client wrote ``x op= y``
with the output id equal to ``x``'s: the worker then writes into ``x``'s array if nothing else can
see it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gt import shapes as S
from gt.runtime.ops.base import (
    Op,
    Shape,
    bool_dtype,
    first_dtype,
    half_in_float32,
    private,
    same_shape,
    sigmoid_into,
    sum_to,
    unbroadcast,
)
from gt.runtime.ops.float_divmod import floor_divmod, is_float
from gt.runtime.ops.integer_rules import _d_floor_divide, _integer_pow, zero_divisor_checked
from gt.runtime.ops.row_broadcast import FOLDABLE, folded
from gt.runtime.ops.row_broadcast import MIN_ELEMENTS as FOLD_MIN
from gt.runtime.ops.where_kernel import k_where as _k_where

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# ----------------------------------------------------------------------------- rules
def broadcast_rule(name: str) -> Callable[[list, Any], Shape]:
    """The shape rule of an elementwise op of any arity: its operands broadcast together."""

    def rule(shapes: list, attrs: Any) -> Shape:
        out: Shape = ()
        for s in shapes:
            out = s if out == s else S.broadcast(out, s, name)
        return out

    return rule


def _binary_kernel(ufunc: str) -> Callable[[Any], Any]:
    def make(be: Any) -> Any:
        xp = be.xp
        fn = getattr(xp, ufunc)
        wide = ufunc in _OPMATH_FLOAT32
        fold = xp is np and ufunc in FOLDABLE  # (a bias added to a large array: see row_broadcast)

        def h(v: list, at: Any) -> Any:
            if wide and (type(v[1]) is float or type(v[0]) is float):
                r = _with_float32(fn, xp, v[0], v[1])
                if r is not None:
                    return r
            inplace = at is not None and at.get("inplace")
            if (
                fold
                and type(v[0]) is np.ndarray
                and type(v[1]) is np.ndarray
                and (v[0].size >= FOLD_MIN or v[1].size >= FOLD_MIN)  # (a tiny op pays no call)
            ):
                x = v.pop(0)
                r = folded(fn, x, v[0], x if inplace and private(x) else None)
                if r is not None:
                    return r
                v.insert(0, x)
            if at is None:
                return fn(v[0], v[1])
            x = v.pop(0)  # so the argument list no longer refers to it (see private())
            return fn(x, v[0], out=x) if inplace and private(x) else fn(x, v[0])

        return h

    return make


#: Arithmetic that PyTorch computes in float32 for half tensors and a Python number.
_OPMATH_FLOAT32 = frozenset(("add", "subtract", "multiply", "divide", "true_divide", "power"))


def _with_float32(fn: Any, xp: Any, a: Any, b: Any) -> Any:
    """``fn(a, b)`` of a float16 or bfloat16 array and a Python float computed in float32 and
    rounded once, as PyTorch does (a half tensor times 3.14159 does not round the 3.14159 to half
    first); None for other dtypes."""
    arr = b if type(a) is float else a
    dt = getattr(arr, "dtype", None)
    if dt is None or dt.itemsize != 2 or dt.kind not in "fV":
        return None
    wide = arr.astype(xp.float32)
    return (fn(a, wide) if arr is b else fn(wide, b)).astype(dt)


def _floor_kernel(ufunc: str, part: int) -> Callable[[Any], Any]:
    """``floor_divide`` (part 0) or ``remainder`` (part 1): on CuPy, floats take NumPy's exact
    algorithm (:mod:`.float_divmod`; CuPy's own is ``floor(a / b)``)."""
    plain = _binary_kernel(ufunc)

    def make(be: Any) -> Any:
        xp, fn = be.xp, getattr(be.xp, ufunc)
        if be.name != "cupy":
            h = plain(be)
            if part == 0:
                return h

            def numpy_remainder(v: list, at: Any) -> Any:
                a, b = v[0], v[1]
                return (
                    _zero_of_dividend(xp, h(v, at), a) if is_float(a) or is_float(b) else h(v, at)
                )

            return numpy_remainder

        def h(v: list, at: Any) -> Any:
            a, b = v[0], v[1]
            if is_float(a) or is_float(b):
                r = floor_divmod(xp, a, b)[part]
                return r if part == 0 else _zero_of_dividend(xp, r, a)
            return fn(a, b)

        return h

    return make


def _zero_of_dividend(xp: Any, r: Any, a: Any) -> Any:
    """A zero remainder with the dividend's sign, as PyTorch's (``-4 % 2`` is -0.0; NumPy gives a
    zero the divisor's sign); other remainders as they are."""
    return xp.where(r == 0, xp.copysign(r, a), r)


#: Elements per pass of a large in-place ``add_scaled`` on NumPy: ``alpha * b`` of one chunk
#: stays in the cache for the add (256 KiB of float32).
_AXPY_CHUNK = 1 << 16


def scale_of(at: Any) -> float:
    """``attrs["alpha"]`` of an ``add_scaled``: a real number (a bool, string or list is refused
    here, where it enters the worker)."""
    alpha = at.get("alpha") if type(at) is dict else None
    if type(alpha) not in (float, int):
        raise ValueError(f"add_scaled takes a number as its alpha, not {type(alpha).__name__}")
    return float(alpha)


def _axpy_chunked(xp: Any, x: Any, b: Any, alpha: float) -> Any:
    """``x += alpha * b`` in chunks, rounded as ``alpha * b`` then the sum (two passes in the
    cache instead of two over memory: PyTorch's ``add_(b, alpha=)`` is one fused pass)."""
    xf, bf = x.reshape(-1), b.reshape(-1)
    tmp = xp.empty(min(_AXPY_CHUNK, xf.size), x.dtype)
    for start in range(0, xf.size, _AXPY_CHUNK):
        stop = min(start + _AXPY_CHUNK, xf.size)
        t = tmp[: stop - start]
        xp.multiply(bf[start:stop], alpha, out=t)
        xp.add(xf[start:stop], t, out=xf[start:stop])
    return x


def _k_add_scaled(be: Any) -> Any:
    """``a + alpha * b`` (float operands of one dtype, as the client sends them); in place into
    ``a``'s array when it is private. Half operands (float16, bfloat16) are computed in float32
    and rounded once, as PyTorch's kernels do (the client sends ``alpha`` rounded to the half
    dtype, as PyTorch takes it; rounding ``alpha * b`` to half first moved 10-27 % of an SGD
    step's elements by an ulp). On NumPy, bfloat16 arrays arrive here as float32."""
    xp = be.xp
    chunks = be.name == "numpy"
    wide = xp.float32

    def h(v: list, at: Any) -> Any:
        alpha = scale_of(at)
        dt = v[0].dtype
        if dt.itemsize == 2:
            r = (v[0].astype(wide) + v[1].astype(wide) * wide(alpha)).astype(dt)
            x = v[0]
            if at.get("inplace") and private(x) and x.shape == r.shape:
                x[...] = r
                return x
            return r
        if not at.get("inplace"):
            return xp.add(v[0], xp.multiply(v[1], alpha))
        x = v.pop(0)  # so the argument list no longer refers to it (see private())
        b = v[0]
        if not private(x) or x.shape != b.shape:
            return xp.add(x, xp.multiply(b, alpha))
        if chunks and x.size > 2 * _AXPY_CHUNK and x.flags.c_contiguous and b.flags.c_contiguous:
            return _axpy_chunked(xp, x, b, alpha)
        return xp.add(x, xp.multiply(b, alpha), out=x)

    return h


def _unary_kernel(ufunc: str) -> Callable[[Any], Any]:
    def make(be: Any) -> Any:
        xp = be.xp
        fn = getattr(xp, ufunc)
        return lambda v, at: fn(v[0])

    return make


def zero_grad(n: Any, g: Any) -> tuple:
    """The derivative of a piecewise-constant op (``sign``, ``floor`` ...): PyTorch's is zero, not
    undefined (its result still requires grad)."""
    return (g.new_zeros(g.shape),)


def _k_sign(be: Any) -> Any:
    """-1, 0 or 1, and 0 for NaN as in PyTorch (NumPy's sign keeps NaN); a bool is itself."""
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        kind = x.dtype.kind
        if kind == "b":
            return x.copy()
        if kind in "iu":
            return xp.sign(x)
        return xp.where(x != x, xp.zeros((), x.dtype), xp.sign(x))

    return h


def _where(cond: Any, a: Any, b: Any) -> Any:
    """``where(cond, a, b)`` as a primitive, from any tensor among the arguments."""
    t = next(x for x in (cond, a, b) if hasattr(x, "_apply"))
    dtype = next(x.dtype for x in (a, b) if hasattr(x, "dtype"))
    return t._apply("where", [cond, a, b], {"dtype": dtype})


# ----------------------------------------------------------------------------- derivatives
def _d_add(n: Any, g: Any) -> tuple:
    return unbroadcast(n, 0, g), unbroadcast(n, 1, g)


def _d_sub(n: Any, g: Any) -> tuple:
    return unbroadcast(n, 0, g), (sum_to(-g, n.shapes[1]) if n.needs(1) else None)


def _d_add_scaled(n: Any, g: Any) -> tuple:
    alpha = n.attrs["alpha"]
    return unbroadcast(n, 0, g), (sum_to(g * alpha, n.shapes[1]) if n.needs(1) else None)


def _d_mul(n: Any, g: Any) -> tuple:
    a, b = n.saved
    return (
        sum_to(g * b, n.shapes[0]) if n.needs(0) else None,
        sum_to(g * a, n.shapes[1]) if n.needs(1) else None,
    )


def _d_div(n: Any, g: Any) -> tuple:
    a, b = n.saved
    if type(a) is float and a == 1.0 and not b.is_complex():
        # ``1 / x`` (a reciprocal): PyTorch's ``ReciprocalBackward0``, ``g * -(r * r)``
        r = 1.0 / b
        return None, sum_to(g * -(r * r), n.shapes[1])
    ga = g / b
    gb = sum_to(-(ga * (a / b)), n.shapes[1]) if n.needs(1) else None
    return (sum_to(ga, n.shapes[0]) if n.needs(0) else None), gb


def _d_pow(n: Any, g: Any) -> tuple:
    """As PyTorch: the base's gradient is 0 where the exponent is 0 (not ``0 * 0 ** -1``, nan),
    and the exponent's is 0 where the base is 0 and the exponent >= 0 (not ``0 * log 0``)."""
    a, b = n.saved
    ga = gb = None
    if n.needs(0):
        if isinstance(b, float) and b == 2.0:
            ga = g * (a * 2.0)
        elif isinstance(b, float) and b == 1.0:
            ga = g
        elif isinstance(b, (int, float)) and b == 0.0:
            ga = a.new_zeros(n.shapes[0])
        else:
            ga = g * (b * a ** (b - 1.0))
            if hasattr(b, "shape"):
                ga = _where(b == 0.0, 0.0, ga)
            ga = sum_to(ga, n.shapes[0])
    if n.needs(1):
        if hasattr(a, "log"):
            gb = _where((a == 0.0) & (b >= 0.0), 0.0, g * (a**b) * a.log())
        elif a == 0.0:
            gb = _where(b >= 0.0, 0.0, g * (a**b) * -math.inf)
        else:
            gb = g * (a**b) * math.log(a)
        gb = sum_to(gb, n.shapes[1])
    return ga, gb


def _d_extreme2(pick: str) -> Callable[[Any, Any], tuple]:
    """maximum/minimum: the gradient goes to the chosen input; ties split it evenly; an input
    that does not lose (a NaN on either side) keeps all of it, as PyTorch's rule."""

    def rule(n: Any, g: Any) -> tuple:
        a, b = n.saved
        dt = g.dtype
        half_tie = (a == b).to(dt) * 0.5
        ga = gb = None
        if n.needs(0):
            loses = (a < b) if pick == "max" else (a > b)
            ga = sum_to(g * (1.0 - loses.to(dt) - half_tie), n.shapes[0])
        if n.needs(1):
            loses = (b < a) if pick == "max" else (b > a)
            gb = sum_to(g * (1.0 - loses.to(dt) - half_tie), n.shapes[1])
        return ga, gb

    return rule


def _d_where(n: Any, g: Any) -> tuple:
    cond = n.saved[0]
    ga = sum_to(_where(cond, g, 0.0), n.shapes[1]) if n.needs(1) else None
    gb = sum_to(_where(cond, 0.0, g), n.shapes[2]) if n.needs(2) else None
    return None, ga, gb


def _d_relu(n: Any, g: Any) -> tuple:
    """PyTorch's ``threshold_backward(grad, result, 0)``: ``g`` where the output is not <= 0.
    Recorded (``create_graph``: the saved output is then a linked alias, which requires grad), the
    gradient also stays in the output's graph with a zero derivative, as PyTorch's does: a second
    derivative through a ReLU net is zeros (a PINN's ``u_xx``), not "not used in the graph"."""
    y = n.saved[0]
    keep = y != 0  # (the output is 0, positive or nan: PyTorch's ``not result <= 0`` keeps nan's)
    if y.requires_grad:
        return (_where(keep, g, y.sign() * 0.0),)  # (sign of an output: 0, 1 or 0 for nan)
    return (_where(keep, g, 0.0),)


def _d_clip(n: Any, g: Any) -> tuple:
    x, lo, hi = n.saved
    mask = None
    if lo is not None:
        mask = x >= lo
    if hi is not None:
        m2 = x <= hi
        mask = m2 if mask is None else mask & m2
    return _where(mask, g, 0.0), None, None


def _d_remainder(n: Any, g: Any) -> tuple:
    a, b = n.saved
    ga = sum_to(g, n.shapes[0]) if n.needs(0) else None
    gb = sum_to(-g * ((a - a % b) / b), n.shapes[1]) if n.needs(1) else None
    return ga, gb


# ----------------------------------------------------------------------------- special kernels
#: The signed integer type of each float size, to mask a float array's bits.
def _k_sigmoid(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        if x.dtype.kind == "c":  # complex: the analytic 1 / (1 + e^-x)
            return (1 / (1 + xp.exp(-x))).astype(x.dtype, copy=False)
        return sigmoid_into(xp, x, xp.empty_like(x))  # (integers come promoted to float)

    return h


def _k_relu(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.maximum(v[0], xp.zeros((), dtype=v[0].dtype))


@half_in_float32
def _k_erf(be: Any) -> Any:
    erf = be.erf  # SciPy's or CuPy's, found by the backend
    # (in the input's dtype: a fallback without SciPy computes in float64)
    return lambda v, at: erf(v[0]).astype(v[0].dtype, copy=False)


def _k_cast(be: Any) -> Any:
    def run(v: list, at: Any) -> Any:
        x, dtype = v[0], at["dtype"]
        if x.dtype.kind == "c" and dtype == "bool":
            return x != 0  # (either part nonzero, as PyTorch's)
        if x.dtype.kind == "c" and dtype not in S.COMPLEX_DTYPES:
            x = x.real  # (what the cast means; NumPy would warn that it drops the imaginary part)
        return x.astype(be.dtype(dtype))  # (bfloat16: the backend's, which it may refuse)

    return run


def _k_copy(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.array(v[0], copy=True)


def _k_clip(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.clip(v[0], v[1], v[2])


def real_dtype(dtypes: list, attrs: Any) -> str:
    """The real dtype of the first input's (``complex64`` -> ``float32``; reals stay)."""
    d = first_dtype(dtypes, attrs)
    return S.REAL_OF.get(d, d)


def _d_abs(n: Any, g: Any) -> tuple:
    (x,) = n.saved
    if x.dtype in S.COMPLEX_DTYPES:  # g * z / |z| (0 at 0)
        r = x.abs()
        zero = r == 0
        return (g * (x / r.masked_fill(zero, 1.0)).masked_fill(zero, 0.0),)
    return (g * x.sign(),)


# ----------------------------------------------------------------------------- the entries
def _binary(name: str, code: int, ufunc: str, **kw: Any) -> Op:
    kw.setdefault("dtype", first_dtype)
    kw.setdefault("kernel", _binary_kernel(ufunc))
    return Op(name, code, arity=2, shape=broadcast_rule(name), shard="elementwise", **kw)


def _unary(name: str, code: int, ufunc: str | None = None, **kw: Any) -> Op:
    kw.setdefault("dtype", first_dtype)
    kw.setdefault("kernel", _unary_kernel(ufunc or name))
    return Op(name, code, shape=same_shape, shard="elementwise", **kw)


def _compare(name: str, code: int, ufunc: str) -> Op:
    return _binary(name, code, ufunc, dtype=bool_dtype, doc=f"elementwise {ufunc} (bool result)")


ENTRIES: list[Op] = [
    _binary("add", 9, "add", grad=_d_add, partial="sum", doc="a + b"),
    _binary("sub", 10, "subtract", grad=_d_sub, partial="sum", doc="a - b"),
    _binary(
        "add_scaled",
        153,
        "add",
        kernel=_k_add_scaled,
        grad=_d_add_scaled,
        partial="sum",
        doc="a + alpha * b (attrs.alpha), PyTorch's add(b, alpha=) in one pass",
    ),  # fmt: skip
    _binary("mul", 11, "multiply", grad=_d_mul, saves="others", partial="mul", doc="a * b"),
    _binary("div", 12, "true_divide", grad=_d_div, saves="divisor", partial="div", doc="a / b"),
    _binary(
        "pow",
        13,
        "power",
        kernel=_integer_pow(_binary_kernel("power")),
        grad=_d_pow,
        saves="inputs",
        doc="a ** b",
    ),  # fmt: skip
    _binary(
        "maximum",
        14,
        "maximum",
        grad=_d_extreme2("max"),
        saves="inputs",
        doc="elementwise maximum (ties split the gradient)",
    ),  # fmt: skip
    _binary(
        "minimum",
        15,
        "minimum",
        grad=_d_extreme2("min"),
        saves="inputs",
        doc="elementwise minimum (ties split the gradient)",
    ),  # fmt: skip
    _compare("lt", 16, "less"),
    _compare("le", 17, "less_equal"),
    _compare("gt", 18, "greater"),
    _compare("ge", 19, "greater_equal"),
    _compare("eq", 20, "equal"),
    _compare("ne", 21, "not_equal"),
    _binary(
        "floor_divide",
        49,
        "floor_divide",
        kernel=zero_divisor_checked(_floor_kernel("floor_divide", 0)),
        grad=_d_floor_divide,
        doc="a // b (not differentiable: backward raises PyTorch's error)",
    ),
    _binary(
        "remainder",
        50,
        "remainder",
        kernel=zero_divisor_checked(_floor_kernel("remainder", 1)),
        grad=_d_remainder,
        saves="inputs",
        doc="a % b",
    ),  # fmt: skip
    Op(
        "where",
        22,
        arity=3,
        shape=broadcast_rule("where"),
        dtype=first_dtype,
        kernel=_k_where,
        grad=_d_where,
        saves=lambda ins, out: ins[:1],
        shard="elementwise",
        doc="where(cond, a, b); attrs: dtype",
    ),  # fmt: skip
    Op(
        "clip",
        48,
        arity=3,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_clip,
        grad=_d_clip,
        saves="inputs",
        shard="elementwise",
        doc="clip(x, lo, hi); either bound may be None",
    ),  # fmt: skip
    _unary("neg", 23, "negative", grad=lambda n, g: (-g,), partial="unary", doc="-x"),
    _unary(
        "abs", 24, grad=_d_abs, saves="inputs", dtype=real_dtype, doc="|x| (real for complex x)"
    ),
    _unary("exp", 25, grad=lambda n, g: (g * n.saved[0],), saves="output", doc="e ** x"),
    _unary("log", 26, grad=lambda n, g: (g / n.saved[0],), saves="inputs", doc="natural log"),
    _unary("sqrt", 27, grad=lambda n, g: ((g / n.saved[0]) * 0.5,), saves="output", doc="sqrt"),
    _unary("sin", 28, grad=lambda n, g: (g * n.saved[0].cos(),), saves="inputs", doc="sine"),
    _unary("cos", 29, grad=lambda n, g: (-(g * n.saved[0].sin()),), saves="inputs", doc="cosine"),
    _unary(
        "tanh",
        30,
        grad=lambda n, g: (g * (1.0 - n.saved[0] * n.saved[0]),),
        saves="output",
        doc="hyperbolic tangent",
    ),  # fmt: skip
    _unary(
        "sigmoid",
        31,
        kernel=half_in_float32(_k_sigmoid),
        saves="output",
        grad=lambda n, g: (g * (n.saved[0] * (1.0 - n.saved[0])),),
        doc="1 / (1 + e ** -x)",
    ),  # fmt: skip
    _unary(
        "relu",
        32,
        kernel=_k_relu,
        saves="output",
        grad=_d_relu,
        doc="max(x, 0)",
    ),  # fmt: skip
    _unary(
        "sign",
        33,
        kernel=_k_sign,
        grad=zero_grad,
        doc="-1, 0 or 1, 0 for NaN (PyTorch's derivative: zero)",
    ),  # fmt: skip
    _unary("logical_not", 51, dtype=bool_dtype, doc="not x (bool result)"),
    _unary(
        "erf",
        53,
        kernel=_k_erf,
        saves="inputs",
        doc="the error function",
        grad=lambda n, g: (g * ((-(n.saved[0] * n.saved[0])).exp() * _TWO_OVER_SQRT_PI),),
    ),  # fmt: skip
    _unary(
        "cast",
        34,
        kernel=_k_cast,
        partial="unary",
        grad=lambda n, g: ((g.real if n.dtypes[0] not in S.COMPLEX_DTYPES else g).to(n.dtypes[0]),),
        doc="x converted to attrs.dtype",
    ),  # fmt: skip
    _unary("copy", 8, kernel=_k_copy, partial="copy", grad=lambda n, g: (g,), doc="a copy of x"),
]
