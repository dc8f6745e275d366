"""Two autograd behaviours PyTorch 2.13 has that programs meet: a view taken under ``no_grad`` of
a tensor that requires grad requires grad too (``print(model.weight[0])`` in a ``no_grad`` block
says ``requires_grad=True``), yet no gradient reaches it or its base, and it may not change in
place once grad mode is back; and a graph node's own post-hook, ``grad_fn.register_hook(fn)``,
which sees (and may replace) the gradients the node hands its inputs."""

from __future__ import annotations

import pytest

import gt

pytestmark = pytest.mark.timeout(90)


def test_a_view_taken_under_no_grad_requires_grad_and_prints_so(conn):
    w = gt.nn.Parameter(gt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    with gt.no_grad():
        row, col = w[0], w.t()[1]
        doubled = w * 2
        data = w.detach()[0]
        assert repr(row) == "tensor([1., 2.], requires_grad=True)"
    assert row.requires_grad and row.is_leaf and row.grad_fn is None
    assert col.requires_grad and not doubled.requires_grad and not data.requires_grad


def test_no_gradient_reaches_a_view_taken_under_no_grad(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with gt.no_grad():
        v = x[:2]
    y = (v * 2).sum()
    assert y.requires_grad
    y.backward()
    assert x.grad is None and v.grad is None


def test_a_view_taken_under_no_grad_may_change_in_place_only_there(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with gt.no_grad():
        v = x[:2]
        v.mul_(2)  # (allowed: still inside no_grad, and x changes with it)
    assert x.tolist() == [2.0, 4.0, 3.0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        v.add_(1)
    assert x.tolist() == [2.0, 4.0, 3.0]


def test_a_nodes_post_hook_sees_and_may_replace_its_input_gradients(conn):
    x = gt.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    w = gt.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    c = gt.tensor([1.0, 1.0, 1.0])
    y = x * c
    z = y @ w
    seen = []

    def double(grad_inputs, grad_outputs):
        seen.append(([g.tolist() for g in grad_inputs], grad_outputs[0].tolist()))
        return tuple(g * 2 for g in grad_inputs)

    handle = z.grad_fn.register_hook(double)
    y.grad_fn.register_hook(
        lambda gi, go: seen.append([None if g is None else g.tolist() for g in gi])
    )
    z.sum().backward(retain_graph=True)
    assert seen[0] == ([[[3.0, 7.0, 11.0]], [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]], [[1.0, 1.0]])
    assert seen[1] == [[[6.0, 14.0, 22.0]], None]  # (c needs no gradient)
    assert x.grad.tolist() == [[6.0, 14.0, 22.0]] and w.grad.tolist()[0] == [2.0, 2.0]
    handle.remove()
    x.grad = None
    z.sum().backward()
    assert x.grad.tolist() == [[3.0, 7.0, 11.0]] and len(seen) == 3


def test_a_post_hook_on_a_product_of_a_transposed_operand(conn):
    a = gt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = gt.tensor([[1.0, 0.0], [2.0, 1.0]], requires_grad=True)
    out = a.t() @ b
    seen = []
    out.grad_fn.register_hook(lambda gi, go: seen.append([g.tolist() for g in gi]))
    out.sum().backward()
    assert seen == [[[[1.0, 3.0], [1.0, 3.0]], [[3.0, 3.0], [7.0, 7.0]]]]
    assert a.grad.tolist() == [[1.0, 1.0], [3.0, 3.0]]


def test_a_post_hook_returning_the_wrong_number_of_gradients_raises(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0], gi[0]))  # (x and 3: two)
    with pytest.raises(RuntimeError, match="incorrect number of values"):
        y.sum().backward()
