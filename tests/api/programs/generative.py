"""Generative models: diffusion, VAEs, flows, vector quantization, masked autoregressive models, GAN losses.

Every random draw these models make (diffusion noise, reparameterization noise, Langevin noise,
spectral norm's power-iteration start) comes from NumPy with a fixed seed, so that nothing depends on
either library's generator.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _unit(seed: int, n: int) -> np.ndarray:
    v = arr(seed, n)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _sinusoidal_pos_emb(torch, nn):
    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, x):
            half_dim = self.dim // 2
            emb = math.log(10000) / (half_dim - 1)
            emb = torch.exp(torch.arange(half_dim, device=x.device) * -emb)
            emb = x[:, None] * emb[None, :]
            return torch.cat((emb.sin(), emb.cos()), dim=-1)

    return SinusoidalPosEmb


@program(rtol=5e-4, atol=5e-5)
def ddpm_training_step_with_schedule_buffers(torch):
    """lucidrains-style GaussianDiffusion, SR3-style: cosine schedule buffers, ``extract`` by gather,
    a tiny conv denoiser conditioned on a sinusoidal time embedding and on an anti-aliased
    low-resolution copy of the image (upsampled back), and one ancestral sampling step."""
    nn, F = torch.nn, torch.nn.functional
    SinusoidalPosEmb = _sinusoidal_pos_emb(torch, nn)

    def cosine_beta_schedule(timesteps, s=0.008):
        steps = timesteps + 1
        x = torch.linspace(0, timesteps, steps, dtype=torch.float64)
        alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2
        alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
        betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
        return torch.clip(betas, 0, 0.999)

    def extract(a, t, x_shape):
        b, *_ = t.shape
        out = a.gather(-1, t)
        return out.reshape(b, *((1,) * (len(x_shape) - 1)))

    class Denoiser(nn.Module):
        def __init__(self, ch=3, cond_ch=3, dim=8):
            super().__init__()
            self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, dim * 2), nn.GELU(),
                                          nn.Linear(dim * 2, dim))  # fmt: skip
            self.inp = nn.Conv2d(ch + cond_ch, dim, 3, padding=1)
            self.norm = nn.GroupNorm(2, dim)
            self.mid = nn.Conv2d(dim, dim, 3, padding=1)
            self.out = nn.Conv2d(dim, ch, 1)

        def forward(self, x, t):
            h = self.inp(x)
            h = h + self.time_mlp(t)[:, :, None, None]
            h = self.mid(F.silu(self.norm(h)))
            return self.out(h)

    class GaussianDiffusion(nn.Module):
        def __init__(self, model, timesteps=50):
            super().__init__()
            self.model = model
            betas = cosine_beta_schedule(timesteps)
            alphas = 1.0 - betas
            alphas_cumprod = torch.cumprod(alphas, dim=0)
            alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
            register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))  # noqa: E731
            register_buffer("betas", betas)
            register_buffer("alphas_cumprod", alphas_cumprod)
            register_buffer("sqrt_alphas_cumprod", torch.sqrt(alphas_cumprod))
            register_buffer("sqrt_one_minus_alphas_cumprod", torch.sqrt(1.0 - alphas_cumprod))
            register_buffer("sqrt_recip_alphas", torch.sqrt(1.0 / alphas))
            posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
            register_buffer("posterior_variance", posterior_variance)
            register_buffer("posterior_log_variance_clipped",
                            torch.log(posterior_variance.clamp(min=1e-20)))  # fmt: skip

        def q_sample(self, x_start, t, noise):
            return (extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                    + extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)  # fmt: skip

        def p_losses(self, x_start, t, noise, cond):
            x_noisy = self.q_sample(x_start, t, noise)
            return F.mse_loss(self.model(torch.cat([x_noisy, cond], dim=1), t.float()), noise)

        @torch.no_grad()
        def p_sample(self, x, t, noise, cond):
            betas_t = extract(self.betas, t, x.shape)
            mean = extract(self.sqrt_recip_alphas, t, x.shape) * (
                x
                - betas_t
                * self.model(torch.cat([x, cond], dim=1), t.float())
                / extract(self.sqrt_one_minus_alphas_cumprod, t, x.shape)
            )
            nonzero = (t != 0).float().reshape(x.shape[0], *((1,) * (x.dim() - 1)))
            var = extract(self.posterior_variance, t, x.shape)
            return mean + nonzero * torch.sqrt(var) * noise  # fmt: skip

    diffusion = GaussianDiffusion(set_weights(torch, Denoiser(), seed=1))
    opt = torch.optim.AdamW(diffusion.parameters(), lr=2e-3, weight_decay=1e-2)
    x0 = torch.tensor(np.tanh(arr(2, 4, 3, 8, 8)))
    lowres = F.interpolate(x0, scale_factor=0.5, mode="bilinear", antialias=True)
    cond = F.interpolate(lowres, size=x0.shape[-2:], mode="bilinear", align_corners=False)
    losses = []
    for step in range(4):
        t = torch.tensor(ints(10 + step, 50, 4))
        noise = torch.tensor(arr(20 + step, 4, 3, 8, 8))
        loss = diffusion.p_losses(x0, t, noise, cond)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    x_t = torch.tensor(arr(30, 4, 3, 8, 8))
    t_last = torch.tensor([49, 10, 1, 0])
    x_prev = diffusion.p_sample(x_t, t_last, torch.tensor(arr(31, 4, 3, 8, 8)), cond)
    return {
        "losses": losses,
        "buffers": sorted(n for n, _ in diffusion.named_buffers()),
        "alphas_cumprod": diffusion.alphas_cumprod,
        "log_var": diffusion.posterior_log_variance_clipped,
        "x_prev": x_prev,
        "lowres": lowres,
        "time_emb": SinusoidalPosEmb(8)(torch.tensor([0.0, 7.0, 49.0])),
        "grads": grads(diffusion),
    }


@program(rtol=5e-4, atol=5e-5)
def conv_vae_with_distributions_kl(torch):
    """A convolutional VAE: stride-2 encoder, ``Unflatten`` + ``ConvTranspose2d`` decoder, KL from
    ``torch.distributions`` checked against the closed form, fixed reparameterization noise."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class ConvVAE(nn.Module):
        def __init__(self, latent=4):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 4, 4, stride=2, padding=1), nn.LeakyReLU(0.1),
                nn.Conv2d(4, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.1),
                nn.Flatten(), nn.Linear(8 * 2 * 2, 2 * latent),
            )  # fmt: skip
            self.decoder = nn.Sequential(
                nn.Linear(latent, 8 * 2 * 2), nn.ReLU(), nn.Unflatten(1, (8, 2, 2)),
                nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), nn.ReLU(),
                nn.ConvTranspose2d(4, 1, 4, stride=2, padding=1),
            )  # fmt: skip

        def forward(self, x, eps):
            mu, logvar = self.encoder(x).chunk(2, dim=-1)
            std = torch.exp(0.5 * logvar)
            z = mu + eps * std
            return self.decoder(z), mu, logvar

    model = set_weights(torch, ConvVAE(), seed=3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.tensor((np.random.default_rng(4).random((6, 1, 8, 8)) > 0.6).astype(np.float32))
    history = []
    for step in range(3):
        eps = torch.tensor(arr(5 + step, 6, 4))
        logits, mu, logvar = model(x, eps)
        recon = F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(dim=(1, 2, 3))
        q = D.Normal(mu, torch.exp(0.5 * logvar))
        p = D.Normal(torch.zeros_like(mu), torch.ones_like(mu))
        kl = D.kl_divergence(q, p).sum(-1)
        kl_closed = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=-1)
        loss = (recon + kl).mean()
        opt.zero_grad()
        loss.backward()
        total_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        opt.step()
        history.append({"loss": loss.detach(), "kl": kl.detach(), "norm": total_norm,
                        "kl_match": torch.allclose(kl, kl_closed, atol=1e-5)})  # fmt: skip
    model.eval()
    with torch.no_grad():
        z = torch.tensor(arr(9, 2, 4))
        samples = torch.sigmoid(model.decoder(z))
    return {"history": history, "samples": samples, "params": params(model)}


@program(rtol=5e-4, atol=5e-5)
def realnvp_affine_coupling_flow(torch):
    """RealNVP on 2-D data: alternating binary masks as buffers, tanh-bounded scales, the log-det
    of each coupling, an exact inverse, and maximum likelihood under a standard normal base."""
    nn = torch.nn

    class AffineCoupling(nn.Module):
        def __init__(self, dim, mask, hidden=16):
            super().__init__()
            self.register_buffer("mask", mask)
            self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                     nn.ReLU(), nn.Linear(hidden, 2 * dim))  # fmt: skip
            self.scale = nn.Parameter(torch.ones(1, dim))

        def forward(self, x):
            x_masked = x * self.mask
            s, t = self.net(x_masked).chunk(2, dim=1)
            s = self.scale * torch.tanh(s) * (1 - self.mask)
            t = t * (1 - self.mask)
            z = x_masked + (1 - self.mask) * (x * torch.exp(s) + t)
            return z, s.sum(dim=1)

        def inverse(self, z):
            z_masked = z * self.mask
            s, t = self.net(z_masked).chunk(2, dim=1)
            s = self.scale * torch.tanh(s) * (1 - self.mask)
            t = t * (1 - self.mask)
            return z_masked + (1 - self.mask) * (z - t) * torch.exp(-s)

    class RealNVP(nn.Module):
        def __init__(self, dim=4, n_layers=4):
            super().__init__()
            base = torch.arange(dim) % 2
            masks = [base if i % 2 == 0 else 1 - base for i in range(n_layers)]
            self.layers = nn.ModuleList(AffineCoupling(dim, m.float()) for m in masks)
            self.prior = torch.distributions.Normal(torch.zeros(dim), torch.ones(dim))

        def forward(self, x):
            log_det = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det += ld
            return x, log_det

        def inverse(self, z):
            for layer in reversed(self.layers):
                z = layer.inverse(z)
            return z

        def log_prob(self, x):
            z, log_det = self(x)
            return self.prior.log_prob(z).sum(dim=1) + log_det

    flow = set_weights(torch, RealNVP(), seed=6)
    with torch.no_grad():
        for layer in flow.layers:
            layer.scale.fill_(0.5)
    opt = torch.optim.Adam(flow.parameters(), lr=5e-3)
    rng = np.random.default_rng(7)
    theta = rng.uniform(0, 2 * np.pi, 32)
    data = np.stack([np.cos(theta), np.sin(theta), theta / np.pi - 1, np.sin(2 * theta)], 1)
    x = torch.from_numpy((data + 0.05 * arr(8, 32, 4)).astype(np.float32))
    nll = []
    for _ in range(5):
        loss = -flow.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        nll.append(loss.item())
    with torch.no_grad():
        z, log_det = flow(x)
        x_rec = flow.inverse(z)

    def transform(v):  # one sample through every coupling
        h = v.unsqueeze(0)
        for layer in flow.layers:
            h, _ = layer(h)
        return h.squeeze(0)

    jac = torch.vmap(torch.func.jacrev(transform))(x[:6].detach())
    log_det_exact = torch.linalg.slogdet(jac).logabsdet
    return {
        "jacobians": jac,
        "log_det_exact": log_det_exact,
        "log_det_matches": torch.allclose(log_det_exact, log_det[:6], atol=1e-4),
        "nll": nll,
        "z": z,
        "log_det": log_det,
        "max_rec_err_small": (x_rec - x).abs().max().item() < 1e-4,
        "mask_buffers": [layer.mask for layer in flow.layers],
        "state_keys": list(flow.state_dict().keys()),
    }


@program(rtol=5e-4, atol=5e-5)
def vqvae_codebook_straight_through(torch):
    """VQ-VAE bottleneck: nearest codebook entry by ``cdist``/``argmin``, ``F.embedding`` lookup, the
    straight-through estimator, codebook + commitment losses, perplexity, and an EMA codebook."""
    nn, F = torch.nn, torch.nn.functional

    class VectorQuantizer(nn.Module):
        def __init__(self, num_embeddings=8, embedding_dim=4, commitment_cost=0.25):
            super().__init__()
            self.embedding = nn.Embedding(num_embeddings, embedding_dim)
            self.embedding.weight.data.uniform_(-1 / num_embeddings, 1 / num_embeddings)
            self.commitment_cost = commitment_cost

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self.embedding.embedding_dim)
            distances = torch.cdist(flat_input, self.embedding.weight)
            encoding_indices = torch.argmin(distances, dim=1)
            encodings = F.one_hot(encoding_indices, self.embedding.num_embeddings).float()
            quantized = F.embedding(encoding_indices, self.embedding.weight).view(input_shape)
            e_latent_loss = F.mse_loss(quantized.detach(), inputs)
            q_latent_loss = F.mse_loss(quantized, inputs.detach())
            loss = q_latent_loss + self.commitment_cost * e_latent_loss
            quantized = inputs + (quantized - inputs).detach()
            avg_probs = torch.mean(encodings, dim=0)
            perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encoding_indices

    encoder = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    decoder = nn.Sequential(
        nn.ConvTranspose2d(4, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1)
    )
    vq = VectorQuantizer()
    model = nn.ModuleDict({"enc": encoder, "vq": vq, "dec": decoder})
    set_weights(torch, model, seed=9)
    with torch.no_grad():
        vq.embedding.weight.mul_(4.0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True)
    x = torch.tensor(arr(10, 2, 3, 8, 8))
    out = {"losses": [], "perplexity": [], "indices": []}
    for _ in range(3):
        z = encoder(x)
        vq_loss, z_q, perplexity, idx = vq(z)
        x_rec = decoder(z_q)
        loss = F.mse_loss(x_rec, x) + vq_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
        out["perplexity"].append(perplexity)
        out["indices"].append(idx.view(2, 4, 4))
    # the manual squared-distance form used by the original VQ-VAE code picks the same codes
    with torch.no_grad():
        flat = encoder(x).permute(0, 2, 3, 1).reshape(-1, 4)
        w = vq.embedding.weight
        d = (flat**2).sum(1, keepdim=True) + (w**2).sum(1) - 2 * flat @ w.t()
        out["manual_matches_cdist"] = torch.equal(d.argmin(1), torch.cdist(flat, w).argmin(1))
        # EMA codebook update (VQ-VAE-2 / Sonnet style)
        onehot = F.one_hot(d.argmin(1), 8).type(flat.dtype)
        cluster_size = torch.ones(8)
        embed_avg = w.clone()
        cluster_size.mul_(0.9).add_(onehot.sum(0), alpha=0.1)
        embed_avg.mul_(0.9).add_(onehot.t() @ flat, alpha=0.1)
        n = cluster_size.sum()
        cluster_size = (cluster_size + 1e-5) / (n + 8 * 1e-5) * n
        out["ema_codebook"] = embed_avg / cluster_size.unsqueeze(1)
    out["enc_grads"] = grads(encoder)
    out["codebook_grad"] = vq.embedding.weight.grad
    return out


@program(rtol=5e-4, atol=5e-5)
def pixelcnn_masked_conv_training(torch):
    """PixelCNN: ``MaskedConv2d`` subclasses with a mask buffer (types A and B) applied by
    ``self.weight.data *= self.mask``, a 4-way per-pixel softmax, and a check of the receptive field."""
    nn, F = torch.nn, torch.nn.functional

    class MaskedConv2d(nn.Conv2d):
        def __init__(self, mask_type, *args, **kwargs):
            super().__init__(*args, **kwargs)
            assert mask_type in {"A", "B"}
            self.register_buffer("mask", self.weight.data.clone())
            _, _, kH, kW = self.weight.size()
            self.mask.fill_(1)
            self.mask[:, :, kH // 2, kW // 2 + (mask_type == "B") :] = 0
            self.mask[:, :, kH // 2 + 1 :] = 0

        def forward(self, x):
            self.weight.data *= self.mask
            return super().forward(x)

    levels = 4
    net = nn.Sequential(
        MaskedConv2d("A", 1, 8, 5, 1, 2, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        MaskedConv2d("B", 8, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        nn.Conv2d(8, levels, 1),
    )  # fmt: skip
    set_weights(torch, net, seed=11)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    target = torch.tensor(ints(12, levels, 4, 7, 7))
    inp = target.unsqueeze(1).float() / (levels - 1)
    losses = []
    for _ in range(3):
        logits = net(inp)
        loss = F.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    net.eval()
    probe = inp[:1].clone().requires_grad_(True)
    out = net(probe)
    (g,) = torch.autograd.grad(out[0, :, 3, 3].sum(), probe)
    return {
        "losses": losses,
        "mask_a": net[0].mask[0, 0],
        "mask_b": net[3].mask[0, 0],
        "depends_on": (g[0, 0] != 0),
        "weight_masked": torch.equal(net[0].weight * net[0].mask, net[0].weight),
        "running_mean": net[1].running_mean,
        "eval_probs": F.softmax(out, dim=1)[0, :, 2],
    }


@program(rtol=5e-4, atol=5e-5)
def made_masked_linear_autoregressive(torch):
    """MADE (Karpathy's pytorch-made): ``MaskedLinear`` with ``F.linear(x, mask * weight)``, masks from
    connectivity degrees, a Bernoulli likelihood, and the Jacobian's autoregressive structure."""
    nn, F = torch.nn, torch.nn.functional

    class MaskedLinear(nn.Linear):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__(in_features, out_features, bias)
            self.register_buffer("mask", torch.ones(out_features, in_features))

        def set_mask(self, mask):
            self.mask.data.copy_(torch.from_numpy(mask.astype(np.uint8).T))

        def forward(self, input):
            return F.linear(input, self.mask * self.weight, self.bias)

    class MADE(nn.Module):
        def __init__(self, nin, hidden_sizes):
            super().__init__()
            hs = [nin] + hidden_sizes + [nin]
            layers = []
            for h0, h1 in zip(hs, hs[1:]):
                layers.extend([MaskedLinear(h0, h1), nn.ReLU()])
            self.net = nn.Sequential(*layers[:-1])
            rng = np.random.RandomState(0)
            m = {-1: np.arange(nin)}
            for layer, h in enumerate(hidden_sizes):
                m[layer] = rng.randint(m[layer - 1].min(), nin - 1, size=h)
            masks = [
                m[layer - 1][:, None] <= m[layer][None, :] for layer in range(len(hidden_sizes))
            ]
            masks.append(m[len(hidden_sizes) - 1][:, None] < m[-1][None, :])
            for layer, mask in zip([mod for mod in self.net.modules() if isinstance(mod, MaskedLinear)],
                                   masks):  # fmt: skip
                layer.set_mask(mask)

        def forward(self, x):
            return self.net(x)

    made = set_weights(torch, MADE(6, [16, 16]), seed=13)
    opt = torch.optim.Adam(made.parameters(), lr=1e-2, weight_decay=1e-4)
    x = torch.tensor((np.random.default_rng(14).random((20, 6)) > 0.5).astype(np.float32))
    losses = []
    for _ in range(4):
        logits = made(x)
        loss = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    jac = torch.autograd.functional.jacobian(made, x[0])
    log_px = torch.distributions.Bernoulli(logits=made(x)).log_prob(x).sum(-1)
    return {
        "losses": losses,
        "jacobian": jac,
        "strictly_lower": torch.equal(jac != 0, torch.tril(jac != 0, diagonal=-1)),
        "masks": [b for n, b in made.named_buffers()],
        "log_px": log_px,
        "mask_dtype": str(made.net[0].mask.dtype),
    }


@program(rtol=5e-4, atol=5e-5)
def r1_penalty_conv_discriminator(torch):
    """StyleGAN-style non-saturating logistic loss with a lazy R1 penalty on real images:
    ``autograd.grad(create_graph=True)`` through conv, leaky ReLU and average pooling."""
    nn, F = torch.nn, torch.nn.functional
    D = nn.Sequential(
        nn.Conv2d(2, 6, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2d(2),
        nn.Conv2d(6, 8, 3, padding=1), nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(8, 1),
    )  # fmt: skip
    G = nn.Sequential(nn.Linear(4, 2 * 8 * 8), nn.Unflatten(1, (2, 8, 8)), nn.Tanh())
    set_weights(torch, D, seed=15)
    set_weights(torch, G, seed=16)
    G_ema = copy.deepcopy(G).eval().requires_grad_(False)
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.0, 0.99), eps=1e-8)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.99), eps=1e-8)
    reals = torch.tensor(np.tanh(arr(17, 4, 2, 8, 8)))
    r1_gamma, r1_every = 10.0, 2
    log = {"d": [], "g": [], "r1": []}
    for step in range(4):
        z = torch.tensor(arr(40 + step, 4, 4))
        fake = G(z)
        d_loss = F.softplus(D(fake.detach())).mean() + F.softplus(-D(reals)).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        if step % r1_every == 0:
            real_img = reals.detach().requires_grad_(True)
            real_pred = D(real_img)
            (grad_real,) = torch.autograd.grad(
                outputs=real_pred.sum(), inputs=real_img, create_graph=True
            )
            r1 = grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()
            opt_d.zero_grad()
            (r1_gamma / 2 * r1 * r1_every + 0 * real_pred[0]).sum().backward()
            opt_d.step()
            log["r1"].append(r1.item())
        g_loss = F.softplus(-D(G(z))).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        with torch.no_grad():  # ema-pytorch / timm style update of the generator's moving average
            torch._foreach_lerp_(list(G_ema.parameters()), list(G.parameters()), 1.0 - 0.8)
        log["d"].append(d_loss.item())
        log["g"].append(g_loss.item())
    return {**log, "D": params(D), "G_grads": grads(G), "G_ema": params(G_ema)}


@program(rtol=5e-4, atol=5e-5)
def hinge_gan_spectral_norm_convs(torch):
    """SAGAN-style hinge losses with spectrally normalized convolutions in both networks (hook-based
    ``spectral_norm``, including on a ``ConvTranspose2d``), TTUR learning rates and ``BatchNorm2d``."""
    nn, F = torch.nn, torch.nn.functional
    SN = nn.utils.spectral_norm
    G = nn.Sequential(
        SN(nn.ConvTranspose2d(4, 6, 4, 1, 0)), nn.BatchNorm2d(6), nn.ReLU(),
        SN(nn.ConvTranspose2d(6, 1, 4, 2, 1)), nn.Tanh(),
    )  # fmt: skip
    D = nn.Sequential(
        SN(nn.Conv2d(1, 6, 4, 2, 1)), nn.LeakyReLU(0.1),
        SN(nn.Conv2d(6, 8, 3, 1, 1)), nn.LeakyReLU(0.1),
        nn.Flatten(), SN(nn.Linear(8 * 4 * 4, 1)),
    )  # fmt: skip
    set_weights(torch, G, seed=18)
    set_weights(torch, D, seed=19)
    seed = 50
    with torch.no_grad():
        for m in list(G.modules()) + list(D.modules()):
            if hasattr(m, "weight_u"):
                m.weight_u.copy_(torch.tensor(_unit(seed, m.weight_u.numel())))
                m.weight_v.copy_(torch.tensor(_unit(seed + 1, m.weight_v.numel())))
                seed += 2
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=4e-4, betas=(0.0, 0.9))
    real = torch.tensor(np.tanh(arr(20, 6, 1, 8, 8)))
    z = torch.tensor(arr(21, 6, 4, 1, 1))
    d_losses, g_losses = [], []
    for _ in range(3):
        fake = G(z)
        d_loss = F.relu(1.0 - D(real)).mean() + F.relu(1.0 + D(fake.detach())).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = -D(G(z)).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        d_losses.append(d_loss.item())
        g_losses.append(g_loss.item())
    G.eval()
    D.eval()
    with torch.no_grad():
        sigmas = [
            torch.linalg.matrix_norm(m.weight.flatten(1), ord=2)
            for m in D.modules()
            if hasattr(m, "weight_u")
        ]
        scores = D(G(z))
    return {
        "d_losses": d_losses,
        "g_losses": g_losses,
        "sigmas": sigmas,
        "scores": scores,
        "g_u": G[0].weight_u,
        "d_keys": list(D.state_dict().keys()),
        "d_orig_grad": D[0].weight_orig.grad,
    }


@program(rtol=5e-4, atol=5e-5)
def denoising_score_matching_noise_conditional(torch):
    """NCSN: a geometric ladder of noise levels, a sigma-conditioned score network (``nn.Embedding``
    gains, output divided by sigma), the DSM loss weighted by sigma**2, a sliced score matching term
    with fixed projections, and annealed Langevin dynamics with fixed noise."""
    nn, F = torch.nn, torch.nn.functional
    sigmas = torch.tensor(np.exp(np.linspace(np.log(1.0), np.log(0.05), 5))).float()

    class ScoreNet(nn.Module):
        def __init__(self, dim=3, hidden=32, n_sigmas=5):
            super().__init__()
            self.fc1 = nn.Linear(dim, hidden)
            self.gain = nn.Embedding(n_sigmas, hidden)
            self.fc2 = nn.Linear(hidden, hidden)
            self.fc3 = nn.Linear(hidden, dim)

        def forward(self, x, labels):
            h = F.softplus(self.fc1(x)) * self.gain(labels)
            h = F.elu(self.fc2(h))
            used_sigmas = sigmas[labels].view(x.shape[0], *([1] * len(x.shape[1:])))
            return self.fc3(h) / used_sigmas

    score = set_weights(torch, ScoreNet(), seed=22)
    opt = torch.optim.Adam(score.parameters(), lr=1e-3)
    x = torch.tensor(arr(23, 16, 3) * 0.3 + np.array([1.0, -1.0, 0.5], np.float32))
    out = {"dsm": [], "ssm": []}
    for step in range(3):
        labels = torch.tensor(ints(60 + step, len(sigmas), 16))
        used_sigmas = sigmas[labels].view(x.shape[0], 1)
        noise = torch.tensor(arr(70 + step, 16, 3)) * used_sigmas
        perturbed = x + noise
        target = -1 / (used_sigmas**2) * noise
        scores = score(perturbed, labels)
        dsm = (0.5 * ((scores - target) ** 2).sum(dim=-1) * used_sigmas.squeeze() ** 2).mean(dim=0)
        # sliced score matching on the clean data at the smallest noise level
        xs = x.clone().requires_grad_(True)
        lab0 = torch.full((16,), len(sigmas) - 1, dtype=torch.long)
        s = score(xs, lab0)
        v = torch.tensor(arr(80 + step, 16, 3))
        gv = torch.autograd.grad((s * v).sum(), xs, create_graph=True)[0]
        ssm = ((gv * v).sum(-1) + 0.5 * (s * v).sum(-1) ** 2).mean() * sigmas[-1] ** 2
        loss = dsm + 0.1 * ssm
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["dsm"].append(dsm.item())
        out["ssm"].append(ssm.item())
    with torch.inference_mode():
        x_mod = torch.tensor(arr(90, 8, 3))
        for c, sigma in enumerate(sigmas):
            labels = torch.ones(x_mod.shape[0], dtype=torch.long) * c
            step_size = 2e-3 * (sigma / sigmas[-1]) ** 2
            for s in range(2):
                grad = score(x_mod, labels)
                z = torch.tensor(arr(100 + 2 * c + s, 8, 3))
                x_mod = x_mod + step_size / 2 * grad + torch.sqrt(step_size) * z * 0.1
        out["langevin"] = x_mod
        out["is_inference"] = x_mod.is_inference()
    out["grads"] = grads(score)
    return out


@program(rtol=5e-4, atol=5e-5)
def beta_vae_kl_annealing_free_bits(torch):
    """beta-VAE with a cyclical KL annealing schedule and free bits: ``Independent(Normal)`` posterior,
    ``Bernoulli`` likelihood, per-dimension KL clamped from below, and an ``ExponentialLR`` decay."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class Encoder(nn.Module):
        def __init__(self, n_in=12, latent=3):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(n_in, 16), nn.SiLU(), nn.Linear(16, 2 * latent))

        def forward(self, x):
            loc, raw_scale = torch.chunk(self.body(x), 2, dim=-1)
            return D.Independent(D.Normal(loc, F.softplus(raw_scale) + 1e-4), 1)

    def cyclical_beta(step, period=4, ratio=0.5, beta_max=4.0):
        tau = (step % period) / period
        return beta_max * min(1.0, tau / ratio)

    enc = set_weights(torch, Encoder(), seed=24)
    dec = set_weights(torch, nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 12)), seed=25)
    prior = D.Independent(D.Normal(torch.zeros(3), torch.ones(3)), 1)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=5e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    x = torch.tensor((np.random.default_rng(26).random((10, 12)) < 0.3).astype(np.float32))
    free_bits = 0.1
    rows = []
    for step in range(6):
        q = enc(x)
        eps = torch.tensor(arr(110 + step, 10, 3))
        z = q.base_dist.loc + q.base_dist.scale * eps
        log_lik = D.Bernoulli(logits=dec(z)).log_prob(x).sum(-1)
        kl_per_dim = D.kl_divergence(q.base_dist, prior.base_dist).mean(0)
        kl = torch.clamp(kl_per_dim, min=free_bits).sum()
        beta = cyclical_beta(step)
        loss = -log_lik.mean() + beta * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rows.append({"beta": beta, "loss": loss.item(), "kl_per_dim": kl_per_dim.detach(),
                     "kl_full": D.kl_divergence(q, prior).mean().item(), "lr": sched.get_last_lr()[0]})  # fmt: skip
    q = enc(x)
    return {
        "rows": rows,
        "entropy": q.entropy(),
        "event_shape": list(q.event_shape),
        "batch_shape": list(q.batch_shape),
        "log_prob_at_mean": q.log_prob(q.mean),
        "dec_grads": grads(dec),
    }


@program(rtol=5e-4, atol=5e-5)
def ddim_sampling_with_cfg_and_ema(torch):
    """Class-conditional diffusion: label dropout with a null class for classifier-free guidance,
    an EMA copy of the model updated with ``lerp_``, and deterministic DDIM (eta = 0) sampling."""
    nn, F = torch.nn, torch.nn.functional
    SinusoidalPosEmb = _sinusoidal_pos_emb(torch, nn)
    T, n_classes = 40, 3
    betas = torch.linspace(1e-4, 0.02, T)
    alphas_cumprod = torch.cumprod(1 - betas, 0)

    class EpsNet(nn.Module):
        def __init__(self, dim=2, hidden=24):
            super().__init__()
            self.t_emb = SinusoidalPosEmb(hidden)
            # last index = unconditional; rows renormalized to max_norm on lookup
            self.c_emb = nn.Embedding(n_classes + 1, hidden, max_norm=0.4)
            self.net = nn.Sequential(
                nn.Linear(dim + hidden, hidden), nn.Mish(), nn.Linear(hidden, dim)
            )

        def forward(self, x, t, c):
            return self.net(torch.cat([x, self.t_emb(t.float()) + self.c_emb(c)], dim=-1))

    model = set_weights(torch, EpsNet(), seed=27)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x0 = torch.tensor(arr(28, 12, 2))
    y = torch.tensor(ints(29, n_classes, 12))
    drop = torch.tensor(np.random.default_rng(30).random(12) < 0.25)
    losses = []
    for step in range(4):
        t = torch.tensor(ints(120 + step, T, 12))
        noise = torch.tensor(arr(130 + step, 12, 2))
        a = alphas_cumprod[t].unsqueeze(-1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        c = torch.where(drop, torch.full_like(y, n_classes), y)
        loss = F.smooth_l1_loss(model(xt, t, c), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        with torch.no_grad():
            for p_ema, p in zip(ema.parameters(), model.parameters()):
                p_ema.lerp_(p, 1 - 0.9)

    @torch.no_grad()
    def ddim_sample(net, x, labels, guidance=2.0, steps=(39, 29, 19, 9, 0)):
        null = torch.full_like(labels, n_classes)
        for i, t in enumerate(steps):
            tt = torch.full((x.shape[0],), t, dtype=torch.long)
            eps_c, eps_u = net(
                torch.cat([x, x]), torch.cat([tt, tt]), torch.cat([labels, null])
            ).chunk(2)
            eps = eps_u + guidance * (eps_c - eps_u)
            a_t = alphas_cumprod[t]
            a_prev = alphas_cumprod[steps[i + 1]] if i + 1 < len(steps) else torch.tensor(1.0)
            x0_pred = ((x - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-1.0, 1.0)
            x = a_prev.sqrt() * x0_pred + (1 - a_prev).sqrt() * eps
        return x

    xT = torch.tensor(arr(140, 6, 2))
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    return {
        "losses": losses,
        "ema_params": params(ema),
        "ema_requires_grad": [p.requires_grad for p in ema.parameters()],
        "sample_ema": ddim_sample(ema, xT, labels),
        "sample_model_noguide": ddim_sample(model, xT, labels, guidance=0.0),
        "class_table": model.c_emb.weight,
    }


@program(rtol=5e-4, atol=5e-5)
def glow_actnorm_invertible_1x1_conv(torch):
    """Glow step of flow on images: squeeze by ``view``/``permute``, ActNorm with data-dependent
    initialization, an invertible 1x1 convolution with its ``slogdet``, an affine coupling, and the
    negative log-likelihood in bits per dimension."""
    nn, F = torch.nn, torch.nn.functional

    def squeeze2d(x, factor=2):
        b, c, h, w = x.size()
        x = x.view(b, c, h // factor, factor, w // factor, factor)
        x = x.permute(0, 1, 3, 5, 2, 4).contiguous()
        return x.view(b, c * factor * factor, h // factor, w // factor)

    class ActNorm(nn.Module):
        def __init__(self, num_features):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(1, num_features, 1, 1))
            self.logs = nn.Parameter(torch.zeros(1, num_features, 1, 1))
            self.register_buffer("inited", torch.tensor(0, dtype=torch.uint8))

        def forward(self, x):
            if self.inited.item() == 0:
                with torch.no_grad():
                    mean = x.mean(dim=(0, 2, 3), keepdim=True)
                    std = x.std(dim=(0, 2, 3), keepdim=True, unbiased=False)
                    self.bias.data.copy_(-mean)
                    self.logs.data.copy_(torch.log(1.0 / (std + 1e-6)))
                    self.inited.fill_(1)
            y = (x + self.bias) * torch.exp(self.logs)
            return y, x.shape[2] * x.shape[3] * self.logs.sum()

    class InvConv1x1(nn.Module):
        def __init__(self, c):
            super().__init__()
            q = np.linalg.qr(np.random.default_rng(31).standard_normal((c, c)))[0]
            self.weight = nn.Parameter(torch.tensor(q.astype(np.float32)))

        def forward(self, x):
            logdet = torch.slogdet(self.weight)[1] * x.shape[2] * x.shape[3]
            return F.conv2d(x, self.weight.view(*self.weight.shape, 1, 1)), logdet

        def reverse(self, y):
            return F.conv2d(y, torch.inverse(self.weight).view(*self.weight.shape, 1, 1))

    class Coupling(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.nn = nn.Sequential(
                nn.Conv2d(c // 2, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, c, 3, padding=1)
            )

        def forward(self, x):
            xa, xb = x.chunk(2, 1)
            h = self.nn(xa)
            shift, scale = h[:, 0::2], torch.sigmoid(h[:, 1::2] + 2.0)
            yb = (xb + shift) * scale
            return torch.cat([xa, yb], 1), torch.log(scale).flatten(1).sum(-1)

    actnorm, inv, coupling = ActNorm(8), InvConv1x1(8), Coupling(8)
    flow = nn.ModuleList([actnorm, inv, coupling])
    set_weights(torch, coupling, seed=32)
    x = torch.tensor(np.random.default_rng(33).random((4, 2, 8, 8)).astype(np.float32))
    x = x + torch.tensor(np.random.default_rng(34).random((4, 2, 8, 8)).astype(np.float32)) / 256.0
    n_dims = x[0].numel()
    opt = torch.optim.Adamax(flow.parameters(), lr=2e-3)
    bpds = []
    for _ in range(3):
        h = squeeze2d(x - 0.5)
        h, ld1 = actnorm(h)
        h, ld2 = inv(h)
        h, ld3 = coupling(h)
        log_pz = (-0.5 * (h**2 + math.log(2 * math.pi))).flatten(1).sum(-1)
        log_px = log_pz + ld1 + ld2 + ld3 - math.log(256.0) * n_dims
        bpd = (-log_px / (math.log(2.0) * n_dims)).mean()
        opt.zero_grad()
        bpd.backward()
        opt.step()
        bpds.append(bpd.item())
    with torch.no_grad():
        y, _ = inv(squeeze2d(x))
        x_back = inv.reverse(y)
    return {
        "bpds": bpds,
        "actnorm_bias": actnorm.bias.flatten(),
        "actnorm_logs": actnorm.logs.flatten(),
        "inited": actnorm.inited,
        "inv_weight": inv.weight,
        "inv_grad": inv.weight.grad,
        "round_trip_ok": torch.allclose(x_back, squeeze2d(x), atol=1e-5),
        "squeezed_shape": list(squeeze2d(x).shape),
    }
