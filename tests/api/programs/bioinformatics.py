"""Deep learning on DNA and protein sequences, as DeepBind, Basset, Basenji/Enformer, BPNet, ESM
and AlphaFold reference code writes it with plain tensor ops: one-hot DNA from index tensors
(``N`` bases dropped with ``one_hot(..)[..., :4]``), reverse-complement augmentation with
``flip`` over channels and length and with complement index tables, k-mer counting with
``unfold`` and ``bincount``, motif CNNs with global max pooling scanned over both strands,
Basset's conv/batch-norm/max-pool towers and filter PWMs, dilated residual convolutions with
Enformer's attention pooling and a Poisson loss on coverage, BPNet's multinomial profile loss and
log-count head, light-attention pooling over padded protein embeddings, a protein language model
trained with the masked-token loss and ESM's attention-map contacts (symmetrize + APC), pairwise
features by outer concatenation with a symmetrized 2D ResNet contact head, AlphaFold's outer
product mean, triangle update and distogram cross entropy over distance bins, soft-DTW and
smooth Needleman-Wunsch dynamic programs with ``logsumexp`` in Python loops, and a hard
Needleman-Wunsch alignment with traceback. Sequences, structures and targets come from NumPy with
fixed seeds."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import grads, params, set_weights

DNA = "ACGTN"
AMINO = "LAGVSERTIDPKQNFYMHWC"


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _dna(seed: int, batch: int, length: int, n_frac: float = 0.0) -> np.ndarray:
    """Index-encoded DNA (A=0, C=1, G=2, T=3, N=4), shape [batch, length]."""
    rng = _rng(seed)
    seq = rng.integers(0, 4, (batch, length))
    seq[rng.random((batch, length)) < n_frac] = 4
    return seq.astype(np.int64)


def _one_hot(torch, seq):
    """[B, L] indices -> [B, 4, L] float one-hot (channels-first, as Conv1d wants); N is all 0."""
    return torch.nn.functional.one_hot(seq, num_classes=5)[..., :4].permute(0, 2, 1).float()


def _plant(seq: np.ndarray, motif: str, rows: np.ndarray, seed: int) -> np.ndarray:
    """Insert ``motif`` at a random position of the chosen rows (the positives)."""
    rng = _rng(seed)
    out = seq.copy()
    code = np.array([DNA.index(c) for c in motif])
    for r in np.flatnonzero(rows):
        p = rng.integers(0, seq.shape[1] - len(code))
        out[r, p : p + len(code)] = code
    return out


def _ca_trace(seed: int, length: int) -> np.ndarray:
    """A random-walk C-alpha trace with 3.8 A steps (float32, [L, 3])."""
    rng = _rng(seed)
    steps = rng.standard_normal((length, 3))
    steps = 3.8 * steps / np.linalg.norm(steps, axis=1, keepdims=True)
    steps[1:] = 0.6 * steps[1:] + 0.4 * steps[:-1]  # some persistence, like a chain
    return np.cumsum(steps, axis=0).astype(np.float32)


@program
def bio_one_hot_dna_reverse_complement_and_kmer_counts(torch):
    """Sequence preprocessing as genomics loaders write it: one-hot from index tensors with N
    bases, the reverse complement three ways (``flip(dims=[1, 2])`` for ACGT order, a complement
    permutation of the channels then ``flip(-1)``, a complement lookup table on the indices),
    GC content, random strand augmentation applied with ``torch.where`` to inputs and to
    two-strand profile targets, k-mer spectra and canonical k-mers from ``unfold`` and base-4
    codes, and a strand-symmetric motif scan (``conv1d`` on both strands, ``maximum``)."""
    F = torch.nn.functional
    rng = _rng(1)
    seq = torch.tensor(_dna(1, 3, 24, n_frac=0.06))
    onehot = _one_hot(torch, seq)
    rc_flip = onehot.flip(dims=[1, 2])
    comp = torch.tensor([3, 2, 1, 0])
    rc_perm = onehot[:, comp, :].flip(-1)
    comp_table = torch.tensor([3, 2, 1, 0, 4])
    rc_seq = comp_table[seq].flip(1)
    rc_where = torch.where(seq < 4, 3 - seq, seq).flip(-1)
    rc_onehot = _one_hot(torch, rc_seq)
    gc = onehot[:, 1:3].sum(dim=(1, 2)) / onehot.sum(dim=(1, 2)).clamp(min=1)
    n_count = (seq == 4).sum(1)

    flip_mask = torch.tensor(rng.random(3) < 0.5)
    x_aug = torch.where(flip_mask[:, None, None], rc_flip, onehot)
    profile = torch.tensor(rng.poisson(2.0, (3, 2, 24)).astype(np.float32))
    y_aug = torch.where(flip_mask[:, None, None], profile.flip(dims=[1, 2]), profile)

    k = 3
    windows = seq.unfold(1, k, 1)  # [B, L-k+1, k]
    ok = (windows < 4).all(dim=-1)
    powers = 4 ** torch.arange(k - 1, -1, -1)
    codes = (windows * powers).sum(-1)
    rc_codes = ((3 - windows).flip(-1) * powers).sum(-1)
    spectrum = torch.bincount(codes[ok], minlength=4**k)
    canonical = torch.bincount(torch.minimum(codes, rc_codes)[ok], minlength=4**k)
    per_seq = torch.zeros(3, 4**k, dtype=torch.long)
    rows = torch.arange(3)[:, None].expand_as(codes)
    per_seq.index_put_((rows[ok], codes[ok]), torch.ones_like(codes[ok]), accumulate=True)

    w = torch.tensor(_rng(2).standard_normal((5, 4, 6)).astype(np.float32))
    fwd = F.conv1d(onehot, w)
    rev = F.conv1d(rc_flip, w).flip(-1)
    rev_by_weight = F.conv1d(onehot, w.flip(dims=[1, 2]))
    strand_max = torch.maximum(fwd, rev).amax(dim=-1)

    decoded = ["".join(DNA[i] for i in row) for row in seq.tolist()]
    rc_decoded = ["".join(DNA[i] for i in row) for row in rc_seq.tolist()]
    return {"onehot": onehot, "rc_flip": rc_flip, "rc_perm_equal": torch.equal(rc_flip, rc_perm),
            "rc_onehot_equal": torch.equal(rc_onehot, rc_flip), "rc_seq": rc_seq,
            "rc_where": rc_where, "gc": gc, "n_count": n_count, "x_aug": x_aug, "y_aug": y_aug,
            "spectrum": spectrum, "canonical": canonical, "per_seq": per_seq,
            "top_kmers": spectrum.topk(3).values, "fwd": fwd, "rev": rev,
            "rev_by_weight_close": torch.allclose(rev, rev_by_weight, atol=1e-5),
            "strand_max": strand_max, "decoded": "\n".join(decoded),
            "rc_decoded": "\n".join(rc_decoded)}  # fmt: skip


@program
def bio_deepbind_motif_scan_both_strands_training(torch):
    """DeepBind: inputs padded with ``0.25`` (an uninformative base) on both sides, a motif
    convolution with ReLU, global max and average pooling, a small MLP, the prediction taken as
    the max over both strands; a few steps of Nesterov SGD with weight decay on a planted motif,
    then the motif positions (argmax of the activations) and filter scores on held-out
    sequences."""
    nn, F = torch.nn, torch.nn.functional

    class DeepBind(nn.Module):
        def __init__(self, n_motifs=6, motif_len=7):
            super().__init__()
            self.motif_len = motif_len
            self.conv = nn.Conv1d(4, n_motifs, motif_len)
            self.mlp = nn.Sequential(
                nn.Linear(2 * n_motifs, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 1)
            )

        def scan(self, x):
            m = self.motif_len - 1
            return F.relu(self.conv(F.pad(x, (m, m), value=0.25)))

        def forward(self, x):
            h = self.scan(x)
            feats = torch.cat([h.max(dim=-1).values, h.mean(dim=-1)], dim=1)
            return self.mlp(feats).squeeze(-1)

    rng = _rng(3)
    labels_np = rng.random(8) < 0.5
    seq_np = _plant(_dna(4, 8, 20), "GGAATTC", labels_np, seed=5)
    x = _one_hot(torch, torch.tensor(seq_np))
    y = torch.tensor(labels_np.astype(np.float32))
    model = set_weights(torch, DeepBind(), seed=6)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=1e-3)  # fmt: skip
    losses = []
    for _ in range(4):
        opt.zero_grad()
        logits = torch.max(model(x), model(x.flip(dims=[1, 2])))
        loss = F.binary_cross_entropy_with_logits(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        test = _one_hot(torch, torch.tensor(_plant(_dna(7, 4, 20), "GGAATTC", np.ones(4), 8)))
        h = model.scan(test)
        best, pos = h.max(dim=-1)
        probs = torch.sigmoid(torch.max(model(test), model(test.flip(dims=[1, 2]))))
        acc = ((model(x) > 0).float() == y).float().mean()
    return {"losses": losses, "params": params(model), "best": best, "pos": pos,
            "probs": probs, "acc": acc}  # fmt: skip


@program
def bio_basset_conv_batchnorm_maxpool_multitask_and_filter_pwms(torch):
    """Basset: conv / batch norm / ReLU / max-pool towers (the last pool with ``ceil_mode``),
    a fully connected head with one logit per cell type, multitask BCE with ``pos_weight``,
    Adam for three steps in train mode (batch statistics), then eval-mode predictions and the
    first-layer filters turned into position weight matrices: every window whose activation
    exceeds half the filter's maximum is gathered with ``unfold`` and counted, with information
    content in bits."""
    nn, F = torch.nn, torch.nn.functional
    # No conv biases before batch norm: they would get a zero gradient up to rounding noise,
    # which Adam's normalized step turns into an implementation-dependent update.
    model = nn.Sequential(
        nn.Conv1d(4, 8, 7, padding=3, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(3),
        nn.Conv1d(8, 8, 5, padding=2, bias=False), nn.BatchNorm1d(8), nn.ReLU(),
        nn.MaxPool1d(2, ceil_mode=True), nn.Flatten(),
        nn.Linear(8 * 5, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 5),
    )  # fmt: skip
    set_weights(torch, model, seed=9)
    rng = _rng(10)
    x = _one_hot(torch, torch.tensor(_dna(11, 6, 30)))
    y = torch.tensor((rng.random((6, 5)) < 0.3).astype(np.float32))
    pos_weight = (1 - y).sum(0) / y.sum(0).clamp(min=1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(x), y, pos_weight=pos_weight)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        probs = torch.sigmoid(model(x))
        acts = model[2](model[1](model[0](x)))  # [B, 8, L]
        windows = F.pad(x, (3, 3)).unfold(2, 7, 1).permute(0, 2, 1, 3)  # [B, L, 4, 7]
        pwms, n_sites = [], []
        for f in range(3):
            a = acts[:, f]
            hits = a > 0.5 * a.max()
            counts = windows[hits].sum(0) + 0.1
            pwm = counts / counts.sum(0, keepdim=True)
            pwms.append(pwm)
            n_sites.append(int(hits.sum()))
        pwms = torch.stack(pwms)
        info = 2 + (pwms * torch.log2(pwms)).sum(dim=1)
    bn = model[1]
    return {"losses": losses, "probs": probs, "pwms": pwms, "info": info, "n_sites": n_sites,
            "running_mean": bn.running_mean, "running_var": bn.running_var,
            "tracked": bn.num_batches_tracked, "fc": model[9].weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # two BN layers + Adam: float32 reduction order in the stats
def bio_enformer_lite_dilated_residual_attention_pool_poisson(torch):
    """A Basenji/Enformer-style coverage model: a stem convolution, attention pooling over
    windows of two (logits from a 1x1 ``Conv2d``, softmax over the window), a tower of dilated
    residual blocks (batch norm, Enformer's ``sigmoid(1.702 x) * x`` GELU, dilations 1, 2, 4),
    center cropping, a softplus head and ``poisson_nll_loss(log_input=False)`` on binned read
    counts; AdamW with gradient clipping for three steps, and the Pearson correlation of the
    predicted and observed tracks as Basenji reports it."""
    nn, F = torch.nn, torch.nn.functional

    class GELU(nn.Module):
        def forward(self, x):
            return torch.sigmoid(1.702 * x) * x

    class AttentionPool(nn.Module):
        def __init__(self, dim, pool_size=2):
            super().__init__()
            self.pool_size = pool_size
            self.to_attn_logits = nn.Conv2d(dim, dim, 1, bias=False)

        def forward(self, x):
            b, d, n = x.shape
            x = x.reshape(b, d, n // self.pool_size, self.pool_size)
            attn = self.to_attn_logits(x).softmax(dim=-1)
            return (x * attn).sum(dim=-1)

    class DilatedResidual(nn.Module):
        def __init__(self, dim, dilation):
            super().__init__()
            self.block = nn.Sequential(
                nn.BatchNorm1d(dim), GELU(), nn.Conv1d(dim, dim, 3, padding=dilation,
                                                       dilation=dilation, bias=False),
                nn.BatchNorm1d(dim), GELU(), nn.Conv1d(dim, dim, 1), nn.Dropout(0.0),
            )  # fmt: skip

        def forward(self, x):
            return x + self.block(x)

    class Model(nn.Module):
        def __init__(self, dim=8, tracks=2, crop=2):
            super().__init__()
            self.stem = nn.Conv1d(4, dim, 5, padding=2)
            self.pool = AttentionPool(dim)
            self.tower = nn.Sequential(*[DilatedResidual(dim, 2**i) for i in range(3)])
            self.crop = crop
            self.head = nn.Conv1d(dim, tracks, 1)

        def forward(self, x):
            h = self.tower(self.pool(self.stem(x)))
            h = h[..., self.crop : -self.crop]
            return F.softplus(self.head(h))

    model = set_weights(torch, Model(), seed=12)
    with torch.no_grad():  # enformer-pytorch initializes the pooling logits as 2 * identity
        model.pool.to_attn_logits.weight.copy_(torch.eye(8)[:, :, None, None] * 2)
    x = _one_hot(torch, torch.tensor(_dna(13, 4, 32)))
    target = torch.tensor(_rng(14).poisson(3.0, (4, 2, 12)).astype(np.float32))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses, norms = [], []
    for _ in range(3):
        opt.zero_grad()
        pred = model(x)
        loss = F.poisson_nll_loss(pred, target, log_input=False)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        pred = model(x)
        p = pred - pred.mean(dim=-1, keepdim=True)
        t = target - target.mean(dim=-1, keepdim=True)
        pearson = (p * t).sum(-1) / (p.norm(dim=-1) * t.norm(dim=-1))
    return {"losses": losses, "norms": norms, "pred": pred, "pearson": pearson,
            "stem_grad": model.stem.weight.grad, "head": model.head.weight}  # fmt: skip


@program
def bio_bpnet_multinomial_profile_and_log_count_losses(torch):
    """BPNet: a dilated convolution stack with residual connections (``padding="same"``), a
    two-strand profile head trained with the multinomial negative log-likelihood (``lgamma``
    terms, ``log_softmax`` over all positions of both strands) and a log-count head trained with
    MSE on ``log1p`` of the total; checked against ``distributions.Multinomial.log_prob`` and a
    ``poisson_nll_loss(full=True)`` baseline; reverse-complement averaged predictions flip both
    strands and positions."""
    nn, F = torch.nn, torch.nn.functional

    class BPNet(nn.Module):
        def __init__(self, filters=8, n_layers=3, strands=2):
            super().__init__()
            self.iconv = nn.Conv1d(4, filters, 9, padding=4)
            self.rconvs = nn.ModuleList(
                [nn.Conv1d(filters, filters, 3, padding="same", dilation=2**i)
                 for i in range(1, n_layers + 1)]
            )  # fmt: skip
            self.fconv = nn.Conv1d(filters, strands, 7, padding=3)
            self.linear = nn.Linear(filters, strands)

        def forward(self, x):
            h = F.relu(self.iconv(x))
            for conv in self.rconvs:
                h = h + F.relu(conv(h))
            profile = self.fconv(h)
            log_counts = self.linear(h.mean(dim=2))
            return profile, log_counts

    def mnll(logits, counts):
        b = logits.shape[0]
        logps = F.log_softmax(logits.reshape(b, -1), dim=-1)
        counts = counts.reshape(b, -1)
        log_fact_sum = torch.lgamma(counts.sum(dim=-1) + 1)
        log_prod_fact = torch.lgamma(counts + 1).sum(dim=-1)
        log_prod_exp = (counts * logps).sum(dim=-1)
        return -log_fact_sum + log_prod_fact - log_prod_exp

    model = set_weights(torch, BPNet(), seed=15)
    x = _one_hot(torch, torch.tensor(_dna(16, 4, 24)))
    rate = _rng(17).gamma(2.0, 1.0, (4, 2, 24))
    counts = torch.tensor(_rng(18).poisson(rate).astype(np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses, profile_losses, count_losses = [], [], []
    for _ in range(3):
        opt.zero_grad()
        profile, log_counts = model(x)
        p_loss = mnll(profile, counts).mean()
        c_loss = F.mse_loss(log_counts, torch.log1p(counts.sum(dim=-1)))
        loss = p_loss + 10.0 * c_loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
        profile_losses.append(p_loss.item())
        count_losses.append(c_loss.item())
    with torch.no_grad():
        profile, log_counts = model(x)
        per_example = mnll(profile, counts)
        total = int(counts[0].sum())
        dist = torch.distributions.Multinomial(total, logits=profile[0].reshape(-1))
        ref = -dist.log_prob(counts[0].reshape(-1))
        rc_profile, rc_counts = model(x.flip(dims=[1, 2]))
        avg_profile = (profile + rc_profile.flip(dims=[1, 2])) / 2
        avg_counts = (log_counts + rc_counts.flip(dims=[1])) / 2
        pred_counts = (
            F.softmax(avg_profile.reshape(4, -1), -1).reshape(4, 2, 24)
            * (torch.expm1(avg_counts).sum(-1)[:, None, None])
        )
        poisson = F.poisson_nll_loss(torch.log(pred_counts + 1e-3), counts, full=True)
    return {"losses": losses, "profile_losses": profile_losses, "count_losses": count_losses,
            "per_example": per_example, "ref": ref, "avg_profile": avg_profile,
            "avg_counts": avg_counts, "poisson": poisson,
            "grads": grads(model)}  # fmt: skip


@program
def bio_light_attention_pooling_over_padded_protein_embeddings(torch):
    """Light attention (subcellular localization from per-residue embeddings): a convolution
    gives values and another attention logits, padding masked with ``masked_fill(-inf)``
    before a softmax over the length, attention-weighted sums concatenated with masked max
    pooling, an MLP and label-smoothed cross entropy; embeddings padded with ``pad_sequence``
    from proteins of different lengths; Adam steps, then class predictions and the attention
    weights of the first protein."""
    nn, F = torch.nn, torch.nn.functional

    class LightAttention(nn.Module):
        def __init__(self, emb=12, classes=4, k=5):
            super().__init__()
            self.feature = nn.Conv1d(emb, emb, k, padding=k // 2)
            # no bias: the softmax over the length cancels it (its gradient is rounding noise)
            self.attention = nn.Conv1d(emb, emb, k, padding=k // 2, bias=False)
            # (nor here: for a unit the ReLU passes for the whole batch, the batch norm cancels
            # the bias, whose gradient is then rounding noise that Adam's normalised steps blow
            # up to the learning rate, and the eval-mode outputs show it)
            self.mlp = nn.Sequential(nn.Linear(2 * emb, 16, bias=False), nn.Dropout(0.0), nn.ReLU(),
                                     nn.BatchNorm1d(16))  # fmt: skip
            self.out = nn.Linear(16, classes)

        def forward(self, x, mask):  # x [B, E, L], mask [B, L] True on residues
            o = self.feature(x)
            a = self.attention(x).masked_fill(~mask[:, None, :], float("-inf"))
            a = torch.softmax(a, dim=-1)
            o1 = (o * a).sum(dim=-1)
            o2 = o.masked_fill(~mask[:, None, :], float("-inf")).max(dim=-1).values
            return self.out(self.mlp(torch.cat([o1, o2], dim=-1))), a

    rng = _rng(19)
    lengths = [9, 6, 11, 7, 8]
    embs = [torch.tensor(rng.standard_normal((n, 12)).astype(np.float32)) for n in lengths]
    padded = nn.utils.rnn.pad_sequence(embs, batch_first=True)  # [B, L, E]
    mask = torch.arange(padded.shape[1])[None, :] < torch.tensor(lengths)[:, None]
    x = padded.transpose(1, 2)
    y = torch.tensor([0, 2, 1, 3, 2])
    model = set_weights(torch, LightAttention(), seed=20)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits, _ = model(x, mask)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits, attn = model(x, mask)
    return {"losses": losses, "pred": logits.argmax(-1), "probs": logits.softmax(-1),
            "attn0": attn[0, :3], "attn_pad": attn[1, :, 6:], "mask": mask,
            "conv_grad": model.attention.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # attention + layer norms over 2 Adam steps: summation order
def bio_esm_masked_token_loss_and_attention_contacts(torch):
    """A small ESM-style protein language model: an alphabet with ``<cls>``, ``<pad>``,
    ``<eos>``, ``<mask>``, batch conversion of sequences of different lengths, BERT masking
    (15%, 80/10/10) from a NumPy generator, ESM-2's token dropout rescaling of the embeddings,
    pre-LN attention written out by hand with a key padding mask, a tied LM head, cross entropy
    with ``ignore_index=-100`` and perplexity; then ESM's contact prediction from the stacked
    attention maps: ``<cls>``/``<eos>`` removed, symmetrized, average product correction, a
    logistic regression over layers x heads."""
    nn, F = torch.nn, torch.nn.functional
    toks = ["<cls>", "<pad>", "<eos>", "<unk>", *AMINO, "<mask>"]
    idx = {t: i for i, t in enumerate(toks)}
    cls_idx, pad_idx, eos_idx, mask_idx = 0, 1, 2, idx["<mask>"]
    seqs = ["MKTAYIAKQR", "GAVLIPF", "MSHHWGYGKH"]

    def batch_convert(strs):
        n = max(len(s) for s in strs) + 2
        out = torch.full((len(strs), n), pad_idx, dtype=torch.long)
        for i, s in enumerate(strs):
            out[i, 0] = cls_idx
            out[i, 1 : len(s) + 1] = torch.tensor([idx[c] for c in s], dtype=torch.long)
            out[i, len(s) + 1] = eos_idx
        return out

    tokens = batch_convert(seqs)
    rng = _rng(21)
    special = (tokens == cls_idx) | (tokens == pad_idx) | (tokens == eos_idx)
    r = torch.tensor(rng.random(tuple(tokens.shape)))
    masked = (r < 0.15) & ~special
    masked[0, 3] = True  # at least one masked token per sequence
    masked[1, 2] = True
    masked[2, 5] = True
    labels = torch.where(masked, tokens, torch.full_like(tokens, -100))
    action = torch.tensor(rng.random(tuple(tokens.shape)))
    random_aa = torch.tensor(rng.integers(4, 4 + len(AMINO), tuple(tokens.shape)))
    inputs = tokens.clone()
    inputs[masked & (action < 0.8)] = mask_idx
    swap = masked & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_aa[swap]

    class Layer(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.out = nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

        def forward(self, x, pad_mask):
            b, n, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
            scores = scores.masked_fill(pad_mask[:, None, None, :], float("-inf"))
            attn = scores.softmax(dim=-1)
            h = (attn @ v).transpose(1, 2).reshape(b, n, d)
            x = x + self.out(h)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x, attn

    class ESM(nn.Module):
        def __init__(self, d=16, heads=2, layers=2):
            super().__init__()
            self.embed_tokens = nn.Embedding(len(toks), d, padding_idx=pad_idx)
            self.layers = nn.ModuleList([Layer(d, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_dense = nn.Linear(d, d)
            self.lm_ln = nn.LayerNorm(d)
            self.lm_bias = nn.Parameter(torch.zeros(len(toks)))
            self.contact = nn.Linear(layers * heads, 1)

        def forward(self, tokens):
            pad_mask = tokens.eq(pad_idx)
            x = self.embed_tokens(tokens)
            x = x.masked_fill((tokens == mask_idx).unsqueeze(-1), 0.0)
            mask_ratio_train = 0.15 * 0.8
            src_lengths = (~pad_mask).sum(-1)
            mask_ratio_observed = (tokens == mask_idx).sum(-1).to(x.dtype) / src_lengths
            x = x * (1 - mask_ratio_train) / (1 - mask_ratio_observed)[:, None, None]
            x = x * (1 - pad_mask.unsqueeze(-1).type_as(x))
            attns = []
            for layer in self.layers:
                x, a = layer(x, pad_mask)
                attns.append(a)
            x = self.ln_f(x)
            h = self.lm_ln(F.gelu(self.lm_dense(x)))
            logits = F.linear(h, self.embed_tokens.weight) + self.lm_bias
            return logits, x, torch.stack(attns, 1)  # [B, layers, heads, L, L]

        def contacts(self, tokens, attns):
            eos_mask = tokens.ne(eos_idx).to(attns)
            eos_mask = eos_mask.unsqueeze(1) * eos_mask.unsqueeze(2)
            attns = attns * eos_mask[:, None, None, :, :]
            attns = attns[..., :-1, :-1][..., 1:, 1:]
            b, layers, heads, n, _ = attns.shape
            attns = attns.view(b, layers * heads, n, n)
            sym = attns + attns.transpose(-1, -2)
            a1 = sym.sum(-1, keepdims=True)
            a2 = sym.sum(-2, keepdims=True)
            a12 = sym.sum((-1, -2), keepdims=True)
            avg = a1 * a2
            avg.div_(a12)
            normalized = sym - avg
            return torch.sigmoid(self.contact(normalized.permute(0, 2, 3, 1)).squeeze(3))

    model = set_weights(torch, ESM(), seed=22)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        logits, _, _ = model(inputs)
        loss = F.cross_entropy(logits.view(-1, len(toks)), labels.view(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits, reps, attns = model(tokens)
        contacts = model.contacts(tokens, attns)
        nll = F.cross_entropy(logits.view(-1, len(toks)), labels.view(-1), reduction="sum")
        ppl = torch.exp(nll / (labels != -100).sum())
        residue = ~special
        seq_reps = (reps * residue[..., None]).sum(1) / residue.sum(1, keepdim=True)
    return {"losses": losses, "inputs": inputs, "labels": labels, "ppl": ppl,
            "contacts": contacts, "seq_reps": seq_reps, "tied_grad": model.embed_tokens.weight.grad,
            "pad_row_grad": model.embed_tokens.weight.grad[pad_idx]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # instance norm over L*L pixels: float32 summation order
def bio_pairwise_contact_map_outer_concatenation_resnet(torch):
    """A RaptorX/trRosetta-style contact predictor: 1D convolutional features of a one-hot
    protein, pairwise features by outer concatenation (``expand`` of ``[:, :, None]`` and
    ``[:, None]``) plus an outer product and a relative-separation channel, a 2D residual
    network with dilations, instance norm and ELU, logits symmetrized ``(z + z^T) / 2``, BCE
    with ``pos_weight`` over pairs with sequence separation >= 3 (``triu`` mask), and the top-L/5
    precision of long-range contacts."""
    nn, F = torch.nn, torch.nn.functional

    class ResBlock2d(nn.Module):
        def __init__(self, c, dilation):
            super().__init__()
            # bias-free convs before the norms (a bias there only gets rounding noise)
            self.conv1 = nn.Conv2d(c, c, 3, padding=dilation, dilation=dilation, bias=False)
            self.norm1 = nn.InstanceNorm2d(c, affine=True)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.norm2 = nn.InstanceNorm2d(c, affine=True)

        def forward(self, x):
            h = F.elu(self.norm1(self.conv1(x)))
            return F.elu(x + self.norm2(self.conv2(h)))

    class ContactNet(nn.Module):
        def __init__(self, d1=6, c=8):
            super().__init__()
            self.conv1d = nn.Conv1d(20, d1, 3, padding=1)
            self.proj = nn.Conv2d(2 * d1 + d1 + 1, c, 1)
            self.blocks = nn.Sequential(ResBlock2d(c, 1), ResBlock2d(c, 2))
            self.head = nn.Conv2d(c, 1, 1)

        def forward(self, seq_onehot):  # [B, 20, L]
            f = F.relu(self.conv1d(seq_onehot)).transpose(1, 2)  # [B, L, d1]
            b, n, d = f.shape
            left = f[:, :, None, :].expand(b, n, n, d)
            right = f[:, None, :, :].expand(b, n, n, d)
            outer = f[:, :, None, :] * f[:, None, :, :]
            sep = torch.arange(n)
            rel = (sep[None, :] - sep[:, None]).abs().float().log1p()
            rel = rel[None, :, :, None].expand(b, n, n, 1)
            pair = torch.cat([left, right, outer, rel], dim=-1).permute(0, 3, 1, 2)
            z = self.head(self.blocks(self.proj(pair))).squeeze(1)
            return (z + z.transpose(-1, -2)) / 2

    n, b = 12, 2
    seq = torch.tensor(np.stack([_rng(23 + i).integers(0, 20, n) for i in range(b)]))
    x = F.one_hot(seq, 20).float().transpose(1, 2)
    coords = torch.tensor(np.stack([_ca_trace(25 + i, n) for i in range(b)]))
    dist = torch.cdist(coords, coords)
    contacts = (dist < 8.0).float()
    pair_mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=3)
    model = set_weights(torch, ContactNet(), seed=27)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    pos_weight = torch.tensor(3.0)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        logits = model(x)
        loss = F.binary_cross_entropy_with_logits(
            logits[:, pair_mask], contacts[:, pair_mask], pos_weight=pos_weight
        )
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        probs = torch.sigmoid(model(x))
        scores = probs[:, pair_mask]
        top = scores.topk(n // 5, dim=-1).indices
        precision = contacts[:, pair_mask].gather(1, top).mean(dim=1)
    return {"losses": losses, "probs": probs, "symmetric": torch.equal(probs, probs.transpose(1, 2)),
            "contacts": contacts, "precision": precision, "n_contacts": contacts[:, pair_mask].sum(),
            "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # einsum outer products and layer norms: summation order
def bio_alphafold_lite_outer_product_mean_triangle_distogram(torch):
    """AlphaFold-lite pair stack: an MSA one-hot (21 classes) projected and combined by the
    outer product mean (``einsum('sic,sjd->ijcd') / S``), relative position encodings from
    clipped offsets and ``one_hot``, a gated triangle multiplicative update (outgoing edges,
    ``einsum('ikc,jkc->ijc')``), the distogram head symmetrized ``logits + logits^T``, true
    bins from CB distances as AlphaFold computes them (``(d^2 > edges^2).sum(-1)``, checked
    against ``bucketize``), the masked distogram cross entropy, and the expected distance from
    the bin probabilities; three SGD steps."""
    nn, F = torch.nn, torch.nn.functional
    n_bins, max_rel = 16, 4

    class PairStack(nn.Module):
        def __init__(self, c_m=8, c=4, c_z=8):
            super().__init__()
            self.msa_emb = nn.Linear(21, c_m)
            self.ln_m = nn.LayerNorm(c_m)
            self.a, self.b = nn.Linear(c_m, c), nn.Linear(c_m, c)
            self.opm_out = nn.Linear(c * c, c_z)
            self.relpos = nn.Linear(2 * max_rel + 1, c_z)
            self.ln_z = nn.LayerNorm(c_z)
            self.tri_a, self.tri_b = nn.Linear(c_z, c_z), nn.Linear(c_z, c_z)
            self.tri_ga, self.tri_gb = nn.Linear(c_z, c_z), nn.Linear(c_z, c_z)
            self.tri_ln = nn.LayerNorm(c_z)
            self.tri_out, self.tri_g = nn.Linear(c_z, c_z), nn.Linear(c_z, c_z)
            self.disto = nn.Linear(c_z, n_bins)

        def forward(self, msa, mask):
            s, n = msa.shape[:2]
            m = self.ln_m(self.msa_emb(msa))
            a, b = self.a(m), self.b(m)
            o = torch.einsum("sic,sjd->ijcd", a, b) / s
            z = self.opm_out(o.reshape(n, n, -1))
            idx = torch.arange(n)
            offset = (idx[:, None] - idx[None, :]).clamp(-max_rel, max_rel) + max_rel
            z = z + self.relpos(F.one_hot(offset, 2 * max_rel + 1).float())
            zn = self.ln_z(z)
            pm = (mask[:, None] * mask[None, :])[..., None]
            ta = torch.sigmoid(self.tri_ga(zn)) * self.tri_a(zn) * pm
            tb = torch.sigmoid(self.tri_gb(zn)) * self.tri_b(zn) * pm
            t = torch.einsum("ikc,jkc->ijc", ta, tb)
            z = z + torch.sigmoid(self.tri_g(zn)) * self.tri_out(self.tri_ln(t))
            logits = self.disto(z)
            return logits + logits.transpose(0, 1)

    n, s = 10, 4
    rng = _rng(28)
    msa = F.one_hot(torch.tensor(rng.integers(0, 21, (s, n))), 21).float()
    mask = torch.ones(n)
    mask[-1] = 0.0  # a missing residue
    cb = torch.tensor(_ca_trace(29, n))
    edges = torch.linspace(2.3125, 21.6875, n_bins - 1)
    d2 = ((cb[:, None, :] - cb[None, :, :]) ** 2).sum(-1, keepdim=True)
    true_bins = (d2 > edges**2).sum(-1)
    by_bucketize = torch.bucketize(d2.squeeze(-1).sqrt(), edges)
    centers = torch.cat([edges[:1] - 1.0, (edges[1:] + edges[:-1]) / 2, edges[-1:] + 1.0])
    pair_mask = mask[:, None] * mask[None, :]

    model = set_weights(torch, PairStack(), seed=30)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits = model(msa, mask)
        errors = -(F.one_hot(true_bins, n_bins) * F.log_softmax(logits, dim=-1)).sum(-1)
        loss = (errors * pair_mask).sum() / (1e-6 + pair_mask.sum())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits = model(msa, mask)
        ce = F.cross_entropy(logits.permute(2, 0, 1)[None], true_bins[None], reduction="none")[0]
        probs = logits.softmax(-1)
        expected = (probs * centers).sum(-1)
        mae = ((expected - d2.squeeze(-1).sqrt()).abs() * pair_mask).sum() / pair_mask.sum()
    return {"losses": losses, "true_bins": true_bins,
            "bucketize_equal": torch.equal(true_bins, by_bucketize), "ce": ce,
            "expected": expected, "mae": mae, "grads": grads(model)}  # fmt: skip


@program(rtol=1e-9, atol=1e-10)
def bio_soft_dtw_alignment_and_barycenter(torch):
    """Soft-DTW (Cuturi & Blondel) between a nanopore-like signal and reference levels, the
    dynamic program written as implementations do it: a ``(n+2) x (m+2)`` table of ``inf``
    filled in place in two Python loops with ``-gamma * logsumexp(-r / gamma)``; the expected
    alignment from ``autograd.grad`` with respect to the squared-distance matrix, the soft-DTW
    divergence, and a few SGD steps of a soft-DTW barycenter of two signals (float64)."""
    F = torch.nn.functional

    def soft_dtw(x, y, gamma):
        D = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        n, m = D.shape
        R = torch.full((n + 2, m + 2), math.inf, dtype=D.dtype)
        R[0, 0] = 0.0
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                r = torch.stack([R[i - 1, j - 1], R[i - 1, j], R[i, j - 1]])
                R[i, j] = D[i - 1, j - 1] - gamma * torch.logsumexp(-r / gamma, dim=0)
        return R[n, m], D

    rng = _rng(31)
    levels = torch.tensor([[0.2], [1.0], [-0.5], [0.6], [-1.0]], dtype=torch.float64)
    signal = torch.tensor(np.repeat(levels.numpy(), [1, 2, 1, 2, 1], axis=0)
                          + 0.1 * rng.standard_normal((7, 1)))  # fmt: skip
    signal.requires_grad_(True)
    gamma = 0.1
    value, D = soft_dtw(signal, levels, gamma)
    (E,) = torch.autograd.grad(value, D, retain_graph=True)
    value.backward()
    xx, _ = soft_dtw(signal.detach(), signal.detach(), gamma)
    yy, _ = soft_dtw(levels, levels, gamma)
    divergence = value.detach() - 0.5 * (xx + yy)

    other = torch.tensor(np.repeat(levels.numpy(), [2, 1, 1, 1, 1], axis=0)
                         + 0.1 * rng.standard_normal((6, 1)))  # fmt: skip
    z = torch.nn.Parameter(torch.zeros(5, 1, dtype=torch.float64))
    opt = torch.optim.SGD([z], lr=0.05)
    bary = []
    for _ in range(2):
        opt.zero_grad()
        loss = soft_dtw(z, signal.detach(), 1.0)[0] + soft_dtw(z, other, 1.0)[0]
        loss.backward()
        opt.step()
        bary.append(loss.item())
    hard_path = F.one_hot(E.argmax(dim=1), E.shape[1])
    return {"value": value, "E": E, "signal_grad": signal.grad, "divergence": divergence,
            "bary_losses": bary, "z": z, "hard_path": hard_path}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def bio_needleman_wunsch_smooth_and_hard_with_traceback(torch):
    """Global alignment of two proteins: a learned, symmetrized substitution matrix (BLOSUM-like
    start), a smooth Needleman-Wunsch (DeepBLAST-style) with ``logsumexp`` over the three moves
    in Python loops over lists of lists, the expected alignment from ``autograd.grad``, a few
    Adam steps maximizing the smooth score of a homologous pair against a shuffled pair, then
    the hard Needleman-Wunsch with ``max`` in a filled score table and a traceback to the
    aligned strings."""
    a_str, b_str = "HEAGAWGH", "PAWHEA"
    shuffled = "AEWHPA"
    aa = {c: i for i, c in enumerate(AMINO)}
    rng = _rng(32)
    base = rng.integers(-3, 2, (20, 20))
    base = np.triu(base) + np.triu(base, 1).T + np.diag(rng.integers(4, 8, 20))
    W = torch.nn.Parameter(torch.tensor(base.astype(np.float32)))
    gap = torch.nn.Parameter(torch.tensor(-4.0))

    def encode(s):
        return torch.tensor([aa[c] for c in s])

    def smooth_nw(theta, gap, temp=1.0):
        n, m = theta.shape
        V = [[None] * (m + 1) for _ in range(n + 1)]
        V[0][0] = theta.new_zeros(())
        for i in range(1, n + 1):
            V[i][0] = V[i - 1][0] + gap
        for j in range(1, m + 1):
            V[0][j] = V[0][j - 1] + gap
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                moves = torch.stack([V[i - 1][j - 1] + theta[i - 1, j - 1],
                                     V[i - 1][j] + gap, V[i][j - 1] + gap])  # fmt: skip
                V[i][j] = temp * torch.logsumexp(moves / temp, dim=0)
        return V[n][m]

    a, b, c = encode(a_str), encode(b_str), encode(shuffled)
    S = (W + W.T) / 2
    theta = S[a][:, b]
    score = smooth_nw(theta, gap)
    (expected,) = torch.autograd.grad(score, theta)
    opt = torch.optim.Adam([W, gap], lr=0.05)
    margins = []
    for _ in range(2):
        opt.zero_grad()
        S = (W + W.T) / 2
        pos = smooth_nw(S[a][:, b], gap)
        neg = smooth_nw(S[a][:, c], gap)
        loss = torch.relu(5.0 + neg - pos)
        loss.backward()
        opt.step()
        margins.append((pos - neg).item())

    with torch.no_grad():
        S = (W + W.T) / 2
        theta = S[a][:, b]
        n, m = theta.shape
        H = torch.zeros(n + 1, m + 1)
        H[:, 0] = gap * torch.arange(n + 1)
        H[0, :] = gap * torch.arange(m + 1)
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                H[i, j] = torch.max(torch.stack([H[i - 1, j - 1] + theta[i - 1, j - 1],
                                                 H[i - 1, j] + gap, H[i, j - 1] + gap]))  # fmt: skip
        i, j, top, bottom = n, m, [], []
        while i > 0 or j > 0:
            if i > 0 and j > 0 and torch.isclose(H[i, j], H[i - 1, j - 1] + theta[i - 1, j - 1]):
                top.append(a_str[i - 1])
                bottom.append(b_str[j - 1])
                i, j = i - 1, j - 1
            elif i > 0 and torch.isclose(H[i, j], H[i - 1, j] + gap):
                top.append(a_str[i - 1])
                bottom.append("-")
                i -= 1
            else:
                top.append("-")
                bottom.append(b_str[j - 1])
                j -= 1
    alignment = "".join(reversed(top)) + "\n" + "".join(reversed(bottom))
    return {"score": score, "expected": expected, "margins": margins, "W": W, "gap": gap,
            "H": H, "hard_score": H[n, m], "alignment": alignment}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # LSTM gates over packed steps + RMSprop: float32 order
def bio_danq_conv_bilstm_packed_variable_length_multitask(torch):
    """DanQ: a motif convolution and max pooling followed by a bidirectional LSTM over the
    pooled positions, here for regulatory sequences of different lengths packed with
    ``pack_padded_sequence(enforce_sorted=False)``; the final hidden states of both directions
    (``h_n[-2]``, ``h_n[-1]``) and the max over the unpacked outputs feed a multitask head
    trained with BCE for three RMSprop steps (DanQ's optimizer)."""
    nn, F = torch.nn, torch.nn.functional

    class DanQ(nn.Module):
        def __init__(self, filters=6, hidden=5, tasks=3):
            super().__init__()
            self.conv = nn.Conv1d(4, filters, 5, padding=2)
            self.pool = nn.MaxPool1d(2)
            self.lstm = nn.LSTM(filters, hidden, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(4 * hidden, tasks)

        def forward(self, x, lengths):
            h = self.pool(F.relu(self.conv(x))).transpose(1, 2)  # [B, L/2, C]
            pooled = torch.div(lengths, 2, rounding_mode="floor")
            packed = nn.utils.rnn.pack_padded_sequence(h, pooled, batch_first=True,
                                                       enforce_sorted=False)  # fmt: skip
            out, (h_n, _) = self.lstm(packed)
            out, out_len = nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                            padding_value=-1e4)  # fmt: skip
            feats = torch.cat([h_n[-2], h_n[-1], out.max(dim=1).values], dim=1)
            return self.fc(feats), out_len

    lengths = torch.tensor([20, 14, 17, 10])
    seq = _dna(33, 4, 20)
    for i, n in enumerate(lengths.tolist()):
        seq[i, n:] = 4  # padding encoded as N: all-zero one-hot
    x = _one_hot(torch, torch.tensor(seq))
    y = torch.tensor((_rng(34).random((4, 3)) < 0.4).astype(np.float32))
    model = set_weights(torch, DanQ(), seed=35)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits, out_len = model(x, lengths)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits, out_len = model(x, lengths)
    return {"losses": losses, "probs": torch.sigmoid(logits), "out_len": out_len,
            "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # lgamma/softplus sums over genes in float32
def bio_scvi_lite_zinb_vae_on_counts(torch):
    """An scVI-style VAE on single-cell counts: library size and ``log1p`` normalization,
    highly variable genes by dispersion (``var / mean``, ``topk``), an encoder to a Gaussian
    posterior sampled with reparameterization noise drawn by NumPy, a softmax decoder scaled by
    library size, the zero-inflated negative binomial log-likelihood written as scVI writes it
    (``softplus``, ``lgamma``, ``torch.where`` on zero counts) checked against
    ``distributions.NegativeBinomial``, the KL to the prior with ``kl_divergence``, two Adam
    steps, and per-cluster mean latents with ``index_add_``."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = _rng(36)
    cells, genes, latent = 8, 12, 3
    rate = rng.gamma(0.8, 3.0, (cells, genes)) * (rng.random((cells, genes)) > 0.3)
    counts = torch.tensor(rng.poisson(rate).astype(np.float32))
    library = counts.sum(1, keepdim=True)
    norm = torch.log1p(counts / library.clamp(min=1) * 1e4)
    mean, var = counts.mean(0), counts.var(0)
    dispersion = var / (mean + 1e-8)
    hvg = dispersion.topk(6).indices.sort().values

    class SCVI(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(genes, 8), nn.ReLU())
            self.mu, self.logvar = nn.Linear(8, latent), nn.Linear(8, latent)
            self.dec = nn.Sequential(nn.Linear(latent, 8), nn.ReLU())
            self.scale, self.dropout = nn.Linear(8, genes), nn.Linear(8, genes)
            self.log_theta = nn.Parameter(torch.zeros(genes))

        def forward(self, x, lib, eps):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + torch.exp(0.5 * logvar) * eps
            d = self.dec(z)
            px_rate = lib * torch.softmax(self.scale(d), dim=-1)
            return mu, logvar, z, px_rate, self.dropout(d)

    def log_zinb(x, mu, theta, pi, eps=1e-8):
        softplus_pi = F.softplus(-pi)
        log_theta_eps = torch.log(theta + eps)
        log_theta_mu_eps = torch.log(theta + mu + eps)
        pi_theta_log = -pi + theta * (log_theta_eps - log_theta_mu_eps)
        case_zero = F.softplus(pi_theta_log) - softplus_pi
        mul_case_zero = (x < eps).float() * case_zero
        case_non_zero = (-softplus_pi + pi_theta_log + x * (torch.log(mu + eps) - log_theta_mu_eps)
                         + torch.lgamma(x + theta) - torch.lgamma(theta)
                         - torch.lgamma(x + 1))  # fmt: skip
        mul_case_non_zero = (x > eps).float() * case_non_zero
        return mul_case_zero + mul_case_non_zero

    model = set_weights(torch, SCVI(), seed=37)
    eps_np = _rng(38).standard_normal((3, cells, latent)).astype(np.float32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(2):
        opt.zero_grad()
        mu, logvar, z, px_rate, px_drop = model(norm, library, torch.tensor(eps_np[step]))
        theta = torch.exp(model.log_theta)
        rec = -log_zinb(counts, px_rate, theta, px_drop).sum(-1)
        q = D.Normal(mu, torch.exp(0.5 * logvar))
        kl = D.kl_divergence(q, D.Normal(torch.zeros_like(mu), torch.ones_like(mu))).sum(-1)
        loss = (rec + kl).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        mu, logvar, z, px_rate, px_drop = model(norm, library, torch.tensor(eps_np[2]))
        theta = torch.exp(model.log_theta)
        nb = D.NegativeBinomial(
            total_count=theta, logits=torch.log(px_rate + 1e-8) - torch.log(theta)
        )
        nb_ll = nb.log_prob(counts).sum(-1)
        zinb_large_pi = log_zinb(counts, px_rate, theta, torch.full_like(px_drop, -30.0)).sum(-1)
        clusters = torch.tensor([0, 1, 0, 2, 1, 2, 0, 1])
        sums = torch.zeros(3, latent).index_add_(0, clusters, mu)
        cluster_means = sums / torch.bincount(clusters, minlength=3)[:, None]
    return {"library": library, "hvg": hvg, "dispersion": dispersion, "losses": losses,
            "nb_ll": nb_ll, "zinb_no_dropout": zinb_large_pi, "cluster_means": cluster_means,
            "theta": theta, "grads": grads(model)}  # fmt: skip


@program
def bio_in_silico_mutagenesis_saliency_and_integrated_gradients(torch):
    """Variant-effect and attribution analysis of a trained sequence model as genomics
    interpretation code does it: every single-nucleotide substitution built at once by
    broadcasting (``repeat`` + ``scatter_``), the ISM score matrix of prediction deltas,
    gradient x input saliency with gradients mean-centered over bases (the one-hot correction),
    integrated gradients along ``linspace`` alphas from a GC-matched background, their
    completeness (attributions summing to the output difference), and the top variant."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv1d(4, 6, 5, padding=2), nn.ReLU(), nn.AdaptiveMaxPool1d(1), nn.Flatten(),
        nn.Linear(6, 1),
    )  # fmt: skip
    set_weights(torch, model, seed=39)
    model.eval()
    seq = torch.tensor(_dna(40, 1, 16))[0]
    L = seq.shape[0]
    x = _one_hot(torch, seq[None])  # [1, 4, L]
    with torch.no_grad():
        ref = model(x).squeeze()
        pos = torch.arange(L).repeat_interleave(4)
        base = torch.arange(4).repeat(L)
        mutants = x.repeat(4 * L, 1, 1)
        mutants[torch.arange(4 * L), :, pos] = 0.0
        mutants[torch.arange(4 * L), base, pos] = 1.0
        mut_seq = seq.repeat(4 * L, 1).scatter_(1, pos[:, None], base[:, None])
        same = torch.equal(_one_hot(torch, mut_seq), mutants)
        ism = (model(mutants).squeeze(-1) - ref).view(L, 4).T  # [4, L]
        top = torch.argmax(ism.abs().flatten())
        top_variant = f"{'ACGT'[int(seq[top % L])]}{int(top % L) + 1}{'ACGT'[int(top // L)]}"

    xg = x.clone().requires_grad_(True)
    model(xg).sum().backward()
    g = xg.grad
    g_centered = g - g.mean(dim=1, keepdim=True)
    saliency = (g_centered * x).sum(1)

    gc = x[:, 1:3].mean()
    background = torch.stack([(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2])[None, :, None]
    background = background.expand_as(x)
    alphas = torch.linspace(0, 1, 9)[:, None, None, None]
    path = (background + alphas * (x - background)).squeeze(1).requires_grad_(True)
    out = model(path).sum()
    (path_grads,) = torch.autograd.grad(out, path)
    avg = (path_grads[:-1] + path_grads[1:]).mean(0) / 2  # trapezoid rule
    ig = (x - background)[0] * avg
    with torch.no_grad():
        delta = model(x) - model(background)
    return {"ref": ref, "ism": ism, "top_variant": top_variant, "saliency": saliency, "same": same,
            "grad": g, "ig": ig, "ig_sum": ig.sum(), "delta": delta.squeeze()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # CTC's log-space recursions and a GRU in float32
def bio_nanopore_ctc_basecaller_and_hmm_viterbi(torch):
    """A Bonito-style nanopore basecaller: a raw current signal normalized by median absolute
    deviation, a strided convolution and a GRU, ``log_softmax`` over blank + ACGT, trained with
    ``ctc_loss`` on reads of different lengths for two Adam steps, decoded greedily
    (``argmax``, ``unique_consecutive``, blanks dropped) into base strings; then a two-state
    CpG-island HMM over DNA: the forward algorithm with ``logsumexp`` over
    ``alpha[:, None] + log_trans`` in a loop, posterior decoding with the backward pass, and
    Viterbi with ``max`` and a ``gather`` traceback."""
    nn, F = torch.nn, torch.nn.functional
    rng = _rng(41)
    levels = np.array([-1.2, -0.3, 0.4, 1.1])
    reads = [rng.integers(0, 4, n) for n in (6, 4, 5)]
    signals = np.zeros((3, 1, 40), dtype=np.float32)
    for i, r in enumerate(reads):
        s = np.repeat(levels[r], 40 // len(r) + 1)[:40]
        signals[i, 0] = s + 0.15 * rng.standard_normal(40)
    x = torch.tensor(signals) * 3.0 + 0.5
    med = x.median(dim=-1, keepdim=True).values
    mad = (x - med).abs().median(dim=-1, keepdim=True).values
    x = (x - med) / (1.4826 * mad)

    class Basecaller(nn.Module):
        def __init__(self, c=8, hidden=8):
            super().__init__()
            self.conv = nn.Conv1d(1, c, 5, stride=2, padding=2)
            self.rnn = nn.GRU(c, hidden)
            self.out = nn.Linear(hidden, 5)

        def forward(self, x):  # [B, 1, T] -> [T', B, 5] as ctc_loss wants
            h = F.silu(self.conv(x)).permute(2, 0, 1)
            h, _ = self.rnn(h)
            return F.log_softmax(self.out(h), dim=-1)

    model = set_weights(torch, Basecaller(), seed=42)
    targets = torch.cat([torch.tensor(r) + 1 for r in reads])  # 0 is the blank
    target_lengths = torch.tensor([len(r) for r in reads])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        log_probs = model(x)
        input_lengths = torch.full((3,), log_probs.shape[0], dtype=torch.long)
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                          zero_infinity=True)  # fmt: skip
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        log_probs = model(x)
        per_read = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction="none")
        calls = []
        for b in range(3):
            path = torch.unique_consecutive(log_probs[:, b].argmax(-1))
            calls.append("".join("ACGT"[i - 1] for i in path[path != 0].tolist()))

    # CpG-island HMM: state 0 background, state 1 island
    seq = torch.tensor(_dna(43, 1, 18))[0]
    log_start = torch.log(torch.tensor([0.7, 0.3]))
    log_trans = torch.log(torch.tensor([[0.9, 0.1], [0.2, 0.8]]))
    log_emit = torch.log(torch.tensor([[0.3, 0.2, 0.2, 0.3], [0.1, 0.4, 0.4, 0.1]]))
    n = seq.shape[0]
    alpha = torch.zeros(n, 2)
    alpha[0] = log_start + log_emit[:, seq[0]]
    for t in range(1, n):
        alpha[t] = torch.logsumexp(alpha[t - 1][:, None] + log_trans, dim=0) + log_emit[:, seq[t]]
    log_likelihood = torch.logsumexp(alpha[-1], dim=0)
    beta = torch.zeros(n, 2)
    for t in range(n - 2, -1, -1):
        beta[t] = torch.logsumexp(log_trans + (log_emit[:, seq[t + 1]] + beta[t + 1])[None, :],
                                  dim=1)  # fmt: skip
    posterior = torch.exp(alpha + beta - log_likelihood)
    delta = log_start + log_emit[:, seq[0]]
    backpointers = []
    for t in range(1, n):
        scores = delta[:, None] + log_trans
        best, arg = scores.max(dim=0)
        backpointers.append(arg)
        delta = best + log_emit[:, seq[t]]
    state = delta.argmax()
    states = [state]
    for arg in reversed(backpointers):
        state = arg.gather(0, state[None])[0]
        states.append(state)
    viterbi = torch.stack(states[::-1])
    return {"x": x, "losses": losses, "per_read": per_read, "calls": "\n".join(calls),
            "grads": grads(model), "log_likelihood": log_likelihood, "posterior": posterior,
            "viterbi": viterbi, "viterbi_score": delta.max()}  # fmt: skip
