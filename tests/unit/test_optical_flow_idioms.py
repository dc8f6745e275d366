"""Idioms of optical-flow and stereo code that GT once lacked: the original PWC-Net / FlowNet2
warps wrap tensors in ``torch.autograd.Variable``, and older flow code upsamples with the
deprecated ``F.upsample_bilinear`` / ``F.upsample_nearest``."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn.functional as F


def test_variable_is_a_new_leaf_sharing_the_tensors_data(conn):
    from gt.autograd import Variable

    x = gt.tensor([1.0, 2.0])
    v = Variable(x)
    assert v is not x and not v.requires_grad and v.is_leaf
    assert isinstance(x, Variable) and isinstance(v, gt.Tensor)
    x.add_(1.0)  # shares x's data, as PyTorch's does
    np.testing.assert_array_equal(v.numpy(), [2.0, 3.0])

    w = gt.tensor([1.0, 2.0], requires_grad=True) * 2
    d = gt.autograd.Variable(w)
    assert d.grad_fn is None and d.is_leaf and not d.requires_grad

    leaf = Variable(gt.ones(2), requires_grad=True)
    (leaf * 3).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [3.0, 3.0])

    with pytest.raises(TypeError, match="has to be a tensor"):
        Variable(3)


def test_variable_grid_plus_flow_keeps_the_flow_differentiable(conn):
    flow = gt.tensor(np.full((1, 2, 2, 2), 0.25, np.float32), requires_grad=True)
    vgrid = gt.autograd.Variable(gt.zeros(1, 2, 2, 2)) + flow
    vgrid.sum().backward()
    np.testing.assert_array_equal(flow.grad.numpy(), np.ones((1, 2, 2, 2), np.float32))


def test_deprecated_upsample_bilinear_and_nearest(conn):
    x = gt.tensor(np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3))
    got = F.upsample_bilinear(x, scale_factor=2)
    want = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_allclose(got.numpy()[0, 0, 0], [0.0, 0.4, 0.8, 1.2, 1.6, 2.0], rtol=1e-6)
    near = F.upsample_nearest(x, size=(4, 6))
    np.testing.assert_array_equal(
        near.numpy()[0, 0], np.repeat(np.repeat(x.numpy()[0, 0], 2, 0), 2, 1)
    )
