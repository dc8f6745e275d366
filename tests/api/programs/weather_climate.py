"""Weather and climate deep learning as FourCastNet, GraphCast, Pangu and ClimaX reference code
writes it: latitude-weighted MSE/RMSE with ``cos(lat)`` weights and the anomaly correlation
coefficient (WeatherBench), circular padding in longitude and flip-and-roll padding across the
poles, patch embeddings on lat-lon grids and their unpatchify, an AFNO Fourier token mixer
(``rfft2`` / ``irfft2``, block-diagonal complex weights, soft-shrink), ClimaX's variable and
lead-time embeddings with variable aggregation by cross-attention, ensemble CRPS (fair and
sorted forms, spread-skill, rank histograms), multi-step autoregressive rollouts trained with a
loss over steps, per-variable normalisation buffers with residual prediction, grid-to-mesh
message passing, and zonal power spectra. Small grids (lat x lon of 8 x 16) and a few steps."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights

N_LAT, N_LON = 8, 16


def _lat_weights(torch, n_lat: int = N_LAT):
    """Cell-centred latitudes from north to south and WeatherBench's weights (mean 1)."""
    lat = torch.linspace(90 - 90 / n_lat, -90 + 90 / n_lat, n_lat)
    w = torch.cos(torch.deg2rad(lat))
    return lat, w / w.mean()


def _field(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    """A smooth-ish field: noise plus a latitude gradient, as temperature-like inputs."""
    x = arr(seed, *shape, scale=scale)
    lat = np.linspace(1.0, -1.0, shape[-2], dtype=np.float32)
    return (x + 2.0 * np.cos(lat * 1.5)[:, None]).astype(np.float32)


def _weighted_rmse(torch, pred, target, w_lat):
    """WeatherBench RMSE: latitude-weighted mean over the grid, sqrt, then mean over time."""
    err = (pred - target) ** 2 * w_lat.view(1, 1, -1, 1)
    return torch.sqrt(err.mean(dim=(-2, -1))).mean(dim=0)


@program
def wx_lat_weighted_rmse_and_acc_metrics(torch):
    """WeatherBench-style scores: latitude weights from ``cos(deg2rad(lat))`` normalised to mean
    one, weighted MSE and RMSE per variable, the anomaly correlation coefficient against a
    climatology (weighted anomalies, centred by their weighted mean), bias, and a skill score
    against persistence; scores formatted the way evaluation scripts print them."""
    lat, w = _lat_weights(torch)
    variables = ["z500", "t850", "u10"]
    target = torch.tensor(_field(1, 4, 3, N_LAT, N_LON))
    pred = target + torch.tensor(arr(2, 4, 3, N_LAT, N_LON, scale=0.4))
    persistence = torch.roll(target, shifts=1, dims=0)
    clim = torch.tensor(_field(3, 1, 3, N_LAT, N_LON, scale=0.1))
    w4 = w[None, None, :, None]
    mse = ((pred - target) ** 2 * w4).mean(dim=(0, 2, 3))
    rmse = _weighted_rmse(torch, pred, target, w)
    rmse_pers = _weighted_rmse(torch, persistence, target, w)
    pa, ta = pred - clim, target - clim
    pa = pa - (pa * w4).mean(dim=(-2, -1), keepdim=True)
    ta = ta - (ta * w4).mean(dim=(-2, -1), keepdim=True)
    acc = (w4 * pa * ta).sum(dim=(-2, -1)) / torch.sqrt(
        (w4 * pa**2).sum(dim=(-2, -1)) * (w4 * ta**2).sum(dim=(-2, -1))
    )
    bias = ((pred - target) * w4).mean(dim=(0, 2, 3))
    skill = 1 - rmse / rmse_pers
    lines = [
        f"{v}: rmse={r:.4f} acc={a:.4f} skill={s:+.3f}"
        for v, r, a, s in zip(variables, rmse.tolist(), acc.mean(0).tolist(), skill.tolist())
    ]
    return {"lat": lat, "weights": w, "mse": mse, "rmse": rmse, "rmse_persistence": rmse_pers,
            "acc": acc, "acc_mean": acc.mean(0), "bias": bias, "skill": skill,
            "report": "\n".join(lines), "best": variables[int(torch.argmax(acc.mean(0)))]}  # fmt: skip


@program
def wx_circular_longitude_and_polar_padding_conv(torch):
    """Padding on the sphere as Pangu/FourCastNet code writes it: ``F.pad(..., mode="circular")``
    in longitude, and across each pole the rows next to it flipped and rolled by half the
    longitudes (the other side of the globe); compared with ``padding_mode="circular"`` convs,
    reflect and replicate padding, and gradients through the padded conv."""
    nn, F = torch.nn, torch.nn.functional
    x = torch.tensor(_field(4, 2, 3, N_LAT, N_LON)).requires_grad_(True)

    def pad_sphere(t, p):
        t = F.pad(t, (p, p, 0, 0), mode="circular")
        north = torch.roll(torch.flip(t[..., :p, :], dims=[-2]), t.shape[-1] // 2, dims=-1)
        south = torch.roll(torch.flip(t[..., -p:, :], dims=[-2]), t.shape[-1] // 2, dims=-1)
        return torch.cat([north, t, south], dim=-2)

    conv = set_weights(torch, nn.Conv2d(3, 4, 3), seed=5)
    conv_circ = set_weights(torch, nn.Conv2d(3, 4, 3, padding=(0, 1), padding_mode="circular"), 5)
    padded = pad_sphere(x, 1)
    y = conv(padded)
    y_circ = conv_circ(F.pad(x, (0, 0, 1, 1), mode="replicate"))
    reflect = F.pad(x, (2, 2, 1, 1), mode="reflect")
    loss = (y**2).mean() + 0.5 * (y_circ**2).mean()
    loss.backward()
    manual = torch.cat([x[..., -1:], x, x[..., :1]], dim=-1)
    return {"padded_shape": list(padded.shape), "padded_corner": padded[0, 0, :3, :4],
            "circ_matches_manual": torch.allclose(F.pad(x, (1, 1, 0, 0), mode="circular"), manual),
            "y": y, "y_circ": y_circ, "reflect": reflect[1, 2], "loss": loss, "x_grad": x.grad,
            "w_grad": conv.weight.grad, "w_circ_grad": conv_circ.weight.grad}  # fmt: skip


@program
def wx_patch_embed_latlon_and_unpatchify(torch):
    """A ViT backbone on a lat-lon grid (FourCastNet/ClimaX): ``Conv2d`` patch embedding with
    stride equal to the patch size, ``flatten(2).transpose(1, 2)``, a learned positional
    embedding, a pre-norm transformer layer, a linear head to ``p*p*C`` and the unpatchify
    ``einsum("nhwpqc->nchpwq")``; a latitude-weighted loss, backward and one AdamW step."""
    nn = torch.nn
    C, p, D = 2, 4, 16
    h, w_ = N_LAT // p, N_LON // p

    class LatLonViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(C, D, kernel_size=p, stride=p)
            self.pos_embed = nn.Parameter(torch.zeros(1, h * w_, D))
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
            self.head = nn.Linear(D, p * p * C)

        def unpatchify(self, x):
            x = x.reshape(x.shape[0], h, w_, p, p, C)
            x = torch.einsum("nhwpqc->nchpwq", x)
            return x.reshape(x.shape[0], C, h * p, w_ * p)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
            y = self.norm1(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            x = x + self.mlp(self.norm2(x))
            return self.unpatchify(self.head(x))

    model = set_weights(torch, LatLonViT(), seed=6)
    _, w = _lat_weights(torch)
    x = torch.tensor(_field(7, 3, C, N_LAT, N_LON))
    target = torch.tensor(_field(8, 3, C, N_LAT, N_LON))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    out = model(x)
    loss = ((out - target) ** 2 * w.view(1, 1, -1, 1)).mean()
    opt.zero_grad()
    loss.backward()
    g = grads(model)
    opt.step()
    with torch.no_grad():
        after = ((model(x) - target) ** 2 * w.view(1, 1, -1, 1)).mean()
    tokens = model.patch_embed(x).flatten(2).transpose(1, 2)
    return {"out": out, "loss": loss, "after": after, "tokens": tokens,
            "grad_patch": g["patch_embed.weight"], "grad_pos": g["pos_embed"],
            "grad_head": g["head.weight"], "head_after": model.head.weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # FFT sums in float32 in another order than pocketfft's
def wx_afno_fourier_token_mixing_block(torch):
    """FourCastNet's AFNO filter: ``rfft2(norm="ortho")`` over the token grid, a block-diagonal
    two-layer complex MLP written on real and imaginary parts with ``einsum("...bi,bio->...bo")``,
    ReLU, ``F.softshrink`` for sparsity, only the lowest modes kept, ``torch.stack`` back to
    complex with ``view_as_complex``, ``irfft2`` with ``s=(H, W)``, the residual; a few training
    steps of the block with Adam."""
    nn, F = torch.nn, torch.nn.functional
    D, nb, H, W = 8, 2, 4, 8
    bs = D // nb
    keep = 3

    class AFNO2D(nn.Module):
        def __init__(self):
            super().__init__()
            scale = 0.2
            self.w1 = nn.Parameter(scale * torch.tensor(arr(10, 2, nb, bs, bs)))
            self.b1 = nn.Parameter(scale * torch.tensor(arr(11, 2, nb, bs)))
            self.w2 = nn.Parameter(scale * torch.tensor(arr(12, 2, nb, bs, bs)))
            self.b2 = nn.Parameter(scale * torch.tensor(arr(13, 2, nb, bs)))

        def forward(self, x):
            bias = x
            B = x.shape[0]
            x = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
            x = x.reshape(B, H, W // 2 + 1, nb, bs)
            o1r = torch.zeros_like(x.real)
            o1i = torch.zeros_like(x.imag)
            o1r[:, :, :keep] = F.relu(
                torch.einsum("...bi,bio->...bo", x[:, :, :keep].real, self.w1[0])
                - torch.einsum("...bi,bio->...bo", x[:, :, :keep].imag, self.w1[1])
                + self.b1[0]
            )
            o1i[:, :, :keep] = F.relu(
                torch.einsum("...bi,bio->...bo", x[:, :, :keep].imag, self.w1[0])
                + torch.einsum("...bi,bio->...bo", x[:, :, :keep].real, self.w1[1])
                + self.b1[1]
            )
            o2r = torch.einsum("...bi,bio->...bo", o1r, self.w2[0]) - torch.einsum(
                "...bi,bio->...bo", o1i, self.w2[1]
            )
            o2i = torch.einsum("...bi,bio->...bo", o1i, self.w2[0]) + torch.einsum(
                "...bi,bio->...bo", o1r, self.w2[1]
            )
            o2r = o2r + self.b2[0]
            o2i = o2i + self.b2[1]
            x = torch.stack([o2r, o2i], dim=-1)
            x = F.softshrink(x, lambd=0.01)
            x = torch.view_as_complex(x).reshape(B, H, W // 2 + 1, D)
            x = torch.fft.irfft2(x, s=(H, W), dim=(1, 2), norm="ortho")
            return x + bias

    block = AFNO2D()
    x = torch.tensor(arr(14, 2, H, W, D))
    target = torch.tensor(arr(15, 2, H, W, D, scale=0.5)) + x
    spec = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
    opt = torch.optim.Adam(block.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(block(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = block(x)
    roundtrip = torch.fft.irfft2(spec, s=(H, W), dim=(1, 2), norm="ortho")
    return {"spec_abs": spec.abs(), "spec_shape": list(spec.shape), "roundtrip_err":
            (roundtrip - x).abs().max(), "losses": losses, "out": out, "w1": block.w1,
            "b2_grad": block.b2.grad, "w2_grad": block.w2.grad}  # fmt: skip


@program
def wx_climax_variable_and_lead_time_embeddings(torch):
    """ClimaX-lite: each variable tokenised by its own patch embedding (a ``ModuleList``),
    a learned variable embedding added per variable, variables aggregated per patch by
    cross-attention with a learned query, a lead-time embedding ``nn.Linear(1, D)`` of hours /
    100 added to the tokens, a prediction head; two AdamW steps on a lat-weighted loss over
    forecasts at several lead times."""
    nn = torch.nn
    V, p, D = 3, 4, 12
    L = (N_LAT // p) * (N_LON // p)

    class ClimaXLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embeds = nn.ModuleList(
                [nn.Conv2d(1, D, kernel_size=p, stride=p) for _ in range(V)]
            )
            self.var_embed = nn.Parameter(torch.zeros(1, V, D))
            self.var_query = nn.Parameter(torch.zeros(1, 1, D))
            self.var_agg = nn.MultiheadAttention(D, 2, batch_first=True)
            self.lead_time_embed = nn.Linear(1, D)
            self.pos_embed = nn.Parameter(torch.zeros(1, L, D))
            self.head = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, V * p * p))

        def aggregate_variables(self, x):
            b, _, n_tok, _ = x.shape
            x = torch.einsum("bvld->blvd", x).flatten(0, 1)
            q = self.var_query.repeat_interleave(x.shape[0], dim=0)
            x, _ = self.var_agg(q, x, x)
            return x.squeeze(1).unflatten(0, (b, n_tok))

        def forward(self, x, lead_times):
            embeds = [self.token_embeds[i](x[:, i : i + 1]).flatten(2).transpose(1, 2)
                      for i in range(V)]  # fmt: skip
            x = torch.stack(embeds, dim=1) + self.var_embed.unsqueeze(2)
            x = self.aggregate_variables(x) + self.pos_embed
            x = x + self.lead_time_embed(lead_times.unsqueeze(-1)).unsqueeze(1)
            x = self.head(x)
            b = x.shape[0]
            x = x.reshape(b, N_LAT // p, N_LON // p, p, p, V)
            return torch.einsum("nhwpqc->nchpwq", x).reshape(b, V, N_LAT, N_LON)

    model = set_weights(torch, ClimaXLite(), seed=20)
    _, w = _lat_weights(torch)
    x = torch.tensor(_field(21, 4, V, N_LAT, N_LON))
    lead_hours = torch.tensor([6.0, 12.0, 24.0, 72.0])
    y = torch.tensor(_field(22, 4, V, N_LAT, N_LON))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(2):
        pred = model(x, lead_hours / 100.0)
        loss = ((pred - y) ** 2 * w[:, None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    g = grads(model)
    lt = model.lead_time_embed(torch.tensor([[0.06], [0.72]]))
    return {"losses": losses, "pred": pred.detach(), "lead_embed": lt,
            "grad_var_embed": g["var_embed"], "grad_query": g["var_query"],
            "grad_lead": g["lead_time_embed.weight"], "grad_tok0": g["token_embeds.0.weight"],
            "n_params": sum(q.numel() for q in model.parameters())}  # fmt: skip


@program
def wx_ensemble_crps_spread_skill_rank_histogram(torch):
    """Probabilistic scores of an ensemble forecast (members on dim 0): the CRPS from pairwise
    absolute differences (``|x_i - x_j|`` by broadcasting) and its fair variant, the same CRPS
    from sorted members (``torch.sort`` with the ``(2i - m - 1)`` weights), latitude-weighted
    spread-skill ratio, a rank histogram via ``bincount`` of member counts below the truth, and
    the CRPS used as a training loss for a small ensemble-generating layer."""
    lat_w = _lat_weights(torch)[1]
    M = 5
    ens = torch.tensor(_field(30, M, 2, N_LAT, N_LON)) + torch.tensor(arr(31, M, 1, 1, 1))
    obs = torch.tensor(_field(32, 2, N_LAT, N_LON))

    def crps_pairwise(ens, obs, fair=False):
        m = ens.shape[0]
        skill = (ens - obs.unsqueeze(0)).abs().mean(0)
        spread = (ens.unsqueeze(0) - ens.unsqueeze(1)).abs().sum(dim=(0, 1))
        denom = 2 * m * (m - 1) if fair else 2 * m * m
        return skill - spread / denom

    def crps_sorted(ens, obs):
        m = ens.shape[0]
        x, _ = torch.sort(ens, dim=0)
        i = torch.arange(1, m + 1, dtype=ens.dtype).view(-1, *([1] * (ens.dim() - 1)))
        spread = ((2 * i - m - 1) * x).sum(0) * 2 / (m * m)
        return (ens - obs).abs().mean(0) - spread / 2

    c_pair, c_fair, c_sort = (
        crps_pairwise(ens, obs),
        crps_pairwise(ens, obs, True),
        crps_sorted(ens, obs),
    )
    wmean = lambda t: (t * lat_w[:, None]).mean(dim=(-2, -1))  # noqa: E731
    spread = torch.sqrt(wmean(ens.var(dim=0, unbiased=True)))
    rmse = torch.sqrt(wmean((ens.mean(0) - obs) ** 2))
    ssr = spread / rmse * math.sqrt((M + 1) / M)
    ranks = (ens < obs.unsqueeze(0)).sum(0)
    hist = torch.bincount(ranks.flatten(), minlength=M + 1)
    sorted_vals, order = torch.sort(ens[:, 0, 0, :4], dim=0, descending=True)
    # CRPS as a loss: a layer perturbs the mean with fixed "noise" members
    noise = torch.tensor(arr(33, M, 1, 2, N_LAT, N_LON))
    mean_fc = torch.tensor(_field(34, 1, 2, N_LAT, N_LON))
    log_sigma = torch.zeros(2, 1, 1, requires_grad=True)
    shift = torch.zeros(2, 1, 1, requires_grad=True)
    opt = torch.optim.SGD([log_sigma, shift], lr=0.5, momentum=0.9)
    losses = []
    for _ in range(4):
        members = mean_fc + shift + torch.exp(log_sigma) * noise
        loss = wmean(crps_pairwise(members[:, 0], obs, fair=True)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"crps": wmean(c_pair), "crps_fair": wmean(c_fair), "crps_sorted": wmean(c_sort),
            "sorted_matches": torch.allclose(c_pair, c_sort, atol=1e-5), "spread": spread,
            "rmse": rmse, "ssr": ssr, "hist": hist, "sorted_vals": sorted_vals, "order": order,
            "losses": losses, "log_sigma": log_sigma, "shift": shift}  # fmt: skip


@program
def wx_autoregressive_rollout_multistep_loss(torch):
    """Multi-step fine-tuning as in FourCastNet/GraphCast: a small residual conv net with circular
    longitude padding steps the state forward ``x_{t+1} = x_t + f(x_t)``; the rollout feeds its
    own predictions back for 3 steps, the loss is the latitude-weighted MSE averaged over steps
    (later steps weighted), gradients clipped by ``clip_grad_norm_``, Adam with a cosine
    schedule; then a no-grad forecast of 4 steps collected with ``torch.stack``."""
    nn, F = torch.nn, torch.nn.functional
    C = 2

    class Stepper(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(C, 8, 3, padding=(1, 0))
            self.conv2 = nn.Conv2d(8, C, 3, padding=(1, 0))

        def forward(self, x):
            h = F.silu(self.conv1(F.pad(x, (1, 1, 0, 0), mode="circular")))
            return x + 0.1 * self.conv2(F.pad(h, (1, 1, 0, 0), mode="circular"))

    model = set_weights(torch, Stepper(), seed=40)
    _, w = _lat_weights(torch)
    traj = torch.tensor(_field(41, 5, 2, C, N_LAT, N_LON, scale=0.3)).cumsum(0) * 0.5
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
    step_w = torch.tensor([1.0, 1.5, 2.0])
    losses, per_step, norms, lrs = [], [], [], []
    for _ in range(3):
        x = traj[0]
        step_losses = []
        for k in range(3):
            x = model(x)
            step_losses.append(((x - traj[k + 1]) ** 2 * w.view(1, 1, -1, 1)).mean())
        step_losses = torch.stack(step_losses)
        loss = (step_w * step_losses).sum() / step_w.sum()
        opt.zero_grad()
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5))
        opt.step()
        sched.step()
        losses.append(loss.item())
        per_step.append(step_losses.detach())
        lrs.append(sched.get_last_lr()[0])
    with torch.no_grad():
        x, frames = traj[0], []
        for _ in range(4):
            x = model(x)
            frames.append(x)
        forecast = torch.stack(frames, dim=1)
    rmse = torch.sqrt(
        ((forecast - traj[1:].transpose(0, 1)) ** 2 * w.view(-1, 1)).mean(dim=(2, 3, 4))
    )
    return {"losses": losses, "per_step": per_step, "norms": norms, "lrs": lrs,
            "forecast": forecast, "rmse_by_lead": rmse, "params": params(model)}  # fmt: skip


@program
def wx_per_variable_normalisation_residual_model(torch):
    """Normalisation as weather models do it: per-variable (and per pressure level) means and
    standard deviations computed over time and space with ``std_mean`` and stored with
    ``register_buffer``; inputs normalised, the model predicts the normalised tendency (residual
    stds for the difference), outputs denormalised; buffers round-trip through ``state_dict``;
    a few SGD steps with a per-variable loss weight."""
    nn = torch.nn
    levels, surface = ["z500", "z850", "t500", "t850"], ["t2m", "msl"]
    V = len(levels) + len(surface)
    scales = np.array([50.0, 20.0, 5.0, 8.0, 6.0, 100.0], dtype=np.float32)
    offsets = np.array([5500.0, 1400.0, 250.0, 270.0, 285.0, 1000.0], dtype=np.float32)
    raw = arr(50, 6, V, N_LAT, N_LON) * scales[:, None, None] + offsets[:, None, None]
    data = torch.tensor(raw.astype(np.float32))
    data[1:] = data[:-1] + 0.1 * (data[1:] - data[:-1])

    class Normalised(nn.Module):
        def __init__(self, mean, std, diff_std):
            super().__init__()
            self.register_buffer("mean", mean.view(1, -1, 1, 1))
            self.register_buffer("std", std.view(1, -1, 1, 1))
            self.register_buffer("diff_std", diff_std.view(1, -1, 1, 1))
            self.net = nn.Sequential(nn.Conv2d(V, 8, 1), nn.Tanh(), nn.Conv2d(8, V, 1))

        def forward(self, x):
            z = (x - self.mean) / self.std
            return x + self.net(z) * self.diff_std

    std, mean = torch.std_mean(data, dim=(0, 2, 3))
    diff_std = (data[1:] - data[:-1]).std(dim=(0, 2, 3))
    model = set_weights(torch, Normalised(mean, std, diff_std), seed=51)
    var_w = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.5, 0.5])
    opt = torch.optim.SGD(model.net.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        pred = model(data[:-1])
        err = ((pred - data[1:]) / model.diff_std) ** 2
        per_var = err.mean(dim=(0, 2, 3))
        loss = (per_var * var_w).sum() / var_w.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    sd = model.state_dict()
    fresh = Normalised(torch.zeros(V), torch.ones(V), torch.ones(V))
    fresh.load_state_dict(sd)
    with torch.no_grad():
        same = torch.equal(fresh(data[:1]), model(data[:1]))
    return {"mean": mean, "std": std, "diff_std": diff_std, "losses": losses,
            "per_var": per_var.detach(), "buffers": sorted(k for k in sd if "net" not in k),
            "same": same, "names": ",".join(levels + surface),
            "z_stats": ((data - model.mean) / model.std).mean(dim=(0, 2, 3))}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # scatter-add sums in float32 in an order that may differ
def wx_graphcast_grid_to_mesh_message_passing(torch):
    """GraphCast-lite encoder/processor/decoder: lat-lon grid nodes on the unit sphere, mesh nodes
    a coarse subset, grid-to-mesh edges to the nearest mesh nodes found by ``cdist`` + ``topk``,
    edge features (relative positions and great-circle distance from ``acos`` of the dot
    product), MLP messages aggregated with ``index_add_`` / ``scatter_reduce`` (mean), a mesh
    processor step, decode back by the transposed edges; two Adam steps."""
    nn = torch.nn
    H = 16
    lat = torch.deg2rad(torch.linspace(78.75, -78.75, N_LAT))
    lon = torch.deg2rad(torch.arange(N_LON) * (360.0 / N_LON))
    la, lo = torch.meshgrid(lat, lon, indexing="ij")
    grid_xyz = torch.stack([torch.cos(la) * torch.cos(lo), torch.cos(la) * torch.sin(lo),
                            torch.sin(la)], dim=-1).reshape(-1, 3)  # fmt: skip
    mesh_idx = torch.arange(0, N_LAT * N_LON, 9)
    # mesh nodes jittered off the grid (so no grid node is equidistant from two of them)
    mesh_xyz = grid_xyz[mesh_idx] + torch.tensor(arr(63, mesh_idx.numel(), 3, scale=0.05))
    mesh_xyz = mesh_xyz / mesh_xyz.norm(dim=-1, keepdim=True)
    d = torch.cdist(grid_xyz, mesh_xyz)
    _, nearest = d.topk(2, dim=1, largest=False)
    src = torch.arange(grid_xyz.shape[0]).repeat_interleave(2)
    dst = nearest.flatten()
    cosang = (grid_xyz[src] * mesh_xyz[dst]).sum(-1).clamp(-1.0, 1.0)
    edge_feat = torch.cat([mesh_xyz[dst] - grid_xyz[src], torch.acos(cosang)[:, None]], dim=-1)

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, H), nn.SiLU(), nn.Linear(H, o), nn.LayerNorm(o))

    class GraphCastLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.grid_embed, self.mesh_embed = mlp(2 + 3, H), mlp(3, H)
            self.g2m_edge, self.m2g_edge = mlp(H + H + 4, H), mlp(H + H + 4, H)
            self.mesh_node, self.grid_node = mlp(2 * H, H), mlp(2 * H, H)
            self.out = nn.Linear(H, 2)

        def forward(self, x):
            g = self.grid_embed(torch.cat([x, grid_xyz], dim=-1))
            m = self.mesh_embed(mesh_xyz)
            e = self.g2m_edge(torch.cat([g[src], m[dst], edge_feat], dim=-1))
            agg = torch.zeros_like(m).index_add_(0, dst, e)
            m = m + self.mesh_node(torch.cat([m, agg], dim=-1))
            e2 = self.m2g_edge(torch.cat([g[src], m[dst], edge_feat], dim=-1))
            back = torch.zeros_like(g).scatter_reduce(
                0, src[:, None].expand(-1, H), e2, reduce="mean", include_self=False
            )
            g = g + self.grid_node(torch.cat([g, back], dim=-1))
            return x + self.out(g)

    model = set_weights(torch, GraphCastLite(), seed=60)
    x = torch.tensor(_field(61, N_LAT, N_LON, 2).reshape(N_LAT * N_LON, 2) * 0.5)
    y = x + torch.tensor(arr(62, N_LAT * N_LON, 2, scale=0.1))
    area = torch.cos(la).reshape(-1, 1)
    area = area / area.mean()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        loss = ((model(x) - y) ** 2 * area).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    deg = torch.bincount(dst, minlength=mesh_idx.numel())
    return {"n_edges": int(src.numel()), "nearest": nearest[:10], "deg": deg,
            "edge_feat": edge_feat[:6], "losses": losses,
            "grad_out": model.out.weight.grad, "mesh_embed_w": model.mesh_embed[0].weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # FFT sums in float32 in another order than pocketfft's
def wx_zonal_spectra_and_finite_difference_diagnostics(torch):
    """Diagnostics of forecasts: the zonal power spectrum per latitude from ``rfft`` along
    longitude (``abs() ** 2``, doubled for the interior wavenumbers), averaged with latitude
    weights, wave phases from ``angle()`` of ``fft`` / ``fft2`` of anomalies, the ratio of forecast to truth spectra (blurring at high wavenumbers) and a
    spectral loss on log spectra; centred finite differences in longitude via ``torch.roll``
    (periodic) and ``torch.gradient`` in latitude for a geostrophic-wind-like diagnostic and
    vorticity, and a precipitation-style ``log1p`` transform with a quantile (pinball) loss."""
    lat, w = _lat_weights(torch)
    truth = torch.tensor(_field(70, 2, N_LAT, N_LON))
    pred = torch.nn.functional.avg_pool2d(
        torch.nn.functional.pad(truth[:, None], (1, 1, 0, 0), mode="circular"),
        kernel_size=(1, 3), stride=1,
    )[:, 0].requires_grad_(True)  # fmt: skip

    def zonal_spectrum(f):
        coeff = torch.fft.rfft(f, dim=-1, norm="forward")
        power = coeff.abs() ** 2
        power[..., 1:-1] *= 2
        return (power * w[:, None]).mean(dim=-2)

    ps_t, ps_p = zonal_spectrum(truth), zonal_spectrum(pred)
    # wave phases: of zonal harmonics per latitude, and of the 2-d anomaly spectrum
    anom = truth - truth.mean(dim=(-2, -1), keepdim=True) - 0.5
    phase_zonal = torch.fft.fft(anom, dim=-1).angle()
    phase_2d = torch.fft.fft2(anom).angle()
    ratio = ps_p / ps_t
    spec_loss = ((torch.log(ps_p + 1e-6) - torch.log(ps_t + 1e-6)) ** 2).mean()
    spec_loss.backward()
    dlon = 2 * math.pi / N_LON
    dlat = math.radians(180.0 / N_LAT)
    coslat = torch.cos(torch.deg2rad(lat))[:, None]
    z = truth[0]
    dz_dx = (torch.roll(z, -1, dims=-1) - torch.roll(z, 1, dims=-1)) / (2 * dlon * coslat)
    (dz_dy,) = torch.gradient(z, spacing=(dlat,), dim=0)
    u, v = -dz_dy, dz_dx
    dv_dx = (torch.roll(v, -1, -1) - torch.roll(v, 1, -1)) / (2 * dlon * coslat)
    du_dy = torch.gradient(u * coslat, spacing=dlat, dim=0)[0] / coslat
    vort = dv_dx - du_dy
    precip = torch.relu(truth[1] - 1.5) * 3
    tp = torch.log1p(precip / 0.1)
    q = torch.tensor([0.1, 0.5, 0.9]).view(-1, 1, 1)
    pred_q = tp.unsqueeze(0) + torch.tensor(arr(71, 3, N_LAT, N_LON, scale=0.3))
    diff = tp.unsqueeze(0) - pred_q
    pinball = torch.maximum(q * diff, (q - 1) * diff).mean(dim=(1, 2))
    return {"ps_truth": ps_t, "ps_pred": ps_p.detach(), "ratio": ratio.detach(),
            "spec_loss": spec_loss, "pred_grad": pred.grad, "u": u, "v": v, "vort": vort,
            "tp": tp, "pinball": pinball, "wet_frac": (precip > 0).float().mean(),
            "q90": torch.quantile(tp.flatten(), 0.9), "phase_zonal": phase_zonal,
            "phase_2d": phase_2d}  # fmt: skip
