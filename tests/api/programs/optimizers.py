"""The optimizers beyond SGD and Adam: LBFGS (with and without the strong-Wolfe line search), NAdam,
RAdam, Adamax, Adadelta and ASGD, driven by schedulers, averaged, and resumed from a state dict.

Optimizer state is returned through ``float(...)`` where PyTorch keeps a 0-d tensor and GT a Python
number (``step``, ``mu_product``, ``eta``, ``mu``, LBFGS's ``t`` and ``ro``): the values must agree,
the containers need not.
"""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights


def _rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def _lbfgs_state(torch, opt):
    st = opt.state_dict()["state"][0]
    return {
        "func_evals": st["func_evals"],
        "n_iter": st["n_iter"],
        "d": st["d"],
        "prev_flat_grad": st["prev_flat_grad"],
        "old_dirs": list(st["old_dirs"]),
        "old_stps": list(st["old_stps"]),
        "ro": [float(r) for r in st["ro"]],
        "H_diag": float(st["H_diag"]),
        "t": float(st["t"]),
        "prev_loss": float(st["prev_loss"]),
    }


@program
def lbfgs_rosenbrock_strong_wolfe(torch):
    """The textbook test: Rosenbrock's valley in float64 (the line search compares losses and
    slopes on the host; in float64 both libraries make the same decisions), three ``step`` calls
    that carry the history across, and a short history that has to drop old pairs."""
    out = {}
    for name, start, history in (("long", [-1.5, 2.0], 100), ("short", [1.8, -0.5], 3)):
        x = torch.tensor(np.array(start, np.float64), requires_grad=True)
        opt = torch.optim.LBFGS([x], lr=1, max_iter=10, history_size=history,
                                line_search_fn="strong_wolfe")  # fmt: skip

        def closure(x=x, opt=opt):
            opt.zero_grad()
            loss = _rosenbrock(x)
            loss.backward()
            return loss

        first, path = [], []
        for _ in range(3):
            first.append(opt.step(closure).item())
            path.append(x.detach().clone())
        out[name] = {"first_losses": first, "path": path, "x": x, **_lbfgs_state(torch, opt)}
    return out


def _least_squares_fixed_step(torch):
    x = arr(0, 40, 4, dtype=np.float64)
    w = np.array([[1.0], [-2.0], [0.5], [3.0]])
    y = x @ w + 0.25 + arr(1, 40, 1, scale=0.05, dtype=np.float64)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = set_weights(torch, torch.nn.Linear(4, 1), seed=2).double()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=6, history_size=4)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        return loss

    first = [opt.step(closure).item() for _ in range(4)]
    with torch.no_grad():
        final = torch.nn.functional.mse_loss(model(X), Y)
    return {"first_losses": first, "final": final, "params": params(model),
            **_lbfgs_state(torch, opt)}  # fmt: skip


def _logistic_float32_wolfe(torch):
    labels = ints(3, 3, 60)
    x = (arr(4, 3, 5, scale=1.5)[labels] + arr(5, 60, 5)).astype(np.float32)
    X, Y = torch.tensor(x), torch.tensor(labels)
    model = set_weights(torch, torch.nn.Linear(5, 3), seed=6)
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=8, history_size=5,
                            line_search_fn="strong_wolfe")  # fmt: skip

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(X), Y) + 0.01 * (model.weight**2).sum()
        loss.backward()
        return loss

    first = [opt.step(closure).item() for _ in range(2)]
    st = opt.state_dict()["state"][0]
    return {"first_losses": first, "params": params(model), "func_evals": st["func_evals"],
            "n_iter": st["n_iter"]}  # fmt: skip


@program
def lbfgs_regressions(torch):
    """LBFGS's two usual uses: a float64 linear least-squares fit with the fixed step (no line
    search; the history is shorter than the run), and a full-batch float32 classifier with the
    strong-Wolfe search (two parameters seen as one vector)."""
    return {"least_squares": _least_squares_fixed_step(torch),
            "logistic": _logistic_float32_wolfe(torch)}  # fmt: skip


def _blobs(seed: int):
    labels = ints(seed, 3, 48)
    x = arr(seed + 1, 3, 4, scale=2.0)[labels] + arr(seed + 2, 48, 4, scale=0.5)
    return x.astype(np.float32), labels


def _classify(torch, make_opt, seed: int, steps: int = 12, sched=None):
    x, y = _blobs(seed)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    set_weights(torch, model, seed=seed + 3)
    opt = make_opt(model.parameters())
    scheduler = sched(opt) if sched else None
    losses, lrs = [], []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    first = opt.state[model[0].weight]
    state = {k: (v if hasattr(v, "shape") and len(v.shape) else float(v)) for k, v in first.items()}
    return {"losses": losses, "lrs": lrs, "params": params(model), "state": state}


@program
def nadam_radam_classifier(torch):
    """A small MLP classifier trained with NAdam and RAdam, with L2 and decoupled weight decay;
    twelve steps take RAdam past the point (step 6) where its adaptive step switches on."""
    optim = torch.optim
    return {
        "nadam": _classify(torch, lambda p: optim.NAdam(p, lr=0.02, weight_decay=1e-2), seed=0),
        "nadamw": _classify(torch, lambda p: optim.NAdam(p, lr=0.02, weight_decay=0.1,
                                                         momentum_decay=0.01,
                                                         decoupled_weight_decay=True), seed=10),
        "radam": _classify(torch, lambda p: optim.RAdam(p, lr=0.02, betas=(0.9, 0.99)), seed=20),
        "radamw": _classify(torch, lambda p: optim.RAdam(p, lr=0.02, weight_decay=0.05,
                                                         decoupled_weight_decay=True), seed=30),
        "radam_l2": _classify(torch, lambda p: optim.RAdam(p, lr=0.01, weight_decay=0.05),
                              seed=40),
    }  # fmt: skip


@program
def adamax_adadelta_with_schedulers(torch):
    """Adamax under StepLR and Adadelta under ExponentialLR, with weight decay; and ``maximize``
    (ascending the negated loss) on two parameter groups with their own learning rates."""
    optim, lr_s = torch.optim, torch.optim.lr_scheduler
    adamax = _classify(torch, lambda p: optim.Adamax(p, lr=0.05, weight_decay=1e-3), seed=50,
                       sched=lambda o: lr_s.StepLR(o, step_size=4, gamma=0.5))  # fmt: skip
    adadelta = _classify(torch, lambda p: optim.Adadelta(p, lr=2.0, rho=0.8, weight_decay=1e-3),
                         seed=60, sched=lambda o: lr_s.ExponentialLR(o, gamma=0.9))  # fmt: skip

    x, y = _blobs(70)
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)), seed=71)

    def groups():  # new dicts each time: PyTorch fills in (and keeps) the very dicts it is given
        return [{"params": list(model[0].parameters())},
                {"params": list(model[2].parameters()), "lr": 0.01}]  # fmt: skip

    runs = {"adamax": lambda: optim.Adamax(groups(), lr=0.03, maximize=True),
            "adadelta": lambda: optim.Adadelta(groups(), lr=0.5, maximize=True, weight_decay=0.01)}  # fmt: skip
    maximized = {}
    for name, make in runs.items():
        opt = make()
        rewards = []
        for _ in range(6):
            reward = -nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
            opt.zero_grad()
            reward.backward()
            opt.step()
            rewards.append(reward.item())
        maximized[name] = {"rewards": rewards, "params": params(model)}
    return {"adamax": adamax, "adadelta": adadelta, "maximize": maximized}


@program
def asgd_averaged_weights(torch):
    """ASGD on a regression: averaging starts after ``t0`` steps; the averaged weights (``ax``)
    are evaluated in a copy of the model. With the default ``t0`` the average is the iterate."""
    x = arr(80, 32, 3)
    y = (x @ np.array([[2.0], [-1.0], [0.5]], np.float32) + arr(81, 32, 1, scale=0.1)).astype(
        np.float32
    )
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for name, kw in (("t0_4", dict(lr=0.05, lambd=1e-2, alpha=0.75, t0=4, weight_decay=1e-3)),
                     ("default", dict(lr=0.05))):  # fmt: skip
        model = set_weights(torch, torch.nn.Linear(3, 1), seed=82)
        opt = torch.optim.ASGD(model.parameters(), **kw)
        losses = []
        for _ in range(12):
            loss = torch.nn.functional.mse_loss(model(X), Y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        averaged = set_weights(torch, torch.nn.Linear(3, 1), seed=0)
        with torch.no_grad():
            for p, q in zip(averaged.parameters(), model.parameters()):
                p.copy_(opt.state[q]["ax"])
            avg_loss = torch.nn.functional.mse_loss(averaged(X), Y)
        st = opt.state[model.weight]
        out[name] = {"losses": losses, "params": params(model), "ax": st["ax"],
                     "eta": float(st["eta"]), "mu": float(st["mu"]), "step": float(st["step"]),
                     "avg_loss": avg_loss}  # fmt: skip
    return out


@program
def optimizer_state_dict_resume(torch):
    """Train four steps, save the optimizer's state dict, rebuild model and optimizer, load, train
    four more: the same result as eight steps straight, for every new optimizer (LBFGS's history
    lists included); the state and group keys are PyTorch's."""
    optim = torch.optim
    makers = {
        "nadam": lambda p: optim.NAdam(p, lr=0.02, decoupled_weight_decay=True, weight_decay=0.1),
        "radam": lambda p: optim.RAdam(p, lr=0.05),
        "adamax": lambda p: optim.Adamax(p, lr=0.05),
        "adadelta": lambda p: optim.Adadelta(p, lr=1.0),
        "asgd": lambda p: optim.ASGD(p, lr=0.05, t0=2),
        "lbfgs": lambda p: optim.LBFGS(p, lr=0.5, max_iter=3, history_size=4),
    }
    x, y = arr(90, 24, 3, dtype=np.float64), arr(91, 24, 1, dtype=np.float64)
    X, Y = torch.tensor(x), torch.tensor(y)

    def fresh():
        return set_weights(torch, torch.nn.Linear(3, 1), seed=92).double()

    def train(model, opt, steps):
        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(X), Y)
            loss.backward()
            return loss

        return [opt.step(closure).item() for _ in range(steps)]

    out = {}
    for name, make in makers.items():
        straight = fresh()
        opt = make(straight.parameters())
        straight_losses = train(straight, opt, 8)

        first = fresh()
        opt1 = make(first.parameters())
        losses = train(first, opt1, 4)
        saved = opt1.state_dict()
        resumed = fresh()
        resumed.load_state_dict(first.state_dict())
        opt2 = make(resumed.parameters())
        opt2.load_state_dict(saved)
        losses += train(resumed, opt2, 4)
        out[name] = {
            "straight": params(straight), "straight_losses": straight_losses,
            "resumed": params(resumed), "resumed_losses": losses,
            "state_keys": sorted(saved["state"][0]),
            "group_keys": sorted(saved["param_groups"][0]),
        }  # fmt: skip
    return out
