"""Self-supervised and contrastive representation learning as its papers' reference code writes
it: SimCLR's NT-Xent over a masked 2N x 2N self-similarity matrix, MoCo v2's key queue updated in
place with pointer arithmetic and its momentum encoder, MoCo v3's symmetric loss with a kNN
monitor, BYOL's predictor and EMA target, SimSiam's stop-gradient, Barlow Twins'
cross-correlation with a solo-learn-style LARS, VICReg's three terms, SwAV's Sinkhorn-Knopp
codes with a feature queue, DINO's multi-crop student/teacher with a momentum center, MAE's
random masking by argsort/gather, CLIP's symmetric loss with a clamped logit scale, and the
supervised contrastive loss with label masks. The library's own random numbers are replaced by
NumPy arrays from fixed seeds (MAE's noise, the shuffle-BN permutation, the augmentations)."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _views(seed: int, n: int, dim: int, noise: float = 0.3, scale2: float = 0.9):
    """Two "augmented views" of ``n`` samples: a shared base plus independent noise."""
    base = arr(seed, n, dim)
    return (base + arr(seed + 1, n, dim, scale=noise),
            base * scale2 + arr(seed + 2, n, dim, scale=noise))  # fmt: skip


def _cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0,
                      start_warmup_value=0.0):  # fmt: skip
    # DINO's utils.cosine_scheduler: a per-iteration schedule as a NumPy array
    warmup_schedule = np.array([])
    warmup_iters = warmup_epochs * niter_per_ep
    if warmup_epochs > 0:
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (
        1 + np.cos(np.pi * iters / len(iters))
    )
    schedule = np.concatenate((warmup_schedule, schedule))
    assert len(schedule) == epochs * niter_per_ep
    return schedule


@program(rtol=5e-4, atol=5e-5)
def simclr_ntxent_masked_self_similarity_three_ways(torch):
    """SimCLR with a BN encoder and an MLP projection head trained by Adam and cosine annealing;
    NT-Xent written three ways as the popular reimplementations do: positives and negatives
    picked out of the 2N x 2N cosine-similarity matrix with ``~eye`` and label masks, with
    ``torch.diag(sim, ±N)`` and a ``fill_diagonal_`` mask, and with the diagonal set to ``-inf``
    by ``masked_fill_`` and rolled targets; top-k accuracy of the positive."""
    nn, F = torch.nn, torch.nn.functional

    class SimCLR(nn.Module):
        def __init__(self, in_dim=10, feat_dim=12, out_dim=6):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(in_dim, feat_dim), nn.BatchNorm1d(feat_dim),
                                         nn.ReLU(inplace=True))  # fmt: skip
            self.projector = nn.Sequential(nn.Linear(feat_dim, feat_dim), nn.ReLU(),
                                           nn.Linear(feat_dim, out_dim))  # fmt: skip

        def forward(self, x):
            h = self.encoder(x)
            return h, self.projector(h)

    def info_nce_loss(features, batch_size, n_views=2, temperature=0.5):
        labels = torch.cat([torch.arange(batch_size) for i in range(n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        features = F.normalize(features, dim=1)
        similarity_matrix = torch.matmul(features, features.T)
        mask = torch.eye(labels.shape[0], dtype=torch.bool)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
        logits = torch.cat([positives, negatives], dim=1)
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        return logits / temperature, labels

    def mask_correlated_samples(batch_size):
        N = 2 * batch_size
        mask = torch.ones((N, N), dtype=bool)
        mask = mask.fill_diagonal_(0)
        for i in range(batch_size):
            mask[i, batch_size + i] = 0
            mask[batch_size + i, i] = 0
        return mask

    def nt_xent(z_i, z_j, temperature=0.5):
        batch_size = z_i.shape[0]
        N = 2 * batch_size
        z = torch.cat((z_i, z_j), dim=0)
        sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / temperature
        sim_i_j = torch.diag(sim, batch_size)
        sim_j_i = torch.diag(sim, -batch_size)
        positive_samples = torch.cat((sim_i_j, sim_j_i), dim=0).reshape(N, 1)
        negative_samples = sim[mask_correlated_samples(batch_size)].reshape(N, -1)
        labels = torch.zeros(N).to(positive_samples.device).long()
        logits = torch.cat((positive_samples, negative_samples), dim=1)
        return nn.CrossEntropyLoss(reduction="sum")(logits, labels) / N

    def nt_xent_masked_fill(z_i, z_j, temperature=0.5):
        z = F.normalize(torch.cat([z_i, z_j]), dim=-1)
        sim = z @ z.t() / temperature
        sim.masked_fill_(torch.eye(sim.shape[0], dtype=torch.bool), float("-inf"))
        target = torch.arange(sim.shape[0]).roll(z_i.shape[0])
        return F.cross_entropy(sim, target)

    def accuracy(output, target, topk=(1,)):
        with torch.no_grad():
            maxk = max(topk)
            batch_size = target.size(0)
            _, pred = output.topk(maxk, 1, True, True)
            pred = pred.t()
            correct = pred.eq(target.view(1, -1).expand_as(pred))
            res = []
            for k in topk:
                correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
                res.append(correct_k.mul_(100.0 / batch_size))
            return res

    bs = 6
    model = set_weights(torch, SimCLR(), seed=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4, eta_min=0)
    criterion = torch.nn.CrossEntropyLoss()
    losses, others, accs, lrs = [], [], [], []
    for step in range(4):
        x1, x2 = _views(10 + 3 * step, bs, 10)
        images = torch.cat([torch.tensor(x1), torch.tensor(x2)], dim=0)
        _, features = model(images)
        logits, labels = info_nce_loss(features, bs)
        loss = criterion(logits, labels)
        z_i, z_j = features[:bs], features[bs:]
        others.append([nt_xent(z_i, z_j).item(), nt_xent_masked_fill(z_i, z_j).item()])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        top1, top5 = accuracy(logits, labels, topk=(1, 5))
        losses.append(loss.item())
        accs.append([top1[0].item(), top5[0].item()])
        lrs.append(scheduler.get_last_lr()[0])
    return {"losses": losses, "other_forms": others, "accs": accs, "lrs": lrs,
            "logits": logits, "mask": mask_correlated_samples(3), "params": params(model),
            "exp_avg_sq": optimizer.state[model.projector[2].weight]["exp_avg_sq"]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def moco_v2_inplace_momentum_queue_wraparound_shuffle_bn(torch):
    """MoCo v2 on one process: the key encoder updated in place with
    ``param_k.data.mul_(m).add_(param_q.data, alpha=1 - m)``, shuffle-BN emulated with a fixed
    permutation and its ``argsort`` inverse, a queue whose length is not a multiple of the batch
    filled at ``(ptr + arange(bs)) % K`` with the pointer kept in a long buffer, a second queue of
    sample ids, and the cosine learning-rate rule applied to every param group by hand."""
    nn = torch.nn

    class MoCo(nn.Module):
        def __init__(self, dim=6, K=10, m=0.9, T=0.2):
            super().__init__()
            self.K, self.m, self.T = K, m, T
            self.encoder_q = self._encoder(dim)
            self.encoder_k = self._encoder(dim)
            set_weights(torch, self.encoder_q, seed=21)
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.data.copy_(param_q.data)  # initialize
                param_k.requires_grad = False  # not update by gradient
            self.register_buffer("queue", torch.tensor(arr(22, dim, K)))
            self.queue = nn.functional.normalize(self.queue, dim=0)
            self.register_buffer("queue_ids", torch.full((K,), -1, dtype=torch.long))
            self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        @staticmethod
        def _encoder(dim):
            return nn.Sequential(nn.Linear(8, 12), nn.BatchNorm1d(12), nn.ReLU(inplace=True),
                                 nn.Linear(12, 12), nn.ReLU(inplace=True), nn.Linear(12, dim))  # fmt: skip

        @torch.no_grad()
        def _momentum_update_key_encoder(self):
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.data.mul_(self.m).add_(param_q.data, alpha=1.0 - self.m)

        @torch.no_grad()
        def _dequeue_and_enqueue(self, keys, ids):
            batch_size = keys.shape[0]
            ptr = int(self.queue_ptr)
            idx = torch.arange(ptr, ptr + batch_size) % self.K  # wraps around the end
            self.queue[:, idx] = keys.T
            self.queue_ids[idx] = ids
            ptr = (ptr + batch_size) % self.K  # move pointer
            self.queue_ptr[0] = ptr

        @torch.no_grad()
        def _batch_shuffle_single_gpu(self, x, idx_shuffle):
            idx_unshuffle = torch.argsort(idx_shuffle)
            return x[idx_shuffle], idx_unshuffle

        def forward(self, im_q, im_k, idx_shuffle, ids):
            q = self.encoder_q(im_q)
            q = nn.functional.normalize(q, dim=1)
            with torch.no_grad():
                self._momentum_update_key_encoder()
                im_k, idx_unshuffle = self._batch_shuffle_single_gpu(im_k, idx_shuffle)
                k = self.encoder_k(im_k)
                k = nn.functional.normalize(k, dim=1)
                k = k[idx_unshuffle]
            l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
            l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
            logits = torch.cat([l_pos, l_neg], dim=1)
            logits /= self.T
            labels = torch.zeros(logits.shape[0], dtype=torch.long)
            self._dequeue_and_enqueue(k, ids)
            return logits, labels

    model = MoCo()
    criterion = nn.CrossEntropyLoss()
    init_lr, epochs = 0.06, 5
    optimizer = torch.optim.SGD(model.parameters(), init_lr, momentum=0.9, weight_decay=1e-4)
    rng = np.random.default_rng(23)
    losses, ptrs, lrs = [], [], []
    for epoch in range(epochs):
        lr = init_lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        x1, x2 = _views(30 + 3 * epoch, 4, 8, noise=0.2)
        idx_shuffle = torch.tensor(rng.permutation(4))
        ids = torch.arange(4) + 4 * epoch
        output, target = model(torch.tensor(x1), torch.tensor(x2), idx_shuffle, ids)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        ptrs.append(model.queue_ptr.item())
        lrs.append(lr)
    return {"losses": losses, "ptrs": ptrs, "lrs": lrs, "queue": model.queue,
            "queue_ids": model.queue_ids, "logits": output,
            "key_params": params(model.encoder_k), "query_params": params(model.encoder_q),
            "key_bn": [model.encoder_k[1].running_mean, model.encoder_k[1].running_var,
                       model.encoder_k[1].num_batches_tracked],
            "key_grads_none": [p.grad is None for p in model.encoder_k.parameters()],
            "momentum_buffer": optimizer.state[model.encoder_q[0].weight]["momentum_buffer"]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def byol_predictor_ema_target_cosine_tau(torch):
    """BYOL: an online backbone + projector and a predictor, the target network a
    ``copy.deepcopy`` with ``requires_grad`` turned off, both views in one batch split with
    ``chunk``, the symmetric ``2 - 2 cos`` loss against detached target projections, and the
    target updated by an EMA (``ma.data = old * beta + (1 - beta) * new``) whose rate follows
    BYOL's cosine schedule; SGD with momentum on the online parameters only (an adaptive
    optimiser would turn the float noise in the gradients that batch norm makes exactly zero,
    such as the projector's last bias ahead of the predictor's BN, into full-size steps)."""
    nn, F = torch.nn, torch.nn.functional

    def MLP(dim, projection_size, hidden_size=16):
        return nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size),
                             nn.ReLU(inplace=True), nn.Linear(hidden_size, projection_size))  # fmt: skip

    class NetWrapper(nn.Module):
        def __init__(self, net, projection_size, projection_hidden_size):
            super().__init__()
            self.net = net
            self.projector = MLP(12, projection_size, projection_hidden_size)

        def forward(self, x):
            representation = self.net(x)
            return self.projector(representation), representation

    def set_requires_grad(model, val):
        for p in model.parameters():
            p.requires_grad = val

    def loss_fn(x, y):
        x = F.normalize(x, dim=-1, p=2)
        y = F.normalize(y, dim=-1, p=2)
        return 2 - 2 * (x * y).sum(dim=-1)

    class EMA:
        def __init__(self, beta):
            self.beta = beta

        def update_average(self, old, new):
            if old is None:
                return new
            return old * self.beta + (1 - self.beta) * new

    def update_moving_average(ema_updater, ma_model, current_model):
        for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
            old_weight, up_weight = ma_params.data, current_params.data
            ma_params.data = ema_updater.update_average(old_weight, up_weight)

    class BYOL(nn.Module):
        def __init__(self, net, projection_size=6, projection_hidden_size=16,
                     moving_average_decay=0.9):  # fmt: skip
            super().__init__()
            self.online_encoder = NetWrapper(net, projection_size, projection_hidden_size)
            self.online_predictor = MLP(projection_size, projection_size, projection_hidden_size)
            set_weights(torch, self, seed=41)
            self.target_encoder = copy.deepcopy(self.online_encoder)
            set_requires_grad(self.target_encoder, False)
            self.target_ema_updater = EMA(moving_average_decay)

        def update_moving_average(self):
            update_moving_average(self.target_ema_updater, self.target_encoder,
                                  self.online_encoder)  # fmt: skip

        def forward(self, x1, x2):
            images = torch.cat((x1, x2), dim=0)
            online_projections, _ = self.online_encoder(images)
            online_predictions = self.online_predictor(online_projections)
            online_pred_one, online_pred_two = online_predictions.chunk(2, dim=0)
            with torch.no_grad():
                target_projections, _ = self.target_encoder(images)
                target_projections = target_projections.detach()
                target_proj_one, target_proj_two = target_projections.chunk(2, dim=0)
            loss_one = loss_fn(online_pred_one, target_proj_two.detach())
            loss_two = loss_fn(online_pred_two, target_proj_one.detach())
            loss = loss_one + loss_two
            return loss.mean()

    backbone = nn.Sequential(nn.Linear(9, 12), nn.ReLU())
    learner = BYOL(backbone)
    opt = torch.optim.SGD(
        [p for p in learner.parameters() if p.requires_grad],
        lr=0.1,
        momentum=0.9,
        weight_decay=1.5e-6,
    )  # the target's parameters have requires_grad=False
    total_steps, base_tau = 5, 0.9
    losses, taus = [], []
    for k in range(total_steps):
        x1, x2 = _views(50 + 3 * k, 5, 9)
        loss = learner(torch.tensor(x1), torch.tensor(x2))
        opt.zero_grad()
        loss.backward()
        opt.step()
        tau = 1 - (1 - base_tau) * (math.cos(math.pi * k / total_steps) + 1) / 2
        learner.target_ema_updater.beta = tau
        learner.update_moving_average()
        losses.append(loss.item())
        taus.append(tau)
    with torch.no_grad():
        x = torch.tensor(arr(60, 4, 9))
        online_rep = learner.online_encoder(x)[1]
        target_rep = learner.target_encoder(x)[1]
        agreement = F.cosine_similarity(online_rep, target_rep, dim=-1)
    return {"losses": losses, "taus": taus, "target": params(learner.target_encoder),
            "online": params(learner.online_encoder), "predictor_grads":
            grads(learner.online_predictor), "agreement": agreement,
            "target_trainable": sum(p.requires_grad for p in learner.target_encoder.parameters()),
            "target_bn_mean": learner.target_encoder.projector[1].running_mean}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def simsiam_stop_gradient_fixed_predictor_lr(torch):
    """SimSiam: the encoder's ``fc`` replaced by a 3-layer projection ending in an affine-free
    BatchNorm whose preceding bias is frozen (``encoder.fc[6].bias.requires_grad = False``), a
    bottleneck predictor, the negative-cosine loss against ``z.detach()``, SGD with a
    ``fix_lr`` param group kept at the initial rate while the encoder's rate follows a cosine;
    the output std of the normalised ``z`` monitored for collapse."""
    nn, F = torch.nn, torch.nn.functional

    class BaseEncoder(nn.Module):
        def __init__(self, num_classes=8):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(10, 12), nn.BatchNorm1d(12), nn.ReLU())
            self.fc = nn.Linear(12, num_classes)

        def forward(self, x):
            return self.fc(self.body(x))

    class SimSiam(nn.Module):
        def __init__(self, base_encoder, dim=8, pred_dim=4):
            super().__init__()
            self.encoder = base_encoder(num_classes=dim)
            prev_dim = self.encoder.fc.weight.shape[1]
            self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False),
                                            nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True),
                                            nn.Linear(prev_dim, prev_dim, bias=False),
                                            nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True),
                                            self.encoder.fc,
                                            nn.BatchNorm1d(dim, affine=False))  # fmt: skip
            # hack: not use bias as it is followed by BN
            self.encoder.fc[6].bias.requires_grad = False
            self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                           nn.BatchNorm1d(pred_dim), nn.ReLU(inplace=True),
                                           nn.Linear(pred_dim, dim))  # fmt: skip

        def forward(self, x1, x2):
            z1 = self.encoder(x1)
            z2 = self.encoder(x2)
            p1 = self.predictor(z1)
            p2 = self.predictor(z2)
            return p1, p2, z1.detach(), z2.detach()

    model = set_weights(torch, SimSiam(BaseEncoder), seed=61)
    bias_before = model.encoder.fc[6].bias.clone()
    criterion = nn.CosineSimilarity(dim=1)
    init_lr, epochs = 0.05 * 6 / 256 * 40, 4
    optim_params = [{"params": model.encoder.parameters(), "fix_lr": False},
                    {"params": model.predictor.parameters(), "fix_lr": True}]  # fmt: skip
    optimizer = torch.optim.SGD(optim_params, init_lr, momentum=0.9, weight_decay=1e-4)
    losses, lrs, stds = [], [], []
    for epoch in range(epochs):
        cur_lr = init_lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))
        for param_group in optimizer.param_groups:
            if "fix_lr" in param_group and param_group["fix_lr"]:
                param_group["lr"] = init_lr
            else:
                param_group["lr"] = cur_lr
        x1, x2 = _views(70 + 3 * epoch, 6, 10)
        p1, p2, z1, z2 = model(x1=torch.tensor(x1), x2=torch.tensor(x2))
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        lrs.append([g["lr"] for g in optimizer.param_groups])
        stds.append(F.normalize(z1, dim=1).std(dim=0).mean().item())
    return {"losses": losses, "lrs": lrs, "stds": stds, "params": params(model),
            "bias_unchanged": torch.equal(bias_before, model.encoder.fc[6].bias),
            "bias_grad_none": model.encoder.fc[6].bias.grad is None,
            "z_requires_grad": [z1.requires_grad, p1.requires_grad],
            "bn_var": model.encoder.fc[7].running_var,
            "predictor_grads": grads(model.predictor)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def barlow_twins_cross_correlation_lars_trust_ratio(torch):
    """Barlow Twins: the cross-correlation of batch-standardised embeddings, its loss computed
    twice (``c_diff[~eye] *= lambda`` as lightly writes it, and the on-diagonal plus the
    ``flatten()[:-1].view(n - 1, n + 1)[:, 1:]`` off-diagonal view), trained with a solo-learn
    style LARS: trust ratio ``eta * ||p|| / (||g|| + wd * ||p|| + eps)`` under tensor
    comparisons, ``clip_lr`` with ``min``, biases and norms excluded, SGD momentum on top."""
    nn = torch.nn
    optim = torch.optim

    class LARS(optim.Optimizer):
        def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, eta=1e-3, eps=1e-8,
                     clip_lr=False, exclude_bias_n_norm=False):  # fmt: skip
            defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta,
                            eps=eps, clip_lr=clip_lr, exclude_bias_n_norm=exclude_bias_n_norm)  # fmt: skip
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                wd, momentum = group["weight_decay"], group["momentum"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    p_norm = torch.norm(p.data)
                    g_norm = torch.norm(p.grad.data)
                    if p.ndim != 1 or not group["exclude_bias_n_norm"]:
                        if p_norm != 0 and g_norm != 0:
                            lars_lr = p_norm / (g_norm + p_norm * wd + group["eps"])
                            lars_lr *= group["eta"]
                            if group["clip_lr"]:
                                lars_lr = min(lars_lr / group["lr"], 1)
                            d_p = d_p.add(p, alpha=wd)
                            d_p *= lars_lr
                    if momentum != 0:
                        state = self.state[p]
                        if "momentum_buffer" not in state:
                            buf = state["momentum_buffer"] = torch.clone(d_p).detach()
                        else:
                            buf = state["momentum_buffer"]
                            buf.mul_(momentum).add_(d_p)
                        d_p = buf
                    p.add_(d_p, alpha=-group["lr"])
            return loss

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    def barlow_twins_loss(z_a, z_b, lambda_param=5e-3):
        N, D = z_a.shape
        z_a_norm = (z_a - z_a.mean(0)) / z_a.std(0)
        z_b_norm = (z_b - z_b.mean(0)) / z_b.std(0)
        c = torch.mm(z_a_norm.T, z_b_norm) / N
        c_diff = (c - torch.eye(D)).pow(2)
        c_diff[~torch.eye(D, dtype=bool)] *= lambda_param
        return c_diff.sum(), c

    model = set_weights(torch, nn.Sequential(
        nn.Linear(10, 12), nn.BatchNorm1d(12), nn.ReLU(inplace=True), nn.Linear(12, 8, bias=False),
        nn.BatchNorm1d(8), nn.ReLU(inplace=True), nn.Linear(8, 8)), seed=81)  # fmt: skip
    optimizer = LARS(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-4, eta=0.02,
                     clip_lr=True, exclude_bias_n_norm=True)  # fmt: skip
    losses, view_losses, terms = [], [], []
    for step in range(4):
        x1, x2 = _views(90 + 3 * step, 8, 10)
        x = torch.cat([torch.tensor(x1), torch.tensor(x2)])
        z_a, z_b = model(x).chunk(2)
        loss, c = barlow_twins_loss(z_a, z_b)
        on_diag = torch.diagonal(c).add(-1).pow(2).sum()
        off_diag = off_diagonal(c).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        view_losses.append((on_diag + 5e-3 * off_diag).item())
        terms.append([on_diag.item(), off_diag.item()])
    return {"losses": losses, "view_losses": view_losses, "terms": terms, "c": c,
            "off_diag": off_diagonal(c.detach()), "params": params(model), "grads": grads(model),
            "buf": optimizer.state[model[3].weight]["momentum_buffer"],
            "state_size": len(optimizer.state)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def vicreg_variance_invariance_covariance_sgd_warmup(torch):
    """VICReg with an expander: the invariance MSE, the hinge on the per-dimension std and the
    off-diagonal covariance penalty, each kept separately over steps; the covariance term also
    computed as lightly does (``einsum`` covariance indexed with a non-diagonal boolean mask);
    Nesterov SGD on decay / no-decay groups with a linear-warmup ``LambdaLR``."""
    nn, F = torch.nn, torch.nn.functional

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    class VICReg(nn.Module):
        def __init__(self, num_features=8, sim_coeff=25.0, std_coeff=25.0, cov_coeff=1.0):
            super().__init__()
            self.num_features = num_features
            self.sim_coeff, self.std_coeff, self.cov_coeff = sim_coeff, std_coeff, cov_coeff
            self.backbone = nn.Sequential(nn.Linear(9, 12), nn.ReLU())
            self.projector = nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(True),
                                           nn.Linear(16, num_features, bias=False))  # fmt: skip

        def forward(self, x, y):
            x = self.projector(self.backbone(x))
            y = self.projector(self.backbone(y))
            batch_size = x.shape[0]
            repr_loss = F.mse_loss(x, y)
            x = x - x.mean(dim=0)
            y = y - y.mean(dim=0)
            std_x = torch.sqrt(x.var(dim=0) + 0.0001)
            std_y = torch.sqrt(y.var(dim=0) + 0.0001)
            std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
            cov_x = (x.T @ x) / (batch_size - 1)
            cov_y = (y.T @ y) / (batch_size - 1)
            cov_loss = off_diagonal(cov_x).pow_(2).sum().div(self.num_features) + off_diagonal(
                cov_y
            ).pow_(2).sum().div(self.num_features)
            loss = (
                self.sim_coeff * repr_loss + self.std_coeff * std_loss + self.cov_coeff * cov_loss
            )
            return loss, (repr_loss, std_loss, cov_loss), (x, y)

    def covariance_loss(x):
        x = x - x.mean(dim=0)
        batch_size, dim = x.shape
        cov = torch.einsum("b...c,b...d->...cd", x, x) / (batch_size - 1)
        nondiag_mask = ~torch.eye(dim, device=x.device, dtype=torch.bool)
        return cov[..., nondiag_mask].pow(2).sum(-1) / dim

    model = set_weights(torch, VICReg(), seed=101, scale=0.6)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=0.01,
                                momentum=0.9, nesterov=True)  # fmt: skip
    warmup = 2
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup)
    )
    losses, terms, lightly_cov, lrs = [], [], [], []
    for step in range(4):
        x1, x2 = _views(110 + 3 * step, 7, 9)
        lrs.append([g["lr"] for g in optimizer.param_groups])
        loss, (r, s, c), (xc, yc) = model(torch.tensor(x1), torch.tensor(x2))
        lightly_cov.append((covariance_loss(xc) + covariance_loss(yc)).item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        terms.append({"sim": r.item(), "std": s.item(), "cov": c.item()})
    return {"losses": losses, "terms": terms, "lightly_cov": lightly_cov, "lrs": lrs,
            "params": params(model), "grads": grads(model),
            "momentum_buffer": optimizer.state[decay[0]]["momentum_buffer"]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def swav_sinkhorn_knopp_prototypes_queue_freeze(torch):
    """SwAV with two large and two small crops: prototypes (a bias-free ``Linear``) normalised in
    place before every step, codes from Sinkhorn-Knopp iterations on ``exp(scores / eps)`` with
    in-place row and column normalisation, a feature queue shifted in place and used once full,
    the swapped-prediction loss over ``np.delete``'d crop indices, and the prototypes' gradients
    dropped for the first iterations."""
    nn = torch.nn

    class SwAV(nn.Module):
        def __init__(self, output_dim=6, nmb_prototypes=5):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(8, 12), nn.BatchNorm1d(12), nn.ReLU())
            self.projection_head = nn.Sequential(nn.Linear(12, 12), nn.BatchNorm1d(12),
                                                 nn.ReLU(inplace=True), nn.Linear(12, output_dim))  # fmt: skip
            self.prototypes = nn.Linear(output_dim, nmb_prototypes, bias=False)

        def forward(self, inputs):
            x = self.projection_head(self.backbone(torch.cat(inputs)))
            x = nn.functional.normalize(x, dim=1, p=2)
            return x, self.prototypes(x)

    @torch.no_grad()
    def sinkhorn(out, epsilon=0.05, sinkhorn_iterations=3):
        Q = torch.exp(out / epsilon).t()  # Q is K-by-B
        B = Q.shape[1]
        K = Q.shape[0]
        sum_Q = torch.sum(Q)
        Q /= sum_Q
        for _ in range(sinkhorn_iterations):
            sum_of_rows = torch.sum(Q, dim=1, keepdim=True)
            Q /= sum_of_rows
            Q /= K
            Q /= torch.sum(Q, dim=0, keepdim=True)
            Q /= B
        Q *= B  # the columns must sum to 1 so that Q is an assignment
        return Q.t()

    model = set_weights(torch, SwAV(), seed=121)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-6)
    nmb_crops, crops_for_assign, temperature, bs = [2, 2], [0, 1], 0.1, 4
    freeze_prototypes_niters = 2
    queue = torch.zeros(len(crops_for_assign), 8, 6)
    use_the_queue = False
    losses, codes, queue_used = [], [], []
    for iteration in range(4):
        base = arr(130 + iteration, bs, 8)
        inputs = [torch.tensor(base + arr(140 + 4 * iteration + c, bs, 8, scale=0.2 + 0.2 * (c > 1)))
                  for c in range(sum(nmb_crops))]  # fmt: skip
        with torch.no_grad():
            w = model.prototypes.weight.data.clone()
            w = nn.functional.normalize(w, dim=1, p=2)
            model.prototypes.weight.copy_(w)
        embedding, output = model(inputs)
        embedding = embedding.detach()
        bs = inputs[0].size(0)
        loss = 0
        for i, crop_id in enumerate(crops_for_assign):
            with torch.no_grad():
                out = output[bs * crop_id : bs * (crop_id + 1)].detach()
                if queue is not None:
                    if use_the_queue or not torch.all(queue[i, -1, :] == 0):
                        use_the_queue = True
                        out = torch.cat((torch.mm(queue[i], model.prototypes.weight.t()), out))
                    queue[i, bs:] = queue[i, :-bs].clone()
                    queue[i, :bs] = embedding[crop_id * bs : (crop_id + 1) * bs]
                q = sinkhorn(out)[-bs:]
                codes.append(q)
            subloss = 0
            for v in np.delete(np.arange(np.sum(nmb_crops)), crop_id):
                x = output[bs * v : bs * (v + 1)] / temperature
                subloss -= torch.mean(torch.sum(q * nn.functional.log_softmax(x, dim=1), dim=1))
            loss += subloss / (np.sum(nmb_crops) - 1)
        loss /= len(crops_for_assign)
        optimizer.zero_grad()
        loss.backward()
        if iteration < freeze_prototypes_niters:
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        optimizer.step()
        losses.append(loss.item())
        queue_used.append(use_the_queue)
    return {"losses": losses, "codes": codes, "queue_used": queue_used, "queue": queue,
            "code_col_sums": codes[-1].sum(dim=1), "prototypes": model.prototypes.weight,
            "params": params(model), "proto_state": model.prototypes.weight in optimizer.state,
            "assignments": codes[-1].argmax(dim=1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def dino_multicrop_teacher_centering_temperature_schedule(torch):
    """DINO: a tiny conv backbone under a multi-crop wrapper that groups crops by resolution
    (``unique_consecutive`` counts, ``cumsum``, concatenation onto ``torch.empty(0)``), a head
    whose last layer is ``weight_norm``'d with ``weight_g`` filled with 1 and frozen, the loss with
    a teacher-temperature warmup schedule, a centre buffer updated by momentum, per-parameter
    gradient clipping, the last layer's gradients cancelled in the first epoch, AdamW with
    cosine lr / weight-decay schedules set per group, and the teacher updated by
    ``param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)``."""
    nn, F = torch.nn, torch.nn.functional

    class DINOHead(nn.Module):
        def __init__(self, in_dim, out_dim, nlayers=3, hidden_dim=12, bottleneck_dim=6):
            super().__init__()
            layers = [nn.Linear(in_dim, hidden_dim), nn.GELU()]
            for _ in range(nlayers - 2):
                layers.append(nn.Linear(hidden_dim, hidden_dim))
                layers.append(nn.GELU())
            layers.append(nn.Linear(hidden_dim, bottleneck_dim))
            self.mlp = nn.Sequential(*layers)
            self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))

        def forward(self, x):
            x = self.mlp(x)
            x = nn.functional.normalize(x, dim=-1, p=2)
            return self.last_layer(x)

    class MultiCropWrapper(nn.Module):
        def __init__(self, backbone, head):
            super().__init__()
            self.backbone, self.head = backbone, head

        def forward(self, x):
            if not isinstance(x, list):
                x = [x]
            idx_crops = torch.cumsum(torch.unique_consecutive(
                torch.tensor([inp.shape[-1] for inp in x]), return_counts=True)[1], 0)  # fmt: skip
            start_idx, output = 0, torch.empty(0)
            for end_idx in idx_crops:
                _out = self.backbone(torch.cat(x[start_idx:end_idx]))
                if isinstance(_out, tuple):
                    _out = _out[0]
                output = torch.cat((output, _out))
                start_idx = end_idx
            return self.head(output)

    class DINOLoss(nn.Module):
        def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp,
                     warmup_teacher_temp_epochs, nepochs, student_temp=0.1,
                     center_momentum=0.9):  # fmt: skip
            super().__init__()
            self.student_temp = student_temp
            self.center_momentum = center_momentum
            self.ncrops = ncrops
            self.register_buffer("center", torch.zeros(1, out_dim))
            self.teacher_temp_schedule = np.concatenate((
                np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
                np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp))  # fmt: skip

        def forward(self, student_output, teacher_output, epoch):
            student_out = student_output / self.student_temp
            student_out = student_out.chunk(self.ncrops)
            temp = self.teacher_temp_schedule[epoch]
            teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1)
            teacher_out = teacher_out.detach().chunk(2)
            total_loss = 0
            n_loss_terms = 0
            for iq, q in enumerate(teacher_out):
                for v in range(len(student_out)):
                    if v == iq:
                        continue  # skip cases where student and teacher operate on the same view
                    loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                    total_loss += loss.mean()
                    n_loss_terms += 1
            total_loss /= n_loss_terms
            self.update_center(teacher_output)
            return total_loss

        @torch.no_grad()
        def update_center(self, teacher_output):
            batch_center = torch.sum(teacher_output, dim=0, keepdim=True)
            batch_center = batch_center / len(teacher_output)
            self.center = self.center * self.center_momentum + batch_center * (
                1 - self.center_momentum
            )

    def backbone():
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten())  # fmt: skip

    def get_params_groups(model):
        regularized, not_regularized = [], []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if name.endswith(".bias") or len(param.shape) == 1:
                not_regularized.append(param)
            else:
                regularized.append(param)
        return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.0}]

    def clip_gradients(model, clip):
        norms = []
        for _, p in model.named_parameters():
            if p.grad is not None:
                param_norm = p.grad.data.norm(2)
                norms.append(param_norm.item())
                clip_coef = clip / (param_norm + 1e-6)
                if clip_coef < 1:
                    p.grad.data.mul_(clip_coef)
        return norms

    def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
        if epoch >= freeze_last_layer:
            return
        for n, p in model.named_parameters():
            if "last_layer" in n:
                p.grad = None

    out_dim, epochs, niter = 7, 3, 2
    student = MultiCropWrapper(backbone(), DINOHead(4, out_dim))
    teacher = MultiCropWrapper(backbone(), DINOHead(4, out_dim))
    set_weights(torch, student, seed=151)
    student.head.last_layer.weight_g.data.fill_(1)
    student.head.last_layer.weight_g.requires_grad = False  # norm_last_layer
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    dino_loss = DINOLoss(out_dim, 4, 0.04, 0.07, 2, epochs)
    optimizer = torch.optim.AdamW(get_params_groups(student))
    lr_schedule = _cosine_scheduler(5e-3, 1e-4, epochs, niter, warmup_epochs=1)
    wd_schedule = _cosine_scheduler(0.04, 0.4, epochs, niter)
    momentum_schedule = _cosine_scheduler(0.9, 1, epochs, niter)
    losses, norms, centers, temps = [], [], [], []
    for epoch in range(epochs):
        for i in range(niter):
            it = niter * epoch + i
            for j, param_group in enumerate(optimizer.param_groups):
                param_group["lr"] = lr_schedule[it]
                if j == 0:  # only the first group is regularized
                    param_group["weight_decay"] = wd_schedule[it]
            base = arr(160 + it, 3, 1, 6, 6)
            images = [torch.tensor(base + arr(170 + 5 * it + c, 3, 1, 6, 6, scale=0.2))
                      for c in range(2)]  # fmt: skip
            images += [torch.tensor(base[:, :, 1:5, 1:5] + arr(190 + 5 * it + c, 3, 1, 4, 4,
                                                                 scale=0.3))
                       for c in range(2)]  # fmt: skip
            teacher_output = teacher(images[:2])  # only the 2 global views pass through the teacher
            student_output = student(images)
            loss = dino_loss(student_output, teacher_output, epoch)
            optimizer.zero_grad()
            loss.backward()
            norms.append(clip_gradients(student, 0.5))
            cancel_gradients_last_layer(epoch, student, 1)
            optimizer.step()
            with torch.no_grad():
                m = momentum_schedule[it]  # momentum parameter
                for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                    param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
            losses.append(loss.item())
            centers.append(dino_loss.center.clone())
            temps.append(float(dino_loss.teacher_temp_schedule[epoch]))
    return {"losses": losses, "norms": norms, "centers": centers, "temps": temps,
            "teacher": params(teacher), "student": params(student),
            "param_names": [n for n, _ in student.named_parameters()],
            "wd": [g["weight_decay"] for g in optimizer.param_groups],
            "lr_schedule": lr_schedule, "teacher_out": teacher_output}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mae_random_masking_argsort_gather_restore(torch):
    """A tiny MAE: patch embedding by a strided conv, fixed 2-d sin-cos position embeddings
    copied into a frozen parameter, per-sample random masking by ``argsort`` of given noise with
    ``ids_restore = argsort(ids_shuffle)`` and ``gather``, a timm-style attention block, a decoder
    that appends mask tokens and unshuffles them with ``gather``, ``patchify`` via
    ``reshape(shape=...)`` and ``einsum('nchpwq->nhwpqc')``, and the normalised-pixel loss on the
    masked patches only; AdamW with betas (0.9, 0.95)."""
    nn = torch.nn

    def get_1d_sincos(embed_dim, pos):
        omega = np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0)
        omega = 1.0 / 10000**omega
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    def get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False):
        grid_h = np.arange(grid_size, dtype=np.float32)
        grid_w = np.arange(grid_size, dtype=np.float32)
        grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0).reshape([2, 1, grid_size, grid_size])
        emb = np.concatenate([get_1d_sincos(embed_dim // 2, grid[0]),
                              get_1d_sincos(embed_dim // 2, grid[1])], axis=1)  # fmt: skip
        if cls_token:
            emb = np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)
        return emb

    class Attention(nn.Module):
        def __init__(self, dim, num_heads=2):
            super().__init__()
            self.num_heads = num_heads
            self.scale = (dim // num_heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class MaskedAutoencoder(nn.Module):
        def __init__(self, img_size=8, patch_size=2, in_chans=1, embed_dim=8, dec_dim=8):
            super().__init__()
            self.patch_size, self.in_chans = patch_size, in_chans
            self.num_patches = (img_size // patch_size) ** 2
            self.patch_embed = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, self.num_patches + 1, embed_dim),
                                          requires_grad=False)  # fmt: skip
            self.block = Block(embed_dim)
            self.norm = nn.LayerNorm(embed_dim)
            self.decoder_embed = nn.Linear(embed_dim, dec_dim, bias=True)
            self.mask_token = nn.Parameter(torch.zeros(1, 1, dec_dim))
            self.decoder_pos_embed = nn.Parameter(torch.zeros(1, self.num_patches + 1, dec_dim),
                                                  requires_grad=False)  # fmt: skip
            self.decoder_block = Block(dec_dim)
            self.decoder_norm = nn.LayerNorm(dec_dim)
            self.decoder_pred = nn.Linear(dec_dim, patch_size**2 * in_chans, bias=True)
            set_weights(torch, self, seed=201)
            grid = int(self.num_patches**0.5)
            pos_embed = get_2d_sincos_pos_embed(embed_dim, grid, cls_token=True)
            self.pos_embed.data.copy_(torch.from_numpy(pos_embed).float().unsqueeze(0))
            dec = get_2d_sincos_pos_embed(dec_dim, grid, cls_token=True)
            self.decoder_pos_embed.data.copy_(torch.from_numpy(dec).float().unsqueeze(0))

        def patchify(self, imgs):
            p = self.patch_size
            h = w = imgs.shape[2] // p
            x = imgs.reshape(shape=(imgs.shape[0], self.in_chans, h, p, w, p))
            x = torch.einsum("nchpwq->nhwpqc", x)
            return x.reshape(shape=(imgs.shape[0], h * w, p**2 * self.in_chans))

        def unpatchify(self, x):
            p = self.patch_size
            h = w = int(x.shape[1] ** 0.5)
            x = x.reshape(shape=(x.shape[0], h, w, p, p, self.in_chans))
            x = torch.einsum("nhwpqc->nchpwq", x)
            return x.reshape(shape=(x.shape[0], self.in_chans, h * p, h * p))

        def random_masking(self, x, mask_ratio, noise):
            N, L, D = x.shape
            len_keep = int(L * (1 - mask_ratio))
            ids_shuffle = torch.argsort(noise, dim=1)  # ascend: small is keep, large is remove
            ids_restore = torch.argsort(ids_shuffle, dim=1)
            ids_keep = ids_shuffle[:, :len_keep]
            x_masked = torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))
            mask = torch.ones([N, L], device=x.device)
            mask[:, :len_keep] = 0
            mask = torch.gather(mask, dim=1, index=ids_restore)
            return x_masked, mask, ids_restore

        def forward_encoder(self, x, mask_ratio, noise):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = x + self.pos_embed[:, 1:, :]
            x, mask, ids_restore = self.random_masking(x, mask_ratio, noise)
            cls_token = self.cls_token + self.pos_embed[:, :1, :]
            cls_tokens = cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls_tokens, x), dim=1)
            x = self.block(x)
            return self.norm(x), mask, ids_restore

        def forward_decoder(self, x, ids_restore):
            x = self.decoder_embed(x)
            mask_tokens = self.mask_token.repeat(
                x.shape[0], ids_restore.shape[1] + 1 - x.shape[1], 1
            )
            x_ = torch.cat([x[:, 1:, :], mask_tokens], dim=1)  # no cls token
            x_ = torch.gather(x_, dim=1, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
            x = torch.cat([x[:, :1, :], x_], dim=1)  # append cls token
            x = x + self.decoder_pos_embed
            x = self.decoder_norm(self.decoder_block(x))
            return self.decoder_pred(x)[:, 1:, :]

        def forward_loss(self, imgs, pred, mask):
            target = self.patchify(imgs)
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.0e-6) ** 0.5
            loss = (pred - target) ** 2
            loss = loss.mean(dim=-1)  # [N, L], mean loss per patch
            return (loss * mask).sum() / mask.sum()  # mean loss on removed patches

        def forward(self, imgs, noise, mask_ratio=0.75):
            latent, mask, ids_restore = self.forward_encoder(imgs, mask_ratio, noise)
            pred = self.forward_decoder(latent, ids_restore)
            return self.forward_loss(imgs, pred, mask), pred, mask, ids_restore

    model = MaskedAutoencoder()
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim > 1
             and n not in ("cls_token", "mask_token")]  # fmt: skip
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and
                (p.ndim <= 1 or n in ("cls_token", "mask_token"))]  # fmt: skip
    optimizer = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                                   {"params": decay, "weight_decay": 0.05}], lr=3e-3,
                                  betas=(0.9, 0.95))  # fmt: skip
    imgs = torch.tensor(arr(210, 3, 1, 8, 8))
    losses, masks = [], []
    for step in range(3):
        noise = torch.tensor(np.random.default_rng(220 + step).random((3, 16)).astype(np.float32))
        loss, pred, mask, ids_restore = model(imgs, noise)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        masks.append(mask)
    recon = model.unpatchify(pred)
    pasted = model.unpatchify(model.patchify(imgs) * (1 - mask.unsqueeze(-1)) +
                              pred * mask.unsqueeze(-1))  # fmt: skip
    return {"losses": losses, "masks": masks, "ids_restore": ids_restore, "recon": recon,
            "pasted": pasted, "pos_embed_grad_none": model.pos_embed.grad is None,
            "pos_embed": model.pos_embed, "cls_token": model.cls_token,
            "mask_token": model.mask_token, "grads": grads(model.block),
            "patchify_roundtrip": model.unpatchify(model.patchify(imgs)) - imgs}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def clip_symmetric_loss_clamped_logit_scale(torch):
    """CLIP: an image tower and a text transformer (token + positional embeddings, a causal
    ``-inf`` mask built with ``fill_`` and ``triu_``, ``nn.MultiheadAttention`` in LND layout,
    features taken at the EOT token with ``x[arange, text.argmax(-1)]``), a learnable
    ``logit_scale`` used as ``logit_scale.exp().clamp(max=100)`` (so that its gradient is zero
    above the bound) and clamped in place to ``[0, 4.6052]`` after every step, the symmetric cross-entropy, recall@1 and zero-shot
    accuracy."""
    nn, F = torch.nn, torch.nn.functional

    class ResidualAttentionBlock(nn.Module):
        def __init__(self, d_model, n_head, attn_mask):
            super().__init__()
            self.attn = nn.MultiheadAttention(d_model, n_head)
            self.ln_1 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, d_model * 2), nn.GELU(),
                                     nn.Linear(d_model * 2, d_model))  # fmt: skip
            self.ln_2 = nn.LayerNorm(d_model)
            self.attn_mask = attn_mask

        def attention(self, x):
            return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

        def forward(self, x):
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class CLIP(nn.Module):
        def __init__(self, embed_dim=6, image_dim=10, context_length=5, vocab_size=12, width=8):
            super().__init__()
            self.context_length = context_length
            self.visual = nn.Sequential(
                nn.Linear(image_dim, 16), nn.GELU(), nn.Linear(16, embed_dim)
            )
            self.token_embedding = nn.Embedding(vocab_size, width)
            self.positional_embedding = nn.Parameter(torch.empty(context_length, width))
            self.transformer = ResidualAttentionBlock(width, 2, self.build_attention_mask())
            self.ln_final = nn.LayerNorm(width)
            self.text_projection = nn.Parameter(torch.empty(width, embed_dim))
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        def build_attention_mask(self):
            mask = torch.empty(self.context_length, self.context_length)
            mask.fill_(float("-inf"))
            mask.triu_(1)  # zero out the lower diagonal
            return mask

        def encode_image(self, image):
            return self.visual(image)

        def encode_text(self, text):
            x = self.token_embedding(text)  # [batch_size, n_ctx, d_model]
            x = x + self.positional_embedding
            x = x.permute(1, 0, 2)  # NLD -> LND
            x = self.transformer(x)
            x = x.permute(1, 0, 2)  # LND -> NLD
            x = self.ln_final(x)
            return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

        def forward(self, image, text):
            image_features = self.encode_image(image)
            text_features = self.encode_text(text)
            image_features = image_features / image_features.norm(dim=1, keepdim=True)
            text_features = text_features / text_features.norm(dim=1, keepdim=True)
            logit_scale = self.logit_scale.exp().clamp(max=100)
            logits_per_image = logit_scale * image_features @ text_features.t()
            logits_per_text = logits_per_image.t()
            return logits_per_image, logits_per_text

    model = CLIP()
    for i, part in enumerate([model.visual, model.token_embedding, model.transformer,
                              model.ln_final]):  # fmt: skip
        set_weights(torch, part, seed=231 + i)
    with torch.no_grad():
        model.positional_embedding.copy_(torch.tensor(arr(235, 5, 8, scale=0.1)))
        model.text_projection.copy_(torch.tensor(arr(236, 8, 6, scale=8**-0.5)))
        model.logit_scale.fill_(4.7)  # resumed above the clamp: exp() is clamped to 100
    scale_params = [model.logit_scale]
    other_params = [p for n, p in model.named_parameters() if n != "logit_scale"]
    optimizer = torch.optim.AdamW([{"params": other_params, "weight_decay": 0.1},
                                   {"params": scale_params, "weight_decay": 0.0}], lr=3e-3,
                                  betas=(0.9, 0.98), eps=1e-6)  # fmt: skip
    n, eot = 6, 11
    text = ints(232, 10, n, 5) + 1
    lengths = ints(233, 3, n) + 2
    for i in range(n):
        text[i, lengths[i]] = eot
        text[i, lengths[i] + 1 :] = 0
    text = torch.tensor(text)
    images = torch.tensor(arr(234, n, 10))
    ground_truth = torch.arange(n, dtype=torch.long)
    loss_img, loss_txt = nn.CrossEntropyLoss(), nn.CrossEntropyLoss()
    # (no recall@1 of the first steps: the untrained towers' logits tie to rounding, and which of
    # them wins changes with the CPU's BLAS kernels, for PyTorch's results too)
    losses, scales = [], []
    for _ in range(4):
        logits_per_image, logits_per_text = model(images, text)
        total_loss = (loss_img(logits_per_image, ground_truth) +
                      loss_txt(logits_per_text, ground_truth)) / 2  # fmt: skip
        optimizer.zero_grad()
        total_loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, 4.6052)
        losses.append(total_loss.item())
        scales.append(model.logit_scale.item())
    with torch.no_grad():
        prompts = torch.tensor(np.array([[1, 2, eot, 0, 0], [3, 4, 5, eot, 0], [6, eot, 0, 0, 0]]))
        class_emb = F.normalize(model.encode_text(prompts), dim=-1)
        img_emb = F.normalize(model.encode_image(images), dim=-1)
        probs = (100.0 * img_emb @ class_emb.T).softmax(dim=-1)
        top_probs, top_labels = probs.cpu().topk(2, dim=-1)
    # (the key projection's bias cannot change a softmax over keys: its gradient is rounding
    # noise, which Adam scales to whole steps, in a direction that differs between CPUs)
    kept = params(model)
    bias = kept["transformer.attn.in_proj_bias"]
    kept["transformer.attn.in_proj_bias"] = torch.cat([bias[:8], bias[16:]])
    return {"losses": losses, "scales": scales, "probs": probs,
            "top_probs": top_probs, "top_labels": top_labels, "logits": logits_per_text,
            "scale_grad": model.logit_scale.grad, "attn_mask": model.transformer.attn_mask,
            "params": kept}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def supcon_label_masks_then_linear_probe(torch):
    """The supervised contrastive loss as Khosla et al.'s reference writes it (label mask from
    ``torch.eq(labels, labels.T)``, ``mask.repeat`` over views, the self-contrast removed with
    ``torch.scatter``, the row max subtracted for stability, pairs without positives guarded by
    ``torch.where``), checked against a ``masked_fill`` formulation; SGD with warmup on a
    normalised encoder, then a linear probe trained on frozen features under ``no_grad``."""
    nn, F = torch.nn, torch.nn.functional

    class SupConLoss(nn.Module):
        def __init__(self, temperature=0.1, contrast_mode="all", base_temperature=0.07):
            super().__init__()
            self.temperature = temperature
            self.contrast_mode = contrast_mode
            self.base_temperature = base_temperature

        def forward(self, features, labels=None, mask=None):
            if len(features.shape) < 3:
                raise ValueError("`features` needs to be [bsz, n_views, ...]")
            if len(features.shape) > 3:
                features = features.view(features.shape[0], features.shape[1], -1)
            batch_size = features.shape[0]
            if labels is not None and mask is not None:
                raise ValueError("Cannot define both `labels` and `mask`")
            elif labels is None and mask is None:
                mask = torch.eye(batch_size, dtype=torch.float32)
            elif labels is not None:
                labels = labels.contiguous().view(-1, 1)
                if labels.shape[0] != batch_size:
                    raise ValueError("Num of labels does not match num of features")
                mask = torch.eq(labels, labels.T).float()
            else:
                mask = mask.float()
            contrast_count = features.shape[1]
            contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
            if self.contrast_mode == "one":
                anchor_feature = features[:, 0]
                anchor_count = 1
            else:
                anchor_feature = contrast_feature
                anchor_count = contrast_count
            anchor_dot_contrast = torch.div(
                torch.matmul(anchor_feature, contrast_feature.T), self.temperature
            )
            logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
            logits = anchor_dot_contrast - logits_max.detach()
            mask = mask.repeat(anchor_count, contrast_count)
            logits_mask = torch.scatter(
                torch.ones_like(mask), 1,
                torch.arange(batch_size * anchor_count).view(-1, 1), 0,
            )  # fmt: skip
            mask = mask * logits_mask
            exp_logits = torch.exp(logits) * logits_mask
            log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
            mask_pos_pairs = mask.sum(1)
            mask_pos_pairs = torch.where(mask_pos_pairs < 1e-6, 1, mask_pos_pairs)
            mean_log_prob_pos = (mask * log_prob).sum(1) / mask_pos_pairs
            loss = -(self.temperature / self.base_temperature) * mean_log_prob_pos
            return loss.view(anchor_count, batch_size).mean()

    def supcon_masked_fill(z, labels, temperature=0.1, base_temperature=0.07):
        n = z.shape[0]
        labels = labels.repeat(2)
        self_mask = torch.eye(n, dtype=torch.bool)
        pos_mask = (labels[:, None] == labels[None, :]) & ~self_mask
        sim = (z @ z.T / temperature).masked_fill(self_mask, float("-inf"))
        log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
        pos_log = log_prob.masked_fill(~pos_mask, 0).sum(1)
        n_pos = pos_mask.sum(1).clamp(min=1)
        return (-(temperature / base_temperature) * pos_log / n_pos).mean()

    class SupConModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(8, 12), nn.BatchNorm1d(12), nn.ReLU())
            self.head = nn.Sequential(nn.Linear(12, 12), nn.ReLU(inplace=True), nn.Linear(12, 6))

        def forward(self, x):
            return F.normalize(self.head(self.encoder(x)), dim=1)

    rng = np.random.default_rng(241)
    centers = rng.standard_normal((3, 8)) * 1.5
    labels_np = np.array([0, 0, 1, 1, 2, 0, 1])  # class 2 has one sample: no positive but its view
    model = set_weights(torch, SupConModel(), seed=242)
    criterion = SupConLoss(temperature=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    warm_epochs, warmup_from, warmup_to = 2, 0.01, 0.05
    losses, alt, lrs = [], [], []
    for epoch in range(4):
        if epoch < warm_epochs:
            lr = warmup_from + epoch / warm_epochs * (warmup_to - warmup_from)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
        x = centers[labels_np] + rng.standard_normal((7, 8))
        images = torch.cat([torch.tensor(x + 0.3 * rng.standard_normal((7, 8))).float(),
                            torch.tensor(x + 0.3 * rng.standard_normal((7, 8))).float()], dim=0)  # fmt: skip
        labels = torch.tensor(labels_np)
        bsz = labels.shape[0]
        features = model(images)
        f1, f2 = torch.split(features, [bsz, bsz], dim=0)
        features = torch.cat([f1.unsqueeze(1), f2.unsqueeze(1)], dim=1)
        loss = criterion(features, labels)
        alt.append(supcon_masked_fill(torch.cat([f1, f2]), labels).item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        lrs.append(optimizer.param_groups[0]["lr"])
    unsup = SupConLoss(temperature=0.5)(features.detach())  # SimCLR when no labels
    one_mode = SupConLoss(contrast_mode="one")(features.detach(), labels)
    model.eval()
    classifier = nn.Linear(12, 3)
    set_weights(torch, classifier, seed=243)
    probe_opt = torch.optim.SGD(classifier.parameters(), lr=0.5, momentum=0.9)
    probe_losses = []
    xs = torch.tensor(centers[labels_np] + rng.standard_normal((7, 8))).float()
    for _ in range(5):
        with torch.no_grad():
            feats = model.encoder(xs)
        output = classifier(feats.detach())
        probe_loss = F.cross_entropy(output, labels)
        probe_opt.zero_grad()
        probe_loss.backward()
        probe_opt.step()
        probe_losses.append(probe_loss.item())
    return {"losses": losses, "alt": alt, "lrs": lrs, "unsup": unsup, "one_mode": one_mode,
            "probe_losses": probe_losses, "probe_acc": (output.argmax(1) == labels).sum().item(),
            "params": params(model), "classifier": params(classifier),
            "encoder_grads_kept": [p.grad is not None for p in model.encoder.parameters()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def moco_v3_symmetric_loss_momentum_schedule_knn_monitor(torch):
    """MoCo v3 without a queue: base and momentum encoders with a predictor on the base, the
    symmetric in-batch InfoNCE scaled by ``2 * T``, the momentum raised by MoCo v3's cosine rule
    and applied with ``param_m.data = param_m.data * m + param_b.data * (1. - m)``, the LARS of
    its ResNet recipe (trust ratio by nested ``torch.where``, 1-d parameters left out) with
    warmup then cosine; then the weighted kNN monitor of InstDisc/DINO over a feature bank
    (``topk``, ``gather`` of the bank labels, one-hot by ``scatter`` and temperature weights)."""
    nn, F = torch.nn, torch.nn.functional

    def _build_mlp(num_layers, input_dim, mlp_dim, output_dim, last_bn=True):
        mlp = []
        for layer in range(num_layers):
            dim1 = input_dim if layer == 0 else mlp_dim
            dim2 = output_dim if layer == num_layers - 1 else mlp_dim
            mlp.append(nn.Linear(dim1, dim2, bias=False))
            if layer < num_layers - 1:
                mlp.append(nn.BatchNorm1d(dim2))
                mlp.append(nn.ReLU(inplace=True))
            elif last_bn:
                mlp.append(nn.BatchNorm1d(dim2, affine=False))
        return nn.Sequential(*mlp)

    class MoCoV3(nn.Module):
        def __init__(self, dim=6, mlp_dim=12, T=0.2):
            super().__init__()
            self.T = T
            self.base_encoder = nn.Sequential(nn.Linear(8, 10), nn.ReLU(),
                                              _build_mlp(2, 10, mlp_dim, dim))  # fmt: skip
            self.momentum_encoder = nn.Sequential(nn.Linear(8, 10), nn.ReLU(),
                                                  _build_mlp(2, 10, mlp_dim, dim))  # fmt: skip
            self.predictor = _build_mlp(2, dim, mlp_dim, dim, False)
            set_weights(torch, self, seed=251)
            for param_b, param_m in zip(self.base_encoder.parameters(),
                                        self.momentum_encoder.parameters()):  # fmt: skip
                param_m.data.copy_(param_b.data)
                param_m.requires_grad = False

        @torch.no_grad()
        def _update_momentum_encoder(self, m):
            for param_b, param_m in zip(self.base_encoder.parameters(),
                                        self.momentum_encoder.parameters()):  # fmt: skip
                param_m.data = param_m.data * m + param_b.data * (1.0 - m)

        def contrastive_loss(self, q, k):
            q = nn.functional.normalize(q, dim=1)
            k = nn.functional.normalize(k, dim=1)
            logits = torch.einsum("nc,mc->nm", [q, k]) / self.T
            N = logits.shape[0]
            labels = torch.arange(N, dtype=torch.long)
            return nn.CrossEntropyLoss()(logits, labels) * (2 * self.T)

        def forward(self, x1, x2, m):
            q1 = self.predictor(self.base_encoder(x1))
            q2 = self.predictor(self.base_encoder(x2))
            with torch.no_grad():
                self._update_momentum_encoder(m)
                k1 = self.momentum_encoder(x1)
                k2 = self.momentum_encoder(x2)
            return self.contrastive_loss(q1, k2) + self.contrastive_loss(q2, k1)

    class LARS(torch.optim.Optimizer):
        """LARS for the ResNet recipe: 1-d parameters (biases, norms) get neither weight decay
        nor the trust ratio."""

        def __init__(self, params, lr=0, weight_decay=0, momentum=0.9, trust_coefficient=0.001):
            defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                            trust_coefficient=trust_coefficient)  # fmt: skip
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    dp = p.grad
                    if dp is None:
                        continue
                    if p.ndim > 1:  # not a normalization gamma/beta or a bias
                        dp = dp.add(p, alpha=g["weight_decay"])
                        param_norm = torch.norm(p)
                        update_norm = torch.norm(dp)
                        one = torch.ones_like(param_norm)
                        q = torch.where(param_norm > 0.0,
                                        torch.where(update_norm > 0,
                                                    (g["trust_coefficient"] * param_norm /
                                                     update_norm), one), one)  # fmt: skip
                        dp = dp.mul(q)
                    param_state = self.state[p]
                    if "mu" not in param_state:
                        param_state["mu"] = torch.zeros_like(p)
                    mu = param_state["mu"]
                    mu.mul_(g["momentum"]).add_(dp)
                    p.add_(mu, alpha=-g["lr"])

    model = MoCoV3()
    epochs, warmup_epochs, base_lr, moco_m = 5, 1, 0.5, 0.9
    optimizer = LARS(model.parameters(), lr=base_lr, weight_decay=1e-6, momentum=0.9,
                     trust_coefficient=0.02)  # fmt: skip
    losses, ms, lrs = [], [], []
    for epoch in range(epochs):
        if epoch < warmup_epochs:
            lr = base_lr * (epoch + 0.5) / warmup_epochs
        else:
            lr = base_lr * 0.5 * (1.0 + math.cos(math.pi * (epoch - warmup_epochs) /
                                                 (epochs - warmup_epochs)))  # fmt: skip
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        m = 1.0 - 0.5 * (1.0 + math.cos(math.pi * epoch / epochs)) * (1.0 - moco_m)
        x1, x2 = _views(260 + 3 * epoch, 6, 8)
        loss = model(torch.tensor(x1), torch.tensor(x2), m)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        ms.append(m)
        lrs.append(lr)

    rng = np.random.default_rng(270)
    centers = rng.standard_normal((3, 8)) * 2.0
    bank_labels_np = np.arange(12) % 3
    test_labels_np = np.array([0, 1, 2, 2, 1])
    model.eval()
    with torch.no_grad():
        bank = torch.tensor(
            (centers[bank_labels_np] + rng.standard_normal((12, 8))).astype(np.float32)
        )
        test = torch.tensor(
            (centers[test_labels_np] + rng.standard_normal((5, 8))).astype(np.float32)
        )
        feature_bank = F.normalize(model.base_encoder(bank), dim=1).t().contiguous()  # [D, N]
        feature_labels = torch.tensor(bank_labels_np)
        feature = F.normalize(model.base_encoder(test), dim=1)
        knn_k, knn_t, classes = 4, 0.1, 3
        sim_matrix = torch.mm(feature, feature_bank)
        sim_weight, sim_indices = sim_matrix.topk(k=knn_k, dim=-1)
        sim_labels = torch.gather(feature_labels.expand(feature.size(0), -1), dim=-1,
                                  index=sim_indices)  # fmt: skip
        sim_weight = (sim_weight / knn_t).exp()
        one_hot_label = torch.zeros(feature.size(0) * knn_k, classes)
        one_hot_label = one_hot_label.scatter(dim=-1, index=sim_labels.view(-1, 1), value=1.0)
        pred_scores = torch.sum(one_hot_label.view(feature.size(0), -1, classes) *
                                sim_weight.unsqueeze(dim=-1), dim=1)  # fmt: skip
        pred_labels = pred_scores.argmax(dim=-1)
        top1 = (pred_labels == torch.tensor(test_labels_np)).float().sum().item()
    return {"losses": losses, "ms": ms, "lrs": lrs, "momentum": params(model.momentum_encoder),
            "base": params(model.base_encoder), "predictor_grads": grads(model.predictor),
            "mu": optimizer.state[model.base_encoder[0].weight]["mu"],
            "sim_indices": sim_indices, "sim_labels": sim_labels, "pred_scores": pred_scores,
            "pred_labels": pred_labels, "top1": top1,
            "bn_running": model.momentum_encoder[2][1].running_var}  # fmt: skip
