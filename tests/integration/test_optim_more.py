"""Rprop and Adafactor against NumPy re-implementations of PyTorch's update rules (options, state
dicts, errors, no sync points), and the CyclicLR and ChainedScheduler schedules against their
closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)

STEPS = 7
S = gt.optim.lr_scheduler


def _grads(shape, seed=0, steps=STEPS):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(steps)]


def _run(make, p0, grads):
    p = gt.tensor(p0, requires_grad=True)
    opt = make([p])
    seen = []
    for g in grads:
        p.grad = gt.tensor(g)
        opt.step()
        seen.append(p.detach().numpy().copy())
    return seen, opt, p


# ---------------------------------------------------------------------------------------- Rprop
def _np_rprop(p, grads, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    etaminus, etaplus = etas
    prev, size, out = np.zeros_like(p), np.full_like(p, lr), []
    for g in grads:
        g = -g if maximize else g
        s = np.sign(g * prev)
        size = np.clip(size * np.where(s > 0, etaplus, np.where(s < 0, etaminus, 1.0)),
                       *step_sizes)  # fmt: skip
        g = np.where(s < 0, 0.0, g)
        p = p - np.sign(g) * size
        prev = g
        out.append(p)
    return out, prev, size


def _sign_flipping_grads(shape, seed):
    """Gradients whose signs keep, flip and hit zero, so every branch of Rprop runs."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(shape)
    out = []
    for t in range(STEPS):
        g = base * (1.0 if t % 3 else -1.0) + 0.3 * rng.standard_normal(shape)
        g[0, 0] = 0.0 if t == 2 else g[0, 0]
        out.append(g)
    return out


@pytest.mark.parametrize(
    "kw",
    [{}, dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08)), dict(lr=0.02, maximize=True)],
    ids=["default", "custom", "maximize"],
)
def test_rprop_matches_pytorchs_rule(conn, kw):
    p0 = np.random.default_rng(1).standard_normal((3, 4))
    grads = _sign_flipping_grads((3, 4), seed=2)
    got, opt, p = _run(lambda ps: gt.optim.Rprop(ps, **kw), p0, grads)
    want, prev, size = _np_rprop(p0, grads, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    st = opt.state_dict()["state"][0]
    assert list(st) == ["step", "prev", "step_size"] and float(st["step"]) == STEPS
    np.testing.assert_allclose(st["prev"].numpy(), prev, rtol=1e-12)
    np.testing.assert_allclose(st["step_size"].numpy(), size, rtol=1e-12)


def test_rprop_state_dict_round_trip_continues_the_run(conn):
    p0 = np.random.default_rng(3).standard_normal((1, 6))
    grads = _sign_flipping_grads((1, 6), seed=4)
    straight, _, _ = _run(lambda ps: gt.optim.Rprop(ps, lr=0.03), p0, grads)
    first, opt, _ = _run(lambda ps: gt.optim.Rprop(ps, lr=0.03), p0, grads[:3])
    saved = opt.state_dict()
    p = gt.tensor(first[-1], requires_grad=True)
    opt2 = gt.optim.Rprop([p], lr=1.0)
    opt2.load_state_dict(saved)
    for g in grads[3:]:
        p.grad = gt.tensor(g)
        opt2.step()
    np.testing.assert_allclose(p.detach().numpy(), straight[-1], rtol=1e-12)
    assert saved["param_groups"][0]["etas"] == (0.5, 1.2)


# ------------------------------------------------------------------------------------ Adafactor
def _np_adafactor(p, grads, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                  weight_decay=0.0, maximize=False):  # fmt: skip
    eps1 = np.finfo(p.dtype).eps if eps[0] is None else eps[0]
    eps2 = eps[1]
    out = []
    row = np.zeros((*p.shape[:-1], 1)) if p.ndim > 1 else None
    col = np.zeros((*p.shape[:-2], 1, p.shape[-1])) if p.ndim > 1 else None
    var = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        beta = t**beta2_decay
        rho = min(lr, 1 / math.sqrt(t))
        alpha = max(eps2, np.sqrt(np.mean(p * p))) * rho
        p = p * (1 - lr * weight_decay)
        if p.ndim > 1:
            row = row + beta * ((g * g).mean(-1, keepdims=True) - row)
            col = col + beta * ((g * g).mean(-2, keepdims=True) - col)
            v = (row @ col) / np.maximum(row.mean(-2, keepdims=True), eps1)
        else:
            var = var + beta * (g * g - var)
            v = var
        u = g / np.sqrt(np.maximum(v, eps1 * eps1))
        denom = max(1.0, np.sqrt(np.mean(u * u)) / d)
        p = p - alpha / denom * u
        out.append(p)
    return out, row, col, var


@pytest.mark.parametrize("shape", [(4, 3), (5,), (2, 3, 4)], ids=["matrix", "vector", "batched"])
@pytest.mark.parametrize(
    "kw",
    [{}, dict(lr=0.05, weight_decay=0.1, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=2.0),
     dict(lr=0.3, maximize=True)],
    ids=["default", "options", "maximize"],
)  # fmt: skip
def test_adafactor_matches_pytorchs_rule(conn, shape, kw):
    p0 = np.random.default_rng(5).standard_normal(shape) * 0.1
    grads = _grads(shape, seed=6)
    got, opt, _ = _run(lambda ps: gt.optim.Adafactor(ps, **kw), p0, grads)
    want, row, col, var = _np_adafactor(p0, grads, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    st = opt.state_dict()["state"][0]
    assert float(st["step"]) == STEPS
    if len(shape) > 1:
        assert list(st) == ["step", "row_var", "col_var"]
        np.testing.assert_allclose(st["row_var"].numpy(), row, rtol=1e-10)
        np.testing.assert_allclose(st["col_var"].numpy(), col, rtol=1e-10)
    else:
        assert list(st) == ["step", "variance"]
        np.testing.assert_allclose(st["variance"].numpy(), var, rtol=1e-10)


def test_adafactor_options_and_defaults(conn):
    w = gt.zeros(2, requires_grad=True)
    group = gt.optim.Adafactor([w]).param_groups[0]
    assert {k: v for k, v in group.items() if k != "params"} == dict(
        lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, foreach=None,
        maximize=False)  # fmt: skip
    group = gt.optim.Rprop([w]).param_groups[0]
    assert {k: v for k, v in group.items() if k != "params"} == dict(
        lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None, maximize=False,
        differentiable=False, capturable=False)  # fmt: skip


@pytest.mark.parametrize(
    "make,err,match",
    [
        (lambda w: gt.optim.Rprop(w, lr=-1), ValueError, "Invalid learning rate: -1"),
        (lambda w: gt.optim.Rprop(w, etas=(1.1, 1.2)), ValueError, "Invalid eta values: 1.1, 1.2"),
        (lambda w: gt.optim.Rprop(w, differentiable=True), NotImplementedError, "differentiable"),
        (lambda w: gt.optim.Adafactor(w, lr=-1), ValueError, "Learning rate should be >= 0"),
        (lambda w: gt.optim.Adafactor(w, beta2_decay=0.5), ValueError, "beta2_decay should be <= 0"),
        (lambda w: gt.optim.Adafactor(w, eps=(-1, 1e-3)), ValueError, "epsilon1 should be >= 0"),
        (lambda w: gt.optim.Adafactor(w, d=0.5), ValueError, "Clipping threshold d should be >= 1"),
        (lambda w: gt.optim.Adafactor(w, weight_decay=-1), ValueError, "weight_decay should be"),
    ],
    ids=["rprop-lr", "rprop-etas", "rprop-diff", "af-lr", "af-beta2", "af-eps", "af-d", "af-wd"],
)  # fmt: skip
def test_invalid_arguments_raise_pytorchs_errors(conn, make, err, match):
    with pytest.raises(err, match=match):
        make([gt.zeros(1, requires_grad=True)])


def test_steps_queue_no_sync_points(conn, monkeypatch):
    """Both updates (Adafactor's norms included) are worker instructions: a step fetches nothing."""
    p, q = gt.ones(3, 2, requires_grad=True), gt.ones(4, requires_grad=True)
    opts = [gt.optim.Rprop([p, q]), gt.optim.Adafactor([p, q], weight_decay=0.1)]
    fetches = []
    monkeypatch.setattr(type(conn), "fetch", lambda self, tid: fetches.append(tid))
    for _ in range(4):
        p.grad, q.grad = gt.ones(3, 2), gt.ones(4)
        for opt in opts:
            opt.step()
    monkeypatch.undo()
    assert fetches == [] and np.isfinite(p.detach().numpy()).all()


def test_optimizers_train_a_model(conn):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    for cls, kw in ((gt.optim.Rprop, {}), (gt.optim.Adafactor, {"lr": 0.5})):
        model = gt.nn.Linear(3, 1)
        opt = cls(model.parameters(), **kw)
        losses = []
        for _ in range(40):
            loss = gt.nn.functional.mse_loss(model(gt.tensor(x)), gt.tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < 0.2 * losses[0], (cls.__name__, losses[0], losses[-1])


# ------------------------------------------------------------------------------------- CyclicLR
def _np_cyclic(t, base, top, up, down, mode="triangular", gamma=1.0):
    total = up + down
    cycle = math.floor(1 + t / total)
    x = 1 + t / total - cycle
    frac = x / (up / total) if x <= up / total else (x - 1) / (up / total - 1)
    scale = {"triangular": 1.0, "triangular2": 1 / 2 ** (cycle - 1), "exp_range": gamma**t}[mode]
    return base + (top - base) * frac * scale, frac * scale


def _drive(opt, sched, n=15):
    lrs, moms = [opt.param_groups[0]["lr"]], [opt.param_groups[0].get("momentum")]
    for _ in range(n):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0].get("momentum"))
    return lrs, moms


@pytest.mark.parametrize(
    "mode,up,down,gamma",
    [("triangular", 3, None, 1.0), ("triangular2", 2, 4, 1.0), ("exp_range", 3, 2, 0.9)],
)
def test_cyclic_lr_follows_the_closed_form(conn, mode, up, down, gamma):
    w = gt.zeros(2, requires_grad=True)
    opt = gt.optim.SGD([w], lr=123.0, momentum=0.5)
    sched = S.CyclicLR(opt, 0.01, 0.1, step_size_up=up, step_size_down=down, mode=mode,
                       gamma=gamma, base_momentum=0.8, max_momentum=0.9)  # fmt: skip
    lrs, moms = _drive(opt, sched)
    down = up if down is None else down
    for t, (lr, mom) in enumerate(zip(lrs, moms)):
        want_lr, height = _np_cyclic(t, 0.01, 0.1, up, down, mode, gamma)
        assert lr == pytest.approx(want_lr, rel=1e-12)
        assert mom == pytest.approx(0.9 - 0.1 * height, rel=1e-12)
    assert sched.get_last_lr() == [lrs[-1]]
    assert opt.param_groups[0]["base_momentum"] == 0.8


def test_cyclic_lr_custom_scale_fn_adam_beta1_and_per_group_values(conn):
    a, b = gt.zeros(2, requires_grad=True), gt.zeros(3, requires_grad=True)
    opt = gt.optim.Adam([{"params": [a]}, {"params": [b]}], lr=1.0, betas=(0.5, 0.99))
    sched = S.CyclicLR(opt, [0.01, 0.02], [0.1, 0.3], step_size_up=2,
                       scale_fn=lambda i: 1 / (1 + i), scale_mode="iterations")  # fmt: skip
    for t in range(1, 9):
        opt.step()
        sched.step()
        x = 1 + t / 4 - math.floor(1 + t / 4)
        frac = x / 0.5 if x <= 0.5 else (x - 1) / -0.5
        for g, base, top in zip(opt.param_groups, (0.01, 0.02), (0.1, 0.3)):
            assert g["lr"] == pytest.approx(base + (top - base) * frac / (1 + t))
            assert g["betas"] == (pytest.approx(0.9 - 0.1 * frac / (1 + t)), 0.99)
    state = sched.state_dict()
    assert "optimizer" not in state and "_scale_fn_ref" not in state
    assert state["_scale_fn_custom"] is None  # a plain function is not saved
    with pytest.raises(ValueError, match="base_lr must have the same length"):
        S.CyclicLR(opt, [0.1], 1.0)
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        S.CyclicLR(gt.optim.Adagrad([a]), 0.1, 1.0)
    with pytest.raises(ValueError, match="mode is invalid"):
        S.CyclicLR(opt, 0.1, 1.0, mode="sawtooth")


def test_cyclic_lr_state_dict_round_trip(conn):
    w = gt.zeros(1, requires_grad=True)
    opt = gt.optim.SGD([w], lr=0.1, momentum=0.9)
    sched = S.CyclicLR(opt, 0.01, 0.1, step_size_up=3, mode="triangular2")
    lrs, _ = _drive(opt, sched, n=4)
    saved = sched.state_dict()
    opt2 = gt.optim.SGD([w], lr=0.1, momentum=0.9)
    sched2 = S.CyclicLR(opt2, 0.01, 0.1, step_size_up=3, mode="triangular2")
    sched2.load_state_dict(saved)
    rest1, _ = _drive(opt, sched, n=5)
    rest2, _ = _drive(opt2, sched2, n=5)
    assert rest1[1:] == rest2[1:] and sched2.last_epoch == 9


def test_chained_scheduler_multiplies_the_factors(conn):
    w = gt.zeros(1, requires_grad=True)
    opt = gt.optim.SGD([w], lr=1.0)
    chain = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
                                S.ExponentialLR(opt, gamma=0.9)])  # fmt: skip
    assert chain.get_last_lr() == [0.5]
    for t in range(1, 8):
        opt.step()
        chain.step()
        want = (0.5 if t < 2 else 1.0) * 0.9**t
        assert chain.get_last_lr()[0] == pytest.approx(want, rel=1e-12)
    state = chain.state_dict()
    assert set(state) == {"_last_lr", "_schedulers"} and len(state["_schedulers"]) == 2
    other = gt.optim.SGD([w], lr=1.0)
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        S.ChainedScheduler([S.ExponentialLR(opt, 0.9), S.ExponentialLR(other, 0.9)])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        S.ChainedScheduler([S.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="at least one scheduler"):
        S.ChainedScheduler([])


def test_optimizer_state_is_a_defaultdict_as_custom_optimizers_expect(conn):
    # (LARS in facebookresearch/barlowtwins reads self.state[p] before anything is stored)
    p = gt.nn.Parameter(gt.zeros(3))
    opt = gt.optim.SGD([p], lr=0.1)
    assert opt.state[p] == {}
    opt.state[p]["mu"] = gt.ones(3)
    opt.load_state_dict(opt.state_dict())
    q = gt.nn.Parameter(gt.zeros(1))
    assert opt.state[q] == {} and opt.state[p]["mu"].tolist() == [1.0, 1.0, 1.0]
