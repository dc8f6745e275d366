"""Diffusion and score-based generative models as their reference code bases write them: DDPM beta
schedules (linear, cosine, sigmoid) with ``cumprod`` and the ``q_sample`` forward process, the
three ways of gathering schedule values by integer timesteps (``extract`` by ``gather``, OpenAI's
``_extract_into_tensor``, diffusers' ``unsqueeze`` loop), epsilon-prediction training of small
denoisers on sinusoidal timestep embeddings, the ancestral ``p_sample`` loop with clipped x0
predictions and log-clipped posterior variances, DDIM with eta=0 and its inversion,
classifier-free guidance (with guidance rescale), v-prediction with min-SNR weighting and
zero-terminal-SNR betas, EDM/Karras sigmas, preconditioning and the Heun sampler, VP-SDE
denoising score matching with a predictor-corrector sampler, a small UNet (GroupNorm, SiLU,
weight-standardized convs, ``nn.Upsample``, skip concatenation, attention), EMA of weights, the
improved-DDPM variational bound with learned variances, and dynamic thresholding.

Every random draw (training timesteps, noise, sampler noise, label dropout) comes from NumPy with a
fixed seed, so nothing depends on either library's generator.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _uniform(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).random(shape).astype(np.float32)


def _linear_beta_schedule(torch, timesteps):
    scale = 1000 / timesteps
    beta_start = scale * 0.0001
    beta_end = scale * 0.02
    return torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64)


def _cosine_beta_schedule(torch, timesteps, s=0.008):
    steps = timesteps + 1
    t = torch.linspace(0, timesteps, steps, dtype=torch.float64) / timesteps
    alphas_cumprod = torch.cos((t + s) / (1 + s) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.clip(betas, 0, 0.999)


def _extract(a, t, x_shape):
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x_shape) - 1)))


def _get_timestep_embedding(torch, timesteps, embedding_dim, flip_sin_to_cos=False,
                            downscale_freq_shift=1.0, scale=1.0, max_period=10000):  # fmt: skip
    """diffusers' sinusoidal embedding."""
    assert len(timesteps.shape) == 1, "Timesteps should be a 1d-array"
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32)
    exponent = exponent / (half_dim - downscale_freq_shift)
    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
    if embedding_dim % 2 == 1:
        emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))
    return emb


def _timestep_embedding(torch, timesteps, dim, max_period=10000):
    """OpenAI guided-diffusion's sinusoidal embedding."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


def _tiny_conv_denoiser(torch, ch=1, dim=8, out_mult=1):
    nn, F = torch.nn, torch.nn.functional

    class TinyDenoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.dim = dim
            self.time_mlp = nn.Sequential(
                nn.Linear(dim, dim * 2), nn.SiLU(), nn.Linear(dim * 2, dim)
            )
            self.conv_in = nn.Conv2d(ch, dim, 3, padding=1)
            self.norm = nn.GroupNorm(2, dim)
            self.conv_mid = nn.Conv2d(dim, dim, 3, padding=1)
            self.conv_out = nn.Conv2d(dim, ch * out_mult, 3, padding=1)

        def forward(self, x, t):
            emb = self.time_mlp(_timestep_embedding(torch, t, self.dim))
            h = self.conv_in(x) + emb[:, :, None, None]
            h = self.conv_mid(F.silu(self.norm(h)))
            return self.conv_out(F.silu(h))

    return TinyDenoiser()


@program
def ddpm_beta_schedules_cumprod_and_q_sample(torch):
    """Linear, cosine, sigmoid and scaled-linear beta schedules in float64, ``cumprod`` of the
    alphas, ``alphas_cumprod_prev`` by ``F.pad`` and by ``torch.cat``, the derived buffers cast to
    float32, then ``q_sample`` with schedule values gathered three ways: ``a.gather(-1, t)``
    reshaped, OpenAI's ``torch.from_numpy(arr)[timesteps].float()`` with ``res[..., None]`` and
    ``expand``, and diffusers' ``alphas_cumprod[timesteps] ** 0.5`` with an ``unsqueeze`` loop."""
    F = torch.nn.functional
    T = 50

    def sigmoid_beta_schedule(timesteps, start=-3, end=3, tau=1, clamp_min=1e-5):
        steps = timesteps + 1
        t = torch.linspace(0, timesteps, steps, dtype=torch.float64) / timesteps
        v_start = torch.tensor(start / tau).sigmoid()
        v_end = torch.tensor(end / tau).sigmoid()
        alphas_cumprod = (-((t * (end - start) + start) / tau).sigmoid() + v_end) / (
            v_end - v_start
        )
        alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
        betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
        return torch.clip(betas, 0, 0.999)

    schedules = {
        "linear": _linear_beta_schedule(torch, T),
        "cosine": _cosine_beta_schedule(torch, T),
        "sigmoid": sigmoid_beta_schedule(T),
        "scaled_linear": torch.linspace(0.00085**0.5, 0.012**0.5, T, dtype=torch.float32) ** 2,
    }
    out = {"betas": schedules}
    betas = schedules["linear"]
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    alphas_cumprod_prev2 = torch.cat(
        [torch.tensor([1.0], dtype=torch.float64), alphas_cumprod[:-1]]
    )
    buffers = {
        "sqrt_alphas_cumprod": torch.sqrt(alphas_cumprod),
        "sqrt_one_minus_alphas_cumprod": torch.sqrt(1.0 - alphas_cumprod),
        "log_one_minus_alphas_cumprod": torch.log(1.0 - alphas_cumprod),
        "sqrt_recip_alphas_cumprod": torch.sqrt(1.0 / alphas_cumprod),
        "sqrt_recipm1_alphas_cumprod": torch.sqrt(1.0 / alphas_cumprod - 1),
    }
    buffers = {k: v.to(torch.float32) for k, v in buffers.items()}
    out.update(alphas_cumprod=alphas_cumprod, prev_same=torch.equal(alphas_cumprod_prev, alphas_cumprod_prev2),
               prev=alphas_cumprod_prev, buffers=buffers)  # fmt: skip
    snr = alphas_cumprod / (1 - alphas_cumprod)
    out["log_snr"] = torch.log(alphas_cumprod) - torch.log1p(-alphas_cumprod)
    out["snr_monotone"] = bool((snr[1:] < snr[:-1]).all())

    x0 = torch.tensor(np.tanh(arr(1, 4, 2, 4, 4)))
    noise = torch.tensor(arr(2, 4, 2, 4, 4))
    t = torch.tensor(ints(3, T, 4))
    a = _extract(buffers["sqrt_alphas_cumprod"], t, x0.shape)
    s = _extract(buffers["sqrt_one_minus_alphas_cumprod"], t, x0.shape)
    out["x_t_gather"] = a * x0 + s * noise
    out["gather_shape"] = list(a.shape)

    np_cumprod = np.cumprod(1.0 - np.linspace(1000 / T * 0.0001, 1000 / T * 0.02, T))

    def _extract_into_tensor(arr_, timesteps, broadcast_shape):
        res = torch.from_numpy(arr_).to(device=timesteps.device)[timesteps].float()
        while len(res.shape) < len(broadcast_shape):
            res = res[..., None]
        return res.expand(broadcast_shape)

    out["x_t_openai"] = (
        _extract_into_tensor(np.sqrt(np_cumprod), t, x0.shape) * x0
        + _extract_into_tensor(np.sqrt(1.0 - np_cumprod), t, x0.shape) * noise
    )

    def add_noise(original_samples, noise, timesteps, alphas_cumprod):
        alphas_cumprod = alphas_cumprod.to(
            device=original_samples.device, dtype=original_samples.dtype
        )
        timesteps = timesteps.to(original_samples.device)
        sqrt_alpha_prod = alphas_cumprod[timesteps] ** 0.5
        sqrt_alpha_prod = sqrt_alpha_prod.flatten()
        while len(sqrt_alpha_prod.shape) < len(original_samples.shape):
            sqrt_alpha_prod = sqrt_alpha_prod.unsqueeze(-1)
        sqrt_one_minus_alpha_prod = (1 - alphas_cumprod[timesteps]) ** 0.5
        sqrt_one_minus_alpha_prod = sqrt_one_minus_alpha_prod.flatten()
        while len(sqrt_one_minus_alpha_prod.shape) < len(original_samples.shape):
            sqrt_one_minus_alpha_prod = sqrt_one_minus_alpha_prod.unsqueeze(-1)
        return sqrt_alpha_prod * original_samples + sqrt_one_minus_alpha_prod * noise

    sl_cumprod = torch.cumprod(1.0 - schedules["scaled_linear"], dim=0)
    out["x_t_diffusers"] = add_noise(x0, noise, t, sl_cumprod)
    out["x_t_diffusers_dtype"] = str(out["x_t_diffusers"].dtype)
    return out


@program(rtol=5e-4, atol=5e-5)  # Adam steps through LayerNorm: summation order differs
def epsilon_prediction_mlp_training_with_timestep_embeddings(torch):
    """An epsilon-prediction MLP on a 2-D swiss roll: diffusers' ``get_timestep_embedding`` with
    ``flip_sin_to_cos`` feeding a ``TimestepEmbedding`` (Linear, SiLU, Linear), residual
    LayerNorm blocks, the per-sample MSE reduced with ``mean(dim=list(range(1, ndim)))``,
    ``clip_grad_norm_`` and AdamW; OpenAI's ``timestep_embedding`` with an odd dimension."""
    nn, F = torch.nn, torch.nn.functional
    T = 50

    class Denoiser(nn.Module):
        def __init__(self, dim=2, hidden=32, temb=16):
            super().__init__()
            self.temb = temb
            self.time_embedding = nn.Sequential(
                nn.Linear(temb, hidden), nn.SiLU(), nn.Linear(hidden, hidden)
            )
            self.inp = nn.Linear(dim, hidden)
            self.blocks = nn.ModuleList(
                [
                    nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.SiLU())
                    for _ in range(2)
                ]
            )
            self.out = nn.Linear(hidden, dim)

        def forward(self, x, t):
            t_emb = _get_timestep_embedding(
                torch, t, self.temb, flip_sin_to_cos=True, downscale_freq_shift=0
            )
            emb = self.time_embedding(t_emb)
            h = self.inp(x)
            for block in self.blocks:
                h = h + block(h + emb)
            return self.out(h)

    rng = np.random.default_rng(4)
    theta = 1.5 * np.pi * (1 + 2 * rng.random(64))
    data = np.stack([theta * np.cos(theta), theta * np.sin(theta)], 1) / 10.0
    x0 = torch.tensor(data.astype(np.float32))
    betas = _linear_beta_schedule(torch, T).float()
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    model = set_weights(torch, Denoiser(), seed=5)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    losses, norms, per_sample = [], [], []
    for step in range(5):
        timesteps = torch.from_numpy(ints(10 + step, T, 64))
        noise = torch.from_numpy(arr(20 + step, 64, 2))
        sqrt_a = alphas_cumprod[timesteps].sqrt().unsqueeze(-1)
        sqrt_1ma = (1 - alphas_cumprod[timesteps]).sqrt().unsqueeze(-1)
        noisy = sqrt_a * x0 + sqrt_1ma * noise
        model_output = model(noisy, timesteps)
        loss = F.mse_loss(model_output.float(), noise.float(), reduction="none")
        loss = loss.mean(dim=list(range(1, len(loss.shape))))
        per_sample.append(loss.detach()[:6])
        loss = loss.mean()
        optimizer.zero_grad()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        optimizer.step()
        losses.append(loss.item())
    return {
        "losses": losses,
        "grad_norms": norms,
        "per_sample": per_sample,
        "params": params(model),
        "diffusers_emb": _get_timestep_embedding(torch, torch.tensor([0, 1, 17, 49]), 7),
        "diffusers_emb_flip": _get_timestep_embedding(
            torch, torch.tensor([3.5, 999.0]), 8, True, 0
        ),
        "openai_emb_odd": _timestep_embedding(torch, torch.tensor([0, 10, 999]), 9),
    }


@program(rtol=5e-4, atol=5e-5)  # eight conv denoiser calls in a row compound float32 rounding
def ancestral_p_sample_loop_with_clipped_x0(torch):
    """The DDPM ancestral sampler: ``predict_start_from_noise``, ``clamp_(-1., 1.)`` of the x0
    prediction, posterior mean coefficients, ``posterior_log_variance_clipped`` with
    ``clamp(min=1e-20)``, ``nonzero_mask`` for t=0 and ``(0.5 * log_var).exp() * noise``, noise
    for every step supplied from NumPy, under ``torch.no_grad`` with a trajectory kept on CPU."""
    T, shape = 8, (2, 1, 4, 4)
    betas = _cosine_beta_schedule(torch, T)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_cumprod_prev = torch.cat([torch.ones(1, dtype=torch.float64), alphas_cumprod[:-1]])
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    buf = {
        "sqrt_recip_alphas_cumprod": torch.sqrt(1.0 / alphas_cumprod),
        "sqrt_recipm1_alphas_cumprod": torch.sqrt(1.0 / alphas_cumprod - 1),
        "posterior_variance": posterior_variance,
        "posterior_log_variance_clipped": torch.log(posterior_variance.clamp(min=1e-20)),
        "posterior_mean_coef1": betas * torch.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod),
        "posterior_mean_coef2": (1.0 - alphas_cumprod_prev)
        * torch.sqrt(alphas)
        / (1.0 - alphas_cumprod),
    }
    buf = {k: v.float() for k, v in buf.items()}
    model = set_weights(torch, _tiny_conv_denoiser(torch), seed=6).eval()
    noises = arr(7, T, *shape)

    @torch.no_grad()
    def p_sample(x, t, noise):
        eps = model(x, t)
        x_recon = (_extract(buf["sqrt_recip_alphas_cumprod"], t, x.shape) * x
                   - _extract(buf["sqrt_recipm1_alphas_cumprod"], t, x.shape) * eps)  # fmt: skip
        x_recon.clamp_(-1.0, 1.0)
        model_mean = (_extract(buf["posterior_mean_coef1"], t, x.shape) * x_recon
                      + _extract(buf["posterior_mean_coef2"], t, x.shape) * x)  # fmt: skip
        model_log_variance = _extract(buf["posterior_log_variance_clipped"], t, x.shape)
        nonzero_mask = (1 - (t == 0).float()).reshape(x.shape[0], *((1,) * (len(x.shape) - 1)))
        return model_mean + nonzero_mask * (0.5 * model_log_variance).exp() * noise, x_recon

    img = torch.from_numpy(arr(8, *shape))
    imgs, x0s = [img.cpu()], []
    for i in reversed(range(0, T)):
        t = torch.full((shape[0],), i, dtype=torch.long)
        img, x_recon = p_sample(img, t, torch.from_numpy(noises[i]))
        if i % 3 == 0:
            imgs.append(img.cpu())
            x0s.append(x_recon)
    final = (img.clamp(-1, 1) + 1) * 0.5
    return {"buffers": buf, "trajectory": torch.stack(imgs), "x0_preds": x0s, "final": final,
            "requires_grad": img.requires_grad, "x0_range": [x0s[-1].min().item(), x0s[-1].max().item()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # a DDIM chain and its inversion through a tiny conv net
def ddim_sampling_eta_zero_and_inversion(torch):
    """diffusers' DDIM step: timesteps from ``np.arange(...) * step_ratio`` reversed, iteration over
    a tensor of timesteps (0-dim tensors indexing ``alphas_cumprod``, ``prev_timestep >= 0`` as a
    condition, ``timestep.expand(batch)``), eta=0 deterministic sampling, eta=1 with NumPy noise,
    and DDIM inversion of the deterministic sample back to noise."""
    T, S = 50, 5
    betas = _linear_beta_schedule(torch, T).float()
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    final_alpha_cumprod = torch.tensor(1.0)
    step_ratio = T // S
    timesteps = torch.from_numpy(
        (np.arange(0, S) * step_ratio).round()[::-1].copy().astype(np.int64)
    )
    model = set_weights(torch, _tiny_conv_denoiser(torch, ch=2), seed=9).eval()

    def ddim_step(model_output, timestep, sample, eta=0.0, variance_noise=None):
        prev_timestep = timestep - step_ratio
        alpha_prod_t = alphas_cumprod[timestep]
        alpha_prod_t_prev = (
            alphas_cumprod[prev_timestep] if prev_timestep >= 0 else final_alpha_cumprod
        )
        beta_prod_t = 1 - alpha_prod_t
        pred_original_sample = (sample - beta_prod_t ** (0.5) * model_output) / alpha_prod_t ** (
            0.5
        )
        beta_prod_t_prev = 1 - alpha_prod_t_prev
        variance = (beta_prod_t_prev / beta_prod_t) * (1 - alpha_prod_t / alpha_prod_t_prev)
        std_dev_t = eta * variance ** (0.5)
        pred_sample_direction = (1 - alpha_prod_t_prev - std_dev_t**2) ** (0.5) * model_output
        prev_sample = alpha_prod_t_prev ** (0.5) * pred_original_sample + pred_sample_direction
        if eta > 0:
            prev_sample = prev_sample + std_dev_t * variance_noise
        return prev_sample, pred_original_sample

    latents0 = torch.from_numpy(arr(10, 2, 2, 4, 4))
    out = {"timesteps": timesteps}
    with torch.no_grad():
        for eta in (0.0, 1.0):
            sample = latents0.clone()
            for i, t in enumerate(timesteps):
                model_output = model(sample, t.expand(sample.shape[0]))
                noise = torch.from_numpy(arr(11 + i, 2, 2, 4, 4))
                sample, x0 = ddim_step(model_output, t, sample, eta=eta, variance_noise=noise)
            out[f"sample_eta{eta:g}"] = sample
            out[f"x0_eta{eta:g}"] = x0
        # DDIM inversion: walk the deterministic sample back up the same timesteps
        latents = out["sample_eta0"].clone()
        inv_steps = []
        for t in timesteps.flip(0):
            prev_t = t - step_ratio
            alpha_prev = alphas_cumprod[prev_t] if prev_t >= 0 else final_alpha_cumprod
            alpha_t = alphas_cumprod[t]
            eps = model(latents, t.expand(latents.shape[0]))
            x0 = (latents - (1 - alpha_prev).sqrt() * eps) / alpha_prev.sqrt()
            latents = alpha_t.sqrt() * x0 + (1 - alpha_t).sqrt() * eps
            inv_steps.append(int(t))
        out["inverted"] = latents
        out["inv_steps"] = inv_steps
        out["inversion_error"] = (latents - latents0).abs().mean()
    return out


@program(rtol=5e-4, atol=5e-5)  # FiLM conv denoiser, three guided DDIM steps
def classifier_free_guidance_with_null_label_and_rescale(torch):
    """Classifier-free guidance: a class-conditional denoiser (``nn.Embedding`` with a null class,
    FiLM by ``chunk(2, dim=1)``) trained with labels dropped to the null class by ``torch.where`` on
    a NumPy mask; sampling doubles the batch with ``torch.cat([x] * 2)``, splits the prediction with
    ``.chunk(2)``, mixes ``uncond + scale * (cond - uncond)`` and applies diffusers'
    ``rescale_noise_cfg`` (``std`` over ``list(range(1, ndim))``); lucidrains'
    ``forward_with_cond_scale`` for comparison."""
    nn, F = torch.nn, torch.nn.functional
    T, num_classes, null = 50, 3, 3

    class CondDenoiser(nn.Module):
        def __init__(self, ch=1, dim=8):
            super().__init__()
            self.dim = dim
            self.class_emb = nn.Embedding(num_classes + 1, dim)
            self.film = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 2))
            self.conv_in = nn.Conv2d(ch, dim, 3, padding=1)
            self.conv_out = nn.Conv2d(dim, ch, 3, padding=1)

        def forward(self, x, t, y, cond_drop_prob=0.0):
            if cond_drop_prob == 1.0:
                y = torch.full_like(y, null)
            emb = _timestep_embedding(torch, t, self.dim) + self.class_emb(y)
            scale, shift = self.film(emb)[:, :, None, None].chunk(2, dim=1)
            h = F.silu(self.conv_in(x) * (1 + scale) + shift)
            return self.conv_out(h)

        def forward_with_cond_scale(self, x, t, y, cond_scale=1.0):
            logits = self.forward(x, t, y, cond_drop_prob=0.0)
            if cond_scale == 1:
                return logits
            null_logits = self.forward(x, t, y, cond_drop_prob=1.0)
            return null_logits + (logits - null_logits) * cond_scale

    model = set_weights(torch, CondDenoiser(), seed=12)
    alphas_cumprod = torch.cumprod(1 - _linear_beta_schedule(torch, T), 0).float()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x0 = torch.tensor(np.tanh(arr(13, 6, 1, 4, 4)))
    labels = torch.tensor(ints(14, num_classes, 6))
    losses, dropped = [], []
    for step in range(3):
        drop = torch.from_numpy(_uniform(15 + step, 6) < 0.3)
        y = torch.where(drop, torch.full_like(labels, null), labels)
        t = torch.from_numpy(ints(20 + step, T, 6))
        noise = torch.from_numpy(arr(25 + step, 6, 1, 4, 4))
        a = alphas_cumprod[t].view(-1, 1, 1, 1)
        x_t = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(x_t, t, y), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        dropped.append(y.tolist())

    def rescale_noise_cfg(noise_cfg, noise_pred_text, guidance_rescale=0.0):
        std_text = noise_pred_text.std(dim=list(range(1, noise_pred_text.ndim)), keepdim=True)
        std_cfg = noise_cfg.std(dim=list(range(1, noise_cfg.ndim)), keepdim=True)
        noise_pred_rescaled = noise_cfg * (std_text / std_cfg)
        return guidance_rescale * noise_pred_rescaled + (1 - guidance_rescale) * noise_cfg

    out = {"losses": losses, "dropped": dropped}
    model.eval()
    y = torch.tensor([0, 1, 2, 0])
    uncond = torch.full_like(y, null)
    with torch.no_grad():
        for guidance_scale in (1.0, 3.0, 7.5):
            latents = torch.from_numpy(arr(30, 4, 1, 4, 4))
            for t in (19, 12, 5):
                t_prev = t - 7
                latent_model_input = torch.cat([latents] * 2)
                t_in = torch.full((latent_model_input.shape[0],), t, dtype=torch.long)
                noise_pred = model(latent_model_input, t_in, torch.cat([uncond, y]))
                noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
                noise_pred = noise_pred_uncond + guidance_scale * (
                    noise_pred_text - noise_pred_uncond
                )
                noise_pred = rescale_noise_cfg(noise_pred, noise_pred_text, guidance_rescale=0.7)
                a_t = alphas_cumprod[t]
                a_prev = alphas_cumprod[t_prev] if t_prev >= 0 else torch.tensor(1.0)
                x0_pred = (latents - (1 - a_t).sqrt() * noise_pred) / a_t.sqrt()
                latents = a_prev.sqrt() * x0_pred + (1 - a_prev).sqrt() * noise_pred
            out[f"latents_w{guidance_scale:g}"] = latents
        xt = torch.from_numpy(arr(31, 4, 1, 4, 4))
        tt = torch.tensor([3, 7, 11, 15])
        out["lucidrains_cfg"] = model.forward_with_cond_scale(xt, tt, y, cond_scale=3.0)
        out["lucidrains_cfg1"] = model.forward_with_cond_scale(xt, tt, y, cond_scale=1.0)
    return out


@program(rtol=5e-4, atol=5e-5)  # AdamW steps on a v-prediction MLP
def v_prediction_min_snr_and_zero_terminal_snr(torch):
    """v-prediction: diffusers' ``rescale_zero_terminal_snr`` (in-place ``-=``/``*=`` on the
    square roots, ``torch.cat([alphas_bar[0:1], alphas])``), ``get_velocity``, x0 and epsilon
    recovered from v, ``compute_snr`` and the min-SNR-gamma weights ``torch.stack([snr, gamma *
    torch.ones_like(timesteps)], dim=1).min(dim=1)[0] / (snr + 1)`` on a per-sample loss."""
    nn, F = torch.nn, torch.nn.functional
    T = 30

    def rescale_zero_terminal_snr(betas):
        alphas = 1.0 - betas
        alphas_cumprod = torch.cumprod(alphas, dim=0)
        alphas_bar_sqrt = alphas_cumprod.sqrt()
        alphas_bar_sqrt_0 = alphas_bar_sqrt[0].clone()
        alphas_bar_sqrt_T = alphas_bar_sqrt[-1].clone()
        alphas_bar_sqrt -= alphas_bar_sqrt_T
        alphas_bar_sqrt *= alphas_bar_sqrt_0 / (alphas_bar_sqrt_0 - alphas_bar_sqrt_T)
        alphas_bar = alphas_bar_sqrt**2
        alphas = alphas_bar[1:] / alphas_bar[:-1]
        alphas = torch.cat([alphas_bar[0:1], alphas])
        return 1 - alphas

    betas = rescale_zero_terminal_snr(
        torch.linspace(0.00085**0.5, 0.012**0.5, T, dtype=torch.float32) ** 2
    )
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)

    def compute_snr(timesteps):
        sqrt_alphas_cumprod = alphas_cumprod**0.5
        sqrt_one_minus_alphas_cumprod = (1.0 - alphas_cumprod) ** 0.5
        alpha = sqrt_alphas_cumprod[timesteps].float()
        while len(alpha.shape) < len(timesteps.shape):
            alpha = alpha[..., None]
        sigma = sqrt_one_minus_alphas_cumprod[timesteps].float()
        return (alpha / sigma) ** 2

    def get_velocity(sample, noise, timesteps):
        sqrt_alpha_prod = (alphas_cumprod[timesteps] ** 0.5).flatten()
        sqrt_one_minus_alpha_prod = ((1 - alphas_cumprod[timesteps]) ** 0.5).flatten()
        while len(sqrt_alpha_prod.shape) < len(sample.shape):
            sqrt_alpha_prod = sqrt_alpha_prod.unsqueeze(-1)
            sqrt_one_minus_alpha_prod = sqrt_one_minus_alpha_prod.unsqueeze(-1)
        return sqrt_alpha_prod * noise - sqrt_one_minus_alpha_prod * sample

    model = set_weights(
        torch, nn.Sequential(nn.Linear(4 + 8, 24), nn.SiLU(), nn.Linear(24, 4)), seed=16
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x0 = torch.tensor(np.tanh(arr(17, 8, 4)))
    snr_gamma = 5.0
    losses, weights = [], []
    for step in range(4):
        timesteps = torch.from_numpy(ints(40 + step, T, 8))
        if step == 0:
            timesteps[0] = T - 1  # the zero-SNR step
        noise = torch.from_numpy(arr(45 + step, 8, 4))
        a = alphas_cumprod[timesteps].unsqueeze(-1)
        noisy = a.sqrt() * x0 + (1 - a).sqrt() * noise
        target = get_velocity(x0, noise, timesteps)
        model_pred = model(torch.cat([noisy, _timestep_embedding(torch, timesteps, 8)], dim=1))
        snr = compute_snr(timesteps)
        mse_loss_weights = torch.stack([snr, snr_gamma * torch.ones_like(timesteps)], dim=1).min(
            dim=1
        )[0]
        mse_loss_weights = mse_loss_weights / (snr + 1)
        loss = F.mse_loss(model_pred.float(), target.float(), reduction="none")
        loss = loss.mean(dim=list(range(1, len(loss.shape)))) * mse_loss_weights
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        weights.append(mse_loss_weights)
    t = torch.tensor([0, 10, 29])
    noise = torch.from_numpy(arr(50, 3, 4))
    a = alphas_cumprod[t].unsqueeze(-1)
    x_t = a.sqrt() * x0[:3] + (1 - a).sqrt() * noise
    v = get_velocity(x0[:3], noise, t)
    return {
        "betas": betas,
        "alphas_cumprod": alphas_cumprod,
        "terminal": alphas_cumprod[-1].item(),
        "snr": compute_snr(torch.arange(T)),
        "losses": losses,
        "weights": weights,
        "x0_from_v": a.sqrt() * x_t - (1 - a).sqrt() * v,
        "eps_from_v": a.sqrt() * v + (1 - a).sqrt() * x_t,
        "final": params(model),
    }


@program(rtol=5e-4, atol=5e-5)  # Heun steps in float64 around a float32 network
def edm_karras_sigmas_preconditioning_heun_sampler(torch):
    """EDM (Karras et al. 2022): k-diffusion's ``get_sigmas_karras`` with ``append_zero``, EDM's own
    float64 time steps with ``round_sigma``, ``EDMPrecond`` (c_skip, c_out, c_in, c_noise =
    log(sigma)/4) around a network on Fourier features (``x.ger(freqs)``), ``EDMLoss`` with
    log-normal sigmas from NumPy and its loss weight, and the deterministic Heun sampler."""
    nn, F = torch.nn, torch.nn.functional
    sigma_min, sigma_max, rho, sigma_data = 0.002, 80.0, 7.0, 0.5

    def append_zero(x):
        return torch.cat([x, x.new_zeros([1])])

    def get_sigmas_karras(n, sigma_min, sigma_max, rho=7.0, device="cpu"):
        ramp = torch.linspace(0, 1, n, device=device)
        min_inv_rho = sigma_min ** (1 / rho)
        max_inv_rho = sigma_max ** (1 / rho)
        sigmas = (max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** rho
        return append_zero(sigmas).to(device)

    class FourierFeatures(nn.Module):
        def __init__(self, num_channels):
            super().__init__()
            self.register_buffer("freqs", torch.from_numpy(arr(60, num_channels // 2)))

        def forward(self, x):
            x = x.ger((2 * np.pi * self.freqs).to(x.dtype))
            return torch.cat([x.cos(), x.sin()], dim=1)

    class Net(nn.Module):
        def __init__(self, ch=2, dim=8):
            super().__init__()
            self.map_noise = FourierFeatures(dim)
            self.map_layer = nn.Linear(dim, dim)
            self.conv_in = nn.Conv2d(ch, dim, 3, padding=1)
            self.conv_out = nn.Conv2d(dim, ch, 3, padding=1)

        def forward(self, x, noise_labels):
            emb = F.silu(self.map_layer(self.map_noise(noise_labels)))
            return self.conv_out(F.silu(self.conv_in(x) + emb[:, :, None, None]))

    class EDMPrecond(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.sigma_data = sigma_data
            self.model = model

        def forward(self, x, sigma):
            x = x.to(torch.float32)
            sigma = sigma.to(torch.float32).reshape(-1, 1, 1, 1)
            c_skip = self.sigma_data**2 / (sigma**2 + self.sigma_data**2)
            c_out = sigma * self.sigma_data / (sigma**2 + self.sigma_data**2).sqrt()
            c_in = 1 / (self.sigma_data**2 + sigma**2).sqrt()
            c_noise = sigma.log() / 4
            F_x = self.model((c_in * x), c_noise.flatten())
            return c_skip * x + c_out * F_x.to(torch.float32)

        def round_sigma(self, sigma):
            return torch.as_tensor(sigma)

    net = EDMPrecond(set_weights(torch, Net(), seed=61))
    P_mean, P_std = -1.2, 1.2
    images = torch.tensor(np.tanh(arr(62, 4, 2, 4, 4)))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    losses = []
    for step in range(3):
        rnd_normal = torch.from_numpy(arr(63 + step, images.shape[0], 1, 1, 1))
        sigma = (rnd_normal * P_std + P_mean).exp()
        weight = (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2
        n = torch.from_numpy(arr(66 + step, *images.shape)) * sigma
        D_yn = net(images + n, sigma)
        loss = weight * ((D_yn - images) ** 2)
        opt.zero_grad()
        loss.sum().mul(1 / images.shape[0]).backward()
        opt.step()
        losses.append(loss.mean().item())

    num_steps = 5
    step_indices = torch.arange(num_steps, dtype=torch.float64)
    t_steps = (sigma_max ** (1 / rho) + step_indices / (num_steps - 1)
               * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho  # fmt: skip
    t_steps = torch.cat([net.round_sigma(t_steps), torch.zeros_like(t_steps[:1])])
    latents = torch.from_numpy(arr(70, 2, 2, 4, 4))
    x_next = latents.to(torch.float64) * t_steps[0]
    denoised_seen = []
    with torch.no_grad():
        for i, (t_cur, t_next) in enumerate(zip(t_steps[:-1], t_steps[1:])):
            x_hat, t_hat = x_next, t_cur
            denoised = net(x_hat, t_hat).to(torch.float64)
            d_cur = (x_hat - denoised) / t_hat
            x_next = x_hat + (t_next - t_hat) * d_cur
            if i < num_steps - 1:
                denoised = net(x_next, t_next).to(torch.float64)
                d_prime = (x_next - denoised) / t_next
                x_next = x_hat + (t_next - t_hat) * (0.5 * d_cur + 0.5 * d_prime)
            denoised_seen.append(denoised[0, 0, 0])
    sig = torch.tensor([0.002, 0.5, 80.0])
    return {
        "karras": get_sigmas_karras(6, sigma_min, sigma_max),
        "t_steps": t_steps,
        "losses": losses,
        "sample": x_next,
        "sample_dtype": str(x_next.dtype),
        "denoised_rows": denoised_seen,
        "c_skip": sigma_data**2 / (sig**2 + sigma_data**2),
        "c_out": sig * sigma_data / (sig**2 + sigma_data**2).sqrt(),
        "c_noise": sig.log() / 4,
        "grads": grads(net),
    }


@program(rtol=5e-4, atol=5e-5)  # autograd through logsumexp; Langevin steps compound rounding
def denoising_score_matching_vp_sde_and_pc_sampler(torch):
    """Score SDEs (Song et al.): the VP SDE's ``marginal_prob`` and discrete ``alphas``, the
    continuous-time DSM loss ``square(score * std + z)`` reduced per sample, a score network whose
    output is divided by the marginal std, the exact score of a perturbed Gaussian mixture by
    ``autograd.grad`` of a ``logsumexp`` (under ``enable_grad``), and a reverse-diffusion predictor
    with a Langevin corrector (``step_size = (snr * noise_norm / grad_norm) ** 2 * 2 * alpha``)
    sampling with that exact score."""
    nn = torch.nn

    class VPSDE:
        def __init__(self, beta_min=0.1, beta_max=20, N=25):
            self.beta_0, self.beta_1, self.N = beta_min, beta_max, N
            self.discrete_betas = torch.linspace(beta_min / N, beta_max / N, N)
            self.alphas = 1.0 - self.discrete_betas

        @property
        def T(self):
            return 1

        def sde(self, x, t):
            beta_t = self.beta_0 + t * (self.beta_1 - self.beta_0)
            drift = -0.5 * beta_t[:, None] * x
            diffusion = torch.sqrt(beta_t)
            return drift, diffusion

        def marginal_prob(self, x, t):
            log_mean_coeff = -0.25 * t**2 * (self.beta_1 - self.beta_0) - 0.5 * t * self.beta_0
            mean = torch.exp(log_mean_coeff[:, None]) * x
            std = torch.sqrt(1.0 - torch.exp(2.0 * log_mean_coeff))
            return mean, std

        def discretize(self, x, t):
            timestep = (t * (self.N - 1) / self.T).long()
            beta = self.discrete_betas.to(x.device)[timestep]
            alpha = self.alphas.to(x.device)[timestep]
            sqrt_beta = torch.sqrt(beta)
            f = torch.sqrt(alpha)[:, None] * x - x
            return f, sqrt_beta

    sde = VPSDE()

    class ScoreModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(2 + 8, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 2)
            )

        def forward(self, x, t):
            labels = t * 999
            h = self.net(torch.cat([x, _timestep_embedding(torch, labels, 8)], dim=-1))
            std = sde.marginal_prob(torch.zeros_like(x), t)[1]
            return -h / std[:, None]

    score_model = set_weights(torch, ScoreModel(), seed=71)
    opt = torch.optim.Adam(score_model.parameters(), lr=2e-3)
    centers = torch.tensor([[1.0, 1.0], [-1.0, -0.5]])
    batch = centers[torch.from_numpy(ints(72, 2, 32))] + 0.2 * torch.from_numpy(arr(73, 32, 2))
    eps = 1e-5
    losses = []
    for step in range(3):
        t = torch.from_numpy(_uniform(74 + step, 32)) * (sde.T - eps) + eps
        z = torch.from_numpy(arr(77 + step, 32, 2))
        mean, std = sde.marginal_prob(batch, t)
        perturbed_data = mean + std[:, None] * z
        score = score_model(perturbed_data, t)
        losses_ = torch.square(score * std[:, None] + z)
        losses_ = torch.sum(losses_.reshape(losses_.shape[0], -1), dim=-1)
        loss = torch.mean(losses_)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    @torch.enable_grad()
    def true_score(x, t):
        x = x.detach().requires_grad_(True)
        log_mean_coeff = -0.25 * t**2 * (sde.beta_1 - sde.beta_0) - 0.5 * t * sde.beta_0
        m = torch.exp(log_mean_coeff)[:, None, None] * centers[None]
        var = (
            torch.exp(2 * log_mean_coeff)[:, None] * 0.04
            + 1
            - torch.exp(2 * log_mean_coeff)[:, None]
        )
        log_p = torch.logsumexp(-((x[:, None] - m) ** 2).sum(-1) / (2 * var), dim=1)
        return torch.autograd.grad(log_p.sum(), x)[0]

    probe_t = torch.tensor([0.05, 0.3, 0.9])
    probe_x = torch.from_numpy(arr(80, 3, 2))
    with torch.no_grad():
        probe_model = score_model(probe_x, probe_t)

    # predictor-corrector sampling with the exact score of the perturbed mixture
    score_fn = true_score
    snr, n_steps = 0.16, 1
    x = torch.from_numpy(arr(81, 6, 2))
    timesteps = torch.linspace(sde.T, 1e-3, sde.N)
    with torch.no_grad():
        for i in range(sde.N):
            vec_t = torch.ones(x.shape[0]) * timesteps[i]
            # Langevin corrector
            for _ in range(n_steps):
                grad = score_fn(x, vec_t)
                noise = torch.from_numpy(arr(90 + i, 6, 2))
                grad_norm = torch.norm(grad.reshape(grad.shape[0], -1), dim=-1).mean()
                noise_norm = torch.norm(noise.reshape(noise.shape[0], -1), dim=-1).mean()
                timestep = (vec_t * (sde.N - 1) / sde.T).long()
                alpha = sde.alphas[timestep]
                step_size = (snr * noise_norm / grad_norm) ** 2 * 2 * alpha
                x_mean = x + step_size[:, None] * grad
                x = x_mean + torch.sqrt(step_size * 2)[:, None] * noise
            # reverse diffusion predictor
            f, G = sde.discretize(x, vec_t)
            rev_f = f - (G**2)[:, None] * score_fn(x, vec_t)
            z = torch.from_numpy(arr(110 + i, 6, 2))
            x_mean = x - rev_f
            x = x_mean + G[:, None] * z
    drift, diffusion = sde.sde(probe_x, probe_t)
    return {
        "losses": losses,
        "marginal_std": sde.marginal_prob(probe_x, probe_t)[1],
        "drift": drift,
        "diffusion": diffusion,
        "true_score": true_score(probe_x, probe_t),
        "model_score": probe_model,
        "sample": x_mean,
        "grads": grads(score_model),
    }


@program(rtol=1e-3, atol=1e-4)  # GroupNorm, attention and weight standardization: reductions order
def unet_resblocks_groupnorm_silu_upsample_skip_concat(torch):
    """A small lucidrains-style UNet: weight-standardized convs (``var(unbiased=False)`` and
    ``rsqrt``), ResNet blocks with GroupNorm, SiLU and a time-embedding scale/shift, pixel-unshuffle
    downsampling, a mid attention block (``einsum`` over heads), ``nn.Upsample(scale_factor=2,
    mode="nearest")`` followed by a conv, skip connections stored in a list and concatenated with
    ``torch.cat((x, h.pop()), dim=1)``; the epsilon loss, its gradients and an Adam step."""
    nn, F = torch.nn, torch.nn.functional

    class WeightStandardizedConv2d(nn.Conv2d):
        def forward(self, x):
            eps = 1e-5 if x.dtype == torch.float32 else 1e-3
            weight = self.weight
            mean = weight.mean(dim=(1, 2, 3), keepdim=True)
            var = torch.var(weight, dim=(1, 2, 3), keepdim=True, unbiased=False)
            normalized_weight = (weight - mean) * (var + eps).rsqrt()
            return F.conv2d(
                x,
                normalized_weight,
                self.bias,
                self.stride,
                self.padding,
                self.dilation,
                self.groups,
            )

    class Block(nn.Module):
        def __init__(self, dim, dim_out, groups=4):
            super().__init__()
            self.proj = WeightStandardizedConv2d(dim, dim_out, 3, padding=1)
            self.norm = nn.GroupNorm(groups, dim_out)
            self.act = nn.SiLU()

        def forward(self, x, scale_shift=None):
            x = self.norm(self.proj(x))
            if scale_shift is not None:
                scale, shift = scale_shift
                x = x * (scale + 1) + shift
            return self.act(x)

    class ResnetBlock(nn.Module):
        def __init__(self, dim, dim_out, time_emb_dim):
            super().__init__()
            self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2))
            self.block1 = Block(dim, dim_out)
            self.block2 = Block(dim_out, dim_out)
            self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

        def forward(self, x, time_emb):
            time_emb = self.mlp(time_emb)[:, :, None, None]
            scale_shift = time_emb.chunk(2, dim=1)
            h = self.block1(x, scale_shift=scale_shift)
            h = self.block2(h)
            return h + self.res_conv(x)

    class Attention(nn.Module):
        def __init__(self, dim, heads=2, dim_head=4):
            super().__init__()
            self.scale = dim_head**-0.5
            self.heads = heads
            self.norm = nn.GroupNorm(1, dim)
            self.to_qkv = nn.Conv2d(dim, heads * dim_head * 3, 1, bias=False)
            self.to_out = nn.Conv2d(heads * dim_head, dim, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            qkv = self.to_qkv(self.norm(x)).chunk(3, dim=1)
            q, k, v = map(lambda t: t.reshape(b, self.heads, -1, h * w), qkv)
            q = q * self.scale
            sim = torch.einsum("b h d i, b h d j -> b h i j", q, k)
            attn = sim.softmax(dim=-1)
            out = torch.einsum("b h i j, b h d j -> b h i d", attn, v)
            out = out.permute(0, 1, 3, 2).reshape(b, -1, h, w)
            return self.to_out(out) + x

    class Unet(nn.Module):
        def __init__(self, dim=8, channels=2, dim_mults=(1, 2)):
            super().__init__()
            self.dim = dim
            self.init_conv = nn.Conv2d(channels, dim, 7, padding=3)
            dims = [dim, *map(lambda m: dim * m, dim_mults)]
            in_out = list(zip(dims[:-1], dims[1:]))
            time_dim = dim * 4
            self.time_mlp = nn.Sequential(
                nn.Linear(dim, time_dim), nn.GELU(), nn.Linear(time_dim, time_dim)
            )
            self.downs, self.ups = nn.ModuleList([]), nn.ModuleList([])
            for ind, (dim_in, dim_out) in enumerate(in_out):
                is_last = ind >= (len(in_out) - 1)
                self.downs.append(nn.ModuleList([
                    ResnetBlock(dim_in, dim_in, time_dim),
                    nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(dim_in * 4, dim_out, 1))
                    if not is_last else nn.Conv2d(dim_in, dim_out, 3, padding=1),
                ]))  # fmt: skip
            mid_dim = dims[-1]
            self.mid_block1 = ResnetBlock(mid_dim, mid_dim, time_dim)
            self.mid_attn = Attention(mid_dim)
            for ind, (dim_in, dim_out) in enumerate(reversed(in_out)):
                is_last = ind == (len(in_out) - 1)
                self.ups.append(nn.ModuleList([
                    ResnetBlock(dim_out + dim_in, dim_out, time_dim),
                    nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(dim_out, dim_in, 3, padding=1))
                    if not is_last else nn.Conv2d(dim_out, dim_in, 3, padding=1),
                ]))  # fmt: skip
            self.final_res_block = ResnetBlock(dim * 2, dim, time_dim)
            self.final_conv = nn.Conv2d(dim, channels, 1)

        def forward(self, x, time):
            x = self.init_conv(x)
            r = x.clone()
            t = self.time_mlp(
                _get_timestep_embedding(torch, time, self.dim, downscale_freq_shift=1)
            )
            h = []
            for block, downsample in self.downs:
                x = block(x, t)
                h.append(x)
                x = downsample(x)
            x = self.mid_block1(x, t)
            x = self.mid_attn(x)
            for block, upsample in self.ups:
                x = torch.cat((x, h.pop()), dim=1)
                x = block(x, t)
                x = upsample(x)
            x = torch.cat((x, r), dim=1)
            x = self.final_res_block(x, t)
            return self.final_conv(x)

    model = set_weights(torch, Unet(), seed=120)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    alphas_cumprod = torch.cumprod(1 - _cosine_beta_schedule(torch, 100), 0).float()
    x0 = torch.tensor(np.tanh(arr(121, 2, 2, 8, 8)))
    t = torch.tensor([7, 63])
    noise = torch.from_numpy(arr(122, 2, 2, 8, 8))
    a = alphas_cumprod[t][:, None, None, None]
    x_t = a.sqrt() * x0 + (1 - a).sqrt() * noise
    pred = model(x_t, t)
    loss = F.mse_loss(pred, noise)
    opt.zero_grad()
    loss.backward()
    g = grads(model)
    opt.step()
    up = nn.Upsample(scale_factor=2, mode="nearest")(x0[:, :1, :2, :2])
    return {
        "pred": pred,
        "loss": loss.item(),
        "grads": {k: g[k] for k in sorted(g) if "mid" in k or "final" in k or k.startswith("init")},
        "grad_norm_total": torch.stack([v.norm() for v in g.values()]).norm(),
        "after_step": model.init_conv.weight[0, 0],
        "upsample": up,
        "upsample_eq": torch.equal(
            up, F.interpolate(x0[:, :1, :2, :2], scale_factor=2.0, mode="nearest")
        ),
        "n_params": sum(p.numel() for p in model.parameters()),
        "module_names": [n for n, _ in model.named_modules()][:12],
    }


@program(rtol=5e-4, atol=5e-5)  # Adam steps through BatchNorm in train mode
def ema_of_weights_warmup_and_foreach(torch):
    """Four EMAs of a denoiser's weights as the libraries keep them: ema-pytorch's
    ``copy.deepcopy(model).eval().requires_grad_(False)`` with the warmup decay ``1 - (1 +
    step / inv_gamma) ** -power`` and ``lerp_``, buffers copied with ``copy_``; diffusers'
    ``EMAModel`` with ``(1 + step) / (10 + step)`` and ``s_param.sub_(one_minus_decay * (s_param -
    param))``; and its ``torch._foreach_sub_(..., alpha=one_minus_decay)`` form; then
    ``store``/``copy_to``/``restore`` to evaluate with the averaged weights; and PyTorch's own
    ``AveragedModel`` with ``get_ema_multi_avg_fn`` and ``use_buffers=True``."""
    # (no bias before BatchNorm: its gradient is zero up to rounding, which Adam would amplify)
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(
        torch,
        nn.Sequential(
            nn.Linear(6, 16, bias=False), nn.BatchNorm1d(16), nn.SiLU(), nn.Linear(16, 6)
        ),
        seed=130,
    )
    ema_model = copy.deepcopy(model).eval().requires_grad_(False)
    swa_utils = torch.optim.swa_utils
    averaged = swa_utils.AveragedModel(
        model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True
    )
    shadow = [p.clone().detach() for p in model.parameters()]
    shadow_foreach = [p.clone().detach() for p in model.parameters()]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.from_numpy(arr(131, 12, 6))
    inv_gamma, power, beta, min_value = 1.0, 2 / 3, 0.9999, 0.0
    decays_a, decays_b, losses = [], [], []

    def get_decay(optimization_step, decay=0.999, min_decay=0.0, update_after_step=0):
        step = max(0, optimization_step - update_after_step - 1)
        if step <= 0:
            return 0.0
        cur_decay_value = (1 + step) / (10 + step)
        cur_decay_value = min(cur_decay_value, decay)
        return max(cur_decay_value, min_decay)

    for step in range(1, 7):
        noise = torch.from_numpy(arr(132 + step, 12, 6))
        loss = F.mse_loss(model(x + noise), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        # ema-pytorch
        epoch = max(step - 1, 0)
        value = 1 - (1 + epoch / inv_gamma) ** -power
        decay = 0.0 if epoch <= 0 else min(max(value, min_value), beta)
        decays_a.append(decay)
        with torch.no_grad():
            for ma_params, current_params in zip(ema_model.parameters(), model.parameters()):
                ma_params.data.lerp_(current_params.data, 1.0 - decay)
            for ma_buffers, current_buffers in zip(ema_model.buffers(), model.buffers()):
                ma_buffers.data.copy_(current_buffers.data)
        # diffusers EMAModel
        d = get_decay(step)
        decays_b.append(d)
        one_minus_decay = 1 - d
        with torch.no_grad():
            for s_param, param in zip(shadow, model.parameters()):
                if param.requires_grad:
                    s_param.sub_(one_minus_decay * (s_param - param))
                else:
                    s_param.copy_(param)
            params_grad = [p for p in model.parameters() if p.requires_grad]
            torch._foreach_sub_(
                shadow_foreach,
                torch._foreach_sub(shadow_foreach, params_grad),
                alpha=one_minus_decay,
            )
        averaged.update_parameters(model)

    # evaluate with the averaged weights and put the training weights back
    model.eval()
    temp_stored_params = [param.detach().cpu().clone() for param in model.parameters()]
    for s_param, param in zip(shadow, model.parameters()):
        param.data.copy_(s_param.to(param.device).data)
    with torch.no_grad():
        out_ema = model(x)
    for c_param, param in zip(temp_stored_params, model.parameters()):
        param.data.copy_(c_param.data)
    with torch.no_grad():
        out_train = model(x)
        out_ema_pytorch = ema_model(x)
        out_averaged = averaged(x)
    return {
        "losses": losses,
        "decays_a": decays_a,
        "decays_b": decays_b,
        "ema_pytorch": params(ema_model),
        "ema_buffers": dict(ema_model.named_buffers()),
        "shadow": shadow,
        "foreach_matches": all(torch.allclose(a, b) for a, b in zip(shadow, shadow_foreach)),
        "out_ema": out_ema,
        "out_train": out_train,
        "out_ema_pytorch": out_ema_pytorch,
        "ema_requires_grad": [p.requires_grad for p in ema_model.parameters()],
        "ema_training": ema_model.training,
        "averaged": dict(averaged.module.state_dict()),
        "n_averaged": averaged.n_averaged,
        "out_averaged": out_averaged,
    }


@program(rtol=5e-4, atol=5e-5)  # a conv net with learned variances, one Adam step
def improved_ddpm_posterior_vlb_learned_variance(torch):
    """improved-diffusion's hybrid loss: schedules in NumPy float64 gathered by
    ``_extract_into_tensor``, ``q_posterior_mean_variance`` with the log variance clipped by
    ``np.append(posterior_variance[1], posterior_variance[1:])``, learned-range variances
    (``torch.split`` of a 2C-channel output), ``normal_kl``, the discretized Gaussian decoder
    likelihood with the tanh CDF approximation and nested ``torch.where``, ``mean_flat`` in bits,
    the variational bound on a frozen mean (``detach``) added to the MSE, the prior's bpd, and
    ``SpacedDiffusion``'s respaced betas (a list of ``np.float64`` made a tensor: float64)."""
    T = 10
    C = 1
    betas = np.linspace(0.001, 0.2, T, dtype=np.float64)
    alphas = 1.0 - betas
    alphas_cumprod = np.cumprod(alphas, axis=0)
    alphas_cumprod_prev = np.append(1.0, alphas_cumprod[:-1])
    sqrt_alphas_cumprod = np.sqrt(alphas_cumprod)
    sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - alphas_cumprod)
    log_one_minus_alphas_cumprod = np.log(1.0 - alphas_cumprod)
    sqrt_recip_alphas_cumprod = np.sqrt(1.0 / alphas_cumprod)
    sqrt_recipm1_alphas_cumprod = np.sqrt(1.0 / alphas_cumprod - 1)
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    posterior_log_variance_clipped = np.log(
        np.append(posterior_variance[1], posterior_variance[1:])
    )
    posterior_mean_coef1 = betas * np.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    posterior_mean_coef2 = (1.0 - alphas_cumprod_prev) * np.sqrt(alphas) / (1.0 - alphas_cumprod)

    def _extract_into_tensor(arr_, timesteps, broadcast_shape):
        res = torch.from_numpy(arr_).to(device=timesteps.device)[timesteps].float()
        while len(res.shape) < len(broadcast_shape):
            res = res[..., None]
        return res.expand(broadcast_shape)

    def mean_flat(tensor):
        return tensor.mean(dim=list(range(1, len(tensor.shape))))

    def normal_kl(mean1, logvar1, mean2, logvar2):
        tensor = None
        for obj in (mean1, logvar1, mean2, logvar2):
            if isinstance(obj, torch.Tensor):
                tensor = obj
                break
        logvar1, logvar2 = [x if isinstance(x, torch.Tensor) else torch.tensor(x).to(tensor)
                            for x in (logvar1, logvar2)]  # fmt: skip
        return 0.5 * (-1.0 + logvar2 - logvar1 + torch.exp(logvar1 - logvar2)
                      + ((mean1 - mean2) ** 2) * torch.exp(-logvar2))  # fmt: skip

    def approx_standard_normal_cdf(x):
        return 0.5 * (1.0 + torch.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * torch.pow(x, 3))))

    def discretized_gaussian_log_likelihood(x, *, means, log_scales):
        assert x.shape == means.shape == log_scales.shape
        centered_x = x - means
        inv_stdv = torch.exp(-log_scales)
        plus_in = inv_stdv * (centered_x + 1.0 / 255.0)
        cdf_plus = approx_standard_normal_cdf(plus_in)
        min_in = inv_stdv * (centered_x - 1.0 / 255.0)
        cdf_min = approx_standard_normal_cdf(min_in)
        log_cdf_plus = torch.log(cdf_plus.clamp(min=1e-12))
        log_one_minus_cdf_min = torch.log((1.0 - cdf_min).clamp(min=1e-12))
        cdf_delta = cdf_plus - cdf_min
        log_probs = torch.where(
            x < -0.999,
            log_cdf_plus,
            torch.where(x > 0.999, log_one_minus_cdf_min, torch.log(cdf_delta.clamp(min=1e-12))),
        )
        assert log_probs.shape == x.shape
        return log_probs

    def q_posterior_mean_variance(x_start, x_t, t):
        posterior_mean = (_extract_into_tensor(posterior_mean_coef1, t, x_t.shape) * x_start
                          + _extract_into_tensor(posterior_mean_coef2, t, x_t.shape) * x_t)  # fmt: skip
        return (posterior_mean, _extract_into_tensor(posterior_variance, t, x_t.shape),
                _extract_into_tensor(posterior_log_variance_clipped, t, x_t.shape))  # fmt: skip

    def p_mean_variance(model_output, x, t):
        B = x.shape[0]
        assert model_output.shape == (B, C * 2, *x.shape[2:])
        model_output, model_var_values = torch.split(model_output, C, dim=1)
        min_log = _extract_into_tensor(posterior_log_variance_clipped, t, x.shape)
        max_log = _extract_into_tensor(np.log(betas), t, x.shape)
        frac = (model_var_values + 1) / 2
        model_log_variance = frac * max_log + (1 - frac) * min_log
        pred_xstart = (_extract_into_tensor(sqrt_recip_alphas_cumprod, t, x.shape) * x
                       - _extract_into_tensor(sqrt_recipm1_alphas_cumprod, t, x.shape) * model_output)  # fmt: skip
        pred_xstart = pred_xstart.clamp(-1, 1)
        model_mean, _, _ = q_posterior_mean_variance(pred_xstart, x, t)
        return model_mean, model_log_variance, pred_xstart

    def vb_terms_bpd(model_output, x_start, x_t, t):
        true_mean, _, true_log_variance_clipped = q_posterior_mean_variance(x_start, x_t, t)
        mean, log_variance, pred_xstart = p_mean_variance(model_output, x_t, t)
        kl = normal_kl(true_mean, true_log_variance_clipped, mean, log_variance)
        kl = mean_flat(kl) / np.log(2.0)
        decoder_nll = -discretized_gaussian_log_likelihood(
            x_start, means=mean, log_scales=0.5 * log_variance
        )
        decoder_nll = mean_flat(decoder_nll) / np.log(2.0)
        return torch.where((t == 0), decoder_nll, kl), pred_xstart

    model = set_weights(torch, _tiny_conv_denoiser(torch, ch=C, out_mult=2), seed=140)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_start = torch.from_numpy((ints(141, 256, 4, C, 4, 4) / 127.5 - 1).astype(np.float32))
    t = torch.tensor([0, 3, 6, 9])
    noise = torch.from_numpy(arr(142, 4, C, 4, 4))
    x_t = (_extract_into_tensor(sqrt_alphas_cumprod, t, x_start.shape) * x_start
           + _extract_into_tensor(sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)  # fmt: skip
    model_output = model(x_t, t)
    eps_out, model_var_values = torch.split(model_output, C, dim=1)
    frozen_out = torch.cat([eps_out.detach(), model_var_values], dim=1)
    vb, pred_xstart = vb_terms_bpd(frozen_out, x_start, x_t, t)
    vb = vb * (T / 1000.0)
    mse = mean_flat((noise - eps_out) ** 2)
    loss = (mse + vb).mean()
    opt.zero_grad()
    loss.backward()
    g = grads(model)
    opt.step()
    t_last = torch.tensor([T - 1] * x_start.shape[0])
    qt_mean = _extract_into_tensor(sqrt_alphas_cumprod, t_last, x_start.shape) * x_start
    qt_log_variance = _extract_into_tensor(log_one_minus_alphas_cumprod, t_last, x_start.shape)
    prior_bpd = mean_flat(normal_kl(qt_mean, qt_log_variance, 0.0, 0.0)) / np.log(2.0)
    # SpacedDiffusion: betas of the kept steps from the NumPy alphas_cumprod (np.float64 scalars)
    use_timesteps = {0, 3, 6, 9}
    last_alpha_cumprod, new_betas, timestep_map = 1.0, [], []
    for i, alpha_cumprod in enumerate(alphas_cumprod):
        if i in use_timesteps:
            new_betas.append(1 - alpha_cumprod / last_alpha_cumprod)
            last_alpha_cumprod = alpha_cumprod
            timestep_map.append(i)
    map_tensor = torch.tensor(timestep_map, device=t.device, dtype=t.dtype)
    new_ts = map_tensor[torch.tensor([0, 1, 3])].float() * (1000.0 / T)
    sqrt_ac = torch.tensor(alphas_cumprod[T - 1]) ** 0.5
    return {"new_betas": torch.tensor(new_betas), "new_ts": new_ts, "sqrt_ac": sqrt_ac,
            "sqrt_ac_dtype": str(sqrt_ac.dtype), "scaled_by_np": x_start[0, 0, 0] * sqrt_alphas_cumprod[T - 1],
            "vb": vb, "mse": mse, "loss": loss, "pred_xstart": pred_xstart, "grads": g,
            "posterior_log_variance_clipped": torch.from_numpy(posterior_log_variance_clipped),
            "prior_bpd": prior_bpd, "cdf": approx_standard_normal_cdf(torch.linspace(-3, 3, 7))}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def dynamic_thresholding_and_ddpm_scheduler_step(torch):
    """x0 clipping as samplers do it: Imagen's dynamic thresholding (``torch.quantile`` of
    ``|x0|`` per sample, ``s.clamp_(min=1.)``, ``right_pad_dims_to`` by ``view``, ``x0.clamp(-s, s)
    / s``), diffusers' ``_threshold_sample`` (``reshape(batch, channels * np.prod(rest))``,
    ``torch.clamp(s, min=1, max=max_value)``, ``unsqueeze(1)``) and static clipping, inside
    diffusers' DDPM scheduler step with the "fixed_small", "fixed_small_log" and
    "fixed_large" variances and a ``variance.clamp(min=1e-20)``."""
    T = 10
    betas = torch.linspace(0.01, 0.3, T, dtype=torch.float32)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    one = torch.tensor(1.0)

    def right_pad_dims_to(x, t):
        padding_dims = x.ndim - t.ndim
        if padding_dims <= 0:
            return t
        return t.view(*t.shape, *((1,) * padding_dims))

    def imagen_threshold(x_start, p=0.9):
        s = torch.quantile(x_start.reshape(x_start.shape[0], -1).abs(), p, dim=-1)
        s.clamp_(min=1.0)
        s = right_pad_dims_to(x_start, s)
        return x_start.clamp(-s, s) / s

    def _threshold_sample(sample, ratio=0.9, sample_max_value=1.5):
        dtype = sample.dtype
        batch_size, channels, *remaining_dims = sample.shape
        if dtype not in (torch.float32, torch.float64):
            sample = sample.float()
        sample = sample.reshape(batch_size, channels * np.prod(remaining_dims))
        abs_sample = sample.abs()
        s = torch.quantile(abs_sample, ratio, dim=1)
        s = torch.clamp(s, min=1, max=sample_max_value)
        s = s.unsqueeze(1)
        sample = torch.clamp(sample, -s, s) / s
        sample = sample.reshape(batch_size, channels, *remaining_dims)
        return sample.to(dtype)

    def step(model_output, timestep, sample, variance_noise, thresholding, variance_type):
        t = timestep
        prev_t = t - 1
        alpha_prod_t = alphas_cumprod[t]
        alpha_prod_t_prev = alphas_cumprod[prev_t] if prev_t >= 0 else one
        beta_prod_t = 1 - alpha_prod_t
        beta_prod_t_prev = 1 - alpha_prod_t_prev
        current_alpha_t = alpha_prod_t / alpha_prod_t_prev
        current_beta_t = 1 - current_alpha_t
        pred_original_sample = (sample - beta_prod_t ** (0.5) * model_output) / alpha_prod_t ** (
            0.5
        )
        if thresholding == "dynamic":
            pred_original_sample = _threshold_sample(pred_original_sample)
        elif thresholding == "imagen":
            pred_original_sample = imagen_threshold(pred_original_sample)
        else:
            pred_original_sample = pred_original_sample.clamp(-1.0, 1.0)
        pred_original_sample_coeff = (alpha_prod_t_prev ** (0.5) * current_beta_t) / beta_prod_t
        current_sample_coeff = current_alpha_t ** (0.5) * beta_prod_t_prev / beta_prod_t
        pred_prev_sample = (
            pred_original_sample_coeff * pred_original_sample + current_sample_coeff * sample
        )
        variance = 0
        if t > 0:
            var = (1 - alpha_prod_t_prev) / (1 - alpha_prod_t) * current_beta_t
            var = torch.clamp(var, min=1e-20)
            if variance_type == "fixed_small":
                variance = (var**0.5) * variance_noise
            elif variance_type == "fixed_small_log":
                variance = torch.exp(0.5 * torch.log(var)) * variance_noise
            else:  # fixed_large
                variance = (current_beta_t**0.5) * variance_noise
        return pred_prev_sample + variance, pred_original_sample

    W = torch.from_numpy(arr(150, 2, 2, scale=0.5))

    def model(x, t):  # a fixed linear "denoiser" mixing channels, scaled by the timestep
        return torch.einsum("oc,bchw->bohw", W, x) * (1 + t / T)

    out = {}
    for thresholding, variance_type in (("dynamic", "fixed_small"), ("imagen", "fixed_small_log"),
                                        ("static", "fixed_large")):  # fmt: skip
        sample = torch.from_numpy(arr(151, 3, 2, 4, 4, scale=2.0))
        x0s = []
        for t in reversed(range(T)):
            noise = torch.from_numpy(arr(152 + t, 3, 2, 4, 4))
            sample, x0 = step(model(sample, t), t, sample, noise, thresholding, variance_type)
            x0s.append(x0.abs().amax(dim=(1, 2, 3)))
        out[thresholding] = {"sample": sample, "x0_absmax": torch.stack(x0s)}
    big = torch.from_numpy(arr(160, 3, 2, 4, 4, scale=3.0))
    out["threshold_sample"] = _threshold_sample(big)
    out["imagen"] = imagen_threshold(big, p=0.95)
    out["quantiles"] = torch.quantile(
        big.reshape(3, -1).abs(), torch.tensor([0.5, 0.9, 0.99]), dim=1
    )
    out["threshold_keeps_float64"] = _threshold_sample(big.double()).dtype == torch.float64
    return out


@program(rtol=5e-4, atol=5e-5)  # several sampler chains through a conv net
def k_diffusion_discrete_denoiser_euler_ancestral_dpmpp_2m(torch):
    """k-diffusion's samplers around a discrete epsilon model: ``DiscreteEpsDDPMDenoiser`` with
    ``sigma_to_t`` (``dists.ge(0).cumsum(dim=0).argmax(dim=0)`` and interpolation of log sigmas),
    ``t_to_sigma`` (``floor``/``ceil``/``frac``), ``append_dims`` by ``x[(...,) + (None,) * n]``,
    ``get_sigmas`` and ``get_sigmas_karras`` with ``append_zero``; ``sample_euler``,
    ``sample_euler_ancestral`` (``get_ancestral_step`` with builtin ``min`` of tensors, NumPy
    noise) and ``sample_dpmpp_2m`` (``t_fn = -log sigma``, ``(-h).expm1()``, the last step to
    sigma=0 through infinities)."""
    nn = torch.nn
    T = 50

    def append_dims(x, target_dims):
        dims_to_append = target_dims - x.ndim
        if dims_to_append < 0:
            raise ValueError(
                f"input has {x.ndim} dims but target_dims is {target_dims}, which is less"
            )
        return x[(...,) + (None,) * dims_to_append]

    def append_zero(x):
        return torch.cat([x, x.new_zeros([1])])

    class DiscreteEpsDDPMDenoiser(nn.Module):
        def __init__(self, model, alphas_cumprod, quantize=False):
            super().__init__()
            self.inner_model = model
            self.register_buffer("sigmas", ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5)
            self.register_buffer("log_sigmas", self.sigmas.log())
            self.quantize = quantize
            self.sigma_data = 1.0

        def get_sigmas(self, n=None):
            t_max = len(self.sigmas) - 1
            t = torch.linspace(t_max, 0, n, device=self.sigmas.device)
            return append_zero(self.t_to_sigma(t))

        def sigma_to_t(self, sigma, quantize=None):
            quantize = self.quantize if quantize is None else quantize
            log_sigma = sigma.log()
            dists = log_sigma - self.log_sigmas[:, None]
            if quantize:
                return dists.abs().argmin(dim=0).view(sigma.shape)
            low_idx = (
                dists.ge(0).cumsum(dim=0).argmax(dim=0).clamp(max=self.log_sigmas.shape[0] - 2)
            )
            high_idx = low_idx + 1
            low, high = self.log_sigmas[low_idx], self.log_sigmas[high_idx]
            w = (low - log_sigma) / (low - high)
            w = w.clamp(0, 1)
            t = (1 - w) * low_idx + w * high_idx
            return t.view(sigma.shape)

        def t_to_sigma(self, t):
            t = t.float()
            low_idx, high_idx, w = t.floor().long(), t.ceil().long(), t.frac()
            log_sigma = (1 - w) * self.log_sigmas[low_idx] + w * self.log_sigmas[high_idx]
            return log_sigma.exp()

        def get_scalings(self, sigma):
            c_out = -sigma
            c_in = 1 / (sigma**2 + self.sigma_data**2) ** 0.5
            return c_out, c_in

        def forward(self, input, sigma):
            c_out, c_in = [append_dims(x, input.ndim) for x in self.get_scalings(sigma)]
            eps = self.inner_model(input * c_in, self.sigma_to_t(sigma))
            return input + eps * c_out

    def to_d(x, sigma, denoised):
        return (x - denoised) / append_dims(sigma, x.ndim)

    def get_ancestral_step(sigma_from, sigma_to, eta=1.0):
        if not eta:
            return sigma_to, 0.0
        sigma_up = min(
            sigma_to, eta * (sigma_to**2 * (sigma_from**2 - sigma_to**2) / sigma_from**2) ** 0.5
        )
        sigma_down = (sigma_to**2 - sigma_up**2) ** 0.5
        return sigma_down, sigma_up

    @torch.no_grad()
    def sample_euler(model, x, sigmas):
        s_in = x.new_ones([x.shape[0]])
        for i in range(len(sigmas) - 1):
            denoised = model(x, sigmas[i] * s_in)
            d = to_d(x, sigmas[i], denoised)
            dt = sigmas[i + 1] - sigmas[i]
            x = x + d * dt
        return x

    @torch.no_grad()
    def sample_euler_ancestral(model, x, sigmas, eta=1.0, s_noise=1.0, noise_sampler=None):
        s_in = x.new_ones([x.shape[0]])
        for i in range(len(sigmas) - 1):
            denoised = model(x, sigmas[i] * s_in)
            sigma_down, sigma_up = get_ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
            d = to_d(x, sigmas[i], denoised)
            dt = sigma_down - sigmas[i]
            x = x + d * dt
            if sigmas[i + 1] > 0:
                x = x + noise_sampler(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
        return x

    @torch.no_grad()
    def sample_dpmpp_2m(model, x, sigmas):
        s_in = x.new_ones([x.shape[0]])
        sigma_fn = lambda t: t.neg().exp()  # noqa: E731
        t_fn = lambda sigma: sigma.log().neg()  # noqa: E731
        old_denoised = None
        for i in range(len(sigmas) - 1):
            denoised = model(x, sigmas[i] * s_in)
            t, t_next = t_fn(sigmas[i]), t_fn(sigmas[i + 1])
            h = t_next - t
            if old_denoised is None or sigmas[i + 1] == 0:
                x = (sigma_fn(t_next) / sigma_fn(t)) * x - (-h).expm1() * denoised
            else:
                h_last = t - t_fn(sigmas[i - 1])
                r = h_last / h
                denoised_d = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * old_denoised
                x = (sigma_fn(t_next) / sigma_fn(t)) * x - (-h).expm1() * denoised_d
            old_denoised = denoised
        return x

    alphas_cumprod = torch.cumprod(1 - _linear_beta_schedule(torch, T), 0).float()
    inner = set_weights(torch, _tiny_conv_denoiser(torch, ch=2), seed=170).eval()
    model = DiscreteEpsDDPMDenoiser(inner, alphas_cumprod)
    sigmas = model.get_sigmas(5)  # t = 49, 36.75, 24.5, 12.25, 0
    sigma_min, sigma_max = model.sigmas[0].item(), model.sigmas[-1].item()
    ramp = torch.linspace(0, 1, 4)
    min_inv_rho, max_inv_rho = sigma_min ** (1 / 7.0), sigma_max ** (1 / 7.0)
    karras = append_zero((max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** 7.0)
    x_T = torch.from_numpy(arr(171, 2, 2, 4, 4))
    noise = iter([torch.from_numpy(arr(172 + i, 2, 2, 4, 4)) for i in range(8)])
    probe = torch.tensor([sigma_min, 0.5, 3.0, sigma_max])
    return {
        "sigmas": sigmas,
        "karras": karras,
        "t_of_sigma": model.sigma_to_t(probe),
        "t_quantized": model.sigma_to_t(probe, quantize=True),
        "roundtrip": model.t_to_sigma(model.sigma_to_t(sigmas[:-1])),
        "euler": sample_euler(model, x_T * sigmas[0], sigmas),
        "euler_ancestral": sample_euler_ancestral(
            model, x_T * sigmas[0], sigmas, noise_sampler=lambda s, sn: next(noise)
        ),
        "dpmpp_2m": sample_dpmpp_2m(model, x_T * sigmas[0], sigmas),
        "dpmpp_2m_karras": sample_dpmpp_2m(model, x_T * karras[0], karras),
        "ancestral_step": [float(v) for v in get_ancestral_step(sigmas[1], sigmas[2])],
    }


@program(rtol=5e-4, atol=5e-5)  # attention softmax and LayerNorm in a transformer block
def latent_diffusion_spatial_transformer_cross_attention(torch):
    """A Stable-Diffusion-style spatial transformer on a latent: GroupNorm and a 1x1 ``proj_in``,
    ``permute(0, 2, 3, 1).reshape(b, h * w, c)``, a ``BasicTransformerBlock`` with self-attention,
    cross-attention to a text context with a padding mask (``(1 - mask) * -10000.0`` and
    ``repeat_interleave`` over heads) and a GEGLU feed-forward; the attention computed as
    diffusers' ``AttnProcessor`` does (``head_to_batch_dim`` and ``torch.baddbmm`` on
    ``torch.empty`` with ``beta=0``) and as ``AttnProcessor2_0`` does (``F.scaled_dot_product_attention``);
    DiT's adaLN ``modulate`` on a timestep embedding; a loss, gradients and an AdamW step."""
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, query_dim, cross_attention_dim=None, heads=2, dim_head=4, sdpa=False):
            super().__init__()
            inner_dim = dim_head * heads
            self.scale = dim_head**-0.5
            self.heads = heads
            self.sdpa = sdpa
            self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
            self.to_k = nn.Linear(cross_attention_dim or query_dim, inner_dim, bias=False)
            self.to_v = nn.Linear(cross_attention_dim or query_dim, inner_dim, bias=False)
            self.to_out = nn.ModuleList([nn.Linear(inner_dim, query_dim), nn.Dropout(0.0)])

        def head_to_batch_dim(self, tensor):
            batch_size, seq_len, dim = tensor.shape
            tensor = tensor.reshape(batch_size, seq_len, self.heads, dim // self.heads)
            return tensor.permute(0, 2, 1, 3).reshape(
                batch_size * self.heads, seq_len, dim // self.heads
            )

        def batch_to_head_dim(self, tensor):
            batch_size, seq_len, dim = tensor.shape
            tensor = tensor.reshape(batch_size // self.heads, self.heads, seq_len, dim)
            return tensor.permute(0, 2, 1, 3).reshape(
                batch_size // self.heads, seq_len, dim * self.heads
            )

        def get_attention_scores(self, query, key, attention_mask=None):
            if attention_mask is None:
                baddbmm_input = torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype,
                                            device=query.device)  # fmt: skip
                beta = 0
            else:
                baddbmm_input = attention_mask
                beta = 1
            attention_scores = torch.baddbmm(
                baddbmm_input, query, key.transpose(-1, -2), beta=beta, alpha=self.scale
            )
            return attention_scores.softmax(dim=-1)

        def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
            batch_size = hidden_states.shape[0]
            query = self.to_q(hidden_states)
            context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
            key, value = self.to_k(context), self.to_v(context)
            if self.sdpa:
                head_dim = key.shape[-1] // self.heads
                query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
                key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
                value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
                if attention_mask is not None:
                    attention_mask = attention_mask.view(
                        batch_size, self.heads, -1, attention_mask.shape[-1]
                    )
                hidden_states = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                               dropout_p=0.0, is_causal=False)  # fmt: skip
                hidden_states = hidden_states.transpose(1, 2).reshape(
                    batch_size, -1, self.heads * head_dim
                )
            else:
                query, key, value = map(self.head_to_batch_dim, (query, key, value))
                attention_probs = self.get_attention_scores(query, key, attention_mask)
                hidden_states = self.batch_to_head_dim(torch.bmm(attention_probs, value))
            hidden_states = self.to_out[0](hidden_states)
            return self.to_out[1](hidden_states)

    class GEGLU(nn.Module):
        def __init__(self, dim_in, dim_out):
            super().__init__()
            self.proj = nn.Linear(dim_in, dim_out * 2)

        def forward(self, hidden_states):
            hidden_states, gate = self.proj(hidden_states).chunk(2, dim=-1)
            return hidden_states * F.gelu(gate)

    class BasicTransformerBlock(nn.Module):
        def __init__(self, dim, cross_dim, sdpa):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn1 = Attention(dim, sdpa=sdpa)
            self.norm2 = nn.LayerNorm(dim)
            self.attn2 = Attention(dim, cross_attention_dim=cross_dim, sdpa=sdpa)
            self.norm3 = nn.LayerNorm(dim)
            self.ff = nn.Sequential(GEGLU(dim, dim * 4), nn.Dropout(0.0), nn.Linear(dim * 4, dim))

        def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask):
            hidden_states = self.attn1(self.norm1(hidden_states)) + hidden_states
            hidden_states = self.attn2(self.norm2(hidden_states), encoder_hidden_states,
                                       encoder_attention_mask) + hidden_states  # fmt: skip
            return self.ff(self.norm3(hidden_states)) + hidden_states

    class Transformer2DModel(nn.Module):
        def __init__(self, channels=8, cross_dim=6, sdpa=False):
            super().__init__()
            self.norm = nn.GroupNorm(num_groups=4, num_channels=channels, eps=1e-6, affine=True)
            self.proj_in = nn.Conv2d(channels, channels, kernel_size=1)
            self.transformer_blocks = nn.ModuleList(
                [BasicTransformerBlock(channels, cross_dim, sdpa)]
            )
            self.proj_out = nn.Conv2d(channels, channels, kernel_size=1)
            self.adaLN = nn.Sequential(nn.SiLU(), nn.Linear(channels, 2 * channels))
            self.norm_final = nn.LayerNorm(channels, elementwise_affine=False, eps=1e-6)

        def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask, temb):
            batch, _, height, width = hidden_states.shape
            residual = hidden_states
            hidden_states = self.proj_in(self.norm(hidden_states))
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(
                batch, height * width, inner_dim
            )
            # diffusers' prepare_attention_mask: a bias, one row per head
            mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            mask = mask.unsqueeze(1).repeat_interleave(2, dim=0)
            for block in self.transformer_blocks:
                hidden_states = block(hidden_states, encoder_hidden_states, mask)
            shift, scale = self.adaLN(temb).chunk(2, dim=1)
            hidden_states = self.norm_final(hidden_states) * (
                1 + scale.unsqueeze(1)
            ) + shift.unsqueeze(1)
            hidden_states = (
                hidden_states.reshape(batch, height, width, inner_dim)
                .permute(0, 3, 1, 2)
                .contiguous()
            )
            return self.proj_out(hidden_states) + residual

    latents = torch.from_numpy(arr(180, 2, 8, 3, 3)) * 0.18215
    context = torch.from_numpy(arr(181, 2, 5, 6))
    text_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    temb = _get_timestep_embedding(
        torch, torch.tensor([10, 900]), 8, flip_sin_to_cos=True, downscale_freq_shift=0
    )
    target = torch.from_numpy(arr(182, 2, 8, 3, 3))
    out = {}
    for sdpa in (False, True):
        model = set_weights(torch, Transformer2DModel(sdpa=sdpa), seed=183)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for _ in range(2):
            pred = model(latents, context, text_mask, temb)
            loss = F.mse_loss(pred, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        tag = "sdpa" if sdpa else "baddbmm"
        out[tag] = {"pred": pred, "losses": losses, "grads": grads(model)}
    attn = set_weights(torch, Attention(8), seed=184)
    x = torch.from_numpy(arr(185, 2, 4, 8))
    out["self_attn_no_mask"] = attn(x)
    out["head_to_batch"] = attn.head_to_batch_dim(x)
    out["roundtrip"] = torch.equal(attn.batch_to_head_dim(attn.head_to_batch_dim(x)), x)
    return out
