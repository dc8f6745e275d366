"""Gaussian processes and kernel methods written directly against torch, as GPyTorch/GPflow-style
reference code and the GP textbooks (Rasmussen & Williams) write them: ARD RBF, Matern, periodic,
rational quadratic and spectral mixture kernels via ``cdist`` or broadcasting, exact GP regression
with Cholesky factors (``cholesky``, ``cholesky_solve``, ``solve_triangular``,
``triangular_solve``), jitter on the diagonal and ``cholesky_ex`` retries, the log marginal
likelihood with the log determinant from the factor's diagonal, hyperparameters constrained
through softplus and trained with Adam, predictive means and variances, batched GPs, sparse
variational GPs with whitened inducing points, Laplace GP classification, kernel ridge regression
with leave-one-out scores, random Fourier features, Kronecker multitask kernels, CG/Lanczos
solves, posterior samples and Bayesian optimisation acquisitions (EI, PI, UCB, MC qEI). Every
random draw (probe vectors, features, base samples) is a fixed NumPy input."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, params, set_weights


def _unif(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def _sq_dist(torch, a, b):
    # GPyTorch's covar_dist: ||a||^2 - 2 a b^T + ||b||^2, clamped against round-off below zero
    a_norm = a.pow(2).sum(dim=-1, keepdim=True)
    b_norm = b.pow(2).sum(dim=-1, keepdim=True)
    res = a_norm - 2 * a @ b.transpose(-2, -1) + b_norm.transpose(-2, -1)
    return res.clamp_min(0)


def _rbf(torch, a, b, lengthscale, outputscale):
    return outputscale * torch.exp(-0.5 * _sq_dist(torch, a / lengthscale, b / lengthscale))


@program
def gpk_exact_gp_ard_rbf_softplus_adam(torch):
    """An ``ExactGP``-style model as GPyTorch's regression tutorial writes it, without GPyTorch:
    raw parameters mapped through softplus (ARD lengthscales, outputscale, noise, constant
    mean), the exact marginal log likelihood divided by ``n`` with the log determinant from the
    Cholesky diagonal, six Adam steps with the tutorial's progress print, then the predictive
    mean and variance (latent and observed) at test points."""
    nn, F = torch.nn, torch.nn.functional
    dt = torch.float64
    n, d = 18, 2
    x = _unif(1, n, d, low=-1.5, high=1.5)
    y = np.sin(2 * x[:, 0]) * np.cos(x[:, 1]) + 0.05 * np.random.default_rng(2).standard_normal(n)
    train_x, train_y = torch.tensor(x, dtype=dt), torch.tensor(y, dtype=dt)
    test_x = torch.tensor(_unif(3, 5, d, low=-2, high=2), dtype=dt)

    class ExactGPModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_lengthscale = nn.Parameter(torch.zeros(1, d, dtype=dt))
            self.raw_outputscale = nn.Parameter(torch.tensor(0.0, dtype=dt))
            self.raw_noise = nn.Parameter(torch.tensor(-2.0, dtype=dt))
            self.mean_constant = nn.Parameter(torch.zeros((), dtype=dt))

        @property
        def lengthscale(self):
            return F.softplus(self.raw_lengthscale)

        @property
        def outputscale(self):
            return F.softplus(self.raw_outputscale)

        @property
        def noise(self):
            return F.softplus(self.raw_noise) + 1e-4  # GreaterThan(1e-4) constraint

        def covar(self, a, b):
            return _rbf(torch, a, b, self.lengthscale, self.outputscale)

        def forward(self, X):
            mean = self.mean_constant.expand(X.shape[0])
            return mean, self.covar(X, X)

    model = ExactGPModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)

    def marginal_log_likelihood():
        mean, K = model(train_x)
        K = K + model.noise * torch.eye(n, dtype=dt)
        L = torch.linalg.cholesky(K)
        diff = (train_y - mean).unsqueeze(-1)
        alpha = torch.cholesky_solve(diff, L)
        quad = (diff * alpha).sum()
        logdet = 2 * torch.log(torch.diagonal(L)).sum()
        mll = -0.5 * (quad + logdet + n * math.log(2 * math.pi))
        return mll / n, L, alpha

    losses, printed = [], []
    training_iter = 6
    for i in range(training_iter):
        optimizer.zero_grad()
        mll, _, _ = marginal_log_likelihood()
        loss = -mll
        loss.backward()
        printed.append(
            "Iter %d/%d - Loss: %.3f   lengthscale: %.3f   noise: %.3f"  # noqa: UP031
            % (
                i + 1,
                training_iter,
                loss.item(),
                model.lengthscale[0, 0].item(),
                model.noise.item(),
            )
        )
        losses.append(loss.item())
        optimizer.step()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    with torch.no_grad():
        mll, L, alpha = marginal_log_likelihood()
        Ks = model.covar(test_x, train_x)
        mean = model.mean_constant + Ks @ alpha.squeeze(-1)
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        latent_var = model.outputscale - v.pow(2).sum(0)
        observed_var = latent_var + model.noise
        lower, upper = mean - 2 * observed_var.sqrt(), mean + 2 * observed_var.sqrt()
    return {"losses": losses, "printed": printed, "params": params(model), "grads": grads,
            "final_mll": mll, "mean": mean, "latent_var": latent_var, "lower": lower,
            "upper": upper, "lengthscale": model.lengthscale.detach()}  # fmt: skip


@program
def gpk_stationary_kernel_zoo_cdist_grads(torch):
    """The stationary kernels of GPyTorch/GPflow on ``torch.cdist`` distances (Matern 1/2, 3/2,
    5/2, rational quadratic, RBF), periodic and locally periodic kernels on 1-D inputs, linear and
    polynomial kernels, sums and products of them; gradients of a kernel sum with respect to the
    lengthscales through ``cdist`` (whose diagonal distances are exactly zero), and the spectrum of
    the Gram matrices to show they are positive semi-definite."""
    X = torch.tensor(arr(10, 9, 3))
    Z = torch.tensor(arr(11, 6, 3))
    lengthscale = torch.tensor([0.8, 1.3, 2.0], requires_grad=True)
    alpha = torch.tensor(1.5, requires_grad=True)

    def matern(a, b, nu):
        r = torch.cdist(a / lengthscale, b / lengthscale)
        if nu == 0.5:
            return torch.exp(-r)
        if nu == 1.5:
            s = math.sqrt(3) * r
            return (1 + s) * torch.exp(-s)
        s = math.sqrt(5) * r
        return (1 + s + s.pow(2) / 3) * torch.exp(-s)

    def rational_quadratic(a, b):
        r2 = torch.cdist(a / lengthscale, b / lengthscale).pow(2)
        return (1 + r2 / (2 * alpha)).pow(-alpha)

    def rbf(a, b):
        return torch.exp(-0.5 * torch.cdist(a / lengthscale, b / lengthscale).pow(2))

    t = torch.tensor(np.linspace(0, 3, 8, dtype=np.float32)).unsqueeze(-1)
    period, per_ls = torch.tensor(1.2, requires_grad=True), 0.7
    diff = (t - t.T).abs()
    periodic = torch.exp(-2 * torch.sin(math.pi * diff / period).pow(2) / per_ls**2)
    locally_periodic = periodic * torch.exp(-0.5 * diff.pow(2) / 2.0**2)
    linear = 0.5 * X @ Z.T + 0.1
    poly = (X @ Z.T / 3 + 1).pow(3)
    kernels = {"m12": matern(X, Z, 0.5), "m32": matern(X, Z, 1.5), "m52": matern(X, Z, 2.5),
               "rq": rational_quadratic(X, Z), "rbf": rbf(X, Z), "linear": linear, "poly": poly,
               "sum": rbf(X, Z) + matern(X, Z, 2.5), "product": rbf(X, Z) * (linear + 1)}  # fmt: skip
    gram = matern(X, X, 2.5) + matern(X, X, 0.5) + rational_quadratic(X, X) + rbf(X, X)
    total = gram.sum() + locally_periodic.sum()
    total.backward()
    with torch.no_grad():
        spectra = {"m52": torch.linalg.eigvalsh(matern(X, X, 2.5)),
                   "periodic": torch.linalg.eigvalsh(periodic.double()),
                   "rq": torch.linalg.eigvalsh(rational_quadratic(X, X))}  # fmt: skip
    return {"kernels": kernels, "periodic": periodic, "locally_periodic": locally_periodic,
            "gram_diag": gram.diagonal(), "total": total, "grad_lengthscale": lengthscale.grad,
            "grad_alpha": alpha.grad, "grad_period": period.grad, "spectra": spectra}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_batched_independent_gps_triangular_solves(torch):
    """Three independent GPs in one batch (GPyTorch's ``batch_shape``): per-task lengthscales
    broadcast over ``(b, n, n)`` Gram matrices, batched Cholesky factors both lower and upper,
    ``cholesky_solve``, the older ``torch.triangular_solve`` and ``linalg.solve_triangular`` with
    ``left=False``, log determinants from the diagonals against ``logdet`` and ``slogdet``, the
    summed marginal likelihood differentiated with respect to the batched hyperparameters."""
    dt = torch.float64
    b, n = 3, 10
    X = torch.tensor(np.linspace(0, 1, n)[:, None], dtype=dt)
    Y = torch.tensor(np.stack([np.sin(6 * np.linspace(0, 1, n) + k) for k in range(b)]), dtype=dt)
    Y = Y + torch.tensor(arr(20, b, n, scale=0.05, dtype=np.float64))
    Xs = torch.tensor(np.array([[0.15], [0.5], [0.93], [1.2]]), dtype=dt)
    log_ls = torch.tensor([[[-1.5]], [[-1.0]], [[-0.5]]], dtype=dt, requires_grad=True)
    log_noise = torch.tensor([-4.0, -3.0, -2.0], dtype=dt, requires_grad=True)

    ls = log_ls.exp()
    K = torch.exp(-0.5 * (X / ls - (X / ls).transpose(-2, -1)).pow(2))  # (b, n, n)
    K = K + log_noise.exp()[:, None, None] * torch.eye(n, dtype=dt)
    L = torch.linalg.cholesky(K)
    U = torch.linalg.cholesky(K, upper=True)
    alpha = torch.cholesky_solve(Y.unsqueeze(-1), L)
    alpha_upper = torch.cholesky_solve(Y.unsqueeze(-1), U, upper=True)
    logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    mll = (
        -0.5 * (Y.unsqueeze(-1) * alpha).sum((-2, -1))
        - 0.5 * logdet
        - 0.5 * n * math.log(2 * math.pi)
    )
    (-mll.sum()).backward()
    with torch.no_grad():
        Ks = torch.exp(-0.5 * (Xs / ls - (X / ls).transpose(-2, -1)).pow(2))  # (b, 4, n)
        mean = (Ks @ alpha).squeeze(-1)
        v = torch.triangular_solve(Ks.transpose(-2, -1), L, upper=False).solution
        var = 1 - v.pow(2).sum(-2)
        w = torch.linalg.solve_triangular(U, Ks, upper=True, left=False)  # Ks U^{-1}
        sign, logabsdet = torch.linalg.slogdet(K)
    return {"mll": mll, "alpha": alpha.squeeze(-1), "alpha_upper_diff": alpha - alpha_upper,
            "logdet": logdet, "torch_logdet": torch.logdet(K), "sign": sign,
            "logabsdet": logabsdet, "grad_log_ls": log_ls.grad, "grad_log_noise": log_noise.grad,
            "mean": mean, "var": var, "var_right": 1 - w.pow(2).sum(-1)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_svgp_whitened_inducing_points_elbo(torch):
    """A sparse variational GP (Hensman et al.) with whitening as GPyTorch's
    ``VariationalStrategy(whiten=True)`` and GPflow's SVGP compute it: learned inducing points,
    a variational mean and a lower-triangular ``S`` with a softplus diagonal, ``A = Lzz^{-1} Kzx``,
    the marginal ``q(f)`` moments, the Gaussian expected log likelihood, the KL to the whitened
    prior (closed form and through ``distributions.kl_divergence``), minibatch ELBO scaled by
    ``N / batch`` and Adam steps; then predictions at test points."""
    nn, F = torch.nn, torch.nn.functional
    dt = torch.float64
    N, M, B = 24, 5, 8
    x = np.sort(_unif(30, N, low=-3, high=3))
    y = np.sin(1.5 * x) + 0.1 * np.random.default_rng(31).standard_normal(N)
    train_x = torch.tensor(x[:, None], dtype=dt)
    train_y = torch.tensor(y, dtype=dt)
    test_x = torch.tensor(np.linspace(-3.5, 3.5, 6)[:, None], dtype=dt)

    class SVGP(nn.Module):
        def __init__(self):
            super().__init__()
            self.inducing_points = nn.Parameter(
                torch.linspace(-2.5, 2.5, M, dtype=dt).unsqueeze(-1)
            )
            self.variational_mean = nn.Parameter(torch.zeros(M, dtype=dt))
            self.raw_chol = nn.Parameter(torch.eye(M, dtype=dt) * -0.5)
            self.raw_lengthscale = nn.Parameter(torch.tensor(0.5, dtype=dt))
            self.raw_outputscale = nn.Parameter(torch.tensor(0.5, dtype=dt))
            self.raw_noise = nn.Parameter(torch.tensor(-2.0, dtype=dt))

        def chol_variational_covar(self):
            S = torch.tril(self.raw_chol, diagonal=-1)
            return S + torch.diag_embed(F.softplus(torch.diagonal(self.raw_chol)))

        def kernel(self, a, b):
            ls, os_ = F.softplus(self.raw_lengthscale), F.softplus(self.raw_outputscale)
            return _rbf(torch, a, b, ls, os_)

        def forward(self, X):
            Z = self.inducing_points
            Kzz = self.kernel(Z, Z) + 1e-6 * torch.eye(M, dtype=dt)
            Lz = torch.linalg.cholesky(Kzz)
            A = torch.linalg.solve_triangular(Lz, self.kernel(Z, X), upper=False)
            S = self.chol_variational_covar()
            mean = A.T @ self.variational_mean
            kdiag = F.softplus(self.raw_outputscale).expand(X.shape[0])
            var = kdiag - A.pow(2).sum(0) + (S.T @ A).pow(2).sum(0)
            return mean, var

        def kl(self):
            m, S = self.variational_mean, self.chol_variational_covar()
            logdet_S = 2 * torch.log(torch.diagonal(S)).sum()
            return 0.5 * (S.pow(2).sum() + m.pow(2).sum() - M - logdet_S)

    model = SVGP()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    elbos, kls = [], []
    for _epoch in range(3):
        for start in range(0, N, B):
            xb, yb = train_x[start : start + B], train_y[start : start + B]
            optimizer.zero_grad()
            mean, var = model(xb)
            noise = F.softplus(model.raw_noise)
            ell = (
                -0.5 * math.log(2 * math.pi)
                - 0.5 * noise.log()
                - 0.5 * ((yb - mean).pow(2) + var) / noise
            )
            kl = model.kl()
            elbo = ell.sum() * (N / B) - kl
            (-elbo / N).backward()
            optimizer.step()
            elbos.append(elbo.item())
            kls.append(kl.item())
    with torch.no_grad():
        S = model.chol_variational_covar()
        q_u = torch.distributions.MultivariateNormal(model.variational_mean, scale_tril=S)
        p_u = torch.distributions.MultivariateNormal(
            torch.zeros(M, dtype=dt), scale_tril=torch.eye(M, dtype=dt)
        )
        kl_dist = torch.distributions.kl_divergence(q_u, p_u)
        mean, var = model(test_x)
    return {"elbos": elbos, "kls": kls, "kl_closed": model.kl().detach(), "kl_dist": kl_dist,
            "params": params(model), "S": S, "pred_mean": mean, "pred_var": var,
            "pred_y_var": var + F.softplus(model.raw_noise).detach()}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_laplace_gp_binary_classification(torch):
    """GP classification with the Laplace approximation exactly as Rasmussen & Williams'
    Algorithms 3.1 and 3.2 write it, for the logistic likelihood: Newton iterations on the latent
    mode with ``B = I + W^1/2 K W^1/2`` factored by Cholesky, the approximate log marginal
    likelihood (differentiated through the unrolled iterations with respect to the log
    lengthscale), then predictive latent means and variances and MacKay's probit-approximated
    class probabilities."""
    dt = torch.float64
    n = 16
    rng = np.random.default_rng(40)
    x = rng.standard_normal((n, 2))
    labels = np.where(x[:, 0] + 0.5 * x[:, 1] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    X, yv = torch.tensor(x, dtype=dt), torch.tensor(labels, dtype=dt)
    Xs = torch.tensor(rng.standard_normal((5, 2)), dtype=dt)
    log_ls = torch.tensor(0.2, dtype=dt, requires_grad=True)
    sf2 = 2.0

    def kern(a, b):
        return _rbf(torch, a, b, log_ls.exp(), sf2)

    K = kern(X, X)
    t = (yv + 1) / 2
    f = torch.zeros(n, dtype=dt)
    objectives = []
    for _ in range(10):
        pi = torch.sigmoid(f)
        W = pi * (1 - pi)
        sW = W.sqrt()
        B = torch.eye(n, dtype=dt) + sW[:, None] * K * sW[None, :]
        L = torch.linalg.cholesky(B)
        grad_lik = t - pi
        b = W * f + grad_lik
        c = torch.linalg.solve_triangular(L, (sW * (K @ b)).unsqueeze(-1), upper=False)
        a = b - sW * torch.linalg.solve_triangular(L.T, c, upper=True).squeeze(-1)
        f = K @ a
        log_lik = -torch.nn.functional.softplus(-yv * f).sum()
        objectives.append((-0.5 * (a @ f) + log_lik).item())
    pi = torch.sigmoid(f)
    W = pi * (1 - pi)
    sW = W.sqrt()
    L = torch.linalg.cholesky(torch.eye(n, dtype=dt) + sW[:, None] * K * sW[None, :])
    log_lik = -torch.nn.functional.softplus(-yv * f).sum()
    log_z = -0.5 * (a @ f) + log_lik - torch.log(torch.diagonal(L)).sum()
    log_z.backward()
    with torch.no_grad():
        Ks = kern(Xs, X)
        f_mean = Ks @ (t - pi)
        v = torch.linalg.solve_triangular(L, (sW[:, None] * Ks.T), upper=False)
        f_var = sf2 - v.pow(2).sum(0)
        kappa = 1 / torch.sqrt(1 + math.pi * f_var / 8)
        prob = torch.sigmoid(kappa * f_mean)
    return {"f_hat": f.detach(), "objectives": objectives, "log_z": log_z.detach(),
            "grad_log_ls": log_ls.grad, "f_mean": f_mean, "f_var": f_var, "prob": prob,
            "pred_label": (prob > 0.5).long(), "train_acc": ((f > 0).double() * 2 - 1 == yv).double().mean()}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_kernel_ridge_regression_loo_and_kernel_pca(torch):
    """Kernel ridge regression as sklearn's ``KernelRidge`` and the textbooks compute it: a
    regularisation path from one eigendecomposition of the Gram matrix, closed-form
    leave-one-out residuals ``alpha_i / [(K + lambda I)^{-1}]_ii`` (via ``cholesky_inverse``),
    the best lambda by ``argmin``, a Laplacian kernel from ``cdist(p=1)`` solved with
    ``linalg.solve``; then kernel PCA on the double-centred Gram matrix with sign-fixed
    components and the projections of new points."""
    dt = torch.float64
    n = 20
    rng = np.random.default_rng(50)
    x = rng.uniform(-2, 2, (n, 2))
    y = np.sinc(x[:, 0]) + 0.3 * x[:, 1] ** 2 + 0.05 * rng.standard_normal(n)
    X, Y = torch.tensor(x, dtype=dt), torch.tensor(y, dtype=dt)
    Xt = torch.tensor(rng.uniform(-2, 2, (6, 2)), dtype=dt)
    gamma = 0.5
    K = torch.exp(-gamma * torch.cdist(X, X).pow(2))
    evals, evecs = torch.linalg.eigh(K)
    Qty = evecs.T @ Y
    lambdas = [1e-3, 1e-2, 1e-1, 1.0]
    loo_mse, path = [], []
    for lam in lambdas:
        alpha = evecs @ (Qty / (evals + lam))
        L = torch.linalg.cholesky(K + lam * torch.eye(n, dtype=dt))
        Kinv = torch.cholesky_inverse(L)
        loo_resid = alpha / Kinv.diagonal()
        loo_mse.append(loo_resid.pow(2).mean())
        path.append(alpha)
    loo_mse = torch.stack(loo_mse)
    best = int(torch.argmin(loo_mse))
    lam = lambdas[best]
    alpha = path[best]
    Kt = torch.exp(-gamma * torch.cdist(Xt, X).pow(2))
    pred = Kt @ alpha
    K_lap = torch.exp(-torch.cdist(X, X, p=1))
    alpha_lap = torch.linalg.solve(K_lap + lam * torch.eye(n, dtype=dt), Y.unsqueeze(-1))
    pred_lap = torch.exp(-torch.cdist(Xt, X, p=1)) @ alpha_lap
    # kernel PCA
    one_n = torch.full((n, n), 1.0 / n, dtype=dt)
    Kc = K - one_n @ K - K @ one_n + one_n @ K @ one_n
    ev, V = torch.linalg.eigh(Kc)
    ev, V = ev.flip(0)[:3], V.flip(1)[:, :3]
    signs = torch.sign(V[V.abs().argmax(dim=0), torch.arange(3)])
    V = V * signs
    alphas_pca = V / ev.sqrt()
    one_t = torch.full((Xt.shape[0], n), 1.0 / n, dtype=dt)
    Ktc = Kt - one_t @ K - Kt @ one_n + one_t @ K @ one_n
    return {"evals": evals, "loo_mse": loo_mse, "best": best, "pred": pred,
            "train_fit": K @ alpha, "pred_lap": pred_lap, "pca_evals": ev,
            "train_proj": Kc @ alphas_pca, "test_proj": Ktc @ alphas_pca,
            "explained": ev / torch.linalg.eigvalsh(Kc).clamp_min(0).sum()}  # fmt: skip


@program
def gpk_random_fourier_features_bayesian_linear_regression(torch):
    """Random Fourier features (Rahimi & Recht) with fixed NumPy frequencies and phases: the
    ``sqrt(2/D) cos(XW + b)`` map and the paired ``[cos, sin]`` map, the kernel they approximate
    against the exact RBF, then Bayesian linear regression on the features (the weight-space view
    of the GP: posterior precision factored by Cholesky, predictive mean and variance) and a
    ridge fit of the same features by a few steps of ``optim.SGD``."""
    D, d, n = 64, 2, 20
    ls, noise = 0.8, 0.05
    rng = np.random.default_rng(60)
    W_np = (rng.standard_normal((d, D)) / ls).astype(np.float32)
    b_np = rng.uniform(0, 2 * np.pi, D).astype(np.float32)
    x = rng.uniform(-2, 2, (n, d)).astype(np.float32)
    y = (np.sin(x[:, 0]) + 0.5 * np.cos(2 * x[:, 1])).astype(np.float32)
    X, Y = torch.tensor(x), torch.tensor(y)
    Xt = torch.tensor(rng.uniform(-2, 2, (5, d)).astype(np.float32))
    W, b = torch.tensor(W_np), torch.tensor(b_np)

    def features(inp):
        return math.sqrt(2.0 / D) * torch.cos(inp @ W + b)

    def paired(inp):
        proj = inp @ W
        return torch.cat([torch.cos(proj), torch.sin(proj)], dim=-1) / math.sqrt(D)

    Phi, Phi_t = features(X), features(Xt)
    K_exact = torch.exp(-0.5 * torch.cdist(X / ls, X / ls).pow(2))
    K_rff = Phi @ Phi.T
    K_paired = paired(X) @ paired(X).T
    A = Phi.T @ Phi / noise + torch.eye(D)
    L = torch.linalg.cholesky(A)
    w_mean = torch.cholesky_solve((Phi.T @ Y / noise).unsqueeze(-1), L).squeeze(-1)
    v = torch.linalg.solve_triangular(L, Phi_t.T, upper=False)
    pred_mean = Phi_t @ w_mean
    pred_var = v.pow(2).sum(0) + noise
    model = torch.nn.Linear(D, 1)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-3)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(Phi).squeeze(-1), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"K_rff_err": (K_rff - K_exact).abs().max(), "K_paired_err": (K_paired - K_exact).abs().mean(),
            "K_rff_row": K_rff[0], "w_mean": w_mean, "pred_mean": pred_mean, "pred_var": pred_var,
            "losses": losses, "sgd_pred": model(Phi_t).detach().squeeze(-1)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_bayesopt_expected_improvement_ucb_qei(torch):
    """One round of Bayesian optimisation on the Forrester function as BoTorch's analytic and
    MC acquisitions compute it: standardised outcomes, the GP posterior over a grid, expected
    improvement with ``Normal(0, 1).cdf`` and ``log_prob().exp()``, its naive ``log`` and LogEI's
    stable tail (``erfcx``, ``log1mexp``), probability of improvement and ``log_ndtr``, UCB/LCB
    and a quantile UCB from ``icdf``, the grid argmax, Sobol raw samples ranked by EI, then gradient ascent on EI from the best grid point
    with the candidate clamped to the box, and MC q-EI of a batch of three from fixed base
    samples through the joint posterior's Cholesky factor."""
    dt = torch.float64

    def forrester(z):
        return (6 * z - 2).pow(2) * torch.sin(12 * z - 4)

    train_x = torch.tensor([[0.05], [0.2], [0.45], [0.6], [0.85], [0.95]], dtype=dt)
    raw_y = forrester(train_x).squeeze(-1)
    train_y = (raw_y - raw_y.mean()) / raw_y.std()
    ls, sf2, noise = 0.15, 1.0, 1e-4
    K = _rbf(torch, train_x, train_x, ls, sf2) + noise * torch.eye(6, dtype=dt)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(train_y.unsqueeze(-1), L).squeeze(-1)

    def posterior(x):
        Ks = _rbf(torch, x, train_x, ls, sf2)
        mean = Ks @ alpha
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        var = (sf2 - v.pow(2).sum(0)).clamp_min(1e-12)
        return mean, var

    best_f = train_y.min()
    normal = torch.distributions.Normal(torch.zeros((), dtype=dt), torch.ones((), dtype=dt))

    def expected_improvement(x):
        mean, var = posterior(x)
        sigma = var.sqrt()
        u = (best_f - mean) / sigma
        return sigma * (u * normal.cdf(u) + normal.log_prob(u).exp()), u, mean, sigma

    grid = torch.linspace(0, 1, 41, dtype=dt).unsqueeze(-1)
    ei, u, mean, sigma = expected_improvement(grid)
    pi = torch.special.ndtr(u)
    beta = 2.0
    ucb = -mean + math.sqrt(beta) * sigma  # minimisation: UCB of -f
    log_ei = torch.log(ei.clamp_min(1e-30))
    erfc_cdf = 0.5 * torch.erfc(-u / math.sqrt(2))

    # BoTorch's LogEI: log(phi(u) + u Phi(u)) directly above u = -1, and below it
    # log phi(u) + log1mexp(log(-u) + log(erfcx(-u / sqrt 2)) + log(sqrt(pi / 2)))
    def log1mexp(z):
        return torch.where(z > -math.log(2), torch.log(-torch.expm1(z)), torch.log1p(-torch.exp(z)))

    def log_ei_helper(z):
        upper = z.clamp_min(-1)
        lower = z.clamp_max(-1)
        log_upper = torch.log(normal.log_prob(upper).exp() + upper * torch.special.ndtr(upper))
        w = torch.log(-lower) + torch.log(torch.special.erfcx(-lower / math.sqrt(2)))
        log_lower = normal.log_prob(lower) + log1mexp(w + 0.5 * math.log(math.pi / 2))
        return torch.where(z > -1, log_upper, log_lower)

    log_ei_stable = log_ei_helper(u) + sigma.log()
    log_pi = torch.special.log_ndtr(u)
    quantile_ucb = -mean + sigma * normal.icdf(torch.tensor(0.9, dtype=dt))
    # raw samples for the multistart: an unscrambled Sobol sequence, the best ones by LogEI
    sobol = torch.quasirandom.SobolEngine(dimension=1, scramble=False).draw(16, dtype=dt)
    ei_raw = expected_improvement(sobol)[0]
    starts = sobol[ei_raw.topk(3).indices]
    best_idx = ei.argmax()
    candidate = grid[best_idx].clone().unsqueeze(0).requires_grad_(True)
    opt = torch.optim.Adam([candidate], lr=0.01)
    ei_trace = []
    for _ in range(8):
        opt.zero_grad()
        val = expected_improvement(candidate)[0].sum()
        (-val).backward()
        opt.step()
        with torch.no_grad():
            candidate.clamp_(0.0, 1.0)
        ei_trace.append(val.item())
    # MC q-EI for q = 3 points with fixed base samples (BoTorch's SobolQMCNormalSampler is fixed
    # per acquisition; here plain NumPy normals)
    Xq = torch.tensor([[0.3], [0.7], [0.75]], dtype=dt)
    Ksq = _rbf(torch, Xq, train_x, ls, sf2)
    mq = Ksq @ alpha
    V = torch.linalg.solve_triangular(L, Ksq.T, upper=False)
    cov = _rbf(torch, Xq, Xq, ls, sf2) - V.T @ V
    Lq = torch.linalg.cholesky(cov + 1e-8 * torch.eye(3, dtype=dt))
    base = torch.tensor(arr(70, 128, 3, dtype=np.float64))
    samples = mq + base @ Lq.T
    improvement = (best_f - samples).clamp_min(0).max(dim=-1).values
    return {"train_y": train_y, "ei": ei, "pi": pi, "ucb": ucb, "log_ei": log_ei,
            "cdf_err": (erfc_cdf - normal.cdf(u)).abs().max(), "best_idx": best_idx,
            "candidate": candidate.detach(), "ei_trace": ei_trace, "qei": improvement.mean(),
            "qei_se": improvement.std() / math.sqrt(128), "lcb_argmin": (mean - 2 * sigma).argmin(),
            "log_ei_stable": log_ei_stable, "log_pi": log_pi, "quantile_ucb": quantile_ucb,
            "sobol": sobol, "starts": starts}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_spectral_mixture_kernel_psd_safe_cholesky(torch):
    """Wilson & Adams' spectral mixture kernel with two components (softplus-constrained
    weights, means and variances of the spectral density) fitted by Adam to a quasi-periodic
    series, with GPyTorch's ``psd_safe_cholesky``: ``cholesky_ex`` and growing jitter until
    ``info`` is zero (here also on a matrix that needs it), and its older spelling that catches
    the ``RuntimeError`` of ``linalg.cholesky`` and retries with jitter added in place (and a
    batched factorization caught as ``torch.linalg.LinAlgError``, with its message)."""
    nn, F = torch.nn, torch.nn.functional
    dt = torch.float64
    n = 24
    t = np.linspace(0, 4, n)
    y = (
        np.sin(2 * np.pi * t / 1.3)
        + 0.4 * np.cos(2 * np.pi * 0.9 * t)
        + 0.05 * arr(80, n, dtype=np.float64)
    )
    T, Y = torch.tensor(t[:, None], dtype=dt), torch.tensor(y, dtype=dt)

    def psd_safe_cholesky(A, max_tries=4):
        L, info = torch.linalg.cholesky_ex(A)
        if not torch.any(info):
            return L, 0.0
        jitter = 1e-6 if A.dtype == torch.float64 else 1e-4
        eye = torch.eye(A.shape[-1], dtype=A.dtype)
        for _ in range(max_tries):
            L, info = torch.linalg.cholesky_ex(A + jitter * eye)
            if not torch.any(info):
                return L, jitter
            jitter *= 10
        raise ValueError("not positive definite even with jitter")

    def psd_safe_cholesky_try(A, max_tries=6):
        # the older GPyTorch/BoTorch spelling: try the factorization, catch the error, add
        # growing jitter in place on a copy's diagonal and retry; re-raise the first error
        try:
            return torch.linalg.cholesky(A), 0.0, None
        except RuntimeError as e:
            if torch.isnan(A).any():
                raise ValueError("cholesky of a matrix with NaN") from e
            jitter = 1e-8 if A.dtype == torch.float64 else 1e-6
            Aprime, jitter_prev = A.clone(), 0.0
            for i in range(max_tries):
                jitter_new = jitter * (10**i)
                Aprime.diagonal(dim1=-2, dim2=-1).add_(jitter_new - jitter_prev)
                jitter_prev = jitter_new
                try:
                    return torch.linalg.cholesky(Aprime), jitter_new, e
                except RuntimeError:
                    continue
            raise e

    class SpectralMixture(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_weights = nn.Parameter(torch.tensor([0.0, -1.0], dtype=dt))
            self.raw_means = nn.Parameter(torch.tensor([0.5, 1.0], dtype=dt))
            self.raw_scales = nn.Parameter(torch.tensor([-3.0, -3.0], dtype=dt))
            self.raw_noise = nn.Parameter(torch.tensor(-3.0, dtype=dt))

        def forward(self, a, b):
            tau = (a - b.T).unsqueeze(-1)  # (n, m, 1)
            w, mu, v = (
                F.softplus(self.raw_weights),
                F.softplus(self.raw_means),
                F.softplus(self.raw_scales),
            )
            comps = torch.exp(-2 * math.pi**2 * tau.pow(2) * v) * torch.cos(2 * math.pi * tau * mu)
            return (w * comps).sum(-1)

    kernel = SpectralMixture()
    optimizer = torch.optim.Adam(kernel.parameters(), lr=0.05)
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        K = kernel(T, T) + F.softplus(kernel.raw_noise) * torch.eye(n, dtype=dt)
        L, _ = psd_safe_cholesky(K)
        alpha = torch.cholesky_solve(Y.unsqueeze(-1), L)
        loss = (
            0.5 * (Y.unsqueeze(-1) * alpha).sum()
            + L.diagonal().log().sum()
            + 0.5 * n * math.log(2 * math.pi)
        )
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        close = torch.tensor(np.linspace(0, 0.05, 8)[:, None], dtype=dt)
        K_close = _rbf(torch, close, close, 1.0, 1.0) - 3e-4 * torch.eye(8, dtype=dt)
        _, info0 = torch.linalg.cholesky_ex(K_close)
        L_close, jitter = psd_safe_cholesky(K_close)
        L_try, jitter_try, first_error = psd_safe_cholesky_try(K_close)
        try:
            torch.linalg.cholesky(torch.stack([K_close + 1e-3 * torch.eye(8, dtype=dt), K_close]))
            batch_error = "no error"
        except torch.linalg.LinAlgError as e:
            batch_error = str(e)
        Ts = torch.tensor(np.linspace(4, 5, 4)[:, None], dtype=dt)
        Kn = kernel(T, T) + F.softplus(kernel.raw_noise) * torch.eye(n, dtype=dt)
        mean = kernel(Ts, T) @ torch.linalg.solve(Kn, Y)
    return {"losses": losses, "params": params(kernel), "info0_positive": bool(info0 > 0),
            "jitter": jitter, "L_close_diag": L_close.diagonal(), "forecast": mean,
            "jitter_try": jitter_try, "L_try_diag": L_try.diagonal(), "first_error": str(first_error),
            "first_error_is_linalg": isinstance(first_error, torch.linalg.LinAlgError),
            "batch_error": batch_error,
            "k_tau": kernel(torch.zeros(1, 1, dtype=dt), T[:6]).detach()}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_icm_multitask_kronecker_eigendecomposition(torch):
    """A multitask GP with the intrinsic coregionalisation model (GPyTorch's
    ``MultitaskKernel``): task covariance ``B = W W^T + diag(softplus(v))`` and ``K = B kron Kx``
    built with ``torch.kron``; the marginal likelihood by dense Cholesky and by the Kronecker
    eigendecomposition trick (``eigh`` of each factor, eigenvalues multiplied, the solve through
    the Kronecker eigenvectors), both differentiated with respect to ``W``; then task-wise
    predictions."""
    F = torch.nn.functional
    dt = torch.float64
    n, T = 8, 2
    x = np.linspace(0, 1, n)
    Ytasks = np.stack([np.sin(5 * x), np.sin(5 * x + 0.4) + 0.3 * x])  # (T, n) task-major
    Ytasks = Ytasks + 0.05 * arr(90, T, n, dtype=np.float64)
    X = torch.tensor(x[:, None], dtype=dt)
    y = torch.tensor(Ytasks.reshape(-1), dtype=dt)
    Xs = torch.tensor(np.array([[0.25], [0.8], [1.1]]), dtype=dt)
    W = torch.tensor([[1.0], [0.8]], dtype=dt, requires_grad=True)
    raw_v = torch.tensor([-1.0, -1.5], dtype=dt, requires_grad=True)
    noise = 0.01
    Kx = _rbf(torch, X, X, 0.3, 1.0)

    def task_covar():
        return W @ W.T + torch.diag(F.softplus(raw_v))

    B = task_covar()
    K = torch.kron(B, Kx) + noise * torch.eye(n * T, dtype=dt)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    nll_dense = 0.5 * (y @ alpha) + L.diagonal().log().sum()
    gW_dense, gv_dense = torch.autograd.grad(nll_dense, [W, raw_v])

    B = task_covar()
    eB, QB = torch.linalg.eigh(B)
    eX, QX = torch.linalg.eigh(Kx)
    lam = torch.kron(eB, eX) + noise
    Q = torch.kron(QB, QX)
    alpha_kron = Q @ ((Q.T @ y) / lam)
    nll_kron = 0.5 * (y @ alpha_kron) + 0.5 * lam.log().sum()
    gW_kron, gv_kron = torch.autograd.grad(nll_kron, [W, raw_v])
    with torch.no_grad():
        Ks = torch.kron(B, _rbf(torch, Xs, X, 0.3, 1.0))  # (T*3, T*n)
        pred = (Ks @ alpha).view(T, -1)
        Kss = torch.kron(B, _rbf(torch, Xs, Xs, 0.3, 1.0))
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        pred_var = (Kss.diagonal() - v.pow(2).sum(0)).view(T, -1)
        corr = B[0, 1] / (B[0, 0] * B[1, 1]).sqrt()
    return {"nll_dense": nll_dense.detach(), "nll_kron": nll_kron.detach(), "gW_dense": gW_dense,
            "gW_kron": gW_kron, "gv_dense": gv_dense, "gv_kron": gv_kron, "lam_sorted": lam.detach().sort().values,
            "alpha_diff": (alpha - alpha_kron).abs().max().detach(), "pred": pred,
            "pred_var": pred_var, "task_corr": corr}  # fmt: skip


@program
def gpk_deep_kernel_learning_mlp_features(torch):
    """Deep kernel learning as GPyTorch's DKL tutorial sets it up: an MLP feature extractor, its
    features scaled into a box by a ``ScaleToBounds``-style module (the min and max recorded into
    buffers in training mode, so no gradient flows through them, and reused in eval mode), a
    scaled RBF kernel on them, the exact marginal likelihood, and one Adam optimiser with
    parameter groups (the network at a smaller learning rate than the GP hyperparameters);
    float32 throughout."""
    nn, F = torch.nn, torch.nn.functional
    n = 16
    X = torch.tensor(arr(100, n, 4))
    Y = torch.tensor(np.tanh(arr(100, n, 4)[:, :2].sum(1)) + 0.05 * arr(101, n))
    Xs = torch.tensor(arr(102, 4, 4))
    # A stationary kernel cannot see a shift of the features, so any parameter that only shifts
    # them (the last layer's bias, the bias of a ReLU unit active on every input) has a gradient
    # of pure round-off, which Adam turns into full-size steps: no last bias, and tanh units.
    feature_extractor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(),
                                      nn.Linear(8, 2, bias=False))  # fmt: skip
    set_weights(torch, feature_extractor, seed=103)

    class GPLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_lengthscale = nn.Parameter(torch.zeros(1))
            self.raw_outputscale = nn.Parameter(torch.zeros(()))
            self.raw_noise = nn.Parameter(torch.tensor(-1.0))

        def kernel(self, a, b):
            return _rbf(
                torch, a, b, F.softplus(self.raw_lengthscale), F.softplus(self.raw_outputscale)
            )

    gp = GPLayer()
    optimizer = torch.optim.Adam([{"params": feature_extractor.parameters(), "lr": 0.01},
                                  {"params": gp.parameters()}], lr=0.1)  # fmt: skip

    class ScaleToBounds(nn.Module):
        def __init__(self, lower_bound=-1.0, upper_bound=1.0):
            super().__init__()
            self.lower_bound, self.upper_bound = lower_bound, upper_bound
            self.register_buffer("min_val", torch.tensor(lower_bound))
            self.register_buffer("max_val", torch.tensor(upper_bound))

        def forward(self, x):
            if self.training:
                self.min_val.data.fill_(x.min().item())
                self.max_val.data.fill_(x.max().item())
            diff = self.max_val - self.min_val
            x = (x - self.min_val) * (0.95 * (self.upper_bound - self.lower_bound) / diff)
            return x + 0.95 * self.lower_bound

    scale_to_bounds = ScaleToBounds()

    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        Z = scale_to_bounds(feature_extractor(X))
        K = gp.kernel(Z, Z) + (F.softplus(gp.raw_noise) + 1e-4) * torch.eye(n)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(Y.unsqueeze(-1), L)
        loss = (
            0.5 * (Y.unsqueeze(-1) * alpha).sum() + L.diagonal().log().sum()
        ) / n + 0.5 * math.log(2 * math.pi)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        Z = scale_to_bounds(feature_extractor(X))  # records the final network's range
        scale_to_bounds.eval()
        Zs = scale_to_bounds(feature_extractor(Xs))
        K = gp.kernel(Z, Z) + (F.softplus(gp.raw_noise) + 1e-4) * torch.eye(n)
        mean = gp.kernel(Zs, Z) @ torch.linalg.solve(K, Y)
    return {"losses": losses, "gp_params": params(gp), "net_params": params(feature_extractor),
            "features": Z, "test_features": Zs, "mean": mean,
            "bounds": [scale_to_bounds.min_val, scale_to_bounds.max_val],
            "lr_groups": [g["lr"] for g in optimizer.param_groups]}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_cg_lanczos_slq_logdet_and_nystrom(torch):
    """GPyTorch's BBMM ingredients written out: batched conjugate gradients on ``K + s2 I`` for the
    targets and fixed Rademacher probes at once (columns of one right-hand side), the Lanczos
    tridiagonal matrices rebuilt from the CG coefficients, stochastic Lanczos quadrature for the
    log determinant and Hutchinson's trace estimate, against the exact Cholesky values; then a
    Nystrom approximation with inducing points solved by the Woodbury identity."""
    dt = torch.float64
    n, t, iters = 30, 6, 8
    rng = np.random.default_rng(110)
    x = np.sort(rng.uniform(0, 5, n))
    X = torch.tensor(x[:, None], dtype=dt)
    y = torch.tensor(np.sin(x) + 0.1 * rng.standard_normal(n), dtype=dt)
    probes = torch.tensor(rng.choice([-1.0, 1.0], size=(n, t)), dtype=dt)
    s2 = 0.1
    K = _rbf(torch, X, X, 1.0, 1.0)
    A = K + s2 * torch.eye(n, dtype=dt)
    rhs = torch.cat([y.unsqueeze(-1), probes], dim=-1)  # (n, 1 + t)
    sol = torch.zeros_like(rhs)
    r = rhs.clone()
    p = r.clone()
    rz = (r * r).sum(0)
    alphas, betas, resid = [], [], []
    for _ in range(iters):
        Ap = A @ p
        alpha = rz / (p * Ap).sum(0)
        sol = sol + alpha * p
        r = r - alpha * Ap
        rz_new = (r * r).sum(0)
        beta = rz_new / rz
        p = r + beta * p
        rz = rz_new
        alphas.append(alpha)
        betas.append(beta)
        resid.append(r.norm(dim=0)[0].item())
    alphas, betas = torch.stack(alphas, -1), torch.stack(betas, -1)  # (1 + t, iters)
    diag = 1 / alphas
    diag[:, 1:] += betas[:, :-1] / alphas[:, :-1]
    off = betas[:, :-1].sqrt() / alphas[:, :-1]
    Tmat = torch.diag_embed(diag) + torch.diag_embed(off, 1) + torch.diag_embed(off, -1)
    evals, evecs = torch.linalg.eigh(Tmat[1:])
    slq = n * (evecs[:, 0, :].pow(2) * evals.log()).sum(-1).mean()
    L = torch.linalg.cholesky(A)
    exact_logdet = 2 * L.diagonal().log().sum()
    hutchinson = (probes * (A @ probes)).sum(0).mean()
    exact_alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    # Nystrom with m inducing inputs and the Woodbury identity
    Zi = X[::5]
    Kmm = _rbf(torch, Zi, Zi, 1.0, 1.0) + 1e-8 * torch.eye(Zi.shape[0], dtype=dt)
    Knm = _rbf(torch, X, Zi, 1.0, 1.0)
    inner = s2 * Kmm + Knm.T @ Knm
    woodbury = (y - Knm @ torch.linalg.solve(inner, Knm.T @ y)) / s2
    Q = Knm @ torch.linalg.solve(Kmm, Knm.T)
    direct = torch.linalg.solve(Q + s2 * torch.eye(n, dtype=dt), y)
    return {"cg_solution": sol[:, 0], "cg_err": (sol[:, 0] - exact_alpha).abs().max(),
            "resid": resid, "T_first": Tmat[0], "slq_logdet": slq, "exact_logdet": exact_logdet,
            "hutchinson": hutchinson, "trace": A.trace(), "woodbury": woodbury,
            "woodbury_err": (woodbury - direct).abs().max(), "nystrom_err": (Q - K).abs().max()}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gpk_posterior_samples_thompson_and_fantasy_update(torch):
    """Posterior function samples ``mu + L_post eps`` from fixed NumPy normals, Thompson
    sampling's argmax per sample, the posterior as a ``MultivariateNormal`` (log_prob of the
    samples, entropy), and the rank-one Cholesky extension BoTorch-style fantasies and online GPs
    use to add one observation (the new row from a triangular solve), checked against the full
    refactorisation and the updated posterior mean."""
    dt = torch.float64
    n, m, S = 7, 12, 4
    rng = np.random.default_rng(120)
    x = np.sort(rng.uniform(0, 1, n))
    X = torch.tensor(x[:, None], dtype=dt)
    y = torch.tensor(np.cos(6 * x), dtype=dt)
    Xs = torch.linspace(0, 1, m, dtype=dt).unsqueeze(-1)
    ls, sf2, noise = 0.2, 1.0, 1e-3
    K = _rbf(torch, X, X, ls, sf2) + noise * torch.eye(n, dtype=dt)
    L = torch.linalg.cholesky(K)
    Ks = _rbf(torch, Xs, X, ls, sf2)
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    mu = Ks @ alpha
    V = torch.linalg.solve_triangular(L, Ks.T, upper=False)
    cov = _rbf(torch, Xs, Xs, ls, sf2) - V.T @ V
    cov = 0.5 * (cov + cov.T) + 1e-6 * torch.eye(m, dtype=dt)
    L_post = torch.linalg.cholesky(cov)
    eps = torch.tensor(arr(121, S, m, dtype=np.float64))
    samples = mu + eps @ L_post.T
    thompson = samples.argmax(dim=-1)
    post = torch.distributions.MultivariateNormal(mu, scale_tril=L_post)
    post_cov = torch.distributions.MultivariateNormal(mu, covariance_matrix=cov)
    # add the observation (x_new, y_new) by extending L by one row
    x_new = torch.tensor([[0.55]], dtype=dt)
    y_new = torch.cos(6 * x_new).reshape(1)
    k_new = _rbf(torch, X, x_new, ls, sf2)  # (n, 1)
    l12 = torch.linalg.solve_triangular(L, k_new, upper=False)
    l22 = torch.sqrt(sf2 + noise - l12.pow(2).sum())
    L_ext = torch.cat([torch.cat([L, torch.zeros(n, 1, dtype=dt)], dim=1),
                       torch.cat([l12.T, l22.reshape(1, 1)], dim=1)], dim=0)  # fmt: skip
    X2, y2 = torch.cat([X, x_new]), torch.cat([y, y_new])
    L_full = torch.linalg.cholesky(
        _rbf(torch, X2, X2, ls, sf2) + noise * torch.eye(n + 1, dtype=dt)
    )
    alpha2 = torch.cholesky_solve(y2.unsqueeze(-1), L_ext).squeeze(-1)
    mu2 = _rbf(torch, Xs, X2, ls, sf2) @ alpha2
    return {"mu": mu, "cov_diag": cov.diagonal(), "samples": samples, "thompson": thompson,
            "log_prob": post.log_prob(samples), "log_prob_cov": post_cov.log_prob(samples),
            "entropy": post.entropy(), "L_ext": L_ext, "ext_err": (L_ext - L_full).abs().max(),
            "mu_updated": mu2, "var_at_new": (_rbf(torch, x_new, x_new, ls, sf2)
                                              - (torch.linalg.solve_triangular(L, k_new, upper=False)).pow(2).sum())}  # fmt: skip
