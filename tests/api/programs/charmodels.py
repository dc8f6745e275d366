"""makemore-style character models: counts, one-hot nets, MLPs with manual updates, BatchNorm by
hand, retain_grad checks, a small GPT block."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights

WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn"]
CHARS = sorted(set("".join(WORDS)))
STOI = {c: i + 1 for i, c in enumerate(CHARS)}
V = len(CHARS) + 1


def _bigrams():
    xs, ys = [], []
    for w in WORDS:
        chs = [0] + [STOI[c] for c in w] + [0]
        for a, b in zip(chs, chs[1:]):
            xs.append(a)
            ys.append(b)
    return np.array(xs, np.int64), np.array(ys, np.int64)


def _contexts(block: int = 3):
    xs, ys = [], []
    for w in WORDS:
        ctx = [0] * block
        for c in w + ".":
            ix = STOI.get(c, 0)
            xs.append(ctx)
            ys.append(ix)
            ctx = ctx[1:] + [ix]
    return np.array(xs, np.int64), np.array(ys, np.int64)


@program
def bigram_counts(torch):
    xs, ys = _bigrams()
    N = torch.zeros((V, V), dtype=torch.int32)
    for a, b in zip(xs[:30].tolist(), ys[:30].tolist()):
        N[a, b] += 1
    P = (N + 1).float()
    P /= P.sum(1, keepdim=True)
    logp = P[torch.tensor(xs), torch.tensor(ys)].log()
    return {"N": N, "P": P, "nll": -logp.mean()}


@program
def bigram_neural_net(torch):
    xs, ys = _bigrams()
    X, Y = torch.tensor(xs), torch.tensor(ys)
    W = torch.tensor(arr(1, V, V), requires_grad=True)
    losses = []
    for _ in range(8):
        xenc = torch.nn.functional.one_hot(X, num_classes=V).float()
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(len(xs)), Y].log().mean() + 0.01 * (W**2).mean()
        W.grad = None
        loss.backward()
        W.data += -10 * W.grad
        losses.append(loss.item())
    return {"losses": losses, "W": W}


@program
def mlp_char_model_manual_updates(torch):
    xs, ys = _contexts()
    X, Y = torch.tensor(xs), torch.tensor(ys)
    C = torch.tensor(arr(2, V, 4))
    W1 = torch.tensor(arr(3, 12, 20, scale=0.3))
    b1 = torch.tensor(arr(4, 20, scale=0.1))
    W2 = torch.tensor(arr(5, 20, V, scale=0.3))
    b2 = torch.zeros(V)
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    losses = []
    for i in range(10):
        ix = torch.tensor(ints(100 + i, len(xs), 16))
        emb = C[X[ix]]
        h = torch.tanh(emb.view(-1, 12) @ W1 + b1)
        logits = h @ W2 + b2
        loss = torch.nn.functional.cross_entropy(logits, Y[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.5 if i < 5 else 0.05
        for p in parameters:
            p.data += -lr * p.grad
        losses.append(loss.item())
    return {"losses": losses, "C": C, "W2": W2, "n_params": sum(p.nelement() for p in parameters)}


@program
def batchnorm_by_hand(torch):
    xs, ys = _contexts()
    X, Y = torch.tensor(xs), torch.tensor(ys)
    C = torch.tensor(arr(6, V, 4), requires_grad=True)
    W1 = torch.tensor(arr(7, 12, 16, scale=0.3), requires_grad=True)
    W2 = torch.tensor(arr(8, 16, V, scale=0.1), requires_grad=True)
    bngain = torch.ones((1, 16), requires_grad=True)
    bnbias = torch.zeros((1, 16), requires_grad=True)
    bnmean_running = torch.zeros((1, 16))
    bnstd_running = torch.ones((1, 16))
    parameters = [C, W1, W2, bngain, bnbias]
    for _ in range(5):
        emb = C[X]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        bnmeani = hpreact.mean(0, keepdim=True)
        bnstdi = hpreact.std(0, keepdim=True)
        hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
        with torch.no_grad():
            bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani
            bnstd_running = 0.999 * bnstd_running + 0.001 * bnstdi
        h = torch.tanh(hpreact)
        loss = torch.nn.functional.cross_entropy(h @ W2, Y)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -0.1 * p.grad
    return {"loss": loss, "running_mean": bnmean_running, "running_std": bnstd_running,
            "grads": [p.grad for p in parameters]}  # fmt: skip


@program
def manual_backprop_check_with_retain_grad(torch):
    xs, ys = _contexts()
    X, Y = torch.tensor(xs[:16]), torch.tensor(ys[:16])
    C = torch.tensor(arr(9, V, 3), requires_grad=True)
    W1 = torch.tensor(arr(10, 9, 8, scale=0.5), requires_grad=True)
    W2 = torch.tensor(arr(11, 8, V, scale=0.5), requires_grad=True)
    emb = C[X]
    embcat = emb.view(16, -1)
    hpre = embcat @ W1
    h = torch.tanh(hpre)
    logits = h @ W2
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    probs = counts * counts_sum**-1
    logprobs = probs.log()
    loss = -logprobs[torch.arange(16), Y].mean()
    for t in [logprobs, probs, counts_sum, counts, norm_logits, logit_maxes, logits, h, hpre,
              embcat, emb]:  # fmt: skip
        t.retain_grad()
    loss.backward()
    # the gradient by hand, as in makemore part 4
    dlogits = torch.softmax(logits, 1)
    dlogits[torch.arange(16), Y] -= 1
    dlogits /= 16
    return {"loss": loss, "dlogprobs": logprobs.grad, "dlogits": logits.grad,
            "dlogits_by_hand": dlogits, "dlogit_maxes": logit_maxes.grad, "dh": h.grad,
            "demb": emb.grad, "dC": C.grad, "retains": logits.retains_grad}  # fmt: skip


@program
def wavenet_hierarchical_model(torch):
    nn = torch.nn

    class FlattenConsecutive(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def forward(self, x):
            B, T, Cc = x.shape
            x = x.reshape(B, T // self.n, Cc * self.n)
            if x.shape[1] == 1:
                x = x.squeeze(1)
            return x

    xs, ys = _contexts(block=4)
    model = nn.Sequential(nn.Embedding(V, 6), FlattenConsecutive(2), nn.Linear(12, 16, bias=False),
                          nn.BatchNorm1d(16), nn.Tanh(), FlattenConsecutive(2),
                          nn.Linear(32, 16, bias=False), nn.BatchNorm1d(16), nn.Tanh(),
                          nn.Linear(16, V))  # fmt: skip
    set_weights(torch, model, seed=12)

    def run(x):  # BatchNorm1d takes [B, C, T]: the channels go to dimension 1 around it
        h = model[2](model[1](model[0](x)))
        h = model[3](h.transpose(1, 2)).transpose(1, 2)
        h = model[5](model[4](h))
        h = model[8](model[7](model[6](h)))
        return model[9](h)

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        loss = nn.functional.cross_entropy(run(torch.tensor(xs)), torch.tensor(ys))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "bn_mean": model[3].running_mean, "bn_var": model[7].running_var}


@program
def char_rnn_by_hand(torch):
    xs, ys = _bigrams()
    seq_x, seq_y = xs[:12], ys[:12]
    H = 8
    Wxh = torch.tensor(arr(13, V, H, scale=0.3), requires_grad=True)
    Whh = torch.tensor(arr(14, H, H, scale=0.3), requires_grad=True)
    Why = torch.tensor(arr(15, H, V, scale=0.3), requires_grad=True)
    h = torch.zeros(1, H)
    loss = 0.0
    for t in range(len(seq_x)):
        x = torch.nn.functional.one_hot(torch.tensor([int(seq_x[t])]), V).float()
        h = torch.tanh(x @ Wxh + h @ Whh)
        loss = loss + torch.nn.functional.cross_entropy(h @ Why, torch.tensor([int(seq_y[t])]))
    loss = loss / len(seq_x)
    loss.backward()
    return {"loss": loss, "dWxh": Wxh.grad, "dWhh": Whh.grad, "dWhy": Why.grad, "h": h}


@program
def greedy_decoding(torch):
    xs, ys = _contexts()
    emb = set_weights(torch, torch.nn.Embedding(V, 5), seed=16)
    head = set_weights(torch, torch.nn.Linear(15, V), seed=17)
    out = []
    ctx = [0, 0, 0]
    with torch.no_grad():
        for _ in range(8):
            logits = head(emb(torch.tensor([ctx])).view(1, -1))
            ix = torch.argmax(logits, dim=-1).item()
            out.append(ix)
            ctx = ctx[1:] + [ix]
    return {"decoded": out}


@program
def sampling_with_generator(torch):
    """Sampled values come from each library's own generator; shapes, ranges and reproducibility
    do not."""
    probs = torch.softmax(torch.tensor(arr(18, 4, V)), dim=-1)
    g = torch.Generator().manual_seed(2147483647)
    a = torch.multinomial(probs, num_samples=5, replacement=True, generator=g)
    g2 = torch.Generator().manual_seed(2147483647)
    b = torch.multinomial(probs, num_samples=5, replacement=True, generator=g2)
    c = torch.multinomial(probs[0], 6, replacement=False)
    u = torch.rand(3, 4, generator=g)
    return {"shape": list(a.shape), "same_seed_same_samples": bool(torch.equal(a, b)),
            "in_range": bool(((a >= 0) & (a < V)).all()), "is_long": a.dtype == torch.int64,
            "distinct": len(set(c.tolist())), "u_range": bool(((u >= 0) & (u < 1)).all())}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def tiny_gpt_block(torch):
    nn = torch.nn
    F = nn.functional
    n_embd, block_size, n_head = 16, 8, 4

    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

        def forward(self, x):
            B, T, Cc = x.shape
            k, q = self.key(x), self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = F.softmax(wei, dim=-1)
            return wei @ self.value(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleList([Head(n_embd // n_head) for _ in range(n_head)])
            self.proj = nn.Linear(n_embd, n_embd)
            self.ffwd = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(),
                                      nn.Linear(4 * n_embd, n_embd))  # fmt: skip
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.proj(torch.cat([h(self.ln1(x)) for h in self.heads], dim=-1))
            return x + self.ffwd(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, n_embd)
            self.pos = nn.Embedding(block_size, n_embd)
            self.block = Block()
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, V)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            x = self.tok(idx) + self.pos(torch.arange(T))
            logits = self.lm_head(self.ln_f(self.block(x)))
            loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
            return logits, loss

    model = set_weights(torch, GPT(), seed=19)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = ints(20, V, 4, block_size + 1)
    xb, yb = torch.tensor(data[:, :-1]), torch.tensor(data[:, 1:])
    losses = []
    for _ in range(3):
        _, loss = model(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "grads": grads(model)}
