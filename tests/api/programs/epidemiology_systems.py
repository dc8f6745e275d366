"""Epidemiology and systems-biology modelling as differentiable compartmental-model code writes it:
SIR/SEIR models stepped with explicit Euler and classical RK4 in Python time loops and fitted to
fixed observed curves by gradient descent (Adam, LBFGS) with ``softplus``/``exp``-parameterised
rates, an age-structured SEIR with a contact matrix (one ``matmul`` per day), its next-generation
matrix and a vaccine allocation optimised through the simulation, a metapopulation model coupled by
a row-stochastic mobility matrix, Poisson and negative-binomial count likelihoods written with
``lgamma`` and checked against ``torch.distributions``, Cori-style renewal-equation R_t estimation
with ``conv1d`` over a discretised gamma serial interval, Hill-function gene-regulatory networks
(the repressilator) and Michaelis-Menten kinetics with Jacobian standard errors, Lotka-Volterra and
logistic/Richards growth fits, a MAP objective with ``LogNormal``/``Gamma`` priors and a Laplace
approximation, batched scenario runs with the final-size relation solved by Newton's method,
toggle-switch steady states and their stability, Erlang-staged infectious periods with
``matrix_exp``, line-list aggregation with a nowcast and seroprevalence posteriors, a gravity
model with ``vmap``/``jvp`` sensitivities, and a torchdiffeq-style module with an adaptive
Dormand-Prince solver. Observed curves come from NumPy simulations with fixed seeds; nothing random comes from the
library."""

# S, E, I, R are the compartments' names in every epidemiology text:
# ruff: noqa: E741

from __future__ import annotations

import math

import numpy as np

from programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _sir_numpy(beta: float, gamma: float, i0: float, days: int, dt: float = 1.0) -> np.ndarray:
    """Reference SIR fractions [days, 3] by Euler in float64 (the "observed" truth)."""
    s, i, r = 1.0 - i0, i0, 0.0
    out = []
    for _ in range(days):
        inf, rec = beta * s * i * dt, gamma * i * dt
        s, i, r = s - inf, i + inf - rec, r + rec
        out.append((s, i, r))
    return np.array(out)


def _rk4(f, y, dt, steps):
    """Classical fourth-order Runge-Kutta; returns the trajectory [steps, *y.shape]."""
    out = []
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return out


@program
def epi_sir_euler_softplus_rates_adam_fit(torch):
    """The textbook differentiable SIR: rates ``beta = softplus(raw)``, ``gamma = softplus(raw)``,
    explicit Euler over days in a Python loop with ``torch.stack`` of the compartments, a squared
    error on log prevalence against a noisy observed curve, Adam with a step LR schedule; then R0,
    the peak day and the fitted curve."""
    F = torch.nn.functional
    days = 24
    truth = _sir_numpy(0.45, 0.15, 1e-3, days)
    noise = np.exp(_rng(10).normal(0.0, 0.05, days))
    i_obs = torch.tensor((truth[:, 1] * noise).astype(np.float32))

    raw = torch.tensor([0.0, -1.5], requires_grad=True)
    opt = torch.optim.Adam([raw], lr=0.08)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=6, gamma=0.5)

    def simulate(beta, gamma):
        s, i, r = torch.tensor(1.0 - 1e-3), torch.tensor(1e-3), torch.tensor(0.0)
        traj = []
        for _ in range(days):
            new_inf = beta * s * i
            new_rec = gamma * i
            s, i, r = s - new_inf, i + new_inf - new_rec, r + new_rec
            traj.append(torch.stack([s, i, r]))
        return torch.stack(traj)

    losses = []
    for _ in range(12):
        opt.zero_grad()
        beta, gamma = F.softplus(raw).unbind()
        traj = simulate(beta, gamma)
        loss = F.mse_loss(torch.log(traj[:, 1]), torch.log(i_obs))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    with torch.no_grad():
        beta, gamma = F.softplus(raw)
        fitted = simulate(beta, gamma)
    conserved = fitted.sum(1)
    return {"losses": losses, "raw": raw, "grad": raw.grad, "beta": beta, "gamma": gamma,
            "r0": beta / gamma, "peak_day": int(fitted[:, 1].argmax()), "fitted": fitted,
            "conserved": conserved, "lr": sched.get_last_lr()}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # LBFGS's two-loop recursion and curvature pairs amplify rounding
def epi_seir_rk4_poisson_incidence_lbfgs(torch):
    """SEIR in counts integrated with RK4 (a vector field on a ``[4]`` state tensor), daily
    incidence from a cumulative-onsets compartment (event rates times a stoichiometry matrix) by
    ``torch.diff``, a Poisson NLL (``poisson_nll_loss`` with ``log_input=False, full=True``) against
    observed counts, fitted with LBFGS and a closure over log-rates."""
    N = 10000.0
    days = 21
    rng = _rng(11)
    # observed incidence from a float64 SEIR (beta 0.6, sigma 1/3, gamma 1/4)
    s, e, i, r, c = N - 10, 5.0, 5.0, 0.0, 0.0
    inc = []
    for _ in range(days):
        for _ in range(4):
            dt = 0.25
            ni, ne, nr = 0.6 * s * i / N * dt, e / 3 * dt, i / 4 * dt
            s, e, i, r, c = s - ni, e + ni - ne, i + ne - nr, r + nr, c + ne
        inc.append(c)
    inc = np.diff(np.concatenate([[0.0], inc]))
    obs = torch.tensor(rng.poisson(inc).astype(np.float32))

    log_rates = torch.tensor([math.log(0.4), math.log(0.25), math.log(0.3)], requires_grad=True)
    opt = torch.optim.LBFGS([log_rates], lr=0.5, max_iter=6, history_size=5)

    # rows: infection S->E, onset E->I (also counted in the last column), recovery I->R
    stoich = torch.tensor([[-1.0, 1.0, 0.0, 0.0, 0.0],
                           [0.0, -1.0, 1.0, 0.0, 1.0],
                           [0.0, 0.0, -1.0, 1.0, 0.0]])  # fmt: skip

    def incidence(log_rates):
        beta, sigma, gamma = log_rates.exp().unbind()

        def f(y):  # event rates times the stoichiometry matrix
            s, e, i = y[0], y[1], y[2]
            return torch.stack([beta * s * i / N, sigma * e, gamma * i]) @ stoich

        y0 = torch.tensor([N - 10, 5.0, 5.0, 0.0, 0.0])
        traj = torch.stack(_rk4(f, y0, 1.0, days))
        cum = traj[:, 4]
        return torch.diff(cum, prepend=torch.zeros(1)).clamp(min=1e-6)

    losses = []

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.poisson_nll_loss(
            incidence(log_rates), obs, log_input=False, full=True
        )
        loss.backward()
        losses.append(loss.item())
        return loss

    opt.step(closure)
    with torch.no_grad():
        fitted = incidence(log_rates)
        rates = log_rates.exp()
    return {"losses": losses, "log_rates": log_rates, "rates": rates, "fitted": fitted,
            "r0": rates[0] / rates[2], "latent_days": 1 / rates[1],
            "n_evals": len(losses)}  # fmt: skip


@program
def epi_age_structured_seir_contact_matrix_vaccination(torch):
    """An age-structured SEIR with four age bands: force of infection ``beta * susc * (C @ (I/N))``
    per day (one ``matmul`` per Euler step), the next-generation matrix and R0 as its spectral
    radius (``linalg.eigvals`` and power iteration), the attack rate per band, and a vaccine
    allocation over bands (``softmax`` of logits times a dose budget) optimised with Adam through
    the whole simulation."""
    F = torch.nn.functional
    rng = _rng(12)
    pop = torch.tensor([0.22, 0.38, 0.27, 0.13])
    base = rng.uniform(0.5, 2.0, (4, 4))
    C = torch.tensor(((base + base.T) / 2 + np.diag([6.0, 4.0, 3.0, 2.0])).astype(np.float32))
    susc = torch.tensor([0.4, 0.8, 0.9, 1.0])
    beta, sigma, gamma = 0.06, 1 / 3, 1 / 5

    ngm = beta / gamma * susc[:, None] * C * pop[None, :] / pop[:, None]
    r0_eig = torch.linalg.eigvals(ngm).abs().max()
    v = torch.ones(4) / 2
    for _ in range(30):
        v = ngm @ v
        v = v / v.norm()
    r0_power = (v @ (ngm @ v)) / (v @ v)

    def run(vaccinated, days=35):
        S = pop - vaccinated
        E = torch.full((4,), 1e-4) * pop
        I = torch.full((4,), 1e-4) * pop
        R = vaccinated.clone()
        prev = []
        for _ in range(days):
            lam = beta * susc * (C @ (I / pop))
            new_e, new_i, new_r = lam * S, sigma * E, gamma * I
            S, E, I, R = S - new_e, E + new_e - new_i, I + new_i - new_r, R + new_r
            prev.append(I)
        return torch.stack(prev), S

    prev0, s_end0 = run(torch.zeros(4))
    attack0 = 1 - s_end0 / pop
    budget = 0.2
    logits = torch.zeros(4, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.3)
    totals = []
    for _ in range(8):
        opt.zero_grad()
        alloc = F.softmax(logits, 0) * budget
        alloc = torch.minimum(alloc, 0.9 * pop)
        prev, s_end = run(alloc)
        infected = (pop - alloc - s_end).sum()
        infected.backward()
        opt.step()
        totals.append(infected.item())
    return {"ngm": ngm, "r0_eig": r0_eig, "r0_power": r0_power, "eigvec": v,
            "attack0": attack0, "peak_day0": prev0.argmax(0), "peak_prev0": prev0.amax(0),
            "totals": totals, "alloc": F.softmax(logits, 0).detach() * budget,
            "logits_grad": logits.grad}  # fmt: skip


@program
def epi_metapopulation_mobility_matrix_commuting_sir(torch):
    """A commuting metapopulation SIR over five patches: a row-stochastic mobility matrix from
    ``softmax`` of logits with a large stay-at-home diagonal, effective prevalence where people
    spend the day (``M.T @ I`` over ``M.T @ N``), infection of residents by ``einsum``, arrival
    days from a threshold with ``argmax``, and the sensitivity of the epidemic size to the
    mobility logits and to per-patch transmission (two backward passes)."""
    rng = _rng(13)
    P = 5
    N = torch.tensor(rng.uniform(1e4, 1e5, P).astype(np.float32))
    logits0 = rng.normal(0.0, 1.0, (P, P)) + np.eye(P) * 4.0
    mob_logits = torch.tensor(logits0.astype(np.float32), requires_grad=True)
    log_beta = torch.tensor(np.log(rng.uniform(0.3, 0.5, P)).astype(np.float32), requires_grad=True)
    gamma = 0.2

    M = torch.softmax(mob_logits, dim=1)
    S = N.clone()
    I = torch.zeros(P)
    I = I.index_fill(0, torch.tensor([0]), 20.0)
    S = S - I
    R = torch.zeros(P)
    beta = log_beta.exp()
    prev = []
    for _ in range(40):
        n_eff = M.t() @ N
        i_eff = M.t() @ I
        foi = torch.einsum("ij,j,j->i", M, beta, i_eff / n_eff)
        new_inf = foi * S
        new_rec = gamma * I
        S, I, R = S - new_inf, I + new_inf - new_rec, R + new_rec
        prev.append(I / N)
    prev = torch.stack(prev)
    size = (R + I).sum() / N.sum()
    size.backward()
    arrived = prev > 1e-3
    arrival = torch.where(arrived.any(0), arrived.float().argmax(0), torch.tensor(-1))
    return {"M_diag": M.diagonal(), "prev_last": prev[-1], "prev_mid": prev[20],
            "size": size, "arrival": arrival, "mob_grad": mob_logits.grad,
            "beta_grad": log_beta.grad, "row_sums": M.sum(1)}  # fmt: skip


@program
def epi_poisson_negative_binomial_lgamma_likelihoods(torch):
    """Count likelihoods as surveillance models write them: Poisson and NB2 log-pmfs by hand with
    ``lgamma``, checked against ``distributions.Poisson``/``NegativeBinomial`` and
    ``poisson_nll_loss``; then a log-linear NB regression of daily cases on a trend and
    day-of-week effects with a learned overdispersion (``exp`` of a log), fitted with Adam."""
    rng = _rng(14)
    T = 42
    t = np.arange(T)
    dow = t % 7
    eff = np.array([0.2, 0.1, 0.0, 0.0, -0.1, -0.4, -0.5])
    mu_true = np.exp(3.0 + 0.03 * t + eff[dow])
    r_true = 8.0
    y_np = rng.negative_binomial(r_true, r_true / (r_true + mu_true)).astype(np.float32)
    y = torch.tensor(y_np)

    def nb_logpmf(y, mu, r):
        return (torch.lgamma(y + r) - torch.lgamma(r) - torch.lgamma(y + 1)
                + r * torch.log(r / (r + mu)) + y * torch.log(mu / (r + mu)))  # fmt: skip

    mu = torch.tensor(mu_true.astype(np.float32))
    pois_manual = y * torch.log(mu) - mu - torch.lgamma(y + 1)
    pois_dist = torch.distributions.Poisson(mu).log_prob(y)
    pois_loss = torch.nn.functional.poisson_nll_loss(mu.log(), y, log_input=True, full=False)
    r = torch.tensor(r_true)
    nb_manual = nb_logpmf(y, mu, r)
    nb_dist = torch.distributions.NegativeBinomial(total_count=r, probs=mu / (r + mu)).log_prob(y)
    nb_logits = torch.distributions.NegativeBinomial(
        total_count=r, logits=torch.log(mu) - torch.log(r)
    ).log_prob(y)

    X = torch.cat([torch.ones(T, 1), torch.tensor(t[:, None] / T, dtype=torch.float32),
                   torch.nn.functional.one_hot(torch.tensor(dow), 7)[:, 1:].float()], dim=1)  # fmt: skip
    coef = torch.zeros(X.shape[1], requires_grad=True)
    log_r = torch.zeros((), requires_grad=True)
    with torch.no_grad():
        coef[0] = y[:7].mean().log()  # start from the first week's level
    opt = torch.optim.Adam([coef, log_r], lr=0.05)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        mu_hat = torch.exp(X @ coef)
        nll = -nb_logpmf(y, mu_hat, log_r.exp()).mean()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    return {"pois_manual": pois_manual, "pois_dist": pois_dist, "pois_loss": pois_loss,
            "nb_manual": nb_manual, "nb_dist": nb_dist, "nb_logits": nb_logits,
            "nb_sum": nb_manual.sum(), "losses": losses, "coef": coef, "dispersion": log_r.exp(),
            "coef_grad": coef.grad}  # fmt: skip


@program
def epi_renewal_equation_rt_conv1d_serial_interval(torch):
    """Renewal-equation R_t estimation: a gamma serial interval discretised from
    ``distributions.Gamma.log_prob`` and normalised, total infectiousness ``Lambda_t`` by
    ``conv1d`` with the flipped kernel over left-padded incidence, Cori's sliding-window gamma
    posterior (window sums with a ones kernel), a smooth R_t fitted as a log random walk with a
    Poisson likelihood and a ``Normal`` prior on the steps, and a renewal-equation projection."""
    F = torch.nn.functional
    rng = _rng(15)
    K = 12
    mean_si, sd_si = 4.7, 2.9
    shape, rate = (mean_si / sd_si) ** 2, mean_si / sd_si**2
    s = torch.arange(1, K + 1, dtype=torch.float32)
    w = torch.distributions.Gamma(torch.tensor(shape), torch.tensor(rate)).log_prob(s).exp()
    w = w / w.sum()

    T = 40
    r_true = np.where(np.arange(T) < 18, 1.6, 0.8)
    s_np = np.arange(1, K + 1)
    w_np = np.exp((shape - 1) * np.log(s_np) - rate * s_np)
    w_np = w_np / w_np.sum()
    inc = [10.0] * 3
    for t in range(3, T):
        lam = sum(w_np[k - 1] * inc[t - k] for k in range(1, K + 1) if t - k >= 0)
        inc.append(r_true[t] * lam)
    I = torch.tensor(rng.poisson(np.array(inc)).astype(np.float32))

    Lam = F.conv1d(F.pad(I[None, None], (K, 0)), w.flip(0)[None, None])[0, 0, :-1]
    tau = 7
    a_prior, b_prior = 1.0, 5.0
    ones = torch.ones(1, 1, tau)
    sum_I = F.conv1d(I[None, None], ones)[0, 0]
    sum_L = F.conv1d(Lam[None, None], ones)[0, 0]
    post_shape = a_prior + sum_I
    post_scale = 1.0 / (1.0 / b_prior + sum_L)
    rt_mean = post_shape * post_scale
    rt_sd = post_shape.sqrt() * post_scale
    via_unfold = I.unfold(0, tau, 1).sum(-1)

    log_rt = torch.zeros(T, requires_grad=True)
    opt = torch.optim.Adam([log_rt], lr=0.1)
    rw = torch.distributions.Normal(0.0, 0.15)
    start = 5
    losses = []
    for _ in range(25):
        opt.zero_grad()
        mu = log_rt.exp()[start:] * Lam[start:]
        ll = torch.distributions.Poisson(mu).log_prob(I[start:]).sum()
        prior = rw.log_prob(torch.diff(log_rt)).sum()
        loss = -(ll + prior)
        loss.backward()
        opt.step()
        losses.append(loss.item())

    with torch.no_grad():
        hist = I.clone()
        r_last = log_rt[-1].exp()
        proj = []
        for _ in range(7):
            lam = (w * hist[-K:].flip(0)).sum()
            nxt = r_last * lam
            proj.append(nxt)
            hist = torch.cat([hist, nxt[None]])
        proj = torch.stack(proj)
    return {"w": w, "Lam": Lam, "rt_mean": rt_mean, "rt_sd": rt_sd,
            "window_equal": torch.allclose(sum_I, via_unfold), "losses": losses,
            "rt_fit": log_rt.exp(), "grad": log_rt.grad, "projection": proj}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # 60 RK4 steps of a stiff-ish oscillator accumulate rounding
def epi_repressilator_hill_rk4_and_dose_response_fit(torch):
    """Gene-regulatory networks with Hill functions: the repressilator (three genes, each repressed
    by the previous one via ``torch.roll``) in mRNA/protein form integrated with RK4, gradients of
    a late protein level w.r.t. the promoter strength and the Hill coefficient, and an activating
    Hill dose-response curve (``vmax * x**n / (K**n + x**n)``) fitted with Adam on softplus
    parameters."""
    F = torch.nn.functional
    alpha = torch.tensor(50.0, requires_grad=True)
    n = torch.tensor(2.5, requires_grad=True)
    alpha0, beta = 0.5, 2.0

    def field(y):
        m, p = y[:3], y[3:]
        rep = torch.roll(p, 1)
        dm = alpha0 + alpha / (1 + rep.pow(n)) - m
        dp = beta * (m - p)
        return torch.cat([dm, dp])

    y0 = torch.tensor([1.0, 0.0, 0.0, 2.0, 1.0, 3.0])
    traj = torch.stack(_rk4(field, y0, 0.2, 60))
    target = traj[-1, 3]
    target.backward()
    proteins = traj[:, 3:]
    rising = (proteins[1:] > proteins[:-1]).float().sum(0)

    rng = _rng(16)
    dose_np = np.logspace(-1, 1.5, 14)
    dose = torch.tensor(dose_np.astype(np.float32))
    resp_np = 3.0 * dose_np**1.8 / (2.0**1.8 + dose_np**1.8)
    resp = torch.tensor((resp_np + rng.normal(0, 0.05, 14)).astype(np.float32))
    raw = torch.tensor([1.0, 0.5, 1.0], requires_grad=True)
    opt = torch.optim.Adam([raw], lr=0.1)
    losses = []
    for _ in range(25):
        opt.zero_grad()
        vmax, K, h = F.softplus(raw).unbind()
        pred = vmax * dose**h / (K**h + dose**h)
        loss = ((pred - resp) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"traj_every6": traj[::6], "target": target, "alpha_grad": alpha.grad,
            "n_grad": n.grad, "rising": rising, "losses": losses,
            "hill_params": F.softplus(raw).detach(), "hill_grad": raw.grad}  # fmt: skip


@program
def epi_michaelis_menten_lineweaver_burk_jacobian_errors(torch):
    """Enzyme kinetics: a Lineweaver-Burk initial guess by ``linalg.lstsq`` on ``1/v`` vs
    ``1/S``, a nonlinear least-squares refit of ``Vmax, Km`` (log-parameterised, Adam), standard
    errors from ``autograd.functional.jacobian`` of the residuals (``sigma^2 (J^T J)^-1``), and a
    substrate-depletion time course under competitive inhibition integrated with Euler."""
    rng = _rng(17)
    s_np = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], dtype=np.float32)
    S = torch.tensor(s_np)
    v_true = 12.0 * s_np / (5.0 + s_np)
    v = torch.tensor((v_true * (1 + rng.normal(0, 0.03, 8))).astype(np.float32))

    A = torch.stack([torch.ones(8), 1 / S], dim=1)
    sol = torch.linalg.lstsq(A, (1 / v)[:, None]).solution[:, 0]
    vmax0 = 1 / sol[0]
    km0 = sol[1] * vmax0

    theta = torch.stack([vmax0.log(), km0.log()]).detach().requires_grad_(True)

    def residuals(theta):
        vmax, km = theta.exp().unbind()
        return vmax * S / (km + S) - v

    opt = torch.optim.Adam([theta], lr=0.02)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = 0.5 * residuals(theta).pow(2).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    J = torch.autograd.functional.jacobian(residuals, theta.detach())
    res = residuals(theta.detach())
    sigma2 = res.pow(2).sum() / (8 - 2)
    cov = sigma2 * torch.linalg.inv(J.T @ J)
    se_log = cov.diagonal().sqrt()

    vmax, km = theta.detach().exp().unbind()
    Ki, inhibitor = 1.5, 2.0
    km_app = km * (1 + inhibitor / Ki)
    s_t = torch.tensor(20.0)
    course = []
    for _ in range(50):
        s_t = (s_t - 0.1 * vmax * s_t / (km_app + s_t)).clamp(min=0)
        course.append(s_t)
    course = torch.stack(course)
    return {"lb_guess": torch.stack([vmax0, km0]), "losses": losses, "theta": theta,
            "jacobian": J, "cov": cov, "se_log": se_log, "km_app": km_app,
            "course": course[::5], "half_time": int((course < 10).nonzero()[0, 0])}  # fmt: skip


@program
def epi_lotka_volterra_rk4_log_params_adam(torch):
    """Predator-prey parameter fitting: Lotka-Volterra with positive rates ``exp(log_theta)``, RK4
    with a fine step and observations every fifth step, a squared error on log populations, Adam
    with ``clip_grad_norm_``; the fitted rates, the equilibrium ``(gamma/delta, alpha/beta)`` and
    the conserved quantity along the fitted orbit."""
    dt, steps, every = 0.2, 40, 4

    def lv_numpy(a, b, g, d, x, y):
        out = []
        f = lambda x, y: np.array([a * x - b * x * y, d * x * y - g * y])  # noqa: E731
        z = np.array([x, y])
        for _ in range(steps):
            k1 = f(*z)
            k2 = f(*(z + dt / 2 * k1))
            k3 = f(*(z + dt / 2 * k2))
            k4 = f(*(z + dt * k3))
            z = z + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            out.append(z)
        return np.array(out)

    obs_np = lv_numpy(1.0, 0.4, 0.8, 0.2, 5.0, 2.0)[every - 1 :: every]
    obs_np = obs_np * np.exp(_rng(18).normal(0, 0.03, obs_np.shape))
    obs = torch.tensor(obs_np.astype(np.float32))

    log_theta = torch.tensor(np.log([0.8, 0.5, 0.9, 0.25]).astype(np.float32), requires_grad=True)
    opt = torch.optim.Adam([log_theta], lr=0.04)

    def simulate(log_theta):
        a, b, g, d = log_theta.exp().unbind()
        growth = torch.stack([a, -g])
        zero = torch.zeros(())
        interact = torch.stack([torch.stack([zero, -b]), torch.stack([d, zero])])

        def f(z):  # generalised Lotka-Volterra form: dz/dt = z * (r + A z)
            return z * (growth + interact @ z)

        return torch.stack(_rk4(f, torch.tensor([5.0, 2.0]), dt, steps))

    losses, norms = [], []
    for _ in range(8):
        opt.zero_grad()
        traj = simulate(log_theta)
        loss = (traj[every - 1 :: every].log() - obs.log()).pow(2).mean()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_([log_theta], max_norm=1.0).item())
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        a, b, g, d = log_theta.exp()
        traj = simulate(log_theta)
        x, y = traj[:, 0], traj[:, 1]
        invariant = d * x - g * torch.log(x) + b * y - a * torch.log(y)
    return {"losses": losses, "norms": norms, "rates": log_theta.exp().detach(),
            "equilibrium": torch.stack([g / d, a / b]), "invariant_span":
            invariant.max() - invariant.min(), "traj": traj[::10]}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # strong-Wolfe line search compares nearly equal losses
def epi_logistic_and_richards_growth_lbfgs(torch):
    """Early-outbreak growth fitting: a logistic curve ``K / (1 + exp(-r (t - t0)))`` for
    cumulative cases fitted with LBFGS and a strong-Wolfe line search on scaled parameters, then a
    Richards curve (shape ``nu``) refined with Adam from the logistic fit; doubling time
    ``log(2)/r``, the inflection day and the daily incidence from ``torch.diff``."""
    rng = _rng(19)
    t = torch.arange(0, 36, dtype=torch.float32)
    cum_true = 5000.0 / (1.0 + np.exp(-0.22 * (np.arange(36) - 20.0)))
    cum = torch.tensor((cum_true * np.exp(rng.normal(0, 0.02, 36))).astype(np.float32))

    p = torch.tensor([math.log(3000.0), math.log(0.15), 15.0 / 10], requires_grad=True)

    def logistic(p):
        K, r, t0 = p[0].exp(), p[1].exp(), p[2] * 10
        return K / (1 + torch.exp(-r * (t - t0)))

    opt = torch.optim.LBFGS([p], lr=1.0, max_iter=20, line_search_fn="strong_wolfe")
    evals = []

    def closure():
        opt.zero_grad()
        loss = (torch.log(logistic(p)) - torch.log(cum)).pow(2).mean()
        loss.backward()
        evals.append(loss.item())
        return loss

    final = opt.step(closure)
    K, r, t0 = p[0].exp(), p[1].exp(), p[2] * 10

    q = torch.cat([p.detach(), torch.zeros(1)]).requires_grad_(True)

    def richards(q):
        K, r, t0, nu = q[0].exp(), q[1].exp(), q[2] * 10, q[3].exp()
        return K / (1 + nu * torch.exp(-r * (t - t0))) ** (1 / nu)

    adam = torch.optim.Adam([q], lr=0.002)
    r_losses = []
    for _ in range(10):
        adam.zero_grad()
        loss = (torch.log(richards(q)) - torch.log(cum)).pow(2).mean()
        loss.backward()
        adam.step()
        r_losses.append(loss.item())
    with torch.no_grad():
        daily = torch.diff(logistic(p), prepend=torch.zeros(1))
    return {"n_evals": len(evals), "first_loss": evals[0], "final": final, "K": K, "r": r,
            "t0": t0, "doubling": math.log(2) / r, "peak_day": int(daily.argmax()),
            "daily": daily, "richards_losses": r_losses, "q": q}  # fmt: skip


@program
def epi_sir_map_lognormal_gamma_priors_laplace(torch):
    """A Bayesian SIR by MAP: R0 with a ``LogNormal`` prior, the infectious period with a
    ``Gamma`` prior, overdispersion with an ``Exponential`` prior, a negative-binomial likelihood
    (``NegativeBinomial(total_count, logits)``) for daily cases; unconstrained parameters via
    ``biject_to(constraints.positive)`` with the log-Jacobian, Adam, then a Laplace approximation
    from ``autograd.functional.hessian``."""
    D = torch.distributions
    N = 50000.0
    days = 25
    truth = _sir_numpy(2.2 / 6.0, 1 / 6.0, 2e-4, days)
    s_path = np.concatenate([[1 - 2e-4], truth[:, 0]])
    inc = -np.diff(s_path) * N
    rng = _rng(20)
    cases = torch.tensor(rng.negative_binomial(20, 20 / (20 + inc)).astype(np.float32))

    to_pos = D.biject_to(D.constraints.positive)
    prior_r0 = D.LogNormal(math.log(2.5), 0.3)
    prior_d = D.Gamma(torch.tensor(10.0), torch.tensor(2.0))
    prior_phi = D.Exponential(torch.tensor(0.1))

    def expected(r0, dur):
        beta, gamma = r0 / dur, 1 / dur
        s, i = torch.tensor(1 - 2e-4), torch.tensor(2e-4)
        out = []
        for _ in range(days):
            new = beta * s * i
            s, i = s - new, i + new - gamma * i
            out.append(new * N)
        return torch.stack(out)

    def neg_log_post(u):
        r0, dur, phi = to_pos(u).unbind()
        mu = expected(r0, dur)
        lik = D.NegativeBinomial(total_count=phi, logits=mu.log() - phi.log()).log_prob(cases)
        lp = prior_r0.log_prob(r0) + prior_d.log_prob(dur) + prior_phi.log_prob(phi)
        jac = to_pos.log_abs_det_jacobian(u, to_pos(u)).sum()
        return -(lik.sum() + lp + jac)

    u = torch.tensor([math.log(2.0), math.log(5.0), math.log(10.0)], requires_grad=True)
    opt = torch.optim.Adam([u], lr=0.02)
    losses = []
    for _ in range(14):
        opt.zero_grad()
        loss = neg_log_post(u)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    H = torch.autograd.functional.hessian(neg_log_post, u.detach())
    cov = torch.linalg.inv(H)
    mode = to_pos(u.detach())
    return {"losses": losses, "mode": mode, "u": u, "grad": u.grad, "hessian": H,
            "post_sd_log": cov.diagonal().sqrt(),
            "prior_lp": torch.stack([prior_r0.log_prob(mode[0]), prior_d.log_prob(mode[1]),
                                     prior_phi.log_prob(mode[2])]),
            "prior_means": torch.stack([prior_r0.mean, prior_d.mean, prior_phi.mean])}  # fmt: skip


@program
def epi_batched_scenarios_final_size_newton_and_report(torch):
    """Scenario analysis over a grid of R0 values in one vectorised Euler loop (compartments as
    ``[B]`` tensors) with a sigmoid lockdown ramp on transmission, peaks with ``max(dim=0)``,
    cumulative incidence by ``cumsum``, the final-size relation ``z = 1 - exp(-R0 z)`` solved by
    Newton's method with the derivative from ``autograd.grad``, the herd-immunity threshold, and a
    printed scenario table."""
    r0 = torch.tensor([1.3, 1.8, 2.5, 3.2, 4.0])
    gamma = 1 / 7
    days = 60
    t = torch.arange(days, dtype=torch.float32)
    lockdown = 1 - 0.5 * torch.sigmoid((t - 35.0) / 3.0)
    S = torch.full_like(r0, 1 - 1e-3)
    I = torch.full_like(r0, 1e-3)
    new_cases = []
    prev = []
    for d in range(days):
        beta = r0 * gamma * lockdown[d]
        new = beta * S * I
        S, I = S - new, I + new - gamma * I
        new_cases.append(new)
        prev.append(I)
    new_cases, prev = torch.stack(new_cases), torch.stack(prev)
    peak, peak_day = prev.max(dim=0)
    cumulative = new_cases.cumsum(0)

    z = torch.full_like(r0, 0.9)
    for _ in range(8):
        z = z.detach().requires_grad_(True)
        g = z - 1 + torch.exp(-r0 * z)
        (dg,) = torch.autograd.grad(g.sum(), z)
        z = z - g / dg
    z = z.detach()
    hit = 1 - 1 / r0
    overshoot = z - hit
    lines = ["  R0  peak  day  final  HIT"]
    for k in range(len(r0)):
        lines.append(f"{r0[k].item():4.1f} {peak[k].item():.3f} {int(peak_day[k]):4d} "
                     f"{z[k].item():.3f} {hit[k].item():.2f}")  # fmt: skip
    return {"peak": peak, "peak_day": peak_day, "cumulative_end": cumulative[-1],
            "cum_every10": cumulative[::10], "final_size": z, "hit": hit,
            "overshoot": overshoot, "lockdown": lockdown[30:40], "report": "\n".join(lines)}  # fmt: skip


@program
def epi_toggle_switch_steady_state_stability_and_erlang_stages(torch):
    """Systems-biology analysis around an ODE model: the genetic toggle switch's steady states by
    Newton's method with ``torch.func.jacrev`` of the vector field from several starting points,
    linear stability from ``linalg.eigvals`` of the Jacobian, the serial interval discretised by
    differences of the gamma CDF (``special.gammainc``, as EpiEstim does), and the
    continuous-time Markov chain of an Erlang-staged infectious period propagated with
    ``linalg.matrix_exp`` (stage occupancies and the survival curve by ``cumsum``)."""
    a1, a2, n1, n2 = 4.0, 3.5, 2.5, 2.0

    def toggle(z):
        u, v = z[0], z[1]
        return torch.stack([a1 / (1 + v**n1) - u, a2 / (1 + u**n2) - v])

    starts = torch.tensor([[3.0, 0.1], [0.1, 3.0], [1.2, 1.2]])
    states, spectra, stable = [], [], []
    for z in starts:
        for _ in range(7):
            J = torch.func.jacrev(toggle)(z)
            z = z - torch.linalg.solve(J, toggle(z))
        J = torch.func.jacrev(toggle)(z)
        ev = torch.linalg.eigvals(J)
        states.append(z)
        spectra.append(ev.real.sort().values)
        stable.append(bool((ev.real < 0).all()))
    states = torch.stack(states)

    mean_si, sd_si = 4.7, 2.9
    shape, rate = (mean_si / sd_si) ** 2, mean_si / sd_si**2
    edges = torch.arange(0.0, 15.0) + 0.5
    cdf = torch.special.gammainc(torch.tensor(shape), rate * edges)
    w = torch.diff(cdf, prepend=torch.zeros(1))
    w = w / w.sum()

    k, gamma = 3, 1 / 5
    Q = torch.zeros(k + 1, k + 1)
    idx = torch.arange(k)
    Q[idx, idx] = -k * gamma
    Q[idx, idx + 1] = k * gamma
    p0 = torch.zeros(k + 1)
    p0[0] = 1.0
    times = torch.tensor([1.0, 3.0, 5.0, 10.0])
    occ = torch.stack([p0 @ torch.linalg.matrix_exp(Q * t) for t in times])
    survival = 1 - occ[:, -1]
    daily = torch.stack([p0 @ torch.linalg.matrix_exp(Q * t) for t in torch.arange(0.0, 8.0)])
    still_inf = daily[:, :k].sum(1)
    return {"states": states, "spectra": spectra, "stable": stable,
            "residual": torch.stack([toggle(z) for z in states]).abs().max(), "w": w,
            "w_mean": (w * torch.arange(1.0, 16.0)).sum(), "occ": occ, "survival": survival,
            "still_inf": still_inf, "cum_removed": torch.cumsum(torch.diff(daily[:, -1]), 0)}  # fmt: skip


@program
def epi_line_list_aggregation_nowcast_and_seroprevalence(torch):
    """Surveillance data handling before any model: a line list (age, onset day, report delay,
    region) aggregated into age bands with ``bucketize``, epicurves by ``bincount`` and
    ``index_add_``, a region-by-day table by ``scatter_add_`` on flat indices, ``unique`` with
    counts, a reporting-delay nowcast (the right-truncated epicurve divided by the cumulative
    delay distribution), a seroprevalence survey with a ``Beta`` prior and ``Binomial``
    likelihood per age band (conjugate posterior, ``Beta.mean``/``variance``, log marginal
    likelihood with ``lgamma``), and the printed age table."""
    rng = _rng(21)
    n, days, regions = 300, 20, 3
    age = torch.tensor(rng.integers(0, 90, n))
    onset = torch.tensor(rng.integers(0, days, n))
    delay = torch.tensor(rng.geometric(0.35, n) - 1)
    region = torch.tensor(rng.integers(0, regions, n))
    bounds = torch.tensor([18, 40, 65])
    band = torch.bucketize(age, bounds, right=True)
    by_band = torch.bincount(band, minlength=4)
    report = onset + delay
    today = days - 1
    seen = report <= today
    epicurve = torch.bincount(onset[seen], minlength=days)
    weighted = torch.zeros(days).index_add_(0, onset, (age >= 65).float())
    table = torch.zeros(regions * days, dtype=torch.long)
    table.scatter_add_(0, (region * days + onset)[seen], torch.ones_like(onset[seen]))
    table = table.view(regions, days)
    delays, counts = torch.unique(delay[seen], return_counts=True)

    max_d = 10
    pmf = torch.bincount(delay.clamp(max=max_d), minlength=max_d + 1).float()
    pmf = pmf / pmf.sum()
    cdf = pmf.cumsum(0)
    back = (today - torch.arange(days)).clamp(max=max_d)
    nowcast = epicurve.float() / cdf[back]

    tested = torch.tensor([120.0, 200.0, 180.0, 90.0])
    positive = torch.tensor([18.0, 41.0, 27.0, 9.0])
    a0, b0 = torch.tensor(1.0), torch.tensor(9.0)
    post = torch.distributions.Beta(a0 + positive, b0 + tested - positive)
    like = torch.distributions.Binomial(total_count=tested, probs=post.mean).log_prob(positive)

    def lbeta(a, b):
        return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)

    log_choose = (torch.lgamma(tested + 1) - torch.lgamma(positive + 1)
                  - torch.lgamma(tested - positive + 1))  # fmt: skip
    log_ml = log_choose + lbeta(a0 + positive, b0 + tested - positive) - lbeta(a0, b0)
    lines = [f"{lab:>6}: {int(c):3d} cases, sero {m:.3f} (sd {s:.3f})"
             for lab, c, m, s in zip(["0-17", "18-39", "40-64", "65+"], by_band.tolist(),
                                     post.mean.tolist(), post.variance.sqrt().tolist())]  # fmt: skip
    return {"band": band[:20], "by_band": by_band, "epicurve": epicurve, "weighted": weighted,
            "table": table, "delays": delays, "counts": counts, "pmf": pmf,
            "nowcast": nowcast, "post_mean": post.mean, "post_var": post.variance,
            "like": like, "log_ml": log_ml, "age_table": "\n".join(lines),
            "repr": str(by_band)}  # fmt: skip


@program
def epi_gravity_kernel_vmap_scenarios_and_sensitivities(torch):
    """Spatial transmission and sensitivity analysis: a gravity model (``cdist`` distances,
    ``pop_i^a pop_j^b / d^c`` with a zeroed diagonal by ``fill_diagonal_``, row-normalised) and an
    exponential distance kernel; a discrete-time spatial SIR run for a batch of (R0, coupling)
    scenarios with ``torch.func.vmap``; forward-mode sensitivity of the epidemic size by
    ``autograd.functional.jvp`` and the full gradient by ``torch.func.grad``; a softplus-transformed
    ``Normal`` prior on R0 (``TransformedDistribution`` with ``SoftplusTransform``), the
    ``Gamma.cdf`` of the infectious period and a ``kl_divergence`` between ``LogNormal`` priors."""
    D = torch.distributions
    rng = _rng(22)
    xy = torch.tensor(rng.uniform(0, 100, (6, 2)).astype(np.float32))
    pop = torch.tensor(rng.uniform(2e3, 5e4, 6).astype(np.float32))
    dist = torch.cdist(xy, xy)
    grav = pop[:, None] ** 0.8 * pop[None, :] ** 0.6 / (dist + 1.0) ** 2
    grav.fill_diagonal_(0.0)
    grav = grav / grav.sum(1, keepdim=True)
    kernel = torch.exp(-dist / 30.0)

    def epidemic(params):
        r0, eps = params[0], params[1]
        gamma = 0.25
        mix = (1 - eps) * torch.eye(6) + eps * grav
        i = torch.zeros(6)
        i = torch.cat([torch.full((1,), 1e-3), i[1:]])
        s = 1 - i
        for _ in range(24):
            foi = r0 * gamma * (mix @ i)
            new = s * -torch.expm1(-foi)  # P(infected today) = 1 - exp(-foi), without cancellation
            s, i = s - new, i + new - gamma * i
        return ((1 - s) * pop).sum() / pop.sum()

    scenarios = torch.tensor([[1.5, 0.05], [2.0, 0.05], [2.0, 0.2], [3.0, 0.2]])
    sizes = torch.func.vmap(epidemic)(scenarios)
    loop_sizes = torch.stack([epidemic(p) for p in scenarios])
    base = torch.tensor([2.0, 0.1])
    _, tangent = torch.autograd.functional.jvp(epidemic, base, torch.tensor([1.0, 0.0]))
    full_grad = torch.func.grad(epidemic)(base)

    prior_r0 = D.TransformedDistribution(D.Normal(1.5, 0.5), [D.transforms.SoftplusTransform()])
    r0_grid = torch.tensor([1.0, 2.0, 3.0])
    dur = D.Gamma(torch.tensor(8.0), torch.tensor(2.0))
    kl = D.kl_divergence(D.LogNormal(0.7, 0.2), D.LogNormal(0.9, 0.4))
    return {"grav": grav, "kernel_rowsum": kernel.sum(1), "sizes": sizes,
            "vmap_matches": torch.allclose(sizes, loop_sizes, atol=1e-6), "tangent": tangent,
            "full_grad": full_grad, "prior_lp": prior_r0.log_prob(r0_grid),
            "dur_cdf": dur.cdf(torch.tensor([2.0, 4.0, 6.0])), "kl": kl}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # adaptive steps: the error norms compare float32 sums
def epi_torchdiffeq_style_module_dopri5_with_missing_data(torch):
    """The torchdiffeq way: an ``nn.Module`` vector field ``forward(t, y)`` with ``nn.Parameter``
    log-rates and a population buffer, integrated by a hand-written adaptive Dormand-Prince 5(4)
    solver (error norm, step acceptance and step-size control with ``.item()``) that reports at
    the observation times; observed prevalence with missing days (NaN) smoothed by a 7-day
    ``avg_pool1d`` and a ``padding='same'`` convolution, a masked loss with ``nanmean``-style
    handling, Adam with ``ReduceLROnPlateau``, the area under the curve by ``trapezoid``, and the
    module's printed parameters."""
    nn, F = torch.nn, torch.nn.functional

    class SIRField(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_beta = nn.Parameter(torch.tensor(math.log(0.3)))
            self.log_gamma = nn.Parameter(torch.tensor(math.log(0.2)))
            self.register_buffer("N", torch.tensor(1.0))

        def forward(self, t, y):
            s, i = y[0], y[1]
            beta, gamma = self.log_beta.exp(), self.log_gamma.exp()
            inf = beta * s * i / self.N
            return torch.stack([-inf, inf - gamma * i, gamma * i])

    A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
         [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]  # fmt: skip
    C = [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]
    B5 = A[6] + [0]
    B4 = [5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]

    def odeint(func, y0, t_eval, rtol=1e-3, atol=1e-6, h=0.5):
        t, y, out, n_acc, n_rej = 0.0, y0, [y0], 0, 0
        for t_next in t_eval[1:].tolist():
            while t < t_next - 1e-9:
                h = min(h, t_next - t)
                ks = []
                for j in range(7):
                    yj = y
                    for coef, k in zip(A[j], ks):
                        if coef != 0:
                            yj = yj + h * coef * k
                    ks.append(func(t + C[j] * h, yj))
                y5 = y + h * sum(b * k for b, k in zip(B5, ks) if b != 0)
                y4 = y + h * sum(b * k for b, k in zip(B4, ks) if b != 0)
                scale = atol + rtol * torch.maximum(y.abs(), y5.abs())
                err = ((y5 - y4) / scale).pow(2).mean().sqrt().item()
                if err <= 1.0:
                    t, y = t + h, y5
                    n_acc += 1
                else:
                    n_rej += 1
                h = h * min(5.0, max(0.2, 0.9 * (err + 1e-10) ** -0.2))
            out.append(y)
        return torch.stack(out), n_acc, n_rej

    rng = _rng(23)
    days = 21
    truth = _sir_numpy(0.5, 0.18, 0.01, 10 * days, dt=0.1)[9::10, 1]
    obs_np = (truth * np.exp(rng.normal(0, 0.08, days))).astype(np.float32)
    obs_np[[5, 9, 10, 13]] = np.nan
    obs = torch.tensor(obs_np)
    mask = ~torch.isnan(obs)
    filled = torch.nan_to_num(obs, nan=0.0)
    rolling = F.avg_pool1d(filled[None, None], 7, stride=1)[0, 0]
    counts = F.avg_pool1d(mask.float()[None, None], 7, stride=1)[0, 0]
    rolling_obs = rolling / counts
    smooth = F.conv1d(filled[None, None], torch.full((1, 1, 3), 1 / 3), padding="same")[0, 0]

    field = SIRField()
    opt = torch.optim.Adam(field.parameters(), lr=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    t_eval = torch.arange(0.0, days + 1.0, 7.0)  # weekly reports
    sel = torch.arange(6, days, 7)
    y0 = torch.tensor([0.99, 0.01, 0.0])
    losses, steps, lrs = [], [], []
    for _ in range(5):
        opt.zero_grad()
        traj, n_acc, n_rej = odeint(field, y0, t_eval)
        pred = traj[1:, 1]
        m, o = mask[sel], filled[sel]
        resid = torch.where(m, torch.log(pred) - torch.log(o.clamp(min=1e-6)), 0.0)
        loss = resid.pow(2).sum() / m.sum()
        loss.backward()
        opt.step()
        plateau.step(loss.item())
        losses.append(loss.item())
        steps.append((n_acc, n_rej))
        lrs.append(opt.param_groups[0]["lr"])
    with torch.no_grad():
        traj, _, _ = odeint(field, y0, t_eval)
    auc = torch.trapezoid(traj[:, 1], t_eval)
    return {"rolling_obs": rolling_obs, "smooth": smooth, "n_missing": int((~mask).sum()),
            "nanmean": torch.nanmean(obs), "losses": losses, "steps": steps, "lrs": lrs,
            "rates": torch.stack([field.log_beta.exp(), field.log_gamma.exp()]).detach(),
            "traj": traj, "auc": auc,
            "state_keys": list(field.state_dict().keys()).__repr__()}  # fmt: skip
