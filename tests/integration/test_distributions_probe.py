"""What a probe of ``torch.distributions`` against PyTorch 2.13 found on Dec 6 (17,903 cases), as
PyTorch behaves: the gradient of a leaf added to itself several times (a fault of the backward
pass, met through ``Gamma.entropy()``), the five constraints that were missing, the mode of a flat
Beta or Dirichlet (NaN), and ``Wishart.expand``."""

from __future__ import annotations

import math

import pytest

import gt

pytestmark = pytest.mark.timeout(90)
D = gt.distributions


def test_a_leaf_added_to_itself_gets_each_contribution_once(conn):
    for shape in ((3,), (1,)):
        a = gt.full(shape, 0.5, requires_grad=True)
        ((a + a + a) * 1.0).sum().backward()
        assert a.grad.tolist() == [3.0] * shape[0]
        a.grad = None
        (a + a + a + a).sum().backward()
        assert a.grad.tolist() == [4.0] * shape[0]
    c = gt.tensor([0.5, 1.0, 2.0], requires_grad=True)
    (-D.Gamma(c, gt.tensor(1.0)).entropy()).sum().backward()
    # d/dc of -(c - log 1 + lgamma(c) + (1 - c) digamma(c)) = -1 - (1 - c) polygamma(1, c)
    want = [-1 - (1 - v) * _trigamma(v) for v in (0.5, 1.0, 2.0)]
    assert c.grad.tolist() == pytest.approx(want, rel=1e-4)


def _trigamma(x: float) -> float:
    return sum(1.0 / (x + k) ** 2 for k in range(200000)) + 1.0 / (x + 200000)


def test_the_constraints_that_were_missing(conn):
    C = D.constraints
    assert C.positive_integer.check(gt.tensor([0.0, 3.0])).tolist() == [False, True]
    assert C.square.check(gt.ones(2, 2, 3)).tolist() == [False, False]
    assert C.symmetric.check(gt.tensor([[1.0, 2.0], [2.0, 1.0]])).item()
    assert not C.symmetric.check(gt.tensor([[1.0, 2.0], [0.0, 1.0]])).item()
    assert C.lower_triangular.check(gt.tensor([[1.0, 0.0], [2.0, 1.0]])).item()
    assert C.multinomial(3).check(gt.tensor([[1.0, 2.0], [2.0, 2.0]])).tolist() == [True, False]
    with pytest.raises(NotImplementedError):
        D.biject_to(C.symmetric)


def test_a_flat_beta_or_dirichlet_has_no_single_mode(conn):
    assert math.isnan(D.Beta(gt.tensor(1.0), gt.tensor(1.0)).mode.item())
    assert all(math.isnan(v) for v in D.Dirichlet(gt.ones(3)).mode.tolist())
    assert D.Dirichlet(gt.tensor([2.0, 3.0, 1.0])).mode.tolist() == pytest.approx([1 / 3, 2 / 3, 0])


def test_wishart_expands_its_batch(conn):
    w = D.Wishart(gt.tensor(4.0), covariance_matrix=gt.eye(2)).expand((3,))
    assert w.batch_shape == (3,) and w.event_shape == (2, 2)
    lp = w.log_prob(gt.eye(2).expand(3, 2, 2))
    assert lp.shape == (3,) and lp.tolist() == pytest.approx([-4.2241716] * 3)
    assert w.rsample().shape == (3, 2, 2) and w.mean.shape == (3, 2, 2)


def test_gamma_answers_a_float64_value_in_its_own_dtype(conn):
    d = gt.distributions.Gamma(gt.ones(3), gt.ones(3))
    v = gt.tensor([0.5, 1.0, 2.0], dtype=gt.float64)
    assert d.log_prob(v).dtype == gt.float32  # (PyTorch's casts the value; Normal's does not)
    assert gt.distributions.Chi2(gt.ones(3)).log_prob(v).dtype == gt.float32
    assert gt.distributions.Normal(gt.zeros(3), 1.0).log_prob(v).dtype == gt.float64
    assert abs(d.log_prob(v)[0].item() - (-0.5)) < 1e-6
