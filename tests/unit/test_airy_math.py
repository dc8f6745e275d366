"""GT's Airy function ``Ai`` (what ``gt.special.airy_ai`` runs on the workers), against SciPy where
it is installed and against identities that need nothing: the constants at 0, the differential
equation, known zeros, continuity where its methods hand over, and PyTorch's edge values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gt.runtime.ops import airy

# the interval of the accuracy target, with the points where the four methods meet
GRID = np.concatenate([np.linspace(-30.0, 30.0, 24001), [-12.5, 2.5, 12.0]])


def test_matches_scipy_within_1e_12_of_the_value_or_of_its_envelope():
    # Where Ai oscillates (x < 0) its size near a zero is not the scale of its rounding errors:
    # the envelope sqrt(Ai^2 + Bi^2) is (SciPy's own results are off by 1e-11 relative there).
    sp = pytest.importorskip("scipy.special")
    ai, _, bi, _ = sp.airy(GRID)
    got = airy.airy_ai(np, GRID)
    scale = np.where(GRID < 0, np.hypot(ai, bi), np.abs(ai))
    err = np.abs(got - ai) / scale
    assert err.max() < 1e-12, (err.max(), GRID[err.argmax()])
    away_from_zeros = (GRID >= 0) | (np.abs(ai) > 0.05 * scale)
    rel = np.abs(got - ai)[away_from_zeros] / np.abs(ai[away_from_zeros])
    assert rel.max() < 1e-12


def test_values_at_zero_are_dlmf_constants():
    got = airy.airy_ai(np, np.array([0.0, -0.0]))
    want = 1.0 / (3.0 ** (2.0 / 3.0) * math.gamma(2.0 / 3.0))  # DLMF 9.2.3
    np.testing.assert_allclose(got, want, rtol=1e-15)
    values, slopes = airy.taylor_centers()
    at0 = -airy._TAYLOR_LO
    assert values[at0] == pytest.approx(want, rel=1e-15)
    assert slopes[at0] == pytest.approx(-1.0 / (3.0 ** (1.0 / 3.0) * math.gamma(1.0 / 3.0)), 1e-15)


def test_satisfies_the_airy_equation():
    # Ai'' = x Ai by central differences in every region (truncation h^2 Ai'''' / 12 and rounding
    # eps Ai / h^2 are both well below the bound)
    x, h = np.array([-25.3, -13.1, -7.7, -1.2, 0.4, 2.2, 6.5, 11.0, 17.0]), 1e-4
    f = lambda v: airy.airy_ai(np, v)  # noqa: E731
    second = (f(x + h) - 2 * f(x) + f(x - h)) / h**2
    envelope = np.where(x < 0, np.abs(x) ** -0.25 / np.sqrt(np.pi), f(x))
    assert np.all(np.abs(second - x * f(x)) <= 1e-6 * (1 + np.abs(x)) * envelope)


def _zero(k: int) -> float:
    """The k-th zero of Ai from DLMF 9.9.6 and 9.9.18: ``-T(3 pi (4k - 1) / 8)``."""
    t = 3 * math.pi * (4 * k - 1) / 8
    return -(t ** (2 / 3)) * (1 + 5 / 48 * t**-2 - 5 / 36 * t**-4 + 77125 / 82944 * t**-6)


def test_vanishes_at_its_zeros():
    # DLMF table 9.9.1's a_1 .. a_4 and a_10, and far zeros from the asymptotic expansion (a
    # phase that drifted by an ulp of zeta would show there)
    table = [-2.338107410459767, -4.08794944413097, -5.520559828095551, -6.786708090071759,
             -12.828776752865757]  # fmt: skip
    zeros = np.array(table + [_zero(k) for k in (50, 1000)])
    slope = np.abs(zeros) ** 0.25 / np.sqrt(np.pi)  # |Ai'| at a zero, nearly
    ulp = np.spacing(np.abs(zeros))
    assert np.all(np.abs(airy.airy_ai(np, zeros)) < 4 * ulp * slope)


@pytest.mark.parametrize(
    ("at", "left", "right"),
    [(-12.5, airy._oscillating, airy._taylor), (2.5, airy._taylor, airy._quadrature),
     (12.0, airy._quadrature, airy._decaying)],
)  # fmt: skip
def test_methods_agree_where_they_hand_over(at, left, right):
    x = np.array([at])
    assert left(np, x)[0] == pytest.approx(right(np, x)[0], rel=2e-15)


def test_edges_follow_pytorch():
    got = airy.airy_ai(np, np.array([np.inf, -np.inf, np.nan, 103.89, 103.9, 1e10, 1e300]))
    assert np.isnan(got[:3]).all()
    assert got[3] > 0 and (got[4:] == 0).all()
    far = airy.airy_ai(np, np.array([-1e5, -1e10, -1e200, -1e300]))
    amplitude = np.array([1e5, 1e10, 1e200, 1e300]) ** -0.25 / np.sqrt(np.pi)
    assert np.all(np.isfinite(far)) and np.all(np.abs(far) <= amplitude * (1 + 1e-12))


def test_oscillating_values_are_good_to_a_few_ulps_of_their_envelope():
    # 40 digits (mpmath, where installed) show what SciPy's float64 cannot: the phase
    # 2/3 |x|^(3/2) is carried beyond double precision (rounded to a double it costs 1e-14 here)
    mpmath = pytest.importorskip("mpmath")
    x = np.random.default_rng(3).uniform(-30.0, -12.5, 200)
    with mpmath.workdps(40):
        ai = [mpmath.airyai(mpmath.mpf(float(v))) for v in x]
        bi = [mpmath.airybi(mpmath.mpf(float(v))) for v in x]
        want = np.array([float(a) for a in ai])
        envelope = np.array([float(mpmath.sqrt(a * a + b * b)) for a, b in zip(ai, bi)])
    err = np.abs(airy.airy_ai(np, x) - want) / envelope
    assert err.max() < 2e-15


def test_the_low_part_of_two_thirds_is_what_decimal_arithmetic_gives():
    import decimal

    from gt.runtime.ops import airy

    exact = decimal.Decimal(2) / decimal.Decimal(3) - decimal.Decimal(airy._TWO_THIRDS_HI)
    assert airy._TWO_THIRDS_LO == float(exact)
