"""Learning-rate schedulers, each driving a short training run."""

from __future__ import annotations

import math

from programs import program
from programs.common import arr, params, set_weights


def _train(torch, make_opt, make_sched, steps: int = 12, metric: bool = False, seed: int = 0):
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=seed)
    opt = make_opt(model.parameters())
    sched = make_sched(opt)
    x, y = torch.tensor(arr(seed + 1, 16, 3)), torch.tensor(arr(seed + 2, 16, 1))
    lrs, losses = [], []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss.item()) if metric else sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        losses.append(loss.item())
    return {"lrs": lrs, "last_lr": sched.get_last_lr(), "losses": losses, "params": params(model)}


@program
def step_lr(torch):
    return _train(torch, lambda p: torch.optim.SGD(p, lr=0.1),
                  lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=4, gamma=0.5))  # fmt: skip


@program
def multistep_and_exponential_lr(torch):
    lr_s = torch.optim.lr_scheduler
    a = _train(torch, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
               lambda o: lr_s.MultiStepLR(o, milestones=[3, 7, 7], gamma=0.3), seed=3)  # fmt: skip
    b = _train(torch, lambda p: torch.optim.Adam(p, lr=0.05),
               lambda o: lr_s.ExponentialLR(o, gamma=0.8), seed=4)  # fmt: skip
    return {"multistep": a, "exponential": b}


@program
def cosine_annealing_past_t_max(torch):
    return _train(torch, lambda p: torch.optim.SGD(p, lr=0.2),
                  lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
                  steps=14, seed=5)  # fmt: skip


@program
def lambda_lr_warmup(torch):
    def warmup(step):
        return min(1.0, (step + 1) / 4) * 0.5 ** (step // 6)

    return _train(torch, lambda p: torch.optim.AdamW(p, lr=0.05),
                  lambda o: torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=warmup), seed=6)  # fmt: skip


@program
def one_cycle_lr_momentum_and_betas(torch):
    lr_s = torch.optim.lr_scheduler
    out = {}
    for name, make in (("sgd", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)),
                       ("adam", lambda p: torch.optim.Adam(p, lr=0.01))):  # fmt: skip
        holder = {}

        def sched(o, holder=holder):
            holder["opt"] = o
            return lr_s.OneCycleLR(o, max_lr=0.1, total_steps=12)

        res = _train(torch, make, sched, seed=7)
        g = holder["opt"].param_groups[0]
        res["momentum"] = g["betas"][0] if "betas" in g else g["momentum"]
        out[name] = res
    return out


@program
def linear_warmup_then_cosine(torch):
    lr_s = torch.optim.lr_scheduler

    def make(o):
        warm = lr_s.LinearLR(o, start_factor=0.1, total_iters=3)
        cos = lr_s.CosineAnnealingLR(o, T_max=9)
        return lr_s.SequentialLR(o, schedulers=[warm, cos], milestones=[3])

    return _train(torch, lambda p: torch.optim.SGD(p, lr=0.1), make, seed=8)


@program
def reduce_on_plateau(torch):
    return _train(torch, lambda p: torch.optim.SGD(p, lr=0.5),
                  lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, factor=0.5, patience=1,
                                                                       threshold=0.1),
                  metric=True, seed=9)  # fmt: skip


@program
def warm_restarts_and_polynomial(torch):
    lr_s = torch.optim.lr_scheduler
    a = _train(torch, lambda p: torch.optim.SGD(p, lr=0.1),
               lambda o: lr_s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2), seed=10)  # fmt: skip
    b = _train(torch, lambda p: torch.optim.SGD(p, lr=0.1),
               lambda o: lr_s.PolynomialLR(o, total_iters=8, power=2.0), seed=11)  # fmt: skip
    c = _train(torch, lambda p: torch.optim.SGD(p, lr=0.1),
               lambda o: lr_s.ConstantLR(o, factor=0.5, total_iters=4), seed=12)  # fmt: skip
    return {"warm_restarts": a, "polynomial": b, "constant": c}


@program
def manual_lr_schedule_on_param_groups(torch):
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=13)
    opt = torch.optim.Adam(model.parameters(), lr=1.0)
    x, y = torch.tensor(arr(14, 8, 3)), torch.tensor(arr(15, 8, 1))
    lrs = []
    for step in range(8):
        lr = 0.05 * 0.5 * (1 + math.cos(math.pi * step / 8))
        for g in opt.param_groups:
            g["lr"] = lr
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lrs.append(lr)
    return {"lrs": lrs, "params": params(model)}
