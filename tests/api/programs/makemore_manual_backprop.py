"""makemore, lectures 1-5, written out in full: a bigram table of counts filled with ``+=`` on
indexing and ``index_put_``, the MLP language model (``C[Xb]``, ``view``, a learning-rate sweep,
train/dev splits), initialization diagnostics (``hpreact.std()``, tanh saturation, update-to-data
ratios), the "become a backprop ninja" exercise (every gradient by hand, down to ``dC``, checked
against ``loss.backward()``), the fused cross-entropy and BatchNorm backward, a training loop with
no autograd at all, and a WaveNet-style hierarchy of hand-written ``Linear``/``BatchNorm1d``/
``Tanh``/``FlattenConsecutive`` modules. All data and weights come from NumPy."""

from __future__ import annotations

import numpy as np

from programs import program

NAMES = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia", "harper",
         "evelyn", "abigail", "emily", "elizabeth", "mila", "ella", "avery", "sofia", "camila",
         "aria", "scarlett", "victoria", "madison", "luna", "grace", "chloe", "penelope", "layla",
         "riley", "zoey", "nora", "lily", "eleanor", "hannah", "lillian", "addison", "aubrey",
         "ellie", "stella", "natalie", "zoe"]  # fmt: skip
CHARS = sorted(set("".join(NAMES)))
STOI = {s: i + 1 for i, s in enumerate(CHARS)}
STOI["."] = 0
ITOS = {i: s for s, i in STOI.items()}
V = len(STOI)


def _build_dataset(words: list[str], block_size: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Every (context of ``block_size`` characters, next character) pair of ``words``."""
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = STOI[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return np.array(X, np.int64), np.array(Y, np.int64)


def _splits(block_size: int = 3, seed: int = 42):
    words = list(NAMES)
    np.random.default_rng(seed).shuffle(words)
    n1, n2 = int(0.8 * len(words)), int(0.9 * len(words))
    return (_build_dataset(words[:n1], block_size), _build_dataset(words[n1:n2], block_size),
            _build_dataset(words[n2:], block_size))  # fmt: skip


def _normal(g: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (g.standard_normal(shape) * scale).astype(np.float32)


def _mlp_params(torch, seed: int, n_embd: int, n_hidden: int, block_size: int = 3):
    """Lecture 4's deliberately non-trivial initialization (no zero biases, so that every manual
    gradient is exercised); returns ``[C, W1, b1, W2, b2, bngain, bnbias]``."""
    g = np.random.default_rng(seed)
    fan_in = n_embd * block_size
    C = _normal(g, V, n_embd)
    W1 = _normal(g, fan_in, n_hidden, scale=(5 / 3) / fan_in**0.5)
    b1 = _normal(g, n_hidden, scale=0.1)
    W2 = _normal(g, n_hidden, V, scale=0.1)
    b2 = _normal(g, V, scale=0.1)
    bngain = _normal(g, 1, n_hidden, scale=0.1) + 1.0
    bnbias = _normal(g, 1, n_hidden, scale=0.1)
    ps = [torch.tensor(a) for a in (C, W1, b1, W2, b2, bngain, bnbias)]
    for p in ps:
        p.requires_grad = True
    return ps


def _forward_exploded(torch, params, Xb, Yb):
    """Lecture 4's forward pass, split into every small step that has a gradient of its own."""
    C, W1, b1, W2, b2, bngain, bnbias = params
    n = Xb.shape[0]
    emb = C[Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff**2
    bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)  # Bessel's correction
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    return dict(emb=emb, embcat=embcat, hprebn=hprebn, bnmeani=bnmeani, bndiff=bndiff,
                bndiff2=bndiff2, bnvar=bnvar, bnvar_inv=bnvar_inv, bnraw=bnraw, hpreact=hpreact,
                h=h, logits=logits, logit_maxes=logit_maxes, norm_logits=norm_logits,
                counts=counts, counts_sum=counts_sum, counts_sum_inv=counts_sum_inv, probs=probs,
                logprobs=logprobs, loss=loss)  # fmt: skip


def _fused_backward(torch, params, Xb, Yb, t):
    """Lecture 4's exercises 2 and 3: cross-entropy and BatchNorm backward, each in one step."""
    F = torch.nn.functional
    C, W1, b1, W2, b2, bngain, bnbias = params
    n = Xb.shape[0]
    dlogits = F.softmax(t["logits"], 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T
    dW2 = t["h"].T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - t["h"] ** 2) * dh
    dbngain = (t["bnraw"] * dhpreact).sum(0, keepdim=True)
    dbnbias = dhpreact.sum(0, keepdim=True)
    bnraw, bnvar_inv = t["bnraw"], t["bnvar_inv"]
    dbnraw_dot = (dhpreact * bnraw).sum(0)
    dhprebn = (
        bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * dbnraw_dot)
    )
    dembcat = dhprebn @ W1.T
    dW1 = t["embcat"].T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(t["emb"].shape)
    dC = torch.zeros_like(C).index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
    return {"C": dC, "W1": dW1, "b1": db1, "W2": dW2, "b2": db2, "bngain": dbngain,
            "bnbias": dbnbias, "dlogits": dlogits, "dhprebn": dhprebn}  # fmt: skip


@program
def mm_bigram_count_table(torch):
    # the table of counts, one `+=` at a time (int32 as in the lecture) and in one index_put_
    N = torch.zeros((V, V), dtype=torch.int32)
    firsts, seconds = [], []
    for w in NAMES:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            ix1, ix2 = STOI[ch1], STOI[ch2]
            N[ix1, ix2] += 1
            firsts.append(ix1)
            seconds.append(ix2)
    xs, ys = torch.tensor(firsts), torch.tensor(seconds)
    N2 = torch.zeros((V, V), dtype=torch.int32)
    N2.index_put_((xs, ys), torch.ones(len(firsts), dtype=torch.int32), accumulate=True)
    N3 = torch.bincount(xs * V + ys, minlength=V * V).view(V, V)
    # row normalisation: keepdim matters (the lecture's broadcasting trap)
    P = (N + 1).float()
    P /= P.sum(1, keepdims=True)
    P_wrong = (N + 1).float() / (N + 1).float().sum(1)
    # negative log-likelihood over the data, once in a loop of .item()s and once vectorized
    log_likelihood, n = 0.0, 0
    for w in NAMES[:5]:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            log_likelihood += torch.log(P[STOI[ch1], STOI[ch2]]).item()
            n += 1
    nll_all = -P[xs, ys].log().mean()
    # an unseen pair costs infinity without smoothing
    Praw = N.float() / N.float().sum(1, keepdim=True)
    unseen = -Praw[STOI["v"], STOI["v"]].log()
    # greedy (argmax) decoding from the table
    out, ix = [], 0
    for _ in range(8):
        ix = int(P[ix].argmax().item())
        out.append(ITOS[ix])
        if ix == 0:
            break
    return {"N": N, "same_index_put": bool(torch.equal(N, N2)),
            "same_bincount": bool(torch.equal(N.long(), N3)), "N_dtype": str(N.dtype),
            "row_sums": P.sum(1), "P": P, "P_wrong_row0": P_wrong[0], "total": N.sum().item(),
            "nll_loop": -log_likelihood / n, "nll_all": nll_all, "unseen": unseen,
            "top_first_letters": torch.sort(N[0], descending=True, stable=True).indices[:4],
            "decoded": "".join(out)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # 12 SGD steps over a tanh MLP: float32 reduction order
def mm_mlp_lr_sweep_and_splits(torch):
    F = torch.nn.functional
    (xtr, ytr), (Xdev, Ydev), (Xte, Yte) = _splits()
    Xtr, Ytr = torch.tensor(xtr), torch.tensor(ytr)
    g = np.random.default_rng(7)
    C = torch.tensor(_normal(g, V, 2))
    W1 = torch.tensor(_normal(g, 6, 32, scale=0.3))
    b1 = torch.tensor(_normal(g, 32, scale=0.1))
    W2 = torch.tensor(_normal(g, 32, V, scale=0.1))
    b2 = torch.tensor(np.zeros(V, np.float32))
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    # three ways to concatenate the context embeddings
    emb = C[Xtr[:5]]
    by_cat = torch.cat([emb[:, 0, :], emb[:, 1, :], emb[:, 2, :]], 1)
    by_unbind = torch.cat(torch.unbind(emb, 1), 1)
    by_view = emb.view(-1, 6)
    lre = torch.linspace(-2, 0, 12)
    lrs = 10**lre
    lri, lossi = [], []
    for i in range(12):
        ix = torch.tensor(g.integers(0, Xtr.shape[0], 24))
        emb = C[Xtr[ix]]
        h = torch.tanh(emb.view(-1, 6) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Ytr[ix])
        counts = logits.exp()
        prob = counts / counts.sum(1, keepdims=True)
        loss_by_hand = -prob[torch.arange(24), Ytr[ix]].log().mean()
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = lrs[i]
        for p in parameters:
            p.data += -lr * p.grad
        lri.append(lre[i].item())
        lossi.append(loss.log10().item())

    @torch.no_grad()
    def split_loss(X, Y):
        X, Y = torch.tensor(X), torch.tensor(Y)
        h = torch.tanh(C[X].view(-1, 6) @ W1 + b1)
        return F.cross_entropy(h @ W2 + b2, Y).item()

    return {"cat_eq_unbind": bool(torch.equal(by_cat, by_unbind)),
            "cat_eq_view": bool(torch.equal(by_cat, by_view)), "by_view": by_view,
            "n_params": sum(p.nelement() for p in parameters), "lri": lri, "lossi": lossi,
            "loss_by_hand": loss_by_hand, "loss": loss, "train": split_loss(xtr, ytr),
            "dev": split_loss(Xdev, Ydev), "test": split_loss(Xte, Yte),
            "split_sizes": [Xtr.shape[0], len(Xdev), len(Xte)], "C": C}  # fmt: skip


@program
def mm_init_saturation_diagnostics(torch):
    F = torch.nn.functional
    (Xtr, Ytr), _, _ = _splits()
    Xb, Yb = torch.tensor(Xtr[:32]), torch.tensor(Ytr[:32])
    g = np.random.default_rng(11)
    C = torch.tensor(_normal(g, V, 10))
    W1_raw = _normal(g, 30, 64)
    W2_raw = _normal(g, 64, V)
    out = {"expected_init_loss": -torch.tensor(1.0 / V).log()}
    for name, w1_scale, w2_scale in [("naive", 1.0, 1.0), ("small_logits", 1.0, 0.01),
                                     ("kaiming", (5 / 3) / 30**0.5, 0.01)]:  # fmt: skip
        W1 = torch.tensor(W1_raw * np.float32(w1_scale), requires_grad=True)
        W2 = torch.tensor(W2_raw * np.float32(w2_scale), requires_grad=True)
        hpreact = C[Xb].view(Xb.shape[0], -1) @ W1
        h = torch.tanh(hpreact)
        h.retain_grad()
        logits = h @ W2
        loss = F.cross_entropy(logits, Yb)
        loss.backward()
        out[name] = {
            "loss": loss.item(),
            "hpreact_std": hpreact.std(),
            "hpreact_mean": hpreact.mean(),
            "saturated": (h.abs() > 0.97).float().mean(),
            "dead_neurons": (h.abs() > 0.99).all(0).sum().item(),
            "hist": torch.histc(h, bins=10, min=-1, max=1),
            "logits_absmax": logits.abs().max(),
            "dh_std": h.grad.std(),
            "dW1_std": W1.grad.std(),
        }
    return out


@program
def mm_manual_backprop_every_step(torch):
    F = torch.nn.functional
    (Xtr, Ytr), _, _ = _splits()
    n = 16
    Xb, Yb = torch.tensor(Xtr[:n]), torch.tensor(Ytr[:n])
    params = _mlp_params(torch, 21, n_embd=5, n_hidden=24)
    C, W1, b1, W2, b2, bngain, bnbias = params
    t = _forward_exploded(torch, params, Xb, Yb)
    for p in params:
        p.grad = None
    for v in t.values():
        v.retain_grad()
    t["loss"].backward()
    # exercise 1: backprop through every line by hand
    logprobs, probs, counts = t["logprobs"], t["probs"], t["counts"]
    counts_sum, counts_sum_inv, logits = t["counts_sum"], t["counts_sum_inv"], t["logits"]
    h, bnraw, bndiff, bnvar = t["h"], t["bnraw"], t["bndiff"], t["bnvar"]
    bnvar_inv, bndiff2, hprebn, embcat, emb = (t["bnvar_inv"], t["bndiff2"], t["hprebn"],
                                               t["embcat"], t["emb"])  # fmt: skip
    dlogprobs = torch.zeros_like(logprobs)
    dlogprobs[range(n), Yb] = -1.0 / n
    dprobs = (1.0 / probs) * dlogprobs
    dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
    dcounts = counts_sum_inv * dprobs
    dcounts_sum = (-(counts_sum**-2)) * dcounts_sum_inv
    dcounts += torch.ones_like(counts) * dcounts_sum
    dnorm_logits = counts * dcounts
    dlogits = dnorm_logits.clone()
    dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
    dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h**2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnraw = bngain * dhpreact
    dbnbias = dhpreact.sum(0, keepdim=True)
    dbndiff = bnvar_inv * dbnraw
    dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
    dbnvar = (-0.5 * (bnvar + 1e-5) ** -1.5) * dbnvar_inv
    dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar
    dbndiff += (2 * bndiff) * dbndiff2
    dhprebn = dbndiff.clone()
    dbnmeani = (-dbndiff).sum(0)
    dhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            dC[ix] += demb[k, j]
    manual = {"logprobs": dlogprobs, "probs": dprobs, "counts_sum_inv": dcounts_sum_inv,
              "counts_sum": dcounts_sum, "counts": dcounts, "norm_logits": dnorm_logits,
              "logit_maxes": dlogit_maxes, "logits": dlogits, "h": dh, "hpreact": dhpreact,
              "bnraw": dbnraw, "bnvar_inv": dbnvar_inv, "bnvar": dbnvar, "bndiff2": dbndiff2,
              "bndiff": dbndiff, "bnmeani": dbnmeani, "hprebn": dhprebn, "embcat": dembcat,
              "emb": demb}  # fmt: skip
    leaves = {"C": (dC, C), "W1": (dW1, W1), "b1": (db1, b1), "W2": (dW2, W2), "b2": (db2, b2),
              "bngain": (dbngain, bngain), "bnbias": (dbnbias, bnbias)}  # fmt: skip
    autograd = {k: t[k].grad for k in manual}
    autograd.update({k: p.grad for k, (_, p) in leaves.items()})
    manual.update({k: d for k, (d, _) in leaves.items()})
    # Karpathy's cmp(): approximately equal, and the largest difference (kept under the tolerance)
    close = {k: bool(torch.allclose(manual[k], autograd[k], rtol=1e-4, atol=1e-6)) for k in manual}
    maxdiff = {k: (manual[k] - autograd[k]).abs().max().item() < 1e-5 for k in manual}
    return {"loss": t["loss"], "manual": manual, "autograd": autograd, "close": close,
            "maxdiff_small": maxdiff,
            "dlogit_maxes_tiny": dlogit_maxes.abs().max().item() < 1e-6}  # fmt: skip


@program
def mm_manual_backprop_fused_ce_and_batchnorm(torch):
    F = torch.nn.functional
    (Xtr, Ytr), _, _ = _splits()
    n = 24
    Xb, Yb = torch.tensor(Xtr[-n:]), torch.tensor(Ytr[-n:])
    params = _mlp_params(torch, 22, n_embd=4, n_hidden=20)
    C, W1, b1, W2, b2, bngain, bnbias = params
    t = _forward_exploded(torch, params, Xb, Yb)
    # the fast forward gives the same loss and the same BatchNorm output
    loss_fast = F.cross_entropy(t["logits"], Yb)
    hprebn = t["hprebn"]
    bnstd = torch.sqrt(hprebn.var(0, keepdim=True, unbiased=True) + 1e-5)
    hpreact_fast = bngain * (hprebn - hprebn.mean(0, keepdim=True)) / bnstd + bnbias
    for v in (t["logits"], t["hprebn"]):
        v.retain_grad()
    t["loss"].backward()
    manual = _fused_backward(torch, params, Xb, Yb, t)
    autograd = {"C": C.grad, "W1": W1.grad, "b1": b1.grad, "W2": W2.grad, "b2": b2.grad,
                "bngain": bngain.grad, "bnbias": bnbias.grad, "dlogits": t["logits"].grad,
                "dhprebn": t["hprebn"].grad}  # fmt: skip
    close = {k: bool(torch.allclose(manual[k], autograd[k], rtol=1e-4, atol=1e-6)) for k in manual}
    # what dlogits looks like: each row sums to zero, the correct class is pulled down
    dl = manual["dlogits"]
    return {"loss": t["loss"], "loss_fast_diff_small": (loss_fast - t["loss"]).abs().item() < 1e-5,
            "hpreact_fast": hpreact_fast,
            "hpreact_max_diff_small": (hpreact_fast - t["hpreact"]).abs().max().item() < 1e-4,
            "manual": manual, "autograd": autograd, "close": close,
            "dlogits_row_sums_small": dl.sum(1).abs().max().item() < 1e-6,
            "dlogits_at_target": dl[torch.arange(n), Yb] * n,
            "probs_row0": F.softmax(t["logits"], 1)[0]}  # fmt: skip


@program(rtol=1e-3, atol=2e-5)  # 6 steps of gradients by hand vs autograd: float32 reduction order
def mm_training_without_autograd(torch):
    F = torch.nn.functional
    (Xtr, Ytr), (Xdev, Ydev), _ = _splits()
    Xtr, Ytr = torch.tensor(Xtr), torch.tensor(Ytr)
    manual_params = _mlp_params(torch, 23, n_embd=4, n_hidden=16)
    auto_params = [p.detach().clone().requires_grad_(True) for p in manual_params]
    g = np.random.default_rng(24)
    lossi, lossi_auto = [], []
    for i in range(6):
        ix = torch.tensor(g.integers(0, Xtr.shape[0], 20))
        Xb, Yb = Xtr[ix], Ytr[ix]
        lr = 0.1 if i < 4 else 0.01  # step decay
        with torch.no_grad():
            t = _forward_exploded(torch, manual_params, Xb, Yb)
            grads = _fused_backward(torch, manual_params, Xb, Yb, t)
            names = ["C", "W1", "b1", "W2", "b2", "bngain", "bnbias"]
            for p, name in zip(manual_params, names):
                p.data += -lr * grads[name]
        lossi.append(t["loss"].item())
        ta = _forward_exploded(torch, auto_params, Xb, Yb)
        for p in auto_params:
            p.grad = None
        ta["loss"].backward()
        for p in auto_params:
            p.data += -lr * p.grad
        lossi_auto.append(ta["loss"].item())
    C, W1, b1, W2, b2, bngain, bnbias = manual_params
    # calibrate the BatchNorm statistics over the whole training set after training
    with torch.no_grad():
        hpreact = C[Xtr].view(Xtr.shape[0], -1) @ W1 + b1
        bnmean = hpreact.mean(0, keepdim=True)
        bnvar = hpreact.var(0, keepdim=True, unbiased=True)

    @torch.no_grad()
    def split_loss(X, Y):
        X, Y = torch.tensor(X), torch.tensor(Y)
        hpre = C[X].view(X.shape[0], -1) @ W1 + b1
        hpre = bngain * (hpre - bnmean) * (bnvar + 1e-5) ** -0.5 + bnbias
        return F.cross_entropy(torch.tanh(hpre) @ W2 + b2, Y)

    return {"lossi": lossi, "lossi_auto": lossi_auto, "manual": manual_params,
            "auto": auto_params, "requires_grad": [p.requires_grad for p in manual_params],
            "grad_is_none": [p.grad is None for p in manual_params], "bnmean": bnmean,
            "bnvar": bnvar, "train": split_loss(Xtr.numpy(), Ytr.numpy()),
            "dev": split_loss(Xdev, Ydev)}  # fmt: skip


@program
def mm_embedding_grad_scatter_variants(torch):
    F = torch.nn.functional
    (Xtr, Ytr), _, _ = _splits()
    Xb, Yb = torch.tensor(Xtr[:40]), torch.tensor(Ytr[:40])
    g = np.random.default_rng(31)
    C = torch.tensor(_normal(g, V, 3), requires_grad=True)
    W = torch.tensor(_normal(g, 9, V, scale=0.5), requires_grad=True)
    emb = C[Xb]
    logits = emb.view(-1, 9) @ W
    loss = F.cross_entropy(logits, Yb)
    loss.backward()
    dlogits = F.softmax(logits, 1)
    dlogits[range(40), Yb] -= 1
    dlogits /= 40
    demb = (dlogits @ W.T).view(emb.shape)
    d = C.shape[1]
    dC_loop = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            dC_loop[Xb[k, j]] += demb[k, j]
    dC_index_add = torch.zeros_like(C).index_add_(0, Xb.view(-1), demb.view(-1, d))
    dC_put = torch.zeros_like(C).index_put_((Xb.view(-1),), demb.reshape(-1, d), accumulate=True)
    dC_onehot = F.one_hot(Xb.view(-1), num_classes=V).float().T @ demb.view(-1, d)
    dC_scatter = torch.zeros_like(C).scatter_add_(0, Xb.view(-1, 1).expand(-1, d), demb.view(-1, d))
    # a plain `dC[Xb] += demb` keeps only one of the repeated rows: not a gradient
    counts = torch.bincount(Xb.view(-1), minlength=V)
    return {"autograd": C.grad, "loop": dC_loop, "index_add": dC_index_add, "index_put": dC_put,
            "one_hot": dC_onehot, "scatter_add": dC_scatter, "counts": counts,
            "unused_rows_zero": bool((C.grad[counts == 0] == 0).all()),
            "all_close": all(bool(torch.allclose(x, C.grad, atol=1e-6)) for x in
                             (dC_loop, dC_index_add, dC_put, dC_onehot, dC_scatter))}  # fmt: skip


class _Layers:
    """Lecture 3/5's hand-written layers, created for one library."""

    def __init__(self, torch, g: np.random.Generator):
        class Linear:
            def __init__(self, fan_in, fan_out, bias=True):
                self.weight = torch.tensor(_normal(g, fan_in, fan_out, scale=1 / fan_in**0.5))
                self.bias = torch.zeros(fan_out) if bias else None

            def __call__(self, x):
                self.out = x @ self.weight
                if self.bias is not None:
                    self.out += self.bias
                return self.out

            def parameters(self):
                return [self.weight] + ([] if self.bias is None else [self.bias])

        class BatchNorm1d:
            def __init__(self, dim, eps=1e-5, momentum=0.1):
                self.eps, self.momentum, self.training = eps, momentum, True
                self.gamma = torch.ones(dim)
                self.beta = torch.zeros(dim)
                self.running_mean = torch.zeros(dim)
                self.running_var = torch.ones(dim)

            def __call__(self, x):
                if self.training:
                    dim = 0 if x.ndim == 2 else (0, 1)
                    xmean = x.mean(dim, keepdim=True)
                    xvar = x.var(dim, keepdim=True)
                else:
                    xmean, xvar = self.running_mean, self.running_var
                xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
                self.out = self.gamma * xhat + self.beta
                if self.training:
                    with torch.no_grad():
                        m = self.momentum
                        self.running_mean = (1 - m) * self.running_mean + m * xmean.squeeze()
                        self.running_var = (1 - m) * self.running_var + m * xvar.squeeze()
                return self.out

            def parameters(self):
                return [self.gamma, self.beta]

        class Tanh:
            def __call__(self, x):
                self.out = torch.tanh(x)
                return self.out

            def parameters(self):
                return []

        class Embedding:
            def __init__(self, num_embeddings, embedding_dim):
                self.weight = torch.tensor(_normal(g, num_embeddings, embedding_dim))

            def __call__(self, IX):
                self.out = self.weight[IX]
                return self.out

            def parameters(self):
                return [self.weight]

        class FlattenConsecutive:
            def __init__(self, n):
                self.n = n

            def __call__(self, x):
                B, T, Cc = x.shape
                x = x.view(B, T // self.n, Cc * self.n)
                if x.shape[1] == 1:
                    x = x.squeeze(1)
                self.out = x
                return self.out

            def parameters(self):
                return []

        class Sequential:
            def __init__(self, layers):
                self.layers = layers

            def __call__(self, x):
                for layer in self.layers:
                    x = layer(x)
                self.out = x
                return self.out

            def parameters(self):
                return [p for layer in self.layers for p in layer.parameters()]

        self.Linear, self.BatchNorm1d, self.Tanh = Linear, BatchNorm1d, Tanh
        self.Embedding, self.FlattenConsecutive, self.Sequential = (Embedding, FlattenConsecutive,
                                                                    Sequential)  # fmt: skip


@program(rtol=2e-3, atol=5e-5)  # a 4-layer stack, 5 SGD steps, then log10 of small ratios
def mm_custom_layers_activation_stats(torch):
    F = torch.nn.functional
    (Xtr, Ytr), _, _ = _splits()
    Xtr, Ytr = torch.tensor(Xtr), torch.tensor(Ytr)
    g = np.random.default_rng(41)
    L = _Layers(torch, g)
    n_embd, n_hidden = 6, 32
    C = torch.tensor(_normal(g, V, n_embd))
    layers = [L.Linear(3 * n_embd, n_hidden, bias=False), L.BatchNorm1d(n_hidden), L.Tanh(),
              L.Linear(n_hidden, n_hidden, bias=False), L.BatchNorm1d(n_hidden), L.Tanh(),
              L.Linear(n_hidden, V, bias=False), L.BatchNorm1d(V)]  # fmt: skip
    with torch.no_grad():
        layers[-1].gamma *= 0.1  # a less confident last layer
        for layer in layers:
            if isinstance(layer, L.Linear):
                layer.weight *= 5 / 3  # tanh gain
    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    for p in parameters:
        p.requires_grad = True
    ud, lossi = [], []
    for i in range(5):
        ix = torch.tensor(g.integers(0, Xtr.shape[0], 32))
        x = C[Xtr[ix]].view(32, -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Ytr[ix])
        for layer in layers:
            layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()
        if i == 0:  # grad:data ratio at initialization, of the weight matrices
            init_ratio = [(p.grad.std() / p.data.std()).log10().item()
                          for p in parameters if p.ndim == 2]  # fmt: skip
        lr = 0.1 if i < 3 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        with torch.no_grad():
            ud.append([((lr * p.grad).std() / p.data.std()).log10().item() for p in parameters])
        lossi.append(loss.item())
    act, grad_stats, weight_stats, lines, hists = [], [], [], [], []
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, L.Tanh):
            t = layer.out
            act.append({"mean": t.mean(), "std": t.std(),
                        "saturated": (t.abs() > 0.97).float().mean()})  # fmt: skip
            grad_stats.append({"mean": t.grad.mean(), "std": t.grad.std()})
            fmt = "layer %d (%10s): mean %+.2f, std %.2f, saturated: %.2f%%"
            lines.append(fmt % (  # noqa: UP031
                i, layer.__class__.__name__, t.mean(), t.std(),
                (t.abs() > 0.97).float().mean() * 100))  # fmt: skip
            hy, hx = torch.histogram(t, bins=8, density=True)
            hists.append({"hy": hy, "hx": hx})
    for p in parameters:
        if p.ndim == 2:
            weight_stats.append({"shape": list(p.shape), "grad_std": p.grad.std(),
                                 "grad_to_data": p.grad.std() / p.std()})  # fmt: skip
            lines.append("weight %10s | mean %+.3f | std %.3e" % (  # noqa: UP031
                tuple(p.shape), p.grad.mean() * 1e3, p.grad.std()))  # fmt: skip
    return {"lossi": lossi, "ud": ud, "init_ratio": init_ratio, "act": act, "grad": grad_stats,
            "weights": weight_stats, "lines": lines, "hists": hists,
            "loss_curve": torch.tensor(lossi[:4]).view(-1, 2).mean(1),
            "n_params": sum(p.nelement() for p in parameters),
            "running_mean": layers[1].running_mean,
            "running_var": layers[4].running_var}  # fmt: skip


@program(rtol=2e-3, atol=5e-5)  # 6 SGD steps through a 3-level hierarchy of BatchNorms
def mm_wavenet_flatten_consecutive(torch):
    F = torch.nn.functional
    block_size = 8
    (Xtr, Ytr), (Xdev, Ydev), _ = _splits(block_size=block_size)
    Xtr, Ytr = torch.tensor(Xtr), torch.tensor(Ytr)
    g = np.random.default_rng(51)
    L = _Layers(torch, g)
    n_embd, n_hidden = 4, 12
    model = L.Sequential([
        L.Embedding(V, n_embd),
        L.FlattenConsecutive(2), L.Linear(n_embd * 2, n_hidden, bias=False),
        L.BatchNorm1d(n_hidden), L.Tanh(),
        L.FlattenConsecutive(2), L.Linear(n_hidden * 2, n_hidden, bias=False),
        L.BatchNorm1d(n_hidden), L.Tanh(),
        L.FlattenConsecutive(2), L.Linear(n_hidden * 2, n_hidden, bias=False),
        L.BatchNorm1d(n_hidden), L.Tanh(),
        L.Linear(n_hidden, V),
    ])  # fmt: skip
    with torch.no_grad():
        model.layers[-1].weight *= 0.1
    parameters = model.parameters()
    for p in parameters:
        p.requires_grad = True
    # the shapes of every layer's output for a batch of 4
    model(Xtr[:4])
    shapes = [f"{layer.__class__.__name__}: {tuple(layer.out.shape)}" for layer in model.layers]
    lossi = []
    for i in range(6):
        ix = torch.tensor(g.integers(0, Xtr.shape[0], 16))
        logits = model(Xtr[ix])
        loss = F.cross_entropy(logits, Ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 4 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.item())
    for layer in model.layers:
        layer.training = False

    @torch.no_grad()
    def split_loss(X, Y):
        return F.cross_entropy(model(torch.tensor(X)), torch.tensor(Y)).item()

    # greedy decoding in eval mode
    names = []
    with torch.no_grad():
        for start in range(3):
            out, context = [], [0] * (block_size - 1) + [start + 1]
            for _ in range(10):
                ix = int(torch.argmax(model(torch.tensor([context])), dim=1).item())
                context = context[1:] + [ix]
                if ix == 0:
                    break
                out.append(ITOS[ix])
            names.append("".join(out))
    bn = model.layers[7]
    return {"shapes": shapes, "lossi": lossi, "train": split_loss(Xtr.numpy(), Ytr.numpy()),
            "dev": split_loss(Xdev, Ydev), "running_mean": bn.running_mean,
            "running_var": bn.running_var, "names": names,
            "n_params": sum(p.nelement() for p in parameters),
            "emb_grad": model.layers[0].weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=2e-5)  # 8 gradient steps on a softmax: float32 reduction order
def mm_bigram_onehot_net_gradient_by_hand(torch):
    F = torch.nn.functional
    xs_l, ys_l = [], []
    for w in NAMES[:12]:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            xs_l.append(STOI[ch1])
            ys_l.append(STOI[ch2])
    xs, ys = torch.tensor(xs_l), torch.tensor(ys_l)
    num = xs.nelement()
    W = torch.tensor(_normal(np.random.default_rng(61), V, V), requires_grad=True)
    W_manual = W.detach().clone()
    xenc = F.one_hot(xs, num_classes=V).float()
    same_rows = bool(torch.allclose(xenc @ W, W[xs]))
    losses, losses_manual = [], []
    for _ in range(8):
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W**2).mean()
        W.grad = None
        loss.backward()
        W.data += -20 * W.grad
        losses.append(loss.item())
        # the same step by hand: softmax minus one-hot, back through the one-hot matmul
        with torch.no_grad():
            lg = xenc @ W_manual
            p = lg.softmax(1)
            loss_m = -p[torch.arange(num), ys].log().mean() + 0.01 * (W_manual**2).mean()
            dlogits = (p - F.one_hot(ys, V).float()) / num
            dW = xenc.T @ dlogits + 0.01 * 2 * W_manual / W_manual.nelement()
            W_manual -= 20 * dW
        losses_manual.append(loss_m.item())
    return {"same_rows": same_rows, "losses": losses, "losses_manual": losses_manual, "W": W,
            "W_manual": W_manual, "argmax_next": probs.argmax(1)[:10]}  # fmt: skip
