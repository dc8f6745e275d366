"""Tensor indexing and rearrangement as real code writes it: keypoint decoding from heatmaps with
advanced indices mixed with slices, ints, ``None``, ``...`` and masks (and PyTorch's rule that
moves the broadcast dimensions first when advanced indices are separated by a slice), confusion
matrices with ``index_put_(accumulate=True)``, BERT/ELECTRA token masking, graph message passing
with ``scatter_reduce``, beam search bookkeeping with ``topk`` and ``gather``, VQ-VAE codebook
updates with ``index_add_``/``index_copy_``/``index_fill_``, point-cloud voxelisation with
``unique``, learning to rank with stable sorts and ties, NeRF's inverse-CDF sampling with
``searchsorted``, pairwise terms with ``triu_indices``/``combinations``/``meshgrid``, im2col with
``F.unfold``/``F.fold``, Swin's shifted windows with ``roll`` and ``einsum``, ragged batches with
``repeat_interleave``/``split``/``chunk``/``narrow``, and mixture-of-experts routing. Gradients
flow through all of them."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, ints, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


@program
def keypoint_heatmap_decoding_advanced_indexing(torch):
    """CenterNet/Keypoint R-CNN style decoding: peaks of per-keypoint heatmaps found with
    ``argmax`` on the flattened maps, read back with ``heat[b, k, ys, xs]``, sub-pixel offsets from
    the neighbours, Gaussian-free targets written with advanced-index assignment; then the puzzles
    of mixed keys: separated advanced indices (broadcast dims move first), an int next to a list
    (PyTorch selects the int first), ``...`` with ``None``, boolean masks over leading dims and over
    one middle dim, a 2-d index tensor, and assignment with broadcasting."""
    B, K, H, W = 2, 3, 5, 6
    heat = torch.tensor(arr(1, B, K, H, W), requires_grad=True)
    idx = heat.flatten(2).argmax(-1)
    ys, xs = idx // W, idx % W
    b = torch.arange(B)[:, None]
    k = torch.arange(K)[None, :]
    peak = heat[b, k, ys, xs]
    dx = heat[b, k, ys, (xs + 1).clamp(max=W - 1)] - heat[b, k, ys, (xs - 1).clamp(min=0)]
    dy = heat[b, k, (ys + 1).clamp(max=H - 1), xs] - heat[b, k, (ys - 1).clamp(min=0), xs]
    coords = torch.stack([xs.float() + 0.25 * dx.sign(), ys.float() + 0.25 * dy.sign()], -1)
    target = torch.zeros(B, K, H, W)
    target[b, k, ys, xs] = 1.0
    rows = heat[torch.tensor([0, 1, 1]), :, torch.tensor([2, 0, 4])]  # (3, K, W)
    adjacent = heat[:, [0, 2], [1, 3]]  # (B, 2, W)
    int_then_list = heat[0, :, [1, 3]]  # (K, 2, W): the int is applied first
    int_slice_list = heat[:, 1, :, [0, 5]]  # (B, H, 2)
    ell_none = heat[..., None, 2:, [0, 2, 4]]  # (B, K, 1, 3, 3)
    strong = heat.amax((2, 3)) > 2.0
    by_mask = heat[strong]  # (n, H, W)
    mask_and_int = heat[strong, 2]  # (n, W)
    row_mask = torch.tensor([True, False, True, True, False])
    middle_mask = heat[:, :, row_mask]  # (B, K, 3, W)
    grid_idx = torch.tensor([[0, 1], [1, 0], [1, 1]])
    two_d = heat[grid_idx]  # (3, 2, K, H, W)
    pair = heat[1, [2, 0], :, [5, 1]]  # (2, H)
    legacy = heat[[torch.arange(B), torch.tensor([2, 0])]]  # a list of tensors: a tuple, (B, H, W)
    nested = heat[[[0, 1], [1, 0]], [[2], [0]]]  # 2-d lists broadcast: (2, 2, H, W)
    canvas = torch.zeros(4, 5, 6)
    canvas[:, [0, 2], 1:3] = torch.tensor([1.0, 2.0])
    canvas[1:, :, [0, -1]] += torch.arange(3.0)[:, None, None]
    canvas[canvas > 1.5] = -1.0
    loss = (
        peak.sum()
        + (dx**2 + dy**2).mean()
        + rows.pow(2).mean()
        + adjacent.abs().sum() * 0.1
        + (int_then_list * torch.arange(2.0)[:, None]).sum()
        + int_slice_list.sum() * 0.5
        + ell_none.mean()
        + by_mask.sum() * 0.01
        + mask_and_int.sum()
        + middle_mask.mean()
        + (two_d * 0.3).sum()
        + pair.sum()
        + legacy.mean()
        + (nested[0] - nested[1]).pow(2).sum()
    )
    loss.backward()
    return {"idx": idx, "peak": peak, "coords": coords, "target": target, "rows": rows,
            "adjacent": adjacent, "int_then_list": int_then_list,
            "int_slice_list": int_slice_list, "ell_none": ell_none, "strong": strong,
            "by_mask": by_mask, "mask_and_int": mask_and_int, "middle_mask": middle_mask,
            "two_d_shape": list(two_d.shape), "pair": pair, "legacy": legacy,
            "nested": nested, "canvas": canvas, "loss": loss,
            "grad": heat.grad}  # fmt: skip


@program
def confusion_matrix_and_soft_counts_with_index_put(torch):
    """Segmentation-metric bookkeeping: a confusion matrix built with
    ``cm.index_put_((target, pred), ones, accumulate=True)`` (many duplicate cells), checked
    against ``bincount(n * t + p, minlength=n * n)``; per-class IoU; a differentiable soft
    confusion matrix ``zeros.index_put((target,), probs, accumulate=True)`` trained for a few
    steps; hit counts with a broadcast scalar value; non-accumulating ``index_put_`` with unique
    indices and ``__setitem__`` with a bool mask."""
    n_cls, N = 4, 30
    target = torch.tensor(ints(2, n_cls, N))
    logits = torch.tensor(arr(3, N, n_cls), requires_grad=True)
    pred = logits.argmax(1)
    cm = torch.zeros(n_cls, n_cls, dtype=torch.int64)
    cm.index_put_((target, pred), torch.ones_like(target), accumulate=True)
    cm_bincount = torch.bincount(target * n_cls + pred, minlength=n_cls**2).reshape(n_cls, n_cls)
    inter = cm.diag()
    union = cm.sum(0) + cm.sum(1) - inter
    iou = inter / union.clamp(min=1)
    hits = torch.zeros(5, 5)
    r, c = torch.tensor(ints(4, 5, 12)), torch.tensor(ints(5, 5, 12))
    hits.index_put_((r, c), torch.tensor(1.0), accumulate=True)
    ranks = torch.zeros(8, dtype=torch.int64)
    order = torch.tensor([3, 0, 7, 5])
    ranks.index_put_((order,), torch.arange(4))
    ranks[ranks == 0] = -1
    opt = torch.optim.SGD([logits], lr=5.0)
    losses, softs = [], []
    for _ in range(3):
        probs = logits.softmax(1)
        soft = torch.zeros(n_cls, n_cls).index_put((target,), probs, accumulate=True)
        recall = soft.diag() / soft.sum(1).clamp(min=1e-6)
        loss = 1 - recall.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        softs.append(soft.detach())
    vals = torch.tensor(arr(6, 12), requires_grad=True)
    base = torch.tensor(arr(7, 5, 5), requires_grad=True)
    out = base.index_put((r, c), vals, accumulate=True)
    (out * torch.arange(25.0).view(5, 5)).sum().backward()
    return {"cm": cm, "cm_bincount": cm_bincount, "iou": iou, "hits": hits, "ranks": ranks,
            "losses": losses, "softs": softs, "logits": logits, "out": out,
            "vals_grad": vals.grad, "base_grad": base.grad}  # fmt: skip


@program
def bert_electra_token_masking(torch):
    """Masked-language-model data and loss as BERT/ELECTRA code writes them: padding masks from
    lengths, ``masked_fill`` for padding and ``[MASK]`` tokens, ``masked_select`` of the targets and
    of the logits at masked positions, ``masked_scatter`` putting generator samples' embeddings into
    the discriminator's input, ``-inf`` attention masking, in-place ``masked_fill_``; gradients to
    the embeddings, the generator outputs and the head."""
    nn, F = torch.nn, torch.nn.functional
    Bn, T, V, D = 3, 8, 23, 4
    tokens = torch.tensor(ints(4, 20, Bn, T) + 3)
    lengths = torch.tensor([8, 5, 6])
    pad = torch.arange(T)[None, :] >= lengths[:, None]
    tokens = tokens.masked_fill(pad, 0)
    choose = torch.tensor(np.random.default_rng(5).random((Bn, T)) < 0.3) & ~pad
    inputs = tokens.masked_fill(choose, 1)
    emb = set_weights(torch, nn.Embedding(V, D, padding_idx=0), seed=6)
    head = set_weights(torch, nn.Linear(D, V), seed=7)
    n_masked = int(choose.sum())
    gen = torch.tensor(arr(8, n_masked + 2, D), requires_grad=True)
    h = emb(inputs)
    h = h.masked_scatter(choose[..., None], gen)
    scores = torch.einsum("btd,bsd->bts", h, h) / D**0.5
    scores = scores.masked_fill(pad[:, None, :], float("-inf"))
    attn = scores.softmax(-1)
    ctx = attn @ h
    logits = head(ctx)
    targets = tokens.masked_select(choose)
    sel_logits = logits.masked_select(choose[..., None]).view(-1, V)
    mlm = F.cross_entropy(sel_logits, targets)
    keep = h.clone()
    keep.masked_fill_(pad[..., None], 0.0)
    pooled = keep.sum(1) / lengths[:, None]
    loss = mlm + pooled.pow(2).mean()
    loss.backward()
    return {"tokens": tokens, "inputs": inputs, "choose": choose, "targets": targets,
            "attn": attn, "sel_logits": sel_logits, "pooled": pooled, "loss": loss,
            "emb_grad": emb.weight.grad, "gen_grad": gen.grad, "head_grad": head.weight.grad,
            "n_masked": n_masked}  # fmt: skip


@program
def graph_message_passing_scatter_reduce(torch):
    """Message passing as PyG-style code writes it without the library: messages ``x[src] * w``
    aggregated at ``dst`` with ``scatter_add`` and ``scatter_reduce`` (sum, prod, mean, amax,
    amin, with ``include_self`` True and False), degrees from ``scatter_add`` of ones, a GAT-style
    edge softmax (per-node max by ``scatter_reduce('amax', include_self=False)``), one-hot rows by
    ``scatter`` with a scalar; gradients to node features and edge weights over a few steps."""
    N, Fd = 6, 3
    src = torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 4, 1, 3, 5, 0])
    dst = torch.tensor([1, 2, 3, 4, 5, 0, 2, 4, 0, 3, 5, 1, 3])
    x = torch.tensor(arr(1, N, Fd), requires_grad=True)
    w = torch.tensor(_uniform(2, len(src), low=0.5, high=1.5), requires_grad=True)
    a = torch.tensor(arr(3, 2 * Fd))
    index = dst[:, None].expand(-1, Fd)
    opt = torch.optim.SGD([x, w], lr=0.05)
    losses = []
    for step in range(3):
        msg = x[src] * w[:, None]
        agg_sum = torch.zeros(N, Fd).scatter_add(0, index, msg)
        agg_red = torch.zeros(N, Fd).scatter_reduce(0, index, msg, reduce="sum")
        agg_mean = torch.zeros(N, Fd).scatter_reduce(0, index, msg, "mean", include_self=False)
        mean_self = x.scatter_reduce(0, index, msg, "mean", include_self=True)
        agg_max = x.scatter_reduce(0, index, msg, "amax", include_self=True)
        agg_min = torch.zeros(N, Fd).scatter_reduce(0, index, msg, "amin", include_self=False)
        agg_prod = torch.ones(N, Fd).scatter_reduce(0, index, 1 + 0.1 * msg, "prod")
        prod_noself = x.scatter_reduce(0, index, 1 + 0.1 * msg, "prod", include_self=False)
        deg = torch.zeros(N).scatter_add(0, dst, torch.ones(len(dst)))
        e = torch.nn.functional.leaky_relu(torch.cat([x[src], x[dst]], 1) @ a, 0.2)
        e_max = torch.zeros(N).scatter_reduce(0, dst, e, "amax", include_self=False)
        ex = (e - e_max[dst]).exp()
        denom = torch.zeros(N).scatter_add(0, dst, ex)
        alpha = ex / denom[dst]
        gat = torch.zeros(N, Fd).index_add(0, dst, alpha[:, None] * x[src])
        loss = (
            (agg_sum - agg_red).abs().sum()
            + agg_mean.pow(2).sum()
            + mean_self.sum() * 0.1
            + agg_max.sum()
            - agg_min.sum()
            + agg_prod.sum()
            + prod_noself.mean()
            + gat.pow(2).sum()
        )
        opt.zero_grad()
        loss.backward()
        if step == 0:
            first = {"x_grad": x.grad.clone(), "w_grad": w.grad.clone()}
        opt.step()
        losses.append(loss.item())
    onehot = torch.zeros(len(dst), N).scatter(1, dst[:, None], 1.0)
    perm = torch.tensor([4, 0, 5, 2, 1, 3])
    inv = torch.empty_like(perm).scatter_(0, perm, torch.arange(N))
    return {"agg_sum": agg_sum, "agg_mean": agg_mean, "mean_self": mean_self, "agg_max": agg_max,
            "agg_min": agg_min, "agg_prod": agg_prod, "prod_noself": prod_noself, "deg": deg,
            "alpha": alpha, "gat": gat, "losses": losses, "first": first, "x": x, "w": w,
            "onehot": onehot, "inv": inv}  # fmt: skip


@program
def beam_search_topk_gather_bookkeeping(torch):
    """Batched beam search as seq2seq code writes it: scores of all ``beam * vocab`` continuations
    flattened, ``topk``, back-pointers by ``div(..., rounding_mode='floor')`` and ``%``, histories
    reordered with ``gather`` on an expanded index, the first step's ``[0, -inf, -inf]`` beam
    scores; sequence log-likelihoods with ``gather`` and ``take_along_dim``; gradient of the best
    hypothesis' score to the logits."""
    Bn, beams, V, steps = 2, 3, 7, 4
    logits = torch.tensor(arr(1, steps, Bn, beams, V), requires_grad=True)
    scores = torch.tensor([0.0, float("-inf"), float("-inf")]).repeat(Bn, 1)
    seqs = torch.zeros(Bn, beams, 0, dtype=torch.int64)
    history = []
    for t in range(steps):
        logp = logits[t].log_softmax(-1)
        cand = (scores[..., None] + logp).view(Bn, beams * V)
        top_s, top_i = cand.topk(beams, dim=1)
        beam_idx = torch.div(top_i, V, rounding_mode="floor")
        tok = top_i % V
        seqs = seqs.gather(1, beam_idx[..., None].expand(-1, -1, seqs.size(2)))
        seqs = torch.cat([seqs, tok[..., None]], dim=2)
        scores = top_s
        history.append(beam_idx)
    best = scores.argmax(1)
    best_seq = seqs[torch.arange(Bn), best]
    best_score = scores.gather(1, best[:, None]).squeeze(1)
    best_score.sum().backward()
    lp = torch.tensor(arr(2, Bn, 5, V)).log_softmax(-1)
    targets = torch.tensor(ints(3, V, Bn, 5))
    ll_gather = lp.gather(-1, targets[..., None]).squeeze(-1)
    ll_take = torch.take_along_dim(lp, targets[..., None], dim=-1).squeeze(-1)
    order = lp.argsort(-1, descending=True)
    top_two = torch.take_along_dim(lp, order[..., :2], dim=2)
    flat_take = torch.take_along_dim(lp[0], torch.tensor([[3], [0], [6], [1], [2]]))
    return {"seqs": seqs, "scores": scores, "history": history, "best_seq": best_seq,
            "best_score": best_score, "grad": logits.grad, "ll_gather": ll_gather,
            "ll_take": ll_take, "top_two": top_two, "flat_take": flat_take}  # fmt: skip


@program
def vq_codebook_index_add_copy_fill(torch):
    """A VQ-VAE quantiser: nearest codes by squared distances, quantised vectors by
    ``index_select`` and the straight-through estimator, EMA codebook statistics with
    ``index_add_(..., alpha=1 - decay)``, dead codes found with ``nonzero(as_tuple=True)`` and
    restarted by ``index_copy_``, their counts reset by ``index_fill_``; gradients through the
    out-of-place ``index_add`` (with ``alpha``), ``index_copy`` and ``index_fill``."""
    Nz, Kc, D = 12, 6, 4
    decay = 0.8
    z = torch.tensor(arr(1, Nz, D), requires_grad=True)
    cb_np = arr(2, Kc, D)
    cb_np[4:] += 10.0  # two codes far away: they die
    codebook = torch.tensor(cb_np, requires_grad=True)
    d = z.pow(2).sum(1, keepdim=True) - 2 * z @ codebook.t() + codebook.pow(2).sum(1)
    codes = d.argmin(1)
    zq = codebook.index_select(0, codes)
    st = z + (zq - z).detach()
    commit = (z - zq.detach()).pow(2).mean()
    cb_loss = (zq - z.detach()).pow(2).mean()
    with torch.no_grad():
        counts = torch.zeros(Kc).index_add_(0, codes, torch.ones(Nz))
        ema_count = torch.ones(Kc)
        ema_sum = codebook.detach().clone()
        ema_count.mul_(decay).index_add_(0, codes, torch.ones(Nz), alpha=1 - decay)
        ema_sum.mul_(decay).index_add_(0, codes, z.detach(), alpha=1 - decay)
        new_cb = ema_sum / ema_count[:, None]
        dead = (counts == 0).nonzero(as_tuple=True)[0]
        restart = torch.tensor([3, 7, 9, 1])[: len(dead)]
        new_cb.index_copy_(0, dead, z.detach()[restart])
        ema_count.index_fill_(0, dead, 1.0)
    base = torch.tensor(arr(3, Kc, D), requires_grad=True)
    added = base.index_add(0, codes, z, alpha=0.5)
    copied = base.index_copy(0, torch.tensor([5, 1]), z[:2])
    filled = base.index_fill(1, torch.tensor([0, 3]), -2.0)
    weights = torch.arange(Kc * D, dtype=torch.float32).view(Kc, D) / 10
    loss = (
        st.pow(2).sum()
        + commit * 0.25
        + cb_loss
        + (added * weights).sum()
        + (copied * weights).pow(2).sum() * 0.1
        + (filled * weights).sum()
    )
    loss.backward()
    return {"codes": codes, "zq": zq, "counts": counts, "ema_count": ema_count,
            "new_cb": new_cb, "dead": dead, "added": added, "copied": copied, "filled": filled,
            "loss": loss, "z_grad": z.grad, "cb_grad": codebook.grad,
            "base_grad": base.grad}  # fmt: skip


@program
def point_cloud_voxelization_with_unique(torch):
    """Voxelising a point cloud as detection code does: integer voxel coordinates by ``floor``,
    ``unique(dim=0, return_inverse=True, return_counts=True)`` to find occupied voxels, centroids
    by ``index_add_`` over the inverse divided by the counts (gradient to the points), occupancy
    grids read back with ``nonzero(as_tuple=True)`` and ``argwhere``; 1-d ``unique`` of labels,
    and run-length encoding of a binary mask with ``unique_consecutive`` (as COCO's RLE)."""
    pts = torch.tensor(_uniform(1, 40, 3, high=2.0), requires_grad=True)
    vox = (pts.detach() / 0.5).floor().long()
    uniq, inverse, counts = torch.unique(
        vox, dim=0, sorted=True, return_inverse=True, return_counts=True
    )
    centroid = torch.zeros(len(uniq), 3).index_add_(0, inverse, pts) / counts[:, None]
    spread = (pts - centroid[inverse]).pow(2).sum(1)
    per_voxel = torch.zeros(len(uniq)).scatter_reduce(
        0, inverse, spread, "amax", include_self=False
    )
    loss = centroid.pow(2).sum() + per_voxel.sum()
    loss.backward()
    grid = torch.zeros(4, 4, 4, dtype=torch.bool)
    grid[uniq[:, 0], uniq[:, 1], uniq[:, 2]] = True
    zi, yi, xi = grid.nonzero(as_tuple=True)
    where = torch.argwhere(grid[:2])
    labels = torch.tensor(ints(2, 6, 20))
    lab_u, lab_inv, lab_counts = labels.unique(sorted=True, return_inverse=True, return_counts=True)
    mask = torch.tensor(_uniform(3, 3, 8) > 0.5)
    runs, run_inv, run_len = torch.unique_consecutive(
        mask.flatten(), return_inverse=True, return_counts=True
    )
    rows = torch.tensor([[1, 2], [1, 2], [0, 0], [1, 2], [1, 2], [1, 2], [3, 1]])
    row_runs, row_len = torch.unique_consecutive(rows, return_counts=True, dim=0)
    cols_u = torch.unique(rows, dim=1, return_counts=True)
    return {"uniq": uniq, "inverse": inverse, "counts": counts, "centroid": centroid,
            "per_voxel": per_voxel, "loss": loss, "pts_grad": pts.grad, "zi": zi, "yi": yi,
            "xi": xi, "where": where, "lab_u": lab_u, "lab_inv": lab_inv,
            "lab_counts": lab_counts, "runs": runs, "run_inv": run_inv, "run_len": run_len,
            "first_value": bool(mask.flatten()[0]), "row_runs": row_runs, "row_len": row_len,
            "cols_u": cols_u}  # fmt: skip


@program
def learning_to_rank_stable_sorts_and_ties(torch):
    """Ranking code with ties: scores rounded to halves sorted with ``sort(descending=True,
    stable=True)``, ranks as the ``argsort`` of the order, NDCG@3 with ideal gains from a stable
    sort of the labels, ListMLE (scores gathered in label order, reversed ``logcumsumexp``) trained
    for a few steps, nearest neighbours by ``topk(largest=False)``, ``sort`` along dim 0 and
    ``msort``; gradients through ``sort`` values and ``topk`` values."""
    Q, L = 3, 6
    labels = torch.tensor(ints(1, 3, Q, L))
    raw = torch.tensor(np.round(arr(2, Q, L) * 2) / 2, requires_grad=True)
    s_sorted, order = raw.sort(dim=1, descending=True, stable=True)
    ranks = order.argsort(dim=1, stable=True)
    asc_order = torch.argsort(raw.detach(), dim=1, stable=True)
    label_order = labels.argsort(dim=1, descending=True, stable=True)
    gains = 2.0 ** labels.float() - 1
    disc = 1.0 / torch.log2(torch.arange(L, dtype=torch.float32) + 2)
    dcg = (gains.gather(1, order)[:, :3] * disc[:3]).sum(1)
    idcg = (gains.gather(1, label_order)[:, :3] * disc[:3]).sum(1)
    ndcg = dcg / idcg.clamp(min=1e-6)
    (s_sorted[:, :2].sum() + (s_sorted * disc).sum()).backward()
    sort_grad = raw.grad.clone()
    scores = torch.tensor(arr(3, Q, L), requires_grad=True)
    opt = torch.optim.SGD([scores], lr=0.5)
    losses = []
    for _ in range(3):
        by_label = scores.gather(1, label_order)
        tail = by_label.flip(1).logcumsumexp(1).flip(1)
        loss = (tail - by_label).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    db = torch.tensor(arr(4, 10, 2), requires_grad=True)
    qs = torch.tensor(arr(5, 3, 2))
    dist = torch.cdist(qs, db)
    knn_d, knn_i = dist.topk(3, dim=1, largest=False)
    knn_d.sum().backward()
    col_sorted, col_idx = raw.detach().sort(dim=0, stable=True)
    return {"s_sorted": s_sorted, "order": order, "ranks": ranks, "asc_order": asc_order,
            "label_order": label_order, "ndcg": ndcg, "sort_grad": sort_grad,
            "losses": losses, "scores": scores, "knn_d": knn_d, "knn_i": knn_i,
            "db_grad": db.grad, "col_sorted": col_sorted, "col_idx": col_idx,
            "msort": torch.msort(raw.detach())}  # fmt: skip


@program
def nerf_hierarchical_sampling_searchsorted(torch):
    """NeRF's ``sample_pdf``: coarse weights to a piecewise-constant pdf, its cdf with a leading
    zero, ``searchsorted(cdf, u, right=True)`` for the bins of fixed uniforms, below/above indices
    clamped, cdf and bin edges gathered from expanded copies, samples interpolated (gradient to the
    weights); ``searchsorted`` with a ``sorter`` on unsorted edges and with ``side``/``out_int32``,
    ``bucketize`` of values lying exactly on boundaries (``right`` both ways), ``histc`` with
    out-of-range values, ``bincount`` with ``weights`` and ``minlength``."""
    R, S, Ns = 3, 5, 6
    bins = torch.linspace(2.0, 6.0, S + 1).expand(R, S + 1)
    w_param = torch.tensor(arr(1, R, S), requires_grad=True)
    weights = torch.nn.functional.softplus(w_param) + 1e-5
    pdf = weights / weights.sum(-1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    u = torch.tensor(_uniform(2, R, Ns))
    u = torch.sort(u, dim=-1).values.contiguous()
    inds = torch.searchsorted(cdf, u, right=True)
    below = torch.max(torch.zeros_like(inds - 1), inds - 1)
    above = torch.min(S * torch.ones_like(inds), inds)
    inds_g = torch.stack([below, above], -1)
    shape = [R, Ns, S + 1]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(shape), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(shape), 2, inds_g)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    samples = bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])
    samples.pow(2).mean().backward()
    edges = torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0])
    sorter = edges.argsort()
    vals = torch.tensor([-2.0, -1.0, 0.25, 0.5, 1.0, 1.5, 3.0])
    ss_sorter = torch.searchsorted(edges, vals, sorter=sorter)
    ss_right = torch.searchsorted(edges, vals, side="right", sorter=sorter)
    ss_int32 = torch.searchsorted(edges[sorter], vals, out_int32=True)
    ss_scalar = torch.searchsorted(edges[sorter], 0.5)
    bnd = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0])
    bk_left = torch.bucketize(vals, bnd)
    bk_right = torch.bucketize(vals, bnd, right=True)
    x = torch.tensor(arr(3, 50, scale=1.5))
    hist = torch.histc(x, bins=6, min=-2.0, max=2.0)
    hist_auto = torch.histc(x, bins=4)
    codes = torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0]))
    bc = torch.bincount(codes)
    bc_w = torch.bincount(codes, weights=x, minlength=6)
    bc_w64 = torch.bincount(codes, weights=x.double())
    return {"cdf": cdf, "inds": inds, "samples": samples, "w_grad": w_param.grad,
            "ss_sorter": ss_sorter, "ss_right": ss_right, "ss_int32": ss_int32,
            "ss_scalar": ss_scalar, "bk_left": bk_left, "bk_right": bk_right, "hist": hist,
            "hist_auto": hist_auto, "bc": bc, "bc_w": bc_w, "bc_w64": bc_w64}  # fmt: skip


@program
def pairwise_terms_triu_combinations_meshgrid(torch):
    """Pairwise terms as physics and vision code write them: all pairs by
    ``triu_indices(n, n, offset=1)`` (checked against ``pdist``), a repulsion energy minimised for
    a few steps, ``tril_indices``/``triu_indices`` with negative and positive offsets on
    rectangular shapes, ``combinations`` (with and without replacement) of a tensor that requires
    grad, ``cartesian_prod``, ``meshgrid`` with ``'ij'`` and ``'xy'``, and Swin's relative position
    index gathering a learned bias table (gradient accumulates over repeated indices)."""
    n = 6
    p = torch.tensor(arr(1, n, 2), requires_grad=True)
    i, j = torch.triu_indices(n, n, offset=1)
    pd = (p[i] - p[j]).norm(dim=-1)
    pd_ref = torch.pdist(p.detach())
    opt = torch.optim.SGD([p], lr=0.05)
    energies = []
    for _ in range(3):
        i, j = torch.triu_indices(n, n, 1)
        energy = (1.0 / (p[i] - p[j]).norm(dim=-1)).sum() + 0.5 * p.pow(2).sum()
        opt.zero_grad()
        energy.backward()
        opt.step()
        energies.append(energy.item())
    tril_neg = torch.tril_indices(4, 5, offset=-1)
    tril_pos = torch.tril_indices(3, 6, offset=2)
    triu_neg = torch.triu_indices(5, 3, offset=-2)
    triu_pos = torch.triu_indices(3, 5, offset=2)
    v = torch.tensor(arr(2, 4), requires_grad=True)
    pairs = torch.combinations(v, r=2)
    triples = torch.combinations(v, r=3, with_replacement=True)
    (pairs[:, 0] * pairs[:, 1]).sum().backward()
    v_grad = v.grad.clone()
    triples.prod(1).sum().backward()
    idx_pairs = torch.combinations(torch.arange(5), 2)
    cart = torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5]), torch.tensor([7]))
    yy, xx = torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij")
    gx, gy = torch.meshgrid(torch.linspace(-1, 1, 4), torch.linspace(-1, 1, 3), indexing="xy")
    Wh, Ww, heads = 2, 3, 2
    coords = torch.stack(torch.meshgrid(torch.arange(Wh), torch.arange(Ww), indexing="ij"))
    flat = torch.flatten(coords, 1)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += Wh - 1
    rel[:, :, 1] += Ww - 1
    rel[:, :, 0] *= 2 * Ww - 1
    rel_index = rel.sum(-1)
    table = torch.tensor(arr(3, (2 * Wh - 1) * (2 * Ww - 1), heads), requires_grad=True)
    bias = table[rel_index.view(-1)].view(Wh * Ww, Wh * Ww, heads).permute(2, 0, 1)
    (bias * torch.arange(Wh * Ww * Wh * Ww, dtype=torch.float32).view(Wh * Ww, -1)).sum().backward()
    return {"pd": pd, "pd_ref": pd_ref, "energies": energies, "p": p, "tril_neg": tril_neg,
            "tril_pos": tril_pos, "triu_neg": triu_neg, "triu_pos": triu_pos, "pairs": pairs,
            "triples": triples, "v_grad": v_grad, "v_grad2": v.grad, "idx_pairs": idx_pairs,
            "cart": cart, "yy": yy, "xx": xx, "gx": gx, "gy": gy, "rel_index": rel_index,
            "bias": bias, "table_grad": table.grad}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)  # im2col matmul vs conv2d: different float32 summation order
def im2col_unfold_fold_round_trips(torch):
    """Convolution as ``F.unfold`` + matmul (checked against ``conv2d``) with padding, stride and
    dilation; ``F.fold`` of ``F.unfold`` as an exact round trip for non-overlapping patches and,
    for overlapping ones, divided by the fold of ones; ViT patchify with ``Tensor.unfold`` twice and
    a permute; STFT-style framing of a 1-d signal with ``Tensor.unfold`` and overlap-add back with
    ``F.fold``; gradients to the input and the weights."""
    F = torch.nn.functional
    x = torch.tensor(arr(1, 2, 3, 6, 6), requires_grad=True)
    w = torch.tensor(arr(2, 4, 3, 3, 3, scale=0.3), requires_grad=True)
    cols = F.unfold(x, kernel_size=3, padding=1)
    out = (w.view(4, -1) @ cols).view(2, 4, 6, 6)
    ref = F.conv2d(x, w, padding=1)
    cols_s = F.unfold(x, kernel_size=(2, 3), dilation=(2, 1), stride=2, padding=(1, 0))
    blocks = F.unfold(x, 2, stride=2)
    back = F.fold(blocks, (6, 6), 2, stride=2)
    over = F.unfold(x, 3, padding=1)
    norm = F.fold(F.unfold(torch.ones(1, 1, 6, 6), 3, padding=1), (6, 6), 3, padding=1)
    recon = F.fold(over * 0.5, (6, 6), 3, padding=1) / norm
    patches = x.unfold(2, 2, 2).unfold(3, 2, 2)
    tokens = patches.permute(0, 2, 3, 1, 4, 5).reshape(2, 9, 12)
    sig = torch.tensor(arr(3, 2, 16), requires_grad=True)
    win = torch.hann_window(8, periodic=True)
    frames = sig.unfold(-1, 8, 4) * win
    ola = F.fold(frames.transpose(1, 2), (1, 16), (1, 8), stride=(1, 4)).view(2, 16)
    wsum = F.fold((win**2).expand(1, 3, 8).transpose(1, 2), (1, 16), (1, 8), stride=(1, 4))
    loss = (
        out.pow(2).mean()
        + cols_s.sum() * 0.1
        + (back * recon).sum() * 0.01
        + tokens.std()
        + (frames.pow(2).sum() + ola.sum())
    )
    loss.backward()
    return {"out": out, "ref": ref, "cols_s": cols_s, "back_err": (back - x).abs().max(),
            "recon": recon, "norm": norm, "tokens": tokens, "frames": frames, "ola": ola,
            "wsum": wsum, "loss": loss, "x_grad": x.grad, "w_grad": w.grad,
            "sig_grad": sig.grad}  # fmt: skip


@program
def swin_shifted_windows_einsum_flip_roll_rot90(torch):
    """Swin's shifted-window attention: ``roll`` by minus half a window, window partition by
    ``view``/``permute``, attention with ``einsum('bhid,bhjd->bhij')``, windows merged and rolled
    back; ``einsum`` with repeated subscripts (``'ii->i'``, ``'ii'``, ``'bii->b'``), ellipses
    (``'...ij,...jk->...ik'``, ``'b...c,c->b...'``) and a bilinear form; flip test-time augmentation
    and the rot90 group (``k`` = 1, 2, -1 and reversed dims); gradients."""
    Bn, H, W, C, ws, heads = 1, 4, 4, 4, 2, 2
    x = torch.tensor(arr(1, Bn, H, W, C), requires_grad=True)
    qkv = torch.tensor(arr(2, C, 3 * C, scale=0.5), requires_grad=True)
    shifted = torch.roll(x, shifts=(-ws // 2, -ws // 2), dims=(1, 2))
    win = shifted.view(Bn, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
    win = win.reshape(-1, ws * ws, C)
    q, k, v = (win @ qkv).view(win.shape[0], ws * ws, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
    attn = torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)
    o = torch.einsum("bhij,bhjd->bhid", attn, v).transpose(1, 2).reshape(-1, ws * ws, C)
    o = o.view(Bn, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(Bn, H, W, C)
    merged = torch.roll(o, shifts=(ws // 2, ws // 2), dims=(1, 2))
    M = torch.tensor(arr(3, 3, 4, 4), requires_grad=True)
    diag = torch.einsum("ii->i", M[0])
    trace = torch.einsum("ii", M[1])
    btrace = torch.einsum("bii->b", M)
    chain = torch.einsum("...ij,...jk->...ik", M, M.transpose(-1, -2))
    gram = torch.einsum(M, [0, 1, 2], M, [0, 3, 2], [0, 1, 3])  # the sublist form
    bdiag = torch.einsum(M, [..., 1, 1], [..., 1])
    proj = torch.einsum("b...c,c->b...", x, torch.arange(C, dtype=torch.float32))
    bil_w = torch.tensor(arr(4, 2, 4, 4, scale=0.5))
    bil = torch.einsum("bi,oij,bj->bo", M[:, 0], bil_w, M[:, 1])
    img = torch.tensor(arr(5, 1, 2, 3, 5), requires_grad=True)
    conv = torch.tensor(arr(6, 2, 2, 3, 3, scale=0.3))
    f = torch.nn.functional.conv2d
    tta = 0.5 * (f(img, conv, padding=1) + f(img.flip(-1), conv, padding=1).flip(-1))
    r1 = torch.rot90(img, 1, dims=(2, 3))
    r2 = img.rot90(2, (2, 3))
    rm1 = torch.rot90(img, -1, dims=(2, 3))
    r_rev = torch.rot90(img, 1, dims=(3, 2))
    flips = img.flip(1, 3)
    rolled_flat = torch.roll(img, 4)
    loss = (
        merged.pow(2).sum()
        + diag.sum()
        + trace
        + btrace.sum()
        + chain.pow(2).mean()
        + (gram - chain).abs().sum()
        + (bdiag * torch.arange(4.0)).sum()
        + proj.sum()
        + bil.sum()
        + tta.pow(2).mean()
        + (r1 * torch.arange(15.0).view(5, 3)).sum()
        + (r2 - rm1.rot90(-1, (2, 3))).pow(2).sum()
        + (r_rev * rolled_flat.rot90(1, (3, 2))).sum()
        + flips[:, 0].sum()
    )
    loss.backward()
    return {"shifted": shifted, "attn": attn, "merged": merged, "diag": diag, "trace": trace,
            "btrace": btrace, "chain": chain, "gram": gram, "bdiag": bdiag, "proj": proj, "bil": bil, "tta": tta, "r1": r1,
            "r2": r2, "rm1": rm1, "r_rev": r_rev, "flips": flips, "rolled_flat": rolled_flat,
            "loss": loss, "x_grad": x.grad, "qkv_grad": qkv.grad, "M_grad": M.grad,
            "img_grad": img.grad}  # fmt: skip


@program
def ragged_batches_repeat_interleave_split_chunk_narrow(torch):
    """Packed variable-length batches as graph and speech code handle them: segment ids by
    ``repeat_interleave(lengths)`` (zero lengths included), offsets by ``cumsum``, segment means
    with ``index_add``, per-sequence tensors by ``split(lengths.tolist())`` padded back with
    ``pad_sequence``, uneven ``chunk`` (10 into 4 gives 3, 3, 3, 1; 6 into 4 gives three chunks),
    ``split`` by a size, ``tensor_split`` by a count and by indices, ``narrow`` with a negative
    start, ``repeat_interleave`` of a tensor along a dim with a tensor of repeats and
    ``output_size``; gradients through all of them."""
    lengths = torch.tensor([3, 0, 4, 2, 1])
    seg = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    seg2 = torch.repeat_interleave(lengths)
    offsets = torch.cumsum(lengths, 0) - lengths
    packed = torch.tensor(arr(1, 10, 3), requires_grad=True)
    sums = torch.zeros(len(lengths), 3).index_add(0, seg, packed)
    means = sums / lengths.clamp(min=1)[:, None]
    seqs = packed.split(lengths.tolist())
    padded = torch.nn.utils.rnn.pad_sequence([s for s in seqs if len(s)], batch_first=True)
    chunks = packed.chunk(4)
    small = torch.arange(6.0).chunk(4)
    by_size = packed.split(4)
    ts_count = torch.tensor_split(packed, 3)
    ts_idx = torch.tensor_split(packed, [2, 5], dim=0)
    ts_cols = packed.tensor_split(torch.tensor([1]), dim=1)
    last = packed.narrow(0, -3, 2)
    mid = packed.narrow(1, 1, 2)
    firsts = packed[offsets[lengths > 0]]
    rep = torch.tensor(arr(2, 2, 3), requires_grad=True)
    rep_dim1 = rep.repeat_interleave(torch.tensor([2, 0, 1]), dim=1)
    rep_rows = torch.repeat_interleave(rep, torch.tensor([1, 3]), dim=0, output_size=4)
    rep_scalar = rep.repeat_interleave(2)
    loss = (
        means.pow(2).sum()
        + padded.sum(1).pow(2).mean()
        + sum(c.mean() for c in chunks)
        + sum((i + 1) * s.sum() for i, s in enumerate(by_size))
        + sum(t.std() for t in ts_count)
        + ts_idx[1].sum() * 2
        + ts_cols[1].pow(2).sum()
        + last.sum()
        + mid.abs().sum()
        + firsts.sum()
        + (rep_dim1 * torch.arange(3.0)).sum()
        + rep_rows.pow(2).sum()
        + rep_scalar.cumsum(0).sum()
    )
    loss.backward()
    return {"seg": seg, "seg2": seg2, "offsets": offsets, "means": means, "padded": padded,
            "chunk_sizes": [c.shape[0] for c in chunks], "small": list(small),
            "split_sizes": [b.shape[0] for b in by_size],
            "ts_sizes": [t.shape[0] for t in ts_count], "ts_idx": list(ts_idx),
            "ts_cols": list(ts_cols), "last": last, "mid": mid, "firsts": firsts,
            "rep_dim1": rep_dim1, "rep_rows": rep_rows, "rep_scalar": rep_scalar, "loss": loss,
            "packed_grad": packed.grad, "rep_grad": rep.grad}  # fmt: skip


@program
def mixture_of_experts_top2_routing(torch):
    """Top-2 mixture-of-experts routing as MoE layers implement it: gate ``topk`` with
    renormalised weights, (token, expert) assignments flattened and grouped by a stable ``argsort``
    on the expert id, per-expert counts by ``bincount(minlength=E)``, capacity by position within
    the expert (``cumsum`` of a one-hot), overflowing assignments dropped with a mask, tokens
    dispatched by ``index_select``, expert outputs ``split`` by counts, combined back with
    ``index_add_`` weighted by the gate; load-balancing loss; a few SGD steps."""
    T, D, E, cap = 10, 4, 4, 4
    x = torch.tensor(arr(1, T, D))
    gate = torch.tensor(arr(2, D, E, scale=0.5), requires_grad=True)
    experts = torch.tensor(arr(3, E, D, D, scale=0.5), requires_grad=True)
    opt = torch.optim.SGD([gate, experts], lr=0.1)
    losses, all_counts, all_kept = [], [], []
    for _ in range(3):
        probs = (x @ gate).softmax(-1)
        top_w, top_e = probs.topk(2, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        flat_e = top_e.flatten()
        flat_w = top_w.flatten()
        flat_tok = torch.arange(T).repeat_interleave(2)
        order = flat_e.argsort(stable=True)
        counts = torch.bincount(flat_e, minlength=E)
        onehot = torch.nn.functional.one_hot(flat_e, E)
        pos = (onehot.cumsum(0) - 1).gather(1, flat_e[:, None]).squeeze(1)
        keep = pos < cap
        sorted_e = flat_e[order]
        kept_sorted = keep[order]
        tok_sorted = flat_tok[order][kept_sorted]
        w_sorted = flat_w[order][kept_sorted]
        e_sorted = sorted_e[kept_sorted]
        kept_counts = torch.bincount(e_sorted, minlength=E)
        inp = x.index_select(0, tok_sorted)
        pieces = inp.split(kept_counts.tolist())
        outs = torch.cat([p @ experts[e] for e, p in enumerate(pieces)])
        y = torch.zeros(T, D).index_add_(0, tok_sorted, outs * w_sorted[:, None])
        frac = counts.float() / counts.sum()
        balance = E * (frac * probs.mean(0)).sum()
        loss = (y - x.flip(0)).pow(2).mean() + 0.1 * balance
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        all_counts.append(counts)
        all_kept.append(kept_counts)
    return {"losses": losses, "counts": all_counts, "kept": all_kept, "order": order,
            "pos": pos, "y": y, "gate": gate, "experts": experts}  # fmt: skip
