"""Optimizers against NumPy re-implementations of PyTorch's update rules, and a leak check."""

from __future__ import annotations

import time

import numpy as np
import pytest
import zmq

import gt
from gt.runtime import protocol as P

STEPS = 5


def _grads(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(STEPS)]


def _run(opt_factory, p0, grads):
    """Run ``STEPS`` steps with fixed gradients; returns the parameter after each step."""
    p = gt.tensor(p0, requires_grad=True)
    opt = opt_factory([p])
    seen = []
    for g in grads:
        p.grad = gt.tensor(g)
        opt.step()
        seen.append(p.detach().numpy().copy())
    return p, seen


def _np_sgd(
    p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False
):
    out, buf = [], None
    p = p.copy()
    for g in grads:
        g = -g if maximize else g.copy()
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p.copy())
    return out


def _np_adam(
    p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False, amsgrad=False
):
    b1, b2 = betas
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    out = []
    p = p.copy()
    for t, g in enumerate(grads, start=1):
        if weight_decay and decoupled:
            p = p * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vhat = np.maximum(vmax, v) if amsgrad else v
        vmax = vhat
        denom = np.sqrt(vhat) / np.sqrt(1 - b2**t) + eps
        p = p - lr / (1 - b1**t) * m / denom
        out.append(p.copy())
    return out


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.5),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.01, momentum=0.5),
    dict(lr=0.1, maximize=True),
]


@pytest.mark.parametrize(
    "kw", SGD_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items())
)
def test_sgd_matches_pytorch_formula(conn, kw):
    p0 = np.random.default_rng(9).standard_normal((3, 2))
    grads = _grads((3, 2))
    _, got = _run(lambda ps: gt.optim.SGD(ps, **kw), p0, grads)
    for g, w in zip(got, _np_sgd(p0, grads, **kw)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


ADAM_CASES = [
    (gt.optim.Adam, dict(lr=0.01), {}),
    (gt.optim.Adam, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1), {}),
    (gt.optim.Adam, dict(lr=0.01, amsgrad=True), {}),
    (gt.optim.AdamW, dict(lr=0.01), dict(weight_decay=1e-2, decoupled=True)),
    (gt.optim.AdamW, dict(lr=0.01, weight_decay=0.5), dict(decoupled=True)),
]


@pytest.mark.parametrize(
    "cls,kw,ref_kw", ADAM_CASES, ids=["adam", "adam-l2", "amsgrad", "adamw-default", "adamw-wd"]
)
def test_adam_family_matches_pytorch_formula(conn, cls, kw, ref_kw):
    p0 = np.random.default_rng(9).standard_normal((4,))
    grads = _grads((4,), seed=3)
    _, got = _run(lambda ps: cls(ps, **kw), p0, grads)
    for g, w in zip(got, _np_adam(p0, grads, **{**kw, **ref_kw})):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_step_updates_parameters_in_place_and_skips_missing_grads(conn):
    a = gt.ones(2, requires_grad=True)
    b = gt.ones(2, requires_grad=True)
    ids = (id(a), id(b))
    opt = gt.optim.SGD([a, b], lr=0.5, momentum=0.9)
    a.grad = gt.ones(2)
    opt.step()
    assert (id(a), id(b)) == ids and a.tolist() == [0.5, 0.5] and b.tolist() == [1.0, 1.0]
    assert a.is_leaf and a.requires_grad and not a.grad.requires_grad


def test_param_groups_have_their_own_hyperparameters(conn):
    a = gt.zeros(1, requires_grad=True)
    b = gt.zeros(1, requires_grad=True)
    opt = gt.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    for p in (a, b):
        p.grad = gt.ones(1)
    opt.step()
    opt.param_groups[0]["lr"] = 0.01  # schedules edit the groups, as in PyTorch
    opt.step()
    assert a.item() == pytest.approx(-0.11) and b.item() == pytest.approx(-2.0)


def test_optimizer_validates_its_arguments(conn):
    w = gt.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        gt.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        gt.optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        gt.optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(TypeError, match="iterable"):
        gt.optim.Adam(w)


def test_prototype_alias_and_closure(conn):
    assert gt.nn.SGD is gt.optim.SGD
    w = gt.tensor([2.0], requires_grad=True)
    opt = gt.nn.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 4.0 and w.item() == 1.0


def _worker_tensors(address: str) -> int:
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    try:
        s.connect(address)
        s.send(P.encode(P.Control("stats")))
        assert s.poll(5000), "the dispatcher did not answer a stats request"
        msg = P.parse(s.recv_multipart()[-1])
        assert type(msg) is P.Reply and msg.ok, msg
        return sum(w.get("stats", {}).get("tensors", 0) for w in msg.payload["workers"])
    finally:
        s.close()


def _settled_count(address: str, timeout: float = 10.0) -> int:
    """The workers' tensor count once two reports (workers report about every second) agree."""
    deadline = time.monotonic() + timeout
    last = _worker_tensors(address)
    while time.monotonic() < deadline:
        time.sleep(1.1)
        now = _worker_tensors(address)
        if now == last:
            return now
        last = now
    raise AssertionError(f"worker tensor count did not settle within {timeout}s (last {last})")


@pytest.mark.slow
def test_sgd_momentum_loop_leaks_no_worker_tensors(conn):
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(8, 16), gt.nn.ReLU(), gt.nn.Linear(16, 1))
    opt = gt.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x, y = gt.randn(32, 8), gt.randn(32, 1)

    def step():
        opt.zero_grad()
        loss = gt.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(10):
        loss = step()
    first_loss = loss.item()
    after_10 = _settled_count(conn.address)
    for _ in range(290):  # (a tensor leaked a step would be 290 more)
        loss = step()
    last_loss = loss.item()
    after_300 = _settled_count(conn.address)
    assert after_300 == after_10, f"{after_300 - after_10} tensors leaked over 290 steps"
    assert last_loss < first_loss


def test_print_of_an_optimizer_is_pytorchs(conn):
    w, b = gt.nn.Parameter(gt.ones(2)), gt.nn.Parameter(gt.ones(2))
    opt = gt.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    group = (
        "    dampening: 0\n    differentiable: False\n    foreach: None\n    fused: None\n"
        "    lr: {lr}\n    maximize: False\n    momentum: 0.9\n    nesterov: False\n"
        "    weight_decay: 0\n"
    )
    assert repr(opt) == (
        "SGD (\nParameter Group 0\n" + group.format(lr=0.1) + "\nParameter Group 1\n"
        + group.format(lr=0.5) + ")"
    )  # fmt: skip
    keys = {
        gt.optim.Adam: ["amsgrad", "betas", "capturable", "decoupled_weight_decay",
                        "differentiable", "eps", "foreach", "fused", "lr", "maximize",
                        "weight_decay"],
        gt.optim.Adagrad: ["differentiable", "eps", "foreach", "fused",
                           "initial_accumulator_value", "lr", "lr_decay", "maximize",
                           "weight_decay"],
        gt.optim.RMSprop: ["alpha", "capturable", "centered", "differentiable", "eps", "foreach",
                           "lr", "maximize", "momentum", "weight_decay"],
    }  # fmt: skip
    for cls, want in keys.items():
        assert sorted(cls([w]).defaults) == want
    assert gt.optim.AdamW([w]).defaults["decoupled_weight_decay"] is True
    assert "weight_decay: 0\n" in repr(gt.optim.Adam([w]))  # (PyTorch's default is the int 0)


def test_adam_with_decoupled_weight_decay_is_adamw(conn):
    start = np.linspace(-1, 1, 6).astype(np.float32)
    results = []
    for make in (lambda p: gt.optim.Adam([p], lr=0.1, weight_decay=0.1, decoupled_weight_decay=True),
                 lambda p: gt.optim.AdamW([p], lr=0.1, weight_decay=0.1)):  # fmt: skip
        p = gt.nn.Parameter(gt.tensor(start))
        opt = make(p)
        for _ in range(3):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        results.append(p.detach().numpy())
    np.testing.assert_array_equal(results[0], results[1])
