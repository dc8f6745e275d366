"""Module backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook`` and
the global ones of ``gt.nn.modules.module``) through a real cluster: what the hooks see, what
their results replace, when they fire, and the errors PyTorch gives. Expected gradients are
computed with NumPy from the chain rule."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import gt
from gt import nn

pytestmark = pytest.mark.timeout(120)

rng = np.random.default_rng(7)
X = rng.standard_normal((4, 3)).astype(np.float32)
C = rng.standard_normal((4, 2)).astype(np.float32)  # d(loss)/d(output) of loss = sum(out * C)


def _linear():
    gt.manual_seed(0)
    lin = nn.Linear(3, 2)
    return lin, lin.weight.detach().numpy(), lin.bias.detach().numpy()


def _loss(out):
    return (out * gt.tensor(C)).sum()


def test_full_hook_sees_the_gradients_of_inputs_and_outputs(conn):
    lin, w, _ = _linear()
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((m, gi, go)))
    x = gt.tensor(X, requires_grad=True)
    out = lin(x)
    assert seen == []  # nothing before backward
    _loss(out).backward()
    assert len(seen) == 1
    module, gi, go = seen[0]
    assert module is lin and isinstance(gi, tuple) and isinstance(go, tuple)
    assert len(gi) == 1 and len(go) == 1
    np.testing.assert_allclose(go[0].numpy(), C, rtol=1e-6)
    np.testing.assert_allclose(gi[0].numpy(), C @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), C @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), C.T @ X, rtol=1e-5, atol=1e-6)


def test_full_hook_result_replaces_grad_input_but_not_the_parameters_gradients(conn):
    lin, w, _ = _linear()
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 3,))
    later = []
    lin.register_full_backward_hook(lambda m, gi, go: later.append(gi[0].numpy()))
    x = gt.tensor(X, requires_grad=True)
    _loss(lin(x)).backward()
    np.testing.assert_allclose(later[0], 3 * C @ w, rtol=1e-5, atol=1e-6)  # later hooks see it
    np.testing.assert_allclose(x.grad.numpy(), 3 * C @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), C.T @ X, rtol=1e-5, atol=1e-6)


def test_pre_hook_result_replaces_grad_output_for_everything_inside(conn):
    lin, w, _ = _linear()
    seen = []
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
    lin.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", go[0].numpy())))
    lin.register_full_backward_hook(lambda m, gi, go: seen.append(("full", go[0].numpy())))
    x = gt.tensor(X, requires_grad=True)
    _loss(lin(x)).backward()
    assert [k for k, _ in seen] == ["pre", "full"]
    for _, g in seen:
        np.testing.assert_allclose(g, 0.5 * C, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 0.5 * C @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), 0.5 * C.T @ X, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.bias.grad.numpy(), 0.5 * C.sum(0), rtol=1e-5, atol=1e-6)


class Mix(nn.Module):
    """``(a * b * scale, a + 1, "tag")``: three positional inputs, three outputs."""

    def forward(self, a, scale, b):
        return a * b * scale, a + 1, "tag"


def test_entries_are_none_for_non_tensors_zeros_for_inputs_without_grad_none_for_unused_outputs(
    conn,
):
    m = Mix()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a_np, b_np = X[:, :2], C
    a = gt.tensor(a_np, requires_grad=True)
    b = gt.tensor(b_np)  # needs no gradient
    prod, plus, tag = m(a, 2.0, b)
    assert tag == "tag"
    prod.sum().backward()  # the second output gets no gradient
    gi, go = seen[0]
    assert len(gi) == 3 and gi[1] is None  # (a tensor needing no gradient gets zeros, as in
    assert gi[2].tolist() == np.zeros_like(b_np).tolist()  # PyTorch, when another input needs one)
    np.testing.assert_allclose(gi[0].numpy(), 2.0 * b_np, rtol=1e-6)
    assert len(go) == 3 and go[1] is None and go[2] is None
    np.testing.assert_allclose(go[0].numpy(), np.ones_like(a_np))
    np.testing.assert_allclose(a.grad.numpy(), 2.0 * b_np, rtol=1e-6)


def test_hook_of_a_module_whose_inputs_need_no_gradient_gets_none_and_must_return_none(conn):
    lin, _, _ = _linear()
    seen = []
    handle = lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    x = gt.tensor(X)
    with pytest.warns(UserWarning, match="Full backward hook is firing"):  # (as PyTorch's)
        _loss(lin(x)).backward()
    gi, go = seen[0]
    assert gi == (None,)
    np.testing.assert_allclose(go[0].numpy(), C, rtol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), C.T @ X, rtol=1e-5, atol=1e-6)
    handle.remove()
    lin.register_full_backward_hook(lambda m, gi, go: (gt.ones(4, 3),))
    with (
        pytest.raises(RuntimeError, match="no input requires gradient should always return None"),
        pytest.warns(UserWarning, match="Full backward hook is firing"),
    ):
        _loss(lin(x)).backward()


def test_hooks_returning_the_wrong_number_of_gradients_raise(conn):
    lin, _, _ = _linear()
    x = gt.tensor(X, requires_grad=True)
    h = lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        _loss(lin(x)).backward()
    h.remove()
    lin.register_full_backward_pre_hook(lambda m, go: (go[0], None))
    with pytest.raises(RuntimeError, match="invalid number of grad_output, got 2, but expected 1"):
        _loss(lin(x)).backward()


def test_hooks_fire_in_backward_order_with_prepend_and_stop_when_removed(conn):
    gt.manual_seed(0)
    l1, l2 = nn.Linear(3, 3), nn.Linear(3, 2)
    seq = nn.Sequential(l1, nn.Tanh(), l2)
    order = []
    handles = [
        seq.register_full_backward_hook(lambda m, gi, go: order.append("seq")),
        l1.register_full_backward_hook(lambda m, gi, go: order.append("l1")),
        l2.register_full_backward_hook(lambda m, gi, go: order.append("l2")),
        l2.register_full_backward_hook(lambda m, gi, go: order.append("l2 first"), prepend=True),
        l2.register_full_backward_pre_hook(lambda m, go: order.append("l2 pre")),
    ]
    x = gt.tensor(X, requires_grad=True)
    _loss(seq(x)).backward()
    assert order == ["l2 pre", "l2 first", "l2", "l1", "seq"]
    for h in handles:
        h.remove()
        h.remove()  # removing twice is harmless
    order.clear()
    out = seq(x)
    _loss(out).backward()
    assert order == [] and out.grad_fn.op != "BackwardHookFunction"  # no wrapping either


def test_hooks_fire_on_every_backward_pass_and_not_under_no_grad(conn):
    lin, w, _ = _linear()
    calls = []
    lin.register_full_backward_hook(lambda m, gi, go: calls.append(gi[0].numpy()))
    x = gt.tensor(X, requires_grad=True)
    loss = _loss(lin(x))
    loss.backward(retain_graph=True)
    loss.backward()
    assert len(calls) == 2
    np.testing.assert_allclose(x.grad.numpy(), 2 * C @ w, rtol=1e-5, atol=1e-6)
    with gt.no_grad():
        out = lin(x)
    assert not out.requires_grad and len(calls) == 2
    (g,) = gt.autograd.grad(_loss(lin(x)), x)  # autograd.grad runs the hooks too
    assert len(calls) == 3
    np.testing.assert_allclose(g.numpy(), C @ w, rtol=1e-5, atol=1e-6)


def test_global_hooks_run_for_every_module_before_its_own(conn):
    gt.manual_seed(0)
    l1, l2 = nn.Linear(3, 3), nn.Linear(3, 2)
    seq = nn.Sequential(l1, l2)
    order = []
    own = l1.register_full_backward_hook(lambda m, gi, go: order.append("l1 own"))
    g = gt.nn.modules.module.register_module_full_backward_hook(
        lambda m, gi, go: order.append(type(m).__name__)
    )
    gp = gt.nn.modules.module.register_module_full_backward_pre_hook(
        lambda m, go: order.append("pre " + type(m).__name__)
    )
    try:
        x = gt.tensor(X, requires_grad=True)
        _loss(seq(x)).backward()
    finally:
        g.remove()
        gp.remove()
    assert order == [
        "pre Sequential",
        "pre Linear",  # l2
        "Linear",
        "pre Linear",  # l1: the global hook, then its own
        "Linear",
        "l1 own",
        "Sequential",
    ]
    order.clear()
    _loss(seq(gt.tensor(X, requires_grad=True))).backward()
    assert order == ["l1 own"]
    own.remove()
    assert gt.nn.modules.module is gt.nn.module


def test_adding_or_removing_a_backward_hook_moves_the_guard_version(conn):
    lin, _, _ = _linear()
    v0 = gt.guards.version()
    h = lin.register_full_backward_hook(lambda m, gi, go: None)
    v1 = gt.guards.version()
    p = lin.register_full_backward_pre_hook(lambda m, go: None)
    v2 = gt.guards.version()
    h.remove()
    v3 = gt.guards.version()
    p.remove()
    assert v0 < v1 < v2 < v3 < gt.guards.version()


def test_a_backward_hook_added_or_removed_after_capture_is_seen_by_the_captured_step(conn):
    lin, _, _ = _linear()
    x = gt.tensor(X)
    c = gt.tensor(C)

    @gt.hot
    def step(x):
        lin.zero_grad()
        (lin(x) * c).sum().backward()
        return lin.weight.grad * 1

    plain = [step(x).numpy() for _ in range(4)]  # captured and replayed
    handle = lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    with pytest.warns(UserWarning, match="Full backward hook is firing"):  # (x needs no grad)
        hooked = [step(x).numpy() for _ in range(4)]
    handle.remove()
    after = [step(x).numpy() for _ in range(4)]
    for o in plain + after:
        np.testing.assert_allclose(o, C.T @ X, rtol=1e-5, atol=1e-6)
    for o in hooked:
        np.testing.assert_allclose(o, 3 * C.T @ X, rtol=1e-5, atol=1e-5)


def test_forward_may_not_change_a_hooked_input_in_place(conn):
    relu = nn.ReLU(inplace=True)
    relu.register_full_backward_hook(lambda m, gi, go: None)
    x = gt.tensor(X, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="modified one of its inputs in place"):
        relu(x)


def test_a_copied_module_keeps_its_hooks_apart_from_the_original(conn):
    lin, w, _ = _linear()
    calls = []
    handle = lin.register_full_backward_hook(lambda m, gi, go: calls.append(m))
    twin = copy.deepcopy(lin)
    handle.remove()  # the original's handle does not reach the copy's hook
    x = gt.tensor(X, requires_grad=True)
    _loss(lin(x)).backward()
    assert calls == []
    _loss(twin(x)).backward()
    assert calls == [twin]


def test_a_hook_can_return_a_lone_tensor_for_one_input_and_reads_tuple_outputs(conn):
    class Split(nn.Module):
        def forward(self, x):
            return x * 2, x * 3

    m = Split()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(len(go)) or gi[0] + 1)
    x = gt.tensor(X, requires_grad=True)
    a, b = m(x)
    (a.sum() + b.sum()).backward()
    assert seen == [2]
    np.testing.assert_allclose(x.grad.numpy(), np.full_like(X, 2 + 3 + 1))


def test_the_deprecated_non_full_hook_runs_as_a_full_one(conn):
    lin, _, _ = _linear()
    seen = []
    handle = lin.register_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
    x = gt.tensor(np.ones((2, lin.in_features), np.float32), requires_grad=True)
    lin(x).sum().backward()
    assert seen == [(2, lin.out_features)]  # grad_output, as Grad-CAM code reads it
    handle.remove()
    with pytest.raises(TypeError, match="callable"):
        lin.register_full_backward_hook(3)
