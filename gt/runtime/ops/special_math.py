"""The gamma family and the inverse error function, written against ``xp`` in float64.

Workers use SciPy's (NumPy) or ``cupyx.scipy.special``'s (CuPy) versions when they have them; these
are what a NumPy worker without SciPy runs, so every process has the functions and the results
agree to float64 rounding (checked against SciPy and ``math`` in the tests). Pure: NumPy-style
array code only, no other part of GT.

Sources of the constants: the Lanczos coefficients (g = 7, 9 terms) as published by Paul Godfrey;
the asymptotic series of ``digamma`` and of the Hurwitz zeta function (Bernoulli numbers); M. Giles,
"Approximating the erfinv function" (GPU Computing Gems, 2011) for the first guess of ``erfinv``,
refined by Newton steps on ``erf`` and ``erfc``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: ``B_2k`` for k = 1..8 (the asymptotic series below stop there).
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)
#: Where the asymptotic series start: below, recurrences shift the argument up to it.
_SHIFT_TO = 10.0
#: Arguments more negative than this get NaN from ``polygamma`` (the shift would take too long).
_POLYGAMMA_MIN = -1.0e4


def _poles(xp: Any, x: Any) -> Any:
    """Where ``x`` is zero or a negative integer (the gamma function's poles)."""
    return (x <= 0) & (x == xp.floor(x))


def _sinpi_abs(xp: Any, x: Any) -> Any:
    """``|sin(pi x)|``, reduced modulo 2 first so large ``x`` keep their precision."""
    return xp.abs(xp.sin(math.pi * (x - 2.0 * xp.floor(x / 2.0))))


def _lgamma_positive(xp: Any, x: Any) -> Any:
    """``log|Gamma(x)|`` for ``x >= 0.5`` (Lanczos)."""
    z = x - 1.0
    a = xp.full(x.shape, _LANCZOS[0], dtype=xp.float64)
    for i, c in enumerate(_LANCZOS[1:], start=1):
        a = a + c / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * xp.log(t) - t + xp.log(a)


def lgamma(xp: Any, x: Any) -> Any:
    """``log|Gamma(x)|`` elementwise (``inf`` at the poles, as PyTorch and SciPy)."""
    x = xp.asarray(x, dtype=xp.float64)
    with quiet(xp):
        small = x < 0.5
        pos = _lgamma_positive(xp, xp.where(small, 1.0 - x, x))  # reflection for x < 0.5
        refl = math.log(math.pi) - xp.log(_sinpi_abs(xp, x)) - pos
        out = xp.where(small, refl, pos)
        out = xp.where(_poles(xp, x) | xp.isinf(x), math.inf, out)
    return out


def _shift_up(xp: Any, y: Any, power: int) -> tuple[Any, Any]:
    """Raise ``y`` by ones until every element is at least :data:`_SHIFT_TO`; returns the shifted
    ``y`` and ``sum(1 / y_k ** power)`` over the values passed."""
    acc = xp.zeros(y.shape, dtype=xp.float64)
    y = y.copy()
    while True:
        low = y < _SHIFT_TO
        if not bool(low.any()):
            return y, acc
        acc = acc + xp.where(low, 1.0 / xp.where(low, y, 1.0) ** power, 0.0)
        y = xp.where(low, y + 1.0, y)


def digamma(xp: Any, x: Any) -> Any:
    """``psi(x) = d/dx log Gamma(x)``: ``-inf`` at ``+0`` (``+inf`` at ``-0``), NaN at the negative
    integers, as PyTorch."""
    x = xp.asarray(x, dtype=xp.float64)
    with quiet(xp):
        bad = ~xp.isfinite(x) | _poles(xp, x)
        xs = xp.where(bad, 1.0, x)
        neg = xs < 0.5
        y, acc = _shift_up(xp, xp.where(neg, 1.0 - xs, xs), 1)  # reflection, then recurrence
        r = 1.0 / (y * y)
        series = 0.0
        for k in range(len(_BERNOULLI) - 1, -1, -1):  # sum of B_2k / (2k y^2k), Horner
            series = (series + _BERNOULLI[k] / (2 * (k + 1))) * r
        out = xp.log(y) - 0.5 / y - series - acc
        frac = xs - xp.floor(xs)  # tan has period 1 in x: reduce first
        out = xp.where(neg, out - math.pi / xp.tan(math.pi * frac), out)
        zero = x == 0
        out = xp.where(zero, xp.where(xp.signbit(x), math.inf, -math.inf), out)
        out = xp.where(bad & ~zero, math.nan, out)
        out = xp.where(x == math.inf, math.inf, out)
    return out


def polygamma(xp: Any, n: int, x: Any) -> Any:
    """The ``n``-th derivative of ``digamma`` (``n >= 0``); for ``n >= 1``, from the Hurwitz zeta
    function ``(-1)^(n+1) n! zeta(n + 1, x)``. Infinite at the poles; NaN below -10000."""
    if n == 0:
        return digamma(xp, x)
    x = xp.asarray(x, dtype=xp.float64)
    s = n + 1
    with quiet(xp):
        poles = _poles(xp, x)
        far = x < _POLYGAMMA_MIN
        xs = xp.where(poles | far | xp.isnan(x), 1.0, x)
        y, acc = _shift_up(xp, xs + max(0, n - 4), s)
        # (the series converges faster when y also exceeds the order: start it n - 4 further up)
        if n > 4:
            for k in range(n - 4):
                acc = acc + 1.0 / (xs + k) ** s
        # zeta(s, y) ~ y^(1-s)/(s-1) + y^-s/2 + sum_k B_2k/(2k)! * s(s+1)...(s+2k-2) y^(-s-2k+1)
        zeta = y ** (1 - s) / (s - 1) + 0.5 * y ** (-s)
        rising, fact = float(s), 2.0
        yp = y ** (-s - 1)
        for k, b in enumerate(_BERNOULLI, start=1):
            zeta = zeta + b / fact * rising * yp
            rising *= (s + 2 * k - 1) * (s + 2 * k)
            fact *= (2 * k + 1) * (2 * k + 2)
            yp = yp / (y * y)
        sign = 1.0 if n % 2 == 1 else -1.0
        out = sign * math.factorial(n) * (zeta + acc)
        out = xp.where(poles, sign * math.inf, out)
        out = xp.where(far | xp.isnan(x), math.nan, out)
    return out


def erfinv(xp: Any, y: Any, erf: Callable[[Any], Any], erfc: Callable[[Any], Any]) -> Any:
    """The inverse of ``erf`` on ``[-1, 1]`` (``+-inf`` at ``+-1``, NaN outside). Giles' first
    guess, then Newton steps: on ``erf`` in the centre, on ``log(erfc)`` in the tails (where
    ``1 - |y|`` is exact and ``erf`` has no digits left to compare)."""
    y = xp.asarray(y, dtype=xp.float64)
    with quiet(xp):
        inside = xp.abs(y) < 1.0
        t = xp.where(inside, y, 0.0)
        w = -xp.log((1.0 - t) * (1.0 + t))
        central = w - 2.5
        p1 = xp.full(y.shape, 2.81022636e-08)
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):  # fmt: skip
            p1 = c + p1 * central
        tail = xp.sqrt(w) - 3.0
        p2 = xp.full(y.shape, -0.000200214257)
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):  # fmt: skip
            p2 = c + p2 * tail
        x = xp.abs(xp.where(w < 5.0, p1, p2) * t)
        a = xp.abs(t)
        q = 1.0 - a
        in_tail = a > 0.5
        log_q = xp.log(xp.where(in_tail, q, 1.0))
        for _ in range(4):
            dens = 2.0 / math.sqrt(math.pi) * xp.exp(-x * x)
            centre_step = (erf(x) - a) / dens
            e = erfc(x)
            tail_step = -(xp.log(e) - log_q) * e / dens  # Newton on log(erfc(x)) = log(1 - |y|)
            x = x - xp.where(in_tail, tail_step, centre_step)
        out = xp.where(inside, xp.where(t < 0, -x, x), math.nan)
        out = xp.where(xp.abs(y) == 1.0, xp.sign(y) * math.inf, out)
    return out


def zeta(xp: Any, s: Any, q: Any) -> Any:
    """The Hurwitz zeta function ``sum_k (k + q) ** -s`` (``s > 1``; ``inf`` at ``s = 1`` and at
    the poles ``q = 0, -1, ...``; NaN for ``s < 1``, and for ``q < 0`` unless ``s`` is an
    integer), as SciPy's and PyTorch's."""
    s, q = xp.broadcast_arrays(xp.asarray(s, dtype=xp.float64), xp.asarray(q, dtype=xp.float64))
    with quiet(xp):
        pole = (q <= 0) & (q == xp.floor(q))
        bad = (s < 1) | ((q < 0) & (s != xp.floor(s))) | xp.isnan(s) | xp.isnan(q)
        bad |= q < _POLYGAMMA_MIN
        ss = xp.where(bad | (s == 1), 2.0, s)
        qs = xp.where(bad | pole, 1.0, q)
        acc = xp.zeros(qs.shape, dtype=xp.float64)
        y = qs.copy()
        while True:  # shift q up to where the Euler-Maclaurin tail converges fast
            low = y < _SHIFT_TO + 10.0
            if not bool(low.any()):
                break
            acc = acc + xp.where(low, xp.where(low, y, 1.0) ** -ss, 0.0)
            y = xp.where(low, y + 1.0, y)
        out = y ** (1 - ss) / (ss - 1) + 0.5 * y**-ss + acc
        rising, fact, yp = ss.copy(), 2.0, y ** (-ss - 1)
        for k, b in enumerate(_BERNOULLI, start=1):
            out = out + b / fact * rising * yp
            rising = rising * (ss + 2 * k - 1) * (ss + 2 * k)
            fact *= (2 * k + 1) * (2 * k + 2)
            yp = yp / (y * y)
        out = xp.where((s == 1) | pole, math.inf, out)
        out = xp.where(bad, math.nan, out)
    return out


#: Where the Bessel functions switch from their power series to their asymptotic expansion.
_BESSEL_ASYMPTOTIC_FROM = 17.0


def bessel_i(xp: Any, order: int, x: Any, scaled: bool) -> Any:
    """The modified Bessel function ``I_order(x)`` (``order`` 0 or 1), times ``exp(-|x|)`` if
    ``scaled``: the power series below |x| = 17, the asymptotic expansion above."""
    x = xp.asarray(x, dtype=xp.float64)
    ax = xp.abs(x)
    with quiet(xp):
        small = xp.minimum(ax, _BESSEL_ASYMPTOTIC_FROM)
        half_sq = (small * 0.5) ** 2
        term = (small * 0.5) ** order / math.factorial(order)
        series = term
        for k in range(1, 80):
            term = term * half_sq / (k * (k + order))
            series = series + term
        if scaled:
            series = series * xp.exp(-small)
        big = xp.maximum(ax, _BESSEL_ASYMPTOTIC_FROM)
        mu = 4.0 * order * order
        coef = xp.ones(big.shape, dtype=xp.float64)
        total = coef
        for k in range(1, 40):
            coef = coef * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
            total = total + coef
        asym = total / xp.sqrt(2.0 * math.pi * big)
        if not scaled:
            asym = asym * xp.exp(big)
        out = xp.where(ax < _BESSEL_ASYMPTOTIC_FROM, series, asym)
        if order == 1:
            out = xp.where(x < 0, -out, out)
    return xp.where(xp.isnan(x), math.nan, out)


def gammainc(xp: Any, a: Any, x: Any, upper: bool) -> Any:
    """The regularised incomplete gamma function ``P(a, x)`` (``upper``: ``Q = 1 - P``): the
    series where ``x < a + 1``, Lentz's continued fraction of ``Q`` elsewhere; SciPy's edges
    (NaN for negative arguments and at ``a = x = 0``; ``P(0, x > 0) = 1``)."""
    a, x = xp.broadcast_arrays(xp.asarray(a, dtype=xp.float64), xp.asarray(x, dtype=xp.float64))
    with quiet(xp):
        bad = (a < 0) | (x < 0) | xp.isnan(a) | xp.isnan(x) | ((a == 0) & (x == 0))
        aa = xp.where(bad | (a == 0) | xp.isinf(a), 1.0, a)
        xx = xp.where(bad | xp.isinf(x), 1.0, x)
        log_front = aa * xp.log(xp.where(xx > 0, xx, 1.0)) - xx - lgamma(xp, aa)
        # P by its series: x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
        term = xp.ones(aa.shape, dtype=xp.float64) / aa
        total = term
        for n in range(1, 400):
            term = term * xx / (aa + n)
            total = total + term
        p_series = xp.exp(log_front) * total
        # Q by its continued fraction (modified Lentz)
        tiny = 1e-300
        b = xx + 1.0 - aa
        c = xp.full(aa.shape, 1.0 / tiny)
        d = 1.0 / xp.where(b == 0, tiny, b)
        h = d
        for i in range(1, 400):
            an = -i * (i - aa)
            b = b + 2.0
            d = an * d + b
            d = 1.0 / xp.where(xp.abs(d) < tiny, tiny, d)
            c = b + an / c
            c = xp.where(xp.abs(c) < tiny, tiny, c)
            h = h * d * c
        q_frac = xp.exp(log_front) * h
        use_series = xx < aa + 1.0
        p = xp.where(use_series, p_series, 1.0 - q_frac)
        q = xp.where(use_series, 1.0 - p_series, q_frac)
        out = q if upper else p
        out = xp.where(xx == 0, 1.0 if upper else 0.0, out)
        out = xp.where((a == 0) & (x > 0), 0.0 if upper else 1.0, out)
        out = xp.where(xp.isinf(x) & ~xp.isinf(a), 0.0 if upper else 1.0, out)
        out = xp.where(xp.isinf(a) & ~xp.isinf(x), 1.0 if upper else 0.0, out)
        out = xp.where(bad | (xp.isinf(a) & xp.isinf(x)), math.nan, out)
    return out


def erfcx(xp: Any, x: Any, erfc: Callable[[Any], Any]) -> Any:
    """The scaled complementary error function ``exp(x^2) erfc(x)``: directly below 25, by its
    asymptotic series above (where ``erfc`` underflows); ``inf`` for very negative ``x``."""
    x = xp.asarray(x, dtype=xp.float64)
    with quiet(xp):
        near = xp.minimum(x, 25.0)
        direct = xp.exp(near * near) * erfc(near)
        far = xp.maximum(x, 25.0)
        inv2 = 1.0 / (2.0 * far * far)
        term = xp.ones(far.shape, dtype=xp.float64)
        total = term
        for k in range(1, 12):
            term = -term * (2 * k - 1) * inv2
            total = total + term
        asym = total / (far * math.sqrt(math.pi))
        out = xp.where(x < 25.0, direct, asym)
    return xp.where(xp.isnan(x), math.nan, out)


_EULER_GAMMA = 0.5772156649015329
#: Where Bessel J and Y switch to their asymptotic (Hankel) expansions.
_HANKEL_FROM = 50.0
#: Below this, Y uses its Neumann series; between it and :data:`_HANKEL_FROM`, integrals.
_Y_SERIES_BELOW = 8.0


def _hankel(xp: Any, order: int, x: Any) -> tuple[Any, Any]:
    """``(J, Y)`` of ``order`` for ``x >= 50`` from the Hankel expansions ``P``, ``Q``."""
    mu = 4.0 * order * order
    p = xp.ones(x.shape, dtype=xp.float64)
    q = xp.zeros(x.shape, dtype=xp.float64)
    term = xp.ones(x.shape, dtype=xp.float64)
    for k in range(1, 30):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        if k % 2:
            q = q + (term if k % 4 == 1 else -term)
        else:
            p = p + (-term if k % 4 == 2 else term)
    chi = x - (order / 2.0 + 0.25) * math.pi
    scale = xp.sqrt(2.0 / (math.pi * x))
    return scale * (p * xp.cos(chi) - q * xp.sin(chi)), scale * (p * xp.sin(chi) + q * xp.cos(chi))


def bessel_j(xp: Any, order: int, x: Any) -> Any:
    """The Bessel function of the first kind ``J_order(x)`` (order 0 or 1): the trapezoidal rule
    on its periodic integral below |x| = 50 (exponentially convergent), Hankel's expansion above."""
    x = xp.asarray(x, dtype=xp.float64)
    ax = xp.abs(x)
    with quiet(xp):
        near = xp.minimum(ax, _HANKEL_FROM)
        m = 160
        total = xp.zeros(x.shape, dtype=xp.float64)
        for k in range(m):
            tau = 2.0 * math.pi * k / m
            total = total + xp.cos(order * tau - near * math.sin(tau))
        inner = total / m
        outer = _hankel(xp, order, xp.maximum(ax, _HANKEL_FROM))[0]
        out = xp.where(ax < _HANKEL_FROM, inner, outer)
        if order == 1:
            out = xp.where(x < 0, -out, xp.where(x == 0, 0.0, out))
    return xp.where(~xp.isfinite(x), math.nan, out)  # (NaN at +-inf, as SciPy and PyTorch)


def _gauss_legendre(n: int, a: float, b: float) -> tuple[Any, Any]:
    import numpy as np  # noqa: PLC0415 - host-side quadrature nodes

    nodes, weights = np.polynomial.legendre.leggauss(n)
    return (b - a) / 2 * nodes + (a + b) / 2, (b - a) / 2 * weights


def bessel_y(xp: Any, order: int, x: Any) -> Any:
    """The Bessel function of the second kind ``Y_order(x)`` (order 0 or 1; NaN for ``x < 0``,
    ``-inf`` at 0): its Neumann series below 8, its integral representation (Gauss-Legendre) up
    to 50, Hankel's expansion above."""
    x = xp.asarray(x, dtype=xp.float64)
    with quiet(xp):
        xs = xp.clip(x, 1e-300, _Y_SERIES_BELOW)
        half = xs / 2.0
        log_term = (2.0 / math.pi) * (xp.log(half) + _EULER_GAMMA) * bessel_j(xp, order, xs)
        series = xp.zeros(x.shape, dtype=xp.float64)
        harmonic = 0.0
        if order == 0:  # (2/pi) sum_k>=1 (-1)^(k+1) H_k (x/2)^2k / (k!)^2
            term = xp.ones(x.shape, dtype=xp.float64)
            for k in range(1, 60):
                term = -term * half * half / (k * k)
                harmonic += 1.0 / k
                series = series - harmonic * term
            small = log_term + (2.0 / math.pi) * series
        else:  # -2/(pi x) - (1/pi) sum_k>=0 (-1)^k (H_k + H_k+1) (x/2)^(2k+1) / (k! (k+1)!)
            term = half.copy()
            for k in range(0, 60):
                if k:
                    term = -term * half * half / (k * (k + 1))
                nxt = harmonic + 1.0 / (k + 1)
                series = series + (harmonic + nxt) * term
                harmonic = nxt
            small = log_term - 2.0 / (math.pi * xs) - series / math.pi
        mid_x = xp.clip(x, _Y_SERIES_BELOW, _HANKEL_FROM)
        t1, w1 = _gauss_legendre(160, 0.0, math.pi)
        first = xp.zeros(x.shape, dtype=xp.float64)
        for t, w in zip(t1.tolist(), w1.tolist()):
            first = first + w * xp.sin(mid_x * math.sin(t) - order * t)
        # e^(-x sinh t) is below 1e-21 once x sinh t > 48: t up to asinh(48 / 8)
        t2, w2 = _gauss_legendre(160, 0.0, math.asinh(48.0 / _Y_SERIES_BELOW))
        second = xp.zeros(x.shape, dtype=xp.float64)
        sign = 1.0 if order % 2 == 0 else -1.0
        for t, w in zip(t2.tolist(), w2.tolist()):
            second = second + w * (math.exp(order * t) + sign * math.exp(-order * t)) * xp.exp(
                -mid_x * math.sinh(t)
            )
        mid = (first - second) / math.pi
        far = _hankel(xp, order, xp.maximum(x, _HANKEL_FROM))[1]
        out = xp.where(x < _Y_SERIES_BELOW, small, xp.where(x < _HANKEL_FROM, mid, far))
        out = xp.where(x == 0, -math.inf, out)
        out = xp.where((x < 0) | ~xp.isfinite(x), math.nan, out)  # (NaN at inf, as SciPy)
    return out


def bessel_k(xp: Any, order: int, x: Any, scaled: bool) -> Any:
    """The modified Bessel function of the second kind ``K_order(x)`` (order 0 or 1), times
    ``exp(x)`` if ``scaled``: below 50 the trapezoidal rule on ``int_0^inf exp(-x (cosh t - 1))
    cosh(order t) dt`` (even and analytic: exponentially convergent), above it the asymptotic
    expansion. NaN below 0, inf at 0."""
    x = xp.asarray(x, dtype=xp.float64)
    with quiet(xp):
        xs = xp.clip(xp.where(xp.isfinite(x), x, 1.0), 1e-12, _HANKEL_FROM)
        step = 0.25 / math.sqrt(_HANKEL_FROM)  # (the integrand's width near t = 0 is 1/sqrt(x))
        top = math.acosh(1.0 + 50.0 / float(xp.min(xs))) if xs.size else 0.0
        total = 0.5 * xp.ones(x.shape, dtype=xp.float64)
        for k in range(1, int(top / step) + 2):
            t = k * step
            total = total + math.cosh(order * t) * xp.exp(-xs * (math.cosh(t) - 1.0))
        near = total * step
        big = xp.maximum(xp.where(xp.isfinite(x), x, _HANKEL_FROM), _HANKEL_FROM)
        mu = 4.0 * order * order
        term = xp.ones(x.shape, dtype=xp.float64)
        series = term
        for k in range(1, 30):
            term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
            series = series + term
        far = series * xp.sqrt(math.pi / (2.0 * big))
        out = xp.where(x < _HANKEL_FROM, near, far)
        if not scaled:
            out = out * xp.exp(-xp.where(x < _HANKEL_FROM, xs, big))
        tiny = x < 1e-12  # the leading terms: K0 ~ -log(x/2) - gamma, K1 ~ 1/x
        lead = (-xp.log(xp.where(x > 0, x, 1.0) / 2.0) - _EULER_GAMMA) if order == 0 else 1.0 / x
        out = xp.where(tiny, lead * xp.exp(xs) if scaled else lead, out)
        out = xp.where(x == 0, math.inf, out)
        out = xp.where((x < 0) | xp.isnan(x), math.nan, out)
        out = xp.where(x == math.inf, 0.0, out)
    return out


class quiet:
    """NumPy's floating-point warnings off where infinities and NaNs are expected (CuPy has no
    such warnings: nothing to do there)."""

    def __init__(self, xp: Any):
        self.state = xp.errstate(all="ignore") if hasattr(xp, "errstate") else None

    def __enter__(self) -> None:
        if self.state is not None:
            self.state.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.state is not None:
            self.state.__exit__(*exc)
