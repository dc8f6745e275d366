"""Second and third derivatives through the activations GT composes (``where``, comparisons,
``clamp``), as PyTorch's own derivative formulas give them (probed against PyTorch 2.13 with
``/tmp/act_probe.py``): a piecewise-linear activation's gradient stays in the input's graph, so
differentiating it again gives zeros (that do not require grad) rather than "not used in the
graph"; ELU/CELU/SELU count ``x < 0`` only in their second derivative (``alpha`` in the first at
0); softplus's second derivative stops at the threshold itself; ``hardsigmoid``'s second derivative
raises as PyTorch's does. First-order gradients are bit for bit what they were. Expected values are
written out by hand or from the closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(180)

F = gt.nn.functional
E1 = math.exp(-1.0)


def _derivatives(fn, points, dtype="float64"):
    """The first derivative (create_graph) and the second (create_graph) of ``fn(x).sum()``."""
    x = gt.tensor(points, dtype=dtype, requires_grad=True)
    (d1,) = gt.autograd.grad(fn(x).sum(), x, create_graph=True)
    (d2,) = gt.autograd.grad(d1.sum(), x, create_graph=True)
    return x, d1, d2


# (activation, points with the kinks, its first derivative there: PyTorch's)
PIECEWISE_LINEAR = {
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [-2.0, 0.0, 3.0], [0.2, 0.2, 1.0]),
    "rrelu_eval": (lambda x: F.rrelu(x, training=False), [-2.0, 0.0, 3.0], [11 / 48, 11 / 48, 1]),
    "prelu": (
        lambda x: F.prelu(x, gt.tensor([0.25], dtype=x.dtype)),
        [-2.0, 0.0, 3.0],
        [0.25, 0.25, 1.0],
    ),
    "hardtanh": (F.hardtanh, [-2.0, -1.0, 0.0, 1.0, 2.0], [0.0, 0.0, 1.0, 0.0, 0.0]),
    "relu6": (F.relu6, [-1.0, 0.0, 3.0, 6.0, 7.0], [0.0, 0.0, 1.0, 0.0, 0.0]),
    "threshold": (lambda x: F.threshold(x, 0.5, -2.0), [0.0, 0.5, 1.0], [0.0, 0.0, 1.0]),
    "hardshrink": (F.hardshrink, [-1.0, -0.5, 0.0, 0.5, 1.0], [1.0, 0.0, 0.0, 0.0, 1.0]),
    "softshrink": (F.softshrink, [-1.0, -0.5, 0.0, 0.5, 1.0], [1.0, 0.0, 0.0, 0.0, 1.0]),
    "nn.LeakyReLU": (gt.nn.LeakyReLU(0.2), [-2.0, 0.0, 3.0], [0.2, 0.2, 1.0]),
    "nn.Hardtanh": (gt.nn.Hardtanh(-2.0, 2.0), [-3.0, -2.0, 0.0, 2.0], [0.0, 0.0, 1.0, 0.0]),
}


@pytest.mark.parametrize("name", list(PIECEWISE_LINEAR))
def test_second_derivative_of_a_piecewise_linear_activation_is_zeros(conn, name):
    fn, points, first = PIECEWISE_LINEAR[name]
    x, d1, d2 = _derivatives(fn, points)
    np.testing.assert_allclose(d1.detach().numpy(), first, rtol=1e-12)
    assert d1.requires_grad  # (before: not in x's graph, and the next grad raised)
    np.testing.assert_array_equal(d2.numpy(), np.zeros(len(points)))
    assert not d2.requires_grad  # as PyTorch's: a third derivative has nothing to differentiate
    with pytest.raises(RuntimeError, match="does not require grad"):
        gt.autograd.grad(d2.sum(), x)


def test_prelu_module_second_derivative_with_a_learned_weight(conn):
    # (the weight requires grad: the first derivative did, but x was "not used in the graph")
    m = gt.nn.PReLU(1, 0.25).to(gt.float64)
    x, d1, d2 = _derivatives(m, [-2.0, 0.0, 3.0])
    np.testing.assert_allclose(d1.detach().numpy(), [0.25, 0.25, 1.0], rtol=1e-12)
    np.testing.assert_array_equal(d2.detach().numpy(), [0.0, 0.0, 0.0])
    (dw,) = gt.autograd.grad(d1.sum(), m.weight)  # d/dw of dy/dx: 1 where x <= 0
    np.testing.assert_allclose(dw.numpy(), [2.0], rtol=1e-12)


def test_pinn_second_derivative_through_a_leaky_relu_and_hardtanh_net(conn):
    x = gt.tensor([[-1.0], [0.5], [2.0]], requires_grad=True)
    w1 = gt.tensor([[1.0, -0.5, 2.0]])
    w2 = gt.tensor([[0.3], [-0.2], [0.5]], requires_grad=True)
    u = F.hardtanh(F.leaky_relu(x @ w1, 0.1), -1.5, 1.5) @ w2
    (u_x,) = gt.autograd.grad(u, x, gt.ones_like(u), create_graph=True)
    # x=-1: h=[-0.1, 0.5, -0.2] all inside: 0.3*0.1 - 0.2*(-0.5) + 0.5*0.2 = 0.23
    # x=0.5: h=[0.5, -0.025, 1.0]: 0.3 - 0.2*(-0.05) + 0.5*2 = 1.31
    # x=2: h=[2 -> clamped, -0.1, 4 -> clamped]: -0.2*(-0.05) = 0.01
    np.testing.assert_allclose(u_x.detach().numpy().ravel(), [0.23, 1.31, 0.01], rtol=1e-5)
    (u_xx,) = gt.autograd.grad(u_x, x, gt.ones_like(u_x))
    np.testing.assert_array_equal(u_xx.numpy(), np.zeros((3, 1), np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elu_second_and_third_derivatives_count_only_negative_inputs(conn, dtype):
    # PyTorch: elu'(0) = alpha (x <= 0), but elu''(0) = 0 (elu_double_backward: x < 0)
    rtol = 1e-6 if dtype == "float32" else 1e-12
    x, d1, d2 = _derivatives(lambda t: F.elu(t, 1.5), [-1.0, 0.0, 1.0], dtype)
    np.testing.assert_allclose(d1.detach().numpy(), [1.5 * E1, 1.5, 1.0], rtol=rtol)
    np.testing.assert_allclose(d2.detach().numpy(), [1.5 * E1, 0.0, 0.0], rtol=rtol)
    assert d2.requires_grad
    (d3,) = gt.autograd.grad(d2.sum(), x)
    np.testing.assert_allclose(d3.numpy(), [1.5 * E1, 0.0, 0.0], rtol=rtol)


def test_celu_and_selu_second_derivative_at_zero(conn):
    a = 0.7
    inv = 1.0 / float(np.float32(a))  # (PyTorch's constant: 1 / alpha rounded to float32 first)
    _, d1, d2 = _derivatives(lambda t: F.celu(t, a), [-1.0, 0.0, 1.0])
    want = [math.exp(-inv) * inv * a, inv * a, 1.0]  # (torch 2.13: 0.23965103469267596, ...)
    np.testing.assert_allclose(d1.detach().numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(d2.detach().numpy(), [0.3423586268198698, 0.0, 0.0], rtol=1e-12)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    _, d1, d2 = _derivatives(F.selu, [-1.0, 0.0, 1.0])
    np.testing.assert_allclose(
        d1.detach().numpy(), [scale * alpha * E1, scale * alpha, scale], rtol=1e-12
    )
    np.testing.assert_allclose(d2.detach().numpy(), [scale * alpha * E1, 0.0, 0.0], rtol=1e-12)


def test_softplus_second_derivative_stops_at_the_threshold_itself(conn):
    # beta 2, threshold 5: the kink is x = 2.5, where the first derivative is still sigmoid(5)
    def sig(z):
        return 1.0 / (1.0 + math.exp(-z))

    _, d1, d2 = _derivatives(lambda t: F.softplus(t, 2.0, 5.0), [1.0, 2.5, 3.0])
    np.testing.assert_allclose(d1.detach().numpy(), [sig(2.0), sig(5.0), 1.0], rtol=1e-12)
    s = sig(2.0)
    np.testing.assert_allclose(d2.detach().numpy(), [2.0 * s * (1.0 - s), 0.0, 0.0], rtol=1e-12)


def test_hardsigmoid_second_derivative_raises_as_pytorch_and_hardswish_has_one(conn):
    x = gt.tensor([-4.0, 0.0, 4.0], dtype=gt.float64, requires_grad=True)
    (d1,) = gt.autograd.grad(F.hardsigmoid(x).sum(), x, create_graph=True)
    # (PyTorch's hardsigmoid_backward multiplies by 1.0f / 6.0f, a float32 constant)
    np.testing.assert_array_equal(d1.detach().numpy(), [0.0, float(np.float32(1 / 6)), 0.0])
    assert d1.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::hardsigmoid_backward is not"):
        gt.autograd.grad(d1.sum(), x)
    _, d1, d2 = _derivatives(F.hardswish, [-3.0, -2.0, 0.0, 3.0, 4.0])
    np.testing.assert_allclose(d1.detach().numpy(), [0.0, -1 / 6, 0.5, 1.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(d2.numpy(), [0.0, 1 / 3, 1 / 3, 0.0, 0.0], rtol=1e-12)
    assert not d2.requires_grad


FIRST_ORDER = {
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 2.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "elu": lambda x: F.elu(x, 1.5),
    "celu": lambda x: F.celu(x, 0.7),
    "selu": F.selu,
    "softplus": lambda x: F.softplus(x, 2.0, 5.0),
    "softshrink": F.softshrink,
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_first_derivative_is_the_same_bits_with_and_without_create_graph(conn, dtype):
    rng = np.random.default_rng(3)
    kinks = [-3.0, -2.0, -0.5, -0.0, 0.0, 0.5, 2.0, 2.5, 3.0]
    values = np.array(kinks + list(rng.standard_normal(23) * 3), dtype=dtype)
    w = rng.standard_normal(values.size).astype(dtype)
    w[3] = -0.0
    for name, fn in FIRST_ORDER.items():
        x = gt.tensor(values, requires_grad=True)
        (fn(x) * gt.tensor(w)).sum().backward()
        plain = x.grad.numpy()
        assert not x.grad.requires_grad and x.grad.grad_fn is None
        x2 = gt.tensor(values, requires_grad=True)
        (recorded,) = gt.autograd.grad((fn(x2) * gt.tensor(w)).sum(), x2, create_graph=True)
        assert plain.tobytes() == recorded.detach().numpy().tobytes(), name


def test_activation_nodes_carry_pytorchs_names(conn):
    x = gt.tensor([1.0, -1.0], requires_grad=True)
    assert F.threshold(x, 0.5, 0.0).grad_fn.name() == "ThresholdBackward0"
    assert F.hardshrink(x).grad_fn.name() == "HardshrinkBackward0"
    assert F.softshrink(x).grad_fn.name() == "SoftshrinkBackward0"
    assert F.rrelu(x).grad_fn.name() == "RreluWithNoiseBackward0"
