"""``torch.special`` functions in the places they appear (a probit link, entropy terms, sinc
filters, xlogy in KL terms) and parameters handled as one flat vector (a TRPO-style step)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


@program(rtol=1e-4, atol=1e-6)
def special_functions_values_and_gradients(torch):
    sp = torch.special
    x = torch.tensor(np.linspace(-7.0, 3.0, 11), requires_grad=True)  # float64
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=torch.float64, requires_grad=True)
    q = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2], dtype=torch.float64)
    out = {
        "expit": sp.expit(x),
        "erfc": sp.erfc(x),
        "ndtr": sp.ndtr(x),
        "log_ndtr": sp.log_ndtr(x),
        "sinc": sp.sinc(x / 2),
        "logit": sp.logit(p, eps=1e-6),
        "entr": sp.entr(p),
        "xlogy": sp.xlogy(p, q),
        "xlog1py": sp.xlog1py(p, q),
        "exp2": sp.exp2(x / 4),
        "lse": sp.logsumexp(x, 0),
        "softmax": sp.softmax(x, 0),
    }
    total = sum(v.sum() for k, v in out.items() if k not in ("logit",))
    total = total + sp.logit(p, eps=1e-6).sum() * 1e-3
    total.backward()
    return {**out, "x_grad": x.grad, "p_grad": p.grad}


@program
def probit_regression_with_ndtr(torch):
    sp = torch.special
    w = torch.tensor(arr(1, 3, scale=0.3), requires_grad=True)
    x = torch.tensor(arr(2, 16, 3))
    y = torch.tensor(ints(3, 2, 16)).float()
    opt = torch.optim.SGD([w], lr=0.2)
    losses = []
    for _ in range(4):
        z = x @ w
        nll = -(y * sp.log_ndtr(z) + (1 - y) * sp.log_ndtr(-z)).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    return {"losses": losses, "w": w}


@program
def flat_parameter_vector_step(torch):
    nn = torch.nn
    utils = nn.utils
    model = set_weights(torch, nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)), seed=4)
    x, y = torch.tensor(arr(5, 8, 4)), torch.tensor(arr(6, 8, 2))
    loss = nn.functional.mse_loss(model(x), y)
    flat_grad = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, model.parameters())])
    theta = utils.parameters_to_vector(model.parameters())
    step = flat_grad / (flat_grad.norm() + 1e-8)
    utils.vector_to_parameters(theta - 0.05 * step, model.parameters())
    after = nn.functional.mse_loss(model(x), y)
    after.backward()
    return {"theta": theta, "flat_grad": flat_grad, "before": loss, "after": after,
            **grads(model)}  # fmt: skip
