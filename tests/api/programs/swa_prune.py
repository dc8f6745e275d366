"""Weight averaging (``torch.optim.swa_utils``: ``AveragedModel``, ``SWALR``, ``update_bn``, the
EMA and SWA averaging functions) and pruning (``torch.nn.utils.prune``: magnitude, structured,
custom and global masks, repeated pruning, ``remove``).

The random pruning methods draw different numbers in the two libraries, so only what does not depend
on the draw (how many entries or channels are pruned) is compared. The data has no ties in
magnitude or norm, where the libraries' ``topk`` may choose differently.
"""

from __future__ import annotations

import importlib

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights


def _data(seed: int, n: int = 32):
    labels = ints(seed, 3, n)
    x = (arr(seed + 1, 3, 5, scale=2.0)[labels] + arr(seed + 2, n, 5, scale=0.5)).astype(np.float32)
    return x, labels


def _bn_model(torch, seed: int):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    return set_weights(torch, model, seed=seed)


def _prune(torch):
    """``torch.nn.utils.prune`` (PyTorch does not import it with ``torch.nn.utils``)."""
    return importlib.import_module(f"{torch.__name__}.nn.utils.prune")


def _buffers(model):
    return {name: b for name, b in model.named_buffers()}


@program
def swa_training_with_swalr_and_update_bn(torch):
    """The recipe of PyTorch's docs: SGD under cosine annealing, then from epoch 4 the weights are
    averaged each epoch while ``SWALR`` anneals to ``swa_lr``; at the end ``update_bn`` recomputes
    the averaged model's batch-norm statistics from a loader of ``(input, target)`` pairs."""
    swa = torch.optim.swa_utils
    nn = torch.nn
    x, y = _data(0)
    X, Y = torch.tensor(x), torch.tensor(y)
    batches = [(X[i : i + 8], Y[i : i + 8]) for i in range(0, 32, 8)]
    model = _bn_model(torch, seed=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    swa_model = swa.AveragedModel(model)
    swa_sched = swa.SWALR(opt, swa_lr=0.02, anneal_epochs=3)
    lrs, losses, n_avg = [], [], []
    for epoch in range(9):
        for xb, yb in batches:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch >= 4:
            swa_model.update_parameters(model)
            swa_sched.step()
            n_avg.append(int(swa_model.n_averaged.item()))
        else:
            sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    before = _buffers(swa_model)
    before = {k: v.clone() for k, v in before.items()}
    swa.update_bn(batches, swa_model)
    swa_model.eval()
    with torch.no_grad():
        out = swa_model(X)
    return {
        "lrs": lrs,
        "losses": losses,
        "n_averaged": n_avg,
        "swa_params": params(swa_model),
        "buffers_before_update_bn": before,
        "buffers_after_update_bn": _buffers(swa_model),
        "momentum_restored": swa_model.module[1].momentum,
        "training_after": swa_model.training,
        "keys": list(swa_model.state_dict().keys()),
        "out": out,
        "swa_sched_state": {
            k: v
            for k, v in swa_sched.state_dict().items()
            if k in ("anneal_epochs", "_anneal_strategy", "last_epoch")
        },  # fmt: skip
    }


def _run_averaged(torch, make, seed: int, use_bn: bool = True):
    nn = torch.nn
    x, y = _data(seed)
    X, Y = torch.tensor(x), torch.tensor(y)
    if use_bn:
        model = _bn_model(torch, seed + 1)
    else:
        model = set_weights(torch, nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3)),
                            seed=seed + 1)  # fmt: skip
    avg = make(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    for _ in range(6):
        loss = nn.functional.cross_entropy(model(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        avg.update_parameters(model)
    with torch.no_grad():
        out = avg(X)
    return {"params": params(avg), "buffers": _buffers(avg), "out": out}


@program
def ema_and_custom_averages(torch):
    """``AveragedModel`` with each averaging function: EMA over parameters and buffers
    (``get_ema_multi_avg_fn``, batch-norm statistics and the int64 batch count included), the
    per-tensor EMA (``get_ema_avg_fn``), the in-place SWA (``get_swa_multi_avg_fn``), the per-tensor
    SWA and a hand-written ``avg_fn``."""
    swa = torch.optim.swa_utils
    AM = swa.AveragedModel
    return {
        "ema_multi_buffers": _run_averaged(
            torch, lambda m: AM(m, multi_avg_fn=swa.get_ema_multi_avg_fn(0.8), use_buffers=True), 10
        ),
        "ema_avg_fn": _run_averaged(torch, lambda m: AM(m, avg_fn=swa.get_ema_avg_fn(0.7)), 20),
        "swa_multi": _run_averaged(
            torch, lambda m: AM(m, multi_avg_fn=swa.get_swa_multi_avg_fn()), 30, use_bn=False
        ),
        "swa_avg_fn": _run_averaged(torch, lambda m: AM(m, avg_fn=swa.get_swa_avg_fn()), 40),
        "custom": _run_averaged(
            torch, lambda m: AM(m, avg_fn=lambda a, p, n: 0.5 * a + 0.5 * p), 50, use_bn=False
        ),
        "default_use_buffers": _run_averaged(
            torch, lambda m: AM(m, use_buffers=True), 60, use_bn=False
        ),  # fmt: skip
    }


@program
def swalr_schedules(torch):
    """``SWALR``'s rates: cosine and linear annealing over some epochs, no annealing
    (``anneal_epochs=0``), one ``swa_lr`` per parameter group, and a state dict restored into a
    new scheduler that carries on."""
    swa = torch.optim.swa_utils
    w = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))]

    def run(steps, **kw):
        opt = torch.optim.SGD([{"params": [w[0]]}, {"params": [w[1]], "lr": 0.3}], lr=0.1)
        sched = swa.SWALR(opt, **kw)
        rates = [[g["lr"] for g in opt.param_groups]]
        for _ in range(steps):
            opt.step()
            sched.step()
            rates.append(sched.get_last_lr())
        return rates, opt, sched

    out = {}
    for name, kw in (("cos", dict(swa_lr=0.01, anneal_epochs=4)),
                     ("linear", dict(swa_lr=[0.02, 0.05], anneal_epochs=3,
                                     anneal_strategy="linear")),
                     ("none", dict(swa_lr=0.04, anneal_epochs=0)),
                     ("one", dict(swa_lr=0.5, anneal_epochs=1, anneal_strategy="linear"))):  # fmt: skip
        rates, opt, sched = run(6, **kw)
        out[name] = {"rates": rates, "swa_lr": [g["swa_lr"] for g in opt.param_groups]}
    rates, opt, sched = run(2, swa_lr=0.01, anneal_epochs=5)
    state = sched.state_dict()
    opt2 = torch.optim.SGD([{"params": [w[0]]}, {"params": [w[1]], "lr": 0.3}], lr=0.1)
    for g, g0 in zip(opt2.param_groups, opt.param_groups):
        g["lr"] = g0["lr"]
    sched2 = swa.SWALR(opt2, swa_lr=0.01, anneal_epochs=5)
    sched2.load_state_dict(state)
    for g, g0 in zip(opt2.param_groups, opt.param_groups):
        g["lr"] = g0["lr"]
    resumed = []
    for _ in range(4):
        opt2.step()
        sched2.step()
        resumed.append(sched2.get_last_lr())
    out["resumed"] = resumed
    return out


def _conv_net(torch, seed: int):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    return set_weights(torch, model, seed=seed)


def _masks(model):
    return {name: b for name, b in model.named_buffers() if name.endswith("_mask")}


@program
def prune_magnitude_and_structured(torch):
    """A small conv net pruned by magnitude (a fraction of the conv weight, a count of the linear
    bias), by channel norm (L2 over output channels, L1 along the input channels), trained a step
    (the gradient reaches ``weight_orig`` through the mask), and finally made permanent with
    ``remove``."""
    prune = _prune(torch)
    x = torch.tensor(arr(0, 3, 2, 6, 6))
    y = torch.tensor(ints(1, 3, 3))
    model = _conv_net(torch, seed=2)
    conv, lin = model[0], model[3]
    prune.l1_unstructured(conv, "weight", amount=0.3)
    prune.l1_unstructured(lin, "bias", amount=1)
    keys_once = list(model.state_dict().keys())
    prune.ln_structured(conv, "weight", amount=1, n=2, dim=0)
    prune.ln_structured(lin, "weight", amount=0.25, n=1, dim=1)
    n_hooks = len(conv._forward_pre_hooks)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    grad_orig = conv.weight_orig.grad.clone()
    opt.step()
    with torch.no_grad():
        after = model(x)
    pruned_before_remove = prune.is_pruned(model)
    masks = _masks(model)
    masks = {k: v.clone() for k, v in masks.items()}
    for module, name in ((conv, "weight"), (lin, "bias"), (lin, "weight")):
        prune.remove(module, name)
    return {
        "keys_once": keys_once,
        "keys_twice": list(model.state_dict().keys()),
        "n_hooks": n_hooks,
        "masks": masks,
        "loss": loss,
        "grad_orig": grad_orig,
        "out_after_step": after,
        "is_pruned": [pruned_before_remove, prune.is_pruned(model)],
        "params_after_remove": params(model),
        "keys_after_remove": list(model.state_dict().keys()),
    }


@program
def prune_global_custom_and_random(torch):
    """``global_unstructured`` with L1 magnitudes over two layers (with importance scores for
    one), ``custom_from_mask`` on top of an earlier mask, ``identity``, ``prune`` as a function
    of a tensor, and the random methods (how many entries and channels they prune)."""
    prune = _prune(torch)
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 4)), seed=3)
    x = torch.tensor(arr(4, 7, 6))
    scores = torch.tensor(np.abs(arr(5, 4, 5)) + 0.01)
    prune.global_unstructured([(model[0], "weight"), (model[2], "weight")],
                              pruning_method=prune.L1Unstructured, amount=0.4,
                              importance_scores={(model[2], "weight"): scores})  # fmt: skip
    first = {k: v.clone() for k, v in _masks(model).items()}
    prune.global_unstructured([(model[0], "weight"), (model[2], "weight")],
                              pruning_method=prune.L1Unstructured, amount=5)  # fmt: skip
    second = _masks(model)
    custom = torch.tensor((arr(6, 5) > 0).astype(np.float32))
    prune.custom_from_mask(model[0], "bias", mask=custom)
    prune.custom_from_mask(
        model[0], "bias", mask=torch.tensor(np.array([1, 1, 0, 1, 1], np.float32))
    )
    prune.identity(model[2], "bias")
    with torch.no_grad():
        out = model(x)

    t = torch.tensor(arr(7, 4, 6))
    l1 = prune.L1Unstructured(amount=0.5).prune(t)
    ln = prune.LnStructured(amount=2, n=float("inf"), dim=-1).prune(t)

    torch.manual_seed(0)
    rnd = set_weights(torch, nn.Linear(10, 6), seed=8)
    prune.random_unstructured(rnd, "weight", amount=0.35)
    first_zeros = int((rnd.weight_mask == 0).sum().item())
    prune.random_structured(rnd, "weight", amount=2, dim=0)
    prune.random_unstructured(rnd, "bias", amount=2)
    rmask = rnd.weight_mask
    return {
        "first": first,
        "second": second,
        "bias_mask": model[0].bias_mask,
        "keys": list(model.state_dict().keys()),
        "out": out,
        "l1_prune": l1,
        "ln_inf_prune": ln,
        "random_weight_zeros": first_zeros,
        "random_rows_pruned": int((rmask.sum(dim=1) == 0).sum().item()),
        "random_bias_zeros": int((rnd.bias_mask == 0).sum().item()),
        "random_hooks": len(rnd._forward_pre_hooks),
    }
