"""Classical machine learning written in PyTorch: k-means, Gaussian mixtures by EM, PCA, Gaussian processes, kernel methods, L-BFGS fits."""

from __future__ import annotations

import numpy as np  # noqa: F401

from programs import program  # noqa: F401
from programs.common import arr, grads, ints, params, set_weights  # noqa: F401


def _blobs(seed, centers, n_per, scale=0.5, dtype=np.float32):
    """Gaussian blobs around ``centers`` (k, d), in class order, then shuffled with a fixed seed."""
    centers = np.asarray(centers, dtype=np.float64)
    k, d = centers.shape
    x = np.concatenate([c + arr(seed + i, n_per, d, scale=scale, dtype=np.float64)
                        for i, c in enumerate(centers)])  # fmt: skip
    y = np.repeat(np.arange(k), n_per)
    perm = np.random.default_rng(seed + 100).permutation(k * n_per)
    return x[perm].astype(dtype), y[perm].astype(np.int64)


@program
def kmeans_plusplus_lloyd_index_add_and_scatter_add(torch):
    # kmeans-pytorch / fast-pytorch-kmeans: k-means++ seeding by D^2 sampling (cumsum + searchsorted
    # on uniform draws), Lloyd steps with cdist + argmin, centroids by index_add_ or scatter_add_
    centers = [[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, -1.0], [5.0, 5.0, 5.0]]
    xn, _ = _blobs(10, centers, 20, scale=0.8)
    X = torch.from_numpy(xn)
    K = 4
    u = torch.tensor(np.random.default_rng(11).random(K).astype(np.float32))
    first = 7
    C = X[first].unsqueeze(0)
    for j in range(1, K):
        d2 = torch.cdist(X, C).pow(2).min(dim=1).values
        cum = torch.cumsum(d2, dim=0)
        idx = torch.searchsorted(cum, u[j] * cum[-1]).clamp(max=X.shape[0] - 1)
        C = torch.cat([C, X[idx].unsqueeze(0)], dim=0)
    init = C.clone()
    inertia, shifts = [], []
    for _ in range(4):
        dist = torch.cdist(X, C)
        labels = torch.argmin(dist, dim=1)
        inertia.append(dist.gather(1, labels[:, None]).pow(2).sum())
        sums = torch.zeros_like(C).index_add_(0, labels, X)
        counts = torch.bincount(labels, minlength=K).float()
        new_C = sums / counts.clamp(min=1).unsqueeze(1)
        shifts.append(torch.norm(new_C - C, dim=1).sum())
        C = new_C
    # scatter_add_ formulation (the same step written with an expanded index) and a one-hot matmul
    labels = torch.cdist(X, C).argmin(1)
    sums2 = torch.zeros(K, X.shape[1]).scatter_add_(0, labels.unsqueeze(1).expand(-1, 3), X)
    counts2 = torch.zeros(K).scatter_add_(0, labels, torch.ones(X.shape[0]))
    onehot = torch.nn.functional.one_hot(labels, K).float()
    C_mm = (onehot.t() @ X) / onehot.sum(0, keepdim=True).t()
    # predict on new points, and the silhouette-like score from pairwise distances
    Xq = torch.tensor(arr(12, 6, 3, scale=3.0) + 2.5)
    pred = torch.cdist(Xq, C).argmin(1)
    D = torch.cdist(X, X)
    same = labels[:, None] == labels[None, :]
    a = (D * same).sum(1) / (same.sum(1) - 1).float()
    b = torch.stack([D[:, labels == k].mean(1) for k in range(K)], 1)
    b = b.masked_fill(onehot.bool(), float("inf")).min(1).values
    sil = ((b - a) / torch.maximum(a, b)).mean()
    return {"init": init, "inertia": inertia, "shifts": shifts, "centroids": C,
            "labels": labels, "sums2": sums2, "counts2": counts2, "C_mm": C_mm,
            "pred": pred, "silhouette": sil}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def gaussian_mixture_em_precision_cholesky(torch):
    # sklearn GaussianMixture ported to torch (float64): precisions_cholesky via cholesky +
    # solve_triangular, log-densities from it, logsumexp responsibilities, M step with reg_covar
    centers = [[0.0, 0.0], [5.0, 1.0], [1.0, 6.0]]
    xn, _ = _blobs(20, centers, 30, scale=1.4, dtype=np.float64)
    X = torch.from_numpy(xn)
    n, d = X.shape
    K, reg = 3, 1e-6
    # initial responsibilities from a nearest-to-seed-points assignment (sklearn init_params)
    init_lab = torch.cdist(X, torch.tensor(centers, dtype=torch.float64)).argmin(1)
    resp = torch.nn.functional.one_hot(init_lab, K).double()

    def m_step(resp):
        nk = resp.sum(0) + 10 * torch.finfo(resp.dtype).eps
        means = resp.t() @ X / nk[:, None]
        covs = []
        for k in range(K):
            diff = X - means[k]
            covs.append(
                (resp[:, k, None] * diff).t() @ diff / nk[k] + reg * torch.eye(d, dtype=X.dtype)
            )
        covs = torch.stack(covs)
        chol = torch.linalg.cholesky(covs)
        eye = torch.eye(d, dtype=X.dtype).expand(K, d, d)
        prec_chol = torch.linalg.solve_triangular(chol, eye, upper=False).transpose(-1, -2)
        return nk / n, means, covs, prec_chol

    def estimate_log_prob(means, prec_chol):
        log_det = torch.log(torch.diagonal(prec_chol, dim1=-2, dim2=-1)).sum(-1)
        y = torch.einsum("nd,kde->nke", X, prec_chol) - torch.einsum("kd,kde->ke", means, prec_chol)
        return -0.5 * (d * np.log(2 * np.pi) + (y**2).sum(-1)) + log_det

    lower_bounds = []
    for _ in range(5):
        weights, means, covs, prec_chol = m_step(resp)
        weighted = estimate_log_prob(means, prec_chol) + torch.log(weights)
        log_norm = torch.logsumexp(weighted, dim=1)
        resp = torch.exp(weighted - log_norm[:, None])
        lower_bounds.append(log_norm.mean())
    weights, means, covs, prec_chol = m_step(resp)
    mvn = torch.distributions.MultivariateNormal(means, covariance_matrix=covs)
    lp_mvn = mvn.log_prob(X[:, None, :])
    n_params = K * d * (d + 1) / 2 + K * d + K - 1
    bic = -2 * torch.logsumexp(lp_mvn + weights.log(), 1).sum() + n_params * np.log(n)
    return {"lower_bounds": lower_bounds, "weights": weights, "means": means, "covs": covs,
            "prec_chol": prec_chol, "resp_last": resp[:10], "labels": resp.argmax(1),
            "lp_mvn": lp_mvn[:8], "bic": bic, "init_lab": init_lab}  # fmt: skip


@program
def pca_svd_flip_eigh_explained_variance(torch):
    # sklearn-style PCA in torch: center, economy SVD, svd_flip on U for deterministic signs,
    # explained variance (ratio) and reconstruction; eigh of the covariance as a cross-check
    rng = np.random.default_rng(30)
    latent = rng.standard_normal((60, 3)) * np.array([2.0, 1.4, 1.0])
    mix = rng.standard_normal((3, 6))
    xn = (latent @ mix + 0.3 * rng.standard_normal((60, 6)) + 1.0).astype(np.float32)
    X = torch.from_numpy(xn)
    mean = X.mean(0)
    Xc = X - mean
    U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
    max_abs_rows = torch.argmax(torch.abs(U), dim=0)
    signs = torch.sign(U[max_abs_rows, torch.arange(U.shape[1])])
    U, Vh = U * signs, Vh * signs[:, None]
    n = X.shape[0]
    explained_variance = S**2 / (n - 1)
    ratio = explained_variance / explained_variance.sum()
    k = 3
    components = Vh[:k]
    Z = Xc @ components.t()
    recon = Z @ components + mean
    err = ((X - recon) ** 2).sum(1).mean()
    cov = torch.cov(X.t())
    evals = torch.linalg.eigvalsh(cov).flip(0)
    evals2, evecs = torch.linalg.eigh(Xc.t() @ Xc / (n - 1))
    proj = evecs[:, -k:] @ evecs[:, -k:].t()
    # whitening and the noise variance of probabilistic PCA
    Zw = Z / torch.sqrt(explained_variance[:k])
    noise_var = explained_variance[k:].mean()
    return {"S": S, "explained_variance": explained_variance, "ratio": ratio,
            "cumratio": torch.cumsum(ratio, 0), "components": components, "Z": Z[:8],
            "recon": recon[:8], "err": err, "evals": evals, "evals2": evals2.flip(0),
            "proj": proj, "Zw_cov": Zw.t() @ Zw / (n - 1), "noise_var": noise_var,
            "svdvals": torch.linalg.svdvals(Xc), "rank": torch.linalg.matrix_rank(Xc)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def exact_gp_softplus_hypers_adam_predictive(torch):
    # GPyTorch ExactGP written by hand: softplus-constrained raw hyperparameters, RBF kernel from
    # squared distances (clamped), Cholesky, cholesky_solve, exact MLL / n, Adam; predictive mean/var
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(40)
    xn = np.sort(rng.uniform(0, 1, 25)).astype(np.float32)
    yn = (np.sin(2 * np.pi * xn) + 0.1 * rng.standard_normal(25)).astype(np.float32)
    train_x, train_y = torch.from_numpy(xn)[:, None], torch.from_numpy(yn)
    test_x = torch.linspace(0, 1, 11)[:, None]

    class GP(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_lengthscale = nn.Parameter(torch.tensor(0.0))
            self.raw_outputscale = nn.Parameter(torch.tensor(0.0))
            self.raw_noise = nn.Parameter(torch.tensor(-1.0))
            self.mean_const = nn.Parameter(torch.tensor(0.0))

        def kernel(self, a, b):
            ls = F.softplus(self.raw_lengthscale)
            a, b = a / ls, b / ls
            sq = (a.pow(2).sum(-1, keepdim=True) - 2 * a @ b.t() + b.pow(2).sum(-1)).clamp_min(0)
            return F.softplus(self.raw_outputscale) * torch.exp(-0.5 * sq)

        def noise(self):
            return F.softplus(self.raw_noise) + 1e-4

    gp = GP()
    opt = torch.optim.Adam(gp.parameters(), lr=0.1)
    n = train_x.shape[0]
    losses, hypers = [], []
    for _ in range(8):
        opt.zero_grad()
        K = gp.kernel(train_x, train_x) + gp.noise() * torch.eye(n)
        L = torch.linalg.cholesky(K)
        r = (train_y - gp.mean_const).unsqueeze(-1)
        alpha = torch.cholesky_solve(r, L)
        mll = (-0.5 * (r * alpha).sum() - torch.log(torch.diagonal(L)).sum()
               - 0.5 * n * np.log(2 * np.pi)) / n  # fmt: skip
        loss = -mll
        loss.backward()
        opt.step()
        losses.append(loss.item())
        hypers.append(torch.stack([F.softplus(gp.raw_lengthscale), F.softplus(gp.raw_outputscale),
                                   gp.noise()]).detach())  # fmt: skip
    with torch.no_grad():
        K = gp.kernel(train_x, train_x) + gp.noise() * torch.eye(n)
        L = torch.linalg.cholesky(K)
        Ks = gp.kernel(test_x, train_x)
        alpha = torch.cholesky_solve((train_y - gp.mean_const).unsqueeze(-1), L)
        mean = gp.mean_const + (Ks @ alpha).squeeze(-1)
        v = torch.linalg.solve_triangular(L, Ks.t(), upper=False)
        var = gp.kernel(test_x, test_x).diagonal() - v.pow(2).sum(0)
        lower, upper = mean - 2 * var.clamp_min(0).sqrt(), mean + 2 * var.clamp_min(0).sqrt()
    return {"losses": losses, "hypers": hypers, "grads": grads(gp), "mean": mean, "var": var,
            "lower": lower, "upper": upper, "params": params(gp)}  # fmt: skip


@program
def ridge_lstsq_augmented_and_kernel_ridge(torch):
    # ridge regression three ways (lstsq on the augmented system, normal equations with solve,
    # SVD shrinkage) and kernel ridge regression with RBF / polynomial kernels (sklearn KernelRidge)
    rng = np.random.default_rng(50)
    xn = rng.standard_normal((40, 5)).astype(np.float32)
    wn = np.array([1.5, -2.0, 0.0, 0.5, 3.0], dtype=np.float32)
    yn = (xn @ wn + 0.3 * rng.standard_normal(40)).astype(np.float32)
    X, y = torch.from_numpy(xn), torch.from_numpy(yn)
    lam = 2.0
    d = X.shape[1]
    X_aug = torch.cat([X, np.sqrt(lam) * torch.eye(d)], 0)
    y_aug = torch.cat([y, torch.zeros(d)], 0)
    w_lstsq = torch.linalg.lstsq(X_aug, y_aug.unsqueeze(-1)).solution.squeeze(-1)
    w_solve = torch.linalg.solve(X.t() @ X + lam * torch.eye(d), X.t() @ y)
    U, S, Vh = torch.linalg.svd(X, full_matrices=False)
    w_svd = Vh.t() @ ((S / (S**2 + lam)) * (U.t() @ y))
    w_ols = torch.linalg.lstsq(X, y.unsqueeze(-1)).solution.squeeze(-1)
    dof = (S**2 / (S**2 + lam)).sum()
    # kernel ridge: dual coefficients by Cholesky, predictions on test points
    Xt = torch.tensor(arr(51, 7, 5))

    def rbf(a, b, gamma=0.2):
        return torch.exp(-gamma * torch.cdist(a, b).pow(2))

    def poly(a, b, degree=2, coef0=1.0, gamma=0.2):
        return (gamma * a @ b.t() + coef0) ** degree

    out = {}
    for name, kern in (("rbf", rbf), ("poly", poly)):
        Kx = kern(X, X) + 0.5 * torch.eye(X.shape[0])
        L = torch.linalg.cholesky(Kx)
        dual = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        out[name] = {"dual": dual[:10], "pred": kern(Xt, X) @ dual,
                     "train_mse": ((kern(X, X) @ dual - y) ** 2).mean()}  # fmt: skip
    # leave-one-out residuals of ridge from the hat matrix
    H = X @ torch.linalg.inv(X.t() @ X + lam * torch.eye(d)) @ X.t()
    loo = (y - H @ y) / (1 - torch.diagonal(H))
    return {"w_lstsq": w_lstsq, "w_solve": w_solve, "w_svd": w_svd, "w_ols": w_ols, "dof": dof,
            "kernel_ridge": out, "loo_mse": loo.pow(2).mean(), "pred": Xt @ w_solve}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def logistic_regression_lbfgs_closure_wolfe(torch):
    # sklearn-like LogisticRegression in torch: L2-penalised BCE fitted with LBFGS and a closure,
    # plain (fixed step) and with line_search_fn="strong_wolfe"; multinomial softmax regression too
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(60)
    xn = rng.standard_normal((80, 4)).astype(np.float32)
    wt = np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float32)
    yn = (xn @ wt + 0.3 + 0.8 * rng.standard_normal(80) > 0).astype(np.float32)
    X, y = torch.from_numpy(xn), torch.from_numpy(yn)
    out = {}
    for tag, kw in (("plain", {"lr": 0.5, "max_iter": 12}),
                    ("wolfe", {"lr": 1.0, "max_iter": 25, "tolerance_grad": 1e-4,
                               "line_search_fn": "strong_wolfe"})):  # fmt: skip
        model = nn.Linear(4, 1)
        with torch.no_grad():
            model.weight.zero_()
            model.bias.zero_()
        opt = torch.optim.LBFGS(model.parameters(), history_size=10, **kw)
        trace = []

        def closure(opt=opt, model=model, trace=trace):
            opt.zero_grad()
            logits = model(X).squeeze(-1)
            loss = F.binary_cross_entropy_with_logits(logits, y) + 0.01 * model.weight.pow(2).sum()
            loss.backward()
            trace.append(loss.item())
            return loss

        final = opt.step(closure)
        state = opt.state[opt._params[0]]
        with torch.no_grad():
            proba = torch.sigmoid(model(X).squeeze(-1))
        out[tag] = {"final": final, "trace": trace[:6], "n_evals": len(trace),
                    "n_iter": state["n_iter"], "weight": model.weight, "bias": model.bias,
                    "acc": ((proba > 0.5).float() == y).float().mean(), "proba": proba[:8]}  # fmt: skip
    # multinomial with three classes, strong Wolfe, called twice (state carries over)
    yc = torch.from_numpy(
        np.argmax(xn[:, :3] + 0.5 * rng.standard_normal((80, 3)), 1).astype(np.int64)
    )
    W = torch.zeros(4, 3, requires_grad=True)
    b = torch.zeros(3, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=10, line_search_fn="strong_wolfe")
    losses = []

    def closure2():
        opt.zero_grad()
        loss = F.cross_entropy(X @ W + b, yc) + 0.5e-2 * (W**2).sum()
        loss.backward()
        return loss

    for _ in range(2):
        losses.append(opt.step(closure2).item())
    out["multinomial"] = {"losses": losses, "W": W, "b": b,
                          "pred": (X @ W + b).argmax(1)[:20]}  # fmt: skip
    return out


@program
def linear_svm_hinge_and_huber_robust_regression(torch):
    # linear SVM: mean hinge loss with SGD weight_decay (the L2 term), squared hinge and
    # multi_margin_loss for a one-vs-rest / Crammer-Singer style multiclass; Huber regression with
    # outliers against the least-squares fit
    nn, F = torch.nn, torch.nn.functional
    xn, yl = _blobs(70, [[-2.0, -1.0], [2.0, 1.5]], 25, scale=0.9)
    X = torch.from_numpy(xn)
    y = torch.from_numpy(yl).float() * 2 - 1
    w = torch.zeros(2, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.1, weight_decay=1e-2)
    hinge, sq_hinge = [], []
    for _ in range(10):
        opt.zero_grad()
        margin = y * (X @ w + b)
        loss = torch.clamp(1 - margin, min=0).mean()
        loss.backward()
        opt.step()
        hinge.append(loss.item())
        sq_hinge.append(F.relu(1 - margin).pow(2).mean().item())
    n_sv = ((y * (X @ w + b)) < 1).sum()
    # multiclass with multi_margin_loss
    xm, ym = _blobs(80, [[0.0, 4.0], [4.0, -2.0], [-4.0, -2.0]], 15, scale=0.8)
    Xm, Ym = torch.from_numpy(xm), torch.from_numpy(ym)
    clf = set_weights(torch, nn.Linear(2, 3), seed=81)
    opt = torch.optim.SGD(clf.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
    mm_losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = F.multi_margin_loss(clf(Xm), Ym, margin=1.0)
        loss.backward()
        opt.step()
        mm_losses.append(loss.item())
    # Huber regression (sklearn HuberRegressor-like) with 4 gross outliers, Adam
    rng = np.random.default_rng(90)
    xr = rng.uniform(-2, 2, (40, 1)).astype(np.float32)
    yr = (2.0 * xr[:, 0] + 1.0 + 0.1 * rng.standard_normal(40)).astype(np.float32)
    yr[[3, 11, 20, 33]] += np.array([9.0, -8.0, 12.0, 10.0], dtype=np.float32)
    Xr, Yr = torch.from_numpy(xr), torch.from_numpy(yr)
    reg = nn.Linear(1, 1)
    with torch.no_grad():
        reg.weight.fill_(0.5)
        reg.bias.fill_(0.0)
    crit = nn.HuberLoss(delta=1.0)
    opt = torch.optim.Adam(reg.parameters(), lr=0.1)
    huber = []
    for _ in range(15):
        opt.zero_grad()
        loss = crit(reg(Xr).squeeze(-1), Yr) + 1e-4 * reg.weight.pow(2).sum()
        loss.backward()
        opt.step()
        huber.append(loss.item())
    A = torch.cat([Xr, torch.ones(40, 1)], 1)
    ols = torch.linalg.lstsq(A, Yr[:, None]).solution.squeeze(-1)
    return {"hinge": hinge, "sq_hinge": sq_hinge, "w": w, "b": b, "n_sv": n_sv,
            "mm_losses": mm_losses, "clf": params(clf), "huber": huber, "reg": params(reg),
            "ols": ols, "smooth_l1": F.smooth_l1_loss(reg(Xr).squeeze(-1), Yr, beta=0.5)}  # fmt: skip


@program
def gaussian_naive_bayes_var_smoothing(torch):
    # sklearn GaussianNB in torch: per-class means/variances via index_add_ and bincount,
    # var_smoothing relative to the largest feature variance, joint log-likelihood, predict_proba
    xn, yn = _blobs(100, [[0.0, 0.0, 1.0, 2.0], [3.0, 1.0, -1.0, 0.0], [0.0, 4.0, 0.0, -2.0]], 20,
                    scale=1.0)  # fmt: skip
    X, y = torch.from_numpy(xn), torch.from_numpy(yn)
    classes, counts = torch.unique(y, return_counts=True)
    K, d = classes.numel(), X.shape[1]
    epsilon = 1e-9 * torch.var(X, dim=0, unbiased=False).max()
    sums = torch.zeros(K, d).index_add_(0, y, X)
    theta = sums / counts[:, None]
    var = torch.zeros(K, d).index_add_(0, y, (X - theta[y]) ** 2) / counts[:, None] + epsilon
    prior = torch.bincount(y).float() / y.numel()
    Xt = torch.tensor(arr(101, 10, 4, scale=2.0)) + torch.tensor([1.0, 1.5, 0.0, 0.0])
    n_ij = -0.5 * torch.log(2.0 * torch.pi * var).sum(1)
    jll = torch.log(prior) + n_ij - 0.5 * ((Xt[:, None, :] - theta) ** 2 / var).sum(-1)
    log_prob_x = torch.logsumexp(jll, dim=1, keepdim=True)
    proba = torch.exp(jll - log_prob_x)
    # the same likelihood from torch.distributions.Normal and Independent
    D = torch.distributions
    dist = D.Independent(D.Normal(theta, var.sqrt()), 1)
    jll2 = dist.log_prob(Xt[:, None, :]) + prior.log()
    train_acc = (torch.argmax(torch.log(prior) + n_ij
                              - 0.5 * ((X[:, None] - theta) ** 2 / var).sum(-1), 1) == y).float().mean()  # fmt: skip
    return {"classes": classes, "counts": counts, "theta": theta, "var": var, "prior": prior,
            "jll": jll, "proba": proba, "pred": classes[jll.argmax(1)], "jll2": jll2,
            "log_proba": torch.log_softmax(jll, 1), "train_acc": train_acc}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def nmf_multiplicative_updates_frobenius_and_kl(torch):
    # Lee & Seung NMF: multiplicative updates for the Frobenius loss and for the generalised KL
    # divergence, nonnegative init from NumPy; reconstruction errors per iteration
    rng = np.random.default_rng(110)
    W0 = rng.uniform(0, 1, (20, 3))
    H0 = rng.uniform(0, 1, (3, 12))
    V = torch.tensor((W0 @ H0 + 0.05 * rng.uniform(0, 1, (20, 12))).astype(np.float32))
    eps = 1e-10
    Wi = torch.tensor(rng.uniform(0.1, 1, (20, 3)).astype(np.float32))
    Hi = torch.tensor(rng.uniform(0.1, 1, (3, 12)).astype(np.float32))
    W, H = Wi.clone(), Hi.clone()
    fro = []
    for _ in range(15):
        H *= (W.t() @ V) / (W.t() @ W @ H + eps)
        W *= (V @ H.t()) / (W @ H @ H.t() + eps)
        fro.append(torch.linalg.norm(V - W @ H, "fro"))
    W2, H2 = Wi.clone(), Hi.clone()
    kl = []
    ones = torch.ones_like(V)
    for _ in range(15):
        WH = W2 @ H2
        H2 = H2 * (W2.t() @ (V / (WH + eps))) / (W2.t() @ ones + eps)
        WH = W2 @ H2
        W2 = W2 * ((V / (WH + eps)) @ H2.t()) / (ones @ H2.t() + eps)
        WH = W2 @ H2
        kl.append((V * torch.log(V / WH) - V + WH).sum())
    # scale-normalised factors (columns of W to unit l1 norm), which are what people inspect
    norms = W.sum(0)
    return {"fro": fro, "kl": kl, "WH": W @ H, "W_norm": W / norms, "H_scaled": H * norms[:, None],
            "W2H2": W2 @ H2, "min_entry": torch.minimum(W.min(), H.min()) >= 0}  # fmt: skip


@program(rtol=5e-4, atol=1e-6)
def tsne_perplexity_bisection_and_kl_gradient_steps(torch):
    # t-SNE (tsne-pytorch style): conditional P by bisection on beta to a target perplexity
    # (float64), symmetrised joint P with early exaggeration, Student-t Q, the analytic KL gradient
    # checked against autograd, then gradient steps with momentum and gains
    xn, _ = _blobs(120, [[0.0] * 5, [4.0] * 5, [0.0, 4.0, 0.0, 4.0, 0.0]], 10, scale=1.0,
                   dtype=np.float64)  # fmt: skip
    X = torch.from_numpy(xn)
    n = X.shape[0]
    D = torch.cdist(X, X).pow(2)
    target = np.log(8.0)
    lo = torch.full((n, 1), 1e-20, dtype=torch.float64)
    hi = torch.full((n, 1), 1e3, dtype=torch.float64)
    mask = ~torch.eye(n, dtype=torch.bool)
    for _ in range(40):
        beta = (lo + hi) / 2
        logits = (-D * beta).masked_fill(~mask, float("-inf"))
        P = torch.softmax(logits, dim=1)
        H = -(P * torch.log(P.clamp_min(1e-300))).sum(1, keepdim=True)
        too_flat = H > target  # entropy too high -> increase beta
        lo = torch.where(too_flat, beta, lo)
        hi = torch.where(too_flat, hi, beta)
    P = (P + P.t()) / (2 * n)
    P = torch.clamp(P, min=1e-12)
    Y = torch.tensor(arr(121, n, 2, scale=1e-2, dtype=np.float64))
    iY = torch.zeros_like(Y)
    gains = torch.ones_like(Y)
    kls = []
    for it in range(6):
        exag = 4.0 if it < 3 else 1.0
        sum_Y = (Y * Y).sum(1)
        num = 1.0 / (1.0 + (-2.0 * Y @ Y.t() + sum_Y).t() + sum_Y)
        num = num * mask
        Q = torch.clamp(num / num.sum(), min=1e-12)
        PQ = exag * P - Q
        dY = 4.0 * ((PQ * num).unsqueeze(-1) * (Y.unsqueeze(1) - Y.unsqueeze(0))).sum(1)
        if it == 0:
            Yg = Y.clone().requires_grad_(True)
            dist2 = torch.cdist(Yg, Yg).pow(2)
            w = (1.0 / (1.0 + dist2)) * mask
            Qg = w / w.sum()
            kl = (P * (torch.log(P) - torch.log(Qg.clamp_min(1e-12)))).masked_select(mask).sum()
            kl.backward()
            auto_grad = Yg.grad
            analytic0 = 4.0 * (
                ((P - Q) * num).unsqueeze(-1) * (Y.unsqueeze(1) - Y.unsqueeze(0))
            ).sum(1)
        kls.append((P * torch.log(P / Q)).sum())
        momentum = 0.5 if it < 3 else 0.8
        gains = (gains + 0.2) * ((dY > 0.0) != (iY > 0.0)) + (gains * 0.8) * (
            (dY > 0.0) == (iY > 0.0)
        )
        gains = gains.clamp(min=0.01)
        iY = momentum * iY - 200.0 * (gains * dY)
        Y = Y + iY
        Y = Y - Y.mean(0)
    return {"beta": beta.squeeze(1)[:12], "P_rowsum": P.sum(1)[:12], "kls": kls,
            "auto_grad": auto_grad[:10], "analytic_grad": analytic0[:10],
            "Y_dists": torch.cdist(Y, Y)[:6, :6], "Y_norm": Y.norm()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def spectral_clustering_normalized_laplacian(torch):
    # spectral clustering (Ng-Jordan-Weiss): RBF affinity, symmetric normalised Laplacian,
    # eigvalsh / eigh, eigengap heuristic, row-normalised spectral embedding clustered by k-means
    # (distances between embedding rows and the subspace projector are sign and rotation safe)
    xn, yl = _blobs(130, [[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]], 12, scale=0.5)
    X = torch.from_numpy(xn)
    n = X.shape[0]
    A = torch.exp(-torch.cdist(X, X).pow(2) / (2 * 1.0**2))
    A.fill_diagonal_(0)
    deg = A.sum(1)
    Dm = torch.diag(deg.rsqrt())
    L = torch.eye(n) - Dm @ A @ Dm
    evals = torch.linalg.eigvalsh(L)
    gaps = evals[1:8] - evals[:7]
    k = int(torch.argmax(gaps).item()) + 1
    w, V = torch.linalg.eigh(L)
    U = V[:, :k]
    U = U / torch.linalg.norm(U, dim=1, keepdim=True)
    proj = V[:, :k] @ V[:, :k].t()
    # seed each cluster from the farthest rows (k-means++ without sampling)
    C = U[[0]]
    for _ in range(1, k):
        C = torch.cat([C, U[torch.cdist(U, C).min(1).values.argmax()].unsqueeze(0)])
    for _ in range(5):
        lab = torch.cdist(U, C).argmin(1)
        C = torch.stack([U[lab == j].mean(0) for j in range(k)])
    # random-walk Laplacian eigenvalues via the generalized problem L_rw = I - D^-1 A
    L_rw = torch.eye(n) - A / deg[:, None]
    ev_rw = torch.linalg.eigvals(L_rw).real.sort().values
    # the same clusters agree with the true blobs up to relabelling: a contingency table
    cont = torch.zeros(k, 3, dtype=torch.int64).index_put_(
        (lab, torch.from_numpy(yl)), torch.ones(n, dtype=torch.int64), accumulate=True
    )
    return {"evals": evals[:6], "gaps": gaps, "k": k, "w": w[:6], "proj_diag": proj.diagonal(),
            "proj": proj[:5, :5], "labels_pairwise": lab[:, None] == lab[None, :],
            "ev_rw": ev_rw[:6], "cont_sorted": cont.sort(dim=1).values, "degree": deg}  # fmt: skip


@program
def lda_qda_discriminant_functions(torch):
    # LDA and QDA as in sklearn: class priors and means, pooled (LDA) and per-class (QDA)
    # covariances; LDA coefficients by solve, QDA log-likelihoods via Cholesky + slogdet,
    # posteriors by softmax, and Fisher's LDA projection eigenvalues via eigvalsh
    centers = [[0.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.0, 3.0, 2.0]]
    xn, yn = _blobs(140, centers, 25, scale=0.8)
    rng = np.random.default_rng(141)
    xn = (xn @ (np.eye(3) + 0.3 * rng.standard_normal((3, 3)))).astype(np.float32)
    X, y = torch.from_numpy(xn), torch.from_numpy(yn)
    K, n = 3, X.shape[0]
    onehot = torch.nn.functional.one_hot(y, K).float()
    Nk = onehot.sum(0)
    priors = Nk / n
    means = (onehot.t() @ X) / Nk[:, None]
    Xc = X - means[y]
    Sw = Xc.t() @ Xc / (n - K)
    coef = torch.linalg.solve(Sw, means.t()).t()
    intercept = -0.5 * (means * coef).sum(1) + torch.log(priors)
    Xt = torch.tensor(arr(142, 9, 3, scale=2.0)) + 1.0
    lda_scores = Xt @ coef.t() + intercept
    lda_post = torch.softmax(lda_scores, 1)
    qda_ll, logdets = [], []
    for k in range(K):
        Xk = X[y == k]
        Ck = torch.cov(Xk.t())
        Lk = torch.linalg.cholesky(Ck)
        z = torch.linalg.solve_triangular(Lk, (Xt - means[k]).t(), upper=False)
        sign, logdet = torch.linalg.slogdet(Ck)
        logdets.append(logdet)
        qda_ll.append(-0.5 * (z.pow(2).sum(0) + logdet) + torch.log(priors[k]))
    qda_scores = torch.stack(qda_ll, 1)
    # Fisher: between-class scatter, generalized eigenvalues of Sw^-1 Sb (symmetrised by Cholesky)
    mu = X.mean(0)
    Sb = ((means - mu).t() * Nk) @ (means - mu) / n
    Lw = torch.linalg.cholesky(Sw)
    Linv = torch.linalg.inv(Lw)
    fisher = torch.linalg.eigvalsh(Linv @ Sb @ Linv.t())
    return {"priors": priors, "means": means, "Sw": Sw, "coef": coef, "intercept": intercept,
            "lda_scores": lda_scores, "lda_pred": lda_scores.argmax(1), "lda_post": lda_post,
            "qda_scores": qda_scores, "qda_pred": qda_scores.argmax(1), "logdets": logdets,
            "qda_post": torch.softmax(qda_scores, 1), "fisher": fisher,
            "lda_train_acc": ((X @ coef.t() + intercept).argmax(1) == y).float().mean()}  # fmt: skip
