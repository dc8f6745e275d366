"""Classic NLP as its tutorials and libraries write it: word2vec's skip-gram with negative
sampling (frequent-word subsampling and unigram^0.75 noise drawn with NumPy) and CBOW, GloVe's
weighted least squares on a distance-weighted co-occurrence matrix, fastText's hashed character
n-gram bags through ``EmbeddingBag`` (offsets, mean/sum/max, ``per_sample_weights``), Kim's
char/word CNN with max-over-time pooling and a max-norm constraint, GRU encoder-decoders with
Bahdanau and Luong attention under fixed teacher-forcing decisions, beam search with GNMT's length
penalty, the Annotated Transformer's label smoothing, ``pack_padded_sequence`` with unsorted
lengths, the word-language-model example's truncated BPTT and perplexity, and NB-SVM features."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import grads, ints, params, set_weights

_TEXT = (
    "the king rules the kingdom . the queen rules the kingdom . a man walks to the castle . "
    "a woman walks to the castle . the king is a man . the queen is a woman . the prince is "
    "the son of the king . the princess is the daughter of the queen ."
).split()


def _vocab(words):
    itos = sorted(set(words))
    return itos, {w: i for i, w in enumerate(itos)}


@program(rtol=5e-4, atol=5e-5)  # (bmm over negatives and the embedding-grad accumulation order)
def nlpc_word2vec_skipgram_negative_sampling(torch):
    """Skip-gram with negative sampling as word2vec.c / the popular PyTorch ports train it:
    frequent-word subsampling and a dynamically shrunk window drawn with NumPy, negatives from
    the unigram distribution raised to 3/4, input vectors uniform in ±0.5/D and output vectors
    zero, a linearly decayed SGD rate; then cosine nearest neighbours and an analogy."""
    nn, F = torch.nn, torch.nn.functional
    itos, stoi = _vocab(_TEXT)
    V, D, K, WINDOW = len(itos), 10, 4, 3
    ids = np.array([stoi[w] for w in _TEXT])
    counts = np.bincount(ids, minlength=V).astype(np.float64)
    rng = np.random.default_rng(7001)
    freq, t = counts / counts.sum(), 0.02
    p_keep = np.minimum(1.0, np.sqrt(t / freq) + t / freq)
    kept = ids[rng.random(len(ids)) < p_keep[ids]]
    centers, contexts = [], []
    for i, w in enumerate(kept):
        b = rng.integers(1, WINDOW + 1)  # word2vec.c's reduced window
        for j in range(max(0, i - b), min(len(kept), i + b + 1)):
            if j != i:
                centers.append(w)
                contexts.append(kept[j])
    noise = counts**0.75
    negatives = rng.choice(V, size=(len(centers), K), p=noise / noise.sum())
    order = rng.permutation(len(centers))
    centers = torch.tensor(np.array(centers)[order])
    contexts = torch.tensor(np.array(contexts)[order])
    negatives = torch.tensor(negatives[order])

    class SkipGramNeg(nn.Module):
        def __init__(self, vocab_size, dim):
            super().__init__()
            self.in_embed = nn.Embedding(vocab_size, dim)
            self.out_embed = nn.Embedding(vocab_size, dim)

        def forward(self, center, context, neg):
            v = self.in_embed(center)  # (B, D)
            u = self.out_embed(context)  # (B, D)
            n = self.out_embed(neg)  # (B, K, D)
            pos_score = F.logsigmoid(torch.sum(u * v, dim=1))
            neg_score = F.logsigmoid(-torch.bmm(n, v.unsqueeze(2)).squeeze(2)).sum(1)
            return -(pos_score + neg_score).mean()

    model = SkipGramNeg(V, D)
    set_weights(torch, model, seed=7002, scale=0.5 / D)
    with torch.no_grad():
        model.out_embed.weight.zero_()
    B = 16
    steps = math.ceil(len(centers) / B) * 2
    opt = torch.optim.SGD(model.parameters(), lr=2.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(1e-4, 1.0 - s / steps))
    losses, lrs = [], []
    for _epoch in range(2):
        for start in range(0, len(centers), B):
            sl = slice(start, start + B)
            loss = model(centers[sl], contexts[sl], negatives[sl])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    emb = model.in_embed.weight.detach()
    unit = emb / emb.norm(dim=1, keepdim=True)
    sims = unit @ unit.T
    king = stoi["king"]
    top_vals, top_idx = sims[king].topk(4)
    query = unit[stoi["king"]] - unit[stoi["man"]] + unit[stoi["woman"]]
    analogy = F.cosine_similarity(query.unsqueeze(0), unit, dim=1)
    return {"n_kept": len(kept), "n_pairs": len(centers), "losses": losses, "lrs": lrs,
            "in_embed": emb, "out_embed": model.out_embed.weight, "sims": sims,
            "king_top_vals": top_vals, "king_top_idx": top_idx, "analogy": analogy}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (context means and Adam over a full-softmax output layer)
def nlpc_cbow_padded_context_mean_and_embeddingbag(torch):
    """CBOW as the PyTorch word-embedding tutorial extends it: a window of two words either
    side padded at the sentence edges with ``padding_idx``, the context embeddings averaged under
    a mask, a full-softmax output layer trained with Adam; the same averages from
    ``EmbeddingBag.from_pretrained(mode="mean", padding_idx=...)``, the log-softmax /
    ``nll_loss`` form of the loss, and predictions for held-out contexts."""
    nn, F = torch.nn, torch.nn.functional
    itos, stoi = _vocab(_TEXT)
    V, D, W = len(itos), 8, 2
    PAD = V
    ids = [stoi[w] for w in _TEXT]
    padded = [PAD] * W + ids + [PAD] * W
    ctx = [padded[i - W : i] + padded[i + 1 : i + W + 1] for i in range(W, W + len(ids))]
    contexts, targets = torch.tensor(ctx), torch.tensor(ids)

    class CBOW(nn.Module):
        def __init__(self, vocab_size, dim):
            super().__init__()
            self.embeddings = nn.Embedding(vocab_size + 1, dim, padding_idx=PAD)
            self.linear = nn.Linear(dim, vocab_size)

        def forward(self, context):
            embeds = self.embeddings(context)
            mask = (context != PAD).unsqueeze(-1).float()
            hidden = (embeds * mask).sum(1) / mask.sum(1)
            return self.linear(hidden), hidden

    model = set_weights(torch, CBOW(V, D), seed=7011)
    with torch.no_grad():
        model.embeddings.weight[PAD].fill_(0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _epoch in range(5):
        for start in range(0, len(ids), 12):
            logits, _ = model(contexts[start : start + 12])
            loss = F.cross_entropy(logits, targets[start : start + 12])
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.item())
    pad_grad = model.embeddings.weight.grad[PAD].clone()
    with torch.no_grad():
        logits, hidden = model(contexts)
        bag = nn.EmbeddingBag.from_pretrained(model.embeddings.weight, mode="mean", padding_idx=PAD)
        bag_hidden = bag(contexts)
        nll = F.nll_loss(F.log_softmax(logits, dim=1), targets)
        ce = F.cross_entropy(logits, targets, reduction="sum") / len(ids)
        held = torch.tensor([[stoi["the"], stoi["rules"], stoi["the"], stoi["kingdom"]],
                             [PAD, stoi["the"], stoi["is"], stoi["a"]]])  # fmt: skip
        probs = F.softmax(model(held)[0], dim=1)
    acc = (logits.argmax(1) == targets).float().mean()
    return {"losses": losses, "pad_grad": pad_grad, "hidden": hidden,
            "bag_matches": torch.allclose(bag_hidden, hidden, atol=1e-6), "nll": nll, "ce": ce,
            "acc": acc, "held_probs": probs, "held_pred": probs.argmax(1),
            "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (co-occurrence sums and Adagrad over summed squared errors)
def nlpc_glove_weighted_least_squares_adagrad(torch):
    """GloVe: a symmetric co-occurrence matrix accumulated with ``1/distance`` weights by
    ``index_put_(accumulate=True)``, its nonzero entries, the weighting ``f(x) = min(1,
    (x/x_max)^0.75)``, the weighted squared error of ``w_i·w̃_j + b_i + b̃_j - log X_ij``
    minimised with Adagrad over shuffled minibatches (order from NumPy), and ``W + W̃`` as the
    final vectors."""
    nn = torch.nn
    itos, stoi = _vocab(_TEXT)
    V, D, WINDOW, X_MAX, ALPHA = len(itos), 6, 3, 3.0, 0.75
    ids = np.array([stoi[w] for w in _TEXT])
    rows, cols, vals = [], [], []
    for i in range(len(ids)):
        for d in range(1, WINDOW + 1):
            if i + d < len(ids):
                rows += [ids[i], ids[i + d]]
                cols += [ids[i + d], ids[i]]
                vals += [1.0 / d, 1.0 / d]
    X = torch.zeros(V, V)
    X.index_put_(
        (torch.tensor(rows), torch.tensor(cols)), torch.tensor(vals, dtype=torch.float32),
        accumulate=True,
    )  # fmt: skip
    i_idx, j_idx = X.nonzero(as_tuple=True)
    x = X[i_idx, j_idx]
    weight = (x / X_MAX).pow(ALPHA).clamp(max=1.0)
    log_x = torch.log(x)

    class GloVe(nn.Module):
        def __init__(self, vocab_size, dim):
            super().__init__()
            self.wi = nn.Embedding(vocab_size, dim)
            self.wj = nn.Embedding(vocab_size, dim)
            self.bi = nn.Embedding(vocab_size, 1)
            self.bj = nn.Embedding(vocab_size, 1)

        def forward(self, i, j, x_log, f):
            dot = (self.wi(i) * self.wj(j)).sum(dim=1)
            pred = dot + self.bi(i).squeeze(1) + self.bj(j).squeeze(1)
            return 0.5 * torch.sum(f * (pred - x_log) ** 2)

    model = set_weights(torch, GloVe(V, D), seed=7021, scale=0.5)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    rng = np.random.default_rng(7022)
    n, B = len(x), 32
    epoch_losses = []
    for _epoch in range(6):
        perm = torch.tensor(rng.permutation(n))
        total = 0.0
        for start in range(0, n, B):
            b = perm[start : start + B]
            loss = model(i_idx[b], j_idx[b], log_x[b], weight[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        epoch_losses.append(total / n)
    vectors = (model.wi.weight + model.wj.weight).detach()
    normed = torch.nn.functional.normalize(vectors, dim=1)
    return {"X": X, "symmetric": torch.equal(X, X.T), "nnz": len(x), "i_idx": i_idx[:20],
            "j_idx": j_idx[:20], "weight": weight, "n_saturated": int((weight == 1).sum()),
            "epoch_losses": epoch_losses, "vectors": vectors, "cos": normed @ normed.T,
            "bias_i": model.bi.weight.squeeze(1)}  # fmt: skip


def _char_ngrams(word, nmin=3, nmax=4):
    w = "<" + word + ">"
    return [w[i : i + n] for n in range(nmin, nmax + 1) for i in range(len(w) - n + 1)]


def _fnv1a(s):
    h = 2166136261
    for byte in s.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


@program(rtol=5e-4, atol=5e-5)  # (bag sums in a different order)
def nlpc_fasttext_subword_ngram_embeddingbag(torch):
    """fastText: each word is its own id plus its hashed character 3- and 4-grams
    (``<where>`` boundaries, FNV-1a into buckets), a sentence is the flattened bag with
    ``offsets``; a mean ``EmbeddingBag`` classifier trained with SGD; out-of-vocabulary word
    vectors as the mean of their n-gram vectors; ``include_last_offset``, sum bags with
    ``per_sample_weights``, max bags, 2-D fixed-length input and the functional form."""
    nn, F = torch.nn, torch.nn.functional
    sents = [("the film was wonderful and moving", 1), ("a dull and boring film", 0),
             ("wonderful acting , moving story", 1), ("boring plot and dull acting", 0),
             ("the story was moving", 1), ("the film was dull", 0)]  # fmt: skip
    words = sorted({w for s, _ in sents for w in s.split()})
    stoi = {w: i for i, w in enumerate(words)}
    V, BUCKETS, D = len(words), 37, 8

    def subwords(word):
        base = [stoi[word]] if word in stoi else []
        return base + [V + _fnv1a(g) % BUCKETS for g in _char_ngrams(word)]

    flat, offsets = [], []
    for s, _ in sents:
        offsets.append(len(flat))
        for w in s.split():
            flat += subwords(w)
    text, offsets = torch.tensor(flat), torch.tensor(offsets)
    labels = torch.tensor([y for _, y in sents])

    class FastText(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.EmbeddingBag(V + BUCKETS, D, mode="mean")
            self.fc = nn.Linear(D, 2)

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    model = set_weights(torch, FastText(), seed=7031)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    losses = []
    for _ in range(6):
        loss = F.cross_entropy(model(text, offsets), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first_grad = model.embedding.weight.grad.clone()
    with torch.no_grad():
        table = model.embedding.weight
        oov = ["wonderfully", "boredom"]
        oov_ids = [subwords(w) for w in oov]
        oov_vec = F.embedding_bag(
            torch.tensor(sum(oov_ids, [])), table, torch.tensor([0, len(oov_ids[0])]),
            mode="mean",
        )  # fmt: skip
        last = torch.cat([offsets, torch.tensor([len(flat)])])
        bag_last = nn.EmbeddingBag.from_pretrained(table, mode="mean", include_last_offset=True)
        weights = torch.tensor(np.random.default_rng(7032).uniform(0.1, 1.0, len(flat)),
                               dtype=torch.float32)  # fmt: skip
        bag_sum = nn.EmbeddingBag.from_pretrained(table, mode="sum")
        bag_max = nn.EmbeddingBag.from_pretrained(table, mode="max")
        fixed = torch.tensor([subwords(w)[:5] for w in ["film", "story", "dull"]])
    ws = nn.EmbeddingBag(V + BUCKETS, D, mode="sum")
    set_weights(torch, ws, seed=7033)
    weighted = ws(text, offsets, per_sample_weights=weights)
    weighted.pow(2).sum().backward()
    return {"flat_len": len(flat), "offsets": offsets, "text": text, "losses": losses,
            "grad_after_last_step": first_grad, "table": table,
            "oov_vec": oov_vec, "oov_logits": model.fc(oov_vec),
            "last_offset": bag_last(text, last), "sum_weighted": bag_sum(text, offsets,
                                                                         per_sample_weights=weights),
            "max": bag_max(text, offsets), "fixed_2d": bag_max(fixed), "weighted": weighted,
            "ws_grad": ws.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (convolution sums and Adadelta's running averages)
def nlpc_char_cnn_max_over_time_adadelta_maxnorm(torch):
    """Kim's CNN for sentence classification on characters: an embedding with ``padding_idx``,
    parallel ``Conv1d`` filters of widths 2, 3 and 4, ReLU and max-over-time pooling
    (``F.max_pool1d(h, h.size(2))``), dropout (p=0), Adadelta with rho 0.95, and the l2 max-norm
    constraint on the output rows (``torch.renorm``) after each step; which positions won the
    pooling."""
    nn, F = torch.nn, torch.nn.functional
    alphabet = "abcdefghijklmnopqrstuvwxyz .,!"
    cidx = {c: i + 1 for i, c in enumerate(alphabet)}
    texts = [("great fun!", 1), ("awful, dull", 0), ("so good", 1), ("bad plot.", 0),
             ("loved it", 1), ("boring", 0), ("fun and great", 1), ("dull, bad", 0)]  # fmt: skip
    L = 14
    data = torch.tensor([[cidx[c] for c in s[:L]] + [0] * (L - len(s[:L])) for s, _ in texts])
    labels = torch.tensor([y for _, y in texts])

    class CharCNN(nn.Module):
        def __init__(self, n_chars, emb=6, n_filters=5, widths=(2, 3, 4), n_classes=2):
            super().__init__()
            self.embedding = nn.Embedding(n_chars, emb, padding_idx=0)
            self.convs = nn.ModuleList([nn.Conv1d(emb, n_filters, w) for w in widths])
            self.dropout = nn.Dropout(0.0)
            self.fc = nn.Linear(n_filters * len(widths), n_classes)

        def forward(self, x):
            x = self.embedding(x).transpose(1, 2)  # (B, emb, L)
            pooled = []
            for conv in self.convs:
                h = F.relu(conv(x))
                pooled.append(F.max_pool1d(h, h.size(2)).squeeze(2))
            return self.fc(self.dropout(torch.cat(pooled, 1)))

    model = set_weights(torch, CharCNN(len(alphabet) + 1), seed=7041, scale=0.6)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-6)
    losses, norms = [], []
    for _ in range(6):
        model.train()
        loss = F.cross_entropy(model(data), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.fc.weight.data = torch.renorm(model.fc.weight.data, p=2, dim=0, maxnorm=0.9)
        losses.append(loss.item())
        norms.append(model.fc.weight.norm(dim=1))
    model.eval()
    with torch.no_grad():
        x = model.embedding(data).transpose(1, 2)
        pre = model.convs[1](x)
        # (windows over the same characters give equal maxima, which a BLAS kernel may round
        # apart on one CPU and not on another: a ramp of 1e-3 makes the first of them win)
        ramp = torch.arange(pre.size(2), dtype=pre.dtype) * 1e-3
        _, where = F.max_pool1d(pre - ramp, pre.size(2), return_indices=True)
        logits = model(data)
    return {"losses": losses, "row_norms": norms, "where": where.squeeze(2),
            "pre_max": pre.max(dim=2).values, "probs": logits.softmax(-1),
            "pred": logits.argmax(-1), "params": params(model)}  # fmt: skip


def _toy_pairs(n, vocab, seed):
    """Source sequences and their reversed, shifted copies as targets (tokens 3..vocab-1)."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(3, 7, n)
    srcs = [rng.integers(3, vocab, k) for k in lens]
    trgs = [np.array([(t - 3 + 1) % (vocab - 3) + 3 for t in s[::-1]]) for s in srcs]
    return srcs, trgs


@program(rtol=5e-4, atol=5e-5)  # (GRU recurrences over several decoder steps)
def nlpc_seq2seq_gru_bahdanau_packed_teacher_forcing(torch):
    """An NMT tutorial's encoder-decoder: a bidirectional GRU encoder over
    ``pack_padded_sequence(..., enforce_sorted=False)`` whose final states feed ``tanh(fc(...))``,
    Bahdanau's additive attention masked at padding, a GRU decoder on ``[embedding; context]``,
    per-step teacher-forcing coin flips fixed from NumPy, padded cross entropy with
    ``ignore_index``, gradient clipping and Adam."""
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    PAD, SOS, EOS, V = 0, 1, 2, 10
    srcs, trgs = _toy_pairs(4, V, 7051)
    src_len = torch.tensor([len(s) for s in srcs])
    src = rnn.pad_sequence([torch.tensor(s) for s in srcs], padding_value=PAD)  # (S, B)
    trg = rnn.pad_sequence([torch.tensor(np.r_[SOS, t, EOS]) for t in trgs], padding_value=PAD)
    E, H = 6, 7

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E, padding_idx=PAD)
            self.rnn = nn.GRU(E, H, bidirectional=True)
            self.fc = nn.Linear(2 * H, H)

        def forward(self, src, lengths):
            packed = rnn.pack_padded_sequence(self.embedding(src), lengths, enforce_sorted=False)
            out, hidden = self.rnn(packed)
            out, _ = rnn.pad_packed_sequence(out, total_length=src.size(0))
            return out, torch.tanh(self.fc(torch.cat((hidden[-2], hidden[-1]), dim=1)))

    class BahdanauAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Linear(H, H, bias=False)
            self.U = nn.Linear(2 * H, H)
            self.v = nn.Linear(H, 1, bias=False)

        def forward(self, hidden, enc, mask):
            energy = torch.tanh(self.W(hidden).unsqueeze(0) + self.U(enc))  # (S, B, H)
            scores = self.v(energy).squeeze(2).t()  # (B, S)
            return F.softmax(scores.masked_fill(mask == 0, -1e10), dim=1)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E, padding_idx=PAD)
            self.attention = BahdanauAttention()
            self.rnn = nn.GRU(E + 2 * H, H)
            self.out = nn.Linear(H + 2 * H + E, V)

        def forward(self, token, hidden, enc, mask):
            emb = self.embedding(token).unsqueeze(0)
            a = self.attention(hidden, enc, mask)
            context = torch.bmm(a.unsqueeze(1), enc.permute(1, 0, 2)).permute(1, 0, 2)
            output, hidden = self.rnn(torch.cat((emb, context), dim=2), hidden.unsqueeze(0))
            pred = self.out(torch.cat((output.squeeze(0), context.squeeze(0), emb.squeeze(0)), 1))
            return pred, hidden.squeeze(0), a

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = Encoder(), Decoder()

        def forward(self, src, lengths, trg, force):
            T, B = trg.shape
            outputs = torch.zeros(T, B, V)
            attentions = torch.zeros(T, B, src.size(0))
            enc, hidden = self.encoder(src, lengths)
            mask = (src != PAD).t()
            token = trg[0]
            for t in range(1, T):
                pred, hidden, a = self.decoder(token, hidden, enc, mask)
                outputs[t], attentions[t] = pred, a
                token = trg[t] if force[t] else pred.argmax(1)
            return outputs, attentions

    model = set_weights(torch, Seq2Seq(), seed=7052)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    coin = np.random.default_rng(7053).random((5, trg.size(0))) < 0.5
    losses, gnorms = [], []
    for step in range(5):
        outputs, attn = model(src, src_len, trg, coin[step])
        loss = F.cross_entropy(outputs[1:].reshape(-1, V), trg[1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        gnorms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        losses.append(loss.item())
    short = int(src_len.argmin())
    return {"src": src, "trg": trg, "losses": losses, "grad_norms": gnorms, "attn": attn,
            "attn_pad_mass": attn[1:, short, src_len[short]:].sum(),
            "attn_short": attn[1:, short], "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (GRU cell recurrences and softmaxes over decoder steps)
def nlpc_luong_global_attention_dot_general_concat_input_feeding(torch):
    """Luong et al.'s global attention with its three scores (``dot``, ``general``,
    ``concat``) on a unidirectional GRU encoder, the attentional hidden state
    ``tanh(W_c [c; h])`` fed back into the next decoder input (input feeding), a ``GRUCell``
    decoder under teacher forcing, masked NLL; one step of training per score and the
    attention maps."""
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    PAD, SOS, EOS, V, E, H = 0, 1, 2, 9, 5, 6
    srcs, trgs = _toy_pairs(3, V, 7061)
    src = rnn.pad_sequence([torch.tensor(s) for s in srcs], batch_first=True)
    trg = rnn.pad_sequence([torch.tensor(np.r_[SOS, t, EOS]) for t in trgs], batch_first=True)
    src_mask = src != PAD

    class LuongAttention(nn.Module):
        def __init__(self, method):
            super().__init__()
            self.method = method
            if method == "general":
                self.Wa = nn.Linear(H, H, bias=False)
            elif method == "concat":
                self.Wa = nn.Linear(2 * H, H, bias=False)
                self.va = nn.Parameter(torch.zeros(H))

        def forward(self, h, enc, mask):  # h (B, H), enc (B, S, H)
            if self.method == "dot":
                scores = torch.bmm(enc, h.unsqueeze(2)).squeeze(2)
            elif self.method == "general":
                scores = torch.bmm(self.Wa(enc), h.unsqueeze(2)).squeeze(2)
            else:
                hh = h.unsqueeze(1).expand(-1, enc.size(1), -1)
                scores = torch.tanh(self.Wa(torch.cat((hh, enc), 2))) @ self.va
            scores = scores.masked_fill(~mask, float("-inf"))
            return F.softmax(scores, dim=1)

    class Model(nn.Module):
        def __init__(self, method):
            super().__init__()
            self.src_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.trg_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.encoder = nn.GRU(E, H, batch_first=True)
            self.cell = nn.GRUCell(E + H, H)
            self.attn = LuongAttention(method)
            self.Wc = nn.Linear(2 * H, H, bias=False)
            self.out = nn.Linear(H, V)

        def forward(self, src, trg):
            enc, h = self.encoder(self.src_emb(src))
            h = h.squeeze(0)
            feed = torch.zeros(src.size(0), H)
            logps, maps = [], []
            for t in range(trg.size(1) - 1):
                h = self.cell(torch.cat((self.trg_emb(trg[:, t]), feed), 1), h)
                a = self.attn(h, enc, src_mask)
                c = torch.bmm(a.unsqueeze(1), enc).squeeze(1)
                feed = torch.tanh(self.Wc(torch.cat((c, h), 1)))
                logps.append(F.log_softmax(self.out(feed), dim=1))
                maps.append(a)
            return torch.stack(logps, 1), torch.stack(maps, 1)

    results = {}
    for k, method in enumerate(("dot", "general", "concat")):
        model = set_weights(torch, Model(method), seed=7062 + k)
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        losses = []
        for _ in range(3):
            logp, maps = model(src, trg)
            gold = trg[:, 1:]
            mask = gold != PAD
            nll = -logp.gather(2, gold.unsqueeze(2)).squeeze(2)
            loss = nll.masked_select(mask).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results[method] = {"losses": losses, "maps": maps, "Wc": model.Wc.weight,
                           "cell_grad": model.cell.weight_hh.grad}  # fmt: skip
    results["src_mask"] = src_mask
    return results


@program(rtol=5e-4, atol=5e-5)  # (GRU steps and log-softmax sums along beams)
def nlpc_beam_search_gnmt_length_penalty(torch):
    """Beam search over a small GRU decoder as NMT toolkits write it: beams flattened into the
    batch, ``topk`` over ``beam x vocab`` scores, backpointers by ``//`` and ``%``, hidden
    states reordered with ``index_select``, finished hypotheses set aside at EOS and ranked by
    GNMT's length penalty ``((5 + |Y|) / 6) ** alpha``; greedy decoding for comparison."""
    nn, F = torch.nn, torch.nn.functional
    SOS, EOS, V, E, H, BEAM, MIN_LEN, MAX_LEN = 0, 1, 8, 5, 7, 3, 2, 7

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            self.gru = nn.GRU(E, H, batch_first=True)
            self.out = nn.Linear(H, V)

        def forward(self, tokens, hidden):
            out, hidden = self.gru(self.embedding(tokens).unsqueeze(1), hidden)
            return F.log_softmax(self.out(out.squeeze(1)), dim=-1), hidden

    model = set_weights(torch, Decoder(), seed=7071, scale=1.2)
    model.eval()
    h0 = torch.tensor(np.random.default_rng(7072).standard_normal((1, 1, H)), dtype=torch.float32)

    def length_penalty(length, alpha):
        return ((5.0 + length) / 6.0) ** alpha

    def beam_search(alpha):
        tokens = torch.full((1,), SOS, dtype=torch.long)
        hidden = h0
        scores = torch.zeros(1)
        hyps = [[]]
        finished = []
        with torch.no_grad():
            for step in range(MAX_LEN):
                logp, hidden = model(tokens, hidden)
                if step < MIN_LEN:
                    logp[:, EOS] = float("-inf")  # a minimum output length
                cand = (scores.unsqueeze(1) + logp).view(-1)
                top, idx = cand.topk(2 * BEAM)
                beam_idx = torch.div(idx, V, rounding_mode="floor")
                tok_idx = idx % V
                keep_b, keep_t, keep_s = [], [], []
                for s, b, t in zip(top.tolist(), beam_idx.tolist(), tok_idx.tolist()):
                    if t == EOS:
                        lp = length_penalty(len(hyps[b]) + 1, alpha)
                        finished.append((s / lp, s, hyps[b] + [t]))
                    else:
                        keep_b.append(b)
                        keep_t.append(t)
                        keep_s.append(s)
                    if len(keep_b) == BEAM:
                        break
                hyps = [hyps[b] + [t] for b, t in zip(keep_b, keep_t)]
                hidden = hidden.index_select(1, torch.tensor(keep_b))
                tokens = torch.tensor(keep_t)
                scores = torch.tensor(keep_s)
        for s, h in zip(scores.tolist(), hyps):
            finished.append((s / length_penalty(len(h), alpha), s, h))
        finished.sort(key=lambda f: -f[0])
        return finished

    out = {}
    for alpha in (0.0, 0.6, 1.5):
        fin = beam_search(alpha)
        out[f"alpha_{alpha}"] = {"best": fin[0][2], "best_norm": fin[0][0], "best_raw": fin[0][1],
                                 "n_finished": len(fin),
                                 "top3_norm": [f[0] for f in fin[:3]]}  # fmt: skip
    greedy, tokens, hidden, total = [], torch.tensor([SOS]), h0, torch.zeros(())
    with torch.no_grad():
        for _ in range(MAX_LEN):
            logp, hidden = model(tokens, hidden)
            if len(greedy) < MIN_LEN:
                logp[:, EOS] = float("-inf")
            lp, tokens = logp.max(dim=-1)
            total = total + lp.squeeze()
            greedy.append(tokens.item())
            if tokens.item() == EOS:
                break
    out["greedy"] = greedy
    out["greedy_logp"] = total
    return out


@program
def nlpc_annotated_transformer_label_smoothing_kldiv(torch):
    """The Annotated Transformer's ``LabelSmoothing``: a true distribution filled with
    ``smoothing / (size - 2)``, ``scatter_`` of the confidence at the targets, the padding
    column zeroed and padded rows cleared with ``index_fill_``, ``KLDivLoss(reduction="sum")``
    on log-probabilities; compared with ``cross_entropy(label_smoothing=...)`` and trained a few
    steps with Adam and the Noam warmup schedule."""
    nn = torch.nn
    PAD, V, N = 0, 7, 10

    class LabelSmoothing(nn.Module):
        def __init__(self, size, padding_idx, smoothing=0.0):
            super().__init__()
            self.criterion = nn.KLDivLoss(reduction="sum")
            self.padding_idx = padding_idx
            self.confidence = 1.0 - smoothing
            self.smoothing = smoothing
            self.size = size
            self.true_dist = None

        def forward(self, x, target):
            assert x.size(1) == self.size
            true_dist = x.data.clone()
            true_dist.fill_(self.smoothing / (self.size - 2))
            true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
            true_dist[:, self.padding_idx] = 0
            mask = torch.nonzero(target.data == self.padding_idx)
            if mask.dim() > 0:
                true_dist.index_fill_(0, mask.squeeze(), 0.0)
            self.true_dist = true_dist
            return self.criterion(x, true_dist.clone().detach())

    target = torch.tensor(ints(7081, V, N))
    target[[2, 7]] = PAD
    proj = set_weights(torch, nn.Linear(5, V), seed=7082)
    feats = torch.tensor(np.random.default_rng(7083).standard_normal((N, 5)), dtype=torch.float32)
    crit = LabelSmoothing(V, PAD, smoothing=0.1)
    d_model, warmup = 5, 4

    def rate(step):
        step = max(step, 1)
        return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    opt = torch.optim.Adam(proj.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=rate)
    losses, builtin, lrs = [], [], []
    for _ in range(6):
        logp = proj(feats).log_softmax(dim=-1)
        ntokens = (target != PAD).sum()
        loss = crit(logp, target) / ntokens
        with torch.no_grad():
            builtin.append(nn.functional.cross_entropy(
                proj(feats), target, ignore_index=PAD, label_smoothing=0.1))  # fmt: skip
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    return {"true_dist": crit.true_dist, "row_sums": crit.true_dist.sum(1), "losses": losses,
            "builtin": builtin, "lrs": lrs, "weight": proj.weight,
            "bias_grad": proj.bias.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (LSTM recurrences, packed vs one-by-one)
def nlpc_pack_padded_unsorted_bilstm_classifier(torch):
    """A bidirectional LSTM sentence classifier on an unsorted padded batch:
    ``pack_padded_sequence(enforce_sorted=False)``, ``pad_packed_sequence(batch_first=True,
    total_length=...)``, the final forward/backward states from ``h_n`` (already in the original
    order), the last valid outputs gathered by length, mean pooling under the mask, each
    sequence run alone for comparison, and training with RMSprop."""
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    V, E, H, PAD = 12, 5, 4, 0
    lens = [3, 6, 2, 5, 4]
    rng = np.random.default_rng(7091)
    seqs = [torch.tensor(rng.integers(1, V, n)) for n in lens]
    x = rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    lengths = torch.tensor(lens)
    labels = torch.tensor([0, 1, 0, 1, 1])

    class BiLSTMClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E, padding_idx=PAD)
            self.lstm = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(4 * H, 2)

        def forward(self, x, lengths):
            packed = rnn.pack_padded_sequence(
                self.embedding(x), lengths, batch_first=True, enforce_sorted=False
            )
            out, (h_n, c_n) = self.lstm(packed)
            out, out_lens = rnn.pad_packed_sequence(out, batch_first=True, total_length=8)
            final = torch.cat((h_n[-2], h_n[-1]), dim=1)
            mask = (torch.arange(out.size(1)).unsqueeze(0) < out_lens.unsqueeze(1)).unsqueeze(2)
            mean = (out * mask).sum(1) / out_lens.unsqueeze(1).float()
            return self.fc(torch.cat((final, mean), 1)), out, out_lens, final, packed

    model = set_weights(torch, BiLSTMClassifier(), seed=7092)
    logits, out, out_lens, final, packed = model(x, lengths)
    idx = (lengths - 1).view(-1, 1, 1).expand(-1, 1, 2 * H)
    last_fwd = out.gather(1, idx).squeeze(1)[:, :H]
    alone = []
    with torch.no_grad():
        for s in seqs:
            o, (h, _) = model.lstm(model.embedding(s).unsqueeze(0))
            alone.append(torch.cat((h[0, 0], h[1, 0])))
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9)
    losses = []
    for _ in range(4):
        logits = model(x, lengths)[0]
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"out": out, "out_lens": out_lens, "final": final, "last_fwd": last_fwd,
            "fwd_matches_h_n": torch.allclose(last_fwd, final[:, :H], atol=1e-6),
            "alone": torch.stack(alone), "batch_sizes": packed.batch_sizes,
            "sorted_indices": packed.sorted_indices, "unsorted_indices": packed.unsorted_indices,
            "losses": losses, "probs": logits.softmax(1), "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (LSTM recurrences over several BPTT windows)
def nlpc_word_language_model_bptt_repackage_perplexity(torch):
    """PyTorch's word_language_model example: ``batchify`` into columns, ``get_batch`` windows
    of ``bptt`` tokens, ``repackage_hidden`` (detach) between windows, a tied-weight LSTM LM,
    ``clip_grad_norm_`` and the example's manual update ``p.data.add_(p.grad, alpha=-lr)``,
    annealing the rate when validation loss stops improving; perplexity as ``exp`` of the mean
    token loss."""
    nn, F = torch.nn, torch.nn.functional
    itos, stoi = _vocab(_TEXT)
    V, D, BPTT = len(itos), 6, 5
    ids = torch.tensor([stoi[w] for w in _TEXT])
    train_ids, val_ids = ids[:48], ids[48:]

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()

    def get_batch(source, i):
        seq_len = min(BPTT, len(source) - 1 - i)
        return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.0)
            self.encoder = nn.Embedding(V, D)
            self.rnn = nn.LSTM(D, D, 2, dropout=0.0)
            self.decoder = nn.Linear(D, V)
            self.decoder.weight = self.encoder.weight

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
            return F.log_softmax(self.decoder(self.drop(output)).view(-1, V), dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(2, bsz, D), weight.new_zeros(2, bsz, D))

    train_data, val_data = batchify(train_ids, 4), batchify(val_ids, 2)
    model = set_weights(torch, RNNModel(), seed=7101)
    criterion = nn.NLLLoss()

    def evaluate(source):
        model.eval()
        total, hidden = 0.0, model.init_hidden(source.size(1))
        with torch.no_grad():
            for i in range(0, source.size(0) - 1, BPTT):
                data, targets = get_batch(source, i)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total += len(data) * criterion(output, targets).item()
        return total / (len(source) - 1)

    lr, best_val = 5.0, None
    train_losses, val_losses, lrs = [], [], []
    for _epoch in range(4):
        model.train()
        hidden = model.init_hidden(4)
        for i in range(0, train_data.size(0) - 1, BPTT):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            train_losses.append(loss.item())
        val_loss = evaluate(val_data)
        if best_val is None or val_loss < best_val:
            best_val = val_loss
        else:
            lr /= 4.0
        val_losses.append(val_loss)
        lrs.append(lr)
    return {"train_data": train_data, "val_data": val_data, "train_losses": train_losses,
            "val_losses": val_losses, "val_ppl": [math.exp(v) for v in val_losses], "lrs": lrs,
            "tied": model.decoder.weight is model.encoder.weight,
            "n_params": sum(p.numel() for p in model.parameters()),
            "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (sums over the vocabulary)
def nlpc_tfidf_nbsvm_log_count_ratio_logistic(torch):
    """Bag-of-words baselines: binarised and raw count matrices built with ``scatter_add_``,
    scikit-learn's smoothed idf and l2-normalised tf-idf rows, cosine similarities between
    documents; Wang and Manning's NB-SVM log-count ratio ``r = log((p/|p|_1) / (q/|q|_1))`` with
    add-alpha smoothing scaling the binarised features of a logistic regression trained with
    SGD and weight decay; multinomial naive Bayes log-posteriors."""
    F = torch.nn.functional
    docs = [("good great fun film", 1), ("bad boring film", 0), ("great acting good story", 1),
            ("boring bad acting", 0), ("fun story good fun", 1), ("bad film bad story", 0),
            ("great fun", 1), ("boring story", 0)]  # fmt: skip
    vocab = sorted({w for d, _ in docs for w in d.split()})
    stoi = {w: i for i, w in enumerate(vocab)}
    N, V = len(docs), len(vocab)
    counts = torch.zeros(N, V)
    for i, (d, _) in enumerate(docs):
        idx = torch.tensor([stoi[w] for w in d.split()])
        counts[i].scatter_add_(0, idx, torch.ones(len(idx)))
    y = torch.tensor([float(lab) for _, lab in docs])
    binary = (counts > 0).float()
    df = binary.sum(0)
    idf = torch.log((1 + N) / (1 + df)) + 1
    tfidf = F.normalize(counts * idf, p=2, dim=1)
    cos = tfidf @ tfidf.T
    alpha = 1.0
    p = alpha + binary[y == 1].sum(0)
    q = alpha + binary[y == 0].sum(0)
    r = torch.log((p / p.abs().sum()) / (q / q.abs().sum()))
    feats = binary * r
    w = torch.zeros(V, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.5, weight_decay=1e-3)
    losses = []
    for _ in range(8):
        loss = F.binary_cross_entropy_with_logits(feats @ w + b, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # multinomial naive Bayes
    class_counts = torch.stack([counts[y == 0].sum(0), counts[y == 1].sum(0)])
    log_theta = torch.log((class_counts + alpha) / (class_counts + alpha).sum(1, keepdim=True))
    log_prior = torch.log(torch.bincount(y.long()).float() / N)
    joint = counts @ log_theta.T + log_prior
    posterior = joint - torch.logsumexp(joint, dim=1, keepdim=True)
    ranked = r.sort(descending=True, stable=True).indices  # (ties keep vocabulary order)
    return {"counts": counts, "idf": idf, "tfidf": tfidf, "cos": cos, "r": r, "losses": losses,
            "w": w, "b": b, "probs": torch.sigmoid(feats @ w + b),
            "nb_posterior": posterior.exp(), "nb_pred": posterior.argmax(1),
            "ranked_words": [vocab[i] for i in ranked.tolist()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (cluster log-softmaxes and Adagrad)
def nlpc_adaptive_softmax_word_lm_cutoffs(torch):
    """Grave et al.'s adaptive softmax as word LMs use it: token ids ordered by frequency (most
    frequent first), ``nn.AdaptiveLogSoftmaxWithLoss`` with two cutoffs and ``div_value`` on a
    GRU's outputs, its ``output``/``loss`` trained with Adagrad, ``log_prob`` over the whole
    vocabulary (rows summing to one in probability), ``predict`` and the perplexity."""
    nn = torch.nn
    words = _TEXT
    freq = {}
    for w in words:
        freq[w] = freq.get(w, 0) + 1
    itos = sorted(freq, key=lambda w: (-freq[w], w))
    stoi = {w: i for i, w in enumerate(itos)}
    V, D = len(itos), 8
    ids = torch.tensor([stoi[w] for w in words])
    x, y = ids[:-1].view(1, -1), ids[1:]

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.rnn = nn.GRU(D, D, batch_first=True)
            self.crit = nn.AdaptiveLogSoftmaxWithLoss(D, V, cutoffs=[4, 10], div_value=2.0)

        def forward(self, x):
            return self.rnn(self.emb(x))[0].squeeze(0)

    model = set_weights(torch, LM(), seed=7111)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    losses, outs = [], []
    for _ in range(5):
        h = model(x)
        res = model.crit(h, y)
        opt.zero_grad()
        res.loss.backward()
        opt.step()
        losses.append(res.loss.item())
        outs.append(res.output[:6])
    with torch.no_grad():
        h = model(x)
        logp = model.crit.log_prob(h)
        pred = model.crit.predict(h)
    return {"itos_head": itos[:4], "losses": losses, "outs": outs, "logp": logp,
            "prob_sums": logp.exp().sum(1), "pred": pred,
            "pred_matches": torch.equal(pred, logp.argmax(1)),
            "ppl": torch.exp(-logp.gather(1, y.unsqueeze(1)).mean()),
            "head_weight": model.crit.head.weight, "tail0": model.crit.tail[0][1].weight,
            "n_clusters": model.crit.n_clusters}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (sums along Huffman paths)
def nlpc_word2vec_hierarchical_softmax_huffman(torch):
    """word2vec's hierarchical softmax: a Huffman tree over word counts built with ``heapq``,
    each word's path of inner nodes and its binary code padded to the longest path, the loss
    ``-sum log sigmoid((1 - 2 code) * v_c . u_node)`` over the path under a mask, CBOW contexts,
    SGD; the probabilities of all words summing to one at every context."""
    import heapq

    nn, F = torch.nn, torch.nn.functional
    itos, stoi = _vocab(_TEXT)
    V, D = len(itos), 6
    counts = np.bincount([stoi[w] for w in _TEXT], minlength=V)
    heap = [(int(c), i, i) for i, c in enumerate(counts)]  # (count, tiebreak, node)
    heapq.heapify(heap)
    parent, code, nxt = {}, {}, V
    while len(heap) > 1:
        c1, _, n1 = heapq.heappop(heap)
        c2, _, n2 = heapq.heappop(heap)
        parent[n1], code[n1], parent[n2], code[n2] = nxt, 0, nxt, 1
        heapq.heappush(heap, (c1 + c2, nxt, nxt))
        nxt += 1
    root = heap[0][2]
    paths, codes = [], []
    for w in range(V):
        p, c, n = [], [], w
        while n != root:
            c.append(code[n])
            p.append(parent[n] - V)
            n = parent[n]
        paths.append(p[::-1])
        codes.append(c[::-1])
    L = max(len(p) for p in paths)
    path_t = torch.tensor([p + [0] * (L - len(p)) for p in paths])
    code_t = torch.tensor([c + [0] * (L - len(c)) for c in codes], dtype=torch.float32)
    mask_t = torch.tensor([[1.0] * len(p) + [0.0] * (L - len(p)) for p in paths])

    ids = [stoi[w] for w in _TEXT]
    ctx = torch.tensor([[ids[i - 2], ids[i - 1], ids[i + 1], ids[i + 2]]
                        for i in range(2, len(ids) - 2)])  # fmt: skip
    tgt = torch.tensor(ids[2:-2])

    class HSoftmaxCBOW(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.nodes = nn.Embedding(V - 1, D)

        def node_logp(self, h, words):
            u = self.nodes(path_t[words])  # (B, L, D)
            s = (u @ h.unsqueeze(2)).squeeze(2) * (1 - 2 * code_t[words])
            return (F.logsigmoid(s) * mask_t[words]).sum(1)

        def forward(self, context, target):
            h = self.emb(context).mean(1)
            return -self.node_logp(h, target).mean(), h

    model = set_weights(torch, HSoftmaxCBOW(), seed=7121, scale=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    losses = []
    for _ in range(6):
        loss, _ = model(ctx, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        _, h = model(ctx[:5], tgt[:5])
        all_words = torch.arange(V)
        table = torch.stack([model.node_logp(h, all_words.new_full((5,), w)) for w in range(V)], 1)
    return {"path_lengths": mask_t.sum(1), "paths": path_t, "codes": code_t, "losses": losses,
            "prob_sums": table.exp().sum(1), "table": table, "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (matmuls over concatenated context embeddings)
def nlpc_bengio_nplm_unfold_ngrams_direct_connections(torch):
    """Bengio et al.'s neural probabilistic language model: n-gram contexts cut with
    ``unfold``, the concatenated context embeddings through a tanh hidden layer plus the direct
    connections ``W x``, ``y = b + W x + U tanh(d + H x)``; trained with SGD and weight decay,
    evaluated by perplexity, and the next-word distribution of a context."""
    nn, F = torch.nn, torch.nn.functional
    itos, stoi = _vocab(_TEXT)
    V, M, N, Hdim = len(itos), 5, 3, 12
    ids = torch.tensor([stoi[w] for w in _TEXT])
    grams = ids.unfold(0, N + 1, 1)  # (T - N, N + 1)
    context, target = grams[:, :N], grams[:, N]

    class NPLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.Embedding(V, M)
            self.H = nn.Linear(N * M, Hdim)
            self.U = nn.Linear(Hdim, V, bias=False)
            self.W = nn.Linear(N * M, V)

        def forward(self, ctx):
            x = self.C(ctx).view(ctx.size(0), -1)
            return self.W(x) + self.U(torch.tanh(self.H(x)))

    model = set_weights(torch, NPLM(), seed=7131)
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-4)
    losses = []
    for _epoch in range(4):
        for start in range(0, len(target), 20):
            loss = F.cross_entropy(model(context[start : start + 20]), target[start : start + 20])
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits = model(context)
        nll = F.cross_entropy(logits, target, reduction="none")
        query = torch.tensor([[stoi["the"], stoi["king"], stoi["is"]]])
        dist = F.softmax(model(query), dim=-1)
    return {"grams": grams[:4], "losses": losses, "nll": nll, "ppl": nll.mean().exp(),
            "dist": dist, "next": itos[int(dist.argmax())], "params": params(model)}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def nlpc_hmm_pos_forward_backward_viterbi_baum_welch(torch):
    """A part-of-speech HMM in log space: the forward and backward recursions with
    ``logsumexp``, posteriors, Viterbi with backpointers, supervised estimates by counting with
    ``index_put_(accumulate=True)`` and add-one smoothing, then two Baum-Welch steps
    (expected transition counts from ``alpha``, ``beta`` and emissions)."""
    tags = ["DET", "NOUN", "VERB", "ADP"]
    tagged = [("the king rules the kingdom", "DET NOUN VERB DET NOUN"),
              ("a man walks to the castle", "DET NOUN VERB ADP DET NOUN"),
              ("the queen is a woman", "DET NOUN VERB DET NOUN"),
              ("the prince is the son of the king", "DET NOUN VERB DET NOUN ADP DET NOUN")]  # fmt: skip
    itos, stoi = _vocab([w for s, _ in tagged for w in s.split()])
    tid = {t: i for i, t in enumerate(tags)}
    K, V = len(tags), len(itos)
    pairs = [([stoi[w] for w in s.split()], [tid[t] for t in ts.split()]) for s, ts in tagged]
    trans_c, emit_c, start_c = torch.zeros(K, K), torch.zeros(K, V), torch.zeros(K)
    for ws, ts in pairs:
        w, t = torch.tensor(ws), torch.tensor(ts)
        trans_c.index_put_((t[:-1], t[1:]), torch.ones(len(ts) - 1), accumulate=True)
        emit_c.index_put_((t, w), torch.ones(len(ws)), accumulate=True)
        start_c[ts[0]] += 1
    log_A = torch.log((trans_c + 1) / (trans_c + 1).sum(1, keepdim=True)).double()
    log_B = torch.log((emit_c + 1) / (emit_c + 1).sum(1, keepdim=True)).double()
    log_pi = torch.log((start_c + 1) / (start_c + 1).sum()).double()

    def forward_backward(obs, log_A, log_B, log_pi):
        T = len(obs)
        alpha = torch.empty(T, K, dtype=torch.float64)
        beta = torch.zeros(T, K, dtype=torch.float64)
        alpha[0] = log_pi + log_B[:, obs[0]]
        for t in range(1, T):
            alpha[t] = torch.logsumexp(alpha[t - 1].unsqueeze(1) + log_A, dim=0) + log_B[:, obs[t]]
        for t in range(T - 2, -1, -1):
            beta[t] = torch.logsumexp(log_A + (log_B[:, obs[t + 1]] + beta[t + 1]), dim=1)
        return alpha, beta, torch.logsumexp(alpha[-1], 0)

    def viterbi(obs):
        delta = log_pi + log_B[:, obs[0]]
        back = []
        for t in range(1, len(obs)):
            scores = delta.unsqueeze(1) + log_A
            delta, ptr = scores.max(0)
            delta = delta + log_B[:, obs[t]]
            back.append(ptr)
        best = [int(delta.argmax())]
        for ptr in reversed(back):
            best.append(int(ptr[best[-1]]))
        return best[::-1], delta.max()

    test = [stoi[w] for w in "the woman walks to the kingdom".split()]
    alpha, beta, loglik = forward_backward(test, log_A, log_B, log_pi)
    posterior = (alpha + beta - loglik).exp()
    path, path_score = viterbi(test)
    A, B, pi = log_A, log_B, log_pi
    logliks = []
    for _ in range(2):
        xi_sum = torch.zeros(K, K, dtype=torch.float64)
        gamma_emit = torch.zeros(K, V, dtype=torch.float64)
        gamma0 = torch.zeros(K, dtype=torch.float64)
        total = 0.0
        for ws, _ in pairs:
            obs = torch.tensor(ws)
            a, b, ll = forward_backward(ws, A, B, pi)
            gamma = (a + b - ll).exp()
            xi = (a[:-1, :, None] + A[None] + (B[:, obs[1:]].T + b[1:])[:, None, :] - ll).exp()
            xi_sum += xi.sum(0)
            gamma_emit.index_add_(1, obs, gamma.T)
            gamma0 += gamma[0]
            total += ll.item()
        A = torch.log(xi_sum / xi_sum.sum(1, keepdim=True))
        B = torch.log((gamma_emit + 1e-3) / (gamma_emit + 1e-3).sum(1, keepdim=True))
        pi = torch.log(gamma0 / gamma0.sum())
        logliks.append(total)
    return {"trans_counts": trans_c, "emit_counts": emit_c, "log_A": log_A, "alpha": alpha,
            "beta": beta, "loglik": loglik, "posterior": posterior,
            "posterior_tags": [tags[i] for i in posterior.argmax(1).tolist()],
            "viterbi": [tags[i] for i in path], "viterbi_score": path_score,
            "bw_logliks": logliks, "bw_A": A.exp(), "bw_pi": pi.exp()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (in-place renormalisation and Adam)
def nlpc_embedding_max_norm_scale_grad_by_freq_pretrained(torch):
    """Word-embedding options as classic models set them: ``nn.Embedding(max_norm=...)``
    renormalising the looked-up rows in place during the forward pass, ``scale_grad_by_freq``
    dividing each row's gradient by its count in the batch, ``padding_idx`` rows receiving no
    gradient, and ``Embedding.from_pretrained(freeze=False)`` fine-tuning GloVe-like vectors
    next to a frozen copy; ``F.embedding`` with ``max_norm`` on a plain tensor."""
    nn, F = torch.nn, torch.nn.functional
    V, D, PAD = 10, 4, 0
    rng = np.random.default_rng(7141)
    pretrained = torch.tensor(rng.standard_normal((V, D)) * 1.5, dtype=torch.float32)
    batch = torch.tensor([[1, 2, 2, 5, 0], [2, 3, 5, 5, 0], [7, 1, 2, 0, 0]])
    labels = torch.tensor([1.0, 0.0, 1.0])

    class Model(nn.Module):
        def __init__(self, **kw):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD, **kw)
            self.fc = nn.Linear(D, 1)

        def forward(self, x):
            m = (x != PAD).unsqueeze(-1).float()
            return self.fc((self.emb(x) * m).sum(1) / m.sum(1)).squeeze(1)

    out = {}
    for name, kw in (
        ("max_norm", {"max_norm": 1.0}),
        ("by_freq", {"scale_grad_by_freq": True}),
        ("both", {"max_norm": 1.5, "norm_type": 1.0, "scale_grad_by_freq": True}),
    ):
        model = Model(**kw)
        set_weights(torch, model, seed=7142, scale=1.0)
        before = model.emb.weight.detach().clone()
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        losses = []
        for step in range(3):
            loss = F.binary_cross_entropy_with_logits(model(batch), labels)
            opt.zero_grad()
            loss.backward()
            if step == 0:
                first_grad = model.emb.weight.grad.clone()
                renormed = model.emb.weight.detach().clone()
            opt.step()
            losses.append(loss.item())
        out[name] = {"losses": losses, "first_grad": first_grad, "renormed": renormed,
                     "row_norms": renormed.norm(p=kw.get("norm_type", 2.0), dim=1),
                     "changed_rows": (renormed != before).any(1), "weight": model.emb.weight}  # fmt: skip
    tuned = nn.Embedding.from_pretrained(pretrained.clone(), freeze=False, padding_idx=PAD)
    frozen = nn.Embedding.from_pretrained(pretrained.clone())
    opt = torch.optim.SGD(tuned.parameters(), lr=0.5)
    loss = (tuned(batch) - frozen(batch).flip(-1)).pow(2).mean()
    loss.backward()
    opt.step()
    table = pretrained.clone()
    looked = F.embedding(torch.tensor([3, 3, 8]), table, max_norm=2.0)
    out.update({"tuned": tuned.weight, "frozen_requires_grad": frozen.weight.requires_grad,
                "tuned_pad_grad": tuned.weight.grad[PAD], "looked": looked, "table": table})  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)  # (recurrences, packed vs padded)
def nlpc_packed_rnns_initial_state_unsorted_and_cells(torch):
    """Recurrent encoders on unsorted packed batches with given initial states (which PyTorch
    permutes into the packed order and back): a 2-layer bidirectional GRU with ``h0`` from a
    context vector, ``nn.RNN(nonlinearity="relu")``, ``pad_packed_sequence(padding_value=-1)``;
    an ``LSTMCell`` loop masked per step reproducing the packed ``nn.LSTM``'s final states."""
    nn = torch.nn
    rnn = nn.utils.rnn
    E, H = 4, 5
    lens = torch.tensor([2, 5, 3, 4])
    x = torch.tensor(np.random.default_rng(7151).standard_normal((4, 5, E)), dtype=torch.float32)
    ctxv = torch.tensor(np.random.default_rng(7152).standard_normal((4, H)), dtype=torch.float32)
    gru = set_weights(torch, nn.GRU(E, H, num_layers=2, bidirectional=True, batch_first=True),
                      seed=7153)  # fmt: skip
    bridge = set_weights(torch, nn.Linear(H, 4 * H), seed=7154)
    h0 = torch.tanh(bridge(ctxv)).view(4, 4, H).transpose(0, 1).contiguous()
    packed = rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
    out, h_n = gru(packed, h0)
    padded, out_lens = rnn.pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
    (padded.clamp(min=0).sum() + h_n.pow(2).sum()).backward()
    relu = set_weights(torch, nn.RNN(E, H, nonlinearity="relu", batch_first=True), seed=7155)
    r_out, r_h = relu(packed, h0[:1])
    r_pad, _ = rnn.pad_packed_sequence(r_out, batch_first=True)
    lstm = set_weights(torch, nn.LSTM(E, H, batch_first=True), seed=7156)
    _, (lh, lc) = lstm(packed)
    cell = nn.LSTMCell(E, H)
    with torch.no_grad():
        cell.weight_ih.copy_(lstm.weight_ih_l0)
        cell.weight_hh.copy_(lstm.weight_hh_l0)
        cell.bias_ih.copy_(lstm.bias_ih_l0)
        cell.bias_hh.copy_(lstm.bias_hh_l0)
    h, c = torch.zeros(4, H), torch.zeros(4, H)
    for t in range(x.size(1)):
        h_new, c_new = cell(x[:, t], (h, c))
        alive = (t < lens).unsqueeze(1)
        h, c = torch.where(alive, h_new, h), torch.where(alive, c_new, c)
    return {"padded": padded, "out_lens": out_lens, "h_n": h_n,
            "bridge_grad": bridge.weight.grad, "gru_grads": grads(gru), "relu_out": r_pad,
            "relu_h": r_h, "lstm_h": lh, "cell_h": h, "cell_c": c,
            "cell_matches": torch.allclose(h, lh[0], atol=1e-6)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # (segment sums and the siamese encoder's updates)
def nlpc_segment_pooling_bucketing_siamese_paraphrase(torch):
    """Plumbing of classic text pipelines: bag offsets turned into segment ids with
    ``repeat_interleave``, mean/max pooling by ``index_add_`` and ``scatter_reduce("amax",
    include_self=False)`` matching ``EmbeddingBag``; ``unique_consecutive`` run lengths of
    repeated tokens; length buckets with ``bucketize`` and a stable sort for bucketed batching;
    a siamese bag-of-embeddings paraphrase model trained with ``CosineEmbeddingLoss`` and
    scored with ``MarginRankingLoss``."""
    nn, F = torch.nn, torch.nn.functional
    V, D = 15, 6
    rng = np.random.default_rng(7161)
    lens = torch.tensor([3, 5, 2, 4, 6, 1])
    flat = torch.tensor(rng.integers(0, V, int(lens.sum())))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)[:-1]])
    seg = torch.repeat_interleave(torch.arange(len(lens)), lens)
    emb = set_weights(torch, nn.Embedding(V, D), seed=7162)
    vecs = emb(flat)
    sums = torch.zeros(len(lens), D).index_add_(0, seg, vecs)
    means = sums / lens.unsqueeze(1)
    maxes = torch.zeros(len(lens), D).scatter_reduce(
        0, seg.unsqueeze(1).expand(-1, D), vecs, reduce="amax", include_self=False
    )
    bag_mean = F.embedding_bag(flat, emb.weight, offsets, mode="mean")
    bag_max = F.embedding_bag(flat, emb.weight, offsets, mode="max")
    (means.sum() + maxes.pow(2).sum()).backward()
    tokens = torch.tensor([4, 4, 4, 2, 9, 9, 1, 1, 1, 1, 3])
    runs, run_inv, run_counts = torch.unique_consecutive(
        tokens, return_inverse=True, return_counts=True
    )
    boundaries = torch.tensor([2, 4])
    buckets = torch.bucketize(lens, boundaries, right=False)
    order = torch.sort(buckets, stable=True).indices

    enc = set_weights(torch, nn.EmbeddingBag(V, D, mode="mean"), seed=7163)
    pairs_a = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10, 11]]
    pairs_b = [[1, 3, 4, 2], [12, 13], [6, 8, 9], [14, 0, 5]]
    target = torch.tensor([1.0, -1.0, 1.0, -1.0])

    def encode(seqs):
        fl = torch.tensor(sum(seqs, []))
        off = torch.tensor(np.cumsum([0] + [len(s) for s in seqs[:-1]]))
        return enc(fl, off)

    crit = nn.CosineEmbeddingLoss(margin=0.2)
    opt = torch.optim.Adam(enc.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        loss = crit(encode(pairs_a), encode(pairs_b), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        cos = F.cosine_similarity(encode(pairs_a), encode(pairs_b))
        rank = nn.MarginRankingLoss(margin=0.1)(cos[[0, 2]], cos[[1, 3]], torch.ones(2))
    return {"offsets": offsets, "seg": seg, "means": means, "maxes": maxes,
            "mean_matches": torch.allclose(means, bag_mean, atol=1e-6),
            "max_matches": torch.equal(maxes, bag_max), "emb_grad": emb.weight.grad,
            "runs": runs, "run_inv": run_inv, "run_counts": run_counts, "buckets": buckets,
            "order": order, "losses": losses, "cos": cos, "rank": rank,
            "enc_weight": enc.weight}  # fmt: skip
