"""gt.distributions' transforms, biject_to/transform_to and TransformedDistribution against
NumPy closed forms and autograd Jacobians: the vector and matrix transforms, event dims of
user-written transforms, Affine maps of vectors, inverse CDFs, and PyTorch's registry rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.distributions as D

C, T = D.constraints, D.transforms


def np_(t) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def f64(a) -> gt.Tensor:
    return gt.tensor(np.asarray(a, dtype=np.float64))


def _log_abs_det(jac: np.ndarray) -> float:
    return float(np.linalg.slogdet(jac)[1])


# -- biject_to / transform_to ---------------------------------------------------------------------


def test_biject_to_picks_pytorchs_transform_for_each_constraint(conn):
    names = {
        C.real: "ComposeTransform", C.positive: "ComposeTransform",
        C.nonnegative: "ComposeTransform", C.unit_interval: "SigmoidTransform",
        C.interval(-2.0, 3.0): "ComposeTransform", C.greater_than(1.5): "ComposeTransform",
        C.less_than(-1.0): "ComposeTransform", C.simplex: "StickBreakingTransform",
        C.corr_cholesky: "CorrCholeskyTransform",
        C.independent(C.positive, 1): "IndependentTransform",
    }  # fmt: skip
    for constraint, name in names.items():
        assert type(D.biject_to(constraint)).__name__ == name, constraint
    # positive is a greater_than(0.0): the class's rule wins, exp then a unit affine map
    assert [type(p).__name__ for p in D.biject_to(C.positive).parts] == [
        "ExpTransform",
        "AffineTransform",
    ]
    assert isinstance(D.transform_to(C.simplex), T.SoftmaxTransform)
    assert isinstance(D.transform_to(C.lower_cholesky), T.LowerCholeskyTransform)
    assert isinstance(D.transform_to(C.positive_definite), T.PositiveDefiniteTransform)
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky constraints"):
        D.biject_to(C.lower_cholesky)


def test_biject_to_maps_into_the_constraint_and_back(conn):
    u = np.array([-1.5, 0.2, 2.0])
    cases = {
        C.positive: np.exp(u), C.greater_than(1.5): 1.5 + np.exp(u),
        C.less_than(-1.0): -1.0 - np.exp(u), C.interval(-2.0, 3.0): -2.0 + 5.0 / (1 + np.exp(-u)),
    }  # fmt: skip
    for constraint, want in cases.items():
        t = D.biject_to(constraint)
        x = f64(u).requires_grad_(True)
        y = t(x)
        np.testing.assert_allclose(np_(y), want, rtol=1e-12)
        np.testing.assert_allclose(np_(t.inv(y)), u, rtol=1e-9)
        assert bool(constraint.check(y).all())
        # the log-Jacobian of an elementwise map is log |dy/dx|, checked by autograd
        (dy,) = gt.autograd.grad(y.sum(), x)
        np.testing.assert_allclose(np_(t.log_abs_det_jacobian(x, y)), np.log(np.abs(np_(dy))),
                                   rtol=1e-9, atol=1e-12)  # fmt: skip
    assert D.biject_to(C.less_than(0.0)).sign == -1 and D.biject_to(C.positive).sign == 1


def test_registering_a_custom_constraint_and_its_bijection(conn):
    class _Ordered(C.Constraint):
        event_dim = 1

        def check(self, value):
            return (value[..., 1:] > value[..., :-1]).all(-1)

    class OrderedTransform(T.Transform):
        domain = C.real_vector
        codomain = _Ordered()
        bijective = True

        def _call(self, x):
            return gt.cat([x[..., :1], x[..., 1:].exp()], dim=-1).cumsum(-1)

        def _inverse(self, y):
            return gt.cat([y[..., :1], (y[..., 1:] - y[..., :-1]).log()], dim=-1)

        def log_abs_det_jacobian(self, x, y):
            return x[..., 1:].sum(-1)

    registry = D.constraint_registry.ConstraintRegistry()
    registry.register(_Ordered(), lambda c: OrderedTransform())
    t = registry(_Ordered())
    assert t.event_dim == 1 and t.bijective
    x = f64([[0.5, -1.0, 0.3], [2.0, 0.0, -4.0]])
    y = t(x)
    assert np_(_Ordered().check(y)).tolist() == [True, True]
    np.testing.assert_allclose(np_(t.inv(y)), np_(x), rtol=1e-12)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        registry.register(int, lambda c: t)


# -- vector and matrix transforms -----------------------------------------------------------------


def test_softplus_transform_values_inverse_and_log_jacobian(conn):
    x = np.array([-30.0, -2.0, 0.0, 1.5, 25.0])
    t = T.SoftplusTransform()
    y = t(f64(x))
    np.testing.assert_allclose(np_(y), np.logaddexp(0, x), rtol=1e-12)
    np.testing.assert_allclose(np_(t.inv(y)), x, rtol=1e-9)
    np.testing.assert_allclose(np_(t.log_abs_det_jacobian(f64(x), y)), -np.logaddexp(0, -x),
                               rtol=1e-12)  # fmt: skip


def test_lower_cholesky_and_positive_definite_transforms(conn):
    raw = np.random.default_rng(0).standard_normal((2, 3, 3))
    want_l = np.tril(raw, -1) + np.exp(np.diagonal(raw, axis1=-2, axis2=-1))[..., None] * np.eye(3)
    low = T.LowerCholeskyTransform()(f64(raw))
    np.testing.assert_allclose(np_(low), want_l, rtol=1e-12)
    np.testing.assert_allclose(np_(T.LowerCholeskyTransform().inv(low)), np.tril(raw), rtol=1e-12)
    pd = T.PositiveDefiniteTransform()
    spd = pd(f64(raw))
    np.testing.assert_allclose(np_(spd), want_l @ np.swapaxes(want_l, -1, -2), rtol=1e-12)
    # the inverse recovers the lower triangle (the upper one is lost in L L^T)
    np.testing.assert_allclose(np_(pd.inv(spd)), np.tril(raw), rtol=1e-9, atol=1e-12)
    assert np_(C.positive_definite.check(spd)).tolist() == [True, True]
    assert T.LowerCholeskyTransform().domain.event_dim == 2


def test_softmax_transform_is_onto_the_simplex_but_not_bijective(conn):
    x = np.array([[1.0, -2.0, 0.5], [300.0, 0.0, 1.0]])
    t = T.SoftmaxTransform()
    y = t(f64(x))
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(np_(y), e / e.sum(-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(np_(t(t.inv(y))), np_(y), rtol=1e-12)
    assert not t.bijective and t.event_dim == 1


def test_corr_cholesky_transform_round_trip_and_log_jacobian(conn):
    x = np.array([0.3, -1.2, 0.7, 2.0, -0.4, 0.1])  # a 4 x 4 correlation factor
    t = T.CorrCholeskyTransform()
    y = t(f64(x))
    ly = np_(y)
    assert ly.shape == (4, 4)
    np.testing.assert_allclose(np.linalg.norm(ly, axis=-1), np.ones(4), rtol=1e-12)
    assert np.allclose(np.triu(ly, 1), 0) and (np.diag(ly) > 0).all()
    np.testing.assert_allclose(np_(t.inv(y)), x, rtol=1e-9)
    assert tuple(t.forward_shape((5, 6))) == (5, 4, 4) and tuple(t.inverse_shape((4, 4))) == (6,)

    # the log-Jacobian of x -> strict lower triangle of y, by autograd
    def strict_lower(v):
        return t(v)[np.tril_indices(4, -1)]

    jac = gt.autograd.functional.jacobian(strict_lower, f64(x))
    np.testing.assert_allclose(float(t.log_abs_det_jacobian(f64(x), y)), _log_abs_det(np_(jac)),
                               rtol=1e-9)  # fmt: skip


def test_independent_and_reshape_transforms_sum_the_log_jacobian(conn):
    x = f64([[0.1, -0.3, 0.5], [1.0, 2.0, -1.0]])
    ind = T.IndependentTransform(T.ExpTransform(), 1)
    assert ind.event_dim == 1 and np_(ind(x)).shape == (2, 3)
    np.testing.assert_allclose(np_(ind.log_abs_det_jacobian(x, ind(x))), [0.3, 2.0], rtol=1e-12)
    r = T.ReshapeTransform((3,), (3, 1))
    assert tuple(r(x).shape) == (2, 3, 1) and tuple(r.inv(r(x)).shape) == (2, 3)
    assert tuple(r.forward_shape((5, 3))) == (5, 3, 1)
    assert np_(r.log_abs_det_jacobian(x, r(x))).tolist() == [0.0, 0.0]


# -- Transform semantics --------------------------------------------------------------------------


def test_a_user_transform_takes_its_event_dim_from_domain_and_codomain(conn):
    class Shift(T.Transform):
        domain = C.real_vector
        codomain = C.real_vector
        bijective = True

        def _call(self, x):
            return x + 1

        def _inverse(self, y):
            return y - 1

        def log_abs_det_jacobian(self, x, y):
            return x.new_zeros(tuple(x.shape[:-1]))

    t = Shift()
    assert t.event_dim == 1 and t.inv.inv is t and t.inv.event_dim == 1
    assert t == t and t != Shift()  # a plain Transform equals only itself, as in PyTorch
    assert not T.Transform().bijective and T.ExpTransform() == T.ExpTransform()
    compose = T.ComposeTransform([T.ExpTransform(), t])
    assert compose.domain.event_dim == 1 and compose.codomain.event_dim == 1
    x = f64([[0.5, -1.0], [0.0, 2.0]])
    np.testing.assert_allclose(np_(compose.log_abs_det_jacobian(x, compose(x))), [-0.5, 2.0])


def test_affine_transform_of_vectors_sums_its_log_jacobian(conn):
    scale = f64([2.0, 0.5, -3.0])
    t = T.AffineTransform(f64([1.0, 0.0, -1.0]), scale, event_dim=1)
    x = f64(np.zeros((4, 3)))
    assert t.event_dim == 1 and t.domain.event_dim == 1
    np.testing.assert_allclose(np_(t.log_abs_det_jacobian(x, t(x))), [math.log(3.0)] * 4)
    assert np_(t.sign).tolist() == [1.0, 1.0, -1.0]
    assert tuple(t.forward_shape((3,))) == (3,)
    assert np_(T.AffineTransform(0.0, 2.0).log_abs_det_jacobian(x, x)).shape == (4, 3)


# -- TransformedDistribution ----------------------------------------------------------------------


def test_a_vector_transform_moves_batch_dims_into_the_event(conn):
    base = D.Normal(gt.zeros(5, 3, dtype="float64"), gt.ones(5, 3, dtype="float64"))
    loc, scale = f64([1.0, 0.0, -1.0]), f64([2.0, 0.5, 3.0])
    dist = D.TransformedDistribution(base, [T.AffineTransform(loc, scale, event_dim=1)])
    assert tuple(dist.batch_shape) == (5,) and tuple(dist.event_shape) == (3,)
    assert isinstance(dist.base_dist, D.Independent)
    assert repr(dist.support) == "IndependentConstraint(Real(), 1)"
    v = np.random.default_rng(1).standard_normal((5, 3))
    z = (v - np_(loc)) / np_(scale)
    want = (-0.5 * z**2 - 0.5 * math.log(2 * math.pi)).sum(-1) - np.log(np_(scale)).sum()
    np.testing.assert_allclose(np_(dist.log_prob(f64(v))), want, rtol=1e-12)
    assert tuple(dist.expand((2, 5)).batch_shape) == (2, 5)
    assert np_(dist.expand((2, 5)).log_prob(f64(v))).shape == (2, 5)


def test_icdf_and_cdf_follow_the_transforms_direction(conn):
    loc, scale = f64([0.0, 0.5]), f64([1.0, 2.0])
    logistic = D.TransformedDistribution(
        D.Uniform(gt.zeros(2, dtype="float64"), gt.ones(2, dtype="float64")),
        [T.SigmoidTransform().inv, T.AffineTransform(loc, scale)],
    )
    u = f64([0.1, 0.9])
    want = np_(loc) + np_(scale) * np.log(np_(u) / (1 - np_(u)))
    np.testing.assert_allclose(np_(logistic.icdf(u)), want, rtol=1e-12)
    np.testing.assert_allclose(np_(logistic.cdf(logistic.icdf(u))), np_(u), rtol=1e-12)
    # a decreasing map (negative scale) flips the CDF
    reflected = D.TransformedDistribution(
        D.Exponential(f64([1.0, 2.0])), T.AffineTransform(3.0, -1.0)
    )
    r = f64([2.5, -1.0])
    np.testing.assert_allclose(np_(reflected.cdf(r)), np.exp(-np.array([1.0, 2.0]) * (3 - np_(r))),
                               rtol=1e-12)  # fmt: skip
    q = f64([0.25, 0.75])
    np.testing.assert_allclose(np_(reflected.icdf(q)), 3 + np.log(np_(q)) / np.array([1.0, 2.0]),
                               rtol=1e-12)  # fmt: skip
