"""What a probe of autograd's hooks and custom Functions against PyTorch 2.13 found on Dec 6
(2,500 cases), as PyTorch behaves: a gradient a leaf's hook kept is not the ``.grad`` later passes
add to, nor is an earlier read of a retained gradient; ``autograd.grad(loss, x)`` runs no hook of
another leaf; a custom Function's backward gets zeros for its non-differentiable outputs; and
``@enable_grad`` decorates without parentheses."""

from __future__ import annotations

import pytest

import gt

pytestmark = pytest.mark.timeout(90)


def test_a_gradient_a_hook_kept_keeps_its_value(conn):
    p = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    logged = []
    p.register_hook(lambda g: logged.append(g))
    (p * 2).sum().backward()
    (p * 3).sum().backward()
    assert logged[0].tolist() == [2.0, 2.0, 2.0] and logged[1].tolist() == [3.0, 3.0, 3.0]
    assert p.grad.tolist() == [5.0, 5.0, 5.0] and logged[0] is not p.grad
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = x * 2
    z.retain_grad()
    loss = (z * z).sum()
    loss.backward(retain_graph=True)
    first = z.grad
    loss.backward()
    assert first.tolist() == [4.0, 8.0, 12.0] and z.grad.tolist() == [8.0, 16.0, 24.0]


def test_grad_of_one_input_runs_no_hook_of_another_leaf(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = gt.tensor([4.0, 5.0, 6.0], requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append("w"))
    x.register_hook(lambda g: calls.append("x"))
    (gx,) = gt.autograd.grad((x * w).sum(), x)
    (x * w).sum().backward(inputs=[x])
    assert calls == ["x", "x"] and gx.tolist() == [4.0, 5.0, 6.0] and w.grad is None


def test_a_custom_backward_gets_zeros_for_non_differentiable_outputs(conn):
    seen = []

    class ArgmaxAndDouble(gt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            idx = a.argmax()
            ctx.mark_non_differentiable(idx)
            return a * 2, idx

        @staticmethod
        def backward(ctx, g_out, g_idx):
            seen.append(g_idx)
            return g_out * 2

    x = gt.tensor([1.0, 3.0, 2.0], requires_grad=True)
    out, idx = ArgmaxAndDouble.apply(x)
    out.sum().backward()
    assert seen[0] is not None and seen[0].item() == 0 and seen[0].dtype == gt.int64
    assert x.grad.tolist() == [2.0, 2.0, 2.0] and idx.item() == 1


def test_enable_grad_decorates_without_parentheses(conn):
    @gt.enable_grad
    def doubled_requires_grad(a):
        return (a * 2).requires_grad

    x = gt.ones(2, requires_grad=True)
    with gt.no_grad():
        assert doubled_requires_grad(x)
        assert not (x * 2).requires_grad


def test_a_parameters_accumulate_grad_node_is_reached_and_hooked_as_megatron_does(conn):
    p = gt.nn.Parameter(gt.tensor([1.0, 2.0]))
    tmp = p.expand_as(p)  # a new view, not p itself
    assert tmp is not p and not tmp.is_leaf and type(tmp.grad_fn).__name__ == "ExpandBackward0"
    acc = tmp.grad_fn.next_functions[0][0]
    calls = []
    post = acc.register_hook(lambda *unused: calls.append(p.grad.tolist()))
    pre = acc.register_prehook(lambda grads: calls.append(("pre", grads[0].tolist())))
    (p * 3).sum().backward()
    assert calls == [("pre", [3.0, 3.0]), [3.0, 3.0]]
    post.remove()
    pre.remove()
    (p * 3).sum().backward()
    assert len(calls) == 2 and p.grad.tolist() == [6.0, 6.0]


def test_a_product_with_a_constant_keeps_only_what_its_derivative_reads(conn):
    import weakref

    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = gt.ones(2, 3)
    for f, want in [
        (lambda h: h * 2.0, [2.0] * 3),
        (lambda h: w @ h, [2.0] * 3),
        (lambda h: gt.nn.functional.linear(h, w), [2.0] * 3),
        (lambda h: h / 4.0, [0.25] * 3),
    ]:
        x.grad = None
        h = x * 1
        y = f(h)
        h.add_(1)  # what the derivative does not read may change, as in PyTorch
        y.sum().backward()
        assert x.grad.tolist() == want
    h = x * 1
    y = h * h  # each factor's derivative reads the other: both kept, and checked
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    h = x * 1
    kept = weakref.ref(h)
    y = h * 0.5
    del h
    assert kept() is None  # not held by the product's node
    y.sum().backward()


def test_a_graph_that_keeps_no_tensor_runs_backward_again(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for f, once in [
        (lambda: (x + 1).sum(), [1.0] * 3),
        (lambda: x.view(3, 1).sum(), [1.0] * 3),
        (lambda: x.mean(), [1 / 3] * 3),
        (lambda: gt.cat([x, x[1:]]).sum(), [1.0, 2.0, 2.0]),
    ]:
        x.grad = None
        loss = f()
        loss.backward()
        loss.backward()  # PyTorch too: nothing was freed
        assert x.grad.tolist() == pytest.approx([2 * v for v in once])
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="a second time"):
        loss.backward()


def test_zero_grad_in_place_cuts_a_gradient_from_its_graph(conn):
    p = gt.nn.Parameter(gt.tensor([1.0, 2.0]))
    (p * p).sum().backward(create_graph=True)
    assert p.grad.requires_grad
    gt.optim.SGD([p], lr=0.1).zero_grad(set_to_none=False)
    assert not p.grad.requires_grad and p.grad.grad_fn is None and p.grad.tolist() == [0.0, 0.0]


def test_saved_tensors_hooks_see_what_a_custom_function_saves(conn):
    calls = []

    class Square(gt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    x = gt.tensor([1.0, 2.0], requires_grad=True)
    pack = lambda t: calls.append("pack") or t * 1  # noqa: E731
    unpack = lambda t: calls.append("unpack") or t  # noqa: E731
    with gt.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = Square.apply(x)
    y.sum().backward()
    assert calls == ["pack", "unpack"] and x.grad.tolist() == [2.0, 4.0]


def test_a_leaf_frozen_after_the_forward_gets_no_gradient(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = gt.ones(3, requires_grad=True)
    loss = (x * x * w).sum()
    x.requires_grad_(False)
    loss.backward()
    assert x.grad is None and w.grad.tolist() == [1.0, 4.0, 9.0]


def test_a_write_through_a_view_of_the_same_shape_keeps_the_base_in_the_graph(conn):
    b = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    t = b * 1
    t.view(-1)[0] = t.view(-1)[-1] * 3  # (the view has the base's shape: a 1-d base)
    assert t.requires_grad and t.grad_fn is not None
    t.sum().backward()
    assert b.grad.tolist() == [0.0, 1.0, 4.0]
    c = gt.tensor([[1.23, 1.71, -1.79], [0.76, 1.99, -0.31]])
    b = gt.tensor([1.96, 0.37, 0.43], requires_grad=True)
    t = c @ b
    t.view(2).mul_(3)
    (t.sum() + b.sum()).backward()
    assert b.grad.tolist() == pytest.approx((3 * c.sum(0) + 1).tolist())


def test_a_computed_tensor_overwritten_by_a_constant_stays_in_the_graph(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for fill, node in [
        (lambda y: y.zero_(), "ZeroBackward0"),
        (lambda y: y.fill_(1.5), "FillBackward2"),
        (lambda y: y.copy_(gt.ones(3)), "CopyBackwards"),
        (lambda y: y.normal_(), "NormalBackward0"),
    ]:
        x.grad = None
        y = x * 2
        fill(y)
        assert y.requires_grad and type(y.grad_fn).__name__ == node
        y.sum().backward()  # (it raised: nothing in the loss required grad)
        assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_retain_grad_follows_the_tensor_through_an_inplace_op(conn):
    a = gt.tensor([-1.0, 2.0, 3.0], requires_grad=True)
    t = a / 4
    t.retain_grad()
    t.mul_(2)  # (before the ReLU: a change after it would change what its derivative reads)
    gt.nn.functional.relu(t, inplace=True)  # (a ResNet's ReLU(inplace=True) after a probe)
    (t * 3).sum().backward()
    assert t.grad.tolist() == [3.0, 3.0, 3.0] and a.grad.tolist() == [0.0, 1.5, 1.5]


def test_a_transposed_operand_of_a_product_gets_its_hooks_and_its_own_gradient(conn):
    c = gt.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]])
    b = gt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    t = b.T
    t.register_hook(lambda g: g * 0)
    (t @ c).sum().backward()
    assert b.grad.tolist() == [[0.0] * 3] * 2
    b = gt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    t = b.T
    assert gt.autograd.grad((t @ t.T).sum(), [t])[0].tolist() == [[12.0, 30.0]] * 3
    t = b.T
    t.retain_grad()
    (t @ c).sum().backward()
    assert t.grad.tolist() == [[3.0, 2.0]] * 3


def test_an_input_named_twice_counts_once_and_no_outputs_give_no_gradients(conn):
    a = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (a * 2).sum().backward(inputs=[a, a])
    assert a.grad.tolist() == [2.0, 2.0, 2.0]
    assert gt.autograd.grad([], [a], allow_unused=True) == (None,)
    gt.autograd.backward([], grad_tensors=[])
    with pytest.raises(RuntimeError, match="index 0 appears to not have been used"):
        gt.autograd.grad([], [a])


def test_padding_by_nothing_is_a_new_tensor(conn):
    x = gt.tensor([[1.0, 2.0, 3.0]])
    gt.nn.functional.pad(x, (0, 0)).mul_(10)
    assert x.tolist() == [[1.0, 2.0, 3.0]]


def test_a_random_fill_keeps_the_tensor_in_the_graph_under_pytorchs_name(conn):
    x = gt.tensor([0.4, 0.6], requires_grad=True)
    for fill, node in [
        (lambda y: y.exponential_(), "ExponentialBackward0"),
        (lambda y: y.cauchy_(), "CauchyBackward0"),
        (lambda y: y.bernoulli_(0.5), "BernoulliBackward2"),
    ]:
        y = x * 1
        fill(y)
        assert y.requires_grad and type(y.grad_fn).__name__ == node
