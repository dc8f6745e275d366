"""Cellular automata and lattice simulations as researchers write them in PyTorch: Conway's Life
with ``conv2d`` neighbour counts on a torus (circular ``F.pad``, ``torch.roll``, float, uint8 and
bool states), elementary 1-D automata (rules 30 and 110) with shifts, ORs and a lookup table,
Lenia with a ring kernel convolved through ``torch.fft``, Gray-Scott reaction-diffusion with a
depthwise Laplacian stencil, a checkerboard Metropolis sweep of the 2-D Ising model, the abelian
sandpile's toppling loop on integer grids, a D2Q9 lattice-Boltzmann channel with bounce-back,
Wireworld circuits and the Drossel-Schwabl forest fire with integer states and ``torch.where``,
a Growing Neural Cellular Automaton (Sobel perception, 1x1-conv update rule, stochastic firing,
alive masking with ``max_pool2d``) trained with Adam, the heat and wave equations with explicit
and Crank-Nicolson steps, and site percolation with cluster labels spread by max-propagation.
Every random draw (initial grids, Metropolis uniforms, update masks, lightning) comes from NumPy,
never from the library's generator."""

from __future__ import annotations

import math

import numpy as np

from programs import program


def _moore_offsets() -> list[tuple[int, int]]:
    """The eight (dy, dx) offsets of the Moore neighbourhood."""
    return [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]


# ---------------------------------------------------------------------------------------------
# Conway's Game of Life and elementary automata


@program
def ca_game_of_life_and_life_like_rules(torch):
    """Life three ways (conv2d, roll, bool box) agree; glider; Life-like rule tables; cycles."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    init = (rng.random((32, 32)) < 0.35).astype(np.uint8)

    kernel = torch.ones(1, 1, 3, 3)
    kernel[0, 0, 1, 1] = 0
    box = torch.ones(1, 1, 3, 3)

    def step_conv(x):  # float (1, 1, H, W), neighbours by convolution on a circularly padded grid
        n = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), kernel)
        return ((n == 3) | ((x == 1) & (n == 2))).float()

    def step_roll(g):  # uint8 (H, W), neighbours as a sum of eight rolled copies
        n = sum(torch.roll(g, shifts=(dy, dx), dims=(0, 1)) for dy, dx in _moore_offsets())
        return ((n == 3) | ((g == 1) & (n == 2))).to(torch.uint8)

    def step_box(b):  # bool (H, W): the 3x3 sum including the cell is 3, or 4 for a live cell
        s = F.conv2d(F.pad(b.float()[None, None], (1, 1, 1, 1), mode="circular"), box)[0, 0]
        return (s == 3) | (b & (s == 4))

    x = torch.tensor(init, dtype=torch.float32)[None, None]
    g = torch.from_numpy(init.copy())
    b = torch.from_numpy(init.astype(bool))
    populations, activity, agree = [], [], True
    for _ in range(30):
        x_next = step_conv(x)
        activity.append(int((x_next != x).sum().item()))
        x, g, b = x_next, step_roll(g), step_box(b)
        populations.append(x.sum().item())
        agree = agree and torch.equal(x[0, 0].to(torch.uint8), g) and torch.equal(g.bool(), b)

    glider = torch.zeros(16, 16, dtype=torch.uint8)
    glider[1, 2] = glider[2, 3] = 1
    glider[3, 1:4] = 1
    state, shifted_after_4, back_after = glider, None, None
    for t in range(1, 65):
        state = step_roll(state)
        if t == 4:
            shifted_after_4 = torch.equal(state, torch.roll(glider, (1, 1), (0, 1)))
        if back_after is None and torch.equal(state, glider):
            back_after = t

    # Life-like rules on a batch of small boards: one conv module, one (2, 9) table per rule
    counter = torch.nn.Conv2d(1, 1, 3, padding=1, padding_mode="circular", bias=False)
    with torch.no_grad():
        counter.weight.copy_(kernel)

    def rule_table(rule):  # "B36/S23" -> table[state, neighbours] (bool)
        born, survive = (part[1:] for part in rule.split("/"))
        table = torch.zeros(2, 9, dtype=torch.bool)
        table[0, [int(d) for d in born]] = True
        table[1, [int(d) for d in survive]] = True
        return table

    boards = torch.from_numpy((rng.random((4, 1, 12, 12)) < 0.4).astype(np.int64))
    rules = {}
    for rule in ("B3/S23", "B36/S23"):
        table, cells, history = rule_table(rule), boards, [boards.flatten(1)]
        with torch.no_grad():
            for _ in range(40):
                n = counter(cells.float()).round().long()
                cells = table[cells, n].long()
                history.append(cells.flatten(1))
        seq = torch.stack(history, 1)  # (boards, time, cells)
        cycles = []
        for k in range(seq.shape[0]):
            _, inverse = torch.unique(seq[k], dim=0, return_inverse=True)
            first = {}
            for t, code in enumerate(inverse.tolist()):
                if code in first:
                    cycles.append([first[code], t - first[code]])
                    break
                first[code] = t
            else:
                cycles.append([-1, -1])
        rules[rule.replace("/", "_")] = {
            "final": cells[:, 0], "alive": cells.sum((1, 2, 3)),
            "cycles": torch.tensor(cycles), "table": table,
        }  # fmt: skip
    return {"final_float": x[0, 0], "final_uint8": g, "final_bool": b, "agree": agree,
            "populations": populations, "activity": activity, "dtype_roll": str(g.dtype),
            "dtype_box": str(b.dtype), "live_rows": b.any(1).nonzero().flatten(),
            "glider_shifted": shifted_after_4, "glider_period_on_torus": back_after,
            "glider_cells": state.nonzero(), "rules": rules}  # fmt: skip


@program
def ca_elementary_rules_30_and_110(torch):
    """Rules 30 and 110 by lookup table, by `rule >> idx & 1` and by XOR/OR agree; packing."""
    F = torch.nn.functional
    W, T = 64, 32

    def evolve(rule, row, periodic=True, mode="table"):
        table = torch.tensor([(rule >> i) & 1 for i in range(8)], dtype=torch.int64)
        rule_t = torch.tensor(rule, dtype=torch.int64)
        rows = [row]
        for _ in range(T - 1):
            if periodic:
                left, right = torch.roll(row, 1), torch.roll(row, -1)
            else:
                padded = F.pad(row, (1, 1))
                left, right = padded[:-2], padded[2:]
            idx = (left << 2) | (row << 1) | right
            row = table[idx] if mode == "table" else (rule_t >> idx) & 1
            rows.append(row)
        return torch.stack(rows)

    single = torch.zeros(W, dtype=torch.int64)
    single[W // 2] = 1
    r30 = evolve(30, single)
    r30_shift = evolve(30, single, mode="shift")
    # rule 30 as a boolean formula on bool rows
    b = single.bool()
    bool_rows = [b]
    for _ in range(T - 1):
        b = torch.roll(b, 1) ^ (b | torch.roll(b, -1))
        bool_rows.append(b)
    r30_bool = torch.stack(bool_rows)
    centre = r30[:, W // 2]
    centre_as_int = (centre * 2 ** torch.arange(T - 1, -1, -1)).sum()

    rng = np.random.default_rng(1)
    start = torch.from_numpy(rng.integers(0, 2, W).astype(np.int64))
    r110 = evolve(110, start)
    r110_zero = evolve(110, start, periodic=False)
    weights = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8)
    packed = (r110.to(torch.uint8).view(T, W // 8, 8) * weights).sum(-1).to(torch.uint8)
    return {"rule30": r30.to(torch.uint8), "rule30_same_shift": torch.equal(r30, r30_shift),
            "rule30_same_bool": torch.equal(r30.bool(), r30_bool), "centre_bits": centre,
            "centre_as_int": centre_as_int.item(), "rule30_density": r30.float().mean(1),
            "rule110": r110, "rule110_zero_boundary": r110_zero,
            "boundary_differs_at": (r110 != r110_zero).any(1).nonzero().flatten(),
            "rule110_packed": packed, "packed_dtype": str(packed.dtype),
            "rule110_ones": r110.sum(1).tolist()}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Continuous automata and reaction-diffusion


@program
def ca_lenia_fft_ring_kernel(torch):
    """Lenia: ring kernel, rfft2/irfft2 convolution, Gaussian growth, clamped steps; mass."""
    N, R = 64, 10
    mu, sigma, dt = 0.15, 0.015, 0.1
    coords = torch.arange(N, dtype=torch.float32) - N // 2
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    D = torch.sqrt(xx**2 + yy**2) / R
    K = torch.where((D > 0) & (D < 1), torch.exp(4 - 1 / (D * (1 - D))), torch.zeros_like(D))
    K = K / K.sum()
    fK = torch.fft.rfft2(torch.fft.ifftshift(K))

    def growth(U):
        return 2 * torch.exp(-((U - mu) ** 2) / (2 * sigma**2)) - 1

    rng = np.random.default_rng(2)
    A0 = np.zeros((N, N), np.float32)
    A0[20:44, 20:44] = rng.random((24, 24)).astype(np.float32)
    A = torch.from_numpy(A0)
    masses, potentials = [], []
    for _ in range(20):
        U = torch.fft.irfft2(torch.fft.rfft2(A) * fK, s=A.shape)
        A = torch.clamp(A + dt * growth(U), 0, 1)
        masses.append(A.sum().item())
        potentials.append(U.max().item())
    return {"kernel_sum": K.sum(), "kernel_peak_radius": D.flatten()[K.argmax()],
            "spectrum_dc": fK[0, 0].real, "spectrum_shape": list(fK.shape),
            "spectrum_dtype": str(fK.dtype), "final": A, "last_potential": U,
            "masses": masses, "potential_max": potentials, "alive": int((A > 0.1).sum())}  # fmt: skip


@program
def ca_gray_scott_reaction_diffusion(torch):
    """Gray-Scott with a grouped 9-point Laplacian conv2d on a circular pad, 120 steps."""
    F = torch.nn.functional
    N = 48
    DA, DB, feed, kill, dt = 0.16, 0.08, 0.035, 0.065, 1.0
    rng = np.random.default_rng(3)
    a = np.ones((N, N), np.float32)
    b = np.zeros((N, N), np.float32)
    a[20:28, 18:30], b[20:28, 18:30] = 0.5, 0.25
    b += 0.02 * rng.random((N, N)).astype(np.float32)
    AB = torch.from_numpy(np.stack([a, b]))[None]
    stencil = torch.tensor([[1.0, 4.0, 1.0], [4.0, -20.0, 4.0], [1.0, 4.0, 1.0]]) / 6
    lap_w = stencil.expand(2, 1, 3, 3).contiguous()
    diff = torch.tensor([DA, DB]).view(1, 2, 1, 1)
    b_mean, a_min = [], []
    for t in range(120):
        L = F.conv2d(F.pad(AB, (1, 1, 1, 1), mode="circular"), lap_w, groups=2)
        A, B = AB[:, :1], AB[:, 1:]
        abb = A * B * B
        react = torch.cat([-abb + feed * (1 - A), abb - (kill + feed) * B], dim=1)
        AB = AB + dt * (diff * L + react)
        if t % 20 == 19:
            b_mean.append(AB[:, 1].mean().item())
            a_min.append(AB[:, 0].min().item())
    return {"A": AB[0, 0], "B": AB[0, 1], "B_mean": b_mean, "A_min": a_min,
            "stencil_sum": stencil.sum(), "B_profile": AB[0, 1, N // 2],
            "B_above_half": int((AB[0, 1] > 0.25).sum())}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Statistical-physics lattices


@program
def ca_ising_checkerboard_metropolis(torch):
    """Ising Metropolis, checkerboard half-sweeps on int8 spins with NumPy uniforms."""
    L, sweeps = 32, 15
    rng = np.random.default_rng(4)
    start = rng.choice(np.array([-1, 1], dtype=np.int8), size=(L, L))
    uniforms = rng.random((2, sweeps, 2, L, L), dtype=np.float32)
    ii, jj = torch.meshgrid(torch.arange(L), torch.arange(L), indexing="ij")
    black = (ii + jj) % 2 == 0

    def neighbours(s):
        return (
            torch.roll(s, 1, 0) + torch.roll(s, -1, 0) + torch.roll(s, 1, 1) + torch.roll(s, -1, 1)
        )

    def energy(s):
        return -(s * (torch.roll(s, 1, 0) + torch.roll(s, 1, 1))).sum()

    out = {}
    for run, beta in enumerate((0.3, 0.6)):
        s = torch.from_numpy(start.copy())
        u_all = torch.from_numpy(uniforms[run])
        energies, mags, accepted = [], [], []
        for k in range(sweeps):
            n_acc = 0
            for half, mask in enumerate((black, ~black)):
                dE = 2 * s * neighbours(s)
                p_acc = torch.exp(-beta * dE.float())
                flip = mask & ((dE <= 0) | (u_all[k, half] < p_acc))
                s = torch.where(flip, -s, s)
                n_acc += int(flip.sum().item())
            energies.append(energy(s).item())
            mags.append(s.float().mean().item())
            accepted.append(n_acc)
        out[f"beta_{beta}"] = {"spins": s, "energy": energies, "magnetisation": mags,
                               "accepted": accepted, "abs_m": s.sum().abs(),
                               "dtype": str(s.dtype), "energy_dtype": str(energy(s).dtype)}  # fmt: skip
    return out


@program
def ca_abelian_sandpile(torch):
    """Sandpile toppling loops on int64 grids: centre pile, avalanches, abelian bulk drop."""
    F = torch.nn.functional

    def neighbours(t):
        p = F.pad(t, (1, 1, 1, 1))
        return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]

    def relax(z):
        odometer = torch.zeros_like(z)
        waves = 0
        while True:
            t = z // 4
            if not bool(t.any()):
                return z, odometer, waves
            z = z - 4 * t + neighbours(t)
            odometer += t
            waves += 1

    n = 25
    z = torch.zeros(n, n, dtype=torch.int64)
    z[n // 2, n // 2] = 600
    z, odometer, waves = relax(z)
    symmetric = (torch.equal(z, z.flip(0)) and torch.equal(z, z.flip(1))
                 and torch.equal(z, z.T))  # fmt: skip

    rng = np.random.default_rng(5)
    pile0 = rng.integers(0, 4, (12, 12))
    pile = torch.from_numpy(pile0.copy())
    sites = rng.integers(0, 12, (40, 2))
    sizes, durations, lost = [], [], []
    for i, j in sites.tolist():
        before = pile.sum()
        pile[i, j] += 1
        pile, odo, dur = relax(pile)
        sizes.append(int(odo.sum().item()))
        durations.append(dur)
        lost.append((before + 1 - pile.sum()).item())

    # abelian: all 40 grains at once (flat indices, scatter_add_) relax to the same pile, also
    # when every unstable site topples just once per wave instead of z // 4 times
    flat = torch.from_numpy(sites[:, 0] * 12 + sites[:, 1])
    bulk = (
        torch.from_numpy(pile0).flatten().scatter_add_(0, flat, torch.ones_like(flat)).view(12, 12)
    )
    bulk_relaxed, bulk_odo, bulk_waves = relax(bulk.clone())
    single, single_waves = bulk.clone(), 0
    while bool((single >= 4).any()):
        t = (single >= 4).long()
        single = single - 4 * t + neighbours(t)
        single_waves += 1
    drop_counts = torch.zeros(144, dtype=torch.int64).index_put_(
        (flat,), torch.ones_like(flat), accumulate=True
    )
    return {"centre_pile": z, "odometer": odometer, "waves": waves, "symmetric": symmetric,
            "grains_left": z.sum().item(), "heights": torch.bincount(z.flatten(), minlength=4),
            "max_height": z.max(), "pile": pile, "avalanche_sizes": sizes,
            "avalanche_durations": durations, "grains_lost": lost, "bulk_pile": bulk_relaxed,
            "abelian": torch.equal(bulk_relaxed, pile), "bulk_waves": bulk_waves,
            "bulk_topplings": bulk_odo.sum(), "single_waves": single_waves,
            "single_same": torch.equal(single, bulk_relaxed),
            "most_hit_site": torch.div(drop_counts.argmax(), 12, rounding_mode="floor"),
            "drop_counts": drop_counts.view(12, 12), "dtype": str(z.dtype)}  # fmt: skip


@program
def ca_site_percolation_cluster_labels(torch):
    """Percolation cluster labels by max-propagation (4- and 8-connected); spanning."""
    F = torch.nn.functional
    n = 32
    rng = np.random.default_rng(6)
    occ = torch.from_numpy(rng.random((n, n)) < 0.6)
    ids = torch.arange(1, n * n + 1).view(n, n)
    labels = torch.where(occ, ids, torch.zeros_like(ids))
    sweeps4 = 0
    while True:
        p = F.pad(labels, (1, 1, 1, 1))
        m = torch.maximum(torch.maximum(p[:-2, 1:-1], p[2:, 1:-1]),
                          torch.maximum(p[1:-1, :-2], p[1:-1, 2:]))  # fmt: skip
        new = torch.where(occ, torch.maximum(labels, m), labels)
        sweeps4 += 1
        if torch.equal(new, labels):
            break
        labels = new
    lab8 = torch.where(occ, ids, torch.zeros_like(ids)).float()[None, None]
    sweeps8 = 0
    while True:
        new = F.max_pool2d(lab8, 3, stride=1, padding=1) * occ.float()
        sweeps8 += 1
        if torch.equal(new, lab8):
            break
        lab8 = new
    lab8 = lab8[0, 0].long()

    def stats(lab):
        uniq, counts = torch.unique(lab[occ], return_counts=True)
        top, bottom = lab[0][occ[0]], lab[-1][occ[-1]]
        spanning = torch.isin(top, bottom)
        return {"clusters": uniq.numel(), "sizes": torch.sort(counts, descending=True).values[:8],
                "largest": counts.max(), "spans": bool(spanning.any()),
                "spanning_labels": torch.unique(top[spanning])}  # fmt: skip

    return {"occupied": int(occ.sum()), "labels4": labels, "labels8": lab8, "sweeps4": sweeps4,
            "sweeps8": sweeps8, "four": stats(labels), "eight": stats(lab8),
            "eight_coarser": bool((lab8 >= labels).all())}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Discrete-state automata with torch.where


_WIREWORLD = [
    "................................",
    ".....................##.........",
    ".............#########.########.",
    ".............#.......##.........",
    "..tH###......#..................",
    ".#.....#######..................",
    "..#####......#..................",
    ".............#.......##.........",
    ".............########.#########.",
    ".....................##.........",
    "................................",
]


@program
def ca_wireworld_clock_and_diodes(torch):
    """Wireworld on uint8 states: a clock loop feeding a forward and a reversed diode."""
    F = torch.nn.functional
    EMPTY, HEAD, TAIL, WIRE = 0, 1, 2, 3
    code = {".": EMPTY, "H": HEAD, "t": TAIL, "#": WIRE}
    grid = np.array([[code[c] for c in row] for row in _WIREWORLD], dtype=np.uint8)
    s = torch.from_numpy(grid)
    ones = torch.ones(1, 1, 3, 3)
    out_fwd, out_rev = (2, 30), (8, 30)
    heads, fwd, rev = [], [], []
    for _ in range(60):
        n = F.conv2d((s == HEAD).float()[None, None], ones, padding=1)[0, 0].to(torch.uint8)
        becomes_head = (s == WIRE) & ((n == 1) | (n == 2))
        s = torch.where(s == HEAD, TAIL, torch.where(s == TAIL, WIRE, s))
        s = torch.where(becomes_head, torch.full_like(s, HEAD), s)
        heads.append(int((s == HEAD).sum().item()))
        fwd.append(int(s[out_fwd].item()))
        rev.append(int(s[out_rev].item()))
    return {"state": s, "dtype": str(s.dtype), "heads": heads, "forward_end": fwd,
            "reverse_end": rev, "census": torch.bincount(s.flatten().long(), minlength=4)}  # fmt: skip


@program
def ca_forest_fire_drossel_schwabl(torch):
    """Drossel-Schwabl forest fire: max_pool2d spread, NumPy lightning/regrowth, census."""
    F = torch.nn.functional
    EMPTY, TREE, FIRE = 0, 1, 2
    n, steps, p_grow, p_lightning = 48, 40, 0.03, 2e-4
    rng = np.random.default_rng(7)
    state = torch.from_numpy((rng.random((n, n)) < 0.55).astype(np.uint8))
    state[n // 2, n // 2] = FIRE
    draws = torch.from_numpy(rng.random((steps, 2, n, n)))
    census, burnt, ever = [], 0, torch.zeros(n, n, dtype=torch.bool)
    for t in range(steps):
        burning = (state == FIRE).float()[None, None]
        near_fire = F.max_pool2d(burning, 3, stride=1, padding=1)[0, 0] > 0
        tree = state == TREE
        ignite = tree & (near_fire | (draws[t, 0] < p_lightning))
        grow = (state == EMPTY) & (draws[t, 1] < p_grow)
        state = torch.where(state == FIRE, torch.zeros_like(state), state)
        state = torch.where(ignite, torch.full_like(state, FIRE), state)
        state = torch.where(grow, torch.full_like(state, TREE), state)
        burnt += int(ignite.sum())
        ever |= ignite
        census.append(torch.bincount(state.flatten().long(), minlength=3).tolist())
    return {"state": state, "census": census, "burnt": burnt, "ever_burnt": ever,
            "burnt_fraction": ever.float().mean(), "dtype": str(state.dtype)}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Fluids and PDEs on grids


@program
def ca_lattice_boltzmann_d2q9_cylinder(torch):
    """D2Q9 lattice Boltzmann past a cylinder: roll streaming, mask bounce-back, BGK."""
    # a periodic channel with walls, driven by a small body force (a shift of the equilibrium
    # velocity); the obstacle's nodes reflect every population into its opposite direction
    ny, nx, tau, force = 24, 64, 0.7, 2e-5
    cx = torch.tensor([0, 1, 0, -1, 0, 1, -1, -1, 1])
    cy = torch.tensor([0, 0, 1, 0, -1, 1, 1, -1, -1])
    w = torch.tensor([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)
    opp = [0, 3, 4, 1, 2, 7, 8, 5, 6]
    y, x = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
    solid = ((x - nx // 4) ** 2 + (y - ny // 2) ** 2 <= (ny // 6) ** 2) | (y == 0) | (y == ny - 1)
    cxf, cyf = cx.float()[:, None, None], cy.float()[:, None, None]

    def equilibrium(rho, ux, uy):
        cu = 3 * (cxf * ux + cyf * uy)
        usq = 1.5 * (ux**2 + uy**2)
        return rho * w[:, None, None] * (1 + cu + 0.5 * cu**2 - usq)

    rng = np.random.default_rng(8)
    ux0 = torch.from_numpy((0.04 + 0.004 * rng.standard_normal((ny, nx))).astype(np.float32))
    ux0 = torch.where(solid, torch.zeros_like(ux0), ux0)
    f = equilibrium(torch.ones(ny, nx), ux0, torch.zeros(ny, nx))
    mass, mean_ux = [], []
    for t in range(50):
        f = torch.stack([torch.roll(f[i], (int(cy[i]), int(cx[i])), (0, 1)) for i in range(9)])
        reflected = f[:, solid][opp]
        rho = f.sum(0)
        ux = (f * cxf).sum(0) / rho + tau * force / rho
        uy = (f * cyf).sum(0) / rho
        f = f - (f - equilibrium(rho, ux, uy)) / tau
        f[:, solid] = reflected
        if t % 10 == 9:
            mass.append(f.sum().item())
            mean_ux.append(ux[~solid].mean().item())
    ux = torch.where(solid, torch.zeros_like(ux), ux)
    uy = torch.where(solid, torch.zeros_like(uy), uy)
    vorticity = (torch.roll(uy, -1, 1) - torch.roll(uy, 1, 1)) / 2 - (
        torch.roll(ux, -1, 0) - torch.roll(ux, 1, 0)
    ) / 2
    return {"solid_cells": int(solid.sum()), "mass": mass, "mean_ux": mean_ux, "ux": ux,
            "uy": uy, "rho": rho, "vorticity": vorticity, "max_speed": (ux**2 + uy**2).sqrt().max(),
            "wake_profile": ux[:, nx // 2]}  # fmt: skip


@program
def ca_heat_and_wave_equations(torch):
    """Heat equation (FTCS, Crank-Nicolson vs exact) and 1-D/2-D leapfrog wave equations."""
    F = torch.nn.functional
    # 2-D heat, explicit, Dirichlet edges (top held at 1), r = alpha dt / dx^2 = 0.2
    u = torch.zeros(32, 32)
    u[0, :] = 1.0
    heat, r = [], 0.2
    for t in range(150):
        c = u[1:-1, 1:-1]
        u[1:-1, 1:-1] = c + r * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * c)
        if t % 30 == 29:
            heat.append(u[1:-1, 1:-1].sum().item())

    # 1-D heat, Crank-Nicolson in float64: (I - r/2 A) u' = (I + r/2 A) u
    m, dt = 49, 1e-3
    dx = 1.0 / (m + 1)
    xs = torch.linspace(dx, 1 - dx, m, dtype=torch.float64)
    lap = (torch.diag(torch.full((m,), -2.0, dtype=torch.float64))
           + torch.diag(torch.ones(m - 1, dtype=torch.float64), 1)
           + torch.diag(torch.ones(m - 1, dtype=torch.float64), -1))  # fmt: skip
    rr = dt / dx**2
    eye = torch.eye(m, dtype=torch.float64)
    lhs, rhs = eye - rr / 2 * lap, eye + rr / 2 * lap
    v = torch.sin(math.pi * xs) + 0.5 * torch.sin(3 * math.pi * xs)
    for _ in range(40):
        v = torch.linalg.solve(lhs, rhs @ v)
    T = 40 * dt
    exact = torch.exp(torch.tensor(-(math.pi**2) * T, dtype=torch.float64)) * torch.sin(
        math.pi * xs
    ) + 0.5 * math.exp(-9 * math.pi**2 * T) * torch.sin(3 * math.pi * xs)

    # 1-D periodic string, leapfrog with courant number 0.5
    n, c2 = 128, 0.25
    grid = torch.arange(n, dtype=torch.float32)
    s = torch.exp(-(((grid - 40) / 5) ** 2))
    s_prev = s.clone()
    string_energy = []
    for t in range(80):
        s_next = 2 * s - s_prev + c2 * (torch.roll(s, 1) + torch.roll(s, -1) - 2 * s)
        s_prev, s = s, s_next
        if t % 10 == 9:
            kinetic = 0.5 * ((s - s_prev) ** 2).sum()
            potential = (
                0.5 * c2 * ((torch.roll(s, -1) - s) * (torch.roll(s_prev, -1) - s_prev)).sum()
            )
            string_energy.append((kinetic + potential).item())

    # 2-D membrane with fixed edges: the Laplacian as conv2d with zero padding
    stencil = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])[None, None]
    rng = np.random.default_rng(9)
    g = rng.standard_normal((2, 2)).astype(np.float32)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 33), torch.linspace(-1, 1, 33), indexing="ij")
    h = (g[0, 0] * torch.exp(-((xx - 0.2) ** 2 + yy**2) * 20)
         + g[0, 1] * torch.exp(-((xx + 0.3) ** 2 + (yy - 0.3) ** 2) * 30))[None, None]  # fmt: skip
    h_prev = h.clone()
    peak = []
    for _ in range(60):
        lap_h = F.conv2d(h, stencil, padding=1)
        h, h_prev = 2 * h - h_prev + 0.2 * lap_h, h
        peak.append(h.abs().max().item())
    return {"heat_plate": u, "heat_content": heat, "cn_solution": v,
            "cn_error": (v - exact).abs().max(), "cn_dtype": str(v.dtype),
            "string": s, "string_energy": string_energy, "membrane": h[0, 0],
            "membrane_peak": peak}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Growing Neural Cellular Automata (Mordvintsev et al., 2020)


@program
def ca_growing_nca_adam_training(torch):
    """Growing NCA (Sobel perception, alive mask, sample pool) trained 4 Adam steps."""
    # Mordvintsev et al. (2020): identity + Sobel perception as a depthwise conv2d, a 1x1-conv
    # update MLP, NumPy fire masks, alive masking by max_pool2d, per-parameter normalised grads
    nn, F = torch.nn, torch.nn.functional
    C, H, S, B, steps = 8, 32, 16, 2, 10

    class CAModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Conv2d(3 * C, H, 1)
            self.w2 = nn.Conv2d(H, C, 1, bias=False)
            ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
            sobel_x = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8
            kernels = torch.stack([ident, sobel_x, sobel_x.T])
            self.register_buffer("kernel", kernels.repeat(C, 1, 1)[:, None])

        def perceive(self, x):
            return F.conv2d(x, self.kernel, padding=1, groups=C)

        def alive(self, x):
            return F.max_pool2d(x[:, 3:4], kernel_size=3, stride=1, padding=1) > 0.1

        def forward(self, x, fire):
            pre = self.alive(x)
            dx = self.w2(F.relu(self.w1(self.perceive(x))))
            x = x + dx * fire
            post = self.alive(x)
            return x * (pre & post).float()

    model = CAModel()
    rng = np.random.default_rng(10)
    with torch.no_grad():
        model.w1.weight.copy_(torch.from_numpy(
            (rng.standard_normal((H, 3 * C, 1, 1)) * 0.3).astype(np.float32)))  # fmt: skip
        model.w1.bias.copy_(torch.from_numpy((rng.standard_normal(H) * 0.1).astype(np.float32)))
        model.w2.weight.copy_(torch.from_numpy(
            (rng.standard_normal((C, H, 1, 1)) * 0.01).astype(np.float32)))  # fmt: skip
    yy, xx = np.mgrid[0:S, 0:S] - (S - 1) / 2
    disk = (np.hypot(yy, xx) < 5).astype(np.float32)
    colour = rng.random((3, 1, 1)).astype(np.float32)
    target = torch.from_numpy(np.concatenate([colour * disk, disk[None]])[None])
    seed = torch.zeros(1, C, S, S)
    seed[:, 3:, S // 2, S // 2] = 1.0
    fires = torch.from_numpy((rng.random((4, steps, B, 1, S, S)) < 0.5).astype(np.float32))

    # the sample pool: batches drawn by NumPy, the worst sample reseeded, results written back
    pool = seed.repeat(6, 1, 1, 1)
    picks = [rng.choice(6, size=B, replace=False) for _ in range(4)]
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses, grad_norms, first_grads, worst = [], [], None, []
    for it in range(4):
        idx = torch.from_numpy(picks[it])
        x = pool[idx].clone()
        if it > 0:
            per_sample = ((x[:, :4] - target) ** 2).mean((1, 2, 3))
            order = torch.argsort(per_sample, descending=True, stable=True)  # seeds tie
            worst.append(int(idx[order[0]]))
            x[order[0]] = seed[0]
        for k in range(steps):
            x = model(x, fires[it, k])
        loss = F.mse_loss(x[:, :4], target.expand(B, -1, -1, -1))
        opt.zero_grad()
        loss.backward()
        if first_grads is None:
            first_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        grad_norms.append([p.grad.norm().item() for p in model.parameters()])
        with torch.no_grad():
            for p in model.parameters():
                p.grad /= p.grad.norm() + 1e-8
        opt.step()
        pool[idx] = x.detach()
        losses.append(loss.item())
    return {"losses": losses, "grad_norms": grad_norms, "first_grads": first_grads,
            "w2": model.w2.weight, "alpha": x[0, 3].detach(), "worst_reseeded": worst,
            "pool_alpha_mass": pool[:, 3].sum((1, 2)),
            "alive_cells": int((x[:, 3] > 0.1).sum()), "state_dtype": str(x.dtype),
            "kernel_shape": list(model.kernel.shape)}  # fmt: skip
