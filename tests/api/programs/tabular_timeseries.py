"""Tabular models and time series: embeddings of categories, forecasters, likelihood and quantile losses, windows and normalization."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def tabular_mlp_cat_embeddings_batchnorm(torch):
    nn = torch.nn
    cardinalities = [5, 7, 3]

    class TabularMLP(nn.Module):
        def __init__(self, n_num, cards, emb_dims):
            super().__init__()
            self.embeds = nn.ModuleList([nn.Embedding(c, d) for c, d in zip(cards, emb_dims)])
            self.emb_drop = nn.Dropout(0.0)
            self.bn_num = nn.BatchNorm1d(n_num)
            n_in = sum(emb_dims) + n_num
            self.layers = nn.Sequential(
                nn.Linear(n_in, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(inplace=True),
                nn.Linear(16, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(inplace=True),
                nn.Linear(8, 3),
            )  # fmt: skip

        def forward(self, x_cat, x_num):
            x = [e(x_cat[:, i]) for i, e in enumerate(self.embeds)]
            x = self.emb_drop(torch.cat(x, 1))
            x = torch.cat([x, self.bn_num(x_num)], 1)
            return self.layers(x)

    emb_dims = [min(50, (c + 1) // 2) for c in cardinalities]
    model = set_weights(torch, TabularMLP(4, cardinalities, emb_dims), seed=1)
    x_cat = torch.from_numpy(
        np.stack([ints(10 + i, c, 32) for i, c in enumerate(cardinalities)], 1)
    )
    x_num = torch.from_numpy(arr(2, 32, 4, scale=3.0) + 5.0)
    y = torch.tensor(ints(3, 3, 32))
    # SGD, not Adam: BatchNorm makes some bias gradients exactly zero in exact arithmetic
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    losses = []
    for _ in range(5):
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x_cat, x_num), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        probs = model(x_cat[:6], x_num[:6]).softmax(dim=-1)
    return {
        "losses": losses,
        "probs": probs,
        "running_mean": model.bn_num.running_mean,
        "running_var": model.bn_num.running_var,
        "num_batches": model.bn_num.num_batches_tracked,
        "params": params(model),
    }


@program(rtol=1e-3, atol=1e-4)  # transformer layers + 3 Adam steps: float32 reduction order
def tab_transformer_column_embeddings(torch):
    nn = torch.nn
    F = nn.functional

    class TabTransformer(nn.Module):
        def __init__(self, cards, n_num, dim=8, heads=2):
            super().__init__()
            offsets = torch.tensor([0] + cards[:-1]).cumsum(0)
            self.register_buffer("offsets", offsets, persistent=False)
            self.cat_embed = nn.Embedding(sum(cards), dim)
            self.col_embed = nn.Parameter(torch.zeros(1, len(cards), dim))
            layer = nn.TransformerEncoderLayer(
                dim, heads, dim_feedforward=16, dropout=0.0, activation="gelu",
                batch_first=True, norm_first=True,
            )  # fmt: skip
            self.transformer = nn.TransformerEncoder(
                layer, num_layers=2, enable_nested_tensor=False
            )
            self.num_norm = nn.LayerNorm(n_num)
            self.mlp = nn.Sequential(
                nn.Linear(len(cards) * dim + n_num, 12), nn.SELU(), nn.Linear(12, 1)
            )

        def forward(self, x_cat, x_num):
            tok = self.cat_embed(x_cat + self.offsets) + self.col_embed
            ctx = self.transformer(tok).flatten(1)
            return self.mlp(torch.cat((ctx, self.num_norm(x_num)), dim=-1)).squeeze(-1)

    cards = [4, 6, 3]
    model = set_weights(torch, TabTransformer(cards, 3), seed=4)
    x_cat = torch.tensor(np.stack([ints(20 + i, c, 10) for i, c in enumerate(cards)], -1))
    x_num = torch.tensor(arr(5, 10, 3))
    y = torch.tensor((arr(6, 10) > 0.3).astype(np.float32))
    pos_weight = (y == 0).sum() / y.sum().clamp(min=1)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-6)
    losses = []
    for _ in range(3):
        logits = model(x_cat, x_num)
        loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    model.eval()
    with torch.inference_mode():
        preds = torch.sigmoid(model(x_cat, x_num))
    return {"losses": torch.stack(losses), "preds": preds, "pos_weight": pos_weight,
            "col_embed": model.col_embed, "buffers": [n for n, _ in model.named_buffers()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lstm_seq2seq_teacher_forcing(torch):
    nn = torch.nn

    class Seq2Seq(nn.Module):
        def __init__(self, hidden=8):
            super().__init__()
            self.encoder = nn.LSTM(2, hidden, num_layers=2, batch_first=True)
            self.decoder = nn.LSTMCell(1, hidden)
            self.head = nn.Linear(hidden, 1)

        def forward(self, src, horizon, target=None, tf_mask=None):
            _, (h, c) = self.encoder(src)
            h, c = h[-1], c[-1]
            inp = src[:, -1, :1]
            outs = []
            for t in range(horizon):
                h, c = self.decoder(inp, (h, c))
                y = self.head(h)
                outs.append(y)
                if target is not None and tf_mask[t]:
                    inp = target[:, t : t + 1]
                else:
                    inp = y
            return torch.cat(outs, dim=1)

    model = set_weights(torch, Seq2Seq(), seed=7)
    t = np.arange(20, dtype=np.float32)
    series = np.sin(t[None] * 0.4 + arr(8, 4, 1)) + arr(9, 4, 20, scale=0.1)
    cov = np.cos(t * 0.4)[None].repeat(4, 0)
    src = torch.tensor(np.stack([series[:, :14], cov[:, :14]], -1))
    tgt = torch.tensor(series[:, 14:])
    tf_mask = [True, False, True, True, False, True]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, norms = [], []
    for _ in range(4):
        opt.zero_grad()
        pred = model(src, 6, tgt, tf_mask)
        loss = nn.functional.mse_loss(pred, tgt)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5))
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        free_run = model(src, 6)
    return {"losses": losses, "norms": norms, "free_run": free_run, "grads": grads(model)}


@program(rtol=5e-4, atol=5e-5)
def tcn_dilated_causal_forecaster(torch):
    nn = torch.nn
    F = nn.functional

    class CausalConv1d(nn.Conv1d):
        def __init__(self, cin, cout, k, dilation=1):
            super().__init__(cin, cout, k, dilation=dilation)
            self.left = (k - 1) * dilation

        def forward(self, x):
            return super().forward(F.pad(x, (self.left, 0)))

    class TemporalBlock(nn.Module):
        def __init__(self, cin, cout, k, dilation):
            super().__init__()
            self.conv1 = CausalConv1d(cin, cout, k, dilation)
            self.conv2 = CausalConv1d(cout, cout, k, dilation)
            self.down = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            out = F.leaky_relu(self.conv1(x), 0.1)
            out = F.leaky_relu(self.conv2(out), 0.1)
            return F.relu(out + self.down(x))

    channels = [1, 6, 6, 6]
    tcn = nn.Sequential(
        *[TemporalBlock(channels[i], channels[i + 1], 3, 2**i) for i in range(3)],
        nn.Conv1d(6, 1, 1),
    )
    set_weights(torch, tcn, seed=12)
    x = torch.tensor(np.cumsum(arr(13, 3, 1, 24, scale=0.3), -1))
    inp, target = x[..., :-1], x[..., 1:]
    opt = torch.optim.SGD(tcn.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.smooth_l1_loss(tcn(inp), target, beta=0.5)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # causality: perturbing the future must not change earlier outputs
    with torch.no_grad():
        a = tcn(inp)
        b = inp.clone()
        b[..., 15:] += 10.0
        causal = torch.equal(a[..., :15], tcn(b)[..., :15])
    return {"losses": losses, "pred": a, "causal": causal, "rf": 1 + 2 * 2 * (1 + 2 + 4)}


@program(rtol=5e-4, atol=5e-5)
def nbeats_trend_and_generic_stacks(torch):
    nn = torch.nn
    L, H = 12, 4

    class Block(nn.Module):
        def __init__(self, theta_dim, basis=None, units=16):
            super().__init__()
            self.fc = nn.Sequential(
                nn.Linear(L, units), nn.ReLU(), nn.Linear(units, units), nn.ReLU()
            )
            self.theta = nn.Linear(units, theta_dim, bias=False)
            if basis is None:
                self.back = nn.Linear(theta_dim, L)
                self.fore = nn.Linear(theta_dim, H)
                self.basis = None
            else:
                self.register_buffer("tb", basis[0])
                self.register_buffer("tf", basis[1])
                self.basis = True

        def forward(self, x):
            theta = self.theta(self.fc(x))
            if self.basis is None:
                return self.back(theta), self.fore(theta)
            p = theta.shape[-1]
            return theta @ self.tb[:p], theta @ self.tf[:p]

    t_back = torch.arange(L, dtype=torch.float32) / L
    t_fore = torch.arange(L, L + H, dtype=torch.float32) / L
    deg = 3
    trend = (
        torch.stack([t_back**i for i in range(deg)]),
        torch.stack([t_fore**i for i in range(deg)]),
    )
    blocks = nn.ModuleList([Block(deg, trend), Block(deg, trend), Block(6), Block(6)])
    set_weights(torch, blocks, seed=21)
    series = torch.tensor(
        np.cumsum(arr(22, 5, L + H, scale=0.5), 1) + np.linspace(0, 3, L + H, dtype=np.float32)
    )
    x, y = series[:, :L], series[:, L:]
    level = x[:, -1:].clone()

    def forecast(x):
        residual, out = (x - level).flip(dims=(1,)), 0.0
        for b in blocks:
            back, fore = b(residual)
            residual = residual - back
            out = out + fore
        return out + level

    def smape(pred, true):
        return 200 * torch.mean(torch.abs(pred - true) / (pred.abs() + true.abs() + 1e-8))

    opt = torch.optim.Adam(blocks.parameters(), lr=3e-3)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = smape(forecast(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "forecast": forecast(x).detach(), "trend_basis": blocks[0].tf}


@program(rtol=5e-4, atol=5e-5)
def quantile_regression_pinball_loss(torch):
    nn = torch.nn
    quantiles = torch.tensor([0.1, 0.5, 0.9])

    def pinball(pred, target, q):
        err = target.unsqueeze(-1) - pred
        return torch.max((q - 1) * err, q * err).mean()

    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, len(quantiles)))
    set_weights(torch, model, seed=31)
    X = torch.tensor(arr(32, 64, 5))
    noise = torch.tensor(arr(33, 64)) * (1 + X[:, 0].abs())
    y = X @ torch.tensor([1.0, -2.0, 0.5, 0.0, 0.3]) + noise
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3, alpha=0.9)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = pinball(model(X), y, quantiles)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        pred = model(X)
        pred_sorted, _ = torch.sort(pred, dim=-1)
        coverage = ((y >= pred_sorted[:, 0]) & (y <= pred_sorted[:, -1])).float().mean()
        crossing = (pred.diff(dim=-1) < 0).any(dim=-1).sum()
        emp_q = torch.quantile(y, quantiles, interpolation="linear")
        emp_mid = torch.quantile(y, 0.5, interpolation="midpoint")
    return {"losses": losses, "pred_head": pred[:5], "coverage": coverage, "crossing": crossing,
            "emp_q": emp_q, "emp_mid": emp_mid, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def deepar_gru_gaussian_likelihood(torch):
    nn = torch.nn
    F = nn.functional

    class DeepAR(nn.Module):
        def __init__(self, n_series, hidden=8):
            super().__init__()
            self.series_emb = nn.Embedding(n_series, 3)
            self.rnn = nn.GRU(1 + 3, hidden, batch_first=True)
            self.mu = nn.Linear(hidden, 1)
            self.presigma = nn.Linear(hidden, 1)

        def forward(self, z_prev, sid):
            emb = self.series_emb(sid)[:, None, :].expand(-1, z_prev.shape[1], -1)
            out, _ = self.rnn(torch.cat([z_prev.unsqueeze(-1), emb], dim=-1))
            return self.mu(out).squeeze(-1), F.softplus(self.presigma(out)).squeeze(-1) + 1e-3

    model = set_weights(torch, DeepAR(4), seed=41)
    raw = torch.tensor(
        np.abs(np.cumsum(arr(42, 4, 16), 1)) * np.array([[1.0], [5.0], [20.0], [0.5]], np.float32)
    )
    scale = 1.0 + raw.abs().mean(dim=1, keepdim=True)  # DeepAR's per-series scaling
    z = raw / scale
    sid = torch.arange(4)
    z_prev, z_next = z[:, :-1], z[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    losses, manual = [], []
    for _ in range(4):
        opt.zero_grad()
        mu, sigma = model(z_prev, sid)
        loss = F.gaussian_nll_loss(mu, z_next, sigma**2, full=True)
        manual.append(-torch.distributions.Normal(mu, sigma).log_prob(z_next).mean().item())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    crit = nn.GaussianNLLLoss(eps=1e-4, reduction="none")
    with torch.no_grad():
        mu, sigma = model(z_prev, sid)
        per_point = crit(mu, z_next, sigma.pow(2))
        q90 = (mu + 1.2815516 * sigma) * scale
    return {"losses": losses, "manual": manual, "per_point": per_point, "q90": q90, "scale": scale}


@program(rtol=5e-4, atol=5e-5)
def sliding_windows_unfold_instance_norm(torch):
    nn = torch.nn
    series = torch.tensor(
        np.cumsum(arr(51, 3, 30), 1) * np.array([[1.0], [10.0], [0.1]], np.float32) + 50.0
    )
    window, horizon, step = 8, 2, 3
    win = series.unfold(dimension=1, size=window + horizon, step=step)  # (S, n_win, w+h)
    n_win = win.size(1)
    x, y = win[..., :window], win[..., window:]
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True, unbiased=False) + 1e-5
    xn, yn = (x - mean) / std, (y - mean) / std
    var, mu2 = torch.var_mean(x, dim=-1, correction=0)
    model = nn.Sequential(
        nn.Flatten(0, 1), nn.Linear(window, 12), nn.GELU(approximate="tanh"), nn.Linear(12, horizon)
    )
    set_weights(torch, model, seed=52)
    opt = torch.optim.Adamax(model.parameters(), lr=2e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        pred = model(xn).unflatten(0, (3, n_win))
        loss = nn.functional.l1_loss(pred, yn)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        denorm = model(xn).view(3, n_win, horizon) * std + mean
    return {"windows_shape": list(win.shape), "win_stride": list(win.stride()), "is_contig": win.is_contiguous(),
            "var_match": torch.allclose(var, std.squeeze(-1).sub(1e-5).pow(2), rtol=1e-4),
            "mean_match": torch.allclose(mu2, mean.squeeze(-1)), "losses": losses, "denorm": denorm}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def bucketize_one_hot_logistic_lbfgs(torch):
    F = torch.nn.functional
    age = torch.tensor(
        np.round(np.random.default_rng(61).uniform(18, 80, 40)).astype(np.float32) + 0.5
    )
    income = torch.tensor(arr(62, 40, scale=1.0))
    boundaries = torch.tensor([25.0, 35.0, 45.0, 60.0])
    age_bin = torch.bucketize(age, boundaries)
    age_bin_r = torch.bucketize(age, boundaries, right=True)
    inc_bin = torch.searchsorted(torch.tensor([-1.0, 0.0, 1.0]), income.contiguous())
    feats = torch.cat([
        F.one_hot(age_bin, num_classes=len(boundaries) + 1)[:, 1:].float(),  # drop_first
        F.one_hot(inc_bin, 4)[:, 1:].to(torch.float32),
        ((age - age.mean()) / age.std()).unsqueeze(1),
    ], dim=1)  # fmt: skip
    y = ((age > 40) ^ (income > 0.5)).float()
    w = torch.zeros(feats.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w, b], lr=0.5, max_iter=10, history_size=5, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(feats @ w + b, y) + 5e-2 * w.pow(2).sum()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(3)]
    counts = torch.bincount(age_bin, minlength=5)
    return {"age_bin": age_bin, "same_as_right": torch.equal(age_bin, age_bin_r), "inc_bin": inc_bin,
            "counts": counts, "losses": losses, "w": w, "b": b}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def early_stopping_deepcopy_best_state(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(6, 10), nn.BatchNorm1d(10), nn.SiLU(), nn.Linear(10, 1))
    set_weights(torch, model, seed=71)
    X = torch.tensor(arr(72, 48, 6))
    y = (X[:, :2].sum(1, keepdim=True) + 0.3 * torch.tensor(arr(73, 48, 1))).sin()
    Xtr, ytr, Xva, yva = X[:32], y[:32], X[32:], y[32:]
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.5)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1)
    best_loss, best_state, best_epoch, patience, bad = math.inf, None, -1, 3, 0
    history = []
    for epoch in range(12):
        model.train()
        for xb, yb in zip(Xtr.split(8), ytr.split(8)):
            opt.zero_grad()
            nn.functional.mse_loss(model(xb), yb).backward()
            nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
            opt.step()
        model.eval()
        with torch.no_grad():
            val = nn.functional.mse_loss(model(Xva), yva).item()
        sched.step(val)
        history.append(val)
        if val < best_loss - 1e-4:
            best_loss, best_epoch, bad = val, epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                break
    last = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    with torch.no_grad():
        restored = nn.functional.mse_loss(model(Xva), yva).item()
    return {"history": history, "best_epoch": best_epoch, "best_loss": best_loss, "restored": restored,
            "lr": opt.param_groups[0]["lr"], "state_keys": list(best_state.keys()),
            "nbt": best_state["1.num_batches_tracked"], "last_w": last["0.weight"], "best_w": best_state["0.weight"]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lag_rolling_features_huber(torch):
    nn = torch.nn
    F = nn.functional
    y = torch.tensor(np.cumsum(arr(81, 2, 40), 1) + 10.0)
    y[0, 5] = float("nan")  # a missing observation
    filled = torch.where(torch.isnan(y), torch.nanmean(y, dim=1, keepdim=True), y)
    lags = torch.stack([F.pad(filled, (k, 0), mode="replicate")[:, :-k] for k in (1, 2, 7)], dim=-1)
    roll_mean = F.avg_pool1d(
        F.pad(filled.unsqueeze(1), (4, 0), mode="replicate"), 5, stride=1
    ).squeeze(1)
    csum = torch.cumsum(F.pad(filled, (1, 0)), dim=1)
    roll_mean_cs = (csum[:, 5:] - csum[:, :-5]) / 5
    running_max, _ = torch.cummax(filled, dim=1)
    drawdown = filled / running_max - 1
    alpha, ewm = 0.3, [filled[:, 0]]
    for t in range(1, filled.shape[1]):
        ewm.append(alpha * filled[:, t] + (1 - alpha) * ewm[-1])
    ewm = torch.stack(ewm, 1)
    feats = torch.cat(
        [lags, roll_mean.unsqueeze(-1), drawdown.unsqueeze(-1), ewm.unsqueeze(-1)], -1
    )[:, 7:]
    target = filled[:, 7:]
    feats = (feats - feats.mean((0, 1))) / feats.std((0, 1))
    reg = set_weights(torch, nn.Linear(feats.shape[-1], 1), seed=82)
    opt = torch.optim.NAdam(reg.parameters(), lr=0.05)
    crit = nn.HuberLoss(delta=1.0)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = crit(reg(feats).squeeze(-1), target - target.mean())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"filled": filled, "lags": lags[:, :10], "roll_mean": roll_mean, "roll_match": torch.allclose(roll_mean[:, 4:], roll_mean_cs, atol=1e-4),
            "drawdown": drawdown, "ewm": ewm, "losses": losses, "w": reg.weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def multi_hot_embeddingbag_gated_tabular(torch):
    nn = torch.nn
    F = nn.functional

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tags = nn.EmbeddingBag(10, 6, mode="sum", padding_idx=0)
            self.city = nn.Embedding(5, 4, max_norm=1.0)
            self.gate = nn.Linear(6 + 4 + 3, 2 * 8)
            self.out = nn.Linear(8, 1)
            self.weights = nn.ParameterDict({"temp": nn.Parameter(torch.ones(1))})

        def forward(self, tags, offsets, tag_w, city, num):
            h = torch.cat(
                [self.tags(tags, offsets, per_sample_weights=tag_w), self.city(city), num], 1
            )
            return self.out(F.glu(self.gate(h), dim=-1)).squeeze(1) / self.weights["temp"]

    model = set_weights(torch, Model(), seed=91)
    lengths = [3, 1, 0, 2, 4, 2]
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)[:-1]]))
    tags = torch.tensor(ints(92, 10, sum(lengths)))
    tag_w = torch.tensor(
        np.random.default_rng(93).uniform(0.5, 1.5, sum(lengths)).astype(np.float32)
    )
    city = torch.tensor(ints(94, 5, 6))
    num = torch.tensor(arr(95, 6, 3))
    y = torch.tensor(arr(96, 6))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.mse_loss(model(tags, offsets, tag_w, city, num), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "city_norms": model.city.weight.norm(dim=1), "grads": grads(model),
            "tag_weight": model.tags.weight, "temp": model.weights["temp"]}  # fmt: skip
