"""Training-loop utilities: data loading, checkpoints, schedulers, frozen layers and parameter groups, hooks, EMA, evaluation metrics."""

from __future__ import annotations

import copy
import io
from collections import OrderedDict
from functools import partial

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program
def dataloader_padding_collate_fn_sequence_classifier(torch):
    nn = torch.nn
    DataLoader, Dataset = torch.utils.data.DataLoader, torch.utils.data.Dataset

    lengths = [3, 5, 2, 4, 6, 1, 4]
    seqs = [ints(100 + i, 10, n) + 1 for i, n in enumerate(lengths)]
    labels = ints(7, 3, len(lengths))

    class SeqDataset(Dataset):
        def __len__(self):
            return len(seqs)

        def __getitem__(self, idx):
            return {"ids": torch.from_numpy(seqs[idx]), "label": int(labels[idx])}

    def collate(batch):
        ids = nn.utils.rnn.pad_sequence(
            [b["ids"] for b in batch], batch_first=True, padding_value=0
        )
        lens = torch.tensor([len(b["ids"]) for b in batch])
        mask = torch.arange(ids.size(1))[None, :] < lens[:, None]
        return ids, mask, torch.tensor([b["label"] for b in batch], dtype=torch.long)

    class Pooled(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6, padding_idx=0)
            self.head = nn.Linear(6, 3)

        def forward(self, ids, mask):
            h = self.emb(ids) * mask.unsqueeze(-1)
            return self.head(h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1))

    model = set_weights(torch, Pooled(), seed=3)
    loader = DataLoader(SeqDataset(), batch_size=3, shuffle=False, collate_fn=collate)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses, shapes = [], []
    for _epoch in range(2):
        for ids, mask, y in loader:
            shapes.append(list(ids.shape))
            loss = nn.functional.cross_entropy(model(ids, mask), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return {"losses": losses, "shapes": shapes, "n_batches": len(loader), "params": params(model)}


def _ckpt_net(torch):
    nn = torch.nn
    return set_weights(torch, nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), seed=21)


@program
def checkpoint_model_optimizer_scheduler_bytesio_resume(torch):
    x, y = torch.tensor(arr(22, 16, 4)), torch.tensor(arr(23, 16, 2))

    def make():
        model = _ckpt_net(torch)
        opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1, amsgrad=True)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return model, opt, sched

    def step(model, opt, sched, i):
        loss = torch.nn.functional.mse_loss(model(x[i::2]), y[i::2])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    ref = make()
    ref_losses = [step(*ref, i % 2) for i in range(6)]

    model, opt, sched = make()
    first = [step(model, opt, sched, i % 2) for i in range(3)]
    buf = io.BytesIO()
    torch.save({"epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "losses": first}, buf)  # fmt: skip
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=False)
    model2, opt2, sched2 = make()
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optimizer"])
    sched2.load_state_dict(ckpt["scheduler"])
    rest = [step(model2, opt2, sched2, i % 2) for i in range(ckpt["epoch"], 6)]
    st = opt2.state_dict()["state"][0]
    return {
        "ref_losses": ref_losses, "resumed_losses": ckpt["losses"] + rest,
        "ref_params": params(ref[0]), "resumed_params": params(model2),
        "lr": sched2.get_last_lr(), "last_epoch": sched2.last_epoch, "step": st["step"],
        "max_exp_avg_sq": st["max_exp_avg_sq"], "sched_keys": sorted(k for k in ckpt["scheduler"] if not k.startswith("_")),
    }  # fmt: skip


@program
def load_state_dict_strict_false_new_head(torch):
    nn = torch.nn

    class Backbone(nn.Module):
        def __init__(self, n_out):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.LayerNorm(8))
            self.classifier = nn.Linear(8, n_out)

    class Finetune(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.LayerNorm(8))
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.features(x))

    pre = set_weights(torch, Backbone(4), seed=31)
    model = set_weights(torch, Finetune(), seed=32)
    sd = pre.state_dict()
    result = model.load_state_dict(sd, strict=False)
    try:
        model.load_state_dict(sd)
        err = "none"
    except RuntimeError as e:
        err = "Missing key(s)" in str(e) and "Unexpected key(s)" in str(e)
    filtered = OrderedDict((k, v) for k, v in sd.items() if k.startswith("features."))
    res2 = model.load_state_dict(filtered, strict=False)
    x, y = torch.tensor(arr(33, 10, 5)), torch.tensor(ints(34, 2, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {
        "missing": sorted(result.missing_keys), "unexpected": sorted(result.unexpected_keys),
        "strict_error": err, "missing2": list(res2.missing_keys), "unexpected2": list(res2.unexpected_keys),
        "same_features": torch.equal(pre.features[0].weight, sd["features.0.weight"]),
        "losses": losses, "head": model.head.weight,
    }  # fmt: skip


@program
def chained_and_sequential_schedulers_param_groups(torch):
    lr_s = torch.optim.lr_scheduler
    w1 = torch.nn.Parameter(torch.tensor(arr(41, 3)))
    w2 = torch.nn.Parameter(torch.tensor(arr(42, 3)))
    opt = torch.optim.SGD([{"params": [w1]}, {"params": [w2], "lr": 0.01}], lr=0.1, momentum=0.9)
    chained = lr_s.ChainedScheduler(
        [lr_s.LinearLR(opt, start_factor=0.25, total_iters=4), lr_s.ExponentialLR(opt, gamma=0.9)]
    )
    lrs, losses = [], []
    for _ in range(7):
        loss = (w1**2).sum() + (w2 - 1).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        chained.step()
        losses.append(loss.item())
        lrs.append([g["lr"] for g in opt.param_groups])
    opt2 = torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    seq = lr_s.SequentialLR(
        opt2,
        schedulers=[
            lr_s.ConstantLR(opt2, factor=0.5, total_iters=2),
            lr_s.MultiStepLR(opt2, milestones=[2, 4], gamma=0.1),
            lr_s.PolynomialLR(opt2, total_iters=4, power=2.0),
        ],
        milestones=[3, 6],
    )
    seq_lrs = []
    for _ in range(10):
        opt2.step()
        seq.step()
        seq_lrs.append(seq.get_last_lr()[0])
    return {"lrs": lrs, "losses": losses, "seq_lrs": seq_lrs, "w1": w1, "w2": w2,
            "initial_lr": [g["initial_lr"] for g in opt.param_groups]}  # fmt: skip


@program
def frozen_backbone_differential_lr_then_unfreeze(torch):
    nn = torch.nn
    model = nn.Sequential(
        OrderedDict(
            backbone=nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU()),
            neck=nn.Linear(8, 4),
            head=nn.Linear(4, 3),
        )
    )
    set_weights(torch, model, seed=51)
    model.backbone.requires_grad_(False)
    frozen_before = model.backbone[0].weight.clone()
    opt = torch.optim.Adam(
        [
            {"params": model.neck.parameters(), "lr": 1e-3},
            {"params": model.head.parameters(), "lr": 1e-2},
        ],  # fmt: skip
        betas=(0.8, 0.99),
    )
    x, y = torch.tensor(arr(52, 12, 6)), torch.tensor(ints(53, 3, 12))
    losses, n_trainable = [], []
    for epoch in range(6):
        if epoch == 3:
            model.backbone.requires_grad_(True)
            opt.add_param_group({"params": model.backbone.parameters(), "lr": 1e-4})
        n_trainable.append(sum(p.numel() for p in model.parameters() if p.requires_grad))
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if epoch == 2:
            frozen_grad_none = all(p.grad is None for p in model.backbone.parameters())
            still_frozen = torch.equal(frozen_before, model.backbone[0].weight)
    return {
        "losses": losses, "n_trainable": n_trainable, "frozen_grad_none": frozen_grad_none,
        "still_frozen": still_frozen, "group_lrs": [g["lr"] for g in opt.param_groups],
        "group_sizes": [len(g["params"]) for g in opt.param_groups], "params": params(model),
        "betas": list(opt.param_groups[2]["betas"]),
    }  # fmt: skip


@program
def forward_hooks_feature_extraction_perceptual_loss(torch):
    nn = torch.nn
    F = nn.functional
    cnn = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, stride=2, padding=1),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )  # fmt: skip
    set_weights(torch, cnn, seed=61)
    cnn.eval().requires_grad_(False)
    features = {}

    def save(name, module, inputs, output):
        features[name] = output

    layers = {"relu1": cnn[1], "relu2": cnn[3], "pool": cnn[5]}
    handles = [m.register_forward_hook(partial(save, n)) for n, m in layers.items()]
    calls = []
    pre = cnn[0].register_forward_pre_hook(lambda m, inp: calls.append(tuple(inp[0].shape)))

    target = torch.tensor(arr(62, 2, 2, 6, 6))
    with torch.no_grad():
        cnn(target)
        target_feats = {k: v.detach().clone() for k, v in features.items()}
    img = torch.tensor(arr(63, 2, 2, 6, 6, scale=0.5), requires_grad=True)
    opt = torch.optim.Adam([img], lr=0.05)
    losses = []
    for _ in range(5):
        cnn(img)
        loss = sum(F.mse_loss(features[k], target_feats[k]) for k in ("relu1", "relu2"))
        loss = loss + 0.1 * F.l1_loss(features["pool"], target_feats["pool"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    for h in handles:
        h.remove()
    pre.remove()
    features.clear()
    cnn(img)
    return {"losses": losses, "img": img, "n_calls": len(calls), "first_call": list(calls[0]),
            "after_remove": len(features), "feat_shapes": {k: list(v.shape) for k, v in target_feats.items()},
            "no_param_grads": all(p.grad is None for p in cnn.parameters())}  # fmt: skip


@program
def nonpersistent_buffers_and_module_introspection(torch):
    nn = torch.nn

    class Normalized(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.register_buffer("mean", torch.tensor(arr(71, d)))
            self.register_buffer("inv_std", torch.ones(d) * 2.0, persistent=False)
            self.register_buffer("steps", torch.tensor(0, dtype=torch.long))
            self.body = nn.Sequential(nn.Linear(d, 6), nn.SiLU(), nn.Dropout(0.1), nn.Linear(6, 1))

        def forward(self, x):
            if self.training:
                self.steps += 1
            return self.body((x - self.mean) * self.inv_std)

    model = Normalized(4)
    set_weights(torch, model, seed=72)
    sd = model.state_dict()
    x, y = torch.tensor(arr(73, 8, 4)), torch.tensor(arr(74, 8, 1))
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    model.eval()
    losses = []
    for _ in range(3):
        loss = nn.functional.smooth_l1_loss(model(x), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    fresh = Normalized(4)
    fresh.inv_std.fill_(5.0)
    fresh.load_state_dict(model.state_dict())
    return {
        "sd_keys": list(sd.keys()),
        "buffers": [n for n, _ in model.named_buffers()],
        "modules": [f"{n}:{type(m).__name__}" for n, m in model.named_modules()],
        "children": [n for n, _ in model.named_children()],
        "params": {n: list(p.shape) for n, p in model.named_parameters()},
        "n_params": sum(p.numel() for p in model.parameters()),
        "submodule": type(model.get_submodule("body.1")).__name__,
        "get_param": model.get_parameter("body.3.bias"), "get_buffer": model.get_buffer("mean"),
        "steps": model.steps, "losses": losses, "fresh_inv_std": fresh.inv_std,
        "fresh_steps": fresh.steps, "training": [m.training for m in model.modules()],
    }  # fmt: skip


@program
def apply_init_functions_fixed_values_and_train(torch):
    nn = torch.nn

    def init_weights(m):
        if isinstance(m, nn.Linear):
            with torch.no_grad():
                m.weight.copy_(torch.linspace(-0.5, 0.5, m.weight.numel()).view_as(m.weight))
            if m.bias is not None:
                nn.init.constant_(m.bias, 0.01)
        elif isinstance(m, nn.Conv1d):
            nn.init.dirac_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm1d, nn.LayerNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.eye_(m.weight)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 5)
            self.conv = nn.Conv1d(5, 5, 3, padding=1)
            self.bn = nn.BatchNorm1d(5)
            self.norm = nn.LayerNorm(5)
            self.out = nn.Linear(5, 2)

        def forward(self, ids):
            h = self.emb(ids).transpose(1, 2)
            h = torch.relu(self.bn(self.conv(h)))
            return self.out(self.norm(h.mean(-1)))

    model = Net().apply(init_weights)
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    ids, y = torch.tensor(ints(81, 5, 6, 7)), torch.tensor(ints(82, 2, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.2, nesterov=True, momentum=0.5, dampening=0.0)
    losses = []
    for _ in range(4):
        loss = nn.functional.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {
        "init": init_state,
        "losses": losses,
        "state": model.state_dict(),
        "grads": grads(model),
    }


@program
def ema_averaged_model_custom_decay_evaluation(torch):
    nn = torch.nn
    swa = torch.optim.swa_utils
    model = nn.Sequential(
        nn.Linear(3, 6, bias=False), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1)
    )
    set_weights(torch, model, seed=91)
    decay = 0.9

    def ema_avg(averaged, current, num_averaged):
        return decay * averaged + (1 - decay) * current

    ema = swa.AveragedModel(model, avg_fn=ema_avg, use_buffers=True)
    x, y = torch.tensor(arr(92, 10, 3)), torch.tensor(arr(93, 10, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses, ema_losses = [], []
    for _ in range(6):
        model.train()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        losses.append(loss.item())
        ema.eval()
        with torch.no_grad():
            ema_losses.append(nn.functional.mse_loss(ema(x), y).item())
    return {
        "losses": losses, "ema_losses": ema_losses, "n_averaged": ema.n_averaged,
        "ema_params": dict(ema.module.named_parameters()), "ema_buffers": dict(ema.module.named_buffers()),
        "model_params": params(model), "ema_keys": list(ema.state_dict().keys()),
        "ema_requires_grad": [p.requires_grad for p in ema.parameters()],
    }  # fmt: skip


@program
def clip_grad_value_accumulation_zero_grad_keep_tensors(torch):
    nn = torch.nn
    model = set_weights(
        torch, nn.Sequential(nn.Linear(4, 8), nn.Softplus(), nn.Linear(8, 2)), seed=101
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-3)
    x, y = torch.tensor(arr(102, 12, 4, scale=3.0)), torch.tensor(arr(103, 12, 2, scale=2.0))
    accum = 3
    losses, norms, was_zero = [], [], []
    opt.zero_grad(set_to_none=False)
    for i in range(6):
        xb, yb = x[2 * i : 2 * i + 2], y[2 * i : 2 * i + 2]
        loss = nn.functional.mse_loss(model(xb), yb) / accum
        loss.backward()
        losses.append(loss.item())
        if (i + 1) % accum == 0:
            nn.utils.clip_grad_value_(model.parameters(), clip_value=0.2)
            norms.append(
                nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, norm_type="inf")
            )
            norms.append(
                nn.utils.get_total_norm([p.grad for p in model.parameters()], norm_type=2.0)
            )
            opt.step()
            opt.zero_grad(set_to_none=False)
            was_zero.append(
                all(p.grad is not None and not p.grad.any() for p in model.parameters())
            )
    return {"losses": losses, "norms": norms, "was_zero": was_zero, "params": params(model),
            "grads": grads(model)}  # fmt: skip


@program
def no_grad_eval_loop_accuracy_confusion_matrix(torch):
    nn = torch.nn
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

    C = 4
    centers = arr(111, C, 5, scale=2.0)
    yn = ints(112, C, 40)
    xn = centers[yn] + arr(113, 40, 5)
    train = TensorDataset(torch.from_numpy(xn[:28]), torch.from_numpy(yn[:28]))
    val = TensorDataset(torch.from_numpy(xn[28:]), torch.from_numpy(yn[28:]))
    model = set_weights(
        torch,
        nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, C)),
        seed=114,
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.02)

    def evaluate(loader):
        model.eval()
        conf = torch.zeros(C, C, dtype=torch.long)
        total_loss, correct, n = 0.0, 0, 0
        with torch.no_grad():
            for xb, yb in loader:
                logits = model(xb)
                total_loss += nn.functional.cross_entropy(logits, yb, reduction="sum").item()
                pred = logits.argmax(dim=1)
                correct += (pred == yb).sum().item()
                n += yb.numel()
                conf += torch.bincount(yb * C + pred, minlength=C * C).reshape(C, C)
        model.train()
        return total_loss / n, correct / n, conf

    history = []
    for _epoch in range(3):
        for xb, yb in DataLoader(train, batch_size=7):
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        history.append(evaluate(DataLoader(val, batch_size=5))[:2])
    val_loss, acc, conf = evaluate(DataLoader(val, batch_size=5))
    tp = conf.diag().float()
    precision = tp / conf.sum(0).clamp(min=1)
    recall = tp / conf.sum(1).clamp(min=1)
    f1 = torch.where(
        precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros(C)
    )
    return {"history": [list(h) for h in history], "conf": conf, "precision": precision,
            "recall": recall, "macro_f1": f1.mean(), "acc": acc, "val_loss": val_loss}  # fmt: skip


@program
def early_stopping_deepcopy_best_plateau_inference_mode(torch):
    nn = torch.nn
    x = torch.tensor(arr(121, 24, 3))
    w_true = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)
    y = x @ torch.from_numpy(w_true) + 0.3 * torch.tensor(arr(122, 24, 1))
    x_tr, y_tr, x_va, y_va = x[:16], y[:16], x[16:], y[16:]
    model = set_weights(torch, nn.Sequential(nn.Linear(3, 5), nn.Mish(), nn.Linear(5, 1)), seed=123)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="min", factor=0.5, patience=1, threshold=1e-2
    )
    best, best_state, best_epoch, bad, patience = float("inf"), None, -1, 0, 3
    history = []
    for epoch in range(25):
        model.train()
        loss = nn.functional.mse_loss(model(x_tr), y_tr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.inference_mode():
            model.eval()
            val = nn.functional.l1_loss(model(x_va), y_va).item()
        sched.step(val)
        history.append([loss.item(), val, opt.param_groups[0]["lr"]])
        if val < best - 1e-4:
            best, best_epoch, bad = val, epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                break
    final = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    with torch.no_grad():
        restored_val = nn.functional.l1_loss(model(x_va), y_va).item()
    return {"history": history, "best": best, "best_epoch": best_epoch, "stopped_at": epoch,
            "restored_val": restored_val, "best_state": best_state, "final_state": final,
            "num_bad_epochs": sched.num_bad_epochs}  # fmt: skip
