"""Document AI and OCR as the reference code of CRNN, ASTER, PARSeq, DBNet and LayoutLM writes it:
a CRNN (conv stack + bidirectional LSTM) trained with ``F.ctc_loss`` and decoded greedily
(``argmax``, ``unique_consecutive``, blank removal), CTC's reductions on padded targets, an
attention decoder with teacher forcing and label smoothing, beam search with ``topk`` and
``gather``, PARSeq's permutation language modelling masks, LayoutLM's 2-D position embeddings from
clamped and bucketized bounding boxes, DBNet's differentiable binarization loss (balanced BCE with
hard negative mining by ``topk``, dice, masked L1), text-line preprocessing (aspect-preserving
resize, padding, affine rectification), word-level token classification, and edit-distance metrics
computed in Python over ``tolist()``. Inputs come from NumPy with fixed seeds."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights

ALPHABET = "-0123456789abcdefghij"  # index 0 is CTC's blank


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _levenshtein(a, b) -> int:
    """Edit distance with one DP row, as OCR metric scripts write it."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]


def _greedy_ctc(torch, log_probs, lengths):
    """[T, N, C] log-probabilities -> list of label lists (merge repeats, drop blanks)."""
    best = log_probs.argmax(2).transpose(0, 1)  # [N, T]
    out = []
    for seq, n in zip(best, lengths.tolist()):
        merged = torch.unique_consecutive(seq[:n])
        out.append(merged[merged != 0].tolist())
    return out


@program(rtol=1e-3, atol=1e-4)  # LSTM + CTC over Adam steps: float32 summation order drifts
def ocr_crnn_ctc_training_greedy_decode(torch):
    """CRNN: conv/BN/pool stack (bias-free convolutions before BN) collapsing the height, ``squeeze(2).permute(2, 0, 1)`` into
    ``[T, N, C]``, a bidirectional LSTM and a linear classifier; three Adam steps of
    ``F.ctc_loss`` on concatenated 1-D targets with ``input_lengths``/``target_lengths``, then
    greedy decoding to strings and the BN running statistics."""
    nn, F = torch.nn, torch.nn.functional

    class CRNN(nn.Module):
        def __init__(self, num_classes, hidden=8):
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6),
                nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
                nn.Conv2d(6, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                nn.ReLU(inplace=True),
                nn.MaxPool2d((2, 1), (2, 1)),
                nn.Conv2d(8, 8, (2, 1)), nn.ReLU(inplace=True),
            )  # fmt: skip
            self.rnn = nn.LSTM(8, hidden, bidirectional=True)
            self.embedding = nn.Linear(2 * hidden, num_classes)

        def forward(self, x):
            conv = self.cnn(x)
            b, c, h, w = conv.size()
            assert h == 1, "the height of conv must be 1"
            conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
            recurrent, _ = self.rnn(conv)
            T, b, hd = recurrent.size()
            out = self.embedding(recurrent.view(T * b, hd)).view(T, b, -1)
            return F.log_softmax(out, dim=2)

    model = set_weights(torch, CRNN(len(ALPHABET)), seed=11)
    images = torch.tensor(_uniform(12, 3, 1, 8, 24))
    texts = ["31a", "b07c", "9"]
    targets = torch.tensor([ALPHABET.index(ch) for t in texts for ch in t], dtype=torch.long)
    target_lengths = torch.tensor([len(t) for t in texts], dtype=torch.long)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    model.train()
    for _ in range(3):
        log_probs = model(images)
        input_lengths = torch.full((log_probs.size(1),), log_probs.size(0), dtype=torch.long)
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                          zero_infinity=True)  # fmt: skip
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.detach())
    model.eval()
    with torch.no_grad():
        log_probs = model(images)
    lengths = torch.full((3,), log_probs.size(0), dtype=torch.long)
    decoded = _greedy_ctc(torch, log_probs, lengths)
    preds = ["".join(ALPHABET[i] for i in d) for d in decoded]
    return {"losses": losses, "log_probs": log_probs, "preds": " | ".join(preds),
            "raw_argmax": log_probs.argmax(2).t(), "bn_mean": model.cnn[1].running_mean,
            "bn_var": model.cnn[5].running_var, "grads": grads(model)}  # fmt: skip


@program
def ocr_ctc_loss_reductions_padded_targets(torch):
    """CTC as recognisers batch it: padded 2-D targets, per-sample ``reduction='none'``, ``'sum'``
    and ``'mean'`` (divided by target lengths), ``zero_infinity`` for a sample whose label is too
    long for its frames, gradients with respect to the logits, and ``nn.CTCLoss`` on a blank that
    is the last class."""
    F = torch.nn.functional
    T, N, C = 9, 4, 6
    logits = torch.tensor(arr(21, T, N, C), requires_grad=True)
    targets = torch.tensor(1 + ints(22, C - 1, N, 5))
    targets[1, 1] = targets[1, 0]  # a repeated label needs a blank between
    input_lengths = torch.tensor([9, 7, 9, 3])
    target_lengths = torch.tensor([4, 3, 5, 4])  # the last one cannot fit into 3 frames
    log_probs = logits.log_softmax(2)
    per_sample = F.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                            reduction="none", zero_infinity=True)  # fmt: skip
    summed = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction="sum",
                        zero_infinity=True)  # fmt: skip
    mean = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, zero_infinity=True)
    manual_mean = (per_sample / target_lengths.clamp(min=1)).mean()
    mean.backward()
    blank_last = torch.nn.CTCLoss(blank=C - 1, reduction="mean", zero_infinity=True)
    t2 = targets.clone() - 1
    loss2 = blank_last(log_probs.detach(), t2, input_lengths, target_lengths)
    inf_loss = F.ctc_loss(log_probs.detach(), targets, input_lengths, target_lengths,
                          reduction="none")  # fmt: skip
    return {"per_sample": per_sample, "sum": summed, "mean": mean, "manual_mean": manual_mean,
            "grad": logits.grad, "blank_last": loss2,
            "is_inf": torch.isinf(inf_loss)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # GRU cell + attention over SGD steps: float32 summation order
def ocr_attention_decoder_teacher_forcing_label_smoothing(torch):
    """ASTER/SAR-style attention decoder: Bahdanau attention over encoder features, a
    ``GRUCell`` fed the previous character embedding (teacher forcing with ``<go>``), logits
    stacked over steps, ``CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)``, SGD with
    momentum, then greedy inference that stops at ``<eos>``."""
    nn, F = torch.nn, torch.nn.functional
    V, PAD, GO, EOS = 8, 0, 1, 2
    N, L, D, H, S = 3, 6, 5, 7, 5

    class AttnDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, 4, padding_idx=PAD)
            self.w_h = nn.Linear(H, H, bias=False)
            self.w_f = nn.Linear(D, H)
            self.v = nn.Linear(H, 1, bias=False)
            self.cell = nn.GRUCell(4 + D, H)
            self.out = nn.Linear(H, V)

        def step(self, feats, prev_tok, h):
            e = self.v(torch.tanh(self.w_f(feats) + self.w_h(h).unsqueeze(1))).squeeze(-1)
            alpha = F.softmax(e, dim=1)
            glimpse = torch.bmm(alpha.unsqueeze(1), feats).squeeze(1)
            h = self.cell(torch.cat([self.embed(prev_tok), glimpse], dim=1), h)
            return self.out(h), h, alpha

        def forward(self, feats, targets):
            h = feats.new_zeros(feats.size(0), H)
            prev = torch.full((feats.size(0),), GO, dtype=torch.long)
            outs = []
            for t in range(targets.size(1)):
                logit, h, _ = self.step(feats, prev, h)
                outs.append(logit)
                prev = targets[:, t]  # teacher forcing
            return torch.stack(outs, dim=1)

    model = set_weights(torch, AttnDecoder(), seed=31)
    feats = torch.tensor(arr(32, N, L, D))
    tgt = torch.tensor([[3, 4, 5, EOS, PAD], [6, 7, EOS, PAD, PAD], [3, 3, 7, 4, EOS]])
    crit = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for _ in range(4):
        logits = model(feats, tgt)
        loss = crit(logits.reshape(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        h = feats.new_zeros(N, H)
        prev = torch.full((N,), GO, dtype=torch.long)
        done = torch.zeros(N, dtype=torch.bool)
        seqs, alphas = [], []
        for _ in range(S):
            logit, h, alpha = model.step(feats, prev, h)
            prev = logit.argmax(-1)
            prev = prev.masked_fill(done, PAD)
            seqs.append(prev)
            alphas.append(alpha)
            done |= prev == EOS
        seqs = torch.stack(seqs, 1)
    acc = (seqs[:, : tgt.size(1)] == tgt[:, : seqs.size(1)]) | (tgt[:, : seqs.size(1)] == PAD)
    return {"losses": losses, "params": params(model), "decoded": seqs,
            "attention": torch.stack(alphas, 1), "seq_acc": acc.all(1).float().mean(),
            "steps": len(alphas)}  # fmt: skip


@program
def ocr_beam_search_topk_gather(torch):
    """Beam search over a small LSTM decoder as attention OCR heads implement it: scores of
    ``[N*K, V]`` flattened to ``[N, K*V]``, ``topk``, beam origin by ``div(..., rounding_mode=
    'floor')`` and token by ``%``, hidden states and histories reordered with ``gather`` /
    ``index_select``, finished beams frozen with ``masked_fill`` and a length penalty."""
    nn = torch.nn
    V, EOS, GO, H, K, N, steps = 7, 5, 0, 6, 3, 2, 5
    emb = set_weights(torch, nn.Embedding(V, 4), seed=41)
    cell = set_weights(torch, nn.LSTMCell(4 + H, H), seed=42)
    proj = set_weights(torch, nn.Linear(H, V), seed=43, scale=1.5)
    ctx = torch.tensor(arr(44, N, H))
    with torch.no_grad():
        ctx_k = ctx.unsqueeze(1).expand(N, K, H).reshape(N * K, H)
        h = torch.zeros(N * K, H)
        c = torch.zeros(N * K, H)
        tokens = torch.full((N * K,), GO, dtype=torch.long)
        scores = torch.zeros(N, K)
        scores[:, 1:] = float("-inf")  # only the first beam is alive at the start
        history = torch.zeros(N, K, 0, dtype=torch.long)
        finished = torch.zeros(N, K, dtype=torch.bool)
        lengths = torch.zeros(N, K)
        for _ in range(steps):
            h, c = cell(torch.cat([emb(tokens), ctx_k], 1), (h, c))
            logp = proj(h).log_softmax(-1).view(N, K, V)
            logp = logp.masked_fill(finished.unsqueeze(-1), float("-inf"))
            eos_keep = torch.full_like(logp[..., 0], float("-inf"))
            eos_keep[finished] = 0.0
            logp[..., EOS] = torch.maximum(logp[..., EOS], eos_keep)
            cand = (scores.unsqueeze(-1) + logp).view(N, K * V)
            top_scores, top_idx = cand.topk(K, dim=1)
            beam = torch.div(top_idx, V, rounding_mode="floor")
            tok = top_idx % V
            history = torch.cat(
                [history.gather(1, beam.unsqueeze(-1).expand(-1, -1, history.size(2))),
                 tok.unsqueeze(-1)], dim=2)  # fmt: skip
            prev_finished = finished.gather(1, beam)
            lengths = lengths.gather(1, beam) + (~prev_finished).float()
            finished = prev_finished | (tok == EOS)
            flat = (beam + torch.arange(N).unsqueeze(1) * K).view(-1)
            h, c = h.index_select(0, flat), c.index_select(0, flat)
            tokens = tok.view(-1)
            scores = top_scores
        normed = scores / lengths.pow(0.6)
        best = normed.argmax(1)
        best_seq = history[torch.arange(N), best]
    return {"scores": scores, "normed": normed, "history": history, "best": best,
            "best_seq": best_seq, "finished": finished, "lengths": lengths}  # fmt: skip


@program
def ocr_parseq_permutation_masks_and_decoding(torch):
    """PARSeq's permutation language modelling: permutations built from fixed index
    permutations plus their flips (the canonical left-to-right order first), ``generate_attn_masks``
    turning each into content/query masks with ``torch.triu`` and index scattering, float masks
    of ``-inf``, and a one-layer decoder (``MultiheadAttention`` with ``attn_mask``) averaged over
    the permutations as in training, with gradients."""
    nn, F = torch.nn, torch.nn.functional
    T, D, V, N = 4, 8, 6, 2  # T = max label length + 1 (eos)
    perms = [torch.arange(T)]
    rng = np.random.default_rng(51)
    perms.append(torch.tensor(rng.permutation(T - 1).astype(np.int64)))
    perms[1] = torch.cat([perms[1], torch.tensor([T - 1])])  # eos stays last as in PARSeq
    perms = torch.stack(perms)
    perms = torch.stack([perms[0], perms[0].flip(0), perms[1], perms[1].flip(0)])
    perms = torch.cat([torch.zeros(len(perms), 1, dtype=torch.long), perms + 1], dim=1)  # bos

    def generate_attn_masks(perm):
        sz = perm.shape[0]
        mask = torch.zeros((sz, sz))
        for i in range(sz):
            query_idx = perm[i]
            masked_keys = perm[i + 1 :]
            mask[query_idx, masked_keys] = float("-inf")
        content_mask = mask[:-1, :-1].clone()
        mask[torch.eye(sz, dtype=torch.bool)] = float("-inf")
        query_mask = mask[1:, :-1]
        return content_mask, query_mask

    canonical = torch.triu(torch.full((T, T), float("-inf")), 1)
    embed = set_weights(torch, nn.Embedding(V, D), seed=52)
    pos_queries = torch.tensor(arr(53, 1, T, D, scale=0.5), requires_grad=True)
    attn = set_weights(torch, nn.MultiheadAttention(D, 2, batch_first=True), seed=54)
    head = set_weights(torch, nn.Linear(D, V), seed=55)
    tgt = torch.tensor([[0, 3, 4, 1, 2], [0, 5, 2, 2, 2]])  # bos=0, eos=1, pad=2
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    content = embed(tgt_in) * math.sqrt(D)
    losses, masks = [], []
    for perm in perms:
        content_mask, query_mask = generate_attn_masks(perm)
        masks.append(query_mask)
        q = pos_queries.expand(N, -1, -1)
        out, w = attn(q, content, content, attn_mask=query_mask)
        logits = head(out)
        losses.append(F.cross_entropy(logits.flatten(end_dim=1), tgt_out.flatten(),
                                      ignore_index=2))  # fmt: skip
    loss = torch.stack(losses).mean()
    loss.backward()
    return {"perms": perms, "masks": torch.stack(masks), "canonical": canonical,
            "canonical_matches": torch.equal(masks[0], canonical),
            "losses": losses, "loss": loss, "pos_grad": pos_queries.grad,
            "in_proj_grad": attn.in_proj_weight.grad, "last_attn": w}  # fmt: skip


@program
def ocr_layout_2d_position_embeddings_bucketize(torch):
    """LayoutLM-style 2-D position embeddings: word boxes in pixels normalised to a 0..1000
    grid with ``clamp``, x/y/width/height embeddings summed with word embeddings and a
    ``LayerNorm``; LayoutLMv2's relative 2-D attention bias with log-spaced buckets from
    ``torch.bucketize`` over pairwise box-centre offsets; gradients of a pooled score."""
    nn = torch.nn
    W_img, H_img, n, D = 600.0, 800.0, 7, 6
    rng = np.random.default_rng(61)
    x0 = rng.uniform(-20, 560, n)
    y0 = rng.uniform(0, 780, n)
    boxes = np.stack([x0, y0, x0 + rng.uniform(10, 90, n), y0 + rng.uniform(8, 40, n)], 1)
    boxes_px = torch.tensor(boxes.astype(np.float32))
    scale = torch.tensor([W_img, H_img, W_img, H_img])
    bbox = (boxes_px / scale * 1000).long().clamp(0, 1000)
    emb = nn.ModuleDict({"word": nn.Embedding(20, D), "x": nn.Embedding(1001, D),
                         "y": nn.Embedding(1001, D), "h": nn.Embedding(1001, D),
                         "w": nn.Embedding(1001, D)})  # fmt: skip
    set_weights(torch, emb, seed=62)
    norm = nn.LayerNorm(D)
    words = torch.tensor(ints(63, 20, 1, n))
    bb = bbox.unsqueeze(0)
    left, upper = emb["x"](bb[:, :, 0]), emb["y"](bb[:, :, 1])
    right, lower = emb["x"](bb[:, :, 2]), emb["y"](bb[:, :, 3])
    h_emb = emb["h"](bb[:, :, 3] - bb[:, :, 1])
    w_emb = emb["w"](bb[:, :, 2] - bb[:, :, 0])
    hidden = norm(emb["word"](words) + left + upper + right + lower + h_emb + w_emb)
    # relative 2-D position buckets
    cx = (bbox[:, 0] + bbox[:, 2]).float() / 2
    cy = (bbox[:, 1] + bbox[:, 3]).float() / 2
    rel_x = cx[None, :] - cx[:, None]
    rel_y = cy[None, :] - cy[:, None]
    boundaries = torch.tensor([0.0, 8, 16, 32, 64, 128, 256, 512])
    num_buckets = 2 * (len(boundaries) + 1)

    def bucket(rel):
        sign = (rel > 0).long()
        return sign * (num_buckets // 2) + torch.bucketize(rel.abs(), boundaries, right=False)

    bx, by = bucket(rel_x), bucket(rel_y)
    bias_x = set_weights(torch, nn.Embedding(num_buckets, 2), seed=64, scale=0.5)
    bias_y = set_weights(torch, nn.Embedding(num_buckets, 2), seed=65, scale=0.5)
    rel_bias = (bias_x(bx) + bias_y(by)).permute(2, 0, 1)  # [heads, n, n]
    scores = hidden @ hidden.transpose(-1, -2) / math.sqrt(D) + rel_bias
    probs = scores.softmax(-1)
    pooled = (probs @ hidden).mean()
    pooled.backward()
    right_bins = torch.bucketize(torch.tensor([0.0, 8.0, 9.5, 600.0]), boundaries, right=True)
    return {"bbox": bbox, "hidden": hidden, "bx": bx, "by": by, "probs": probs,
            "right_bins": right_bins, "x_grad_rows": emb["x"].weight.grad[bbox[:, 0]],
            "h_grad_norm": emb["h"].weight.grad.norm(), "bias_x_grad": bias_x.weight.grad,
            "word_grad": emb["word"].weight.grad}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # conv head over Adam steps and topk-selected sums: float32 drift
def ocr_dbnet_balanced_bce_dice_l1_training(torch):
    """DBNet: a tiny FPN-less head predicting probability and threshold maps (``ConvTranspose2d``
    upsampling, sigmoid), the approximate binary map ``1 / (1 + exp(-k (P - T)))``, balanced BCE
    with OHEM (negatives capped at 3x positives and picked with ``topk``), dice loss on the binary
    map, masked L1 on the threshold map, three Adam steps; then the inference-time binarisation
    and box count."""
    nn, F = torch.nn, torch.nn.functional

    class DBHead(nn.Module):
        def __init__(self, c=4, k=50):
            super().__init__()
            self.k = k
            self.backbone = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU())
            self.binarize = nn.Sequential(
                nn.Conv2d(c, c, 3, padding=1),
                nn.ReLU(),
                nn.ConvTranspose2d(c, 1, 2, 2),
                nn.Sigmoid(),
            )
            self.thresh = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
                                        nn.ConvTranspose2d(c, 1, 2, 2), nn.Sigmoid())  # fmt: skip

        def step_function(self, x, y):
            return torch.reciprocal(1 + torch.exp(-self.k * (x - y)))

        def forward(self, x):
            f = self.backbone(x)
            prob, thr = self.binarize(f), self.thresh(f)
            return torch.cat([prob, thr, self.step_function(prob, thr)], dim=1)

    def balanced_bce(pred, gt, mask, negative_ratio=3.0, eps=1e-6):
        positive = (gt * mask).byte()
        negative = ((1 - gt) * mask).byte()
        positive_count = int(positive.float().sum())
        negative_count = min(int(negative.float().sum()), int(positive_count * negative_ratio))
        loss = F.binary_cross_entropy(pred, gt, reduction="none")
        positive_loss = loss * positive.float()
        negative_loss = loss * negative.float()
        negative_loss, _ = negative_loss.view(-1).topk(negative_count)
        return (positive_loss.sum() + negative_loss.sum()) / (positive_count + negative_count + eps)

    def dice_loss(pred, gt, mask, eps=1e-6):
        inter = (pred * gt * mask).sum()
        union = (pred * mask).sum() + (gt * mask).sum() + eps
        return 1 - 2.0 * inter / union

    def mask_l1(pred, gt, mask):
        return (torch.abs(pred - gt) * mask).sum() / (mask.sum() + 1e-6)

    model = set_weights(torch, DBHead(), seed=71)
    images = torch.tensor(_uniform(72, 2, 3, 12, 12))
    gt_map = torch.zeros(2, 1, 12, 12)
    gt_map[0, 0, 2:5, 1:9] = 1
    gt_map[1, 0, 6:9, 3:11] = 1
    gt_map[1, 0, 1:3, 2:6] = 1
    mask = torch.ones(2, 1, 12, 12)
    mask[0, 0, 10:, :3] = 0  # an ignored ("###") region
    thresh_map = torch.tensor(_uniform(73, 2, 1, 12, 12, low=0.3, high=0.7))
    thresh_mask = F.max_pool2d(gt_map, 3, 1, 1)  # a dilated border region
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    history = []
    for _ in range(3):
        out = model(images)
        prob, thr, binary = out[:, :1], out[:, 1:2], out[:, 2:]
        l_bce = balanced_bce(prob, gt_map, mask)
        l_thr = mask_l1(thr, thresh_map, thresh_mask)
        l_dice = dice_loss(binary, gt_map, mask)
        loss = l_bce + 10 * l_thr + l_dice
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(torch.stack([loss, l_bce, l_thr, l_dice]).detach())
    model.eval()
    with torch.no_grad():
        prob = model(images)[:, 0]
    seg = prob > 0.3
    return {"history": history, "prob": prob, "seg_pixels": seg.sum((1, 2)),
            "params": params(model), "mean_score": prob[seg].mean() if seg.any() else 0.0,
            "neg_count": min(int(((1 - gt_map) * mask).sum()), int(3 * gt_map.sum()))}  # fmt: skip


@program
def ocr_edit_distance_cer_wer_metrics(torch):
    """OCR evaluation as recogniser repos compute it: greedy CTC decoding of fixed log-probs to
    strings, Levenshtein distance in Python over ``tolist()``, character and word error rates,
    normalised edit distance and exact-match accuracy; the same distance as a DP table filled with
    tensor ops row by row (``torch.minimum`` over shifted rows), and a case-insensitive variant."""
    T, N, C = 10, 4, len(ALPHABET)
    logits = torch.tensor(arr(81, T, N, C, scale=2.5))
    log_probs = logits.log_softmax(-1)
    lengths = torch.tensor([10, 8, 10, 6])
    decoded = _greedy_ctc(torch, log_probs, lengths)
    preds = ["".join(ALPHABET[i] for i in d) for d in decoded]
    gts = ["a1b2", preds[1][:-1] + "x" if preds[1] else "x", preds[2], "hello"]
    char_dists = [_levenshtein(p, g) for p, g in zip(preds, gts)]
    cer = sum(char_dists) / sum(len(g) for g in gts)
    pred_words, gt_words = " ".join(preds).split(), "a1b2 z".split()
    wer = _levenshtein(pred_words, gt_words) / len(gt_words)
    ned = 1 - sum(d / max(len(p), len(g), 1) for d, p, g in zip(char_dists, preds, gts)) / N
    acc = sum(p == g for p, g in zip(preds, gts)) / N

    def tensor_levenshtein(a, b):
        a, b = torch.tensor(a), torch.tensor(b)
        row = torch.arange(len(b) + 1, dtype=torch.float32)
        for i in range(1, len(a) + 1):
            sub = row[:-1] + (a[i - 1] != b).float()
            new = torch.empty_like(row)
            new[0] = i
            ins_del = torch.minimum(row[1:] + 1, sub)
            for j in range(1, len(b) + 1):
                new[j] = torch.minimum(ins_del[j - 1], new[j - 1] + 1)
            row = new
        return row[-1]

    p_ids = [ALPHABET.index(ch) for ch in preds[0]] or [0]
    t_ids = [ALPHABET.index(ch) for ch in "a1b2"]
    return {"preds": " | ".join(preds), "char_dists": char_dists, "cer": cer, "wer": wer,
            "ned": ned, "acc": acc, "tensor_dist": tensor_levenshtein(p_ids, t_ids),
            "upper_dist": _levenshtein(preds[3].upper(), "HELLO"),
            "decoded_lens": [len(d) for d in decoded]}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # transformer layers over AdamW steps: float32 summation order
def ocr_vit_str_transformer_decoder_training(torch):
    """A ViTSTR/TrOCR-lite recogniser: patch embedding by a strided ``Conv2d`` with
    ``flatten(2).transpose(1, 2)`` plus learned positions, an ``nn.TransformerEncoderLayer``, a
    ``nn.TransformerDecoderLayer`` with a boolean ``triu`` causal mask and a key padding
    mask, cross entropy ignoring pads, AdamW with a warmup ``LambdaLR``, then greedy
    autoregressive decoding."""
    nn, F = torch.nn, torch.nn.functional
    V, PAD, BOS, EOS, D, L = 9, 0, 1, 2, 8, 5

    class Recognizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(1, D, kernel_size=(8, 4), stride=(8, 4))
            self.pos = nn.Parameter(torch.zeros(1, 6, D))
            self.encoder = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
            self.tok = nn.Embedding(V, D, padding_idx=PAD)
            self.tpos = nn.Parameter(torch.zeros(1, L, D))
            self.decoder = nn.TransformerDecoderLayer(D, 2, 16, dropout=0.0, batch_first=True,
                                                      norm_first=True)  # fmt: skip
            self.head = nn.Linear(D, V)

        def encode(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2) + self.pos
            return self.encoder(x)

        def decode(self, memory, tgt_in):
            s = tgt_in.size(1)
            causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
            x = self.tok(tgt_in) + self.tpos[:, :s]
            y = self.decoder(x, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_in == PAD)
            return self.head(y)

    model = set_weights(torch, Recognizer(), seed=91, scale=0.3)
    images = torch.tensor(_uniform(92, 2, 1, 8, 24))
    labels = [[4, 5, 6], [7, 3]]
    tgt = torch.full((2, L + 1), PAD, dtype=torch.long)
    for i, lab in enumerate(labels):
        seq = torch.tensor([BOS] + lab + [EOS])
        tgt[i, : len(seq)] = seq
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    losses, lrs = [], []
    for _ in range(3):
        logits = model.decode(model.encode(images), tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        memory = model.encode(images)
        ys = torch.full((2, 1), BOS, dtype=torch.long)
        step_logits = []
        for _ in range(L - 1):
            out = model.decode(memory, ys)[:, -1]
            step_logits.append(out)
            ys = torch.cat([ys, out.argmax(-1, keepdim=True)], dim=1)
    return {"losses": losses, "lrs": lrs, "ys": ys, "step_logits": torch.stack(step_logits, 1),
            "memory": memory, "patch_grad": model.patch.weight.grad}  # fmt: skip


@program
def ocr_text_line_resize_pad_rectify(torch):
    """Text-line preprocessing of recognition pipelines: each crop resized to a fixed height
    keeping its aspect ratio (``F.interpolate`` bilinear, ``math.ceil`` widths capped),
    right-padded with ``F.pad`` to the batch's max width, normalised to ``[-1, 1]``, width masks
    for the valid columns; then an ASTER-style affine rectification with ``F.affine_grid`` and
    ``F.grid_sample`` whose gradient reaches the localisation parameters."""
    F = torch.nn.functional
    H, max_w = 8, 32
    crops = [torch.tensor(_uniform(101 + i, 1, h, w)) for i, (h, w) in
             enumerate([(10, 25), (16, 20), (6, 40)])]  # fmt: skip
    resized, widths = [], []
    for img in crops:
        _, h, w = img.shape
        ratio = w / float(h)
        new_w = min(max_w, int(math.ceil(H * ratio)))
        widths.append(new_w)
        resized.append(F.interpolate(img.unsqueeze(0), size=(H, new_w), mode="bilinear",
                                     align_corners=False).squeeze(0))  # fmt: skip
    pad_to = max(widths)
    batch = torch.stack([F.pad(r, (0, pad_to - r.size(-1)), value=0.0) for r in resized])
    batch = (batch - 0.5) / 0.5
    width_mask = torch.arange(pad_to)[None, :] < torch.tensor(widths)[:, None]
    theta = torch.tensor([[[0.9, 0.1, 0.0], [-0.05, 1.0, 0.02]]] * 3, requires_grad=True)
    grid = F.affine_grid(theta, list(batch.shape), align_corners=False)
    rectified = F.grid_sample(batch, grid, mode="bilinear", padding_mode="border",
                              align_corners=False)  # fmt: skip
    loss = (rectified * width_mask[:, None, None, :]).pow(2).mean()
    loss.backward()
    return {"widths": widths, "batch": batch, "width_mask": width_mask,
            "rectified": rectified, "loss": loss, "theta_grad": theta.grad}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # layer norm + Adam steps: float32 summation order
def ocr_layoutlm_token_classification_word_pooling(torch):
    """Form understanding (FUNSD-style BIO tagging): subword tokens aligned to words with
    ``word_ids``, labels only on each word's first subword (``-100`` elsewhere), a small
    encoder over text + box features, ``CrossEntropyLoss`` ignoring ``-100``, two Adam steps;
    word-level predictions by mean-pooling subwords with ``index_add_`` and by first-subword
    selection, and per-class F1-style counts with ``bincount``."""
    nn = torch.nn
    word_ids = [None, 0, 0, 1, 2, 2, 2, 3, 4, None]
    word_labels = [1, 2, 0, 3, 4]  # O, B-Q, I-Q, B-A, I-A style ids
    labels, prev = [], None
    for w in word_ids:
        labels.append(-100 if w is None or w == prev else word_labels[w])
        prev = w
    labels = torch.tensor([labels])
    tokens = torch.tensor(ints(111, 30, 1, len(word_ids)))
    boxes = torch.tensor(_uniform(112, 1, len(word_ids), 4))

    class Tagger(nn.Module):
        def __init__(self, D=8, num_labels=5):
            super().__init__()
            self.tok = nn.Embedding(30, D)
            self.box = nn.Linear(4, D)
            self.norm = nn.LayerNorm(D)
            self.mix = nn.Linear(D, D)
            self.cls = nn.Linear(D, num_labels)

        def forward(self, ids, bbox):
            h = self.norm(self.tok(ids) + self.box(bbox))
            h = h + torch.nn.functional.gelu(self.mix(h))
            return self.cls(h)

    model = set_weights(torch, Tagger(), seed=113)
    crit = nn.CrossEntropyLoss(ignore_index=-100)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(2):
        logits = model(tokens, boxes)
        loss = crit(logits.view(-1, logits.size(-1)), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    with torch.no_grad():
        logits = model(tokens, boxes)[0]
    valid = torch.tensor([w is not None for w in word_ids])
    wid = torch.tensor([w for w in word_ids if w is not None])
    pooled = torch.zeros(5, logits.size(-1)).index_add_(0, wid, logits[valid])
    counts = torch.bincount(wid, minlength=5).unsqueeze(1)
    word_pred_mean = (pooled / counts).argmax(-1)
    first = labels[0] != -100
    word_pred_first = logits[first].argmax(-1)
    gold = torch.tensor(word_labels)
    tp = torch.bincount(gold[word_pred_first == gold], minlength=5)
    pred_count = torch.bincount(word_pred_first, minlength=5)
    gold_count = torch.bincount(gold, minlength=5)
    f1 = 2 * tp / (pred_count + gold_count).clamp(min=1)
    return {"labels": labels, "losses": losses, "pooled": pooled / counts,
            "word_pred_mean": word_pred_mean, "word_pred_first": word_pred_first,
            "tp": tp, "f1": f1, "grads": grads(model)}  # fmt: skip


@program
def ocr_ctc_decoding_utilities_and_packed_sequences(torch):
    """The helper functions around CTC recognisers: ``unique_consecutive`` with counts and
    inverse (character spans and per-character confidences from frame probabilities), blank
    masks via ``nonzero(as_tuple=True)``, a BiLSTM over variable-width lines with
    ``pack_padded_sequence``/``pad_packed_sequence``, ``CTCLoss(reduction='sum')`` on int32
    lengths with gradients, one-hot targets from ``F.one_hot``, ``topk(largest=False)`` for the
    least confident frames and ``searchsorted`` for word boundaries in a character stream."""
    nn, F = torch.nn, torch.nn.functional
    T, N, C = 8, 3, 5
    logits = torch.tensor(arr(121, N, T, C, scale=2.0))
    probs = logits.softmax(-1)
    conf, best = probs.max(-1)
    seq = best[0]
    uniq, inverse, counts = torch.unique_consecutive(seq, return_inverse=True, return_counts=True)
    span_conf = torch.zeros(len(uniq)).scatter_reduce(0, inverse, conf[0], reduce="amax",
                                                      include_self=False)  # fmt: skip
    keep = uniq != 0
    char_conf = span_conf[keep]
    starts = torch.cumsum(counts, 0) - counts
    blank_t, blank_n = (best == 0).nonzero(as_tuple=True)
    lengths = torch.tensor([8, 5, 6])
    rnn = set_weights(torch, nn.LSTM(C, 4, bidirectional=True, batch_first=True), seed=122)
    packed = nn.utils.rnn.pack_padded_sequence(logits, lengths, batch_first=True,
                                               enforce_sorted=False)  # fmt: skip
    out, (h_n, c_n) = rnn(packed)
    padded, out_lens = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    proj = set_weights(torch, nn.Linear(8, C), seed=123)
    log_probs = proj(padded).log_softmax(-1).transpose(0, 1)
    targets = torch.tensor([[1, 2, 2], [3, 4, 0], [2, 0, 0]], dtype=torch.int32)
    tgt_lens = torch.tensor([3, 2, 1], dtype=torch.int32)
    crit = nn.CTCLoss(blank=0, reduction="sum")
    loss = crit(log_probs, targets, out_lens.int(), tgt_lens)
    loss.backward()
    one_hot = F.one_hot(best, num_classes=C).sum(1)
    low_conf, low_idx = conf.topk(2, dim=1, largest=False)
    char_stream = torch.tensor([0, 4, 9, 15, 22])  # cumulative word ends
    word_of_char = torch.searchsorted(char_stream, torch.tensor([0, 3, 4, 5, 16, 21]), side="right")
    return {"uniq": uniq, "inverse": inverse, "counts": counts, "char_conf": char_conf,
            "starts": starts, "blank_t": blank_t, "blank_n": blank_n, "padded": padded,
            "out_lens": out_lens, "h_n": h_n, "loss": loss,
            "rnn_grad": rnn.weight_hh_l0_reverse.grad, "one_hot": one_hot,
            "low_conf": low_conf, "low_idx": low_idx, "word_of_char": word_of_char}  # fmt: skip
