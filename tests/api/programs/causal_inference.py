"""Causal inference and econometrics as their reference code writes it in torch: propensity scores
by logistic regression with inverse-probability weighting (Horvitz-Thompson, Hajek, stabilised and
ATT weights), Crump trimming, covariate balance and caliper matching; doubly-robust AIPW and a TMLE
fluctuation with cross-fitting; double machine learning and the R-learner; TARNet, DragonNet with
targeted regularisation, and CFR with linear/RBF MMD and Sinkhorn-Wasserstein balance penalties;
two-stage least squares with robust errors, first-stage F and Sargan tests, and DeepIV with a
mixture density first stage; synthetic control weights on the simplex through a softmax, with
placebo tests; two-way fixed effects difference-in-differences with clustered errors and an event
study; uplift models with Qini and uplift curves; and bootstrap intervals (percentile, basic,
normal, BCa) from fixed NumPy resampling indices. Randomness comes from NumPy only."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import grads, params, set_weights


def _observational(seed: int, n: int, p: int, binary_y: bool = False):
    """Confounded observational data: covariates, a treatment drawn from a logistic propensity,
    heterogeneous effect ``1 + 0.5 x0``, outcomes (float64 NumPy). Returns x, t, y, tau, e."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, p))
    a = np.array([0.8, -0.6, 0.4, 0.3, -0.2, 0.1])[:p]
    e = 1.0 / (1.0 + np.exp(-(x @ a - 0.2)))
    t = (g.uniform(size=n) < e).astype(np.float64)
    b = np.array([1.0, 0.5, -0.7, 0.2, 0.3, -0.4])[:p]
    tau = 1.0 + 0.5 * x[:, 0]
    if binary_y:
        logit = x @ b * 0.8 - 0.3 + t * (0.6 + 0.8 * x[:, 1])
        y = (g.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float64)
        tau = 1.0 / (1.0 + np.exp(-(x @ b * 0.8 - 0.3 + 0.6 + 0.8 * x[:, 1]))) - 1.0 / (
            1.0 + np.exp(-(x @ b * 0.8 - 0.3))
        )
    else:
        y = x @ b + 0.5 * x[:, 0] ** 2 + t * tau + 0.5 * g.standard_normal(n)
    return x, t, y, tau, e


def _f32(torch, *arrays):
    return tuple(torch.tensor(a.astype(np.float32)) for a in arrays)


@program
def causal_propensity_logistic_ipw_trimming_matching(torch):
    """A propensity model as causal-inference tutorials fit it (``nn.Linear`` + ``BCEWithLogitsLoss``
    by L-BFGS with a strong-Wolfe line search, in double precision), then clipped Horvitz-Thompson,
    Hajek, stabilised and ATT weights, Crump's [0.1, 0.9] trimming with a boolean mask, effective
    sample sizes, standardised mean differences before and after weighting, and 1-nearest-neighbour
    matching on the logit of the propensity with a caliper; with a printed summary."""
    x, t, y, tau, _ = _observational(0, 160, 4)
    X, T, Y = torch.tensor(x), torch.tensor(t), torch.tensor(y)
    model = torch.nn.Linear(4, 1).double()
    set_weights(torch, model, 1)
    bce = torch.nn.BCEWithLogitsLoss()
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=15, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = bce(model(X).squeeze(-1), T) + 1e-3 * model.weight.pow(2).sum()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(3)]
    with torch.no_grad():
        logit = model(X).squeeze(-1)
        e = torch.sigmoid(logit)
    e_clip = e.clamp(0.01, 0.99)
    ate_ht = (T * Y / e_clip).mean() - ((1 - T) * Y / (1 - e_clip)).mean()
    w1, w0 = T / e_clip, (1 - T) / (1 - e_clip)
    ate_hajek = (w1 * Y).sum() / w1.sum() - (w0 * Y).sum() / w0.sum()
    p_t = T.mean()
    sw = T * p_t / e_clip + (1 - T) * (1 - p_t) / (1 - e_clip)
    w_att = T + (1 - T) * e_clip / (1 - e_clip)
    att = (Y * T).sum() / T.sum() - (w_att * (1 - T) * Y).sum() / (w_att * (1 - T)).sum()
    keep = (e > 0.1) & (e < 0.9)
    Tk, Yk, ek = T[keep], Y[keep], e[keep]
    ate_trim = (Tk * Yk / ek).sum() / (Tk / ek).sum() - ((1 - Tk) * Yk / (1 - ek)).sum() / (
        (1 - Tk) / (1 - ek)
    ).sum()
    w = w1 + w0
    ess = w.sum() ** 2 / (w**2).sum()
    ess_arms = torch.stack([w1.sum() ** 2 / (w1**2).sum(), w0.sum() ** 2 / (w0**2).sum()])

    def smd(weights):
        m1 = (weights * T)[:, None].mul(X).sum(0) / (weights * T).sum()
        m0 = (weights * (1 - T))[:, None].mul(X).sum(0) / (weights * (1 - T)).sum()
        v1, v0 = X[T == 1].var(0), X[T == 0].var(0)
        return (m1 - m0) / torch.sqrt((v1 + v0) / 2)

    smd_raw, smd_ipw = smd(torch.ones_like(T)), smd(w)
    treated, control = torch.nonzero(T == 1).squeeze(1), torch.nonzero(T == 0).squeeze(1)
    dist = (logit[treated][:, None] - logit[control][None, :]).abs()
    d_min, j = dist.min(dim=1)
    caliper = 0.2 * logit.std()
    ok = d_min < caliper
    att_matched = (Y[treated][ok] - Y[control][j[ok]]).mean()
    summary = (f"n={len(T)} treated={int(T.sum())} kept={int(keep.sum())} matched={int(ok.sum())}\n"
               f"ATE HT {ate_ht.item():.3f} Hajek {ate_hajek.item():.3f} trimmed {ate_trim.item():.3f}"
               f" | ATT {att.item():.3f} matched {att_matched.item():.3f} | ESS {ess.item():.1f}")  # fmt: skip
    return {"losses": losses, "weight": model.weight, "bias": model.bias, "e": e,
            "ate_ht": ate_ht, "ate_hajek": ate_hajek, "sw": sw, "sw_mean": sw.mean(), "att": att,
            "keep": keep, "ate_trim": ate_trim, "ess": ess, "ess_arms": ess_arms,
            "smd_raw": smd_raw, "smd_ipw": smd_ipw, "match_j": j, "d_min": d_min, "ok": ok,
            "att_matched": att_matched, "true_ate": float(tau.mean()), "summary": summary}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_aipw_doubly_robust_cross_fitted_tmle(torch):
    """Augmented IPW as in DoubleML/EconML-style reference code, in float64: a logistic propensity
    by Newton-Raphson (IRLS), arm-wise OLS outcome models by ``linalg.lstsq``, two-fold cross-fitting
    with fixed NumPy folds written into preallocated predictions by index assignment, the AIPW score,
    its influence-function standard error, a normal interval and p-value from ``special.ndtri`` and
    ``special.ndtr``, the estimate under a misspecified outcome model (double robustness), and a
    one-step TMLE fluctuation along the clever covariate."""
    x, t, y, tau, _ = _observational(1, 200, 3)
    X, T, Y = torch.tensor(x), torch.tensor(t), torch.tensor(y)
    n = X.shape[0]
    Xd = torch.cat([torch.ones(n, 1, dtype=torch.float64), X], dim=1)

    def fit_logit(A, t, iters=8):
        beta = torch.zeros(A.shape[1], dtype=torch.float64)
        for _ in range(iters):
            p = torch.sigmoid(A @ beta)
            H = A.T @ (A * (p * (1 - p))[:, None])
            beta = beta + torch.linalg.solve(H, A.T @ (t - p))
        return beta

    folds = np.array_split(np.random.default_rng(11).permutation(n), 2)
    e_hat = torch.zeros(n, dtype=torch.float64)
    mu0, mu1 = torch.zeros_like(e_hat), torch.zeros_like(e_hat)
    coefs = []
    for k in range(2):
        test = torch.tensor(folds[k])
        train = torch.tensor(folds[1 - k])
        At, tt, yt = Xd[train], T[train], Y[train]
        beta_e = fit_logit(At, tt)
        b1 = torch.linalg.lstsq(At[tt == 1], yt[tt == 1][:, None]).solution.squeeze(1)
        b0 = torch.linalg.lstsq(At[tt == 0], yt[tt == 0][:, None]).solution.squeeze(1)
        e_hat[test] = torch.sigmoid(Xd[test] @ beta_e)
        mu1[test] = Xd[test] @ b1
        mu0[test] = Xd[test] @ b0
        coefs.append(torch.cat([beta_e, b1, b0]))
    e_hat = e_hat.clamp(0.05, 0.95)
    psi = mu1 - mu0 + T * (Y - mu1) / e_hat - (1 - T) * (Y - mu0) / (1 - e_hat)
    ate = psi.mean()
    se = psi.std() / math.sqrt(n)
    z = torch.special.ndtri(torch.tensor(0.975, dtype=torch.float64))
    ci = torch.stack([ate - z * se, ate + z * se])
    pval = 2 * (1 - torch.special.ndtr((ate / se).abs()))
    g_formula = (mu1 - mu0).mean()
    ipw = (T * Y / e_hat - (1 - T) * Y / (1 - e_hat)).mean()
    # double robustness: outcome models reduced to arm means, propensity still right
    m1_bad, m0_bad = Y[T == 1].mean(), Y[T == 0].mean()
    psi_bad = m1_bad - m0_bad + T * (Y - m1_bad) / e_hat - (1 - T) * (Y - m0_bad) / (1 - e_hat)
    # TMLE: fluctuate the outcome model along H(A, X) by least squares
    H = T / e_hat - (1 - T) / (1 - e_hat)
    Q = torch.where(T == 1, mu1, mu0)
    eps = ((Y - Q) * H).sum() / (H * H).sum()
    q1_star, q0_star = mu1 + eps / e_hat, mu0 - eps / (1 - e_hat)
    tmle = (q1_star - q0_star).mean()
    ic = H * (Y - torch.where(T == 1, q1_star, q0_star)) + q1_star - q0_star - tmle
    return {"e_hat": e_hat, "mu0": mu0, "mu1": mu1, "coefs": coefs, "psi": psi, "ate": ate,
            "se": se, "ci": ci, "pval": pval, "g_formula": g_formula, "ipw": ipw,
            "aipw_misspecified_outcome": psi_bad.mean(), "eps": eps, "tmle": tmle,
            "tmle_se": ic.std() / math.sqrt(n), "true_ate": float(tau.mean())}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_double_ml_partialling_out_and_r_learner(torch):
    """Double machine learning (partially linear model, Chernozhukov et al.) with three-fold
    cross-fitting and ridge nuisance regressions solved in closed form (``linalg.solve`` on
    ``X'X + lambda I``), the orthogonal-score estimate, its standard error and interval; then the
    R-learner: a linear CATE model ``tau(x)`` fitted on the cross-fitted residuals by minimising
    ``((y - m(x)) - tau(x) (t - e(x)))^2`` with Adam, and in closed form as weighted least squares."""
    x, t, y, tau, _ = _observational(2, 150, 4)
    X, T, Y = torch.tensor(x), torch.tensor(t), torch.tensor(y)
    n, p = X.shape
    Phi = torch.cat([torch.ones(n, 1, dtype=torch.float64), X, X**2], dim=1)

    def ridge(A, b, lam=1.0):
        reg = lam * torch.eye(A.shape[1], dtype=A.dtype)
        reg[0, 0] = 0.0
        return torch.linalg.solve(A.T @ A + reg, A.T @ b)

    folds = np.array_split(np.random.default_rng(5).permutation(n), 3)
    m_hat, e_hat = torch.empty(n, dtype=torch.float64), torch.empty(n, dtype=torch.float64)
    for k in range(3):
        test = torch.tensor(folds[k])
        train = torch.tensor(np.concatenate([folds[j] for j in range(3) if j != k]))
        m_hat[test] = Phi[test] @ ridge(Phi[train], Y[train])
        e_hat[test] = (Phi[test] @ ridge(Phi[train], T[train])).clamp(0.05, 0.95)
    ry, rt = Y - m_hat, T - e_hat
    theta = (rt * ry).sum() / (rt * rt).sum()
    score = (ry - theta * rt) * rt
    J = (rt * rt).mean()
    se = torch.sqrt((score**2).mean() / J**2 / n)
    ci = theta + torch.tensor([-1.959963984540054, 1.959963984540054], dtype=torch.float64) * se
    # R-learner with a linear tau(x)
    Xr = torch.cat([torch.ones(n, 1, dtype=torch.float64), X], dim=1)
    beta_closed = torch.linalg.lstsq(Xr * rt[:, None], ry[:, None]).solution.squeeze(1)
    tau_model = torch.nn.Linear(p, 1).double()
    torch.nn.init.zeros_(tau_model.weight)
    torch.nn.init.zeros_(tau_model.bias)
    opt = torch.optim.Adam(tau_model.parameters(), lr=0.1)
    r_losses = []
    for _ in range(25):
        opt.zero_grad()
        loss = ((ry - tau_model(X).squeeze(-1) * rt) ** 2).mean()
        loss.backward()
        opt.step()
        r_losses.append(loss.item())
    with torch.no_grad():
        cate = tau_model(X).squeeze(-1)
    pehe = ((Xr @ beta_closed - torch.tensor(tau)) ** 2).mean().sqrt()
    return {"m_hat": m_hat, "e_hat": e_hat, "theta": theta, "se": se, "ci": ci,
            "beta_closed": beta_closed, "r_losses": r_losses, "r_weight": tau_model.weight,
            "r_bias": tau_model.bias, "cate": cate, "pehe_closed": pehe,
            "cate_ate": cate.mean()}  # fmt: skip


def _tarnet(torch, d, h):
    nn = torch.nn

    class TARNet(nn.Module):
        """Shalit et al.'s treatment-agnostic representation network: a shared ELU representation
        and one outcome head per arm."""

        def __init__(self):
            super().__init__()
            self.phi = nn.Sequential(nn.Linear(d, h), nn.ELU(), nn.Linear(h, h), nn.ELU())
            self.head0 = nn.Sequential(nn.Linear(h, h), nn.ELU(), nn.Linear(h, 1))
            self.head1 = nn.Sequential(nn.Linear(h, h), nn.ELU(), nn.Linear(h, 1))

        def forward(self, x):
            r = self.phi(x)
            return self.head0(r).squeeze(-1), self.head1(r).squeeze(-1), r

    return TARNet()


@program
def causal_tarnet_factual_loss_and_pehe(torch):
    """TARNet trained on the factual outcomes only: minibatches from a fixed NumPy permutation,
    predictions picked per arm with ``torch.where``, Shalit's arm-reweighted squared loss, Adam with
    weight decay; then ITE estimates, PEHE against the true effect, the ATE error, and the last
    step's gradients."""
    x, t, y, tau, _ = _observational(3, 96, 5)
    X, T, Y, TAU = _f32(torch, x, t, y, tau)
    model = set_weights(torch, _tarnet(torch, 5, 16), 2)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-4)
    p_treated = T.mean()
    order = np.random.default_rng(4).permutation(96).reshape(4, 24)
    losses = []
    for _epoch in range(2):
        for b in order:
            idx = torch.tensor(b)
            xb, tb, yb = X[idx], T[idx], Y[idx]
            y0, y1, _ = model(xb)
            y_hat = torch.where(tb > 0, y1, y0)
            w = tb / (2 * p_treated) + (1 - tb) / (2 * (1 - p_treated))
            loss = (w * (yb - y_hat) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        y0, y1, rep = model(X)
    ite = y1 - y0
    pehe = torch.sqrt(((ite - TAU) ** 2).mean())
    return {"losses": losses, "ite": ite, "pehe": pehe, "ate_error": (ite.mean() - TAU.mean()).abs(),
            "rep_norm": rep.norm(dim=1), "grads": grads(model),
            "head1": params(model.head1)}  # fmt: skip


@program
def causal_dragonnet_targeted_regularization(torch):
    """DragonNet (Shi et al.) as its PyTorch ports write it: three shared ELU layers, a sigmoid
    propensity head, two outcome heads, and the targeted-regularisation ``epsilon`` as a
    ``Linear(1, 1)`` fed with ones; the loss adds the clipped propensity's binary cross-entropy and
    the squared error of the outcome perturbed by ``epsilon * h(t, g)``; Adam, then SGD with Nesterov
    momentum; the plain and the TMLE-style ATE estimates over truncated propensities."""
    nn, F = torch.nn, torch.nn.functional

    class DragonNet(nn.Module):
        def __init__(self, d, shared=16, hidden=8):
            super().__init__()
            self.fc1 = nn.Linear(d, shared)
            self.fc2 = nn.Linear(shared, shared)
            self.fc3 = nn.Linear(shared, shared)
            self.treat_out = nn.Linear(shared, 1)
            self.y0_fc1, self.y0_fc2 = nn.Linear(shared, hidden), nn.Linear(hidden, hidden)
            self.y0_out = nn.Linear(hidden, 1)
            self.y1_fc1, self.y1_fc2 = nn.Linear(shared, hidden), nn.Linear(hidden, hidden)
            self.y1_out = nn.Linear(hidden, 1)
            self.epsilon = nn.Linear(1, 1)

        def forward(self, x):
            z = F.elu(self.fc3(F.elu(self.fc2(F.elu(self.fc1(x))))))
            t_pred = torch.sigmoid(self.treat_out(z))
            y0 = self.y0_out(F.elu(self.y0_fc2(F.elu(self.y0_fc1(z)))))
            y1 = self.y1_out(F.elu(self.y1_fc2(F.elu(self.y1_fc1(z)))))
            eps = self.epsilon(torch.ones_like(t_pred)[:, 0:1])
            return y0, y1, t_pred, eps

    def dragonnet_loss(y_true, t_true, t_pred, y0_pred, y1_pred, alpha=1.0):
        t_pred = (t_pred + 0.01) / 1.02
        loss_t = torch.sum(F.binary_cross_entropy(t_pred, t_true))
        loss0 = torch.sum((1.0 - t_true) * torch.square(y_true - y0_pred))
        loss1 = torch.sum(t_true * torch.square(y_true - y1_pred))
        return loss0 + loss1 + alpha * loss_t

    def tarreg_loss(y_true, t_true, t_pred, y0_pred, y1_pred, eps, alpha=1.0, beta=1.0):
        vanilla = dragonnet_loss(y_true, t_true, t_pred, y0_pred, y1_pred, alpha)
        t_pred = (t_pred + 0.01) / 1.02
        y_pred = t_true * y1_pred + (1 - t_true) * y0_pred
        h = t_true / t_pred - (1 - t_true) / (1 - t_pred)
        y_pert = y_pred + eps * h
        return vanilla + beta * torch.sum((y_true - y_pert) ** 2)

    x, t, y, tau, _ = _observational(4, 64, 5)
    X, T, Y = _f32(torch, x, t, y)
    T, Y = T[:, None], Y[:, None]
    model = set_weights(torch, DragonNet(5), 3)
    losses = []
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(8):
        if step == 4:
            opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, nesterov=True)
        y0, y1, g, eps = model(X)
        loss = tarreg_loss(Y, T, g, y0, y1, eps, beta=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        y0, y1, g, eps = model(X)
    q_t0, q_t1, g = y0.squeeze(1), y1.squeeze(1), g.squeeze(1)
    keep = (g >= 0.01) & (g <= 0.99)
    q0, q1, gk = q_t0[keep], q_t1[keep], g[keep]
    tk, yk = T.squeeze(1)[keep], Y.squeeze(1)[keep]
    h = tk / gk - (1 - tk) / (1 - gk)
    full_q = (1 - tk) * q0 + tk * q1
    eps_hat = (h * (yk - full_q)).sum() / (h * h).sum()
    tmle = ((q1 + eps_hat / gk) - (q0 - eps_hat / (1 - gk))).mean()
    return {"losses": losses, "epsilon": model.epsilon.weight, "epsilon_bias": model.epsilon.bias,
            "eps_out": eps[:3], "g": g, "ate_plain": (q_t1 - q_t0).mean(), "tmle": tmle,
            "eps_hat": eps_hat, "n_kept": int(keep.sum()), "treat_out": params(model.treat_out),
            "fc1_grad": model.fc1.weight.grad}  # fmt: skip


def _cfr_net(torch, d, h):
    nn = torch.nn

    class CFRNet(nn.Module):
        """A representation (normalised to the unit sphere as in cfrnet's ``normalization='divide'``)
        and a single outcome network that takes the treatment as an extra input."""

        def __init__(self):
            super().__init__()
            self.rep = nn.Sequential(nn.Linear(d, h), nn.ELU(), nn.Linear(h, h), nn.ELU())
            self.out = nn.Sequential(nn.Linear(h + 1, h), nn.ELU(), nn.Linear(h, 1))

        def forward(self, x, t):
            r = self.rep(x)
            r = r / torch.sqrt(torch.clamp((r * r).sum(dim=1, keepdim=True), min=1e-10))
            return self.out(torch.cat([r, t[:, None]], dim=1)).squeeze(-1), r

    return CFRNet()


def _pdist2sq(torch, a, b):
    """Squared Euclidean distances by the ``-2ab' + |a|^2 + |b|^2`` expansion (cfrnet's pdist2sq)."""
    c = -2 * a @ b.T
    return c + (a * a).sum(1, keepdim=True) + (b * b).sum(1)[None, :]


@program
def causal_cfrnet_linear_and_rbf_mmd_balance(torch):
    """Counterfactual regression with an integral probability metric penalty on the representation:
    treated and control representations split with boolean masks, cfrnet's linear MMD
    ``|2p mean_t - 2(1-p) mean_c|^2`` and the unbiased RBF-kernel MMD with ``p``-weighted terms,
    arm-reweighted factual risk plus an L2 penalty on the weight matrices; a few Adam steps for each
    penalty, reporting the imbalance before and after."""
    x, t, y, tau, _ = _observational(5, 80, 4)
    X, T, Y = _f32(torch, x, t, y)
    p = T.mean()

    def mmd2_lin(r):
        mean_c, mean_t = r[T == 0].mean(0), r[T == 1].mean(0)
        return torch.sum(torch.square(2.0 * p * mean_t - 2.0 * (1.0 - p) * mean_c))

    def mmd2_rbf(r, sig=0.5):
        rc, rt = r[T == 0], r[T == 1]
        kcc = torch.exp(-_pdist2sq(torch, rc, rc) / sig**2)
        kct = torch.exp(-_pdist2sq(torch, rc, rt) / sig**2)
        ktt = torch.exp(-_pdist2sq(torch, rt, rt) / sig**2)
        m, n = rc.shape[0], rt.shape[0]
        mmd = (1.0 - p) ** 2 / (m * (m - 1.0)) * (kcc.sum() - m)
        mmd = mmd + p**2 / (n * (n - 1.0)) * (ktt.sum() - n)
        mmd = mmd - 2.0 * p * (1.0 - p) / (m * n) * kct.sum()
        return 4.0 * mmd

    out = {}
    for name, ipm in (("lin", mmd2_lin), ("rbf", mmd2_rbf)):
        model = set_weights(torch, _cfr_net(torch, 4, 12), 6)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        w = T / (2 * p) + (1 - T) / (2 * (1 - p))
        losses, imbs = [], []
        for _ in range(6):
            y_hat, r = model(X, T)
            risk = (w * (Y - y_hat) ** 2).mean()
            imb = ipm(r)
            l2 = sum((m.weight**2).sum() for m in model.modules() if isinstance(m, torch.nn.Linear))
            loss = risk + 1.0 * imb + 1e-4 * l2
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            imbs.append(imb.item())
        with torch.no_grad():
            y1, _ = model(X, torch.ones_like(T))
            y0, _ = model(X, torch.zeros_like(T))
        out[name] = {"losses": losses, "imb": imbs, "ite": (y1 - y0)[:10],
                     "ate": (y1 - y0).mean(), "rep0_w": model.rep[0].weight}  # fmt: skip
    return out


@program
def causal_cfrnet_sinkhorn_wasserstein_penalty(torch):
    """CFR-Wass: cfrnet's Sinkhorn approximation of the Wasserstein distance between treated and
    control representations, with the distance matrix padded by a row and a column of ``delta =
    max(M)`` to absorb the mass imbalance, ``lam / mean(M)`` as the entropic scale (both detached),
    ten Sinkhorn iterations, and the transport plan detached before ``2 * sum(T * M)``; a few Adam
    steps of factual risk plus the penalty."""
    x, t, y, tau, _ = _observational(6, 72, 4)
    X, T, Y = _f32(torch, x, t, y)
    p = T.mean()

    def wasserstein(r, lam=10.0, its=10):
        it, ic = torch.where(T > 0)[0], torch.where(T < 1)[0]
        xt, xc = r[it], r[ic]
        nt, nc = float(xt.shape[0]), float(xc.shape[0])
        M = torch.sqrt(torch.clamp(_pdist2sq(torch, xt, xc), min=1e-10))
        delta = M.max().detach()
        eff_lam = (lam / M.mean()).detach()
        row = delta * torch.ones_like(M[0:1, :])
        col = torch.cat([delta * torch.ones_like(M[:, 0:1]), torch.zeros(1, 1)], 0)
        Mt = torch.cat([torch.cat([M, row], 0), col], 1)
        a = torch.cat([p * torch.ones(xt.shape[0], 1) / nt, (1 - p) * torch.ones(1, 1)], 0)
        b = torch.cat([(1 - p) * torch.ones(xc.shape[0], 1) / nc, p * torch.ones(1, 1)], 0)
        K = torch.exp(-eff_lam * Mt) + 1e-6
        ainvK = K / a
        u = a
        for _ in range(its):
            u = 1.0 / (ainvK @ (b / (u.T @ K).T))
        v = b / (u.T @ K).T
        plan = (u * (v.T * K)).detach()
        return 2 * (plan * Mt).sum(), plan

    model = set_weights(torch, _cfr_net(torch, 4, 10), 7)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    w = T / (2 * p) + (1 - T) / (2 * (1 - p))
    losses, dists = [], []
    for _ in range(5):
        y_hat, r = model(X, T)
        risk = (w * (Y - y_hat) ** 2).mean()
        dist, plan = wasserstein(r)
        loss = risk + 0.5 * dist
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        dists.append(dist.item())
    return {"losses": losses, "dists": dists, "plan_row_sums": plan.sum(1)[-4:],
            "plan_col_sums": plan.sum(0)[-4:], "plan_mass": plan.sum(),
            "out_grad": model.out[0].weight.grad, "rep_w": model.rep[2].weight}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_two_stage_least_squares_iv(torch):
    """Instrumental variables as econometrics code writes them with tensors (float64): OLS by
    ``linalg.lstsq`` (biased by the confounder), 2SLS through the first-stage fitted values and
    through the projection matrix, homoskedastic and HC1 sandwich standard errors, the first-stage
    F statistic, Sargan's over-identification test with a chi-square p-value from
    ``special.gammaincc``, the control-function estimate (first-stage residual as a regressor), the
    Wald estimator with a binary instrument, and a printed coefficient table."""
    g = np.random.default_rng(7)
    n = 200
    z = g.standard_normal((n, 2))
    w = g.standard_normal(n)
    u = g.standard_normal(n)
    d = 0.7 * z[:, 0] + 0.4 * z[:, 1] + 0.3 * w + u + 0.3 * g.standard_normal(n)
    y = 1.5 * d + 0.5 * w - 1.0 + 1.2 * u + 0.5 * g.standard_normal(n)
    Z0, W, D, Y = torch.tensor(z), torch.tensor(w), torch.tensor(d), torch.tensor(y)
    ones = torch.ones(n, dtype=torch.float64)
    X = torch.stack([ones, D, W], dim=1)
    Z = torch.stack([ones, Z0[:, 0], Z0[:, 1], W], dim=1)
    beta_ols = torch.linalg.lstsq(X, Y[:, None]).solution.squeeze(1)
    pi = torch.linalg.lstsq(Z, D[:, None]).solution.squeeze(1)
    d_hat = Z @ pi
    X_hat = torch.stack([ones, d_hat, W], dim=1)
    beta_2sls = torch.linalg.solve(X_hat.T @ X, X_hat.T @ Y)
    Pz = Z @ torch.linalg.inv(Z.T @ Z) @ Z.T
    beta_proj = torch.linalg.solve(X.T @ Pz @ X, X.T @ Pz @ Y)
    resid = Y - X @ beta_2sls
    k = X.shape[1]
    sigma2 = resid @ resid / (n - k)
    bread = torch.linalg.inv(X_hat.T @ X_hat)
    se = torch.sqrt(torch.diagonal(sigma2 * bread))
    meat = (X_hat * resid[:, None] ** 2).T @ X_hat
    se_hc1 = torch.sqrt(torch.diagonal(bread @ meat @ bread) * n / (n - k))
    # first-stage F for the excluded instruments
    v = D - d_hat
    Zr = torch.stack([ones, W], dim=1)
    v_r = D - Zr @ torch.linalg.lstsq(Zr, D[:, None]).solution.squeeze(1)
    q = 2
    f_stat = ((v_r @ v_r - v @ v) / q) / (v @ v / (n - Z.shape[1]))
    # Sargan: n R^2 of the 2SLS residuals on all instruments, chi2 with (#instr - #endog) dof
    fit = Z @ torch.linalg.lstsq(Z, resid[:, None]).solution.squeeze(1)
    r2 = 1 - ((resid - fit) ** 2).sum() / ((resid - resid.mean()) ** 2).sum()
    sargan = n * r2
    sargan_p = torch.special.gammaincc(torch.tensor(0.5, dtype=torch.float64), sargan / 2)
    beta_cf = torch.linalg.lstsq(torch.cat([X, v[:, None]], 1), Y[:, None]).solution.squeeze(1)
    zb = (Z0[:, 0] > 0).to(torch.float64)
    wald = (Y[zb == 1].mean() - Y[zb == 0].mean()) / (D[zb == 1].mean() - D[zb == 0].mean())
    names = ["const", "d", "w"]
    table = "\n".join(f"{nm:>6} {b:9.4f} {s:8.4f} {h:8.4f}"
                      for nm, b, s, h in zip(names, beta_2sls.tolist(), se.tolist(),
                                             se_hc1.tolist()))  # fmt: skip
    return {"beta_ols": beta_ols, "pi": pi, "beta_2sls": beta_2sls, "beta_proj": beta_proj,
            "se": se, "se_hc1": se_hc1, "f_stat": f_stat, "sargan": sargan,
            "sargan_p": sargan_p, "beta_cf": beta_cf, "wald": wald, "table": table}  # fmt: skip


@program
def causal_deepiv_mixture_density_two_stage(torch):
    """DeepIV (Hartford et al.): a mixture density network for the treatment given instrument and
    features, trained on the negative log-likelihood of ``distributions.MixtureSameFamily``; then a
    response network trained on treatments sampled from the frozen first stage with NumPy's uniforms
    and normals (component by inverse CDF over ``cumsum`` of the mixture weights, then ``mu +
    sigma * eps``), using the unbiased two-sample loss ``(y - h(t1, x)) (y - h(t2, x))``; and the
    response curve on a grid of treatments."""
    nn, D = torch.nn, torch.distributions
    g = np.random.default_rng(8)
    n, K = 96, 3
    xf = g.standard_normal((n, 2))
    zf = g.standard_normal((n, 1))
    u = g.standard_normal(n)
    tf = 0.8 * zf[:, 0] + 0.3 * xf[:, 0] + 0.6 * u + 0.2 * g.standard_normal(n)
    yf = np.sin(tf) + 0.5 * xf[:, 1] + u
    X, Zi, Tt, Y = _f32(torch, xf, zf, tf, yf)

    class MDN(nn.Module):
        def __init__(self, d, h, k):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(d, h), nn.Tanh())
            self.head = nn.Linear(h, 3 * k)

        def forward(self, inp):
            logits, mu, log_sigma = self.head(self.body(inp)).chunk(3, dim=-1)
            return logits, mu, log_sigma.clamp(-4.0, 2.0).exp()

    mdn = set_weights(torch, MDN(3, 16, K), 9)
    opt = torch.optim.Adam(mdn.parameters(), lr=2e-2)
    inp = torch.cat([X, Zi], dim=1)
    nll_hist = []
    for _ in range(8):
        logits, mu, sigma = mdn(inp)
        mix = D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(mu, sigma))
        nll = -mix.log_prob(Tt).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        nll_hist.append(nll.item())
    with torch.no_grad():
        logits, mu, sigma = mdn(inp)
        probs = torch.softmax(logits, dim=-1)
    cdf = probs.cumsum(-1)

    def sample(seed):
        r = np.random.default_rng(seed)
        uu = torch.tensor(r.uniform(size=(n, 1)).astype(np.float32))
        ee = torch.tensor(r.standard_normal((n, 1)).astype(np.float32))
        comp = (uu > cdf).sum(-1, keepdim=True).clamp(max=K - 1)
        return mu.gather(1, comp) + sigma.gather(1, comp) * ee, comp

    response = set_weights(torch, nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1)), 10)
    opt2 = torch.optim.Adam(response.parameters(), lr=1e-2)
    losses, comps = [], []
    for step in range(6):
        t1, c1 = sample(100 + 2 * step)
        t2, _ = sample(101 + 2 * step)
        h1 = response(torch.cat([t1, X], 1)).squeeze(-1)
        h2 = response(torch.cat([t2, X], 1)).squeeze(-1)
        loss = ((Y - h1) * (Y - h2)).mean()
        opt2.zero_grad()
        loss.backward()
        opt2.step()
        losses.append(loss.item())
        comps.append(c1.squeeze(1))
    grid = torch.linspace(-2, 2, 9)[:, None]
    with torch.no_grad():
        curve = response(torch.cat([grid, torch.zeros(9, 2)], 1)).squeeze(-1)
    return {"nll": nll_hist, "probs": probs[:5], "mu": mu[:5], "sigma": sigma[:5],
            "losses": losses, "comps": comps[0], "curve": curve,
            "response": params(response)}  # fmt: skip


@program
def causal_synthetic_control_softmax_weights_placebos(torch):
    """Abadie's synthetic control with the donor weights kept on the simplex by a softmax over free
    logits, fitted by Adam on the pre-treatment mean squared error; the post-treatment gaps and the
    average effect; in-space placebos for every donor fitted as one batch with ``bmm`` (each donor
    against the others, chosen by an index matrix); post/pre RMSPE ratios and the permutation
    p-value; and a printed report."""
    g = np.random.default_rng(9)
    J, T_all, T0 = 7, 16, 11
    factors = np.cumsum(g.standard_normal((T_all, 2)) * 0.3, axis=0)
    loadings = g.uniform(0.5, 1.5, (J, 2))
    donors = factors @ loadings.T + 0.1 * g.standard_normal((T_all, J)) + np.linspace(0, 1, J)
    w_true = np.array([0.5, 0.3, 0.2, 0, 0, 0, 0])
    treated = donors @ w_true + 0.05 * g.standard_normal(T_all)
    treated[T0:] += np.linspace(0.5, 1.5, T_all - T0)
    Y0, y1 = _f32(torch, donors, treated)
    theta = torch.zeros(J, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=0.1)
    losses = []
    for _ in range(40):
        w = torch.softmax(theta, dim=0)
        loss = ((y1[:T0] - Y0[:T0] @ w) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    w = torch.softmax(theta, dim=0).detach()
    synth = Y0 @ w
    gap = y1 - synth
    att = gap[T0:].mean()
    # placebos: donor j against the other J - 1 donors, all at once
    others = torch.tensor([[k for k in range(J) if k != j] for j in range(J)])
    pool = Y0.T[others]  # (J, J-1, T)
    target = Y0.T  # (J, T)
    logits = torch.zeros(J, J - 1, requires_grad=True)
    opt_p = torch.optim.Adam([logits], lr=0.1)
    for _ in range(40):
        wp = torch.softmax(logits, dim=1)
        fit = torch.bmm(wp[:, None, :], pool).squeeze(1)
        loss_p = ((target[:, :T0] - fit[:, :T0]) ** 2).mean(1).sum()
        opt_p.zero_grad()
        loss_p.backward()
        opt_p.step()
    with torch.no_grad():
        fit = torch.bmm(torch.softmax(logits, 1)[:, None, :], pool).squeeze(1)
    gaps = torch.cat([gap[None], target - fit], 0)
    rmspe_pre = gaps[:, :T0].pow(2).mean(1).sqrt()
    rmspe_post = gaps[:, T0:].pow(2).mean(1).sqrt()
    ratio = rmspe_post / rmspe_pre
    rank = int((ratio >= ratio[0]).sum())
    p_value = rank / ratio.numel()
    top = torch.topk(w, 3)
    report = "\n".join([f"donor {i}: weight {v:.3f}" for v, i in zip(top.values.tolist(),
                                                                    top.indices.tolist())]
                       + [f"ATT {att.item():.3f}  rank {rank}/{ratio.numel()}  p={p_value:.3f}"])  # fmt: skip
    return {"losses": losses[::5], "w": w, "gap": gap, "att": att, "placebo_w": torch.softmax(
            logits, 1).detach(), "ratio": ratio, "p_value": p_value, "report": report}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_did_two_way_fixed_effects_event_study(torch):
    """Difference-in-differences on a staggered-adoption panel (float64): the two-way fixed effects
    regression with unit and period dummies from ``F.one_hot`` by ``linalg.lstsq``, the same
    coefficient by the within transformation (double demeaning of the ``(units, periods)`` view),
    cluster-robust standard errors by unit with the scores summed by ``index_add_``, the canonical
    2x2 DiD from cell means, an event study with lead/lag dummies (period -1 omitted), and
    group-time ATTs against the never-treated units (Callaway and Sant'Anna style)."""
    F = torch.nn.functional
    g = np.random.default_rng(10)
    N, P = 12, 6
    adopt = np.array([2, 2, 2, 4, 4, 4, 99, 99, 99, 99, 99, 99])  # 99: never treated
    unit_fe, time_fe = g.standard_normal(N), np.linspace(0, 1, P)
    unit = np.repeat(np.arange(N), P)
    period = np.tile(np.arange(P), N)
    rel = period - adopt[unit]
    treat = (rel >= 0).astype(np.float64)
    effect = treat * (1.0 + 0.3 * np.clip(rel, 0, None))
    y = unit_fe[unit] + time_fe[period] + effect + 0.2 * g.standard_normal(N * P)
    Yv, Dv = torch.tensor(y), torch.tensor(treat)
    U, Pt = torch.tensor(unit), torch.tensor(period)
    n = N * P
    Xd = torch.cat([torch.ones(n, 1, dtype=torch.float64), Dv[:, None],
                    F.one_hot(U, N)[:, 1:].to(torch.float64),
                    F.one_hot(Pt, P)[:, 1:].to(torch.float64)], dim=1)  # fmt: skip
    beta = torch.linalg.lstsq(Xd, Yv[:, None]).solution.squeeze(1)
    twfe = beta[1]
    Ym, Dm = Yv.view(N, P), Dv.view(N, P)

    def demean(a):
        return a - a.mean(1, keepdim=True) - a.mean(0, keepdim=True) + a.mean()

    yt, dt = demean(Ym), demean(Dm)
    within = (yt * dt).sum() / (dt * dt).sum()
    resid = Yv - Xd @ beta
    k = Xd.shape[1]
    bread = torch.linalg.inv(Xd.T @ Xd)
    scores = torch.zeros(N, k, dtype=torch.float64).index_add_(0, U, Xd * resid[:, None])
    meat = scores.T @ scores
    c = N / (N - 1) * (n - 1) / (n - k)
    V = c * bread @ meat @ bread
    se_cluster = V[1, 1].sqrt()
    ever = torch.tensor(adopt < 99)
    early, late = torch.arange(P) < 2, torch.arange(P) >= 4

    def cell(units, periods):
        return Ym[units][:, periods].mean()

    did_2x2 = (cell(ever, late) - cell(ever, early)) - (cell(~ever, late) - cell(~ever, early))
    # event study: relative-time dummies -3..3 (binned at the ends), -1 omitted
    rel_t = torch.tensor(rel).clamp(-3, 3) + 3
    ev = F.one_hot(rel_t, 7).to(torch.float64) * ever[U][:, None]
    ev = torch.cat([ev[:, :2], ev[:, 3:]], dim=1)
    Xe = torch.cat([torch.ones(n, 1, dtype=torch.float64), ev,
                    F.one_hot(U, N)[:, 1:].to(torch.float64),
                    F.one_hot(Pt, P)[:, 1:].to(torch.float64)], dim=1)  # fmt: skip
    event = torch.linalg.lstsq(Xe, Yv[:, None]).solution.squeeze(1)[1:7]
    att_gt = []
    never = ~ever
    for cohort in (2, 4):
        gmask = torch.tensor(adopt == cohort)
        for tt in range(cohort, P):
            dy_g = Ym[gmask, tt] - Ym[gmask, cohort - 1]
            dy_c = Ym[never, tt] - Ym[never, cohort - 1]
            att_gt.append((dy_g.mean() - dy_c.mean()).item())
    return {"beta_head": beta[:4], "twfe": twfe, "within": within, "se_cluster": se_cluster,
            "did_2x2": did_2x2, "event": event, "att_gt": att_gt,
            "att_gt_mean": sum(att_gt) / len(att_gt), "true_att": float(effect[treat > 0].mean())}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_uplift_two_model_qini_and_auuc(torch):
    """Uplift modelling as scikit-uplift/causalml compute it: a two-model (T-learner) uplift from
    two logistic regressions fitted with Adam (double precision), the class-transformation score,
    then per score: the ranking by ``argsort``, cumulative treated/control counts and responses by
    ``cumsum``, the Qini curve, the uplift curve, areas by ``trapezoid``, the Qini coefficient
    against the random line, and the uplift by decile from the sorted ``view(10, -1)``."""
    x, t, y, tau, _ = _observational(12, 200, 4, binary_y=True)
    X, T, Y = torch.tensor(x), torch.tensor(t), torch.tensor(y)
    n = X.shape[0]

    def fit(mask, target, seed, steps=30):
        model = set_weights(torch, torch.nn.Linear(4, 1).double(), seed)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(steps):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(X[mask]).squeeze(-1), target[mask]
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
        return model, loss.item()

    m1, l1 = fit(T == 1, Y, 20)
    m0, l0 = fit(T == 0, Y, 21)
    z_target = Y * T + (1 - Y) * (1 - T)
    mz, lz = fit(torch.ones(n, dtype=torch.bool), z_target, 22)
    with torch.no_grad():
        uplift_tm = torch.sigmoid(m1(X)).squeeze(-1) - torch.sigmoid(m0(X)).squeeze(-1)
        uplift_ct = 2 * torch.sigmoid(mz(X)).squeeze(-1) - 1

    def curves(score):
        order = torch.argsort(score, descending=True)
        ts, ys = T[order], Y[order]
        n_t, n_c = ts.cumsum(0), (1 - ts).cumsum(0)
        y_t, y_c = (ys * ts).cumsum(0), (ys * (1 - ts)).cumsum(0)
        qini = y_t - y_c * n_t / n_c.clamp(min=1)
        uplift = (y_t / n_t.clamp(min=1) - y_c / n_c.clamp(min=1)) * (n_t + n_c)
        k = torch.arange(1, n + 1, dtype=torch.float64)
        random_qini = qini[-1] * k / n
        qini_coef = torch.trapezoid(qini - random_qini, k) / n
        auuc = torch.trapezoid(uplift, k) / n
        dec_t, dec_y = ts.view(10, -1), ys.view(10, -1)
        rate_t = (dec_y * dec_t).sum(1) / dec_t.sum(1).clamp(min=1)
        rate_c = (dec_y * (1 - dec_t)).sum(1) / (1 - dec_t).sum(1).clamp(min=1)
        by_decile = rate_t - rate_c
        return {"qini": qini[9::20], "uplift": uplift[9::20], "qini_coef": qini_coef,
                "auuc": auuc, "by_decile": by_decile, "top": order[:10]}  # fmt: skip

    corr = torch.corrcoef(torch.stack([uplift_tm, uplift_ct, torch.tensor(tau)]))
    return {"losses": [l1, l0, lz], "uplift_tm": uplift_tm[:8], "uplift_ct": uplift_ct[:8],
            "two_model": curves(uplift_tm), "class_transform": curves(uplift_ct),
            "oracle": curves(torch.tensor(tau)), "corr": corr}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_bootstrap_ate_confidence_intervals(torch):
    """Bootstrap intervals for a treatment effect from a fixed NumPy ``(B, n)`` matrix of resampling
    indices, vectorised over replicates: the difference in means and the regression-adjusted
    estimate (batched normal equations with ``linalg.solve``) per replicate; percentile intervals
    with ``torch.quantile``, basic and normal intervals, and BCa with the bias correction from
    ``special.ndtri``, the acceleration from a jackknife built with a leave-one-out mask, and the
    adjusted levels from ``special.ndtr``; and the bootstrap standard errors."""
    x, t, y, tau, _ = _observational(13, 60, 2)
    X, T, Y = torch.tensor(x), torch.tensor(t), torch.tensor(y)
    n, B = X.shape[0], 300
    idx = torch.tensor(np.random.default_rng(14).integers(0, n, (B, n)))

    def diff_means(yb, tb):
        return (yb * tb).sum(-1) / tb.sum(-1) - (yb * (1 - tb)).sum(-1) / (1 - tb).sum(-1)

    theta = diff_means(Y, T)
    boot = diff_means(Y[idx], T[idx])
    Xa = torch.cat([torch.ones(n, 1, dtype=torch.float64), T[:, None], X], 1)
    Xb, Yb = Xa[idx], Y[idx]
    coef = torch.linalg.solve(Xb.transpose(1, 2) @ Xb, (Xb.transpose(1, 2) @ Yb[..., None]))
    boot_reg = coef[:, 1, 0]
    theta_reg = torch.linalg.lstsq(Xa, Y[:, None]).solution[1, 0]
    loo = 1.0 - torch.eye(n, dtype=torch.float64)  # row i leaves observation i out
    alpha = 0.05
    qs = torch.tensor([alpha / 2, 1 - alpha / 2], dtype=torch.float64)
    out = {}
    for name, est, reps in (("dm", theta, boot), ("reg", theta_reg, boot_reg)):
        perc = torch.quantile(reps, qs)
        basic = 2 * est - perc.flip(0)
        se = reps.std()
        zq = torch.special.ndtri(qs)
        normal = est + zq * se
        z0 = torch.special.ndtri((reps < est).to(torch.float64).mean())
        if name == "dm":
            jack = (loo @ (Y * T)) / (loo @ T) - (loo @ (Y * (1 - T))) / (loo @ (1 - T))
        else:
            xtx = torch.einsum("bi,ij,ik->bjk", loo, Xa, Xa)
            xty = torch.einsum("bi,ij,i->bj", loo, Xa, Y)
            jack = torch.linalg.solve(xtx, xty)[:, 1]
        dev = jack.mean() - jack
        acc = (dev**3).sum() / (6 * ((dev**2).sum()) ** 1.5)
        adj = torch.special.ndtr(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))
        bca = torch.quantile(reps, adj)
        out[name] = {"estimate": est, "percentile": perc, "basic": basic, "normal": normal,
                     "bca": bca, "z0": z0, "acc": acc, "se": se, "adj": adj}  # fmt: skip
    out["boot_head"] = boot[:6]
    out["boot_reg_head"] = boot_reg[:6]
    out["true_ate"] = float(tau.mean())
    return out


@program(rtol=1e-7, atol=1e-9)
def causal_propensity_subclassification_quintiles(torch):
    """Subclassification on the propensity score (Rosenbaum and Rubin): a logistic propensity by
    Newton steps on ``distributions.Bernoulli(logits=...)``'s log-likelihood with the gradient from
    ``autograd.functional.jacobian`` and the Hessian from ``autograd.functional.hessian``; quintile
    edges by ``torch.quantile``, strata by ``bucketize``, per-stratum arm means by
    ``scatter_reduce(reduce="mean")``, counts by ``bincount`` and ``scatter_add_``, stratum-weighted
    ATE and ATT with a Neyman variance, within-stratum covariate balance accumulated by
    ``index_put_(..., accumulate=True)``, overlap from ``histc`` and a printed stratum table."""
    x, t, y, tau, _ = _observational(15, 150, 3)
    X, T, Y = torch.tensor(x), torch.tensor(t), torch.tensor(y)
    n, p = X.shape
    Xd = torch.cat([torch.ones(n, 1, dtype=torch.float64), X], dim=1)

    def nll(beta):
        return -torch.distributions.Bernoulli(logits=Xd @ beta).log_prob(T).sum()

    beta = torch.zeros(p + 1, dtype=torch.float64)
    nlls = []
    for _ in range(6):
        g = torch.autograd.functional.jacobian(nll, beta)
        H = torch.autograd.functional.hessian(nll, beta)
        beta = beta - torch.linalg.solve(H, g)
        nlls.append(nll(beta).item())
    e = torch.sigmoid(Xd @ beta)
    edges = torch.quantile(e, torch.linspace(0, 1, 6, dtype=torch.float64))
    stratum = torch.bucketize(e, edges[1:-1], right=True)
    counts = torch.bincount(stratum, minlength=5)
    n_t = torch.zeros(5, dtype=torch.float64).scatter_add_(0, stratum, T)
    treated = T == 1
    mean_t = torch.zeros(5, dtype=torch.float64).scatter_reduce(
        0, stratum[treated], Y[treated], reduce="mean", include_self=False
    )
    mean_c = torch.zeros(5, dtype=torch.float64).scatter_reduce(
        0, stratum[~treated], Y[~treated], reduce="mean", include_self=False
    )
    effect = mean_t - mean_c
    ate = (effect * counts).sum() / n
    att = (effect * n_t).sum() / n_t.sum()
    var_s = torch.stack([Y[(stratum == s) & treated].var() / n_t[s]
                         + Y[(stratum == s) & ~treated].var() / (counts[s] - n_t[s])
                         for s in range(5)])  # fmt: skip
    se = torch.sqrt(((counts / n) ** 2 * var_s).sum())
    arm = T.long()
    sums = torch.zeros(5, 2, p, dtype=torch.float64).index_put_((stratum, arm), X, accumulate=True)
    cnt = torch.zeros(5, 2, dtype=torch.float64).index_put_(
        (stratum, arm), torch.ones(n, dtype=torch.float64), accumulate=True
    )
    means = sums / cnt[..., None]
    balance = (means[:, 1] - means[:, 0]) / X.std(0)
    hist_t = torch.histc(e[treated], bins=10, min=0, max=1)
    hist_c = torch.histc(e[~treated], bins=10, min=0, max=1)
    overlap = torch.minimum(hist_t / hist_t.sum(), hist_c / hist_c.sum()).sum()
    uniq, inverse, ucounts = torch.unique(stratum, return_inverse=True, return_counts=True)
    table = "\n".join(f"stratum {s}: n={int(counts[s])} treated={int(n_t[s])} "
                      f"effect={effect[s].item():+.3f}" for s in range(5))  # fmt: skip
    return {"nlls": nlls, "beta": beta, "edges": edges, "stratum": stratum, "counts": counts,
            "n_t": n_t, "mean_t": mean_t, "mean_c": mean_c, "ate": ate, "att": att, "se": se,
            "balance": balance, "hist_t": hist_t, "hist_c": hist_c, "overlap": overlap,
            "uniq": uniq, "inverse_matches": bool((uniq[inverse] == stratum).all()),
            "ucounts": ucounts, "table": table, "true_ate": float(tau.mean())}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_regression_discontinuity_sharp_and_fuzzy(torch):
    """Regression discontinuity as rdrobust-style code computes it (float64): local linear fits on
    each side of the cutoff with triangular kernel weights by weighted least squares (rows scaled by
    ``sqrt(w)``), the sharp estimate over a grid of bandwidths with heteroskedasticity-robust
    errors, the fuzzy estimate as the ratio of the outcome and take-up jumps, the
    Imbens-Kalyanaraman-style bias from a quadratic fit, and a McCrary-style density check from
    ``histc`` counts on either side."""
    g = np.random.default_rng(16)
    n = 240
    r = g.uniform(-1, 1, n)
    above = (r >= 0).astype(np.float64)
    take_up = (g.uniform(size=n) < 0.15 + 0.6 * above).astype(np.float64)
    y = 0.5 + 0.8 * r + 0.4 * r**2 + 0.6 * above + 0.3 * g.standard_normal(n)
    y_fuzzy = 0.5 + 0.8 * r + 0.4 * r**2 + 0.9 * take_up + 0.3 * g.standard_normal(n)
    R, Dv, Yv, Yf, A = (torch.tensor(v) for v in (r, take_up, y, y_fuzzy, above))

    def local_linear(target, h):
        w = torch.clamp(1 - R.abs() / h, min=0)
        inside = w > 0
        Xd = torch.stack([torch.ones_like(R), A, R, A * R], dim=1)[inside]
        sw = w[inside].sqrt()
        beta = torch.linalg.lstsq(Xd * sw[:, None], (target[inside] * sw)[:, None]).solution
        beta = beta.squeeze(1)
        resid = target[inside] - Xd @ beta
        Xw = Xd * w[inside][:, None]
        bread = torch.linalg.inv(Xw.T @ Xd)
        meat = (Xw * resid[:, None] ** 2).T @ Xw
        V = bread @ meat @ bread.T
        return beta[1], V[1, 1].sqrt(), int(inside.sum())

    sharp, ses, ns = [], [], []
    for h in (0.3, 0.5, 0.8):
        est, se, m = local_linear(Yv, h)
        sharp.append(est)
        ses.append(se)
        ns.append(m)
    jump_y, _, _ = local_linear(Yf, 0.5)
    jump_d, _, _ = local_linear(Dv, 0.5)
    fuzzy = jump_y / jump_d
    Xq = torch.stack([torch.ones_like(R), A, R, A * R, R**2, A * R**2], dim=1)
    quad = torch.linalg.lstsq(Xq, Yv[:, None]).solution.squeeze(1)
    counts = torch.histc(R, bins=10, min=-1, max=1)
    left, right = counts[:5], counts[5:]
    log_ratio = torch.log(right[0] / left[-1])
    return {"sharp": torch.stack(sharp), "se": torch.stack(ses), "n_in": ns, "jump_y": jump_y,
            "jump_d": jump_d, "fuzzy": fuzzy, "quad": quad, "counts": counts,
            "density_log_ratio": log_ratio}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def causal_marginal_structural_model_time_varying_weights(torch):
    """A marginal structural model with time-varying treatment and confounding (Robins, Hernan):
    pooled logistic models for the treatment given the history (denominator) and given past
    treatment only (numerator), fitted by IRLS with ``linalg.cholesky`` and ``cholesky_solve`` on
    the long-format rows; stabilised weights as the ``cumprod`` over periods of the ratio of
    probabilities of the observed treatments; truncation at the 1st and 99th percentiles; the MSM
    of the outcome on cumulative treatment by weighted least squares with a robust sandwich error,
    against the confounded unweighted fit; and a printed weight summary."""
    g = np.random.default_rng(17)
    n, K = 120, 4
    L = np.zeros((n, K))
    A = np.zeros((n, K))
    prev_a = np.zeros(n)
    for k in range(K):
        L[:, k] = 0.5 * (L[:, k - 1] if k else 0) - 0.6 * prev_a + g.standard_normal(n)
        pa = 1 / (1 + np.exp(-(-0.3 + 0.9 * L[:, k] + 0.8 * prev_a)))
        A[:, k] = (g.uniform(size=n) < pa).astype(np.float64)
        prev_a = A[:, k]
    y = 0.5 * A.sum(1) + 0.7 * L.sum(1) + 0.5 * g.standard_normal(n)
    Lt, At, Y = torch.tensor(L), torch.tensor(A), torch.tensor(y)
    A_prev = torch.cat([torch.zeros(n, 1, dtype=torch.float64), At[:, :-1]], dim=1)
    ones = torch.ones(n * K, dtype=torch.float64)
    den_X = torch.stack([ones, Lt.reshape(-1), A_prev.reshape(-1)], dim=1)
    num_X = torch.stack([ones, A_prev.reshape(-1)], dim=1)
    a_long = At.reshape(-1)

    def irls(Xd, target, iters=7):
        beta = torch.zeros(Xd.shape[1], dtype=torch.float64)
        for _ in range(iters):
            mu = torch.sigmoid(Xd @ beta)
            W = mu * (1 - mu)
            chol = torch.linalg.cholesky(Xd.T @ (Xd * W[:, None]))
            step = torch.cholesky_solve((Xd.T @ (target - mu))[:, None], chol).squeeze(1)
            beta = beta + step
        return beta

    b_den, b_num = irls(den_X, a_long), irls(num_X, a_long)
    p_den = torch.sigmoid(den_X @ b_den).view(n, K)
    p_num = torch.sigmoid(num_X @ b_num).view(n, K)
    obs_den = torch.where(At == 1, p_den, 1 - p_den)
    obs_num = torch.where(At == 1, p_num, 1 - p_num)
    sw_path = (obs_num / obs_den).cumprod(dim=1)
    sw = sw_path[:, -1]
    lo, hi = torch.quantile(sw, torch.tensor([0.01, 0.99], dtype=torch.float64))
    sw_t = sw.clamp(lo, hi)
    cum_a = At.sum(1)
    Xm = torch.stack([torch.ones(n, dtype=torch.float64), cum_a], dim=1)

    def wls(w):
        Xw = Xm * w[:, None]
        beta = torch.linalg.solve(Xw.T @ Xm, Xw.T @ Y)
        resid = Y - Xm @ beta
        bread = torch.linalg.inv(Xw.T @ Xm)
        meat = (Xw * resid[:, None] ** 2).T @ Xw
        return beta, torch.sqrt(torch.diagonal(bread @ meat @ bread))

    beta_msm, se_msm = wls(sw_t)
    beta_naive, se_naive = wls(torch.ones(n, dtype=torch.float64))
    summary = (f"stabilised weights: mean {sw.mean().item():.3f} sd {sw.std().item():.3f} "
               f"min {sw.min().item():.3f} max {sw.max().item():.3f}; truncated at "
               f"[{lo.item():.3f}, {hi.item():.3f}]")  # fmt: skip
    return {"b_den": b_den, "b_num": b_num, "sw_path_head": sw_path[:4], "sw": sw, "sw_t": sw_t,
            "bounds": torch.stack([lo, hi]), "beta_msm": beta_msm, "se_msm": se_msm,
            "beta_naive": beta_naive, "se_naive": se_naive, "summary": summary}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def causal_iv_gmm_two_step_hansen_j_delta_method(torch):
    """Linear IV by two-step efficient GMM with autograd, in float64: the sample moments
    ``Z'(y - X theta) / n``, the first step with ``W = (Z'Z/n)^-1`` and the second with the inverse
    of the moments' outer-product covariance, each minimised by L-BFGS on a leaf parameter; Hansen's
    J test, standard errors from the moment Jacobian (``autograd.functional.jacobian``), the delta
    method for derived effects (an elasticity at the means and a coefficient ratio) with their
    gradients from ``autograd.grad``, and the printed estimates."""
    g = np.random.default_rng(18)
    n = 200
    z = g.standard_normal((n, 2))
    w = g.standard_normal(n)
    u = g.standard_normal(n)
    d = 0.8 * z[:, 0] + 0.5 * z[:, 1] + 0.3 * w + u + 0.3 * g.standard_normal(n) + 3.0
    y = 1.2 * d - 0.6 * w + 0.5 + u * (1 + 0.5 * np.abs(z[:, 0])) + 0.3 * g.standard_normal(n)
    Z0, W, D, Y = torch.tensor(z), torch.tensor(w), torch.tensor(d), torch.tensor(y)
    ones = torch.ones(n, dtype=torch.float64)
    X = torch.stack([ones, D, W], dim=1)
    Z = torch.stack([ones, Z0[:, 0], Z0[:, 1], W], dim=1)

    def moments(theta):
        return Z * (Y - X @ theta)[:, None]

    def fit(weight, theta0):
        theta = theta0.clone().requires_grad_(True)
        opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=20, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            gbar = moments(theta).mean(0)
            q = n * gbar @ weight @ gbar
            q.backward()
            return q

        first = opt.step(closure)
        return theta, first

    W1 = torch.linalg.inv(Z.T @ Z / n)
    theta1, q0 = fit(W1, torch.zeros(3, dtype=torch.float64))
    with torch.no_grad():
        m = moments(theta1)
        S = (m - m.mean(0)).T @ (m - m.mean(0)) / n
    W2 = torch.linalg.inv(S)
    theta2, _ = fit(W2, theta1.detach())
    gbar = moments(theta2).mean(0)
    J = n * gbar @ W2 @ gbar
    j_pvalue = torch.special.gammaincc(torch.tensor(0.5, dtype=torch.float64), J.detach() / 2)
    G = torch.autograd.functional.jacobian(lambda th: moments(th).mean(0), theta2.detach())
    V = torch.linalg.inv(G.T @ W2 @ G) / n
    se = V.diagonal().sqrt()
    effects = torch.stack([theta2[1], theta2[1] * D.mean() / Y.mean(), theta2[2] / theta2[1]])
    rows = [torch.autograd.grad(effects[i], theta2, retain_graph=True)[0] for i in range(3)]
    Jd = torch.stack(rows)
    se_effects = (Jd @ V @ Jd.T).diagonal().sqrt()
    printed = [f"theta (step 1): {theta1}", f"theta (step 2): {theta2}", f"effects: {effects}",
               f"se: {se_effects}", f"J = {J.item():.4f} (p = {j_pvalue.item():.4f})"]  # fmt: skip
    return {"q0": q0, "theta1": theta1, "theta2": theta2, "S": S, "J": J, "j_pvalue": j_pvalue,
            "G": G, "se": se, "effects": effects, "delta_jacobian": Jd,
            "se_effects": se_effects, "printed": "\n".join(printed)}  # fmt: skip
