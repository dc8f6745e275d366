"""Machine learning on molecules and atomistic systems, as SchNet, DimeNet, EGNN, PaiNN, ANI and
NequIP reference code writes it with plain tensor ops: radius graphs over a batch vector and with
periodic images (minimum image convention, cell shifts), Gaussian and Bessel radial bases with
cosine and polynomial cutoff envelopes, continuous-filter convolutions summed with ``index_add_``
and ``scatter_add_`` over edge lists, triplets and bond angles from ``atan2`` of cross and dot
products, E(3)-equivariant coordinate and vector updates checked under a fixed rotation, real
spherical harmonics and tensor-product messages, energies whose forces are ``-dE/dx`` from
``autograd.grad(create_graph=True)`` trained by force matching, stress from a strain derivative,
velocity-Verlet molecular dynamics, per-molecule readouts (sums, means, maxima, dipoles) over batch
index vectors, one-hot atom types with embedding tables and atom reference energies, Coulomb
matrices with kernel ridge regression, and Kabsch-aligned RMSD. Positions, atom types and targets
come from NumPy with fixed seeds."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _molecules(seed: int, sizes: list[int], spread: float = 1.0):
    """Random conformers of small molecules: (positions [N, 3] float32, atomic numbers [N] from
    H, C, N, O, F, batch vector [N])."""
    rng = _rng(seed)
    n = sum(sizes)
    pos = (rng.standard_normal((n, 3)) * spread).astype(np.float32)
    z = rng.choice(np.array([1, 6, 7, 8, 9]), size=n, p=[0.4, 0.3, 0.1, 0.15, 0.05])
    batch = np.repeat(np.arange(len(sizes)), sizes)
    return pos, z.astype(np.int64), batch.astype(np.int64)


def _rotation(torch, axis, angle):
    """Rodrigues' rotation matrix about ``axis`` by ``angle`` (float32)."""
    k = torch.tensor(axis, dtype=torch.float32)
    k = k / k.norm()
    K = torch.zeros(3, 3)
    K[0, 1], K[0, 2], K[1, 2] = -k[2], k[1], -k[0]
    K = K - K.T
    return torch.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * (K @ K)


def _radius_graph(torch, pos, batch, cutoff):
    """torch_cluster's ``radius_graph`` brute force: pairs in the same molecule closer than the
    cutoff, no self loops; ``edge_index[0]`` the source ``j``, ``edge_index[1]`` the target ``i``."""
    dist = torch.cdist(pos, pos)
    adj = (dist < cutoff) & (batch.unsqueeze(0) == batch.unsqueeze(1))
    adj.fill_diagonal_(False)
    i, j = adj.nonzero(as_tuple=True)
    return torch.stack([j, i], dim=0)


@program
def mol_radius_graph_batched_and_periodic_neighbor_lists(torch):
    """Neighbour lists as molecular codes build them: ``radius_graph`` over a batch of three
    molecules (same-molecule mask, no self loops), edge vectors and lengths, neighbour counts by
    ``bincount``, a CSR ``rowptr`` by ``cumsum``, edges per molecule by ``index_add_``; then a
    periodic crystal: pair vectors wrapped with the minimum image convention
    (``frac - round(frac)``) and an explicit ASE-style enumeration of the 27 cell shifts from
    ``cartesian_prod``, whose nearest images must agree."""
    sizes = [5, 7, 4]
    pos_np, _, _ = _molecules(1, sizes, spread=1.2)
    pos = torch.tensor(pos_np)
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    cutoff = 2.0
    edge_index = _radius_graph(torch, pos, batch, cutoff)
    j, i = edge_index
    edge_vec = pos[j] - pos[i]
    edge_weight = edge_vec.norm(dim=-1)
    n = pos.size(0)
    num_neighbors = torch.bincount(i, minlength=n)
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(num_neighbors, dim=0)
    edges_per_mol = torch.zeros(len(sizes), dtype=torch.long).index_add_(
        0, batch[i], torch.ones_like(i)
    )
    symmetric = torch.equal(
        torch.sort(i * n + j).values, torch.sort(j * n + i).values
    )  # undirected: every edge has its reverse

    # periodic boundary conditions in an orthorhombic cell
    cell = torch.diag(torch.tensor([3.0, 3.5, 4.0]))
    frac = torch.tensor(_rng(2).uniform(0.0, 1.0, (9, 3)).astype(np.float32))
    cart = frac @ cell
    d = cart.unsqueeze(0) - cart.unsqueeze(1)  # d[a, b] = r_b - r_a
    d_frac = d @ torch.linalg.inv(cell)
    d_frac = d_frac - torch.round(d_frac)
    d_mic = d_frac @ cell
    r_mic = d_mic.norm(dim=-1)
    pbc_cut = 1.7
    src, dst = ((r_mic < pbc_cut) & ~torch.eye(9, dtype=torch.bool)).nonzero(as_tuple=True)
    shifts = torch.cartesian_prod(*[torch.arange(-1, 2)] * 3).to(cart.dtype)  # [27, 3]
    image_vec = d.unsqueeze(2) + (shifts @ cell).view(1, 1, 27, 3)
    image_dist = image_vec.norm(dim=-1)
    nearest, which = image_dist.min(dim=-1)
    within = (image_dist < pbc_cut).sum(-1)
    within.fill_diagonal_(0)
    return {"edge_index": edge_index, "edge_weight": edge_weight, "edge_vec": edge_vec,
            "num_neighbors": num_neighbors, "rowptr": rowptr, "edges_per_mol": edges_per_mol,
            "symmetric": symmetric, "r_mic": r_mic, "pbc_src": src, "pbc_dst": dst,
            "nearest": nearest, "which": which, "mic_agrees": torch.allclose(nearest, r_mic,
                                                                            atol=1e-5),
            "n_images_within": within, "frac_wrapped": torch.remainder(frac + 0.75, 1.0)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_schnet_cfconv_energy_and_adam(torch):
    """SchNet as PyG writes it: an atom embedding, a Gaussian smearing of the edge lengths
    (``coeff = -0.5 / delta**2``), interaction blocks whose continuous-filter convolution
    multiplies neighbour features by a filter network of the distance expansion times a cosine
    cutoff and sums messages into targets with ``index_add_``, shifted softplus activations,
    atom-wise outputs de-standardised and offset by per-element atom reference energies, and a
    sum readout per molecule; three Adam steps on an energy MSE. (Looser tolerance: Adam steps
    through scatter sums.)"""
    nn, F = torch.nn, torch.nn.functional

    class ShiftedSoftplus(nn.Module):
        def __init__(self):
            super().__init__()
            self.shift = torch.log(torch.tensor(2.0)).item()

        def forward(self, x):
            return F.softplus(x) - self.shift

    class GaussianSmearing(nn.Module):
        def __init__(self, start=0.0, stop=5.0, num_gaussians=50):
            super().__init__()
            offset = torch.linspace(start, stop, num_gaussians)
            self.coeff = -0.5 / (offset[1] - offset[0]).item() ** 2
            self.register_buffer("offset", offset)

        def forward(self, dist):
            dist = dist.view(-1, 1) - self.offset.view(1, -1)
            return torch.exp(self.coeff * torch.pow(dist, 2))

    class CFConv(nn.Module):
        def __init__(self, in_channels, out_channels, num_filters, filter_net, cutoff):
            super().__init__()
            self.lin1 = nn.Linear(in_channels, num_filters, bias=False)
            self.lin2 = nn.Linear(num_filters, out_channels)
            self.nn = filter_net
            self.cutoff = cutoff

        def forward(self, x, edge_index, edge_weight, edge_attr):
            C = 0.5 * (torch.cos(edge_weight * math.pi / self.cutoff) + 1.0)
            W = self.nn(edge_attr) * C.view(-1, 1)
            x = self.lin1(x)
            j, i = edge_index
            out = torch.zeros_like(x).index_add_(0, i, x[j] * W)
            return self.lin2(out)

    class InteractionBlock(nn.Module):
        def __init__(self, hidden, num_gaussians, num_filters, cutoff):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(num_gaussians, num_filters), ShiftedSoftplus(),
                                     nn.Linear(num_filters, num_filters))  # fmt: skip
            self.conv = CFConv(hidden, hidden, num_filters, self.mlp, cutoff)
            self.act = ShiftedSoftplus()
            self.lin = nn.Linear(hidden, hidden)

        def forward(self, x, edge_index, edge_weight, edge_attr):
            x = self.conv(x, edge_index, edge_weight, edge_attr)
            return self.lin(self.act(x))

    class SchNet(nn.Module):
        def __init__(self, hidden=16, num_filters=16, num_interactions=2, num_gaussians=12,
                     cutoff=3.0, mean=-1.5, std=0.7):  # fmt: skip
            super().__init__()
            self.cutoff, self.mean, self.std = cutoff, mean, std
            self.embedding = nn.Embedding(10, hidden, padding_idx=0)
            self.distance_expansion = GaussianSmearing(0.0, cutoff, num_gaussians)
            self.interactions = nn.ModuleList(
                [InteractionBlock(hidden, num_gaussians, num_filters, cutoff)
                 for _ in range(num_interactions)])  # fmt: skip
            self.lin1 = nn.Linear(hidden, hidden // 2)
            self.act = ShiftedSoftplus()
            self.lin2 = nn.Linear(hidden // 2, 1)
            self.register_buffer("atomref", torch.zeros(10, 1))

        def forward(self, z, pos, batch, num_graphs):
            h = self.embedding(z)
            edge_index = _radius_graph(torch, pos, batch, self.cutoff)
            row, col = edge_index
            edge_weight = (pos[row] - pos[col]).norm(dim=-1)
            edge_attr = self.distance_expansion(edge_weight)
            for interaction in self.interactions:
                h = h + interaction(h, edge_index, edge_weight, edge_attr)
            h = self.lin2(self.act(self.lin1(h)))
            h = h * self.std + self.mean
            h = h + self.atomref[z]
            out = torch.zeros(num_graphs, 1).index_add_(0, batch, h)
            return out, h

    sizes = [6, 5, 7, 4]
    pos_np, z_np, batch_np = _molecules(3, sizes, spread=1.1)
    pos, z, batch = torch.tensor(pos_np), torch.tensor(z_np), torch.tensor(batch_np)
    model = set_weights(torch, SchNet(), seed=4)
    model.atomref[torch.tensor([1, 6, 7, 8, 9])] = torch.tensor(
        [[-0.5], [-37.8], [-54.6], [-75.0], [-99.7]]
    )
    target = torch.tensor(arr(5, len(sizes), 1, scale=0.5)) + torch.zeros(len(sizes), 1).index_add_(
        0, batch, model.atomref[z]
    )
    energy0, atomwise0 = model(z, pos, batch, len(sizes))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        energy, _ = model(z, pos, batch, len(sizes))
        loss = F.mse_loss(energy, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    pad_grad = model.embedding.weight.grad[0]
    return {"energy0": energy0, "atomwise0": atomwise0, "losses": losses,
            "pad_grad_is_zero": bool((pad_grad == 0).all()), "grads": grads(model),
            "final": params(model), "n_edges": _radius_graph(torch, pos, batch, 3.0).size(1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_ani_symmetry_functions_per_element_nets_force_matching(torch):
    """An ANI / Behler-Parrinello potential: radial symmetry functions ``sum_j exp(-eta (r_ij -
    R_s)^2) f_c(r_ij)`` per neighbour element, angular ones over neighbour pairs with the
    ``(1 + cos(theta - theta_s))^zeta`` form, per-element CELU networks applied with masks and
    ``masked_scatter_`` as TorchANI does, forces ``-dE/dx`` from ``autograd.grad(create_graph=
    True)``, and three Adam steps on an energy plus force-matching loss (``rho`` weighted).
    (Looser tolerance: second-order gradients through exponentials and Adam.)"""
    nn, F = torch.nn, torch.nn.functional
    elements, cutoff = [1, 6, 8], 3.0
    n = 7
    rng = _rng(6)
    coords_np = (rng.standard_normal((n, 3)) * 0.9).astype(np.float32)
    species = torch.tensor(rng.integers(0, 3, n))
    etas, shifts_r = 4.0, torch.linspace(0.8, 2.6, 5)
    zeta, shifts_a = 8.0, torch.tensor([0.4, 1.2, 2.0, 2.8])
    eta_a, shifts_ra = 2.0, torch.tensor([1.0, 2.0])

    def cutoff_fn(r):
        return 0.5 * torch.cos(math.pi * r / cutoff) + 0.5

    ii, jj = torch.triu_indices(n, n, offset=1)

    def aev(coords):
        r = (coords[ii] - coords[jj]).norm(dim=-1)
        keep = r < cutoff
        a, b, r = ii[keep], jj[keep], r[keep]
        terms = torch.exp(-etas * (r.unsqueeze(-1) - shifts_r) ** 2) * cutoff_fn(r).unsqueeze(-1)
        radial = coords.new_zeros(n, 3, len(shifts_r))
        radial.index_put_((a, species[b]), terms, accumulate=True)
        radial.index_put_((b, species[a]), terms, accumulate=True)
        # angular: for each centre, every pair of its neighbours
        angular = coords.new_zeros(n, len(shifts_a) * len(shifts_ra))
        for c in range(n):
            v = coords - coords[c]
            d = v.norm(dim=-1)
            nb = ((d < cutoff) & (torch.arange(n) != c)).nonzero().flatten()
            if nb.numel() < 2:
                continue
            p, q = torch.combinations(nb, r=2).unbind(-1)
            vp, vq = v[p], v[q]
            cos = 0.95 * F.cosine_similarity(vp, vq, dim=-1)
            theta = torch.acos(cos)
            f1 = ((1 + torch.cos(theta.unsqueeze(-1) - shifts_a)) / 2) ** zeta
            mean_r = (d[p] + d[q]).unsqueeze(-1) / 2
            f2 = torch.exp(-eta_a * (mean_r - shifts_ra) ** 2)
            fc = (cutoff_fn(d[p]) * cutoff_fn(d[q])).view(-1, 1, 1)
            angular[c] = 2 * (f1.unsqueeze(-1) * f2.unsqueeze(1) * fc).sum(0).flatten()
        return torch.cat([radial.flatten(1), angular], dim=1)

    class ANIModel(nn.ModuleDict):
        def forward(self, species, aev):
            output = aev.new_zeros(species.shape)
            for i, m in enumerate(self.values()):
                mask = species == i
                midx = mask.nonzero().flatten()
                if midx.shape[0] > 0:
                    output.masked_scatter_(mask, m(aev.index_select(0, midx)).flatten())
            return output.sum()

    def atomic_net(d_in):
        return nn.Sequential(nn.Linear(d_in, 12), nn.CELU(0.1), nn.Linear(12, 8), nn.CELU(0.1),
                             nn.Linear(8, 1))  # fmt: skip

    d_aev = 3 * len(shifts_r) + len(shifts_a) * len(shifts_ra)
    model = set_weights(torch, ANIModel({str(s): atomic_net(d_aev) for s in elements}), seed=7)
    coords = torch.tensor(coords_np)
    e_ref = torch.tensor(-1.25)
    f_ref = torch.tensor(arr(8, n, 3, scale=0.2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, e_hist = [], []
    for _ in range(3):
        x = coords.clone().requires_grad_(True)
        energy = model(species, aev(x))
        forces = -torch.autograd.grad(energy, x, create_graph=True)[0]
        loss = (energy - e_ref) ** 2 + 0.5 * ((forces - f_ref) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        e_hist.append(energy.detach())
    x = coords.clone().requires_grad_(True)
    descriptor = aev(x)
    energy = model(species, descriptor)
    (g,) = torch.autograd.grad(energy, x)
    return {"aev": descriptor, "energy": energy, "forces": -g, "net_force": (-g).sum(0),
            "losses": losses, "e_hist": e_hist, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_egnn_batched_velocity_equivariance_under_rotation(torch):
    """EGNN (Satorras et al.) on a batch of two molecules with fully connected intra-molecule
    edges: messages from both nodes' features and the squared distance, coordinates moved by
    relative positions weighted by an MLP of the message (mean over neighbours with
    ``unsorted_segment_mean``) plus a velocity term, features by summed messages; the outputs
    are checked under a fixed rotation plus translation (features invariant, coordinates and
    velocities equivariant) and a permutation of atoms; two Adam steps fitting target
    positions. (Looser tolerance: Adam through segment means.)"""
    nn = torch.nn

    def unsorted_segment_sum(data, segment_ids, num_segments):
        result = data.new_full((num_segments, data.size(1)), 0)
        segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
        return result.scatter_add_(0, segment_ids, data)

    def unsorted_segment_mean(data, segment_ids, num_segments):
        segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
        result = data.new_full((num_segments, data.size(1)), 0)
        count = data.new_full((num_segments, data.size(1)), 0)
        result.scatter_add_(0, segment_ids, data)
        count.scatter_add_(0, segment_ids, torch.ones_like(data))
        return result / count.clamp(min=1)

    class E_GCL_vel(nn.Module):
        def __init__(self, nf, hidden):
            super().__init__()
            act = nn.SiLU()
            self.edge_mlp = nn.Sequential(nn.Linear(2 * nf + 1, hidden), act,
                                          nn.Linear(hidden, hidden), act)  # fmt: skip
            self.node_mlp = nn.Sequential(nn.Linear(hidden + nf, hidden), act,
                                          nn.Linear(hidden, nf))  # fmt: skip
            self.coord_mlp = nn.Sequential(nn.Linear(hidden, hidden), act,
                                           nn.Linear(hidden, 1, bias=False))  # fmt: skip
            self.coord_mlp_vel = nn.Sequential(nn.Linear(nf, hidden), act, nn.Linear(hidden, 1))

        def forward(self, h, edge_index, coord, vel):
            row, col = edge_index
            coord_diff = coord[row] - coord[col]
            radial = torch.sum(coord_diff**2, 1).unsqueeze(1)
            m = self.edge_mlp(torch.cat([h[row], h[col], radial], dim=1))
            trans = coord_diff * self.coord_mlp(m)
            coord = coord + unsorted_segment_mean(trans, row, coord.size(0))
            coord = coord + self.coord_mlp_vel(h) * vel
            agg = unsorted_segment_sum(m, row, h.size(0))
            h = h + self.node_mlp(torch.cat([h, agg], dim=1))
            return h, coord

    class EGNN_vel(nn.Module):
        def __init__(self, in_nf=5, nf=8, n_layers=2):
            super().__init__()
            self.embedding = nn.Linear(in_nf, nf)
            self.layers = nn.ModuleList([E_GCL_vel(nf, nf) for _ in range(n_layers)])

        def forward(self, h, x, edges, vel):
            h = self.embedding(h)
            for layer in self.layers:
                h, x = layer(h, edges, x, vel)
            return h, x

    sizes = [4, 5]
    pos_np, z_np, batch_np = _molecules(9, sizes)
    batch = torch.tensor(batch_np)
    same = batch.unsqueeze(0) == batch.unsqueeze(1)
    rows, cols = (same & ~torch.eye(len(batch_np), dtype=torch.bool)).nonzero(as_tuple=True)
    edges = [rows, cols]
    types = torch.tensor(np.searchsorted([1, 6, 7, 8, 9], z_np))
    h0 = torch.nn.functional.one_hot(types, num_classes=5).float()
    x0 = torch.tensor(pos_np)
    vel = torch.tensor(arr(10, len(batch_np), 3, scale=0.3))
    model = set_weights(torch, EGNN_vel(), seed=11)
    R = _rotation(torch, [0.3, -1.0, 0.5], 1.1)
    t = torch.tensor([1.0, -0.5, 0.25])
    perm = torch.tensor(_rng(12).permutation(len(batch_np)))
    inv = torch.argsort(perm)
    with torch.no_grad():
        h_out, x_out = model(h0, x0, edges, vel)
        h_rot, x_rot = model(h0, x0 @ R.T + t, edges, vel @ R.T)
        # relabel atoms: edges map through the inverse permutation
        h_p, x_p = model(h0[perm], x0[perm], [inv[rows], inv[cols]], vel[perm])
    target = x0 + torch.tensor(arr(13, len(batch_np), 3, scale=0.2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        _, x_pred = model(h0, x0, edges, vel)
        loss = torch.nn.functional.mse_loss(x_pred, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"h_out": h_out, "x_out": x_out, "R_orthogonal": torch.allclose(R @ R.T, torch.eye(3),
                                                                          atol=1e-6),
            "h_invariant": torch.allclose(h_rot, h_out, atol=1e-4),
            "x_equivariant": torch.allclose(x_rot, x_out @ R.T + t, atol=1e-4),
            "perm_equivariant": torch.allclose(x_p, x_out[perm], atol=1e-5)
            and torch.allclose(h_p, h_out[perm], atol=1e-5),
            "losses": losses, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_dimenet_triplets_angles_bessel_basis(torch):
    """DimeNet's geometry without ``SparseTensor``: for every edge ``j -> i`` the triplets ``k ->
    j -> i`` with ``k != i`` built from incoming-edge counts with ``repeat_interleave`` and CSR
    offsets, angles ``atan2(|r_ji x r_kj|, r_ji . r_kj)``, the radial Bessel basis
    ``sin(n pi d / c) / d`` times DimeNet's polynomial envelope, a Legendre angular basis and
    their outer product; dihedral angles of bonded quadruples from ``atan2`` of normal vectors;
    the basis is differentiable in the positions (a gradient of a weighted sum)."""
    pos_np, _, _ = _molecules(14, [8], spread=0.8)
    pos = torch.tensor(pos_np, requires_grad=True)
    n, cutoff = pos.size(0), 2.0
    edge_index = _radius_graph(torch, pos.detach(), torch.zeros(n, dtype=torch.long), cutoff)
    j, i = edge_index
    # sort edges by target so the edges k -> j arriving at each node j are contiguous
    order = torch.argsort(i * n + j)
    j, i = j[order], i[order]
    num_edges = i.numel()
    in_deg = torch.bincount(i, minlength=n)  # edges k -> j arriving at j, indexed by j
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(in_deg, 0)])
    num_triplets = in_deg[j]
    idx_ji = torch.arange(num_edges).repeat_interleave(num_triplets)
    first = ptr[j].repeat_interleave(num_triplets)
    local = (
        torch.arange(idx_ji.numel()) - torch.cumsum(num_triplets, 0)[idx_ji] + num_triplets[idx_ji]
    )
    idx_kj = first + local
    idx_i, idx_j, idx_k = i[idx_ji], j[idx_ji], j[idx_kj]
    keep = idx_i != idx_k
    idx_i, idx_j, idx_k = idx_i[keep], idx_j[keep], idx_k[keep]
    idx_kj, idx_ji = idx_kj[keep], idx_ji[keep]

    dist = (pos[i] - pos[j]).pow(2).sum(dim=-1).sqrt()
    pos_ji = pos[idx_j] - pos[idx_i]
    pos_kj = pos[idx_k] - pos[idx_j]
    a = (pos_ji * pos_kj).sum(dim=-1)
    b = torch.cross(pos_ji, pos_kj, dim=1).norm(dim=-1)
    angle = torch.atan2(b, a)

    p = 6  # envelope exponent + 1
    ea, eb, ec = -(p + 1) * (p + 2) / 2, p * (p + 2), -p * (p + 1) / 2

    def envelope(x):
        x_pow_p0 = x.pow(p - 1)
        x_pow_p1 = x_pow_p0 * x
        x_pow_p2 = x_pow_p1 * x
        return (1.0 / x + ea * x_pow_p0 + eb * x_pow_p1 + ec * x_pow_p2) * (x < 1.0).to(x.dtype)

    freq = torch.arange(1, 7).float() * math.pi
    d_scaled = dist.unsqueeze(-1) / cutoff
    rbf = envelope(d_scaled) * torch.sin(freq * d_scaled)
    c = torch.cos(angle)
    legendre = torch.stack([torch.ones_like(c), c, 0.5 * (3 * c**2 - 1),
                            0.5 * (5 * c**3 - 3 * c)], dim=-1)  # fmt: skip
    sbf = (rbf[idx_kj].unsqueeze(1) * legendre.unsqueeze(-1)).flatten(1)
    w = torch.tensor(arr(15, sbf.size(1), scale=0.1))
    score = (sbf @ w).sum() + rbf.sum()
    (g,) = torch.autograd.grad(score, pos)

    # dihedral angle of the first four atoms as a chain 0-1-2-3
    p0, p1, p2, p3 = pos.detach()[:4]
    b0, b1, b2 = p0 - p1, p2 - p1, p3 - p2
    n1 = torch.linalg.cross(b0, b1)
    n2 = torch.linalg.cross(b1, b2)
    m1 = torch.linalg.cross(n1, b1 / b1.norm())
    dihedral = torch.atan2((m1 * n2).sum(), (n1 * n2).sum())
    return {"edge_src": j, "edge_dst": i, "idx_kj": idx_kj, "idx_ji": idx_ji,
            "triplets": torch.stack([idx_k, idx_j, idx_i]), "angle": angle, "dist": dist,
            "rbf": rbf, "sbf": sbf, "score": score, "grad": g, "dihedral": dihedral,
            "deg_angle": torch.rad2deg(angle[:5])}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_painn_scalar_vector_messages_equivariance(torch):
    """PaiNN (Schütt et al.): scalar features ``s`` [N, F] and vector features ``v`` [N, 3, F];
    the message block splits ``phi(s_j) * W(rbf) * f_cut`` into three gates and sums
    ``v_j * g1 + g3 * r_ij / |r_ij|`` and ``g2`` into targets with ``index_add_``; the update
    block mixes vectors with ``U`` and ``V`` (bias-free linears over the feature axis), gates
    with ``||V v||`` and ``<U v, V v>``; checked under a fixed rotation (``s`` invariant, ``v``
    rotating); an energy head whose forces rotate with the input, and two Adam steps on an
    MD17-style energy plus force loss (``create_graph``). (Looser tolerance: Adam steps through
    second-order gradients.)"""
    nn, F = torch.nn, torch.nn.functional
    nf, n_rbf, cutoff = 8, 6, 2.5

    def sinc_expansion(d):
        freq = torch.arange(1, n_rbf + 1, dtype=d.dtype) * math.pi / cutoff
        return torch.sin(freq * d.unsqueeze(-1)) / d.unsqueeze(-1)

    def cosine_cutoff(d):
        return 0.5 * (torch.cos(d * math.pi / cutoff) + 1.0) * (d < cutoff).float()

    class PaiNNMessage(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi = nn.Sequential(nn.Linear(nf, nf), nn.SiLU(), nn.Linear(nf, 3 * nf))
            self.W = nn.Linear(n_rbf, 3 * nf)

        def forward(self, s, v, idx_i, idx_j, dir_ij, rbf, fcut):
            x = self.phi(s)[idx_j] * self.W(rbf) * fcut.unsqueeze(-1)
            ds, dv1, dv2 = torch.split(x, nf, dim=-1)
            dv = v[idx_j] * dv1.unsqueeze(1) + dv2.unsqueeze(1) * dir_ij.unsqueeze(-1)
            s = s.index_add(0, idx_i, ds)
            v = v.index_add(0, idx_i, dv)
            return s, v

    class PaiNNUpdate(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = nn.Linear(nf, 2 * nf, bias=False)
            self.ctx = nn.Sequential(nn.Linear(2 * nf, nf), nn.SiLU(), nn.Linear(nf, 3 * nf))

        def forward(self, s, v):
            mu_mix = self.mix(v)
            mu_V, mu_W = torch.split(mu_mix, nf, dim=-1)
            mu_Vn = torch.sqrt(torch.sum(mu_V**2, dim=-2) + 1e-8)
            x = self.ctx(torch.cat([s, mu_Vn], dim=-1))
            dq_intra, dmu_intra, dqmu_intra = torch.split(x, nf, dim=-1)
            dmu = dmu_intra.unsqueeze(1) * mu_W
            dqmu = dqmu_intra * torch.sum(mu_V * mu_W, dim=1)
            return s + dq_intra + dqmu, v + dmu

    class PaiNN(nn.Module):
        def __init__(self, n_layers=2):
            super().__init__()
            self.embedding = nn.Embedding(10, nf)
            self.messages = nn.ModuleList([PaiNNMessage() for _ in range(n_layers)])
            self.updates = nn.ModuleList([PaiNNUpdate() for _ in range(n_layers)])
            self.out = nn.Sequential(nn.Linear(nf, nf), nn.SiLU(), nn.Linear(nf, 1))

        def forward(self, z, pos, idx_i, idx_j):
            r_ij = pos[idx_j] - pos[idx_i]
            d_ij = torch.norm(r_ij, dim=1)
            dir_ij = r_ij / d_ij.unsqueeze(-1)
            rbf, fcut = sinc_expansion(d_ij), cosine_cutoff(d_ij)
            s = self.embedding(z)
            v = torch.zeros(s.size(0), 3, nf)
            for msg, upd in zip(self.messages, self.updates):
                s, v = msg(s, v, idx_i, idx_j, dir_ij, rbf, fcut)
                s, v = upd(s, v)
            return self.out(s).sum(), s, v

    pos_np, z_np, batch_np = _molecules(16, [7])
    z, pos = torch.tensor(z_np), torch.tensor(pos_np)
    idx_j, idx_i = _radius_graph(torch, pos, torch.tensor(batch_np), cutoff)
    model = set_weights(torch, PaiNN(), seed=17)
    R = _rotation(torch, [1.0, 2.0, -0.5], -0.8)
    with torch.no_grad():
        e, s, v = model(z, pos, idx_i, idx_j)
        e_r, s_r, v_r = model(z, pos @ R.T, idx_i, idx_j)
    v_rot = torch.einsum("ij,njf->nif", R, v)
    e_ref, f_ref = torch.tensor(-2.0), torch.tensor(arr(40, pos.size(0), 3, scale=0.5))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, force_hist = [], []
    for _ in range(2):
        opt.zero_grad()
        p = pos.clone().requires_grad_(True)
        energy, _, _ = model(z, p, idx_i, idx_j)
        forces = -torch.autograd.grad(energy, p, grad_outputs=torch.ones_like(energy),
                                      create_graph=True, retain_graph=True)[0]  # fmt: skip
        loss = 0.05 * F.l1_loss(energy, e_ref) + F.mse_loss(forces, f_ref)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        force_hist.append(forces.detach())
    p = (pos @ R.T).requires_grad_(True)
    (g_rot,) = torch.autograd.grad(model(z, p, idx_i, idx_j)[0], p)
    p = pos.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(model(z, p, idx_i, idx_j)[0], p)
    return {"energy": e, "s": s, "v": v, "s_invariant": torch.allclose(s, s_r, atol=1e-4),
            "v_equivariant": torch.allclose(v_rot, v_r, atol=1e-4),
            "e_invariant": bool((e - e_r).abs() < 1e-4), "losses": losses,
            "force_hist": force_hist, "forces_rotate": torch.allclose(-g_rot, -g @ R.T, atol=1e-4),
            "grads": grads(model)}  # fmt: skip


@program(rtol=1e-4, atol=1e-4)
def mol_atom_types_onehot_embedding_and_atomrefs(torch):
    """Atom-type handling in QM9-style pipelines: atomic numbers mapped to type indices through a
    lookup tensor, ``F.one_hot`` features and their product with a weight matrix equal to an
    ``nn.Embedding`` lookup, ``torch.unique`` counts of elements, a per-molecule composition
    matrix by ``scatter_add_`` of one-hot rows, per-element atom reference energies fitted by
    least squares (``linalg.lstsq``, in float64) and subtracted, and the residual energies
    standardised. (Looser atol: float32 energies of hundreds of units.)"""
    nn, F = torch.nn, torch.nn.functional
    sizes = [5, 4, 6, 3, 7, 5, 4, 6]
    _, z_np, batch_np = _molecules(18, sizes)
    z, batch = torch.tensor(z_np), torch.tensor(batch_np)
    elements = torch.tensor([1, 6, 7, 8, 9])
    z_to_index = torch.full((10,), -1, dtype=torch.long)
    z_to_index[elements] = torch.arange(len(elements))
    types = z_to_index[z]
    onehot = F.one_hot(types, num_classes=len(elements)).float()
    emb = set_weights(torch, nn.Embedding(len(elements), 4), seed=19)
    via_onehot = onehot @ emb.weight
    via_lookup = emb(types)
    uniq, inverse, counts = torch.unique(z, return_inverse=True, return_counts=True)
    composition = torch.zeros(len(sizes), len(elements)).scatter_add_(
        0, batch.unsqueeze(-1).expand(-1, len(elements)), onehot
    )
    true_ref = torch.tensor([-0.6, -38.0, -54.5, -75.1, -99.8])
    noise = torch.tensor(arr(20, len(sizes), scale=0.05))
    energies = composition @ true_ref + noise
    # in float64: the residuals are hundreds of times smaller than the energies
    A, b = composition.double(), energies.double()
    fit = torch.linalg.lstsq(A, b.unsqueeze(-1)).solution.squeeze(-1)
    atomref = torch.zeros(10, dtype=torch.float64)
    atomref[elements] = fit
    residual = b - torch.zeros(len(sizes), dtype=torch.float64).index_add_(0, batch, atomref[z])
    mean, std = residual.mean(), residual.std()
    normalized = (residual - mean) / std
    heavy = (z > 1).long()
    heavy_atoms = torch.zeros(len(sizes), dtype=torch.long).scatter_add_(0, batch, heavy)
    return {"types": types, "onehot": onehot, "via_onehot": via_onehot, "via_lookup": via_lookup,
            "same": torch.allclose(via_onehot, via_lookup), "uniq": uniq, "inverse": inverse,
            "counts": counts, "composition": composition, "energies": energies, "fit": fit,
            "residual": residual, "normalized": normalized, "heavy_atoms": heavy_atoms,
            "argmax_back": elements[onehot.argmax(-1)]}  # fmt: skip


@program
def mol_readouts_per_molecule_and_dipole_moment(torch):
    """Graph-level readouts over a batch index vector, as PyG and SchNetPack write them: sums
    with ``index_add_``, means with ``bincount`` counts, maxima with ``scatter_reduce(amax)``,
    a per-molecule softmax attention pooling (max-shifted, ``scatter_add`` denominators),
    centres of mass from atomic masses, and a dipole moment from predicted partial charges made
    neutral per molecule (charges minus their molecular mean), with its norm in Debye; gradients
    of a loss on the dipole norms."""
    sizes = [4, 6, 3, 5]
    pos_np, z_np, batch_np = _molecules(21, sizes)
    pos, z, batch = torch.tensor(pos_np), torch.tensor(z_np), torch.tensor(batch_np)
    B, nf = len(sizes), 6
    h = torch.tensor(arr(22, len(z_np), nf), requires_grad=True)
    gate_w = torch.tensor(arr(23, nf, 1, scale=0.5), requires_grad=True)
    counts = torch.bincount(batch, minlength=B)
    sum_pool = torch.zeros(B, nf).index_add_(0, batch, h)
    mean_pool = sum_pool / counts.unsqueeze(-1).to(h.dtype)
    idx = batch.unsqueeze(-1).expand_as(h)
    max_pool = torch.zeros(B, nf).scatter_reduce(0, idx, h, reduce="amax", include_self=False)
    gate = (h @ gate_w).squeeze(-1)
    gate_max = torch.zeros(B).scatter_reduce(0, batch, gate.detach(), "amax", include_self=False)
    e = torch.exp(gate - gate_max[batch])
    denom = torch.zeros(B).scatter_add(0, batch, e)
    alpha = e / denom[batch]
    att_pool = torch.zeros(B, nf).index_add_(0, batch, alpha.unsqueeze(-1) * h)
    masses = torch.tensor([0.0, 1.008, 0, 0, 0, 0, 12.011, 14.007, 15.999, 18.998])[z]
    total_mass = torch.zeros(B).index_add_(0, batch, masses)
    com = torch.zeros(B, 3).index_add_(0, batch, masses.unsqueeze(-1) * pos) / total_mass[:, None]
    q = (h * torch.linspace(-1.0, 1.0, nf)).sum(-1)
    q_mean = torch.zeros(B).index_add_(0, batch, q) / counts
    q = q - q_mean[batch]
    total_charge = torch.zeros(B).index_add_(0, batch, q)
    dipole = torch.zeros(B, 3).index_add_(0, batch, q.unsqueeze(-1) * (pos - com[batch]))
    debye = torch.linalg.vector_norm(dipole, dim=-1) * 4.80320
    loss = ((debye - 2.0) ** 2).mean() + att_pool.pow(2).sum() * 0.01 + max_pool.sum() * 0.01
    loss.backward()
    return {"counts": counts, "sum": sum_pool, "mean": mean_pool, "max": max_pool,
            "alpha": alpha, "att": att_pool, "com": com, "neutral": total_charge.abs().max() < 1e-5,
            "dipole": dipole, "debye": debye, "loss": loss, "h_grad": h.grad,
            "gate_grad": gate_w.grad}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def mol_lennard_jones_velocity_verlet_periodic(torch):
    """Differentiable molecular dynamics (torchmd style) in float64: a shifted, truncated
    Lennard-Jones potential under periodic boundaries (minimum image), forces from
    ``autograd.grad`` compared with the analytic ``24 eps (2 (s/r)^12 - (s/r)^6) / r^2 * r_ij``,
    and eight velocity-Verlet steps with ``torch.no_grad`` in-place updates, positions wrapped
    back into the box with ``remainder``; kinetic, potential and total energies per step and the
    instantaneous temperature."""
    n, box, sigma, eps, rc, dt = 27, 4.5, 1.0, 1.0, 2.0, 0.002
    grid = torch.cartesian_prod(*[torch.arange(3, dtype=torch.float64)] * 3) * (box / 3) + 0.5
    pos = grid + torch.tensor(arr(24, n, 3, scale=0.05, dtype=np.float64))
    vel = torch.tensor(arr(25, n, 3, scale=0.5, dtype=np.float64))
    vel -= vel.mean(0)  # remove centre-of-mass motion
    mass = torch.ones(n, 1, dtype=torch.float64)
    ii, jj = torch.triu_indices(n, n, offset=1)
    shift = 4 * eps * ((sigma / rc) ** 12 - (sigma / rc) ** 6)

    def potential(x):
        d = x[jj] - x[ii]
        d = d - box * torch.round(d / box)
        r2 = (d * d).sum(-1)
        inside = r2 < rc**2
        sr6 = (sigma**2 / r2) ** 3
        e = torch.where(inside, 4 * eps * (sr6 * sr6 - sr6) - shift, torch.zeros_like(r2))
        return e.sum(), d, r2, inside

    def forces(x):
        x = x.detach().requires_grad_(True)
        e, _, _, _ = potential(x)
        (g,) = torch.autograd.grad(e, x)
        return e.detach(), -g

    e0, f0 = forces(pos)
    _, d, r2, inside = potential(pos)
    sr6 = (sigma**2 / r2) ** 3
    fmag = (24 * eps * (2 * sr6 * sr6 - sr6) / r2 * inside).unsqueeze(-1) * d
    f_analytic = (
        torch.zeros(n, 3, dtype=torch.float64).index_add_(0, jj, fmag).index_add_(0, ii, -fmag)
    )
    kinetic, potential_e, total, temperature = [], [], [], []
    f = f0
    for _ in range(8):
        with torch.no_grad():
            vel += 0.5 * dt * f / mass
            pos += dt * vel
            pos.copy_(torch.remainder(pos, box))
        e, f = forces(pos)
        with torch.no_grad():
            vel += 0.5 * dt * f / mass
        ke = 0.5 * (mass * vel**2).sum()
        kinetic.append(ke.item())
        potential_e.append(e.item())
        total.append((ke + e).item())
        temperature.append((2 * ke / (3 * n - 3)).item())
    return {"e0": e0, "f0": f0, "f_analytic": f_analytic,
            "forces_agree": torch.allclose(f0, f_analytic), "kinetic": kinetic,
            "potential": potential_e, "total": total, "temperature": temperature,
            "pos": pos, "vel": vel, "momentum": vel.sum(0)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_stress_from_strain_derivative_and_virial(torch):
    """Stress as NequIP and SchNetPack compute it: a symmetric strain ``eps`` (zeros with
    ``requires_grad``) deforms positions and cell by ``I + eps``, the energy of a smooth
    pairwise model under periodic images is differentiated with one ``autograd.grad`` call for
    forces and the virial, and ``stress = dE/deps / V``; compared with the virial
    ``-sum r_ij (x) f_ij / V`` from pair forces, and the pressure as minus a third of the
    trace. (Looser tolerance: sums over periodic images in float32.)"""
    nn = torch.nn
    cell0 = torch.tensor([[3.2, 0.0, 0.0], [0.4, 3.0, 0.0], [0.2, 0.3, 3.4]])
    frac = torch.tensor(_rng(26).uniform(0, 1, (6, 3)).astype(np.float32))
    pos0 = frac @ cell0
    pair_net = set_weights(torch, nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)),
                           seed=27)  # fmt: skip
    centers = torch.linspace(0.8, 2.4, 5)
    rc = 2.8
    shifts = torch.cartesian_prod(*[torch.arange(-1, 2)] * 3).float()
    n = pos0.size(0)
    a_idx, b_idx, s_idx = torch.meshgrid(torch.arange(n), torch.arange(n), torch.arange(27),
                                         indexing="ij")  # fmt: skip
    a_idx, b_idx, s_idx = a_idx.flatten(), b_idx.flatten(), s_idx.flatten()
    not_self = ~((a_idx == b_idx) & (s_idx == 13))  # shift (0, 0, 0) is index 13
    a_idx, b_idx, s_idx = a_idx[not_self], b_idx[not_self], s_idx[not_self]

    def energy_fn(pos, cell):
        vec = pos[b_idx] - pos[a_idx] + shifts[s_idx] @ cell
        r = vec.norm(dim=-1)
        fc = torch.where(r < rc, 0.5 * (torch.cos(math.pi * r / rc) + 1), torch.zeros_like(r))
        rbf = torch.exp(-4.0 * (r.unsqueeze(-1) - centers) ** 2)
        e_pair = pair_net(rbf).squeeze(-1) * fc
        return 0.5 * e_pair.sum(), vec

    strain = torch.zeros(3, 3, requires_grad=True)
    sym = 0.5 * (strain + strain.T)
    pos = (pos0.requires_grad_(True)) @ (torch.eye(3) + sym)
    cell = cell0 @ (torch.eye(3) + sym)
    energy, vec = energy_fn(pos, cell)
    volume = torch.abs(torch.linalg.det(cell0))
    dE_dpos, dE_deps = torch.autograd.grad(energy, [pos0, strain])
    forces = -dE_dpos
    stress = dE_deps / volume
    # virial from pair forces: dE/dvec for every pair vector
    energy2, vec2 = energy_fn(pos0.detach().requires_grad_(True), cell0)
    vec2.retain_grad()
    energy2.backward()
    virial = torch.einsum("pi,pj->ij", vec2, vec2.grad) / volume
    pressure = -torch.trace(stress) / 3
    return {"energy": energy, "forces": forces, "stress": stress, "virial": virial,
            "stress_matches_virial": torch.allclose(stress, virial, atol=1e-4),
            "symmetric": torch.allclose(stress, stress.T, atol=1e-5), "pressure": pressure,
            "volume": volume, "net_force": forces.sum(0).abs().max() < 1e-4}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_spherical_harmonics_tensor_product_messages(torch):
    """NequIP/e3nn-style equivariant messages written out by hand: real spherical harmonics
    ``l = 0, 1, 2`` of edge directions in e3nn's ``component`` normalisation (``y, z, x`` order
    for ``l = 1``), radial weights from an MLP of a Bessel basis with a polynomial cutoff,
    tensor products of a node's vector feature with the edge's harmonics into ``l = 0`` (dot),
    ``l = 1`` (cross) and ``l = 2`` (symmetric traceless) outputs summed into targets with
    ``index_add_``; the ``l = 0`` outputs are invariant and the ``l = 1`` outputs rotate under a
    fixed rotation; an invariant energy with its forces, whose rotation is checked too."""
    nn = torch.nn
    pos_np, _, batch_np = _molecules(28, [6], spread=0.9)
    pos = torch.tensor(pos_np)
    cutoff, nb = 2.5, 6
    idx_j, idx_i = _radius_graph(torch, pos, torch.tensor(batch_np), cutoff)
    radial_mlp = set_weights(torch, nn.Sequential(nn.Linear(nb, 16), nn.SiLU(),
                                                  nn.Linear(16, 4)), seed=29)  # fmt: skip
    vec_feat = torch.tensor(arr(30, pos.size(0), 3))

    def sh(vec):
        u = vec / vec.norm(dim=-1, keepdim=True)
        x, y, z = u.unbind(-1)
        y0 = torch.ones_like(x)
        y1 = math.sqrt(3) * torch.stack([y, z, x], dim=-1)
        s15 = math.sqrt(15)
        y2 = torch.stack([s15 * x * z, s15 * x * y, math.sqrt(5) * (y**2 - 0.5 * (x**2 + z**2)),
                          s15 * y * z, s15 / 2 * (z**2 - x**2)], dim=-1)  # fmt: skip
        return y0, y1, y2

    def poly_cutoff(x, p=6.0):
        out = 1.0
        out = out - (((p + 1.0) * (p + 2.0) / 2.0) * torch.pow(x, p))
        out = out + (p * (p + 2.0) * torch.pow(x, p + 1.0))
        out = out - ((p * (p + 1.0) / 2) * torch.pow(x, p + 2.0))
        return out * (x < 1.0)

    def layer(pos, vec_feat):
        r = pos[idx_j] - pos[idx_i]
        d = r.norm(dim=-1)
        bessel_w = torch.arange(1, nb + 1, dtype=d.dtype) * math.pi
        basis = (2.0 / cutoff) * torch.sin(bessel_w * d.unsqueeze(-1) / cutoff) / d.unsqueeze(-1)
        w = radial_mlp(basis) * poly_cutoff(d / cutoff).unsqueeze(-1)
        y0, y1, y2 = sh(r)
        f = vec_feat[idx_j][:, [1, 2, 0]]  # the vector feature in (y, z, x) order
        out0 = w[:, 0] * y0 + w[:, 1] * (f * y1).sum(-1) / math.sqrt(3)
        out1 = w[:, 2:3] * torch.linalg.cross(f, y1) / math.sqrt(2) + w[:, 3:4] * f
        n = pos.size(0)
        node0 = torch.zeros(n, dtype=pos.dtype).index_add_(0, idx_i, out0)
        node1 = torch.zeros(n, 3, dtype=pos.dtype).index_add_(0, idx_i, out1)
        node2 = torch.zeros(n, 5, dtype=pos.dtype).index_add_(0, idx_i, w[:, :1] * y2)
        return node0, node1, node2

    R = _rotation(torch, [-0.4, 0.9, 0.2], 2.0)
    # the l = 1 representation in (y, z, x) order is R with rows and columns permuted
    D1 = R[[1, 2, 0]][:, [1, 2, 0]]
    n0, n1, n2 = layer(pos, vec_feat)
    r0, r1, r2 = layer(pos @ R.T, vec_feat @ R.T)
    y0, y1, y2 = sh(pos[idx_j] - pos[idx_i])

    def energy_fn(p):
        a, b, c = layer(p, vec_feat)
        return (torch.tanh(a) + b.pow(2).sum(-1) * 0.1 + c.norm(dim=-1) * 0.05).sum()

    p = pos.clone().requires_grad_(True)
    energy = energy_fn(p)
    (g,) = torch.autograd.grad(energy, p)
    return {"y1": y1, "y2": y2, "y2_norm": y2.norm(dim=-1), "node0": n0, "node1": n1,
            "node2": n2, "inv0": torch.allclose(n0, r0, atol=1e-4),
            "eq1": torch.allclose(r1, n1 @ D1.T, atol=1e-4),
            "inv2_norm": torch.allclose(n2.norm(dim=-1), r2.norm(dim=-1), atol=1e-4),
            "energy": energy, "forces": -g}  # fmt: skip


@program(rtol=1e-4, atol=1e-4)
def mol_coulomb_matrix_kernel_ridge_regression(torch):
    """The classic QML pipeline (Rupp et al.): padded Coulomb matrices ``0.5 Z^2.4`` on the
    diagonal and ``Z_i Z_j / |R_i - R_j|`` off it, rows sorted by norm (``argsort``
    descending, ``gather``), the upper triangle as the descriptor, also the sorted eigenvalue
    spectrum (``eigvalsh``), a Laplacian kernel from ``cdist(p=1)``, kernel ridge regression by
    a Cholesky solve, and test-set MAE. Float64 as QML code uses. (Looser atol: Coulomb entries
    of hundreds of units.)"""
    max_atoms, n_mol = 6, 14
    rng = _rng(31)
    mats = []
    for _ in range(n_mol):
        k = int(rng.integers(3, max_atoms + 1))
        pos = torch.tensor(rng.standard_normal((k, 3)) * 1.2)
        z = torch.tensor(rng.choice([1.0, 6.0, 7.0, 8.0], size=k))
        dist = torch.cdist(pos, pos)
        cm = torch.outer(z, z) / dist.fill_diagonal_(1.0)
        cm.diagonal().copy_(0.5 * z**2.4)
        full = torch.zeros(max_atoms, max_atoms, dtype=torch.float64)
        full[:k, :k] = cm
        mats.append(full)
    C = torch.stack(mats)
    order = torch.sort(C.norm(dim=-1), dim=-1, descending=True, stable=True).indices
    C_sorted = torch.gather(C, 1, order.unsqueeze(-1).expand(-1, -1, max_atoms))
    C_sorted = torch.gather(C_sorted, 2, order.unsqueeze(1).expand(-1, max_atoms, -1))
    iu = torch.triu_indices(max_atoms, max_atoms)
    desc = C_sorted[:, iu[0], iu[1]]
    spectrum = torch.linalg.eigvalsh(C).flip(-1)
    y = desc[:, :3].sum(-1) * 0.01 + torch.tensor(rng.standard_normal(n_mol) * 0.1)
    train, test = torch.arange(10), torch.arange(10, n_mol)
    sigma = 200.0
    K = torch.exp(-torch.cdist(desc[train], desc[train], p=1) / sigma)
    K.diagonal().add_(1e-3)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y[train].unsqueeze(-1), L)
    K_test = torch.exp(-torch.cdist(desc[test], desc[train], p=1) / sigma)
    pred = (K_test @ alpha).squeeze(-1)
    mae = (pred - y[test]).abs().mean()
    return {"C": C, "order": order, "desc": desc, "spectrum": spectrum, "alpha": alpha,
            "pred": pred, "mae": mae, "K_diag": K.diagonal()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mol_kabsch_rmsd_and_denoising_training(torch):
    """Conformer comparison and coordinate denoising: Kabsch alignment of a batch of conformers
    (centring, covariance ``P^T Q`` with ``bmm``, ``linalg.svd``, the reflection fix with the
    sign of ``det``), the aligned RMSD and its gradient through the SVD; then a denoising
    pre-training objective: positions perturbed by fixed Gaussian noise, an equivariant head
    ``sum_j (x_i - x_j) phi(|x_i - x_j|^2, h_i, h_j)`` predicting the noise, and three Adam
    steps. (Looser tolerance: gradients through an SVD and Adam steps.)"""
    nn = torch.nn
    B, n = 3, 6
    ref = torch.tensor(arr(32, B, n, 3))
    R_true = torch.stack([_rotation(torch, [1.0, 0.2, -0.3], 0.7),
                          _rotation(torch, [0.0, 1.0, 1.0], -1.3),
                          _rotation(torch, [0.5, -0.5, 1.0], 2.4)])  # fmt: skip
    mob = (
        ref @ R_true.transpose(1, 2)
        + torch.tensor([0.3, -1.0, 0.5])
        + torch.tensor(arr(33, B, n, 3, scale=0.05))
    )
    mob.requires_grad_(True)

    def kabsch_rmsd(P, Q):
        P_c = P - P.mean(dim=1, keepdim=True)
        Q_c = Q - Q.mean(dim=1, keepdim=True)
        H = torch.bmm(P_c.transpose(1, 2), Q_c)
        U, S, Vh = torch.linalg.svd(H)
        d = torch.sign(torch.linalg.det(torch.bmm(Vh.transpose(1, 2), U.transpose(1, 2))))
        D = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], dim=-1))
        R = torch.bmm(torch.bmm(Vh.transpose(1, 2), D), U.transpose(1, 2))
        aligned = torch.bmm(P_c, R.transpose(1, 2))
        rmsd = torch.sqrt(((aligned - Q_c) ** 2).sum(-1).mean(-1))
        return rmsd, R

    rmsd, R_est = kabsch_rmsd(mob, ref)
    rmsd.sum().backward()
    plain = torch.sqrt(((mob.detach() - ref) ** 2).sum(-1).mean(-1))

    class NoiseHead(nn.Module):
        def __init__(self, nf=6):
            super().__init__()
            self.embed = nn.Embedding(4, nf)
            self.phi = nn.Sequential(nn.Linear(2 * nf + 1, 16), nn.SiLU(), nn.Linear(16, 1))

        def forward(self, types, x, row, col):
            h = self.embed(types)
            diff = x[row] - x[col]
            d2 = (diff**2).sum(-1, keepdim=True)
            w = self.phi(torch.cat([h[row], h[col], d2], dim=-1))
            return torch.zeros_like(x).index_add_(0, row, diff * w)

    x_clean = ref[0]
    types = torch.tensor([0, 1, 1, 2, 3, 0])
    row, col = (~torch.eye(n, dtype=torch.bool)).nonzero(as_tuple=True)
    noise = torch.tensor(arr(34, n, 3, scale=0.1))
    x_noisy = x_clean + noise
    head = set_weights(torch, NoiseHead(), seed=35)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ((head(types, x_noisy, row, col) - noise) ** 2).sum(-1).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"rmsd": rmsd, "plain_rmsd": plain, "R_est": R_est,
            "recovers_rotation": torch.allclose(R_est, R_true.transpose(1, 2), atol=0.05),
            "grad": mob.grad, "losses": losses, "grads": grads(head)}  # fmt: skip
