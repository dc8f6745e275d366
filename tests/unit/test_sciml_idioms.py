"""Derivatives of activations as physics-informed networks take them, which GT once got wrong (found
while writing the ``scientific_ml`` programs): the second derivative of a ReLU net w.r.t. its input
is zeros in PyTorch (relu's ``threshold_backward`` keeps the input in the graph with a zero
derivative; where the input is nan the gradient passes), and ``rrelu``'s slope applies at 0 as ``leaky_relu``'s does. Expected values are
PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_second_derivative_through_relu_is_zeros_not_unused(conn):
    x = gt.tensor([[-1.0], [0.5], [2.0]], requires_grad=True)
    w1 = gt.tensor([[1.0, -0.5, 2.0]])
    w2 = gt.tensor([[0.3], [-0.2], [0.5]], requires_grad=True)
    u = gt.relu(x @ w1) @ w2
    (u_x,) = gt.autograd.grad(u, x, gt.ones_like(u), create_graph=True)
    np.testing.assert_allclose(u_x.detach().numpy().ravel(), [0.1, 1.3, 1.3], rtol=1e-6)
    assert u_x.requires_grad
    (u_xx,) = gt.autograd.grad(u_x, x, gt.ones_like(u_x), create_graph=True)
    np.testing.assert_array_equal(u_xx.detach().numpy(), np.zeros((3, 1), np.float32))
    # alone: relu's gradient still depends on x (PyTorch: a zero-derivative path)
    y = gt.tensor([-1.0, 0.0, 3.0], requires_grad=True)
    (d,) = gt.autograd.grad(gt.relu(y).sum(), y, create_graph=True)
    assert d.requires_grad
    np.testing.assert_array_equal(d.detach().numpy(), [0.0, 0.0, 1.0])
    (dd,) = gt.autograd.grad(d.sum(), y)
    np.testing.assert_array_equal(dd.numpy(), [0.0, 0.0, 0.0])


def test_relu_first_order_gradient_and_in_place_relu_unchanged(conn):
    x = gt.tensor([-2.0, -0.0, 0.0, 1.5, float("nan")], requires_grad=True)
    gt.relu(x).backward(gt.tensor([1.0, 1.0, 1.0, -0.0, 1.0]))
    got = x.grad.numpy()
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0, -0.0, 1.0])  # (nan: PyTorch's 1)
    assert not np.signbit(got[:3]).any() and np.signbit(got[3])
    assert not x.grad.requires_grad
    z = gt.tensor([-1.0, 2.0], requires_grad=True)
    h = z * 3.0
    h.relu_()
    h.sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [0.0, 3.0])


@pytest.mark.parametrize("training", [False, True])
def test_rrelu_uses_the_slope_at_zero_like_leaky_relu(conn, training):
    x = gt.tensor([0.0, 1.0], requires_grad=True)
    gt.nn.functional.rrelu(x, 0.2, 0.2, training=training).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.2, 1.0], rtol=1e-6)
