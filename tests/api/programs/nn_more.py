"""More ``torch.nn``: a CTC-trained sequence labeller (padded and concatenated targets, every
reduction, ``zero_infinity``), an ``EmbeddingBag`` text classifier (offsets, ``max``/``sum`` with
``per_sample_weights`` and ``padding_idx``, ``from_pretrained``), and a conv net with
``SyncBatchNorm`` (on one process, a BatchNorm), ``LPPool1d/2d/3d`` and ``pdist``."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def ctc_sequence_labeller_training(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.Tanh(), nn.Conv1d(8, 6, 1))
    set_weights(torch, model, seed=21)
    x = torch.tensor(arr(22, 3, 4, 12))  # [N, features, T]
    targets = torch.tensor(np.array([[1, 2, 2, 5], [3, 3, 1, 0], [4, 1, 0, 0]]))
    input_lengths = torch.tensor(np.array([12, 10, 7]))
    target_lengths = torch.tensor(np.array([4, 3, 2]))
    ctc = nn.CTCLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(3):
        log_probs = model(x).permute(2, 0, 1).log_softmax(2)  # [T, N, C]
        loss = ctc(log_probs, targets, input_lengths, target_lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    log_probs = model(x).permute(2, 0, 1).log_softmax(2)
    flat = torch.tensor(np.array([1, 2, 2, 5, 3, 3, 1, 4, 1]))
    F = nn.functional
    per_sample = F.ctc_loss(log_probs, flat, (12, 10, 7), (4, 3, 2), reduction="none")
    summed = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction="sum")
    # sample 1 cannot emit [3, 3, 1] in 3 steps: inf, or 0 with zero_infinity
    short = torch.tensor(np.array([12, 3, 7]))
    inf_losses = F.ctc_loss(log_probs, targets, short, target_lengths, reduction="none")
    zeroed = nn.CTCLoss(blank=0, zero_infinity=True)(log_probs, targets, short, target_lengths)
    leaf = log_probs.detach().requires_grad_()
    F.ctc_loss(leaf, targets, input_lengths, target_lengths, blank=0, reduction="mean").backward()
    unbatched = F.ctc_loss(log_probs[:, 0], targets[0], torch.tensor(12), torch.tensor(4))
    return {"losses": losses, "per_sample": per_sample, "summed": summed,
            "inf_losses": inf_losses, "zeroed": zeroed, "leaf_grad": leaf.grad,
            "unbatched": unbatched, "params": params(model), "repr": repr(ctc)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def embedding_bag_text_classifier(torch):
    nn = torch.nn

    class BagClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
            self.out = nn.Linear(6, 3)

        def forward(self, tokens, offsets):
            return self.out(self.bag(tokens, offsets))

    model = set_weights(torch, BagClassifier(), seed=31)
    tokens = torch.tensor(np.array([3, 7, 0, 12, 5, 5, 19, 0, 0, 8, 2, 11, 4]))
    offsets = torch.tensor(np.array([0, 3, 3, 7, 9]))  # bag 1 is empty, bag 3 only padding
    labels = torch.tensor(ints(32, 3, 5))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(tokens, offsets), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    w = torch.tensor(arr(33, 20, 4), requires_grad=True)
    psw = torch.tensor(arr(34, 13), requires_grad=True)
    F = nn.functional
    summed = F.embedding_bag(tokens, w, offsets, mode="sum", per_sample_weights=psw,
                             padding_idx=0)  # fmt: skip
    maxed = F.embedding_bag(tokens, w, torch.tensor(np.array([0, 4, 4, 13])), mode="max",
                            include_last_offset=True)  # fmt: skip
    fixed = F.embedding_bag(tokens[:12].reshape(3, 4), w, mode="mean", padding_idx=5)
    (summed.sum() + (maxed * 2).sum() + (fixed * 3).sum()).backward()
    frozen = nn.EmbeddingBag.from_pretrained(torch.tensor(arr(35, 20, 4)), mode="max")
    return {"losses": losses, "params": params(model), "summed": summed, "maxed": maxed,
            "fixed": fixed, "dw": w.grad, "dpsw": psw.grad, "frozen": frozen(tokens, offsets),
            "frozen_requires_grad": frozen.weight.requires_grad,
            "repr": repr(model), "frozen_repr": repr(frozen)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sync_batchnorm_lp_pool_pdist(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.LPPool2d(2, 2), nn.Flatten(), nn.Linear(36, 5),
                          nn.BatchNorm1d(5))  # fmt: skip
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    set_weights(torch, model, seed=41)
    x = torch.tensor(arr(42, 6, 2, 6, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(2):
        feats = model(x)
        loss = torch.nn.functional.pdist(feats).mean() + feats.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    feats = model(x)
    F = nn.functional
    v = torch.tensor(np.abs(arr(43, 2, 3, 9)) + 0.1, requires_grad=True)
    u = torch.tensor(arr(44, 1, 2, 4, 5, 4), requires_grad=True)
    pools = {
        "lp1": nn.LPPool1d(3, 3, stride=2)(v),
        "lp1_ceil": F.lp_pool1d(v, 1.5, 2, ceil_mode=True),
        "lp3": nn.LPPool3d(2, (2, 2, 2))(u),
        "lp3_ceil": F.lp_pool3d(u, 4, 2, stride=(1, 2, 2), ceil_mode=True),
        "lp2_inf": F.lp_pool2d(u[0], float("inf"), 2),
        "pdist1": F.pdist(v[0], p=1.0),
        "pdist_inf": F.pdist(v[1], p=float("inf")),
    }
    sum((o.sum() * (i + 1) for i, o in enumerate(pools.values()))).backward()
    return {"losses": losses, "eval_feats": feats, "params": params(model),
            "running": {n: b for n, b in model.named_buffers()}, "pools": pools,
            "dv": v.grad, "du": u.grad, "repr": repr(model), "grads": grads(model)}  # fmt: skip
