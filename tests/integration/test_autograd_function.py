"""``gt.autograd.Function``: what the context gives ``backward``, how outputs join the graph, and
the errors PyTorch gives. Whole programs against PyTorch are in
``tests/api/programs/custom_functions.py``."""

from __future__ import annotations

import pytest

import gt


class Scale(gt.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


def test_backward_gets_the_context_and_its_result_reaches_the_leaf(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, 3.0)
    assert y.requires_grad and y.grad_fn.name() == "ScaleBackward"
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_nothing_is_recorded_without_an_input_that_wants_a_gradient(conn):
    x = gt.tensor([1.0, 2.0])
    assert Scale.apply(x, 2.0).grad_fn is None
    w = gt.tensor([1.0], requires_grad=True)
    with gt.no_grad():
        assert not Scale.apply(w, 2.0).requires_grad


def test_forward_records_nothing_and_needs_input_grad_says_who_wants_one(conn):
    seen = {}

    class Probe(gt.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen["needs"] = ctx.needs_input_grad
            out = a * b
            seen["inner_rg"] = out.requires_grad  # forward runs without recording
            return out

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    a = gt.tensor([1.0], requires_grad=True)
    Probe.apply(a, gt.tensor([2.0]), 5)
    assert seen == {"needs": (True, False, False), "inner_rg": False}


def test_an_input_handed_back_is_not_changed(conn):
    class Identity(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = gt.tensor([1.0, 4.0], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and not y.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_missing_output_gradients_are_zeros_unless_materialize_is_off(conn):
    got = []

    class Two(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            got.append(None if g2 is None else g2.tolist())
            return g1 + (0 if g2 is None else g2 * 2), None

    x = gt.tensor([1.0, 1.0], requires_grad=True)
    a, _ = Two.apply(x, True)
    a.sum().backward()
    a, _ = Two.apply(x, False)
    a.sum().backward()
    assert got == [[0.0, 0.0], None]
    assert x.grad.tolist() == [2.0, 2.0]


def test_a_gradient_for_the_broadcast_shape_is_summed_back(conn):
    class AddRow(gt.autograd.Function):
        @staticmethod
        def forward(ctx, m, row):
            return m + row

        @staticmethod
        def backward(ctx, g):
            return g, g  # the row's gradient in the output's shape, as PyTorch accepts

    m = gt.zeros(3, 2, requires_grad=True)
    row = gt.zeros(2, requires_grad=True)
    AddRow.apply(m, row).sum().backward()
    assert row.grad.tolist() == [3.0, 3.0]


def test_once_differentiable_backward_is_not_recorded(conn):
    class Square(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @gt.autograd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = gt.tensor([3.0], requires_grad=True)
    (g,) = gt.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [6.0] and not g.requires_grad


def test_custom_functions_refuse_what_pytorch_refuses(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)

    class TooMany(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match="incorrect number of gradients \\(expected 1, got 2\\)"):
        TooMany.apply(x).sum().backward()

    class BadShape(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g.sum()[None].expand(3)

    with pytest.raises(RuntimeError, match="invalid gradient at index 0 - got \\[3\\]"):
        BadShape.apply(x).sum().backward()

    class Dirty(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        Dirty.apply(x)

    class SavesNumber(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(3)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        SavesNumber.apply(x)
    with pytest.raises(RuntimeError, match="Legacy autograd function"):
        Scale()(x)
    with pytest.raises(NotImplementedError, match="implement the forward"):
        gt.autograd.Function.apply(x)


def test_hooks_and_retain_grad_work_on_custom_outputs(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, 2.0)
    y.retain_grad()
    y.register_hook(lambda g: g * 10)
    (y * 1).sum().backward()
    assert y.grad.tolist() == [10.0, 10.0] and x.grad.tolist() == [20.0, 20.0]


def test_the_function_module_imports_as_torchs_does():
    from gt.autograd.function import FunctionCtx, once_differentiable  # noqa: PLC0415

    assert once_differentiable is gt.autograd.once_differentiable
    assert FunctionCtx is gt.autograd.FunctionCtx
