"""Whole small models and training idioms: a VAE, a GAN step, skip-gram with negative sampling,
additive attention, GPT-style weight-decay groups, gradient accumulation, float64 training."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program
def vae_step_with_fixed_noise(torch):
    nn = torch.nn
    F = nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(6, 8)
            self.mu = nn.Linear(8, 2)
            self.logvar = nn.Linear(8, 2)
            self.dec = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 6))

        def forward(self, x, eps):
            h = F.relu(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + eps * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.dec(z)), mu, logvar

    model = set_weights(torch, VAE(), seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.tensor(np.random.default_rng(2).random((10, 6)).astype(np.float32))
    losses = []
    for step in range(4):
        eps = torch.tensor(arr(3 + step, 10, 2))
        recon, mu, logvar = model(x, eps)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (bce + kld) / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def gan_discriminator_generator_step(torch):
    nn = torch.nn
    G = set_weights(
        torch, nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 4)), seed=4
    )
    D = set_weights(
        torch, nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)), seed=5
    )
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    crit = nn.BCEWithLogitsLoss()
    real = torch.tensor(arr(6, 8, 4))
    z = torch.tensor(arr(7, 8, 3))
    ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)
    fake = G(z)
    d_loss = crit(D(real), ones) + crit(D(fake.detach()), zeros)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = crit(D(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    return {"d_loss": d_loss, "g_loss": g_loss, "G": params(G), "D": params(D)}


@program
def skipgram_negative_sampling(torch):
    nn = torch.nn
    V, D = 20, 5
    emb_in = set_weights(torch, nn.Embedding(V, D), seed=8, scale=0.5)
    emb_out = set_weights(torch, nn.Embedding(V, D), seed=9, scale=0.5)
    center = torch.tensor(ints(10, V, 12))
    context = torch.tensor(ints(11, V, 12))
    negatives = torch.tensor(ints(12, V, 12, 4))
    opt = torch.optim.SGD(list(emb_in.parameters()) + list(emb_out.parameters()), lr=0.5)
    losses = []
    for _ in range(3):
        v = emb_in(center)
        pos = (v * emb_out(context)).sum(-1)
        neg = torch.bmm(emb_out(negatives), v.unsqueeze(2)).squeeze(2)
        loss = -(nn.functional.logsigmoid(pos) + nn.functional.logsigmoid(-neg).sum(1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "emb_in": emb_in.weight}


@program
def additive_attention_seq2seq(torch):
    nn = torch.nn

    class Additive(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.W = nn.Linear(h, h, bias=False)
            self.U = nn.Linear(h, h, bias=False)
            self.v = nn.Linear(h, 1, bias=False)

        def forward(self, query, keys, mask):
            scores = self.v(torch.tanh(self.W(query).unsqueeze(1) + self.U(keys))).squeeze(-1)
            scores = scores.masked_fill(~mask, -1e9)
            w = torch.softmax(scores, dim=-1)
            return torch.bmm(w.unsqueeze(1), keys).squeeze(1), w

    att = set_weights(torch, Additive(6), seed=13)
    q = torch.tensor(arr(14, 3, 6))
    keys = torch.tensor(arr(15, 3, 5, 6), requires_grad=True)
    lengths = torch.tensor([5, 3, 1])
    mask = torch.arange(5).unsqueeze(0) < lengths.unsqueeze(1)
    ctx, w = att(q, keys, mask)
    ctx.pow(2).sum().backward()
    return {"ctx": ctx, "weights": w, "dkeys": keys.grad, "grads": grads(att)}


@program
def gpt_style_weight_decay_groups(torch):
    nn = torch.nn
    model = nn.ModuleDict(
        {"emb": nn.Embedding(10, 4), "ln": nn.LayerNorm(4), "fc": nn.Linear(4, 10)}
    )
    set_weights(torch, model, seed=16)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-2, betas=(0.9, 0.95))  # fmt: skip
    idx = torch.tensor(ints(17, 10, 4, 3))
    for _ in range(3):
        logits = model["fc"](model["ln"](model["emb"](idx)))
        loss = nn.functional.cross_entropy(logits.view(-1, 10), idx.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {
        "loss": loss,
        "params": params(model),
        "n_decay": len(decay),
        "n_no_decay": len(no_decay),
    }


@program
def gradient_accumulation_and_retain_graph(torch):
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), seed=18)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.tensor(arr(19, 8, 3)), torch.tensor(arr(20, 8, 1))
    opt.zero_grad(set_to_none=False)
    for k in range(4):
        loss = nn.functional.mse_loss(model(x[2 * k : 2 * k + 2]), y[2 * k : 2 * k + 2]) / 4
        loss.backward()
    accumulated = {n: p.grad.clone() for n, p in model.named_parameters()}
    opt.step()
    opt.zero_grad(set_to_none=False)
    out = model(x).sum()
    out.backward(retain_graph=True)
    out.backward()
    return {"accumulated": accumulated, "twice": grads(model), "params": params(model),
            "zeroed": [float(p.grad.abs().sum()) for p in model.parameters()]}  # fmt: skip


@program
def apply_init_and_no_grad_decorator(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.LayerNorm(2))

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.05)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    model.apply(init)

    @torch.no_grad()
    def evaluate(x):
        return model(x)

    x = torch.tensor(arr(21, 5, 3))
    out = evaluate(x)
    kinds = [type(m).__name__ for m in model.modules()]
    names = [n for n, _ in model.named_modules()]
    return {"out": out, "requires_grad": out.requires_grad, "kinds": kinds, "names": names}


@program
def float64_model_training(torch):
    nn = torch.nn
    model = set_weights(
        torch, nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 1)), seed=22
    )
    model.double()
    x = torch.tensor(arr(23, 12, 3, dtype=np.float64))
    y = torch.tensor(arr(24, 12, 1, dtype=np.float64))
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    for _ in range(5):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {
        "loss": loss,
        "dtype_ok": model[0].weight.dtype == torch.float64,
        "params": params(model),
    }


@program
def cnn_flatten_with_view(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 3, 3, padding=1)
            self.fc = nn.Linear(3 * 4 * 4, 5)

        def forward(self, x):
            x = nn.functional.max_pool2d(nn.functional.relu(self.conv(x)), 2)
            x = x.view(x.size(0), -1)
            return self.fc(x)

    net = set_weights(torch, Net(), seed=25)
    x = torch.tensor(arr(26, 2, 1, 8, 8))
    y = torch.tensor(ints(27, 5, 2))
    loss = nn.functional.cross_entropy(net(x), y)
    loss.backward()
    pred = net(x).argmax(1)
    correct = pred.eq(y.view_as(pred)).sum().item()
    return {"loss": loss, "grads": grads(net), "correct": correct}


@program
def focal_loss_custom(torch):
    logits = torch.tensor(arr(28, 10, 4), requires_grad=True)
    target = torch.tensor(ints(29, 4, 10))
    logp = torch.log_softmax(logits, dim=-1)
    logpt = logp.gather(1, target.unsqueeze(1)).squeeze(1)
    pt = logpt.exp()
    alpha = torch.tensor([0.25, 0.5, 0.75, 1.0])[target]
    loss = (-alpha * (1 - pt).clamp(min=1e-6) ** 2.0 * logpt).mean()
    loss.backward()
    return {"loss": loss, "grad": logits.grad}
