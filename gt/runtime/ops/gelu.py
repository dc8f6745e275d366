"""Registry entries: the exact ``gelu`` as one op each way.

``gelu`` returns ``x * 0.5 * (1 + erf(x / sqrt(2)))`` and ``gelu_backward`` takes the gradient
of that result and ``x`` and returns ``x``'s gradient, ``g * (cdf + x * pdf)`` with
``cdf = 0.5 * (1 + erf(x / sqrt(2)))`` and ``pdf = exp(-x * x / 2) / sqrt(2 pi)``.

On a NumPy worker, float32 arrays take the formula of PyTorch's vectorised CPU kernel, whose
``erf`` is Abramowitz and Stegun's 7.1.26, ``1 - t * r(t) * exp(-u * u)`` with
``t = 1 / (1 + 0.3275911 |u|)`` (absolute error below 1.5e-7), and go through in cache-sized
chunks. Composed of GT's own ``erf`` (float64 polynomials, correctly rounded to float32), a
[32, 128, 1024] ``gelu`` took 76 ms against PyTorch's 3.9 ms; NumPy's float32 ``exp`` alone
takes 9 ms of it now. PyTorch's kernel fuses multiply-adds, which NumPy cannot, so the last bit
differs for some elements; the values are PyTorch's within its own approximation's error
(``tests/unit/test_gelu_kernels.py``). Float64 arrays, and every array on CuPy, use the
backend's accurate ``erf``, as PyTorch's float64 and CUDA kernels do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt.runtime.ops.base import Op, equal_shapes, first_dtype, same_shape

SQRT1_2 = 1.0 / math.sqrt(2.0)
#: ``1 / sqrt(2 pi)``, as PyTorch spells it: ``M_2_SQRTPI * M_SQRT1_2 * 0.5``.
PDF_SCALE = 2.0 / math.sqrt(math.pi) * SQRT1_2 * 0.5
#: Elements per chunk: four float32 scratch arrays of it stay in a core's L2 cache.
CHUNK = 1 << 15

_F = np.float32
_ALPHA, _HALF, _ONE, _BETA = _F(SQRT1_2), _F(0.5), _F(1.0), _F(PDF_SCALE)
_AS_P = _F(0.3275911)
_AS_R = tuple(_F(c) for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))
_SIGN = np.int32(-(2**31))


def _one_plus_erf(u: np.ndarray, out: np.ndarray, t: np.ndarray, s: np.ndarray) -> None:
    """``out = 1 + erf(u)`` for float32 ``u`` by A&S 7.1.26, PyTorch's steps in its order;
    ``out``, ``t``, ``s`` are scratch arrays of ``u``'s size (``out`` may not be ``u``)."""
    np.abs(u, out=t)
    t *= _AS_P
    t += _ONE
    np.divide(_ONE, t, out=t)  # t = 1 / (1 + p |u|)
    r5, r4, r3, r2, r1 = _AS_R
    np.multiply(t, r5, out=s)
    s += r4
    for c in (r3, r2, r1):
        s *= t
        s += c  # s = r(t)
    np.multiply(u, u, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    out *= t
    out *= s
    np.subtract(_ONE, out, out=out)  # |erf(u)|, never negative
    # erf(u) takes u's sign bit (PyTorch ORs it in; np.copysign took 3x as long as these two)
    si, oi = s.view(np.int32), out.view(np.int32)
    np.bitwise_and(u.view(np.int32), _SIGN, out=si)
    np.bitwise_or(oi, si, out=oi)
    out += _ONE


def _chunks(n: int) -> Any:
    for i in range(0, n, CHUNK):
        yield slice(i, min(i + CHUNK, n))


def gelu_float32(x: np.ndarray) -> np.ndarray:
    """PyTorch's CPU ``gelu`` of a float32 array (see the module docstring)."""
    src = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, np.float32)
    dst = out.reshape(-1)
    m = min(CHUNK, src.size)
    u, t, s, e = (np.empty(m, np.float32) for _ in range(4))
    with np.errstate(all="ignore"):  # (exp underflows to 0 by design; NaN stays NaN)
        for sl in _chunks(src.size):
            xs, k = src[sl], sl.stop - sl.start
            np.multiply(xs, _ALPHA, out=u[:k])
            _one_plus_erf(u[:k], e[:k], t[:k], s[:k])
            np.multiply(xs, _HALF, out=dst[sl])
            dst[sl] *= e[:k]
    return out


def gelu_backward_float32(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """PyTorch's CPU ``gelu_backward`` of float32 arrays: ``g * (cdf + x * pdf)``."""
    gs = np.ascontiguousarray(g, np.float32).reshape(-1)
    src = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, np.float32)
    dst = out.reshape(-1)
    m = min(CHUNK, src.size)
    u, t, s, e = (np.empty(m, np.float32) for _ in range(4))
    with np.errstate(all="ignore"):
        for sl in _chunks(src.size):
            xs, k = src[sl], sl.stop - sl.start
            uk, ek, d = u[:k], e[:k], dst[sl]
            np.multiply(xs, _ALPHA, out=uk)
            _one_plus_erf(uk, ek, t[:k], s[:k])
            ek *= _HALF  # cdf
            np.multiply(xs, xs, out=uk)
            uk *= -_HALF
            np.exp(uk, out=uk)
            uk *= _BETA  # pdf
            np.multiply(xs, uk, out=d)
            d += ek
            d *= gs[sl]
    return out


def _k_gelu(be: Any) -> Any:
    xp, erf = be.xp, be.erf

    def h(v: list, at: Any) -> Any:
        x = v[0]
        if xp is np and x.dtype == np.float32:
            return gelu_float32(x)
        return x * 0.5 * (1.0 + erf(x * SQRT1_2))

    return h


def _k_gelu_backward(be: Any) -> Any:
    xp, erf = be.xp, be.erf

    def h(v: list, at: Any) -> Any:
        g, x = v
        if xp is np and x.dtype == np.float32:
            return gelu_backward_float32(g, x)
        cdf = 0.5 * (1.0 + erf(x * SQRT1_2))
        pdf = PDF_SCALE * xp.exp(x * x * -0.5)
        return (g * (cdf + x * pdf)).astype(x.dtype, copy=False)

    return h


def gelu_grad(g: Any, x: Any, attrs: Any = None) -> Any:
    """``x``'s gradient given the gradient ``g`` of ``gelu(x)``, as differentiable ops (a
    recorded backward differentiates it again)."""
    cdf = 0.5 * (1.0 + (x * SQRT1_2).erf())
    pdf = (x * x * -0.5).exp() * PDF_SCALE
    return g * (cdf + x * pdf)


def _d_gelu(n: Any, g: Any) -> tuple:
    return (gelu_grad(g, n.saved[0]),)


ENTRIES = [
    Op(
        "gelu",
        181,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_gelu,
        grad=_d_gelu,
        saves="inputs",
        shard="elementwise",
        doc="x * 0.5 * (1 + erf(x / sqrt(2))) of a float tensor (PyTorch's CPU formula)",
    ),  # fmt: skip
    Op(
        "gelu_backward",
        182,
        arity=2,
        shape=equal_shapes("gelu_backward"),
        dtype=first_dtype,
        kernel=_k_gelu_backward,
        shard="elementwise",
        doc="x's gradient through gelu, given the result's gradient and x",
    ),  # fmt: skip
]
