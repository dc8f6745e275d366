"""Tutorial-style fits: regression with the common optimizers and update idioms."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _line_data(n: int = 32, d: int = 3, seed: int = 0):
    x = arr(seed, n, d)
    w = np.array([[1.5], [-2.0], [0.5]], np.float32)[:d]
    y = x @ w + 0.3 + arr(seed + 1, n, 1, scale=0.1)
    return x, y


@program
def linear_regression_sgd(torch):
    x, y = _line_data()
    X, Y = torch.tensor(x), torch.tensor(y)
    model = set_weights(torch, torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.MSELoss()
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = loss_fn(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model), "grads": grads(model)}


@program
def polynomial_fit_adam(torch):
    x = np.linspace(-1, 1, 40, dtype=np.float32)
    y = np.sin(3 * x).astype(np.float32)
    X = torch.tensor(x)
    feats = torch.stack([X, X**2, X**3], dim=1)
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=3)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(25):
        pred = model(feats).squeeze(-1)
        loss = ((pred - torch.tensor(y)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def manual_gradient_descent(torch):
    x, y = _line_data(seed=5)
    X, Y = torch.tensor(x), torch.tensor(y)
    w = torch.zeros(3, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    losses = []
    for _ in range(20):
        loss = ((X @ w + b - Y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
            w.grad.zero_()
            b.grad.zero_()
        losses.append(float(loss))
    return {"losses": losses, "w": w, "b": b}


@program
def data_update_sgd(torch):
    """The old idiom: update through ``.data`` (it must change the parameter)."""
    x, y = _line_data(seed=7)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    set_weights(torch, model, seed=8)
    losses = []
    for _ in range(10):
        model.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.2)
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def logistic_regression_zero_init(torch):
    """Zero-initialised logistic regression: the first step sees logits of exactly 0."""
    x = arr(11, 40, 2)
    y = (x[:, 0] - 0.5 * x[:, 1] > 0).astype(np.float32)[:, None]
    model = torch.nn.Linear(2, 1)
    model.weight.data.zero_()
    model.bias.data.fill_(0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    crit = torch.nn.BCEWithLogitsLoss()
    out = {"losses": []}
    for step in range(8):
        opt.zero_grad()
        loss = crit(model(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        if step == 0:
            out["first_grads"] = grads(model)
        opt.step()
        out["losses"].append(loss.item())
    out["params"] = params(model)
    return out


@program
def sigmoid_bce_classifier(torch):
    x = arr(12, 30, 4)
    y = (x.sum(1) > 0).astype(np.float32)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1),
                                torch.nn.Sigmoid())  # fmt: skip
    set_weights(torch, model, seed=13)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(10):
        p = model(torch.tensor(x)).squeeze(1)
        loss = torch.nn.BCELoss()(p, torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "grads": grads(model)}


@program
def huber_and_smooth_l1_regression(torch):
    x, y = _line_data(seed=14)
    y[:3] += 10.0  # outliers
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for name, crit in (("huber", torch.nn.HuberLoss(delta=0.5)),
                       ("smooth_l1", torch.nn.SmoothL1Loss(beta=0.7))):  # fmt: skip
        model = set_weights(torch, torch.nn.Linear(3, 1), seed=15)
        opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
        losses = []
        for _ in range(10):
            loss = crit(model(X), Y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[name] = {"losses": losses, "params": params(model)}
    return out


@program
def mlp_sgd_nesterov_weight_decay(torch):
    x, y = _line_data(seed=16)
    model = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    set_weights(torch, model, seed=17)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-3)  # fmt: skip
    losses = []
    for _ in range(12):
        loss = torch.nn.functional.mse_loss(model(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def rmsprop_centered_momentum(torch):
    x, y = _line_data(seed=18)
    out = {}
    for centered in (False, True):
        model = set_weights(torch, torch.nn.Linear(3, 1), seed=19)
        opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5, centered=centered,
                                  weight_decay=0.01)  # fmt: skip
        for _ in range(10):
            loss = torch.nn.functional.mse_loss(model(torch.tensor(x)), torch.tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
        out[f"centered={centered}"] = params(model)
    return out


@program
def adagrad_fit(torch):
    x, y = _line_data(seed=20)
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=21)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.3, lr_decay=0.01,
                              initial_accumulator_value=0.1)  # fmt: skip
    losses = []
    for _ in range(10):
        loss = torch.nn.functional.l1_loss(model(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def closure_step_and_param_groups(torch):
    x, y = _line_data(seed=22)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    set_weights(torch, model, seed=23)
    opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.05},
                           {"params": model[2].parameters()}], lr=0.2, momentum=0.8)  # fmt: skip

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(8)]
    return {"losses": losses, "params": params(model), "lrs": [g["lr"] for g in opt.param_groups]}


@program
def gradient_clipping(torch):
    x, y = _line_data(seed=24)
    y = y * 50.0
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    set_weights(torch, model, seed=25)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    norms = []
    for _ in range(6):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(torch.tensor(x)), torch.tensor(y)).backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item())
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
    return {"norms": norms, "params": params(model)}


@program
def l1_regularized_fit(torch):
    x, y = _line_data(seed=26)
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=27)
    opt = torch.optim.Adam(model.parameters(), lr=0.05, amsgrad=True)
    losses = []
    for _ in range(10):
        mse = torch.nn.functional.mse_loss(model(torch.tensor(x)), torch.tensor(y))
        l1 = sum(p.abs().sum() for p in model.parameters())
        loss = mse + 0.01 * l1
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def weight_tying_and_shared_params(torch):
    """A parameter used twice accumulates both gradients."""
    x = arr(28, 6, 4)
    lin = set_weights(torch, torch.nn.Linear(4, 4), seed=29)
    model = torch.nn.Sequential(lin, torch.nn.Tanh(), lin)
    out = model(torch.tensor(x)).pow(2).sum()
    out.backward()
    return {"out": out, "grads": grads(model), "n_params": len(list(model.parameters()))}
