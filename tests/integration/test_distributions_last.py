"""The last of PyTorch's families through a real local cluster: NegativeBinomial,
ContinuousBernoulli (and its KL divergences), InverseGamma, FisherSnedecor, GeneralizedPareto,
VonMises, LogisticNormal and the stick-breaking transform. Expected values are written out here
with ``math`` and NumPy (closed forms, sums over the support, numerical integrals), never taken
from GT; sample statistics use fixed seeds and tolerances of several standard errors. Every test
runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import as_float64, assert_mean_close, each_backend_cluster, integrate

import gt
import gt.distributions as D

pytestmark = pytest.mark.timeout(120)
LGAMMA = np.vectorize(math.lgamma)


cluster = each_backend_cluster()


def np_(t) -> np.ndarray:
    return as_float64(t)


def f64(x) -> gt.Tensor:
    return gt.tensor(np.asarray(x, dtype=np.float64))


_integrate = integrate
_close_to = assert_mean_close


def _density(dist_fn, grid: np.ndarray) -> np.ndarray:
    return np.exp(np_(dist_fn().log_prob(f64(grid))))


# ------------------------------------------------------------------ NegativeBinomial
def test_negative_binomial_log_prob_moments_and_gradient(conn):
    r, p = np.array([2.5, 1.0, 4.0]), np.array([0.3, 0.6, 0.05])
    probs = f64(p).requires_grad_()
    nb = D.NegativeBinomial(f64(r), probs=probs)
    k = np.arange(200.0)[:, None]
    want = (
        LGAMMA(k + r) - LGAMMA(k + 1) - LGAMMA(r) + r * np.log1p(-p) + k * np.log(p)
    )  # P(k) = C(k + r - 1, k) (1 - p)^r p^k
    got = np_(nb.log_prob(f64(np.broadcast_to(k, (200, 3)))))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.exp(want).sum(0), 1.0, atol=1e-6)
    np.testing.assert_allclose(np_(nb.mean), r * p / (1 - p), rtol=1e-12)
    np.testing.assert_allclose(np_(nb.variance), r * p / (1 - p) ** 2, rtol=1e-12)
    np.testing.assert_allclose(np_(nb.mode), np.maximum(np.floor((r - 1) * p / (1 - p)), 0))
    nb.log_prob(f64([3.0, 0.0, 1.0])).sum().backward()
    kk = np.array([3.0, 0.0, 1.0])
    np.testing.assert_allclose(np_(probs.grad), kk / p - r / (1 - p), rtol=1e-6)


def test_negative_binomial_edges_and_validation(conn):
    zero = D.NegativeBinomial(f64([0.0, 2.0]), probs=f64([0.5, 0.0]))
    np.testing.assert_allclose(np_(zero.log_prob(f64([0.0, 0.0]))), [0.0, 0.0], atol=1e-12)
    by_logits = D.NegativeBinomial(3.0, logits=f64([0.4]))
    p = 1 / (1 + math.exp(-0.4))
    want = math.lgamma(5) - math.lgamma(3) - math.lgamma(3) + 3 * math.log1p(-p) + 2 * math.log(p)
    np.testing.assert_allclose(np_(by_logits.log_prob(f64([2.0]))), [want], rtol=1e-9)
    with pytest.raises(ValueError, match="HalfOpenInterval"):
        D.NegativeBinomial(2.0, probs=f64([1.0]))
    with pytest.raises(ValueError, match="GreaterThanEq"):
        D.NegativeBinomial(-1.0, probs=f64([0.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.NegativeBinomial(2.0)
    with pytest.raises(ValueError, match="support"):
        by_logits.log_prob(f64([1.5]))
    assert tuple(by_logits.expand((4, 1)).batch_shape) == (4, 1)


def test_negative_binomial_samples_have_its_moments(conn):
    gt.manual_seed(31)
    r, p = np.array([3.0, 0.5, 10.0]), np.array([0.4, 0.7, 0.1])
    s = np_(D.NegativeBinomial(f64(r), probs=f64(p)).sample((20000,)))
    assert s.shape == (20000, 3) and np.all(s == np.round(s)) and np.all(s >= 0)
    _close_to(s, r * p / (1 - p), r * p / (1 - p) ** 2)


# ------------------------------------------------------------------ ContinuousBernoulli
def _cb_density(x: np.ndarray, lam: float) -> np.ndarray:
    unnormalized = lam**x * (1 - lam) ** (1 - x)
    return unnormalized / _integrate(lambda t: lam**t * (1 - lam) ** (1 - t), 0, 1)


@pytest.mark.parametrize("lam", [0.1, 0.4995, 0.5, 0.73, 0.99])
def test_continuous_bernoulli_density_moments_cdf_entropy(conn, lam):
    cb = D.ContinuousBernoulli(probs=f64([lam]))
    x = np.linspace(0.0, 1.0, 11)
    np.testing.assert_allclose(
        np_(cb.log_prob(f64(x[:, None])))[:, 0], np.log(_cb_density(x, lam)), rtol=1e-5, atol=1e-9
    )
    mean = _integrate(lambda t: t * _cb_density(t, lam), 0, 1)
    var = _integrate(lambda t: (t - mean) ** 2 * _cb_density(t, lam), 0, 1)
    ent = -_integrate(lambda t: _cb_density(t, lam) * np.log(_cb_density(t, lam)), 0, 1)
    np.testing.assert_allclose(np_(cb.mean), [mean], rtol=1e-5)
    np.testing.assert_allclose(np_(cb.variance), [var], rtol=1e-4)
    np.testing.assert_allclose(np_(cb.entropy()), [ent], atol=1e-6)
    cdf = _integrate(lambda t: _cb_density(t, lam), 0, 0.3)
    # inside PyTorch's unstable region (0.499, 0.501] the cdf is that of the uniform
    np.testing.assert_allclose(
        np_(cb.cdf(f64([0.3]))), [cdf], rtol=1e-5 if abs(lam - 0.5) > 1e-3 else 1e-3
    )
    np.testing.assert_allclose(np_(cb.icdf(cb.cdf(f64([0.3])))), [0.3], rtol=1e-6)


def test_continuous_bernoulli_samples_validation_and_kl(conn):
    gt.manual_seed(32)
    lam = np.array([0.2, 0.8])
    cb = D.ContinuousBernoulli(logits=f64(np.log(lam / (1 - lam))))
    s = np_(cb.rsample((20000,)))
    assert np.all((s >= 0) & (s <= 1))
    means = [_integrate(lambda t, m=m: t * _cb_density(t, m), 0, 1) for m in lam]
    _close_to(s, means, 1 / 12)
    with pytest.raises(ValueError, match="The parameter probs has invalid values"):
        D.ContinuousBernoulli(probs=f64([1.5]), validate_args=True)
    p, q = D.ContinuousBernoulli(probs=f64([0.3])), D.ContinuousBernoulli(probs=f64([0.85]))
    want = _integrate(
        lambda t: _cb_density(t, 0.3) * np.log(_cb_density(t, 0.3) / _cb_density(t, 0.85)), 0, 1
    )
    np.testing.assert_allclose(np_(D.kl_divergence(p, q)), [want], rtol=1e-5)
    normal = D.Normal(f64([0.2]), f64([1.5]))
    log_q = -0.5 * ((np.linspace(0, 1, 400001) - 0.2) / 1.5) ** 2 - math.log(
        1.5 * math.sqrt(2 * math.pi)
    )
    grid = np.linspace(0, 1, 400001)
    dens = _cb_density(grid, 0.3)
    y = dens * (np.log(dens) - log_q)
    want = float(np.sum((y[1:] + y[:-1]) * np.diff(grid)) / 2)
    np.testing.assert_allclose(np_(D.kl_divergence(p, normal)), [want], rtol=1e-5)
    assert np.isinf(np_(D.kl_divergence(D.Normal(f64([0.0]), 1.0), p))).all()
    assert np.isinf(np_(D.kl_divergence(p, D.Uniform(f64([0.2]), f64([0.9]))))).all()


# ------------------------------------------------------------------ InverseGamma, FisherSnedecor
def test_inverse_gamma_density_moments_cdf_and_samples(conn):
    a, b = np.array([2.5, 4.0]), np.array([1.5, 3.0])
    ig = D.InverseGamma(f64(a), f64(b))
    x = np.array([[0.3, 0.8], [1.1, 2.0]])
    want = a * np.log(b) - LGAMMA(a) - (a + 1) * np.log(x) - b / x
    np.testing.assert_allclose(np_(ig.log_prob(f64(x))), want, rtol=1e-10)
    np.testing.assert_allclose(np_(ig.mean), b / (a - 1), rtol=1e-12)
    np.testing.assert_allclose(np_(ig.variance), b**2 / ((a - 1) ** 2 * (a - 2)), rtol=1e-12)
    np.testing.assert_allclose(np_(ig.mode), b / (a + 1), rtol=1e-12)
    for i in range(2):

        def dens(t, i=i):
            t = np.maximum(t, 1e-300)
            return np.exp(
                a[i] * np.log(b[i]) - math.lgamma(a[i]) - (a[i] + 1) * np.log(t) - b[i] / t
            )

        cdf = _integrate(dens, 1e-6, 1.0)
        ent = -_integrate(lambda t, d=dens: d(t) * np.log(np.maximum(d(t), 1e-300)), 1e-3, 400.0)
        np.testing.assert_allclose(np_(ig.cdf(f64([1.0, 1.0])))[i], cdf, rtol=1e-5)
        np.testing.assert_allclose(np_(ig.entropy())[i], ent, atol=2e-3)
    gt.manual_seed(33)
    big = D.InverseGamma(f64([5.0]), f64([2.0]))
    s = np_(big.sample((20000,)))
    assert np.all(s > 0)
    _close_to(s, [0.5], [4.0 / (16 * 3)])
    assert np_(D.InverseGamma(f64([0.5]), f64([1.0])).mean)[0] == math.inf


def test_fisher_snedecor_density_moments_and_samples(conn):
    d1, d2 = 5.0, 12.0
    fs = D.FisherSnedecor(f64([d1]), f64([d2]))

    def dens(t):
        t = np.maximum(t, 1e-300)
        log_b = math.lgamma(d1 / 2) + math.lgamma(d2 / 2) - math.lgamma((d1 + d2) / 2)
        return np.exp(
            (d1 / 2) * math.log(d1 / d2) + (d1 / 2 - 1) * np.log(t)
            - ((d1 + d2) / 2) * np.log1p(d1 * t / d2) - log_b
        )  # fmt: skip

    x = np.array([0.2, 1.0, 3.5])
    np.testing.assert_allclose(np.exp(np_(fs.log_prob(f64(x[:, None])))[:, 0]), dens(x), rtol=1e-9)
    np.testing.assert_allclose(_integrate(dens, 0, 2000.0, 2000001), 1.0, atol=1e-3)
    np.testing.assert_allclose(np_(fs.mean), [d2 / (d2 - 2)], rtol=1e-12)
    var = 2 * d2**2 * (d1 + d2 - 2) / (d1 * (d2 - 2) ** 2 * (d2 - 4))
    np.testing.assert_allclose(np_(fs.variance), [var], rtol=1e-12)
    np.testing.assert_allclose(np_(fs.mode), [(d1 - 2) / d1 * d2 / (d2 + 2)], rtol=1e-12)
    edge = D.FisherSnedecor(f64([1.0]), f64([2.0]))
    assert np.isnan(np_(edge.mean)).all() and np.isnan(np_(edge.variance)).all()
    assert np.isnan(np_(edge.mode)).all()
    gt.manual_seed(34)
    s = np_(fs.rsample((20000,)))
    _close_to(s, [d2 / (d2 - 2)], [var])


# ------------------------------------------------------------------ GeneralizedPareto
def test_generalized_pareto_density_cdf_moments_and_samples(conn):
    loc, scale, xi = (
        np.array([0.0, 0.5, -1.0]),
        np.array([1.0, 2.0, 0.5]),
        np.array([0.0, 0.3, -0.5]),
    )
    gp = D.GeneralizedPareto(f64(loc), f64(scale), f64(xi))
    x = np.array([0.7, 1.5, -0.9])
    z = (x - loc) / scale
    want = np.where(xi == 0, -z, -(1 / np.where(xi == 0, 1, xi) + 1) * np.log1p(xi * z)) - np.log(
        scale
    )
    np.testing.assert_allclose(np_(gp.log_prob(f64(x))), want, rtol=1e-10)
    surv = np.where(xi == 0, np.exp(-z), (1 + xi * z) ** (-1 / np.where(xi == 0, 1, xi)))
    np.testing.assert_allclose(np_(gp.cdf(f64(x))), 1 - surv, rtol=1e-10)
    np.testing.assert_allclose(np_(gp.icdf(gp.cdf(f64(x)))), x, rtol=1e-9)
    np.testing.assert_allclose(np_(gp.mean), loc + scale / (1 - xi), rtol=1e-12)
    np.testing.assert_allclose(
        np_(gp.variance), scale**2 / ((1 - xi) ** 2 * (1 - 2 * xi)), rtol=1e-12
    )
    np.testing.assert_allclose(np_(gp.entropy()), np.log(scale) + xi + 1, rtol=1e-12)
    np.testing.assert_allclose(np_(gp.support.upper_bound)[2], -1.0 + 0.5 / 0.5)
    with pytest.raises(ValueError, match="support"):
        gp.log_prob(f64([0.7, 1.5, 0.5]))  # above the bound loc - scale / xi
    gt.manual_seed(35)
    s = np_(gp.rsample((20000,)))
    _close_to(s, loc + scale / (1 - xi), scale**2 / ((1 - xi) ** 2 * (1 - 2 * xi)))
    heavy = D.GeneralizedPareto(0.0, 1.0, f64([1.5]))
    assert np.isnan(np_(heavy.mean)).all() and np.isnan(np_(heavy.variance)).all()


# ------------------------------------------------------------------ VonMises
def test_von_mises_density_variance_and_gradient(conn):
    loc, kappa = np.array([0.5, -2.0, 3.0]), np.array([0.3, 2.0, 50.0])
    k = f64(kappa).requires_grad_()
    vm = D.VonMises(f64(loc), k)
    grid = np.linspace(-math.pi, math.pi, 200001)
    dens = np.exp(np_(vm.log_prob(f64(np.broadcast_to(grid[:, None], (grid.size, 3))))))
    for i in range(3):
        y = dens[:, i]
        total = float(np.sum((y[1:] + y[:-1]) * np.diff(grid)) / 2)
        np.testing.assert_allclose(total, 1.0, rtol=1e-6)
        c = np.cos(grid - loc[i]) * y
        np.testing.assert_allclose(
            1 - float(np.sum((c[1:] + c[:-1]) * np.diff(grid)) / 2), np_(vm.variance)[i], rtol=1e-5
        )
    # periodic in the value
    np.testing.assert_allclose(
        np_(vm.log_prob(f64([0.1, 0.2, 0.3]))), np_(vm.log_prob(f64([0.1, 0.2, 0.3]) + 2 * math.pi))
    )
    vm.log_prob(f64([0.1, 0.2, 0.3])).sum().backward()
    i0, i1 = np.i0(kappa), np_(D.VonMises(f64(loc), f64(kappa)).variance)
    want = np.cos(np.array([0.1, 0.2, 0.3]) - loc) - (1 - i1)  # d log I0 / dk = I1 / I0
    np.testing.assert_allclose(np_(k.grad), want, rtol=1e-6)
    assert i0.shape == (3,)


def test_von_mises_samples(conn):
    gt.manual_seed(36)
    loc, kappa = np.array([0.5, -3.0, 3.1, 0.0]), np.array([0.5, 4.0, 30.0, 1e-6])
    vm = D.VonMises(f64(loc), f64(kappa))
    s = np_(vm.sample((20000,)))
    assert s.shape == (20000, 4)
    assert np.all((s >= -math.pi) & (s < math.pi))
    r = 1 - np_(vm.variance)  # E cos(x - loc)
    _close_to(np.cos(s - loc), r, np.full(4, 0.5))
    _close_to(np.sin(s - loc), np.zeros(4), np.full(4, 0.5))
    single = D.VonMises(0.0, 1.0).sample((7,))
    assert tuple(single.shape) == (7,) and single.dtype == gt.float32


# ------------------------------------------------------------------ LogisticNormal
def test_stick_breaking_round_trip_and_jacobian(conn):
    x = np.random.default_rng(37).standard_normal((4, 3))
    t = D.StickBreakingTransform()
    y = np_(t(f64(x)))
    assert y.shape == (4, 4)
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np_(t.inv(f64(y))), x, rtol=1e-9, atol=1e-9)
    # the Jacobian of x -> y[:-1] by finite differences
    eps, jac = 1e-6, np.zeros((3, 3))
    for j in range(3):
        e = np.zeros(3)
        e[j] = eps
        hi = np_(t(f64(x[0] + e)))[:-1]
        lo = np_(t(f64(x[0] - e)))[:-1]
        jac[:, j] = (hi - lo) / (2 * eps)
    want = math.log(abs(np.linalg.det(jac)))
    np.testing.assert_allclose(np_(t.log_abs_det_jacobian(f64(x), f64(y)))[0], want, rtol=1e-6)
    assert t.forward_shape((2, 3)) == (2, 4) and t.inverse_shape((2, 4)) == (2, 3)


def test_logistic_normal_log_prob_shapes_and_samples(conn):
    loc, scale = np.array([[0.2, -0.5, 1.0]]), np.array([[1.0, 0.5, 2.0]])
    ln = D.LogisticNormal(f64(loc), f64(scale))
    assert tuple(ln.batch_shape) == (1,) and tuple(ln.event_shape) == (4,)
    y = np.array([[0.1, 0.2, 0.3, 0.4]])
    t = D.StickBreakingTransform()
    x = np_(t.inv(f64(y)))
    normal = -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * math.log(2 * math.pi)
    want = normal.sum(-1) - np_(t.log_abs_det_jacobian(f64(x), f64(y)))
    np.testing.assert_allclose(np_(ln.log_prob(f64(y))), want, rtol=1e-10)
    gt.manual_seed(38)
    s = np_(ln.rsample((500,)))
    assert s.shape == (500, 1, 4)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-9)
    assert np.all(s > 0)
    scalar = D.LogisticNormal(0.0, 1.0)
    assert tuple(scalar.event_shape) == (2,) and tuple(scalar.batch_shape) == ()
    assert tuple(ln.expand((3,)).sample((2,)).shape) == (2, 3, 4)
    with pytest.raises(ValueError, match="support"):
        ln.log_prob(f64([[0.5, 0.5, 0.5, 0.5]]))


# ------------------------------------------------------------------ Wishart, LKJCholesky
def test_wishart_samples_have_its_mean_and_variance_and_carry_gradients(conn):
    gt.manual_seed(31)
    m = np.random.default_rng(31).standard_normal((3, 3))
    cov0 = m @ m.T + np.eye(3)
    cov = f64(cov0).requires_grad_()
    df = f64(6.5).requires_grad_()
    w = D.Wishart(df, covariance_matrix=cov)
    s = w.rsample((4000,))
    assert s.shape == (4000, 3, 3)
    flat = np_(s).reshape(4000, 9)
    _close_to(flat, (6.5 * cov0).reshape(9), np_(w.variance).reshape(9))
    assert np.allclose(flat.reshape(-1, 3, 3), np.swapaxes(flat.reshape(-1, 3, 3), 1, 2))
    assert np.linalg.eigvalsh(flat.reshape(-1, 3, 3)).min() > 0
    s.mean(0).trace().backward()  # E[trace] = df * trace(cov): d/d df = trace(cov), d/d cov = df I
    assert abs(float(df.grad.item()) - np.trace(cov0)) < 0.1 * np.trace(cov0)
    np.testing.assert_allclose(np_(cov.grad), 6.5 * np.eye(3), atol=0.6)


def test_lkj_cholesky_samples_are_correlation_factors_with_its_marginals(conn):
    gt.manual_seed(32)
    d, eta = 4, 2.0
    lkj = D.LKJCholesky(d, f64(eta), validate_args=True)
    factors = lkj.sample((3000,))
    assert bool(D.constraints.corr_cholesky.check(factors).all())
    f = np_(factors)
    corr = f @ np.swapaxes(f, 1, 2)
    np.testing.assert_allclose(np.diagonal(corr, axis1=1, axis2=2), 1.0, atol=1e-9)
    off = corr[:, np.triu_indices(d, 1)[0], np.triu_indices(d, 1)[1]]
    # (r + 1) / 2 ~ Beta(eta - 1 + d / 2, same): mean 0, variance 1 / (2 eta + d - 1)
    _close_to(off, np.zeros(6), np.full(6, 1 / (2 * eta + d - 1)))
    assert abs(off.var() - 1 / (2 * eta + d - 1)) < 0.1 / (2 * eta + d - 1)
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        D.LKJCholesky(1)
