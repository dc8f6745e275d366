"""Quantitative finance and time-series statistics as quants write them with torch: log and
cumulative returns, drawdowns with ``cummax``, rolling windows with ``Tensor.unfold``, EWMA
(RiskMetrics) volatility as a recursion and as a convolution, technical indicators, Sharpe and
Sortino ratios, historical and parametric value-at-risk and expected shortfall, covariance and
correlation estimates with shrinkage, mean-variance and risk-parity portfolios (closed form and
Adam on softmax-parameterised weights), Black-Scholes prices, greeks by autograd and implied
volatility by Newton, Monte Carlo paths from NumPy normals, GARCH(1,1) maximum likelihood, an LSTM
forecaster trained with teacher forcing, and quantile (pinball) regression of value-at-risk."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import grads, set_weights


def _prices(seed: int, steps: int, assets: int, vol: float = 0.015, drift: float = 3e-4):
    """Geometric random-walk closing prices (float64), first row 100."""
    g = np.random.default_rng(seed)
    r = drift + vol * g.standard_normal((steps, assets)) * np.linspace(0.8, 1.4, assets)
    return 100.0 * np.exp(np.concatenate([np.zeros((1, assets)), np.cumsum(r, 0)], 0))


def _returns(seed: int, steps: int, assets: int, scale: float = 0.01) -> np.ndarray:
    """Fat-tailed daily returns (Student-t with 4 degrees of freedom), float64."""
    g = np.random.default_rng(seed)
    t = g.standard_t(4, (steps, assets)) / math.sqrt(2.0)
    return 2e-4 + scale * t * np.linspace(0.7, 1.5, assets)


@program
def log_returns_cumprod_drawdowns_cummax(torch):
    """Returns from a price panel (``pct_change`` and log returns, with ``diff``), the equity
    curve with ``cumprod``, running peaks with ``cummax``, drawdowns, maximum drawdown with its
    trough and peak dates, the longest drawdown spell, CAGR and the Calmar ratio, and a printed
    summary line per asset."""
    prices = torch.tensor(_prices(0, 120, 3))
    simple = prices[1:] / prices[:-1] - 1
    log_r = torch.log(prices).diff(dim=0)
    log_r2 = torch.log1p(simple)
    equity = torch.cumprod(1 + simple, dim=0)
    equity_log = torch.exp(torch.cumsum(log_r, dim=0))
    peak, peak_idx = torch.cummax(equity, dim=0)
    drawdown = equity / peak - 1
    max_dd, trough = drawdown.min(dim=0)
    peak_at_trough = peak_idx.gather(0, trough[None]).squeeze(0)
    underwater = (drawdown < 0).to(torch.int64)
    spell = torch.zeros_like(underwater)
    for t in range(underwater.shape[0]):
        prev = spell[t - 1] if t > 0 else torch.zeros_like(underwater[0])
        spell[t] = (prev + 1) * underwater[t]
    years = simple.shape[0] / 252
    cagr = equity[-1] ** (1 / years) - 1
    calmar = cagr / max_dd.abs()
    lines = [f"asset {i}: total {equity[-1, i].item() - 1:+.2%}, maxDD {max_dd[i].item():.2%} "
             f"at t={trough[i].item()}, calmar {calmar[i].item():.2f}"
             for i in range(prices.shape[1])]  # fmt: skip
    eq32 = (1 + simple.float()).cumprod(0)
    return {"simple": simple, "log_r": log_r, "log_r_gap": (log_r - log_r2).abs().max(),
            "equity": equity, "equity_log_gap": (equity - equity_log).abs().max(), "peak": peak,
            "peak_idx": peak_idx, "drawdown": drawdown, "max_dd": max_dd, "trough": trough,
            "peak_at_trough": peak_at_trough, "longest_spell": spell.max(dim=0).values,
            "cagr": cagr, "calmar": calmar, "summary": "\n".join(lines), "eq32": eq32,
            "eq32_peak": eq32.cummax(0).values}  # fmt: skip


@program
def rolling_windows_unfold_zscore_correlation(torch):
    """Rolling statistics as pandas' ``rolling(w)`` computes them, written with
    ``Tensor.unfold``: rolling mean and sample std, a z-score and Bollinger bands padded with NaN
    to the series length, a rolling correlation and beta of an asset against the market, a
    rolling max, the same rolling mean with ``avg_pool1d``, with a cumulative-sum trick and with
    NumPy's stride trick (``as_strided`` on a column), and NaN-aware summaries with
    ``nanmean``."""
    F = torch.nn.functional
    r = torch.tensor(_returns(1, 80, 2))
    w = 20
    market, asset = r[:, 0], r[:, 1]
    win = r.unfold(0, w, 1)  # (T - w + 1, 2, w)
    roll_mean = win.mean(-1)
    roll_std = win.std(-1)  # unbiased, as pandas
    z = (r[w - 1 :] - roll_mean) / roll_std
    pad = torch.full((w - 1, 2), float("nan"), dtype=r.dtype)
    z_full = torch.cat([pad, z], dim=0)
    price = torch.tensor(_prices(2, 79, 1)[:, 0])
    pw = price.unfold(0, w, 1)
    mid = pw.mean(1)
    band = 2 * pw.std(1, correction=0)
    upper, lower = mid + band, mid - band
    signal = torch.where(price[w - 1 :] > upper, -1, torch.where(price[w - 1 :] < lower, 1, 0))
    mw, aw = market.unfold(0, w, 1), asset.unfold(0, w, 1)
    mc, ac = mw - mw.mean(1, keepdim=True), aw - aw.mean(1, keepdim=True)
    cov = (mc * ac).sum(1) / (w - 1)
    corr = cov / (mw.std(1) * aw.std(1))
    beta = cov / mw.var(1)
    s = asset.stride(0)  # NumPy's stride trick (sliding windows of a column of the panel)
    strided = asset.as_strided((r.shape[0] - w + 1, w), (s, s))
    corr_check = torch.stack([torch.corrcoef(torch.stack([mw[i], aw[i]]))[0, 1]
                              for i in (0, 30, 60)])  # fmt: skip
    roll_max = price.unfold(0, 10, 1).amax(1)
    pool_mean = F.avg_pool1d(r.T[None], kernel_size=w, stride=1)[0].T
    cs = torch.cumsum(torch.cat([torch.zeros(1, 2, dtype=r.dtype), r]), 0)
    cs_mean = (cs[w:] - cs[:-w]) / w
    return {"roll_mean": roll_mean, "roll_std": roll_std, "z_full": z_full,
            "z_nanmean": z_full.nanmean(0), "z_valid": (~z_full.isnan()).sum(0),
            "upper": upper, "lower": lower, "signal": signal, "corr": corr, "beta": beta,
            "corr_check": corr_check, "roll_max": roll_max, "pool_mean": pool_mean,
            "cs_mean": cs_mean, "strided_mean": strided.mean(1), "strided_std": strided.std(1),
            "win_shape": list(win.shape), "win_stride": list(win.stride())}  # fmt: skip


@program
def ewma_volatility_recursive_and_convolution(torch):
    """RiskMetrics EWMA variance (``lambda = 0.94``) written three ways: the recursion
    ``s2[t] = lam * s2[t-1] + (1 - lam) * r[t-1]**2`` in a loop, a causal ``conv1d`` with the
    decay weights ``(1 - lam) * lam**k`` (flipped, as convolutions correlate), and pandas'
    ``ewm(adjust=True)`` mean with normalised weights from a lower-triangular matrix; then
    annualised volatility, a volatility-targeted position and an EWMA covariance matrix of two
    assets with ``einsum``."""
    F = torch.nn.functional
    lam = 0.94
    r = torch.tensor(_returns(3, 60, 2)[:, 0], dtype=torch.float32)
    T = r.shape[0]
    seed_var = r[:10].var()
    s2 = torch.empty(T + 1)
    s2[0] = seed_var
    for t in range(1, T + 1):
        s2[t] = lam * s2[t - 1] + (1 - lam) * r[t - 1] ** 2
    K = 40
    k = torch.arange(K, dtype=torch.float32)
    weights = (1 - lam) * lam**k
    kernel = weights.flip(0).view(1, 1, K)
    sq = F.pad((r**2).view(1, 1, T), (K - 1, 0))
    conv_var = F.conv1d(sq, kernel).view(T)
    recursive = s2[1:]  # s2[t + 1] weighs r[t] ** 2 as conv_var[t] does
    idx = torch.arange(T)
    powers = lam ** (idx[:, None] - idx[None, :]).clamp(min=0).float()
    Wm = torch.tril(powers)
    ewm_mean = (Wm @ r) / Wm.sum(1)
    ewm_var_adjust = (Wm @ r**2) / Wm.sum(1)
    vol_ann = torch.sqrt(s2 * 252)
    target = 0.10
    position = (target / vol_ann[:-1]).clamp(max=3.0)
    strat = position * r
    R = torch.tensor(_returns(4, 60, 2), dtype=torch.float32)
    decay = lam ** torch.arange(59, -1, -1, dtype=torch.float32)
    decay = decay / decay.sum()
    Rc = R - (decay[:, None] * R).sum(0)
    ewma_cov = torch.einsum("t,ti,tj->ij", decay, Rc, Rc)
    return {"s2": s2, "conv_var": conv_var, "conv_gap": (conv_var[K:] - recursive[K:]).abs().max(),
            "ewm_mean": ewm_mean, "ewm_var_adjust": ewm_var_adjust, "vol_ann": vol_ann,
            "position": position, "strat_cum": torch.cumsum(strat, 0), "ewma_cov": ewma_cov,
            "ewma_corr": ewma_cov[0, 1] / ewma_cov.diagonal().prod().sqrt()}  # fmt: skip


@program
def technical_indicators_rsi_macd_atr(torch):
    """Indicators of a trading library: EMAs with ``alpha = 2 / (span + 1)`` in a loop, MACD line,
    signal and histogram, crossovers with sign changes, Wilder's RSI from clamped gains and
    losses, the true range with ``torch.maximum`` over three candidates and its average (ATR),
    stochastic %K from rolling highs and lows, and a long/short backtest of the MACD signal."""
    g = np.random.default_rng(5)
    close = torch.tensor(_prices(5, 99, 1)[:, 0])
    high = close * torch.tensor(1 + np.abs(g.standard_normal(100)) * 0.006)
    low = close * torch.tensor(1 - np.abs(g.standard_normal(100)) * 0.006)

    def ema(x, span):
        alpha = 2.0 / (span + 1)
        out = torch.empty_like(x)
        out[0] = x[0]
        for t in range(1, x.shape[0]):
            out[t] = alpha * x[t] + (1 - alpha) * out[t - 1]
        return out

    macd = ema(close, 12) - ema(close, 26)
    signal = ema(macd, 9)
    hist = macd - signal
    cross = torch.sign(hist).diff()
    cross_up = torch.nonzero(cross > 0).flatten()
    delta = close.diff()
    gain, loss = delta.clamp(min=0), (-delta).clamp(min=0)
    n = 14
    avg_gain, avg_loss = gain[:n].mean(), loss[:n].mean()
    rsi = []
    for t in range(n, delta.shape[0]):
        avg_gain = (avg_gain * (n - 1) + gain[t]) / n
        avg_loss = (avg_loss * (n - 1) + loss[t]) / n
        rsi.append(100 - 100 / (1 + avg_gain / avg_loss))
    rsi = torch.stack(rsi)
    prev_close = close[:-1]
    tr = torch.maximum(high[1:] - low[1:],
                       torch.maximum((high[1:] - prev_close).abs(), (low[1:] - prev_close).abs()))  # fmt: skip
    atr = ema(tr, 2 * n - 1)
    hh = high.unfold(0, n, 1).max(1).values
    ll = low.unfold(0, n, 1).min(1).values
    stoch_k = 100 * (close[n - 1 :] - ll) / (hh - ll)
    pos = torch.sign(hist)[:-1]
    pnl = pos * (close[1:] / close[:-1] - 1)
    return {"macd": macd, "signal": signal, "hist": hist, "cross_up": cross_up, "rsi": rsi,
            "overbought": (rsi > 70).sum(), "tr": tr, "atr": atr, "stoch_k": stoch_k,
            "pnl_cum": pnl.cumsum(0), "hit_rate": (pnl > 0).double().mean()}  # fmt: skip


@program
def sharpe_sortino_information_ratios(torch):
    """Performance statistics of a panel of strategy returns: annualised mean and volatility
    (``std(correction=1)`` as pandas, ``correction=0`` as NumPy), Sharpe, Sortino with the
    downside deviation, information ratio and tracking error against a benchmark, skewness and
    excess kurtosis, ``var_mean`` and ``std_mean``, a ranking with ``argsort`` and a printed
    tearsheet; in float32 as a research notebook would."""
    R = torch.tensor(_returns(6, 252, 4), dtype=torch.float32)
    bench = torch.tensor(_returns(7, 252, 1)[:, 0], dtype=torch.float32)
    rf = 0.02 / 252
    excess = R - rf
    ann = math.sqrt(252)
    mu = excess.mean(0)
    sd1 = excess.std(0, correction=1)
    sd0 = excess.std(0, correction=0)
    sharpe = ann * mu / sd1
    downside = torch.sqrt((excess.clamp(max=0) ** 2).mean(0))
    sortino = ann * mu / downside
    active = R - bench[:, None]
    te = active.std(0) * ann
    ir = active.mean(0) * 252 / te
    z = (R - R.mean(0)) / R.std(0, unbiased=False)
    skew = (z**3).mean(0)
    kurt = (z**4).mean(0) - 3
    var, mean = torch.var_mean(R, dim=0, correction=0)
    std, _ = torch.std_mean(R, dim=0)
    rank = torch.argsort(sharpe, descending=True)
    beta = ((R - R.mean(0)) * (bench - bench.mean())[:, None]).sum(0) / (
        (bench - bench.mean()) ** 2
    ).sum()
    lines = ["strategy  sharpe  sortino     IR    skew   kurt"]
    for i in rank.tolist():
        lines.append(f"S{i:<8d}{sharpe[i].item():7.3f}{sortino[i].item():9.3f}{ir[i].item():7.3f}"
                     f"{skew[i].item():8.3f}{kurt[i].item():7.3f}")  # fmt: skip
    return {"sharpe": sharpe, "sd_ratio": sd1 / sd0, "sortino": sortino, "te": te, "ir": ir,
            "skew": skew, "kurt": kurt, "var": var, "mean": mean, "std": std, "rank": rank,
            "beta": beta, "tearsheet": "\n".join(lines)}  # fmt: skip


@program
def value_at_risk_expected_shortfall(torch):
    """Historical value-at-risk of a portfolio's losses with ``torch.quantile`` in every
    interpolation mode, the same order statistic with ``kthvalue`` and with ``sort``, expected
    shortfall as the mean of the tail beyond VaR, per-asset VaR with ``quantile`` over ``dim=0``
    and several levels at once, parametric Gaussian VaR with ``special.ndtri`` and the
    Cornish-Fisher correction, the worst days with ``topk``, and VaR backtest exceptions."""
    R = torch.tensor(_returns(8, 500, 3))
    w = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    pnl = R @ w
    losses = -pnl
    alpha = 0.99
    var_modes = {m: torch.quantile(losses, alpha, interpolation=m)
                 for m in ("linear", "lower", "higher", "nearest", "midpoint")}  # fmt: skip
    n = losses.numel()
    k = math.ceil(alpha * n)
    var_k, var_k_idx = torch.kthvalue(losses, k)
    sorted_l, order = torch.sort(losses)
    es = losses[losses >= var_modes["linear"]].mean()
    es_sorted = sorted_l[k - 1 :].mean()
    levels = torch.tensor([0.9, 0.95, 0.99], dtype=torch.float64)
    asset_var = torch.quantile(-R, levels, dim=0)
    mu, sigma = pnl.mean(), pnl.std()
    zq = torch.special.ndtri(torch.tensor(alpha, dtype=torch.float64))
    gauss_var = -(mu - zq * sigma)
    pdf = torch.exp(-0.5 * zq**2) / math.sqrt(2 * math.pi)
    gauss_es = -mu + sigma * pdf / (1 - alpha)
    z = (pnl - mu) / sigma
    s, kx = (z**3).mean(), (z**4).mean() - 3
    zcf = zq + (zq**2 - 1) * s / 6 + (zq**3 - 3 * zq) * kx / 24 - (2 * zq**3 - 5 * zq) * s**2 / 36
    cf_var = -(mu - zcf * sigma)
    worst, worst_days = torch.topk(losses, 5)
    window = 250
    rolling_var = torch.quantile(losses.unfold(0, window, 1)[:-1], 0.95, dim=1)
    exceptions = (losses[window:] > rolling_var).sum()
    return {"var_modes": var_modes, "var_k": var_k, "var_k_idx": var_k_idx,
            "order_head": order[-5:], "es": es, "es_sorted": es_sorted, "asset_var": asset_var,
            "gauss_var": gauss_var, "gauss_es": gauss_es, "cf_var": cf_var, "worst": worst,
            "worst_days": worst_days, "rolling_var_tail": rolling_var[-5:],
            "exceptions": exceptions, "exception_rate": exceptions.double() / (n - window)}  # fmt: skip


@program
def covariance_correlation_shrinkage_pca(torch):
    """Risk-model estimates from a returns panel: ``torch.cov`` of the transposed panel (sample,
    ``correction=0`` and exponentially weighted with ``aweights``), ``corrcoef``, the same by
    hand with a centred matrix product, Ledoit-Wolf shrinkage toward a scaled identity, PCA of
    the correlation matrix with ``eigh`` (market factor, explained variance), condition numbers,
    and a Cholesky factor for correlated simulation."""
    R = torch.tensor(_returns(9, 120, 5))
    T, N = R.shape
    S = torch.cov(R.T)
    S0 = torch.cov(R.T, correction=0)
    aw = 0.97 ** torch.arange(T - 1, -1, -1, dtype=torch.float64)
    S_ew = torch.cov(R.T, aweights=aw)
    fw = torch.tensor(np.random.default_rng(10).integers(1, 4, T))
    S_fw = torch.cov(R.T, fweights=fw)
    C = torch.corrcoef(R.T)
    X = R - R.mean(0, keepdim=True)
    S_hand = X.T @ X / (T - 1)
    d = torch.sqrt(torch.diag(S_hand))
    C_hand = S_hand / torch.outer(d, d)
    mu_tr = torch.trace(S0) / N
    F_target = mu_tr * torch.eye(N, dtype=torch.float64)
    d2 = torch.linalg.matrix_norm(S0 - F_target) ** 2
    b2 = sum(torch.linalg.matrix_norm(torch.outer(x, x) - S0) ** 2 for x in X) / T**2
    delta = torch.clamp(b2 / d2, max=1.0)
    S_lw = delta * F_target + (1 - delta) * S0
    evals, evecs = torch.linalg.eigh(C)
    evals, evecs = evals.flip(0), evecs.flip(1)
    market = evecs[:, 0] * torch.sign(evecs[:, 0].sum())
    explained = evals / evals.sum()
    L = torch.linalg.cholesky(S_lw)
    Z = torch.tensor(np.random.default_rng(11).standard_normal((4, N)))
    sims = Z @ L.T
    return {"S": S, "S0": S0, "S_ew": S_ew, "S_fw": S_fw, "C": C, "gap_S": (S - S_hand).abs().max(),
            "gap_C": (C - C_hand).abs().max(), "delta": delta, "S_lw": S_lw, "evals": evals,
            "market": market, "explained": explained,
            "cond": torch.stack([torch.linalg.cond(S), torch.linalg.cond(S_lw)]), "L": L,
            "sims": sims}  # fmt: skip


@program
def mean_variance_portfolios_linalg_solve(torch):
    """Markowitz in closed form with ``linalg.solve`` (never an explicit inverse): global
    minimum-variance and tangency weights, the efficient frontier from the KKT system of the
    two-constraint problem for several target returns (a batched solve), portfolio volatility,
    marginal and percentage risk contributions, and the same minimum-variance weights with
    ``cholesky_solve``."""
    R = torch.tensor(_returns(12, 250, 4))
    mu = R.mean(0) * 252 + torch.tensor([0.02, 0.05, 0.08, 0.11], dtype=torch.float64)
    Sigma = torch.cov(R.T) * 252
    N = mu.shape[0]
    ones = torch.ones(N, dtype=torch.float64)
    x = torch.linalg.solve(Sigma, ones)
    w_mv = x / x.sum()
    rf = 0.03
    y = torch.linalg.solve(Sigma, mu - rf)
    w_tan = y / y.sum()
    targets = torch.linspace(0.05, 0.12, 5, dtype=torch.float64)
    K = torch.zeros(N + 2, N + 2, dtype=torch.float64)
    K[:N, :N] = 2 * Sigma
    K[:N, N] = mu
    K[:N, N + 1] = ones
    K[N, :N] = mu
    K[N + 1, :N] = ones
    rhs = torch.zeros(len(targets), N + 2, dtype=torch.float64)
    rhs[:, N] = targets
    rhs[:, N + 1] = 1.0
    sol = torch.linalg.solve(K.expand(len(targets), -1, -1), rhs)
    W = sol[:, :N]
    frontier_vol = torch.sqrt(torch.einsum("ki,ij,kj->k", W, Sigma, W))
    vol_tan = torch.sqrt(w_tan @ Sigma @ w_tan)
    mrc = Sigma @ w_tan / vol_tan
    pct_rc = w_tan * mrc / vol_tan
    L = torch.linalg.cholesky(Sigma)
    w_chol = torch.cholesky_solve(ones[:, None], L).squeeze(1)
    w_chol = w_chol / w_chol.sum()
    return {"w_mv": w_mv, "w_tan": w_tan, "W": W, "frontier_ret": W @ mu,
            "frontier_vol": frontier_vol, "sharpe_tan": (w_tan @ mu - rf) / vol_tan,
            "mrc": mrc, "pct_rc": pct_rc, "w_chol": w_chol, "lagrange": sol[:, N:]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 Adam steps: reductions of a 5x5 quadratic form in float32
def softmax_portfolio_adam_and_risk_parity(torch):
    """Long-only portfolios by gradient descent as in deep-portfolio code: weights as
    ``softmax(logits)`` (so they are positive and sum to one), a mean-variance utility with a
    turnover penalty against the previous weights and a squared hinge on a 40 % position cap,
    optimised with Adam; then risk parity by minimising the spread of risk contributions over
    ``exp``-parameterised weights, and a Sharpe-maximising ``nn.Module`` allocator with
    ``clip_grad_norm_``."""
    nn = torch.nn
    R = torch.tensor(_returns(13, 200, 5), dtype=torch.float32)
    mu = R.mean(0) * 252 + torch.tensor([0.04, 0.06, 0.02, 0.08, 0.05])
    Sigma = torch.cov(R.T) * 252
    prev = torch.full((5,), 0.2)
    logits = torch.zeros(5, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.1)
    gamma, tc, cap = 3.0, 0.01, 0.4
    utils = []
    for _ in range(12):
        opt.zero_grad()
        w = torch.softmax(logits, dim=0)
        utility = w @ mu - 0.5 * gamma * (w @ Sigma @ w)
        penalty = tc * (w - prev).abs().sum() + 10 * torch.relu(w - cap).pow(2).sum()
        loss = -(utility - penalty)
        loss.backward()
        opt.step()
        utils.append(utility.item())
    w_mv = torch.softmax(logits.detach(), 0)
    log_w = torch.zeros(5, requires_grad=True)
    opt2 = torch.optim.Adam([log_w], lr=0.05)
    rp_losses = []
    for _ in range(10):
        opt2.zero_grad()
        w = log_w.exp() / log_w.exp().sum()
        rc = w * (Sigma @ w)
        rc = rc / rc.sum()
        loss = ((rc - 1 / 5) ** 2).sum() * 100
        loss.backward()
        opt2.step()
        rp_losses.append(loss.item())

    class Allocator(nn.Module):
        def __init__(self, n_features, n_assets):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_features, 8), nn.Tanh(), nn.Linear(8, n_assets))

        def forward(self, feats):
            return torch.softmax(self.net(feats), dim=-1)

    model = set_weights(torch, Allocator(5, 5), seed=14)
    feats = R.unfold(0, 5, 5).mean(-1)[:-1] * 50  # weekly average returns as features
    nxt = R.unfold(0, 5, 5).sum(-1)[1:]  # next week's returns
    opt3 = torch.optim.Adam(model.parameters(), lr=0.01)
    sharpes = []
    for _ in range(4):
        opt3.zero_grad()
        port = (model(feats) * nxt).sum(1)
        sharpe = port.mean() / port.std()
        (-sharpe).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt3.step()
        sharpes.append(sharpe.item())
    return {"utils": utils, "w_mv": w_mv, "w_sum": w_mv.sum(), "rp_losses": rp_losses,
            "w_rp": (log_w.exp() / log_w.exp().sum()).detach(), "sharpes": sharpes,
            "grads": grads(model)}  # fmt: skip


@program
def black_scholes_greeks_autograd_implied_vol(torch):
    """Black-Scholes-Merton for a strip of options in float64: the normal CDF as ``0.5 * (1 +
    erf(x / sqrt(2)))`` and as ``special.ndtr``, calls and puts (put-call parity), delta, vega,
    rho and theta from one ``autograd.grad`` call, gamma and vanna from a second derivative
    with ``create_graph=True``, the closed-form greeks to compare, and implied volatility
    recovered from prices by Newton's method with the autograd vega."""
    S = torch.tensor(100.0, dtype=torch.float64, requires_grad=True)
    K = torch.tensor([80.0, 90.0, 100.0, 110.0, 120.0], dtype=torch.float64)
    T = torch.tensor([0.25, 0.5, 1.0, 1.5, 2.0], dtype=torch.float64, requires_grad=True)
    r = torch.tensor(0.03, dtype=torch.float64, requires_grad=True)
    sigma = torch.tensor([0.30, 0.25, 0.20, 0.22, 0.26], dtype=torch.float64, requires_grad=True)

    def norm_cdf(x):
        return 0.5 * (1 + torch.erf(x / math.sqrt(2.0)))

    def bs(S, K, T, r, sigma, call=True):
        sqrt_t = torch.sqrt(T)
        d1 = (torch.log(S / K) + (r + 0.5 * sigma**2) * T) / (sigma * sqrt_t)
        d2 = d1 - sigma * sqrt_t
        if call:
            return S * norm_cdf(d1) - K * torch.exp(-r * T) * norm_cdf(d2)
        return K * torch.exp(-r * T) * torch.special.ndtr(-d2) - S * torch.special.ndtr(-d1)

    call = bs(S, K, T, r, sigma)
    put = bs(S, K, T, r, sigma, call=False)
    parity = call - put - (S - K * torch.exp(-r * T))
    delta, dT, rho, vega = torch.autograd.grad(call.sum(), (S, T, r, sigma), create_graph=True)
    theta = -dT
    gamma = torch.autograd.grad(delta, S, retain_graph=True)[0]
    vanna = torch.autograd.grad(delta, sigma)[0]
    with torch.no_grad():
        d1 = (torch.log(S / K) + (r + 0.5 * sigma**2) * T) / (sigma * torch.sqrt(T))
        pdf = torch.exp(-0.5 * d1**2) / math.sqrt(2 * math.pi)
        cf_delta = torch.special.ndtr(d1)
        cf_vega = S * pdf * torch.sqrt(T)
        cf_gamma_sum = (pdf / (S * sigma * torch.sqrt(T))).sum()
    target = call.detach()
    iv = torch.full((5,), 0.5, dtype=torch.float64)
    iv_path = []
    for _ in range(6):
        v = iv.clone().requires_grad_(True)
        price = bs(S.detach(), K, T.detach(), r.detach(), v)
        (dv,) = torch.autograd.grad(price.sum(), v)
        iv = (v - (price - target) / dv).detach()
        iv_path.append((iv - sigma.detach()).abs().max().item())
    return {"call": call, "put": put, "parity": parity.abs().max(), "delta": delta,
            "theta": theta, "rho": rho, "vega": vega, "gamma": gamma, "vanna": vanna,
            "cf_delta": cf_delta, "cf_vega": cf_vega, "cf_gamma_sum": cf_gamma_sum, "iv": iv,
            "iv_path": iv_path[:3]}  # fmt: skip


@program
def monte_carlo_gbm_paths_exotics_pathwise_delta(torch):
    """Monte Carlo pricing on GBM paths built from NumPy normals: log-price increments summed
    with ``cumsum`` and exponentiated, antithetic variates, European, arithmetic Asian and
    up-and-out barrier calls (barrier hit with ``amax``), standard errors, a geometric-Asian
    control variate with its closed form, and the pathwise delta and vega by autograd through
    the simulation; in float32 with the discounting in float64."""
    n_paths, n_steps = 256, 24
    Z = torch.tensor(
        np.random.default_rng(15).standard_normal((n_paths, n_steps)), dtype=torch.float32
    )
    Z = torch.cat([Z, -Z])  # antithetic
    S0 = torch.tensor(100.0, requires_grad=True)
    sigma = torch.tensor(0.2, requires_grad=True)
    r, T, K, B = 0.03, 1.0, 100.0, 130.0
    dt = T / n_steps
    incr = (r - 0.5 * sigma**2) * dt + sigma * math.sqrt(dt) * Z
    log_paths = torch.log(S0) + torch.cumsum(incr, dim=1)
    paths = torch.exp(log_paths)
    ST = paths[:, -1]
    disc = math.exp(-r * T)
    payoff_eu = torch.clamp(ST - K, min=0)
    price_eu = disc * payoff_eu.mean()
    se_eu = disc * payoff_eu.std() / math.sqrt(payoff_eu.numel())
    anti_pairs = 0.5 * (payoff_eu[:n_paths] + payoff_eu[n_paths:])
    avg = paths.mean(1)
    payoff_asian = torch.relu(avg - K)
    knocked = paths.amax(1) >= B
    payoff_barrier = torch.where(knocked, torch.zeros_like(ST), payoff_eu)
    geo = torch.exp(log_paths.mean(1))
    payoff_geo = torch.relu(geo - K)
    with torch.no_grad():
        s, sg = S0.double(), sigma.double()
        n = n_steps
        sig_g = sg * math.sqrt((n + 1) * (2 * n + 1) / (6 * n * n))
        mu_g = 0.5 * (r - 0.5 * sg**2) * (n + 1) / n + 0.5 * sig_g**2
        d1 = (torch.log(s / K) + (mu_g + 0.5 * sig_g**2) * T) / (sig_g * math.sqrt(T))
        d2 = d1 - sig_g * math.sqrt(T)
        geo_cf = disc * (
            s * torch.exp(mu_g * T) * torch.special.ndtr(d1) - K * torch.special.ndtr(d2)
        )
        pa, pg = payoff_asian.detach().double(), payoff_geo.detach().double()
        b = ((pa - pa.mean()) * (pg - pg.mean())).sum() / ((pg - pg.mean()) ** 2).sum()
        cv_price = disc * (pa - b * (pg - geo_cf / disc)).mean()
    delta, vega = torch.autograd.grad(price_eu, (S0, sigma))
    return {"price_eu": price_eu, "se_eu": se_eu, "anti_se": disc * anti_pairs.std() / math.sqrt(n_paths),
            "price_asian": disc * payoff_asian.mean(), "price_barrier": disc * payoff_barrier.mean(),
            "knock_rate": knocked.float().mean(), "geo_cf": geo_cf, "cv_beta": b,
            "cv_price": cv_price, "delta": delta, "vega": vega, "path_head": paths[:3, :6].detach(),
            "max_path": paths.detach().max()}  # fmt: skip


@program
def garch11_maximum_likelihood_adam(torch):
    """GARCH(1,1) fitted by maximum likelihood as in ``arch``-style code written with torch:
    returns simulated in NumPy from known parameters, unconstrained parameters mapped with
    ``softplus`` and ``sigmoid`` (so ``omega > 0`` and ``alpha + beta < 1``), the conditional
    variance recursion in a Python loop collected with ``torch.stack``, the Gaussian negative
    log-likelihood, Adam steps, the persistence and long-run volatility, and a multi-step
    variance forecast."""
    F = torch.nn.functional
    g = np.random.default_rng(16)
    omega0, a0, b0, n = 2e-6, 0.08, 0.9, 150
    h, x = omega0 / (1 - a0 - b0), np.zeros(n)
    for t in range(n):
        x[t] = math.sqrt(h) * g.standard_normal()
        h = omega0 + a0 * x[t] ** 2 + b0 * h
    r = torch.tensor(x * 100)  # percent returns, as practitioners scale them
    raw = torch.tensor([-1.0, 0.0, 1.5], dtype=torch.float64, requires_grad=True)

    def unpack(p):
        omega = F.softplus(p[0])
        persistence = torch.sigmoid(p[1]) * 0.999
        share = torch.sigmoid(p[2])  # beta's share of the persistence
        return omega, persistence * (1 - share), persistence * share

    def nll(p):
        omega, alpha, beta = unpack(p)
        h = [r.var()]
        for t in range(1, r.shape[0]):
            h.append(omega + alpha * r[t - 1] ** 2 + beta * h[-1])
        h = torch.stack(h)
        return 0.5 * (torch.log(2 * math.pi * h) + r**2 / h).sum(), h

    opt = torch.optim.Adam([raw], lr=0.1)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss, h = nll(raw)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        omega, alpha, beta = unpack(raw)
        _, h = nll(raw)
        persistence = alpha + beta
        long_run = torch.sqrt(omega / (1 - persistence) * 252)
        h_next = omega + alpha * r[-1] ** 2 + beta * h[-1]
        horizons = torch.arange(1, 11, dtype=torch.float64)
        lr_var = omega / (1 - persistence)
        forecast = lr_var + persistence ** (horizons - 1) * (h_next - lr_var)
    return {"losses": losses, "omega": omega, "alpha": alpha, "beta": beta,
            "persistence": persistence, "long_run_vol": long_run, "h_tail": h[-5:],
            "forecast": forecast, "raw": raw.detach(), "raw_grad": raw.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # LSTM + Adam in float32: gate matmuls' summation order
def lstm_volatility_forecaster_teacher_forcing(torch):
    """A seq2seq realised-volatility forecaster: an ``nn.LSTM`` encoder over windows of features
    (returns, absolute returns, squared returns) built with ``unfold``, an ``nn.LSTMCell`` decoder
    fed the true previous target during training (teacher forcing) and its own prediction at
    inference, MSE on log-volatility, Adam with gradient clipping, and the forecasts denormalised
    with the training statistics."""
    nn = torch.nn
    r = torch.tensor(_returns(17, 140, 1)[:, 0], dtype=torch.float32)
    rv = r.abs().unfold(0, 5, 1).mean(1)  # 5-day realised vol proxy
    log_rv = torch.log(rv)
    m, s = log_rv.mean(), log_rv.std()
    y = (log_rv - m) / s
    feats = torch.stack([r[4:] * 50, r[4:].abs() * 50, (r[4:] * 50) ** 2], dim=1)
    enc_len, dec_len = 12, 4
    X = feats[: len(y) - dec_len].unfold(0, enc_len, 6).permute(0, 2, 1)  # (B, enc_len, 3)
    starts = torch.arange(X.shape[0]) * 6 + enc_len
    Y = torch.stack([y[i : i + dec_len] for i in starts.tolist()])
    y_last = torch.stack([y[i - 1] for i in starts.tolist()])

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.LSTM(3, 8, batch_first=True)
            self.decoder = nn.LSTMCell(1, 8)
            self.head = nn.Linear(8, 1)

        def forward(self, x, y_prev, targets=None, steps=dec_len):
            _, (h, c) = self.encoder(x)
            h, c = h[0], c[0]
            inp, outs = y_prev[:, None], []
            for t in range(steps):
                h, c = self.decoder(inp, (h, c))
                out = self.head(h)
                outs.append(out)
                inp = targets[:, t : t + 1] if targets is not None else out
            return torch.cat(outs, dim=1)

    model = set_weights(torch, Seq2Seq(), seed=18)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        pred = model(X, y_last, targets=Y)
        loss = nn.functional.mse_loss(pred, Y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        free = model(X, y_last)
        vol_forecast = torch.exp(free * s + m)
    return {"X_shape": list(X.shape), "losses": losses, "free": free,
            "vol_forecast": vol_forecast, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 SGD over a small MLP: summation order of the matmuls
def quantile_regression_var_monotone_heads(torch):
    """Conditional value-at-risk by quantile regression: an MLP on lagged features outputs a
    base quantile and ``softplus`` increments whose ``cumsum`` keeps the quantiles from
    crossing, trained with the pinball loss (``torch.maximum(q * e, (q - 1) * e)``) averaged over
    levels, with SGD and momentum; then empirical coverage of each level, the quantile score per
    level and a printed coverage table."""
    nn = torch.nn
    F = nn.functional
    r = torch.tensor(_returns(19, 206, 1)[:, 0] * 100, dtype=torch.float32)
    lags = r.unfold(0, 5, 1)[:-1]  # the 5 returns before each target
    X = torch.cat(
        [lags, lags.abs().mean(1, keepdim=True), lags.pow(2).mean(1, keepdim=True).sqrt()], 1
    )
    y = r[5:]
    levels = torch.tensor([0.01, 0.05, 0.5, 0.95, 0.99])

    class MonotoneQuantiles(nn.Module):
        def __init__(self, n_in, n_q):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(n_in, 16), nn.ReLU())
            self.base = nn.Linear(16, 1)
            self.incr = nn.Linear(16, n_q - 1)

        def forward(self, x):
            z = self.body(x)
            steps = F.softplus(self.incr(z))
            return torch.cat([self.base(z), self.base(z) + torch.cumsum(steps, dim=1)], dim=1)

    def pinball(pred, target, q):
        e = target[:, None] - pred
        return torch.maximum(q * e, (q - 1) * e).mean(0)

    model = set_weights(torch, MonotoneQuantiles(X.shape[1], len(levels)), seed=20)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        per_level = pinball(model(X), y, levels)
        loss = per_level.mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        q = model(X)
        coverage = (y[:, None] <= q).float().mean(0)
        score = pinball(q, y, levels)
        crossing = (q.diff(dim=1) < 0).sum()
    table = "\n".join(
        f"q={lv:.2f}  cover={c:.3f}" for lv, c in zip(levels.tolist(), coverage.tolist())
    )
    return {"losses": losses, "q_head": q[:4], "coverage": coverage, "score": score,
            "crossing": crossing, "table": table, "grads": grads(model)}  # fmt: skip


@program
def factor_model_lstsq_fama_macbeth_newey_west(torch):
    """Factor models: time-series regressions of several assets on market, size and value
    factors at once with ``linalg.lstsq`` (alphas, betas, residuals, R squared, OLS t-stats from
    ``(X'X)^-1`` via ``linalg.inv``), Newey-West standard errors of the alphas with Bartlett
    weights, the Fama-MacBeth cross-sectional regressions as one batched ``lstsq`` over dates,
    and a factor-mimicking covariance ``B Sigma_f B' + D``."""
    g = np.random.default_rng(21)
    T, N, k = 120, 6, 3
    f = torch.tensor(g.standard_normal((T, k)) * np.array([0.01, 0.006, 0.005]))
    B_true = torch.tensor(g.uniform(0.3, 1.4, (k, N)))
    eps = torch.tensor(g.standard_normal((T, N)) * 0.004)
    R = 1e-4 + f @ B_true + eps
    X = torch.cat([torch.ones(T, 1, dtype=torch.float64), f], dim=1)
    sol = torch.linalg.lstsq(X, R).solution  # (k + 1, N)
    alpha, beta = sol[0], sol[1:]
    resid = R - X @ sol
    r2 = 1 - resid.pow(2).sum(0) / (R - R.mean(0)).pow(2).sum(0)
    s2 = resid.pow(2).sum(0) / (T - k - 1)
    XtX_inv = torch.linalg.inv(X.T @ X)
    se = torch.sqrt(torch.outer(torch.diagonal(XtX_inv), s2))
    tstat = sol / se
    lags = 4
    u = X * resid[:, :1]  # moment conditions of the first asset
    S = u.T @ u
    for lag in range(1, lags + 1):
        w = 1 - lag / (lags + 1)
        G = u[lag:].T @ u[:-lag]
        S = S + w * (G + G.T)
    V_nw = XtX_inv @ S @ XtX_inv
    chars = torch.tensor(g.standard_normal((T, N, 2)))
    Xc = torch.cat([torch.ones(T, N, 1, dtype=torch.float64), chars], dim=2)
    gammas = torch.linalg.lstsq(Xc, R[:, :, None]).solution.squeeze(-1)  # (T, 3)
    fm_mean = gammas.mean(0)
    fm_t = fm_mean / (gammas.std(0) / math.sqrt(T))
    Sigma_f = torch.cov(f.T)
    cov_model = beta.T @ Sigma_f @ beta + torch.diag(s2)
    return {"alpha": alpha, "beta": beta, "r2": r2, "tstat": tstat, "nw_se_alpha": V_nw[0, 0].sqrt(),
            "fm_mean": fm_mean, "fm_t": fm_t, "cov_model": cov_model,
            "pinv_gap": (torch.linalg.pinv(X) @ R - sol).abs().max()}  # fmt: skip


@program
def cross_sectional_factor_winsorize_rank_ic(torch):
    """Alpha research on a dates x stocks panel with missing data: winsorising each date at the
    1st/99th percentiles with ``nanquantile`` and ``clamp`` by tensors, NaN-aware z-scores with
    ``nanmean``, ranks via a double ``argsort``, sector neutralisation with ``scatter_reduce``
    means per (date, sector) and ``gather``, the information coefficient (Spearman, rank
    correlation) per date, quintile portfolios with ``bucketize`` and ``scatter_add`` and the
    long-short spread."""
    g = np.random.default_rng(22)
    D, S, n_sec = 8, 40, 4
    raw = g.standard_t(3, (D, S))
    raw[g.random((D, S)) < 0.1] = np.nan
    fwd = 0.02 * np.nan_to_num(raw, nan=0.0) / 5 + g.standard_normal((D, S)) * 0.02
    x = torch.tensor(raw)
    ret = torch.tensor(fwd)
    sector = torch.tensor(g.integers(0, n_sec, S))
    lo = torch.nanquantile(x, 0.01, dim=1, keepdim=True)
    hi = torch.nanquantile(x, 0.99, dim=1, keepdim=True)
    xw = torch.clamp(x, min=lo, max=hi)  # NaN stays NaN
    valid = ~xw.isnan()
    mu = xw.nanmean(1, keepdim=True)
    sd = torch.sqrt(((xw - mu) ** 2).nansum(1, keepdim=True) / (valid.sum(1, keepdim=True) - 1))
    z = torch.where(valid, (xw - mu) / sd, torch.zeros_like(xw))
    idx = sector.expand(D, S)
    sec_sum = torch.zeros(D, n_sec, dtype=torch.float64).scatter_add(1, idx, z * valid)
    sec_cnt = torch.zeros(D, n_sec, dtype=torch.float64).scatter_add(1, idx, valid.double())
    sec_mean = torch.zeros(D, n_sec, dtype=torch.float64).scatter_reduce(
        1, idx, z, reduce="mean", include_self=False)  # fmt: skip
    neutral = torch.where(valid, z - (sec_sum / sec_cnt).gather(1, idx), torch.zeros_like(z))
    filled = torch.where(valid, xw, torch.full_like(xw, -1e9))
    ranks = filled.argsort(1).argsort(1).double()  # (ties among the missing: order unspecified)
    ics = []
    for d in range(D):
        m = valid[d]
        a = ranks[d][m]
        b = ret[d][m].argsort().argsort().double()
        ics.append(torch.corrcoef(torch.stack([a, b]))[0, 1])
    ic = torch.stack(ics)
    edges = torch.quantile(
        neutral, torch.tensor([0.2, 0.4, 0.6, 0.8], dtype=torch.float64), dim=1
    ).T
    bucket = torch.stack([torch.bucketize(neutral[d], edges[d].contiguous()) for d in range(D)])
    q_ret = torch.zeros(D, 5, dtype=torch.float64).scatter_add(1, bucket, ret)
    q_cnt = torch.zeros(D, 5, dtype=torch.float64).scatter_add(1, bucket, torch.ones_like(ret))
    q_mean = q_ret / q_cnt
    spread = q_mean[:, 4] - q_mean[:, 0]
    return {"lo": lo, "hi": hi, "xw_nan": xw.isnan().sum(), "z": z, "sec_mean": sec_mean,
            "sec_gap": (sec_mean - sec_sum / sec_cnt).abs().nan_to_num().max(),
            "neutral": neutral, "ranks": torch.where(valid, ranks, torch.nan)[:2], "ic": ic, "ic_ir": ic.mean() / ic.std(),
            "bucket": bucket, "q_mean": q_mean, "spread": spread}  # fmt: skip


@program
def tick_data_vwap_time_bars_searchsorted(torch):
    """Market microstructure on a stream of trades: VWAP and cumulative volume with ``cumsum``,
    one-minute bars found with ``searchsorted`` on the timestamps, OHLC with ``scatter_reduce``
    (``amax``/``amin``) and first/last prices, bar volumes with ``index_add_`` and ``bincount``,
    volume bars from ``bucketize`` on cumulative volume, the tick rule (signs of price changes
    carried forward over zero changes with ``cummax`` of indices) and order-flow imbalance."""
    g = np.random.default_rng(23)
    n = 300
    ts = torch.tensor(np.sort(g.uniform(0, 600, n)))  # seconds
    px = torch.tensor(100 + np.cumsum(np.round(g.standard_normal(n) * 2) * 0.01))
    vol = torch.tensor(g.integers(1, 20, n) * 100)
    notional = px * vol
    vwap_running = notional.cumsum(0) / vol.cumsum(0)
    bounds = torch.arange(60, 600, 60, dtype=torch.float64)
    bar = torch.searchsorted(bounds, ts, right=True)
    nb = 10
    high = torch.full((nb,), -float("inf"), dtype=torch.float64).scatter_reduce(0, bar, px, "amax")
    low = torch.full((nb,), float("inf"), dtype=torch.float64).scatter_reduce(0, bar, px, "amin")
    pos = torch.arange(n)
    first = torch.full((nb,), n, dtype=torch.int64).scatter_reduce(0, bar, pos, "amin")
    last = torch.full((nb,), -1, dtype=torch.int64).scatter_reduce(0, bar, pos, "amax")
    open_, close = px[first], px[last]
    bar_vol = torch.zeros(nb, dtype=torch.int64).index_add_(0, bar, vol)
    bar_count = torch.bincount(bar, minlength=nb)
    bar_vwap = torch.zeros(nb, dtype=torch.float64).index_add_(0, bar, notional) / bar_vol
    cumvol = vol.cumsum(0)
    vbar = torch.bucketize(cumvol, torch.arange(5000, int(cumvol[-1]) + 5000, 5000), right=False)
    vbar_px = torch.zeros(int(vbar.max()) + 1, dtype=torch.float64).index_add_(0, vbar, notional)
    vbar_px = vbar_px / torch.bincount(vbar, weights=vol.double())
    dp = px.diff()
    sign = torch.sign(dp)
    nz = torch.where(sign != 0, torch.arange(1, n), torch.zeros(n - 1, dtype=torch.int64))
    last_nz = torch.cummax(nz, 0).values
    tick = torch.cat([torch.zeros(1, dtype=sign.dtype), sign])[last_nz]
    signed_vol = tick * vol[1:]
    ofi = torch.zeros(nb, dtype=torch.float64).index_add_(0, bar[1:], signed_vol) / bar_vol
    runs = torch.unique_consecutive(tick, return_counts=True)[1]
    return {"vwap_running": vwap_running[::25], "bar": bar[::30], "open": open_, "high": high,
            "low": low, "close": close, "bar_vol": bar_vol, "bar_count": bar_count,
            "bar_vwap": bar_vwap, "vbar_px": vbar_px, "n_vbars": vbar.max() + 1, "tick": tick[:20],
            "ofi": ofi, "longest_run": runs.max(), "n_runs": runs.numel()}  # fmt: skip


@program
def kalman_filter_pairs_trading_hedge_ratio(torch):
    """Pairs trading with a time-varying hedge ratio: a Kalman filter over the state
    ``(beta, alpha)`` with a random-walk transition, written as quants write it (``x_t``
    observation row, ``P`` covariance updated with ``torch.outer``, innovation and its variance),
    the spread's z-score against the forecast standard deviation, an entry/exit state machine in
    a loop producing positions, and the strategy's P&L; the static OLS hedge ratio with
    ``linalg.lstsq`` for comparison."""
    g = np.random.default_rng(24)
    T = 150
    y_np = 50 + np.cumsum(g.standard_normal(T) * 0.5)
    beta_path = 1.2 + np.cumsum(g.standard_normal(T) * 0.005)
    x_np = (y_np - 3.0 - g.standard_normal(T) * 0.4) / beta_path
    y, x = torch.tensor(y_np), torch.tensor(x_np)
    delta = 1e-4
    Vw = delta / (1 - delta) * torch.eye(2, dtype=torch.float64)
    Ve = 1e-3
    state = torch.zeros(2, dtype=torch.float64)
    P = torch.zeros(2, 2, dtype=torch.float64)
    betas, errors, stds = [], [], []
    for t in range(T):
        H = torch.stack([x[t], torch.ones((), dtype=torch.float64)])
        R = P + Vw
        yhat = H @ state
        Q = H @ R @ H + Ve
        e = y[t] - yhat
        K = R @ H / Q
        state = state + K * e
        P = R - torch.outer(K, H @ R)
        betas.append(state.clone())
        errors.append(e)
        stds.append(Q.sqrt())
    betas = torch.stack(betas)
    e, sq = torch.stack(errors), torch.stack(stds)
    zscore = e / sq
    pos = torch.zeros(T, dtype=torch.int64)
    cur = 0
    for t in range(10, T):
        if cur == 0 and zscore[t] > 1.0:
            cur = -1
        elif cur == 0 and zscore[t] < -1.0:
            cur = 1
        elif cur == -1 and zscore[t] < 0:
            cur = 0
        elif cur == 1 and zscore[t] > 0:
            cur = 0
        pos[t] = cur
    spread = y - betas[:, 0] * x
    pnl = pos[:-1].double() * spread.diff()
    X = torch.stack([x, torch.ones_like(x)], 1)
    ols = torch.linalg.lstsq(X, y[:, None]).solution.squeeze(1)
    return {"betas": betas[::10], "zscore": zscore[::10], "pos": pos, "trades": (pos.diff() != 0).sum(),
            "pnl_cum": pnl.cumsum(0)[::10], "P": P, "ols": ols, "final_state": state}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)  # float64 throughout; quadrature of a smooth integrand
def heston_characteristic_function_carr_madan(torch):
    """Option pricing by Fourier inversion with complex tensors: the Heston characteristic
    function in the "little Heston trap" form (``torch.complex128``, complex ``sqrt``, ``exp``
    and ``log``), call prices by the Gil-Pelaez integrals ``P1``/``P2`` with ``torch.trapezoid``
    over a grid, the Black-Scholes limit checked by setting the vol of vol near zero, Carr-Madan
    damped call transform on an FFT grid with ``torch.fft.fft`` and Simpson weights, and the
    smile recovered by bisection on Black-Scholes prices."""
    S0, r, T = 100.0, 0.02, 0.5
    kappa, theta, xi, rho, v0 = 2.0, 0.04, 0.5, -0.7, 0.04

    def cf(u, kappa, theta, xi, rho, v0):
        u = u.to(torch.complex128)
        iu = 1j * u
        d = torch.sqrt((rho * xi * iu - kappa) ** 2 + xi**2 * (iu + u**2))
        g2 = (kappa - rho * xi * iu - d) / (kappa - rho * xi * iu + d)
        edt = torch.exp(-d * T)
        C = r * iu * T + kappa * theta / xi**2 * (
            (kappa - rho * xi * iu - d) * T - 2 * torch.log((1 - g2 * edt) / (1 - g2))
        )
        D = (kappa - rho * xi * iu - d) / xi**2 * (1 - edt) / (1 - g2 * edt)
        return torch.exp(C + D * v0 + iu * math.log(S0))

    u = torch.linspace(1e-6, 100, 2001, dtype=torch.float64)
    strikes = torch.tensor([80.0, 90.0, 100.0, 110.0, 120.0], dtype=torch.float64)

    def heston_call(params):
        lnK = torch.log(strikes)[:, None]
        phi = cf(u, *params)[None]
        phi_shift = cf(u - 1j, *params)[None] / cf(torch.tensor(-1j), *params)
        e = torch.exp(-1j * u[None] * lnK)
        P1 = 0.5 + torch.trapezoid(((e * phi_shift) / (1j * u)).real, u, dim=1) / math.pi
        P2 = 0.5 + torch.trapezoid(((e * phi) / (1j * u)).real, u, dim=1) / math.pi
        return S0 * P1 - strikes * math.exp(-r * T) * P2, P1, P2

    calls, P1, P2 = heston_call((kappa, theta, xi, rho, v0))
    bs_limit, _, _ = heston_call((kappa, 0.04, 1e-4, 0.0, 0.04))
    ncdf = torch.special.ndtr

    def bs_call(sig):
        d1 = (torch.log(S0 / strikes) + (r + 0.5 * sig**2) * T) / (sig * math.sqrt(T))
        return S0 * ncdf(d1) - strikes * math.exp(-r * T) * ncdf(d1 - sig * math.sqrt(T))

    lo = torch.full((5,), 0.01, dtype=torch.float64)
    hi = torch.full((5,), 1.0, dtype=torch.float64)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        too_high = bs_call(mid) > calls
        hi = torch.where(too_high, mid, hi)
        lo = torch.where(too_high, lo, mid)
    smile = 0.5 * (lo + hi)
    N, alpha, eta = 256, 1.5, 0.25
    lam = 2 * math.pi / (N * eta)
    b = N * lam / 2
    v = torch.arange(N, dtype=torch.float64) * eta
    psi = math.exp(-r * T) * cf(v - (alpha + 1) * 1j, kappa, theta, xi, rho, v0) / (
        alpha**2 + alpha - v**2 + 1j * (2 * alpha + 1) * v)  # fmt: skip
    simpson = (3 + (-1) ** torch.arange(1, N + 1, dtype=torch.float64)) / 3
    simpson[0] = 1 / 3
    x = torch.exp(1j * b * v) * psi * eta * simpson
    ks = -b + lam * torch.arange(N, dtype=torch.float64)
    cm = torch.exp(-alpha * ks) / math.pi * torch.fft.fft(x).real
    near = (ks - math.log(100.0)).abs().argmin()
    return {"calls": calls, "P1": P1, "P2": P2, "bs_limit": bs_limit, "bs_ref": bs_call(torch.tensor(0.2, dtype=torch.float64)),
            "smile": smile, "cf_at_1": cf(torch.tensor([1.0, 5.0], dtype=torch.float64), kappa, theta, xi, rho, v0),
            "cm_atm": cm[near], "cm_strike": torch.exp(ks[near]), "cm_slice": cm[near - 3 : near + 4]}  # fmt: skip
