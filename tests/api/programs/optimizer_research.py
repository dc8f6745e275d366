"""Optimizer research code as papers' reference implementations write it, by hand: surrogate-gap
guided SAM (GSAM) with a rho that follows the learning rate, SamsungLabs' ASAM wrapper and
m-sharpness over micro-batches, Zhang et al.'s Lookahead with momentum pullback, NVIDIA apex's LARC
wrapper (clip and scale modes), LAMB with ``_foreach_norm`` global clipping and NVLAMB, NFNets'
SGD with adaptive gradient clipping on weight-standardised convolutions, Lion with the cautious
mask and a warmup-cosine schedule, Sophia-H and AdaHessian from Hutchinson probes (fixed here),
SOAP (Adam in Shampoo's eigenbasis, ``eigh`` then QR power iterations), ELECTRA-style layer-wise
learning-rate decay over parameter groups, a K-FAC optimizer fed by module hooks with eigen
decompositions and KL clipping, and Prodigy's learning-rate-free ``d`` estimate. Each trains a
small model for a few steps and returns losses, parameters and the optimizer state it keeps.

(tests/api/programs/custom_optimizers.py holds the other well-known implementations: lucidrains'
Lion, Adafactor, LAMB as cybertronai and timm write it, Sophia-G, Shampoo, davda54's SAM/ASAM,
timm's Lookahead, gradient centralization, ...; these are different code of the same families.)"""

from __future__ import annotations

import copy
import math
from collections import defaultdict

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights


def _data(seed: int, n: int = 24, d: int = 6, k: int = 3):
    """Gaussian blobs: ``k`` classes in ``d`` dimensions."""
    labels = ints(seed, k, n)
    x = arr(seed + 1, k, d, scale=1.2)[labels] + arr(seed + 2, n, d, scale=0.8)
    return x.astype(np.float32), labels


def _net(torch, seed: int, d: int = 6, h: int = 8, k: int = 3, act: str = "Tanh"):
    nn = torch.nn
    m = nn.Sequential(nn.Linear(d, h), getattr(nn, act)(), nn.Linear(h, k))
    return set_weights(torch, m, seed=seed)


def _rademacher(seed: int, shape) -> np.ndarray:
    return (np.random.default_rng(seed).integers(0, 2, shape) * 2 - 1).astype(np.float32)


# ------------------------------------------------------------------------------------------- GSAM


@program
def optr_gsam_surrogate_gap_with_rho_scheduler(torch):
    """Zhuang et al.'s GSAM: ``perturb_weights`` climbs ``rho / ||g||`` (and ``|w|^2``-weighted
    when adaptive), ``gradient_decompose`` removes ``alpha`` times the component of the old
    gradient orthogonal to the perturbed one (cosine from ``torch.sum`` inner products and stacked
    norms), ``unperturb`` subtracts ``e_w``; rho follows a cosine-annealed learning rate
    proportionally, as their ``ProportionScheduler`` does."""
    F = torch.nn.functional

    class GSAM(torch.optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, alpha=0.2, adaptive=False, **kwargs):
            defaults = dict(rho=rho, alpha=alpha, adaptive=adaptive, **kwargs)
            super().__init__(params, defaults)
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups
            self.adaptive = adaptive
            self.alpha = alpha
            self.rho_t = rho

        @torch.no_grad()
        def perturb_weights(self, rho=0.0):
            grad_norm = self._grad_norm(weight_adaptive=self.adaptive)
            for group in self.param_groups:
                scale = rho / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_g"] = p.grad.data.clone()
                    e_w = p.grad * scale.to(p)
                    if self.adaptive:
                        e_w *= torch.pow(p, 2)
                    p.add_(e_w)
                    self.state[p]["e_w"] = e_w

        @torch.no_grad()
        def unperturb(self):
            for group in self.param_groups:
                for p in group["params"]:
                    if "e_w" in self.state[p].keys():
                        p.data.sub_(self.state[p]["e_w"])

        @torch.no_grad()
        def gradient_decompose(self, alpha=0.0):
            inner_prod = 0.0
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    inner_prod += torch.sum(self.state[p]["old_g"] * p.grad.data)
            new_grad_norm = self._grad_norm()
            old_grad_norm = self._grad_norm(by="old_g")
            cosine = inner_prod / (new_grad_norm * old_grad_norm + 1e-12)
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    vertical = self.state[p]["old_g"] - cosine * old_grad_norm * p.grad.data / (
                        new_grad_norm + 1e-12
                    )
                    p.grad.data.add_(vertical, alpha=-alpha)
            return cosine

        @torch.no_grad()
        def _grad_norm(self, by=None, weight_adaptive=False):
            def g(p):
                return p.grad if by is None else self.state[p][by]

            return torch.norm(
                torch.stack([((torch.abs(p.data) if weight_adaptive else 1.0) * g(p)).norm(p=2)
                             for group in self.param_groups for p in group["params"]
                             if p.grad is not None]),
                p=2,
            )  # fmt: skip

        @torch.no_grad()
        def step(self, closure=None):
            get_grad = torch.enable_grad()(closure)
            outputs, loss_value = get_grad()
            self.perturb_weights(rho=self.rho_t)
            get_grad()
            cosine = self.gradient_decompose(self.alpha)
            self.unperturb()
            self.base_optimizer.step()
            return outputs, loss_value, cosine

    x, y = _data(1)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for adaptive in (False, True):
        model = _net(torch, seed=2)
        base = torch.optim.SGD
        opt = GSAM(model.parameters(), base, rho=0.3 if adaptive else 0.08, alpha=0.4,
                   adaptive=adaptive, lr=0.2, momentum=0.9)  # fmt: skip
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            opt.base_optimizer, T_max=5, eta_min=0.02
        )
        rho_max, rho_min, lr_max, lr_min = opt.defaults["rho"], 0.01, 0.2, 0.02
        losses, cosines, rhos = [], [], []
        for _ in range(4):

            def closure(opt=opt, model=model):
                opt.zero_grad()
                outputs = model(X)
                loss = F.cross_entropy(outputs, Y)
                loss.backward()
                return outputs, loss.detach()

            _, loss, cosine = opt.step(closure)
            sched.step()
            lr = sched.get_last_lr()[0]
            opt.rho_t = rho_min + (rho_max - rho_min) * (lr - lr_min) / (lr_max - lr_min)
            losses.append(loss.item())
            cosines.append(cosine.item())
            rhos.append(opt.rho_t)
        out["adaptive" if adaptive else "plain"] = {
            "losses": losses, "cosines": cosines, "rhos": rhos, "params": params(model),
            "old_g": opt.state[model[0].weight]["old_g"],
            "momentum": opt.base_optimizer.state[model[2].weight]["momentum_buffer"],
        }  # fmt: skip
    return out


# ------------------------------------------------------------------------- ASAM and m-sharpness


@program
def optr_asam_samsung_wrapper_and_m_sharpness(torch):
    """SamsungLabs' ASAM as its ``example_cifar.py`` uses it: a plain wrapper object with
    ``ascent_step``/``descent_step``, ``t_w = |w| + eta`` kept in ``self.state`` and written with
    ``t_w[...] = p[...]`` for parameters named ``weight``, label smoothing and a MultiStepLR; then
    SAM's m-sharpness (Foret et al.): a separate perturbation per micro-batch, the sharpness-aware
    gradients averaged before one SGD step."""
    nn, F = torch.nn, torch.nn.functional

    class ASAM:
        def __init__(self, optimizer, model, rho=0.5, eta=0.01):
            self.optimizer = optimizer
            self.model = model
            self.rho = rho
            self.eta = eta
            self.state = defaultdict(dict)

        @torch.no_grad()
        def ascent_step(self):
            wgrads = []
            for n, p in self.model.named_parameters():
                if p.grad is None:
                    continue
                t_w = self.state[p].get("eps")
                if t_w is None:
                    t_w = torch.clone(p).detach()
                    self.state[p]["eps"] = t_w
                if "weight" in n:
                    t_w[...] = p[...]
                    t_w.abs_().add_(self.eta)
                    p.grad.mul_(t_w)
                wgrads.append(torch.norm(p.grad, p=2))
            wgrad_norm = torch.norm(torch.stack(wgrads), p=2) + 1.0e-16
            for n, p in self.model.named_parameters():
                if p.grad is None:
                    continue
                t_w = self.state[p].get("eps")
                if "weight" in n:
                    p.grad.mul_(t_w)
                eps = t_w
                eps[...] = p.grad[...]
                eps.mul_(self.rho / wgrad_norm)
                p.add_(eps)
            self.optimizer.zero_grad()

        @torch.no_grad()
        def descent_step(self):
            for _, p in self.model.named_parameters():
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["eps"])
            self.optimizer.step()
            self.optimizer.zero_grad()

    x, y = _data(10, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model = _net(torch, seed=11)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    minimizer = ASAM(optimizer, model, rho=0.5, eta=0.01)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(minimizer.optimizer, [2, 3], gamma=0.5)
    asam_losses, sharp_losses, accs = [], [], []
    for _ in range(4):
        predictions = model(X)
        batch_loss = criterion(predictions, Y)
        batch_loss.mean().backward()
        minimizer.ascent_step()
        sharp = criterion(model(X), Y)
        sharp.mean().backward()
        minimizer.descent_step()
        scheduler.step()
        asam_losses.append(batch_loss.item())
        sharp_losses.append(sharp.item())
        accs.append((torch.argmax(predictions, 1) == Y).sum().item() / Y.size(0))
    out = {"asam": {"losses": asam_losses, "sharp": sharp_losses, "accs": accs,
                    "params": params(model), "eps": minimizer.state[model[0].weight]["eps"],
                    "lr": scheduler.get_last_lr()}}  # fmt: skip

    # m-sharpness: each micro-batch of m examples gets its own ascent direction
    model = _net(torch, seed=12)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rho, m = 0.05, 8
    losses = []
    for _ in range(3):
        ps = list(model.parameters())
        acc = [torch.zeros_like(p) for p in ps]
        total = 0.0
        for xb, yb in zip(X.split(m), Y.split(m)):
            loss = F.cross_entropy(model(xb), yb)
            g = torch.autograd.grad(loss, ps)
            norm = torch.norm(torch.stack([gi.norm(p=2) for gi in g]), p=2)
            with torch.no_grad():
                e_ws = [gi * (rho / (norm + 1e-12)) for gi in g]
                for p, e in zip(ps, e_ws):
                    p.add_(e)
            g_sam = torch.autograd.grad(F.cross_entropy(model(xb), yb), ps)
            with torch.no_grad():
                for p, e, a, gs in zip(ps, e_ws, acc, g_sam):
                    p.sub_(e)
                    a.add_(gs, alpha=1.0 / (len(X) // m))
            total += loss.item()
        for p, a in zip(ps, acc):
            p.grad = a
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / (len(X) // m))
    out["m_sharpness"] = {"losses": losses, "params": params(model),
                          "grad_is_none": [p.grad is None for p in model.parameters()]}  # fmt: skip
    return out


# -------------------------------------------------------------------------------------- Lookahead


@program
def optr_lookahead_pullback_momentum_modes(torch):
    """michaelrzhang/lookahead: an ``Optimizer`` subclass that never calls ``super().__init__``,
    exposes the inner SGD's ``param_groups`` through a property, caches slow weights, and after
    ``la_steps`` interpolates with ``la_alpha`` and resets, pulls back or keeps the inner momentum;
    evaluation swaps the slow weights in with ``_backup_and_load_cache``."""
    F = torch.nn.functional

    class Lookahead(torch.optim.Optimizer):
        def __init__(self, optimizer, la_steps=5, la_alpha=0.8, pullback_momentum="none"):
            self.optimizer = optimizer
            self._la_step = 0
            self.la_alpha = la_alpha
            self._total_la_steps = la_steps
            pullback_momentum = pullback_momentum.lower()
            assert pullback_momentum in ["reset", "pullback", "none"]
            self.pullback_momentum = pullback_momentum
            self.state = defaultdict(dict)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    param_state = self.state[p]
                    param_state["cached_params"] = torch.zeros_like(p.data)
                    param_state["cached_params"].copy_(p.data)
                    if self.pullback_momentum == "pullback":
                        param_state["cached_mom"] = torch.zeros_like(p.data)

        def __getstate__(self):
            return {"state": self.state, "optimizer": self.optimizer, "la_alpha": self.la_alpha,
                    "_la_step": self._la_step, "_total_la_steps": self._total_la_steps,
                    "pullback_momentum": self.pullback_momentum}  # fmt: skip

        def zero_grad(self):
            self.optimizer.zero_grad()

        def get_la_step(self):
            return self._la_step

        def state_dict(self):
            return self.optimizer.state_dict()

        def load_state_dict(self, state_dict):
            self.optimizer.load_state_dict(state_dict)

        def _backup_and_load_cache(self):
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    param_state = self.state[p]
                    param_state["backup_params"] = torch.zeros_like(p.data)
                    param_state["backup_params"].copy_(p.data)
                    p.data.copy_(param_state["cached_params"])

        def _clear_and_load_backup(self):
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    param_state = self.state[p]
                    p.data.copy_(param_state["backup_params"])
                    del param_state["backup_params"]

        @property
        def param_groups(self):
            return self.optimizer.param_groups

        def step(self, closure=None):
            loss = self.optimizer.step(closure)
            self._la_step += 1
            if self._la_step >= self._total_la_steps:
                self._la_step = 0
                for group in self.optimizer.param_groups:
                    for p in group["params"]:
                        param_state = self.state[p]
                        p.data.mul_(self.la_alpha).add_(param_state["cached_params"],
                                                        alpha=1.0 - self.la_alpha)  # fmt: skip
                        param_state["cached_params"].copy_(p.data)
                        if self.pullback_momentum == "pullback":
                            internal_momentum = self.optimizer.state[p]["momentum_buffer"]
                            self.optimizer.state[p]["momentum_buffer"] = internal_momentum.mul_(
                                self.la_alpha
                            ).add_(param_state["cached_mom"], alpha=1.0 - self.la_alpha)
                            param_state["cached_mom"] = self.optimizer.state[p]["momentum_buffer"]
                        elif self.pullback_momentum == "reset":
                            self.optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p.data)
            return loss

    x, y = _data(20)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for mode in ("none", "reset", "pullback"):
        model = _net(torch, seed=21, act="ReLU")
        base = torch.optim.SGD(model.parameters(), lr=0.15, momentum=0.9, weight_decay=1e-3)
        opt = Lookahead(base, la_steps=2, la_alpha=0.5, pullback_momentum=mode)
        losses, evals, la_steps = [], [], []
        for step in range(5):
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            la_steps.append(opt.get_la_step())
            if step % 2 == 0:
                opt._backup_and_load_cache()
                with torch.no_grad():
                    evals.append(F.cross_entropy(model(X), Y).item())
                opt._clear_and_load_backup()
        sd = opt.state_dict()
        out[mode] = {
            "losses": losses, "evals": evals, "la_steps": la_steps, "params": params(model),
            "cached": opt.state[model[0].weight]["cached_params"],
            "momentum": base.state[model[2].weight]["momentum_buffer"],
            "sd_lr": sd["param_groups"][0]["lr"], "sd_keys": sorted(sd["state"].keys()),
            "backup_left": "backup_params" in opt.state[model[0].weight],
        }  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------- LARC


@program
def optr_larc_apex_clip_and_scale_modes(torch):
    """NVIDIA apex's LARC: a plain object wrapping SGD (``state``/``param_groups`` properties with
    a setter, ``__getstate__``), which zeroes the group's weight decay, folds it into the gradient
    itself and scales the gradient by ``trust_coefficient * ||w|| / (||g|| + wd ||w|| + eps)``,
    clipped to the group's lr with Python's ``min`` on a 0-d tensor in ``clip`` mode; the weight
    decays are put back after the inner step."""
    F = torch.nn.functional

    class LARC:
        def __init__(self, optimizer, trust_coefficient=0.02, clip=True, eps=1e-8):
            self.optim = optimizer
            self.trust_coefficient = trust_coefficient
            self.eps = eps
            self.clip = clip

        def __getstate__(self):
            return self.optim.__getstate__()

        def __setstate__(self, state):
            self.optim.__setstate__(state)

        @property
        def state(self):
            return self.optim.state

        def __repr__(self):
            return self.optim.__repr__()

        @property
        def param_groups(self):
            return self.optim.param_groups

        @param_groups.setter
        def param_groups(self, value):
            self.optim.param_groups = value

        def state_dict(self):
            return self.optim.state_dict()

        def load_state_dict(self, state_dict):
            self.optim.load_state_dict(state_dict)

        def zero_grad(self):
            self.optim.zero_grad()

        def add_param_group(self, param_group):
            self.optim.add_param_group(param_group)

        def step(self):
            with torch.no_grad():
                weight_decays = []
                for group in self.optim.param_groups:
                    weight_decay = group["weight_decay"] if "weight_decay" in group else 0
                    weight_decays.append(weight_decay)
                    group["weight_decay"] = 0
                    for p in group["params"]:
                        if p.grad is None:
                            continue
                        param_norm = torch.norm(p.data)
                        grad_norm = torch.norm(p.grad.data)
                        if param_norm != 0 and grad_norm != 0:
                            adaptive_lr = (
                                self.trust_coefficient
                                * (param_norm)
                                / (grad_norm + param_norm * weight_decay + self.eps)
                            )
                            if self.clip:
                                adaptive_lr = min(adaptive_lr / group["lr"], 1)
                            p.grad.data += weight_decay * p.data
                            p.grad.data *= adaptive_lr
            self.optim.step()
            for i, group in enumerate(self.optim.param_groups):
                group["weight_decay"] = weight_decays[i]

    x, y = _data(30)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for clip in (True, False):
        model = _net(torch, seed=31, act="ReLU")
        decay = [p for n, p in model.named_parameters() if "bias" not in n]
        no_decay = [p for n, p in model.named_parameters() if "bias" in n]
        base = torch.optim.SGD([{"params": decay, "weight_decay": 5e-3},
                                {"params": no_decay, "weight_decay": 0.0}],
                               lr=0.5 if clip else 1.0, momentum=0.9)  # fmt: skip
        opt = LARC(base, trust_coefficient=0.02, clip=clip)
        losses, grad_scales = [], []
        for step in range(4):
            if step == 2:
                opt.param_groups[1]["lr"] = 0.05
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            raw = model[0].weight.grad.norm().item()
            opt.step()
            grad_scales.append(model[0].weight.grad.norm().item() / raw)
            losses.append(loss.item())
        out["clip" if clip else "scale"] = {
            "losses": losses, "grad_scales": grad_scales, "params": params(model),
            "wds": [g["weight_decay"] for g in opt.param_groups],
            "buf": opt.state[model[0].weight]["momentum_buffer"],
            "repr_head": repr(opt).splitlines()[0],
        }  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------- LAMB


@program
def optr_lamb_foreach_norm_global_clip_nvlamb(torch):
    """LAMB in the multi-tensor style of NVIDIA's FusedLAMB, in plain PyTorch: one global gradient
    norm from ``torch._foreach_norm`` stacked, gradients divided by ``max(norm / max_grad_norm,
    1)``, bias-corrected Adam moments, ``adam_w_mode`` (decoupled) or L2 decay, and the trust ratio
    ``||w|| / ||u||`` through ``torch.where``, applied to every parameter only under
    ``use_nvlamb``; the ratios go into the state for logging."""
    F = torch.nn.functional

    class Lamb(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-6,
                     weight_decay=0.01, adam_w_mode=True, grad_averaging=True, max_grad_norm=1.0,
                     use_nvlamb=False):  # fmt: skip
            defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps,
                            weight_decay=weight_decay, grad_averaging=grad_averaging,
                            max_grad_norm=max_grad_norm)  # fmt: skip
            super().__init__(params, defaults)
            self.adam_w_mode = adam_w_mode
            self.use_nvlamb = use_nvlamb

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            grads = [p.grad for group in self.param_groups for p in group["params"]
                     if p.grad is not None]  # fmt: skip
            global_grad_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            max_grad_norm = self.defaults["max_grad_norm"]
            clip = torch.clamp(global_grad_norm / max_grad_norm, min=1.0)
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                beta3 = 1 - beta1 if group["grad_averaging"] else 1.0
                group["step"] = group.get("step", 0) + 1
                step = group["step"]
                bc1 = 1 - beta1**step if group["bias_correction"] else 1.0
                bc2 = 1 - beta2**step if group["bias_correction"] else 1.0
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad / clip
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                    if not self.adam_w_mode and group["weight_decay"] != 0:
                        grad = grad.add(p, alpha=group["weight_decay"])
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    m.mul_(beta1).add_(grad, alpha=beta3)
                    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    update = (m / bc1) / ((v / bc2).sqrt() + group["eps"])
                    if self.adam_w_mode and group["weight_decay"] != 0:
                        update.add_(p, alpha=group["weight_decay"])
                    if group["weight_decay"] != 0 or self.use_nvlamb:
                        w_norm = p.norm(2.0)
                        u_norm = update.norm(2.0)
                        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm,
                                            torch.ones_like(w_norm))  # fmt: skip
                    else:
                        ratio = torch.ones((), dtype=p.dtype)
                    state["trust_ratio"] = ratio
                    p.add_(update * ratio, alpha=-group["lr"])
            self.global_grad_norm = global_grad_norm
            return loss

    x, y = _data(40, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for name, kw in {"adamw": dict(adam_w_mode=True, use_nvlamb=False),
                     "l2_nvlamb": dict(adam_w_mode=False, use_nvlamb=True)}.items():  # fmt: skip
        model = _net(torch, seed=41, h=10)
        no_decay = ["bias"]
        groups = [
            {"params": [p for n, p in model.named_parameters()
                        if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters()
                        if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
        ]  # fmt: skip
        opt = Lamb(groups, lr=0.05, max_grad_norm=0.5, **kw)
        losses, gnorms, ratios = [], [], []
        for _ in range(4):

            def closure(opt=opt, model=model):
                opt.zero_grad()
                loss = F.cross_entropy(model(X), Y)
                loss.backward()
                return loss

            losses.append(opt.step(closure).item())
            gnorms.append(opt.global_grad_norm.item())
            ratios.append([float(opt.state[p]["trust_ratio"]) for p in model.parameters()])
        out[name] = {"losses": losses, "gnorms": gnorms, "ratios": ratios, "params": params(model),
                     "steps": [g["step"] for g in opt.param_groups],
                     "v": opt.state[model[2].weight]["exp_avg_sq"]}  # fmt: skip
    return out


# -------------------------------------------------------------------------------------- NFNet AGC


@program
def optr_nfnet_sgd_agc_weight_standardized_convs(torch):
    """NFNets (Brock et al.) in PyTorch: scaled weight standardisation (``torch.var_mean`` over
    each filter, a learnable gain, ``rsqrt`` of ``var * fan_in``), the scaled ReLU ``gamma``, and
    SGD with adaptive gradient clipping as an ``Optimizer``: unit-wise norms (per output unit,
    ``keepdim``), ``max(||W||, eps) * clipping`` as the bound, ``torch.where`` choosing the clipped
    gradient, the final classifier excluded through its parameter group, Nesterov momentum."""
    nn, F = torch.nn, torch.nn.functional

    class WSConv2d(nn.Conv2d):
        def __init__(self, *args, eps=1e-4, **kwargs):
            super().__init__(*args, **kwargs)
            self.gain = nn.Parameter(torch.ones(self.out_channels, 1, 1, 1))
            self.eps = eps

        def standardized_weight(self):
            fan_in = self.weight[0].numel()
            var, mean = torch.var_mean(self.weight, dim=(1, 2, 3), keepdim=True, unbiased=False)
            scale = torch.rsqrt(torch.clamp(var * fan_in, min=self.eps)) * self.gain
            shift = mean * scale
            return self.weight * scale - shift

        def forward(self, x):
            return F.conv2d(x, self.standardized_weight(), self.bias, self.stride, self.padding)

    gamma_relu = 1.7139588594436646

    class NFNetLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = WSConv2d(2, 4, 3, padding=1)
            self.conv = WSConv2d(4, 4, 3, padding=1)
            self.alpha, self.beta = 0.2, 1.0
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            h = self.stem(x)
            out = F.relu(h) * gamma_relu / self.beta
            h = h + self.alpha * self.conv(out)
            return self.fc(F.relu(h).mean(dim=(2, 3)))

    def unitwise_norm(x):
        if x.ndim <= 1:
            return x.norm(p=2)
        return x.norm(p=2, dim=tuple(range(1, x.ndim)), keepdim=True)

    class SGD_AGC(torch.optim.Optimizer):
        def __init__(self, named_params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                     nesterov=False, clipping=1e-2, eps=1e-3, ignore_agc=("fc",)):  # fmt: skip
            groups = [{"params": [p], "name": n, "agc": n.split(".")[0] not in ignore_agc}
                      for n, p in named_params]  # fmt: skip
            defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                            weight_decay=weight_decay, nesterov=nesterov, clipping=clipping,
                            eps=eps)  # fmt: skip
            super().__init__(groups, defaults)
            self.triggered = {}

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if group["agc"]:
                        param_norm = torch.max(unitwise_norm(p.detach()),
                                               torch.tensor(group["eps"]).to(p.device))  # fmt: skip
                        grad_norm = unitwise_norm(p.grad.detach())
                        max_norm = param_norm * group["clipping"]
                        trigger = grad_norm > max_norm
                        clipped_grad = p.grad * (
                            max_norm / torch.max(grad_norm, torch.tensor(1e-6).to(grad_norm.device))
                        )
                        p.grad.detach().copy_(torch.where(trigger, clipped_grad, p.grad))
                        self.triggered[group["name"]] = trigger.float().mean().item()
                    d_p = p.grad
                    if group["weight_decay"] != 0:
                        d_p = d_p.add(p, alpha=group["weight_decay"])
                    if group["momentum"] != 0:
                        param_state = self.state[p]
                        if "momentum_buffer" not in param_state:
                            buf = param_state["momentum_buffer"] = torch.clone(d_p).detach()
                        else:
                            buf = param_state["momentum_buffer"]
                            buf.mul_(group["momentum"]).add_(d_p, alpha=1 - group["dampening"])
                        if group["nesterov"]:
                            d_p = d_p.add(buf, alpha=group["momentum"])
                        else:
                            d_p = buf
                    p.add_(d_p, alpha=-group["lr"])
            return loss

    labels = ints(50, 3, 8)
    x = arr(51, 3, 2, 5, 5)[labels] + arr(52, 8, 2, 5, 5, scale=0.5)
    X, Y = torch.tensor(x), torch.tensor(labels)
    model = set_weights(torch, NFNetLite(), seed=53)
    with torch.no_grad():
        model.stem.gain.fill_(1.0)
        model.conv.gain.fill_(1.0)
    opt = SGD_AGC(model.named_parameters(), lr=0.2, momentum=0.9, nesterov=True,
                  weight_decay=2e-5, clipping=0.05)  # fmt: skip
    losses, triggered = [], []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        triggered.append(dict(sorted(opt.triggered.items())))
    return {"losses": losses, "triggered": triggered, "params": params(model),
            "std_weight": model.conv.standardized_weight(),
            "names": [g["name"] for g in opt.param_groups],
            "agc": [g["agc"] for g in opt.param_groups],
            "unitwise": unitwise_norm(model.stem.weight)}  # fmt: skip


# ------------------------------------------------------------------------------------------- Lion


@program
def optr_lion_paper_cautious_mask_warmup_cosine(torch):
    """Lion as the paper's appendix writes it (``update = exp_avg * beta1 + grad * (1 - beta1)``,
    ``p.add_(torch.sign(update), alpha=-lr)``, then the EMA with ``beta2``) under a LambdaLR
    linear-warmup cosine schedule, and the "cautious" variant (Liang et al.) that masks update
    coordinates whose sign disagrees with the gradient and rescales by the mask's mean."""
    F = torch.nn.functional

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, cautious=False):
            if not 0.0 <= lr:
                raise ValueError("Invalid learning rate: {}".format(lr))  # noqa: UP032
            defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, cautious=cautious)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data.mul_(1 - group["lr"] * group["weight_decay"])
                    grad = p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    exp_avg = state["exp_avg"]
                    beta1, beta2 = group["betas"]
                    update = exp_avg * beta1 + grad * (1 - beta1)
                    if group["cautious"]:
                        mask = (update * grad > 0).to(grad.dtype)
                        mask.div_(mask.mean().clamp_(min=1e-3))
                        state["mask_frac"] = (mask > 0).float().mean()
                        p.add_(torch.sign(update) * mask, alpha=-group["lr"])
                    else:
                        p.add_(torch.sign(update), alpha=-group["lr"])
                    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
            return loss

    def warmup_cosine(warmup, total):
        def lr_lambda(step):
            if step < warmup:
                return float(step + 1) / float(max(1, warmup))
            progress = float(step - warmup) / float(max(1, total - warmup))
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

        return lr_lambda

    x, y = _data(60)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for cautious in (False, True):
        model = _net(torch, seed=61)
        opt = Lion(model.parameters(), lr=2e-2, betas=(0.9, 0.99), weight_decay=0.1,
                   cautious=cautious)  # fmt: skip
        sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(2, 6))
        losses, lrs = [], []
        for _ in range(5):
            loss = opt.step(lambda opt=opt, model=model: _lion_closure(torch, F, opt, model, X, Y))
            sched.step()
            losses.append(loss.item())
            lrs.append(sched.get_last_lr()[0])
        entry = {"losses": losses, "lrs": lrs, "params": params(model),
                 "exp_avg": opt.state[model[0].weight]["exp_avg"]}  # fmt: skip
        if cautious:
            entry["mask_frac"] = [opt.state[p]["mask_frac"] for p in model.parameters()]
        out["cautious" if cautious else "lion"] = entry
    return out


def _lion_closure(torch, F, opt, model, X, Y):
    opt.zero_grad()
    loss = F.cross_entropy(model(X), Y)
    loss.backward()
    return loss


# ------------------------------------------------------------------------- Sophia-H (Hutchinson)


@program
def optr_sophia_h_hutchinson_fixed_probes(torch):
    """Sophia with the Hutchinson estimator (Liu et al.'s Sophia-H): every ``k`` steps, Rademacher
    probes ``u`` (fixed NumPy draws here), ``Hu`` from ``torch.autograd.grad`` of the
    ``create_graph=True`` gradients with ``grad_outputs=u``, the diagonal estimate ``u * Hu`` in an
    EMA; the step ``clamp(|m| / (rho * h + eps), max=1) * sign(m)`` with decoupled decay."""
    F = torch.nn.functional

    class SophiaH(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.965, 0.99), rho=0.04, weight_decay=1e-1,
                     eps=1e-4, update_period=2):  # fmt: skip
            defaults = dict(lr=lr, betas=betas, rho=rho, weight_decay=weight_decay, eps=eps,
                            update_period=update_period)  # fmt: skip
            super().__init__(params, defaults)
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["hessian"] = torch.zeros_like(p)

        @torch.no_grad()
        def update_hessian(self, probes, hvps):
            for group in self.param_groups:
                _, beta2 = group["betas"]
                for p in group["params"]:
                    u, hu = probes[p], hvps[p]
                    self.state[p]["hessian"].mul_(beta2).addcmul_(u, hu, value=1 - beta2)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                beta1, _ = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    state["step"] += 1
                    state["exp_avg"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    # the paper's clip(m / max(rho * h, eps), 1): h from probes can be negative
                    denom = torch.clamp(group["rho"] * state["hessian"], min=group["eps"])
                    ratio = (state["exp_avg"].abs() / denom).clamp(None, 1)
                    p.addcmul_(state["exp_avg"].sign(), ratio, value=-group["lr"])
            return loss

    x, y = _data(70)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = _net(torch, seed=71)
    opt = SophiaH(model.parameters(), lr=0.02, rho=0.05, weight_decay=0.1, update_period=2)
    ps = list(model.parameters())
    losses, hess_traces = [], []
    for step in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        if step % opt.defaults["update_period"] == 0:
            grads = torch.autograd.grad(loss, ps, create_graph=True)
            probes = {p: torch.tensor(_rademacher(700 + 10 * step + i, tuple(p.shape)))
                      for i, p in enumerate(ps)}  # fmt: skip
            hvps = torch.autograd.grad(grads, ps, grad_outputs=[probes[p] for p in ps])
            opt.update_hessian(probes, dict(zip(ps, hvps)))
            for p, g in zip(ps, grads):
                p.grad = g.detach()
            hess_traces.append(sum(opt.state[p]["hessian"].sum().item() for p in ps))
        else:
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "hess_traces": hess_traces, "params": params(model),
            "hessian": {n: opt.state[p]["hessian"] for n, p in model.named_parameters()},
            "steps": [opt.state[p]["step"] for p in ps]}  # fmt: skip


# ------------------------------------------------------------------------------------- AdaHessian


@program
def optr_adahessian_spatial_averaging_conv(torch):
    """AdaHessian (Yao et al.): ``get_trace`` gets Hutchinson's ``|v * Hv|`` (probes fixed here) for
    every parameter, averages it over each 3x3 kernel for conv weights (``mean(dim=[2, 3],
    keepdim=True)`` then ``expand_as``), and ``step`` keeps the squared-Hessian EMA with the
    ``hessian_power`` exponent, bias corrections and decoupled decay; ``zero_hessian``-style
    ``backward(create_graph=True)`` supplies the graph."""
    nn, F = torch.nn, torch.nn.functional

    class Adahessian(torch.optim.Optimizer):
        def __init__(self, params, lr=0.15, betas=(0.9, 0.999), eps=1e-4, weight_decay=0.0,
                     hessian_power=1.0, seed=0):  # fmt: skip
            if not 0.0 <= hessian_power <= 1.0:
                raise ValueError(f"Invalid Hessian power value: {hessian_power}")
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            hessian_power=hessian_power)  # fmt: skip
            super().__init__(params, defaults)
            self.seed = seed
            self.draws = 0

        def get_trace(self, params, grads):
            v = [torch.tensor(_rademacher(self.seed + 31 * self.draws + i, tuple(p.shape)))
                 for i, p in enumerate(params)]  # fmt: skip
            self.draws += 1
            hvs = torch.autograd.grad(grads, params, grad_outputs=v, only_inputs=True,
                                      retain_graph=False)  # fmt: skip
            hutchinson_trace = []
            for hv, vi in zip(hvs, v):
                param_size = hv.size()
                if len(param_size) <= 2:
                    hutchinson_trace.append(torch.abs(hv * vi))
                elif len(param_size) == 4:
                    tmp = torch.abs(hv * vi).mean(dim=[2, 3], keepdim=True)
                    hutchinson_trace.append(tmp.expand_as(hv))
            return hutchinson_trace

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            params, groups, grads = [], [], []
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        params.append(p)
                        groups.append(group)
                        grads.append(p.grad)
            hut_traces = self.get_trace(params, grads)
            for p, group, grad, hut_trace in zip(params, groups, grads, hut_traces):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p.data)
                    state["exp_hessian_diag_sq"] = torch.zeros_like(p.data)
                exp_avg, exp_hessian_diag_sq = state["exp_avg"], state["exp_hessian_diag_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(grad.detach(), alpha=1 - beta1)
                exp_hessian_diag_sq.mul_(beta2).addcmul_(hut_trace, hut_trace, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]
                k = group["hessian_power"]
                denom = ((exp_hessian_diag_sq.sqrt() ** k) / math.sqrt(bias_correction2) ** k).add_(
                    group["eps"]
                )
                step_size = group["lr"] / bias_correction1
                with torch.no_grad():
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.addcdiv_(exp_avg, denom, value=-step_size)
            return loss

    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.Tanh(), nn.Conv2d(3, 2, 3), nn.Tanh(),
                          nn.Flatten(), nn.Linear(2 * 2 * 2, 3))  # fmt: skip
    set_weights(torch, model, seed=80)
    labels = ints(81, 3, 6)
    X = torch.tensor(arr(82, 3, 1, 6, 6)[labels] + arr(83, 6, 1, 6, 6, scale=0.4))
    Y = torch.tensor(labels)
    opt = Adahessian(model.parameters(), lr=0.1, weight_decay=1e-3, hessian_power=0.5, seed=900)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        loss.backward(create_graph=True)
        opt.step()
        losses.append(loss.item())
    for p in model.parameters():
        p.grad = None
    st = opt.state[model[0].weight]
    return {"losses": losses, "params": params(model), "hess_sq": st["exp_hessian_diag_sq"],
            "kernel_constant": bool((st["exp_hessian_diag_sq"]
                                     == st["exp_hessian_diag_sq"][:, :, :1, :1]).all()),
            "fc_hess_sq": opt.state[model[5].weight]["exp_hessian_diag_sq"]}  # fmt: skip


# ------------------------------------------------------------------------------------------- SOAP


@program
def optr_soap_adam_in_shampoo_eigenbasis(torch):
    """SOAP (Vyas et al.): Shampoo's Kronecker factors ``G G^T`` kept as an EMA, their eigenbases
    from ``torch.linalg.eigh`` (flipped to descending order) on the first step, which only
    initialises, then refreshed every ``precondition_frequency`` steps by one power iteration and
    ``torch.linalg.qr``, re-sorting ``exp_avg_sq`` with ``index_select`` and carrying ``exp_avg``
    from the old basis to the new; Adam runs on the
    projected gradient (``tensordot`` over each dim), dims above ``max_precond_dim`` and 1-d
    parameters stay unprojected. Results avoid the bases themselves (their signs are arbitrary)."""
    F = torch.nn.functional

    class SOAP(torch.optim.Optimizer):
        def __init__(self, params, lr=3e-3, betas=(0.95, 0.95), shampoo_beta=-1, eps=1e-8,
                     weight_decay=0.01, precondition_frequency=10, max_precond_dim=10000):  # fmt: skip
            defaults = {"lr": lr, "betas": betas, "shampoo_beta": shampoo_beta, "eps": eps,
                        "weight_decay": weight_decay,
                        "precondition_frequency": precondition_frequency,
                        "max_precond_dim": max_precond_dim}  # fmt: skip
            super().__init__(params, defaults)

        def init_preconditioner(self, grad, state, max_precond_dim):
            state["GG"] = []
            if grad.dim() == 1:
                state["GG"].append([])
            else:
                for sh in grad.shape:
                    if sh > max_precond_dim:
                        state["GG"].append([])
                    else:
                        state["GG"].append(torch.zeros(sh, sh, device=grad.device))
            state["Q"] = None

        def project(self, grad, state):
            for mat in state["Q"]:
                if len(mat) > 0:
                    grad = torch.tensordot(grad, mat, dims=[[0], [0]])
                else:
                    grad = grad.permute([*range(1, len(grad.shape))] + [0])
            return grad

        def project_back(self, grad, state):
            for mat in state["Q"]:
                if len(mat) > 0:
                    grad = torch.tensordot(grad, mat, dims=[[0], [1]])
                else:
                    grad = grad.permute([*range(1, len(grad.shape))] + [0])
            return grad

        def update_preconditioner(self, grad, state, beta):
            for idx in range(grad.dim()):
                if len(state["GG"][idx]) > 0:
                    outer = torch.tensordot(
                        grad, grad, dims=[[*range(idx), *range(idx + 1, grad.dim())]] * 2
                    )
                    state["GG"][idx].lerp_(outer, 1 - beta)
            if state["Q"] is None:
                state["Q"] = self.get_orthogonal_matrix(state["GG"])
            elif state["step"] > 0 and state["step"] % state["precondition_frequency"] == 0:
                state["exp_avg"] = self.project_back(state["exp_avg"], state)  # to the old basis
                state["Q"] = self.get_orthogonal_matrix_QR(state)
                state["exp_avg"] = self.project(state["exp_avg"], state)  # into the new one

        def get_orthogonal_matrix(self, mats):
            final = []
            for m in mats:
                if len(m) == 0:
                    final.append([])
                    continue
                _, Q = torch.linalg.eigh(m + 1e-30 * torch.eye(m.shape[0], device=m.device))
                final.append(torch.flip(Q, [1]))
            return final

        def get_orthogonal_matrix_QR(self, state):
            final = []
            exp_avg_sq = state["exp_avg_sq"]
            for ind, (m, o) in enumerate(zip(state["GG"], state["Q"])):
                if len(m) == 0:
                    final.append([])
                    continue
                est_eig = torch.diag(o.T @ m @ o)
                sort_idx = torch.argsort(est_eig, descending=True)
                exp_avg_sq = exp_avg_sq.index_select(ind, sort_idx)
                o = o[:, sort_idx]
                power_iter = m @ o
                Q, _ = torch.linalg.qr(power_iter)
                final.append(Q)
            state["exp_avg_sq"] = exp_avg_sq
            return final

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    state = self.state[p]
                    if "step" not in state:
                        state["step"] = 0
                    if "exp_avg" not in state:
                        state["exp_avg"] = torch.zeros_like(grad)
                        state["exp_avg_sq"] = torch.zeros_like(grad)
                    if "Q" not in state:
                        state["precondition_frequency"] = group["precondition_frequency"]
                        self.init_preconditioner(grad, state, group["max_precond_dim"])
                        beta = (
                            group["shampoo_beta"]
                            if group["shampoo_beta"] >= 0
                            else group["betas"][1]
                        )
                        self.update_preconditioner(grad, state, beta)
                        continue  # the first step only sets up the preconditioner
                    grad_projected = self.project(grad, state)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    exp_avg.mul_(beta1).add_(grad_projected, alpha=1.0 - beta1)
                    exp_avg_sq.mul_(beta2).add_(grad_projected.square(), alpha=1.0 - beta2)
                    denom = exp_avg_sq.sqrt().add_(group["eps"])
                    step_size = group["lr"]
                    bias_correction1 = 1.0 - beta1 ** (state["step"])
                    bias_correction2 = 1.0 - beta2 ** (state["step"])
                    step_size = step_size * (bias_correction2**0.5) / bias_correction1
                    norm_grad = self.project_back(exp_avg / denom, state)
                    p.add_(norm_grad, alpha=-step_size)
                    if group["weight_decay"] > 0.0:
                        p.add_(p, alpha=(-group["lr"] * group["weight_decay"]))
                    beta = group["shampoo_beta"] if group["shampoo_beta"] >= 0 else beta2
                    self.update_preconditioner(grad, state, beta)
            return loss

    # A regression (cross-entropy's gradients sum to zero over classes, which would leave the
    # head's factors with repeated zero eigenvalues: an arbitrary basis, and Adam is not
    # rotation-invariant). Factors over 4 wide stay unprojected: 4x6's right factor has rank 4.
    X = torch.tensor(arr(90, 32, 6))
    Y = torch.tanh(X @ torch.tensor(arr(92, 6, 3, scale=0.6))) + torch.tensor(
        arr(93, 32, 3, scale=0.1)
    )
    model = _net(torch, seed=91, h=4)  # weights 4x6 and 3x4
    opt = SOAP(model.parameters(), lr=0.03, betas=(0.9, 0.95), weight_decay=0.01,
               precondition_frequency=2, max_precond_dim=4)  # fmt: skip
    losses = []
    for step in range(6):  # two mini-batches in turn (the first step's gradient builds the bases:
        # reused as is, its projection would be diagonal up to rounding, which Adam then amplifies)
        xb, yb = X[step % 2 :: 2], Y[step % 2 :: 2]
        opt.zero_grad()
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    st0, st2 = opt.state[model[0].weight], opt.state[model[2].weight]

    def eigs(st, i):  # the estimated eigenvalues of each factor: basis-independent
        q = st["Q"][i]
        return torch.diag(q.T @ st["GG"][i] @ q)

    return {"losses": losses, "params": params(model),
            "gg_kept": [[len(g) > 0 for g in st0["GG"]], [len(g) > 0 for g in st2["GG"]]],
            "eigs_w0_left": eigs(st0, 0), "eigs_w2_left": eigs(st2, 0), "eigs_w2_right": eigs(st2, 1),
            "gg_w0": st0["GG"][0], "exp_avg_sq_w0_sum": st0["exp_avg_sq"].sum(),
            "steps": [opt.state[p]["step"] for p in model.parameters()]}  # fmt: skip


# ------------------------------------------------------------------------------------------- LLRD


@program
def optr_layerwise_lr_decay_electra_param_groups(torch):
    """Layer-wise learning-rate decay as ELECTRA/BERT fine-tuning scripts write it for a tiny
    post-LN encoder: one group per (depth, decay/no-decay) pair from the parameter names
    (``no_decay = ["bias", "LayerNorm.weight"]``), lr ``base_lr * decay ** (num_layers + 1 -
    depth)``, AdamW with a linear warmup-then-decay ``LambdaLR`` that scales every group's own
    initial lr, and the group lrs read back each step."""
    nn, F = torch.nn, torch.nn.functional

    class Layer(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.intermediate = nn.Linear(d, 16)
            self.output = nn.Linear(16, d)
            self.LayerNorm = nn.LayerNorm(d)
            self.LayerNorm2 = nn.LayerNorm(d)

        def forward(self, h, mask):
            q, k, v = self.query(h), self.key(h), self.value(h)
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
            scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
            h = self.LayerNorm(h + scores.softmax(-1) @ v)
            return self.LayerNorm2(h + self.output(F.gelu(self.intermediate(h))))

    class TinyElectra(nn.Module):
        def __init__(self, vocab=12, d=8, n_layers=2, n_labels=2):
            super().__init__()
            self.embeddings = nn.Module()
            self.embeddings.word_embeddings = nn.Embedding(vocab, d)
            self.embeddings.position_embeddings = nn.Embedding(6, d)
            self.embeddings.LayerNorm = nn.LayerNorm(d)
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList([Layer(d) for _ in range(n_layers)])
            self.classifier = nn.Linear(d, n_labels)

        def forward(self, ids, mask):
            pos = torch.arange(ids.size(1)).unsqueeze(0)
            e = self.embeddings
            h = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos))
            for layer in self.encoder.layer:
                h = layer(h, mask)
            return self.classifier(h[:, 0])

    def get_depth(name, num_layers):
        if name.startswith("embeddings"):
            return 0
        if name.startswith("encoder.layer."):
            return int(name.split(".")[2]) + 1
        return num_layers + 1

    def grouped_parameters(model, base_lr, decay, weight_decay, num_layers):
        no_decay = ["bias", "LayerNorm.weight", "LayerNorm2.weight"]
        groups = {}
        for n, p in model.named_parameters():
            if not p.requires_grad:
                continue
            depth = get_depth(n, num_layers)
            wd = 0.0 if any(nd in n for nd in no_decay) else weight_decay
            key = f"layer_{depth}_{'no_decay' if wd == 0.0 else 'decay'}"
            if key not in groups:
                scale = decay ** (num_layers + 1 - depth)
                groups[key] = {"params": [], "param_names": [], "weight_decay": wd,
                               "lr": base_lr * scale, "name": key}  # fmt: skip
            groups[key]["params"].append(p)
            groups[key]["param_names"].append(n)
        return list(groups.values())

    def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
        def lr_lambda(current_step):
            if current_step < num_warmup_steps:
                return float(current_step) / float(max(1, num_warmup_steps))
            return max(0.0, float(num_training_steps - current_step)
                       / float(max(1, num_training_steps - num_warmup_steps)))  # fmt: skip

        return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    model = set_weights(torch, TinyElectra(), seed=100)
    ids = torch.tensor(ints(101, 12, 6, 5))
    mask = torch.tensor(np.array([[1] * 5, [1] * 4 + [0], [1] * 3 + [0] * 2] * 2, dtype=bool))
    labels = torch.tensor(ints(102, 2, 6))
    groups = grouped_parameters(model, base_lr=5e-2, decay=0.8, weight_decay=0.01, num_layers=2)
    opt = torch.optim.AdamW(groups, lr=5e-2, betas=(0.9, 0.98), eps=1e-6)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=6)
    losses, lrs = [], []
    for _ in range(4):
        loss = F.cross_entropy(model(ids, mask), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
        lrs.append([round(g["lr"], 8) for g in opt.param_groups])
    return {"losses": losses, "lrs": lrs, "params": params(model),
            "names": [g["name"] for g in opt.param_groups],
            "initial_lrs": [g["initial_lr"] for g in opt.param_groups],
            "group_sizes": [len(g["params"]) for g in opt.param_groups],
            "wds": [g["weight_decay"] for g in opt.param_groups],
            "sd_names": opt.state_dict()["param_groups"][3]["param_names"]}  # fmt: skip


# ------------------------------------------------------------------------------------------ K-FAC


@program
def optr_kfac_hooks_eigen_kl_clip(torch):
    """A K-FAC optimizer in the style of alecwangcq/KFAC-Pytorch: a forward pre-hook and a full
    backward hook on every Linear collect ``a^T a`` (with a ones column for the bias) and
    ``g^T g * batch`` into running averages that start at the identity, eigen decompositions every
    ``TInv`` steps with small eigenvalues zeroed, the natural gradient ``Q_g (Q_g^T G Q_a / (d_g
    d_a^T + damping)) Q_a^T`` split back into weight and bias, KL clipping with ``.item()``, then SGD
    with momentum. Results keep to basis-independent quantities."""
    nn, F = torch.nn, torch.nn.functional

    def update_running_stat(aa, m_aa, stat_decay):
        m_aa *= stat_decay / (1 - stat_decay)
        m_aa += aa
        m_aa *= 1 - stat_decay

    class KFACOptimizer(torch.optim.Optimizer):
        def __init__(self, model, lr=0.01, momentum=0.9, stat_decay=0.95, damping=0.001,
                     kl_clip=0.001, weight_decay=0, TCov=1, TInv=2, batch_averaged=True):  # fmt: skip
            defaults = dict(lr=lr, momentum=momentum, damping=damping, weight_decay=weight_decay)
            super().__init__(model.parameters(), defaults)
            self.batch_averaged = batch_averaged
            self.known_modules = {"Linear"}
            self.modules = []
            self.model = model
            self.m_aa, self.m_gg = {}, {}
            self.Q_a, self.Q_g = {}, {}
            self.d_a, self.d_g = {}, {}
            self.stat_decay = stat_decay
            self.kl_clip = kl_clip
            self.TCov, self.TInv = TCov, TInv
            self.steps = 0
            self.acc_stats = True
            self.vg_sums = []
            self._prepare_model()

        def _save_input(self, module, input):
            if torch.is_grad_enabled() and self.steps % self.TCov == 0:
                a = input[0].data
                if module.bias is not None:
                    a = torch.cat([a, a.new(a.size(0), 1).fill_(1)], 1)
                aa = a.t() @ (a / a.size(0))
                if self.steps == 0:
                    self.m_aa[module] = torch.diag(aa.new(aa.size(0)).fill_(1))
                update_running_stat(aa, self.m_aa[module], self.stat_decay)

        def _save_grad_output(self, module, grad_input, grad_output):
            if self.acc_stats and self.steps % self.TCov == 0:
                g = grad_output[0].data
                batch_size = g.size(0)
                gg = g.t() @ (g * batch_size) if self.batch_averaged else g.t() @ (g / batch_size)
                if self.steps == 0:
                    self.m_gg[module] = torch.diag(gg.new(gg.size(0)).fill_(1))
                update_running_stat(gg, self.m_gg[module], self.stat_decay)

        def _prepare_model(self):
            for module in self.model.modules():
                classname = module.__class__.__name__
                if classname in self.known_modules:
                    self.modules.append(module)
                    module.register_forward_pre_hook(self._save_input)
                    module.register_full_backward_hook(self._save_grad_output)

        def _update_inv(self, m):
            eps = 1e-10
            self.d_a[m], self.Q_a[m] = torch.linalg.eigh(self.m_aa[m])
            self.d_g[m], self.Q_g[m] = torch.linalg.eigh(self.m_gg[m])
            self.d_a[m].mul_((self.d_a[m] > eps).float())
            self.d_g[m].mul_((self.d_g[m] > eps).float())

        @staticmethod
        def _get_matrix_form_grad(m):
            p_grad_mat = m.weight.grad.data
            if m.bias is not None:
                p_grad_mat = torch.cat([p_grad_mat, m.bias.grad.data.view(-1, 1)], 1)
            return p_grad_mat

        def _get_natural_grad(self, m, p_grad_mat, damping):
            v1 = self.Q_g[m].t() @ p_grad_mat @ self.Q_a[m]
            v2 = v1 / (self.d_g[m].unsqueeze(1) * self.d_a[m].unsqueeze(0) + damping)
            v = self.Q_g[m] @ v2 @ self.Q_a[m].t()
            if m.bias is not None:
                v = [v[:, :-1], v[:, -1:]]
                v[0] = v[0].view(m.weight.grad.data.size())
                v[1] = v[1].view(m.bias.grad.data.size())
            else:
                v = [v.view(m.weight.grad.data.size())]
            return v

        def _kl_clip_and_update_grad(self, updates, lr):
            vg_sum = 0
            for m in self.modules:
                v = updates[m]
                vg_sum += (v[0] * m.weight.grad.data * lr**2).sum().item()
                if m.bias is not None:
                    vg_sum += (v[1] * m.bias.grad.data * lr**2).sum().item()
            nu = min(1.0, math.sqrt(self.kl_clip / vg_sum))
            self.vg_sums.append(vg_sum)
            for m in self.modules:
                v = updates[m]
                m.weight.grad.data.copy_(v[0])
                m.weight.grad.data.mul_(nu)
                if m.bias is not None:
                    m.bias.grad.data.copy_(v[1])
                    m.bias.grad.data.mul_(nu)
            return nu

        def _step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad.data
                    if group["weight_decay"] != 0 and self.steps >= 20 * self.TCov:
                        d_p.add_(p.data, alpha=group["weight_decay"])
                    if group["momentum"] != 0:
                        param_state = self.state[p]
                        if "momentum_buffer" not in param_state:
                            buf = param_state["momentum_buffer"] = torch.zeros_like(p.data)
                            buf.mul_(group["momentum"]).add_(d_p)
                        else:
                            buf = param_state["momentum_buffer"]
                            buf.mul_(group["momentum"]).add_(d_p, alpha=1)
                        d_p = buf
                    p.data.add_(d_p, alpha=-group["lr"])

        def step(self, closure=None):
            group = self.param_groups[0]
            lr, damping = group["lr"], group["damping"]
            updates = {}
            for m in self.modules:
                if self.steps % self.TInv == 0:
                    self._update_inv(m)
                updates[m] = self._get_natural_grad(m, self._get_matrix_form_grad(m), damping)
            nu = self._kl_clip_and_update_grad(updates, lr)
            self._step()
            self.steps += 1
            return nu

    x, y = _data(110, n=32, d=5)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = set_weights(torch, nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3)), seed=111)
    opt = KFACOptimizer(model, lr=0.05, momentum=0.9, damping=0.01, kl_clip=0.0015,
                        weight_decay=1e-3, TCov=1, TInv=2)  # fmt: skip
    losses, nus = [], []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        nus.append(opt.step())
        losses.append(loss.item())
    m0 = opt.modules[0]
    return {"losses": losses, "nus": nus, "params": params(model), "m_aa": opt.m_aa[m0],
            "m_gg": opt.m_gg[opt.modules[1]], "d_a": opt.d_a[m0], "d_g": opt.d_g[m0],
            "vg_sums": opt.vg_sums, "steps": opt.steps, "n_modules": len(opt.modules)}  # fmt: skip


# ---------------------------------------------------------------------------------------- Prodigy


@program
def optr_prodigy_d_adaptation_estimate(torch):
    """konstmish/prodigy: learning-rate-free Adam whose step size ``d`` grows from ``d0`` with
    ``d_hat = d_coef * d_numerator / d_denom`` (an EMA of ``<g, x0 - x>`` over ``.item()`` dot
    products and the l1 norm of ``s``), the moments scaled by ``d`` and ``d^2``, decoupled weight
    decay, bias correction, ``safeguard_warmup`` and the group-level bookkeeping (``d``,
    ``d_max``, ``k``); a cosine schedule drives the multiplier ``lr``."""
    F = torch.nn.functional

    class Prodigy(torch.optim.Optimizer):
        def __init__(self, params, lr=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8,
                     weight_decay=0, decouple=True, use_bias_correction=False,
                     safeguard_warmup=False, d0=1e-6, d_coef=1.0, growth_rate=float("inf")):  # fmt: skip
            defaults = dict(lr=lr, betas=betas, beta3=beta3, eps=eps, weight_decay=weight_decay,
                            d=d0, d0=d0, d_max=d0, d_numerator=0.0, d_coef=d_coef, k=0,
                            growth_rate=growth_rate, use_bias_correction=use_bias_correction,
                            decouple=decouple, safeguard_warmup=safeguard_warmup)  # fmt: skip
            super().__init__(params, defaults)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            d_denom = 0.0
            group = self.param_groups[0]
            use_bias_correction = group["use_bias_correction"]
            beta1, beta2 = group["betas"]
            beta3 = group["beta3"]
            if beta3 is None:
                beta3 = math.sqrt(beta2)
            k = group["k"]
            d, d_max, d_coef = group["d"], group["d_max"], group["d_coef"]
            lr = max(group["lr"] for group in self.param_groups)
            if use_bias_correction:
                bias_correction = ((1 - beta2 ** (k + 1)) ** 0.5) / (1 - beta1 ** (k + 1))
            else:
                bias_correction = 1
            dlr = d * lr * bias_correction
            growth_rate, decouple = group["growth_rate"], group["decouple"]
            d_numerator = group["d_numerator"]
            d_numerator *= beta3
            for group in self.param_groups:
                decay, group_lr, d0 = group["weight_decay"], group["lr"], group["d0"]
                safeguard_warmup = group["safeguard_warmup"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    if decay != 0 and not decouple:
                        grad.add_(p.data, alpha=decay)
                    state = self.state[p]
                    if "step" not in state:
                        state["step"] = 0
                        state["s"] = torch.zeros_like(p.data).detach()
                        state["p0"] = p.detach().clone()
                        state["exp_avg"] = torch.zeros_like(p.data).detach()
                        state["exp_avg_sq"] = torch.zeros_like(p.data).detach()
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    s, p0 = state["s"], state["p0"]
                    if group_lr > 0.0:
                        d_numerator += (d / d0) * dlr * torch.dot(grad.flatten(),
                                                                  (p0.data - p.data).flatten()).item()  # fmt: skip
                        exp_avg.mul_(beta1).add_(grad, alpha=d * (1 - beta1))
                        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=d * d * (1 - beta2))
                        if safeguard_warmup:
                            s.mul_(beta3).add_(grad, alpha=((d / d0) * d))
                        else:
                            s.mul_(beta3).add_(grad, alpha=((d / d0) * dlr))
                        d_denom += s.abs().sum().item()
            d_hat = d
            if d_denom == 0:
                return loss
            if lr > 0.0:
                d_hat = d_coef * d_numerator / d_denom
                if d == group["d0"]:
                    d = max(d, d_hat)
                d_max = max(d_max, d_hat)
                d = min(d_max, d * growth_rate)
            for group in self.param_groups:
                group["d_numerator"] = d_numerator
                group["d_denom"] = d_denom
                group["d"] = d
                group["d_max"] = d_max
                group["d_hat"] = d_hat
                decay, k, eps = group["weight_decay"], group["k"], group["eps"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    state["step"] += 1
                    denom = exp_avg_sq.sqrt().add_(d * eps)
                    if decay != 0 and decouple:
                        p.data.add_(p.data, alpha=-decay * dlr)
                    p.data.addcdiv_(exp_avg, denom, value=-dlr)
                group["k"] = k + 1
            return loss

    x, y = _data(120, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for name, kw in {"default": dict(d0=1e-2),
                     "bc_growth": dict(d0=1e-3, use_bias_correction=True,
                                       growth_rate=1.5)}.items():  # fmt: skip
        model = _net(torch, seed=121)
        opt = Prodigy(model.parameters(), lr=1.0, weight_decay=0.01, **kw)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
        losses, ds, d_hats = [], [], []
        for _ in range(6):
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            ds.append(opt.param_groups[0]["d"])
            d_hats.append(opt.param_groups[0]["d_hat"])
        out[name] = {"losses": losses, "ds": ds, "d_hats": d_hats, "params": params(model),
                     "s": opt.state[model[0].weight]["s"], "k": opt.param_groups[0]["k"],
                     "d_max": opt.param_groups[0]["d_max"]}  # fmt: skip
    return out


# ----------------------------------------------------------------------------------- checkpoints


@program
def optr_research_optimizer_checkpoint_roundtrip(torch):
    """A research training loop's checkpointing of a custom optimizer with nested state (a Lion-
    style sign optimizer with an extra per-group counter and a list-valued state entry): the state
    dict deep-copied, a fresh optimizer (with other hyperparameters) loading it, tensors in the
    state still distinct objects, and training resuming identically to an uninterrupted run."""
    F = torch.nn.functional

    class SignumEMA(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-2, momentum=0.9, ema=0.5):
            super().__init__(params, dict(lr=lr, momentum=momentum, ema=ema, n_updates=0))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                group["n_updates"] += 1
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["momentum"] = torch.zeros_like(p)
                        state["ema_params"] = p.detach().clone()
                        state["history"] = []
                    buf = state["momentum"]
                    buf.mul_(group["momentum"]).add_(p.grad, alpha=1 - group["momentum"])
                    p.add_(torch.sign(buf), alpha=-group["lr"])
                    state["ema_params"].lerp_(p, 1 - group["ema"])
                    state["history"].append(float(buf.abs().mean()))

    x, y = _data(130)
    X, Y = torch.tensor(x), torch.tensor(y)

    def train(model, opt, steps):
        out = []
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    ref = _net(torch, seed=131)
    ref_opt = SignumEMA(ref.parameters(), lr=0.02)
    ref_losses = train(ref, ref_opt, 5)

    model = _net(torch, seed=131)
    opt = SignumEMA(model.parameters(), lr=0.02)
    first = train(model, opt, 2)
    ckpt = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict()})
    model2 = _net(torch, seed=999)
    model2.load_state_dict(ckpt["model"])
    opt2 = SignumEMA(model2.parameters(), lr=1.0, momentum=0.0)
    opt2.load_state_dict(ckpt["opt"])
    rest = train(model2, opt2, 3)
    st = opt2.state[model2[0].weight]
    return {"ref_losses": ref_losses, "resumed": first + rest, "params": params(model2),
            "ref_params": params(ref), "ema": st["ema_params"], "history": st["history"],
            "n_updates": opt2.param_groups[0]["n_updates"], "lr": opt2.param_groups[0]["lr"],
            "same_object": st["momentum"] is ckpt["opt"]["state"][0]["momentum"],
            "sd_keys": sorted(ckpt["opt"]["state"][0].keys())}  # fmt: skip
