"""Graphs, metric learning and sequences: message passing with scatter ops, contrastive losses, recommenders, dilated convolutions, seq2seq, beam search, Gaussian processes."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _edges(seed: int, n: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    """``e`` distinct directed edges (no self loops) among ``n`` nodes, as (src, dst)."""
    rng = np.random.default_rng(seed)
    pairs = [p for p in rng.permutation(n * n) if p // n != p % n][:e]
    pairs = np.array(pairs, dtype=np.int64)
    return pairs // n, pairs % n


@program
def gcn_node_classification_index_add(torch):
    nn, F = torch.nn, torch.nn.functional
    N = 12
    src, dst = _edges(1, N, 18)
    edge_index = torch.tensor(np.stack([src, dst]))
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)  # make it undirected
    loops = torch.arange(N).unsqueeze(0).repeat(2, 1)
    edge_index = torch.cat([edge_index, loops], dim=1)
    row, col = edge_index
    deg = torch.zeros(N).index_add_(0, col, torch.ones(col.size(0)))
    deg_inv_sqrt = deg.pow(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float("inf"), 0)
    norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]

    class GCNConv(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.lin = nn.Linear(d_in, d_out, bias=False)
            self.bias = nn.Parameter(torch.zeros(d_out))

        def forward(self, x):
            h = self.lin(x)
            msg = norm.view(-1, 1) * h.index_select(0, row)
            return torch.zeros_like(h).index_add_(0, col, msg) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = GCNConv(8, 16), GCNConv(16, 3)

        def forward(self, x):
            return self.conv2(F.relu(self.conv1(x)))

    model = set_weights(torch, GCN(), seed=5)
    x, y = torch.tensor(arr(3, N, 8)), torch.tensor(ints(4, 3, N))
    train_mask = torch.zeros(N, dtype=torch.bool)
    train_mask[:8] = True
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits = model(x)
    acc = (logits.argmax(dim=1)[~train_mask] == y[~train_mask]).float().mean()
    return {"deg": deg, "norm": norm, "losses": losses, "logits": logits, "acc": acc,
            "grads": grads(model), "params": params(model)}  # fmt: skip


@program
def graphsage_scatter_reduce_aggregators(torch):
    nn, F = torch.nn, torch.nn.functional
    N, D = 10, 6
    s, d = _edges(11, N, 24)
    edge_index = torch.tensor(np.stack([s, d]))

    class SAGEConv(nn.Module):
        def __init__(self, d_in, d_out, aggr):
            super().__init__()
            self.aggr = aggr
            self.lin_l = nn.Linear(d_in, d_out)
            self.lin_r = nn.Linear(d_in, d_out, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index
            msg = x[src]
            index = dst.unsqueeze(-1).expand_as(msg)
            out = x.new_zeros(x.size(0), x.size(1))
            if self.aggr == "sum":
                out = out.scatter_add_(0, index, msg)
            else:
                out = out.scatter_reduce_(0, index, msg, reduce=self.aggr, include_self=False)
            return F.normalize(self.lin_l(out) + self.lin_r(x), p=2.0, dim=-1)

    layers = nn.ModuleList([SAGEConv(D, 8, "mean"), SAGEConv(8, 8, "amax"), SAGEConv(8, 4, "sum")])
    set_weights(torch, layers, seed=12)
    x = torch.tensor(arr(13, N, D), requires_grad=True)
    y = torch.tensor(ints(14, 4, N))
    opt = torch.optim.SGD(layers.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for _ in range(3):
        h = x
        for i, layer in enumerate(layers):
            h = layer(h, edge_index)
            h = F.relu(h) if i < len(layers) - 1 else h
        loss = F.cross_entropy(h * 4.0, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    src, dst = edge_index
    idx = dst.view(-1, 1).expand(-1, D)
    base = torch.full((N, D), 0.5)
    aggs = {r: base.scatter_reduce(0, idx, x.detach()[src], reduce=r, include_self=inc)
            for r, inc in [("mean", False), ("amin", False), ("prod", False), ("amax", True)]}  # fmt: skip
    return {"losses": losses, "x_grad": x.grad, "grads": grads(layers), "aggs": aggs,
            "in_degree": torch.bincount(dst, minlength=N)}  # fmt: skip


@program
def gat_layer_edge_softmax(torch):
    nn, F = torch.nn, torch.nn.functional
    N, H, C = 9, 2, 4
    s, d = _edges(21, N, 20)
    loops = np.arange(N)
    edge_index = torch.tensor(np.stack([np.concatenate([s, loops]), np.concatenate([d, loops])]))

    class GATConv(nn.Module):
        def __init__(self, d_in, d_out, heads, concat=True):
            super().__init__()
            self.heads, self.d_out, self.concat = heads, d_out, concat
            self.lin = nn.Linear(d_in, heads * d_out, bias=False)
            self.att_src = nn.Parameter(torch.empty(1, heads, d_out))
            self.att_dst = nn.Parameter(torch.empty(1, heads, d_out))
            self.bias = nn.Parameter(torch.empty(heads * d_out if concat else d_out))

        def forward(self, x, edge_index):
            src, dst = edge_index
            n = x.size(0)
            h = self.lin(x).view(-1, self.heads, self.d_out)
            a_src, a_dst = (h * self.att_src).sum(-1), (h * self.att_dst).sum(-1)
            alpha = F.leaky_relu(a_src[src] + a_dst[dst], 0.2)  # [E, heads]
            index = dst.unsqueeze(-1).expand_as(alpha)
            amax = alpha.new_full((n, self.heads), float("-inf"))
            amax = amax.scatter_reduce(0, index, alpha.detach(), reduce="amax")
            alpha = (alpha - amax[dst]).exp()
            denom = torch.zeros(n, self.heads).index_add_(0, dst, alpha)
            alpha = alpha / (denom[dst] + 1e-16)
            out = torch.zeros(n, self.heads, self.d_out)
            out = out.index_add(0, dst, h[src] * alpha.unsqueeze(-1))
            out = out.flatten(1) if self.concat else out.mean(dim=1)
            return out + self.bias, alpha

    conv1, conv2 = GATConv(5, C, H), GATConv(H * C, 3, 1, concat=False)
    model = set_weights(torch, nn.ModuleList([conv1, conv2]), seed=22)
    x, y = torch.tensor(arr(23, N, 5)), torch.tensor(ints(24, 3, N))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(3):
        h, att = conv1(x, edge_index)
        out, _ = conv2(F.elu(h), edge_index)
        loss = F.nll_loss(F.log_softmax(out, dim=1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # the per-edge softmax equals a dense masked softmax over the adjacency
    src, dst = edge_index
    with torch.no_grad():
        h = conv1.lin(x).view(-1, H, C)
        a_src, a_dst = (h * conv1.att_src).sum(-1), (h * conv1.att_dst).sum(-1)
        dense = F.leaky_relu(a_dst.t().unsqueeze(-1) + a_src.t().unsqueeze(1), 0.2)  # [H, dst, src]
        adj = torch.zeros(N, N, dtype=torch.bool)
        adj[dst, src] = True
        dense = dense.masked_fill(~adj, float("-inf")).softmax(dim=-1)
        _, att = conv1(x, edge_index)
    return {"losses": losses, "att": att, "att_sums": torch.zeros(N, H).index_add_(0, dst, att),
            "dense_matches": torch.allclose(dense[:, dst, src].t(), att, atol=1e-6),
            "grads": grads(model)}  # fmt: skip


@program
def gin_graph_classification_pooling(torch):
    nn, F = torch.nn, torch.nn.functional
    sizes = [4, 6, 5]
    B = len(sizes)
    batch = torch.repeat_interleave(torch.tensor(sizes))
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.tensor(sizes).cumsum(0)])
    edges = []
    for g, n in enumerate(sizes):
        s, d = _edges(30 + g, n, 2 * n)
        edges.append(np.stack([s, d]) + int(ptr[g]))
    edge_index = torch.tensor(np.concatenate(edges, axis=1))
    N = int(ptr[-1])

    class GINConv(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.eps = nn.Parameter(torch.zeros(1))
            self.mlp = nn.Sequential(nn.Linear(d_in, d_out), nn.ReLU(), nn.Linear(d_out, d_out))

        def forward(self, x, edge_index):
            src, dst = edge_index
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            return self.mlp((1 + self.eps) * x + agg)

    def to_dense_batch(x, batch, fill_value):
        counts = torch.bincount(batch)
        idx = torch.arange(batch.size(0)) - ptr[batch]
        out = x.new_full((counts.numel(), int(counts.max()), x.size(-1)), fill_value)
        out[batch, idx] = x
        return out, torch.arange(int(counts.max())).unsqueeze(0) < counts.unsqueeze(1)

    class GIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([GINConv(4, 8), GINConv(8, 8)])
            self.head = nn.Linear(3 * 8, 2)

        def forward(self, x, edge_index, batch):
            for conv in self.convs:
                x = F.relu(conv(x, edge_index))
            add = torch.zeros(B, x.size(1)).index_add_(0, batch, x)
            mean = add / torch.bincount(batch, minlength=B).unsqueeze(1).to(x.dtype)
            dense, mask = to_dense_batch(x, batch, float("-inf"))
            mx = dense.max(dim=1).values
            return self.head(torch.cat([add, mean, mx], dim=1)), mask

    model = set_weights(torch, GIN(), seed=33)
    x, y = torch.tensor(arr(34, N, 4)), torch.tensor(np.array([0, 1, 1]))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    losses = []
    for _ in range(4):
        out, mask = model(x, edge_index, batch)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    split_means = torch.stack([part.mean(0) for part in torch.split(x, sizes)])
    return {"batch": batch, "losses": losses, "out": out, "mask": mask, "split_means": split_means,
            "grads": grads(model)}  # fmt: skip


@program
def simclr_nt_xent_and_clip_loss(torch):
    nn, F = torch.nn, torch.nn.functional
    n = 6
    encoder = nn.Sequential(
        nn.Linear(10, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8)
    )
    set_weights(torch, encoder, seed=40)
    logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
    opt = torch.optim.AdamW([*encoder.parameters(), logit_scale], lr=0.01, weight_decay=0.05)
    base = arr(41, n, 10)
    view1 = torch.tensor(base + arr(42, n, 10, scale=0.1))
    view2 = torch.tensor(base * 0.9 + arr(43, n, 10, scale=0.1))

    def nt_xent(z1, z2, temperature=0.5):
        z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
        sim = z @ z.T / temperature
        sim.fill_diagonal_(float("-inf"))
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        return F.cross_entropy(sim, targets)

    def info_nce_by_hand(z1, z2, temperature=0.5):
        z = torch.cat([z1, z2], dim=0)
        cos = F.cosine_similarity(z[:, None, :], z[None, :, :], dim=-1) / temperature
        self_mask = torch.eye(2 * n, dtype=torch.bool)
        pos_mask = self_mask.roll(shifts=n, dims=0)
        cos = cos.masked_fill(self_mask, -9e15)
        nll = -cos[pos_mask] + torch.logsumexp(cos, dim=-1)
        return nll.mean(), (
            cos.argsort(dim=-1, descending=True) == pos_mask.nonzero()[:, 1:]
        ).float()

    losses, hand, clip = [], [], []
    for _ in range(3):
        z1, z2 = encoder(view1), encoder(view2)
        loss = nt_xent(z1, z2)
        by_hand, ranks = info_nce_by_hand(z1, z2)
        i1, i2 = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)
        logits = logit_scale.exp().clamp(max=100) * i1 @ i2.t()
        labels = torch.arange(n)
        clip_loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        opt.zero_grad()
        (loss + clip_loss).backward()
        opt.step()
        losses.append(loss.item())
        hand.append(by_hand.item())
        clip.append(clip_loss.item())
    return {"losses": losses, "by_hand": hand, "clip": clip, "top1_rank": ranks[:, 0],
            "logit_scale": logit_scale, "running_mean": encoder[1].running_mean,
            "running_var": encoder[1].running_var, "grads": grads(encoder)}  # fmt: skip


@program
def triplet_batch_hard_mining(torch):
    nn, F = torch.nn, torch.nn.functional
    net = set_weights(torch, nn.Sequential(nn.Linear(6, 12), nn.PReLU(), nn.Linear(12, 4)), seed=50)
    x = torch.tensor(arr(51, 12, 6))
    labels = torch.arange(4).repeat_interleave(3)
    criterion = nn.TripletMarginLoss(margin=0.3, p=2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    a_idx, p_idx, n_idx = (torch.tensor(np.array(v)) for v in
                           ([0, 3, 6, 9, 1], [1, 4, 8, 10, 2], [5, 7, 2, 0, 11]))  # fmt: skip
    hard_losses, module_losses = [], []
    for _ in range(3):
        emb = net(x)
        dist = torch.cdist(emb, emb)
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        hardest_pos = (dist * same.float()).max(dim=1).values
        hardest_neg = dist.masked_fill(same, float("inf")).min(dim=1).values
        batch_hard = F.relu(hardest_pos - hardest_neg + 0.3).mean()
        trip = criterion(emb[a_idx], emb[p_idx], emb[n_idx])
        opt.zero_grad()
        (batch_hard + trip).backward()
        opt.step()
        hard_losses.append(batch_hard.item())
        module_losses.append(trip.item())
    emb = net(x).detach()
    a, p, ng = emb[a_idx], emb[p_idx], emb[n_idx]
    by_hand = torch.clamp_min(F.pairwise_distance(a, p) - F.pairwise_distance(a, ng) + 0.3, 0)
    return {"hard": hard_losses, "module": module_losses, "by_hand": by_hand,
            "functional": F.triplet_margin_loss(a, p, ng, margin=0.3, reduction="none"),
            "swap_p1": F.triplet_margin_loss(a, p, ng, margin=1.0, p=1, swap=True),
            "grads": grads(net)}  # fmt: skip


@program
def recommender_mf_bpr_embedding_bag(torch):
    nn, F = torch.nn, torch.nn.functional
    n_users, n_items, dim = 7, 11, 5

    class MF(nn.Module):
        def __init__(self):
            super().__init__()
            self.user = nn.Embedding(n_users, dim)
            self.item = nn.Embedding(n_items, dim, max_norm=0.5)
            self.user_bias, self.item_bias = nn.Embedding(n_users, 1), nn.Embedding(n_items, 1)
            self.history = nn.EmbeddingBag(n_items, dim, mode="mean")
            self.global_bias = nn.Parameter(torch.zeros(1))

        def user_vec(self, users, hist, offsets):
            return self.user(users) + self.history(hist, offsets)

        def forward(self, users, items, hist, offsets):
            u = self.user_vec(users, hist, offsets)
            dot = (u * self.item(items)).sum(dim=1)
            return (
                dot
                + self.user_bias(users).squeeze(-1)
                + self.item_bias(items).squeeze(-1)
                + self.global_bias
            )

    model = set_weights(torch, MF(), seed=60)
    users = torch.tensor(np.array([0, 1, 2, 3, 4, 5]))
    pos, neg = torch.tensor(ints(61, n_items, 6)), torch.tensor(ints(62, n_items, 6))
    ratings = torch.tensor(np.random.default_rng(63).uniform(1, 5, 6).astype(np.float32))
    hist = torch.tensor(ints(64, n_items, 14))
    offsets = torch.tensor(np.array([0, 2, 5, 5, 9, 11]))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        mse = F.mse_loss(model(users, pos, hist, offsets), ratings)
        diff = model(users, pos, hist, offsets) - model(users, neg, hist, offsets)
        bpr = -F.logsigmoid(diff).mean()
        batch_emb = [model.user(users), model.item(pos), model.item(neg)]
        reg = 1e-3 * sum(e.norm(2).pow(2) for e in batch_emb) / users.size(0)
        opt.zero_grad()
        (mse + bpr + reg).backward()
        opt.step()
        losses.append([mse.item(), bpr.item()])
    with torch.no_grad():
        scores = model.user_vec(users, hist, offsets) @ model.item.weight.t()
        seen = torch.zeros(6, n_items, dtype=torch.bool).scatter_(1, pos.unsqueeze(1), True)
        top = scores.masked_fill(seen, float("-inf")).topk(3, dim=1)
    recency = torch.tensor(np.linspace(0.2, 1.0, 14).astype(np.float32))
    bag = nn.EmbeddingBag.from_pretrained(
        model.item.weight.detach(), mode="sum", include_last_offset=True
    )
    weighted = bag(hist, torch.cat([offsets, torch.tensor([14])]), per_sample_weights=recency)
    return {"losses": losses, "top_items": top.indices, "top_scores": top.values,
            "weighted_last": bag.include_last_offset, "weighted": weighted,
            "grads": grads(model), "params": params(model)}  # fmt: skip


@program
def tcn_dilated_causal_weight_norm(torch):
    nn = torch.nn
    weight_norm = nn.utils.parametrizations.weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, chomp_size):
            super().__init__()
            self.chomp_size = chomp_size

        def forward(self, x):
            return x[:, :, : -self.chomp_size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, n_in, n_out, kernel_size, dilation, dropout=0.0):
            super().__init__()
            padding = (kernel_size - 1) * dilation
            conv1 = weight_norm(
                nn.Conv1d(n_in, n_out, kernel_size, padding=padding, dilation=dilation)
            )
            conv2 = weight_norm(
                nn.Conv1d(n_out, n_out, kernel_size, padding=padding, dilation=dilation)
            )
            self.net = nn.Sequential(conv1, Chomp1d(padding), nn.ReLU(), nn.Dropout(dropout),
                                     conv2, Chomp1d(padding), nn.ReLU(), nn.Dropout(dropout))  # fmt: skip
            self.downsample = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None

        def forward(self, x):
            res = x if self.downsample is None else self.downsample(x)
            return torch.relu(self.net(x) + res)

    class TCN(nn.Module):
        def __init__(self, channels=(6, 6, 4), k=2):
            super().__init__()
            layers, n_in = [], 2
            for i, c in enumerate(channels):
                layers.append(TemporalBlock(n_in, c, k, dilation=2**i))
                n_in = c
            self.network = nn.Sequential(*layers)
            self.linear = nn.Linear(n_in, 1)

        def forward(self, x):
            return self.linear(self.network(x).transpose(1, 2)).squeeze(-1)

    model = set_weights(torch, TCN(), seed=70)
    t = np.linspace(0, 4 * np.pi, 17, dtype=np.float32)
    series = np.stack([np.sin(t + p) for p in (0.0, 0.5, 1.0)]).astype(np.float32)
    x = torch.tensor(np.stack([series[:, :-1], np.cos(series[:, :-1])], axis=1))  # [3, 2, 16]
    y = torch.tensor(series[:, 1:])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(4):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = model(x)
        x2 = x.clone()
        x2[:, :, 10:] += 1.0  # the future must not leak into the past
        causal = torch.equal(model(x2)[:, :10], out[:, :10])
    conv = model.network[0].net[0]
    return {"losses": losses, "out": out, "causal": causal, "weight": conv.weight,
            "g": conv.parametrizations.weight.original0, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def seq2seq_gru_attention_teacher_forcing(torch):
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    PAD, SOS, EOS, V, E, H = 0, 1, 2, 12, 6, 8
    rng = np.random.default_rng(80)
    lengths = [5, 3, 4, 2]
    srcs = [torch.tensor(np.append(rng.integers(3, V, n - 1), EOS)) for n in lengths]
    tgts = [
        torch.tensor(np.concatenate([[SOS], rng.integers(3, V, n), [EOS]])) for n in (3, 4, 2, 3)
    ]
    src = rnn.pad_sequence(srcs, batch_first=True, padding_value=PAD)
    tgt = rnn.pad_sequence(tgts, batch_first=True, padding_value=PAD)
    src_len = torch.tensor(lengths)

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.encoder = nn.GRU(E, H, batch_first=True, bidirectional=True)
            self.bridge = nn.Linear(2 * H, H)
            self.enc_proj = nn.Linear(2 * H, H, bias=False)
            self.tgt_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.decoder = nn.GRUCell(E + H, H)
            self.out = nn.Linear(2 * H, V)

        def forward(self, src, src_len, tgt, teacher):
            packed = rnn.pack_padded_sequence(
                self.src_emb(src), src_len, batch_first=True, enforce_sorted=False
            )
            enc, h = self.encoder(packed)
            enc, _ = rnn.pad_packed_sequence(enc, batch_first=True, padding_value=0.0)
            keys = self.enc_proj(enc)  # [B, S, H]
            h = torch.tanh(self.bridge(torch.cat([h[-2], h[-1]], dim=1)))
            mask = src != PAD
            ctx = torch.zeros_like(h)
            inp, logits = tgt[:, 0], []
            for t in range(1, tgt.size(1)):
                h = self.decoder(torch.cat([self.tgt_emb(inp), ctx], dim=1), h)
                scores = torch.bmm(keys, h.unsqueeze(2)).squeeze(2).masked_fill(~mask, -1e10)
                attn = F.softmax(scores, dim=1)
                ctx = torch.bmm(attn.unsqueeze(1), keys).squeeze(1)
                step = self.out(torch.cat([h, ctx], dim=1))
                logits.append(step)
                inp = tgt[:, t] if teacher[t - 1] else step.argmax(dim=1)
            return torch.stack(logits, dim=1), attn

    model = set_weights(torch, Seq2Seq(), seed=81)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    teacher = np.random.default_rng(82).random((3, tgt.size(1))) < 0.5
    losses = []
    for step in range(3):
        logits, attn = model(src, src_len, tgt, teacher[step])
        loss = F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append([loss.item(), norm.item()])
    return {"src": src, "tgt": tgt, "losses": losses, "attn": attn, "logits": logits,
            "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def beam_search_lstm_decoder(torch):
    nn, F = torch.nn, torch.nn.functional
    SOS, EOS, V, B, K, T = 0, 3, 9, 2, 3, 6
    embed = set_weights(torch, nn.Embedding(V, 5), seed=96, scale=1.0)
    lstm = set_weights(torch, nn.LSTM(5, 7, num_layers=2, batch_first=True), seed=91, scale=0.8)
    fc = set_weights(torch, nn.Linear(7, V), seed=96, scale=3.0)
    h0 = torch.tensor(arr(93, 2, B, 7, scale=0.5))
    c0 = torch.tensor(arr(94, 2, B, 7, scale=0.5))

    h, c = h0.repeat_interleave(K, dim=1), c0.repeat_interleave(K, dim=1)
    tokens = torch.full((B * K, 1), SOS, dtype=torch.long)
    scores = torch.zeros(B, K)
    scores[:, 1:] = float("-inf")  # only the first beam is live at the start
    finished = torch.zeros(B * K, dtype=torch.bool)
    lengths = torch.ones(B * K)
    with torch.no_grad():
        for _ in range(T):
            out, (h, c) = lstm(embed(tokens[:, -1:]), (h, c))
            logp = F.log_softmax(fc(out[:, -1]), dim=-1)
            eos_only = torch.full_like(logp, float("-inf"))
            eos_only[:, EOS] = 0.0
            logp = torch.where(finished.unsqueeze(1), eos_only, logp)
            cand = (scores.view(-1, 1) + logp).view(B, K * V)
            scores, top = cand.topk(K, dim=1)
            beam = torch.div(top, V, rounding_mode="floor")
            tok = top % V
            flat = (beam + torch.arange(B).unsqueeze(1) * K).view(-1)
            h, c = h.index_select(1, flat), c.index_select(1, flat)
            tokens = torch.cat([tokens.index_select(0, flat), tok.view(-1, 1)], dim=1)
            lengths = lengths.index_select(0, flat) + (~finished.index_select(0, flat)).float()
            finished = finished.index_select(0, flat) | (tok.view(-1) == EOS)
            if finished.all():
                break
        normalized = scores / lengths.view(B, K).pow(0.7)
        best = normalized.argmax(dim=1)
        best_seq = tokens.view(B, K, -1).gather(1, best.view(B, 1, 1).expand(-1, 1, tokens.size(1)))
    return {"tokens": tokens, "scores": scores, "lengths": lengths, "finished": finished,
            "best": best, "best_seq": best_seq.squeeze(1), "normalized": normalized}  # fmt: skip


@program
def gp_regression_marginal_likelihood(torch):
    dt = torch.float64
    X = torch.tensor(np.linspace(-2, 2, 14).reshape(-1, 1), dtype=dt)
    y = torch.sin(2.5 * X).squeeze(-1) + torch.tensor(arr(100, 14, scale=0.1), dtype=dt)
    Xs = torch.tensor(np.array([[-2.5], [-0.3], [0.75], [3.0]]), dtype=dt)
    log_ls = torch.nn.Parameter(torch.tensor(0.0, dtype=dt))
    log_sf = torch.nn.Parameter(torch.tensor(0.0, dtype=dt))
    log_sn = torch.nn.Parameter(torch.tensor(-1.0, dtype=dt))
    opt = torch.optim.Adam([log_ls, log_sf, log_sn], lr=0.05)

    def rbf(a, b):
        sqdist = (a.unsqueeze(-2) - b.unsqueeze(-3)).pow(2).sum(-1)
        return torch.exp(2 * log_sf) * torch.exp(-0.5 * sqdist / torch.exp(2 * log_ls))

    def neg_log_marginal_likelihood():
        n = X.size(0)
        K = rbf(X, X) + torch.exp(2 * log_sn) * torch.eye(n, dtype=dt)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        nll = 0.5 * (y.unsqueeze(-1) * alpha).sum() + L.diagonal().log().sum()
        return nll + 0.5 * n * math.log(2 * math.pi), L, alpha

    history = []
    for _ in range(8):
        opt.zero_grad()
        nll, L, alpha = neg_log_marginal_likelihood()
        nll.backward()
        history.append([nll.item(), log_ls.grad.item(), log_sf.grad.item(), log_sn.grad.item()])
        opt.step()
    with torch.no_grad():
        nll, L, alpha = neg_log_marginal_likelihood()
        Ks = rbf(Xs, X)
        mean = Ks @ alpha.squeeze(-1)
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        var = torch.exp(2 * log_sf) - v.pow(2).sum(0)
        mvn = torch.distributions.MultivariateNormal(torch.zeros(X.size(0), dtype=dt), scale_tril=L)
        L_ex, info = torch.linalg.cholesky_ex(rbf(X, X))
    return {"history": history, "mean": mean, "var": var, "nll": nll, "mvn_log_prob": mvn.log_prob(y),
            "hyper": [log_ls.item(), log_sf.item(), log_sn.item()], "info": info,
            "cdist_sq": torch.cdist(Xs, X).pow(2)}  # fmt: skip


@program
def knn_nca_metric_and_filtering(torch):
    nn, F = torch.nn, torch.nn.functional
    centers = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], dtype=np.float32)
    train_y = torch.tensor(ints(110, 3, 24))
    train_x = torch.tensor(centers[train_y.numpy()] + arr(111, 24, 4))
    test_x = torch.tensor(arr(112, 8, 4, scale=1.5))
    k = 5
    dist = torch.cdist(test_x, train_x, compute_mode="donot_use_mm_for_euclid_dist")
    knn_d, knn_i = dist.topk(k, dim=1, largest=False)
    knn_y = train_y[knn_i]
    votes = torch.zeros(8, 3).scatter_add_(1, knn_y, 1.0 / (knn_d + 1e-8))
    proba = votes / votes.sum(dim=1, keepdim=True)
    conf, pred = proba.max(dim=1)
    confident = conf > 0.63
    filtered = {
        "where": torch.where(confident, pred, torch.full_like(pred, -1)),
        "nonzero": torch.nonzero(confident).squeeze(1),
        "as_tuple": confident.nonzero(as_tuple=True)[0],
        "masked_select": torch.masked_select(pred, confident),
        "argwhere": torch.argwhere(proba > 0.3),
        "count": confident.sum(),
        "one_hot_counts": F.one_hot(knn_y, 3).sum(dim=1),
        "class_counts": torch.bincount(pred, minlength=4),
        "dist_per_class": torch.bincount(knn_y.flatten(), weights=knn_d.flatten(), minlength=3),
        "conf_bucket": torch.bucketize(conf, torch.tensor([0.5, 0.63, 0.8]), right=True),
        "ring": torch.searchsorted(torch.tensor([2.0, 3.0]), knn_d, side="right"),
        "dist_hist": torch.histc(knn_d, bins=4, min=1.0, max=4.5),
    }
    # NCA: learn a linear metric so that soft nearest neighbours share labels
    proj = set_weights(torch, nn.Linear(4, 2, bias=False), seed=113)
    opt = torch.optim.RMSprop(proj.parameters(), lr=0.01)
    same = train_y.unsqueeze(0) == train_y.unsqueeze(1)
    eye = torch.eye(24, dtype=torch.bool)
    nca = []
    for _ in range(3):
        z = proj(train_x)
        d2 = torch.cdist(z, z).pow(2).masked_fill(eye, float("inf"))
        p = F.softmax(-d2, dim=1)
        loss = -(p * (same & ~eye).float()).sum(dim=1).clamp_min(1e-12).log().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        nca.append(loss.item())
    manhattan = torch.cdist(test_x, train_x, p=1).topk(3, largest=False).indices
    return {"knn_d": knn_d, "knn_i": knn_i, "proba": proba, "pred": pred, **filtered,
            "nca": nca, "proj": proj.weight, "manhattan": manhattan}  # fmt: skip
