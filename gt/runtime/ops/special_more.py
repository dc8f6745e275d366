"""Registry entries: modified Bessel functions (``i0``, ``i0e``, ``i1``, ``i1e``), the Hurwitz zeta
function, the regularised incomplete gamma functions (``gammainc``, ``gammaincc``), ``erfcx``, the
Bessel functions J, Y and K, and the Airy function ``Ai``.

Kernels are SciPy's (NumPy workers that have it), ``cupyx.scipy.special``'s (CuPy), else GT's own
(:mod:`gt.runtime.ops.special_math`), found by the backend; ``airy_ai`` always runs GT's own
(:mod:`gt.runtime.ops.airy`, in float64 on either array module). Derivatives are PyTorch's,
including where PyTorch has none: ``zeta`` with respect to its first argument and the incomplete
gamma functions with respect to ``a`` raise ``NotImplementedError`` when a backward pass needs
them.
"""

from __future__ import annotations

import math
from typing import Any

from gt.runtime.ops.airy import airy_ai
from gt.runtime.ops.base import Op, first_dtype, real_float, same_shape, sum_to
from gt.runtime.ops.elementwise import broadcast_rule
from gt.runtime.ops.gammafn import _compute_dtype, _k_special

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _k_binary(name: str) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp
        fn = be.special(name)

        def h(v: list, at: Any) -> Any:
            like = next(t for t in v if hasattr(t, "dtype"))  # (the other may be a number)
            a, b = (_compute_dtype(xp, t if hasattr(t, "dtype") else xp.asarray(t, like.dtype))
                    for t in v)  # fmt: skip
            return fn(a, b).astype(like.dtype, copy=False)

        return h

    return make


def _k_airy_ai(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: airy_ai(xp, v[0]).astype(v[0].dtype, copy=False)


def _float_api(name: str) -> Any:
    def api(x: Any) -> Any:
        x = real_float(x, name)
        return x._apply(name, [x])

    api.__name__ = name
    return api


def binary_api(name: str) -> Any:
    """``fn(a, b)`` with broadcasting and PyTorch's promotion (integers become float; either
    argument may be a Python number)."""

    def api(a: Any, b: Any) -> Any:
        from gt.runtime.ops import OPCODE  # noqa: PLC0415 - the registry is built from this module

        if not hasattr(a, "_binary"):
            a = b.new_full((), float(a), dtype=b.dtype if b.is_floating_point() else None)
        return a._binary(OPCODE[name], b, name, true_div=True)

    api.__name__ = name
    return api


def _no_grad_of_first(op: str) -> None:
    raise NotImplementedError(
        f"the derivative of {op} with respect to its first argument is not implemented "
        "(as in PyTorch)"
    )


def _d_i1(n: Any, g: Any) -> tuple:
    x = n.saved[0]
    safe = x._apply("where", [x == 0, 1.0, x], {"dtype": x.dtype})
    d = x.i0() - x._apply("i1", [x]) / safe
    return (g * d._apply("where", [x == 0, 0.5, d], {"dtype": x.dtype}),)


def _d_i1e(n: Any, g: Any) -> tuple:
    x = n.saved[0]
    safe = x._apply("where", [x == 0, 1.0, x], {"dtype": x.dtype})
    i1e = x._apply("i1e", [x])
    d = x._apply("i0e", [x]) - i1e * (x.sign() + 1.0 / safe)
    return (g * d._apply("where", [x == 0, 0.5, d], {"dtype": x.dtype}),)


def _d_zeta(n: Any, g: Any) -> tuple:
    s, q = n.saved
    if n.needs(0):
        _no_grad_of_first("zeta")
    return None, sum_to(-g * s * (s + 1.0)._apply("zeta", [s + 1.0, q]), n.shapes[1])


def _d_gammainc(sign: float) -> Any:
    def rule(n: Any, g: Any) -> tuple:
        a, x = n.saved
        if n.needs(0):
            _no_grad_of_first("gammainc/gammaincc")
        density = (-x - a.lgamma()).exp() * x.pow(a - 1.0)  # (pow: 0 ** 0 is 1 at x = 0)
        return None, sum_to(g * density * sign, n.shapes[1])

    return rule


def _unary(name: str, code: int, doc: str, grad: Any, saves: str = "inputs",
           methods: tuple = ()) -> Op:  # fmt: skip
    return Op(name, code, shape=same_shape, dtype=first_dtype, kernel=_k_special(name),
              grad=grad, saves=saves, shard="elementwise", methods=methods,
              api=_float_api(name) if methods else None, doc=doc)  # fmt: skip


def _binary(name: str, code: int, doc: str, grad: Any, methods: tuple = ()) -> Op:
    return Op(name, code, arity=2, shape=broadcast_rule(name), dtype=first_dtype,
              kernel=_k_binary(name), grad=grad, saves="inputs", shard="elementwise",
              methods=methods, api=binary_api(name) if methods else None, doc=doc)  # fmt: skip


ENTRIES: list[Op] = [
    _unary("i0", 120, "modified Bessel function I0; derivative I1",
           lambda n, g: (g * n.saved[0]._apply("i1", [n.saved[0]]),), methods=("i0",)),
    _unary("i0e", 121, "exp(-|x|) I0(x); derivative i1e(x) - sign(x) i0e(x)",
           lambda n, g: (g * (n.saved[0]._apply("i1e", [n.saved[0]])
                              - n.saved[0].sign() * n.saved[0]._apply("i0e", [n.saved[0]])),)),
    _unary("i1", 122, "modified Bessel function I1; derivative I0 - I1 / x (1/2 at 0)", _d_i1),
    _unary("i1e", 123, "exp(-|x|) I1(x); derivative i0e - i1e (sign(x) + 1/x) (1/2 at 0)",
           _d_i1e),
    _binary("zeta", 124, "Hurwitz zeta(s, q); derivative in q: -s zeta(s + 1, q)", _d_zeta),
    _binary("gammainc", 125, "regularised lower incomplete gamma P(a, x); derivative in x",
            _d_gammainc(1.0), methods=("igamma",)),
    _binary("gammaincc", 126, "regularised upper incomplete gamma Q(a, x); derivative in x",
            _d_gammainc(-1.0), methods=("igammac",)),
    _unary("erfcx", 127, "exp(x^2) erfc(x); derivative 2 x erfcx(x) - 2 / sqrt(pi)",
           lambda n, g: (g * (2.0 * n.saved[0] * n.saved[0]._apply("erfcx", [n.saved[0]])
                              - _TWO_OVER_SQRT_PI),)),
    # Bessel J, Y and K: no derivative, as in PyTorch (their results do not require grad)
    *(Op(f"bessel_{fn}", code, shape=same_shape, dtype=first_dtype, kernel=_k_special(fn),
         shard="elementwise", doc=doc)
      for code, fn, doc in ((129, "j0", "Bessel J0"), (130, "j1", "Bessel J1"),
                            (131, "y0", "Bessel Y0 (NaN below 0)"),
                            (132, "y1", "Bessel Y1 (NaN below 0)"),
                            (133, "k0", "modified Bessel K0 (NaN below 0)"),
                            (134, "k1", "modified Bessel K1 (NaN below 0)"),
                            (135, "k0e", "exp(x) K0(x)"), (136, "k1e", "exp(x) K1(x)"))),
    # no derivative either, as in PyTorch
    Op("airy_ai", 152, shape=same_shape, dtype=first_dtype, kernel=_k_airy_ai,
       shard="elementwise", doc="the Airy function Ai (computed in float64)"),
]  # fmt: skip
