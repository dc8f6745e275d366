"""Adamax, NAdam, RAdam, Adadelta and ASGD against NumPy re-implementations of PyTorch's documented
update rules (with weight decay and ``maximize``), their state dicts, and their argument errors."""

from __future__ import annotations

import numpy as np
import pytest

import gt

STEPS = 8  # RAdam's adaptive step switches on at step 6 (betas[1] = 0.999)


def _grads(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(STEPS)]


def _run(make, p0, grads):
    """``STEPS`` steps with fixed gradients; the parameter after each, and the optimizer."""
    p = gt.tensor(p0, requires_grad=True)
    opt = make([p])
    seen = []
    for g in grads:
        p.grad = gt.tensor(g)
        opt.step()
        seen.append(p.detach().numpy().copy())
    return seen, opt


def _np_adamax(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    m, u, out = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        g = g + weight_decay * p
        m = m + (1 - b1) * (g - m)
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr / (1 - b1**t) * m / u
        out.append(p)
    return out


def _np_nadam(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):  # fmt: skip
    b1, b2 = betas
    m, v, mu_prod, out = np.zeros_like(p), np.zeros_like(p), 1.0, []
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_prod *= mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2**t)) + eps
        p = p - lr * (1 - mu) / (1 - mu_prod) * g / denom
        p = p - lr * mu_next / (1 - mu_prod * mu_next) * m / denom
        out.append(p)
    return out


def _np_radam(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False, maximize=False):  # fmt: skip
    b1, b2 = betas
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho_t > 5:
            r = np.sqrt(
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            )
            p = p - lr * m_hat * r * np.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
        else:
            p = p - lr * m_hat
        out.append(p)
    return out


def _np_adadelta(p, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    v, u, out = np.zeros_like(p), np.zeros_like(p), []
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta
        out.append(p)
    return out


def _np_asgd(p, grads, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    eta, mu, ax, out = lr, 1.0, np.zeros_like(p), []
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        g = g + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + mu * (p - ax) if mu != 1 else p
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
        out.append((p, ax))
    return out


CASES = [
    ("adamax", gt.optim.Adamax, _np_adamax, dict(lr=0.05)),
    ("adamax-wd-max", gt.optim.Adamax, _np_adamax, dict(lr=0.05, weight_decay=0.1, maximize=True)),
    ("nadam", gt.optim.NAdam, _np_nadam, dict(lr=0.05)),
    ("nadam-wd-max", gt.optim.NAdam, _np_nadam,
     dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01, maximize=True)),
    ("nadamw", gt.optim.NAdam, _np_nadam,
     dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True)),
    ("radam", gt.optim.RAdam, _np_radam, dict(lr=0.05)),
    ("radam-wd-max", gt.optim.RAdam, _np_radam,
     dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, maximize=True)),
    ("radamw", gt.optim.RAdam, _np_radam,
     dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True)),
    ("adadelta", gt.optim.Adadelta, _np_adadelta, dict()),
    ("adadelta-wd-max", gt.optim.Adadelta, _np_adadelta,
     dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
]  # fmt: skip


@pytest.mark.parametrize("capturable", [False, True], ids=["eager", "capturable"])
@pytest.mark.parametrize("cls,ref,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_update_matches_pytorchs_formula(conn, cls, ref, kw, capturable):
    p0 = np.random.default_rng(9).standard_normal((3, 2))
    grads = _grads((3, 2), seed=4)
    got, _ = _run(lambda ps: cls(ps, capturable=capturable, **kw), p0, grads)
    for g, w in zip(got, ref(p0, grads, **kw)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("capturable", [False, True], ids=["eager", "capturable"])
@pytest.mark.parametrize(
    "kw",
    [dict(lr=0.1), dict(lr=0.1, lambd=0.05, t0=3, weight_decay=0.1, maximize=True)],
    ids=["default-t0", "averaging-wd-max"],
)
def test_asgd_iterates_and_average_match_pytorchs_formula(conn, kw, capturable):
    p0 = np.random.default_rng(2).standard_normal(4)
    grads = _grads(4, seed=5)
    got, opt = _run(lambda ps: gt.optim.ASGD(ps, capturable=capturable, **kw), p0, grads)
    want = _np_asgd(p0, grads, **kw)
    for g, (w, _) in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    (state,) = opt.state.values()
    np.testing.assert_allclose(state["ax"].numpy(), want[-1][1], rtol=1e-9, atol=1e-12)
    t0, lambd = kw.get("t0", 1e6), kw.get("lambd", 1e-4)
    assert float(state["mu"]) == pytest.approx(1 / max(1, STEPS - t0))
    assert float(state["eta"]) == pytest.approx(kw["lr"] / (1 + lambd * kw["lr"] * STEPS) ** 0.75)


STATE_KEYS = {
    gt.optim.Adamax: {"step", "exp_avg", "exp_inf"},
    gt.optim.NAdam: {"step", "mu_product", "exp_avg", "exp_avg_sq"},
    gt.optim.RAdam: {"step", "exp_avg", "exp_avg_sq"},
    gt.optim.Adadelta: {"step", "square_avg", "acc_delta"},
    gt.optim.ASGD: {"step", "eta", "mu", "ax"},
}


@pytest.mark.parametrize("cls", list(STATE_KEYS), ids=lambda c: c.__name__)
def test_state_dict_round_trip_continues_the_run(conn, cls):
    p0 = np.random.default_rng(1).standard_normal(5)
    grads = _grads(5, seed=6)
    straight, _ = _run(lambda ps: cls(ps, lr=0.05, weight_decay=0.01), p0, grads)

    half = STEPS // 2
    first, opt = _run(lambda ps: cls(ps, lr=0.05, weight_decay=0.01), p0, grads[:half])
    saved = opt.state_dict()
    assert set(saved["state"][0]) == STATE_KEYS[cls]
    assert saved["param_groups"][0]["params"] == [0] and saved["param_groups"][0]["lr"] == 0.05
    p = gt.tensor(first[-1], requires_grad=True)
    opt2 = cls([p], lr=1.0)  # the loaded groups bring lr=0.05 back
    opt2.load_state_dict(saved)
    for g in grads[half:]:
        p.grad = gt.tensor(g)
        opt2.step()
    np.testing.assert_allclose(p.detach().numpy(), straight[-1], rtol=1e-9, atol=1e-12)


def test_param_groups_carry_pytorchs_options(conn):
    w = gt.zeros(2, requires_grad=True)
    group = gt.optim.NAdam([w]).param_groups[0]
    assert {k: group[k] for k in ("lr", "betas", "momentum_decay", "decoupled_weight_decay",
                                  "foreach", "maximize", "capturable", "differentiable")} == dict(
        lr=2e-3, betas=(0.9, 0.999), momentum_decay=4e-3, decoupled_weight_decay=False,
        foreach=None, maximize=False, capturable=False, differentiable=False)  # fmt: skip
    assert gt.optim.Adadelta([w]).param_groups[0]["lr"] == 1.0
    assert gt.optim.ASGD([w]).param_groups[0]["t0"] == 1e6
    assert gt.optim.RAdam([w], foreach=True).param_groups[0]["foreach"] is True


@pytest.mark.parametrize(
    "make,err,match",
    [
        (lambda w: gt.optim.Adamax(w, lr=-1), ValueError, "Invalid learning rate: -1"),
        (lambda w: gt.optim.Adamax(w, betas=(1.0, 0.9)), ValueError,
         "Invalid beta parameter at index 0: 1.0"),
        (lambda w: gt.optim.NAdam(w, momentum_decay=-1), ValueError,
         "Invalid momentum_decay value: -1"),
        (lambda w: gt.optim.RAdam(w, eps=-1), ValueError, "Invalid epsilon value: -1"),
        (lambda w: gt.optim.Adadelta(w, rho=1.5), ValueError, "Invalid rho value: 1.5"),
        (lambda w: gt.optim.ASGD(w, weight_decay=-1), ValueError,
         "Invalid weight_decay value: -1"),
        (lambda w: gt.optim.NAdam(w, differentiable=True), NotImplementedError,
         "differentiable=True is not supported"),
        (lambda w: gt.optim.ASGD(w, differentiable=True), NotImplementedError,
         "differentiable=True is not supported"),
    ],
    ids=["lr", "beta", "momentum_decay", "eps", "rho", "weight_decay", "diff-nadam", "diff-asgd"],
)  # fmt: skip
def test_invalid_arguments_raise_pytorchs_errors(conn, make, err, match):
    with pytest.raises(err, match=match):
        make([gt.zeros(1, requires_grad=True)])


def test_steps_queue_no_sync_points(conn, monkeypatch):
    """The updates are worker instructions: a step fetches nothing."""
    p = gt.ones(3, requires_grad=True)
    opts = [cls([p]) for cls in STATE_KEYS] + [gt.optim.RAdam([p], capturable=True)]
    fetches = []
    monkeypatch.setattr(type(conn), "fetch", lambda self, tid: fetches.append(tid))
    for _ in range(7):
        p.grad = gt.ones(3)
        for opt in opts:
            opt.step()
    monkeypatch.undo()
    assert fetches == [] and np.isfinite(p.detach().numpy()).all()


def _hot_or_eager_training(cls, hot: bool, capturable: bool = True):
    rng = np.random.default_rng(3)
    model = gt.nn.Linear(4, 2)
    with gt.no_grad():
        for p in model.parameters():
            p.copy_(gt.tensor(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32)))
    opt = cls(model.parameters(), lr=0.05, weight_decay=0.01, capturable=capturable)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    fn = gt.hot(step) if hot else step
    losses = []
    for k in range(STEPS):
        data = np.random.default_rng(k).standard_normal((8, 6)).astype(np.float32)
        losses.append(fn(gt.tensor(data[:, :4]), gt.tensor(data[:, 4:])))
    return [loss.item() for loss in losses], [p.detach().numpy() for p in model.parameters()], fn


@pytest.mark.parametrize("capturable", [True, False], ids=["capturable", "not capturable"])
@pytest.mark.parametrize("cls", list(STATE_KEYS), ids=lambda c: c.__name__)
def test_capturable_steps_replay_under_hot_with_the_eager_results(conn, cls, capturable):
    # not capturable: eagerly the step count is a Python number; captured, it moves to the
    # worker (gt.optim._options.on_worker_when_captured), and the results must not change
    eager_losses, eager_params, _ = _hot_or_eager_training(cls, hot=False, capturable=capturable)
    hot_losses, hot_params, fn = _hot_or_eager_training(cls, hot=True, capturable=capturable)
    assert hot_losses == eager_losses  # bitwise: the same instructions ran
    for a, b in zip(hot_params, eager_params):
        np.testing.assert_array_equal(a, b)
    (only,) = fn.state.values()
    assert only["state"] == "replaying"
