"""GT's own gamma-family functions and ``erfinv`` (what a NumPy worker without SciPy runs), gamma
sampling and its implicit derivative, against ``math``, identities and (where installed) SciPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gt.runtime.ops import special_math as sm
from gt.runtime.ops.gammafn import (
    WILSON_HILFERTY_FROM,
    draw_poisson,
    draw_standard_gamma,
    polygamma_order,
    standard_gamma_grad,
)
from gt.runtime.worker import backend as B

ERF = np.vectorize(math.erf, otypes=[np.float64])
ERFC = np.vectorize(math.erfc, otypes=[np.float64])
POINTS = np.concatenate([np.linspace(-30.3, 40.1, 1501), [1e-8, 0.5, 1.0, 2.0, 1e3, 1e6]])


def test_lgamma_matches_math_lgamma_and_is_infinite_at_the_poles():
    finite = POINTS[~((POINTS <= 0) & (POINTS == np.floor(POINTS)))]
    want = np.array([math.lgamma(v) for v in finite])
    np.testing.assert_allclose(sm.lgamma(np, finite), want, rtol=1e-13, atol=1e-13)
    assert sm.lgamma(np, np.array([0.0, -1.0, -7.0, np.inf])).tolist() == [math.inf] * 4
    assert np.isnan(sm.lgamma(np, np.array([np.nan])))[0]


def test_digamma_satisfies_its_recurrence_and_known_values():
    x = POINTS[(POINTS > -30) & (POINTS != np.floor(POINTS))]
    np.testing.assert_allclose(
        sm.digamma(np, x + 1) - sm.digamma(np, x), 1 / x, rtol=1e-9, atol=1e-9
    )
    euler = 0.5772156649015329
    got = sm.digamma(np, np.array([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(got, [-euler, -euler - 2 * math.log(2), 1 - euler], rtol=1e-14)


def test_digamma_is_the_derivative_of_lgamma():
    x, h = np.array([0.3, 1.7, 4.2, -0.6, -3.3, 25.0]), 1e-6
    fd = np.array([(math.lgamma(v + h) - math.lgamma(v - h)) / (2 * h) for v in x])
    np.testing.assert_allclose(sm.digamma(np, x), fd, rtol=1e-6, atol=1e-6)


def test_digamma_edges_follow_pytorch():
    got = sm.digamma(np, np.array([0.0, -0.0, -1.0, -4.0, np.inf, -np.inf, np.nan]))
    assert got[0] == -math.inf and got[1] == math.inf
    assert np.isnan(got[2:4]).all() and got[4] == math.inf and np.isnan(got[5:]).all()


def test_polygamma_known_values_and_recurrence():
    zeta3 = 1.2020569031595942
    got = [
        sm.polygamma(np, n, np.array([x]))[0] for n, x in ((1, 1.0), (1, 0.5), (2, 1.0), (3, 1.0))
    ]
    np.testing.assert_allclose(
        got, [math.pi**2 / 6, math.pi**2 / 2, -2 * zeta3, math.pi**4 / 15], rtol=1e-13
    )
    x = np.array([0.3, 2.5, -1.5, -7.25, 12.0])
    for n in (1, 2, 5, 9):
        step = (-1) ** n * math.factorial(n) / x ** (n + 1)  # psi^(n)(x+1) = psi^(n)(x) + step
        here = sm.polygamma(np, n, x)
        diff = sm.polygamma(np, n, x + 1) - here  # (a difference: its error is the terms')
        np.testing.assert_allclose(diff, step, rtol=1e-9, atol=1e-13 * np.abs(here).max())
    assert sm.polygamma(np, 1, np.array([0.0]))[0] == math.inf


def test_erfinv_inverts_erf_to_the_last_digits_including_the_tails():
    y = np.concatenate([np.linspace(-0.999, 0.999, 999), [1 - 1e-12, -1 + 1e-15, 1e-30, 0.0]])
    x = sm.erfinv(np, y, ERF, ERFC)
    centre = np.abs(y) <= 0.5
    np.testing.assert_allclose(ERF(x[centre]), y[centre], rtol=1e-15, atol=1e-16)
    tail = ~centre
    np.testing.assert_allclose(ERFC(np.abs(x[tail])), 1 - np.abs(y[tail]), rtol=1e-13)
    edges = sm.erfinv(np, np.array([1.0, -1.0, 1.5, np.nan]), ERF, ERFC)
    assert edges[0] == math.inf and edges[1] == -math.inf and np.isnan(edges[2:]).all()


def test_gt_functions_agree_with_scipy_where_it_is_installed():
    special = pytest.importorskip("scipy.special")
    x = POINTS[(POINTS > -30) & (POINTS != np.floor(POINTS))]
    np.testing.assert_allclose(sm.lgamma(np, x), special.gammaln(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sm.digamma(np, x), special.digamma(x), rtol=1e-11, atol=1e-11)
    for n in (1, 2, 4, 7):
        np.testing.assert_allclose(sm.polygamma(np, n, x), special.polygamma(n, x), rtol=1e-12)
    y = np.linspace(-0.9999, 0.9999, 2001)
    np.testing.assert_allclose(sm.erfinv(np, y, ERF, ERFC), special.erfinv(y), rtol=1e-14)


def test_a_worker_without_scipy_uses_gts_own_functions(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "scipy.special", None)  # import fails
    be = B.Backend(np, "cpu")
    x = np.array([0.5, 3.0, 7.5])
    np.testing.assert_allclose(be.special("gammaln")(x), [math.lgamma(v) for v in x], rtol=1e-13)
    np.testing.assert_allclose(be.special("polygamma")(1, np.array([1.0])), [math.pi**2 / 6])
    with pytest.raises(KeyError, match="no special function"):
        be.special("bessel_j0")


def test_standard_gamma_is_deterministic_per_element_and_has_the_gamma_law():
    alpha = np.full(40000, 2.0)
    x = draw_standard_gamma(np, alpha, seed=123)
    np.testing.assert_array_equal(x, draw_standard_gamma(np, alpha, seed=123))
    assert not np.array_equal(x, draw_standard_gamma(np, alpha, seed=124))
    # an element's value does not depend on the others (its proposals are its own counters)
    np.testing.assert_array_equal(draw_standard_gamma(np, alpha[:7], seed=123), x[:7])
    # Gamma(2, 1) has the CDF 1 - e^-x (1 + x): Kolmogorov-Smirnov distance
    xs = np.sort(x)
    cdf = 1 - np.exp(-xs) * (1 + xs)
    ks = np.max(np.abs(cdf - (np.arange(1, xs.size + 1) - 0.5) / xs.size))
    assert ks < 1.63 / math.sqrt(xs.size)  # the 1 % critical value
    bad = draw_standard_gamma(np, np.array([0.0, -1.0, np.nan, np.inf]), seed=1)
    assert np.isnan(bad).all()


@pytest.mark.parametrize("alpha", [0.05, 0.7, 1.0, 3.5, 60.0, 5000.0])
def test_the_implicit_derivative_of_a_sample_averages_to_that_of_the_moments(alpha):
    # E[x] = alpha and E[x^2] = alpha (alpha + 1): the derivatives of a sample average to 1 and
    # 2 alpha + 1 (pathwise gradients are unbiased)
    a = np.full(30000, alpha)
    x = draw_standard_gamma(np, a, seed=7)
    dx = standard_gamma_grad(np, x, a)
    assert abs(dx.mean() - 1.0) < 5 * dx.std() / math.sqrt(a.size)
    d2 = 2 * x * dx
    assert abs(d2.mean() - (2 * alpha + 1)) < 5 * d2.std() / math.sqrt(a.size)


def test_the_implicit_derivative_matches_the_cdf_where_scipy_is_installed():
    special = pytest.importorskip("scipy.special")
    a = np.array([0.3, 1.0, 2.5, 40.0, 900.0, WILSON_HILFERTY_FROM * 3])
    x = special.gammaincinv(a, np.array([0.2, 0.5, 0.9, 0.01, 0.7, 0.4]))
    h = 1e-6 * a
    dfda = (special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h)
    pdf = np.exp((a - 1) * np.log(x) - x - special.gammaln(a))
    np.testing.assert_allclose(standard_gamma_grad(np, x, a), -dfda / pdf, rtol=2e-4)


@pytest.mark.parametrize("lam", [0.7, 4.0, 25.0])
def test_poisson_draws_follow_the_poisson_law(lam):
    x = draw_poisson(np, np.full(60000, lam), seed=21).astype(int)
    np.testing.assert_array_equal(x, draw_poisson(np, np.full(60000, lam), seed=21))
    ks = np.arange(0, int(lam * 3) + 5)
    pmf = np.exp(ks * math.log(lam) - lam - np.array([math.lgamma(k + 1) for k in ks])) * x.size
    obs = np.array([(x == k).sum() for k in ks])
    keep = pmf > 20
    chi2 = ((obs[keep] - pmf[keep]) ** 2 / pmf[keep]).sum()
    dof = keep.sum() - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof)  # far above the 99.9th percentile
    bad = draw_poisson(np, np.array([-1.0, np.nan, np.inf]), seed=1)
    assert np.isnan(bad).all()


def test_hostile_arguments_are_bounded():
    # a sample no gamma draw makes would need ~1e150 series terms: the approximation takes it
    out = standard_gamma_grad(np, np.array([1e300, 3.0]), np.array([2.0, 2.0]))
    assert out.shape == (2,) and np.isfinite(out[1])
    for bad in (10**9, -1, "3", 2.0, True):
        with pytest.raises(ValueError, match="polygamma"):
            polygamma_order(bad)
    assert polygamma_order(150) == 150


def test_bessel_zeta_incomplete_gamma_and_erfcx_agree_with_scipy():
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-40, 40, 801), [0.0, 16.99, 17.01, 300.0, 700.0]])
    for order, scaled, ref in ((0, False, special.i0), (1, False, special.i1),
                               (0, True, special.i0e), (1, True, special.i1e)):  # fmt: skip
        np.testing.assert_allclose(sm.bessel_i(np, order, x, scaled), ref(x), rtol=1e-13)
    s = np.array([2, 3, 1.5, 4.5, 2, 3, 10, 1, 0.5, 2, 2.5])
    q = np.array([1, 2, 0.3, 7, -1.5, -1.5, 0.01, 1, 1, 0, -1.5])
    np.testing.assert_allclose(sm.zeta(np, s, q), special.zeta(s, q), rtol=1e-13)
    a, xx = np.meshgrid(np.geomspace(0.01, 500, 40), np.geomspace(1e-3, 600, 40))
    np.testing.assert_allclose(sm.gammainc(np, a, xx, False), special.gammainc(a, xx), atol=1e-12)
    np.testing.assert_allclose(sm.gammainc(np, a, xx, True), special.gammaincc(a, xx), atol=1e-12)
    edges_a, edges_x = (
        np.array([0.0, 0.0, 1.0, 2.0, np.inf, 1.0]),
        np.array([0.0, 1, 0, np.inf, 1, -1]),
    )
    np.testing.assert_array_equal(sm.gammainc(np, edges_a, edges_x, False),
                                  special.gammainc(edges_a, edges_x))  # fmt: skip
    y = np.concatenate([np.linspace(-5, 60, 651), [-30.0, 1e3, 1e10]])
    np.testing.assert_allclose(sm.erfcx(np, y, ERFC), special.erfcx(y), rtol=1e-12)


def test_bessel_j_y_k_agree_with_scipy():
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-120, 120, 2401), [0.0, 7.99, 8.01, 49.99, 50.01, 1e4]])
    np.testing.assert_allclose(sm.bessel_j(np, 0, x), special.j0(x), atol=1e-14)
    np.testing.assert_allclose(sm.bessel_j(np, 1, x), special.j1(x), atol=1e-14)
    pos = np.concatenate([np.geomspace(1e-8, 120, 1201), [7.99, 8.01, 49.99, 50.01, 1e4]])
    for order, ref in ((0, special.y0), (1, special.y1)):
        want = ref(pos)
        np.testing.assert_allclose(sm.bessel_y(np, order, pos), want, rtol=1e-12,
                                   atol=1e-13)  # fmt: skip
    k = np.concatenate([np.geomspace(1e-14, 700, 1500), [49.99, 50.01]])
    for order, scaled, ref in ((0, False, special.k0), (1, False, special.k1),
                               (0, True, special.k0e), (1, True, special.k1e)):  # fmt: skip
        np.testing.assert_allclose(sm.bessel_k(np, order, k, scaled), ref(k), rtol=2e-12)
    edges = np.array([0.0, -1.0, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(sm.bessel_y(np, 0, edges), special.y0(edges))
    np.testing.assert_allclose(sm.bessel_j(np, 1, edges), special.j1(edges), atol=1e-15)
    np.testing.assert_array_equal(sm.bessel_k(np, 1, edges, False), special.k1(edges))
