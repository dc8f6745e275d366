"""gt.distributions against closed forms computed with NumPy: densities, entropies, KL
divergences and moments; sample shapes and (loose) sample statistics; reparameterized gradients;
PyTorch's validation errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.distributions as D

LOG_2PI = math.log(2 * math.pi)


def np_(t) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


@pytest.fixture
def no_validation():
    D.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        D.Distribution.set_default_validate_args(True)


def test_package_is_reachable_as_attribute_and_import(conn):
    import importlib

    assert importlib.import_module("gt.distributions").Normal is D.Normal
    assert gt.distributions.Categorical is D.Categorical


# -- densities, entropies, moments ---------------------------------------------------------------


def test_normal_log_prob_entropy_and_moments(conn):
    loc, scale = np.array([0.0, 1.0, -2.0]), np.array([1.0, 0.5, 2.0])
    x = np.array([0.3, 1.2, 0.0])
    d = D.Normal(gt.tensor(loc, dtype="float32"), gt.tensor(scale, dtype="float32"))
    want = -((x - loc) ** 2) / (2 * scale**2) - np.log(scale) - 0.5 * LOG_2PI
    np.testing.assert_allclose(np_(d.log_prob(gt.tensor(x, dtype="float32"))), want, rtol=1e-5)
    np.testing.assert_allclose(np_(d.entropy()), 0.5 + 0.5 * LOG_2PI + np.log(scale), rtol=1e-5)
    np.testing.assert_allclose(np_(d.mean), loc)
    np.testing.assert_allclose(np_(d.variance), scale**2, rtol=1e-6)
    np.testing.assert_allclose(np_(d.stddev), scale, rtol=1e-6)
    np.testing.assert_allclose(np_(d.mode), loc)
    cdf = 0.5 * (1 + np.vectorize(math.erf)((x - loc) / (scale * math.sqrt(2))))
    np.testing.assert_allclose(np_(d.cdf(gt.tensor(x, dtype="float32"))), cdf, rtol=1e-5)


def test_number_parameters_broadcast_against_tensors(conn):
    d = D.Normal(gt.zeros(3), 1.0)
    assert tuple(d.batch_shape) == (3,) and tuple(d.event_shape) == ()
    assert tuple(d.scale.shape) == (3,) and d.scale.dtype == "float32"
    assert tuple(D.Normal(0.0, 1.0).batch_shape) == ()
    assert tuple(D.Uniform(gt.zeros(2, 1), gt.ones(3)).batch_shape) == (2, 3)


def test_uniform_laplace_exponential_closed_forms(conn):
    u = D.Uniform(gt.tensor([0.0, -1.0]), gt.tensor([2.0, 3.0]))
    np.testing.assert_allclose(np_(u.log_prob(gt.tensor([1.0, 0.0]))), -np.log([2.0, 4.0]), 1e-6)
    np.testing.assert_allclose(np_(u.entropy()), np.log([2.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(u.mean), [1.0, 1.0])
    np.testing.assert_allclose(np_(u.variance), [4 / 12, 16 / 12], rtol=1e-6)
    lap = D.Laplace(gt.tensor([0.0, 1.0]), gt.tensor([1.0, 2.0]))
    x = np.array([0.5, -1.0])
    want = -np.log(2 * np.array([1.0, 2.0])) - np.abs(x - [0.0, 1.0]) / [1.0, 2.0]
    np.testing.assert_allclose(np_(lap.log_prob(gt.tensor(x, dtype="float32"))), want, 1e-6)
    np.testing.assert_allclose(np_(lap.entropy()), 1 + np.log([2.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(lap.variance), [2.0, 8.0], rtol=1e-6)
    e = D.Exponential(gt.tensor([0.5, 2.0]))
    np.testing.assert_allclose(
        np_(e.log_prob(gt.tensor([1.0, 1.0]))), np.log([0.5, 2.0]) - [0.5, 2.0], rtol=1e-6
    )
    np.testing.assert_allclose(np_(e.entropy()), 1 - np.log([0.5, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(e.mean), [2.0, 0.5], rtol=1e-6)


def test_bernoulli_probs_and_logits_agree(conn):
    p = np.array([0.2, 0.5, 0.9])
    by_probs = D.Bernoulli(probs=gt.tensor(p, dtype="float32"))
    by_logits = D.Bernoulli(logits=gt.tensor(np.log(p / (1 - p)), dtype="float32"))
    x = gt.tensor([1.0, 0.0, 1.0])
    want = np.log(np.where([1, 0, 1], p, 1 - p))
    for d in (by_probs, by_logits):
        np.testing.assert_allclose(np_(d.log_prob(x)), want, rtol=1e-5)
        np.testing.assert_allclose(
            np_(d.entropy()), -(p * np.log(p) + (1 - p) * np.log(1 - p)), rtol=1e-5
        )
        np.testing.assert_allclose(np_(d.variance), p * (1 - p), rtol=1e-5)
    mode = np_(by_probs.mode)
    assert mode[0] == 0 and np.isnan(mode[1]) and mode[2] == 1  # a fair coin has no mode
    assert np_(by_probs.enumerate_support()).tolist() == [[0.0] * 3, [1.0] * 3]


def test_categorical_log_prob_entropy_and_normalization(conn):
    logits = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]])
    norm = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    probs = np.exp(norm)
    d = D.Categorical(logits=gt.tensor(logits, dtype="float32"))
    np.testing.assert_allclose(np_(d.logits), norm, rtol=1e-5)
    np.testing.assert_allclose(np_(d.probs), probs, rtol=1e-5)
    np.testing.assert_allclose(np_(d.log_prob(gt.tensor([2, 1]))), norm[[0, 1], [2, 1]], 1e-5)
    np.testing.assert_allclose(np_(d.entropy()), -(probs * norm).sum(-1), rtol=1e-5)
    unnormalized = D.Categorical(probs=gt.tensor(probs * 7.0, dtype="float32"))
    np.testing.assert_allclose(np_(unnormalized.probs), probs, rtol=1e-5)
    assert np_(d.mode).tolist() == [2, 2]
    assert tuple(d.enumerate_support().shape) == (3, 2)
    assert np.isnan(np_(d.mean)).all() and tuple(d.mean.shape) == (2,)


def test_categorical_entropy_with_zero_probability_is_finite(conn):
    d = D.Categorical(probs=gt.tensor([0.5, 0.5, 0.0]))
    np.testing.assert_allclose(np_(d.entropy()), math.log(2), rtol=1e-5)


def test_log_prob_broadcasts_values_over_the_batch(conn):
    d = D.Categorical(logits=gt.zeros(2, 4))
    assert tuple(d.log_prob(gt.tensor([[0], [3], [1]])).shape) == (3, 2)
    assert tuple(D.Normal(gt.zeros(3), 1.0).log_prob(gt.zeros(5, 1)).shape) == (5, 3)


def test_one_hot_categorical(conn):
    probs = np.array([0.2, 0.3, 0.5])
    d = D.OneHotCategorical(probs=gt.tensor(probs, dtype="float32"))
    assert tuple(d.event_shape) == (3,) and tuple(d.batch_shape) == ()
    np.testing.assert_allclose(np_(d.log_prob(gt.tensor([0.0, 1.0, 0.0]))), np.log(0.3), 1e-5)
    np.testing.assert_allclose(np_(d.entropy()), -(probs * np.log(probs)).sum(), rtol=1e-5)
    s = np_(d.sample((50,)))
    assert s.shape == (50, 3) and (s.sum(-1) == 1).all()
    assert np_(d.mode).tolist() == [0.0, 0.0, 1.0]


def test_independent_sums_the_reinterpreted_dims(conn):
    loc = np.arange(6, dtype=np.float32).reshape(2, 3)
    base = D.Normal(gt.tensor(loc), gt.ones(2, 3))
    d = D.Independent(base, 1)
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
    x = gt.zeros(2, 3)
    np.testing.assert_allclose(np_(d.log_prob(x)), np_(base.log_prob(x)).sum(-1), rtol=1e-6)
    np.testing.assert_allclose(np_(d.entropy()), np_(base.entropy()).sum(-1), rtol=1e-6)
    assert tuple(d.rsample((4,)).shape) == (4, 2, 3) and d.has_rsample


def test_expand_broadcasts_parameters(conn):
    d = D.Normal(gt.zeros(3), 2.0).expand((4, 3))
    assert tuple(d.batch_shape) == (4, 3) and tuple(d.sample().shape) == (4, 3)
    c = D.Categorical(logits=gt.zeros(3)).expand((5,))
    assert tuple(c.batch_shape) == (5,) and tuple(c.sample((2,)).shape) == (2, 5)
    i = D.Independent(D.Normal(gt.zeros(3), 1.0), 1).expand((2,))
    assert tuple(i.batch_shape) == (2,) and tuple(i.event_shape) == (3,)


# -- KL divergences ------------------------------------------------------------------------------


def test_kl_normal_normal_and_its_gradient(conn):
    mp = gt.tensor([0.0, 1.0], requires_grad=True)
    sp = gt.tensor([1.0, 0.5], requires_grad=True)
    mq, sq = np.array([1.0, -1.0]), np.array([2.0, 1.0])
    kl = D.kl_divergence(D.Normal(mp, sp), D.Normal(gt.tensor(mq, dtype="float32"),
                                                   gt.tensor(sq, dtype="float32")))  # fmt: skip
    m, s = np.array([0.0, 1.0]), np.array([1.0, 0.5])
    want = np.log(sq / s) + (s**2 + (m - mq) ** 2) / (2 * sq**2) - 0.5
    np.testing.assert_allclose(np_(kl), want, rtol=1e-5)
    kl.sum().backward()
    np.testing.assert_allclose(np_(mp.grad), (m - mq) / sq**2, rtol=1e-5)
    np.testing.assert_allclose(np_(sp.grad), -1 / s + s / sq**2, rtol=1e-5)


def test_kl_categorical_bernoulli_uniform_independent(conn):
    p, q = np.array([0.1, 0.6, 0.3]), np.array([0.3, 0.3, 0.4])
    kl = D.kl_divergence(D.Categorical(probs=gt.tensor(p, dtype="float32")),
                         D.Categorical(probs=gt.tensor(q, dtype="float32")))  # fmt: skip
    np.testing.assert_allclose(np_(kl), (p * np.log(p / q)).sum(), rtol=1e-5)
    zero_q = D.Categorical(probs=gt.tensor([0.5, 0.5, 0.0]))
    assert np_(D.kl_divergence(zero_q, D.Categorical(probs=gt.tensor(q, dtype="float32")))) < 1
    assert np.isinf(
        np_(D.kl_divergence(D.Categorical(probs=gt.tensor(q, dtype="float32")), zero_q))
    )
    a, b = np.array([0.2, 0.7]), np.array([0.5, 0.4])
    kl = D.kl_divergence(D.Bernoulli(gt.tensor(a, dtype="float32")),
                         D.Bernoulli(logits=gt.tensor(np.log(b / (1 - b)), dtype="float32")))  # fmt: skip
    want = a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))
    np.testing.assert_allclose(np_(kl), want, rtol=1e-4)
    inside = D.kl_divergence(D.Uniform(0.0, 1.0), D.Uniform(-1.0, 3.0))
    np.testing.assert_allclose(np_(inside), math.log(4.0), rtol=1e-6)
    assert np.isinf(np_(D.kl_divergence(D.Uniform(0.0, 1.0), D.Uniform(0.5, 3.0))))
    p1 = D.Independent(D.Normal(gt.zeros(2, 3), 1.0), 1)
    q1 = D.Independent(D.Normal(gt.ones(2, 3), 1.0), 1)
    np.testing.assert_allclose(np_(D.kl_divergence(p1, q1)), [1.5, 1.5], rtol=1e-6)


def test_kl_categorical_gradient_matches_closed_form(conn):
    logits = gt.tensor([0.5, -0.2, 1.0], requires_grad=True)
    q = np.array([0.2, 0.5, 0.3])
    kl = D.kl_divergence(
        D.Categorical(logits=logits), D.Categorical(probs=gt.tensor(q, dtype="float32"))
    )
    kl.backward()
    lg = np.array([0.5, -0.2, 1.0])
    p = np.exp(lg) / np.exp(lg).sum()
    f = np.log(p / q)  # d KL / d logits = p * (f - E_p[f])
    np.testing.assert_allclose(np_(logits.grad), p * (f - (p * f).sum()), rtol=1e-4, atol=1e-6)


def test_kl_without_a_rule_raises_and_register_kl_adds_one(conn):
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Laplace and q type Bernoulli"):  # fmt: skip
        D.kl_divergence(D.Laplace(0.0, 1.0), D.Bernoulli(0.5))
    # (two exponential families: PyTorch's Bregman fallback refuses them, with its own message)
    with pytest.raises(NotImplementedError, match="cross KL-divergence between different exponential families"):  # fmt: skip
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5))

    class Shifted(D.Normal):
        pass

    @D.register_kl(Shifted, D.Normal)
    def _kl(p, q):
        return gt.tensor(42.0)

    assert D.kl_divergence(Shifted(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), Shifted(0.0, 1.0)).item() == 0.0  # base rule
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)


# -- sampling ------------------------------------------------------------------------------------


def test_sample_shapes(conn):
    cases = [
        (D.Normal(gt.zeros(3), 1.0), (3,)),
        (D.Uniform(gt.zeros(2, 1), 1.0), (2, 1)),
        (D.Bernoulli(gt.full((4,), 0.5)), (4,)),
        (D.Categorical(logits=gt.zeros(2, 5)), (2,)),
        (D.OneHotCategorical(logits=gt.zeros(2, 5)), (2, 5)),
        (D.Laplace(0.0, 1.0), ()),
        (D.Exponential(gt.ones(3)), (3,)),
        (D.Independent(D.Normal(gt.zeros(2, 3), 1.0), 2), (2, 3)),
    ]
    for d, shape in cases:
        assert tuple(d.sample().shape) == shape, d
        assert tuple(d.sample((7,)).shape) == (7, *shape), d
        assert tuple(d.sample((2, 3)).shape) == (2, 3, *shape), d
    assert D.Categorical(logits=gt.zeros(5)).sample((3,)).dtype == "int64"


def test_sample_moments(conn):
    n = 20000
    s = np_(D.Normal(gt.tensor([1.0, -2.0]), gt.tensor([0.5, 2.0])).sample((n,)))
    np.testing.assert_allclose(s.mean(0), [1.0, -2.0], atol=0.1)
    np.testing.assert_allclose(s.std(0), [0.5, 2.0], rtol=0.05)
    u = np_(D.Uniform(2.0, 4.0).sample((n,)))
    assert u.min() >= 2.0 and u.max() < 4.0 and abs(u.mean() - 3.0) < 0.05
    b = np_(D.Bernoulli(gt.tensor([0.2, 0.8])).sample((n,)))
    np.testing.assert_allclose(b.mean(0), [0.2, 0.8], atol=0.03)
    c = np_(D.Categorical(probs=gt.tensor([0.1, 0.2, 0.7])).sample((n,)))
    np.testing.assert_allclose(
        np.bincount(c.astype(int), minlength=3) / n, [0.1, 0.2, 0.7], atol=0.03
    )
    e = np_(D.Exponential(gt.tensor(2.0)).sample((n,)))
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.05
    lap = np_(D.Laplace(1.0, 2.0).sample((n,)))
    assert abs(lap.mean() - 1.0) < 0.15 and abs(lap.var() - 8.0) < 1.0


def test_manual_seed_makes_samples_repeat(conn):
    d = D.Normal(gt.zeros(4), 1.0)
    gt.manual_seed(123)
    first = np_(d.sample((3,)))
    gt.manual_seed(123)
    np.testing.assert_array_equal(np_(d.sample((3,))), first)


def test_rsample_is_differentiable_and_sample_is_not(conn):
    loc = gt.tensor([0.5, -1.0], requires_grad=True)
    scale = gt.tensor([1.0, 2.0], requires_grad=True)
    d = D.Normal(loc, scale)
    x = d.rsample((1000,))
    assert x.requires_grad and not d.sample((3,)).requires_grad
    x.sum().backward()
    eps = (np_(x) - [0.5, -1.0]) / [1.0, 2.0]
    np.testing.assert_allclose(np_(loc.grad), [1000.0, 1000.0])
    np.testing.assert_allclose(np_(scale.grad), eps.sum(0), rtol=1e-3, atol=1e-2)
    low = gt.tensor(0.0, requires_grad=True)
    D.Uniform(low, 1.0).rsample((10,)).sum().backward()
    assert low.grad is not None


def test_log_prob_gradients_wrt_parameters(conn):
    loc = gt.tensor([0.0, 1.0], requires_grad=True)
    scale = gt.tensor([1.0, 2.0], requires_grad=True)
    D.Normal(loc, scale).log_prob(gt.tensor([1.0, 0.0])).sum().backward()
    x, m, s = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([1.0, 2.0])
    np.testing.assert_allclose(np_(loc.grad), (x - m) / s**2, rtol=1e-5)
    np.testing.assert_allclose(np_(scale.grad), (x - m) ** 2 / s**3 - 1 / s, rtol=1e-5)
    logits = gt.tensor([[0.0, 1.0, 2.0]], requires_grad=True)
    D.Categorical(logits=logits).log_prob(gt.tensor([1])).sum().backward()
    p = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    np.testing.assert_allclose(np_(logits.grad)[0], np.eye(3)[1] - p, rtol=1e-5, atol=1e-6)
    bl = gt.tensor([0.3], requires_grad=True)
    D.Bernoulli(logits=bl).entropy().sum().backward()
    pb = 1 / (1 + math.exp(-0.3))  # dH/dlogit = -logit * p * (1 - p)
    np.testing.assert_allclose(np_(bl.grad), [-0.3 * pb * (1 - pb)], rtol=1e-4)


# -- validation ----------------------------------------------------------------------------------


def test_invalid_parameters_raise_pytorchs_messages(conn):
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution Normal\(.*to satisfy the constraint GreaterThan\(lower_bound=0.0\), but found invalid values"):  # fmt: skip
        D.Normal(gt.zeros(2), gt.tensor([1.0, -1.0]))
    with pytest.raises(
        ValueError, match="constraint Interval\\(lower_bound=0.0, upper_bound=1.0\\)"
    ):
        D.Bernoulli(probs=gt.tensor([1.5]))
    with pytest.raises(ValueError, match="constraint Simplex\\(\\)"):
        D.Categorical(probs=gt.tensor([0.5, -0.5, 1.0]))
    with pytest.raises(
        ValueError, match="Either `probs` or `logits` must be specified, but not both."
    ):
        D.Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Bernoulli(probs=0.5, logits=0.0)
    with pytest.raises(ValueError, match="`logits` parameter must be at least one-dimensional."):
        D.Categorical(logits=gt.tensor(1.0))
    with pytest.raises(ValueError, match="Expected parameter low"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len\\(base_distribution.batch_shape\\), actual 2 vs 1"):  # fmt: skip
        D.Independent(D.Normal(gt.zeros(3), 1.0), 2)


def test_invalid_values_raise_in_log_prob(conn):
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="to be within the support \\(IntegerInterval\\(lower_bound=0, upper_bound=2\\)\\)"):  # fmt: skip
        D.Categorical(logits=gt.zeros(3)).log_prob(gt.tensor([3]))
    with pytest.raises(ValueError, match="Boolean\\(\\)"):
        D.Bernoulli(0.5).log_prob(gt.tensor([0.5]))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        D.OneHotCategorical(logits=gt.zeros(3)).log_prob(gt.zeros(4))
    with pytest.raises(
        ValueError, match="Value is not broadcastable with batch_shape\\+event_shape"
    ):
        D.Normal(gt.zeros(3), 1.0).log_prob(gt.zeros(4))


def test_validation_can_be_turned_off(conn, no_validation):
    d = D.Normal(0.0, -1.0)  # accepted: the default is off in this test
    assert not d._validate_args
    assert D.Bernoulli(probs=gt.tensor([1.5]), validate_args=False) is not None


def test_validate_args_true_overrides_the_default(conn, no_validation):
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(0.0, -1.0, validate_args=True)


# -- transformed distributions and the multivariate normal ---------------------------------------


def test_lognormal_closed_forms(conn):
    m, s, x = np.array([0.0, 0.5]), np.array([1.0, 0.3]), np.array([1.5, 2.0])
    d = D.LogNormal(gt.tensor(m, dtype="float32"), gt.tensor(s, dtype="float32"))
    want = -np.log(x) - np.log(s) - 0.5 * LOG_2PI - (np.log(x) - m) ** 2 / (2 * s**2)
    np.testing.assert_allclose(np_(d.log_prob(gt.tensor(x, dtype="float32"))), want, rtol=1e-5)
    np.testing.assert_allclose(np_(d.mean), np.exp(m + s**2 / 2), rtol=1e-5)
    np.testing.assert_allclose(np_(d.variance), np.expm1(s**2) * np.exp(2 * m + s**2), 1e-5)
    np.testing.assert_allclose(np_(d.entropy()), 0.5 + 0.5 * LOG_2PI + np.log(s) + m, 1e-5)
    assert (np_(d.sample((100,))) > 0).all()
    kl = D.kl_divergence(d, D.LogNormal(0.0, 2.0))  # = the KL of the underlying normals
    want = np.log(2.0 / s) + (s**2 + m**2) / 8 - 0.5
    np.testing.assert_allclose(np_(kl), want, rtol=1e-5)


def test_tanh_squashed_gaussian_log_prob_and_gradient(conn):
    mu = gt.tensor([0.3, -0.2], requires_grad=True)
    d = D.TransformedDistribution(D.Normal(mu, 1.0), [D.TanhTransform(cache_size=1)])
    a = d.rsample((5,))
    assert tuple(a.shape) == (5, 2) and (np.abs(np_(a)) < 1).all()
    lp = d.log_prob(a)
    u = np.arctanh(np_(a))  # change of variables: log N(u) - log(1 - tanh(u)^2)
    want = -((u - [0.3, -0.2]) ** 2) / 2 - 0.5 * LOG_2PI - np.log(1 - np.tanh(u) ** 2)
    np.testing.assert_allclose(np_(lp), want, rtol=1e-4, atol=1e-4)
    lp.sum().backward()
    assert mu.grad is not None and np.isfinite(np_(mu.grad)).all()


def test_affine_transform_with_negative_scale(conn):
    d = D.TransformedDistribution(D.Uniform(0.0, 1.0), [D.AffineTransform(2.0, -3.0)])
    np.testing.assert_allclose(np_(d.log_prob(gt.tensor([0.0]))), [-math.log(3.0)], rtol=1e-6)
    np.testing.assert_allclose(np_(d.cdf(gt.tensor([0.5, 1.7]))), [0.5, 0.9], rtol=1e-5)
    with pytest.raises(NotImplementedError):
        D.kl_divergence(d, D.TransformedDistribution(D.Uniform(0.0, 1.0), [D.ExpTransform()]))


def _spd(seed: int, n: int = 3) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + np.eye(n)


def test_multivariate_normal_closed_forms(conn):
    S, mu, x = _spd(0), np.array([0.5, -1.0, 2.0]), np.array([0.0, 0.0, 1.0])
    f32 = {"dtype": "float32"}
    for kwargs in ({"covariance_matrix": S}, {"precision_matrix": np.linalg.inv(S)},
                   {"scale_tril": np.linalg.cholesky(S)}):  # fmt: skip
        name, m = next(iter(kwargs.items()))
        d = D.MultivariateNormal(gt.tensor(mu, **f32), **{name: gt.tensor(m, **f32)})
        logdet = np.linalg.slogdet(S)[1]
        want = -0.5 * (3 * LOG_2PI + (x - mu) @ np.linalg.solve(S, x - mu)) - 0.5 * logdet
        np.testing.assert_allclose(np_(d.log_prob(gt.tensor(x, **f32))), want, rtol=1e-4)
        np.testing.assert_allclose(np_(d.entropy()), 1.5 * (1 + LOG_2PI) + 0.5 * logdet, 1e-4)
        np.testing.assert_allclose(np_(d.covariance_matrix), S, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np_(d.variance), np.diag(S), rtol=1e-4)
    S2 = _spd(1)
    q = D.MultivariateNormal(gt.zeros(3), covariance_matrix=gt.tensor(S2, **f32))
    want = 0.5 * (np.trace(np.linalg.solve(S2, S)) + mu @ np.linalg.solve(S2, mu) - 3
                  + np.linalg.slogdet(S2)[1] - np.linalg.slogdet(S)[1])  # fmt: skip
    np.testing.assert_allclose(np_(D.kl_divergence(d, q)), want, rtol=1e-4)


def test_multivariate_normal_batches_samples_and_gradients(conn):
    d = D.MultivariateNormal(gt.zeros(2, 3), scale_tril=gt.eye(3))
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
    assert tuple(d.log_prob(gt.zeros(5, 2, 3)).shape) == (5, 2)
    assert tuple(d.rsample((4,)).shape) == (4, 2, 3)
    S = _spd(2)
    s = np_(D.MultivariateNormal(gt.ones(3), covariance_matrix=gt.tensor(S, dtype="float32"))
            .sample((20000,)))  # fmt: skip
    np.testing.assert_allclose(np.cov(s.T), S, atol=0.25 * np.abs(S).max())
    loc = gt.zeros(3, requires_grad=True)
    x = np.array([1.0, -1.0, 0.5])
    D.MultivariateNormal(loc, covariance_matrix=gt.tensor(S, dtype="float32")).log_prob(
        gt.tensor(x, dtype="float32")
    ).backward()
    np.testing.assert_allclose(np_(loc.grad), np.linalg.solve(S, x), rtol=1e-4, atol=1e-5)


def test_multivariate_normal_validation(conn):
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."):  # fmt: skip
        D.MultivariateNormal(gt.zeros(2))
    with pytest.raises(ValueError, match="to satisfy the constraint PositiveDefinite\\(\\)"):
        D.MultivariateNormal(gt.zeros(2), covariance_matrix=gt.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="to satisfy the constraint LowerCholesky\\(\\)"):
        D.MultivariateNormal(gt.zeros(2), scale_tril=gt.tensor([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional."):
        D.MultivariateNormal(gt.tensor(0.0), scale_tril=gt.eye(1))
