"""Registry entries: inverse trigonometric and hyperbolic functions, ``atan2``, ``fmod``,
``signbit``, ``gcd``, ``lcm``, and the floating-point representation: ``nextafter`` and
``frexp`` (its mantissa and exponent, one primitive each; neither differentiable, as in PyTorch).

Unary entries bring their methods and PyTorch's ``arc*`` aliases (``x.asin()``, ``x.arcsin()``);
integers become float32 first, as in PyTorch. Binary entries go through the tensor's binary path
(broadcasting, PyTorch's promotion of Python numbers). The derivatives are PyTorch's, including
their infinities at the domain's edges (``asin`` at 1). ``fmod`` takes the sign of the dividend
(C's ``fmod``), where ``remainder`` takes the divisor's.
"""

from __future__ import annotations

import math
from typing import Any

from gt.runtime.ops import return_types
from gt.runtime.ops.base import Op, bool_dtype, first_dtype, half_in_float32, same_shape, sum_to
from gt.runtime.ops.elementwise import _where, broadcast_rule
from gt.runtime.ops.integer_rules import zero_divisor_checked


def _k_ufunc(fn: str) -> Any:
    def make(be: Any) -> Any:
        f = getattr(be.xp, fn)
        return lambda v, at: f(v[0], *v[1:])

    return make


def _float_api(name: str) -> Any:
    def api(x: Any) -> Any:
        x = x if x.is_floating_point() or x.is_complex() else x.float()
        return x._apply(name, [x])

    api.__name__ = name
    api.__doc__ = f"Elementwise ``{name}`` (integers become float32)."
    return api


def _binary_api(name: str, true_div: bool = False, integers: bool = False) -> Any:
    def api(x: Any, other: Any) -> Any:
        from gt.runtime.ops import OPCODE  # noqa: PLC0415 - the registry is built from this module

        if integers and (_not_integer(x) or isinstance(other, float) or _not_integer(other)):
            raise TypeError(f"{name}: integer operands only (as in PyTorch), not {x.dtype}")
        return x._binary(OPCODE[name], other, name, true_div=true_div)

    api.__name__ = name
    return api


def _not_integer(t: Any) -> bool:
    return hasattr(t, "is_floating_point") and (t.is_floating_point() or t.dtype == "bool")


def _d_atan2(n: Any, g: Any) -> tuple:
    y, x = n.saved
    r2 = x * x + y * y
    recip = _where(r2 == 0, 0.0, 1.0 / _where(r2 == 0, 1.0, r2))  # (0 at the origin, as PyTorch)
    gy = sum_to(g * x * recip, n.shapes[0]) if n.needs(0) else None
    gx = sum_to(-g * y * recip, n.shapes[1]) if n.needs(1) else None
    return gy, gx


def _d_hypot(n: Any, g: Any) -> tuple:
    a, b = n.saved
    h = a.hypot(b)
    ga = sum_to(g * a / h, n.shapes[0]) if n.needs(0) else None
    gb = sum_to(g * b / h, n.shapes[1]) if n.needs(1) else None
    return ga, gb


def _k_log10(be: Any) -> Any:
    """``log10``; float32 computed in float64 and rounded once (NumPy's float32 loop gives
    3.0000002 for log10(1000), PyTorch's 3; CUDA's ``log10f`` is only within 2 ulp either)."""
    f, wide = be.xp.log10, be.xp.float64

    def h(v: list, at: Any) -> Any:
        x = v[0]
        if x.dtype.kind == "f" and x.dtype.itemsize == 4:
            return f(x.astype(wide)).astype(x.dtype)
        return f(x)

    return h


def _exact(name: str, code: int, fn: Any, grad: Any, saves: str, doc: str) -> Op:
    """A real-float elementwise function computed by the library's own routine (not composed of
    ``exp``/``log``: ``exp2(3)`` is 8 and ``log2(8)`` is 3 exactly, ``sinh`` keeps tiny values);
    half tensors in float32, rounded once. The Tensor methods of :mod:`gt.ops.mathops` call it."""
    kernel = half_in_float32(fn if callable(fn) else _k_ufunc(fn))
    return Op(name, code, shape=same_shape, dtype=first_dtype, kernel=kernel,
              grad=grad, saves=saves, shard="elementwise", partial=None, doc=doc)  # fmt: skip


_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _d_fmod(n: Any, g: Any) -> tuple:
    a, b = n.saved
    ga = sum_to(g, n.shapes[0]) if n.needs(0) else None
    gb = sum_to(-g * (a / b).trunc(), n.shapes[1]) if n.needs(1) else None
    return ga, gb


#: itemsize -> (integer view, mantissa bits, exponent mask, a subnormal's unit = 2 ** -(bias + m - 1))
_BITS = {4: ("int32", 23, 0xFF, 2.0**-149), 2: ("int16", 10, 0x1F, 2.0**-24)}


def _exact_float64(xp: Any, x: Any) -> Any:
    """A float32/float16 array as float64, subnormals included, using integer operations only on
    the narrow values (which no flush-to-zero touches)."""
    view, mbits, emask, unit = _BITS[x.dtype.itemsize]
    bits = x.view(view)
    sub = ((bits >> mbits) & emask) == 0  # zero or subnormal
    frac = (bits & ((1 << mbits) - 1)).astype(xp.float64) * unit
    exact = xp.where(bits < 0, -frac, frac)  # (the sign bit is the integer's sign)
    return xp.where(sub, exact, x.astype(xp.float64))


def _k_frexp(part: int) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp

        def frexp(x: Any) -> tuple:
            # CuPy's kernels flush float32 subnormals to zero (even in a cast): read the narrow
            # float's bits instead, as float64 (where it is a normal number, with the same
            # mantissa and exponent, exact again in the narrow type)
            if be.name == "cupy" and x.dtype.kind == "f" and x.dtype.itemsize in _BITS:
                m, e = xp.frexp(_exact_float64(xp, x))
                return m.astype(x.dtype), e
            return xp.frexp(x)

        if part == 0:
            return lambda v, at: frexp(v[0])[0]
        return lambda v, at: frexp(v[0])[1].astype("int32")

    return make


#: What ``frexp`` returns (``gt.return_types.frexp``, as PyTorch's).
FrexpResult = return_types.frexp


def _frexp_api(x: Any) -> Any:
    """``(mantissa, exponent)`` with ``x = mantissa * 2 ** exponent`` (``torch.frexp``)."""
    if not x.is_floating_point():
        raise RuntimeError(f"torch.frexp() only supports floating-point dtypes, not {x.dtype}")
    return FrexpResult(x._apply("frexp_mantissa", [x]), x._apply("frexp_exponent", [x]))


def _unary(name: str, code: int, fn: str, grad: Any, doc: str, aliases: tuple = ()) -> Op:
    return Op(name, code, shape=same_shape, dtype=first_dtype, kernel=_k_ufunc(fn), grad=grad,
              saves="inputs", shard="elementwise", methods=(name, *aliases), api=_float_api(name),
              doc=doc)  # fmt: skip


def _binary(name: str, code: int, fn: str, doc: str, **kw: Any) -> Op:
    kw.setdefault("dtype", first_dtype)
    kw.setdefault("kernel", _k_ufunc(fn))
    return Op(name, code, arity=2, shape=broadcast_rule(name), shard="elementwise", doc=doc,
              **kw)  # fmt: skip


ENTRIES: list[Op] = [
    _unary("asin", 106, "arcsin", lambda n, g: (g * (1.0 - n.saved[0] ** 2).rsqrt(),),
           "inverse sine; derivative 1 / sqrt(1 - x^2)", ("arcsin",)),
    _unary("acos", 107, "arccos", lambda n, g: (-g * (1.0 - n.saved[0] ** 2).rsqrt(),),
           "inverse cosine; derivative -1 / sqrt(1 - x^2)", ("arccos",)),
    _unary("atan", 108, "arctan", lambda n, g: (g / (1.0 + n.saved[0] ** 2),),
           "inverse tangent; derivative 1 / (1 + x^2)", ("arctan",)),
    _unary("asinh", 109, "arcsinh", lambda n, g: (g * (n.saved[0] ** 2 + 1.0).rsqrt(),),
           "inverse hyperbolic sine; derivative 1 / sqrt(x^2 + 1)", ("arcsinh",)),
    _unary("acosh", 110, "arccosh", lambda n, g: (g * (n.saved[0] ** 2 - 1.0).rsqrt(),),
           "inverse hyperbolic cosine; derivative 1 / sqrt(x^2 - 1)", ("arccosh",)),
    _unary("atanh", 111, "arctanh", lambda n, g: (g / (1.0 - n.saved[0] ** 2),),
           "inverse hyperbolic tangent; derivative 1 / (1 - x^2)", ("arctanh",)),
    _binary("atan2", 112, "arctan2", "the angle of (x, y) = (b, a) in (-pi, pi]; a is y",
            grad=_d_atan2, saves="inputs", methods=("atan2", "arctan2"),
            api=_binary_api("atan2", true_div=True)),
    _exact("log2", 158, "log2", lambda n, g: (g / (n.saved[0] * _LN2),), "inputs",
           "base-2 logarithm (exact at powers of two)"),
    _exact("log10", 159, _k_log10, lambda n, g: (g / (n.saved[0] * _LN10),), "inputs",
           "base-10 logarithm (exact at powers of ten)"),
    _exact("exp2", 160, "exp2", lambda n, g: (g * n.saved[0] * _LN2,), "output",
           "2 ** x (exact at integers)"),
    _exact("sinh", 161, "sinh", lambda n, g: (g * n.saved[0].cosh(),), "inputs",
           "hyperbolic sine; derivative cosh"),
    _exact("cosh", 162, "cosh", lambda n, g: (g * n.saved[0].sinh(),), "inputs",
           "hyperbolic cosine; derivative sinh"),
    _binary("hypot", 163, "hypot", "sqrt(a^2 + b^2) without overflow or underflow",
            kernel=half_in_float32(_k_ufunc("hypot")), grad=_d_hypot, saves="inputs"),
    _binary("fmod", 113, "fmod", "C's fmod: a - trunc(a / b) b, the sign of a",
            kernel=zero_divisor_checked(_k_ufunc("fmod")), grad=_d_fmod, saves="inputs", methods=("fmod",), api=_binary_api("fmod")),
    Op("signbit", 114, shape=same_shape, dtype=bool_dtype, kernel=_k_ufunc("signbit"),
       shard="elementwise", methods=("signbit",), api=lambda x: x._apply("signbit", [x]),
       doc="whether the sign bit is set (true for -0.0)"),
    _binary("gcd", 115, "gcd", "greatest common divisor of integers (non-negative)",
            methods=("gcd",), api=_binary_api("gcd", integers=True)),
    _binary("lcm", 116, "lcm", "least common multiple of integers (non-negative)",
            methods=("lcm",), api=_binary_api("lcm", integers=True)),
    _binary("nextafter", 146, "nextafter", "the next representable float after a towards b",
            methods=("nextafter",), api=_binary_api("nextafter")),
    Op("frexp_mantissa", 147, shape=same_shape, dtype=first_dtype, kernel=_k_frexp(0),
       shard="elementwise", doc="the mantissa m of x = m 2^e, |m| in [0.5, 1) (0 for 0)"),
    Op("frexp_exponent", 148, shape=same_shape, dtype=lambda d, at: "int32", kernel=_k_frexp(1),
       shard="elementwise", methods=("frexp",), api=_frexp_api,
       doc="the exponent e of x = m 2^e (int32)"),
]  # fmt: skip
