"""What learning-to-rank and optimal-transport code needs from GT that it once lacked (found while
writing the ``ranking_transport`` programs): ``type(y.grad_fn).__name__`` is PyTorch's node name
(OT libraries' implicit-gradient ``Function``s are checked and printed by it), and a
``Function``'s node is named ``<Class>Backward`` as in PyTorch, not ``<Class>Backward0``."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


class OTCost(gt.autograd.Function):
    """The entropic OT cost with Danskin's gradient: ``grad * plan`` for the cost matrix."""

    @staticmethod
    def forward(ctx, C):
        with gt.no_grad():
            P = gt.softmax(-C / 0.5, dim=1) / C.shape[0]
        ctx.save_for_backward(P)
        return (P * C).sum()

    @staticmethod
    def backward(ctx, g):
        (P,) = ctx.saved_tensors
        return g * P


class TwoOutputs(gt.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


def test_grad_fn_class_is_named_as_pytorchs_node(conn):
    x = gt.tensor(np.array([1.0, -2.0, 0.5], dtype=np.float32), requires_grad=True)
    y = x * 2
    s = y.sum()
    assert type(y.grad_fn).__name__ == "MulBackward0"
    assert type(s.grad_fn).__name__ == "SumBackward0"
    assert type(gt.nn.functional.linear(x, gt.ones(2, 3)).grad_fn).__name__ == "SqueezeBackward4"
    assert type(x.median().grad_fn).__name__ == "MedianBackward0"  # (a GT-internal Function)
    # the same node each time, still a gt.autograd.Node, and backward through it still works
    assert y.grad_fn is y.grad_fn
    assert isinstance(y.grad_fn, gt.autograd.Node)
    assert x.grad_fn is None
    (s * y.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 4 * float(s)), rtol=1e-6)


def test_custom_function_node_is_named_class_backward(conn):
    x = gt.tensor(np.array([[0.2, 1.0], [0.7, 0.1]], dtype=np.float64), requires_grad=True)
    cost = OTCost.apply(x * 1.0)
    assert type(cost.grad_fn).__name__ == "OTCostBackward"
    assert cost.grad_fn.name() == "OTCostBackward"
    a, b = TwoOutputs.apply(x)
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__ == "TwoOutputsBackward"
    cost.backward()
    P = np.exp(-x.detach().numpy() / 0.5)
    P = P / P.sum(1, keepdims=True) / 2
    np.testing.assert_allclose(x.grad.numpy(), P, rtol=1e-12)
