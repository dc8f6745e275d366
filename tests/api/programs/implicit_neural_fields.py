"""Implicit neural representations and neural fields as nerf-pytorch, mip-NeRF, torch-ngp /
instant-ngp ports, SIREN, IGR / NeuS / VolSDF, EG3D / K-planes, nerfacc and 2-d Gaussian
splatting code write them: positional and integrated positional encodings, stratified samples from
fixed offsets, densities to alphas, transmittance by cumprod (opaque samples included) and by
exp(-cumsum), hierarchical sampling with searchsorted and mip-NeRF's find_interval, SIREN sine
layers with their initialisation, Fourier feature MLPs, multiresolution dense and hashed grids with
trilinear interpolation, signed-distance fields with eikonal losses (autograd.grad with
create_graph=True), triplane features read with grid_sample, ray-box intersection and NDC rays,
packed (per-sample) rendering with segment sums, the mip-NeRF 360 contraction, distortion and
interlevel losses, and a 2-d Gaussian-splat rasteriser with alpha blending; each fitted a few
steps."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


def _uniform(seed, *shape, low=0.0, high=1.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def _fill(torch, module, seed, bound):
    """Every parameter uniform in ``±bound`` from a NumPy seed (layers keep no library init)."""
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.tensor(g.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
    return module


def _stratified(torch, near, far, n_rays, n_samples, seed):
    # nerf-pytorch's perturbed z_vals, with NumPy uniforms in place of torch.rand
    t_vals = torch.linspace(0.0, 1.0, steps=n_samples)
    z_vals = near * (1.0 - t_vals) + far * t_vals
    z_vals = z_vals.expand([n_rays, n_samples])
    mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    upper = torch.cat([mids, z_vals[..., -1:]], -1)
    lower = torch.cat([z_vals[..., :1], mids], -1)
    t_rand = torch.tensor(_uniform(seed, n_rays, n_samples))
    return lower + (upper - lower) * t_rand


@program
def inf_nerf_embedder_and_integrated_positional_encoding(torch):
    # nerf-pytorch's Embedder (list of lambdas, log and linear frequency sampling), torch-ngp's
    # vectorised frequency encoder, mip-NeRF's conical frustum -> Gaussian and integrated
    # positional encoding (expected sin), and a 1-d signal fitted through the encoding
    nn, F = torch.nn, torch.nn.functional

    class Embedder:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self.create_embedding_fn()

        def create_embedding_fn(self):
            embed_fns, d, out_dim = [], self.kwargs["input_dims"], 0
            if self.kwargs["include_input"]:
                embed_fns.append(lambda x: x)
                out_dim += d
            max_freq, n_freqs = self.kwargs["max_freq_log2"], self.kwargs["num_freqs"]
            if self.kwargs["log_sampling"]:
                freq_bands = 2.0 ** torch.linspace(0.0, max_freq, steps=n_freqs)
            else:
                freq_bands = torch.linspace(2.0**0.0, 2.0**max_freq, steps=n_freqs)
            for freq in freq_bands:
                for p_fn in self.kwargs["periodic_fns"]:
                    embed_fns.append(lambda x, p_fn=p_fn, freq=freq: p_fn(x * freq))
                    out_dim += d
            self.embed_fns, self.out_dim = embed_fns, out_dim

        def embed(self, inputs):
            return torch.cat([fn(inputs) for fn in self.embed_fns], -1)

    def get_embedder(multires, log_sampling=True):
        kw = dict(include_input=True, input_dims=3, max_freq_log2=multires - 1,
                  num_freqs=multires, log_sampling=log_sampling,
                  periodic_fns=[torch.sin, torch.cos])  # fmt: skip
        obj = Embedder(**kw)
        return (lambda x, eo=obj: eo.embed(x)), obj.out_dim

    class FreqEncoder(nn.Module):
        def __init__(self, input_dim, degree):
            super().__init__()
            self.register_buffer("freqs", 2.0 ** torch.arange(degree, dtype=torch.float32))
            self.output_dim = input_dim * (1 + 2 * degree)

        def forward(self, x):
            xb = (x[..., None, :] * self.freqs[:, None]).reshape(*x.shape[:-1], -1)
            return torch.cat([x, torch.sin(xb), torch.cos(xb)], dim=-1)

    pts = torch.tensor(arr(1, 5, 3, scale=0.6))
    embed, out_dim = get_embedder(4)
    embed_lin, _ = get_embedder(4, log_sampling=False)
    enc = FreqEncoder(3, 4)
    e_log, e_lin, e_vec = embed(pts), embed_lin(pts), enc(pts)

    def conical_frustum_to_gaussian(d, t0, t1, base_radius):
        mu, hw = (t0 + t1) / 2, (t1 - t0) / 2
        t_mean = mu + (2 * mu * hw**2) / (3 * mu**2 + hw**2)
        t_var = (hw**2) / 3 - (4 / 15) * ((hw**4 * (12 * mu**2 - hw**2)) / (3 * mu**2 + hw**2) ** 2)
        r_var = base_radius**2 * (
            (mu**2) / 4 + (5 / 12) * hw**2 - 4 / 15 * (hw**4) / (3 * mu**2 + hw**2)
        )
        mean = d[..., None, :] * t_mean[..., None]
        null_outer_diag = 1 - (d**2) / torch.sum(d**2, dim=-1, keepdim=True)
        cov_diag = (
            t_var[..., None] * (d**2)[..., None, :]
            + r_var[..., None] * null_outer_diag[..., None, :]
        )
        return mean, cov_diag

    def expected_sin(x, x_var):
        y = torch.exp(-0.5 * x_var) * torch.sin(x)
        y_var = torch.clamp(0.5 * (1 - torch.exp(-2 * x_var) * torch.cos(2 * x)) - y**2, min=0)
        return y, y_var

    def integrated_pos_enc(means, covs_diag, min_deg, max_deg):
        scales = torch.tensor([2**i for i in range(min_deg, max_deg)], dtype=torch.float32)
        shape = list(means.shape[:-1]) + [-1]
        y = torch.reshape(means[..., None, :] * scales[:, None], shape)
        y_var = torch.reshape(covs_diag[..., None, :] * scales[:, None] ** 2, shape)
        return expected_sin(
            torch.cat([y, y + 0.5 * math.pi], dim=-1), torch.cat([y_var] * 2, dim=-1)
        )[0]

    rays_o = torch.tensor(arr(2, 4, 3, scale=0.2))
    rays_d = torch.tensor(arr(3, 4, 3, scale=0.3)) + torch.tensor([0.0, 0.0, -1.0])
    t_vals = torch.linspace(1.0, 3.0, 6)
    radii = torch.full((4, 1), 0.02)
    means, covs = conical_frustum_to_gaussian(rays_d, t_vals[:-1].expand(4, 5),
                                              t_vals[1:].expand(4, 5), radii)  # fmt: skip
    means = means + rays_o[..., None, :]
    ipe = integrated_pos_enc(means, covs, 0, 4)

    # a 1-d signal fitted through the encoding (Tancik et al.'s spectral-bias demo in 3-d form)
    x = torch.linspace(-1.0, 1.0, 24)[:, None] * torch.tensor([1.0, 0.5, -0.25])
    target = torch.sin(6.0 * x[:, :1]) * torch.cos(3.0 * x[:, 1:2])
    mlp = set_weights(torch, nn.Sequential(nn.Linear(out_dim, 32), nn.ReLU(), nn.Linear(32, 1)), 4)
    opt = torch.optim.Adam(mlp.parameters(), lr=5e-3)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.mse_loss(mlp(embed(x)), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"out_dim": out_dim, "e_log": e_log, "e_lin": e_lin, "e_vec": e_vec,
            "vec_dim": enc.output_dim, "means": means, "covs": covs, "ipe": ipe,
            "ipe_shape": list(ipe.shape), "losses": losses, "w0_grad": mlp[0].weight.grad,
            "pred": mlp(embed(x[:6])).detach()}  # fmt: skip


@program
def inf_volume_rendering_opaque_samples_and_transmittance_forms(torch):
    # raw2outputs as nerf-pytorch (1e10 last interval, relu densities, white background), the
    # torch-ngp exclusive cumprod with 1e-15, T = exp(-cumsum(sigma * delta)) as instant-ngp /
    # Plenoxels write it, and a plain cumprod(1 - alpha) over rays with exactly opaque samples
    # (alpha == 1), fitted per-sample densities and colours with Adam
    F = torch.nn.functional
    R, S = 5, 8
    near, far = 2.0, 6.0
    rays_d = torch.tensor(arr(10, R, 3, scale=0.2)) + torch.tensor([0.0, 0.0, -1.0])
    z_vals = _stratified(torch, near, far, R, S, 11)
    sigma_raw = torch.tensor(arr(12, R, S, scale=1.5)).requires_grad_()
    rgb_raw = torch.tensor(arr(13, R, S, 3)).requires_grad_()
    with torch.no_grad():
        sigma_raw[1, 3] = 80.0  # opaque: exp(-80 * delta) underflows to exactly zero
        sigma_raw[3, 0] = 200.0
    target = torch.tensor(_uniform(14, R, 3))
    target_depth = torch.tensor(_uniform(15, R, low=3.0, high=5.0))

    def raw2outputs(sigma, rgb, z_vals, rays_d, white_bkgd=True):
        raw2alpha = lambda raw, dists, act_fn=F.relu: 1.0 - torch.exp(-act_fn(raw) * dists)  # noqa: E731
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
        dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
        rgb = torch.sigmoid(rgb)
        alpha = raw2alpha(sigma, dists)
        T = torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1)
        weights = alpha * T[:, :-1]
        rgb_map = torch.sum(weights[..., None] * rgb, -2)
        depth_map = torch.sum(weights * z_vals, -1)
        disp_map = 1.0 / torch.max(
            1e-10 * torch.ones_like(depth_map), depth_map / torch.sum(weights, -1)
        )
        acc_map = torch.sum(weights, -1)
        if white_bkgd:
            rgb_map = rgb_map + (1.0 - acc_map[..., None])
        return rgb_map, disp_map, acc_map, weights, depth_map

    def ngp_weights(sigma, deltas):
        alphas = 1 - torch.exp(-deltas * sigma)
        alphas_shifted = torch.cat([torch.ones_like(alphas[..., :1]), 1 - alphas + 1e-15], dim=-1)
        return alphas * torch.cumprod(alphas_shifted, dim=-1)[..., :-1]

    def exp_cumsum_weights(sigma, deltas):
        sd = sigma * deltas
        T = torch.exp(
            -torch.cumsum(torch.cat([torch.zeros_like(sd[..., :1]), sd[..., :-1]], -1), -1)
        )
        return T * (1 - torch.exp(-sd))

    def plain_cumprod_weights(sigma, deltas):
        alpha = 1 - torch.exp(-sigma * deltas)
        T = torch.cumprod(1 - alpha, -1)
        T = torch.cat([torch.ones_like(T[..., :1]), T[..., :-1]], -1)
        return alpha * T, T

    opt = torch.optim.Adam([sigma_raw, rgb_raw], lr=2e-2)
    out = {"loss": [], "depth": []}
    for step in range(3):
        opt.zero_grad()
        rgb_map, disp_map, acc_map, weights, depth_map = raw2outputs(
            sigma_raw, rgb_raw, z_vals, rays_d
        )
        loss = F.mse_loss(rgb_map, target) + 0.01 * F.smooth_l1_loss(depth_map, target_depth)
        loss.backward()
        if step == 0:
            out["first"] = {"rgb": rgb_map, "disp": disp_map, "acc": acc_map, "weights": weights,
                            "sigma_grad": sigma_raw.grad.clone(), "rgb_grad": rgb_raw.grad.clone()}  # fmt: skip
        opt.step()
        out["loss"].append(loss.item())
        out["depth"].append(depth_map.detach())
    # the three transmittance forms on the same densities, gradients through each
    sigma = F.softplus(sigma_raw.detach() - 1.0).requires_grad_()
    deltas = torch.cat([z_vals[..., 1:] - z_vals[..., :-1], torch.full((R, 1), 1e10)], -1)
    deltas = deltas.clamp(max=1.0)
    w_ngp = ngp_weights(sigma, deltas)
    w_exp = exp_cumsum_weights(sigma, deltas)
    w_plain, T_plain = plain_cumprod_weights(sigma, deltas)
    (w_plain * z_vals).sum().backward()
    g_plain = sigma.grad.clone()
    sigma.grad = None
    (w_ngp * z_vals).sum().backward()
    out.update({"w_ngp": w_ngp, "w_exp": w_exp, "w_plain": w_plain, "T_plain": T_plain,
                "n_zero_T": (T_plain == 0).sum(), "g_plain": g_plain, "g_ngp": sigma.grad,
                "params_sigma": sigma_raw, "params_rgb": rgb_raw})  # fmt: skip
    return out


@program
def inf_hierarchical_sampling_sample_pdf_and_find_interval(torch):
    # nerf-pytorch's sample_pdf with det=True (u = linspace) and with fixed jittered u, mip-NeRF's
    # blurpooled weights, sorted_piecewise_constant_pdf with find_interval (where + max/min over a
    # mask instead of searchsorted), then the fine samples merged with sort and rendered
    R, S, Nf = 4, 7, 6
    z_vals = _stratified(torch, 2.0, 6.0, R, S, 20)
    logits = torch.tensor(arr(21, R, S, scale=1.5)).requires_grad_()
    weights = torch.softmax(logits, -1) * 0.9

    def sample_pdf(bins, weights, N_samples, det=False, u=None):
        weights = weights + 1e-5
        pdf = weights / torch.sum(weights, -1, keepdim=True)
        cdf = torch.cumsum(pdf, -1)
        cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
        if det:
            u = torch.linspace(0.0, 1.0, steps=N_samples)
            u = u.expand(list(cdf.shape[:-1]) + [N_samples])
        u = u.contiguous()
        inds = torch.searchsorted(cdf, u, right=True)
        below = torch.max(torch.zeros_like(inds - 1), inds - 1)
        above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
        inds_g = torch.stack([below, above], -1)
        matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
        cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
        bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
        denom = cdf_g[..., 1] - cdf_g[..., 0]
        denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
        t = (u - cdf_g[..., 0]) / denom
        return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])

    z_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    z_det = sample_pdf(z_mid, weights[..., 1:-1], Nf, det=True)
    u = torch.tensor(np.sort(_uniform(22, R, Nf), -1))
    z_rand = sample_pdf(z_mid, weights[..., 1:-1], Nf, u=u)
    (z_det.sum() + (z_rand**2).sum()).backward()
    logits_grad = logits.grad

    def sorted_piecewise_constant_pdf(bins, weights, num_samples, randomized, jitter=None):
        eps = 1e-5
        weight_sum = torch.sum(weights, dim=-1, keepdim=True)
        padding = torch.maximum(torch.zeros_like(weight_sum), eps - weight_sum)
        weights = weights + padding / weights.shape[-1]
        weight_sum = weight_sum + padding
        pdf = weights / weight_sum
        cdf = torch.minimum(torch.ones_like(pdf[..., :-1]), torch.cumsum(pdf[..., :-1], dim=-1))
        cdf = torch.cat([torch.zeros(list(cdf.shape[:-1]) + [1]), cdf,
                         torch.ones(list(cdf.shape[:-1]) + [1])], dim=-1)  # fmt: skip
        if randomized:
            s = 1 / num_samples
            u = (torch.arange(num_samples) * s)[None, ...]
            u = u + jitter * (s - torch.finfo(torch.float32).eps)
            u = torch.minimum(u, torch.full_like(u, 1.0 - torch.finfo(torch.float32).eps))
        else:
            u = torch.linspace(0.0, 1.0 - torch.finfo(torch.float32).eps, num_samples)
            u = torch.broadcast_to(u, list(cdf.shape[:-1]) + [num_samples])
        mask = u[..., None, :] >= cdf[..., :, None]

        def find_interval(x):
            x0 = torch.max(torch.where(mask, x[..., None], x[..., :1, None]), -2)[0]
            x1 = torch.min(torch.where(~mask, x[..., None], x[..., -1:, None]), -2)[0]
            return x0, x1

        bins_g0, bins_g1 = find_interval(bins)
        cdf_g0, cdf_g1 = find_interval(cdf)
        t = torch.clip(torch.nan_to_num((u - cdf_g0) / (cdf_g1 - cdf_g0), 0), 0, 1)
        return bins_g0 + t * (bins_g1 - bins_g0)

    with torch.no_grad():
        t_edges = torch.cat([z_vals[..., :1], z_mid, z_vals[..., -1:]], -1)  # S + 1 edges
        w = weights.detach()
        weights_pad = torch.cat([w[..., :1], w, w[..., -1:]], dim=-1)
        weights_max = torch.maximum(weights_pad[..., :-1], weights_pad[..., 1:])
        weights_blur = 0.5 * (weights_max[..., :-1] + weights_max[..., 1:])
        new_t = sorted_piecewise_constant_pdf(t_edges, weights_blur + 0.01, Nf + 1, False)
        jitter = torch.tensor(_uniform(23, R, Nf + 1))
        new_t_rand = sorted_piecewise_constant_pdf(
            t_edges, weights_blur + 0.01, Nf + 1, True, jitter
        )
        zero_w = sorted_piecewise_constant_pdf(t_edges, torch.zeros(R, S), 4, False)
        z_all, order = torch.sort(torch.cat([z_vals, z_det], -1), -1)
    return {"z_det": z_det, "z_rand": z_rand, "logits_grad": logits_grad, "blur": weights_blur,
            "new_t": new_t, "new_t_rand": new_t_rand, "zero_w": zero_w, "z_all": z_all,
            "from_fine": order >= S, "monotone": bool((new_t[..., 1:] >= new_t[..., :-1]).all())}  # fmt: skip


@program
def inf_siren_image_fit_gradient_and_laplacian(torch):
    # SIREN (Sitzmann et al.): SineLayer with omega_0 = 30 and its first / hidden initialisation
    # bounds (drawn with NumPy), get_mgrid with meshgrid(indexing="ij"), coordinates cloned with
    # requires_grad, an 8x8 image fitted with Adam, then the image gradient and Laplacian via
    # autograd.grad(create_graph=True) and a divergence, and a gradient-supervised step
    nn = torch.nn

    class SineLayer(nn.Module):
        def __init__(
            self, in_features, out_features, bias=True, is_first=False, omega_0=30.0, seed=0
        ):
            super().__init__()
            self.omega_0, self.is_first, self.in_features = omega_0, is_first, in_features
            self.linear = nn.Linear(in_features, out_features, bias=bias)
            self.init_weights(seed)

        def init_weights(self, seed):
            g = np.random.default_rng(seed)
            with torch.no_grad():
                if self.is_first:
                    bound = 1 / self.in_features
                else:
                    bound = np.sqrt(6 / self.in_features) / self.omega_0
                w = g.uniform(-bound, bound, tuple(self.linear.weight.shape))
                self.linear.weight.copy_(torch.tensor(w.astype(np.float32)))
                b = 1 / math.sqrt(self.in_features)
                self.linear.bias.copy_(
                    torch.tensor(g.uniform(-b, b, self.linear.out_features).astype(np.float32))
                )

        def forward(self, input):
            return torch.sin(self.omega_0 * self.linear(input))

    class Siren(nn.Module):
        def __init__(self, in_features, hidden_features, hidden_layers, out_features,
                     first_omega_0=30.0, hidden_omega_0=30.0):  # fmt: skip
            super().__init__()
            net = [
                SineLayer(
                    in_features, hidden_features, is_first=True, omega_0=first_omega_0, seed=30
                )
            ]
            for i in range(hidden_layers):
                net.append(
                    SineLayer(hidden_features, hidden_features, omega_0=hidden_omega_0, seed=31 + i)
                )
            final_linear = nn.Linear(hidden_features, out_features)
            with torch.no_grad():
                bound = np.sqrt(6 / hidden_features) / hidden_omega_0
                g = np.random.default_rng(39)
                final_linear.weight.copy_(torch.tensor(
                    g.uniform(-bound, bound, (out_features, hidden_features)).astype(np.float32)))  # fmt: skip
                final_linear.bias.zero_()
            net.append(final_linear)
            self.net = nn.Sequential(*net)

        def forward(self, coords):
            coords = coords.clone().detach().requires_grad_(True)
            output = self.net(coords)
            return output, coords

    def get_mgrid(sidelen, dim=2):
        tensors = tuple(dim * [torch.linspace(-1, 1, steps=sidelen)])
        mgrid = torch.stack(torch.meshgrid(*tensors, indexing="ij"), dim=-1)
        return mgrid.reshape(-1, dim)

    def gradient(y, x, grad_outputs=None):
        if grad_outputs is None:
            grad_outputs = torch.ones_like(y)
        return torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]

    def divergence(y, x):
        div = 0.0
        for i in range(y.shape[-1]):
            div += torch.autograd.grad(y[..., i], x, torch.ones_like(y[..., i]), create_graph=True)[
                0
            ][..., i : i + 1]
        return div

    def laplace(y, x):
        return divergence(gradient(y, x), x)

    side = 8
    coords = get_mgrid(side)
    yy, xx = np.meshgrid(np.linspace(-1, 1, side), np.linspace(-1, 1, side), indexing="ij")
    img = (np.sin(3 * xx) * np.cos(2 * yy) + 0.3 * xx).astype(np.float32).reshape(-1, 1)
    pixels = torch.tensor(img)
    siren = Siren(2, 16, 2, 1)
    optim = torch.optim.Adam(lr=1e-4, params=siren.parameters())
    losses = []
    for _ in range(4):
        model_output, coords_g = siren(coords)
        loss = ((model_output - pixels) ** 2).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    model_output, coords_g = siren(coords)
    img_grad = gradient(model_output, coords_g)
    img_laplacian = laplace(model_output, coords_g)
    # a gradient-supervised step (SIREN's Poisson experiment): the loss differentiates the
    # gradient again, so the parameters see second derivatives of sin
    grad_target = torch.tensor(arr(40, side * side, 2, scale=0.5))
    grad_loss = ((img_grad - grad_target) ** 2).mean()
    optim.zero_grad()
    grad_loss.backward()
    return {"losses": losses, "coords": coords, "output": model_output, "img_grad": img_grad,
            "laplacian": img_laplacian, "grad_loss": grad_loss,
            "first_w_grad": siren.net[0].linear.weight.grad,
            "last_b_grad": siren.net[-1].bias.grad}  # fmt: skip


@program
def inf_fourier_feature_mlp_mappings(torch):
    # Tancik et al.'s Fourier features: no mapping, basic (B = I) and Gaussian B (scale 10, drawn
    # with NumPy) with x_proj = (2 pi x) @ B.T, plus a learnable-B variant as a parameter; each
    # MLP fitted to a small image with Adam and PSNR reported per step
    nn = torch.nn
    side = 6
    xs = np.linspace(0, 1, side, endpoint=False, dtype=np.float32)
    grid = np.stack(np.meshgrid(xs, xs, indexing="ij"), -1)
    img = 0.5 + 0.5 * np.sin(7 * grid[..., 0]) * np.cos(11 * grid[..., 1] + 1.0)
    x = torch.tensor(grid.reshape(-1, 2))
    y = torch.tensor(np.stack([img, img**2, 1 - img], -1).reshape(-1, 3).astype(np.float32))

    def input_mapping(x, B):
        if B is None:
            return x
        x_proj = (2.0 * np.pi * x) @ B.T
        return torch.cat([torch.sin(x_proj), torch.cos(x_proj)], dim=-1)

    class LearnableFourier(nn.Module):
        def __init__(self, B):
            super().__init__()
            self.B = nn.Parameter(B.clone())

        def forward(self, x):
            return input_mapping(x, self.B)

    B_gauss = torch.tensor(arr(50, 8, 2, scale=10.0))
    mappings = {"none": None, "basic": torch.eye(2), "gauss": B_gauss}
    out = {}
    for i, name in enumerate(["none", "basic", "gauss", "learned"]):
        if name == "learned":
            fmap = LearnableFourier(torch.tensor(arr(51, 8, 2, scale=2.0)))
            in_dim = 16
        else:
            B = mappings[name]
            fmap = lambda x, B=B: input_mapping(x, B)  # noqa: E731
            in_dim = 2 if B is None else 2 * B.shape[0]
        net = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                            nn.Linear(32, 3), nn.Sigmoid())  # fmt: skip
        set_weights(torch, net, seed=52 + i)
        params = list(net.parameters()) + (
            list(fmap.parameters()) if isinstance(fmap, nn.Module) else []
        )
        opt = torch.optim.Adam(params, lr=1e-2)
        psnrs = []
        for _ in range(3):
            opt.zero_grad()
            loss = 0.5 * torch.mean((net(fmap(x)) - y) ** 2)
            loss.backward()
            opt.step()
            psnrs.append(-10 * torch.log10(2.0 * loss.detach()))
        out[name] = {"psnr": torch.stack(psnrs), "pred": net(fmap(x[:5])).detach(),
                     "w0": net[0].weight.detach()}  # fmt: skip
        if isinstance(fmap, nn.Module):
            out[name]["B"] = fmap.B.detach()
            out[name]["B_grad"] = fmap.B.grad
    out["features"] = input_mapping(x[:4], B_gauss)
    return out


@program
def inf_multiresolution_grid_embeddings_trilinear(torch):
    # HashNeRF-pytorch style multiresolution grid: nn.Embedding per level, dense levels indexed
    # x + y (R+1) + z (R+1)^2, finer levels hashed with int64 primes, in-place ^= and & (T - 1)
    # with a 0-d tensor, the eight BOX_OFFSETS corners, trilinear interpolation written as c00 ..
    # c1 lerps; the dense level checked against 5-d grid_sample(align_corners=True); a decoder
    # fitted to an analytic density with Adam
    nn, F = torch.nn, torch.nn.functional
    BOX_OFFSETS = torch.tensor([[[i, j, k] for i in [0, 1] for j in [0, 1] for k in [0, 1]]])
    primes = [1, 2654435761, 805459861]

    def hash(coords, log2_hashmap_size):
        xor_result = torch.zeros_like(coords)[..., 0]
        for i in range(coords.shape[-1]):
            xor_result ^= coords[..., i] * primes[i]
        return torch.tensor((1 << log2_hashmap_size) - 1) & xor_result

    class GridEncoding(nn.Module):
        def __init__(self, n_levels=3, n_features=2, log2_hashmap_size=6, base_res=2, finest_res=8):
            super().__init__()
            self.n_levels, self.log2 = n_levels, log2_hashmap_size
            self.b = math.exp((math.log(finest_res) - math.log(base_res)) / (n_levels - 1))
            self.res = [int(math.floor(base_res * self.b**i)) for i in range(n_levels)]
            self.hashed = [(r + 1) ** 3 > 2**log2_hashmap_size for r in self.res]
            sizes = [
                2**log2_hashmap_size if h else (r + 1) ** 3 for r, h in zip(self.res, self.hashed)
            ]
            self.embeddings = nn.ModuleList([nn.Embedding(s, n_features) for s in sizes])
            g = np.random.default_rng(60)
            with torch.no_grad():
                for e in self.embeddings:
                    e.weight.copy_(
                        torch.tensor(g.uniform(-0.5, 0.5, tuple(e.weight.shape)).astype(np.float32))
                    )

        def trilinear_interp(self, x, vmin, vmax, e):
            w = (x - vmin) / (vmax - vmin)
            c00 = e[:, 0] * (1 - w[:, 0][:, None]) + e[:, 4] * w[:, 0][:, None]
            c01 = e[:, 1] * (1 - w[:, 0][:, None]) + e[:, 5] * w[:, 0][:, None]
            c10 = e[:, 2] * (1 - w[:, 0][:, None]) + e[:, 6] * w[:, 0][:, None]
            c11 = e[:, 3] * (1 - w[:, 0][:, None]) + e[:, 7] * w[:, 0][:, None]
            c0 = c00 * (1 - w[:, 1][:, None]) + c10 * w[:, 1][:, None]
            c1 = c01 * (1 - w[:, 1][:, None]) + c11 * w[:, 1][:, None]
            return c0 * (1 - w[:, 2][:, None]) + c1 * w[:, 2][:, None]

        def forward(self, x):  # x in [-1, 1]^3
            u = (x + 1) / 2
            feats = []
            for level, res in enumerate(self.res):
                grid_size = 1.0 / res
                bottom_left = torch.floor(u / grid_size).int().clamp(0, res - 1)
                vmin = bottom_left * grid_size
                vmax = vmin + grid_size
                corners = bottom_left.long().unsqueeze(1) + BOX_OFFSETS
                if self.hashed[level]:
                    idx = hash(corners, self.log2)
                else:
                    idx = (
                        corners[..., 0]
                        + corners[..., 1] * (res + 1)
                        + corners[..., 2] * (res + 1) ** 2
                    )
                e = self.embeddings[level](idx)
                feats.append(self.trilinear_interp(u, vmin, vmax, e))
            return torch.cat(feats, dim=-1)

    enc = GridEncoding()
    pts = torch.tensor(_uniform(61, 24, 3, low=-0.95, high=0.95))
    feats = enc(pts)
    # level 0 is dense: the same values by grid_sample on the embedding table as a volume
    r = enc.res[0] + 1
    vol = enc.embeddings[0].weight.view(r, r, r, -1).permute(3, 2, 1, 0)[None]
    gs = F.grid_sample(vol, pts.view(1, 1, 1, -1, 3), mode="bilinear", align_corners=True)
    gs = gs.view(-1, pts.shape[0]).t()
    decoder = set_weights(
        torch, nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)), seed=62
    )
    target = torch.exp(-4.0 * (pts**2).sum(-1, keepdim=True))
    opt = torch.optim.Adam([{"params": enc.parameters(), "lr": 5e-2},
                            {"params": decoder.parameters(), "lr": 1e-2}], eps=1e-15)  # fmt: skip
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.mse_loss(decoder(enc(pts)), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    corners = torch.floor((pts[:4] + 1) / 2 * enc.res[2]).long().unsqueeze(1) + BOX_OFFSETS
    return {"res": enc.res, "hashed": enc.hashed, "feats": feats, "grid_sample": gs,
            "hash_idx": hash(corners, 6), "losses": losses,
            "emb_grads": [e.weight.grad for e in enc.embeddings],
            "touched": [(e.weight.grad.abs().sum(-1) > 0).sum() for e in enc.embeddings],
            "dec_w": decoder[0].weight}  # fmt: skip


@program
def inf_igr_sdf_geometric_init_eikonal(torch):
    # IGR / SAL: an MLP with Softplus(beta=100), a skip connection divided by sqrt(2) and the
    # geometric initialisation (a sphere of radius 0.5; NumPy normals), gradient() through
    # autograd.grad(create_graph=True, retain_graph=True, only_inputs=True), manifold + eikonal +
    # normal losses, Adam with a step scheduler
    nn = torch.nn
    g = np.random.default_rng(70)

    class ImplicitNet(nn.Module):
        def __init__(self, d_in, dims, skip_in=(), radius_init=0.5, beta=100):
            super().__init__()
            dims = [d_in] + dims + [1]
            self.num_layers, self.skip_in = len(dims), skip_in
            for layer in range(0, self.num_layers - 1):
                out_dim = dims[layer + 1] - d_in if layer + 1 in skip_in else dims[layer + 1]
                lin = nn.Linear(dims[layer], out_dim)
                with torch.no_grad():
                    if layer == self.num_layers - 2:
                        w = g.normal(
                            np.sqrt(np.pi) / np.sqrt(dims[layer]), 0.00001, (out_dim, dims[layer])
                        )
                        lin.weight.copy_(torch.tensor(w.astype(np.float32)))
                        torch.nn.init.constant_(lin.bias, -radius_init)
                    else:
                        torch.nn.init.constant_(lin.bias, 0.0)
                        w = g.normal(0.0, np.sqrt(2) / np.sqrt(out_dim), (out_dim, dims[layer]))
                        lin.weight.copy_(torch.tensor(w.astype(np.float32)))
                setattr(self, "lin" + str(layer), lin)
            self.activation = nn.Softplus(beta=beta)

        def forward(self, input):
            x = input
            for layer in range(0, self.num_layers - 1):
                lin = getattr(self, "lin" + str(layer))
                if layer in self.skip_in:
                    x = torch.cat([x, input], -1) / np.sqrt(2)
                x = lin(x)
                if layer < self.num_layers - 2:
                    x = self.activation(x)
            return x

    def gradient(inputs, outputs):
        d_points = torch.ones_like(outputs, requires_grad=False)
        points_grad = torch.autograd.grad(outputs=outputs, inputs=inputs, grad_outputs=d_points,
                                          create_graph=True, retain_graph=True, only_inputs=True)[0]  # fmt: skip
        return points_grad[:, -3:]

    # surface samples of an ellipsoid with their normals; off-surface points local + global
    dirs = arr(71, 20, 3)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    axes = np.array([0.6, 0.4, 0.5], np.float32)
    surf = dirs * axes
    normals = surf / axes**2
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    mnfld_pnts = torch.tensor(surf.astype(np.float32))
    normals = torch.tensor(normals.astype(np.float32))
    local = mnfld_pnts + torch.tensor(arr(72, 20, 3, scale=0.05))
    glob = torch.tensor(_uniform(73, 10, 3, low=-1.0, high=1.0))
    nonmnfld_pnts = torch.cat([local, glob], 0)

    net = ImplicitNet(3, [24, 24, 24], skip_in=(2,))
    init_sdf = net(torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.9, 0.0]])).detach()
    opt = torch.optim.Adam(net.parameters(), lr=5e-3, weight_decay=0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    out = {"loss": [], "eik": [], "lr": []}
    for _ in range(4):
        mnfld = mnfld_pnts.clone().requires_grad_()
        nonmnfld = nonmnfld_pnts.clone().requires_grad_()
        mnfld_pred = net(mnfld)
        nonmnfld_pred = net(nonmnfld)
        mnfld_grad = gradient(mnfld, mnfld_pred)
        nonmnfld_grad = gradient(nonmnfld, nonmnfld_pred)
        mnfld_loss = (mnfld_pred.abs()).mean()
        grad_loss = ((nonmnfld_grad.norm(2, dim=-1) - 1) ** 2).mean()
        normals_loss = ((mnfld_grad - normals).abs()).norm(2, dim=1).mean()
        loss = mnfld_loss + 0.1 * grad_loss + 1.0 * normals_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        out["loss"].append(loss.item())
        out["eik"].append(grad_loss.detach())
        out["lr"].append(sched.get_last_lr()[0])
    out.update({"init_sdf": init_sdf, "grads": grads(net), "final_grad": nonmnfld_grad.detach(),
                "sdf_after": net(mnfld_pnts[:5]).detach()})  # fmt: skip
    return out


@program
def inf_triplane_and_kplanes_grid_sample_features(torch):
    # EG3D's triplane: plane axes, project_onto_planes with an inverse + bmm, sample_from_planes
    # with grid_sample(align_corners=False, padding zeros) over N * 3 planes, mean aggregation and
    # the OSG decoder (softplus MLP, rgb sigmoid * (1 + 2e-3) - 1e-3); K-planes' Hadamard product
    # of three planes with border padding, its total-variation and L1 regularisers; both fitted
    nn, F = torch.nn, torch.nn.functional

    def generate_planes():
        return torch.tensor([[[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                             [[1, 0, 0], [0, 0, 1], [0, 1, 0]],
                             [[0, 0, 1], [0, 1, 0], [1, 0, 0]]], dtype=torch.float32)  # fmt: skip

    def project_onto_planes(planes, coordinates):
        N, M, C = coordinates.shape
        n_planes, _, _ = planes.shape
        coordinates = (
            coordinates.unsqueeze(1).expand(-1, n_planes, -1, -1).reshape(N * n_planes, M, 3)
        )
        inv_planes = (
            torch.linalg.inv(planes).unsqueeze(0).expand(N, -1, -1, -1).reshape(N * n_planes, 3, 3)
        )
        projections = torch.bmm(coordinates, inv_planes)
        return projections[..., :2]

    def sample_from_planes(plane_axes, plane_features, coordinates, box_warp=2.0):
        N, n_planes, C, H, W = plane_features.shape
        _, M, _ = coordinates.shape
        plane_features = plane_features.view(N * n_planes, C, H, W)
        coordinates = (2 / box_warp) * coordinates
        projected = project_onto_planes(plane_axes, coordinates).unsqueeze(1)
        feats = F.grid_sample(plane_features, projected.float(), mode="bilinear",
                              padding_mode="zeros", align_corners=False)  # fmt: skip
        return feats.permute(0, 3, 2, 1).reshape(N, n_planes, M, C)

    class OSGDecoder(nn.Module):
        def __init__(self, n_features, hidden_dim=16):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_features, hidden_dim), nn.Softplus(),
                                     nn.Linear(hidden_dim, 1 + 3))  # fmt: skip

        def forward(self, sampled_features):
            x = sampled_features.mean(1)
            N, M, C = x.shape
            x = self.net(x.view(N * M, C)).view(N, M, -1)
            rgb = torch.sigmoid(x[..., 1:]) * (1 + 2 * 0.001) - 0.001
            return {"rgb": rgb, "sigma": x[..., 0:1]}

    N, C, H, M = 2, 4, 6, 10
    plane_axes = generate_planes()
    planes = nn.Parameter(torch.tensor(arr(80, N, 3, C, H, H, scale=0.5)))
    coords = torch.tensor(_uniform(81, N, M, 3, low=-1.1, high=1.1))  # a few outside the box
    decoder = set_weights(torch, OSGDecoder(C), seed=82)
    target_rgb = torch.tensor(_uniform(83, N, M, 3))
    target_sigma = torch.tensor(arr(84, N, M, 1))
    opt = torch.optim.Adam([planes] + list(decoder.parameters()), lr=1e-2, betas=(0.0, 0.99))
    eg3d_loss = []
    for _ in range(3):
        opt.zero_grad()
        out = decoder(sample_from_planes(plane_axes, planes, coords))
        loss = F.mse_loss(out["rgb"], target_rgb) + 0.1 * F.mse_loss(out["sigma"], target_sigma)
        loss.backward()
        opt.step()
        eg3d_loss.append(loss.item())
    proj = project_onto_planes(plane_axes, coords)

    # K-planes (static): xy, xz, yz planes multiplied, border padding, align_corners=True
    coo_combs = [(0, 1), (0, 2), (1, 2)]
    kplanes = nn.ParameterList([nn.Parameter(torch.tensor(_uniform(85 + i, 1, C, 5, 7, low=0.1, high=0.5)))
                                for i in range(3)])  # fmt: skip
    pts = torch.tensor(_uniform(88, 12, 3, low=-1.2, high=1.2)).requires_grad_()

    def interpolate_ms_features(pts):
        interp_space = 1.0
        for ci, coo_comb in enumerate(coo_combs):
            coords = pts[..., coo_comb].view(1, 1, -1, 2)
            feat = F.grid_sample(kplanes[ci], coords, align_corners=True, padding_mode="border")
            feat = feat.view(C, -1).transpose(-1, -2)
            interp_space = interp_space * feat
        return interp_space

    def compute_plane_tv(t):
        batch_size, c, h, w = t.shape
        count_h = batch_size * c * (h - 1) * w
        count_w = batch_size * c * h * (w - 1)
        h_tv = torch.square(t[..., 1:, :] - t[..., : h - 1, :]).sum()
        w_tv = torch.square(t[..., :, 1:] - t[..., :, : w - 1]).sum()
        return 2 * (h_tv / count_h + w_tv / count_w)

    head = set_weights(torch, nn.Linear(C, 1), seed=89)
    kopt = torch.optim.Adam(list(kplanes.parameters()) + list(head.parameters()), lr=1e-2)
    k_target = torch.tensor(arr(90, 12, 1, scale=0.1))
    k_loss = []
    for step in range(3):
        kopt.zero_grad()
        feats = interpolate_ms_features(pts)
        tv = sum(compute_plane_tv(p) for p in kplanes)
        l1 = sum(torch.abs(1 - p).mean() for p in kplanes)
        loss = F.mse_loss(head(feats), k_target) + 1e-2 * tv + 1e-3 * l1
        loss.backward()
        if step == 0:
            pts_grad = pts.grad.clone()
        kopt.step()
        k_loss.append(loss.item())
    return {"proj": proj, "eg3d_loss": eg3d_loss, "planes_grad": planes.grad, "planes": planes,
            "rgb": out["rgb"], "k_loss": k_loss, "pts_grad": pts_grad,
            "kplane_grads": [p.grad for p in kplanes], "k_feats": feats.detach()}  # fmt: skip


@program
def inf_rays_ndc_and_aabb_near_far(torch):
    # get_rays from K and c2w with meshgrid(indexing="ij") then .t() (nerf-pytorch), ndc_rays for
    # forward-facing scenes, the slab test for near/far against an AABB with 1 / d (axis-aligned
    # rays give +-inf, an origin on a slab with d = 0 gives nan), and a differentiable depth
    # render of an analytic SDF sphere (NeuS-like logistic density) with gradients to the sphere
    F = torch.nn.functional
    H, W, focal = 4, 5, 6.0
    K = torch.tensor([[focal, 0, 0.5 * W], [0, focal, 0.5 * H], [0, 0, 1]])
    th = 0.3
    c2w = torch.tensor([[math.cos(th), 0, math.sin(th), 0.4],
                        [0, 1, 0, -0.2],
                        [-math.sin(th), 0, math.cos(th), 3.0]])  # fmt: skip

    def get_rays(H, W, K, c2w):
        i, j = torch.meshgrid(
            torch.linspace(0, W - 1, W), torch.linspace(0, H - 1, H), indexing="ij"
        )
        i, j = i.t(), j.t()
        dirs = torch.stack(
            [(i - K[0][2]) / K[0][0], -(j - K[1][2]) / K[1][1], -torch.ones_like(i)], -1
        )
        rays_d = torch.sum(dirs[..., np.newaxis, :] * c2w[:3, :3], -1)
        rays_o = c2w[:3, -1].expand(rays_d.shape)
        return rays_o, rays_d

    def ndc_rays(H, W, focal, near, rays_o, rays_d):
        t = -(near + rays_o[..., 2]) / rays_d[..., 2]
        rays_o = rays_o + t[..., None] * rays_d
        o0 = -1.0 / (W / (2.0 * focal)) * rays_o[..., 0] / rays_o[..., 2]
        o1 = -1.0 / (H / (2.0 * focal)) * rays_o[..., 1] / rays_o[..., 2]
        o2 = 1.0 + 2.0 * near / rays_o[..., 2]
        d0 = (
            -1.0
            / (W / (2.0 * focal))
            * (rays_d[..., 0] / rays_d[..., 2] - rays_o[..., 0] / rays_o[..., 2])
        )
        d1 = (
            -1.0
            / (H / (2.0 * focal))
            * (rays_d[..., 1] / rays_d[..., 2] - rays_o[..., 1] / rays_o[..., 2])
        )
        d2 = -2.0 * near / rays_o[..., 2]
        return torch.stack([o0, o1, o2], -1), torch.stack([d0, d1, d2], -1)

    rays_o, rays_d = get_rays(H, W, K, c2w)
    ndc_o, ndc_d = ndc_rays(H, W, focal, 1.0, rays_o, rays_d)

    def near_far_from_aabb(rays_o, rays_d, aabb, min_near=0.05):
        inv_d = 1.0 / rays_d
        t0 = (aabb[:3] - rays_o) * inv_d
        t1 = (aabb[3:] - rays_o) * inv_d
        tmin = torch.minimum(t0, t1).amax(dim=-1)
        tmax = torch.maximum(t0, t1).amin(dim=-1)
        hit = tmax > torch.clamp(tmin, min=0.0)
        near = torch.where(hit, tmin.clamp(min=min_near), torch.full_like(tmin, 1e9))
        far = torch.where(hit, tmax, torch.full_like(tmax, 1e9))
        return near, far, hit

    aabb = torch.tensor([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
    o = rays_o.reshape(-1, 3)
    d = F.normalize(rays_d.reshape(-1, 3), dim=-1)
    extra_o = torch.tensor([[0.0, 0.0, 3.0], [0.5, 2.0, 0.0], [1.0, 0.0, 3.0], [0.2, 0.1, 0.0]])
    extra_d = torch.tensor([[0.0, 0.0, -1.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])
    near, far, hit = near_far_from_aabb(torch.cat([o, extra_o]), torch.cat([d, extra_d]), aabb)

    # depth of a sphere rendered with a logistic density of its SDF, between near and far
    center = torch.tensor([0.1, -0.1, 0.0], requires_grad=True)
    radius = torch.tensor(0.6, requires_grad=True)
    n_rays, S, inv_s = o.shape[0], 16, 20.0
    nr, fr = near[:n_rays].clamp(max=6.0), far[:n_rays].clamp(max=6.0)
    t = torch.linspace(0.0, 1.0, S)
    z = nr[:, None] * (1 - t) + fr[:, None] * t
    pts = o[:, None, :] + d[:, None, :] * z[..., None]
    sdf = (pts - center).norm(dim=-1) - radius
    sigma = inv_s * torch.sigmoid(-sdf * inv_s)
    delta = torch.cat([z[:, 1:] - z[:, :-1], torch.full((n_rays, 1), 1e10)], -1)
    alpha = 1 - torch.exp(-sigma * delta)
    T = torch.cumprod(torch.cat([torch.ones(n_rays, 1), 1 - alpha + 1e-10], -1), -1)[:, :-1]
    wts = alpha * T
    depth = (wts * z).sum(-1) / wts.sum(-1).clamp(min=1e-6)
    depth[~hit[:n_rays]] = 0.0
    depth.sum().backward()
    return {"rays_o": rays_o, "rays_d": rays_d, "ndc_o": ndc_o, "ndc_d": ndc_d, "near": near,
            "far": far, "hit": hit, "depth": depth, "center_grad": center.grad,
            "radius_grad": radius.grad}  # fmt: skip


@program
def inf_packed_rays_occupancy_grid_sh_radiance(torch):
    # nerfacc / instant-ngp style packed rendering: an occupancy grid (bool volume) culls marched
    # samples, nonzero(as_tuple=True) gives ray indices, per-ray exclusive sums from a global
    # cumsum minus chunk starts (bincount + cumsum), trunc_exp as a custom autograd.Function,
    # degree-2 spherical-harmonics colour (Plenoxels' eval_sh), accumulation with index_add_, and
    # an EMA update of the density grid with torch.maximum; fitted with Adam
    nn, F = torch.nn, torch.nn.functional

    class _TruncExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.exp(x)

        @staticmethod
        def backward(ctx, g):
            x = ctx.saved_tensors[0]
            return g * torch.exp(x.clamp(-15, 15))

    trunc_exp = _TruncExp.apply
    C0, C1 = 0.28209479177387814, 0.4886025119029199
    C2 = [1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
          0.5462742152960396]  # fmt: skip

    def eval_sh(deg, sh, dirs):
        result = C0 * sh[..., 0]
        if deg > 0:
            x, y, z = dirs[..., 0:1], dirs[..., 1:2], dirs[..., 2:3]
            result = result - C1 * y * sh[..., 1] + C1 * z * sh[..., 2] - C1 * x * sh[..., 3]
            if deg > 1:
                xx, yy, zz = x * x, y * y, z * z
                xy, yz, xz = x * y, y * z, x * z
                result = (result + C2[0] * xy * sh[..., 4] + C2[1] * yz * sh[..., 5]
                          + C2[2] * (2.0 * zz - xx - yy) * sh[..., 6] + C2[3] * xz * sh[..., 7]
                          + C2[4] * (xx - yy) * sh[..., 8])  # fmt: skip
        return result

    class Field(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1 + 3 * 9))

        def forward(self, x, d):
            h = self.net(x)
            sigma = trunc_exp(h[..., 0] - 1.0)
            sh = h[..., 1:].view(-1, 3, 9)
            rgb = torch.sigmoid(eval_sh(2, sh, d))
            return sigma, rgb

    R, S, res = 6, 12, 4
    rays_o = torch.tensor(arr(100, R, 3, scale=0.2)) + torch.tensor([0.0, 0.0, 2.0])
    rays_d = F.normalize(
        torch.tensor(arr(101, R, 3, scale=0.1)) + torch.tensor([0.0, 0.0, -1.0]), dim=-1
    )
    occ = torch.tensor(_uniform(102, res, res, res) > 0.35)
    occ[0, 0, 0] = False
    field = set_weights(torch, Field(), seed=103)
    opt = torch.optim.Adam(field.parameters(), lr=1e-2, eps=1e-15)
    target = torch.tensor(_uniform(104, R, 3))
    step_size = 4.0 / S
    t_starts_all = 0.5 + torch.arange(S, dtype=torch.float32)[None] * step_size + torch.zeros(R, 1)
    t_mid_all = t_starts_all + 0.5 * step_size
    x_mid = rays_o[:, None] + rays_d[:, None] * t_mid_all[..., None]
    inside = ((x_mid > -1) & (x_mid < 1)).all(-1)
    cell = ((x_mid + 1) / 2 * res).long().clamp(0, res - 1)
    keep = inside & occ[cell[..., 0], cell[..., 1], cell[..., 2]]
    ray_indices, sample_ids = torch.nonzero(keep, as_tuple=True)
    t_starts, t_ends = t_starts_all[keep], t_starts_all[keep] + step_size
    counts = torch.bincount(ray_indices, minlength=R)
    chunk_starts = torch.cumsum(counts, 0) - counts

    def exclusive_sum(x):
        cs = torch.cumsum(x, 0)
        cs0 = torch.cat([cs.new_zeros(1), cs])
        return cs0[:-1] - cs0[chunk_starts][ray_indices]

    losses = []
    for step in range(3):
        positions = rays_o[ray_indices] + rays_d[ray_indices] * ((t_starts + t_ends) / 2)[:, None]
        sigmas, rgbs = field(positions, rays_d[ray_indices])
        sigmas_dt = sigmas * (t_ends - t_starts)
        trans = torch.exp(-exclusive_sum(sigmas_dt))
        alphas = 1.0 - torch.exp(-sigmas_dt)
        weights = trans * alphas
        colors = torch.zeros(R, 3).index_add_(0, ray_indices, weights[:, None] * rgbs)
        opacities = torch.zeros(R).index_add_(0, ray_indices, weights)
        depths = torch.zeros(R).index_add_(0, ray_indices, weights * (t_starts + t_ends) / 2)
        colors = colors + (1.0 - opacities[:, None]) * torch.tensor([1.0, 1.0, 1.0])
        loss = F.smooth_l1_loss(colors, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == 0:
            first = {"weights": weights, "trans": trans, "colors": colors, "opacity": opacities,
                     "depth": depths}  # fmt: skip
    # occupancy grid EMA with the field's density at cell centres
    with torch.no_grad():
        ii = torch.stack(torch.meshgrid(*[torch.arange(res)] * 3, indexing="ij"), -1).view(-1, 3)
        centres = (ii.float() + 0.5) / res * 2 - 1
        dens = torch.zeros(res**3)
        new_dens, _ = field(centres, F.normalize(centres, dim=-1))
        dens = torch.maximum(dens * 0.95, new_dens)
        thresh = min(dens.mean().item(), 0.01)
        occ_new = (dens > thresh).view(res, res, res)
    return {"ray_indices": ray_indices, "sample_ids": sample_ids, "counts": counts,
            "chunk_starts": chunk_starts, "first": first, "losses": losses, "dens": dens,
            "occ_new": occ_new, "grads": grads(field)}  # fmt: skip


@program
def inf_gaussian_splat_2d_rasteriser_alpha_blending(torch):
    # a 2-d Gaussian-splat rasteriser as gsplat / 3DGS tutorials write it in PyTorch: rotation and
    # scale to a covariance (R S S^T R^T), the conic from the closed-form 2x2 inverse, 3-sigma radii
    # from the larger eigenvalue, depth order by argsort, per-pixel power with the power > 0 and
    # alpha < 1/255 culls, alpha capped at 0.99, front-to-back blending with exclusive cumprod and
    # a background; means, scales, rotations, opacities and colours fitted with Adam
    nn, F = torch.nn, torch.nn.functional
    N, H, W = 7, 8, 9
    g = np.random.default_rng(110)
    means = nn.Parameter(
        torch.tensor(
            np.stack([g.uniform(1, W - 1, N), g.uniform(1, H - 1, N)], 1).astype(np.float32)
        )
    )
    log_scales = nn.Parameter(torch.tensor(g.uniform(0.0, 0.8, (N, 2)).astype(np.float32)))
    rots = nn.Parameter(torch.tensor(g.uniform(-math.pi, math.pi, N).astype(np.float32)))
    opacity_logits = nn.Parameter(torch.tensor(g.uniform(-1, 2, N).astype(np.float32)))
    color_logits = nn.Parameter(torch.tensor(g.standard_normal((N, 3)).astype(np.float32)))
    depths = torch.tensor(g.permutation(N).astype(np.float32))
    bg = torch.tensor([0.1, 0.1, 0.1])
    target = torch.tensor(_uniform(111, H, W, 3))

    ys, xs = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    pix = torch.stack([xs, ys], -1).float().view(-1, 2) + 0.5

    def rasterize():
        c, s = torch.cos(rots), torch.sin(rots)
        Rm = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
        Sm = torch.diag_embed(torch.exp(log_scales))
        M = Rm @ Sm
        cov = M @ M.transpose(-1, -2)
        a, b, cc = cov[:, 0, 0] + 0.3, cov[:, 0, 1], cov[:, 1, 1] + 0.3  # low-pass dilation
        det = a * cc - b * b
        conic = torch.stack([cc / det, -b / det, a / det], -1)
        mid = 0.5 * (a + cc)
        lambda1 = mid + torch.sqrt(torch.clamp(mid * mid - det, min=0.1))
        radius = torch.ceil(3.0 * torch.sqrt(lambda1))
        order = torch.argsort(depths)
        mu, con = means[order], conic[order]
        opac, col = torch.sigmoid(opacity_logits[order]), torch.sigmoid(color_logits[order])
        dxy = pix[:, None, :] - mu[None]
        power = (-0.5 * (con[:, 0] * dxy[..., 0] ** 2 + con[:, 2] * dxy[..., 1] ** 2)
                 - con[:, 1] * dxy[..., 0] * dxy[..., 1])  # fmt: skip
        alpha = torch.clamp(opac[None] * torch.exp(power), max=0.99)
        in_box = (dxy.abs() <= radius[order][None, :, None]).all(-1)
        alpha = torch.where(
            (power <= 0) & (alpha >= 1.0 / 255.0) & in_box, alpha, torch.zeros_like(alpha)
        )
        T = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha], 1), 1)
        weights = alpha * T[:, :-1]
        img = weights @ col + T[:, -1:] * bg
        return img.view(H, W, 3), radius, weights, cov

    params_ = [means, log_scales, rots, opacity_logits, color_logits]
    opt = torch.optim.Adam([{"params": [means], "lr": 0.05}, {"params": params_[1:], "lr": 0.02}])
    losses = []
    for step in range(4):
        opt.zero_grad()
        img, radius, weights, cov = rasterize()
        l1 = (img - target).abs().mean()
        loss = 0.8 * l1 + 0.2 * F.mse_loss(img, target)
        loss.backward()
        if step == 0:
            first = {"img": img, "radius": radius, "cov": cov, "n_contrib": (weights > 0).sum(1),
                     "means_grad": means.grad.clone(), "rots_grad": rots.grad.clone()}  # fmt: skip
        opt.step()
        losses.append(loss.item())
    return {"first": first, "losses": losses, "means": means, "log_scales": log_scales,
            "opacity": opacity_logits, "eig": torch.linalg.eigvalsh(cov.detach())}  # fmt: skip


@program
def inf_mipnerf360_contraction_distortion_interlevel(torch):
    # mip-NeRF 360: the scene contraction (where over |x| <= 1 with a clamped norm), s-space
    # spacing by the inverse function, the distortion loss in its O(n^2) form and the O(n) cumsum
    # form, the interlevel loss through outer() built on searchsorted(side="right") and
    # take_along_dim, a proposal MLP and a NeRF MLP fitted together (proposal sees detached weights)
    nn, F = torch.nn, torch.nn.functional
    eps = torch.finfo(torch.float32).eps

    def contract(x):
        x_mag_sq = torch.sum(x**2, dim=-1, keepdim=True).clamp_min(eps)
        z = torch.where(x_mag_sq <= 1, x, ((2 * torch.sqrt(x_mag_sq) - 1) / x_mag_sq) * x)
        return z

    def lossfun_distortion(t, w):
        ut = (t[..., 1:] + t[..., :-1]) / 2
        dut = torch.abs(ut[..., :, None] - ut[..., None, :])
        loss_inter = torch.sum(w * torch.sum(w[..., None, :] * dut, dim=-1), dim=-1)
        loss_intra = torch.sum(w**2 * (t[..., 1:] - t[..., :-1]), dim=-1) / 3
        return loss_inter + loss_intra

    def distortion_cumsum(t, w):
        m = (t[..., 1:] + t[..., :-1]) / 2
        interval = t[..., 1:] - t[..., :-1]
        w_cs = torch.cumsum(w, -1)
        wm_cs = torch.cumsum(w * m, -1)
        w_ex = torch.cat([torch.zeros_like(w[..., :1]), w_cs[..., :-1]], -1)
        wm_ex = torch.cat([torch.zeros_like(w[..., :1]), wm_cs[..., :-1]], -1)
        loss_bi = 2 * torch.sum(w * (m * w_ex - wm_ex), -1)
        loss_uni = torch.sum(w**2 * interval, -1) / 3
        return loss_bi + loss_uni

    def outer(t0, t1, y1):
        cy1 = torch.cat([torch.zeros_like(y1[..., :1]), torch.cumsum(y1, dim=-1)], dim=-1)
        idx_lo = (
            torch.searchsorted(t1[..., :-1].contiguous(), t0[..., :-1].contiguous(), side="right")
            - 1
        )
        idx_lo = torch.clamp(idx_lo, min=0, max=y1.shape[-1] - 1)
        idx_hi = torch.searchsorted(
            t1[..., 1:].contiguous(), t0[..., 1:].contiguous(), side="right"
        )
        idx_hi = torch.clamp(idx_hi, min=0, max=y1.shape[-1] - 1)
        cy1_lo = torch.take_along_dim(cy1[..., :-1], idx_lo, dim=-1)
        cy1_hi = torch.take_along_dim(cy1[..., 1:], idx_hi, dim=-1)
        return cy1_hi - cy1_lo

    def lossfun_outer(t, w, t_env, w_env):
        w_outer = outer(t, t_env, w_env)
        return torch.clip(w - w_outer, min=0) ** 2 / (w + eps)

    R, Sp, Sn, near, far = 4, 8, 6, 0.5, 20.0
    rays_o = torch.tensor(arr(120, R, 3, scale=0.3))
    rays_d = F.normalize(torch.tensor(arr(121, R, 3)), dim=-1)
    target = torch.tensor(_uniform(122, R, 3))
    fn, fn_inv = (lambda x: 1 / x), (lambda x: 1 / x)
    s_near, s_far = fn(torch.tensor(near)), fn(torch.tensor(far))
    t_to_s = lambda t: (fn(t) - s_near) / (s_far - s_near)  # noqa: E731
    s_to_t = lambda s: fn_inv(s * s_far + (1 - s) * s_near)  # noqa: E731
    prop = set_weights(
        torch, nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1)), seed=123
    )
    nerf = set_weights(
        torch, nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 4)), seed=124
    )
    opt = torch.optim.Adam(list(prop.parameters()) + list(nerf.parameters()), lr=5e-3)

    def weights_of(density, t):
        delta = (t[..., 1:] - t[..., :-1]) * rays_d.norm(dim=-1, keepdim=True)
        density_delta = density * delta
        alpha = 1 - torch.exp(-density_delta)
        trans = torch.exp(-torch.cat([torch.zeros_like(density_delta[..., :1]),
                                      torch.cumsum(density_delta[..., :-1], dim=-1)], dim=-1))  # fmt: skip
        return alpha * trans

    out = {"loss": [], "dist": [], "inter": []}
    for step in range(3):
        s_prop = torch.linspace(0.0, 1.0, Sp + 1).expand(R, Sp + 1)
        t_prop = s_to_t(s_prop)
        mids = 0.5 * (t_prop[..., 1:] + t_prop[..., :-1])
        x_prop = contract(rays_o[:, None] + rays_d[:, None] * mids[..., None])
        w_prop = weights_of(F.softplus(prop(x_prop)[..., 0] - 1.0), t_prop)
        # resample the nerf intervals in s-space at fixed cdf levels
        with torch.no_grad():
            cdf = torch.cumsum(w_prop + 1e-3, -1)
            cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf / cdf[..., -1:]], -1)
            u = torch.linspace(0.0, 1.0, Sn + 1).expand(R, Sn + 1).contiguous()
            idx = torch.searchsorted(cdf, u, right=True).clamp(1, Sp)
            c0, c1 = cdf.gather(-1, idx - 1), cdf.gather(-1, idx)
            s0, s1 = s_prop.gather(-1, idx - 1), s_prop.gather(-1, idx)
            s_nerf = s0 + (u - c0) / (c1 - c0).clamp(min=1e-8) * (s1 - s0)
            t_nerf = s_to_t(s_nerf)
        mids_n = 0.5 * (t_nerf[..., 1:] + t_nerf[..., :-1])
        h = nerf(contract(rays_o[:, None] + rays_d[:, None] * mids_n[..., None]))
        w_nerf = weights_of(F.softplus(h[..., 0]), t_nerf)
        rgb = (w_nerf[..., None] * torch.sigmoid(h[..., 1:])).sum(-2)
        dist = lossfun_distortion(t_to_s(t_nerf), w_nerf).mean()
        inter = lossfun_outer(t_nerf, w_nerf.detach(), t_prop, w_prop).mean()
        loss = F.mse_loss(rgb, target) + 0.01 * dist + inter
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["loss"].append(loss.item())
        out["dist"].append(dist.detach())
        out["inter"].append(inter.detach())
        if step == 0:
            out["first"] = {"t_nerf": t_nerf, "w_prop": w_prop, "w_nerf": w_nerf,
                            "dist_cumsum": distortion_cumsum(t_to_s(t_nerf), w_nerf).detach(),
                            "dist_quadratic": lossfun_distortion(t_to_s(t_nerf), w_nerf).detach(),
                            "outer": outer(t_nerf, t_prop, w_prop).detach()}  # fmt: skip
    pts = torch.tensor([[0.3, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, -4.0, 0.0], [0.0, 0.0, 0.0]],
                       requires_grad=True)  # fmt: skip
    z = contract(pts)
    z.sum().backward()
    out.update({"contract": z, "contract_grad": pts.grad, "prop_grads": grads(prop)})
    return out


@program
def inf_neus_and_volsdf_sdf_to_density(torch):
    # NeuS: SDFNetwork gradient by autograd.grad(create_graph=True), SingleVarianceNetwork
    # (exp(10 * variance)), the cos-annealed estimated prev / next SDFs, alpha from sigmoid CDFs
    # clipped to [0, 1], weights by cumprod with 1e-7, eikonal gradient_error; VolSDF's Laplace
    # density (0.5 + 0.5 sign(s) expm1(-|s| / beta)) with a learnable beta; fitted with Adam
    nn, F = torch.nn, torch.nn.functional

    class SDFNetwork(nn.Module):
        def __init__(self, d_hidden=16, n_feat=4):
            super().__init__()
            self.lin0 = nn.Linear(3, d_hidden)
            self.lin1 = nn.Linear(d_hidden, d_hidden)
            self.lin2 = nn.Linear(d_hidden, 1 + n_feat)
            self.activation = nn.Softplus(beta=100)

        def forward(self, x):
            return self.lin2(self.activation(self.lin1(self.activation(self.lin0(x)))))

        def sdf(self, x):
            return self.forward(x)[:, :1]

        def gradient(self, x):
            x.requires_grad_(True)
            y = self.sdf(x)
            d_output = torch.ones_like(y, requires_grad=False)
            gradients = torch.autograd.grad(outputs=y, inputs=x, grad_outputs=d_output,
                                            create_graph=True, retain_graph=True, only_inputs=True)[0]  # fmt: skip
            return gradients.unsqueeze(1)

    class SingleVarianceNetwork(nn.Module):
        def __init__(self, init_val):
            super().__init__()
            self.register_parameter("variance", nn.Parameter(torch.tensor(init_val)))

        def forward(self, x):
            return torch.ones([len(x), 1]) * torch.exp(self.variance * 10.0)

    class LaplaceDensity(nn.Module):
        def __init__(self, beta=0.1, beta_min=1e-4):
            super().__init__()
            self.beta = nn.Parameter(torch.tensor(beta))
            self.beta_min = torch.tensor(beta_min)

        def forward(self, sdf):
            beta = self.beta.abs() + self.beta_min
            alpha = 1 / beta
            return alpha * (0.5 + 0.5 * sdf.sign() * torch.expm1(-sdf.abs() / beta))

    sdf_net = set_weights(torch, SDFNetwork(), seed=130)
    with torch.no_grad():
        sdf_net.lin2.bias[0] = -0.3
    deviation = SingleVarianceNetwork(0.3)
    color_net = set_weights(
        torch, nn.Sequential(nn.Linear(3 + 3 + 4 + 3, 16), nn.ReLU(), nn.Linear(16, 3)), seed=131
    )
    laplace = LaplaceDensity()
    params_ = (
        list(sdf_net.parameters()) + list(deviation.parameters()) + list(color_net.parameters())
    )
    opt = torch.optim.Adam(params_ + list(laplace.parameters()), lr=5e-3)
    R, S = 4, 8
    rays_o = torch.tensor(arr(132, R, 3, scale=0.1)) + torch.tensor([0.0, 0.0, 1.5])
    rays_d = F.normalize(
        torch.tensor(arr(133, R, 3, scale=0.2)) + torch.tensor([0.0, 0.0, -1.0]), dim=-1
    )
    z_vals = _stratified(torch, 0.5, 2.5, R, S, 134)
    target = torch.tensor(_uniform(135, R, 3))
    sample_dist = 2.0 / S
    out = {"loss": [], "eik": [], "inv_s": []}
    for step in range(3):
        cos_anneal_ratio = min(1.0, step / 4)
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.Tensor([sample_dist]).expand(dists[..., :1].shape)], -1)
        mid_z_vals = z_vals + dists * 0.5
        pts = (rays_o[:, None, :] + rays_d[:, None, :] * mid_z_vals[..., :, None]).reshape(-1, 3)
        dirs = rays_d[:, None, :].expand(R, S, 3).reshape(-1, 3)
        sdf_nn_output = sdf_net(pts)
        sdf, feature = sdf_nn_output[:, :1], sdf_nn_output[:, 1:]
        gradients = sdf_net.gradient(pts).squeeze()
        sampled_color = torch.sigmoid(
            color_net(torch.cat([pts, gradients, feature, dirs], -1))
        ).reshape(R, S, 3)
        inv_s = deviation(torch.zeros([1, 3]))[:, :1].clip(1e-6, 1e6)
        inv_s = inv_s.expand(R * S, 1)
        true_cos = (dirs * gradients).sum(-1, keepdim=True)
        iter_cos = -(
            F.relu(-true_cos * 0.5 + 0.5) * (1.0 - cos_anneal_ratio)
            + F.relu(-true_cos) * cos_anneal_ratio
        )
        estimated_next_sdf = sdf + iter_cos * dists.reshape(-1, 1) * 0.5
        estimated_prev_sdf = sdf - iter_cos * dists.reshape(-1, 1) * 0.5
        prev_cdf = torch.sigmoid(estimated_prev_sdf * inv_s)
        next_cdf = torch.sigmoid(estimated_next_sdf * inv_s)
        p, c = prev_cdf - next_cdf, prev_cdf
        alpha = ((p + 1e-5) / (c + 1e-5)).reshape(R, S).clip(0.0, 1.0)
        weights = (
            alpha
            * torch.cumprod(torch.cat([torch.ones([R, 1]), 1.0 - alpha + 1e-7], -1), -1)[:, :-1]
        )
        color = (sampled_color * weights[:, :, None]).sum(dim=1)
        gradient_error = (
            (torch.linalg.norm(gradients.reshape(R, S, 3), ord=2, dim=-1) - 1.0) ** 2
        ).mean()
        # VolSDF's density on the same SDF values, rendered by exp(-cumsum)
        density = laplace(sdf.reshape(R, S))
        free_energy = dists * density
        shifted = torch.cat([torch.zeros(R, 1), free_energy[:, :-1]], dim=-1)
        vol_w = (1 - torch.exp(-free_energy)) * torch.exp(-torch.cumsum(shifted, dim=-1))
        vol_color = (sampled_color * vol_w[..., None]).sum(1)
        loss = F.l1_loss(color, target) + 0.1 * gradient_error + 0.5 * F.l1_loss(vol_color, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["loss"].append(loss.item())
        out["eik"].append(gradient_error.detach())
        out["inv_s"].append(inv_s[0, 0].detach())
        if step == 0:
            out["first"] = {"alpha": alpha, "weights": weights, "color": color, "vol_w": vol_w,
                            "density": density, "gradients": gradients,
                            "variance_grad": deviation.variance.grad.clone(),
                            "beta_grad": laplace.beta.grad.clone()}  # fmt: skip
    out["sdf_grads"] = grads(sdf_net)
    out["beta"] = laplace.beta.detach()
    return out
