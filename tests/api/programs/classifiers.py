"""Classifiers: MLPs with the usual losses, normalization, data loaders and evaluation code."""

from __future__ import annotations

import copy

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _blobs(n: int = 48, d: int = 4, k: int = 3, seed: int = 0):
    labels = ints(seed, k, n)
    centres = arr(seed + 1, k, d, scale=2.0)
    x = centres[labels] + arr(seed + 2, n, d, scale=0.5)
    return x.astype(np.float32), labels


def _mlp(torch, d: int, h: int, k: int, act=None):
    nn = torch.nn
    return nn.Sequential(nn.Linear(d, h), act or nn.ReLU(), nn.Linear(h, h), act or nn.ReLU(),
                         nn.Linear(h, k))  # fmt: skip


@program
def mlp_cross_entropy_adam(torch):
    x, y = _blobs()
    model = set_weights(torch, _mlp(torch, 4, 16, 3), seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    crit = torch.nn.CrossEntropyLoss()
    losses = []
    for _ in range(10):
        logits = model(torch.tensor(x))
        loss = crit(logits, torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits = model(torch.tensor(x))
        acc = (logits.argmax(dim=1) == torch.tensor(y)).float().mean().item()
    return {"losses": losses, "logits": logits, "acc": acc, "grads": grads(model)}


@program
def weighted_smoothed_cross_entropy(torch):
    x, y = _blobs(seed=3)
    y[:5] = -100  # ignored
    model = set_weights(torch, _mlp(torch, 4, 8, 3), seed=4)
    crit = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]), label_smoothing=0.1,
                                     ignore_index=-100)  # fmt: skip
    loss = crit(model(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    sum_loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y),
                                                 reduction="sum")  # fmt: skip
    return {"loss": loss, "sum_loss": sum_loss, "grads": grads(model)}


@program
def log_softmax_nll_classifier(torch):
    x, y = _blobs(seed=5)
    model = torch.nn.Sequential(torch.nn.Linear(4, 10), torch.nn.Tanh(), torch.nn.Linear(10, 3),
                                torch.nn.LogSoftmax(dim=1))  # fmt: skip
    set_weights(torch, model, seed=6)
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    losses = []
    for _ in range(8):
        loss = torch.nn.NLLLoss()(model(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def dropout_model_in_eval_mode(torch):
    x, y = _blobs(seed=7)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
    set_weights(torch, model, seed=8)
    model.eval()
    out = model(torch.tensor(x))
    loss = torch.nn.functional.cross_entropy(out, torch.tensor(y))
    loss.backward()
    model.train()
    zero_p = nn.Sequential(nn.Linear(4, 3), nn.Dropout(p=0.0))
    set_weights(torch, zero_p, seed=9)
    return {"out": out, "grads": grads(model), "train_p0": zero_p(torch.tensor(x)),
            "training": [m.training for m in model.modules()]}  # fmt: skip


@program
def batchnorm_mlp_train_then_eval(torch):
    x, y = _blobs(seed=10)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 3))
    set_weights(torch, model, seed=11)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(5):
        xb = torch.tensor(x[i * 8 : i * 8 + 16])
        loss = nn.functional.cross_entropy(model(xb), torch.tensor(y[i * 8 : i * 8 + 16]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor(x))
    bn = model[1]
    return {"eval_out": out, "running_mean": bn.running_mean, "running_var": bn.running_var,
            "batches": bn.num_batches_tracked, "params": params(model)}  # fmt: skip


@program
def layernorm_gelu_mlp(torch):
    x, y = _blobs(seed=12)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 16),
                          nn.GELU(approximate="tanh"), nn.Linear(16, 3))  # fmt: skip
    set_weights(torch, model, seed=13)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(5):
        loss = nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"loss": loss, "params": params(model)}


@program
def leaky_relu_elu_silu_mlp(torch):
    x, y = _blobs(seed=14)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.1), nn.Linear(8, 8), nn.ELU(),
                          nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 8), nn.Mish(), nn.Linear(8, 3))  # fmt: skip
    set_weights(torch, model, seed=15)
    loss = nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    f = nn.functional
    t = torch.tensor(arr(16, 10, scale=3.0), requires_grad=True)
    acts = [f.leaky_relu(t, 0.2), f.elu(t, 0.5), f.selu(t), f.celu(t), f.softplus(t, beta=2.0),
            f.hardtanh(t), f.relu6(t), f.hardswish(t), f.hardsigmoid(t), f.logsigmoid(t),
            f.softsign(t), f.mish(t), f.silu(t), f.gelu(t)]  # fmt: skip
    torch.stack(acts).sum().backward()
    return {"loss": loss, "grads": grads(model), "acts": acts, "act_grad": t.grad}


@program
def softmax_topk_predictions(torch):
    x, _ = _blobs(seed=17, k=5)
    model = set_weights(torch, torch.nn.Linear(4, 5), seed=18)
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor(x)), dim=-1)
        top = probs.topk(2, dim=1)
        conf, pred = probs.max(dim=1)
    return {"probs": probs, "top_values": top.values, "top_indices": top.indices, "conf": conf,
            "pred": pred}  # fmt: skip


@program
def one_hot_mse_classifier(torch):
    x, y = _blobs(seed=19)
    model = set_weights(torch, torch.nn.Linear(4, 3), seed=20)
    target = torch.nn.functional.one_hot(torch.tensor(y), num_classes=3).float()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        loss = torch.nn.functional.mse_loss(torch.softmax(model(torch.tensor(x)), 1), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"loss": loss, "params": params(model), "target": target}


@program
def multilabel_bce_pos_weight(torch):
    x = arr(21, 24, 6)
    y = (arr(22, 24, 4) > 0.3).astype(np.float32)
    model = set_weights(torch, torch.nn.Linear(6, 4), seed=23)
    crit = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 3.0, 0.5]))
    loss = crit(model(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    per = torch.nn.functional.binary_cross_entropy_with_logits(
        model(torch.tensor(x)), torch.tensor(y), reduction="none"
    )
    return {"loss": loss, "per": per, "grads": grads(model)}


@program
def distillation_kl_div(torch):
    x, _ = _blobs(seed=24, k=4)
    teacher = set_weights(torch, torch.nn.Linear(4, 4), seed=25)
    student = set_weights(torch, torch.nn.Linear(4, 4), seed=26)
    T = 2.0
    with torch.no_grad():
        soft = torch.softmax(teacher(torch.tensor(x)) / T, dim=-1)
    logp = torch.log_softmax(student(torch.tensor(x)) / T, dim=-1)
    loss = torch.nn.functional.kl_div(logp, soft, reduction="batchmean") * T * T
    loss.backward()
    kl_log = torch.nn.KLDivLoss(reduction="sum", log_target=True)(logp, soft.log())
    return {"loss": loss, "kl_log_target": kl_log, "grads": grads(student)}


@program
def bag_of_embeddings_with_padding(torch):
    tokens = ints(27, 20, 8, 6)
    tokens[:, 4:] = 0  # padding
    labels = ints(28, 2, 8)
    nn = torch.nn

    class BoW(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 5, padding_idx=0)
            self.fc = nn.Linear(5, 2)

        def forward(self, t):
            mask = (t != 0).float().unsqueeze(-1)
            e = self.emb(t) * mask
            return self.fc(e.sum(1) / mask.sum(1).clamp(min=1.0))

    model = set_weights(torch, BoW(), seed=29)
    loss = nn.functional.cross_entropy(model(torch.tensor(tokens)), torch.tensor(labels))
    loss.backward()
    return {"loss": loss, "grads": grads(model), "pad_row_grad": model.emb.weight.grad[0]}


@program
def dataloader_training_epochs(torch):
    x, y = _blobs(n=40, seed=30)
    data = torch.utils.data
    ds = data.TensorDataset(torch.tensor(x), torch.tensor(y))
    loader = data.DataLoader(ds, batch_size=16, shuffle=False)
    model = set_weights(torch, _mlp(torch, 4, 8, 3), seed=31)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    epoch_losses = []
    for _ in range(3):
        total = 0.0
        for xb, yb in loader:
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        epoch_losses.append(total / len(ds))
    batch_sizes = [len(b[0]) for b in data.DataLoader(ds, batch_size=16, drop_last=True)]
    return {"epoch_losses": epoch_losses, "n_batches": len(loader), "batch_sizes": batch_sizes,
            "params": params(model)}  # fmt: skip


@program
def early_stopping_best_snapshot(torch):
    x, y = _blobs(seed=32)
    xv, yv = _blobs(n=20, seed=33)
    model = set_weights(torch, _mlp(torch, 4, 8, 3), seed=34)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    best, best_state, history = float("inf"), None, []
    for _ in range(6):
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            val = torch.nn.functional.cross_entropy(model(torch.tensor(xv)), torch.tensor(yv))
        history.append(val.item())
        if val.item() < best:
            best = val.item()
            best_state = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    with torch.no_grad():
        restored = torch.nn.functional.cross_entropy(model(torch.tensor(xv)), torch.tensor(yv))
    return {"history": history, "best": best, "restored": restored}


@program
def custom_module_with_buffers(torch):
    nn = torch.nn

    class Scaler(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.register_buffer("mean", torch.zeros(d))
            self.register_buffer("count", torch.tensor(0), persistent=False)
            self.lin = nn.Linear(d, 2)

        def forward(self, x):
            if self.training:
                with torch.no_grad():
                    self.mean.mul_(0.9).add_(x.mean(0) * 0.1)
                    self.count += 1
            return self.lin(x - self.mean)

    m = set_weights(torch, Scaler(3), seed=35)
    x = torch.tensor(arr(36, 5, 3))
    for _ in range(3):
        out = m(x)
    return {"out": out, "mean": m.mean, "count": m.count, "keys": sorted(m.state_dict().keys()),
            "buffers": [b for b in m.buffers()]}  # fmt: skip
