"""``gt.autograd.grad`` and ``gt.autograd.backward`` (errors, what they leave untouched, pruning),
tensor hooks and module forward hooks. Agreement with PyTorch on whole programs is in
``tests/api/programs/gradients.py``."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn as nn


def test_grad_returns_gradients_and_leaves_dot_grad_alone(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = gt.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * w).sum()
    gx, gw = gt.autograd.grad(y, [x, w])
    assert gx.tolist() == [0.5, -1.0, 2.0] and gw.tolist() == [1.0, 2.0, 3.0]
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad  # no create_graph: plain values


def test_grad_refuses_what_pytorch_refuses(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    c = gt.tensor([1.0, 2.0])
    other = gt.tensor([3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        gt.autograd.grad((x * 2).sum(), c)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        gt.autograd.grad((x * 2).sum(), [x, other])
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        gt.autograd.grad(c.sum(), x)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        gt.autograd.grad(x * 2, x)
    y = (x * x).sum()
    gt.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        gt.autograd.grad(y, x)  # the first call freed the graph (retain_graph defaults to False)
    with pytest.raises(RuntimeError, match="is_grads_batched=True needs grad_outputs"):
        gt.autograd.grad((x * 2).sum(), x, is_grads_batched=True)


def test_grad_runs_only_the_part_of_the_graph_it_needs(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    w = gt.tensor([3.0, 4.0], requires_grad=True)
    calls = []
    h = x * 2
    side = (w * w).exp()  # leads to w only
    side.register_hook(lambda g: calls.append("side"))
    h.register_hook(lambda g: calls.append("h"))
    y = h.sum() + side.sum()
    (gx,) = gt.autograd.grad(y, x, retain_graph=True)
    assert gx.tolist() == [2.0, 2.0]
    # Nothing that leads only to w runs (as in PyTorch): not side's sum, so not side's hook.
    assert calls == ["h"] and w.grad is None
    y.backward()  # backward runs all of it
    assert sorted(calls) == ["h", "h", "side"] and w.grad is not None


def test_double_backward_through_dot_grad_with_create_graph(conn):
    x = gt.tensor([1.0, -2.0], requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    assert x.grad.requires_grad  # the gradient is itself differentiable
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert x.grad.tolist() == [6.0, -12.0]  # d/dx sum(3 x^2) = 6 x


def test_backward_inputs_accumulates_only_into_those(conn):
    a = gt.tensor([1.0, 2.0], requires_grad=True)
    b = gt.tensor([3.0, 4.0], requires_grad=True)
    h = a * b
    (h * h).sum().backward(inputs=[b, h])
    assert a.grad is None
    assert b.grad.tolist() == [6.0, 32.0]  # 2 a^2 b
    assert h.grad.tolist() == [6.0, 16.0]  # a computed tensor named in inputs gets its .grad
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (a * 2).sum().backward(inputs=[])


def test_tensor_hooks_change_what_follows_and_can_be_removed(conn):
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    h = w * 3
    doubled = h.register_hook(lambda g: g * 2)
    seen = []
    w.register_hook(lambda g: seen.append(g.tolist()))
    h.sum().backward(retain_graph=True)
    assert w.grad.tolist() == [6.0, 6.0] and seen == [[6.0, 6.0]]
    doubled.remove()
    w.grad = None
    h.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        gt.tensor([1.0]).register_hook(lambda g: g)
    bad = gt.tensor([1.0, 2.0], requires_grad=True)
    bad.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="returned a gradient of shape"):
        (bad * 1).sum().backward()


def test_forward_hooks_see_and_replace_inputs_and_outputs(conn):
    gt.manual_seed(0)
    lin = nn.Linear(2, 2)
    x = gt.tensor([[1.0, 2.0]])
    base = lin(x).detach().numpy()
    seen = []
    h1 = lin.register_forward_hook(lambda m, args, out: seen.append((m, args[0].shape)))
    h2 = lin.register_forward_pre_hook(lambda m, args: args[0] * 0)
    h3 = lin.register_forward_hook(lambda m, args, out: out + 1)
    out = lin(x)
    np.testing.assert_allclose(out.detach().numpy(), lin.bias.detach().numpy()[None] + 1, rtol=1e-6)
    assert seen == [(lin, (1, 2))]
    order = []
    lin.register_forward_hook(lambda m, a, o: order.append("last"))
    first = lin.register_forward_hook(lambda m, a, o: order.append("first"), prepend=True)
    lin(x)
    assert order == ["first", "last"]
    for h in (h1, h2, h3, first):
        h.remove()
    lin._forward_hooks.clear()
    np.testing.assert_allclose(lin(x).detach().numpy(), base, rtol=1e-6)
    with pytest.raises(RuntimeError, match="tuple of \\(new_args, new_kwargs\\)"):
        lin.register_forward_pre_hook(lambda m, a, k: a, with_kwargs=True)
        lin(x)


def _lines_of(conn, run):
    """The source lines of the instructions ``run()`` makes (read from the capture recorder)."""
    conn._rec_instrs = []
    try:
        run()
    finally:
        made, conn._rec_instrs = conn._rec_instrs, None
    return [conn.srclocs[ins[4]] for ins in made]


def test_backward_instructions_carry_the_users_lines(conn):
    import inspect  # noqa: PLC0415

    here = inspect.currentframe().f_lineno
    x = gt.tensor([1.0, 2.0], requires_grad=True)

    class Twice(gt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2  # here + 6

        @staticmethod
        def backward(ctx, g):
            return g * 2  # here + 10

    def step():
        y = (Twice.apply(x).tanh() * x).sum()  # here + 13
        y.backward()  # here + 14
        x * 3  # here + 15: the pin is gone after the walk

    name = "test_autograd_grad_and_hooks.py"
    lines = _lines_of(conn, step)
    assert f"{name}:{here + 10}" in lines  # the custom backward's own line
    assert lines[-1] == f"{name}:{here + 15}"
    made = set(lines)
    assert made <= {f"{name}:{here + n}" for n in (6, 10, 13, 14, 15)}
    assert f"{name}:{here + 14}" in made


def test_grad_takes_inputs_from_a_generator_as_model_parameters_gives_them(conn):
    model = gt.nn.Linear(2, 1)
    loss = model(gt.ones(3, 2)).sum()
    gw, gb = gt.autograd.grad(loss, model.parameters())
    assert gw.tolist() == [[3.0, 3.0]] and gb.tolist() == [3.0]
    with pytest.raises(TypeError, match="a tensor or a sequence of tensors"):
        gt.autograd.grad(loss, "weight")


def test_parameters_go_to_one_vector_and_back(conn):
    model = gt.nn.Linear(2, 3)
    vec = gt.nn.utils.parameters_to_vector(model.parameters())
    assert vec.shape == (9,)
    gt.nn.utils.vector_to_parameters(gt.arange(9.0), model.parameters())
    assert model.weight.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert model.bias.tolist() == [6.0, 7.0, 8.0]
    with pytest.raises(RuntimeError, match="a vector of 9 elements was expected"):
        gt.nn.utils.vector_to_parameters(gt.zeros(8), model.parameters())
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        gt.nn.utils.vector_to_parameters([0.0] * 9, model.parameters())
