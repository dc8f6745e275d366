"""``ctx.mark_dirty`` in ``gt.autograd.Function``: an input changed in place by ``forward`` and
returned as it is keeps its object, holds the new value and takes the function's node as its
history; the version checks and errors are PyTorch's. Expected gradients come from the chain rule
by hand."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


class Double(gt.autograd.Function):
    """``x *= 2`` in place."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_the_dirty_input_is_returned_itself_with_its_history_through_the_function(conn):
    a = gt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    b = a * 1  # a non-leaf
    before = b._version
    out = Double.apply(b)
    assert out is b and b._version > before
    assert b.tolist() == [2.0, -4.0, 6.0]
    assert b.requires_grad and b.grad_fn.op == "Double"
    (b * b).sum().backward()  # sum((2a)^2): d/da = 8a
    assert a.grad.tolist() == [8.0, -16.0, 24.0]


def test_marking_before_the_change_is_the_same(conn):
    class AddOne(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            x.add_(1.0)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = gt.tensor([1.0, 2.0], requires_grad=True)
    b = a.clone()
    assert AddOne.apply(b) is b
    (b * 3).sum().backward()
    assert b.tolist() == [2.0, 3.0] and a.grad.tolist() == [3.0, 3.0]


def test_without_recording_the_value_changes_and_nothing_is_attached(conn):
    x = gt.tensor([1.0, 5.0])
    v = x._version
    assert Double.apply(x) is x
    assert x.tolist() == [2.0, 10.0] and x.grad_fn is None and x._version > v
    w = gt.tensor([1.0], requires_grad=True)
    with gt.no_grad():  # a leaf that requires grad may be changed without recording
        assert Double.apply(w) is w
    assert w.tolist() == [2.0] and w.is_leaf


def test_an_op_that_saved_the_old_value_refuses_to_backward(conn):
    a = gt.tensor([1.5], requires_grad=True).clone()
    b = a * a  # saves a
    Double.apply(a)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.backward()


def test_a_change_made_without_an_op_still_moves_the_version(conn):
    class ThroughData(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.data.add_(1.0)  # .data changes the value without telling autograd
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = gt.tensor([2.0], requires_grad=True).clone()
    b = a * a
    ThroughData.apply(a)
    assert a.tolist() == [3.0]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.backward()


def test_an_input_without_grad_changed_by_one_with_grad_joins_the_graph(conn):
    class AddInto(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            x.add_(w)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)  # the new value
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g, g * x  # (a made-up derivative for w, to see the saved value)

    x = gt.tensor([1.0, 2.0])
    w = gt.tensor([10.0, 20.0], requires_grad=True)
    out = AddInto.apply(x, w)
    assert out is x and x.requires_grad and not x.is_leaf
    x.sum().backward()
    assert x.tolist() == [11.0, 22.0] and w.grad.tolist() == [11.0, 22.0]


def test_a_dirty_input_among_several_outputs(conn):
    class DoubleAndTriple(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x * 3

        @staticmethod
        def backward(ctx, g_x, g_3x):
            return g_x * 2 + g_3x * 6

    a = gt.tensor([1.0, 4.0], requires_grad=True)
    b = a * 1
    first, second = DoubleAndTriple.apply(b)
    assert first is b and second.tolist() == [6.0, 24.0]
    (first.sum() + second.sum()).backward()  # 2a + 6a
    np.testing.assert_allclose(a.grad.numpy(), [8.0, 8.0])


def test_mark_dirty_refuses_what_pytorch_refuses(conn):
    class NotReturned(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="marked as dirty during the forward method were not"):
        NotReturned.apply(gt.tensor([1.0], requires_grad=True).clone())

    class MarksANumber(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(3)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="mark_dirty can only accept variables"):
        MarksANumber.apply(gt.tensor([1.0]))

    leaf = gt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        Double.apply(leaf)

    class MarksAnOutput(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.mark_dirty(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.warns(UserWarning, match="Only input Tensors should be given to ctx.mark_dirty"):
        y = MarksAnOutput.apply(gt.tensor([1.0], requires_grad=True))
    y.sum().backward()  # still an ordinary output
