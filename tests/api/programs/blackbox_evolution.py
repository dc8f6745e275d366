"""Black-box and evolutionary optimisation as researchers write it in PyTorch, batched over the
population: OpenAI-style evolution strategies (antithetic noise, centered ranks from an argsort of
an argsort) training a small MLP through Adam, CMA-ES in float64 (``linalg.eigh``, evolution paths,
cumulative step-size adaptation), a cross-entropy-method MPC planner with ``topk`` elites, separable
NES whose gradients come from ``Normal.log_prob`` by autograd, a bit-string genetic algorithm for a
knapsack (tournaments with ``gather``, uniform crossover by masks, bit-flip mutation, elitism),
differential evolution (rand/1/bin), particle swarm optimisation with clamped velocities, batched
simulated annealing on a travelling-salesman tour with 2-opt moves, random search with successive
halving over SGD hyper-parameters, SPSA calibrating an oscillator simulation, a batched Nelder-Mead
and a Gaussian estimation-of-distribution algorithm sampling through a Cholesky factor. Every random
draw of every generation comes from NumPy and is passed in as a tensor."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import set_weights


def _rastrigin(x):
    return 10.0 * x.shape[-1] + (x**2 - 10.0 * (2 * math.pi * x).cos()).sum(-1)


def _rosenbrock(x):
    return (100.0 * (x[..., 1:] - x[..., :-1] ** 2) ** 2 + (1.0 - x[..., :-1]) ** 2).sum(-1)


@program
def bb_openai_es_mlp_regression(torch):
    """OpenAI-style ES on an MLP: antithetic noise, centered ranks (argsort of argsort), Adam."""
    nn = torch.nn
    rng = np.random.default_rng(101)
    x = rng.uniform(-2.0, 2.0, (48, 1)).astype(np.float32)
    y = (np.sin(2.0 * x) + 0.1 * x**2).astype(np.float32)
    X, Y = torch.tensor(x), torch.tensor(y)
    hidden = 12
    model = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, 1))
    set_weights(torch, model, seed=7)
    theta = nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    theta.requires_grad_(True)
    n = theta.numel()
    half, sigma, gens, l2 = 16, 0.05, 25, 0.005
    noise = torch.tensor(rng.standard_normal((gens, half, n)).astype(np.float32))
    opt = torch.optim.Adam([theta], lr=0.05)

    def population_loss(flat):
        """MSE of every flat parameter vector in ``flat`` (P, n), one batched forward pass."""
        W1, b1, W2, b2 = torch.split(flat, [hidden, hidden, hidden, 1], dim=1)
        h = torch.tanh(X @ W1.reshape(-1, hidden, 1).transpose(1, 2) + b1[:, None, :])
        pred = h @ W2.reshape(-1, 1, hidden).transpose(1, 2) + b2[:, None, :]
        return ((pred - Y) ** 2).mean(dim=(1, 2))

    best, center, grad_norms = [], [], []
    first_ranks = None
    for g in range(gens):
        eps = noise[g]
        with torch.no_grad():
            pop = torch.cat([theta + sigma * eps, theta - sigma * eps])
            fitness = -population_loss(pop)
            ranks = fitness.argsort().argsort()
            shaped = ranks.float() / (2 * half - 1) - 0.5
            weights = shaped[:half] - shaped[half:]
            grad = weights @ eps / (2 * half * sigma)
        if first_ranks is None:
            first_ranks = ranks
        opt.zero_grad()
        theta.grad = -grad + l2 * theta.detach()
        opt.step()
        best.append(fitness.max().item())
        grad_norms.append(grad.norm().item())
        with torch.no_grad():
            center.append(population_loss(theta[None])[0].item())
    nn.utils.vector_to_parameters(theta.detach(), model.parameters())
    with torch.no_grad():
        final = nn.functional.mse_loss(model(X), Y)
    return {
        "best_fitness": best,
        "center_loss": center,
        "grad_norms": grad_norms,
        "first_ranks": first_ranks,
        "theta": theta.detach(),
        "out_weight": model[2].weight,
        "final_mse": final,
        "shaped_dtype": str(shaped.dtype),
    }


@program
def bb_cmaes_rosenbrock(torch):
    """(mu/mu_w, lambda)-CMA-ES in float64 on Rosenbrock: eigh of C, paths ps/pc, CSA, hsig."""
    n, lam, gens = 6, 12, 60
    rng = np.random.default_rng(202)
    Z = torch.tensor(rng.standard_normal((gens, lam, n)))
    mean = torch.tensor(rng.uniform(-1.0, 1.0, n))
    sigma = 0.5
    mu = lam // 2
    w = math.log(mu + 0.5) - torch.log(torch.arange(1, mu + 1, dtype=torch.float64))
    w = w / w.sum()
    mueff = (w.sum() ** 2 / (w**2).sum()).item()
    cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
    cs = (mueff + 2) / (n + mueff + 5)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    damps = 1 + 2 * max(0.0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
    chi_n = n**0.5 * (1 - 1 / (4 * n) + 1 / (21 * n**2))
    C = torch.eye(n, dtype=torch.float64)
    pc = torch.zeros(n, dtype=torch.float64)
    ps = torch.zeros(n, dtype=torch.float64)
    best, sigmas, hsigs, conds = [], [], [], []
    first_elite = None
    for g in range(gens):
        evals, B = torch.linalg.eigh(C)
        D = evals.clamp_min(1e-20).sqrt()
        # symmetric square roots: the samples do not depend on the signs eigh gives its vectors
        sqrt_c = B @ torch.diag(D) @ B.T
        invsqrt_c = B @ torch.diag(1.0 / D) @ B.T
        X = mean + sigma * Z[g] @ sqrt_c
        f = _rosenbrock(X)
        order = torch.argsort(f)
        elite = X[order[:mu]]
        if first_elite is None:
            first_elite = order[:mu]
        old = mean
        mean = w @ elite
        step = (mean - old) / sigma
        ps = (1 - cs) * ps + math.sqrt(cs * (2 - cs) * mueff) * (invsqrt_c @ step)
        ps_norm = torch.linalg.vector_norm(ps)
        hsig = ps_norm / math.sqrt(1 - (1 - cs) ** (2 * (g + 1))) / chi_n < 1.4 + 2 / (n + 1)
        h = hsig.double()
        pc = (1 - cc) * pc + h * math.sqrt(cc * (2 - cc) * mueff) * step
        artmp = (elite - old) / sigma
        C = (
            (1 - c1 - cmu) * C
            + c1 * (torch.outer(pc, pc) + (1 - h) * cc * (2 - cc) * C)
            + cmu * artmp.T @ torch.diag(w) @ artmp
        )
        C = torch.triu(C) + torch.triu(C, 1).T
        sigma *= math.exp((cs / damps) * (ps_norm.item() / chi_n - 1))
        best.append(f[order[0]].item())
        sigmas.append(sigma)
        hsigs.append(bool(hsig))
        conds.append((evals.max() / evals.min()).item())
    return {
        "best_f": best,
        "sigma": sigmas,
        "hsig": hsigs,
        "cond": conds,
        "first_elite": first_elite,
        "mean": mean,
        "C": C,
        "eigvals": torch.linalg.eigvalsh(C),
        "weights": w,
        "f_at_mean": _rosenbrock(mean),
    }


@program
def bb_cem_mpc_planner(torch):
    """Cross-entropy-method MPC on a point mass: clamped action sequences, topk elites, warm starts."""
    H, A, P, K, iters, mpc_steps, dt = 10, 2, 64, 8, 5, 3, 0.1
    rng = np.random.default_rng(303)
    noise = torch.tensor(rng.standard_normal((mpc_steps, iters, P, H, A)).astype(np.float32))
    goal = torch.tensor([1.0, -0.5])

    def rollout(state, actions):
        """Returns of (P, H, A) action sequences from one (4,) state: pos, vel."""
        pos = state[:2].expand(actions.shape[0], 2)
        vel = state[2:].expand(actions.shape[0], 2)
        ret = torch.zeros(actions.shape[0])
        for t in range(actions.shape[1]):
            vel = 0.95 * vel + dt * actions[:, t]
            pos = pos + dt * vel
            ret = ret - ((pos - goal) ** 2).sum(-1) - 0.01 * (actions[:, t] ** 2).sum(-1)
        return ret

    state = torch.tensor([0.0, 0.0, 0.2, 0.1])
    mean = torch.zeros(H, A)
    std = torch.full((H, A), 0.5)
    elite_ids, best_returns, executed, states = [], [], [], []
    for s in range(mpc_steps):
        for it in range(iters):
            actions = (mean + std * noise[s, it]).clamp(-1.0, 1.0)
            returns = rollout(state, actions)
            top = torch.topk(returns, K)
            elites = actions[top.indices]
            mean = 0.1 * mean + 0.9 * elites.mean(0)
            std = 0.1 * std + 0.9 * elites.std(0, unbiased=False)
            elite_ids.append(top.indices)
            best_returns.append(top.values[0].item())
        plan_std = std
        a = mean[0]
        executed.append(a.clone())
        vel = 0.95 * state[2:] + dt * a
        state = torch.cat([state[:2] + dt * vel, vel])
        states.append(state)
        mean = torch.cat([mean[1:], torch.zeros(1, A)])
        std = torch.full((H, A), 0.5)
    return {
        "elite_ids": elite_ids,
        "best_returns": best_returns,
        "executed": torch.stack(executed),
        "states": torch.stack(states),
        "final_mean": mean,
        "plan_std": plan_std,
    }


@program
def bb_snes_log_derivative(torch):
    """Separable NES: log-derivative gradients of Normal.log_prob by autograd, natural-gradient SGD."""
    D = torch.distributions
    n, pop, gens = 8, 24, 40
    rng = np.random.default_rng(404)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Qt = torch.tensor(Q.astype(np.float32))
    scales = torch.tensor((10.0 ** np.linspace(0, 2, n)).astype(np.float32))
    x_star = torch.tensor(rng.uniform(-2, 2, n).astype(np.float32))
    eps_all = torch.tensor(rng.standard_normal((gens, pop, n)).astype(np.float32))

    def ellipsoid(x):
        return (scales * ((x - x_star) @ Qt.T) ** 2).sum(-1)

    k = torch.arange(1, pop + 1, dtype=torch.float32)
    u = (math.log(pop / 2 + 1) - torch.log(k)).clamp_min(0.0)
    utilities = u / u.sum() - 1.0 / pop  # best sample first
    mu = torch.zeros(n, requires_grad=True)
    log_sigma = torch.zeros(n, requires_grad=True)
    eta_sigma = (3 + math.log(n)) / (5 * math.sqrt(n))
    opt = torch.optim.SGD([{"params": [mu], "lr": 1.0}, {"params": [log_sigma], "lr": eta_sigma}])
    best, mean_f, grad0 = [], [], None
    for g in range(gens):
        dist = D.Normal(mu, log_sigma.exp())
        with torch.no_grad():
            x = mu + log_sigma.exp() * eps_all[g]
            f = ellipsoid(x)
            util = torch.empty_like(f)
            util[torch.argsort(f)] = utilities
        loss = -(util * dist.log_prob(x).sum(-1)).sum()
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():  # Fisher preconditioning of a diagonal Gaussian
            mu.grad.mul_(log_sigma.exp() ** 2)
            log_sigma.grad.mul_(0.5)
        if grad0 is None:
            grad0 = {"mu": mu.grad.clone(), "log_sigma": log_sigma.grad.clone(), "util": util}
        opt.step()
        best.append(f.min().item())
        mean_f.append(ellipsoid(mu.detach()).item())
    return {
        "best_f": best,
        "f_at_mean": mean_f,
        "grad0": grad0,
        "mu": mu.detach(),
        "sigma": log_sigma.detach().exp(),
        "utilities": utilities,
    }


@program
def bb_ga_knapsack_bits(torch):
    """Bit-string GA for 0/1 knapsack: tournaments via gather/argmax, mask crossover, xor mutation."""
    n_items, P, gens, tour, p_cross = 24, 32, 30, 3, 0.9
    rng = np.random.default_rng(505)
    values = torch.tensor(rng.integers(10, 60, n_items))
    weights = torch.tensor(rng.integers(5, 40, n_items))
    capacity = int(weights.sum().item()) // 3
    pop = torch.tensor(rng.random((P, n_items)) < 0.25)
    cand_all = torch.tensor(rng.integers(0, P, (gens, P, tour)))
    cross_mask = torch.tensor(rng.random((gens, P // 2, n_items)) < 0.5)
    do_cross = torch.tensor(rng.random((gens, P // 2, 1)) < p_cross)
    flips = torch.tensor(rng.random((gens, P, n_items)) < 1.0 / n_items)

    def fitness(genomes):
        total_v = (genomes.long() * values).sum(1)
        total_w = (genomes * weights).sum(1)
        return torch.where(total_w <= capacity, total_v, capacity - total_w)

    best, mean_fit, diversity, winners = [], [], [], []
    for g in range(gens):
        fit = fitness(pop)
        best.append(int(fit.max()))
        mean_fit.append(fit.float().mean().item())
        diversity.append(torch.unique(pop, dim=0).shape[0])
        cand = cand_all[g]
        win = cand.gather(1, fit[cand].argmax(dim=1, keepdim=True)).squeeze(1)
        winners.append(win)
        parents = pop[win]
        mom, dad = parents[0::2], parents[1::2]
        m = cross_mask[g] & do_cross[g]
        children = torch.cat([torch.where(m, mom, dad), torch.where(m, dad, mom)])
        children = children ^ flips[g]
        children[0] = pop[fit.argmax()]  # elitism
        pop = children
    fit = fitness(pop)
    champion = pop[fit.argmax()]
    return {
        "best": best,
        "mean_fit": mean_fit,
        "diversity": diversity,
        "winners": winners[:3] + winners[-2:],
        "final_fit": fit,
        "champion": champion,
        "champion_items": torch.nonzero(champion).squeeze(1),
        "champion_weight": (champion * weights).sum(),
        "pop_dtype": str(pop.dtype),
        "fit_dtype": str(fit.dtype),
    }


@program
def bb_differential_evolution(torch):
    """DE rand/1/bin on Rastrigin: donor indices, forced jrand crossover, greedy replacement."""
    P, n, gens, F, CR, lo, hi = 24, 10, 40, 0.6, 0.9, -5.12, 5.12
    rng = np.random.default_rng(606)
    pop = torch.tensor(rng.uniform(lo, hi, (P, n)).astype(np.float32))
    donors = np.empty((gens, P, 3), np.int64)
    for g in range(gens):
        for i in range(P):
            donors[g, i] = rng.choice(np.delete(np.arange(P), i), 3, replace=False)
    donors = torch.tensor(donors)
    cross_u = torch.tensor(rng.random((gens, P, n)).astype(np.float32))
    jrand = torch.tensor(rng.integers(0, n, (gens, P)))
    f_pop = _rastrigin(pop)
    rows = torch.arange(P)
    best, replaced = [], []
    for g in range(gens):
        r1, r2, r3 = donors[g].unbind(1)
        mutant = (pop[r1] + F * (pop[r2] - pop[r3])).clamp(lo, hi)
        cross = cross_u[g] < CR
        cross[rows, jrand[g]] = True
        trial = torch.where(cross, mutant, pop)
        f_trial = _rastrigin(trial)
        better = f_trial <= f_pop
        pop = torch.where(better.unsqueeze(1), trial, pop)
        f_pop = torch.where(better, f_trial, f_pop)
        best.append(f_pop.min().item())
        replaced.append(int(better.sum()))
    i_best = int(f_pop.argmin())
    return {
        "best_f": best,
        "replaced": replaced,
        "i_best": i_best,
        "x_best": pop[i_best],
        "f_pop": f_pop,
        "spread": pop.std(0),
    }


@program
def bb_pso_clamped_velocity(torch):
    """Global-best PSO on Rastrigin: decreasing inertia, velocity clamp, bound handling, argmin."""
    S, n, iters, c1, c2, lo, hi = 32, 8, 40, 1.49445, 1.49445, -5.12, 5.12
    vmax = 0.2 * (hi - lo)
    rng = np.random.default_rng(707)
    x = torch.tensor(rng.uniform(lo, hi, (S, n)).astype(np.float32))
    v = torch.tensor(rng.uniform(-vmax, vmax, (S, n)).astype(np.float32))
    R1 = torch.tensor(rng.random((iters, S, n)).astype(np.float32))
    R2 = torch.tensor(rng.random((iters, S, n)).astype(np.float32))
    pbest, pbest_f = x.clone(), _rastrigin(x)
    g = pbest_f.argmin()
    gbest = pbest[g]
    gbest_f, gbest_idx, n_improved, n_clipped = [], [], [], []
    for t in range(iters):
        w = 0.9 - 0.5 * t / (iters - 1)
        v = w * v + c1 * R1[t] * (pbest - x) + c2 * R2[t] * (gbest - x)
        v = torch.clamp(v, -vmax, vmax)
        x = x + v
        out = (x < lo) | (x > hi)
        x = x.clamp(lo, hi)
        v = v.masked_fill(out, 0.0)
        fx = _rastrigin(x)
        improved = fx < pbest_f
        pbest = torch.where(improved[:, None], x, pbest)
        pbest_f = torch.where(improved, fx, pbest_f)
        g = pbest_f.argmin()
        gbest = pbest[g]
        gbest_f.append(pbest_f[g].item())
        gbest_idx.append(g.item())
        n_improved.append(improved.sum().item())
        n_clipped.append(out.sum().item())
    return {
        "gbest_f": gbest_f,
        "gbest_idx": gbest_idx,
        "n_improved": n_improved,
        "n_clipped": n_clipped,
        "gbest": gbest,
        "pbest_f": pbest_f,
        "swarm_std": x.std(0),
        "speed": v.norm(dim=1),
    }


@program
def bb_sa_tsp_two_opt(torch):
    """Batched simulated annealing on a TSP: 2-opt reversals by index arithmetic, Metropolis test."""
    N, chains, steps, T0, alpha = 14, 8, 200, 1.0, 0.98
    rng = np.random.default_rng(808)
    coords = torch.tensor(rng.random((N, 2)).astype(np.float32))
    dist = torch.cdist(coords, coords)
    tours0 = np.stack([rng.permutation(N) for _ in range(chains)])
    moves = np.empty((steps, chains, 2), np.int64)
    for s in range(steps):
        for c in range(chains):
            while True:
                i, j = sorted(rng.choice(N, 2, replace=False))
                if j - i <= N - 3:  # reversing N-1 cities gives the same cycle backwards
                    break
            moves[s, c] = i, j
    moves = torch.tensor(moves)
    U = torch.tensor(rng.random((steps, chains)).astype(np.float32))

    def length(tours):
        return dist[tours, tours.roll(-1, dims=1)].sum(1)

    tour = torch.tensor(tours0)
    cur = length(tour)
    best_len, best_tour = cur.clone(), tour.clone()
    pos = torch.arange(N).expand(chains, N)
    T = T0
    accepted = torch.zeros(chains, dtype=torch.long)
    trace = []
    for s in range(steps):
        i, j = moves[s, :, :1], moves[s, :, 1:]
        inside = (pos >= i) & (pos <= j)
        cand = tour.gather(1, torch.where(inside, i + j - pos, pos))
        cand_len = length(cand)
        delta = cand_len - cur
        accept = (delta < 0) | (U[s] < torch.exp(-delta / T))
        tour = torch.where(accept[:, None], cand, tour)
        cur = torch.where(accept, cand_len, cur)
        accepted += accept.long()
        better = cur < best_len
        best_len = torch.where(better, cur, best_len)
        best_tour[better] = tour[better]
        T *= alpha
        if s % 20 == 19:
            trace.append(best_len.min().item())
    winner = int(best_len.argmin())
    return {
        "trace": trace,
        "best_len": best_len,
        "best_tour": best_tour,
        "accepted": accepted,
        "winner_tour": best_tour[winner],
        "recomputed": length(best_tour),
        "final_T": T,
    }


@program
def bb_successive_halving_sgd(torch):
    """Random search + successive halving over SGD lr/momentum/weight decay (one param group each)."""
    F = torch.nn.functional
    n_cfg, d = 16, 10
    rng = np.random.default_rng(909)
    w_true = rng.standard_normal(d)
    Xtr = rng.standard_normal((128, d))
    Xva = rng.standard_normal((64, d))
    ytr = (Xtr @ w_true + 0.5 * rng.standard_normal(128) > 0).astype(np.float32)
    yva = (Xva @ w_true + 0.5 * rng.standard_normal(64) > 0).astype(np.float32)
    Xtr, Xva = torch.tensor(Xtr.astype(np.float32)), torch.tensor(Xva.astype(np.float32))
    ytr, yva = torch.tensor(ytr), torch.tensor(yva)
    lrs = 10.0 ** rng.uniform(-3, 0.5, n_cfg)
    moms = rng.uniform(0.0, 0.95, n_cfg)
    wds = 10.0 ** rng.uniform(-5, -1, n_cfg)
    w0 = (rng.standard_normal(d) * 0.1).astype(np.float32)
    ws = [torch.tensor(w0).requires_grad_() for _ in range(n_cfg)]
    bs = [torch.zeros((), requires_grad=True) for _ in range(n_cfg)]
    opt = torch.optim.SGD(
        [
            {
                "params": [ws[c], bs[c]],
                "lr": float(lrs[c]),
                "momentum": float(moms[c]),
                "weight_decay": float(wds[c]),
            }
            for c in range(n_cfg)
        ],  # fmt: skip
        lr=0.1,
    )
    alive = list(range(n_cfg))
    survivors, rung_losses = [list(alive)], []
    steps = 5
    while len(alive) > 1:
        for _ in range(steps):
            W = torch.stack([ws[c] for c in alive])
            b = torch.stack([bs[c] for c in alive])
            logits = Xtr @ W.T + b
            target = ytr[:, None].expand_as(logits)
            losses = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(0)
            opt.zero_grad()
            losses.sum().backward()
            opt.step()
        with torch.no_grad():
            W = torch.stack([ws[c] for c in alive])
            b = torch.stack([bs[c] for c in alive])
            val_logits = Xva @ W.T + b
            val = F.binary_cross_entropy_with_logits(
                val_logits, yva[:, None].expand_as(val_logits), reduction="none"
            ).mean(0)
        rung_losses.append(val)
        keep = torch.argsort(val)[: len(alive) // 2]
        alive = [alive[i] for i in keep.tolist()]
        survivors.append(list(alive))
        steps *= 2
    c = alive[0]
    with torch.no_grad():
        acc = (((Xva @ ws[c] + bs[c]) > 0).float() == yva).float().mean()
    return {
        "survivors": survivors,
        "rung_losses": rung_losses,
        "winner": c,
        "winner_lr": opt.param_groups[c]["lr"],
        "w": ws[c].detach(),
        "b": bs[c].detach(),
        "val_acc": acc,
        "momentum_buf": opt.state[ws[c]]["momentum_buffer"],
    }


@program
def bb_spsa_oscillator_calibration(torch):
    """SPSA with Rademacher perturbations calibrating a damped oscillator; check vs autograd."""
    steps, dt, B, iters = 40, 0.05, 4, 30
    rng = np.random.default_rng(1010)

    def simulate(params):
        """Semi-implicit Euler of x'' = -k x - c x' + a sin(2t), batched over (M, 3) params."""
        k, c, a = params.unbind(-1)
        x = torch.ones_like(k)
        v = torch.zeros_like(k)
        xs = []
        for t in range(steps):
            v = v + dt * (-k * x - c * v + a * math.sin(2.0 * t * dt))
            x = x + dt * v
            xs.append(x)
        return torch.stack(xs, -1)

    true = torch.tensor([[4.0, 0.6, 1.5]])
    obs = simulate(true)[0] + torch.tensor(0.02 * rng.standard_normal(steps).astype(np.float32))

    def loss(params):
        return ((simulate(params) - obs) ** 2).mean(-1)

    deltas = torch.tensor(rng.choice([-1.0, 1.0], (iters, B, 3)).astype(np.float32))
    theta = torch.tensor([2.0, 0.2, 0.5])
    t0 = theta.clone().requires_grad_(True)
    loss(t0[None])[0].backward()
    a0, A, alpha, c0, gamma = 10.0, 5.0, 0.602, 0.1, 0.101
    history, ghat0 = [], None
    for k in range(iters):
        ak = a0 / (k + 1 + A) ** alpha
        ck = c0 / (k + 1) ** gamma
        dk = deltas[k]
        with torch.no_grad():
            both = loss(torch.cat([theta + ck * dk, theta - ck * dk]))
            diff = (both[:B] - both[B:]) / (2 * ck)
            ghat = (diff[:, None] / dk).mean(0)
            theta = theta - ak * ghat
        if ghat0 is None:
            ghat0 = ghat
        history.append(loss(theta[None])[0].item())
    cos = torch.nn.functional.cosine_similarity(ghat0, t0.grad, dim=0)
    return {
        "loss": history,
        "theta": theta,
        "ghat0": ghat0,
        "autograd0": t0.grad,
        "cosine": cos,
        "obs_head": obs[:5],
    }


@program
def bb_nelder_mead_batched(torch):
    """Batched Nelder-Mead (float64) on six Rosenbrock variants: sort/gather, masks, shrink steps."""
    Bn, n, iters = 6, 3, 50
    rng = np.random.default_rng(1111)
    a = torch.tensor(rng.uniform(0.5, 1.5, (Bn, 1)))
    b = torch.tensor(rng.uniform(5.0, 20.0, (Bn, 1)))

    def f(x):  # (Bn, ..., n) with per-problem coefficients
        shape = (Bn,) + (1,) * (x.dim() - 1)
        aa, bb = a.reshape(shape), b.reshape(shape)
        return ((aa - x[..., :-1]) ** 2 + bb * (x[..., 1:] - x[..., :-1] ** 2) ** 2).sum(-1)

    x0 = torch.tensor(rng.uniform(-1.5, 0.5, (Bn, n)))
    simplex = torch.cat([x0[:, None], x0[:, None] + 0.5 * torch.eye(n, dtype=torch.float64)], 1)
    fs = f(simplex)
    counts = {"reflect": 0, "expand": 0, "contract": 0, "shrink": 0}
    best_trace = []
    for _ in range(iters):
        order = fs.argsort(dim=1)
        simplex = simplex.gather(1, order[..., None].expand(-1, -1, n))
        fs = fs.gather(1, order)
        best, worst = simplex[:, 0], simplex[:, -1]
        fb, fsw, fw = fs[:, 0], fs[:, -2], fs[:, -1]
        c = simplex[:, :-1].mean(1)
        xr = c + (c - worst)
        xe = c + 2.0 * (xr - c)
        xoc = c + 0.5 * (xr - c)
        xic = c + 0.5 * (worst - c)
        fr, fe, foc, fic = f(xr), f(xe), f(xoc), f(xic)
        expand = (fr < fb) & (fe < fr)
        reflect = ((fr < fb) & ~expand) | ((fb <= fr) & (fr < fsw))
        outside = (fsw <= fr) & (fr < fw) & (foc <= fr)
        inside = (fr >= fw) & (fic < fw)
        shrink = ~(expand | reflect | outside | inside)
        new = torch.where(expand[:, None], xe, torch.where(reflect[:, None], xr, xoc))
        new = torch.where(inside[:, None], xic, new)
        fnew = torch.where(expand, fe, torch.where(reflect, fr, torch.where(inside, fic, foc)))
        simplex = torch.cat([simplex[:, :-1], new[:, None]], 1)
        fs = torch.cat([fs[:, :-1], fnew[:, None]], 1)
        shrunk = best[:, None] + 0.5 * (simplex - best[:, None])
        simplex = torch.where(shrink[:, None, None], shrunk, simplex)
        fs = torch.where(shrink[:, None], f(simplex), fs)
        counts["reflect"] += int(reflect.sum())
        counts["expand"] += int(expand.sum())
        counts["contract"] += int((outside | inside).sum())
        counts["shrink"] += int(shrink.sum())
        best_trace.append(fs.min(1).values)
    i = fs.argmin(1)
    return {
        "counts": counts,
        "best_trace": torch.stack(best_trace)[::5],
        "x_best": simplex[torch.arange(Bn), i],
        "f_best": fs.min(1).values,
        "diameter": torch.cdist(simplex, simplex).amax(dim=(1, 2)),
    }


@program
def bb_gaussian_eda_cholesky(torch):
    """Gaussian EDA (float64): samples through cholesky(C), topk elites, torch.cov, MVN log-probs."""
    D = torch.distributions
    n, P, K, gens, lr = 5, 40, 10, 25, 0.7
    rng = np.random.default_rng(1212)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    H = torch.tensor(Q @ np.diag(np.linspace(1.0, 25.0, n)) @ Q.T)
    x_star = torch.tensor(rng.uniform(1.0, 3.0, n))
    Z = torch.tensor(rng.standard_normal((gens, P, n)))

    def objective(x):
        d = x - x_star
        return 0.5 * ((d @ H) * d).sum(-1) + 0.1 * d.abs().sum(-1)

    mean = torch.zeros(n, dtype=torch.float64)
    cov = 4.0 * torch.eye(n, dtype=torch.float64)
    best, logdets, elite_lp, first_idx = [], [], [], None
    for g in range(gens):
        L = torch.linalg.cholesky(cov)
        X = mean + Z[g] @ L.T
        f = objective(X)
        idx = f.topk(K, largest=False).indices
        if first_idx is None:
            first_idx = idx
        elite = X[idx]
        elite_lp.append(D.MultivariateNormal(mean, scale_tril=L).log_prob(elite).mean().item())
        logdets.append(2.0 * L.diagonal().log().sum().item())
        best.append(f[idx[0]].item())
        diff = elite - mean  # rank-mu update around the old mean, as in EMNA/CMA
        mean = (1 - lr) * mean + lr * elite.mean(0)
        cov = (1 - lr) * cov + lr * (diff.T @ diff) / K + 1e-10 * torch.eye(n, dtype=torch.float64)
    L = torch.linalg.cholesky(cov)
    maha = torch.linalg.solve_triangular(L, (x_star - mean)[:, None], upper=False)
    return {
        "best_f": best,
        "logdet": logdets,
        "elite_logprob": elite_lp,
        "first_idx": first_idx,
        "mean": mean,
        "cov": cov,
        "mahalanobis": maha.norm(),
        "torch_cov_last": torch.cov(X[idx].T, correction=0),
    }
