"""Motion and trajectory forecasting as the reference code of Social-LSTM, Social-GAN, Trajectron++,
VectorNet, MTR and Wayformer writes it: relative displacement encodings integrated back with
``cumsum``, social pooling grids filled with ``scatter_add_``/``index_add_``, polyline subgraph
encoders max-pooled over their points, multimodal bivariate Gaussian mixture heads (softplus or
exp std, correlation through ``tanh``), winner-takes-all (min-of-K) ADE/FDE losses with ``argmin``
and ``gather``, goal-conditioned sampling from fixed NumPy noise, agent-centric frames rotated
with ``atan2``/``cos``/``sin``, trajectory non-maximum suppression by endpoint distance, and a few
training steps of small forecasters."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _scene(seed: int, n_agents: int, T: int, dt: float = 0.4) -> np.ndarray:
    """Smooth pedestrian-like tracks ``(n_agents, T, 2)``: a start, a heading, a speed, a turn."""
    g = _rng(seed)
    start = g.uniform(-6.0, 6.0, (n_agents, 1, 2))
    heading = g.uniform(-math.pi, math.pi, (n_agents, 1))
    speed = g.uniform(0.8, 1.6, (n_agents, 1))
    turn = g.normal(0.0, 0.08, (n_agents, 1))
    t = np.arange(T)[None, :]
    ang = heading + turn * t
    vel = np.stack([np.cos(ang), np.sin(ang)], -1) * speed[..., None] * dt
    vel = vel + g.normal(0.0, 0.02, vel.shape)
    pos = start + np.cumsum(vel, axis=1)
    return pos.astype(np.float32)


def _ade_fde(torch, pred, gt):
    """``pred (B, K, T, 2)``, ``gt (B, T, 2)`` -> per-mode ADE and FDE ``(B, K)``."""
    dist = torch.norm(pred - gt.unsqueeze(1), dim=-1)
    return dist.mean(-1), dist[..., -1]


@program(rtol=5e-4, atol=5e-5)
def traj_social_lstm_relative_displacement_rollout(torch):
    """Social-GAN's encoder/decoder on relative displacements: observed absolute tracks become
    steps with ``obs[:, 1:] - obs[:, :-1]`` (zeros for the first), a spatial embedding
    ``Linear -> ReLU`` feeds an ``nn.LSTM`` (seq-first) encoder, and an ``LSTMCell`` decoder rolls
    out future displacements autoregressively; ``relative_to_abs`` integrates them with ``cumsum``
    from the last observed position. Teacher-forced L2 loss, its backward and the grads."""
    nn = torch.nn
    obs_len, pred_len, N, H = 8, 6, 5, 16
    track = torch.tensor(_scene(3, N, obs_len + pred_len))
    obs, fut = track[:, :obs_len], track[:, obs_len:]
    obs_rel = torch.zeros_like(obs)
    obs_rel[:, 1:] = obs[:, 1:] - obs[:, :-1]
    fut_rel = fut - torch.cat([obs[:, -1:], fut[:, :-1]], 1)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.spatial_embedding = nn.Linear(2, 8)
            self.encoder = nn.LSTM(8, H, 1)

        def forward(self, obs_traj_rel):  # (seq, batch, 2)
            emb = torch.relu(self.spatial_embedding(obs_traj_rel.reshape(-1, 2)))
            emb = emb.view(-1, obs_traj_rel.size(1), 8)
            _, (h, c) = self.encoder(emb)
            return h, c

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.spatial_embedding = nn.Linear(2, 8)
            self.cell = nn.LSTMCell(8, H)
            self.hidden2pos = nn.Linear(H, 2)

        def forward(self, last_pos, last_pos_rel, h, c, seq_len):
            preds = []
            inp = torch.relu(self.spatial_embedding(last_pos_rel))
            for _ in range(seq_len):
                h, c = self.cell(inp, (h, c))
                rel = self.hidden2pos(h)
                curr = rel + last_pos
                preds.append(rel)
                inp = torch.relu(self.spatial_embedding(rel))
                last_pos = curr
            return torch.stack(preds, 0)

    enc, dec = set_weights(torch, Encoder(), 1), set_weights(torch, Decoder(), 2)
    h, c = enc(obs_rel.permute(1, 0, 2))
    pred_rel = dec(obs[:, -1], obs_rel[:, -1], h[0], c[0], pred_len)  # (pred_len, N, 2)

    def relative_to_abs(rel_traj, start_pos):
        rel_traj = rel_traj.permute(1, 0, 2)
        displacement = torch.cumsum(rel_traj, dim=1)
        return (displacement + start_pos.unsqueeze(1)).permute(1, 0, 2)

    pred_abs = relative_to_abs(pred_rel, obs[:, -1])
    loss = ((pred_rel - fut_rel.permute(1, 0, 2)) ** 2).sum(-1).mean()
    loss.backward()
    return {"obs_rel": obs_rel, "fut_rel": fut_rel, "h_enc": h, "pred_rel": pred_rel,
            "pred_abs": pred_abs, "loss": loss, "enc_grads": grads(enc), "dec_grads": grads(dec),
            "speed": obs_rel[:, 1:].norm(dim=-1).mean(1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_social_pooling_grid_scatter_add(torch):
    """Social-LSTM's occupancy/social tensor: for every ordered pair of agents, the neighbour's
    offset in a ``G x G`` grid of cell size ``s`` around the ego agent (``floor``), a mask of
    neighbours inside the grid and not the ego itself, a flat cell index, and the neighbours'
    hidden states summed into ``(N, G*G, H)`` with ``scatter_add_``; the same grid with
    ``index_add_`` on a flattened (ego, cell) index and an occupancy map from ``bincount``; then
    the embedding ``Linear(G*G*H, E) -> ReLU`` and its gradient back to the hidden states."""
    N, H, G, cell = 7, 6, 4, 1.5
    pos = torch.tensor(_rng(11).uniform(-3.5, 3.5, (N, 2)).astype(np.float32))
    hidden = torch.tensor(arr(12, N, H), requires_grad=True)
    rel = pos.unsqueeze(0) - pos.unsqueeze(1)  # rel[i, j] = pos_j - pos_i
    grid_xy = torch.floor(rel / cell + G / 2).long()
    inside = ((grid_xy >= 0) & (grid_xy < G)).all(-1)
    not_self = ~torch.eye(N, dtype=torch.bool)
    mask = inside & not_self
    cell_idx = grid_xy[..., 0] + grid_xy[..., 1] * G
    cell_idx = torch.where(mask, cell_idx, torch.zeros_like(cell_idx))
    contrib = hidden.unsqueeze(0).expand(N, N, H) * mask.unsqueeze(-1).float()
    social = torch.zeros(N, G * G, H)
    social.scatter_add_(1, cell_idx.unsqueeze(-1).expand(N, N, H), contrib)

    ego, nb = mask.nonzero(as_tuple=True)
    flat = ego * (G * G) + cell_idx[ego, nb]
    social2 = torch.zeros(N * G * G, H).index_add_(0, flat, hidden[nb]).view(N, G * G, H)
    occupancy = torch.bincount(flat, minlength=N * G * G).view(N, G, G)

    emb = torch.nn.Linear(G * G * H, 8)
    set_weights(torch, emb, 13)
    out = torch.relu(emb(social.view(N, -1)))
    out.pow(2).sum().backward()
    return {"grid_xy": grid_xy, "mask": mask, "cell_idx": cell_idx, "social": social,
            "index_add_matches": torch.allclose(social, social2, atol=1e-6), "occupancy": occupancy,
            "n_neighbours": mask.sum(1), "embedded": out, "hidden_grad": hidden.grad,
            "emb_grad": emb.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_vectornet_polyline_subgraph_global_attention(torch):
    """VectorNet: map lanes and agent histories as vectors ``[x_s, y_s, x_e, y_e, attr, id]``
    padded to ``(P, V, C)`` with a validity mask; three subgraph layers each ``Linear ->
    LayerNorm -> ReLU`` then concatenating every node with the polyline's max-pooled feature
    (invalid points filled with ``-inf`` before ``max``); the polyline feature is the final max
    pool, L2-normalised; one global self-attention layer (scaled dot-product with a padding
    mask, ``softmax``) and a node-completion target for the masked polyline."""
    nn, F = torch.nn, torch.nn.functional
    P, V, C, D = 5, 6, 6, 16
    g = _rng(21)
    lengths = [6, 4, 5, 3, 6]
    pts = np.zeros((P, V + 1, 2), np.float32)
    for p in range(P):
        start = g.uniform(-5, 5, 2)
        direction = g.normal(0, 1, 2)
        pts[p] = start + np.arange(V + 1)[:, None] * direction[None] * 0.7
    vectors = np.zeros((P, V, C), np.float32)
    vectors[..., 0:2] = pts[:, :-1]
    vectors[..., 2:4] = pts[:, 1:]
    vectors[..., 4] = g.integers(0, 3, (P, 1))
    vectors[..., 5] = np.arange(P)[:, None]
    valid_np = np.arange(V)[None, :] < np.array(lengths)[:, None]
    vectors[~valid_np] = 0.0
    x = torch.tensor(vectors)
    valid = torch.tensor(valid_np)

    class SubGraphLayer(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.mlp = nn.Linear(cin, cout)
            self.norm = nn.LayerNorm(cout)

        def forward(self, x, valid):
            h = F.relu(self.norm(self.mlp(x)))
            pooled = h.masked_fill(~valid.unsqueeze(-1), float("-inf")).max(dim=1, keepdim=True)[0]
            return torch.cat([h, pooled.expand_as(h)], -1)

    class VectorNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(
                [SubGraphLayer(C, D // 2), SubGraphLayer(D, D // 2), SubGraphLayer(D, D // 2)]
            )
            self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)

        def forward(self, x, valid, poly_mask):
            for layer in self.layers:
                x = layer(x, valid) * valid.unsqueeze(-1)
            poly = x.masked_fill(~valid.unsqueeze(-1), float("-inf")).max(dim=1)[0]
            poly = F.normalize(poly, p=2, dim=-1)
            poly_in = poly.masked_fill(~poly_mask.unsqueeze(-1), 0.0)
            q, k, v = self.q(poly_in), self.k(poly_in), self.v(poly_in)
            scores = q @ k.transpose(0, 1) / math.sqrt(D)
            scores = scores.masked_fill(~poly_mask.unsqueeze(0), float("-inf"))
            attn = torch.softmax(scores, dim=-1)
            return poly, attn, attn @ v

    net = set_weights(torch, VectorNet(), 22)
    poly_mask = torch.tensor([True, True, False, True, True])
    poly, attn, out = net(x, valid, poly_mask)
    completion = F.smooth_l1_loss(out[2], poly[2].detach())
    agent_loss = out[0].pow(2).mean()
    loss = completion + agent_loss
    loss.backward()
    return {"poly": poly, "attn": attn, "global": out, "completion": completion, "loss": loss,
            "grads": grads(net), "argmax_attn": attn.argmax(-1)}  # fmt: skip


def _bivariate_nll(torch, target, mu, log_sigma, rho):
    """Negative log-likelihood of ``target`` under ``N(mu, diag(sigma) R(rho) diag(sigma))``."""
    sigma = torch.exp(log_sigma)
    dx = (target[..., 0] - mu[..., 0]) / sigma[..., 0]
    dy = (target[..., 1] - mu[..., 1]) / sigma[..., 1]
    one_m_rho2 = 1 - rho**2
    z = dx**2 + dy**2 - 2 * rho * dx * dy
    return (
        log_sigma.sum(-1)
        + 0.5 * torch.log(one_m_rho2)
        + z / (2 * one_m_rho2)
        + math.log(2 * math.pi)
    )


@program(rtol=5e-4, atol=5e-5)
def traj_gmm_head_bivariate_nll_logsumexp(torch):
    """A multimodal Gaussian mixture head as MultiPath and Social-LSTM write it: a ``Linear`` from
    the agent encoding to ``K x T x 5`` (``mu_x, mu_y, sigma_x, sigma_y, rho``) plus ``K`` mode
    logits; ``exp`` std clamped in log space, ``tanh`` correlation scaled away from +-1; the
    bivariate Gaussian NLL written out, the mixture NLL with ``log_softmax`` + ``logsumexp``,
    checked against ``distributions.MultivariateNormal`` with a ``scale_tril`` built from
    (sigma, rho); gradients into the head."""
    nn = torch.nn
    B, K, T, D = 3, 4, 5, 12
    feat = torch.tensor(arr(31, B, D))
    target = torch.tensor(np.cumsum(arr(32, B, T, 2, scale=0.5), axis=1))
    head = set_weights(torch, nn.Linear(D, K * T * 5 + K), 33)
    out = head(feat)
    params_, logits = out[:, : K * T * 5].view(B, K, T, 5), out[:, K * T * 5 :]
    mu = torch.cumsum(params_[..., 0:2], dim=2)
    log_sigma = params_[..., 2:4].clamp(min=-4.0, max=3.0)
    rho = 0.95 * torch.tanh(params_[..., 4])
    nll = _bivariate_nll(torch, target.unsqueeze(1), mu, log_sigma, rho)  # (B, K, T)
    log_pi = torch.log_softmax(logits, dim=-1)
    mixture_nll = -torch.logsumexp(log_pi - nll.sum(-1), dim=-1)
    loss = mixture_nll.mean()
    loss.backward()

    sigma = log_sigma.exp()
    L = torch.zeros(B, K, T, 2, 2)
    L[..., 0, 0] = sigma[..., 0]
    L[..., 1, 0] = rho * sigma[..., 1]
    L[..., 1, 1] = sigma[..., 1] * torch.sqrt(1 - rho**2)
    dist = torch.distributions.MultivariateNormal(mu, scale_tril=L)
    ref = -dist.log_prob(target.unsqueeze(1))
    responsibilities = torch.softmax(log_pi - nll.sum(-1), dim=-1)
    return {"mu": mu, "sigma": sigma, "rho": rho, "nll": nll, "log_pi": log_pi,
            "mixture_nll": mixture_nll, "loss": loss, "ref_matches": torch.allclose(ref, nll, atol=1e-4),
            "ref_nll": ref.detach(), "responsibilities": responsibilities,
            "head_grad": head.weight.grad, "head_bias_grad": head.bias.grad}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def traj_trajectron_gmm2d_velocity_integration(torch):
    """Trajectron++'s GMM2D: the decoder emits per-step log mixture weights, means, log sigmas and
    correlations of *velocities* (``tanh`` correlations, ``log_sigmas`` clipped), the
    mixture is wrapped as ``MixtureSameFamily(Categorical, MultivariateNormal)`` over
    ``(B, T)``; its ``log_prob`` of the ground-truth velocities, the mode (most likely
    component's mean) integrated to positions with ``cumsum * dt`` plus the current position,
    the mixture's mean, and samples reparameterised from fixed NumPy noise
    (component picked by inverse-CDF of ``cumsum`` of the weights with ``searchsorted``)."""
    nn, D = torch.nn, torch.distributions
    B, T, K, H, dt = 2, 6, 3, 10, 0.4
    x = torch.tensor(arr(41, B, H))
    vel_gt = torch.tensor(arr(42, B, T, 2, scale=0.6))
    proj = set_weights(torch, nn.Linear(H, T * K * 6), 43)
    raw = proj(x).view(B, T, K, 6)
    log_pis = torch.log_softmax(raw[..., 0], dim=-1)
    mus = raw[..., 1:3]
    log_sigmas = raw[..., 3:5].clamp(min=-5.0, max=2.0)
    corrs = torch.tanh(raw[..., 5]) * 0.9
    sigmas = torch.exp(log_sigmas)
    cov = torch.stack(
        [
            torch.stack([sigmas[..., 0] ** 2, corrs * sigmas[..., 0] * sigmas[..., 1]], -1),
            torch.stack([corrs * sigmas[..., 0] * sigmas[..., 1], sigmas[..., 1] ** 2], -1),
        ],
        -2,
    )
    gmm = D.MixtureSameFamily(
        D.Categorical(logits=log_pis), D.MultivariateNormal(mus, covariance_matrix=cov)
    )
    log_p = gmm.log_prob(vel_gt)
    nll = -log_p.sum(-1).mean()
    nll.backward()

    current = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    best = log_pis.argmax(-1)
    mode_vel = torch.gather(mus, 2, best[..., None, None].expand(B, T, 1, 2)).squeeze(2)
    mode_pos = torch.cumsum(mode_vel, dim=1) * dt + current.unsqueeze(1)
    u = torch.tensor(_rng(44).uniform(0, 1, (B, T, 1)).astype(np.float32))
    cdf = torch.cumsum(log_pis.exp(), dim=-1).contiguous()
    comp = torch.searchsorted(cdf.detach(), u.contiguous()).clamp(max=K - 1).squeeze(-1)
    eps = torch.tensor(arr(45, B, T, 2))
    chol = torch.linalg.cholesky(cov)
    mu_c = torch.gather(mus, 2, comp[..., None, None].expand(B, T, 1, 2)).squeeze(2)
    L_c = torch.gather(chol, 2, comp[..., None, None, None].expand(B, T, 1, 2, 2)).squeeze(2)
    sample_vel = mu_c + (L_c @ eps.unsqueeze(-1)).squeeze(-1)
    sample_pos = torch.cumsum(sample_vel, dim=1) * dt + current.unsqueeze(1)
    return {"log_p": log_p, "nll": nll, "mode_pos": mode_pos, "components": comp,
            "mixture_mean": gmm.mean, "sample_pos": sample_pos, "proj_grad": proj.weight.grad,
            "chol": chol}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_wta_min_ade_fde_training(torch):
    """A multi-modal regression forecaster trained with winner-takes-all as in MTP/CoverNet and
    the Argoverse baselines: an MLP predicts ``K`` trajectories and mode logits; per-mode ADE,
    ``argmin`` picks the winner, ``gather`` extracts it, ``smooth_l1`` on the winner plus
    cross-entropy to the winner index; Adam for a few steps; then minADE/minFDE, the
    miss rate at 2 m, and brier-minFDE from ``softmax`` probabilities of the best-FDE mode."""
    nn, F = torch.nn, torch.nn.functional
    B, K, obs, T = 6, 3, 5, 6
    track = _scene(51, B, obs + T)
    origin = track[:, obs - 1 : obs]
    hist = torch.tensor(track[:, :obs] - origin)
    fut = torch.tensor(track[:, obs:] - origin)

    class MTP(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(
                nn.Linear(obs * 2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU()
            )
            self.traj = nn.Linear(32, K * T * 2)
            self.cls = nn.Linear(32, K)

        def forward(self, h):
            z = self.backbone(h.flatten(1))
            return self.traj(z).view(-1, K, T, 2), self.cls(z)

    model = set_weights(torch, MTP(), 52)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses, winners = [], []
    for _ in range(4):
        opt.zero_grad()
        pred, logits = model(hist)
        ade, _ = _ade_fde(torch, pred, fut)
        best = ade.argmin(dim=1)
        best_pred = pred.gather(1, best.view(B, 1, 1, 1).expand(B, 1, T, 2)).squeeze(1)
        reg = F.smooth_l1_loss(best_pred, fut)
        cls = F.cross_entropy(logits, best)
        loss = reg + 0.5 * cls
        loss.backward()
        opt.step()
        losses.append(loss.item())
        winners.append(best)
    with torch.no_grad():
        pred, logits = model(hist)
        ade, fde = _ade_fde(torch, pred, fut)
        min_ade, _ = ade.min(1)
        min_fde, fde_idx = fde.min(1)
        probs = F.softmax(logits, -1)
        brier = min_fde + (1 - probs.gather(1, fde_idx[:, None]).squeeze(1)) ** 2
        miss = (min_fde > 2.0).float().mean()
    return {"losses": losses, "winners": winners, "min_ade": min_ade, "min_fde": min_fde,
            "fde_idx": fde_idx, "brier_min_fde": brier, "miss_rate": miss,
            "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_agent_centric_rotation_frames(torch):
    """Agent-centric normalisation as MTR/Wayformer/HiVT preprocess scenes: each focal agent's
    heading from its last displacement with ``atan2``, a rotation matrix from ``cos``/``sin``,
    every other agent's history and the map points translated and rotated into that frame with
    ``einsum`` (batched over focal agents), headings wrapped to ``(-pi, pi]`` with
    ``atan2(sin, cos)``; a prediction made in the local frame rotated back to the global frame,
    and the round trip checked; relative heading and distance features for a lane-graph."""
    N, T, M = 4, 6, 7
    tracks = torch.tensor(_scene(61, N, T))
    map_pts = torch.tensor(_rng(62).uniform(-8, 8, (M, 2)).astype(np.float32))
    last = tracks[:, -1]
    disp = tracks[:, -1] - tracks[:, -2]
    theta = torch.atan2(disp[:, 1], disp[:, 0])
    c, s = torch.cos(theta), torch.sin(theta)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # local -> global
    # (x - origin) @ R: the global -> local map for row vectors
    local_tracks = torch.einsum("intd,ide->inte", tracks.unsqueeze(0) - last[:, None, None], rot)
    local_map = torch.matmul(map_pts.unsqueeze(0) - last[:, None], rot)
    agent_heading = torch.atan2(
        tracks[:, 1:, 1] - tracks[:, :-1, 1], tracks[:, 1:, 0] - tracks[:, :-1, 0]
    )
    rel_heading = agent_heading.unsqueeze(0) - theta[:, None, None]
    rel_heading = torch.atan2(torch.sin(rel_heading), torch.cos(rel_heading))
    local_pred = torch.tensor(np.cumsum(np.abs(arr(63, N, 5, 2, scale=0.3)), axis=1))
    global_pred = torch.bmm(local_pred, rot.transpose(1, 2)) + last[:, None]
    back = torch.bmm(global_pred - last[:, None], rot)
    dist = torch.cdist(last, map_pts)
    nearest = dist.argmin(-1)
    return {"theta": theta, "rot": rot, "local_tracks": local_tracks, "local_map": local_map,
            "rel_heading": rel_heading, "global_pred": global_pred,
            "round_trip": torch.allclose(back, local_pred, atol=1e-5), "nearest_lane_pt": nearest,
            "self_last_is_origin": local_tracks[torch.arange(N), torch.arange(N), -1].abs().max(),
            "heading_deg": torch.rad2deg(theta)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_goal_conditioned_cvae_sampling(torch):
    """PECNet / Y-Net style goal-conditioned forecasting: a CVAE encodes the past and the true
    endpoint into ``(mu, logvar)``, reparameterises with fixed NumPy noise, decodes an
    endpoint; KL + endpoint L2 losses over a few SGD-with-momentum steps; at test time K goals
    sampled from the prior with fixed noise (truncated with ``clamp``), the best-of-K endpoint,
    and the trajectory conditioned on the chosen goal by a second MLP that predicts waypoints
    around the straight line ``linspace`` interpolation to the goal."""
    nn, F = torch.nn, torch.nn.functional
    B, obs, T, Z, K = 5, 4, 6, 4, 6
    track = _scene(71, B, obs + T)
    origin = track[:, obs - 1 : obs]
    past = torch.tensor(track[:, :obs] - origin).flatten(1)
    fut = torch.tensor(track[:, obs:] - origin)
    dest = fut[:, -1]

    class PECNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc_past = nn.Sequential(nn.Linear(obs * 2, 16), nn.ReLU())
            self.enc_dest = nn.Sequential(nn.Linear(2, 8), nn.ReLU())
            self.enc_latent = nn.Linear(24, 2 * Z)
            self.dec = nn.Sequential(nn.Linear(16 + Z, 16), nn.ReLU(), nn.Linear(16, 2))
            self.traj = nn.Sequential(nn.Linear(16 + 2, 16), nn.Tanh(), nn.Linear(16, T * 2))

        def forward(self, past, dest, eps):
            fp = self.enc_past(past)
            stats = self.enc_latent(torch.cat([fp, self.enc_dest(dest)], 1))
            mu, logvar = stats[:, :Z], stats[:, Z:]
            std = logvar.mul(0.5).exp_()
            z = eps.mul(std).add_(mu)
            return self.dec(torch.cat([fp, z], 1)), mu, logvar

        def waypoints(self, past, goal):
            fp = self.enc_past(past)
            alpha = torch.linspace(1.0 / T, 1.0, T).view(1, T, 1)
            straight = alpha * goal.unsqueeze(1)
            return straight + self.traj(torch.cat([fp, goal], 1)).view(-1, T, 2) * 0.1

    model = set_weights(torch, PECNet(), 72)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    losses = []
    for step in range(3):
        eps = torch.tensor(arr(73 + step, B, Z))
        opt.zero_grad()
        dest_rec, mu, logvar = model(past, dest, eps)
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        rcl = F.mse_loss(dest_rec, dest)
        wp = model.waypoints(past, dest)
        traj_loss = F.mse_loss(wp, fut)
        loss = rcl + 0.01 * kld + traj_loss
        loss.backward()
        opt.step()
        losses.append([rcl.item(), kld.item(), traj_loss.item()])
    with torch.no_grad():
        fp = model.enc_past(past)
        z = torch.tensor(arr(80, K, B, Z)).clamp(-1.5, 1.5)
        goals = model.dec(torch.cat([fp.expand(K, B, 16), z], -1))  # (K, B, 2)
        err = (goals - dest).norm(dim=-1)
        best = err.argmin(0)
        best_goal = goals[best, torch.arange(B)]
        traj = model.waypoints(past, best_goal)
        fde = (traj[:, -1] - dest).norm(dim=-1)
    return {"losses": losses, "goals": goals, "best": best, "best_goal": best_goal,
            "traj": traj, "fde": fde, "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_nms_by_endpoint_distance(torch):
    """MTR's / QCNet's trajectory NMS: the ``K`` predicted modes scored by ``sigmoid`` of their
    logits (log-probabilities with ``logsigmoid``), sorted with ``argsort(descending)``, the
    sorted endpoints' pairwise distances with ``cdist``, greedy suppression of any mode whose
    endpoint lies within a threshold of an already selected one (a per-batch mask updated in a
    loop), ``topk`` of the survivors' masked scores, and the kept trajectories gathered with
    ``index_select``/``gather``; the scores renormalised over the kept modes."""
    F = torch.nn.functional
    B, K, T, keep = 3, 8, 5, 3
    g = _rng(81)
    ends = g.uniform(-4, 4, (B, K, 2)).astype(np.float32)
    ends[:, 1] = ends[:, 0] + 0.3  # a near-duplicate of mode 0
    ends[:, 5] = ends[:, 3] - 0.4
    alpha = np.linspace(0.2, 1.0, T, dtype=np.float32)[None, None, :, None]
    trajs = torch.tensor(alpha * ends[:, :, None, :])
    logits = torch.tensor(g.normal(0, 1.5, (B, K)).astype(np.float32))
    scores = torch.sigmoid(logits)
    log_scores = F.logsigmoid(logits)
    order = torch.argsort(scores, dim=-1, descending=True)
    sorted_trajs = torch.gather(trajs, 1, order[:, :, None, None].expand(B, K, T, 2))
    sorted_scores = torch.gather(scores, 1, order)
    endpoints = sorted_trajs[:, :, -1]
    dist = torch.cdist(endpoints, endpoints)
    selected = torch.zeros(B, K, dtype=torch.bool)
    suppressed = torch.zeros(B, K, dtype=torch.bool)
    for k in range(K):
        take = ~suppressed[:, k]
        selected[:, k] = take
        near = (dist[:, k] < 1.0) & take.unsqueeze(-1)
        suppressed = suppressed | near
    masked = torch.where(selected, sorted_scores, torch.full_like(sorted_scores, -1.0))
    top_scores, top_idx = masked.topk(keep, dim=-1)
    kept = torch.gather(sorted_trajs, 1, top_idx[:, :, None, None].expand(B, keep, T, 2))
    kept_orig_idx = order.gather(1, top_idx)
    probs = top_scores / top_scores.sum(-1, keepdim=True)
    first = torch.index_select(kept, 1, torch.tensor([0]))
    return {"order": order, "dist": dist, "selected": selected, "top_scores": top_scores,
            "kept_orig_idx": kept_orig_idx, "kept": kept, "probs": probs, "first": first,
            "log_scores": log_scores, "n_selected": selected.sum(-1)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def traj_wayformer_mode_queries_training(torch):
    """A tiny Wayformer/MTR-style forecaster: agent-history and map-polyline tokens (with a
    key-padding mask) encoded by an ``nn.TransformerEncoderLayer`` (batch-first, dropout 0),
    learned mode queries (``nn.Parameter``) cross-attending to the scene with
    ``nn.MultiheadAttention``, per-mode trajectory heads with ``softplus`` std (plus a floor)
    and ``tanh`` correlation, a loss of winner-takes-all bivariate NLL plus mode classification,
    AdamW with ``clip_grad_norm_`` over three steps; the attention weights and final minADE."""
    nn, F = torch.nn, torch.nn.functional
    B, S, D, K, T = 2, 7, 16, 3, 4
    tokens = torch.tensor(arr(91, B, S, 6))
    pad = torch.tensor([[False] * 7, [False] * 5 + [True] * 2])
    fut = torch.tensor(np.cumsum(arr(92, B, T, 2, scale=0.5), axis=1))

    class Wayformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(6, D)
            self.encoder = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
            self.queries = nn.Parameter(torch.zeros(K, D))
            self.cross = nn.MultiheadAttention(D, 2, batch_first=True)
            self.head = nn.Linear(D, T * 5)
            self.score = nn.Linear(D, 1)

        def forward(self, tokens, pad):
            mem = self.encoder(self.embed(tokens), src_key_padding_mask=pad)
            q = self.queries.unsqueeze(0).expand(tokens.shape[0], -1, -1)
            out, w = self.cross(q, mem, mem, key_padding_mask=pad)
            p = self.head(out).view(-1, K, T, 5)
            mu = p[..., :2].cumsum(2)
            sigma = F.softplus(p[..., 2:4]) + 0.01
            rho = torch.tanh(p[..., 4]) * 0.9
            return mu, sigma, rho, self.score(out).squeeze(-1), w

    model = set_weights(torch, Wayformer(), 93)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    losses, norms = [], []
    for _ in range(3):
        opt.zero_grad()
        mu, sigma, rho, logit, w = model(tokens, pad)
        ade = (mu - fut.unsqueeze(1)).norm(dim=-1).mean(-1)
        best = ade.argmin(-1)
        idx = best.view(B, 1, 1, 1)
        mu_b = mu.gather(1, idx.expand(B, 1, T, 2)).squeeze(1)
        sig_b = sigma.gather(1, idx.expand(B, 1, T, 2)).squeeze(1)
        rho_b = rho.gather(1, best.view(B, 1, 1).expand(B, 1, T)).squeeze(1)
        nll = _bivariate_nll(torch, fut, mu_b, torch.log(sig_b), rho_b).mean()
        loss = nll + F.cross_entropy(logit, best)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        mu, sigma, rho, logit, w = model(tokens, pad)
        min_ade = (mu - fut.unsqueeze(1)).norm(dim=-1).mean(-1).min(-1)[0]
    return {"losses": losses, "grad_norms": norms, "attn": w, "min_ade": min_ade,
            "sigma": sigma, "queries": model.queries, "head": model.head.weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_masked_metrics_and_collision_rate(torch):
    """Benchmark metrics as the nuScenes/Waymo devkits compute them on padded batches: ground
    truth with invalid (unobserved) future steps given by a validity mask, masked ADE
    (``where`` + sum / count), FDE at each agent's last valid step found with ``argmax`` over
    a reversed cumulative mask, per-horizon errors, minADE_K/minFDE_K with ``min``, the
    overlap (collision) rate between agents' predicted positions via pairwise ``cdist`` with
    the diagonal masked, and a formatted summary string."""
    B, K, T = 4, 3, 6
    g = _rng(101)
    gt_ = np.cumsum(g.normal(0.5, 0.3, (B, T, 2)), axis=1) + [
        [[0, 0]],
        [[0.3, 0.2]],
        [[3, -3]],
        [[-3, 3]],
    ]
    gt_ = torch.tensor(gt_.astype(np.float32))
    pred = gt_.unsqueeze(1) + torch.tensor(g.normal(0, 0.4, (B, K, T, 2)).astype(np.float32))
    valid = torch.tensor(
        np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 5 + [0], [1, 1, 0, 1, 1, 0]], bool)
    )
    err = torch.linalg.norm(pred - gt_.unsqueeze(1), dim=-1)  # (B, K, T)
    vmask = valid.unsqueeze(1).expand_as(err)
    ade = torch.where(vmask, err, torch.zeros_like(err)).sum(-1) / vmask.sum(-1).clamp(min=1)
    last = T - 1 - torch.flip(valid, [1]).int().argmax(dim=1)
    fde = err.gather(2, last.view(B, 1, 1).expand(B, K, 1)).squeeze(-1)
    min_ade, min_ade_idx = ade.min(-1)
    min_fde = fde.min(-1).values
    horizon = torch.where(vmask, err, torch.full_like(err, float("nan"))).nanmean(dim=(0, 1))
    best_pred = pred[torch.arange(B), min_ade_idx]  # (B, T, 2) -- the agents share one scene
    pos_t = best_pred.transpose(0, 1)  # (T, B, 2)
    d = torch.cdist(pos_t, pos_t)
    d = d + torch.eye(B).unsqueeze(0) * 1e6
    overlap = (d < 0.5).any(-1).any(0)
    summary = f"minADE_{K}={min_ade.mean().item():.3f} minFDE_{K}={min_fde.mean().item():.3f}"
    return {"ade": ade, "last": last, "fde": fde, "min_ade": min_ade, "min_ade_idx": min_ade_idx,
            "min_fde": min_fde, "horizon": horizon, "overlap": overlap,
            "overlap_rate": overlap.float().mean(), "summary": summary}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_hivt_scatter_max_polylines_laplace_nll(torch):
    """PyG-style VectorNet/HiVT code on flat point lists: variable-length agent histories padded
    with ``pad_sequence`` and encoded by a GRU through ``pack_padded_sequence`` (unsorted,
    ``enforce_sorted=False``); lane points carrying a polyline id max-pooled per polyline with
    ``scatter_reduce(amax, include_self=False)`` and mean-pooled with ``index_reduce``-free
    ``scatter_add`` / counts; a Laplace head (``softplus`` scale plus ``eps``) and its NLL
    checked against ``distributions.Laplace``; ``F.gaussian_nll_loss`` on the same means."""
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = nn.utils.rnn
    lengths = [5, 3, 4]
    seqs = [torch.tensor(arr(111 + i, n, 2, scale=0.5)).cumsum(0) for i, n in enumerate(lengths)]
    padded = rnn_utils.pad_sequence(seqs, batch_first=True)
    gru = set_weights(torch, nn.GRU(2, 8, batch_first=True), 115)
    packed = rnn_utils.pack_padded_sequence(padded, torch.tensor(lengths), batch_first=True,
                                            enforce_sorted=False)  # fmt: skip
    out_packed, h_n = gru(packed)
    out, out_len = rnn_utils.pad_packed_sequence(out_packed, batch_first=True)
    agent = h_n[0]

    pts = torch.tensor(arr(116, 11, 4))
    poly_id = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3])
    mlp = set_weights(torch, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8)), 117)
    h = mlp(pts)
    idx = poly_id.unsqueeze(-1).expand_as(h)
    pmax = torch.zeros(4, 8).scatter_reduce(0, idx, h, reduce="amax", include_self=False)
    psum = torch.zeros(4, 8).scatter_add(0, idx, h)
    count = torch.zeros(4).scatter_add(0, poly_id, torch.ones(11))
    pmean = psum / count.unsqueeze(-1)
    lanes = torch.cat([pmax, pmean], -1)

    head = set_weights(torch, nn.Linear(8 + 16 * 4, 4 * 4), 118)
    z = torch.cat([agent, lanes.flatten().expand(3, -1)], -1)
    loc_scale = head(z).view(3, 4, 4)
    loc = loc_scale[..., :2].cumsum(1)
    scale = F.softplus(loc_scale[..., 2:]) + 1e-3
    target = torch.tensor(arr(119, 3, 4, 2, scale=0.5)).cumsum(1)
    nll = (torch.log(2 * scale) + torch.abs(target - loc) / scale).mean()
    ref = -torch.distributions.Laplace(loc, scale).log_prob(target).mean()
    gnll = F.gaussian_nll_loss(loc, target, scale**2)
    (nll + gnll).backward()
    return {"padded": padded, "out": out, "out_len": out_len, "h_n": h_n, "pmax": pmax,
            "count": count, "pmean": pmean, "loc": loc, "scale": scale, "nll": nll,
            "laplace_ref": ref, "gaussian_nll": gnll, "gru_grads": grads(gru),
            "mlp_grads": grads(mlp), "head_grad": head.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_raster_map_grid_sample_agent_crop(torch):
    """Raster-map conditioning as Trajectron++'s map encoder and Y-Net do it: a semantic map
    ``(1, C, H, W)``, an agent-centric rotated crop with ``affine_grid`` (rotation by the agent's
    heading from ``atan2``, translation to its position in normalised coordinates) and
    ``grid_sample`` (bilinear, zeros padding), a small CNN over the crop; map features read at
    predicted waypoints with ``grid_sample`` of ``(1, 1, P, 2)`` points; a drivable-area
    penalty on the waypoints and its gradient w.r.t. them."""
    nn, F = torch.nn, torch.nn.functional
    C, H, W, N = 3, 16, 16, 3
    yy, xx = np.meshgrid(np.linspace(-1, 1, H), np.linspace(-1, 1, W), indexing="ij")
    drivable = (np.abs(yy - 0.3 * xx) < 0.35).astype(np.float32)
    sem = np.stack([drivable, np.abs(arr(121, H, W, scale=0.5)), (xx**2 + yy**2 < 0.4)], 0)
    scene_map = torch.tensor(sem.astype(np.float32)).unsqueeze(0)
    pos = torch.tensor([[0.1, 0.05], [-0.4, -0.1], [0.5, 0.2]])
    vel = torch.tensor([[1.0, 0.3], [0.2, -1.0], [-0.7, -0.7]])
    heading = torch.atan2(vel[:, 1], vel[:, 0])
    c, s = torch.cos(heading), torch.sin(heading)
    crop = 0.5
    theta = torch.stack(
        [
            torch.stack([c * crop, -s * crop, pos[:, 0]], -1),
            torch.stack([s * crop, c * crop, pos[:, 1]], -1),
        ],
        1,
    )
    grid = F.affine_grid(theta, (N, C, 8, 8), align_corners=False)
    patches = F.grid_sample(scene_map.expand(N, -1, -1, -1), grid, mode="bilinear",
                            padding_mode="zeros", align_corners=False)  # fmt: skip
    cnn = set_weights(torch, nn.Sequential(nn.Conv2d(C, 4, 3, stride=2, padding=1), nn.ReLU(),
                                           nn.AdaptiveAvgPool2d(1), nn.Flatten()), 122)  # fmt: skip
    map_feat = cnn(patches)
    waypoints = torch.tensor(np.cumsum(arr(123, N, 5, 2, scale=0.12), axis=1)) + pos.unsqueeze(1)
    waypoints.requires_grad_(True)
    at_pts = F.grid_sample(scene_map, waypoints.view(1, 1, -1, 2), align_corners=True)
    on_road = at_pts[0, 0, 0].view(N, 5)
    penalty = (1 - on_road).clamp(min=0).pow(2).sum()
    penalty.backward()
    return {"heading": heading, "theta": theta, "patch_sum": patches.sum((2, 3)),
            "patch0": patches[0, 0], "map_feat": map_feat, "on_road": on_road,
            "penalty": penalty, "waypoint_grad": waypoints.grad, "cnn_grads": grads(cnn)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def traj_dataset_windows_and_kinematic_baselines(torch):
    """The data pipeline and baselines every trajectory benchmark ships: sliding windows of
    ``obs + pred`` frames cut with ``unfold``, scene agent ids renumbered with ``unique(
    return_inverse=True)``, per-agent frame counts with ``repeat_interleave``, velocities by
    ``diff(prepend=...)``, headings wrapped with ``remainder``, tracks upsampled 2x with
    ``F.interpolate(mode="linear", align_corners=True)``; constant-velocity and
    constant-acceleration extrapolation, a least-squares quadratic fit (``vander`` +
    ``linalg.lstsq``) extrapolated into the future, and each baseline's ADE/FDE."""
    F = torch.nn.functional
    obs, pred, dt = 4, 3, 0.4
    raw = torch.tensor(_scene(131, 3, 10))
    windows = raw.unfold(1, obs + pred, 2)  # (N, n_windows, 2, obs+pred)
    windows = windows.permute(0, 1, 3, 2).reshape(-1, obs + pred, 2)
    ids = torch.tensor([17, 4, 17, 9, 4, 4, 30])
    uniq, inverse = torch.unique(ids, return_inverse=True)
    counts = torch.bincount(inverse)
    frame_owner = torch.arange(len(uniq)).repeat_interleave(counts)
    hist, fut = windows[:, :obs], windows[:, obs:]
    vel = torch.diff(hist, dim=1, prepend=hist[:, :1]) / dt
    acc = torch.diff(vel[:, 1:], dim=1) / dt
    heading = torch.atan2(vel[:, -1, 1], vel[:, -1, 0])
    wrapped = torch.remainder(heading + 3 * math.pi / 2 + math.pi, 2 * math.pi) - math.pi
    up = F.interpolate(hist.transpose(1, 2), scale_factor=2, mode="linear", align_corners=True)
    steps = torch.arange(1, pred + 1, dtype=torch.float32).view(1, -1, 1) * dt
    cv = hist[:, -1:] + vel[:, -1:] * steps
    ca = hist[:, -1:] + vel[:, -1:] * steps + 0.5 * acc[:, -1:] * steps**2
    t_obs = torch.arange(obs, dtype=torch.float32) * dt
    A = torch.vander(t_obs, N=3, increasing=True)  # (obs, 3)
    coef = torch.linalg.lstsq(A.expand(hist.shape[0], -1, -1), hist).solution  # (W, 3, 2)
    t_fut = torch.arange(obs, obs + pred, dtype=torch.float32) * dt
    quad = torch.vander(t_fut, N=3, increasing=True) @ coef
    metrics = {}
    for name, p in [("cv", cv), ("ca", ca), ("quad", quad)]:
        err = (p - fut).norm(dim=-1)
        metrics[name] = torch.stack([err.mean(), err[:, -1].mean()])
    return {"windows": windows, "uniq": uniq, "inverse": inverse, "frame_owner": frame_owner,
            "vel": vel, "acc": acc, "wrapped": wrapped, "up": up, "cv": cv, "ca": ca,
            "coef": coef, "quad": quad, "metrics": metrics}  # fmt: skip
