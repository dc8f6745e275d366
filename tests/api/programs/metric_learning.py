"""Metric learning and recommenders as libraries write them: contrastive and margin losses, two-tower retrieval, matrix factorisation."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _clustered(seed, n_classes, per_class, dim, spread=1.5, noise=1.0):
    # class centres plus noise, samples grouped by class as a balanced sampler gives them
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_classes, dim)) * spread
    x = centres[:, None] + rng.standard_normal((n_classes, per_class, dim)) * noise
    labels = np.repeat(np.arange(n_classes), per_class)
    return x.reshape(-1, dim).astype(np.float32), labels.astype(np.int64)


@program(rtol=5e-4, atol=5e-5)
def supcon_loss_two_crops_all_and_one_modes(torch):
    # HobbitLong/SupContrast losses.py: SupConLoss over [bsz, n_views, dim], SimCLR when labels=None
    nn, F = torch.nn, torch.nn.functional

    class SupConLoss(nn.Module):
        def __init__(self, temperature=0.07, contrast_mode="all", base_temperature=0.07):
            super().__init__()
            self.temperature = temperature
            self.contrast_mode = contrast_mode
            self.base_temperature = base_temperature

        def forward(self, features, labels=None, mask=None):
            device = features.device
            if len(features.shape) > 3:
                features = features.view(features.shape[0], features.shape[1], -1)
            batch_size = features.shape[0]
            if labels is None and mask is None:
                mask = torch.eye(batch_size, dtype=torch.float32).to(device)
            elif labels is not None:
                labels = labels.contiguous().view(-1, 1)
                mask = torch.eq(labels, labels.T).float().to(device)
            else:
                mask = mask.float().to(device)
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
                torch.arange(batch_size * anchor_count).view(-1, 1).to(device), 0,
            )  # fmt: skip
            mask = mask * logits_mask
            exp_logits = torch.exp(logits) * logits_mask
            log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
            mask_pos_pairs = mask.sum(1)
            mask_pos_pairs = torch.where(mask_pos_pairs < 1e-6, 1, mask_pos_pairs)
            mean_log_prob_pos = (mask * log_prob).sum(1) / mask_pos_pairs
            loss = -(self.temperature / self.base_temperature) * mean_log_prob_pos
            return loss.view(anchor_count, batch_size).mean()

    class SupConNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d(2), nn.Flatten(),
            )  # fmt: skip
            self.head = nn.Sequential(nn.Linear(16, 8), nn.ReLU(inplace=True), nn.Linear(8, 6))

        def forward(self, x):
            return F.normalize(self.head(self.encoder(x)), dim=1)

    model = set_weights(torch, SupConNet(), seed=1, scale=0.8)
    criterion, simclr = SupConLoss(temperature=0.1), SupConLoss(temperature=0.1)
    one_mode = SupConLoss(temperature=0.1, contrast_mode="one", base_temperature=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    bsz = 6
    patterns = np.kron(arr(2, 3, 1, 2, 2), np.ones((3, 3), np.float32)) * 2  # coarse class shapes
    base = patterns[[0, 1, 2, 0, 1, 2]] + arr(6, bsz, 1, 6, 6, scale=0.5)
    images = [torch.tensor(base + arr(3, bsz, 1, 6, 6, scale=0.3)),
              torch.tensor(base[..., ::-1].copy() + arr(4, bsz, 1, 6, 6, scale=0.3))]  # fmt: skip
    labels = torch.tensor(np.array([0, 1, 2, 0, 1, 2]))
    losses, simclr_losses, one_losses, lrs = [], [], [], []
    for step in range(3):
        # warmup_learning_rate: linear warm-up over the first steps
        lr = 0.01 + step / 3 * (0.05 - 0.01)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x = torch.cat([images[0], images[1]], dim=0)
        features = model(x)
        f1, f2 = torch.split(features, [bsz, bsz], dim=0)
        features = torch.cat([f1.unsqueeze(1), f2.unsqueeze(1)], dim=1)
        loss = criterion(features, labels)
        with torch.no_grad():
            simclr_losses.append(simclr(features).item())
            one_losses.append(one_mode(features, labels).item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        lrs.append(lr)
    mask = torch.tensor((np.random.default_rng(5).random((bsz, bsz)) < 0.4).astype(np.float32))
    with torch.no_grad():
        by_mask = criterion(features, mask=mask)
    return {"losses": losses, "simclr": simclr_losses, "one": one_losses, "lrs": lrs,
            "by_mask": by_mask, "grads": grads(model), "params": params(model),
            "running_var": model.encoder[1].running_var}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def arcface_cosface_combined_margin_heads(torch):
    # insightface arcface_torch losses.py: margins applied in place to the target logits of a
    # normalised linear head; CombinedMarginLoss's arccos/cos branch runs under no_grad
    nn, F = torch.nn, torch.nn.functional

    class ArcFace(nn.Module):
        def __init__(self, s=16.0, margin=0.5):
            super().__init__()
            self.s, self.margin = s, margin
            self.cos_m, self.sin_m = math.cos(margin), math.sin(margin)
            self.theta = math.cos(math.pi - margin)
            self.sinmm = math.sin(math.pi - margin) * margin

        def forward(self, logits, labels):
            index = torch.where(labels != -1)[0]
            target_logit = logits[index, labels[index].view(-1)]
            sin_theta = torch.sqrt(1.0 - torch.pow(target_logit, 2))
            cos_theta_m = target_logit * self.cos_m - sin_theta * self.sin_m
            final_target_logit = torch.where(
                target_logit > self.theta, cos_theta_m, target_logit - self.sinmm
            )
            logits[index, labels[index].view(-1)] = final_target_logit
            return logits * self.s

    class CosFace(nn.Module):
        def __init__(self, s=16.0, m=0.35):
            super().__init__()
            self.s, self.m = s, m

        def forward(self, logits, labels):
            index = torch.where(labels != -1)[0]
            target_logit = logits[index, labels[index].view(-1)]
            logits[index, labels[index].view(-1)] = target_logit - self.m
            return logits * self.s

    class CombinedMarginLoss(nn.Module):
        def __init__(self, s, m1, m2, m3):
            super().__init__()
            self.s, self.m1, self.m2, self.m3 = s, m1, m2, m3

        def forward(self, logits, labels):
            index_positive = torch.where(labels != -1)[0]
            target_logit = logits[index_positive, labels[index_positive].view(-1)]
            if self.m1 == 1.0 and self.m3 == 0.0:
                with torch.no_grad():
                    target_logit.arccos_()
                    logits.arccos_()
                    final_target_logit = target_logit + self.m2
                    logits[index_positive, labels[index_positive].view(-1)] = final_target_logit
                    logits.cos_()
                logits = logits * self.s
            else:
                final_target_logit = target_logit - self.m3
                logits[index_positive, labels[index_positive].view(-1)] = final_target_logit
                logits = logits * self.s
            return logits

    class Head(nn.Module):
        def __init__(self, dim, n_classes, margin):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(n_classes, dim))
            self.margin_softmax = margin

        def forward(self, embeddings, labels):
            norm_embeddings = F.normalize(embeddings)
            norm_weight = F.normalize(self.weight)
            logits = F.linear(norm_embeddings, norm_weight).clamp(-1, 1)
            return self.margin_softmax(logits, labels)

    n_classes, dim = 5, 8
    x_np, y_np = _clustered(10, n_classes, 3, 12, spread=1.0)
    y_np[[4, 11]] = -1  # unlabelled samples: no margin and ignored by the loss
    x, labels = torch.tensor(x_np), torch.tensor(y_np)
    results = {}
    for name, margin in (("arc", ArcFace()), ("cos", CosFace()),
                         ("combined", CombinedMarginLoss(16.0, 1.0, 0.5, 0.0))):  # fmt: skip
        backbone = nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.PReLU(16),
                                 nn.Linear(16, dim), nn.BatchNorm1d(dim))  # fmt: skip
        set_weights(torch, backbone, seed=11)
        head = set_weights(torch, Head(dim, n_classes, margin), seed=12, scale=0.5)
        opt = torch.optim.SGD([{"params": backbone.parameters()},
                               {"params": head.parameters(), "lr": 0.2}],
                              lr=0.05, momentum=0.9, weight_decay=5e-4)  # fmt: skip
        losses = []
        for _ in range(3):
            logits = head(backbone(x), labels)
            loss = F.cross_entropy(logits, labels, ignore_index=-1)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(backbone.parameters(), max_norm=5, norm_type=2)
            opt.step()
            losses.append(loss.item())
        results[name] = {"losses": losses, "head_grad": head.weight.grad,
                         "grads": grads(backbone), "logits": logits}  # fmt: skip
    return results


@program(rtol=5e-4, atol=5e-5)
def open_clip_towers_clip_and_siglip_losses(torch):
    # open_clip: image and causal text towers, EOT pooling by argmax, learnable logit scale clamped
    # after each step, AdamW groups without decay for gains, biases and logit_scale
    nn, F = torch.nn, torch.nn.functional
    vocab, ctx, width, embed_dim = 12, 6, 8, 6

    class TextTower(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(vocab, width)
            self.positional_embedding = nn.Parameter(torch.empty(ctx, width))
            self.ln_1 = nn.LayerNorm(width)
            self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
            self.ln_2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Linear(16, width))
            self.ln_final = nn.LayerNorm(width)
            self.text_projection = nn.Parameter(torch.empty(width, embed_dim))
            self.register_buffer("attn_mask", self.build_attention_mask(), persistent=False)

        def build_attention_mask(self):
            mask = torch.empty(ctx, ctx)
            mask.fill_(float("-inf"))
            mask.triu_(1)
            return mask

        def forward(self, text):
            x = self.token_embedding(text) + self.positional_embedding
            h = self.ln_1(x)
            x = x + self.attn(h, h, h, need_weights=False, attn_mask=self.attn_mask)[0]
            x = x + self.mlp(self.ln_2(x))
            x = self.ln_final(x)
            return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = nn.Sequential(
                nn.Conv2d(3, 6, 3, stride=2, padding=1), nn.GELU(),
                nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(6, embed_dim),
            )  # fmt: skip
            self.text = TextTower()
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
            self.logit_bias = nn.Parameter(torch.ones([]) * -10.0)

        def forward(self, image, text):
            image_features = F.normalize(self.visual(image), dim=-1)
            text_features = F.normalize(self.text(text), dim=-1)
            return image_features, text_features, self.logit_scale.exp()

    class ClipLoss(nn.Module):
        def forward(self, image_features, text_features, logit_scale):
            logits_per_image = logit_scale * image_features @ text_features.T
            logits_per_text = logit_scale * text_features @ image_features.T
            labels = torch.arange(logits_per_image.shape[0], dtype=torch.long)
            return (F.cross_entropy(logits_per_image, labels)
                    + F.cross_entropy(logits_per_text, labels)) / 2  # fmt: skip

    def siglip_loss(image_features, text_features, logit_scale, logit_bias):
        logits = logit_scale * image_features @ text_features.T + logit_bias
        labels = 2 * torch.eye(logits.shape[0]) - torch.ones(logits.shape[0], logits.shape[0])
        return -F.logsigmoid(labels * logits).sum() / image_features.shape[0]

    model = CLIP()
    set_weights(torch, model.visual, seed=20)
    set_weights(torch, model.text, seed=23)
    n = 5
    images = torch.tensor(arr(21, n, 3, 6, 6))
    tokens = np.random.default_rng(22).integers(1, vocab - 1, (n, ctx))
    lengths = [6, 4, 5, 3, 6]
    for i, length in enumerate(lengths):
        tokens[i, length - 1] = vocab - 1  # end-of-text has the highest id
        tokens[i, length:] = 0
    text = torch.tensor(tokens.astype(np.int64))

    def exclude(n, p):
        return p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n

    named = list(model.named_parameters())
    gain_or_bias = [p for n, p in named if exclude(n, p) and p.requires_grad]
    rest = [p for n, p in named if not exclude(n, p) and p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": gain_or_bias, "weight_decay": 0.0}, {"params": rest, "weight_decay": 0.2}],
        lr=5e-3, betas=(0.9, 0.98), eps=1e-6,
    )  # fmt: skip
    loss_fn = ClipLoss()
    total_steps, warmup = 4, 2
    losses, sig, scales, lrs = [], [], [], []
    for step in range(total_steps):
        if step < warmup:
            lr = 5e-3 * (step + 1) / warmup
        else:
            e, es = step - warmup, total_steps - warmup
            lr = 0.5 * (1 + np.cos(np.pi * e / es)) * 5e-3
        for group in optimizer.param_groups:
            group["lr"] = lr
        image_features, text_features, logit_scale = model(images, text)
        loss = loss_fn(image_features, text_features, logit_scale)
        s_loss = siglip_loss(image_features, text_features, logit_scale, model.logit_bias)
        optimizer.zero_grad()
        (loss + 0.1 * s_loss).backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        losses.append(loss.item())
        sig.append(s_loss.item())
        scales.append(logit_scale.item())
        lrs.append(float(lr))
    with torch.no_grad():
        image_features, text_features, logit_scale = model(images, text)
        probs = (logit_scale * image_features @ text_features.T).softmax(dim=-1)
    return {"losses": losses, "siglip": sig, "scales": scales, "lrs": lrs, "probs": probs,
            "logit_scale": model.logit_scale, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def two_tower_in_batch_softmax_logq_correction(torch):
    # Yi et al. 2019 sampling-bias-corrected retrieval: in-batch softmax over item embeddings,
    # streaming frequency estimate for logQ, duplicate items masked, recall@k over the corpus
    nn, F = torch.nn, torch.nn.functional
    n_users, n_items, n_cats, dim = 9, 14, 4, 8
    item_cat = torch.tensor(ints(30, n_cats, n_items))

    class QueryTower(nn.Module):
        def __init__(self):
            super().__init__()
            self.user = nn.Embedding(n_users, dim)
            self.history = nn.EmbeddingBag(n_items, dim, mode="mean")
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 16), nn.ReLU(), nn.Linear(16, dim))

        def forward(self, users, hist, offsets):
            x = torch.cat([self.user(users), self.history(hist, offsets)], dim=-1)
            return F.normalize(self.mlp(x), p=2, dim=-1)

    class ItemTower(nn.Module):
        def __init__(self):
            super().__init__()
            self.item = nn.Embedding(n_items, dim)
            self.cat = nn.Embedding(n_cats, 4)
            self.mlp = nn.Sequential(nn.Linear(dim + 4, 16), nn.ReLU(), nn.Linear(16, dim))

        def forward(self, items):
            x = torch.cat([self.item(items), self.cat(item_cat[items])], dim=-1)
            return F.normalize(self.mlp(x), p=2, dim=-1)

    query, cand = (
        set_weights(torch, QueryTower(), seed=31),
        set_weights(torch, ItemTower(), seed=32),
    )
    opt = torch.optim.Adagrad([*query.parameters(), *cand.parameters()], lr=0.05)
    temperature, alpha = 0.2, 0.1
    # streaming frequency estimation (hash arrays A: last step seen, B: estimated gap)
    last_seen = torch.zeros(n_items)
    gap = torch.full((n_items,), float(n_items))
    rng = np.random.default_rng(33)
    losses, logqs = [], []
    for step in range(1, 5):
        users = torch.tensor(rng.integers(0, n_users, 6).astype(np.int64))
        items = torch.tensor(rng.choice([0, 1, 2, 3, 5, 8, 13], 6).astype(np.int64))
        hist = torch.tensor(rng.integers(0, n_items, 15).astype(np.int64))
        offsets = torch.tensor(np.array([0, 3, 5, 9, 10, 12]))
        weights = torch.tensor(rng.uniform(0.5, 1.5, 6).astype(np.float32))
        uniq = torch.unique(items)
        gap[uniq] = (1 - alpha) * gap[uniq] + alpha * (step - last_seen[uniq])
        last_seen[uniq] = float(step)
        log_q = torch.log(1.0 / gap[items])
        q, c = query(users, hist, offsets), cand(items)
        logits = q @ c.T / temperature
        logits = logits - log_q.unsqueeze(0)
        dup = (items.unsqueeze(0) == items.unsqueeze(1)) & ~torch.eye(6, dtype=torch.bool)
        logits = logits.masked_fill(dup, torch.finfo(logits.dtype).min)
        labels = torch.arange(logits.size(0))
        loss = (F.cross_entropy(logits, labels, reduction="none") * weights).sum() / weights.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        logqs.append(log_q)
    with torch.no_grad():
        users = torch.arange(n_users)
        hist = torch.tensor(ints(34, n_items, 18))
        offsets = torch.tensor(np.array([0, 2, 4, 6, 8, 10, 12, 14, 16]))
        corpus = cand(torch.arange(n_items))
        scores = query(users, hist, offsets) @ corpus.T
        top = scores.topk(4, dim=1)
        truth = torch.tensor(ints(35, n_items, n_users))
        hits = {k: (top.indices[:, :k] == truth.unsqueeze(1)).any(dim=1).float().mean()
                for k in (1, 2, 4)}  # fmt: skip
    return {"losses": losses, "logqs": logqs, "gap": gap, "last_seen": last_seen,
            "top_indices": top.indices, "top_scores": top.values, "recall": hits,
            "query_grads": grads(query), "cand_params": params(cand)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lightgcn_dense_propagation_bpr_ndcg(torch):
    # LightGCN (gusye1234/LightGCN-PyTorch): symmetric-normalised bipartite graph, layer mean of
    # propagated embeddings, BPR with softplus, L2 on ego embeddings, precision/recall/NDCG@k
    nn, F = torch.nn, torch.nn.functional
    n_users, n_items, dim, n_layers = 6, 9, 4, 3
    rng = np.random.default_rng(40)
    R = (rng.random((n_users, n_items)) < 0.35).astype(np.float32)
    R[np.arange(n_users), np.arange(n_users)] = 1.0  # every user has an item

    class LightGCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding_user = nn.Embedding(n_users, dim)
            self.embedding_item = nn.Embedding(n_items, dim)
            adj = torch.zeros(n_users + n_items, n_users + n_items)
            r = torch.tensor(R)
            adj[:n_users, n_users:] = r
            adj[n_users:, :n_users] = r.T
            rowsum = adj.sum(dim=1)
            d_inv = torch.pow(rowsum, -0.5).flatten()
            d_inv[torch.isinf(d_inv)] = 0.0
            d_mat = torch.diag(d_inv)
            self.register_buffer("graph", d_mat @ adj @ d_mat)

        def computer(self):
            all_emb = torch.cat([self.embedding_user.weight, self.embedding_item.weight])
            embs = [all_emb]
            for _ in range(n_layers):
                all_emb = torch.mm(self.graph, all_emb)
                embs.append(all_emb)
            light_out = torch.mean(torch.stack(embs, dim=1), dim=1)
            return torch.split(light_out, [n_users, n_items])

        def bpr_loss(self, users, pos, neg):
            all_users, all_items = self.computer()
            u, p, ng = all_users[users], all_items[pos], all_items[neg]
            u0, p0, n0 = (
                self.embedding_user(users),
                self.embedding_item(pos),
                self.embedding_item(neg),
            )
            reg = (1 / 2) * (u0.norm(2).pow(2) + p0.norm(2).pow(2) + n0.norm(2).pow(2))
            reg = reg / float(len(users))
            pos_scores = torch.sum(torch.mul(u, p), dim=1)
            neg_scores = torch.sum(torch.mul(u, ng), dim=1)
            return torch.mean(F.softplus(neg_scores - pos_scores)), reg

        def get_users_rating(self, users):
            all_users, all_items = self.computer()
            return torch.sigmoid(torch.matmul(all_users[users], all_items.t()))

    model = set_weights(torch, LightGCN(), seed=41, scale=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    pos_pairs = np.argwhere(R > 0)
    losses = []
    for epoch in range(3):
        sel = pos_pairs[np.random.default_rng(42 + epoch).choice(len(pos_pairs), 8)]
        neg = np.array([np.flatnonzero(R[u] == 0)[(epoch + k) % int((R[u] == 0).sum())]
                        for k, u in enumerate(sel[:, 0])])  # fmt: skip
        users, pos = torch.tensor(sel[:, 0]), torch.tensor(sel[:, 1])
        loss, reg = model.bpr_loss(users, pos, torch.tensor(neg.astype(np.int64)))
        total = loss + 1e-3 * reg
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append([loss.item(), reg.item()])
    with torch.no_grad():
        rating = model.get_users_rating(torch.arange(n_users))
        exclude = torch.tensor(R > 0)
        rating[exclude] = -(1 << 10)
        test = torch.tensor((rng.random((n_users, n_items)) < 0.3) & (R == 0))
        k = 2  # users 3 and 4 have only two unseen items: no ties among excluded ones
        _, rating_k = torch.topk(rating, k=k)
        hit = torch.gather(test.float(), 1, rating_k)
        right = hit.sum(1)
        n_test = test.sum(1).clamp(min=1)
        recall, precision = (right / n_test).mean(), right.sum() / (n_users * k)
        discounts = 1.0 / torch.log2(torch.arange(2, k + 2).float())
        dcg = (hit * discounts).sum(1)
        ideal = (torch.arange(k).unsqueeze(0) < test.sum(1, keepdim=True)).float()
        idcg = (ideal * discounts).sum(1)
        idcg[idcg == 0.0] = 1.0
        ndcg = (dcg / idcg).mean()
    return {"losses": losses, "rating_k": rating_k, "recall": recall, "precision": precision,
            "ndcg": ndcg, "graph": model.graph, "params": params(model),
            "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def dlrm_dot_interaction_embedding_bags(torch):
    # facebookresearch/dlrm dlrm_s_pytorch.py: bottom MLP, one EmbeddingBag per sparse feature,
    # pairwise dot interactions gathered with li/lj lists, top MLP with sigmoid and BCELoss
    nn = torch.nn
    m_spa, ln_emb, batch = 4, [7, 5, 9], 6

    class DLRM_Net(nn.Module):
        def create_mlp(self, ln, sigmoid_layer):
            layers = nn.ModuleList()
            for i in range(0, ln.size - 1):
                layers.append(nn.Linear(int(ln[i]), int(ln[i + 1]), bias=True))
                layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
            return torch.nn.Sequential(*layers)

        def create_emb(self, m, ln):
            emb_l = nn.ModuleList()
            for i in range(0, ln.size):
                emb_l.append(nn.EmbeddingBag(int(ln[i]), m, mode="sum", sparse=False))
            return emb_l

        def __init__(self, interaction_itself=False):
            super().__init__()
            self.arch_interaction_itself = interaction_itself
            self.emb_l = self.create_emb(m_spa, np.array(ln_emb))
            self.bot_l = self.create_mlp(np.array([5, 8, m_spa]), -1)
            num_fea = len(ln_emb) + 1
            num_int = (num_fea * (num_fea - 1)) // 2 + m_spa
            if interaction_itself:
                num_int = (num_fea * (num_fea + 1)) // 2 + m_spa
            self.top_l = self.create_mlp(np.array([num_int, 8, 1]), 1)

        def apply_emb(self, lS_o, lS_i, emb_l, v_W_l=None):
            ly = []
            for k, sparse_index_group_batch in enumerate(lS_i):
                per_sample_weights = v_W_l[k] if v_W_l is not None else None
                V = emb_l[k](sparse_index_group_batch, lS_o[k],
                             per_sample_weights=per_sample_weights)  # fmt: skip
                ly.append(V)
            return ly

        def interact_features(self, x, ly):
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            return torch.cat([x] + [Zflat], dim=1)

        def forward(self, dense_x, lS_o, lS_i, v_W_l=None):
            x = self.bot_l(dense_x)
            ly = self.apply_emb(lS_o, lS_i, self.emb_l, v_W_l)
            z = self.interact_features(x, ly)
            return self.top_l(z)

    dense = torch.tensor(np.log1p(np.abs(arr(50, batch, 5)) * 10).astype(np.float32))
    rng = np.random.default_rng(51)
    lS_o, lS_i = [], []
    for n in ln_emb:
        lengths = rng.integers(1, 4, batch)
        lS_o.append(torch.tensor(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)))
        lS_i.append(torch.tensor(rng.integers(0, n, int(lengths.sum())).astype(np.int64)))
    v_W_l = [torch.tensor(rng.uniform(0.5, 1.0, len(i)).astype(np.float32)) for i in lS_i]
    target = torch.tensor((rng.random((batch, 1)) < 0.5).astype(np.float32))
    results = {}
    for itself in (False, True):
        dlrm = set_weights(torch, DLRM_Net(itself), seed=52)
        loss_fn = torch.nn.BCELoss(reduction="mean")
        optimizer = torch.optim.SGD(dlrm.parameters(), lr=0.2)
        losses, accs = [], []
        for _ in range(3):
            Z = dlrm(dense, lS_o, lS_i, v_W_l if itself else None)
            E = loss_fn(Z, target)
            optimizer.zero_grad()
            E.backward()
            optimizer.step()
            losses.append(E.detach().cpu().numpy())
            accs.append((Z.detach().round() == target).float().mean().item())
        results["itself" if itself else "plain"] = {
            "losses": losses,
            "accs": accs,
            "out": Z,
            "grads": grads(dlrm),
        }
    return results


@program(rtol=5e-4, atol=5e-5)
def center_loss_softmax_two_optimizers(torch):
    # KaiyangZhou/pytorch-center-loss: squared distances to learnable centres via addmm_, its own
    # SGD whose gradients are rescaled by 1/weight_cent before the step
    nn = torch.nn

    class CenterLoss(nn.Module):
        def __init__(self, num_classes, feat_dim):
            super().__init__()
            self.num_classes, self.feat_dim = num_classes, feat_dim
            self.centers = nn.Parameter(torch.zeros(self.num_classes, self.feat_dim))

        def forward(self, x, labels):
            batch_size = x.size(0)
            distmat = (
                torch.pow(x, 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes)
                + torch.pow(self.centers, 2).sum(dim=1, keepdim=True)
                .expand(self.num_classes, batch_size).t()
            )  # fmt: skip
            distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)
            classes = torch.arange(self.num_classes).long()
            labels = labels.unsqueeze(1).expand(batch_size, self.num_classes)
            mask = labels.eq(classes.expand(batch_size, self.num_classes))
            dist = distmat * mask.float()
            return dist.clamp(min=1e-12, max=1e12).sum() / batch_size

    class Net(nn.Module):
        def __init__(self, n_classes):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(10, 16), nn.PReLU(), nn.Linear(16, 2))
            self.classifier = nn.Linear(2, n_classes)

        def forward(self, x):
            feat = self.features(x)
            return feat, self.classifier(feat)

    n_classes, weight_cent = 4, 0.5
    x_np, y_np = _clustered(60, n_classes, 4, 10)
    x, labels = torch.tensor(x_np), torch.tensor(y_np)
    model = set_weights(torch, Net(n_classes), seed=61)
    criterion_xent, criterion_cent = nn.CrossEntropyLoss(), CenterLoss(n_classes, 2)
    with torch.no_grad():
        criterion_cent.centers.copy_(torch.tensor(arr(62, n_classes, 2)))
    optimizer_model = torch.optim.SGD(model.parameters(), lr=0.05, weight_decay=5e-4, momentum=0.9)
    optimizer_centloss = torch.optim.SGD(criterion_cent.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer_model, step_size=2, gamma=0.5)
    losses, cent_grads = [], []
    for _ in range(4):
        features, outputs = model(x)
        loss_xent = criterion_xent(outputs, labels)
        loss_cent = criterion_cent(features, labels)
        loss_cent *= weight_cent
        loss = loss_xent + loss_cent
        optimizer_model.zero_grad()
        optimizer_centloss.zero_grad()
        loss.backward()
        optimizer_model.step()
        for param in criterion_cent.parameters():
            param.grad.data *= 1.0 / weight_cent
        cent_grads.append(criterion_cent.centers.grad.clone())
        optimizer_centloss.step()
        scheduler.step()
        losses.append([loss_xent.item(), loss_cent.item()])
    with torch.no_grad():
        features, outputs = model(x)
        predictions = outputs.max(1)[1]
        correct = (predictions == labels).sum()
        by_cdist = torch.cdist(features, criterion_cent.centers).pow(2)
    return {"losses": losses, "cent_grads": cent_grads, "centers": criterion_cent.centers,
            "correct": correct, "by_cdist": by_cdist, "features": features,
            "last_lr": scheduler.get_last_lr(), "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def moco_v2_queue_momentum_encoder(torch):
    # facebookresearch/moco builder.py without DDP: key encoder copied from the query encoder and
    # updated by EMA, a normalised queue buffer, l_pos/l_neg by einsum, enqueue by slice assignment
    nn = torch.nn

    class MoCo(nn.Module):
        def __init__(self, base_encoder, dim=6, K=12, m=0.9, T=0.2):
            super().__init__()
            self.K, self.m, self.T = K, m, T
            self.encoder_q = base_encoder(num_classes=dim)
            self.encoder_k = base_encoder(num_classes=dim)
            set_weights(torch, self.encoder_q, seed=71)
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.data.copy_(param_q.data)
                param_k.requires_grad = False
            self.register_buffer("queue", torch.tensor(arr(72, dim, K)))
            self.queue = nn.functional.normalize(self.queue, dim=0)
            self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        @torch.no_grad()
        def _momentum_update_key_encoder(self):
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

        @torch.no_grad()
        def _dequeue_and_enqueue(self, keys):
            batch_size = keys.shape[0]
            ptr = int(self.queue_ptr)
            assert self.K % batch_size == 0
            self.queue[:, ptr : ptr + batch_size] = keys.T
            ptr = (ptr + batch_size) % self.K
            self.queue_ptr[0] = ptr

        def forward(self, im_q, im_k):
            q = self.encoder_q(im_q)
            q = nn.functional.normalize(q, dim=1)
            with torch.no_grad():
                self._momentum_update_key_encoder()
                k = self.encoder_k(im_k)
                k = nn.functional.normalize(k, dim=1)
            l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
            l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
            logits = torch.cat([l_pos, l_neg], dim=1)
            logits /= self.T
            labels = torch.zeros(logits.shape[0], dtype=torch.long)
            self._dequeue_and_enqueue(k)
            return logits, labels

    def base_encoder(num_classes):
        return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(inplace=True),
                             nn.Linear(16, 16), nn.ReLU(inplace=True),
                             nn.Linear(16, num_classes))  # fmt: skip

    model = MoCo(base_encoder)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(
        filter(lambda p: p.requires_grad, model.parameters()), lr=0.06, momentum=0.9,
        weight_decay=1e-4,
    )  # fmt: skip
    losses, accs, ptrs = [], [], []
    for step in range(5):
        base = arr(73 + step, 4, 8)
        im_q = torch.tensor(base + arr(80 + step, 4, 8, scale=0.2))
        im_k = torch.tensor(base + arr(90 + step, 4, 8, scale=0.2))
        output, target = model(im_q, im_k)
        loss = criterion(output, target)
        acc1 = (output.argmax(dim=1) == target).float().mean() * 100
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accs.append(acc1.item())
        ptrs.append(int(model.queue_ptr))
    return {"losses": losses, "accs": accs, "ptrs": ptrs, "queue": model.queue,
            "key_params": params(model.encoder_k), "query_grads": grads(model.encoder_q),
            "key_running_mean": model.encoder_k[1].running_mean,
            "key_grad_none": [p.grad is None for p in model.encoder_k.parameters()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def siamese_ranking_and_embedding_losses(torch):
    # pairwise objectives on a shared tower: CosineEmbeddingLoss, MarginRankingLoss, RankNet as
    # BCEWithLogits on score differences, HingeEmbeddingLoss on distances, TripletMarginWithDistance
    nn, F = torch.nn, torch.nn.functional

    class Siamese(nn.Module):
        def __init__(self):
            super().__init__()
            self.tower = nn.Sequential(nn.Linear(7, 12), nn.Tanh(), nn.Linear(12, 5))
            self.scorer = nn.Linear(5, 1, bias=False)  # a bias cancels in every pairwise loss

        def forward(self, a, b):
            ea, eb = self.tower(a), self.tower(b)
            return ea, eb, self.scorer(ea).squeeze(-1), self.scorer(eb).squeeze(-1)

    model = set_weights(torch, Siamese(), seed=100)
    n = 8
    a, b = torch.tensor(arr(101, n, 7)), torch.tensor(arr(102, n, 7))
    rel_a = torch.tensor(np.random.default_rng(103).uniform(0, 3, n).astype(np.float32))
    rel_b = torch.tensor(np.random.default_rng(104).uniform(0, 3, n).astype(np.float32))
    y = torch.sign(rel_a - rel_b)
    similar = torch.tensor(np.array([1, -1, 1, 1, -1, -1, 1, -1], dtype=np.float32))
    cos_loss = nn.CosineEmbeddingLoss(margin=0.2)
    rank_loss = nn.MarginRankingLoss(margin=0.5)
    hinge = nn.HingeEmbeddingLoss(margin=2.0)
    trip = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda x, z: 1.0 - F.cosine_similarity(x, z), margin=0.4, swap=True
    )
    pos_weight = torch.tensor([1.5])
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9)
    history = []
    for _ in range(3):
        ea, eb, sa, sb = model(a, b)
        parts = {
            "cos": cos_loss(ea, eb, similar),
            "rank": rank_loss(sa, sb, y),
            "ranknet": F.binary_cross_entropy_with_logits(
                sa - sb, (y + 1) / 2, pos_weight=pos_weight
            ),
            "hinge": hinge(F.pairwise_distance(ea, eb), similar),
            "triplet": trip(ea[:4], eb[:4], ea[4:]),
            "listnet": -(F.softmax(rel_a, 0) * F.log_softmax(sa, 0)).sum(),
        }
        loss = sum(parts.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append({k: v.item() for k, v in parts.items()})
    with torch.no_grad():
        ea, eb, sa, sb = model(a, b)
        none = {
            "cos": F.cosine_embedding_loss(ea, eb, similar, margin=0.2, reduction="none"),
            "rank": F.margin_ranking_loss(sa, sb, y, margin=0.5, reduction="sum"),
            "hinge": F.hinge_embedding_loss(F.pairwise_distance(ea, eb), similar,
                                            margin=2.0, reduction="none"),
            "soft_margin": F.soft_margin_loss(sa - sb, y),
            "kl_listwise": F.kl_div(F.log_softmax(sa, 0), F.log_softmax(rel_a, 0),
                                    reduction="sum", log_target=True),
        }  # fmt: skip
    return {"history": history, "none": none, "params": params(model)}


@program(rtol=5e-4, atol=5e-5)
def proxy_anchor_loss_recall_at_k(torch):
    # tjddus9597/Proxy-Anchor-CVPR2020: proxies with 100x learning rate, hand-written l2_norm,
    # clip_grad_value_, and evaluate_cos's recall@k from topk over cosine similarities
    nn, F = torch.nn, torch.nn.functional

    def l2_norm(input):
        input_size = input.size()
        buffer = torch.pow(input, 2)
        normp = torch.sum(buffer, 1).add_(1e-12)
        norm = torch.sqrt(normp)
        _output = torch.div(input, norm.view(-1, 1).expand_as(input))
        return _output.view(input_size)

    def binarize(T, nb_classes):
        return F.one_hot(T, nb_classes).float()

    class Proxy_Anchor(nn.Module):
        def __init__(self, nb_classes, sz_embed, mrg=0.1, alpha=32):
            super().__init__()
            self.proxies = nn.Parameter(torch.empty(nb_classes, sz_embed))
            self.nb_classes, self.sz_embed, self.mrg, self.alpha = nb_classes, sz_embed, mrg, alpha

        def forward(self, X, T):
            P = self.proxies
            cos = F.linear(l2_norm(X), l2_norm(P))
            P_one_hot = binarize(T=T, nb_classes=self.nb_classes)
            N_one_hot = 1 - P_one_hot
            pos_exp = torch.exp(-self.alpha * (cos - self.mrg))
            neg_exp = torch.exp(self.alpha * (cos + self.mrg))
            with_pos_proxies = torch.nonzero(P_one_hot.sum(dim=0) != 0).squeeze(dim=1)
            num_valid_proxies = len(with_pos_proxies)
            P_sim_sum = torch.where(P_one_hot == 1, pos_exp, torch.zeros_like(pos_exp)).sum(dim=0)
            N_sim_sum = torch.where(N_one_hot == 1, neg_exp, torch.zeros_like(neg_exp)).sum(dim=0)
            pos_term = torch.log(1 + P_sim_sum).sum() / num_valid_proxies
            neg_term = torch.log(1 + N_sim_sum).sum() / self.nb_classes
            return pos_term + neg_term

    nb_classes, sz_embed = 6, 8
    x_np, y_np = _clustered(110, nb_classes, 3, 10)
    model = set_weights(torch, nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, sz_embed)),
                        seed=111)  # fmt: skip
    criterion = set_weights(torch, Proxy_Anchor(nb_classes, sz_embed), seed=112, scale=1.0)
    opt = torch.optim.AdamW([{"params": model.parameters(), "lr": 1e-3},
                             {"params": criterion.parameters(), "lr": 1e-3 * 100}],
                            lr=1e-3, weight_decay=1e-4)  # fmt: skip
    rng = np.random.default_rng(113)
    losses = []
    for _ in range(3):
        idx = rng.choice(len(y_np), 9, replace=False)  # classes 0..4 may be missing from a batch
        x, y = torch.tensor(x_np[idx]), torch.tensor(y_np[idx])
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 10)
        torch.nn.utils.clip_grad_value_(criterion.parameters(), 10)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        X, T = l2_norm(model(torch.tensor(x_np))), torch.tensor(y_np)
        K = 4
        cos_sim = F.linear(X, X)
        Y = T[cos_sim.topk(1 + K)[1][:, 1:]]
        recall = []
        for k in [1, 2, 4]:
            s = 0
            for t, y in zip(T, Y):
                if t in torch.Tensor(y).long()[:k]:
                    s += 1
            recall.append(s / (1.0 * len(T)))
    return {"losses": losses, "recall": recall, "neighbours": Y, "proxies": criterion.proxies,
            "proxy_grad": criterion.proxies.grad, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def multi_similarity_loss_python_mining(torch):
    # msight-tech/research-ms-loss: per-anchor hard mining with boolean indexing and Python min/max
    # over tensors, then mean average precision at R from a sorted similarity matrix
    nn, F = torch.nn, torch.nn.functional

    class MultiSimilarityLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.thresh, self.margin = 0.5, 0.1
            self.scale_pos, self.scale_neg = 2.0, 40.0

        def forward(self, feats, labels):
            assert feats.size(0) == labels.size(0)
            batch_size = feats.size(0)
            sim_mat = torch.matmul(feats, torch.t(feats))
            epsilon = 1e-5
            loss = list()
            for i in range(batch_size):
                pos_pair_ = sim_mat[i][labels == labels[i]]
                pos_pair_ = pos_pair_[pos_pair_ < 1 - epsilon]
                neg_pair_ = sim_mat[i][labels != labels[i]]
                neg_pair = neg_pair_[neg_pair_ + self.margin > min(pos_pair_)]
                pos_pair = pos_pair_[pos_pair_ - self.margin < max(neg_pair_)]
                if len(neg_pair) < 1 or len(pos_pair) < 1:
                    continue
                pos_loss = (1.0 / self.scale_pos * torch.log(
                    1 + torch.sum(torch.exp(-self.scale_pos * (pos_pair - self.thresh))))
                )  # fmt: skip
                neg_loss = (1.0 / self.scale_neg * torch.log(
                    1 + torch.sum(torch.exp(self.scale_neg * (neg_pair - self.thresh))))
                )  # fmt: skip
                loss.append(pos_loss + neg_loss)
            if len(loss) == 0:
                return torch.zeros([], requires_grad=True)
            return sum(loss) / batch_size

    x_np, y_np = _clustered(120, 4, 3, 9, spread=1.0, noise=1.0)
    x, labels = torch.tensor(x_np), torch.tensor(y_np)
    model = set_weights(
        torch, nn.Sequential(nn.Linear(9, 16), nn.ReLU(), nn.Linear(16, 6)), seed=121
    )
    criterion = MultiSimilarityLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    losses, kept = [], []
    for _ in range(3):
        feats = F.normalize(model(x))
        loss = criterion(feats, labels)
        with torch.no_grad():
            sim = feats @ feats.T
            same = labels[:, None] == labels[None, :]
            hardest_pos = (
                sim.masked_fill(~same | torch.eye(12, dtype=torch.bool), 2.0).min(1).values
            )
            kept.append(((sim + 0.1 > hardest_pos[:, None]) & ~same).sum().item())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        feats = F.normalize(model(x))
        sim = feats @ feats.T
        sim.fill_diagonal_(float("-inf"))
        order = sim.argsort(dim=1, descending=True)
        R = 2  # same-class neighbours per query
        rel = (labels[order[:, :R]] == labels[:, None]).float()
        precision_at_i = rel.cumsum(1) / torch.arange(1, R + 1).float()
        map_at_r = ((precision_at_i * rel).sum(1) / R).mean()
        r_precision = rel.mean()
    return {"losses": losses, "kept_negatives": kept, "order": order[:, :4], "map_at_r": map_at_r,
            "r_precision": r_precision, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ssl_ntxent_barlow_twins_vicreg_lars(torch):
    # lightly's NTXentLoss (diagonal dropped with a boolean mask and view), Barlow Twins'
    # cross-correlation with in-place diagonal ops and the off_diagonal view trick, VICReg, and the
    # LARS optimizer from facebookresearch/barlowtwins
    nn, F = torch.nn, torch.nn.functional
    optim = torch.optim

    class LARS(optim.Optimizer):
        def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                     weight_decay_filter=False, lars_adaptation_filter=False):  # fmt: skip
            defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta,
                            weight_decay_filter=weight_decay_filter,
                            lars_adaptation_filter=lars_adaptation_filter)  # fmt: skip
            super().__init__(params, defaults)

        def exclude_bias_and_norm(self, p):
            return p.ndim == 1

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    dp = p.grad
                    if dp is None:
                        continue
                    if not g["weight_decay_filter"] or not self.exclude_bias_and_norm(p):
                        dp = dp.add(p, alpha=g["weight_decay"])
                    if not g["lars_adaptation_filter"] or not self.exclude_bias_and_norm(p):
                        param_norm = torch.norm(p)
                        update_norm = torch.norm(dp)
                        one = torch.ones_like(param_norm)
                        q = torch.where(param_norm > 0.0,
                                        torch.where(update_norm > 0,
                                                    (g["eta"] * param_norm / update_norm), one),
                                        one)  # fmt: skip
                        dp = dp.mul(q)
                    param_state = self.state[p]
                    if "mu" not in param_state:
                        param_state["mu"] = torch.zeros_like(p)
                    mu = param_state["mu"]
                    mu.mul_(g["momentum"]).add_(dp)
                    p.add_(mu, alpha=-g["lr"])

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    def ntxent(out0, out1, temperature=0.5):
        batch_size = out0.shape[0]
        out0 = nn.functional.normalize(out0, dim=1)
        out1 = nn.functional.normalize(out1, dim=1)
        logits_00 = torch.einsum("nc,mc->nm", out0, out0) / temperature
        logits_01 = torch.einsum("nc,mc->nm", out0, out1) / temperature
        logits_10 = torch.einsum("nc,mc->nm", out1, out0) / temperature
        logits_11 = torch.einsum("nc,mc->nm", out1, out1) / temperature
        diag_mask = torch.eye(batch_size, dtype=torch.bool)
        logits_00 = logits_00[~diag_mask].view(batch_size, -1)
        logits_11 = logits_11[~diag_mask].view(batch_size, -1)
        logits_0100 = torch.cat([logits_01, logits_00], dim=1)
        logits_1011 = torch.cat([logits_10, logits_11], dim=1)
        logits = torch.cat([logits_0100, logits_1011], dim=0)
        labels = torch.arange(batch_size, dtype=torch.long).repeat(2)
        return nn.CrossEntropyLoss()(logits, labels)

    class BarlowTwins(nn.Module):
        def __init__(self, batch_size, lambd=0.05):
            super().__init__()
            self.batch_size, self.lambd = batch_size, lambd
            self.backbone = nn.Sequential(nn.Linear(10, 12), nn.ReLU())
            self.projector = nn.Sequential(nn.Linear(12, 8, bias=False), nn.BatchNorm1d(8),
                                           nn.ReLU(inplace=True), nn.Linear(8, 8, bias=False))  # fmt: skip
            self.bn = nn.BatchNorm1d(8, affine=False)

        def forward(self, y1, y2):
            z1 = self.projector(self.backbone(y1))
            z2 = self.projector(self.backbone(y2))
            c = self.bn(z1).T @ self.bn(z2)
            c.div_(self.batch_size)
            on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
            off_diag = off_diagonal(c).pow_(2).sum()
            return on_diag + self.lambd * off_diag, z1, z2

    def vicreg(x, y, batch_size, num_features=8):
        repr_loss = F.mse_loss(x, y)
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)
        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
        cov_x = (x.T @ x) / (batch_size - 1)
        cov_y = (y.T @ y) / (batch_size - 1)
        cov_loss = off_diagonal(cov_x).pow_(2).sum().div(num_features) + off_diagonal(cov_y).pow_(
            2
        ).sum().div(num_features)
        return 25.0 * repr_loss + 25.0 * std_loss + 1.0 * cov_loss

    bsz = 6
    model = set_weights(torch, BarlowTwins(bsz), seed=130)
    param_weights = [p for p in model.parameters() if p.ndim != 1]
    param_biases = [p for p in model.parameters() if p.ndim == 1]
    optimizer = LARS([{"params": param_weights}, {"params": param_biases}], lr=0,
                     weight_decay=1e-6, weight_decay_filter=True,
                     lars_adaptation_filter=True)  # fmt: skip
    base = arr(131, bsz, 10)
    y1 = torch.tensor(base + arr(132, bsz, 10, scale=0.3))
    y2 = torch.tensor(base * 0.8 + arr(133, bsz, 10, scale=0.3))
    history = []
    for step in range(3):
        lr = 0.2 * (step + 1) / 3
        optimizer.param_groups[0]["lr"] = lr
        optimizer.param_groups[1]["lr"] = lr * 0.05
        bt, z1, z2 = model(y1, y2)
        nt = ntxent(z1, z2)
        vr = vicreg(z1, z2, bsz)
        loss = bt + nt + 0.01 * vr
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append([bt.item(), nt.item(), vr.item()])
    return {"history": history, "params": params(model), "grads": grads(model),
            "mu": optimizer.state[param_weights[0]]["mu"],
            "bn_mean": model.bn.running_mean}  # fmt: skip
