"""The counting, heavy-tailed, extreme-value, power, relaxed, mixture and low-rank Gaussian
distributions through a real local cluster. Expected values are written out here with ``math``
and NumPy (closed forms, sums over the support, numerical integrals), never taken from GT; sample
statistics use fixed seeds and tolerances of several standard errors. Every test runs on NumPy
workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import as_float64, assert_mean_close, each_backend_cluster, integrate

import gt
import gt.distributions as D

pytestmark = pytest.mark.timeout(120)
LGAMMA = np.vectorize(math.lgamma)
ERF = np.vectorize(math.erf)
EULER = 0.5772156649015329


cluster = each_backend_cluster()


def np_(t) -> np.ndarray:
    return as_float64(t)


def f64(x) -> gt.Tensor:
    return gt.tensor(np.asarray(x, dtype=np.float64))


_integrate = integrate
_close_to = assert_mean_close


def _log_binom(n, k):
    return LGAMMA(n + 1) - LGAMMA(k + 1) - LGAMMA(n - k + 1)


# ------------------------------------------------------------------ Binomial, Multinomial, Geometric
def test_binomial_log_prob_moments_entropy_and_gradient(conn):
    n, p, k = np.array([10.0, 3.0, 7.0]), np.array([0.1, 0.5, 0.9]), np.array([2.0, 1.0, 7.0])
    probs = f64(p).requires_grad_()
    b = D.Binomial(f64(n), probs=probs)
    lp = b.log_prob(f64(k))
    want = _log_binom(n, k) + k * np.log(p) + (n - k) * np.log1p(-p)
    np.testing.assert_allclose(np_(lp), want, rtol=1e-10)
    lp.sum().backward()
    np.testing.assert_allclose(np_(probs.grad), k / p - (n - k) / (1 - p), rtol=1e-8)
    np.testing.assert_allclose(np_(b.mean), n * p)
    np.testing.assert_allclose(np_(b.variance), n * p * (1 - p), rtol=1e-12)
    np.testing.assert_allclose(np_(b.mode), np.minimum(np.floor((n + 1) * p), n))
    # logits, and probabilities 0 and 1 at the ends of the support
    lg = D.Binomial(5, logits=f64([-30.0, 0.0, 30.0])).log_prob(f64([0.0, 2.0, 5.0]))
    np.testing.assert_allclose(np_(lg), [0.0, math.log(10 / 32), 0.0], atol=1e-12)
    edge = D.Binomial(4, probs=f64([0.0, 1.0])).log_prob(f64([0.0, 4.0]))
    np.testing.assert_allclose(np_(edge), [0.0, 0.0], atol=1e-6)
    ks = np.arange(7.0)
    pmf = np.exp(_log_binom(6.0, ks) + ks * math.log(0.3) + (6 - ks) * math.log(0.7))
    got = D.Binomial(6, probs=f64([0.3])).entropy()
    np.testing.assert_allclose(np_(got), [-np.sum(pmf * np.log(pmf))], rtol=1e-10)


def test_binomial_support_expand_and_inhomogeneous_counts(conn):
    b = D.Binomial(3, probs=gt.tensor([0.2, 0.6]))
    support = b.enumerate_support()
    assert tuple(support.shape) == (4, 2)
    np.testing.assert_array_equal(np_(support)[:, 0], [0, 1, 2, 3])
    assert tuple(b.enumerate_support(expand=False).shape) == (4, 1)
    e = b.expand((5, 2))
    assert tuple(e.batch_shape) == (5, 2) and tuple(e.total_count.shape) == (5, 2)
    np.testing.assert_allclose(np_(e.mean), np.tile([0.6, 1.8], (5, 1)), rtol=1e-6)
    mixed = D.Binomial(gt.tensor([5.0, 6.0]), gt.tensor([0.3, 0.4]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        mixed.entropy()
    with pytest.raises(ValueError, match="total_count"):
        D.Binomial(gt.tensor([-1.0]), gt.tensor([0.5]))
    with pytest.raises(ValueError, match="support"):
        b.log_prob(gt.tensor([4.0, 0.0]))


def test_binomial_samples_have_its_moments(conn):
    gt.manual_seed(11)
    n, p = np.array([20.0, 5.0, 0.0, 8.0]), np.array([0.3, 0.9, 0.5, 1.0])
    s = np_(D.Binomial(f64(n), f64(p)).sample((20000,)))
    assert s.shape == (20000, 4)
    assert np.all(s == np.round(s)) and np.all(s >= 0) and np.all(s <= n)
    _close_to(s, n * p, np.maximum(n * p * (1 - p), 1e-12))
    np.testing.assert_allclose(s.var(0)[:2], (n * p * (1 - p))[:2], rtol=0.06)


def test_multinomial_log_prob_entropy_and_samples(conn):
    p = np.array([0.2, 0.3, 0.5])
    m = D.Multinomial(4, probs=f64(p * 10))  # probabilities are normalized
    x = np.array([[1.0, 0.0, 3.0], [2.0, 2.0, 0.0]])
    want = [
        math.lgamma(5) - sum(math.lgamma(c + 1) for c in row) + float(np.sum(row * np.log(p)))
        for row in x
    ]
    np.testing.assert_allclose(np_(m.log_prob(f64(x))), want, rtol=1e-10)
    # entropy by enumerating every count vector of total 4
    counts = [c for c in itertools.product(range(5), repeat=3) if sum(c) == 4]
    lps = np.array([math.lgamma(5) - sum(math.lgamma(ci + 1) for ci in c)
                    + sum(ci * math.log(pi) for ci, pi in zip(c, p)) for c in counts])  # fmt: skip
    np.testing.assert_allclose(np_(m.entropy()), -np.sum(np.exp(lps) * lps), rtol=1e-10)
    np.testing.assert_allclose(np_(m.mean), 4 * p, rtol=1e-12)
    np.testing.assert_allclose(np_(m.variance), 4 * p * (1 - p), rtol=1e-12)
    # a zero-probability category that is never drawn costs nothing
    zero = D.Multinomial(3, probs=f64([0.5, 0.0, 0.5])).log_prob(f64([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(np_(zero), math.log(3 / 8), rtol=1e-10)
    gt.manual_seed(12)
    s = np_(D.Multinomial(6, probs=f64(p)).sample((20000,)))
    assert s.shape == (20000, 3) and np.all(s.sum(-1) == 6)
    _close_to(s, 6 * p, 6 * p * (1 - p))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(gt.tensor(3), probs=f64(p))


def test_geometric_log_prob_entropy_kl_and_samples(conn):
    p = np.array([0.2, 0.5, 1.0])
    g = D.Geometric(f64(p))
    k = np.array([3.0, 0.0, 0.0])
    want = [3 * math.log(0.8) + math.log(0.2), math.log(0.5), 0.0]  # P(0) = 1 when p = 1
    np.testing.assert_allclose(np_(g.log_prob(f64(k))), want, atol=1e-12)
    np.testing.assert_allclose(np_(g.mean), 1 / p - 1)
    np.testing.assert_allclose(np_(g.variance), (1 / p - 1) / p)
    ks = np.arange(2000.0)
    la, lb = ks * math.log(0.7) + math.log(0.3), ks * math.log(0.4) + math.log(0.6)
    entropy = -np.sum(np.exp(la) * la)
    np.testing.assert_allclose(np_(D.Geometric(f64(0.3)).entropy()), entropy, rtol=1e-8)
    got = D.kl_divergence(D.Geometric(f64(0.3)), D.Geometric(f64(0.6)))
    np.testing.assert_allclose(np_(got), np.sum(np.exp(la) * (la - lb)), rtol=1e-8)
    gt.manual_seed(13)
    s = np_(D.Geometric(f64([0.2, 0.7])).sample((30000,)))
    assert np.all(s == np.floor(s)) and np.all(s >= 0)
    q = np.array([0.2, 0.7])
    _close_to(s, 1 / q - 1, (1 - q) / q**2)
    with pytest.raises(ValueError, match="to be positive but found invalid values"):
        D.Geometric(gt.tensor([0.0, 0.3]))


def test_binomial_and_poisson_kl_divergences(conn):
    n, pp, qq = 6, 0.3, 0.55
    ks = np.arange(n + 1.0)
    lp = _log_binom(n, ks) + ks * math.log(pp) + (n - ks) * math.log1p(-pp)
    lq = _log_binom(n, ks) + ks * math.log(qq) + (n - ks) * math.log1p(-qq)
    got = D.kl_divergence(D.Binomial(n, f64([pp])), D.Binomial(n, f64([qq])))
    np.testing.assert_allclose(np_(got), [np.sum(np.exp(lp) * (lp - lq))], rtol=1e-10)
    more = D.kl_divergence(D.Binomial(7, f64([pp])), D.Binomial(6, f64([qq])))
    assert np_(more)[0] == math.inf
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(D.Binomial(5, f64([pp])), D.Binomial(6, f64([qq])))
    # Bernoulli(p) || Poisson(r): sum over {0, 1}
    p, r = 0.3, 0.7
    want = (1 - p) * (math.log(1 - p) + r) + p * (math.log(p) - math.log(r) + r)
    np.testing.assert_allclose(np_(D.kl_divergence(D.Bernoulli(f64(p)), D.Poisson(f64(r)))), want,
                               rtol=1e-10)  # fmt: skip
    assert np_(D.kl_divergence(D.Poisson(f64(r)), D.Binomial(3, f64(p)))) == math.inf


# ------------------------------------------------------------------ Cauchy and the half families
def test_cauchy_density_cdf_entropy_kl_and_samples(conn):
    loc, scale, x = np.array([0.0, 1.0]), np.array([1.0, 0.5]), np.array([0.3, 2.0])
    c = D.Cauchy(f64(loc), f64(scale))
    want = -np.log(np.pi * scale * (1 + ((x - loc) / scale) ** 2))
    np.testing.assert_allclose(np_(c.log_prob(f64(x))), want, rtol=1e-12)
    np.testing.assert_allclose(np_(c.cdf(f64(x))), 0.5 + np.arctan((x - loc) / scale) / np.pi)
    np.testing.assert_allclose(np_(c.cdf(c.icdf(f64([0.1, 0.9])))), [0.1, 0.9], rtol=1e-10)
    assert np.all(np.isnan(np_(c.mean))) and np.all(np_(c.variance) == np.inf)

    def pdf(x, m, s):
        return 1 / (np.pi * s * (1 + ((x - m) / s) ** 2))

    xs_lo, xs_hi = -2e4, 2e4
    ent = _integrate(lambda t: -pdf(t, 0, 2.0) * np.log(pdf(t, 0, 2.0)), xs_lo, xs_hi, 4000001)
    np.testing.assert_allclose(np_(D.Cauchy(0.0, 2.0).entropy()), ent, rtol=1e-3)
    kl = _integrate(lambda t: pdf(t, 0, 1) * np.log(pdf(t, 0, 1) / pdf(t, 1, 2)), xs_lo, xs_hi,
                    4000001)  # fmt: skip
    got = D.kl_divergence(D.Cauchy(f64(0.0), f64(1.0)), D.Cauchy(f64(1.0), f64(2.0)))
    np.testing.assert_allclose(np_(got), kl, rtol=1e-3)
    gt.manual_seed(21)
    s = np_(D.Cauchy(f64([1.0]), f64([2.0])).sample((40000,)))[:, 0]
    # quartiles are loc -+ scale; the sample quartile's standard error is about 0.014 * scale here
    np.testing.assert_allclose(np.quantile(s, [0.25, 0.5, 0.75]), [-1.0, 1.0, 3.0], atol=0.1)


def test_half_normal_and_half_cauchy(conn):
    s, x = np.array([0.5, 2.0]), np.array([0.3, 1.7])
    h = D.HalfNormal(f64(s))
    want = 0.5 * math.log(2 / math.pi) - np.log(s) - x**2 / (2 * s**2)
    np.testing.assert_allclose(np_(h.log_prob(f64(x))), want, rtol=1e-12)
    np.testing.assert_allclose(np_(h.cdf(f64(x))), ERF(x / (s * math.sqrt(2))), rtol=1e-12)
    np.testing.assert_allclose(np_(h.icdf(h.cdf(f64(x)))), x, rtol=1e-8)
    np.testing.assert_allclose(np_(h.mean), s * math.sqrt(2 / math.pi))
    np.testing.assert_allclose(np_(h.variance), s**2 * (1 - 2 / math.pi))

    def hn(t):
        return math.sqrt(2 / math.pi) / 2.0 * np.exp(-(t**2) / 8)

    ent = _integrate(lambda t: -hn(t) * np.log(hn(t)), 0, 40)
    np.testing.assert_allclose(np_(D.HalfNormal(f64(2.0)).entropy()), ent, rtol=1e-6)
    with pytest.raises(ValueError, match="support"):
        h.log_prob(f64([-1.0, 1.0]))
    unchecked = D.HalfNormal(f64(s), validate_args=False).log_prob(f64([-1.0, 1.0]))
    assert np_(unchecked)[0] == -math.inf
    hc = D.HalfCauchy(f64(s))
    want = np.log(2 / (np.pi * s * (1 + (x / s) ** 2)))
    np.testing.assert_allclose(np_(hc.log_prob(f64(x))), want, rtol=1e-12)
    np.testing.assert_allclose(np_(hc.cdf(f64(x))), 2 / np.pi * np.arctan(x / s), rtol=1e-12)
    assert np.all(np_(hc.mean) == np.inf)
    np.testing.assert_allclose(np_(hc.entropy()), np.log(2 * np.pi * s), rtol=1e-12)
    gt.manual_seed(22)
    draws = np_(D.HalfNormal(f64([1.5])).sample((30000,)))[:, 0]
    assert np.all(draws >= 0)
    _close_to(draws, 1.5 * math.sqrt(2 / math.pi), 2.25 * (1 - 2 / math.pi))
    med = np.median(np_(D.HalfCauchy(f64([1.5])).sample((30000,))))
    np.testing.assert_allclose(med, 1.5, atol=0.08)  # the median is the scale
    kl = D.kl_divergence(D.HalfNormal(f64(1.0)), D.HalfNormal(f64(2.0)))
    np.testing.assert_allclose(np_(kl), math.log(2) + 1 / 8 - 0.5, rtol=1e-12)


# ------------------------------------------------------------------ Gumbel
def test_gumbel_density_cdf_moments_kl_and_samples(conn):
    loc, scale, x = np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([0.3, -1.0])
    g = D.Gumbel(f64(loc), f64(scale))
    z = (x - loc) / scale
    np.testing.assert_allclose(np_(g.log_prob(f64(x))), -np.log(scale) - z - np.exp(-z))
    np.testing.assert_allclose(np_(g.cdf(f64(x))), np.exp(-np.exp(-z)), rtol=1e-10)
    np.testing.assert_allclose(np_(g.cdf(g.icdf(f64([0.2, 0.7])))), [0.2, 0.7], rtol=1e-9)
    np.testing.assert_allclose(np_(g.mean), loc + scale * EULER)
    np.testing.assert_allclose(np_(g.variance), (np.pi * scale) ** 2 / 6)
    np.testing.assert_allclose(np_(g.entropy()), np.log(scale) + EULER + 1)

    def pdf(t, m, s):
        u = (t - m) / s
        return np.exp(-u - np.exp(-u)) / s

    kl = _integrate(lambda t: pdf(t, 0, 1) * np.log(pdf(t, 0, 1) / pdf(t, 0.5, 1.5)), -6, 40)
    got = D.kl_divergence(D.Gumbel(f64(0.0), f64(1.0)), D.Gumbel(f64(0.5), f64(1.5)))
    np.testing.assert_allclose(np_(got), kl, rtol=1e-6)

    def npdf(t):
        return np.exp(-((t - 0.5) ** 2) / 8) / math.sqrt(8 * math.pi)

    kl = _integrate(lambda t: pdf(t, 0, 1) * np.log(pdf(t, 0, 1) / npdf(t)), -6, 40)
    got = D.kl_divergence(D.Gumbel(f64(0.0), f64(1.0)), D.Normal(f64(0.5), f64(2.0)))
    np.testing.assert_allclose(np_(got), kl, rtol=1e-6)
    assert np_(D.kl_divergence(D.Gumbel(f64(0.0), f64(1.0)), D.Exponential(f64(1.0)))) == np.inf
    gt.manual_seed(23)
    s = np_(g.sample((40000,)))
    _close_to(s, loc + scale * EULER, (np.pi * scale) ** 2 / 6)
    assert g.rsample().requires_grad is False and g.has_rsample
    scale_t = f64([2.0]).requires_grad_()
    D.Gumbel(f64([1.0]), scale_t).rsample((40000,)).mean().backward()
    # d x / d scale = (x - loc) / scale, a standard Gumbel draw: its mean is Euler's constant
    np.testing.assert_allclose(np_(scale_t.grad), [EULER], atol=5 * math.sqrt(np.pi**2 / 6 / 40000))


# ------------------------------------------------------------------ Weibull, Pareto, Kumaraswamy
def test_weibull_density_cdf_moments_and_samples(conn):
    lam, k, x = np.array([1.0, 2.0]), np.array([0.7, 3.0]), np.array([0.4, 1.5])
    w = D.Weibull(f64(lam), f64(k))
    want = np.log(k / lam) + (k - 1) * np.log(x / lam) - (x / lam) ** k
    np.testing.assert_allclose(np_(w.log_prob(f64(x))), want, rtol=1e-10)
    np.testing.assert_allclose(np_(w.cdf(f64(x))), 1 - np.exp(-((x / lam) ** k)), rtol=1e-10)
    np.testing.assert_allclose(np_(w.icdf(w.cdf(f64(x)))), x, rtol=1e-9)
    g1 = np.exp(LGAMMA(1 + 1 / k))
    np.testing.assert_allclose(np_(w.mean), lam * g1, rtol=1e-10)
    np.testing.assert_allclose(np_(w.variance), lam**2 * (np.exp(LGAMMA(1 + 2 / k)) - g1**2),
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(np_(w.entropy()), EULER * (1 - 1 / k) + np.log(lam / k) + 1,
                               rtol=1e-10)  # fmt: skip
    gt.manual_seed(31)
    s = np_(w.sample((40000,)))
    assert np.all(s > 0)
    _close_to(s, lam * g1, lam**2 * (np.exp(LGAMMA(1 + 2 / k)) - g1**2))
    lam_t = f64(lam).requires_grad_()
    draws = D.Weibull(lam_t, f64(k)).rsample((40000,))
    draws.mean(0).sum().backward()  # d x / d lambda = x / lambda: the mean is Gamma(1 + 1/k)
    _close_to(np_(draws) / lam, g1, np.exp(LGAMMA(1 + 2 / k)) - g1**2)
    np.testing.assert_allclose(np_(lam_t.grad), (np_(draws) / lam).mean(0), rtol=1e-10)


def test_pareto_density_cdf_moments_kl_and_samples(conn):
    xm, a, x = np.array([1.0, 0.5]), np.array([3.0, 4.5]), np.array([1.3, 2.0])
    p = D.Pareto(f64(xm), f64(a))
    np.testing.assert_allclose(np_(p.log_prob(f64(x))), np.log(a * xm**a / x ** (a + 1)),
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(np_(p.cdf(f64(x))), 1 - (xm / x) ** a, rtol=1e-10)
    np.testing.assert_allclose(np_(p.mean), a * xm / (a - 1), rtol=1e-12)
    np.testing.assert_allclose(np_(p.variance), xm**2 * a / ((a - 1) ** 2 * (a - 2)), rtol=1e-12)
    np.testing.assert_allclose(np_(p.entropy()), np.log(xm / a) + 1 + 1 / a, rtol=1e-12)
    heavy = D.Pareto(f64([1.0, 1.0]), f64([1.0, 0.5]))
    assert np.all(np_(heavy.mean) == np.inf) and np.all(np_(heavy.variance) == np.inf)
    with pytest.raises(ValueError, match="support"):
        p.log_prob(f64([0.9, 2.0]))

    def pdf(t, m, al):
        return al * m**al / t ** (al + 1)

    kl = _integrate(lambda t: pdf(t, 1.0, 3.0) * np.log(pdf(t, 1.0, 3.0) / pdf(t, 0.5, 2.0)),
                    1.0, 2000.0, 4000001)  # fmt: skip
    got = D.kl_divergence(D.Pareto(f64(1.0), f64(3.0)), D.Pareto(f64(0.5), f64(2.0)))
    np.testing.assert_allclose(np_(got), kl, rtol=1e-5)
    rev = D.kl_divergence(D.Pareto(f64(0.5), f64(2.0)), D.Pareto(f64(1.0), f64(3.0)))
    assert np_(rev) == np.inf
    gt.manual_seed(32)
    s = np_(D.Pareto(f64([1.0]), f64([5.0])).sample((40000,)))[:, 0]
    assert np.all(s >= 1.0)
    _close_to(s, 5 / 4, 5 / (16 * 3))


def test_kumaraswamy_density_cdf_moments_and_samples(conn):
    a, b, x = np.array([0.7, 3.0]), np.array([2.0, 0.5]), np.array([0.3, 0.8])
    k = D.Kumaraswamy(f64(a), f64(b))
    want = np.log(a * b) + (a - 1) * np.log(x) + (b - 1) * np.log1p(-(x**a))
    np.testing.assert_allclose(np_(k.log_prob(f64(x))), want, rtol=1e-9)
    np.testing.assert_allclose(np_(k.cdf(f64(x))), 1 - (1 - x**a) ** b, rtol=1e-9)
    np.testing.assert_allclose(np_(k.icdf(k.cdf(f64(x)))), x, rtol=1e-8)
    # expectations as integrals over a uniform V: X = (1 - V^(1/b))^(1/a) (midpoint rule)
    v = (np.arange(2_000_000) + 0.5) / 2_000_000
    xs = (1 - v[:, None] ** (1 / b)) ** (1 / a)
    means, variances = xs.mean(0), xs.var(0)
    log_pdf = np.log(a * b) + (a - 1) * np.log(xs) + (b - 1) * np.log1p(-(xs**a))
    entropies = -log_pdf.mean(0)
    np.testing.assert_allclose(np_(k.mean), means, rtol=1e-6)
    np.testing.assert_allclose(np_(k.variance), variances, rtol=1e-5)
    np.testing.assert_allclose(np_(k.entropy()), entropies, rtol=1e-4)
    gt.manual_seed(33)
    s = np_(k.sample((40000,)))
    assert np.all((s >= 0) & (s <= 1))
    _close_to(s, means, variances)


# ------------------------------------------------------------------ relaxed distributions
def test_relaxed_bernoulli_density_integrates_to_one_and_samples(conn):
    t, p = 0.5, 0.3
    r = D.RelaxedBernoulli(f64(t), probs=f64([p]))
    xs = np.array([0.1, 0.5, 0.95])
    # the binary Concrete density (Maddison et al., 2017, eq. 21)
    odds = p / (1 - p)
    num = t * odds * xs ** (-t - 1) * (1 - xs) ** (-t - 1)
    want = np.log(num / (odds * xs ** (-t) + (1 - xs) ** (-t)) ** 2)
    np.testing.assert_allclose(np_(r.log_prob(f64(xs))), want, rtol=1e-9)
    grid = np.linspace(1e-6, 1 - 1e-6, 200001)
    dens = np.exp(np_(D.RelaxedBernoulli(f64(1.5), probs=f64(p)).log_prob(f64(grid))))
    np.testing.assert_allclose(np.sum((dens[1:] + dens[:-1]) * np.diff(grid)) / 2, 1.0, atol=1e-3)
    gt.manual_seed(41)
    logits = f64([-1.0, 2.0]).requires_grad_()
    s = D.RelaxedBernoulli(f64(0.05), logits=logits).rsample((20000,))
    v = np_(s)
    assert np.all((v > 0) & (v < 1))
    q = 1 / (1 + np.exp(-np.array([-1.0, 2.0])))
    _close_to((v > 0.5).astype(float), q, q * (1 - q))  # P(x > 1/2) = p at every temperature
    s.sum().backward()
    assert logits.grad is not None and np.all(np_(logits.grad) > 0)


def test_relaxed_one_hot_categorical_density_and_gumbel_max_samples(conn):
    t, p = 0.7, np.array([0.2, 0.3, 0.5])
    r = D.RelaxedOneHotCategorical(f64(t), probs=f64(p))
    y = np.array([0.1, 0.2, 0.7])
    k = 3
    # the Concrete density (Maddison et al., 2017, eq. 12)
    want = (math.lgamma(k) + (k - 1) * math.log(t) + np.sum(np.log(p) - (t + 1) * np.log(y))
            - k * math.log(np.sum(p * y ** (-t))))  # fmt: skip
    np.testing.assert_allclose(np_(r.log_prob(f64(y))), want, rtol=1e-9)
    assert tuple(r.event_shape) == (3,) and tuple(r.batch_shape) == ()
    gt.manual_seed(42)
    s = np_(r.rsample((30000,)))
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-9)
    hits = np.eye(3)[s.argmax(-1)]  # the argmax is Categorical(p) at any temperature
    _close_to(hits, p, p * (1 - p))
    e = D.ExpRelaxedCategorical(f64(t), probs=f64(p))
    got = e.log_prob(f64(np.log(y)))  # log-space density: the simplex one times prod(y)
    np.testing.assert_allclose(np_(got), want + np.sum(np.log(y)), rtol=1e-9)


# ------------------------------------------------------------------ MixtureSameFamily
def test_gaussian_mixture_log_prob_moments_cdf_and_samples(conn):
    w = np.array([0.2, 0.5, 0.3])
    mu, sd = np.array([[-2.0, 0.0], [0.0, 1.0], [3.0, -1.0]]), np.array([0.5, 1.0, 2.0])
    sd2 = np.stack([sd, sd], -1)
    comp = D.Independent(D.Normal(f64(mu), f64(sd2)), 1)
    gmm = D.MixtureSameFamily(D.Categorical(probs=f64(w)), comp)
    assert tuple(gmm.batch_shape) == () and tuple(gmm.event_shape) == (2,)
    x = np.array([[0.1, 0.2], [2.5, -0.5]])
    dens = np.exp(-0.5 * np.sum(((x[:, None] - mu) / sd2) ** 2, -1)) / (2 * np.pi * sd**2)
    np.testing.assert_allclose(np_(gmm.log_prob(f64(x))), np.log(dens @ w), rtol=1e-10)
    mean = w @ mu
    np.testing.assert_allclose(np_(gmm.mean), mean, rtol=1e-12)
    var = w @ (sd2**2) + w @ (mu - mean) ** 2
    np.testing.assert_allclose(np_(gmm.variance), var, rtol=1e-12)
    one = D.MixtureSameFamily(D.Categorical(probs=f64(w)), D.Normal(f64(mu[:, 0]), f64(sd)))
    v = 0.4
    want = np.sum(w * 0.5 * (1 + ERF((v - mu[:, 0]) / (sd * math.sqrt(2)))))
    np.testing.assert_allclose(np_(one.cdf(f64(v))), want, rtol=1e-10)
    gt.manual_seed(51)
    s = np_(gmm.sample((40000,)))
    assert s.shape == (40000, 2)
    _close_to(s, mean, var)
    big = gmm.expand((4,))
    assert tuple(big.batch_shape) == (4,) and tuple(big.sample((3,)).shape) == (3, 4, 2)


def test_mixture_log_prob_gradient_and_errors(conn):
    logits = f64([0.0, 1.0]).requires_grad_()
    loc = f64([-1.0, 2.0]).requires_grad_()
    gmm = D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(loc, f64([1.0, 1.0])))
    x = 0.5
    gmm.log_prob(f64(x)).backward()
    w = np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum()
    phi = np.exp(-0.5 * (x - np.array([-1.0, 2.0])) ** 2)
    post = w * phi / np.sum(w * phi)  # responsibilities
    np.testing.assert_allclose(np_(loc.grad), post * (x - np.array([-1.0, 2.0])), rtol=1e-10)
    np.testing.assert_allclose(np_(logits.grad), post - w, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(logits=gt.zeros(2)), D.Normal(gt.zeros(3), gt.ones(3)))
    with pytest.raises(ValueError, match="is not compatible"):
        D.MixtureSameFamily(D.Categorical(logits=gt.zeros(4, 2)),
                            D.Normal(gt.zeros(3, 2), gt.ones(3, 2)))  # fmt: skip
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(gt.zeros(3), gt.ones(3)))


# ------------------------------------------------------------------ LowRankMultivariateNormal
def _mvn_logpdf(x, m, cov):
    d = x - m
    _, logdet = np.linalg.slogdet(cov)
    return -0.5 * (len(m) * math.log(2 * math.pi) + logdet + d @ np.linalg.solve(cov, d))


def _mvn_kl(m0, c0, m1, c1):
    n = len(m0)
    return 0.5 * (np.trace(np.linalg.solve(c1, c0)) + (m1 - m0) @ np.linalg.solve(c1, m1 - m0)
                  - n + np.linalg.slogdet(c1)[1] - np.linalg.slogdet(c0)[1])  # fmt: skip


def test_low_rank_normal_against_the_dense_formulas(conn):
    rng = np.random.default_rng(0)
    loc, w, d = rng.standard_normal(4), rng.standard_normal((4, 2)), rng.uniform(0.5, 2.0, 4)
    cov = w @ w.T + np.diag(d)
    m = D.LowRankMultivariateNormal(f64(loc), f64(w), f64(d))
    x = rng.standard_normal((3, 4))
    want = [_mvn_logpdf(row, loc, cov) for row in x]
    np.testing.assert_allclose(np_(m.log_prob(f64(x))), want, rtol=1e-10)
    ent = 0.5 * (4 * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(cov)[1])
    np.testing.assert_allclose(np_(m.entropy()), ent, rtol=1e-10)
    np.testing.assert_allclose(np_(m.covariance_matrix), cov, rtol=1e-10)
    np.testing.assert_allclose(np_(m.precision_matrix), np.linalg.inv(cov), rtol=1e-8, atol=1e-10)
    tril = np_(m.scale_tril)
    np.testing.assert_allclose(tril @ tril.T, cov, rtol=1e-10)
    np.testing.assert_allclose(np_(m.variance), np.diag(cov), rtol=1e-12)
    loc2, w2, d2 = rng.standard_normal(4), rng.standard_normal((4, 1)), rng.uniform(0.5, 2.0, 4)
    cov2 = w2 @ w2.T + np.diag(d2)
    q = D.LowRankMultivariateNormal(f64(loc2), f64(w2), f64(d2))
    np.testing.assert_allclose(np_(D.kl_divergence(m, q)), _mvn_kl(loc, cov, loc2, cov2), rtol=1e-9)
    full = D.MultivariateNormal(f64(loc2), covariance_matrix=f64(cov2))
    np.testing.assert_allclose(np_(D.kl_divergence(m, full)), _mvn_kl(loc, cov, loc2, cov2),
                               rtol=1e-9)  # fmt: skip
    np.testing.assert_allclose(np_(D.kl_divergence(full, m)), _mvn_kl(loc2, cov2, loc, cov),
                               rtol=1e-9)  # fmt: skip
    gt.manual_seed(61)
    s = np_(m.sample((40000,)))
    _close_to(s, loc, np.diag(cov))
    np.testing.assert_allclose(np.cov(s.T), cov, atol=0.12)
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices"):
        D.LowRankMultivariateNormal(f64(loc), f64(w[:3]), f64(d))
