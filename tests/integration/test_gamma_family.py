"""``lgamma``, ``digamma``, ``polygamma``, ``erfinv`` and the distributions made of them (Gamma,
Chi2, Beta, Dirichlet, StudentT, Poisson), the Bessel functions, ``zeta``, ``erfcx`` and
``special.airy_ai`` through a real local cluster. Expected values come from ``math``, from SciPy
(``airy``, skipped without it) and from the densities integrated numerically here, not from GT.
Every test runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import each_backend_cluster, integrate

import gt
import gt.distributions as D
from gt.ops import random as grandom
from gt.runtime.control import request
from gt.runtime.ops.gammafn import draw_poisson, draw_standard_gamma

pytestmark = pytest.mark.timeout(120)
LGAMMA = np.vectorize(math.lgamma)
ERF = np.vectorize(math.erf)


cluster = each_backend_cluster()


def _integrate(fn, lo, hi, n=200001):
    return integrate(fn, lo, hi, n)


# ------------------------------------------------------------------ the functions
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lgamma_digamma_polygamma_erfinv_values(conn, dtype):
    x = np.array([0.25, 1.0, 3.5, 10.0, -0.5, -2.75])
    t = gt.tensor(x, dtype=dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(t.lgamma().numpy(), LGAMMA(x), rtol=tol, atol=tol)
    h = 1e-5
    fd = (LGAMMA(x + h) - LGAMMA(x - h)) / (2 * h)
    np.testing.assert_allclose(t.digamma().numpy(), fd, rtol=max(tol, 1e-7), atol=1e-6)
    got = gt.polygamma(1, gt.tensor([1.0, 0.5], dtype=dtype)).numpy()
    np.testing.assert_allclose(got, [math.pi**2 / 6, math.pi**2 / 2], rtol=tol)
    y = np.array([-0.99, -0.3, 0.0, 0.6, 0.999])
    inv = gt.tensor(y, dtype=dtype).erfinv()
    assert inv.dtype == dtype
    np.testing.assert_allclose(ERF(inv.numpy().astype(np.float64)), y, rtol=tol, atol=tol)


def test_integers_become_float_and_half_precision_stays_half(conn):
    assert gt.tensor([1, 2, 3]).lgamma().dtype == "float32"
    h = gt.tensor([0.5, 2.0], dtype="float16").digamma()
    assert h.dtype == "float16"
    np.testing.assert_allclose(h.numpy(), [-1.9635, 0.4228], rtol=2e-3)
    with pytest.raises(ValueError, match="negative n"):
        gt.polygamma(-1, gt.tensor([1.0]))


def test_poles_give_infinities_as_in_pytorch(conn):
    got = gt.tensor([0.0, -1.0, 1.0]).lgamma().numpy()
    assert got[0] == math.inf and got[1] == math.inf and got[2] == 0.0
    d = gt.tensor([0.0, -2.0]).digamma().numpy()
    assert d[0] == -math.inf and math.isnan(d[1])
    e = gt.tensor([1.0, -1.0, 2.0]).erfinv().numpy()
    assert e[0] == math.inf and e[1] == -math.inf and math.isnan(e[2])


# ------------------------------------------------------------------ sampling
def test_gamma_samples_are_the_same_bits_on_every_backend(conn, cluster):
    alpha = np.array([0.3, 1.0, 2.5, 40.0] * 50)
    gt.manual_seed(2024)
    seed = grandom.next_seed()
    gt.manual_seed(2024)
    got = D.Gamma(gt.tensor(alpha, dtype="float64"), 1.0).sample().numpy()
    want = np.maximum(draw_standard_gamma(np, alpha, seed), np.finfo(np.float64).tiny)
    if _on_a_real_gpu(
        cluster
    ):  # CUDA's log and pow may differ from the C library's in the last bit
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


def _on_a_real_gpu(cluster) -> bool:
    workers = request(cluster.address, "stats", timeout=10.0)["workers"]
    return any(w["backend"] == "cupy" and "test double" not in (w["device"] or "") for w in workers)


def test_gamma_rsample_has_the_right_moments_and_gradient(conn):
    conc = gt.tensor([0.4, 2.0, 9.0], dtype="float64", requires_grad=True)
    rate = gt.tensor([2.0, 0.5, 3.0], dtype="float64", requires_grad=True)
    gt.manual_seed(5)
    s = D.Gamma(conc, rate).rsample((40000,))
    mean, var = s.mean(0), s.var(0)
    want_mean = np.array([0.4 / 2, 2 / 0.5, 9 / 3])
    want_var = np.array([0.4 / 4, 2 / 0.25, 9 / 9])
    np.testing.assert_allclose(mean.detach().numpy(), want_mean, rtol=0.03)
    np.testing.assert_allclose(var.detach().numpy(), want_var, rtol=0.06)
    mean.sum().backward()  # d E[x] / d conc = 1 / rate; d E[x] / d rate = -conc / rate^2
    np.testing.assert_allclose(conc.grad.numpy(), 1 / np.array([2.0, 0.5, 3.0]), rtol=0.03)
    np.testing.assert_allclose(rate.grad.numpy(), -want_mean / np.array([2.0, 0.5, 3.0]), rtol=0.03)


def test_dirichlet_and_beta_samples_lie_on_the_simplex_with_the_right_means(conn):
    gt.manual_seed(9)
    conc = np.array([[0.5, 1.0, 4.0], [2.0, 2.0, 2.0]])
    s = D.Dirichlet(gt.tensor(conc)).sample((20000,)).numpy()
    assert s.shape == (20000, 2, 3) and (s >= 0).all()
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(s.mean(0), conc / conc.sum(-1, keepdims=True), atol=0.01)
    b = D.Beta(gt.tensor([2.0, 0.5]), gt.tensor([5.0, 0.5])).sample((20000,)).numpy()
    assert ((b >= 0) & (b <= 1)).all()
    np.testing.assert_allclose(b.mean(0), [2 / 7, 0.5], atol=0.01)


def test_poisson_samples_are_the_same_on_every_backend_with_the_right_moments(conn):
    rates = np.array([0.0, 0.4, 3.0, 9.9, 10.0, 55.0] * 4000)
    gt.manual_seed(77)
    seed = grandom.next_seed()
    gt.manual_seed(77)
    got = D.Poisson(gt.tensor(rates, dtype="float64")).sample().numpy()
    np.testing.assert_array_equal(got, draw_poisson(np, rates, seed))
    by_rate = got.reshape(4000, 6)
    assert (by_rate[:, 0] == 0).all() and (got == np.floor(got)).all()
    for j, lam in enumerate([0.4, 3.0, 9.9, 10.0, 55.0], start=1):
        se = math.sqrt(lam / 4000)
        assert abs(by_rate[:, j].mean() - lam) < 5 * se
    counts = gt.poisson(gt.tensor([[2.0, 30.0]]).expand(3000, 2)).numpy()
    np.testing.assert_allclose(counts.var(0), [2.0, 30.0], rtol=0.12)
    assert D.Poisson(gt.tensor([1.0, 2.0])).sample((5,)).shape == (5, 2)


def test_student_t_samples_have_its_variance(conn):
    gt.manual_seed(3)
    t = D.StudentT(gt.tensor([5.0]), gt.tensor([1.0]), gt.tensor([2.0]))
    s = t.sample((60000,)).numpy()
    np.testing.assert_allclose(s.mean(), 1.0, atol=0.05)
    np.testing.assert_allclose(s.var(), 4 * 5 / 3, rtol=0.08)
    np.testing.assert_allclose(t.variance.numpy(), [4 * 5 / 3], rtol=1e-6)


# ------------------------------------------------------------------ densities
def test_log_probs_match_the_densities_written_out(conn):
    v = np.array([0.3, 1.7, 4.0])
    c, r = np.array([0.7, 2.0, 5.0]), np.array([1.5, 0.5, 2.0])
    got = D.Gamma(gt.tensor(c), gt.tensor(r)).log_prob(gt.tensor(v)).numpy()
    want = c * np.log(r) + (c - 1) * np.log(v) - r * v - LGAMMA(c)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = D.Chi2(gt.tensor([3.0])).log_prob(gt.tensor([2.0])).numpy()
    want = 0.5 * math.log(2.0) - 1.0 - 1.5 * math.log(2) - math.lgamma(1.5)  # k/2-1 = 0.5
    np.testing.assert_allclose(got, [want], rtol=1e-5)
    a, b, x = np.array([2.0, 0.5]), np.array([3.0, 0.5]), np.array([0.3, 0.9])
    got = D.Beta(gt.tensor(a), gt.tensor(b)).log_prob(gt.tensor(x)).numpy()
    lbeta = LGAMMA(a) + LGAMMA(b) - LGAMMA(a + b)
    np.testing.assert_allclose(got, (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - lbeta, rtol=1e-5)
    got = D.Dirichlet(gt.tensor([1.0, 2.0, 3.0])).log_prob(gt.tensor([0.2, 0.3, 0.5])).numpy()
    want = math.lgamma(6) - math.lgamma(2) - math.lgamma(3) + math.log(0.3) + 2 * math.log(0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    df, loc, scale, y = 3.0, 0.5, 2.0, 1.0
    got = D.StudentT(gt.tensor([df]), gt.tensor([loc]), gt.tensor([scale])).log_prob(gt.tensor([y]))
    z = (y - loc) / scale
    want = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
            - math.log(scale) - (df + 1) / 2 * math.log1p(z * z / df))  # fmt: skip
    np.testing.assert_allclose(got.numpy(), [want], rtol=1e-5)
    got = D.Poisson(gt.tensor([2.0, 7.5])).log_prob(gt.tensor([3.0, 0.0])).numpy()
    np.testing.assert_allclose(got, [3 * math.log(2) - 2 - math.log(6), -7.5], rtol=1e-5)


def test_entropies_and_kl_match_numerical_integrals(conn):
    def gamma_pdf(c, r):
        return lambda x: np.exp(c * math.log(r) + (c - 1) * np.log(x) - r * x - math.lgamma(c))

    p, q = gamma_pdf(2.0, 1.0), gamma_pdf(3.0, 2.0)
    ent = _integrate(lambda x: -p(x) * np.log(p(x)), 1e-9, 60)
    got = D.Gamma(gt.tensor([2.0], dtype="float64"), 1.0).entropy().numpy()
    np.testing.assert_allclose(got, [ent], rtol=1e-5)
    kl = _integrate(lambda x: p(x) * (np.log(p(x)) - np.log(q(x))), 1e-9, 60)
    got = D.kl_divergence(D.Gamma(2.0, 1.0), D.Gamma(3.0, 2.0)).numpy()
    np.testing.assert_allclose(got, kl, rtol=1e-4)

    def beta_pdf(a, b):
        lb = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
        return lambda x: np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - lb)

    p, q = beta_pdf(2.0, 3.0), beta_pdf(4.0, 1.5)
    kl = _integrate(lambda x: p(x) * (np.log(p(x)) - np.log(q(x))), 1e-9, 1 - 1e-9)
    got = D.kl_divergence(D.Beta(2.0, 3.0), D.Beta(4.0, 1.5)).numpy()
    np.testing.assert_allclose(got, kl, rtol=1e-4)
    ent = _integrate(lambda x: -p(x) * np.log(p(x)), 1e-9, 1 - 1e-9)
    np.testing.assert_allclose(D.Beta(2.0, 3.0).entropy().numpy(), ent, rtol=1e-5)

    def t_pdf(x):
        return np.exp(math.lgamma(2.5) - math.lgamma(2) - 0.5 * math.log(4 * math.pi)
                      - 2.5 * np.log1p(x * x / 4))  # fmt: skip

    ent = _integrate(lambda x: -t_pdf(x) * np.log(t_pdf(x)), -400, 400, n=800001)
    np.testing.assert_allclose(D.StudentT(4.0).entropy().numpy(), ent, rtol=1e-4)
    rate_p, rate_q = 2.0, 3.5
    k = np.arange(60)
    lp = k * math.log(rate_p) - rate_p - LGAMMA(k + 1)
    lq = k * math.log(rate_q) - rate_q - LGAMMA(k + 1)
    got = D.kl_divergence(D.Poisson(rate_p), D.Poisson(rate_q)).numpy()
    np.testing.assert_allclose(got, np.sum(np.exp(lp) * (lp - lq)), rtol=1e-5)


def test_normal_icdf_inverts_its_cdf(conn):
    n = D.Normal(gt.tensor([1.0, -2.0]), gt.tensor([2.0, 0.5]))
    p = gt.tensor([0.975, 0.1])
    np.testing.assert_allclose(n.cdf(n.icdf(p)).numpy(), [0.975, 0.1], rtol=1e-5)
    np.testing.assert_allclose(n.icdf(gt.tensor([0.5, 0.5])).numpy(), [1.0, -2.0], atol=1e-6)


def test_what_is_not_provided_says_so(conn):
    with pytest.raises(ValueError, match="concentration"):
        D.Gamma(gt.tensor([-1.0]), 1.0)
    with pytest.raises(NotImplementedError, match="first argument"):
        a = gt.tensor([2.0], requires_grad=True)
        gt.special.gammainc(a, 1.0).sum().backward()
    conc = gt.tensor([2.0], requires_grad=True)
    s = D.Gamma(conc, 1.0).rsample()
    (g,) = gt.autograd.grad(s.sum(), conc, create_graph=True)  # (recorded: only using it fails)
    with pytest.raises(NotImplementedError, match="second derivative through gamma samples"):
        gt.autograd.grad(g.sum(), conc)


def test_gamma_cdf_and_the_incomplete_gamma_functions(conn):
    # Gamma(2, rate) has the CDF 1 - e^-(rate x) (1 + rate x)
    v = np.array([0.1, 1.0, 3.5])
    got = D.Gamma(gt.tensor([2.0]), gt.tensor([1.5])).cdf(gt.tensor(v)).numpy()
    np.testing.assert_allclose(got, 1 - np.exp(-1.5 * v) * (1 + 1.5 * v), rtol=1e-5)
    np.testing.assert_allclose(D.Chi2(gt.tensor([2.0])).cdf(gt.tensor(v)).numpy(),
                               1 - np.exp(-v / 2), rtol=1e-5)  # fmt: skip
    p = gt.special.gammainc(gt.tensor([1.0, 3.0]), gt.tensor([0.7, 2.0]))
    q = gt.igammac(gt.tensor([1.0, 3.0]), gt.tensor([0.7, 2.0]))
    np.testing.assert_allclose(p.numpy() + q.numpy(), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(p.numpy()[0], 1 - math.exp(-0.7), rtol=1e-6)


def test_bessel_zeta_and_erfcx_values(conn):
    x = np.array([0.0, 0.5, -2.0, 20.0])
    # I0 and I1 by their power series, written out here
    k = np.arange(60)[:, None]
    lf = np.array([math.lgamma(i + 1) for i in range(60)])[:, None]
    i0 = np.sum(np.exp(2 * k * np.log(np.abs(x) / 2 + 1e-300) - 2 * lf), 0)
    i1 = np.sign(x) * np.sum(np.exp((2 * k + 1) * np.log(np.abs(x) / 2 + 1e-300) - lf - np.array(
        [math.lgamma(i + 2) for i in range(60)])[:, None]), 0)  # fmt: skip
    t = gt.tensor(x, dtype="float64")
    np.testing.assert_allclose(gt.i0(t).numpy(), i0, rtol=1e-12)
    np.testing.assert_allclose(gt.special.i1(t).numpy(), i1, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(gt.special.i0e(t).numpy(), i0 * np.exp(-np.abs(x)), rtol=1e-12)
    np.testing.assert_allclose(gt.special.i1e(t).numpy(), i1 * np.exp(-np.abs(x)), rtol=1e-12)
    z = gt.special.zeta(gt.tensor([2.0, 4.0]), 1.0).numpy()
    np.testing.assert_allclose(z, [math.pi**2 / 6, math.pi**4 / 90], rtol=1e-6)
    e = gt.special.erfcx(gt.tensor([0.0, 1.0, 30.0], dtype="float64")).numpy()
    np.testing.assert_allclose(e[:2], [1.0, math.exp(1.0) * math.erfc(1.0)], rtol=1e-12)
    np.testing.assert_allclose(e[2], 1 / (30 * math.sqrt(math.pi)) * (1 - 1 / 1800), rtol=1e-6)


def test_airy_ai_values_dtypes_and_no_derivative(conn):
    sp = pytest.importorskip("scipy.special")
    x = np.array([-30.0, -12.9, -2.5, -1.0, 0.0, 0.7, 2.5, 7.3, 12.0, 40.0, 104.0])
    want = sp.airy(x)[0]
    got = gt.special.airy_ai(gt.tensor(x, dtype="float64")).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    single = gt.special.airy_ai(gt.tensor(x, dtype="float32"))  # computed in float64, rounded
    assert single.dtype == "float32"
    np.testing.assert_allclose(single.numpy(), sp.airy(x.astype(np.float32))[0], rtol=1e-6)
    ints = gt.special.airy_ai(gt.tensor([0, 1, -3]))
    assert ints.dtype == "float32"
    np.testing.assert_allclose(ints.numpy(), sp.airy([0.0, 1.0, -3.0])[0], rtol=1e-6)
    edges = gt.special.airy_ai(gt.tensor([math.inf, -math.inf, math.nan], dtype="float64"))
    assert np.isnan(edges.numpy()).all()
    leaf = gt.tensor(x, dtype="float64", requires_grad=True)
    out = gt.special.airy_ai(leaf)
    assert not out.requires_grad  # as PyTorch: no derivative, so backward through it refuses
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.sum().backward()
    for dtype in ("float16", "complex64"):
        with pytest.raises(TypeError):
            gt.special.airy_ai(gt.zeros(2, dtype=dtype))
