"""Numerical edge cases of losses and reductions as training code meets them: attention masks that
leave whole rows at ``-inf``, cross entropy with label smoothing, ignored tokens, class weights and
soft targets, NLL's weighted mean over the tokens that count, BCE with ``pos_weight`` at extreme
logits, distillation's ``kl_div``, Huber and smooth L1 with small ``beta``, normalising zero
embeddings, statistics of one-element and empty batches, transmittance ``cumprod`` through opaque
samples, square roots, logs and powers at 0 and the ``where`` trick that keeps their nan gradients
out, PPO's clipped objective at its bounds, medians and modes of even-length inputs, nan-aware
metrics, and special functions near their poles in likelihoods."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, ints, set_weights


def _error(fn) -> str:
    """The name of the exception ``fn()`` raises (``"ok"`` if none)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is the result
        return type(e).__name__
    return "ok"


@program
def masked_attention_with_fully_padded_sequences(torch):
    """Encoder attention over a padded batch: scores masked with ``masked_fill(~mask,
    float("-inf"))`` where one sequence is all padding, so its rows are all ``-inf`` (``softmax``
    gives nan, zeroed with ``nan_to_num``; the safe variant fills those rows with 0 first);
    ``logsumexp``/``log_softmax`` over rows with ``-inf`` entries, attention entropy with
    ``special.entr`` and ``xlogy`` (0 log 0 = 0), and gradients to the queries and keys."""
    F = torch.nn.functional
    B, T, D = 3, 4, 8
    lengths = torch.tensor([4, 2, 0])
    q = torch.tensor(arr(1, B, T, D), requires_grad=True)
    k = torch.tensor(arr(2, B, T, D), requires_grad=True)
    v = torch.tensor(arr(3, B, T, D))
    key_mask = torch.arange(T)[None, :] < lengths[:, None]
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))
    attn_raw = scores.softmax(dim=-1)
    attn = torch.nan_to_num(attn_raw, nan=0.0)
    out = attn @ v
    all_masked = ~key_mask.any(dim=-1)
    safe = scores.masked_fill(all_masked[:, None, None], 0.0)
    attn_safe = safe.softmax(-1).masked_fill(~key_mask[:, None, :], 0.0)
    logp = F.log_softmax(scores, dim=-1)
    loss = out.pow(2).sum() + (attn_safe @ v).pow(2).mean()
    loss.backward()
    return {
        "attn_raw": attn_raw, "attn": attn, "attn_safe": attn_safe, "out": out,
        "lse": torch.logsumexp(scores, dim=-1), "logp": logp,
        "row_is_nan": torch.isnan(attn_raw).all(-1),
        "entropy_entr": torch.special.entr(attn).sum(-1),
        "entropy_xlogy": -torch.xlogy(attn_safe, attn_safe).sum(-1),
        "loss": loss, "q_grad": q.grad, "k_grad": k.grad,
    }  # fmt: skip


@program
def token_classifier_cross_entropy_smoothing_ignore_weights(torch):
    """A token classifier trained with ``nn.CrossEntropyLoss(weight=w, ignore_index=-100,
    label_smoothing=0.1)`` (pad tokens carry -100, so the weighted mean divides by the weights of
    the tokens that count, smoothing term included); then every ``reduction`` of each option on
    fixed logits, a custom ``ignore_index``, and a batch of nothing but padding (mean is nan)."""
    nn, F = torch.nn, torch.nn.functional
    C = 5
    x = torch.tensor(arr(1, 12, 6))
    y = torch.tensor(ints(2, C, 12))
    y[[2, 7, 11]] = -100
    w = torch.tensor([1.0, 2.0, 0.5, 1.5, 3.0])
    model = set_weights(torch, nn.Linear(6, C), seed=3)
    crit = nn.CrossEntropyLoss(weight=w, ignore_index=-100, label_smoothing=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    logits = torch.tensor(arr(4, 12, C, scale=3.0), requires_grad=True)
    variants = {}
    for red in ("none", "sum", "mean"):
        variants[red] = {
            "plain": F.cross_entropy(logits, y, reduction=red),
            "weight": F.cross_entropy(logits, y, weight=w, reduction=red),
            "smooth": F.cross_entropy(logits, y, label_smoothing=0.2, reduction=red),
            "all": F.cross_entropy(logits, y, weight=w, label_smoothing=0.2, reduction=red),
        }
    total = sum(v.sum() for red in variants.values() for v in red.values())
    total.backward()
    y_pad0 = torch.where(y == -100, torch.zeros_like(y), y)
    all_pad = torch.full((4,), -100)
    return {
        "losses": losses, "weight": model.weight, "bias": model.bias, "variants": variants,
        "logits_grad": logits.grad,
        "ignore_zero": F.cross_entropy(logits, y_pad0, ignore_index=0, label_smoothing=0.1),
        "all_padding_mean": F.cross_entropy(logits[:4], all_pad),
        "all_padding_sum": F.cross_entropy(logits[:4], all_pad, reduction="sum"),
        "all_padding_smooth": F.cross_entropy(logits[:4], all_pad, weight=w, label_smoothing=0.1),
    }  # fmt: skip


@program
def mixup_soft_target_cross_entropy(torch):
    """Mixup as image-classification recipes write it: targets ``lam * one_hot(y) + (1 - lam) *
    one_hot(y[perm])`` fed to ``F.cross_entropy`` as probabilities (with and without label
    smoothing and class weights, every reduction), a soft-target CE on a ``(N, C, L)`` sequence
    output, the classic ``-(t * log_softmax).sum(1).mean()`` for comparison, and a few SGD steps."""
    nn, F = torch.nn, torch.nn.functional
    C = 4
    x = torch.tensor(arr(1, 8, 5))
    y = torch.tensor(ints(2, C, 8))
    perm = torch.tensor([3, 0, 6, 1, 7, 2, 5, 4])
    lam = 0.7
    target = lam * F.one_hot(y, C).float() + (1 - lam) * F.one_hot(y[perm], C).float()
    model = set_weights(torch, nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, C)), seed=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, target, label_smoothing=0.1)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    logits = torch.tensor(arr(4, 8, C, scale=2.0), requires_grad=True)
    w = torch.tensor([0.5, 1.0, 2.0, 1.0])
    res = {}
    for red in ("none", "sum", "mean"):
        res[red] = [
            F.cross_entropy(logits, target, reduction=red),
            F.cross_entropy(logits, target, weight=w, reduction=red),
            F.cross_entropy(logits, target, weight=w, label_smoothing=0.3, reduction=red),
        ]
    sum(r.sum() for rs in res.values() for r in rs).backward()
    manual = -(target * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
    seq = torch.tensor(arr(5, 2, C, 3))
    seq_t = torch.softmax(torch.tensor(arr(6, 2, C, 3)), dim=1)
    return {
        "losses": losses, "params": [p.detach() for p in model.parameters()], "ce": res,
        "logits_grad": logits.grad, "manual": manual,
        "seq": F.cross_entropy(seq, seq_t), "seq_none": F.cross_entropy(seq, seq_t, reduction="none"),
        "seq_weighted_smooth": F.cross_entropy(seq, seq_t, weight=w, label_smoothing=0.2),
    }  # fmt: skip


@program
def seq2seq_and_segmentation_nll_ignore_index(torch):
    """Token-level NLL as translation code writes it (``log_softmax`` then ``nn.NLLLoss(
    ignore_index=pad_idx)``; the mean counts only real tokens, and with class weights divides by
    their summed weights), checked against ``sum / n_tokens``; segmentation's ``(N, C, H, W)``
    NLL with ``ignore_index=255`` and class weights; an all-ignored batch."""
    nn, F = torch.nn, torch.nn.functional
    pad, V = 0, 6
    logits = torch.tensor(arr(1, 2, 5, V, scale=2.0), requires_grad=True)
    tgt = torch.tensor([[3, 1, 4, 0, 0], [2, 5, 5, 1, 0]])
    lp = F.log_softmax(logits, dim=-1)
    crit = nn.NLLLoss(ignore_index=pad)
    loss = crit(lp.view(-1, V), tgt.view(-1))
    summed = F.nll_loss(lp.view(-1, V), tgt.view(-1), ignore_index=pad, reduction="sum")
    n_tokens = tgt.ne(pad).sum()
    w = torch.tensor([1.0, 0.5, 2.0, 1.0, 3.0, 1.5])
    weighted = F.nll_loss(lp.view(-1, V), tgt.view(-1), weight=w, ignore_index=pad)
    per_tok = F.nll_loss(lp.transpose(1, 2), tgt, weight=w, ignore_index=pad, reduction="none")
    (loss + weighted).backward()
    seg = torch.tensor(arr(2, 2, 3, 4, 4), requires_grad=True)
    mask = torch.tensor(ints(3, 3, 2, 4, 4))
    mask[0, :2] = 255
    mask[1, :, 0] = 255
    cw = torch.tensor([0.2, 1.0, 2.5])
    seg_loss = F.nll_loss(F.log_softmax(seg, 1), mask, weight=cw, ignore_index=255)
    seg_loss.backward()
    return {
        "loss": loss, "summed": summed, "n_tokens": n_tokens, "per_token_mean": summed / n_tokens,
        "weighted": weighted, "per_tok": per_tok,
        "weighted_manual": per_tok.sum() / w[tgt][tgt != pad].sum(),
        "logits_grad": logits.grad, "seg_loss": seg_loss, "seg_grad": seg.grad,
        "seg_none": F.nll_loss(F.log_softmax(seg, 1), mask, ignore_index=255, reduction="none"),
        "all_ignored": F.nll_loss(lp[0, 3:], tgt[0, 3:], ignore_index=pad),
        "all_ignored_weighted": F.nll_loss(lp[0, 3:], tgt[0, 3:], weight=w, ignore_index=pad),
    }  # fmt: skip


@program
def multilabel_bce_with_logits_pos_weight_extreme_logits(torch):
    """Multi-label classification with ``nn.BCEWithLogitsLoss(pos_weight=neg/pos)`` per class
    from label counts, a per-sample weight, logits as large as ±1e4 (stable: no inf, exact
    gradients), every reduction, and the naive ``BCELoss(sigmoid(z))`` that saturates (its log
    clamped at -100) next to it; a few Adam steps on a linear head."""
    nn, F = torch.nn, torch.nn.functional
    z = torch.tensor(
        [[1e4, -1e4, 0.0, 30.0], [-88.0, 88.0, 17.0, -17.0], [100.0, -100.0, 1e-3, -40.0]],
        requires_grad=True,
    )
    t = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.5, 1.0]])
    pos = t.sum(0)
    pos_weight = (t.shape[0] - pos) / pos.clamp(min=1.0)
    sample_w = torch.tensor([[1.0], [0.5], [2.0]])
    out = {}
    for red in ("none", "sum", "mean"):
        out[red] = F.binary_cross_entropy_with_logits(
            z, t, weight=sample_w, pos_weight=pos_weight, reduction=red
        )
    crit = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    loss = crit(z, t)
    (loss + out["sum"] * 0.1).backward()
    zn = z.detach().clone().requires_grad_(True)
    naive = nn.BCELoss(reduction="none")(torch.sigmoid(zn), t)
    naive.sum().backward()
    x = torch.tensor(arr(1, 16, 4))
    labels = torch.tensor((arr(2, 16, 3) > 0.8).astype(np.float32))
    head = set_weights(torch, nn.Linear(4, 3), seed=3, scale=2.0)
    pw = (labels.shape[0] - labels.sum(0)) / labels.sum(0).clamp(min=1)
    opt = torch.optim.Adam(head.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        step_loss = F.binary_cross_entropy_with_logits(head(x) * 20, labels, pos_weight=pw)
        step_loss.backward()
        opt.step()
        losses.append(step_loss.detach())
    return {"pos_weight": pos_weight, "bce": out, "loss": loss, "z_grad": z.grad,
            "naive": naive, "naive_grad": zn.grad, "losses": losses, "pw": pw,
            "head": [head.weight, head.bias]}  # fmt: skip


@program
def distillation_kl_div_temperature_and_log_target(torch):
    """Knowledge distillation: ``F.kl_div(log_softmax(s / T), softmax(t / T),
    reduction="batchmean") * T * T`` with a teacher whose probabilities are exactly 0 for masked
    classes (0 log 0 counts as 0), the ``log_target=True`` form with ``-inf`` log-probabilities,
    ``mean`` vs ``batchmean`` vs ``sum`` vs ``none``, and gradients to the student."""
    F = torch.nn.functional
    T = 4.0
    s = torch.tensor(arr(1, 3, 5, scale=2.0), requires_grad=True)
    t_logits = torch.tensor(arr(2, 3, 5, scale=2.0))
    t_logits[0, 1] = float("-inf")
    t_logits[2, 3:] = float("-inf")
    p_t = F.softmax(t_logits / T, dim=-1)
    log_p_t = F.log_softmax(t_logits / T, dim=-1)
    log_p_s = F.log_softmax(s / T, dim=-1)
    kd = F.kl_div(log_p_s, p_t, reduction="batchmean") * T * T
    kd_log = F.kl_div(log_p_s, log_p_t, reduction="batchmean", log_target=True) * T * T
    ce = F.cross_entropy(s, torch.tensor([0, 2, 1]))
    loss = 0.7 * kd + 0.3 * ce
    loss.backward(retain_graph=True)
    s_grad = s.grad.clone()
    s.grad = None
    kd_log.backward()
    reds = {r: F.kl_div(log_p_s.detach(), p_t, reduction=r) for r in ("none", "sum", "mean")}
    reds_log = {
        r: F.kl_div(log_p_s.detach(), log_p_t, reduction=r, log_target=True)
        for r in ("none", "sum", "mean", "batchmean")
    }
    return {"p_t": p_t, "log_p_t": log_p_t, "kd": kd, "kd_log": kd_log, "loss": loss,
            "s_grad": s_grad, "s_grad_log_target": s.grad, "reds": reds,
            "reds_log": reds_log}  # fmt: skip


@program
def box_regression_smooth_l1_and_huber_small_beta(torch):
    """Detection box regression: ``F.smooth_l1_loss(pred, target, beta=1/9)`` as Faster R-CNN
    uses it, residuals exactly at ``beta`` and at 0, ``beta=0`` (plain L1), ``F.huber_loss`` with
    small and default ``delta`` (``huber = beta * smooth_l1``), every reduction, gradients, and a
    few SGD steps of a box head."""
    nn, F = torch.nn, torch.nn.functional
    beta = 1.0 / 9
    target = torch.tensor([[0.0, 0.5, -0.25, 1.0], [0.2, 0.2, 0.2, 0.2]])
    d = torch.tensor([[beta, -beta, 0.0, 2.0], [1e-4, -0.05, 0.5, -3.0]])
    pred = (target + d).requires_grad_(True)
    out = {}
    for red in ("none", "sum", "mean"):
        out[red] = {
            "sl1": F.smooth_l1_loss(pred, target, beta=beta, reduction=red),
            "sl1_beta0": F.smooth_l1_loss(pred, target, beta=0.0, reduction=red),
            "huber_small": F.huber_loss(pred, target, delta=0.05, reduction=red),
            "huber": F.huber_loss(pred, target, reduction=red),
        }
    sum(v.sum() for r in out.values() for v in r.values()).backward()
    l1 = nn.SmoothL1Loss(beta=0.0)(pred, target)
    x = torch.tensor(arr(1, 10, 6))
    gt_boxes = torch.tensor(arr(2, 10, 4, scale=0.3))
    head = set_weights(torch, nn.Linear(6, 4), seed=3)
    opt = torch.optim.SGD(head.parameters(), lr=0.2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.smooth_l1_loss(head(x), gt_boxes, beta=beta, reduction="sum") / x.shape[0]
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return {"losses_by_reduction": out, "pred_grad": pred.grad, "l1": l1, "losses": losses,
            "head": [head.weight, head.bias]}  # fmt: skip


@program
def contrastive_embeddings_normalize_and_cosine_with_zero_vectors(torch):
    """Embeddings where some rows are exactly zero (padding, dead features): ``F.normalize`` (the
    ``eps`` keeps them 0 and their gradient finite), ``F.cosine_similarity`` with zero vectors
    (pairs and the broadcast pairwise matrix), an InfoNCE loss on normalised embeddings with a
    temperature, ``nn.CosineEmbeddingLoss`` with a margin, and the gradients to the inputs."""
    nn, F = torch.nn, torch.nn.functional
    a0 = arr(1, 4, 6)
    a0[1] = 0.0
    b0 = arr(2, 4, 6)
    b0[1] = 0.0
    b0[3] = 0.0
    a = torch.tensor(a0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    za, zb = F.normalize(a, dim=1), F.normalize(b, dim=-1, eps=1e-6)
    logits = za @ zb.t() / 0.1
    labels = torch.arange(4)
    nce = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    cos = F.cosine_similarity(a, b, dim=1)
    pairwise = F.cosine_similarity(a[:, None, :], b[None, :, :], dim=-1)
    emb_loss = nn.CosineEmbeddingLoss(margin=0.2)(a, b, torch.tensor([1, -1, 1, -1]))
    (nce + cos.sum() + pairwise.sum() + emb_loss).backward()
    z = torch.zeros(2, 3, requires_grad=True)
    F.normalize(z, p=1, dim=1).sum().backward()
    return {"za": za, "zb": zb, "nce": nce, "cos": cos, "pairwise": pairwise,
            "emb_loss": emb_loss, "a_grad": a.grad, "b_grad": b.grad, "zero_l1_grad": z.grad,
            "cos_zero_zero": F.cosine_similarity(torch.zeros(3), torch.zeros(3), dim=0),
            "cos_eps": F.cosine_similarity(a.detach(), b.detach(), dim=1, eps=1.0)}  # fmt: skip


@program
def tiny_and_empty_batch_statistics(torch):
    """Statistics of batches that shrink to one or zero elements, as logging and masking code hits
    them: ``var``/``std`` with ``correction=0`` and ``1`` (and ``unbiased``) on one element,
    ``var_mean``/``std_mean``; a masked loss ``loss[mask].mean()`` with nothing selected (nan)
    next to ``sum`` (0) and ``prod`` (1); ``mean``/``sum``/``amax``/``logsumexp`` over an empty
    dimension; which reductions of an empty tensor raise; BatchNorm with one sample."""
    nn = torch.nn
    one = torch.tensor([[3.0]])
    row = torch.tensor([[1.0, 2.0, 4.0]])
    empty = torch.zeros(0, 3)
    losses = torch.tensor([0.3, 1.2, 0.7])
    mask = losses > 5.0
    return {
        "var_c0": one.var(correction=0), "var_c1": one.var(correction=1),
        "std_c0": one.std(dim=0, correction=0), "std_c1": one.std(dim=0),
        "var_unbiased_false": one.var(unbiased=False),
        "row_var_dim0": row.var(dim=0), "row_std_dim1": row.std(dim=1, correction=0),
        "var_mean": torch.var_mean(row, dim=0), "std_mean": torch.std_mean(row, dim=1),
        "masked_mean": losses[mask].mean(), "masked_sum": losses[mask].sum(),
        "masked_prod": losses[mask].prod(), "masked_count": mask.sum(),
        "empty_mean0": empty.mean(0), "empty_sum0": empty.sum(0), "empty_prod0": empty.prod(0),
        "empty_mean1": empty.mean(1), "empty_amax1": empty.amax(1), "empty_sum_all": empty.sum(),
        "empty_lse0": torch.logsumexp(empty, dim=0), "empty_std0": empty.std(0),
        "empty_max1": empty.max(dim=1).values, "empty_norm0": empty.norm(dim=0),
        "raises_amax0": _error(lambda: empty.amax(0)), "raises_max": _error(lambda: empty.max()),
        "raises_argmax": _error(lambda: empty.argmax()),
        "raises_max_dim0": _error(lambda: empty.max(dim=0)),
        "raises_min_all": _error(lambda: torch.tensor([]).min()),
        "raises_bn_one": _error(lambda: nn.BatchNorm1d(3)(torch.ones(1, 3))),
        "bn_eval_one": nn.BatchNorm1d(3).eval()(row),
    }  # fmt: skip


@program
def volume_rendering_transmittance_cumprod_with_opaque_samples(torch):
    """NeRF-style alpha compositing: ``alpha = 1 - exp(-sigma * delta)`` with samples that are
    fully opaque (``alpha == 1``) or empty, the exclusive ``cumprod`` of ``1 - alpha`` (with and
    without the ``+ 1e-10``), weights, rendered colour and depth, and gradients through the
    ``cumprod``'s zeros; then a discrete-time survival curve ``cumprod(1 - hazard)`` with a
    hazard of exactly 1, and ``prod`` of a row with one and two zeros."""
    sigma0 = np.abs(arr(1, 2, 6)) * 2.0
    sigma0[0, 2] = np.inf
    sigma0[1, :] = 0.0
    sigma0[1, 4] = 3.0
    sigma = torch.tensor(sigma0.astype(np.float32))
    delta = torch.full((2, 6), 0.5)
    density = torch.tensor(arr(2, 2, 6), requires_grad=True)
    rgb = torch.tensor(np.abs(arr(3, 2, 6, 3)), requires_grad=True)
    alpha = 1.0 - torch.exp(-(sigma + torch.nn.functional.softplus(density)) * delta)
    alpha = torch.where(torch.isinf(sigma), torch.ones_like(alpha), alpha)
    ones = torch.ones_like(alpha[..., :1])
    trans = torch.cumprod(torch.cat([ones, 1.0 - alpha + 1e-10], -1), -1)[..., :-1]
    trans_exact = torch.cumprod(torch.cat([ones, 1.0 - alpha], -1), -1)[..., :-1]
    weights = alpha * trans_exact
    color = (weights[..., None] * rgb).sum(-2)
    z_vals = torch.linspace(2.0, 6.0, 6)
    depth = (weights * z_vals).sum(-1)
    (color.sum() + depth.sum() + trans.sum()).backward()
    h = torch.tensor([[0.1, 0.2, 1.0, 0.3], [0.0, 0.5, 0.5, 0.25]], requires_grad=True)
    survival = torch.cumprod(1 - h, dim=1)
    (survival * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    p = torch.tensor([[2.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0]], requires_grad=True)
    p.prod(dim=1).sum().backward()
    return {"alpha": alpha, "trans": trans, "trans_exact": trans_exact, "weights": weights,
            "color": color, "depth": depth, "density_grad": density.grad, "rgb_grad": rgb.grad,
            "survival": survival, "hazard_grad": h.grad, "prod_grad": p.grad}  # fmt: skip


@program
def sqrt_log_pow_at_zero_and_the_double_where_trick(torch):
    """Distances and logs at exactly 0 as geometry and loss code meets them: ``sqrt`` of a squared
    distance of 0 (inf gradient, nan after ``* 0``), ``x.pow(0.5)``, ``pow`` with exponents 0, 1,
    2, 1.5 and a tensor exponent at a base of 0, ``log(0)`` and ``log`` of clamped values;
    ``torch.where`` whose masked branch is nan/inf (its gradient still leaks nan) and the double
    ``where`` that keeps it out; ``norm`` (subgradient 0) vs a hand-written ``sqrt`` norm."""
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]], requires_grad=True)
    sq = (x**2).sum(-1)
    d_naive = torch.sqrt(sq)
    d_norm = x.norm(dim=-1)
    d_clamped = torch.sqrt(sq.clamp_min(1e-12))
    d_eps = torch.sqrt(sq + 1e-8)
    d_naive.sum().backward(retain_graph=True)
    g_naive = x.grad.clone()
    x.grad = None
    (d_norm.sum() + d_clamped.sum() + d_eps.sum()).backward()
    g_safe = x.grad.clone()
    v = torch.tensor([0.0, 0.0, 0.0, 0.0, 2.0], requires_grad=True)
    e = torch.tensor([0.0, 1.0, 2.0, 1.5, 0.5], requires_grad=True)
    powers = [v.pow(0.5), v**0.0, v**1.0, v**2, v**1.5, torch.pow(v, e), torch.sqrt(v), v.log()]
    grads = []
    for pw in powers:
        gv, ge = torch.autograd.grad(pw.sum(), [v, e], allow_unused=True)
        grads.append([gv, ge if ge is not None else torch.zeros(5)])
    r = torch.tensor([-1.0, 0.0, 0.5, 4.0], requires_grad=True)
    leaky = torch.where(r > 0, torch.log(r), torch.zeros_like(r))
    leaky_sqrt = torch.where(r > 0, torch.sqrt(r), r)
    safe_r = torch.where(r > 0, r, torch.ones_like(r))
    safe = torch.where(r > 0, torch.log(safe_r), torch.zeros_like(r))
    (g_leaky,) = torch.autograd.grad(leaky.sum(), r)
    (g_leaky_sqrt,) = torch.autograd.grad(leaky_sqrt.sum(), r)
    (g_safe_where,) = torch.autograd.grad(safe.sum(), r)
    p = torch.tensor([0.0, 1e-30, 0.5, 1.0], requires_grad=True)
    ent = -(p * torch.log(p.clamp(min=1e-12))).sum()
    ent_naive = -(p * torch.log(p)).sum()
    (g_ent,) = torch.autograd.grad(ent, p)
    (g_ent_naive,) = torch.autograd.grad(ent_naive, p)
    return {"d_naive": d_naive, "d_norm": d_norm, "d_clamped": d_clamped, "d_eps": d_eps,
            "g_naive": g_naive, "g_safe": g_safe, "powers": powers, "pow_grads": grads,
            "leaky": leaky, "g_leaky": g_leaky, "g_leaky_sqrt": g_leaky_sqrt,
            "g_safe_where": g_safe_where, "ent": ent, "ent_naive": ent_naive, "g_ent": g_ent,
            "g_ent_naive": g_ent_naive, "zero_pow_zero": torch.tensor(0.0) ** 0,
            "log_zero": torch.log(torch.tensor([0.0, -0.0, -1.0]))}  # fmt: skip


@program
def ppo_clipped_objective_at_the_clip_bounds(torch):
    """PPO's loss as RL libraries write it: ``ratio = exp(logp - old_logp)``, ``surr1 = ratio *
    adv``, ``surr2 = clamp(ratio, 1 - eps, 1 + eps) * adv``, ``-torch.min(surr1, surr2).mean()``,
    with ratios exactly 1 (the first epoch, where ``surr1 == surr2`` ties) and exactly at the clip
    bounds; the clipped value loss with ``torch.max``; the clip fraction; a few Adam epochs of a
    small policy on the same batch, so later epochs move ratios past the bounds."""
    nn, F = torch.nn, torch.nn.functional
    eps = 0.25
    obs = torch.tensor(arr(1, 8, 4))
    actions = torch.tensor(ints(2, 3, 8))
    adv = torch.tensor(arr(3, 8))
    adv[2] = 0.0
    returns = torch.tensor(arr(4, 8))
    policy = set_weights(torch, nn.Linear(4, 3), seed=5)
    value = set_weights(torch, nn.Linear(4, 1), seed=6)
    with torch.no_grad():
        old_logp = F.log_softmax(policy(obs), -1).gather(1, actions[:, None]).squeeze(1)
        old_v = value(obs).squeeze(1)
    opt = torch.optim.Adam([*policy.parameters(), *value.parameters()], lr=0.2)
    stats = []
    for _ in range(4):
        logp = F.log_softmax(policy(obs), -1).gather(1, actions[:, None]).squeeze(1)
        ratio = torch.exp(logp - old_logp)
        surr1 = ratio * adv
        surr2 = torch.clamp(ratio, 1.0 - eps, 1.0 + eps) * adv
        pg_loss = -torch.min(surr1, surr2).mean()
        v = value(obs).squeeze(1)
        v_clip = old_v + (v - old_v).clamp(-0.2, 0.2)
        v_loss = 0.5 * torch.max((v - returns) ** 2, (v_clip - returns) ** 2).mean()
        loss = pg_loss + 0.5 * v_loss
        opt.zero_grad()
        loss.backward()
        stats.append({"pg": pg_loss.detach(), "v": v_loss.detach(), "ratio": ratio.detach(),
                      "clipfrac": ((ratio - 1.0).abs() > eps).float().mean(),
                      "w_grad": policy.weight.grad.clone()})  # fmt: skip
        opt.step()
    r = torch.tensor([0.75, 1.25, 1.0, 0.5, 1.5, 1.25], requires_grad=True)
    a = torch.tensor([1.0, -1.0, 2.0, 1.0, -1.0, 1.0])
    obj = torch.min(r * a, torch.clamp(r, 0.75, 1.25) * a)
    (g_r,) = torch.autograd.grad(obj.sum(), r)
    m = torch.tensor([1.0, 2.0, 2.0, -1.0], requires_grad=True)
    n = torch.tensor([1.0, 3.0, 2.0, -1.0], requires_grad=True)
    g_m, g_n = torch.autograd.grad((torch.maximum(m, n) + torch.fmin(m, n)).sum(), [m, n])
    return {"stats": stats, "policy": [policy.weight, policy.bias], "obj": obj, "g_r": g_r,
            "g_m": g_m, "g_n": g_n}  # fmt: skip


@program
def robust_aggregates_median_mode_even_length(torch):
    """Robust statistics as ensembling and federated-averaging code uses them: ``median`` of an
    even number of values (the lower middle, unlike ``quantile(0.5)`` which interpolates), its
    index and gradient (to the chosen element only), ``nanmedian`` with nans, ``mode`` with ties
    (the smallest value), ``kthvalue``; a coordinate-wise median of client updates."""
    x = torch.tensor([[4.0, 1.0, 3.0, 2.0], [5.0, 5.0, 1.0, 1.0], [0.5, -2.0, 7.0, 0.5]],
                     requires_grad=True)  # fmt: skip
    med, idx = x.median(dim=1)
    med_all = x.median()
    q = torch.quantile(x, 0.5, dim=1)
    (med.sum() + 2 * med_all + q.sum()).backward()
    y = torch.tensor([[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, 1.0, 4.0]])
    ints_ = torch.tensor([[2, 3, 3, 2, 1, 1], [4, 4, 4, 0, 0, 0]])
    updates = torch.tensor(arr(1, 6, 5))
    updates[5] = 100.0
    kv, ki = torch.kthvalue(torch.tensor([[3.0, 1.0, 2.0, 1.0]]), 2, dim=1)
    return {
        "med": med, "idx": idx, "med_all": med_all, "quantile": q, "grad": x.grad,
        "nanmedian": y.nanmedian(dim=1), "median_with_nan": y.median(dim=1).values,
        "nanmedian_all": y.nanmedian(), "nanquantile": torch.nanquantile(y, 0.5, dim=1),
        "mode": torch.mode(ints_, dim=1), "mode_float": torch.tensor([[2.0, 1.0, 2.0, 1.0]]).mode(),
        "fed_median": updates.median(dim=0).values, "fed_mean": updates.mean(0),
        "kthvalue": kv, "kth_index": ki,
        "median_even_1d": torch.tensor([10.0, 30.0, 20.0, 40.0]).median(),
    }  # fmt: skip


@program
def nan_aware_metrics_nansum_nanmean_nan_to_num(torch):
    """Evaluation code that aggregates metrics with missing entries: per-class IoU that is nan
    for classes absent from both prediction and target, ``nanmean`` over classes (all-nan rows
    give nan), ``nansum``, ``nan_to_num`` with its defaults (inf to the dtype's max) and explicit
    replacements, the gradients of ``nansum``/``nan_to_num`` (0 at nan), a loss masked with
    ``isnan`` before the mean, and the gradient of a worst-case ``losses.max()`` when some losses
    are nan (shared by the nans)."""
    pred = torch.tensor([[0, 0, 1, 1, 3, 3], [1, 1, 1, 1, 1, 1]])
    target = torch.tensor([[0, 1, 1, 1, 3, 0], [1, 1, 0, 0, 1, 1]])
    iou = []
    for c in range(4):
        p, t = pred == c, target == c
        inter = (p & t).sum(1).float()
        union = (p | t).sum(1).float()
        iou.append(inter / union)
    iou = torch.stack(iou, 1)
    x = torch.tensor([1.0, np.nan, np.inf, -np.inf, -2.0], requires_grad=True)
    (g_nansum,) = torch.autograd.grad(x.nansum(), x)
    (g_ntn,) = torch.autograd.grad(torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0).sum(), x)
    (g_nanmean,) = torch.autograd.grad(torch.nanmean(x[:2] * 3), x)
    y = torch.tensor(arr(1, 6), requires_grad=True)
    tgt = torch.tensor([0.5, np.nan, -1.0, np.nan, 2.0, 0.0])
    valid = ~torch.isnan(tgt)
    loss = ((y - tgt)[valid] ** 2).mean()
    loss.backward()
    allnan = torch.full((2, 3), float("nan"))
    batch_losses = torch.tensor([0.3, np.nan, 2.0, np.nan, 2.0], requires_grad=True)
    (g_worst,) = torch.autograd.grad(batch_losses.max(), batch_losses)
    (g_best,) = torch.autograd.grad(batch_losses.nan_to_num(nan=9.0).min(), batch_losses)
    return {
        "iou": iou, "miou": iou.nanmean(dim=1), "miou_all": iou.nanmean(),
        "nansum": iou.nansum(dim=0), "nanmean_all_nan": allnan.nanmean(dim=1),
        "nansum_all_nan": allnan.nansum(), "ntn_default": torch.nan_to_num(x.detach()),
        "ntn_half": torch.nan_to_num(x.detach().half()), "ntn_f64": torch.nan_to_num(x.double()),
        "ntn_explicit": torch.nan_to_num(x.detach(), nan=-9.0, posinf=1e3),
        "g_nansum": g_nansum, "g_ntn": g_ntn, "g_nanmean": g_nanmean, "loss": loss,
        "y_grad": y.grad, "masked_mse_nan_target": torch.nn.functional.mse_loss(y, tgt),
        "ntn_int": torch.nan_to_num(torch.tensor([1, 2])),
        "g_worst": g_worst, "g_best": g_best,
    }  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def special_functions_near_poles_in_likelihoods(torch):
    """Special functions where likelihood code drives them to their poles: ``lgamma``/``digamma``/
    ``polygamma`` at 0, negative integers and tiny positive values (Gamma/Beta/Dirichlet
    log-densities and their gradients), ``special.logit`` with and without ``eps`` at 0 and 1 and
    its gradient, ``erfinv``/``ndtri`` at ±1 and 0/1, ``log_ndtr`` deep in the tail,
    ``xlogy``/``xlog1py``/``entr`` at 0, ``sinc`` at 0, ``zeta`` at 1, and a Beta
    log-likelihood fitted by gradient descent with concentrations clamped above 0."""
    sp = torch.special
    f64 = torch.float64
    a = torch.tensor([0.0, -1.0, -2.0, 1e-6, 0.5, 1.0, 2.5], dtype=f64, requires_grad=True)
    lg = torch.lgamma(a)
    (g_lg,) = torch.autograd.grad(lg[3:].sum(), a)
    dg = torch.digamma(a)
    p = torch.tensor([0.0, 1e-7, 0.5, 1.0 - 1e-7, 1.0], requires_grad=True)
    lo = sp.logit(p, eps=1e-6)
    (g_lo,) = torch.autograd.grad(lo.sum(), p)
    e = torch.tensor([-1.0, -0.999, 0.0, 0.999, 1.0])
    z = torch.tensor([-40.0, -10.0, -5.5, 0.0, 5.0], requires_grad=True)
    lnd = sp.log_ndtr(z)
    (g_lnd,) = torch.autograd.grad(lnd.sum(), z)
    zeros = torch.tensor([0.0, 0.0, 1.0, 2.0])
    ys = torch.tensor([0.0, 3.0, 0.0, -1.0])
    alpha_raw = torch.tensor([0.1], requires_grad=True)
    beta_raw = torch.tensor([0.1], requires_grad=True)
    data = torch.tensor([0.05, 0.2, 0.5, 0.9, 0.999])
    opt = torch.optim.SGD([alpha_raw, beta_raw], lr=0.05)
    nlls = []
    for _ in range(5):
        al = torch.nn.functional.softplus(alpha_raw).clamp(min=1e-3)
        be = torch.nn.functional.softplus(beta_raw).clamp(min=1e-3)
        log_b = torch.lgamma(al) + torch.lgamma(be) - torch.lgamma(al + be)
        ll = (al - 1) * torch.log(data) + (be - 1) * torch.log1p(-data) - log_b
        nll = -ll.mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        nlls.append(nll.detach())
    return {
        "lgamma": lg, "g_lgamma": g_lg, "digamma": dg,
        "trigamma": torch.polygamma(1, a.detach()[3:]), "psi_neg_half": sp.psi(torch.tensor(-0.5)),
        "gammaln_zero": sp.gammaln(torch.tensor([0.0, -3.0])),
        "logit": lo, "g_logit": g_lo, "logit_no_eps": sp.logit(p.detach()),
        "erfinv": torch.erfinv(e), "ndtri": sp.ndtri(torch.tensor([0.0, 1e-10, 0.5, 1.0])),
        "log_ndtr": lnd, "g_log_ndtr": g_lnd,
        "xlogy": torch.xlogy(zeros, ys), "xlog1py": sp.xlog1py(zeros, ys - 1),
        "entr": sp.entr(torch.tensor([0.0, -1.0, 0.5, 1.0])),
        "sinc": torch.sinc(torch.tensor([0.0, 1e-8, 0.5, 1.0])),
        "zeta": sp.zeta(torch.tensor([1.0, 2.0, 0.5]), torch.tensor([1.0, 1.0, 1.0])),
        "nlls": nlls, "alpha_raw": alpha_raw, "beta_raw": beta_raw,
    }  # fmt: skip
