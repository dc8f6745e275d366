"""Optimizers as popular repositories write them: subclasses of ``torch.optim.Optimizer`` with their
own ``step`` (lucidrains' Lion, transformers' Adafactor, LAMB as cybertronai and timm write it, Adan,
Sophia-G, Muon, Shampoo, SAM/ASAM, timm's Lookahead, RAdam and AdaBelief by their authors, gradient
centralization, Schedule-Free AdamW). Each trains a small model for a few steps, goes through a
``state_dict()``/``load_state_dict()`` round trip or ``add_param_group`` on the way, and returns its
losses, parameters and the state it keeps."""

from __future__ import annotations

import copy
import importlib
import math

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights


def _blobs(seed: int, n: int = 24, d: int = 6, k: int = 3):
    """A small classification set: ``k`` Gaussian blobs in ``d`` dimensions."""
    labels = ints(seed, k, n)
    x = arr(seed + 1, k, d, scale=1.5)[labels] + arr(seed + 2, n, d, scale=0.7)
    return x.astype(np.float32), labels


def _mlp(torch, seed: int, d: int = 6, h: int = 10, k: int = 3):
    nn = torch.nn
    return set_weights(torch, nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, k)), seed=seed)


def _images(seed: int, n: int = 8, c: int = 2, size: int = 6, k: int = 3):
    labels = ints(seed, k, n)
    x = arr(seed + 1, k, c, size, size)[labels] + arr(seed + 2, n, c, size, size, scale=0.5)
    return x.astype(np.float32), labels


def _state_of(torch, opt, p, keys):
    """Selected entries of a parameter's optimizer state (numbers as floats)."""
    st = opt.state[p]
    return {k: (st[k] if torch.is_tensor(st[k]) else float(st[k])) for k in keys}


# ------------------------------------------------------------------------------------------- Lion


@program
def lion_lucidrains_loop_and_foreach(torch):
    """lucidrains/lion-pytorch: decoupled weight decay as ``p.data.mul_(1 - lr * wd)``, the sign of
    an interpolation as the update and ``lerp_`` for the momentum; the multi-tensor spelling with
    ``torch._foreach_*`` beside it. Biases in a group without weight decay; the optimizer is
    checkpointed after two steps and a fresh one resumes from the (deep-copied) state dict."""

    def exists(val):
        return val is not None

    def update_fn(p, grad, exp_avg, lr, wd, beta1, beta2):
        p.data.mul_(1.0 - lr * wd)
        update = exp_avg.clone().mul_(beta1).add(grad, alpha=1.0 - beta1).sign_()
        p.add_(update, alpha=-lr)
        exp_avg.lerp_(grad, 1.0 - beta2)

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, foreach=False):
            assert lr > 0.0
            assert all([0.0 <= beta <= 1.0 for beta in betas])
            defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, foreach=foreach)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if exists(closure):
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                ps = [p for p in group["params"] if exists(p.grad)]
                lr, wd, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
                for p in ps:
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                if group["foreach"]:
                    grads = [p.grad for p in ps]
                    exp_avgs = [self.state[p]["exp_avg"] for p in ps]
                    torch._foreach_mul_(ps, 1.0 - lr * wd)
                    updates = torch._foreach_mul(exp_avgs, beta1)
                    torch._foreach_add_(updates, grads, alpha=1.0 - beta1)
                    torch._foreach_sign_(updates)
                    torch._foreach_add_(ps, updates, alpha=-lr)
                    torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta2)
                else:
                    for p in ps:
                        update_fn(p, p.grad, self.state[p]["exp_avg"], lr, wd, beta1, beta2)
            return loss

    def groups(model):
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    x, y = _blobs(1)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for foreach in (False, True):
        model = _mlp(torch, seed=2)
        opt = Lion(groups(model), lr=3e-3, betas=(0.9, 0.99), weight_decay=0.5, foreach=foreach)
        losses = []
        for step in range(4):
            if step == 2:
                saved = copy.deepcopy(opt.state_dict())
                opt = Lion(groups(model), lr=1e-4, foreach=foreach)
                opt.load_state_dict(saved)

            def closure(opt=opt, model=model):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(X), Y)
                loss.backward()
                return loss

            losses.append(opt.step(closure).item())
        out["foreach" if foreach else "loop"] = {
            "losses": losses, "params": params(model),
            "exp_avg": opt.state[model[0].weight]["exp_avg"],
            "lrs": [g["lr"] for g in opt.param_groups],
            "wds": [g["weight_decay"] for g in opt.param_groups],
        }  # fmt: skip
    return out


# -------------------------------------------------------------------------------------- Adafactor


@program(rtol=5e-4, atol=5e-5)
def hf_adafactor_relative_step_factored(torch):
    """transformers' Adafactor: factored second moments for matrices (row and column means),
    relative step sizes scaled by the parameter's RMS (a 0-d tensor that then multiplies the
    update and is the weight decay's ``alpha``), update clipping by RMS, the
    ``AdafactorSchedule`` proxy scheduler, and ``beta1`` with a manual learning rate."""

    class Adafactor(torch.optim.Optimizer):
        def __init__(self, params, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0,
                     decay_rate=-0.8, beta1=None, weight_decay=0.0, scale_parameter=True,
                     relative_step=True, warmup_init=False):  # fmt: skip
            if lr is not None and relative_step:
                raise ValueError("Cannot combine manual `lr` and `relative_step=True` options")
            if warmup_init and not relative_step:
                raise ValueError("`warmup_init=True` requires `relative_step=True`")
            defaults = {
                "lr": lr, "eps": eps, "clip_threshold": clip_threshold, "decay_rate": decay_rate,
                "beta1": beta1, "weight_decay": weight_decay, "scale_parameter": scale_parameter,
                "relative_step": relative_step, "warmup_init": warmup_init,
            }  # fmt: skip
            super().__init__(params, defaults)

        @staticmethod
        def _get_lr(param_group, param_state):
            rel_step_sz = param_group["lr"]
            if param_group["relative_step"]:
                min_step = 1e-6 * param_state["step"] if param_group["warmup_init"] else 1e-2
                rel_step_sz = min(min_step, 1.0 / math.sqrt(param_state["step"]))
            param_scale = 1.0
            if param_group["scale_parameter"]:
                param_scale = max(param_group["eps"][1], param_state["RMS"])
            return param_scale * rel_step_sz

        @staticmethod
        def _get_options(param_group, param_shape):
            factored = len(param_shape) >= 2
            use_first_moment = param_group["beta1"] is not None
            return factored, use_first_moment

        @staticmethod
        def _rms(tensor):
            return tensor.norm(2) / (tensor.numel() ** 0.5)

        @staticmethod
        def _approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col):
            r_factor = (
                (exp_avg_sq_row / exp_avg_sq_row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
            )
            c_factor = exp_avg_sq_col.unsqueeze(-2).rsqrt()
            return torch.mul(r_factor, c_factor)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    if grad.dtype in {torch.float16, torch.bfloat16}:
                        grad = grad.float()
                    if grad.is_sparse:
                        raise RuntimeError("Adafactor does not support sparse gradients.")
                    state = self.state[p]
                    grad_shape = grad.shape
                    factored, use_first_moment = self._get_options(group, grad_shape)
                    if len(state) == 0:
                        state["step"] = 0
                        if use_first_moment:
                            state["exp_avg"] = torch.zeros_like(grad)
                        if factored:
                            state["exp_avg_sq_row"] = torch.zeros(grad_shape[:-1]).to(grad)
                            state["exp_avg_sq_col"] = torch.zeros(
                                grad_shape[:-2] + grad_shape[-1:]
                            ).to(grad)
                        else:
                            state["exp_avg_sq"] = torch.zeros_like(grad)
                        state["RMS"] = 0
                    else:
                        if use_first_moment:
                            state["exp_avg"] = state["exp_avg"].to(grad)
                        if factored:
                            state["exp_avg_sq_row"] = state["exp_avg_sq_row"].to(grad)
                            state["exp_avg_sq_col"] = state["exp_avg_sq_col"].to(grad)
                        else:
                            state["exp_avg_sq"] = state["exp_avg_sq"].to(grad)
                    p_data_fp32 = p
                    if p.dtype in {torch.float16, torch.bfloat16}:
                        p_data_fp32 = p_data_fp32.float()
                    state["step"] += 1
                    state["RMS"] = self._rms(p_data_fp32)
                    lr = self._get_lr(group, state)
                    beta2t = 1.0 - math.pow(state["step"], group["decay_rate"])
                    update = (grad**2) + group["eps"][0]
                    if factored:
                        exp_avg_sq_row = state["exp_avg_sq_row"]
                        exp_avg_sq_col = state["exp_avg_sq_col"]
                        exp_avg_sq_row.mul_(beta2t).add_(update.mean(dim=-1), alpha=(1.0 - beta2t))
                        exp_avg_sq_col.mul_(beta2t).add_(update.mean(dim=-2), alpha=(1.0 - beta2t))
                        update = self._approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col)
                        update.mul_(grad)
                    else:
                        exp_avg_sq = state["exp_avg_sq"]
                        exp_avg_sq.mul_(beta2t).add_(update, alpha=(1.0 - beta2t))
                        update = exp_avg_sq.rsqrt().mul_(grad)
                    update.div_((self._rms(update) / group["clip_threshold"]).clamp_(min=1.0))
                    update.mul_(lr)
                    if use_first_moment:
                        exp_avg = state["exp_avg"]
                        exp_avg.mul_(group["beta1"]).add_(update, alpha=(1 - group["beta1"]))
                        update = exp_avg
                    if group["weight_decay"] != 0:
                        p_data_fp32.add_(p_data_fp32, alpha=(-group["weight_decay"] * lr))
                    p_data_fp32.add_(-update)
                    if p.dtype in {torch.float16, torch.bfloat16}:
                        p.copy_(p_data_fp32)
            return loss

    class AdafactorSchedule(torch.optim.lr_scheduler.LambdaLR):
        def __init__(self, optimizer, initial_lr=0.0):
            def lr_lambda(_):
                return initial_lr

            for group in optimizer.param_groups:
                group["initial_lr"] = initial_lr
            super().__init__(optimizer, lr_lambda)
            for group in optimizer.param_groups:
                del group["initial_lr"]

        def get_lr(self):
            opt = self.optimizer
            lrs = [
                opt._get_lr(group, opt.state[group["params"][0]])
                for group in opt.param_groups
                if group["params"][0].grad is not None
            ]
            if len(lrs) == 0:
                lrs = self.base_lrs  # if called before stepping
            return lrs

    nn, F = torch.nn, torch.nn.functional

    class TinyT5Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 8)
            self.wi = nn.Linear(8, 12, bias=False)
            self.wo = nn.Linear(12, 8, bias=False)
            self.norm = nn.LayerNorm(8)
            self.head = nn.Linear(8, 11)

        def forward(self, ids):
            h = self.emb(ids)
            h = h + self.wo(F.relu(self.wi(h)))
            return self.head(self.norm(h))

    ids = torch.tensor(ints(10, 11, 4, 5))
    targets = torch.tensor(ints(11, 11, 4, 5))
    out = {}
    runs = {
        "relative": lambda m: Adafactor(m.parameters()),
        "manual": lambda m: Adafactor(m.parameters(), lr=0.05, relative_step=False, beta1=0.9,
                                      weight_decay=0.1, clip_threshold=0.5),
    }  # fmt: skip
    for name, make in runs.items():
        model = set_weights(torch, TinyT5Block(), seed=12)
        opt = make(model)
        sched = AdafactorSchedule(opt) if name == "relative" else None
        losses, lrs = [], []
        for _ in range(4):
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, 11), targets.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
                lrs.append([float(v) for v in sched.get_last_lr()])
            losses.append(loss.item())
        st = opt.state[model.wi.weight]
        out[name] = {
            "losses": losses, "lrs": lrs, "params": params(model),
            "row": st["exp_avg_sq_row"], "col": st["exp_avg_sq_col"], "rms": float(st["RMS"]),
            "norm_sq": opt.state[model.norm.weight]["exp_avg_sq"],
            "step": st["step"],
        }  # fmt: skip
    out["manual"]["exp_avg"] = opt.state[model.head.weight]["exp_avg"]
    return out


# ------------------------------------------------------------------------------------------- LAMB


@program(rtol=5e-4, atol=5e-5)
def lamb_trust_ratio_cybertron_and_timm(torch):
    """LAMB twice: cybertronai/pytorch-lamb (``p.data`` arithmetic, a trust ratio decided on the
    host and kept in the state, the ratio as ``alpha``) and timm's (global gradient-norm clipping,
    nested ``torch.where`` trust ratios with a scalar branch, LAMBC trust clipping, the step
    count kept in the group); timm's gains a parameter group for a new head halfway."""

    class CybertronLamb(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0,
                     adam=False):  # fmt: skip
            if not 0.0 <= lr:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
            self.adam = adam
            super().__init__(params, defaults)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p.data)
                        state["exp_avg_sq"] = torch.zeros_like(p.data)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    step_size = group["lr"]
                    weight_norm = p.data.pow(2).sum().sqrt().clamp(0, 10)
                    adam_step = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
                    if group["weight_decay"] != 0:
                        adam_step.add_(p.data, alpha=group["weight_decay"])
                    adam_norm = adam_step.pow(2).sum().sqrt()
                    if weight_norm == 0 or adam_norm == 0:
                        trust_ratio = 1
                    else:
                        trust_ratio = weight_norm / adam_norm
                    state["weight_norm"] = weight_norm
                    state["adam_norm"] = adam_norm
                    state["trust_ratio"] = trust_ratio
                    if self.adam:
                        trust_ratio = 1
                    p.data.add_(adam_step, alpha=-step_size * trust_ratio)
            return loss

    class TimmLamb(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-6,
                     weight_decay=0.01, grad_averaging=True, max_grad_norm=1.0, trust_clip=False,
                     always_adapt=False):  # fmt: skip
            defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps,
                            weight_decay=weight_decay, grad_averaging=grad_averaging,
                            max_grad_norm=max_grad_norm, trust_clip=trust_clip,
                            always_adapt=always_adapt)  # fmt: skip
            super().__init__(params, defaults)

        @torch.no_grad()
        def _get_clip_grad_norm(self):
            max_grad_norm = self.defaults["max_grad_norm"]
            if max_grad_norm is None:
                return None
            norms = []
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    norms.append(torch.linalg.vector_norm(p.grad))
            global_norm = torch.linalg.vector_norm(torch.stack(norms))
            clip_global_norm = (global_norm / max_grad_norm).clamp_(min=1.0)
            return clip_global_norm

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            clip_grad_norm = self._get_clip_grad_norm()
            for group in self.param_groups:
                bias_correction = 1 if group["bias_correction"] else 0
                beta1, beta2 = group["betas"]
                grad_averaging = 1 if group["grad_averaging"] else 0
                beta3 = 1 - beta1 if grad_averaging else 1.0
                if "step" in group:
                    group["step"] += 1
                else:
                    group["step"] = 1
                if bias_correction:
                    bias_correction1 = 1 - beta1 ** group["step"]
                    bias_correction2 = 1 - beta2 ** group["step"]
                else:
                    bias_correction1, bias_correction2 = 1.0, 1.0
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    if clip_grad_norm is not None:
                        grad.div_(clip_grad_norm)
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(grad, alpha=beta3)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                    update = (exp_avg / bias_correction1).div_(denom)
                    weight_decay = group["weight_decay"]
                    if weight_decay != 0:
                        update.add_(p, alpha=weight_decay)
                    if weight_decay != 0 or group["always_adapt"]:
                        w_norm = p.norm(2.0)
                        g_norm = update.norm(2.0)
                        trust_ratio = w_norm / g_norm
                        trust_ratio = torch.where(
                            w_norm > 0, torch.where(g_norm > 0, trust_ratio, 1.0), 1.0
                        )
                        if group["trust_clip"]:
                            trust_ratio = torch.clamp(trust_ratio, max=1.0)
                        update.mul_(trust_ratio)
                    p.add_(update, alpha=-group["lr"])
            return loss

    nn, F = torch.nn, torch.nn.functional
    x, y = _blobs(20, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)

    model = _mlp(torch, seed=21)
    with torch.no_grad():
        model[2].bias.zero_()  # a zero weight norm: the trust ratio falls back to 1
    opt = CybertronLamb(model.parameters(), lr=0.05, weight_decay=0.01)
    cyber_losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        opt.step()
        cyber_losses.append(loss.item())
    cyber = {
        "losses": cyber_losses, "params": params(model),
        "state": _state_of(torch, opt, model[0].weight,
                           ["step", "weight_norm", "adam_norm", "trust_ratio", "exp_avg_sq"]),
    }  # fmt: skip

    body = _mlp(torch, seed=22, k=5)
    head = set_weights(torch, nn.Linear(5, 3), seed=23)
    decay = [p for p in body.parameters() if p.ndim > 1]
    no_decay = [p for p in body.parameters() if p.ndim <= 1]
    opt = TimmLamb([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=0.02,
                   max_grad_norm=0.5, trust_clip=True)  # fmt: skip
    timm_losses = []
    for step in range(5):
        if step == 2:  # a new head, trained from here on, always adapted
            opt.add_param_group({"params": head.parameters(), "always_adapt": True, "lr": 0.05})
        opt.zero_grad()
        h = body(X)
        logits = head(F.gelu(h)) if step >= 2 else h[:, :3]
        loss = F.cross_entropy(logits, Y)
        loss.backward()
        opt.step()
        timm_losses.append(loss.item())
    timm = {
        "losses": timm_losses, "body": params(body), "head": params(head),
        "steps": [g["step"] for g in opt.param_groups],
        "group_keys": [",".join(sorted(k for k in g if k != "params")) for g in opt.param_groups],
        "head_exp_avg": opt.state[head.weight]["exp_avg"], "grad_after": body[0].weight.grad,
    }  # fmt: skip
    return {"cybertron": cyber, "timm": timm}


# ------------------------------------------------------------------------------------------- Adan


@program(rtol=5e-4, atol=5e-5)
def adan_single_and_multi_tensor(torch):
    """sail-sg/Adan: the gradient-difference momentum kept in a ``neg_pre_grad`` buffer reused in
    place, global gradient-norm clipping through ``.item()``, the proximal weight decay (``div_``)
    and ``no_prox``, the step count in the group, and the ``_foreach_*`` implementation, which
    must match the per-tensor one; ``restart_opt`` resets the moments halfway."""

    def _single_tensor_adan(params, grads, exp_avgs, exp_avg_sqs, exp_avg_diffs, neg_pre_grads,
                            beta1, beta2, beta3, bias_correction1, bias_correction2,
                            bias_correction3_sqrt, lr, weight_decay, eps, no_prox,
                            clip_global_grad_norm):  # fmt: skip
        for i, param in enumerate(params):
            grad = grads[i]
            exp_avg = exp_avgs[i]
            exp_avg_sq = exp_avg_sqs[i]
            exp_avg_diff = exp_avg_diffs[i]
            neg_grad_or_diff = neg_pre_grads[i]
            grad.mul_(clip_global_grad_norm)
            neg_grad_or_diff.add_(grad)
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_diff.mul_(beta2).add_(neg_grad_or_diff, alpha=1 - beta2)
            neg_grad_or_diff.mul_(beta2).add_(grad)
            exp_avg_sq.mul_(beta3).addcmul_(neg_grad_or_diff, neg_grad_or_diff, value=1 - beta3)
            denom = ((exp_avg_sq).sqrt() / bias_correction3_sqrt).add_(eps)
            step_size_diff = lr * beta2 / bias_correction2
            step_size = lr / bias_correction1
            if no_prox:
                param.mul_(1 - lr * weight_decay)
                param.addcdiv_(exp_avg, denom, value=-step_size)
                param.addcdiv_(exp_avg_diff, denom, value=-step_size_diff)
            else:
                param.addcdiv_(exp_avg, denom, value=-step_size)
                param.addcdiv_(exp_avg_diff, denom, value=-step_size_diff)
                param.div_(1 + lr * weight_decay)
            neg_grad_or_diff.zero_().add_(grad, alpha=-1.0)

    def _multi_tensor_adan(params, grads, exp_avgs, exp_avg_sqs, exp_avg_diffs, neg_pre_grads,
                           beta1, beta2, beta3, bias_correction1, bias_correction2,
                           bias_correction3_sqrt, lr, weight_decay, eps, no_prox,
                           clip_global_grad_norm):  # fmt: skip
        if len(params) == 0:
            return
        torch._foreach_mul_(grads, clip_global_grad_norm)
        torch._foreach_add_(neg_pre_grads, grads)
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_diffs, beta2)
        torch._foreach_add_(exp_avg_diffs, neg_pre_grads, alpha=1 - beta2)
        torch._foreach_mul_(neg_pre_grads, beta2)
        torch._foreach_add_(neg_pre_grads, grads)
        torch._foreach_mul_(exp_avg_sqs, beta3)
        torch._foreach_addcmul_(exp_avg_sqs, neg_pre_grads, neg_pre_grads, value=1 - beta3)
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias_correction3_sqrt)
        torch._foreach_add_(denom, eps)
        step_size_diff = lr * beta2 / bias_correction2
        step_size = lr / bias_correction1
        if no_prox:
            torch._foreach_mul_(params, 1 - lr * weight_decay)
            torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)
            torch._foreach_addcdiv_(params, exp_avg_diffs, denom, value=-step_size_diff)
        else:
            torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)
            torch._foreach_addcdiv_(params, exp_avg_diffs, denom, value=-step_size_diff)
            torch._foreach_div_(params, 1 + lr * weight_decay)
        torch._foreach_zero_(neg_pre_grads)
        torch._foreach_add_(neg_pre_grads, grads, alpha=-1.0)

    class Adan(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.98, 0.92, 0.99), eps=1e-8, weight_decay=0.0,
                     max_grad_norm=0.0, no_prox=False, foreach=True):  # fmt: skip
            if not 0.0 <= max_grad_norm:
                raise ValueError(f"Invalid Max grad norm: {max_grad_norm}")
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            max_grad_norm=max_grad_norm, no_prox=no_prox, foreach=foreach)  # fmt: skip
            super().__init__(params, defaults)

        def __setstate__(self, state):
            super().__setstate__(state)
            for group in self.param_groups:
                group.setdefault("no_prox", False)

        @torch.no_grad()
        def restart_opt(self):
            for group in self.param_groups:
                group["step"] = 0
                for p in group["params"]:
                    if p.requires_grad:
                        state = self.state[p]
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                        state["exp_avg_diff"] = torch.zeros_like(p)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            if self.defaults["max_grad_norm"] > 0:
                device = self.param_groups[0]["params"][0].device
                global_grad_norm = torch.zeros(1, device=device)
                max_grad_norm = torch.tensor(self.defaults["max_grad_norm"], device=device)
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is not None:
                            grad = p.grad
                            global_grad_norm.add_(grad.pow(2).sum())
                global_grad_norm = torch.sqrt(global_grad_norm)
                clip_global_grad_norm = torch.clamp(
                    max_grad_norm / (global_grad_norm + group["eps"]), max=1.0
                ).item()
            else:
                clip_global_grad_norm = 1.0
            for group in self.param_groups:
                params_with_grad, grads, exp_avgs, exp_avg_sqs, exp_avg_diffs = [], [], [], [], []
                neg_pre_grads = []
                beta1, beta2, beta3 = group["betas"]
                if "step" in group:
                    group["step"] += 1
                else:
                    group["step"] = 1
                bias_correction1 = 1.0 - beta1 ** group["step"]
                bias_correction2 = 1.0 - beta2 ** group["step"]
                bias_correction3 = 1.0 - beta3 ** group["step"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    params_with_grad.append(p)
                    grads.append(p.grad)
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                        state["exp_avg_diff"] = torch.zeros_like(p)
                    if "neg_pre_grad" not in state or group["step"] == 1:
                        state["neg_pre_grad"] = p.grad.clone().mul_(-clip_global_grad_norm)
                    exp_avgs.append(state["exp_avg"])
                    exp_avg_sqs.append(state["exp_avg_sq"])
                    exp_avg_diffs.append(state["exp_avg_diff"])
                    neg_pre_grads.append(state["neg_pre_grad"])
                kwargs = dict(
                    params=params_with_grad, grads=grads, exp_avgs=exp_avgs,
                    exp_avg_sqs=exp_avg_sqs, exp_avg_diffs=exp_avg_diffs,
                    neg_pre_grads=neg_pre_grads, beta1=beta1, beta2=beta2, beta3=beta3,
                    bias_correction1=bias_correction1, bias_correction2=bias_correction2,
                    bias_correction3_sqrt=math.sqrt(bias_correction3), lr=group["lr"],
                    weight_decay=group["weight_decay"], eps=group["eps"],
                    no_prox=group["no_prox"], clip_global_grad_norm=clip_global_grad_norm,
                )  # fmt: skip
                if group["foreach"]:
                    _multi_tensor_adan(**kwargs)
                else:
                    _single_tensor_adan(**kwargs)
            return loss

    F = torch.nn.functional
    x, y = _blobs(30, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    for name, kw in (("single", dict(foreach=False)), ("multi", dict(foreach=True)),
                     ("no_prox", dict(foreach=True, no_prox=True))):  # fmt: skip
        model = _mlp(torch, seed=31)
        opt = Adan(model.parameters(), lr=0.02, weight_decay=0.02, max_grad_norm=0.3, **kw)
        losses = []
        for step in range(5):
            if step == 3:
                opt.restart_opt()
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        st = opt.state[model[0].weight]
        out[name] = {"losses": losses, "params": params(model), "step": opt.param_groups[0]["step"],
                     "exp_avg_diff": st["exp_avg_diff"], "neg_pre_grad": st["neg_pre_grad"],
                     "exp_avg_sq": st["exp_avg_sq"]}  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------- Sophia-G


@program(rtol=5e-4, atol=5e-5)
def sophia_g_hessian_ema_with_resume(torch):
    """Liu et al.'s SophiaG as nanoGPT trains with it: a Gauss-Newton-Bartlett Hessian estimate
    every other step from labels drawn from the model's own logits (Gumbel noise fixed here),
    ``update_hessian``, the clipped ``sign * ratio`` update through ``addcmul_``, the step count
    kept as a 0-d tensor incremented in place, and a checkpoint reloaded halfway."""

    class SophiaG(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.965, 0.99), rho=0.04, weight_decay=1e-1, *,
                     maximize=False, capturable=False):  # fmt: skip
            if not 0.0 <= rho:
                raise ValueError(f"Invalid rho parameter at index 1: {rho}")
            defaults = dict(lr=lr, betas=betas, rho=rho, weight_decay=weight_decay,
                            maximize=maximize, capturable=capturable)  # fmt: skip
            super().__init__(params, defaults)

        def __setstate__(self, state):
            super().__setstate__(state)
            for group in self.param_groups:
                group.setdefault("maximize", False)
                group.setdefault("capturable", False)
            state_values = list(self.state.values())
            step_is_tensor = (len(state_values) != 0) and torch.is_tensor(state_values[0]["step"])
            if not step_is_tensor:
                for s in state_values:
                    s["step"] = torch.tensor(float(s["step"]))

        def _init_state(self, p, state):
            if len(state) == 0:
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["hessian"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if "hessian" not in state.keys():
                state["hessian"] = torch.zeros_like(p, memory_format=torch.preserve_format)

        @torch.no_grad()
        def update_hessian(self):
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    self._init_state(p, state)
                    state["hessian"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)

        @torch.no_grad()
        def step(self, closure=None, bs=5120):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                params_with_grad, grads, exp_avgs, state_steps, hessian = [], [], [], [], []
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    params_with_grad.append(p)
                    if p.grad.is_sparse:
                        raise RuntimeError("Hero does not support sparse gradients")
                    grads.append(p.grad)
                    state = self.state[p]
                    self._init_state(p, state)
                    exp_avgs.append(state["exp_avg"])
                    state_steps.append(state["step"])
                    hessian.append(state["hessian"])
                for i, param in enumerate(params_with_grad):
                    grad = grads[i] if not group["maximize"] else -grads[i]
                    exp_avg, hess, step_t = exp_avgs[i], hessian[i], state_steps[i]
                    if torch.is_complex(param):
                        grad = torch.view_as_real(grad)
                        exp_avg = torch.view_as_real(exp_avg)
                        hess = torch.view_as_real(hess)
                        param = torch.view_as_real(param)
                    step_t += 1
                    param.mul_(1 - group["lr"] * group["weight_decay"])
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    step_size_neg = -group["lr"]
                    ratio = (exp_avg.abs() / (group["rho"] * bs * hess + 1e-15)).clamp(None, 1)
                    param.addcmul_(exp_avg.sign(), ratio, value=step_size_neg)
            return loss

    nn, F = torch.nn, torch.nn.functional
    vocab, block, batch = 9, 6, 4

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, 8)
            self.wpe = nn.Embedding(block, 8)
            self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
            self.lm_head = nn.Linear(8, vocab, bias=False)

        def forward(self, idx, targets=None):
            pos = torch.arange(0, idx.size(1), dtype=torch.long)
            h = self.wte(idx) + self.wpe(pos)
            h = h + self.mlp(h)
            logits = self.lm_head(h)
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                           ignore_index=-1)  # fmt: skip

    model = set_weights(torch, TinyLM(), seed=40)
    X = torch.tensor(ints(41, vocab, batch, block))
    Yt = torch.tensor(ints(42, vocab, batch, block))
    gumbel = -np.log(-np.log(np.random.default_rng(43).uniform(1e-6, 1 - 1e-6, (5, batch, block,
                                                                                vocab))))  # fmt: skip
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.2}, {"params": nodecay, "weight_decay": 0.0}]
    opt = SophiaG(groups, lr=0.02, betas=(0.965, 0.99), rho=0.05, weight_decay=0.2)
    total_bs = batch * block
    losses, sampled = [], []
    for it in range(5):
        if it == 3:
            saved = copy.deepcopy(opt.state_dict())
            opt = SophiaG([{"params": decay}, {"params": nodecay}], lr=1.0)
            opt.load_state_dict(saved)
        _, loss = model(X, Yt)
        loss.backward()
        opt.step(bs=total_bs)
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if it % 2 == 1:
            logits, _ = model(X, None)
            noise = torch.tensor(gumbel[it].astype(np.float32))
            y_sample = (logits.detach() + noise).argmax(dim=-1)
            loss_sampled = F.cross_entropy(logits.view(-1, logits.size(-1)), y_sample.view(-1),
                                           ignore_index=-1)  # fmt: skip
            loss_sampled.backward()
            opt.update_hessian()
            opt.zero_grad(set_to_none=True)
            sampled.append(y_sample)
    st = opt.state[model.mlp[0].weight]
    return {"losses": losses, "sampled": sampled, "params": params(model),
            "hessian": st["hessian"], "exp_avg": st["exp_avg"], "step": st["step"],
            "step_is_tensor": torch.is_tensor(st["step"]),
            "wds": [g["weight_decay"] for g in opt.param_groups]}  # fmt: skip


# ------------------------------------------------------------------------------------------- Muon


@program(rtol=1e-3, atol=1e-4)
def muon_newton_schulz_with_aux_adam(torch):
    """KellerJordan/Muon's single-device optimizer with an auxiliary Adam: Nesterov momentum
    through ``lerp_`` on the gradient itself, conv filters flattened to matrices, the quintic
    Newton-Schulz iteration (in float32 here: GT's NumPy workers have no bfloat16) on the
    transpose of tall matrices, the shape-dependent scale, and Adam written with ``lerp_`` for
    the biases, the stem and the head (groups marked ``use_muon``, empty ``defaults``)."""

    def zeropower_via_newtonschulz5(G, steps: int):
        assert G.ndim >= 2
        a, b, c = (3.4445, -4.7750, 2.0315)
        X = G.float()
        if G.size(-2) > G.size(-1):
            X = X.mT
        X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
        for _ in range(steps):
            A = X @ X.mT
            B = b * A + c * A @ A
            X = a * X + B @ X
        if G.size(-2) > G.size(-1):
            X = X.mT
        return X

    def muon_update(grad, momentum, beta=0.95, ns_steps=5, nesterov=True):
        momentum.lerp_(grad, 1 - beta)
        update = grad.lerp_(momentum, beta) if nesterov else momentum
        if update.ndim == 4:
            update = update.view(len(update), -1)
        update = zeropower_via_newtonschulz5(update, steps=ns_steps)
        update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
        return update

    def adam_update(grad, buf1, buf2, step, betas, eps):
        buf1.lerp_(grad, 1 - betas[0])
        buf2.lerp_(grad.square(), 1 - betas[1])
        buf1c = buf1 / (1 - betas[0] ** step)
        buf2c = buf2 / (1 - betas[1] ** step)
        return buf1c / (buf2c.sqrt() + eps)

    class SingleDeviceMuonWithAuxAdam(torch.optim.Optimizer):
        def __init__(self, param_groups):
            for group in param_groups:
                assert "use_muon" in group
                if group["use_muon"]:
                    group["lr"] = group.get("lr", 0.02)
                    group["momentum"] = group.get("momentum", 0.95)
                    group["weight_decay"] = group.get("weight_decay", 0)
                    assert set(group.keys()) == set(
                        ["params", "lr", "momentum", "weight_decay", "use_muon"]
                    )
                else:
                    group["lr"] = group.get("lr", 3e-4)
                    group["betas"] = group.get("betas", (0.9, 0.95))
                    group["eps"] = group.get("eps", 1e-10)
                    group["weight_decay"] = group.get("weight_decay", 0)
                    assert set(group.keys()) == set(
                        ["params", "lr", "betas", "eps", "weight_decay", "use_muon"]
                    )
            super().__init__(param_groups, dict())

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                if group["use_muon"]:
                    for p in group["params"]:
                        if p.grad is None:
                            p.grad = torch.zeros_like(p)  # Force synchronization
                        state = self.state[p]
                        if len(state) == 0:
                            state["momentum_buffer"] = torch.zeros_like(p)
                        update = muon_update(p.grad, state["momentum_buffer"],
                                             beta=group["momentum"])  # fmt: skip
                        p.mul_(1 - group["lr"] * group["weight_decay"])
                        p.add_(update.reshape(p.shape), alpha=-group["lr"])
                else:
                    for p in group["params"]:
                        if p.grad is None:
                            p.grad = torch.zeros_like(p)  # Force synchronization
                        state = self.state[p]
                        if len(state) == 0:
                            state["exp_avg"] = torch.zeros_like(p)
                            state["exp_avg_sq"] = torch.zeros_like(p)
                            state["step"] = 0
                        state["step"] += 1
                        update = adam_update(p.grad, state["exp_avg"], state["exp_avg_sq"],
                                             state["step"], group["betas"], group["eps"])  # fmt: skip
                        p.mul_(1 - group["lr"] * group["weight_decay"])
                        p.add_(update, alpha=-group["lr"])
            return loss

    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(2, 4, 3, padding=1)
            self.body = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1, bias=False), nn.ReLU(),
                                      nn.Conv2d(6, 4, 3, bias=False), nn.ReLU())  # fmt: skip
            self.proj = nn.Linear(16, 12, bias=False)  # wide: used as is
            self.mix = nn.Linear(12, 20, bias=False)  # tall: orthogonalised transposed
            self.head = nn.Linear(20, 3)

        def forward(self, x):
            h = self.body(F.relu(self.stem(x)))
            h = F.adaptive_avg_pool2d(h, 2).flatten(1)
            return self.head(F.relu(self.mix(F.relu(self.proj(h)))))

    model = set_weights(torch, Net(), seed=50)
    x, y = _images(51)
    X, Y = torch.tensor(x), torch.tensor(y)
    hidden_weights = [p for p in [*model.body.parameters(), model.proj.weight, model.mix.weight]
                      if p.ndim >= 2]  # fmt: skip
    hidden_gains_biases = [p for p in model.body.parameters() if p.ndim < 2]
    nonhidden = [*model.head.parameters(), *model.stem.parameters()]
    param_groups = [
        dict(params=hidden_weights, use_muon=True, lr=0.05, weight_decay=0.01),
        dict(params=hidden_gains_biases + nonhidden, use_muon=False, lr=3e-3,
             betas=(0.9, 0.95), weight_decay=0.01),
    ]  # fmt: skip
    opt = SingleDeviceMuonWithAuxAdam(param_groups)
    losses = []
    for _ in range(4):
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ns = zeropower_via_newtonschulz5(torch.tensor(arr(52, 5, 3)), steps=5)
    return {"losses": losses, "params": params(model), "ns_tall": ns, "ns_gram": ns.mT @ ns,
            "momentum": opt.state[model.body[0].weight]["momentum_buffer"],
            "adam_exp_avg_sq": opt.state[model.head.weight]["exp_avg_sq"],
            "adam_step": opt.state[model.head.weight]["step"],
            "nesterov_grad": model.mix.weight.grad,
            "defaults": str(sorted(opt.defaults))}  # fmt: skip


# ---------------------------------------------------------------------------------------- Shampoo


@program(rtol=1e-3, atol=1e-4)
def shampoo_svd_and_eigh_matrix_roots(torch):
    """Shampoo as moskomule/shampoo.pytorch writes it (Kronecker-factored preconditioners from
    ``grad @ grad.t()`` on every mode, grads moved to the front with ``transpose_``, inverse roots
    through ``torch.svd`` refreshed every other step, ``torch.eye(out=grad.new(...))``), and a
    Shampoo-lite for conv filters with EMA statistics, inverse fourth roots through
    ``torch.linalg.eigh`` and SGD-norm grafting."""

    @torch.no_grad()
    def _matrix_power(matrix, power):
        device = matrix.device
        matrix = matrix.cpu()
        u, s, v = torch.svd(matrix)
        return (u @ s.pow_(power).diag() @ v.t()).to(device)

    class Shampoo(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-1, momentum=0.0, weight_decay=0.0, epsilon=1e-4,
                     update_freq=1):  # fmt: skip
            defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, epsilon=epsilon,
                            update_freq=update_freq)  # fmt: skip
            super().__init__(params, defaults)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    order = grad.ndimension()
                    original_size = grad.size()
                    state = self.state[p]
                    momentum = group["momentum"]
                    weight_decay = group["weight_decay"]
                    if len(state) == 0:
                        state["step"] = 0
                        if momentum > 0:
                            state["momentum_buffer"] = grad.clone()
                        for dim_id, dim in enumerate(grad.size()):
                            state[f"precond_{dim_id}"] = group["epsilon"] * torch.eye(
                                dim, out=grad.new(dim, dim)
                            )
                            state[f"inv_precond_{dim_id}"] = grad.new(dim, dim).zero_()
                    if momentum > 0:
                        grad.mul_(1 - momentum).add_(state["momentum_buffer"], alpha=momentum)
                    if weight_decay > 0:
                        grad.add_(p.data, alpha=group["weight_decay"])
                    for dim_id, dim in enumerate(grad.size()):
                        precond = state[f"precond_{dim_id}"]
                        inv_precond = state[f"inv_precond_{dim_id}"]
                        grad = grad.transpose_(0, dim_id).contiguous()
                        transposed_size = grad.size()
                        grad = grad.view(dim, -1)
                        grad_t = grad.t()
                        precond.add_(grad @ grad_t)
                        if state["step"] % group["update_freq"] == 0:
                            inv_precond.copy_(_matrix_power(precond, -1 / order))
                        if dim_id == order - 1:
                            grad = grad_t @ inv_precond
                            grad = grad.view(original_size)
                        else:
                            grad = inv_precond @ grad
                            grad = grad.view(transposed_size)
                    state["step"] += 1
                    state["momentum_buffer"] = grad
                    p.data.add_(grad, alpha=-group["lr"])
            return loss

    def _inverse_root(mat, root, eps):
        evals, evecs = torch.linalg.eigh(mat)
        evals = torch.clamp(evals, min=eps)
        return evecs @ torch.diag(evals.pow(-1.0 / root)) @ evecs.T

    class ShampooLite(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1, beta2=0.9, eps=1e-3, momentum=0.9):
            super().__init__(params, dict(lr=lr, beta2=beta2, eps=eps, momentum=momentum))

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
                    g = p.grad.reshape(p.shape[0], -1) if p.ndim > 1 else p.grad.view(1, -1)
                    state = self.state[p]
                    if not state:
                        state["L"] = torch.zeros(g.shape[0], g.shape[0])
                        state["R"] = torch.zeros(g.shape[1], g.shape[1])
                        state["buf"] = torch.zeros_like(p)
                    L, R = state["L"], state["R"]
                    L.mul_(group["beta2"]).add_(g @ g.T, alpha=1 - group["beta2"])
                    R.mul_(group["beta2"]).add_(g.T @ g, alpha=1 - group["beta2"])
                    pre = _inverse_root(L, 4, group["eps"]) @ g @ _inverse_root(R, 4, group["eps"])
                    pre.mul_(g.norm() / pre.norm().clamp_min(1e-12))  # graft SGD's step size
                    state["buf"].mul_(group["momentum"]).add_(pre.view_as(p))
                    p.add_(state["buf"], alpha=-group["lr"])
            return loss

    F = torch.nn.functional
    x, y = _blobs(60, n=20, d=5)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = _mlp(torch, seed=61, d=5, h=7)
    opt = Shampoo(model.parameters(), lr=0.05, momentum=0.5, weight_decay=1e-3, epsilon=0.05,
                  update_freq=2)  # fmt: skip
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    st = opt.state[model[0].weight]
    moskomule = {"losses": losses, "params": params(model), "precond_0": st["precond_0"],
                 "inv_precond_1": st["inv_precond_1"], "momentum_buffer": st["momentum_buffer"],
                 "grad_shape": list(model[0].weight.grad.shape)}  # fmt: skip

    nn = torch.nn
    xi, yi = _images(62, n=6)
    XI, YI = torch.tensor(xi), torch.tensor(yi)
    net = set_weights(torch, nn.Sequential(nn.Conv2d(2, 4, 3), nn.Tanh(), nn.Flatten(),
                                           nn.Linear(64, 3)), seed=63)  # fmt: skip
    opt = ShampooLite(net.parameters(), lr=0.05, eps=1e-2)
    lite_losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(net(XI), YI)
        loss.backward()
        opt.step()
        lite_losses.append(loss.item())
    lite = {"losses": lite_losses, "params": params(net), "L": opt.state[net[0].weight]["L"],
            "R_diag": torch.diagonal(opt.state[net[3].weight]["R"])}  # fmt: skip
    return {"moskomule": moskomule, "lite": lite}


# ------------------------------------------------------------------------------------------ SAM


@program(rtol=5e-4, atol=5e-5)
def sam_and_asam_two_step_closure(torch):
    """davda54/sam: SAM wraps SGD (the base optimizer shares its parameter groups), ``first_step``
    climbs to ``w + e(w)`` keeping ``old_p``, ``second_step`` restores ``p.data`` and steps; the
    closure form (``torch.enable_grad()(closure)``) for SAM, the two-call form with BatchNorm's
    running statistics frozen for the second pass (``momentum = 0``) for adaptive SAM."""

    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
            assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"
            defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
            super().__init__(params, defaults)
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups
            self.defaults.update(self.base_optimizer.defaults)

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            grad_norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.data.clone()
                    e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                    p.add_(e_w)
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = self.state[p]["old_p"]
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def step(self, closure=None):
            assert closure is not None, "Sharpness Aware Minimization requires closure"
            closure = torch.enable_grad()(closure)
            self.first_step(zero_grad=True)
            closure()
            self.second_step()

        def _grad_norm(self):
            shared_device = self.param_groups[0]["params"][0].device
            norm = torch.norm(
                torch.stack([
                    ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                    for group in self.param_groups
                    for p in group["params"]
                    if p.grad is not None
                ]),
                p=2,
            )  # fmt: skip
            return norm

        def load_state_dict(self, state_dict):
            super().load_state_dict(state_dict)
            self.base_optimizer.param_groups = self.param_groups

    nn, F = torch.nn, torch.nn.functional

    def disable_running_stats(model):
        def _disable(module):
            if isinstance(module, nn.BatchNorm2d):
                module.backup_momentum = module.momentum
                module.momentum = 0

        model.apply(_disable)

    def enable_running_stats(model):
        def _enable(module):
            if isinstance(module, nn.BatchNorm2d) and hasattr(module, "backup_momentum"):
                module.momentum = module.backup_momentum

        model.apply(_enable)

    def smooth_crossentropy(pred, gold, smoothing=0.1):
        n_class = pred.size(1)
        one_hot = torch.full_like(pred, fill_value=smoothing / (n_class - 1))
        one_hot.scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
        log_prob = F.log_softmax(pred, dim=1)
        return F.kl_div(input=log_prob, target=one_hot, reduction="none").sum(-1)

    def net(seed):
        m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))  # fmt: skip
        return set_weights(torch, m, seed=seed)

    x, y = _images(70)
    X, Y = torch.tensor(x), torch.tensor(y)

    model = net(71)
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.1, lr=0.1, momentum=0.9)
    sam_losses = []
    for _ in range(3):

        def closure():
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            return loss

        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        opt.step(closure)
        opt.zero_grad()
        sam_losses.append(loss.item())
    sam = {"losses": sam_losses, "params": params(model),
           "old_p": opt.state[model[0].weight]["old_p"],
           "momentum_buffer": opt.base_optimizer.state[model[0].weight]["momentum_buffer"],
           "shared_groups": opt.param_groups is opt.base_optimizer.param_groups,
           "group_rho": opt.base_optimizer.param_groups[0]["rho"],
           "running_mean": model[1].running_mean}  # fmt: skip

    model = net(72)
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.5, adaptive=True, lr=0.05, momentum=0.9,
              weight_decay=5e-4)  # fmt: skip
    asam_losses = []
    for step in range(3):
        if step == 2:
            saved = opt.state_dict()
            opt = SAM(model.parameters(), torch.optim.SGD, rho=0.0, adaptive=True, lr=1.0)
            opt.load_state_dict(saved)
        enable_running_stats(model)
        predictions = model(X)
        loss = smooth_crossentropy(predictions, Y)
        loss.mean().backward()
        opt.first_step(zero_grad=True)
        disable_running_stats(model)
        smooth_crossentropy(model(X), Y).mean().backward()
        opt.second_step(zero_grad=True)
        asam_losses.append(loss.mean().item())
    asam = {"losses": asam_losses, "params": params(model), "running_var": model[1].running_var,
            "num_batches_tracked": model[1].num_batches_tracked,
            "rho": [g["rho"] for g in opt.param_groups],
            "base_lr": opt.base_optimizer.param_groups[0]["lr"],
            "momentum_buffer": opt.base_optimizer.state[model[5].weight]["momentum_buffer"]}  # fmt: skip
    return {"sam": sam, "asam": asam}


# -------------------------------------------------------------------------------------- Lookahead


@program(rtol=5e-4, atol=5e-5)
def lookahead_timm_wrapping_adamw(torch):
    """timm's Lookahead around AdamW: no ``Optimizer.__init__`` (it borrows the base optimizer's
    groups, defaults and a fresh ``defaultdict`` state), slow weights kept in AdamW's own state,
    ``lookahead_step`` counted per group, a StepLR scheduler on the wrapper, a state-dict round
    trip into a new wrapper, and ``sync_lookahead`` before evaluation."""
    from collections import OrderedDict, defaultdict

    class Lookahead(torch.optim.Optimizer):
        def __init__(self, base_optimizer, alpha=0.5, k=6):
            # NOTE super().__init__() not called on purpose
            self._optimizer_step_pre_hooks = OrderedDict()
            self._optimizer_step_post_hooks = OrderedDict()
            if not 0.0 <= alpha <= 1.0:
                raise ValueError(f"Invalid slow update rate: {alpha}")
            if not 1 <= k:
                raise ValueError(f"Invalid lookahead steps: {k}")
            defaults = dict(lookahead_alpha=alpha, lookahead_k=k, lookahead_step=0)
            self._base_optimizer = base_optimizer
            self.param_groups = base_optimizer.param_groups
            self.defaults = base_optimizer.defaults
            self.defaults.update(defaults)
            self.state = defaultdict(dict)
            for name, default in defaults.items():
                for group in self._base_optimizer.param_groups:
                    group.setdefault(name, default)

        @torch.no_grad()
        def update_slow(self, group):
            for fast_p in group["params"]:
                if fast_p.grad is None:
                    continue
                param_state = self._base_optimizer.state[fast_p]
                if "lookahead_slow_buff" not in param_state:
                    param_state["lookahead_slow_buff"] = torch.empty_like(fast_p)
                    param_state["lookahead_slow_buff"].copy_(fast_p)
                slow = param_state["lookahead_slow_buff"]
                slow.add_(fast_p - slow, alpha=group["lookahead_alpha"])
                fast_p.copy_(slow)

        def sync_lookahead(self):
            for group in self._base_optimizer.param_groups:
                self.update_slow(group)

        @torch.no_grad()
        def step(self, closure=None):
            loss = self._base_optimizer.step(closure)
            for group in self._base_optimizer.param_groups:
                group["lookahead_step"] += 1
                if group["lookahead_step"] % group["lookahead_k"] == 0:
                    self.update_slow(group)
            return loss

        def state_dict(self):
            return self._base_optimizer.state_dict()

        def load_state_dict(self, state_dict):
            self._base_optimizer.load_state_dict(state_dict)
            self.param_groups = self._base_optimizer.param_groups

    F = torch.nn.functional
    x, y = _blobs(80, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)
    model = _mlp(torch, seed=81)

    def make(lr):
        base = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
        return Lookahead(base, alpha=0.5, k=2)

    opt = make(0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    losses, lrs = [], []
    for step in range(5):
        if step == 3:
            saved = copy.deepcopy(opt.state_dict())
            opt = make(1.0)
            opt.load_state_dict(saved)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5,
                                                    last_epoch=step - 1)  # fmt: skip
        opt.zero_grad()
        loss = F.cross_entropy(model(X), Y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    before_sync = params(model)
    before_sync = {k: v.clone() for k, v in before_sync.items()}
    opt.sync_lookahead()
    with torch.no_grad():
        eval_loss = F.cross_entropy(model(X), Y)
    st = opt._base_optimizer.state[model[0].weight]
    group = opt.param_groups[0]
    return {"losses": losses, "lrs": lrs, "eval_loss": eval_loss, "before_sync": before_sync,
            "params": params(model), "slow": st["lookahead_slow_buff"], "exp_avg": st["exp_avg"],
            "lookahead_step": group["lookahead_step"], "initial_lr": group["initial_lr"],
            "keys": ",".join(sorted(st)), "defaults_k": opt.defaults["lookahead_k"]}  # fmt: skip


# ------------------------------------------------------------------------- RAdam, AdaBelief by hand


@program(rtol=5e-4, atol=5e-5)
def radam_adabelief_reference_implementations(torch):
    """The authors' own RAdam (LiyuanLucasLiu/RAdam: ``p.data.float()`` updated and copied back, a
    ten-slot ``buffer`` of step sizes shared through ``defaults``, a group with other betas that
    gets its own buffer, the switch from SGD-like to adaptive steps) and AdaBelief
    (juntang-zhuang: the belief ``(g - m)^2``, decoupled decay, AMSGrad through
    ``torch.max(..., out=...)``, and the rectified form)."""

    class RAdam(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                     degenerated_to_sgd=True):  # fmt: skip
            self.degenerated_to_sgd = degenerated_to_sgd
            if (
                isinstance(params, (list, tuple))
                and len(params) > 0
                and isinstance(params[0], dict)
            ):
                for param in params:
                    if "betas" in param and (param["betas"][0] != betas[0]
                                             or param["betas"][1] != betas[1]):  # fmt: skip
                        param["buffer"] = [[None, None, None] for _ in range(10)]
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            buffer=[[None, None, None] for _ in range(10)])  # fmt: skip
            super().__init__(params, defaults)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data.float()
                    p_data_fp32 = p.data.float()
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p_data_fp32)
                        state["exp_avg_sq"] = torch.zeros_like(p_data_fp32)
                    else:
                        state["exp_avg"] = state["exp_avg"].type_as(p_data_fp32)
                        state["exp_avg_sq"] = state["exp_avg_sq"].type_as(p_data_fp32)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    state["step"] += 1
                    buffered = group["buffer"][int(state["step"] % 10)]
                    if state["step"] == buffered[0]:
                        N_sma, step_size = buffered[1], buffered[2]
                    else:
                        buffered[0] = state["step"]
                        beta2_t = beta2 ** state["step"]
                        N_sma_max = 2 / (1 - beta2) - 1
                        N_sma = N_sma_max - 2 * state["step"] * beta2_t / (1 - beta2_t)
                        buffered[1] = N_sma
                        if N_sma >= 5:
                            step_size = math.sqrt(
                                (1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2)
                                / N_sma * N_sma_max / (N_sma_max - 2)
                            ) / (1 - beta1 ** state["step"])  # fmt: skip
                        elif self.degenerated_to_sgd:
                            step_size = 1.0 / (1 - beta1 ** state["step"])
                        else:
                            step_size = -1
                        buffered[2] = step_size
                    if N_sma >= 5:
                        if group["weight_decay"] != 0:
                            p_data_fp32.add_(
                                p_data_fp32, alpha=-group["weight_decay"] * group["lr"]
                            )
                        denom = exp_avg_sq.sqrt().add_(group["eps"])
                        p_data_fp32.addcdiv_(exp_avg, denom, value=-step_size * group["lr"])
                        p.data.copy_(p_data_fp32)
                    elif step_size > 0:
                        if group["weight_decay"] != 0:
                            p_data_fp32.add_(
                                p_data_fp32, alpha=-group["weight_decay"] * group["lr"]
                            )
                        p_data_fp32.add_(exp_avg, alpha=-step_size * group["lr"])
                        p.data.copy_(p_data_fp32)
            return loss

    class AdaBelief(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16, weight_decay=0,
                     amsgrad=False, weight_decouple=True, fixed_decay=False, rectify=True,
                     degenerated_to_sgd=True):  # fmt: skip
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            amsgrad=amsgrad, buffer=[[None, None, None] for _ in range(10)])  # fmt: skip
            super().__init__(params, defaults)
            self.degenerated_to_sgd = degenerated_to_sgd
            self.weight_decouple = weight_decouple
            self.rectify = rectify
            self.fixed_decay = fixed_decay

        def __setstate__(self, state):
            super().__setstate__(state)
            for group in self.param_groups:
                group.setdefault("amsgrad", False)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    amsgrad = group["amsgrad"]
                    state = self.state[p]
                    beta1, beta2 = group["betas"]
                    if len(state) == 0:
                        state["rho_inf"] = 2.0 / (1.0 - beta2) - 1.0
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p.data,
                                                            memory_format=torch.preserve_format)  # fmt: skip
                        state["exp_avg_var"] = torch.zeros_like(p.data,
                                                                memory_format=torch.preserve_format)  # fmt: skip
                        if amsgrad:
                            state["max_exp_avg_var"] = torch.zeros_like(
                                p.data, memory_format=torch.preserve_format
                            )
                    if self.weight_decouple:
                        if not self.fixed_decay:
                            p.data.mul_(1.0 - group["lr"] * group["weight_decay"])
                        else:
                            p.data.mul_(1.0 - group["weight_decay"])
                    else:
                        if group["weight_decay"] != 0:
                            grad.add_(p.data, alpha=group["weight_decay"])
                    exp_avg, exp_avg_var = state["exp_avg"], state["exp_avg_var"]
                    state["step"] += 1
                    bias_correction1 = 1 - beta1 ** state["step"]
                    bias_correction2 = 1 - beta2 ** state["step"]
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    grad_residual = grad - exp_avg
                    exp_avg_var.mul_(beta2).addcmul_(grad_residual, grad_residual, value=1 - beta2)
                    if amsgrad:
                        max_exp_avg_var = state["max_exp_avg_var"]
                        torch.max(max_exp_avg_var, exp_avg_var.add_(group["eps"]),
                                  out=max_exp_avg_var)  # fmt: skip
                        denom = (max_exp_avg_var.sqrt() / math.sqrt(bias_correction2)).add_(
                            group["eps"]
                        )
                    else:
                        denom = (
                            exp_avg_var.add_(group["eps"]).sqrt() / math.sqrt(bias_correction2)
                        ).add_(group["eps"])
                    if not self.rectify:
                        step_size = group["lr"] / bias_correction1
                        p.data.addcdiv_(exp_avg, denom, value=-step_size)
                    else:
                        buffered = group["buffer"][int(state["step"] % 10)]
                        if state["step"] == buffered[0]:
                            N_sma, step_size = buffered[1], buffered[2]
                        else:
                            buffered[0] = state["step"]
                            beta2_t = beta2 ** state["step"]
                            N_sma_max = 2 / (1 - beta2) - 1
                            N_sma = N_sma_max - 2 * state["step"] * beta2_t / (1 - beta2_t)
                            buffered[1] = N_sma
                            if N_sma >= 5:
                                step_size = math.sqrt(
                                    (1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2)
                                    / N_sma * N_sma_max / (N_sma_max - 2)
                                ) / (1 - beta1 ** state["step"])  # fmt: skip
                            elif self.degenerated_to_sgd:
                                step_size = 1.0 / (1 - beta1 ** state["step"])
                            else:
                                step_size = -1
                            buffered[2] = step_size
                        if N_sma >= 5:
                            denom = exp_avg_var.sqrt().add_(group["eps"])
                            p.data.addcdiv_(exp_avg, denom, value=-step_size * group["lr"])
                        elif step_size > 0:
                            p.data.add_(exp_avg, alpha=-step_size * group["lr"])
            return loss

    F = torch.nn.functional
    x, y = _blobs(90, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)

    def train(opt, model, steps):
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    model = _mlp(torch, seed=91)
    opt = RAdam([{"params": model[0].parameters()},
                 {"params": model[2].parameters(), "betas": (0.9, 0.8)}], lr=0.03,
                weight_decay=0.01)  # fmt: skip
    radam = {"losses": train(opt, model, 8), "params": params(model),
             "buffers": [[b[0] if b[0] is not None else -1 for b in g["buffer"]]
                         for g in opt.param_groups],
             "N_sma": [float(b[1]) for b in opt.param_groups[1]["buffer"] if b[1] is not None],
             "shared_buffer": opt.param_groups[0]["buffer"] is opt.defaults["buffer"],
             "exp_avg_sq": opt.state[model[2].weight]["exp_avg_sq"]}  # fmt: skip

    out = {"radam": radam}
    for name, kw in (("amsgrad", dict(amsgrad=True, rectify=False, weight_decay=0.1)),
                     ("rectified", dict(betas=(0.9, 0.8), weight_decay=0.05,
                                        weight_decouple=False))):  # fmt: skip
        model = _mlp(torch, seed=92)
        opt = AdaBelief(model.parameters(), lr=0.02, **kw)
        st = opt.state
        losses = train(opt, model, 7)
        first = st[model[0].weight]
        out[name] = {"losses": losses, "params": params(model), "exp_avg_var": first["exp_avg_var"],
                     "rho_inf": first["rho_inf"],
                     "max_exp_avg_var": first.get("max_exp_avg_var", torch.zeros(1))}  # fmt: skip
    return out


# ----------------------------------------------------------------------- gradient centralization


@program(rtol=5e-4, atol=5e-5)
def gradient_centralization_sgd_adam(torch):
    """Yonghongwei/Gradient-Centralization: SGD and Adam whose gradients of conv and linear weights
    are centred in place (the mean over every dim but the first), ``lr=required`` from
    ``torch.optim.optimizer``, the momentum buffer made with ``torch.clone(d_p).detach()``,
    Nesterov; halfway, population-based training's exploit step for SGD (model and optimizer
    deep-copied together, through the optimizer's ``__setstate__`` override) and, for Adam, a
    checkpoint taken with a deep copy of the state dict and restored into a fresh optimizer."""
    optimizer_module = importlib.import_module(f"{torch.__name__}.optim.optimizer")
    Optimizer, required = optimizer_module.Optimizer, optimizer_module.required

    def centralized_gradient(x, use_gc=True, gc_conv_only=False):
        if use_gc:
            if gc_conv_only:
                if len(list(x.size())) > 3:
                    x.add_(-x.mean(dim=tuple(range(1, len(list(x.size())))), keepdim=True))
            else:
                if len(list(x.size())) > 1:
                    x.add_(-x.mean(dim=tuple(range(1, len(list(x.size())))), keepdim=True))
        return x

    class SGD_GC(Optimizer):
        def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                     nesterov=False):  # fmt: skip
            if lr is not required and lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                            weight_decay=weight_decay, nesterov=nesterov)  # fmt: skip
            if nesterov and (momentum <= 0 or dampening != 0):
                raise ValueError("Nesterov momentum requires a momentum and zero dampening")
            super().__init__(params, defaults)

        def __setstate__(self, state):
            super().__setstate__(state)
            for group in self.param_groups:
                group.setdefault("nesterov", False)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                weight_decay = group["weight_decay"]
                momentum = group["momentum"]
                dampening = group["dampening"]
                nesterov = group["nesterov"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad.data
                    if weight_decay != 0:
                        d_p.add_(p.data, alpha=weight_decay)
                    d_p = centralized_gradient(d_p, use_gc=True, gc_conv_only=False)
                    if momentum != 0:
                        param_state = self.state[p]
                        if "momentum_buffer" not in param_state:
                            buf = param_state["momentum_buffer"] = torch.clone(d_p).detach()
                        else:
                            buf = param_state["momentum_buffer"]
                            buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                        if nesterov:
                            d_p = d_p.add(buf, alpha=momentum)
                        else:
                            d_p = buf
                    p.data.add_(d_p, alpha=-group["lr"])
            return loss

    class Adam_GC(Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                     amsgrad=False, gc_conv_only=True):  # fmt: skip
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            amsgrad=amsgrad)  # fmt: skip
            self.gc_conv_only = gc_conv_only
            super().__init__(params, defaults)

        def __setstate__(self, state):
            super().__setstate__(state)
            for group in self.param_groups:
                group.setdefault("amsgrad", False)

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
                    grad = p.grad
                    amsgrad = group["amsgrad"]
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(p,
                                                               memory_format=torch.preserve_format)  # fmt: skip
                        if amsgrad:
                            state["max_exp_avg_sq"] = torch.zeros_like(
                                p, memory_format=torch.preserve_format
                            )
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    bias_correction1 = 1 - beta1 ** state["step"]
                    bias_correction2 = 1 - beta2 ** state["step"]
                    if group["weight_decay"] != 0:
                        grad = grad.add(p, alpha=group["weight_decay"])
                    grad = centralized_gradient(grad, use_gc=True, gc_conv_only=self.gc_conv_only)
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    if amsgrad:
                        max_exp_avg_sq = state["max_exp_avg_sq"]
                        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                        denom = (max_exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(
                            group["eps"]
                        )
                    else:
                        denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                    step_size = group["lr"] / bias_correction1
                    p.addcdiv_(exp_avg, denom, value=-step_size)
            return loss

    nn, F = torch.nn, torch.nn.functional

    def convnet(seed):
        m = nn.Sequential(nn.Conv2d(2, 5, 3), nn.ReLU(), nn.Conv2d(5, 4, 3), nn.ReLU(),
                          nn.Flatten(), nn.Linear(16, 3))  # fmt: skip
        return set_weights(torch, m, seed=seed)

    x, y = _images(100)
    X, Y = torch.tensor(x), torch.tensor(y)
    out = {}
    makers = {
        "sgd": lambda m, lr: SGD_GC(m.parameters(), lr=lr, momentum=0.9, weight_decay=1e-3,
                                    nesterov=True),
        "adam": lambda m, lr: Adam_GC(m.parameters(), lr=lr, weight_decay=1e-3, amsgrad=True),
    }  # fmt: skip
    for name, make in makers.items():
        model = convnet(101)
        opt = make(model, 0.05 if name == "sgd" else 0.01)
        losses = []
        for step in range(4):
            if step == 2 and name == "sgd":
                model, opt = copy.deepcopy((model, opt))
            elif step == 2:
                checkpoint = {"model": copy.deepcopy(model.state_dict()),
                              "optimizer": copy.deepcopy(opt.state_dict())}  # fmt: skip
                model = convnet(102)
                model.load_state_dict(checkpoint["model"])
                opt = make(model, 1.0)
                opt.load_state_dict(checkpoint["optimizer"])
            opt.zero_grad()
            loss = F.cross_entropy(model(X), Y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        key = "momentum_buffer" if name == "sgd" else "max_exp_avg_sq"
        out[name] = {"losses": losses, "params": params(model), key: opt.state[model[0].weight][key],
                     "centred_grad_row_means": model[2].weight.grad.mean(dim=(1, 2, 3)),
                     "lr": opt.param_groups[0]["lr"], "nesterov": opt.param_groups[0]["nesterov"]
                     if name == "sgd" else "-",
                     "optimizes_model": opt.param_groups[0]["params"][0] is model[0].weight,
                     "state_type": type(opt.state).__name__}  # fmt: skip
    out["required"] = repr(required)
    return out


# --------------------------------------------------------------------------- Schedule-Free AdamW


@program(rtol=5e-4, atol=5e-5)
def schedule_free_adamw_train_eval_swap(torch):
    """facebookresearch/schedule_free's AdamWScheduleFree: the model holds ``y`` during training
    and ``x`` for evaluation (``optimizer.train()``/``eval()`` interpolate toward ``z`` with
    ``lerp_(end=..., weight=...)``), warmup, the ``lr_max``-weighted average ``ckp1``, the
    ``_foreach_*`` and per-tensor paths (which must agree), BatchNorm statistics recomputed in
    ``x`` mode before evaluating, and a state-dict round trip."""

    class AdamWScheduleFree(torch.optim.Optimizer):
        def __init__(self, params, lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                     warmup_steps=0, r=0.0, weight_lr_power=2.0,
                     foreach=hasattr(torch, "_foreach_mul_")):  # noqa: B008  # fmt: skip
            defaults = dict(lr=lr, betas=betas, eps=eps, r=r, k=0, warmup_steps=warmup_steps,
                            train_mode=False, weight_sum=0.0, lr_max=-1.0, scheduled_lr=0.0,
                            weight_lr_power=weight_lr_power, weight_decay=weight_decay,
                            foreach=foreach)  # fmt: skip
            super().__init__(params, defaults)

        @torch.no_grad()
        def eval(self):
            for group in self.param_groups:
                train_mode = group["train_mode"]
                beta1, _ = group["betas"]
                if train_mode:
                    for p in group["params"]:
                        state = self.state[p]
                        if "z" in state:
                            p.lerp_(end=state["z"].to(p.device), weight=1 - 1 / beta1)
                    group["train_mode"] = False

        @torch.no_grad()
        def train(self):
            for group in self.param_groups:
                train_mode = group["train_mode"]
                beta1, _ = group["betas"]
                if not train_mode:
                    for p in group["params"]:
                        state = self.state[p]
                        if "z" in state:
                            p.lerp_(end=state["z"].to(p.device), weight=1 - beta1)
                    group["train_mode"] = True

        @torch.no_grad()
        def step(self, closure=None):
            if not self.param_groups[0]["train_mode"]:
                raise Exception("Optimizer was not in train mode when step is called.")
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                eps = group["eps"]
                beta1, beta2 = group["betas"]
                decay = group["weight_decay"]
                k = group["k"]
                r = group["r"]
                warmup_steps = group["warmup_steps"]
                weight_lr_power = group["weight_lr_power"]
                if k < warmup_steps:
                    sched = (k + 1) / warmup_steps
                else:
                    sched = 1.0
                bias_correction2 = 1 - beta2 ** (k + 1)
                lr = group["lr"] * sched
                group["scheduled_lr"] = lr
                lr_max = group["lr_max"] = max(lr, group["lr_max"])
                weight = ((k + 1) ** r) * (lr_max**weight_lr_power)
                weight_sum = group["weight_sum"] = group["weight_sum"] + weight
                try:
                    ckp1 = weight / weight_sum
                except ZeroDivisionError:
                    ckp1 = 0
                active_p = [p for p in group["params"] if p.grad is not None]
                for p in active_p:
                    if "z" not in self.state[p]:
                        self.state[p]["z"] = torch.clone(p, memory_format=torch.preserve_format)
                        self.state[p]["exp_avg_sq"] = torch.zeros_like(
                            p, memory_format=torch.preserve_format
                        )
                if group["foreach"] and len(active_p) > 0:
                    y, grad, exp_avg_sq, z = zip(*[(p, p.grad, self.state[p]["exp_avg_sq"],
                                                    self.state[p]["z"]) for p in active_p])  # fmt: skip
                    torch._foreach_mul_(exp_avg_sq, beta2)
                    torch._foreach_addcmul_(exp_avg_sq, grad, grad, value=1 - beta2)
                    denom = torch._foreach_div(exp_avg_sq, bias_correction2)
                    torch._foreach_sqrt_(denom)
                    torch._foreach_add_(denom, eps)
                    torch._foreach_div_(grad, denom)
                    if decay != 0:
                        torch._foreach_add_(grad, y, alpha=decay)
                    torch._foreach_lerp_(y, z, weight=ckp1)
                    torch._foreach_add_(y, grad, alpha=lr * (beta1 * (1 - ckp1) - 1))
                    torch._foreach_sub_(z, grad, alpha=lr)
                else:
                    for p in active_p:
                        y = p.data
                        grad = p.grad.data
                        state = self.state[p]
                        z = state["z"]
                        exp_avg_sq = state["exp_avg_sq"]
                        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                        denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)
                        grad_normalized = grad.div_(denom)
                        if decay != 0:
                            grad_normalized.add_(y, alpha=decay)
                        y.lerp_(end=z, weight=ckp1)
                        y.add_(grad_normalized, alpha=lr * (beta1 * (1 - ckp1) - 1))
                        z.sub_(grad_normalized, alpha=lr)
                group["k"] = k + 1
            return loss

    nn, F = torch.nn, torch.nn.functional
    x, y = _blobs(110, n=32)
    X, Y = torch.tensor(x), torch.tensor(y)
    batches = [(X[i : i + 16], Y[i : i + 16]) for i in (0, 16)]

    def net():
        # (no bias before BatchNorm: its gradient is rounding noise, which Adam's scaling blows up)
        m = nn.Sequential(nn.Linear(6, 10, bias=False), nn.BatchNorm1d(10), nn.ReLU(),
                          nn.Linear(10, 3))  # fmt: skip
        return set_weights(torch, m, seed=111)

    out = {}
    for name in ("foreach", "loop"):
        model = net()
        opt = AdamWScheduleFree(model.parameters(), lr=0.05, warmup_steps=2, weight_decay=0.01,
                                foreach=name == "foreach")  # fmt: skip
        losses, evals = [], []
        for step in range(5):
            if step == 3:
                saved = copy.deepcopy(opt.state_dict())
                opt = AdamWScheduleFree(model.parameters(), lr=1.0, foreach=name == "foreach")
                opt.load_state_dict(saved)
            model.train()
            opt.train()
            bx, by = batches[step % 2]
            opt.zero_grad()
            loss = F.cross_entropy(model(bx), by)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step % 2 == 1:  # evaluate at x: recompute BatchNorm statistics there first
                opt.eval()
                with torch.no_grad():
                    for m in model.modules():
                        if isinstance(m, nn.BatchNorm1d):
                            m.reset_running_stats()
                            m.momentum = None
                    for bx, _ in batches:
                        model(bx)
                model.eval()
                with torch.no_grad():
                    evals.append(F.cross_entropy(model(X), Y).item())
        opt.eval()
        g = opt.param_groups[0]
        out[name] = {"losses": losses, "evals": evals, "x": params(model),
                     "z": opt.state[model[0].weight]["z"],
                     "exp_avg_sq": opt.state[model[3].weight]["exp_avg_sq"],
                     "k": g["k"], "weight_sum": g["weight_sum"], "lr_max": g["lr_max"],
                     "scheduled_lr": g["scheduled_lr"], "train_mode": g["train_mode"],
                     "running_var": model[1].running_var}  # fmt: skip
    return out
