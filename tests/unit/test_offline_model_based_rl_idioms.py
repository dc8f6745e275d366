"""What offline and model-based RL code needs from GT that it once lacked (found while writing the
``rl_offline_model_based`` programs): ``torch.distributions.OneHotCategoricalStraightThrough``,
the discrete latents of DreamerV2/V3 (pydreamer builds its posteriors from it)."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_one_hot_straight_through_rsample_is_one_hot_with_the_probabilities_gradient(conn):
    from gt.distributions.one_hot_categorical import OneHotCategoricalStraightThrough as OHST

    assert gt.distributions.OneHotCategoricalStraightThrough is OHST
    assert issubclass(OHST, gt.distributions.OneHotCategorical)
    assert OHST.has_rsample and not gt.distributions.OneHotCategorical.has_rsample
    logits_np = np.array([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]], dtype=np.float32)
    w_np = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], dtype=np.float32)
    logits = gt.tensor(logits_np, requires_grad=True)
    d = OHST(logits=logits)
    gt.manual_seed(0)
    z = d.rsample()
    zn = z.detach().numpy()
    assert zn.shape == (2, 3)
    np.testing.assert_allclose(np.sort(zn, -1), [[0, 0, 1], [0, 0, 1]], atol=1e-6)
    (z * gt.tensor(w_np)).sum().backward()
    p = _softmax(logits_np.astype(np.float64))
    want = p * (w_np - (p * w_np).sum(-1, keepdims=True))  # d/dlogits of sum(probs * w)
    np.testing.assert_allclose(logits.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    assert "OneHotCategoricalStraightThrough" in repr(d)


def test_one_hot_straight_through_kl_balancing_under_independent(conn):
    D = gt.distributions
    post_np = np.log(_softmax(np.array([[[0.3, 1.0, -0.5], [2.0, 0.0, 0.1]]]))).astype(np.float32)
    prior_np = np.log(_softmax(np.array([[[0.0, 0.2, 0.4], [-1.0, 0.5, 0.0]]]))).astype(np.float32)
    post = gt.tensor(post_np, requires_grad=True)
    prior = gt.tensor(prior_np, requires_grad=True)

    def dist(logits):
        return D.Independent(D.OneHotCategoricalStraightThrough(logits=logits), 1)

    kl_lhs = D.kl_divergence(dist(post.detach()), dist(prior))
    kl_rhs = D.kl_divergence(dist(post), dist(prior.detach()))
    (0.8 * kl_lhs.sum() + 0.2 * kl_rhs.sum()).backward()
    p, q = np.exp(post_np.astype(np.float64)), np.exp(prior_np.astype(np.float64))
    want = (p * (np.log(p) - np.log(q))).sum(-1).sum(-1)
    np.testing.assert_allclose(kl_lhs.detach().numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(kl_rhs.detach().numpy(), want, rtol=1e-5)
    assert post.grad is not None and prior.grad is not None
    np.testing.assert_allclose(prior.grad.numpy(), 0.8 * (q - p), rtol=1e-4, atol=1e-6)
    one_hot = np.eye(3, dtype=np.float32)[[[1, 0]]]
    np.testing.assert_allclose(dist(post).log_prob(gt.tensor(one_hot)).detach().numpy(),
                               [np.log(p[0, 0, 1]) + np.log(p[0, 1, 0])], rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(dist(post).mode.numpy(), [[[0, 1, 0], [1, 0, 0]]])
