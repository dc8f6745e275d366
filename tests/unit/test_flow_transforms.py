"""The transforms flows use to map onto mixed supports and onto ``[0, 1]``, which GT once lacked
(found while writing the ``flows_energy_scores`` programs): ``CatTransform`` and
``StackTransform`` with the ``constraints.cat``/``constraints.stack`` they map between (and
``biject_to``/``transform_to`` of those), and ``CumulativeDistributionTransform``. Expected values
are PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)
D = gt.distributions
C = D.constraints


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


X = np.array([[0.5, -1.0, 2.0], [-0.3, 0.7, -1.5]], np.float32)


def test_cat_transform_maps_slices_and_concatenates_their_log_jacobians(conn):
    t = D.CatTransform([D.ExpTransform(), D.AffineTransform(1.0, 3.0)], dim=-1, lengths=[1, 2])
    x = gt.tensor(X)
    y = t(x)
    want = np.concatenate([np.exp(X[:, :1]), 1 + 3 * X[:, 1:]], 1)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(t.inv(y).numpy(), X, rtol=1e-5, atol=1e-6)
    ladj = t.log_abs_det_jacobian(x, y)  # the cat dim is a batch dim here: concatenated
    assert tuple(ladj.shape) == (2, 3)
    np.testing.assert_allclose(ladj.numpy(), np.concatenate(
        [X[:, :1], np.full((2, 2), math.log(3.0))], 1), rtol=1e-6)  # fmt: skip
    assert t.event_dim == 0 and t.length == 3 and t.bijective
    # rows of a vector transform: each row's Jacobian summed over its event, then concatenated
    v = D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1)] * 2, dim=0, lengths=[1, 1])
    ld = v.log_abs_det_jacobian(x, v(x))
    assert v.event_dim == 1
    np.testing.assert_allclose(ld.numpy(), X.sum(1), rtol=1e-6)
    # slices inside the event (dim -1 of an event_dim-1 transform) are added up
    w = D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1),
                        D.IndependentTransform(D.AffineTransform(0.0, 2.0), 1)], dim=-1,
                       lengths=[2, 1])  # fmt: skip
    np.testing.assert_allclose(w.log_abs_det_jacobian(x, w(x)).numpy(),
                               X[:, :2].sum(1) + math.log(2.0), rtol=1e-6)  # fmt: skip


def test_cat_and_stack_constraints_check_each_slice_and_biject_onto_them(conn):
    support = C.cat([C.positive, C.unit_interval, C.real], dim=-1, lengths=[1, 1, 1])
    bad = gt.tensor([[-1.0, 0.5, 0.0], [1.0, 1.5, 0.0]])
    np.testing.assert_array_equal(support.check(bad).numpy(), [[False, True, True],
                                                                [True, False, True]])  # fmt: skip
    assert support.event_dim == 0 and not support.is_discrete
    t = D.biject_to(support)
    assert isinstance(t, D.CatTransform)
    y = t(gt.tensor(X))
    want = np.stack([np.exp(X[:, 0]), _sigmoid(X[:, 1]), X[:, 2]], 1)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    assert bool(support.check(y).all())
    stack = C.stack([C.positive, C.unit_interval, C.real], dim=-1)
    assert stack.event_dim == 1  # PyTorch counts the stacked dim into the event for dim < 0
    np.testing.assert_array_equal(stack.check(bad).numpy(), [[False, True, True],
                                                              [True, False, True]])  # fmt: skip
    s = D.transform_to(stack)
    assert isinstance(s, D.StackTransform)
    np.testing.assert_allclose(s(gt.tensor(X)).numpy(), want, rtol=1e-6)


def test_stack_transform_stacks_per_index_results_and_log_jacobians(conn):
    t = D.StackTransform([D.ExpTransform(), D.SigmoidTransform(), D.identity_transform], dim=1)
    x = gt.tensor(X)
    y = t(x)
    np.testing.assert_allclose(t.inv(y).numpy(), X, rtol=1e-5, atol=1e-6)
    ladj = t.log_abs_det_jacobian(x, y)
    s = _sigmoid(X[:, 1])
    want = np.stack([X[:, 0], np.log(s * (1 - s)), np.zeros(2)], 1)
    np.testing.assert_allclose(ladj.numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        t(gt.tensor(X[:, :2]))


def test_cumulative_distribution_transform_is_the_cdf_with_log_prob_as_log_jacobian(conn):
    t = D.CumulativeDistributionTransform(D.Normal(0.0, 1.0))
    x = gt.tensor(X[0])
    u = t(x)
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in X[0]])
    np.testing.assert_allclose(u.numpy(), cdf, rtol=1e-5)
    np.testing.assert_allclose(t.inv(u).numpy(), X[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(t.log_abs_det_jacobian(x, u).numpy(),
                               -0.5 * X[0] ** 2 - 0.5 * math.log(2 * math.pi), rtol=1e-6)  # fmt: skip
    assert t.codomain is C.unit_interval and t.sign == 1 and t.bijective
    assert t.with_cache(1)(x) is not None
