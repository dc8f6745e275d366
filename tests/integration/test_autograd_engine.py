"""The autograd engine: accumulation, grad modes, detach, graph lifetime, and where it runs."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import gt
from gt.autograd import Node


def test_gradients_accumulate_across_backward_calls(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


def test_tensor_used_twice_gets_both_contributions(conn):
    x = gt.tensor([2.0], requires_grad=True)
    y = x * x * x + x  # d/dx = 3x^2 + 1
    y.backward()
    assert x.grad.tolist() == [13.0]


def test_backward_with_explicit_gradient(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * 2).backward(gt.tensor([1.0, 0.5, -1.0]))
    assert x.grad.tolist() == [2.0, 1.0, -2.0]
    y = gt.tensor([1.0], requires_grad=True)
    y.backward(np.array([4.0], np.float32))  # a leaf as the root
    assert y.grad.tolist() == [4.0]


def test_leaves_never_share_a_grad_object(conn):
    a = gt.ones(3, requires_grad=True)
    b = gt.ones(3, requires_grad=True)
    g = gt.ones(3)
    (a + b).backward(g)
    assert a.grad is not b.grad and a.grad is not g
    with gt.no_grad():
        a.grad += 1
    assert b.grad.tolist() == [1.0, 1.0, 1.0] and g.tolist() == [1.0, 1.0, 1.0]


def test_no_grad_records_nothing_and_restores_the_mode(conn):
    w = gt.ones(2, requires_grad=True)
    with gt.no_grad():
        y = w * 2
        assert not gt.is_grad_enabled()
        with gt.enable_grad():
            z = w * 2
    assert gt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None

    @gt.no_grad()
    def infer(v):
        return v * 3

    assert not infer(w).requires_grad and gt.is_grad_enabled()
    with gt.set_grad_enabled(False):
        assert not (w + 1).requires_grad
    assert (w + 1).requires_grad


def test_detach_and_data_stop_gradients(conn):
    x = gt.tensor([3.0], requires_grad=True)
    y = x * x.detach() + x.data * x  # gradient only through the non-detached factors: 3 + 3
    y.backward()
    assert x.grad.tolist() == [6.0]
    assert not x.detach().requires_grad and x.detach().is_leaf


def test_requires_grad_flags_and_grad_fn_names(conn):
    x = gt.zeros(2)
    assert not x.requires_grad and x.is_leaf
    assert x.requires_grad_() is x and x.requires_grad
    y = (x + 1).relu()
    assert not y.is_leaf and y.grad_fn.name() == "ReluBackward0"
    assert isinstance(y.grad_fn, Node)
    assert not (x > 0).requires_grad and not x.argmax().requires_grad
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)


def test_graph_is_freed_after_backward_unless_retained(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_gradient_of_float64_leaf_through_float32_ops_is_float64(conn):
    x = gt.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    (x.float() * 2).sum().backward()
    assert x.grad.dtype == "float64" and x.grad.tolist() == [2.0, 2.0]
    i = gt.tensor([1.0, 2.0], requires_grad=True)
    (i * gt.tensor([3, 4])).sum().backward()  # int operand promoted to float
    assert i.grad.tolist() == [3.0, 4.0]


def test_inplace_on_non_leaf_is_recorded(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y += x  # y = 3x
    y[0] = x[1] * 10  # y = [10*x1, 3*x1]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 13.0]


def test_backward_issues_instructions_without_any_sync(conn, monkeypatch):
    w = gt.randn(4, 3, requires_grad=True)
    b = gt.zeros(3, requires_grad=True)
    loss = ((gt.randn(5, 4) @ w + b).relu() ** 2).mean()
    sent = conn.sent_instructions + len(conn._instrs)

    def no_fetch(*args, **kwargs):
        raise AssertionError("backward waited for data")

    monkeypatch.setattr(conn, "fetch", no_fetch)
    monkeypatch.setattr(conn, "sync", no_fetch)
    loss.backward()
    monkeypatch.undo()
    assert conn.sent_instructions + len(conn._instrs) > sent + 5
    assert w.grad.shape == (4, 3) and b.grad.shape == (3,)
    gt.sync()


def test_training_step_leaves_no_reference_cycles(conn):
    model = gt.nn.Sequential(
        gt.nn.Linear(4, 8), gt.nn.GELU(), gt.nn.LayerNorm(8), gt.nn.Linear(8, 3)
    )
    opt = gt.optim.Adam(model.parameters())
    x, y = gt.randn(6, 4), gt.randint(0, 3, (6,))
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            opt.zero_grad()
            loss = gt.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        del loss
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{found} objects were only reachable through reference cycles"


def test_zero_grad_set_to_none_false_keeps_zero_tensors(conn):
    w = gt.ones(2, requires_grad=True)
    (w * 2).sum().backward()
    opt = gt.optim.SGD([w], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_no_grad_works_as_a_bare_decorator(conn):
    @gt.no_grad
    def infer(v):
        assert not gt.is_grad_enabled()
        return v * 2

    assert not infer(gt.ones(1, requires_grad=True)).requires_grad and gt.is_grad_enabled()


def test_a_linear_layers_result_is_named_as_pytorch_names_it(conn):
    m, mb = gt.nn.Linear(2, 3), gt.nn.Linear(2, 3, bias=False)
    names = [(m(x).grad_fn.name(), mb(x).grad_fn.name()) for x in (gt.ones(2), gt.ones(4, 2), gt.ones(5, 4, 2))]  # fmt: skip
    assert names == [  # PyTorch 2.13's
        ("ViewBackward0", "SqueezeBackward4"),
        ("AddmmBackward0", "MmBackward0"),
        ("ViewBackward0", "UnsafeViewBackward0"),
    ]
    assert "grad_fn=<AddmmBackward0>" in repr(m(gt.ones(1, 2)))
    assert (m(gt.ones(1, 2)) * 2).grad_fn.name() == "MulBackward0"  # (only the linear's own node)


def test_slices_of_one_tensor_scatter_their_gradients_into_one_buffer(conn, monkeypatch):
    # (an RNN reads gi[t] for every step: each slice's gradient was a full-size zero tensor of
    # its own, summed out of place -- 27 ms of a 32-step LSTM's backward, PyTorch's whole step 13)
    from gt.runtime import ops as O

    x = gt.tensor(np.arange(96, dtype=np.float32).reshape(8, 3, 4), requires_grad=True)
    y = x * 2  # (a node, not a leaf: its gradient is the walk's own until it runs)
    loss = sum((y[t] * (t + 1)).sum() for t in range(8)) + y[2:5].sum()
    emitted = []
    original = type(conn).emit

    def counting(self, opcode, out, args, attrs=None):
        emitted.append(O.op_name(opcode))
        return original(self, opcode, out, args, attrs)

    monkeypatch.setattr(type(conn), "emit", counting)
    loss.backward()
    monkeypatch.undo()
    want = np.broadcast_to(
        2.0 * np.arange(1, 9, dtype=np.float32).reshape(8, 1, 1), (8, 3, 4)
    ).copy()
    want[2:5] += 2.0
    np.testing.assert_array_equal(x.grad.numpy(), want)
    # one buffer of zeros and nine scatters, not nine buffers and eight full-size sums
    assert emitted.count("index_add") == 9 and emitted.count("add") <= 1, emitted
