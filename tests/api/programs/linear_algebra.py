"""Linear algebra (``torch.linalg``): Gaussian-process fits, least squares, learned covariances and
3-d geometry, with gradients through every factorization. Inputs are float64 from NumPy."""

from __future__ import annotations

import math

import numpy as np

from programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@program(rtol=1e-6, atol=1e-8)
def gp_marginal_likelihood(torch):
    """A Gaussian process with an RBF kernel: its hyperparameters fitted by gradient descent on
    the negative log marginal likelihood, written with cholesky and two triangular solves."""
    rng = _rng(11)
    x = np.sort(rng.uniform(-3, 3, 12))
    y = np.sin(x) + 0.1 * rng.standard_normal(12)
    X = torch.tensor(x[:, None])
    Y = torch.tensor(y[:, None])
    log_ell = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    log_sf = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    log_sn = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_ell, log_sf, log_sn], lr=0.05)
    eye = torch.eye(12, dtype=torch.float64)
    nlls = []
    for _ in range(8):
        d2 = (X - X.T) ** 2
        K = torch.exp(2 * log_sf) * torch.exp(-0.5 * d2 / torch.exp(2 * log_ell))
        K = K + torch.exp(2 * log_sn) * eye
        L = torch.linalg.cholesky(K)
        z = torch.linalg.solve_triangular(L, Y, upper=False)
        alpha = torch.linalg.solve_triangular(L.mT, z, upper=True)
        nll = 0.5 * (Y * alpha).sum() + torch.log(torch.diagonal(L)).sum()
        nll = nll + 6 * math.log(2 * math.pi)
        opt.zero_grad()
        nll.backward()
        opt.step()
        nlls.append(nll.item())
    # the posterior mean at a few new points, and its agreement with a plain solve
    xs = torch.tensor(np.linspace(-2, 2, 5)[:, None])
    Ks = torch.exp(2 * log_sf) * torch.exp(-0.5 * (xs - X.T) ** 2 / torch.exp(2 * log_ell))
    mean = Ks @ alpha
    plain = Ks @ torch.linalg.solve(K, Y)
    return {
        "nlls": nlls,
        "hyper": torch.stack([log_ell, log_sf, log_sn]).detach(),
        "grads": torch.stack([log_ell.grad, log_sf.grad, log_sn.grad]),
        "mean": mean,
        "plain": plain,
        "upper": torch.linalg.cholesky(K, upper=True),
    }


@program(rtol=1e-6, atol=1e-8)
def ridge_regression_closed_form(torch):
    """Kernel-free ridge regression by the normal equations; the ridge strength tuned by the
    gradient of a validation loss through ``solve``; inverse and ``left=False`` agree."""
    rng = _rng(12)
    Xtr, Xva = rng.standard_normal((30, 4)), rng.standard_normal((10, 4))
    w_true = np.array([[1.0], [-2.0], [0.5], [0.0]])
    ytr = Xtr @ w_true + 0.3 * rng.standard_normal((30, 1))
    yva = Xva @ w_true + 0.3 * rng.standard_normal((10, 1))
    A, B = torch.tensor(Xtr), torch.tensor(ytr)
    V, T = torch.tensor(Xva), torch.tensor(yva)
    log_lam = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    losses = []
    for _ in range(6):
        G = A.T @ A + torch.exp(log_lam) * torch.eye(4, dtype=torch.float64)
        w = torch.linalg.solve(G, A.T @ B)
        val = ((V @ w - T) ** 2).mean()
        (g,) = torch.autograd.grad(val, [log_lam])
        with torch.no_grad():
            log_lam -= 0.5 * g
        losses.append(val.item())
    G = A.T @ A + torch.exp(log_lam.detach()) * torch.eye(4, dtype=torch.float64)
    w_inv = torch.linalg.inv(G) @ (A.T @ B)
    w_right = torch.linalg.solve(G.T, (A.T @ B).T, left=False).T  # X G^T = B^T
    batch = torch.linalg.solve(torch.stack([G, 2 * G]), A.T @ B)
    return {
        "losses": losses,
        "log_lam": log_lam.detach(),
        "w_inv": w_inv,
        "w_right": w_right,
        "batch": batch,
        "det": torch.linalg.det(G),
        "inverse_alias": torch.inverse(G),
        "cond_1": torch.linalg.matrix_norm(G, 1) * torch.linalg.matrix_norm(torch.inverse(G), 1),
    }


@program(rtol=1e-6, atol=1e-8)
def learned_gaussian_slogdet(torch):
    """Maximum likelihood of a 3-d Gaussian whose covariance is ``S S^T + eps I``: slogdet for
    the normalizer, a batched solve for the Mahalanobis terms, SGD on ``S`` and the mean."""
    rng = _rng(13)
    C = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    data = rng.multivariate_normal([1.0, -1.0, 0.5], C, size=40)
    D = torch.tensor(data)
    S = torch.tensor(np.eye(3) + 0.1 * rng.standard_normal((3, 3)), requires_grad=True)
    mu = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([S, mu], lr=0.05)
    eye = torch.eye(3, dtype=torch.float64)
    nlls = []
    for _ in range(10):
        cov = S @ S.T + 0.1 * eye
        sign, logdet = torch.linalg.slogdet(cov)
        r = D - mu
        m = (r * torch.linalg.solve(cov, r.T).T).sum(1)
        nll = 0.5 * (m.mean() + logdet + 3 * math.log(2 * math.pi))
        opt.zero_grad()
        nll.backward()
        opt.step()
        nlls.append(nll.item())
    cov = (S @ S.T + 0.1 * eye).detach()
    return {
        "nlls": nlls,
        "S": S.detach(),
        "mu": mu.detach(),
        "sign": sign,
        "det_method": cov.det(),
        "logdet_vs_det": torch.log(torch.linalg.det(cov)) - torch.linalg.slogdet(cov).logabsdet,
        "precision_sq": torch.linalg.matrix_power(cov, -2),
        "fro": torch.linalg.norm(cov),
    }


@program(rtol=1e-6, atol=1e-8)
def rigid_geometry_cross_products(torch):
    """Triangle normals by cross products, areas by vector norms, a chain of rotations by
    multi_dot, and the gradient of the total area with respect to the vertices."""
    rng = _rng(14)
    verts = torch.tensor(rng.standard_normal((6, 3, 3)), requires_grad=True)
    e1 = verts[:, 1] - verts[:, 0]
    e2 = verts[:, 2] - verts[:, 0]
    n = torch.linalg.cross(e1, e2)
    area = 0.5 * torch.linalg.vector_norm(n, dim=-1)
    unit = n / torch.linalg.vector_norm(n, dim=-1, keepdim=True)
    area.sum().backward()

    def rot(t):
        c, s = math.cos(t), math.sin(t)
        return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)

    chain = torch.linalg.multi_dot([rot(0.3), rot(-1.1), rot(0.5)])
    return {
        "area": area,
        "unit": unit,
        "grad": verts.grad,
        "chain": chain,
        "chain_det": torch.linalg.det(chain),
        "orthogonality": torch.linalg.matrix_norm(
            chain.T @ chain - torch.eye(3, dtype=torch.float64)
        ),
        "vecdot": torch.linalg.vecdot(e1, e2),
        "inf_norm": torch.linalg.norm(e1, float("inf"), dim=1),
        "diag": torch.linalg.diagonal(verts.detach(), offset=1),
    }


@program(rtol=1e-6, atol=1e-8)
def orthogonality_and_spectra(torch):
    """A weight matrix kept near-orthogonal by a penalty on its singular values, a QR re-basis of
    its columns, the spectrum of its Gram matrix, and least squares through lstsq and pinv."""
    rng = _rng(15)
    W = torch.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    X = torch.tensor(rng.standard_normal((20, 5)))
    target = torch.tensor(rng.standard_normal((20, 3)))
    opt = torch.optim.SGD([W], lr=0.02)
    losses = []
    for _ in range(6):
        fit = ((X @ W - target) ** 2).mean()
        s = torch.linalg.svdvals(W)
        penalty = ((s - 1.0) ** 2).sum()
        Q, R = torch.linalg.qr(W)
        qr_penalty = ((torch.diagonal(R).abs() - 1.0) ** 2).sum()
        loss = fit + 0.1 * penalty + 0.05 * qr_penalty + 0.01 * torch.linalg.matrix_norm(W, "nuc")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    Wd = W.detach()
    evals, evecs = torch.linalg.eigh(Wd.T @ Wd)
    U, S, Vh = torch.linalg.svd(Wd, full_matrices=False)
    sol = torch.linalg.lstsq(X, target, driver="gelsd")
    return {
        "losses": losses,
        "W": Wd,
        "evals": evals,
        "evecs_sq": evecs**2,
        "S": S,
        "recon": (U * S) @ Vh,
        "Q_sq": torch.linalg.qr(Wd).Q ** 2,
        "spectral": torch.linalg.matrix_norm(Wd, 2),
        "solution": sol.solution,
        "residuals": sol.residuals,
        "singular_values": sol.singular_values,
        "default_driver": torch.linalg.lstsq(X, target).solution,
        "pinv_solution": torch.linalg.pinv(X) @ target,
        "rank": torch.linalg.matrix_rank(X[:, :2] @ Wd[:2, :]),
    }
