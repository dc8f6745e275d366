"""NLP training: vocabularies and batching, text classifiers, CRF taggers, sentence embeddings, schedulers and clipping."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _codes(torch, text):
    return torch.tensor(np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64))


@program
def char_vocab_unique_searchsorted_bigram_lm(torch):
    nn, F = torch.nn, torch.nn.functional
    codes = _codes(torch, "the quick brown fox jumps over the lazy dog. the dog sleeps.")
    vocab, ids, counts = torch.unique(codes, sorted=True, return_inverse=True, return_counts=True)
    itos = {i: chr(c) for i, c in enumerate(vocab.tolist())}
    V = len(vocab)
    # encode unseen text against the sorted vocabulary; out-of-vocabulary characters -> UNK = V
    query = _codes(torch, "a quiet zebra!")
    pos = torch.searchsorted(vocab, query).clamp(max=V - 1)
    encoded = torch.where(vocab[pos] == query, pos, torch.full_like(pos, V))
    # bigram statistics from unique rows
    pairs = torch.stack([ids[:-1], ids[1:]], dim=1)
    uniq_pairs, pair_inv, pair_counts = torch.unique(
        pairs, dim=0, return_inverse=True, return_counts=True
    )
    table = torch.zeros(V, V).index_put_((uniq_pairs[:, 0], uniq_pairs[:, 1]), pair_counts.float())
    probs = (table + 1) / (table + 1).sum(1, keepdim=True)  # add-one smoothing
    count_nll = -probs[ids[:-1], ids[1:]].log().mean()

    model = nn.Embedding(V, V)
    set_weights(torch, model, seed=3)
    opt = torch.optim.SGD(model.parameters(), lr=2.0, momentum=0.9, nesterov=True)
    losses = []
    for _ in range(6):
        loss = F.cross_entropy(model(ids[:-1]), ids[1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    idx, out = ids[:1], []
    with torch.no_grad():
        for _ in range(10):
            idx = model(idx).argmax(-1)
            out.append(itos[idx.item()])
    return {
        "vocab": vocab, "ids": ids, "counts": counts, "bincount": torch.bincount(ids, minlength=V),
        "encoded": encoded, "n_oov": (encoded == V).sum(), "uniq_pairs": uniq_pairs,
        "pair_inv": pair_inv, "pair_counts": pair_counts, "count_nll": count_nll,
        "losses": losses, "sample": "".join(out), "weight": model.weight,
    }  # fmt: skip


@program
def padded_batch_attention_mask_pooling(torch):
    nn = torch.nn
    rnn = nn.utils.rnn
    PAD = 0
    lens = [5, 2, 4, 3]
    seqs = [torch.tensor(ints(20 + i, 11, n) + 1) for i, n in enumerate(lens)]
    batch = rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    lengths = torch.tensor(lens)
    attention_mask = (batch != PAD).long()
    T = batch.size(1)
    range_mask = torch.arange(T).expand(len(seqs), T) < lengths.unsqueeze(1)
    ext = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(
        torch.float32
    ).min

    class Encoder(nn.Module):
        def __init__(self, vocab, d):
            super().__init__()
            self.emb = nn.Embedding(vocab, d, padding_idx=PAD)
            self.qkv = nn.Linear(d, 3 * d, bias=False)  # (a key bias gets no gradient)
            self.out = nn.Linear(d, 2)

        def forward(self, x, ext_mask, mask):
            h = self.emb(x)
            q, k, v = self.qkv(h).unsqueeze(1).chunk(3, dim=-1)
            scores = q @ k.transpose(-1, -2) / math.sqrt(h.size(-1)) + ext_mask
            ctx = (scores.softmax(-1) @ v).squeeze(1)
            m = mask.unsqueeze(-1).type_as(ctx)
            return self.out((ctx * m).sum(1) / m.sum(1).clamp(min=1e-9)), scores

    model = set_weights(torch, Encoder(12, 8), seed=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    labels = torch.tensor([1, 0, 1, 0])
    losses = []
    for _ in range(4):
        logits, scores = model(batch, ext, attention_mask)
        loss = nn.functional.cross_entropy(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss)
    packed = rnn.pack_sequence(seqs, enforce_sorted=False)
    unpadded = rnn.unpad_sequence(batch, lengths, batch_first=True)
    return {
        "batch": batch, "mask_equal": torch.equal(attention_mask.bool(), range_mask),
        "ext_min": ext.min(), "scores_last": scores[1, 0, 0, :2], "losses": losses,
        "emb_pad_grad": model.emb.weight.grad[PAD], "grads": grads(model),
        "batch_sizes": packed.batch_sizes, "sorted_indices": packed.sorted_indices,
        "unsorted_indices": packed.unsorted_indices, "packed_data": packed.data,
        "unpad_ok": all(torch.equal(a, b) for a, b in zip(unpadded, seqs)),
        "unpacked": rnn.unpack_sequence(packed),
    }  # fmt: skip


@program
def embeddingbag_text_classification_tutorial(torch):
    nn = torch.nn

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for label, tokens in batch:
            label_list.append(label)
            text_list.append(torch.tensor(tokens, dtype=torch.int64))
            offsets.append(len(tokens))
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        return torch.tensor(label_list, dtype=torch.int64), torch.cat(text_list), offsets

    data = [(int(ints(40 + i, 3, 1)[0]), ints(50 + i, 30, 3 + i % 4).tolist()) for i in range(8)]
    model = set_weights(torch, TextClassificationModel(30, 6, 3), seed=5)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    losses, accs, lrs = [], [], []
    for _epoch in range(3):
        total_acc, total_count = 0, 0
        for start in (0, 4):
            label, text, offsets = collate_batch(data[start : start + 4])
            optimizer.zero_grad()
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
            losses.append(loss.item())
        accs.append(total_acc / total_count)
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
    # tf-idf weighted bags with include_last_offset, and fixed-length 2D bags with max pooling
    _, text, offsets = collate_batch(data[:4])
    ends = torch.cat([offsets, torch.tensor([text.numel()])])
    tfidf = nn.EmbeddingBag(30, 4, mode="sum", include_last_offset=True)
    set_weights(torch, tfidf, seed=6)
    w = torch.tensor(arr(7, text.numel())).abs()
    bag_max = nn.EmbeddingBag.from_pretrained(model.embedding.weight.detach(), mode="max")
    return {
        "losses": losses, "accs": accs, "lrs": lrs, "params": params(model),
        "tfidf": tfidf(text, ends, per_sample_weights=w),
        "max2d": bag_max(torch.tensor(ints(8, 30, 3, 4))),
    }  # fmt: skip


@program
def bilstm_crf_forward_algorithm_viterbi(torch):
    nn = torch.nn

    class BiLSTMCRF(nn.Module):
        def __init__(self, vocab, n_tags, emb=6, hidden=8):
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden // 2, bidirectional=True, batch_first=True)
            self.hidden2tag = nn.Linear(hidden, n_tags)
            self.transitions = nn.Parameter(torch.zeros(n_tags, n_tags))  # [from, to]
            self.start = nn.Parameter(torch.zeros(n_tags))
            self.end = nn.Parameter(torch.zeros(n_tags))

        def emissions(self, x):
            return self.hidden2tag(self.lstm(self.emb(x))[0])

        def log_partition(self, em, mask):
            alpha = self.start + em[:, 0]
            for t in range(1, em.size(1)):
                nxt = torch.logsumexp(alpha[:, :, None] + self.transitions + em[:, t, None], dim=1)
                alpha = torch.where(mask[:, t, None], nxt, alpha)
            return torch.logsumexp(alpha + self.end, dim=1)

        def gold_score(self, em, tags, mask):
            s = self.start[tags[:, 0]] + em.gather(2, tags.unsqueeze(2)).squeeze(2).mul(mask).sum(1)
            s = s + (self.transitions[tags[:, :-1], tags[:, 1:]] * mask[:, 1:]).sum(1)
            last = tags.gather(1, mask.sum(1, keepdim=True).long() - 1).squeeze(1)
            return s + self.end[last]

        def viterbi(self, em, mask):
            score, history = self.start + em[:, 0], []
            for t in range(1, em.size(1)):
                best, idx = (score[:, :, None] + self.transitions + em[:, t, None]).max(dim=1)
                score = torch.where(mask[:, t, None], best, score)
                history.append(idx)
            best_score, best_last = (score + self.end).max(dim=1)
            paths = []
            for b, n in enumerate(mask.sum(1).tolist()):
                path = [best_last[b].item()]
                for hist in reversed(history[: n - 1]):
                    path.append(hist[b][path[-1]].item())
                paths.append(torch.tensor(path[::-1]))
            return best_score, paths

    x = torch.tensor(ints(60, 15, 3, 6))
    tags = torch.tensor(ints(61, 5, 3, 6))
    mask = torch.arange(6)[None] < torch.tensor([6, 4, 5])[:, None]
    model = set_weights(torch, BiLSTMCRF(15, 5), seed=62)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    losses = []
    for _ in range(8):
        em = model.emissions(x)
        nll = (model.log_partition(em, mask) - model.gold_score(em, tags, mask)).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll)
    with torch.no_grad():
        best_score, paths = model.viterbi(model.emissions(x), mask)
    return {"losses": losses, "best_score": best_score, "paths": paths, "grads": grads(model)}


@program(rtol=5e-4, atol=5e-5)
def mean_pooled_sentence_embeddings_contrastive(torch):
    nn, F = torch.nn, torch.nn.functional

    def mean_pooling(token_embeddings, attention_mask):
        mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
        return torch.sum(token_embeddings * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)

    def max_pooling(token_embeddings, attention_mask):
        mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size())
        token_embeddings = token_embeddings.clone()
        token_embeddings[mask == 0] = -1e9
        return torch.max(token_embeddings, 1)[0]

    encoder = nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 8), nn.GELU(approximate="tanh"))
    set_weights(torch, encoder, seed=70)
    anchors, positives = torch.tensor(ints(71, 20, 4, 5)), torch.tensor(ints(72, 20, 4, 6))
    a_mask = torch.tensor([[1] * 5, [1] * 3 + [0] * 2, [1] * 4 + [0], [1] * 2 + [0] * 3])
    p_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 5 + [0], [1] * 3 + [0] * 3])
    opt = torch.optim.AdamW(encoder.parameters(), lr=0.01, weight_decay=0.01, amsgrad=True)
    cos_loss = nn.CosineEmbeddingLoss(margin=0.2)
    rank_loss = nn.MarginRankingLoss(margin=0.1)
    labels = torch.arange(4)
    out = {"info_nce": [], "cosine": [], "ranking": []}
    for _ in range(4):
        a = F.normalize(mean_pooling(encoder(anchors), a_mask), p=2, dim=1)
        p = F.normalize(mean_pooling(encoder(positives), p_mask), p=2, dim=1)
        sim = a @ p.T / 0.05
        info_nce = (F.cross_entropy(sim, labels) + F.cross_entropy(sim.T, labels)) / 2
        cos = cos_loss(a, p.roll(1, 0), torch.tensor([1, -1, 1, -1]))
        pos_s, neg_s = (a * p).sum(-1), (a * p.roll(1, 0)).sum(-1)
        rank = rank_loss(pos_s, neg_s, torch.ones(4))
        loss = info_nce + cos + rank
        opt.zero_grad()
        loss.backward()
        opt.step()
        for k, v in (("info_nce", info_nce), ("cosine", cos), ("ranking", rank)):
            out[k].append(v.item())
    with torch.no_grad():
        h = encoder(anchors)
        pairwise = F.cosine_similarity(h.mean(1)[:, None], h.mean(1)[None], dim=-1)
        out.update(mean=mean_pooling(h, a_mask), max=max_pooling(h, a_mask), pairwise=pairwise)
    out["params"] = params(encoder)
    return out


@program(rtol=5e-4, atol=5e-5)
def gradient_checkpointing_gpt_blocks(torch):
    nn, F = torch.nn, torch.nn.functional
    checkpoint, checkpoint_sequential = (
        torch.utils.checkpoint.checkpoint,
        torch.utils.checkpoint.checkpoint_sequential,
    )

    class Block(nn.Module):
        def __init__(self, d, p=0.0):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.drop = nn.Dropout(p)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))
            return x + self.drop(self.mlp(self.ln_2(x)))

    class GPT(nn.Module):
        def __init__(self, p=0.0, gradient_checkpointing=False):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(16, 8), nn.Embedding(6, 8)
            self.h = nn.ModuleList([Block(8, p) for _ in range(3)])
            self.lm_head = nn.Linear(8, 16, bias=False)
            self.gradient_checkpointing = gradient_checkpointing

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
            for block in self.h:
                if self.gradient_checkpointing and self.training:
                    x = checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            logits = self.lm_head(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    data = torch.tensor(ints(80, 16, 3, 7))
    x, y = data[:, :-1], data[:, 1:]
    out = {}
    for name, ckpt in (("plain", False), ("ckpt", True)):
        model = set_weights(torch, GPT(gradient_checkpointing=ckpt), seed=81)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
        out[name] = {"losses": losses, "wte": model.wte.weight, "grads": grads(model.h[0])}
    seq = nn.Sequential(*model.h)
    h = model.wte(x).detach().requires_grad_(True)
    y_seq = checkpoint_sequential(seq, 2, h, use_reentrant=False)
    y_seq.pow(2).mean().backward()
    out["seq"], out["seq_dh"] = y_seq, h.grad
    # with dropout, checkpointing must replay the same dropout masks (RNG state is preserved)
    drop_model = set_weights(torch, GPT(p=0.3), seed=82)
    torch.manual_seed(0)
    plain = drop_model(x, y)
    drop_model.gradient_checkpointing = True
    torch.manual_seed(0)
    ck = drop_model(x, y)
    ck.backward()
    out["dropout_ckpt_same_loss"] = torch.allclose(plain, ck)
    out["dropout_grad_finite"] = bool(torch.isfinite(drop_model.wte.weight.grad).all())
    return out


@program
def label_smoothing_ignore_index_fairseq_vs_builtin(torch):
    nn, F = torch.nn, torch.nn.functional
    PAD, V = 1, 9

    def label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index):
        target = target.unsqueeze(-1)
        nll_loss = -lprobs.gather(dim=-1, index=target)
        smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
        pad_mask = target.eq(ignore_index)
        nll_loss.masked_fill_(pad_mask, 0.0)
        smooth_loss.masked_fill_(pad_mask, 0.0)
        nll_loss, smooth_loss = nll_loss.sum(), smooth_loss.sum()
        eps_i = epsilon / (lprobs.size(-1) - 1)
        return (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss, nll_loss

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, 6, padding_idx=PAD)
            self.gru = nn.GRU(6, 8, batch_first=True)
            self.proj = nn.Linear(8, V)

        def forward(self, prev):
            return self.proj(self.gru(self.embed(prev))[0])

    tgt = torch.tensor(ints(90, V - 2, 3, 6) + 2)
    tgt[1, 4:] = PAD
    tgt[2, 3:] = PAD
    prev = torch.cat([torch.full((3, 1), 2), tgt[:, :-1]], dim=1)
    model = set_weights(torch, Decoder(), seed=91)
    opt = torch.optim.RAdam(
        model.parameters(), lr=0.02, weight_decay=0.01, decoupled_weight_decay=True
    )
    ntokens = tgt.ne(PAD).sum()
    losses, nlls = [], []
    for _ in range(4):
        lprobs = F.log_softmax(model(prev), dim=-1)
        loss, nll = label_smoothed_nll_loss(lprobs.view(-1, V), tgt.view(-1), 0.1, PAD)
        opt.zero_grad()
        (loss / ntokens).backward()
        opt.step()
        losses.append(loss)
        nlls.append(nll / ntokens / math.log(2))
    logits = model(prev).detach()
    w = torch.tensor(np.linspace(0.5, 1.5, V).astype(np.float32))
    kw = dict(ignore_index=PAD, label_smoothing=0.1)
    return {
        "losses": losses, "nll_bits": nlls, "grads": grads(model),
        "mean": F.cross_entropy(logits.view(-1, V), tgt.view(-1), **kw),
        "sum": F.cross_entropy(logits.view(-1, V), tgt.view(-1), reduction="sum", **kw),
        "none_kdim": F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none", **kw),
        "weighted_mean": nn.CrossEntropyLoss(weight=w, **kw)(logits.view(-1, V), tgt.view(-1)),
        "weighted_none": F.cross_entropy(logits.transpose(1, 2), tgt, w, reduction="none", **kw),
        "nll_ignore": F.nll_loss(F.log_softmax(logits, -1).view(-1, V), tgt.view(-1), ignore_index=PAD),
    }  # fmt: skip


@program
def schedulers_onecycle_plateau_warm_restarts(torch):
    nn, lr_s = torch.nn, torch.optim.lr_scheduler
    x, y = torch.tensor(arr(100, 16, 5)), torch.tensor(ints(101, 3, 16))

    def fresh(seed):
        return set_weights(torch, nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)), seed)

    def step(model, opt, xb, yb):
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    model = fresh(102)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    one = lr_s.OneCycleLR(opt, max_lr=0.05, epochs=2, steps_per_epoch=5, pct_start=0.25,
                          anneal_strategy="linear", three_phase=True, div_factor=10.0,
                          final_div_factor=100.0)  # fmt: skip
    oc = {"lr": [], "beta1": [], "loss": []}
    for _epoch in range(2):
        for i in range(4):
            oc["loss"].append(step(model, opt, x[i * 4 : i * 4 + 4], y[i * 4 : i * 4 + 4]))
            one.step()
            oc["lr"].append(one.get_last_lr()[0])
            oc["beta1"].append(opt.param_groups[0]["betas"][0])
    model = fresh(103)
    opt = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.05}], lr=0.1, momentum=0.9)  # fmt: skip
    plateau = lr_s.ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=0, threshold=0.01,
                                     threshold_mode="abs", cooldown=1, min_lr=[0.02, 0.01])  # fmt: skip
    pl = {"lr0": [], "lr1": [], "bad": []}
    for val_acc in (0.5, 0.6, 0.605, 0.6, 0.59, 0.7, 0.7, 0.69, 0.69):
        step(model, opt, x, y)
        plateau.step(val_acc)
        pl["lr0"].append(opt.param_groups[0]["lr"])
        pl["lr1"].append(opt.param_groups[1]["lr"])
        pl["bad"].append(plateau.num_bad_epochs)
    model = fresh(104)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    warm = lr_s.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=1e-3)
    wr = {"lr": [], "loss": []}
    iters = 3
    for epoch in range(5):
        for i in range(iters):
            wr["loss"].append(step(model, opt, x[i * 5 : i * 5 + 5], y[i * 5 : i * 5 + 5]))
            warm.step(epoch + i / iters)
            wr["lr"].append(opt.param_groups[0]["lr"])
    return {
        "onecycle": oc,
        "plateau": pl,
        "warm_restarts": wr,
        "T_cur": warm.T_cur,
        "T_i": warm.T_i,
    }


@program
def weight_tied_lm_grad_clipping_linear_warmup(torch):
    nn, F, lr_s = torch.nn, torch.nn.functional, torch.optim.lr_scheduler

    class TiedLM(nn.Module):
        def __init__(self, vocab=12, d=8):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.rnn = nn.LSTM(d, d, batch_first=True)
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # weight tying

        def forward(self, idx):
            return self.lm_head(self.ln_f(self.rnn(self.wte(idx))[0]))

    model = set_weights(torch, TiedLM(), seed=110)
    data = torch.tensor(ints(111, 12, 4, 9))
    x, y = data[:, :-1], data[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    warm = lr_s.LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=3)
    decay = lr_s.ExponentialLR(opt, gamma=0.8)
    sched = lr_s.SequentialLR(opt, schedulers=[warm, decay], milestones=[3])
    out = {"loss": [], "norm2": [], "norm_inf": [], "lr": []}
    for it in range(7):
        loss = F.cross_entropy(model(x).reshape(-1, 12), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if it == 0:
            out["tied_grad"] = model.wte.weight.grad.clone()
        out["norm_inf"].append(nn.utils.clip_grad_norm_(model.parameters(), 1e9, norm_type="inf"))
        if it % 2:
            nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
        out["norm2"].append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5))
        opt.step()
        sched.step()
        out["loss"].append(loss.item())
        out["lr"].append(sched.get_last_lr()[0])
    out.update(
        tied=model.lm_head.weight is model.wte.weight,
        n_params=sum(p.numel() for p in model.parameters()),
        names=[n for n, _ in model.named_parameters()],
        state_keys=sorted(model.state_dict().keys()),
        params=params(model),
    )
    return out


@program(rtol=5e-4, atol=5e-5)
def ngram_hashing_unfold_textcnn(torch):
    nn, F = torch.nn, torch.nn.functional
    V, BUCKETS = 20, 31
    tokens = torch.tensor(ints(120, V, 4, 9))
    bigrams = tokens.unfold(1, 2, 1)  # (B, T-1, 2)
    trigrams = tokens.unfold(1, 3, 1)  # (B, T-2, 3)
    bi_ids = (bigrams[..., 0] * V + bigrams[..., 1]) % BUCKETS
    tri_ids = (trigrams * torch.tensor([V * V, V, 1])).sum(-1).remainder(BUCKETS)

    class FastTextCNN(nn.Module):
        def __init__(self, d=6, n_filters=4, sizes=(2, 3, 4)):
            super().__init__()
            self.tok = nn.Embedding(V, d)
            self.ngram = nn.Embedding(BUCKETS, d)
            self.convs = nn.ModuleList([nn.Conv1d(d, n_filters, k) for k in sizes])
            self.fc = nn.Linear(n_filters * len(sizes) + d, 2)

        def forward(self, tok, bi, tri):
            e = self.tok(tok)  # (B, T, d)
            ng = torch.cat([self.ngram(bi), self.ngram(tri)], dim=1).mean(1)
            h = e.permute(0, 2, 1)
            pooled = [
                F.max_pool1d(F.relu(conv(h)), conv(h).size(2)).squeeze(2) for conv in self.convs
            ]
            return self.fc(torch.cat(pooled + [ng], dim=1))

    model = set_weights(torch, FastTextCNN(), seed=121)
    opt = torch.optim.Adagrad(
        model.parameters(), lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1
    )
    labels = torch.tensor([0, 1, 1, 0])
    losses = []
    for _ in range(5):
        loss = F.cross_entropy(model(tokens, bi_ids, tri_ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    # a Conv1d over embeddings is a matmul over unfolded windows
    with torch.no_grad():
        conv = model.convs[1]
        e = model.tok(tokens)
        windows = e.unfold(1, 3, 1)  # (B, T-2, d, 3)
        by_hand = windows.reshape(4, 7, -1) @ conv.weight.reshape(4, -1).T + conv.bias
        native = conv(e.transpose(1, 2)).transpose(1, 2)
    return {
        "bi_ids": bi_ids, "tri_ids": tri_ids, "losses": losses, "grads": grads(model),
        "by_hand": by_hand, "conv_matches": torch.allclose(by_hand, native, atol=1e-5),
        "ngram_hist": torch.bincount(torch.cat([bi_ids.flatten(), tri_ids.flatten()]), minlength=BUCKETS),
    }  # fmt: skip


@program
def top_k_top_p_filtering_and_repetition_penalty(torch):
    F = torch.nn.functional

    def top_k_top_p_filtering(
        logits, top_k=0, top_p=1.0, filter_value=-float("Inf"), min_tokens_to_keep=1
    ):
        if top_k > 0:
            top_k = min(max(top_k, min_tokens_to_keep), logits.size(-1))
            indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
            logits[indices_to_remove] = filter_value
        if top_p < 1.0:
            sorted_logits, sorted_indices = torch.sort(logits, descending=True)
            cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
            sorted_indices_to_remove = cumulative_probs > top_p
            if min_tokens_to_keep > 1:
                sorted_indices_to_remove[..., :min_tokens_to_keep] = 0
            sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
            sorted_indices_to_remove[..., 0] = 0
            indices_to_remove = sorted_indices_to_remove.scatter(
                1, sorted_indices, sorted_indices_to_remove
            )
            logits[indices_to_remove] = filter_value
        return logits

    def top_p_warper(scores, top_p, min_tokens_to_keep=1):  # newer HF TopPLogitsWarper
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
        sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(
            1, sorted_indices, sorted_indices_to_remove
        )
        return scores.masked_fill(indices_to_remove, -float("inf"))

    logits = torch.tensor(arr(130, 3, 12, scale=2.0))
    input_ids = torch.tensor([[1, 4, 4, 7], [0, 0, 2, 11], [5, 6, 3, 9]])
    # CTRL repetition penalty (duplicates in input_ids write identical values)
    score = torch.gather(logits, 1, input_ids)
    score = torch.where(score < 0, score * 1.3, score / 1.3)
    penalized = logits.clone().scatter_(1, input_ids, score)
    scaled = penalized / 0.7
    k_only = top_k_top_p_filtering(scaled.clone(), top_k=5)
    p_only = top_k_top_p_filtering(scaled.clone(), top_p=0.8, min_tokens_to_keep=2)
    both = top_k_top_p_filtering(scaled.clone(), top_k=6, top_p=0.9)
    v, _ = torch.topk(scaled, 5)  # nanoGPT's version
    nano = scaled.clone()
    nano[nano < v[:, [-1]]] = -float("Inf")
    warped = top_p_warper(scaled, 0.8, min_tokens_to_keep=2)
    probs = F.softmax(both, dim=-1)
    min_p = F.softmax(scaled, -1)
    min_p_keep = min_p >= 0.1 * min_p.max(dim=-1, keepdim=True).values
    return {
        "penalized": penalized, "k_mask": torch.isinf(k_only), "p_mask": torch.isinf(p_only),
        "both_mask": torch.isinf(both), "probs": probs, "kept": (probs > 0).sum(-1),
        "nano_same": torch.equal(torch.isinf(nano), torch.isinf(k_only)),
        "warper_same": torch.equal(torch.isinf(warped), torch.isinf(p_only)),
        "renorm_p": F.softmax(p_only, -1), "greedy": probs.argmax(-1), "min_p_keep": min_p_keep,
        "entropy": -(probs * probs.clamp_min(1e-12).log()).sum(-1),
    }  # fmt: skip


@program
def perplexity_sliding_window_lstm_lm(torch):
    nn, F = torch.nn, torch.nn.functional
    V = 14

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, 8)
            self.lstm = nn.LSTM(8, 8, num_layers=2, batch_first=True)
            self.head = nn.Linear(8, V)

        def forward(self, input_ids, labels=None):
            logits = self.head(self.lstm(self.embed(input_ids))[0])
            if labels is None:
                return logits
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            return F.cross_entropy(
                shift_logits.view(-1, V), shift_labels.view(-1), ignore_index=-100
            )

    model = set_weights(torch, LM(), seed=140)
    stream = torch.tensor(np.tile(ints(141, V, 7), 5)[:30])
    chunks = stream.unfold(0, 7, 5)  # overlapping training windows
    opt = torch.optim.NAdam(model.parameters(), lr=0.02, momentum_decay=4e-3)
    train = []
    for _ in range(4):
        loss = model(chunks, labels=chunks)
        opt.zero_grad()
        loss.backward()
        opt.step()
        train.append(loss)
    model.eval()
    encodings = stream.unsqueeze(0)
    max_length, stride, seq_len = 10, 4, encodings.size(1)
    nlls, prev_end_loc, trg_lens = [], 0, []
    for begin_loc in range(0, seq_len, stride):
        end_loc = min(begin_loc + max_length, seq_len)
        trg_len = end_loc - prev_end_loc
        input_ids = encodings[:, begin_loc:end_loc]
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        with torch.no_grad():
            nlls.append(model(input_ids, labels=target_ids))
        trg_lens.append(trg_len)
        prev_end_loc = end_loc
        if end_loc == seq_len:
            break
    ppl = torch.exp(torch.stack(nlls).mean())
    with torch.inference_mode():
        logp = F.log_softmax(model(encodings), dim=-1)[0, :-1]
        token_nll = -logp.gather(1, encodings[0, 1:, None]).squeeze(1)
    return {
        "train": train, "nlls": nlls, "trg_lens": trg_lens, "ppl": ppl,
        "full_ppl": token_nll.mean().exp(), "bpc": token_nll.mean() / math.log(2),
        "token_nll": token_nll, "inference": torch.is_inference(token_nll),
    }  # fmt: skip


@program
def skipgram_negative_sampling_sparse_embeddings(torch):
    nn, F = torch.nn, torch.nn.functional
    V, D, K = 16, 6, 3
    corpus = ints(150, V, 40)
    freq = np.bincount(corpus, minlength=V).astype(np.float64) ** 0.75
    rng = np.random.default_rng(151)
    centers, contexts = [], []
    for i in range(len(corpus)):
        for j in (i - 2, i - 1, i + 1, i + 2):
            if 0 <= j < len(corpus):
                centers.append(corpus[i])
                contexts.append(corpus[j])
    centers, contexts = torch.tensor(np.array(centers)), torch.tensor(np.array(contexts))
    negatives = torch.tensor(rng.choice(V, size=(len(centers), K), p=freq / freq.sum()))

    class SkipGram(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_embed = nn.Embedding(V, D, sparse=True)
            self.out_embed = nn.Embedding(V, D, sparse=True)

        def forward(self, center, context, neg):
            v = self.in_embed(center)  # (B, D)
            pos = torch.bmm(self.out_embed(context).unsqueeze(1), v.unsqueeze(2)).squeeze()
            neg = torch.bmm(self.out_embed(neg), v.unsqueeze(2)).squeeze(2)
            return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(1)).mean()

    model = set_weights(torch, SkipGram(), seed=152)
    opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.05)
    losses = []
    for start in range(0, 64, 16):
        sl = slice(start, start + 16)
        loss = model(centers[sl], contexts[sl], negatives[sl])
        opt.zero_grad()
        loss.backward()
        if start == 0:
            g = model.in_embed.weight.grad
            first = {"is_sparse": g.is_sparse, "dense": g.coalesce().to_dense()}
        opt.step()
        losses.append(loss.item())
    emb = F.normalize(model.in_embed.weight.detach(), dim=1)
    return {"losses": losses, "first_grad": first, "params": params(model), "sim": emb @ emb.T}
