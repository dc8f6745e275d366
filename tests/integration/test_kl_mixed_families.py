"""KL divergences between different families (Normal, Laplace, Uniform, Exponential, Gamma,
Beta) against numerical integration with NumPy, and the pairs whose supports make them
infinite."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.distributions as D

_lgamma = np.vectorize(math.lgamma)


def f64(a) -> gt.Tensor:
    return gt.tensor(np.asarray(a, dtype=np.float64))


def _normal(x, loc, scale):
    return -0.5 * ((x - loc) / scale) ** 2 - math.log(scale) - 0.5 * math.log(2 * math.pi)


def _laplace(x, loc, scale):
    return -np.abs(x - loc) / scale - math.log(2 * scale)


def _gamma(x, a, b):
    return a * math.log(b) + (a - 1) * np.log(x) - b * x - math.lgamma(a)


def _beta(x, a, b):
    return (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - (_lgamma(a) + _lgamma(b) - _lgamma(a + b))


def _kl_numeric(log_p, log_q, low, high, panels=4000, nodes=16):
    """``int p (log p - log q)`` over ``(low, high)`` by composite Gauss-Legendre quadrature; a
    support that starts at 0 is integrated in ``t = log x`` (so ``log x`` terms stay smooth)."""
    t, w = np.polynomial.legendre.leggauss(nodes)
    on_log_scale = low == 0 and high > 1
    a, b = (math.log(1e-14), math.log(high)) if on_log_scale else (low, high)
    edges = np.linspace(a, b, panels + 1)
    mid, half = (edges[1:] + edges[:-1]) / 2, (edges[1:] - edges[:-1]) / 2
    x = (mid[:, None] + half[:, None] * t).ravel()
    weights = (half[:, None] * w).ravel()
    if on_log_scale:
        x, weights = np.exp(x), weights * np.exp(x)
    lp = log_p(x)
    return float(np.sum(weights * np.exp(lp) * (lp - log_q(x))))


CASES = [
    ("gamma_normal", lambda: (D.Gamma(f64(2.5), f64(1.5)), D.Normal(f64(1.0), f64(2.0))),
     lambda x: _gamma(x, 2.5, 1.5), lambda x: _normal(x, 1.0, 2.0), 0, 40),
    ("gamma_exponential", lambda: (D.Gamma(f64(2.5), f64(1.5)), D.Exponential(f64(0.7))),
     lambda x: _gamma(x, 2.5, 1.5), lambda x: math.log(0.7) - 0.7 * x, 0, 40),
    ("exponential_gamma", lambda: (D.Exponential(f64(0.7)), D.Gamma(f64(2.0), f64(1.2))),
     lambda x: math.log(0.7) - 0.7 * x, lambda x: _gamma(x, 2.0, 1.2), 0, 80),
    ("exponential_normal", lambda: (D.Exponential(f64(1.3)), D.Normal(f64(0.5), f64(1.5))),
     lambda x: math.log(1.3) - 1.3 * x, lambda x: _normal(x, 0.5, 1.5), 0, 40),
    ("beta_normal", lambda: (D.Beta(f64(2.0), f64(3.0)), D.Normal(f64(0.2), f64(0.8))),
     lambda x: _beta(x, 2.0, 3.0), lambda x: _normal(x, 0.2, 0.8), 0, 1),
    ("beta_gamma", lambda: (D.Beta(f64(2.0), f64(3.0)), D.Gamma(f64(2.0), f64(1.0))),
     lambda x: _beta(x, 2.0, 3.0), lambda x: _gamma(x, 2.0, 1.0), 0, 1),
    ("beta_exponential", lambda: (D.Beta(f64(2.0), f64(3.0)), D.Exponential(f64(2.0))),
     lambda x: _beta(x, 2.0, 3.0), lambda x: math.log(2.0) - 2.0 * x, 0, 1),
    ("beta_uniform", lambda: (D.Beta(f64(2.0), f64(3.0)), D.Uniform(f64(-1.0), f64(2.0))),
     lambda x: _beta(x, 2.0, 3.0), lambda x: np.full_like(x, -math.log(3.0)), 0, 1),
    ("laplace_normal", lambda: (D.Laplace(f64(0.3), f64(0.8)), D.Normal(f64(-0.5), f64(1.5))),
     lambda x: _laplace(x, 0.3, 0.8), lambda x: _normal(x, -0.5, 1.5), -30, 30),
    ("normal_laplace", lambda: (D.Normal(f64(0.3), f64(0.8)), D.Laplace(f64(-0.5), f64(1.5))),
     lambda x: _normal(x, 0.3, 0.8), lambda x: _laplace(x, -0.5, 1.5), -30, 30),
    ("uniform_normal", lambda: (D.Uniform(f64(-1.0), f64(2.0)), D.Normal(f64(0.5), f64(1.5))),
     lambda x: np.full_like(x, -math.log(3.0)), lambda x: _normal(x, 0.5, 1.5), -1, 2),
    ("uniform_beta", lambda: (D.Uniform(f64(0.2), f64(0.9)), D.Beta(f64(2.0), f64(3.0))),
     lambda x: np.full_like(x, -math.log(0.7)), lambda x: _beta(x, 2.0, 3.0), 0.2, 0.9),
    ("uniform_gamma", lambda: (D.Uniform(f64(0.5), f64(3.0)), D.Gamma(f64(2.0), f64(1.5))),
     lambda x: np.full_like(x, -math.log(2.5)), lambda x: _gamma(x, 2.0, 1.5), 0.5, 3.0),
    ("uniform_exponential", lambda: (D.Uniform(f64(0.5), f64(3.0)), D.Exponential(f64(1.5))),
     lambda x: np.full_like(x, -math.log(2.5)), lambda x: math.log(1.5) - 1.5 * x, 0.5, 3.0),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kl_between_families_matches_numerical_integration(conn, case):
    _, make, log_p, log_q, low, high = case
    p, q = make()
    want = _kl_numeric(log_p, log_q, low, high)
    assert float(D.kl_divergence(p, q)) == pytest.approx(want, rel=1e-5, abs=1e-7)


def test_kl_is_infinite_where_p_leaves_qs_support(conn):
    normal, laplace = D.Normal(f64([0.0, 1.0]), f64(1.0)), D.Laplace(f64([0.0, 1.0]), f64(1.0))
    gamma, expo = D.Gamma(f64([2.0, 3.0]), f64(1.0)), D.Exponential(f64([1.0, 2.0]))
    beta, uniform = D.Beta(f64(2.0), f64(2.0)), D.Uniform(f64(0.0), f64(1.0))
    for p in (normal, laplace):
        for q in (beta, expo, gamma, uniform):
            assert np.isinf(D.kl_divergence(p, q).numpy()).all()
    for p in (gamma, expo):
        for q in (beta, uniform):
            assert np.isinf(D.kl_divergence(p, q).numpy()).all()
    reaching_below_zero = D.Uniform(f64([-0.5, 0.5]), f64([1.0, 2.0]))
    assert np.isinf(
        D.kl_divergence(reaching_below_zero, D.Exponential(f64(1.0))).numpy()
    ).tolist() == [
        True,
        False,
    ]
    narrow = D.Uniform(f64([0.2, 0.0]), f64([0.8, 0.5]))
    assert np.isinf(D.kl_divergence(beta, narrow).numpy()).tolist() == [True, True]


def test_kl_between_families_has_gradients(conn):
    a = f64([2.0, 3.5]).requires_grad_(True)
    b = f64([1.3, 0.5]).requires_grad_(True)
    q = D.Normal(f64(1.0), f64(2.0))
    ga, gb = gt.autograd.grad(D.kl_divergence(D.Gamma(a, b), q).sum(), [a, b])
    h = 1e-6
    for i in range(2):
        for which, g in ((0, ga), (1, gb)):
            up, down = [a.detach().numpy().copy(), b.detach().numpy().copy()], None
            down = [v.copy() for v in up]
            up[which][i] += h
            down[which][i] -= h
            kl_up = float(D.kl_divergence(D.Gamma(f64(up[0]), f64(up[1])), q).sum())
            kl_down = float(D.kl_divergence(D.Gamma(f64(down[0]), f64(down[1])), q).sum())
            assert float(g[i]) == pytest.approx((kl_up - kl_down) / (2 * h), rel=1e-5, abs=1e-6)
