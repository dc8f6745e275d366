"""The Airy function ``Ai`` written against ``xp`` in float64 (``torch.special.airy_ai``).

Pure: NumPy-style array code only (it runs on NumPy and CuPy workers alike), no SciPy. Four
regions, each chosen where it is accurate to a few units in the last place (of ``|Ai|``, or of its
envelope ``sqrt(Ai^2 + Bi^2)`` where it oscillates):

- ``x < -12.5``: the asymptotic expansion in modulus and phase (DLMF 9.7.9, A&S 10.4.60), with the
  phase ``zeta = 2/3 |x|^(3/2)`` carried in double-double, so its rounding (an ulp of ``zeta`` is
  1e-14 at ``x = -30``) does not move the zeros;
- ``-12.5 <= x <= 2.5``: a Taylor expansion about the nearest integer ``c``, its coefficients from
  the differential equation ``Ai'' = x Ai`` (``a_{n+2} = (c a_n + a_{n-1}) / ((n+1)(n+2))``) and
  ``Ai(c)``, ``Ai'(c)`` tabulated once from the Maclaurin series (DLMF 9.4.1) summed in 40-digit
  decimal arithmetic, where its cancellation does no harm;
- ``2.5 < x <= 12``: ``Ai(x) = sqrt(x/3) K_{1/3}(zeta) / pi`` (DLMF 9.6.1) with
  ``K_nu(zeta) = int_0^inf exp(-zeta cosh t) cosh(nu t) dt`` by the trapezoidal rule (its integrand
  is analytic and decays double-exponentially, so the rule converges exponentially);
- ``x > 12``: the asymptotic expansion ``exp(-zeta) / (2 sqrt(pi) x^(1/4)) sum (-1)^k u_k
  zeta^-k`` (DLMF 9.7.5), 0 past 103.892 (where PyTorch's result becomes 0; the value is below the
  smallest normal double there).

NaN at ``+-inf`` and NaN, as PyTorch.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from gt.runtime.ops.special_math import quiet

#: ``Ai(0)`` and ``-Ai'(0)`` (DLMF 9.2.3 and 9.2.4: ``1 / (3^(2/3) Gamma(2/3))`` and
#: ``1 / (3^(1/3) Gamma(1/3))``), to 40 digits.
_AI0 = "0.3550280538878172392600631860041831763980"
_MINUS_DAI0 = "0.2588194037928067984051835601892039634791"

#: The Taylor region ``[_TAYLOR_LO - 0.5, _TAYLOR_HI + 0.5]``: centers at the integers between.
_TAYLOR_LO, _TAYLOR_HI = -12, 2
_TAYLOR_TERMS = 30
#: Where the quadrature of ``K_{1/3}`` hands over to the decaying asymptotic series.
_DECAY_FROM = 12.0
#: Above this PyTorch's ``airy_ai`` is 0 (Cephes' MAXAIRY).
_ZERO_ABOVE = 103.892
#: The trapezoidal rule's step and its last node (``exp(-zeta (cosh t - 1)) < 1e-20`` there for
#: every ``zeta`` of its region, ``zeta >= zeta(2.5) = 2.63``).
_STEP = 0.05
_T_MAX = 3.6
_ASYMPTOTIC_TERMS = 20


def _u(k: int) -> float:
    """DLMF 9.7.2's ``u_k``: ``u_0 = 1``, ``u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_{k-1}``."""
    u = 1.0
    for j in range(1, k + 1):
        u *= (6 * j - 5) * (6 * j - 3) * (6 * j - 1) / ((2 * j - 1) * 216.0 * j)
    return u


_U = tuple(_u(k) for k in range(_ASYMPTOTIC_TERMS))


@functools.cache
def taylor_centers() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(Ai(c), Ai'(c))`` for ``c`` from :data:`_TAYLOR_LO` to :data:`_TAYLOR_HI`, from the
    Maclaurin series ``Ai = c1 f - c2 g`` (DLMF 9.4.1) in 40-digit decimals: its terms grow to
    ``1e5`` times the result at ``c = -12``, so 40 digits leave more than 30."""
    import decimal  # noqa: PLC0415 - only when the first Airy value is asked for (worker start-up)

    D = decimal.Decimal  # noqa: N806
    values, slopes = [], []
    with decimal.localcontext(decimal.Context(prec=40)):
        c1, c2 = D(_AI0), D(_MINUS_DAI0)
        for c in range(_TAYLOR_LO, _TAYLOR_HI + 1):
            x = D(c)
            x2, x3 = x * x, x * x * x
            # f = sum a_k x^3k and g = sum b_k x^(3k+1), with
            # a_k = a_{k-1} / ((3k-1) 3k) and b_k = b_{k-1} / (3k (3k+1))
            a = b = power = D(1)  # power: x^3k
            f = g = df = dg = D(0)
            for k in range(80):
                if k:
                    a /= (3 * k - 1) * 3 * k
                    b /= 3 * k * (3 * k + 1)
                    df += 3 * k * a * power * x2  # (power is still x^(3k-3) here)
                    power *= x3
                f += a * power
                g += b * power * x
                dg += (3 * k + 1) * b * power
            values.append(float(c1 * f - c2 * g))
            slopes.append(float(c1 * df - c2 * dg))
    return tuple(values), tuple(slopes)


def airy_ai(xp: Any, x: Any) -> Any:
    """``Ai(x)`` elementwise, in float64 (see the module docstring for the method)."""
    x = xp.asarray(x, dtype=xp.float64)
    with quiet(xp):  # (NaN inputs; every region is computed for every element, clipped)
        out = xp.where(x < _TAYLOR_LO - 0.5, _oscillating(xp, x), _taylor(xp, x))
        out = xp.where(x > _TAYLOR_HI + 0.5, _quadrature(xp, x), out)
        out = xp.where(x > _DECAY_FROM, _decaying(xp, x), out)
        out = xp.where(x > _ZERO_ABOVE, 0.0, out)
        out = xp.where(xp.isfinite(x), out, math.nan)
    return out


def _taylor(xp: Any, x: Any) -> Any:
    """The Taylor expansion about the nearest tabulated integer (exact for ``x`` in the region,
    finite elsewhere)."""
    values, slopes = taylor_centers()
    xs = xp.clip(xp.where(xp.isfinite(x), x, 0.0), _TAYLOR_LO - 0.5, _TAYLOR_HI + 0.5)
    c = xp.clip(xp.floor(xs + 0.5), _TAYLOR_LO, _TAYLOR_HI)
    at = (c - _TAYLOR_LO).astype(xp.int64)
    h = xs - c
    # terms t_n = a_n h^n: t_{n+2} = (c h^2 t_n + h^3 t_{n-1}) / ((n+1)(n+2))
    before = xp.zeros(x.shape, dtype=xp.float64)  # t_{n-1}
    t0 = xp.take(xp.asarray(values, dtype=xp.float64), at)
    t1 = xp.take(xp.asarray(slopes, dtype=xp.float64), at) * h
    ch2, h3 = c * h * h, h * h * h
    total = t0 + t1
    for n in range(_TAYLOR_TERMS - 2):
        t2 = (ch2 * t0 + h3 * before) / ((n + 1) * (n + 2))
        total = total + t2
        before, t0, t1 = t0, t1, t2
    return total


def _quadrature(xp: Any, x: Any) -> Any:
    """``sqrt(x/3) exp(-zeta) / pi`` times the trapezoidal rule on ``int_0^inf exp(-zeta (cosh t -
    1)) cosh(t/3) dt`` (for ``2.5 <= x <= 12``; finite elsewhere)."""
    xs = xp.clip(xp.where(xp.isfinite(x), x, _DECAY_FROM), _TAYLOR_HI + 0.5, _DECAY_FROM)
    zeta, zeta_lo = _zeta_double_double(xp, xs)
    total = xp.full(x.shape, 0.5, dtype=xp.float64)
    for k in range(1, round(_T_MAX / _STEP) + 1):
        t = k * _STEP
        total = total + math.cosh(t / 3.0) * xp.exp(-zeta * (math.cosh(t) - 1.0))
    return total * _STEP * xp.sqrt(xs / 3.0) * _exp_minus(xp, zeta, zeta_lo) / math.pi


def _decaying(xp: Any, x: Any) -> Any:
    """DLMF 9.7.5 for ``x > 12`` (finite elsewhere)."""
    xs = xp.clip(xp.where(xp.isfinite(x), x, _DECAY_FROM), _DECAY_FROM, _ZERO_ABOVE)
    zeta, zeta_lo = _zeta_double_double(xp, xs)
    series = _series(xp, -1.0 / zeta, range(_ASYMPTOTIC_TERMS))
    return (
        series * _exp_minus(xp, zeta, zeta_lo) / (2.0 * math.sqrt(math.pi) * xp.sqrt(xp.sqrt(xs)))
    )


def _exp_minus(xp: Any, hi: Any, lo: Any) -> Any:
    """``exp(-(hi + lo))`` for a double-double ``zeta`` (an ulp of ``zeta`` = 110 would be an
    error of 1e-14 in ``exp(-zeta)``)."""
    return xp.exp(-hi) * (1.0 - lo)


def _series(xp: Any, w: Any, ks: range) -> Any:
    """``sum u_k w^k`` over ``ks`` (Horner's rule, smallest terms first)."""
    total = xp.zeros(w.shape, dtype=xp.float64)
    for k in reversed(ks):
        total = total * w + _U[k]
    return total


def _oscillating(xp: Any, x: Any) -> Any:
    """DLMF 9.7.9 for ``x < -12.5`` (finite elsewhere): ``Ai(-z) = (cos(zeta - pi/4) P + sin(zeta
    - pi/4) Q) / (sqrt(pi) z^(1/4))``, ``P = sum_k (-1)^k u_2k zeta^-2k``, ``Q = sum_k (-1)^k
    u_2k+1 zeta^-(2k+1)``."""
    z = xp.maximum(xp.where(xp.isfinite(x), -x, 100.0), -_TAYLOR_LO + 0.5)
    # (past 1e150 the phase is clipped, so the double-double arithmetic cannot overflow: the
    # phase of such arguments is meaningless in float64 anyway; the amplitude stays right)
    hi, lo = _zeta_double_double(xp, xp.minimum(z, 1e150))
    w = -1.0 / (hi * hi)
    p = _even_odd(xp, w, 0)
    q = _even_odd(xp, w, 1) / hi
    # cos and sin of hi + lo, then turned by pi/4 exactly (no rounding of zeta - pi/4)
    cos_hi, sin_hi, cos_lo, sin_lo = xp.cos(hi), xp.sin(hi), xp.cos(lo), xp.sin(lo)
    cos_z, sin_z = cos_hi * cos_lo - sin_hi * sin_lo, sin_hi * cos_lo + cos_hi * sin_lo
    cos_shift = (cos_z + sin_z) * _SQRT1_2
    sin_shift = (sin_z - cos_z) * _SQRT1_2
    return (cos_shift * p + sin_shift * q) / (math.sqrt(math.pi) * xp.sqrt(xp.sqrt(z)))


def _even_odd(xp: Any, w: Any, parity: int) -> Any:
    """``sum_k u_{2k+parity} w^k`` (``w = -zeta^-2``)."""
    total = xp.zeros(w.shape, dtype=xp.float64)
    for k in reversed(range(parity, _ASYMPTOTIC_TERMS, 2)):
        total = total * w + _U[k]
    return total


_SQRT1_2 = math.sqrt(0.5)
#: ``2/3`` as the sum of two doubles.
_TWO_THIRDS_HI = 2.0 / 3.0
# 2/3 - _TWO_THIRDS_HI, as float(Decimal(2) / Decimal(3) - Decimal(2.0 / 3.0)) gives it (a test checks)
_TWO_THIRDS_LO = 3.700743415420522e-17
#: Dekker's splitting constant ``2^27 + 1``.
_SPLIT = 134217729.0


def _two_product(a: Any, b: Any) -> tuple[Any, Any]:
    """``(p, e)`` with ``p = fl(a b)`` and ``a b = p + e`` exactly (Dekker; no FMA needed)."""
    p = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    a_hi, b_hi = ca - (ca - a), cb - (cb - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _zeta_double_double(xp: Any, z: Any) -> tuple[Any, Any]:
    """``zeta = 2/3 z^(3/2)`` as ``hi + lo`` (``lo`` about an ulp of ``hi``), good to about
    ``1e-30`` relative: ``sqrt(z)`` corrected by one Newton step on its exact residual (for
    ``z`` below ``1e150``, where the splitting cannot overflow)."""
    s = xp.sqrt(z)
    sq, sq_err = _two_product(s, s)
    s_lo = ((z - sq) - sq_err) / (2.0 * s)  # sqrt(z) = s + s_lo
    q, q_err = _two_product(z, s)
    q_lo = q_err + z * s_lo  # z^(3/2) = q + q_lo
    hi, hi_err = _two_product(q, _TWO_THIRDS_HI)
    return hi, hi_err + _TWO_THIRDS_HI * q_lo + _TWO_THIRDS_LO * q
