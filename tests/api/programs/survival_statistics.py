"""Survival analysis and classical statistics as pycox, lifelines and scipy-style torch code
writes them: the Cox partial likelihood (Breslow with ``logcumsumexp`` over times sorted in
descending order, Efron's tie correction over unique times) fitted by Newton-Raphson with an
autograd Hessian and by L-BFGS, DeepSurv training with a Breslow baseline hazard, DeepHit with its
PMF likelihood and pairwise ranking loss, the discrete-time logistic-hazard likelihood, a Weibull
AFT model by maximum likelihood, Kaplan-Meier and Nelson-Aalen estimators (``unique`` +
``bincount`` + ``cumprod``/``cumsum``) with Greenwood intervals, Harrell's and Uno's concordance,
weighted and k-sample log-rank tests, bootstrap (percentile, basic, BCa) intervals from fixed
NumPy resampling indices, permutation and exact tests, Gaussian kernel density estimates with
Scott's and Silverman's bandwidths and a leave-one-out fit, and Welch, Mann-Whitney and
chi-square tests with p-values from ``torch.special``. Randomness comes from NumPy only."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import grads, params, set_weights


def _survival_data(seed: int, n: int, p: int, ties: bool = False):
    """Covariates (float32), durations and event indicators (float64) from a proportional hazards
    model with exponential baseline and independent exponential censoring; ``ties`` rounds the
    durations up to a half-unit grid."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, p))
    beta = np.array([0.8, -0.5, 0.3, 0.0, 0.4, -0.2])[:p]
    t = g.exponential(4.0, n) / np.exp(x @ beta)
    c = g.exponential(7.0, n)
    dur = np.minimum(t, c)
    ev = (t <= c).astype(np.float64)
    if ties:
        dur = np.ceil(dur * 2.0) / 2.0
    return x.astype(np.float32), dur, ev


def _cox_ph_loss(torch, log_h, durations, events, eps=1e-7):
    """pycox's negative Breslow partial log-likelihood (no ties): sort by descending duration so
    that each risk set is a prefix, then a stabilised log-cumsum-exp."""
    idx = durations.sort(descending=True)[1]
    events = events[idx]
    log_h = log_h[idx]
    gamma = log_h.max()
    log_cumsum_h = log_h.sub(gamma).exp().cumsum(0).add(eps).log().add(gamma)
    return -log_h.sub(log_cumsum_h).mul(events).sum().div(events.sum())


@program
def cox_breslow_partial_likelihood_newton_raphson(torch):
    """A linear Cox model as lifelines fits it: the partial log-likelihood with ``logcumsumexp``
    over descending durations, Newton-Raphson steps with the gradient from ``autograd.grad`` and
    the Hessian from ``autograd.functional.hessian``, standard errors from the inverse Hessian,
    z-scores, two-sided p-values with ``special.ndtr``, 95% intervals with ``special.ndtri``,
    hazard ratios, Schoenfeld residuals from risk-set weighted means, and pycox's stabilised
    loss for comparison, with a printed summary."""
    x, dur, ev = _survival_data(0, 60, 3)
    X = torch.tensor(x, dtype=torch.float64)
    durations, events = torch.tensor(dur), torch.tensor(ev)
    order = torch.argsort(durations, descending=True)
    Xs, es = X[order], events[order]

    def neg_loglik(beta):
        eta = Xs @ beta
        return -((eta - torch.logcumsumexp(eta, dim=0)) * es).sum()

    beta = torch.zeros(3, dtype=torch.float64)
    history, grad_norms = [], []
    for _ in range(6):
        b = beta.clone().requires_grad_(True)
        nll = neg_loglik(b)
        (g,) = torch.autograd.grad(nll, b)
        H = torch.autograd.functional.hessian(neg_loglik, beta)
        beta = beta - torch.linalg.solve(H, g)
        history.append(nll.item())
        grad_norms.append(g.norm().item())
    H = torch.autograd.functional.hessian(neg_loglik, beta)
    cov = torch.linalg.inv(H)
    se = cov.diagonal().sqrt()
    z = beta / se
    pval = 2 * torch.special.ndtr(-z.abs())
    zq = torch.special.ndtri(torch.tensor(0.975, dtype=torch.float64))
    lower, upper = beta - zq * se, beta + zq * se
    eta = Xs @ beta
    w = eta.exp()
    risk_mean = (w[:, None] * Xs).cumsum(0) / w.cumsum(0)[:, None]
    schoenfeld = (Xs - risk_mean)[es.bool()]
    pycox = _cox_ph_loss(torch, X @ beta, durations, events)
    lines = ["covariate      coef  exp(coef)   se(coef)       z        p"]
    for i in range(3):
        lines.append(f"x{i}       {beta[i].item():8.4f} {beta[i].exp().item():9.4f} "
                     f"{se[i].item():9.4f} {z[i].item():8.3f} {pval[i].item():9.3g}")  # fmt: skip
    return {"history": history, "grad_norms": grad_norms, "beta": beta, "se": se, "z": z,
            "p": pval, "lower": lower, "upper": upper, "hr": beta.exp(), "cov": cov,
            "schoenfeld": schoenfeld, "schoenfeld_sum": schoenfeld.sum(0), "pycox": pycox,
            "summary": "\n".join(lines)}  # fmt: skip


@program
def cox_efron_ties_unique_times_lbfgs(torch):
    """Cox models on tied durations: per-unique-time sums with ``unique(return_inverse=True)``,
    ``index_add`` and ``bincount(weights=...)``, risk sums by a reversed ``cumsum``, Efron's
    correction ``sum_l log(R - l/d * D)`` with a masked ``(times, max ties)`` grid and Breslow's
    ``d log R``, both fitted with L-BFGS (strong Wolfe) through a closure, then the score test
    at zero and the likelihood-ratio statistic."""
    x, dur, ev = _survival_data(1, 50, 2, ties=True)
    X = torch.tensor(x, dtype=torch.float64)
    durations, events = torch.tensor(dur), torch.tensor(ev)
    times, inv, counts = torch.unique(durations, return_inverse=True, return_counts=True)
    T = times.numel()
    d = torch.bincount(inv, weights=events, minlength=T)
    maxd = int(d.max().item())
    ell = torch.arange(maxd, dtype=torch.float64)
    tie_mask = ell[None, :] < d[:, None]
    frac = torch.where(tie_mask, ell[None, :] / d.clamp(min=1)[:, None], 0.0)  # (masked: log R)

    def loglik(beta, method):
        eta = X @ beta
        w = eta.exp()
        bucket = torch.zeros(T, dtype=w.dtype).index_add(0, inv, w)
        risk = bucket.flip(0).cumsum(0).flip(0)
        death_eta = torch.zeros(T, dtype=w.dtype).index_add(0, inv, eta * events)
        if method == "breslow":
            return death_eta.sum() - (d * risk.log()).sum()
        death_w = torch.zeros(T, dtype=w.dtype).index_add(0, inv, w * events)
        log_terms = torch.log(risk[:, None] - frac * death_w[:, None])
        return death_eta.sum() - torch.where(tie_mask, log_terms, 0.0).sum()

    out = {"times": times, "counts": counts, "d": d}
    for method in ("efron", "breslow"):
        beta = torch.zeros(2, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([beta], lr=1, max_iter=30, line_search_fn="strong_wolfe")
        evals = []

        def closure(method=method, beta=beta, opt=opt, evals=evals):
            opt.zero_grad()
            loss = -loglik(beta, method)
            loss.backward()
            evals.append(loss.item())
            return loss

        opt.step(closure)
        b0 = torch.zeros(2, dtype=torch.float64, requires_grad=True)
        ll0 = loglik(b0, method)
        (score,) = torch.autograd.grad(ll0, b0, create_graph=True)
        info = -torch.stack([torch.autograd.grad(score[k], b0, retain_graph=True)[0]
                             for k in range(2)])  # fmt: skip
        score_test = score.detach() @ torch.linalg.solve(info, score.detach())
        ll_hat = loglik(beta.detach(), method)
        out[method] = {"beta": beta.detach(), "first_evals": evals[:4],
                       "ll": ll_hat, "ll0": ll0.detach(), "lr_stat": 2 * (ll_hat - ll0.detach()),
                       "score_test": score_test, "info0": info.detach(),
                       "lr_p": torch.special.gammaincc(torch.tensor(1.0, dtype=torch.float64),
                                                       (ll_hat - ll0.detach()))}  # fmt: skip
    return out


@program
def deepsurv_training_breslow_baseline_survival(torch):
    """DeepSurv: an MLP (``Linear``, ``BatchNorm1d``, ``ReLU``, ``SELU``, a bias-free risk head)
    trained with Adam and weight decay on minibatches in a fixed NumPy order with the Cox loss
    via ``logcumsumexp``; then, in eval mode, the Breslow baseline hazard over unique training
    times, survival curves ``exp(-H0(t) * exp(g(x)))`` and their interpolated median times."""
    nn = torch.nn
    x, dur, ev = _survival_data(2, 96, 4)
    X = torch.tensor(x)
    durations = torch.tensor(dur, dtype=torch.float32)
    events = torch.tensor(ev, dtype=torch.float32)
    net = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 16),
                        nn.SELU(), nn.Linear(16, 1, bias=False))  # fmt: skip
    set_weights(torch, net, seed=3)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=1e-4)

    def cox_loss(log_h, t, e):
        idx = torch.argsort(t, descending=True)
        log_h, e = log_h[idx], e[idx]
        return -((log_h - log_h.logcumsumexp(0)) * e).sum() / e.sum().clamp(min=1)

    g = np.random.default_rng(4)
    losses = []
    net.train()
    for _epoch in range(4):
        perm = torch.tensor(g.permutation(96))
        for i in range(0, 96, 32):
            b = perm[i : i + 32]
            opt.zero_grad()
            loss = cox_loss(net(X[b]).squeeze(-1), durations[b], events[b])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    last_grads = grads(net)
    net.eval()
    with torch.no_grad():
        risk = net(X).squeeze(-1)
        full_loss = cox_loss(risk, durations, events)
    times, inv = torch.unique(durations, return_inverse=True)
    exp_g = risk.exp()
    at_risk = torch.zeros_like(times).index_add_(0, inv, exp_g).flip(0).cumsum(0).flip(0)
    d = torch.zeros_like(times).scatter_add_(0, inv, events)
    base_haz = d / at_risk
    cum_base = base_haz.cumsum(0)
    surv = torch.exp(-cum_base[None, :] * exp_g[:6, None])
    below = (surv <= 0.5).float()
    first = torch.where(below.any(1), below.argmax(1), torch.full((6,), -1))
    return {"losses": losses, "full_loss": full_loss, "params": params(net), "grads": last_grads,
            "risk": risk, "bn_running_mean": net[1].running_mean,
            "bn_running_var": net[1].running_var, "cum_base": cum_base,
            "surv_head": surv[:, ::10], "surv_last": surv[:, -1], "median_idx": first}  # fmt: skip


@program
def deephit_pmf_likelihood_and_ranking_loss(torch):
    """DeepHit (single risk) as pycox trains it: durations discretised on ``linspace`` cuts with
    ``searchsorted``, an MLP producing ``m`` logits padded with a zero column, the PMF
    negative log-likelihood with a max-stabilised ``cumsum`` of exponentials and ``gather``, the
    pairwise ranking loss ``exp(-(F_i(T_i) - F_j(T_i)) / sigma)`` over a ranking mask built by
    broadcasting, combined with ``alpha`` and trained with Adam; then PMF and survival
    predictions."""
    nn, F = torch.nn, torch.nn.functional
    x, dur, ev = _survival_data(3, 64, 3)
    X = torch.tensor(x)
    durations, events64 = torch.tensor(dur), torch.tensor(ev)
    m = 10
    cuts = torch.linspace(0, durations.max().item(), m, dtype=torch.float64)
    idx_durations = torch.searchsorted(cuts, durations).clamp(max=m - 1)
    events = events64.float()
    net = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                        nn.Linear(32, m))  # fmt: skip
    set_weights(torch, net, seed=5)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)

    def pad_col(phi):
        return torch.cat([phi, torch.zeros_like(phi[:, :1])], dim=1)

    def nll_pmf(phi, idx, e, eps=1e-7):
        phi = pad_col(phi)
        gamma = phi.max(1)[0]
        cumsum = phi.sub(gamma.view(-1, 1)).exp().cumsum(1)
        sum_ = cumsum[:, -1]
        part1 = phi.gather(1, idx.view(-1, 1)).view(-1).sub(gamma).mul(e)
        part2 = -sum_.relu().add(eps).log()
        part3 = sum_.sub(cumsum.gather(1, idx.view(-1, 1)).view(-1)).relu().add(eps).log()
        return -part1.add(part2).add(part3.mul(1.0 - e)).mean()

    dur_i, dur_j = durations[:, None], durations[None, :]
    ev_i, ev_j = events64[:, None], events64[None, :]
    rank_mat = ((dur_i < dur_j) | ((dur_i == dur_j) & (ev_j == 0))).float() * ev_i.float()

    def rank_loss(phi, idx, sigma=0.1):
        pmf = F.softmax(pad_col(phi), dim=1)
        y = F.one_hot(idx, m + 1).float()
        r = pmf.cumsum(1) @ y.T  # r[i, j] = F_i(T_j)
        diff = r.diag()[None, :] - r  # F_j(T_j) - F_i(T_j)
        return (rank_mat * torch.exp(-diff.T / sigma)).mean(1).mean()

    alpha = 0.2
    hist = {"nll": [], "rank": [], "loss": []}
    for _ in range(8):
        opt.zero_grad()
        phi = net(X)
        nll, rank = nll_pmf(phi, idx_durations, events), rank_loss(phi, idx_durations)
        loss = alpha * nll + (1 - alpha) * rank
        loss.backward()
        opt.step()
        for k, v in (("nll", nll), ("rank", rank), ("loss", loss)):
            hist[k].append(v.item())
    with torch.no_grad():
        pmf = pad_col(net(X)).softmax(1)[:, :-1]
        surv = 1 - pmf.cumsum(1)
    return {"cuts": cuts, "idx_durations": idx_durations, "rank_pairs": rank_mat.sum(),
            "hist": hist, "params": params(net), "grads": grads(net), "pmf": pmf[:8],
            "surv": surv[:8], "expected_bin": (pmf * torch.arange(m)).sum(1)[:8]}  # fmt: skip


@program
def logistic_hazard_discrete_time_nll_survival(torch):
    """The discrete-time logistic hazard (Gensheimer-Narasimhan, pycox's ``LogisticHazard``):
    interval indices from ``bucketize`` on cuts, the NLL as ``binary_cross_entropy_with_logits``
    against a ``scatter``-ed target whose ``cumsum`` is ``gather``-ed at each duration, checked
    against the same likelihood written with ``logsigmoid`` and a mask; an MLP trained with SGD
    (Nesterov momentum); survival as ``cumprod(1 - sigmoid)`` and as ``exp(cumsum(log))``,
    constant-density interpolation onto a finer grid, and predicted median intervals."""
    nn, F = torch.nn, torch.nn.functional
    x, dur, ev = _survival_data(6, 80, 3)
    X = torch.tensor(x)
    durations = torch.tensor(dur, dtype=torch.float32)
    events = torch.tensor(ev, dtype=torch.float32)
    m = 8
    cuts = torch.tensor(np.quantile(dur, np.linspace(0, 1, m + 1))[1:-1], dtype=torch.float32)
    idx = torch.bucketize(durations, cuts)
    net = nn.Sequential(nn.Linear(3, 24), nn.Tanh(), nn.Linear(24, m))
    set_weights(torch, net, seed=7)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    def nll_logistic_hazard(phi, idx_durations, e):
        y_bce = torch.zeros_like(phi).scatter(1, idx_durations.view(-1, 1), e.view(-1, 1))
        bce = F.binary_cross_entropy_with_logits(phi, y_bce, reduction="none")
        return bce.cumsum(1).gather(1, idx_durations.view(-1, 1)).view(-1).mean()

    def nll_masked(phi, idx_durations, e):
        k = torch.arange(m)[None, :]
        before = (k < idx_durations[:, None]).float()
        at = (k == idx_durations[:, None]).float()
        ll = (before * F.logsigmoid(-phi)).sum(1)
        ll = ll + (
            at * (e[:, None] * F.logsigmoid(phi) + (1 - e[:, None]) * F.logsigmoid(-phi))
        ).sum(1)
        return -ll.mean()

    losses, gaps = [], []
    for _ in range(10):
        opt.zero_grad()
        phi = net(X)
        loss = nll_logistic_hazard(phi, idx, events)
        gaps.append((loss - nll_masked(phi, idx, events)).abs().item())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        hazard = net(X[:10]).sigmoid()
        surv = (1 - hazard).cumprod(1)
        surv_log = (1 - hazard).add(1e-7).log().cumsum(1).exp()
    surv0 = F.pad(surv, (1, 0), value=1.0)
    sub = 4
    w = torch.arange(sub + 1, dtype=torch.float32)[1:] / sub
    fine = torch.lerp(surv0[:, :-1, None], surv0[:, 1:, None], w).flatten(1)
    median = (surv <= 0.5).int().argmax(1)
    return {"cuts": cuts, "idx": idx, "losses": losses, "max_gap": max(gaps),
            "params": params(net), "hazard": hazard, "surv": surv,
            "surv_gap": (surv - surv_log).abs().max(), "fine": fine, "median": median}  # fmt: skip


@program
def weibull_aft_cumulative_hazard_mle(torch):
    """lifelines' ``WeibullAFTFitter`` by hand: ``lambda = exp(b0 + x @ b)`` and ``rho =
    exp(log_rho)``, the censored log-likelihood ``e * log h(t) - H(t)`` with ``H = (t /
    lambda)**rho``, L-BFGS on the flat parameter vector, standard errors from the inverse of
    ``autograd.functional.hessian``, AIC, and predicted medians ``lambda * log(2)**(1/rho)`` and
    survival curves."""
    g = np.random.default_rng(8)
    n = 70
    x = g.standard_normal((n, 2))
    lam = np.exp(1.0 + x @ np.array([0.5, -0.3]))
    t = lam * g.weibull(1.5, n)
    c = g.uniform(1.0, 8.0, n)
    X = torch.tensor(x)
    durations = torch.tensor(np.minimum(t, c))
    events = torch.tensor((t <= c).astype(np.float64))

    def loglik(theta):
        b0, b, log_rho = theta[0], theta[1:3], theta[3]
        log_lam = b0 + X @ b
        rho = log_rho.exp()
        log_t = durations.log()
        cum_haz = torch.exp(rho * (log_t - log_lam))
        log_haz = log_rho - log_lam + (rho - 1) * (log_t - log_lam)
        return (events * log_haz - cum_haz).sum()

    theta = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=60, tolerance_grad=1e-10,
                            tolerance_change=1e-12, line_search_fn="strong_wolfe")  # fmt: skip
    evals = []

    def closure():
        opt.zero_grad()
        loss = -loglik(theta)
        loss.backward()
        evals.append(loss.item())
        return loss

    opt.step(closure)
    est = theta.detach()
    H = torch.autograd.functional.hessian(lambda th: -loglik(th), est)
    se = torch.linalg.inv(H).diagonal().sqrt()
    ll = loglik(est)
    aic = -2 * ll + 2 * est.numel()
    lam_hat = torch.exp(est[0] + X[:5] @ est[1:3])
    rho_hat = est[3].exp()
    median = lam_hat * math.log(2) ** (1 / rho_hat)
    grid = torch.linspace(0.5, 6.0, 12, dtype=torch.float64)
    surv = torch.exp(-((grid[None, :] / lam_hat[:, None]) ** rho_hat))
    return {"theta": est, "se": se, "ll": ll, "aic": aic, "first_evals": evals[:4],
            "median": median, "surv": surv, "rho": rho_hat}  # fmt: skip


@program
def kaplan_meier_nelson_aalen_greenwood_intervals(torch):
    """Kaplan-Meier and Nelson-Aalen estimators over unique durations: deaths by ``bincount``,
    numbers at risk by a reversed ``cumsum`` (checked against a broadcast comparison), the
    product-limit ``cumprod``, Greenwood variance and lifelines' exponential (log-log) 95%
    intervals, the Nelson-Aalen ``cumsum`` with its tie-corrected variant over a masked grid,
    median survival with ``searchsorted`` on the negated curve, step-function evaluation at
    query times, the restricted mean survival time, per-group curves, and a printed table."""
    _, dur, ev = _survival_data(9, 70, 2, ties=True)
    durations, events = torch.tensor(dur), torch.tensor(ev).bool()
    groups = torch.tensor(np.random.default_rng(10).integers(0, 2, 70))
    z = torch.special.ndtri(torch.tensor(0.975, dtype=torch.float64))

    def km_table(t, e):
        times, inv, counts = torch.unique(t, return_inverse=True, return_counts=True)
        deaths = torch.bincount(inv, weights=e.double(), minlength=times.numel())
        at_risk = counts.flip(0).cumsum(0).flip(0)
        surv = torch.cumprod(1 - deaths / at_risk, dim=0)
        return times, counts, deaths, at_risk, surv

    times, counts, deaths, at_risk, km = km_table(durations, events)
    at_risk_check = (durations[None, :] >= times[:, None]).sum(1)
    n = at_risk.double()
    gw_terms = torch.where(n > deaths, deaths / (n * (n - deaths)), torch.zeros_like(n))
    gw_sum = gw_terms.cumsum(0)
    greenwood = km**2 * gw_sum
    ok = (km > 0) & (km < 1)
    log_km = torch.where(ok, km, torch.full_like(km, 0.5)).log()
    v = gw_sum / log_km**2
    c = torch.log(-log_km)
    lower = torch.where(ok, torch.exp(-torch.exp(c + z * v.sqrt())), km)
    upper = torch.where(ok, torch.exp(-torch.exp(c - z * v.sqrt())), km)
    na = torch.cumsum(deaths / n, 0)
    na_var = torch.cumsum(deaths / n**2, 0)
    maxd = int(deaths.max().item())
    j = torch.arange(maxd, dtype=torch.float64)
    na_ties = torch.where(j[None, :] < deaths[:, None], 1 / (n[:, None] - j[None, :]), 0.0)
    na_ties = na_ties.sum(1).cumsum(0)
    median_idx = torch.searchsorted(-km, torch.tensor([-0.5], dtype=torch.float64))
    median = times[median_idx] if median_idx.item() < times.numel() else torch.tensor(math.inf)
    q = torch.tensor([0.0, 0.75, 1.5, 3.0, 5.25, 100.0], dtype=torch.float64)
    pos = torch.searchsorted(times, q, right=True) - 1
    s_at = torch.where(pos >= 0, km[pos.clamp(min=0)], torch.ones_like(q))
    widths = torch.diff(times, prepend=torch.zeros(1, dtype=torch.float64))
    rmst = (torch.cat([torch.ones(1, dtype=torch.float64), km[:-1]]) * widths).sum()
    per_group = {}
    for k in range(2):
        sel = groups == k
        t_k, _, d_k, n_k, s_k = km_table(durations[sel], events[sel])
        per_group[f"g{k}"] = {"times": t_k, "deaths": d_k, "at_risk": n_k, "surv": s_k}
    lines = ["timeline  at_risk  observed  censored  KM_estimate"]
    for i in range(8):
        lines.append(f"{times[i].item():8.2f} {at_risk[i].item():8d} {deaths[i].item():9.0f} "
                     f"{(counts[i] - deaths[i]).item():9.0f} {km[i].item():12.6f}")  # fmt: skip
    return {"times": times, "counts": counts, "deaths": deaths, "at_risk": at_risk,
            "at_risk_ok": bool(torch.equal(at_risk, at_risk_check)), "km": km,
            "greenwood": greenwood, "lower": lower, "upper": upper, "na": na, "na_var": na_var,
            "na_ties": na_ties, "fh_surv": torch.exp(-na), "median": median, "s_at": s_at,
            "rmst": rmst, "groups": per_group, "table": "\n".join(lines)}  # fmt: skip


@program
def harrell_uno_concordance_time_dependent_auc(torch):
    """Concordance as lifelines and scikit-survival compute it, vectorised with broadcasting:
    Harrell's C over comparable pairs (including event-before-censoring ties in time) with half
    credit for tied risks, Somers' D, Uno's IPCW C with the censoring distribution's
    Kaplan-Meier evaluated just before each time and a truncation time, the cumulative/dynamic
    AUC at three horizons, and a sigmoid-smoothed C as a differentiable loss with its gradient
    for a linear risk score."""
    x, dur, ev = _survival_data(11, 60, 3, ties=True)
    durations, events = torch.tensor(dur), torch.tensor(ev).bool()
    X = torch.tensor(x, dtype=torch.float64)
    beta = torch.tensor([0.7, -0.4, 0.2], dtype=torch.float64)
    risk = torch.round(X @ beta, decimals=1)  # rounded scores: ties in risk

    ti, tj = durations[:, None], durations[None, :]
    ei, ej = events[:, None], events[None, :]
    comparable = ((ti < tj) & ei) | ((ti == tj) & ei & ~ej)
    ri, rj = risk[:, None], risk[None, :]
    concordant = (ri > rj) & comparable
    tied = (ri == rj) & comparable
    harrell = (concordant.sum() + 0.5 * tied.sum()) / comparable.sum()

    times, inv, counts = torch.unique(durations, return_inverse=True, return_counts=True)
    cens = torch.bincount(inv, weights=(~events).double(), minlength=times.numel())
    at_risk = counts.flip(0).cumsum(0).flip(0)
    G = torch.cumprod(1 - cens / at_risk, 0)
    pos = torch.searchsorted(times, durations, right=False) - 1
    G_left = torch.where(pos >= 0, G[pos.clamp(min=0)], torch.ones_like(durations))
    tau = torch.quantile(durations, 0.8)
    w = torch.where(G_left > 0, 1 / G_left**2, torch.zeros_like(G_left))
    uno_pairs = (ti < tj) & ei & (ti < tau)
    wmat = w[:, None] * uno_pairs
    uno = (wmat * ((ri > rj).double() + 0.5 * (ri == rj).double())).sum() / wmat.sum()

    aucs = []
    for horizon in (1.0, 2.5, 4.0):
        cases = (durations <= horizon) & events
        controls = durations > horizon
        wc = torch.where(cases, 1 / G_left, torch.zeros_like(G_left))
        score = (risk[cases][:, None] > risk[controls][None, :]).double()
        score += 0.5 * (risk[cases][:, None] == risk[controls][None, :]).double()
        aucs.append((wc[cases][:, None] * score).sum() / (wc[cases].sum() * controls.sum()))

    b = beta.clone().requires_grad_(True)
    s = X @ b
    smooth = (torch.sigmoid((s[:, None] - s[None, :]) / 0.1) * comparable).sum() / comparable.sum()
    smooth.backward()
    return {"comparable": comparable.sum(), "concordant": concordant.sum(), "tied": tied.sum(),
            "harrell": harrell, "somers_d": 2 * harrell - 1, "G": G, "tau": tau, "uno": uno,
            "auc": torch.stack(aucs), "smooth_c": smooth, "smooth_grad": b.grad}  # fmt: skip


@program
def logrank_weighted_and_k_sample_tests(torch):
    """Log-rank tests as lifelines' ``logrank_test`` and ``multivariate_logrank_test`` compute
    them: numbers at risk and deaths per event time by broadcasting, expected deaths and the
    hypergeometric variance (guarded where only one subject remains), weighted variants
    (Wilcoxon, Tarone-Ware, Fleming-Harrington with the pooled left-continuous Kaplan-Meier),
    chi-square p-values with ``special.gammaincc`` and two-sided normal ones with
    ``special.erfc``; the three-group test with the ``(k-1)`` covariance and ``linalg.solve``;
    and a printed summary."""
    F = torch.nn.functional
    _, dur, ev = _survival_data(12, 72, 2, ties=True)
    g = np.random.default_rng(13)
    grp = torch.tensor(g.integers(0, 3, 72))
    durations = torch.tensor(dur * np.where(grp.numpy() == 2, 0.7, 1.0))
    events = torch.tensor(ev).bool()
    event_times = torch.unique(durations[events])
    at_risk = durations[None, :] >= event_times[:, None]
    died = (durations[None, :] == event_times[:, None]) & events[None, :]
    n, d = at_risk.sum(1).double(), died.sum(1).double()

    two = grp < 2
    n1 = (at_risk & (grp == 1)[None, :] & two).sum(1).double()
    d1 = (died & (grp == 1)[None, :] & two).sum(1).double()
    n2 = (at_risk & two).sum(1).double()
    d2 = (died & two).sum(1).double()
    keep = n2 > 0
    n1, d1, n2, d2 = n1[keep], d1[keep], n2[keep], d2[keep]
    E1 = d2 * n1 / n2
    V = torch.where(n2 > 1, n1 * (n2 - n1) * d2 * (n2 - d2) / (n2**2 * (n2 - 1)),
                    torch.zeros_like(n2))  # fmt: skip
    km_pooled = torch.cumprod(1 - d2 / n2, 0)
    s_left = torch.cat([torch.ones(1, dtype=torch.float64), km_pooled[:-1]])
    weights = {"logrank": torch.ones_like(n2), "wilcoxon": n2, "tarone_ware": n2.sqrt(),
               "fleming_harrington_0_1": 1 - s_left}  # fmt: skip
    results, lines = {}, []
    half = torch.tensor(0.5, dtype=torch.float64)
    for name, w in weights.items():
        zstat = (w * (d1 - E1)).sum() / (w**2 * V).sum().sqrt()
        chi2 = zstat**2
        p = torch.special.gammaincc(half, chi2 / 2)
        p_norm = torch.special.erfc(zstat.abs() / math.sqrt(2))
        results[name] = {"z": zstat, "chi2": chi2, "p": p, "p_norm": p_norm}
        lines.append(f"{name:<24} test_statistic={chi2.item():.4f} p={p.item():.4f} "
                     f"-log2(p)={-math.log2(p.item()):.2f}")  # fmt: skip

    k = 3
    onehot = F.one_hot(grp, k).double()
    n_k = at_risk.double() @ onehot  # (T, k)
    d_k = died.double() @ onehot
    O_minus_E = (d_k - d[:, None] * n_k / n[:, None]).sum(0)
    factor = torch.where(n > 1, d * (n - d) / (n - 1), torch.zeros_like(n))
    frac = n_k / n[:, None]
    cov = factor[:, None, None] * (torch.diag_embed(frac) - frac[:, :, None] * frac[:, None, :])
    cov = cov.sum(0)
    u = O_minus_E[: k - 1]
    chi2_k = u @ torch.linalg.solve(cov[: k - 1, : k - 1], u)
    p_k = torch.special.gammaincc(torch.tensor((k - 1) / 2, dtype=torch.float64), chi2_k / 2)
    return {"event_times": event_times, "n": n, "d": d, "E1": E1, "V": V, "tests": results,
            "O_minus_E": O_minus_E, "cov": cov, "chi2_k": chi2_k, "p_k": p_k,
            "summary": "\n".join(lines)}  # fmt: skip


@program
def bootstrap_percentile_basic_bca_intervals(torch):
    """Nonparametric bootstrap as ``scipy.stats.bootstrap`` does it, with resampling indices
    drawn by NumPy: replicates of the mean, the (lower) median, the standard deviation and the
    Pearson correlation by fancy indexing a ``(B, n)`` index matrix; percentile intervals with
    ``torch.quantile`` (linear, lower, higher, midpoint), basic intervals, the bootstrap
    standard error and bias, and BCa intervals from the bias-correction ``ndtri(P(theta* <
    theta))`` and the jackknife acceleration (leave-one-out samples by boolean masking)."""
    g = np.random.default_rng(14)
    n, B = 40, 300
    x = torch.tensor(g.lognormal(0.0, 0.6, n))
    y = 0.5 * x + torch.tensor(g.normal(0.0, 0.3, n))
    idx = torch.tensor(g.integers(0, n, (B, n)))
    xb, yb = x[idx], y[idx]
    stats = {"mean": (x.mean(), xb.mean(1)), "median": (x.median(), xb.median(1).values),
             "std": (x.std(), xb.std(1))}  # fmt: skip
    xc, yc = xb - xb.mean(1, keepdim=True), yb - yb.mean(1, keepdim=True)
    r_boot = (xc * yc).sum(1) / torch.sqrt((xc**2).sum(1) * (yc**2).sum(1))
    stats["corr"] = (torch.corrcoef(torch.stack([x, y]))[0, 1], r_boot)
    probs = torch.tensor([0.025, 0.975], dtype=torch.float64)
    keep = ~torch.eye(n, dtype=torch.bool)
    x_loo = x.expand(n, n)[keep].view(n, n - 1)
    y_loo = y.expand(n, n)[keep].view(n, n - 1)
    xl, yl = x_loo - x_loo.mean(1, keepdim=True), y_loo - y_loo.mean(1, keepdim=True)
    jack = {"mean": x_loo.mean(1), "median": x_loo.median(1).values, "std": x_loo.std(1),
            "corr": (xl * yl).sum(1) / ((xl**2).sum(1) * (yl**2).sum(1)).sqrt()}  # fmt: skip
    zq = torch.special.ndtri(probs)
    out = {}
    for name, (theta, boot) in stats.items():
        pct = torch.quantile(boot, probs)
        basic = 2 * theta - pct.flip(0)
        z0 = torch.special.ndtri((boot < theta).double().mean())
        jk = jack[name]
        dj = jk.mean() - jk
        a = (dj**3).sum() / (6 * ((dj**2).sum()) ** 1.5)
        adj = torch.special.ndtr(z0 + (z0 + zq) / (1 - a * (z0 + zq)))
        out[name] = {"theta": theta, "se": boot.std(), "bias": boot.mean() - theta,
                     "percentile": pct, "basic": basic, "z0": z0, "a": a, "bca": torch.quantile(boot, adj),
                     "lower": torch.quantile(boot, probs, interpolation="lower"),
                     "higher": torch.quantile(boot, probs, interpolation="higher"),
                     "midpoint": torch.quantile(boot, probs, interpolation="midpoint")}  # fmt: skip
    return out


@program
def permutation_sign_flip_and_exact_tests(torch):
    """Permutation tests with NumPy-drawn permutations: the two-sample difference in means over
    a ``(P, n)`` matrix of permuted indices with the ``(count + 1) / (P + 1)`` p-value, a paired
    sign-flip test, a correlation test permuting one variable, Spearman's rho from double
    ``argsort`` ranks, and the exact test enumerating all splits with ``torch.combinations`` and
    a ``scatter``-ed membership mask, compared with a relative tolerance as scipy does."""
    g = np.random.default_rng(15)
    a = torch.tensor(g.normal(0.4, 1.0, 12))
    b = torch.tensor(g.normal(0.0, 1.2, 15))
    pooled = torch.cat([a, b])
    na, N, P = 12, 27, 400
    perms = torch.tensor(np.stack([g.permutation(N) for _ in range(P)]))
    shuffled = pooled[perms]
    null = shuffled[:, :na].mean(1) - shuffled[:, na:].mean(1)
    obs = a.mean() - b.mean()
    p_two = ((null.abs() >= obs.abs()).sum() + 1) / (P + 1)
    p_greater = ((null >= obs).sum() + 1) / (P + 1)

    before = torch.tensor(g.normal(5.0, 1.0, 16))
    after = before + torch.tensor(g.normal(0.3, 0.6, 16))
    diff = after - before
    signs = torch.tensor(g.choice([-1.0, 1.0], size=(P, 16)))
    flip_null = (signs * diff).mean(1)
    p_paired = ((flip_null.abs() >= diff.mean().abs()).sum() + 1) / (P + 1)

    u = torch.tensor(g.normal(0.0, 1.0, 20))
    v = 0.4 * u + torch.tensor(g.normal(0.0, 1.0, 20))
    vp = v[torch.tensor(np.stack([g.permutation(20) for _ in range(P)]))]
    uc = u - u.mean()
    r_null = (uc * (vp - vp.mean(1, keepdim=True))).sum(1) / (
        uc.norm() * (vp - vp.mean(1, keepdim=True)).norm(dim=1)
    )
    r_obs = torch.corrcoef(torch.stack([u, v]))[0, 1]
    p_corr = ((r_null.abs() >= r_obs.abs()).sum() + 1) / (P + 1)
    ru = u.argsort().argsort().double()
    rv = v.argsort().argsort().double()
    spearman = torch.corrcoef(torch.stack([ru, rv]))[0, 1]

    small = torch.cat([a[:4], b[:4]])
    combos = torch.combinations(torch.arange(8), r=4)
    member = torch.zeros(combos.shape[0], 8, dtype=torch.bool).scatter_(1, combos, True)
    sums = (small * member).sum(1)
    exact_null = sums / 4 - (small.sum() - sums) / 4
    exact_obs = small[:4].mean() - small[4:].mean()
    gamma = 1e-14 * exact_obs.abs()
    p_exact = (exact_null.abs() >= exact_obs.abs() - gamma).double().mean()
    return {"obs": obs, "null_head": null[:10], "null_std": null.std(), "p_two": p_two,
            "p_greater": p_greater, "p_paired": p_paired, "flip_null_std": flip_null.std(),
            "r_obs": r_obs, "r_null_head": r_null[:8], "p_corr": p_corr, "spearman": spearman,
            "combos": combos[[0, 1, -1]], "n_combos": combos.shape[0], "exact_obs": exact_obs,
            "p_exact": p_exact}  # fmt: skip


@program
def gaussian_kde_scott_silverman_loo_bandwidth(torch):
    """Gaussian kernel density estimates as ``scipy.stats.gaussian_kde`` computes them: Scott's
    factor ``n**(-1/(d+4))``, the log-density on a grid with ``logsumexp``, its ``trapezoid``
    integral, the CDF from ``special.ndtr``, Silverman's rule with the IQR from
    ``torch.quantile``; a 2-D estimate with ``torch.cov``, a Cholesky factor and
    ``solve_triangular``; a density histogram with ``torch.histogram``; and the bandwidth fitted
    by maximising the leave-one-out likelihood (diagonal masked to ``-inf``) with Adam on
    ``log h``."""
    g = np.random.default_rng(16)
    data = torch.tensor(np.concatenate([g.normal(0.0, 1.0, 40), g.normal(3.0, 0.5, 20)]))
    n = data.numel()
    factor = n ** (-1 / 5)
    bw = factor * data.std()
    grid = torch.linspace(-4, 6, 41, dtype=torch.float64)
    zz = (grid[:, None] - data[None, :]) / bw
    logpdf = torch.logsumexp(-0.5 * zz**2, 1) - math.log(n) - bw.log() - 0.5 * math.log(2 * math.pi)
    pdf = logpdf.exp()
    cdf = torch.special.ndtr(zz).mean(1)
    q75, q25 = torch.quantile(data, torch.tensor([0.75, 0.25], dtype=torch.float64))
    silverman = 0.9 * torch.minimum(data.std(), (q75 - q25) / 1.34) * n ** (-0.2)

    d2 = torch.tensor(
        np.stack([g.normal(0, 1, 50), g.normal(0, 1, 50)], 1) @ np.array([[1.0, 0.6], [0.0, 0.8]])
    )
    f2 = d2.shape[0] ** (-1 / 6)
    cov = torch.cov(d2.T) * f2**2
    L = torch.linalg.cholesky(cov)
    pts = torch.tensor(g.normal(0, 1.2, (7, 2)))
    diff = (pts[:, None, :] - d2[None, :, :]).reshape(-1, 2).T
    sol = torch.linalg.solve_triangular(L, diff, upper=False)
    maha = (sol**2).sum(0).view(7, 50)
    log_norm = 0.5 * torch.logdet(2 * math.pi * cov)
    logpdf2 = torch.logsumexp(-0.5 * maha, 1) - math.log(50) - log_norm

    hist, edges = torch.histogram(data, bins=12, density=True)

    log_h = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_h], lr=0.1)
    dist2 = (data[:, None] - data[None, :]) ** 2
    eye = torch.eye(n, dtype=torch.bool)
    loo_hist = []
    for _ in range(15):
        opt.zero_grad()
        h = log_h.exp()
        logk = -0.5 * dist2 / h**2 - log_h - 0.5 * math.log(2 * math.pi)
        logk = logk.masked_fill(eye, float("-inf"))
        loss = -(torch.logsumexp(logk, 1) - math.log(n - 1)).mean()
        loss.backward()
        opt.step()
        loo_hist.append(loss.item())
    return {"bw": bw, "logpdf": logpdf, "integral": torch.trapezoid(pdf, grid), "cdf": cdf,
            "silverman": silverman, "iqr": q75 - q25, "cov2": cov, "logpdf2": logpdf2,
            "hist": hist, "edges": edges, "loo_hist": loo_hist, "h": log_h.exp()}  # fmt: skip


@program
def welch_t_mann_whitney_chi2_special_functions(torch):
    """Classical tests as ``scipy.stats`` reports them, written with torch: Welch's t with the
    Welch-Satterthwaite degrees of freedom and Student's pooled t, Student-t p-values by
    integrating the density (``lgamma``, ``log1p``) with ``trapezoid`` and a CDF table with
    ``cumulative_trapezoid``, the normal approximation with ``special.ndtr``, Cohen's d and
    Hedges' g (exact ``lgamma`` correction), Mann-Whitney U with average ranks for ties
    (``unique_consecutive`` + ``scatter``) and the tie-corrected normal approximation, a
    chi-square test of independence and the G-test (``special.xlogy``) with ``gammaincc``
    p-values and Cramer's V, and a Fisher-z interval for a correlation."""
    g = np.random.default_rng(17)
    a = torch.tensor(np.round(g.normal(10.0, 2.0, 14), 1))
    b = torch.tensor(np.round(g.normal(11.5, 3.0, 20), 1))
    na, nb = a.numel(), b.numel()
    va, vb = a.var(), b.var()
    se2 = va / na + vb / nb
    t_welch = (a.mean() - b.mean()) / se2.sqrt()
    df_welch = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    sp2 = ((na - 1) * va + (nb - 1) * vb) / (na + nb - 2)
    t_pooled = (a.mean() - b.mean()) / torch.sqrt(sp2 * (1 / na + 1 / nb))

    def t_pdf(x, df):
        logc = torch.lgamma((df + 1) / 2) - torch.lgamma(df / 2) - 0.5 * torch.log(df * math.pi)
        return torch.exp(logc - (df + 1) / 2 * torch.log1p(x**2 / df))

    def t_two_sided(t, df, steps=4001):
        xs = torch.linspace(0, 1, steps, dtype=torch.float64) * t.abs()
        return 1 - 2 * torch.trapezoid(t_pdf(xs, df), xs)

    df_pooled = torch.tensor(float(na + nb - 2), dtype=torch.float64)
    p_welch = t_two_sided(t_welch, df_welch)
    p_pooled = t_two_sided(t_pooled, df_pooled)
    xs = torch.linspace(0, 4, 81, dtype=torch.float64)
    cdf_table = 0.5 + torch.cumulative_trapezoid(t_pdf(xs, df_welch), xs)
    p_normal = 2 * torch.special.ndtr(-t_welch.abs())
    cohen_d = (a.mean() - b.mean()) / sp2.sqrt()
    dfh = df_pooled
    J = torch.exp(torch.lgamma(dfh / 2) - 0.5 * torch.log(dfh / 2) - torch.lgamma((dfh - 1) / 2))
    hedges_g = J * cohen_d

    pooled = torch.cat([a, b])
    sv, order = torch.sort(pooled, stable=True)
    _, inv, counts = torch.unique_consecutive(sv, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    avg_rank = ends - (counts.double() - 1) / 2
    ranks = torch.empty_like(pooled).scatter_(0, order, avg_rank[inv])
    U = ranks[:na].sum() - na * (na + 1) / 2
    N = na + nb
    tie_term = ((counts.double() ** 3 - counts.double()).sum()) / (N * (N - 1))
    sigma_u = math.sqrt(na * nb / 12) * torch.sqrt((N + 1) - tie_term)
    z_u = (U - na * nb / 2 - 0.5 * torch.sign(U - na * nb / 2)) / sigma_u
    p_u = torch.special.erfc(z_u.abs() / math.sqrt(2))

    table = torch.tensor([[12.0, 25.0, 18.0], [20.0, 14.0, 11.0]], dtype=torch.float64)
    expected = table.sum(1, keepdim=True) * table.sum(0, keepdim=True) / table.sum()
    chi2 = ((table - expected) ** 2 / expected).sum()
    dof = torch.tensor((table.shape[0] - 1) * (table.shape[1] - 1), dtype=torch.float64)
    p_chi2 = torch.special.gammaincc(dof / 2, chi2 / 2)
    G = 2 * torch.special.xlogy(table, table / expected).sum()
    p_G = torch.special.gammaincc(dof / 2, G / 2)
    cramers_v = torch.sqrt(chi2 / (table.sum() * (min(table.shape) - 1)))

    u = torch.tensor(g.normal(0, 1, 30))
    v = 0.5 * u + torch.tensor(g.normal(0, 1, 30))
    r = torch.corrcoef(torch.stack([u, v]))[0, 1]
    zr = torch.atanh(r)
    half = torch.special.ndtri(torch.tensor(0.975, dtype=torch.float64)) / math.sqrt(30 - 3)
    r_ci = torch.tanh(torch.stack([zr - half, zr + half]))
    report = (f"Welch t = {t_welch.item():.4f}, df = {df_welch.item():.2f}, "
              f"p = {p_welch.item():.4f}; U = {U.item():.1f}, p = {p_u.item():.4f}")  # fmt: skip
    return {"t_welch": t_welch, "df_welch": df_welch, "t_pooled": t_pooled, "p_welch": p_welch,
            "p_pooled": p_pooled, "cdf_table": cdf_table, "p_normal": p_normal,
            "cohen_d": cohen_d, "hedges_g": hedges_g, "ranks": ranks, "U": U, "z_u": z_u,
            "p_u": p_u, "expected": expected, "chi2": chi2, "p_chi2": p_chi2, "G": G,
            "p_G": p_G, "cramers_v": cramers_v, "r": r, "r_ci": r_ci, "report": report}  # fmt: skip


@program
def parametric_survival_distributions_lognormal_aft(torch):
    """Parametric survival fits with ``torch.distributions`` as lifelines' univariate fitters do
    them: censored log-likelihoods ``e * log_prob(t) + (1 - e) * log S(t)`` for Exponential,
    Weibull (``1 - cdf``) and LogNormal (survival via ``special.log_ndtr``), each with unconstrained
    parameters fitted by Adam, then AIC, medians from ``icdf`` and survival at fixed times; a
    Gamma by the method of moments (``cdf`` through the regularized incomplete gamma); and a
    log-logistic AFT with covariates written with ``F.logsigmoid``."""
    D, F = torch.distributions, torch.nn.functional
    g = np.random.default_rng(18)
    n = 80
    t = g.lognormal(0.8, 0.7, n)
    c = g.uniform(1.0, 9.0, n)
    durations = torch.tensor(np.minimum(t, c))
    events = torch.tensor((t <= c).astype(np.float64))
    x = torch.tensor(g.standard_normal((n, 2)))

    def make(name, p):
        if name == "exponential":
            return D.Exponential(p[0].exp())
        if name == "weibull":
            return D.Weibull(p[0].exp(), p[1].exp())
        return D.LogNormal(p[0], p[1].exp())

    def log_surv(name, dist, p):
        if name == "lognormal":
            return torch.special.log_ndtr(-(durations.log() - p[0]) / p[1].exp())
        if name == "exponential":
            return -dist.rate * durations
        return torch.log1p(-dist.cdf(durations))

    out = {}
    q = torch.tensor([1.0, 2.5, 5.0], dtype=torch.float64)
    for name, k in (("exponential", 1), ("weibull", 2), ("lognormal", 2)):
        p = torch.zeros(k, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([p], lr=0.05)
        hist = []
        for _ in range(40):
            opt.zero_grad()
            dist = make(name, p)
            ll = (events * dist.log_prob(durations) + (1 - events) * log_surv(name, dist, p)).sum()
            (-ll).backward()
            opt.step()
            hist.append(ll.item())
        with torch.no_grad():
            dist = make(name, p)
            entry = {"params": p.detach().clone(), "ll": hist[-1], "ll_hist": hist[::8],
                     "aic": -2 * hist[-1] + 2 * k, "mean": dist.mean,
                     "surv_q": 1 - dist.cdf(q)}  # fmt: skip
            entry["median"] = dist.icdf(torch.tensor(0.5, dtype=torch.float64))
        out[name] = entry
    obs = durations[events.bool()]
    gamma = D.Gamma(obs.mean() ** 2 / obs.var(), obs.mean() / obs.var())  # moments, events only
    out["gamma_moments"] = {"ll": gamma.log_prob(obs).sum(), "surv_q": 1 - gamma.cdf(q),
                            "entropy": gamma.entropy(), "variance": gamma.variance}  # fmt: skip

    theta = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=0.05)
    for _ in range(40):
        opt.zero_grad()
        mu = theta[0] + x @ theta[1:3]
        s = theta[3].exp()
        z = (durations.log() - mu) / s
        log_sf = F.logsigmoid(-z)
        log_pdf = F.logsigmoid(z) + F.logsigmoid(-z) - s.log() - durations.log()
        ll = (events * log_pdf + (1 - events) * log_sf).sum()
        (-ll).backward()
        opt.step()
    out["loglogistic_aft"] = {"theta": theta.detach(), "ll": ll.detach(), "grad": theta.grad}
    return out


@program
def mtlr_and_aalen_johansen_competing_risks(torch):
    """Multi-task logistic regression (Yu et al., as in torchmtlr): per-interval logits summed
    by a ``tril`` of ones, the censored likelihood with ``logsumexp`` over the intervals each
    subject may have failed in, a linear MTLR layer trained with Adam with a smoothness penalty on
    ``diff`` of its weights, survival from ``softmax`` and ``flip(cumsum)``; and the Aalen-Johansen
    cumulative incidence of two competing causes (cause-specific deaths with ``index_put_``
    accumulation, left-continuous overall Kaplan-Meier), with ``torch.diff(..., append=...)``
    increments."""
    nn = torch.nn
    g = np.random.default_rng(19)
    n, p, m = 60, 3, 6
    x = g.standard_normal((n, p)).astype(np.float32)
    t = g.exponential(3.0, n) * np.exp(-0.5 * x[:, 0])
    c = g.exponential(6.0, n)
    X = torch.tensor(x)
    durations = torch.tensor(np.minimum(t, c), dtype=torch.float32)
    events = torch.tensor((t <= c).astype(np.float32))
    cuts = torch.tensor(np.quantile(np.minimum(t, c), np.linspace(0, 1, m + 1))[1:-1],
                        dtype=torch.float32)  # fmt: skip
    bins = torch.bucketize(durations, cuts)

    class MTLR(nn.Module):
        def __init__(self, in_features, num_time_bins):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(in_features, num_time_bins - 1))
            self.bias = nn.Parameter(torch.zeros(num_time_bins - 1))
            self.register_buffer("G", torch.tril(torch.ones(num_time_bins - 1, num_time_bins)))

        def forward(self, x):
            out = x @ self.weight + self.bias
            return out @ self.G

    model = set_weights(torch, MTLR(p, m), seed=20, scale=0.3)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    k = torch.arange(m)
    y_event = (k[None, :] == bins[:, None]).float()
    y_cens = (k[None, :] >= bins[:, None]).float()
    y = torch.where(events[:, None] > 0, y_event, y_cens)
    losses = []
    for _ in range(12):
        opt.zero_grad()
        logits = model(X)
        masked = logits.masked_fill(y == 0, float("-inf"))
        nll = -(torch.logsumexp(masked, 1) - torch.logsumexp(logits, 1)).mean()
        smooth = torch.diff(model.weight, dim=1).pow(2).sum()
        loss = nll + 0.01 * smooth
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        dens = torch.softmax(model(X[:8]), dim=1)
        surv = dens.flip(1).cumsum(1).flip(1)

    cause = torch.tensor(np.where(t <= c, g.integers(1, 3, n), 0))
    dur64 = durations.double()
    times, inv, counts = torch.unique(dur64, return_inverse=True, return_counts=True)
    T = times.numel()
    d_cause = torch.zeros(T, 3, dtype=torch.float64)
    d_cause.index_put_((inv, cause), torch.ones(n, dtype=torch.float64), accumulate=True)
    at_risk = counts.flip(0).cumsum(0).flip(0).double()
    d_all = d_cause[:, 1:].sum(1)
    km = torch.cumprod(1 - d_all / at_risk, 0)
    km_left = torch.cat([torch.ones(1, dtype=torch.float64), km[:-1]])
    cif = torch.cumsum(km_left[:, None] * d_cause[:, 1:] / at_risk[:, None], 0)
    incr = torch.diff(cif, dim=0, prepend=torch.zeros(1, 2, dtype=torch.float64))
    gaps = torch.diff(times, append=times[-1:])
    return {"bins": bins, "y_rows": y.sum(1), "losses": losses, "weight": model.weight,
            "bias": model.bias, "grad_w": model.weight.grad, "surv": surv, "dens": dens,
            "d_cause": d_cause.sum(0), "km": km, "cif": cif, "cif_total_gap":
            (cif.sum(1) + km - 1).abs().max(), "incr_max": incr.max(0).values,
            "gaps": gaps}  # fmt: skip


@program
def multiple_testing_ks_kendall_isotonic(torch):
    """Multiple testing and nonparametric statistics as statsmodels and scipy compute them:
    Benjamini-Hochberg adjusted p-values (sort, scale by ``n / rank``, reversed ``cummin``,
    clamp, scatter back), Holm's step-down (``cummax``), Bonferroni; the two-sample
    Kolmogorov-Smirnov statistic from ECDFs evaluated with ``searchsorted`` and its asymptotic
    p-value series; Kendall's tau-b from pairwise signs with ``triu`` and tie corrections; and
    isotonic regression by pool-adjacent-violators against an ``argsort``-ed predictor."""
    g = np.random.default_rng(21)
    pvals = torch.tensor(np.concatenate([g.uniform(0, 0.01, 5), g.uniform(0, 1, 25)]))
    m = pvals.numel()
    sp, order = torch.sort(pvals)
    ranks = torch.arange(1, m + 1, dtype=torch.float64)
    bh_sorted = torch.flip(torch.cummin(torch.flip(sp * m / ranks, [0]), 0).values, [0])
    bh = torch.empty_like(pvals).scatter_(0, order, bh_sorted.clamp(max=1))
    holm_sorted = torch.cummax((m - ranks + 1) * sp, 0).values.clamp(max=1)
    holm = torch.empty_like(pvals)
    holm[order] = holm_sorted
    bonf = (pvals * m).clamp(max=1)

    a = torch.tensor(g.normal(0, 1, 35))
    b = torch.tensor(g.normal(0.5, 1.3, 40))
    pts = torch.cat([a, b]).sort().values
    cdf_a = torch.searchsorted(a.sort().values, pts, right=True) / a.numel()
    cdf_b = torch.searchsorted(b.sort().values, pts, right=True) / b.numel()
    D = (cdf_a - cdf_b).abs().max()
    en = math.sqrt(a.numel() * b.numel() / (a.numel() + b.numel()))
    lam = (en + 0.12 + 0.11 / en) * D
    j = torch.arange(1, 101, dtype=torch.float64)
    p_ks = (2 * ((-1) ** (j - 1) * torch.exp(-2 * j**2 * lam**2)).sum()).clamp(0, 1)

    u = torch.tensor(np.round(g.normal(0, 1, 25), 1))
    v = torch.tensor(np.round(0.6 * u.numpy() + g.normal(0, 0.8, 25), 1))
    iu = torch.triu_indices(25, 25, offset=1)
    su = torch.sign(u[iu[0]] - u[iu[1]])
    sv = torch.sign(v[iu[0]] - v[iu[1]])
    n0 = iu.shape[1]
    n1, n2 = (su == 0).sum(), (sv == 0).sum()
    tau_b = (su * sv).sum() / torch.sqrt((n0 - n1) * (n0 - n2))

    xs = torch.tensor(g.uniform(0, 5, 30))
    ys = torch.tensor(np.log1p(xs.numpy()) + g.normal(0, 0.3, 30))
    idx = torch.argsort(xs)
    yv = ys[idx].tolist()
    blocks = []  # [mean, weight]
    for val in yv:
        blocks.append([val, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    means = torch.tensor([bl[0] for bl in blocks], dtype=torch.float64)
    sizes = torch.tensor([int(bl[1]) for bl in blocks])
    fitted = torch.repeat_interleave(means, sizes)
    iso = torch.empty_like(ys).index_copy_(0, idx, fitted)
    return {"bh": bh, "holm": holm, "bonf": bonf, "n_reject_bh": (bh <= 0.05).sum(),
            "n_reject_holm": (holm <= 0.05).sum(), "D": D, "p_ks": p_ks, "tau_b": tau_b,
            "n_ties": torch.stack([n1, n2]), "iso": iso, "n_blocks": len(blocks),
            "iso_sse": ((iso - ys) ** 2).sum()}  # fmt: skip
