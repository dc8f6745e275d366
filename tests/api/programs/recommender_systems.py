"""Recommender systems and their large embedding tables, as the well-known models write them:
DLRM in TorchRec's layout (jagged sparse features, pooled bags, dot interactions kept by
``triu_indices``), factorization machines with the sum-square trick and field-aware FMs, neural
collaborative filtering (GMF + MLP towers) with leave-one-out hit rate, two-tower retrieval with
in-batch negatives, logQ correction and streaming frequency estimates, ``nn.EmbeddingBag`` with
offsets, per-sample weights, every mode and ``padding_idx``, embeddings with ``max_norm``
renormalised in place, LightGCN with the BPR loss, Deep & Cross networks (v1, v2 and the low-rank
mixture), wide & deep with two optimizers, SASRec's causal self-attention over item histories,
the hashing trick (remainders, multiply-shift hashes, quotient-remainder and hash embeddings),
half-precision and 8-bit tables prepared for serving, multi-task ESMM/MMoE, and ranking metrics
(recall, NDCG, MRR) with ``topk`` and ``gather``. Inputs and weights are NumPy arrays from fixed
seeds."""

from __future__ import annotations

import itertools
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _offsets(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


@program(rtol=5e-4, atol=5e-5)  # bmm and bag sums accumulate in a different order
def torchrec_dlrm_jagged_features_triu_interaction(torch):
    """DLRM in TorchRec's layout: sparse features as one jagged batch (``values`` plus per-key
    ``lengths``, split per key, offsets by the complete cumulative sum and
    ``include_last_offset=True``), an ``nn.ModuleDict`` of ``EmbeddingBag`` tables (pooled sum,
    one shared by two features), a dense arch, the interaction arch stacking ``[B, F, D]``,
    ``bmm`` with its transpose and keeping the strict upper triangle through a registered
    ``triu_indices(offset=1)`` buffer (the same pairs as ``tril_indices(offset=-1)`` of the
    symmetric product); an over arch, ``BCEWithLogitsLoss``, SGD."""
    nn = torch.nn
    keys = ["user_id", "item_id", "item_cat", "hist_cat"]
    tables = {"t_user": 11, "t_item": 13, "t_cat": 5}
    feature_table = {"user_id": "t_user", "item_id": "t_item", "item_cat": "t_cat",
                     "hist_cat": "t_cat"}  # fmt: skip
    D = 4

    class EmbeddingBagCollection(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding_bags = nn.ModuleDict(
                {
                    name: nn.EmbeddingBag(n, D, mode="sum", include_last_offset=True)
                    for name, n in tables.items()
                }
            )

        def forward(self, values, lengths):
            per_key = lengths.view(len(keys), -1)
            sizes = per_key.sum(1).tolist()
            pooled = []
            for key, vals, lens in zip(keys, values.split(sizes), per_key):
                offsets = torch.cat([lens.new_zeros(1), torch.cumsum(lens, dim=0)])
                pooled.append(self.embedding_bags[feature_table[key]](vals, offsets))
            return torch.stack(pooled, dim=1)  # [B, F, D]

    class InteractionArch(nn.Module):
        def __init__(self, num_sparse_features):
            super().__init__()
            self.F = num_sparse_features
            self.register_buffer(
                "triu_indices",
                torch.triu_indices(self.F + 1, self.F + 1, offset=1),
                persistent=False,
            )

        def forward(self, dense_features, sparse_features):
            combined_values = torch.cat((dense_features.unsqueeze(1), sparse_features), dim=1)
            interactions = torch.bmm(combined_values, torch.transpose(combined_values, 1, 2))
            interactions_flat = interactions[:, self.triu_indices[0], self.triu_indices[1]]
            return torch.cat((dense_features, interactions_flat), dim=1), interactions

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.sparse_arch = EmbeddingBagCollection()
            self.dense_arch = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, D),
                                            nn.ReLU())  # fmt: skip
            self.inter_arch = InteractionArch(len(keys))
            n = len(keys) + 1
            self.over_arch = nn.Sequential(nn.Linear(D + n * (n - 1) // 2, 8), nn.ReLU(),
                                           nn.Linear(8, 1))  # fmt: skip

        def forward(self, dense, values, lengths):
            embedded_dense = self.dense_arch(dense)
            embedded_sparse = self.sparse_arch(values, lengths)
            concat, Z = self.inter_arch(embedded_dense, embedded_sparse)
            return self.over_arch(concat).squeeze(-1), Z

    model = set_weights(torch, DLRM(), seed=1)
    sizes = {"user_id": 11, "item_id": 13, "item_cat": 5, "hist_cat": 5}
    loss_fn = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    B = 6
    losses, logits_hist = [], []
    for step in range(4):
        dense = torch.tensor(np.log1p(np.abs(arr(10 + step, B, 3)) * 3))
        lengths, values = [], []
        for k, key in enumerate(keys):
            lens = np.ones(B, np.int64) if key != "hist_cat" else ints(20 + step, 4, B)
            lengths.append(lens)
            values.append(ints(40 + 10 * step + k, sizes[key], int(lens.sum())))
        lengths_t = torch.tensor(np.concatenate(lengths))
        values_t = torch.tensor(np.concatenate(values))
        labels = torch.tensor(ints(70 + step, 2, B).astype(np.float32))
        logits, Z = model(dense, values_t, lengths_t)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        logits_hist.append(logits.detach())
    tri = model.inter_arch.triu_indices
    low = torch.tril_indices(Z.shape[1], Z.shape[1], offset=-1)
    return {"losses": losses, "logits": logits_hist, "Z": Z, "triu": tri, "tril": low,
            "same_pairs": torch.equal(Z[:, tri[0], tri[1]].sort(1).values,
                                      Z[:, low[0], low[1]].sort(1).values),
            "buffers": [n for n, _ in model.named_buffers()],
            "state_keys": list(model.state_dict().keys()),
            "tables": {n: b.weight for n, b in model.sparse_arch.embedding_bags.items()},
            "table_grads": {n: b.weight.grad
                            for n, b in model.sparse_arch.embedding_bags.items()},
            "dense_w": model.dense_arch[0].weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # squares of sums vs sums of squares cancel in float32
def factorization_machine_sum_square_and_field_aware(torch):
    """A factorization machine in the pytorch-fm layout: every field's ids shifted by the field
    offsets (``x + x.new_tensor(offsets).unsqueeze(0)``) into one shared ``Embedding``, the
    linear term from an ``Embedding(n, 1)`` plus a bias, the pairwise term with the sum-square
    trick ``0.5 * (sum^2 - sum of squares)`` checked against explicit pairs from
    ``itertools.combinations``; a field-aware FM (one table per field, ``xs[j][:, i] *
    xs[i][:, j]``); both trained with Adam on ``binary_cross_entropy_with_logits``."""
    nn = torch.nn
    F = nn.functional
    field_dims = [5, 4, 7, 3]

    class FeaturesLinear(nn.Module):
        def __init__(self, field_dims, output_dim=1):
            super().__init__()
            self.fc = nn.Embedding(sum(field_dims), output_dim)
            self.bias = nn.Parameter(torch.zeros((output_dim,)))
            self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

        def forward(self, x):
            x = x + x.new_tensor(self.offsets).unsqueeze(0)
            return torch.sum(self.fc(x), dim=1) + self.bias

    class FeaturesEmbedding(nn.Module):
        def __init__(self, field_dims, embed_dim):
            super().__init__()
            self.embedding = nn.Embedding(sum(field_dims), embed_dim)
            self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

        def forward(self, x):
            x = x + x.new_tensor(self.offsets).unsqueeze(0)
            return self.embedding(x)

    class FactorizationMachine(nn.Module):
        def __init__(self, reduce_sum=True):
            super().__init__()
            self.reduce_sum = reduce_sum

        def forward(self, x):
            square_of_sum = torch.sum(x, dim=1) ** 2
            sum_of_square = torch.sum(x**2, dim=1)
            ix = square_of_sum - sum_of_square
            if self.reduce_sum:
                ix = torch.sum(ix, dim=1, keepdim=True)
            return 0.5 * ix

    class FMModel(nn.Module):
        def __init__(self, field_dims, embed_dim):
            super().__init__()
            self.embedding = FeaturesEmbedding(field_dims, embed_dim)
            self.linear = FeaturesLinear(field_dims)
            self.fm = FactorizationMachine(reduce_sum=True)

        def forward(self, x):
            x = self.linear(x) + self.fm(self.embedding(x))
            return x.squeeze(1)

    class FieldAwareFM(nn.Module):
        def __init__(self, field_dims, embed_dim):
            super().__init__()
            self.num_fields = len(field_dims)
            self.embeddings = nn.ModuleList(
                [nn.Embedding(sum(field_dims), embed_dim) for _ in range(self.num_fields)]
            )
            self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)
            self.linear = FeaturesLinear(field_dims)

        def forward(self, x):
            lin = self.linear(x)
            x = x + x.new_tensor(self.offsets).unsqueeze(0)
            xs = [self.embeddings[i](x) for i in range(self.num_fields)]
            ix = []
            for i in range(self.num_fields - 1):
                for j in range(i + 1, self.num_fields):
                    ix.append(xs[j][:, i] * xs[i][:, j])
            ix = torch.stack(ix, dim=1)
            return (lin + torch.sum(torch.sum(ix, dim=1), dim=1, keepdim=True)).squeeze(1)

    x = torch.tensor(np.stack([ints(100 + f, n, 12) for f, n in enumerate(field_dims)], 1))
    y = torch.tensor(ints(110, 2, 12).astype(np.float32))
    out = {}
    for name, model in (("fm", FMModel(field_dims, 4)), ("ffm", FieldAwareFM(field_dims, 3))):
        set_weights(torch, model, seed=111, scale=0.3)
        opt = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=1e-6)
        losses = []
        for _ in range(4):
            logits = model(x)
            loss = F.binary_cross_entropy_with_logits(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[name] = {"losses": losses, "logits": logits, "params": params(model)}
    fm = out["fm"]
    emb = FMModel(field_dims, 4)
    set_weights(torch, emb, seed=112)
    with torch.no_grad():
        v = emb.embedding(x)
        trick = emb.fm(v).squeeze(1)
        pairs = sum((v[:, i] * v[:, j]).sum(-1) for i, j in itertools.combinations(range(4), 2))
    out["trick"], out["pairs"] = trick, pairs
    out["same"] = torch.allclose(trick, pairs, atol=1e-5)
    out["probs"] = torch.sigmoid(fm["logits"]).detach()
    return out


@program(rtol=5e-4, atol=5e-5)
def neural_collaborative_filtering_neumf(torch):
    """NeuMF (He et al.): GMF and MLP towers with their own user and item embeddings, the MLP
    tower's width halving per layer (``nn.Dropout(p=0.0)`` before each ``Linear``), the two
    concatenated into the prediction layer; trained on positives with 3 sampled negatives each
    (``BCEWithLogitsLoss``, Adam); evaluated leave-one-out: 1 held-out item among 7 negatives,
    ``topk`` then ``torch.take`` and hit rate / NDCG as the NCF code computes them."""
    nn = torch.nn

    class NCF(nn.Module):
        def __init__(self, user_num, item_num, factor_num, num_layers, dropout):
            super().__init__()
            self.embed_user_GMF = nn.Embedding(user_num, factor_num)
            self.embed_item_GMF = nn.Embedding(item_num, factor_num)
            self.embed_user_MLP = nn.Embedding(user_num, factor_num * (2 ** (num_layers - 1)))
            self.embed_item_MLP = nn.Embedding(item_num, factor_num * (2 ** (num_layers - 1)))
            MLP_modules = []
            for i in range(num_layers):
                input_size = factor_num * (2 ** (num_layers - i))
                MLP_modules.append(nn.Dropout(p=dropout))
                MLP_modules.append(nn.Linear(input_size, input_size // 2))
                MLP_modules.append(nn.ReLU())
            self.MLP_layers = nn.Sequential(*MLP_modules)
            self.predict_layer = nn.Linear(factor_num * 2, 1)

        def forward(self, user, item):
            output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
            interaction = torch.cat((self.embed_user_MLP(user), self.embed_item_MLP(item)), -1)
            output_MLP = self.MLP_layers(interaction)
            concat = torch.cat((output_GMF, output_MLP), -1)
            prediction = self.predict_layer(concat)
            return prediction.view(-1)

    n_users, n_items = 6, 20
    model = set_weights(torch, NCF(n_users, n_items, 4, 2, 0.0), seed=2, scale=0.2)
    rng = _rng(3)
    pos = {u: set(rng.choice(n_items, 3, replace=False).tolist()) for u in range(n_users)}
    users, items, labels = [], [], []
    for u in range(n_users):
        for i in sorted(pos[u]):
            users.append(u), items.append(i), labels.append(1.0)
            for _ in range(3):
                j = int(rng.integers(n_items))
                while j in pos[u]:
                    j = int(rng.integers(n_items))
                users.append(u), items.append(j), labels.append(0.0)
    user, item = torch.tensor(users), torch.tensor(items)
    label = torch.tensor(labels, dtype=torch.float32)
    loss_function = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    model.train()
    for _ in range(5):
        model.zero_grad()
        prediction = model(user, item)
        loss = loss_function(prediction, label)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    HR, NDCG, recs = [], [], []
    top_k = 3
    for u in range(n_users):
        gt_item = int(rng.integers(n_items))
        negs = [j for j in rng.permutation(n_items).tolist() if j != gt_item][:7]
        item_u = torch.tensor([gt_item] + negs)
        with torch.no_grad():
            predictions = model(torch.full((8,), u, dtype=torch.long), item_u)
        _, indices = torch.topk(predictions, top_k)
        recommends = torch.take(item_u, indices).cpu().numpy().tolist()
        recs.append(recommends)
        HR.append(1 if gt_item in recommends else 0)
        NDCG.append(
            np.reciprocal(np.log2(recommends.index(gt_item) + 2)) if gt_item in recommends else 0
        )
    return {"losses": losses, "HR": float(np.mean(HR)), "NDCG": float(np.mean(NDCG)),
            "recs": recs, "grads": grads(model),
            "gmf_user": model.embed_user_GMF.weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def two_tower_bag_features_streaming_logq_adagrad(torch):
    """Two-tower retrieval (Yi et al. 2019): user and item towers of id embedding +
    ``EmbeddingBag`` of history/tags + MLP, L2-normalised, in-batch softmax with a temperature;
    the logits corrected by ``log q`` of each item's sampling probability, estimated by the
    streaming frequency estimator (hash arrays ``A`` and ``B`` updated at the batch's unique
    hashes), accidental hits (the same item elsewhere in the batch) masked with the dtype's
    minimum; Adagrad; retrieval with ``topk`` over the whole corpus at the end."""
    nn = torch.nn
    F = nn.functional

    class Tower(nn.Module):
        def __init__(self, n_ids, n_feats, dim):
            super().__init__()
            self.id_emb = nn.Embedding(n_ids, dim)
            self.feat_emb = nn.EmbeddingBag(n_feats, dim, mode="mean")
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 16), nn.ReLU(), nn.Linear(16, dim))

        def forward(self, ids, feats, offsets):
            h = torch.cat([self.id_emb(ids), self.feat_emb(feats, offsets)], dim=-1)
            return F.normalize(self.mlp(h), p=2, dim=-1)

    n_users, n_items, dim, B, H = 10, 16, 8, 6, 8
    user_tower = set_weights(torch, Tower(n_users, 12, dim), seed=4)
    item_tower = set_weights(torch, Tower(n_items, 9, dim), seed=5)
    temperature = 0.1
    opt = torch.optim.Adagrad(list(user_tower.parameters()) + list(item_tower.parameters()), lr=0.1)
    item_tags = [ints(200 + i, 9, 1 + i % 3).tolist() for i in range(n_items)]
    # streaming frequency estimation: A = last step a hash was seen, Bd = estimated gap
    A = torch.zeros(H)
    Bd = torch.ones(H)
    alpha = 0.25
    losses, probs, hits_masked = [], [], []
    for step in range(1, 5):
        user_ids = torch.tensor(ints(300 + step, n_users, B))
        item_np = ints(310 + step, n_items, B)
        item_np[-1] = item_np[0]  # one accidental hit per batch
        item_ids = torch.tensor(item_np)
        hist_len = (ints(320 + step, 3, B) + 1).tolist()
        u_feats = torch.tensor(ints(330 + step, 12, sum(hist_len)))
        u_off = torch.tensor(_offsets(hist_len))
        i_len = [len(item_tags[i]) for i in item_np]
        i_feats = torch.tensor(np.concatenate([item_tags[i] for i in item_np]).astype(np.int64))
        i_off = torch.tensor(_offsets(i_len))

        h = torch.remainder(item_ids * 7, H)
        seen = torch.unique(h)
        Bd[seen] = (1 - alpha) * Bd[seen] + alpha * (step - A[seen])
        A[seen] = float(step)
        q = 1.0 / Bd[h]
        probs.append(q)

        u = user_tower(user_ids, u_feats, u_off)
        v = item_tower(item_ids, i_feats, i_off)
        logits = u @ v.T / temperature
        logits = logits - torch.log(q).unsqueeze(0)
        same = item_ids.unsqueeze(0) == item_ids.unsqueeze(1)
        same.fill_diagonal_(False)
        logits = logits.masked_fill(same, torch.finfo(logits.dtype).min)
        hits_masked.append(int(same.sum()))
        labels = torch.arange(B)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        all_items = torch.arange(n_items)
        all_len = [len(t) for t in item_tags]
        corpus = item_tower(all_items,
                            torch.tensor(np.concatenate(item_tags).astype(np.int64)),
                            torch.tensor(_offsets(all_len)))  # fmt: skip
        scores = u @ corpus.T
        top_scores, top_items = scores.topk(4, dim=1)
    return {"losses": losses, "q": probs, "A": A, "B": Bd, "hits_masked": hits_masked,
            "top_items": top_items, "top_scores": top_scores,
            "corpus_norms": corpus.norm(dim=1), "user_id_emb": user_tower.id_emb.weight,
            "item_feat_grad": item_tower.feat_emb.weight.grad}  # fmt: skip


@program
def embedding_bag_offsets_weights_modes_padding(torch):
    """``nn.EmbeddingBag`` as sparse-feature pipelines call it: flat indices with ``offsets``
    (an empty bag among them), ``per_sample_weights`` in ``sum`` mode (their gradient too),
    ``mean`` and ``max`` modes, ``padding_idx`` left out of sums and means,
    ``include_last_offset=True`` (CSR-style offsets), 2-d fixed-length bags, the functional
    ``F.embedding_bag`` and ``from_pretrained``; the sum checked against the jagged idiom
    ``index_add_`` of looked-up rows into ``repeat_interleave``'d bag ids, and the bag ids
    recovered with ``searchsorted``."""
    nn = torch.nn
    F = nn.functional
    table = torch.tensor(arr(6, 10, 4))
    lengths = [3, 0, 2, 4, 1]
    offsets = torch.tensor(_offsets(lengths))
    idx_np = np.array([1, 4, 4, 0, 9, 2, 0, 7, 3, 5], dtype=np.int64)
    indices = torch.tensor(idx_np)
    psw = torch.tensor(np.linspace(0.5, 1.4, 10).astype(np.float32), requires_grad=True)
    out = {}
    for mode in ("sum", "mean", "max"):
        bag = nn.EmbeddingBag.from_pretrained(table.clone(), freeze=False, mode=mode)
        o = bag(indices, offsets)
        (o * torch.arange(1.0, 5.0)).sum().backward()
        out[mode] = {"out": o, "grad": bag.weight.grad}
    wbag = nn.EmbeddingBag(10, 4, mode="sum")
    with torch.no_grad():
        wbag.weight.copy_(table)
    weighted = wbag(indices, offsets, per_sample_weights=psw)
    weighted.pow(2).sum().backward()
    out["weighted"] = {"out": weighted, "grad": wbag.weight.grad, "psw_grad": psw.grad}
    for mode in ("sum", "mean"):
        pbag = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=0)
        with torch.no_grad():
            pbag.weight.copy_(table)
        o = pbag(indices, offsets)
        o.sum().backward()
        out[f"pad_{mode}"] = {"out": o, "grad": pbag.weight.grad}
    csr = torch.tensor(np.append(_offsets(lengths), len(idx_np)))
    out["last_offset"] = F.embedding_bag(indices, table, csr, mode="sum",
                                         include_last_offset=True)  # fmt: skip
    fixed = torch.tensor(np.array([[1, 0, 3], [0, 0, 0], [5, 5, 2], [7, 8, 0]]))
    out["fixed_mean_pad"] = F.embedding_bag(fixed, table, mode="mean", padding_idx=0)
    out["fixed_max"] = F.embedding_bag(fixed, table, mode="max")
    out["fixed_weighted"] = F.embedding_bag(fixed, table, mode="sum",
                                            per_sample_weights=torch.ones(4, 3) * 0.5)  # fmt: skip
    emb = nn.Embedding.from_pretrained(table)
    bag_ids = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    manual = torch.zeros(len(lengths), 4).index_add_(
        0, bag_ids, emb(indices) * psw.detach()[:, None]
    )
    seg = torch.searchsorted(offsets, torch.arange(len(idx_np)), right=True) - 1
    out["bag_ids"], out["seg"] = bag_ids, seg
    out["manual_matches"] = torch.allclose(manual, weighted.detach(), atol=1e-6)
    out["repr"] = repr(nn.EmbeddingBag(10, 4, mode="max", padding_idx=2))
    return out


@program
def embedding_max_norm_renormalised_in_place(torch):
    """``nn.Embedding(max_norm=...)``: the forward pass rescales the looked-up rows of the table
    in place (repeated indices, untouched rows unchanged), ``padding_idx`` zeroed by hand after
    loading weights and kept out of the gradient; the documented idiom that clones the weight
    before a differentiable use; ``norm_type=1`` through ``from_pretrained`` and through
    ``F.embedding``; then SGD steps that push rows past the bound and the next forward pulling
    them back."""
    nn = torch.nn
    F = nn.functional
    emb = nn.Embedding(8, 5, padding_idx=0, max_norm=1.0)
    set_weights(torch, emb, seed=7, scale=1.0)
    with torch.no_grad():
        emb.weight[emb.padding_idx].fill_(0)
    before = emb.weight.detach().clone()
    idx = torch.tensor([[1, 3, 3, 0], [5, 1, 0, 0]])
    W = torch.tensor(arr(8, 3, 5), requires_grad=True)
    a = emb.weight.clone() @ W.t()  # weight must be cloned for this to be differentiable
    b = emb(idx) @ W.t()  # renormalises rows 1, 3, 5 (and 0) in place
    loss = (a.sum(0) + b.mean((0, 1))).sigmoid().prod()
    loss.backward()
    after = emb.weight.detach().clone()
    out = {"before_norms": before.norm(dim=1), "after_norms": after.norm(dim=1),
           "changed": (after != before).any(1), "b": b, "loss": loss,
           "weight_grad": emb.weight.grad, "W_grad": W.grad}  # fmt: skip
    pre = torch.tensor(arr(9, 6, 3))
    l1 = nn.Embedding.from_pretrained(pre.clone(), freeze=False, max_norm=2.0, norm_type=1.0)
    l1_out = l1(torch.tensor([0, 2, 4]))
    out["l1_out"], out["l1_weight"] = l1_out, l1.weight
    out["l1_norms"] = l1.weight.detach().abs().sum(1)
    fw = pre.clone()
    out["functional"] = F.embedding(torch.tensor([5, 5, 1]), fw, max_norm=0.5)
    out["functional_weight"] = fw
    opt = torch.optim.SGD(emb.parameters(), lr=2.0)
    target = torch.tensor(arr(10, 2, 4, 5, scale=3.0))
    norms = []
    for _ in range(3):
        opt.zero_grad()
        F.mse_loss(emb(idx), target).backward()
        opt.step()
        norms.append(emb.weight.detach().norm(dim=1))
    out["norms"] = norms
    out["final"] = emb.weight
    out["repr"] = repr(emb)
    return out


@program(rtol=5e-4, atol=5e-5)
def bpr_lightgcn_zero_degree_guard_and_auc(torch):
    """LightGCN with the BPR loss: the bipartite adjacency ``[[0, R], [R^T, 0]]`` normalised
    ``D^-1/2 A D^-1/2`` (zero degrees guarded with ``isinf``), embeddings propagated by repeated
    products and averaged over layers (``torch.stack(...).mean(1)``), ``torch.split`` into users
    and items; BPR as ``softplus(neg - pos)`` and as ``-logsigmoid(pos - neg)``, the L2 penalty
    on the ego embeddings of the batch; negatives sampled outside each user's items; the
    per-user AUC by broadcasting."""
    nn = torch.nn
    F = nn.functional
    n_users, n_items, dim, n_layers = 5, 8, 6, 2
    rng = _rng(11)
    R_np = (rng.random((n_users, n_items)) < 0.35).astype(np.float32)
    R_np[0, 0] = R_np[4, 7] = 1.0
    R_np[:, 6] = 0.0  # an item nobody saw
    R = torch.tensor(R_np)
    n = n_users + n_items
    adj = torch.zeros(n, n)
    adj[:n_users, n_users:] = R
    adj[n_users:, :n_users] = R.T
    rowsum = adj.sum(1)
    d_inv = rowsum.pow(-0.5)
    d_inv[torch.isinf(d_inv)] = 0.0
    d_mat = torch.diag(d_inv)
    graph = d_mat @ adj @ d_mat

    class LightGCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding_user = nn.Embedding(n_users, dim)
            self.embedding_item = nn.Embedding(n_items, dim)

        def computer(self):
            all_emb = torch.cat([self.embedding_user.weight, self.embedding_item.weight])
            embs = [all_emb]
            for _ in range(n_layers):
                all_emb = torch.mm(graph, all_emb)
                embs.append(all_emb)
            light_out = torch.mean(torch.stack(embs, dim=1), dim=1)
            users, items = torch.split(light_out, [n_users, n_items])
            return users, items

        def bpr_loss(self, users, pos, neg):
            all_users, all_items = self.computer()
            users_emb, pos_emb, neg_emb = all_users[users], all_items[pos], all_items[neg]
            userEmb0 = self.embedding_user(users)
            posEmb0, negEmb0 = self.embedding_item(pos), self.embedding_item(neg)
            reg_loss = (1 / 2) * (userEmb0.norm(2).pow(2) + posEmb0.norm(2).pow(2)
                                  + negEmb0.norm(2).pow(2)) / float(len(users))  # fmt: skip
            pos_scores = torch.sum(torch.mul(users_emb, pos_emb), dim=1)
            neg_scores = torch.sum(torch.mul(users_emb, neg_emb), dim=1)
            loss = torch.mean(F.softplus(neg_scores - pos_scores))
            return loss, reg_loss, pos_scores - neg_scores

    model = set_weights(torch, LightGCN(), seed=12, scale=0.3)
    us, ps = np.nonzero(R_np)
    negs = []
    for u in us:
        j = int(rng.integers(n_items))
        while R_np[u, j]:
            j = int(rng.integers(n_items))
        negs.append(j)
    users, pos, neg = torch.tensor(us), torch.tensor(ps), torch.tensor(np.array(negs))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses, regs, same = [], [], []
    for _ in range(4):
        loss, reg_loss, x_uij = model.bpr_loss(users, pos, neg)
        same.append(torch.allclose(loss, -F.logsigmoid(x_uij).mean(), atol=1e-6))
        total = loss + 1e-3 * reg_loss
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(loss.item())
        regs.append(reg_loss.item())
    with torch.no_grad():
        user_out, item_out = model.computer()
        scores = user_out @ item_out.T
        gt_mask = R.bool()
        cmp = scores.unsqueeze(2) > scores.unsqueeze(1)  # [u, i, j]: i ranked above j
        pair = gt_mask.unsqueeze(2) & ~gt_mask.unsqueeze(1)
        auc = (cmp & pair).sum((1, 2)).float() / pair.sum((1, 2)).float()
    return {"graph": graph, "d_inv": d_inv, "losses": losses, "regs": regs, "same": same,
            "scores": scores, "auc": auc, "user_emb": model.embedding_user.weight,
            "item_grad": model.embedding_item.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def deep_and_cross_network_v1_v2_low_rank_mixture(torch):
    """Deep & Cross networks on embedded sparse fields plus dense features: DCN-v1 cross layers
    ``x0 * (x_l . w) + b + x_l`` (a ``Linear(d, 1)`` per layer), DCN-v2 ``x0 * (W x_l + b) + x_l``
    and the low-rank mixture of experts (``V^T``, ``C``, ``U`` matmuls on ``[B, d, 1]`` columns
    with tanh, gates softmaxed over experts), each beside a deep tower in the parallel
    structure and trained with Adam on BCE with logits."""
    nn = torch.nn
    F = nn.functional
    field_dims, emb_dim, n_dense = [6, 5, 4], 3, 2
    d = len(field_dims) * emb_dim + n_dense

    class CrossV1(nn.Module):
        def __init__(self, input_dim, num_layers):
            super().__init__()
            self.num_layers = num_layers
            self.w = nn.ModuleList([nn.Linear(input_dim, 1, bias=False) for _ in range(num_layers)])
            self.b = nn.ParameterList(
                [nn.Parameter(torch.zeros((input_dim,))) for _ in range(num_layers)]
            )

        def forward(self, x):
            x0 = x
            for i in range(self.num_layers):
                xw = self.w[i](x)
                x = x0 * xw + self.b[i] + x
            return x

    class CrossV2(nn.Module):
        def __init__(self, input_dim, num_layers):
            super().__init__()
            self.layers = nn.ModuleList(
                [nn.Linear(input_dim, input_dim) for _ in range(num_layers)]
            )

        def forward(self, x0):
            x = x0
            for layer in self.layers:
                x = x0 * layer(x) + x
            return x

    class CrossMix(nn.Module):
        def __init__(self, input_dim, num_layers, low_rank, num_experts):
            super().__init__()
            self.num_layers, self.num_experts = num_layers, num_experts
            self.U = nn.ParameterList([nn.Parameter(torch.empty(num_experts, input_dim, low_rank))
                                       for _ in range(num_layers)])  # fmt: skip
            self.V = nn.ParameterList([nn.Parameter(torch.empty(num_experts, input_dim, low_rank))
                                       for _ in range(num_layers)])  # fmt: skip
            self.C = nn.ParameterList([nn.Parameter(torch.empty(num_experts, low_rank, low_rank))
                                       for _ in range(num_layers)])  # fmt: skip
            self.gating = nn.ModuleList([nn.Linear(input_dim, 1, bias=False)
                                         for _ in range(num_experts)])  # fmt: skip
            self.bias = nn.ParameterList([nn.Parameter(torch.zeros(input_dim, 1))
                                          for _ in range(num_layers)])  # fmt: skip

        def forward(self, inputs):
            x_0 = inputs.unsqueeze(2)  # [B, d, 1]
            x_l = x_0
            for i in range(self.num_layers):
                experts, gates = [], []
                for e in range(self.num_experts):
                    gates.append(self.gating[e](x_l.squeeze(2)))
                    v_x = torch.tanh(torch.matmul(self.V[i][e].t(), x_l))  # [B, r, 1]
                    v_x = torch.tanh(torch.matmul(self.C[i][e], v_x))
                    uv_x = torch.matmul(self.U[i][e], v_x)  # [B, d, 1]
                    experts.append((x_0 * (uv_x + self.bias[i])).squeeze(2))
                experts = torch.stack(experts, 2)  # [B, d, E]
                gates = torch.stack(gates, 1)  # [B, E, 1]
                x_l = torch.matmul(experts, gates.softmax(1)) + x_l
            return x_l.squeeze(2)

    class DCN(nn.Module):
        def __init__(self, cross):
            super().__init__()
            self.embeddings = nn.ModuleList([nn.Embedding(n, emb_dim) for n in field_dims])
            self.cross = cross
            self.deep = nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU())
            self.out = nn.Linear(d + 8, 1)

        def forward(self, sparse, dense):
            embs = [emb(sparse[:, i]) for i, emb in enumerate(self.embeddings)]
            x0 = torch.cat(embs + [dense], dim=1)
            return self.out(torch.cat([self.cross(x0), self.deep(x0)], dim=1)).squeeze(-1)

    sparse = torch.tensor(np.stack([ints(400 + i, n, 10) for i, n in enumerate(field_dims)], 1))
    dense = torch.tensor(arr(410, 10, n_dense))
    y = torch.tensor(ints(411, 2, 10).astype(np.float32))
    out = {}
    for name, cross in (("v1", CrossV1(d, 2)), ("v2", CrossV2(d, 2)),
                        ("mix", CrossMix(d, 2, 3, 2))):  # fmt: skip
        model = set_weights(torch, DCN(cross), seed=412, scale=0.3)
        opt = torch.optim.Adam(model.parameters(), lr=0.02)
        losses = []
        for _ in range(3):
            loss = F.binary_cross_entropy_with_logits(model(sparse, dense), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[name] = {"losses": losses, "grads": grads(model.cross),
                     "logits": model(sparse, dense)}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def wide_and_deep_cross_product_two_optimizers(torch):
    """Wide & Deep: the wide part a linear model over one-hot and cross-product features (hashed
    pairs of fields, looked up in an ``EmbeddingBag(n, 1, mode="sum")`` with 2-d bags), the deep
    part field embeddings plus normalised continuous features (``BatchNorm1d`` in training mode)
    through an MLP, the logits added; the wide part trained with SGD (the paper's FTRL stand-in)
    and the deep part with Adagrad, each ``zero_grad``/``step`` on its own parameters."""
    nn = torch.nn
    F = nn.functional
    field_dims = [4, 6, 3]
    wide_dim, emb_dim = 40, 3

    class WideDeep(nn.Module):
        def __init__(self):
            super().__init__()
            self.wide = nn.EmbeddingBag(wide_dim, 1, mode="sum")
            self.wide_bias = nn.Parameter(torch.zeros(1))
            self.deep_emb = nn.ModuleList([nn.Embedding(n, emb_dim) for n in field_dims])
            self.bn = nn.BatchNorm1d(2)
            self.deep = nn.Sequential(nn.Linear(len(field_dims) * emb_dim + 2, 8), nn.ReLU(),
                                      nn.Linear(8, 1))  # fmt: skip
            self.offsets = torch.tensor(np.cumsum([0] + field_dims[:-1]))

        def wide_features(self, cat):
            one_hot = cat + self.offsets
            base = sum(field_dims)
            crosses = [(cat[:, i] * 31 + cat[:, j] * 7 + i * 13 + j) % (wide_dim - base) + base
                       for i, j in itertools.combinations(range(len(field_dims)), 2)]  # fmt: skip
            return torch.cat([one_hot, torch.stack(crosses, 1)], dim=1)

        def forward(self, cat, cont):
            wide_idx = self.wide_features(cat)
            wide = self.wide(wide_idx).squeeze(1) + self.wide_bias
            embs = [e(cat[:, i]) for i, e in enumerate(self.deep_emb)]
            deep = self.deep(torch.cat(embs + [self.bn(cont)], 1)).squeeze(1)
            return wide + deep, wide_idx

    model = set_weights(torch, WideDeep(), seed=13, scale=0.2)
    wide_params = [model.wide.weight, model.wide_bias]
    deep_params = [p for n, p in model.named_parameters() if not n.startswith("wide")]
    wide_opt = torch.optim.SGD(wide_params, lr=0.5)
    deep_opt = torch.optim.Adagrad(deep_params, lr=0.05)
    losses, idxs = [], []
    for step in range(4):
        cat = torch.tensor(np.stack([ints(500 + 10 * step + i, n, 8)
                                     for i, n in enumerate(field_dims)], 1))  # fmt: skip
        cont = torch.tensor(arr(520 + step, 8, 2) * np.array([1.0, 50.0], dtype=np.float32))
        y = torch.tensor(ints(530 + step, 2, 8).astype(np.float32))
        logits, wide_idx = model(cat, cont)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        wide_opt.zero_grad()
        deep_opt.zero_grad()
        loss.backward()
        wide_opt.step()
        deep_opt.step()
        losses.append(loss.item())
        idxs.append(wide_idx)
    model.eval()
    with torch.no_grad():
        eval_logits, _ = model(cat, cont)
    return {"losses": losses, "wide_idx": idxs, "eval_logits": eval_logits,
            "running_mean": model.bn.running_mean, "running_var": model.bn.running_var,
            "wide_w": model.wide.weight, "deep_grads": [p.grad for p in deep_params]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sasrec_causal_self_attention_item_histories(torch):
    """SASRec as its PyTorch port writes it: left-padded item histories (0 is padding), item
    embeddings scaled by ``sqrt(d)`` plus positions zeroed at padding (``poss *= (log_seqs !=
    0)``), ``~torch.tril(ones(bool))`` as the attention mask of ``nn.MultiheadAttention`` on
    ``[L, B, d]``, layer norms around a point-wise feed-forward made of ``Conv1d(k=1)``; BCE on
    positive and negative logits at the non-padding positions (``np.where`` index tuples), an L2
    term on the item table, Adam; then the next-item scores of candidate lists and ranks."""
    nn = torch.nn

    class PointWiseFeedForward(nn.Module):
        def __init__(self, hidden_units, dropout_rate):
            super().__init__()
            self.conv1 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
            self.dropout1 = nn.Dropout(p=dropout_rate)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
            self.dropout2 = nn.Dropout(p=dropout_rate)

        def forward(self, inputs):
            outputs = self.dropout2(self.conv2(self.relu(self.dropout1(
                self.conv1(inputs.transpose(-1, -2))))))  # fmt: skip
            outputs = outputs.transpose(-1, -2)
            outputs += inputs
            return outputs

    class SASRec(nn.Module):
        def __init__(self, item_num, maxlen, hidden_units, num_blocks, num_heads):
            super().__init__()
            self.item_emb = nn.Embedding(item_num + 1, hidden_units, padding_idx=0)
            self.pos_emb = nn.Embedding(maxlen + 1, hidden_units, padding_idx=0)
            self.emb_dropout = nn.Dropout(p=0.0)
            self.attention_layernorms = nn.ModuleList()
            self.attention_layers = nn.ModuleList()
            self.forward_layernorms = nn.ModuleList()
            self.forward_layers = nn.ModuleList()
            self.last_layernorm = nn.LayerNorm(hidden_units, eps=1e-8)
            for _ in range(num_blocks):
                self.attention_layernorms.append(nn.LayerNorm(hidden_units, eps=1e-8))
                self.attention_layers.append(nn.MultiheadAttention(hidden_units, num_heads, 0.0))
                self.forward_layernorms.append(nn.LayerNorm(hidden_units, eps=1e-8))
                self.forward_layers.append(PointWiseFeedForward(hidden_units, 0.0))

        def log2feats(self, log_seqs):
            seqs = self.item_emb(torch.LongTensor(log_seqs))
            seqs *= self.item_emb.embedding_dim**0.5
            poss = np.tile(np.arange(1, log_seqs.shape[1] + 1), [log_seqs.shape[0], 1])
            poss *= log_seqs != 0
            seqs += self.pos_emb(torch.LongTensor(poss))
            seqs = self.emb_dropout(seqs)
            tl = seqs.shape[1]
            attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool))
            for i in range(len(self.attention_layers)):
                seqs = torch.transpose(seqs, 0, 1)
                Q = self.attention_layernorms[i](seqs)
                mha_outputs, _ = self.attention_layers[i](Q, seqs, seqs, attn_mask=attention_mask)
                seqs = Q + mha_outputs
                seqs = torch.transpose(seqs, 0, 1)
                seqs = self.forward_layernorms[i](seqs)
                seqs = self.forward_layers[i](seqs)
            return self.last_layernorm(seqs)

        def forward(self, log_seqs, pos_seqs, neg_seqs):
            log_feats = self.log2feats(log_seqs)
            pos_embs = self.item_emb(torch.LongTensor(pos_seqs))
            neg_embs = self.item_emb(torch.LongTensor(neg_seqs))
            pos_logits = (log_feats * pos_embs).sum(dim=-1)
            neg_logits = (log_feats * neg_embs).sum(dim=-1)
            return pos_logits, neg_logits

        def predict(self, log_seqs, item_indices):
            log_feats = self.log2feats(log_seqs)
            final_feat = log_feats[:, -1, :]
            item_embs = self.item_emb(torch.LongTensor(item_indices))
            return item_embs.matmul(final_feat.unsqueeze(-1)).squeeze(-1)

    item_num, maxlen, d = 15, 6, 8
    model = set_weights(torch, SASRec(item_num, maxlen, d, 2, 2), seed=14, scale=0.3)
    rng = _rng(15)
    histories = [rng.integers(1, item_num + 1, n) for n in (7, 4, 2, 6)]
    seq = np.zeros((4, maxlen), dtype=np.int64)
    pos = np.zeros((4, maxlen), dtype=np.int64)
    neg = np.zeros((4, maxlen), dtype=np.int64)
    for b, h in enumerate(histories):
        inp, nxt = h[:-1][-maxlen:], h[1:][-maxlen:]
        seq[b, maxlen - len(inp) :], pos[b, maxlen - len(nxt) :] = inp, nxt
        for t in range(maxlen - len(nxt), maxlen):
            j = int(rng.integers(1, item_num + 1))
            while j in set(h.tolist()):
                j = int(rng.integers(1, item_num + 1))
            neg[b, t] = j
    bce_criterion = nn.BCEWithLogitsLoss()
    adam_optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.98))
    l2_emb = 1e-3
    losses = []
    model.train()
    for _ in range(3):
        pos_logits, neg_logits = model(seq, pos, neg)
        pos_labels, neg_labels = torch.ones(pos_logits.shape), torch.zeros(neg_logits.shape)
        adam_optimizer.zero_grad()
        indices = np.where(pos != 0)
        loss = bce_criterion(pos_logits[indices], pos_labels[indices])
        loss += bce_criterion(neg_logits[indices], neg_labels[indices])
        for param in model.item_emb.parameters():
            loss += l2_emb * torch.norm(param)
        loss.backward()
        adam_optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        item_idx = np.stack([np.concatenate([[pos[b, -1]], rng.choice(
            [j for j in range(1, item_num + 1) if j not in set(h.tolist())], 4, replace=False)])
            for b, h in enumerate(histories)])  # fmt: skip
        predictions = -model.predict(seq, item_idx)
        rank = predictions.argsort(dim=1).argsort(dim=1)[:, 0]
    return {"losses": losses, "pos_logits": pos_logits, "predictions": predictions,
            "rank": rank, "hit@2": (rank < 2).float().mean(),
            "item_emb": model.item_emb.weight,
            "in_proj_grad": model.attention_layers[0].in_proj_weight.grad,
            "conv_grad": model.forward_layers[1].conv1.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def hashing_trick_remainder_qr_and_hash_embeddings(torch):
    """The hashing trick for unbounded id spaces: raw 64-bit ids (negative ones too) bucketed
    with ``%`` / ``torch.remainder`` (Python's sign) beside ``torch.fmod`` (C's), a
    multiply-shift universal hash ``((a * x + b) % p) % m`` in int64, feature crosses with
    ``bitwise_xor``; the quotient-remainder trick (``ids // m`` and ``ids % m`` into two small
    tables, combined by product) and hash embeddings (k hashes into a shared pool, mixed by
    per-id importance weights through ``EmbeddingBag``'s ``per_sample_weights`` with 2-d bags);
    trained with Adam on a regression target."""
    nn = torch.nn
    F = nn.functional
    raw = torch.tensor(np.array([123456789012, -98765, 42, 7, -1, 10**11 + 3, 555555, -424242,
                                 31, 2**40 + 5], dtype=np.int64))  # fmt: skip
    num_buckets = 13
    out = {"remainder": torch.remainder(raw, num_buckets), "mod": raw % num_buckets,
           "fmod": torch.fmod(raw, num_buckets), "abs_mod": raw.abs() % num_buckets,
           "floordiv": raw // num_buckets,
           "div_floor": torch.div(raw, num_buckets, rounding_mode="floor"),
           "div_trunc": torch.div(raw, num_buckets, rounding_mode="trunc")}  # fmt: skip
    p = 2**31 - 1
    ids = torch.remainder(raw, p)
    ha = torch.tensor([1103515245, 69069, 22695477], dtype=torch.int64)
    hb = torch.tensor([12345, 1, 3], dtype=torch.int64)
    pool = 11
    hashed = ((ha.unsqueeze(0) * ids.unsqueeze(1) + hb) % p) % pool  # [N, k]
    out["hashed"] = hashed
    city, device = torch.tensor(ints(600, 50, 10)), torch.tensor(ints(601, 9, 10))
    out["cross"] = torch.bitwise_xor(city * 31, device) % 17

    class QREmbedding(nn.Module):
        def __init__(self, num_categories, dim, num_collisions):
            super().__init__()
            self.num_collisions = num_collisions
            self.q_emb = nn.Embedding(int(math.ceil(num_categories / num_collisions)), dim)
            self.r_emb = nn.Embedding(num_collisions, dim)

        def forward(self, x):
            x_q = torch.div(x, self.num_collisions, rounding_mode="floor")
            x_r = torch.remainder(x, self.num_collisions)
            return self.q_emb(x_q) * self.r_emb(x_r)

    class HashEmbedding(nn.Module):
        def __init__(self, num_ids, pool_size, dim, k):
            super().__init__()
            self.num_ids, self.k = num_ids, k
            self.pool = nn.EmbeddingBag(pool_size, dim, mode="sum")
            self.importance = nn.Embedding(num_ids, k)

        def forward(self, buckets, ids):
            weights = self.importance(ids % self.num_ids)
            return self.pool(buckets, per_sample_weights=weights)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.qr = QREmbedding(60, 4, 8)
            self.hash = HashEmbedding(7, pool, 4, 3)
            self.head = nn.Linear(8, 1)

        def forward(self, city_ids, buckets, ids):
            h = torch.cat([self.qr(city_ids), self.hash(buckets, ids)], dim=1)
            return self.head(h).squeeze(1)

    model = set_weights(torch, Model(), seed=602, scale=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    y = torch.tensor(arr(603, 10))
    losses = []
    for _ in range(4):
        loss = F.mse_loss(model(city, hashed, ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out.update({"losses": losses, "q_grad": model.qr.q_emb.weight.grad,
                "pool_grad": model.hash.pool.weight.grad,
                "importance": model.hash.importance.weight,
                "qr_rows": torch.div(city, 8, rounding_mode="floor").unique()})  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def esmm_mmoe_multitask_ctr_cvr(torch):
    """Multi-task ranking: ESMM's entire-space model (``pCTCVR = pCTR * pCVR``, the CTR loss on
    every impression, the CTCVR loss on click-and-convert, CVR never supervised directly) on top
    of an MMoE layer (experts stacked ``[B, E, H]``, one softmax gate per task, mixed with
    ``torch.einsum('be,beh->bh')`` and with ``bmm``), shared field embeddings; Adam."""
    nn = torch.nn
    F = nn.functional
    field_dims, emb_dim = [7, 5, 9], 4
    n_exp, hid = 3, 6

    class MMoE(nn.Module):
        def __init__(self, in_dim, n_tasks):
            super().__init__()
            self.experts = nn.ModuleList([nn.Sequential(nn.Linear(in_dim, hid), nn.ReLU())
                                          for _ in range(n_exp)])  # fmt: skip
            self.gates = nn.ModuleList([nn.Linear(in_dim, n_exp) for _ in range(n_tasks)])

        def forward(self, x):
            experts = torch.stack([e(x) for e in self.experts], dim=1)  # [B, E, H]
            outs = []
            for t, gate in enumerate(self.gates):
                g = F.softmax(gate(x), dim=-1)
                if t == 0:
                    outs.append(torch.einsum("be,beh->bh", g, experts))
                else:
                    outs.append(torch.bmm(g.unsqueeze(1), experts).squeeze(1))
            return outs

    class ESMM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.ModuleList([nn.Embedding(n, emb_dim) for n in field_dims])
            self.mmoe = MMoE(len(field_dims) * emb_dim, 2)
            self.ctr_tower = nn.Sequential(nn.Linear(hid, 4), nn.ReLU(), nn.Linear(4, 1))
            self.cvr_tower = nn.Sequential(nn.Linear(hid, 4), nn.ReLU(), nn.Linear(4, 1))

        def forward(self, x):
            emb = torch.cat([e(x[:, i]) for i, e in enumerate(self.embedding)], dim=1)
            h_ctr, h_cvr = self.mmoe(emb)
            p_ctr = torch.sigmoid(self.ctr_tower(h_ctr)).squeeze(1)
            p_cvr = torch.sigmoid(self.cvr_tower(h_cvr)).squeeze(1)
            return p_ctr, p_cvr, p_ctr * p_cvr

    model = set_weights(torch, ESMM(), seed=16, scale=0.4)
    x = torch.tensor(np.stack([ints(700 + i, n, 12) for i, n in enumerate(field_dims)], 1))
    click = torch.tensor(ints(710, 2, 12).astype(np.float32))
    conv = click * torch.tensor(ints(711, 2, 12).astype(np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(4):
        p_ctr, p_cvr, p_ctcvr = model(x)
        ctr_loss = F.binary_cross_entropy(p_ctr, click)
        ctcvr_loss = F.binary_cross_entropy(p_ctcvr, conv)
        loss = ctr_loss + ctcvr_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append([ctr_loss.item(), ctcvr_loss.item()])
    with torch.no_grad():
        emb = torch.cat([e(x[:, i]) for i, e in enumerate(model.embedding)], dim=1)
        gate_w = torch.stack([F.softmax(g(emb), -1) for g in model.mmoe.gates])
    return {"losses": losses, "p_cvr": p_cvr, "p_ctcvr": p_ctcvr, "gates": gate_w,
            "grads": grads(model.mmoe)}  # fmt: skip


@program
def ranking_metrics_recall_ndcg_mrr_topk_gather(torch):
    """Full-ranking evaluation as recommender libraries compute it: scores of every item for
    every user, training items excluded by ``scores[train_mask] = -inf``, ``topk`` for several
    k, relevance ``gather``'d from the test matrix, recall / precision / NDCG (log2 discounts,
    IDCG from a cumulative table indexed by ``clamp(n_pos, max=k) - 1``) / MRR / hit rate,
    users without test items left out; ranks of every item by ``argsort`` and ``scatter_``; the
    leave-one-out hit rate with ``isin``."""
    n_users, n_items, dim = 7, 15, 4
    U = torch.tensor(arr(17, n_users, dim))
    V = torch.tensor(arr(18, n_items, dim))
    rng = _rng(19)
    train = rng.random((n_users, n_items)) < 0.3
    test = (rng.random((n_users, n_items)) < 0.25) & ~train
    test[3] = False  # a user with no test items
    train_mask, test_mask = torch.tensor(train), torch.tensor(test)
    scores = U @ V.T
    scores[train_mask] = -float("inf")
    n_pos = test_mask.sum(1)
    valid = n_pos > 0
    rel = test_mask.float()
    out = {"n_pos": n_pos}
    for k in (1, 3, 5):
        _, topk_idx = torch.topk(scores, k, dim=1)
        hits = torch.gather(rel, 1, topk_idx)
        recall = hits.sum(1) / n_pos.clamp(min=1)
        precision = hits.sum(1) / k
        discount = 1.0 / torch.log2(torch.arange(2, k + 2).float())
        dcg = (hits * discount).sum(1)
        idcg_table = torch.cumsum(discount, dim=0)
        idcg = idcg_table[torch.clamp(n_pos, min=1, max=k) - 1]
        ndcg = dcg / idcg
        first = hits.argmax(1)
        mrr = hits.max(1).values / (first + 1).float()
        out[f"@{k}"] = {"topk": topk_idx, "recall": recall[valid].mean(),
                        "precision": precision[valid].mean(), "ndcg": ndcg[valid].mean(),
                        "ndcg_per_user": ndcg, "mrr": mrr[valid].mean(),
                        "hit_rate": (hits.sum(1) > 0)[valid].float().mean()}  # fmt: skip
    order = torch.argsort(scores, dim=1, descending=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(n_items).expand(n_users, -1).contiguous())
    out["pos_ranks"] = ranks[test_mask]
    target = torch.tensor([int(np.flatnonzero(~train[u])[-1]) for u in range(n_users)])
    top5 = scores.topk(5).indices
    out["loo_hit"] = [bool(torch.isin(target[u], top5[u])) for u in range(n_users)]
    out["test_in_top5"] = torch.stack(
        [torch.isin(top5[u], torch.nonzero(test_mask[u]).flatten()) for u in range(n_users)]
    )
    out["loo_hr"] = (top5 == target[:, None]).any(1).float().mean()
    out["loo_rank"] = (scores > scores.gather(1, target[:, None])).sum(1)
    return out


@program(rtol=1e-3, atol=1e-3)  # float16 results: a few ulps apart where PyTorch's order differs
def half_and_int8_embedding_tables_for_serving(torch):
    """Embedding tables prepared for serving: a trained bag collection cast with ``.half()``
    (bags of 20-odd ids pooled in float16, ``sum`` and ``mean``, per-sample weights in float16,
    fixed-length 2-d bags), the pooled features cast back ``.float()`` for the dense layers;
    row-wise 8-bit quantization of a table (per-row scale and bias from min and max,
    ``round().clamp(0, 255).to(torch.uint8)``) with dequantizing lookups; each version's scores
    and top-k compared with the float32 model's."""
    nn = torch.nn
    F = nn.functional

    class Ranker(nn.Module):
        def __init__(self):
            super().__init__()
            self.history = nn.EmbeddingBag(40, 8, mode="mean")
            self.tags = nn.EmbeddingBag(25, 8, mode="sum")
            self.head = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, hist, hist_off, tags, tag_w):
            h = self.history(hist, hist_off)
            t = self.tags(tags, per_sample_weights=tag_w)
            return self.head(torch.cat([h, t], 1).float()).squeeze(1)

    model = set_weights(torch, Ranker(), seed=21, scale=1.0)
    with torch.no_grad():
        model.history.weight.mul_(40.0)  # large rows: float16 spacing shows in long bags
    lengths = [23, 17, 0, 31, 9]
    hist = torch.tensor(ints(22, 40, sum(lengths)))
    hist_off = torch.tensor(_offsets(lengths))
    tags = torch.tensor(ints(23, 25, 5, 6))
    tag_w = torch.tensor(np.random.default_rng(24).uniform(0.2, 1.0, (5, 6)).astype(np.float32))
    model.eval()
    with torch.no_grad():
        full = model(hist, hist_off, tags, tag_w)
        half_tables = model.history.weight.half(), model.tags.weight.half()
        pooled_h = F.embedding_bag(hist, half_tables[0], hist_off, mode="mean")
        pooled_s = F.embedding_bag(hist, half_tables[0], hist_off, mode="sum")
        pooled_t = F.embedding_bag(tags, half_tables[1], mode="sum",
                                   per_sample_weights=tag_w.half())  # fmt: skip
        pooled_2d = F.embedding_bag(tags, half_tables[1], mode="mean")
        half_scores = model.head(torch.cat([pooled_h, pooled_t], 1).float()).squeeze(1)

        w = model.history.weight
        w_min = w.min(dim=1, keepdim=True).values
        w_max = w.max(dim=1, keepdim=True).values
        scale = (w_max - w_min) / 255.0
        q = torch.round((w - w_min) / scale).clamp(0, 255).to(torch.uint8)
        rows = q[hist].float() * scale[hist] + w_min[hist]
        bag_of = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
        sums = torch.zeros(len(lengths), 8).index_add_(0, bag_of, rows)
        counts = torch.tensor(lengths, dtype=torch.float32).clamp(min=1).unsqueeze(1)
        q_pooled = sums / counts
        q_scores = model.head(torch.cat([q_pooled, model.tags(tags, per_sample_weights=tag_w)],
                                        1)).squeeze(1)  # fmt: skip
    return {"full": full, "pooled_h": pooled_h, "pooled_s": pooled_s, "pooled_t": pooled_t,
            "pooled_2d": pooled_2d, "dtypes": [str(pooled_h.dtype), str(pooled_t.dtype)],
            "half_scores": half_scores, "half_err": (half_scores - full).abs().max(),
            "q": q, "q_err": (q_pooled - model.history(hist, hist_off)).abs().max(),
            "q_scores": q_scores, "top_full": full.topk(3).indices,
            "top_half": half_scores.topk(3).indices}  # fmt: skip
