"""What architecture-search and memory-network code needs from GT that it once lacked (found while
writing the ``memory_routing_nets`` programs): ``torch.legacy_contiguous_format``, which
``F.gumbel_softmax(hard=True)``'s straight-through code (copied into GDAS/SNAS search code) passes
to ``zeros_like``."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_legacy_contiguous_format_is_the_contiguous_format():
    assert gt.legacy_contiguous_format is gt.contiguous_format
    assert "legacy_contiguous_format" in gt.__all__


def test_straight_through_hard_softmax_with_legacy_contiguous_zeros_like(conn):
    logits_np = np.array([[0.2, 1.0, -0.5], [0.3, -0.1, 0.0]], dtype=np.float32)
    logits = gt.tensor(logits_np, requires_grad=True)
    y_soft = (logits / 0.5).softmax(-1)
    index = y_soft.max(-1, keepdim=True)[1]
    y_hard = gt.zeros_like(logits, memory_format=gt.legacy_contiguous_format)
    y_hard = y_hard.scatter_(-1, index, 1.0)
    ret = y_hard - y_soft.detach() + y_soft
    np.testing.assert_array_equal(ret.detach().numpy(), [[0, 1, 0], [1, 0, 0]])
    ret.mul(gt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    # d/dlogits of sum(c * softmax(logits / tau)) = p * (c - p.c) / tau
    p = np.exp(logits_np / 0.5)
    p /= p.sum(-1, keepdims=True)
    c = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    want = p * (c - (p * c).sum(-1, keepdims=True)) / 0.5
    np.testing.assert_allclose(logits.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    permuted = gt.zeros(2, 3, 4).permute(0, 2, 1)
    assert permuted.contiguous(memory_format=gt.legacy_contiguous_format).is_contiguous()


def test_deprecated_number_first_add_and_sub_overloads(conn):
    # DARTS' architect: ``p.data.add_(R, v)`` with a 0-d tensor R, ``theta.sub(eta, moment + d)``
    x, v = gt.ones(3), gt.arange(3.0)
    R = gt.tensor(0.5)
    with pytest.warns(UserWarning, match="deprecated"):
        got = x.clone().add_(R, v)
    np.testing.assert_allclose(got.numpy(), [1.0, 1.5, 2.0])
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(x.clone().sub_(2 * R, v).numpy(), [1.0, 0.0, -1.0])
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(x.sub(0.25, v).numpy(), [1.0, 0.75, 0.5])
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(gt.add(x, -2, v).numpy(), [1.0, -1.0, -3.0])
    np.testing.assert_allclose(x.add(v, alpha=2).numpy(), [1.0, 3.0, 5.0])  # the usual form
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning):
        y = w.mul(1.0).add(0.5, gt.tensor([0.5, -1.0]) * w)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1.25, 0.5])


def test_deprecated_value_first_addcmul_and_addcdiv_overloads(conn):
    # older Adam/RAdam code: ``exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)`` and
    # ``p.data.addcdiv_(-step_size, exp_avg, denom)``
    g = gt.tensor([0.5, -2.0, 3.0])
    with pytest.warns(UserWarning, match="deprecated"):
        sq = gt.zeros(3).mul_(0.999).addcmul_(1 - 0.999, g, g)
    np.testing.assert_allclose(sq.numpy(), 0.001 * np.array([0.25, 4.0, 9.0]), rtol=1e-6)
    p = gt.ones(3)
    with pytest.warns(UserWarning):
        p.addcdiv_(-0.1, g, sq.sqrt().add_(1e-8))
    want = 1.0 - 0.1 * np.array([0.5, -2.0, 3.0]) / (
        np.sqrt(0.001) * np.abs([0.5, -2.0, 3.0]) + 1e-8
    )
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-5)
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(gt.addcmul(gt.ones(3), gt.tensor(2.0), g, g).numpy(),
                                   [1.5, 9.0, 19.0])  # fmt: skip
    np.testing.assert_allclose(gt.ones(3).addcmul(g, g, value=2).numpy(), [1.5, 9.0, 19.0])
