"""Scientific machine learning: physics-informed networks, neural ODEs, spectral operators, EM, kernel methods, optimal transport."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def pinn_heat_equation_autograd_residuals(torch):
    nn = torch.nn

    class PINN(nn.Module):
        def __init__(self, hidden=16):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(2, hidden),
                nn.Tanh(),
                nn.Linear(hidden, hidden),
                nn.Tanh(),
                nn.Linear(hidden, 1),
            )

        def forward(self, x, t):
            return self.net(torch.cat([x, t], dim=1))

    model = set_weights(torch, PINN(), seed=21)
    rng = np.random.default_rng(22)
    x_col = torch.tensor(rng.uniform(0, 1, (32, 1)).astype(np.float32), requires_grad=True)
    t_col = torch.tensor(rng.uniform(0, 0.5, (32, 1)).astype(np.float32), requires_grad=True)
    x_ic = torch.linspace(0, 1, 11).unsqueeze(1)
    u_ic = torch.sin(math.pi * x_ic)
    t_bc = torch.linspace(0, 0.5, 6).view(-1, 1)
    kappa = 0.1
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        u = model(x_col, t_col)
        u_x, u_t = torch.autograd.grad(
            u, (x_col, t_col), grad_outputs=torch.ones_like(u), create_graph=True
        )
        u_xx = torch.autograd.grad(u_x.sum(), x_col, create_graph=True)[0]
        loss_pde = (u_t - kappa * u_xx).pow(2).mean()
        loss_ic = nn.functional.mse_loss(model(x_ic, torch.zeros_like(x_ic)), u_ic)
        loss_bc = (
            model(torch.zeros_like(t_bc), t_bc).square().mean()
            + model(torch.ones_like(t_bc), t_bc).square().mean()
        )
        loss = loss_pde + 10.0 * loss_ic + loss_bc
        loss.backward()
        opt.step()
        losses.append([loss_pde.item(), loss_ic.item(), loss_bc.item()])
    with torch.no_grad():
        exact = torch.exp(-kappa * math.pi**2 * t_col) * torch.sin(math.pi * x_col)
        rel_l2 = torch.linalg.norm(model(x_col, t_col) - exact) / torch.linalg.norm(exact)
    return {"losses": losses, "u_xx": u_xx.detach(), "u_t": u_t.detach(), "rel_l2": rel_l2,
            "grads": grads(model), "params": params(model), "x_grad_is_none": x_col.grad is None}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def neural_ode_rk4_cubic_spiral_fit(torch):
    nn = torch.nn

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.Softplus(), nn.Linear(16, 2))
            self.nfe = 0

        def forward(self, t, y):
            self.nfe += 1
            return self.net(torch.cat([y**3, t.expand(y.shape[0], 1)], dim=-1))

    def odeint_rk4(func, y0, ts):
        ys, y = [y0], y0
        for t0, t1 in zip(ts[:-1], ts[1:]):
            h = t1 - t0
            k1 = func(t0, y)
            k2 = func(t0 + h / 2, y + h * k1 / 2)
            k3 = func(t0 + h / 2, y + h * k2 / 2)
            k4 = func(t1, y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys)

    A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])
    ts = torch.linspace(0.0, 1.0, 9)
    y0 = torch.tensor(arr(31, 4, 2, scale=0.8))
    with torch.no_grad():
        true_y = odeint_rk4(lambda t, y: torch.mm(y**3, A), y0, ts)
    func = set_weights(torch, ODEFunc(), seed=32)
    opt = torch.optim.RMSprop(func.parameters(), lr=2e-3)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        pred_y = odeint_rk4(func, y0, ts)
        loss = torch.mean(torch.abs(pred_y - true_y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "true_y": true_y, "pred_last": pred_y[-1].detach(), "nfe": func.nfe,
            "grads": grads(func), "shape": list(pred_y.shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def hamiltonian_nn_spring_symplectic_rollout(torch):
    nn = torch.nn

    class HNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(
                nn.Linear(2, 32),
                nn.Tanh(),
                nn.Linear(32, 32),
                nn.Tanh(),
                nn.Linear(32, 1, bias=False),
            )
            self.register_buffer("J", torch.tensor([[0.0, 1.0], [-1.0, 0.0]]))

        def hamiltonian(self, x):
            return self.mlp(x).squeeze(-1)

        def forward(self, x):
            H = self.hamiltonian(x)
            dH = torch.autograd.grad(H.sum(), x, create_graph=True)[0]
            return dH @ self.J.t()

    rng = np.random.default_rng(41)
    qp = rng.uniform(-1, 1, (64, 2)).astype(np.float32)
    dqp = np.stack([qp[:, 1], -qp[:, 0]], axis=1) + 0.01 * rng.standard_normal((64, 2)).astype(
        np.float32
    )
    x = torch.from_numpy(qp).requires_grad_()
    target = torch.from_numpy(dqp.astype(np.float32))
    model = set_weights(torch, HNN(), seed=42)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.99))
    losses = []
    for _ in range(6):
        opt.zero_grad(set_to_none=True)
        loss = (model(x) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    state = torch.tensor([[0.5, 0.0]])
    energies, traj = [], [state]
    dt = 0.1
    with torch.no_grad():
        for _ in range(8):
            with torch.enable_grad():
                s = state.clone().requires_grad_(True)
                q_dot, p_dot = model(s).detach().split(1, dim=1)
            q, p = state.chunk(2, dim=1)
            p = p + dt * p_dot
            q = q + dt * q_dot
            state = torch.cat([q, p], dim=1)
            traj.append(state)
            energies.append(model.hamiltonian(state).item())
    return {"losses": losses, "traj": torch.cat(traj), "energies": energies, "grads": grads(model),
            "J": model.J, "grad_mode_after": torch.is_grad_enabled()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def fno2d_rfft2_view_as_complex_weights(torch):
    nn = torch.nn
    F = nn.functional

    class SpectralConv2d(nn.Module):
        def __init__(self, cin, cout, m1, m2):
            super().__init__()
            self.cout, self.m1, self.m2 = cout, m1, m2
            self.w1 = nn.Parameter(torch.empty(cin, cout, m1, m2, 2))
            self.w2 = nn.Parameter(torch.empty(cin, cout, m1, m2, 2))

        def compl_mul2d(self, a, w):
            return torch.einsum("bixy,ioxy->boxy", a, torch.view_as_complex(w))

        def forward(self, x):
            B, _, H, W = x.shape
            x_ft = torch.fft.rfft2(x, norm="ortho")
            out_ft = torch.zeros(B, self.cout, H, W // 2 + 1, dtype=torch.cfloat, device=x.device)
            out_ft[:, :, : self.m1, : self.m2] = self.compl_mul2d(
                x_ft[:, :, : self.m1, : self.m2], self.w1
            )
            out_ft[:, :, -self.m1 :, : self.m2] = self.compl_mul2d(
                x_ft[:, :, -self.m1 :, : self.m2], self.w2
            )
            return torch.fft.irfft2(out_ft, s=(H, W), norm="ortho")

    class FNO2d(nn.Module):
        def __init__(self, width=4, modes=3):
            super().__init__()
            self.lift = nn.Conv2d(3, width, 1)
            self.spectral = nn.ModuleList(
                [SpectralConv2d(width, width, modes, modes) for _ in range(2)]
            )
            self.pointwise = nn.ModuleList([nn.Conv2d(width, width, 1) for _ in range(2)])
            self.proj = nn.Sequential(nn.Conv2d(width, 8, 1), nn.GELU(), nn.Conv2d(8, 1, 1))

        def forward(self, a):
            B, _, H, W = a.shape
            gx, gy = torch.meshgrid(torch.linspace(0, 1, W), torch.linspace(0, 1, H), indexing="xy")
            grid = torch.stack([gx, gy]).unsqueeze(0).expand(B, -1, -1, -1)
            h = self.lift(torch.cat([a, grid], dim=1))
            for i, (spec, pw) in enumerate(zip(self.spectral, self.pointwise)):
                h = spec(h) + pw(h)
                h = F.gelu(h) if i < len(self.spectral) - 1 else h
            return self.proj(h)

    model = set_weights(torch, FNO2d(), seed=51)
    a = torch.tensor(arr(52, 3, 1, 8, 10))
    # target: a smoothed copy of the input (a crude solution operator)
    target = F.avg_pool2d(F.pad(a, (1, 1, 1, 1), mode="circular"), 3, stride=1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        out = model(a)
        loss = torch.linalg.vector_norm(out - target) / torch.linalg.vector_norm(target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "out": out.detach(), "grads": grads(model),
            "w1_complex": torch.view_as_complex(model.spectral[0].w1.detach())}  # fmt: skip


@program(rtol=5e-4, atol=1e-5)
def gmm_em_full_covariance_logsumexp(torch):
    rng = np.random.default_rng(61)
    centers = np.array([[-3.0, 0.0], [3.0, 1.0], [0.0, 4.0]])
    X = np.concatenate([rng.normal(c, [0.8, 0.5], (40, 2)) for c in centers])
    X = torch.tensor(X, dtype=torch.float64)
    K, (N, D) = 3, X.shape
    mu = X[torch.tensor([0, 40, 80])].clone()
    cov = torch.eye(D, dtype=X.dtype).repeat(K, 1, 1)
    log_pi = torch.full((K,), -math.log(K), dtype=X.dtype)
    log_likelihoods = []
    for _ in range(8):
        # E step
        L = torch.linalg.cholesky(cov)
        diff = X.unsqueeze(1) - mu.unsqueeze(0)
        z = torch.linalg.solve_triangular(L.unsqueeze(0), diff.unsqueeze(-1), upper=False).squeeze(
            -1
        )
        maha = z.pow(2).sum(-1)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        log_prob = -0.5 * (maha + logdet + D * math.log(2 * math.pi)) + log_pi
        log_norm = torch.logsumexp(log_prob, dim=1, keepdim=True)
        resp = torch.exp(log_prob - log_norm)
        log_likelihoods.append(log_norm.sum().item())
        # M step
        Nk = resp.sum(0) + 10 * torch.finfo(X.dtype).eps
        mu = (resp.T @ X) / Nk[:, None]
        diff = X.unsqueeze(1) - mu
        cov = torch.einsum("nk,nkd,nke->kde", resp, diff, diff) / Nk[:, None, None]
        cov = cov + 1e-6 * torch.eye(D, dtype=X.dtype)
        log_pi = torch.log(Nk) - math.log(N)
    dist = torch.distributions
    gmm = dist.MixtureSameFamily(
        dist.Categorical(logits=log_pi), dist.MultivariateNormal(mu, covariance_matrix=cov)
    )
    return {"log_likelihoods": log_likelihoods, "means": mu, "covs": cov, "weights": log_pi.exp(),
            "mixture_log_prob": gmm.log_prob(X[:5]), "labels": resp.argmax(dim=1),
            "counts": torch.bincount(resp.argmax(dim=1), minlength=K)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def kernel_ridge_loo_lengthscale_and_laplacian_kernel(torch):
    rng = np.random.default_rng(71)
    Xtr = torch.tensor(rng.uniform(-2, 2, (30, 2)).astype(np.float32))
    ytr = torch.sin(Xtr[:, 0]) * torch.cos(Xtr[:, 1]) + 0.05 * torch.tensor(arr(72, 30))
    Xte = torch.tensor(rng.uniform(-2, 2, (10, 2)).astype(np.float32))

    def rbf(A, B, ls, mode="use_mm_for_euclid_dist_if_necessary"):
        d = torch.cdist(A / ls, B / ls, compute_mode=mode)
        return torch.exp(-0.5 * d.pow(2))

    log_ls = torch.zeros((), requires_grad=True)
    log_lam = torch.tensor(-2.0, requires_grad=True)
    opt = torch.optim.Adam([log_ls, log_lam], lr=0.1)
    eye = torch.eye(30)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        K = rbf(Xtr, Xtr, log_ls.exp(), mode="donot_use_mm_for_euclid_dist")
        K_inv = torch.linalg.inv(K + log_lam.exp() * eye)
        alpha = K_inv @ ytr
        loo_residuals = alpha / torch.diagonal(K_inv)
        loss = loo_residuals.pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        ls, lam = log_ls.exp(), log_lam.exp()
        alpha = torch.linalg.solve(rbf(Xtr, Xtr, ls) + lam * eye, ytr.unsqueeze(1))
        pred = rbf(Xte, Xtr, ls) @ alpha
        K1 = torch.exp(-torch.cdist(Xtr.unsqueeze(0), Xtr.unsqueeze(0), p=1)).squeeze(0)
        alpha1 = torch.linalg.solve(K1 + 0.1 * eye, ytr)
        pred1 = torch.exp(-torch.cdist(Xte, Xtr, p=1)) @ alpha1
        cheb = torch.cdist(Xte, Xtr, p=float("inf"))
    return {"losses": losses, "log_ls": log_ls, "log_lam": log_lam, "pred": pred, "pred_laplacian": pred1,
            "cheb_min": cheb.min(dim=1).values, "ls_grad": log_ls.grad, "lam_grad": log_lam.grad}  # fmt: skip


@program(rtol=1e-4, atol=1e-6)
def lbfgs_closure_fits_damped_oscillator(torch):
    nn = torch.nn
    f64 = torch.float64

    class DampedOscillator(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_gamma = nn.Parameter(torch.tensor(-1.0, dtype=f64))
            self.omega = nn.Parameter(torch.tensor(2.8, dtype=f64))
            self.amp_phase = nn.Parameter(torch.tensor([1.0, 0.0], dtype=f64))

        def forward(self, t):
            amp, phase = self.amp_phase.unbind()
            return amp * torch.exp(-self.log_gamma.exp() * t) * torch.cos(self.omega * t + phase)

    t = torch.linspace(0, 6, 60, dtype=f64)
    y = 1.3 * torch.exp(-0.3 * t) * torch.cos(3.0 * t + 0.4) + 0.02 * torch.tensor(
        arr(81, 60), dtype=f64
    )
    model = DampedOscillator()
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=15, history_size=8,
                            tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")  # fmt: skip
    calls = []

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(t), y)
        loss.backward()
        calls.append(loss.item())
        return loss

    step_losses = [opt.step(closure).item() for _ in range(3)]
    state = opt.state_dict()["state"][0]
    return {"step_losses": step_losses, "first_calls": calls[:6], "final_loss": calls[-1],
            "params": params(model), "gamma": model.log_gamma.exp(), "n_iter": state["n_iter"],
            "func_evals": state["func_evals"], "num_calls": len(calls)}  # fmt: skip


@program
def newton_methods_with_functional_jacobian_and_hessian(torch):
    AF = torch.autograd.functional
    f64 = torch.float64

    def system(x):
        return torch.stack([x[0] ** 2 + x[1] ** 2 - 4, torch.exp(x[0]) + x[1] - 1])

    x = torch.tensor([1.0, -1.0], dtype=f64)
    residuals = []
    for _ in range(6):
        J = AF.jacobian(system, x)
        x = x - torch.linalg.solve(J, system(x))
        residuals.append(torch.linalg.vector_norm(system(x)).item())

    X = torch.tensor(arr(91, 40, 3), dtype=f64)
    y = (
        X @ torch.tensor([1.5, -2.0, 0.5], dtype=f64) + torch.tensor(arr(92, 40), dtype=f64) > 0
    ).to(f64)

    def nll(w):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            X @ w, y, reduction="sum"
        ) + 0.5 * w.dot(w)

    w = torch.zeros(3, dtype=f64)
    newton_losses = []
    for _ in range(5):
        g = AF.jacobian(nll, w)
        H = AF.hessian(nll, w)
        w = w - torch.linalg.solve(H, g)
        newton_losses.append(nll(w).item())
    _, hvp = AF.hvp(nll, w, torch.ones(3, dtype=f64))

    def pendulum(theta, omega):
        return torch.stack([omega, -9.81 * torch.sin(theta) - 0.3 * omega])

    eq = (torch.tensor(0.0, dtype=f64), torch.tensor(0.0, dtype=f64))
    jac_rev = AF.jacobian(pendulum, eq, vectorize=True)
    jac_fwd = AF.jacobian(pendulum, eq, vectorize=True, strategy="forward-mode")
    A = torch.stack(jac_rev, dim=1)
    eig = torch.linalg.eigvals(A)
    return {"root": x, "residuals": residuals, "w": w, "newton_losses": newton_losses, "hvp": hvp,
            "A": A, "A_fwd": torch.stack(jac_fwd, dim=1), "eig_real": eig.real.sort().values,
            "eig_imag_abs": eig.imag.abs(), "stable": bool((eig.real < 0).all())}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sinkhorn_log_domain_point_cloud_flow(torch):
    def sinkhorn(C, a, b, eps=0.1, iters=30):
        f, g = torch.zeros_like(a), torch.zeros_like(b)
        log_a, log_b = a.log(), b.log()
        for _ in range(iters):
            f = -eps * torch.logsumexp((g[None, :] - C) / eps + log_b[None, :], dim=1)
            g = -eps * ((f[:, None] - C) / eps + log_a[:, None]).logsumexp(dim=0)
        log_P = (f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :]
        return log_P.exp(), f, g

    x = torch.tensor(arr(101, 12, 2), requires_grad=True)
    y = torch.tensor(arr(102, 15, 2, scale=0.5)) + torch.tensor([2.0, 1.0])
    a = torch.full((12,), 1.0 / 12)
    b = torch.ones(15) / 15
    opt = torch.optim.SGD([x], lr=2.0)
    costs = []
    for _ in range(5):
        opt.zero_grad()
        C = torch.cdist(x, y).square()
        P, f, g = sinkhorn(C, a, b)
        cost = torch.sum(P * C)
        cost.backward()
        opt.step()
        costs.append(cost.item())
    with torch.no_grad():
        C = torch.cdist(x, y) ** 2
        P, f, g = sinkhorn(C, a, b, eps=0.05, iters=50)
        dual = torch.dot(f, a) + torch.dot(g, b)
        barycentric = (P @ y) / P.sum(dim=1, keepdim=True)
    return {"costs": costs, "x": x, "plan": P, "dual": dual, "barycentric": barycentric,
            "row_err": (P.sum(1) - a).abs().max(), "col_err": (P.sum(0) - b).abs().max()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lstsq_polynomial_chebyshev_and_batched_fits(torch):
    f64 = torch.float64
    x = torch.linspace(-1, 1, 25, dtype=f64)
    y = torch.tensor(np.cos(3 * np.linspace(-1, 1, 25)) + 0.05 * arr(111, 25), dtype=f64)
    A = torch.vander(x, N=4, increasing=True)
    default = torch.linalg.lstsq(A, y.unsqueeze(-1))
    gelsd = torch.linalg.lstsq(A, y.unsqueeze(-1), driver="gelsd")
    A_def = torch.cat([A, 2 * A[:, 1:2]], dim=1)
    deficient = torch.linalg.lstsq(A_def, y[:, None], rcond=1e-10, driver="gelsd")
    cheb = torch.stack([torch.special.chebyshev_polynomial_t(x, n) for n in range(6)], dim=-1)
    cheb_coef = torch.linalg.lstsq(cheb, y).solution
    fit_err = torch.linalg.vector_norm(cheb @ cheb_coef - y)

    Ab = torch.tensor(arr(112, 3, 10, 3), requires_grad=True)
    Bb = torch.tensor(arr(113, 3, 10, 2))
    Xb = torch.linalg.lstsq(Ab, Bb).solution
    (Xb**2).sum().backward()
    normal_eq = torch.linalg.solve(Ab.mT @ Ab, Ab.mT @ Bb)
    return {"coef": default.solution, "coef_gelsd": gelsd.solution, "residuals_gelsd": gelsd.residuals,
            "rank_gelsd": gelsd.rank, "sv_gelsd": gelsd.singular_values, "rank_def": deficient.rank,
            "coef_def": deficient.solution, "cheb_coef": cheb_coef, "fit_err": fit_err,
            "Xb": Xb.detach(), "dAb": Ab.grad, "normal_eq_close": torch.allclose(Xb, normal_eq, atol=1e-5),
            "default_residuals_shape": list(default.residuals.shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def monte_carlo_integration_sobol_importance_reparam(torch):
    f64 = torch.float64
    rng = np.random.default_rng(121)

    def gaussian_bump(p):
        return torch.exp(-(p**2).sum(-1))

    u = torch.tensor(rng.random((4096, 3)), dtype=f64)
    vals = gaussian_bump(u)
    plain, stderr = vals.mean(), vals.std(correction=1) / math.sqrt(len(vals))
    exact = (math.sqrt(math.pi) / 2 * torch.special.erf(torch.tensor(1.0, dtype=f64))) ** 3
    sobol = torch.quasirandom.SobolEngine(dimension=3, scramble=False)
    q = sobol.draw(1024, dtype=f64)
    qmc = gaussian_bump(q).mean()
    # control variate: h(p) = 1 - sum(p^2) has known mean 1 - 3/3 = 0
    h = 1 - (u**2).sum(-1)
    beta = torch.cov(torch.stack([vals, h]))[0, 1] / h.var()
    cv = (vals - beta * h).mean()
    # importance sampling of a Gaussian tail P(Z > 3) with a shifted proposal
    z = torch.tensor(rng.standard_normal(20000), dtype=f64) + 3
    target, proposal = torch.distributions.Normal(0.0, 1.0), torch.distributions.Normal(3.0, 1.0)
    w = torch.exp(target.log_prob(z) - proposal.log_prob(z))
    tail = (w * (z > 3)).mean()
    tail_exact = 0.5 * torch.special.erfc(torch.tensor(3 / math.sqrt(2), dtype=f64))
    # reparameterised gradient with fixed noise: minimise E[(mu + sigma*eps)^4 - 2 (mu + sigma*eps)^2]
    eps = torch.tensor(rng.standard_normal(512).astype(np.float32))
    mu = torch.tensor(0.3, requires_grad=True)
    log_sigma = torch.tensor(-1.0, requires_grad=True)
    opt = torch.optim.SGD([mu, log_sigma], lr=0.05, momentum=0.5)
    objs = []
    for _ in range(5):
        opt.zero_grad()
        s = mu + log_sigma.exp() * eps
        obj = (s**4 - 2 * s**2).mean()
        obj.backward()
        opt.step()
        objs.append(obj.item())
    grid = torch.linspace(0, 1, 101, dtype=f64)
    return {"plain": plain, "stderr": stderr, "exact": exact, "qmc": qmc, "sobol_first": q[:4],
            "cv": cv, "tail": tail, "tail_exact": tail_exact, "objs": objs, "mu": mu, "log_sigma": log_sigma,
            "trapz": torch.trapezoid(torch.exp(-grid**2), grid),
            "cumtrapz_last": torch.cumulative_trapezoid(torch.exp(-grid**2), dx=0.01)[-3:]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def finite_difference_heat_stencils_learn_diffusivity(torch):
    F = torch.nn.functional
    n = 16
    h = 1.0 / n
    xs = torch.arange(n) * h
    X, Y = torch.meshgrid(xs, xs, indexing="ij")
    u0 = torch.sin(2 * math.pi * X) * torch.cos(2 * math.pi * Y) + torch.exp(
        -((X - 0.5) ** 2 + (Y - 0.5) ** 2) / 0.02
    )
    lap = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]).view(1, 1, 3, 3) / h**2
    dt = 0.2 * h * h

    def simulate(u, D, steps=10):
        u = u[None, None]
        for _ in range(steps):
            u = u + dt * D * F.conv2d(F.pad(u, (1, 1, 1, 1), mode="circular"), lap)
        return u[0, 0]

    with torch.no_grad():
        observed = simulate(u0, 0.7)
    log_D = torch.nn.Parameter(torch.tensor(0.0))
    opt = torch.optim.Adam([log_D], lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(simulate(u0, log_D.exp()), observed)
        loss.backward()
        opt.step()
        losses.append(loss.item())

    f = torch.sin(2 * math.pi * xs) + xs**2
    central = torch.tensor([-0.5, 0.0, 0.5]).view(1, 1, 3) / h
    d1_conv = F.conv1d(F.pad(f.view(1, 1, -1), (1, 1), mode="replicate"), central).flatten()
    (d1_grad,) = torch.gradient(f, spacing=h, edge_order=2)
    (d1_coords,) = torch.gradient(f, spacing=(xs,))
    d2 = torch.diff(f, n=2) / h**2
    sobel = torch.tensor([[[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]]])
    edges = F.conv2d(
        F.pad(u0[None, None], (1, 1, 1, 1), mode="reflect"),
        torch.stack([sobel, sobel.transpose(1, 2)]),
    )
    return {"losses": losses, "log_D": log_D, "grad": log_D.grad, "observed": observed, "d1_conv": d1_conv,
            "d1_grad": d1_grad, "d1_coords": d1_coords, "d2": d2, "edges": edges, "d2_shape": list(d2.shape)}  # fmt: skip
