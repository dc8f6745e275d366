"""Deep time-series forecasting as the popular repositories write it: N-BEATS trend/seasonality
bases, N-HiTS pooling and interpolation, a TCN with weight-normalized causal dilated convolutions,
DeepAR's scaled Gaussian and negative-binomial likelihoods, Autoformer's series decomposition and
FFT auto-correlation, Informer's ProbSparse attention and distilling convolutions, TFT's gated
residual networks and variable selection, RevIN + PatchTST patching, DLinear, quantile losses and
the M4 metrics (sMAPE, MASE, OWA)."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _series(seed: int, batch: int, length: int, period: int = 6, level: float = 0.0) -> np.ndarray:
    """Trend + seasonality + noise, ``(batch, length)`` float32."""
    t = np.arange(length, dtype=np.float32)
    g = np.random.default_rng(seed)
    slope = g.uniform(-0.05, 0.1, (batch, 1))
    amp = g.uniform(0.5, 1.5, (batch, 1))
    phase = g.uniform(0, 2 * np.pi, (batch, 1))
    noise = g.standard_normal((batch, length)) * 0.1
    y = level + slope * t + amp * np.sin(2 * np.pi * t / period + phase) + noise
    return y.astype(np.float32)


@program(rtol=5e-4, atol=5e-5)  # 4 Adam steps through stacked blocks: float32 reduction order
def tsd_nbeats_interpretable_trend_seasonality(torch):
    nn = torch.nn
    backcast_len, forecast_len = 12, 6

    def linspace(backcast_length, forecast_length):
        lin_space = np.linspace(
            -backcast_length, forecast_length, backcast_length + forecast_length
        )
        return lin_space[:backcast_length], lin_space[backcast_length:]

    b_ls, f_ls = linspace(backcast_len, forecast_len)

    def trend_basis(p, t):
        return torch.tensor(np.array([t**i for i in range(p)]), dtype=torch.float32)

    def seasonality_basis(p, t):
        p1, p2 = (p // 2, p // 2) if p % 2 == 0 else (p // 2, p // 2 + 1)
        s1 = np.array([np.cos(2 * np.pi * i * t) for i in range(p1)])
        s2 = np.array([np.sin(2 * np.pi * i * t) for i in range(p2)])
        return torch.tensor(np.concatenate([s1, s2]), dtype=torch.float32)

    class Block(nn.Module):
        def __init__(self, units, thetas_dim, basis):
            super().__init__()
            self.fc1 = nn.Linear(backcast_len, units)
            self.fc2 = nn.Linear(units, units)
            self.fc3 = nn.Linear(units, units)
            self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
            self.theta_f_fc = nn.Linear(units, thetas_dim, bias=False)
            self.register_buffer("T_b", basis(thetas_dim, b_ls / backcast_len))
            self.register_buffer("T_f", basis(thetas_dim, f_ls / backcast_len))

        def forward(self, x):
            x = torch.relu(self.fc1(x))
            x = torch.relu(self.fc2(x))
            x = torch.relu(self.fc3(x))
            theta_b = self.theta_b_fc(x)
            theta_f = self.theta_f_fc(x)
            return theta_b.mm(self.T_b), theta_f.mm(self.T_f)

    class NBeats(nn.Module):
        def __init__(self):
            super().__init__()
            self.stacks = nn.ModuleList([
                nn.ModuleList([Block(16, 3, trend_basis) for _ in range(2)]),
                nn.ModuleList([Block(16, 8, seasonality_basis) for _ in range(2)]),
            ])  # fmt: skip

        def forward(self, backcast):
            forecast = torch.zeros(size=(backcast.size()[0], forecast_len))
            stack_forecasts = []
            for stack in self.stacks:
                stack_f = torch.zeros_like(forecast)
                for block in stack:
                    b, f = block(backcast)
                    backcast = backcast - b
                    stack_f = stack_f + f
                forecast = forecast + stack_f
                stack_forecasts.append(stack_f)
            return backcast, forecast, stack_forecasts

    model = set_weights(torch, NBeats(), seed=3)
    y = torch.from_numpy(_series(4, 8, backcast_len + forecast_len, level=2.0))
    x, target = y[:, :backcast_len], y[:, backcast_len:]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        _, forecast, _ = model(x)
        loss = nn.functional.l1_loss(forecast, target)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        residual, forecast, (trend, season) = model(x)
    return {
        "losses": losses,
        "residual": residual,
        "forecast": forecast,
        "trend": trend,
        "seasonality": season,
        "T_f_trend": model.stacks[0][0].T_f,
        "T_b_season": model.stacks[1][0].T_b,
        "fc1": model.stacks[1][1].fc1.weight,
    }


@program(rtol=5e-4, atol=5e-5)  # conv + weight-norm backward then 3 Adam steps
def tsd_tcn_weight_norm_chomp(torch):
    nn = torch.nn
    from_norm = nn.utils.weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, chomp_size):
            super().__init__()
            self.chomp_size = chomp_size

        def forward(self, x):
            return x[:, :, : -self.chomp_size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding):
            super().__init__()
            self.conv1 = from_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size, stride=stride,
                                             padding=padding, dilation=dilation))  # fmt: skip
            self.chomp1 = Chomp1d(padding)
            self.relu1 = nn.ReLU()
            self.dropout1 = nn.Dropout(0.0)
            self.conv2 = from_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size, stride=stride,
                                             padding=padding, dilation=dilation))  # fmt: skip
            self.chomp2 = Chomp1d(padding)
            self.relu2 = nn.ReLU()
            self.dropout2 = nn.Dropout(0.0)
            self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                     self.conv2, self.chomp2, self.relu2, self.dropout2)  # fmt: skip
            self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.net(x)
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(out + res)

    class TCN(nn.Module):
        def __init__(self, num_inputs, num_channels, kernel_size=2):
            super().__init__()
            layers = []
            for i, out_ch in enumerate(num_channels):
                dilation_size = 2**i
                in_ch = num_inputs if i == 0 else num_channels[i - 1]
                layers += [TemporalBlock(in_ch, out_ch, kernel_size, stride=1,
                                         dilation=dilation_size,
                                         padding=(kernel_size - 1) * dilation_size)]  # fmt: skip
            self.network = nn.Sequential(*layers)
            self.linear = nn.Linear(num_channels[-1], 1)

        def forward(self, x):
            y = self.network(x)
            return self.linear(y[:, :, -1])

    model = TCN(2, [6, 6, 6], kernel_size=3)
    # fixed weights for v (and g recomputed from them, as weight_norm does at construction)
    g = np.random.default_rng(5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_g"):
                continue
            p.copy_(torch.tensor(g.uniform(-0.4, 0.4, tuple(p.shape)).astype(np.float32)))
        for m in model.modules():
            if isinstance(m, nn.Conv1d) and hasattr(m, "weight_g"):
                m.weight_g.copy_(m.weight_v.norm(dim=(1, 2), keepdim=True))
    x = torch.from_numpy(np.stack([_series(6, 5, 20), _series(7, 5, 20, period=4)], 1))
    y = torch.from_numpy(_series(8, 5, 1))
    # causality: changing the last step must not change earlier outputs of the first block
    block = model.network[0]
    with torch.no_grad():
        h1 = block(x)
        x2 = x.clone()
        x2[:, :, -1] += 10.0
        h2 = block(x2)
    causal_ok = bool(torch.equal(h1[:, :, :-1], h2[:, :, :-1]))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for step in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        if step == 0:
            first_grads = {k: v.clone() for k, v in grads(model).items() if v is not None}
        opt.step()
        losses.append(loss.item())
    receptive_field = 1 + 2 * (3 - 1) * sum(2**i for i in range(3))
    return {
        "causal_ok": causal_ok,
        "receptive_field": receptive_field,
        "losses": losses,
        "first_grads": first_grads,
        "params": params(model),
        "weight_after": model.network[1].conv2.weight,
        "names": sorted(n for n, _ in model.network[0].conv1.named_parameters()),
    }


@program(rtol=5e-4, atol=5e-5)  # LSTM unroll + 3 Adam steps: float32 reduction order
def tsd_deepar_negative_binomial_mean_scaling(torch):
    nn = torch.nn
    F = nn.functional
    g = np.random.default_rng(9)
    counts = g.poisson(lam=np.linspace(2.0, 30.0, 6)[:, None] * (1.2 + np.sin(np.arange(16) / 2.0)))
    z = torch.tensor(counts.astype(np.float32))  # (batch, time) sales counts

    class DeepARNegBin(nn.Module):
        def __init__(self, hidden=8, n_cov=2):
            super().__init__()
            self.rnn = nn.LSTM(1 + n_cov, hidden, num_layers=2, batch_first=True, dropout=0.0)
            self.distribution_mu = nn.Linear(hidden, 1)
            self.distribution_alpha = nn.Linear(hidden, 1)

        def forward(self, z_lag, cov, scale):
            inp = torch.cat([(z_lag / scale).unsqueeze(-1), cov], dim=-1)
            h, _ = self.rnn(inp)
            mu = F.softplus(self.distribution_mu(h)).squeeze(-1) * scale
            alpha = F.softplus(self.distribution_alpha(h)).squeeze(-1) / torch.sqrt(scale)
            return mu, alpha

    def negative_binomial_loss(z, mu, alpha):
        r = 1.0 / alpha
        ll = (torch.lgamma(z + r) - torch.lgamma(z + 1.0) - torch.lgamma(r)
              + r * torch.log(r / (r + mu)) + z * torch.log(mu / (r + mu)))  # fmt: skip
        return -ll.mean()

    model = set_weights(torch, DeepARNegBin(), seed=10)
    t = torch.arange(16, dtype=torch.float32)
    cov = torch.stack([torch.sin(t / 2.0), t / 16.0], -1).unsqueeze(0).expand(6, -1, -1)
    cov = cov[:, 1:]
    z_lag, target = z[:, :-1], z[:, 1:]
    # DeepAR's mean scaling: 1 + average of the conditioning range
    scale = 1.0 + z_lag[:, :8].abs().mean(dim=1, keepdim=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        mu, alpha = model(z_lag, cov, scale)
        loss = negative_binomial_loss(target, mu, alpha)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        mu, alpha = model(z_lag, cov, scale)
        # GluonTS's parametrization of the same distribution
        total_count = 1.0 / alpha
        dist = torch.distributions.NegativeBinomial(total_count=total_count,
                                                    logits=torch.log(mu * alpha))  # fmt: skip
        lp = dist.log_prob(target)
    return {
        "scale": scale,
        "losses": losses,
        "mu": mu,
        "alpha": alpha,
        "dist_mean_close": torch.allclose(dist.mean, mu, rtol=1e-4),
        "dist_var": dist.variance,
        "log_prob": lp,
        "nll_match": (-lp.mean() - negative_binomial_loss(target, mu, alpha)).abs() < 1e-3,
        "lstm_w": model.rnn.weight_hh_l1,
    }


@program(rtol=5e-4, atol=5e-5)  # GRU unroll + 3 steps: float32 reduction order
def tsd_deepar_gaussian_scaled_quantiles(torch):
    nn = torch.nn
    F = nn.functional
    D = torch.distributions
    context, horizon = 12, 4
    y = torch.from_numpy(np.abs(_series(11, 4, context + horizon, level=20.0)) * 5.0)
    lags = [1, 2, 6]

    def lagged(series, lags):
        cols = [F.pad(series, (lag, 0))[:, : series.shape[1]] for lag in lags]
        return torch.stack(cols, dim=-1)

    class DeepAR(nn.Module):
        def __init__(self, hidden=8):
            super().__init__()
            self.embed = nn.Embedding(4, 2)
            self.rnn = nn.GRU(len(lags) + 2, hidden, batch_first=True)
            self.proj = nn.Linear(hidden, 2)

        def forward(self, series, item, scale):
            x = lagged(series / scale, lags)
            emb = self.embed(item).unsqueeze(1).expand(-1, x.shape[1], -1)
            h, _ = self.rnn(torch.cat([x, emb], -1))
            loc, pre_scale = self.proj(h).unbind(-1)
            sigma = F.softplus(pre_scale) + 1e-3
            return D.Normal(loc * scale, sigma * scale)

    model = set_weights(torch, DeepAR(), seed=12)
    item = torch.arange(4)
    past = y[:, :context]
    scale = past.abs().mean(1, keepdim=True).clamp(min=1e-10)
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        dist = model(y[:, :-1], item, scale)
        loss = -dist.log_prob(y[:, 1:]).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        dist = model(y[:, :-1], item, scale)
        levels = torch.tensor([0.1, 0.5, 0.9])
        quantiles = dist.icdf(levels.view(-1, 1, 1))  # (3, batch, time)
        cdf = dist.cdf(y[:, 1:])
        coverage = ((y[:, 1:] >= quantiles[0]) & (y[:, 1:] <= quantiles[2])).float().mean()
        crps_like = (dist.stddev / scale).mean()
    return {
        "losses": losses,
        "scale": scale,
        "loc": dist.loc[:, -horizon:],
        "quantiles": quantiles[:, :, -horizon:],
        "cdf": cdf,
        "coverage": coverage,
        "entropy": dist.entropy().mean(),
        "crps_like": crps_like,
        "grads": grads(model),
    }


@program
def tsd_autoformer_series_decomposition(torch):
    nn = torch.nn
    F = nn.functional

    class moving_avg(nn.Module):
        def __init__(self, kernel_size, stride):
            super().__init__()
            self.kernel_size = kernel_size
            self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=0)

        def forward(self, x):  # x: (batch, length, channels)
            front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            x = torch.cat([front, x, end], dim=1)
            x = self.avg(x.permute(0, 2, 1))
            return x.permute(0, 2, 1)

    class series_decomp(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.moving_avg = moving_avg(kernel_size, stride=1)

        def forward(self, x):
            moving_mean = self.moving_avg(x)
            res = x - moving_mean
            return res, moving_mean

    class series_decomp_multi(nn.Module):  # FEDformer's mixture of experts decomposition
        def __init__(self, kernel_sizes):
            super().__init__()
            self.moving_avg = nn.ModuleList([moving_avg(k, stride=1) for k in kernel_sizes])
            self.layer = nn.Linear(1, len(kernel_sizes))

        def forward(self, x):
            moving_mean = torch.cat([f(x).unsqueeze(-1) for f in self.moving_avg], dim=-1)
            weights = F.softmax(self.layer(x.unsqueeze(-1)), dim=-1)
            moving_mean = torch.sum(moving_mean * weights, dim=-1)
            return x - moving_mean, moving_mean

    x_np = np.stack([_series(13, 3, 24), _series(14, 3, 24, period=8)], -1)  # (3, 24, 2)
    x = torch.from_numpy(x_np).requires_grad_()
    seasonal, trend = series_decomp(5)(x)
    # the same moving average with F.pad's replicate mode
    xt = x.detach().permute(0, 2, 1)
    trend_pad = F.avg_pool1d(F.pad(xt, (2, 2), mode="replicate"), kernel_size=5, stride=1)
    trend_pad = trend_pad.permute(0, 2, 1)
    # 25 is Autoformer's default; longer than half the series it is mostly the edge values
    _, trend25 = series_decomp(25)(x.detach())
    multi = set_weights(torch, series_decomp_multi([3, 7]), seed=15)
    seas_m, trend_m = multi(x)
    (seasonal.pow(2).sum() + (trend_m * trend).sum()).backward()
    return {
        "seasonal": seasonal,
        "trend": trend,
        "pad_max_diff": (trend_pad - trend).abs().max(),
        "trend25": trend25,
        "seasonal_multi": seas_m,
        "x_grad": x.grad,
        "multi_grads": grads(multi),
    }


@program(rtol=5e-4, atol=5e-5)  # FFT products and irfft: float32 rounding differs by algorithm
def tsd_autoformer_autocorrelation_delay_agg(torch):
    nn = torch.nn

    class AutoCorrelation(nn.Module):
        def __init__(self, factor=1):
            super().__init__()
            self.factor = factor

        def time_delay_agg_training(self, values, corr):
            head, channel, length = values.shape[1], values.shape[2], values.shape[3]
            top_k = int(self.factor * math.log(length))
            mean_value = torch.mean(torch.mean(corr, dim=1), dim=1)
            index = torch.topk(torch.mean(mean_value, dim=0), top_k, dim=-1)[1]
            weights = torch.stack([mean_value[:, index[i]] for i in range(top_k)], dim=-1)
            tmp_corr = torch.softmax(weights, dim=-1)
            tmp_values = values
            delays_agg = torch.zeros_like(values).float()
            for i in range(top_k):
                pattern = torch.roll(tmp_values, -int(index[i]), -1)
                delays_agg = delays_agg + pattern * (
                    tmp_corr[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1).repeat(1, head, channel, length)
                )  # fmt: skip
            return delays_agg, index

        def time_delay_agg_inference(self, values, corr):
            batch, head, channel, length = values.shape
            init_index = torch.arange(length).unsqueeze(0).unsqueeze(0).unsqueeze(0)
            init_index = init_index.repeat(batch, head, channel, 1)
            top_k = int(self.factor * math.log(length))
            mean_value = torch.mean(torch.mean(corr, dim=1), dim=1)
            weights, delay = torch.topk(mean_value, top_k, dim=-1)
            tmp_corr = torch.softmax(weights, dim=-1)
            tmp_values = values.repeat(1, 1, 1, 2)
            delays_agg = torch.zeros_like(values).float()
            for i in range(top_k):
                tmp_delay = init_index + delay[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1).repeat(
                    1, head, channel, length)  # fmt: skip
                pattern = torch.gather(tmp_values, dim=-1, index=tmp_delay)
                delays_agg = delays_agg + pattern * (
                    tmp_corr[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1).repeat(1, head, channel, length)
                )  # fmt: skip
            return delays_agg

        def forward(self, queries, keys, values):
            B, L, H, E = queries.shape
            q_fft = torch.fft.rfft(queries.permute(0, 2, 3, 1).contiguous(), dim=-1)
            k_fft = torch.fft.rfft(keys.permute(0, 2, 3, 1).contiguous(), dim=-1)
            res = q_fft * torch.conj(k_fft)
            corr = torch.fft.irfft(res, n=L, dim=-1)
            v = values.permute(0, 2, 3, 1).contiguous()
            if self.training:
                V, index = self.time_delay_agg_training(v, corr)
            else:
                V, index = self.time_delay_agg_inference(v, corr), None
            return V.permute(0, 3, 1, 2), corr.permute(0, 3, 1, 2), index

    B, L, H, E = 2, 16, 2, 3
    proj = set_weights(torch, nn.Linear(4, 3 * H * E), seed=16)
    x = torch.from_numpy(np.stack([_series(17 + i, 4, L, period=5) for i in range(B)], 0)
                         .transpose(0, 2, 1).copy())  # fmt: skip
    q, k, v = proj(x).view(B, L, 3, H, E).unbind(2)
    attn = AutoCorrelation(factor=1)
    out, corr, index = attn(q, k, v)
    out.square().mean().backward()
    attn.eval()
    with torch.no_grad():
        out_inf, _, _ = attn(q, k, v)
    return {
        "corr": corr,
        "index": index,
        "out": out,
        "out_inference": out_inf,
        "proj_grad": proj.weight.grad,
        "bias_grad": proj.bias.grad,
    }


@program(rtol=5e-4, atol=5e-5)  # attention softmax + matmuls: float32 reduction order
def tsd_informer_probsparse_attention(torch):
    B, H, L_Q, L_K, D = 2, 2, 12, 12, 4
    factor = 2
    U_part = min(factor * int(np.ceil(np.log(L_K))), L_K)  # sampled keys per query
    u = min(factor * int(np.ceil(np.log(L_Q))), L_Q)  # active queries
    index_sample = torch.from_numpy(ints(21, L_K, L_Q, U_part))  # fixed instead of randint
    Q = torch.from_numpy(arr(22, B, H, L_Q, D)).requires_grad_()
    K = torch.from_numpy(arr(23, B, H, L_K, D)).requires_grad_()
    V = torch.from_numpy(arr(24, B, H, L_K, D)).requires_grad_()

    def prob_QK(Q, K, sample_k, n_top):
        B, H, L_K, E = K.shape
        _, _, L_Q, _ = Q.shape
        K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)
        K_sample = K_expand[:, :, torch.arange(L_Q).unsqueeze(1), index_sample, :]
        Q_K_sample = torch.matmul(Q.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze(-2)
        M = Q_K_sample.max(-1)[0] - torch.div(Q_K_sample.sum(-1), L_K)
        M_top = M.topk(n_top, sorted=False)[1]
        Q_reduce = Q[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], M_top, :]
        Q_K = torch.matmul(Q_reduce, K.transpose(-2, -1))
        return Q_K, M_top, M

    def initial_context(V, L_Q, mask_flag):
        B, H, L_V, D = V.shape
        if not mask_flag:
            V_sum = V.mean(dim=-2)
            return V_sum.unsqueeze(-2).expand(B, H, L_Q, V_sum.shape[-1]).clone()
        return V.cumsum(dim=-2)

    def update_context(context_in, V, scores, index, L_Q, mask_flag):
        B, H, L_V, D = V.shape
        if mask_flag:
            _mask = torch.ones(L_Q, scores.shape[-1], dtype=torch.bool).triu(1)
            _mask_ex = _mask[None, None, :].expand(B, H, L_Q, scores.shape[-1])
            indicator = _mask_ex[
                torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :
            ]
            scores = scores.masked_fill(indicator, -np.inf)
        attn = torch.softmax(scores, dim=-1)
        context_in[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :] = (
            torch.matmul(attn, V).type_as(context_in)
        )  # fmt: skip
        return context_in, attn

    results = {}
    for mask_flag in (False, True):
        scores_top, index, M = prob_QK(Q, K, U_part, u)
        scores_top = scores_top * (1.0 / math.sqrt(D))
        context = initial_context(V, L_Q, mask_flag)
        context, attn = update_context(context, V, scores_top, index, L_Q, mask_flag)
        tag = "masked" if mask_flag else "full"
        results[f"{tag}_context"] = context
        results[f"{tag}_top_sorted"] = index.sort(dim=-1)[0]
        results[f"{tag}_M"] = M
        context.pow(2).sum().backward()
        results[f"{tag}_grads"] = {"Q": Q.grad.clone(), "K": K.grad.clone(), "V": V.grad.clone()}
        Q.grad = K.grad = V.grad = None
    results["u"] = u
    results["U_part"] = U_part
    return results


@program(rtol=5e-4, atol=5e-5)  # conv + batchnorm + 3 SGD steps: float32 reduction order
def tsd_informer_token_embedding_distil(torch):
    nn = torch.nn
    F = nn.functional

    class PositionalEmbedding(nn.Module):
        def __init__(self, d_model, max_len=64):
            super().__init__()
            pe = torch.zeros(max_len, d_model).float()
            pe.require_grad = False
            position = torch.arange(0, max_len).float().unsqueeze(1)
            div_term = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x):
            return self.pe[:, : x.size(1)]

    class TokenEmbedding(nn.Module):
        def __init__(self, c_in, d_model):
            super().__init__()
            self.tokenConv = nn.Conv1d(c_in, d_model, kernel_size=3, padding=1,
                                       padding_mode="circular", bias=False)  # fmt: skip
            for m in self.modules():
                if isinstance(m, nn.Conv1d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="leaky_relu")

        def forward(self, x):
            return self.tokenConv(x.permute(0, 2, 1)).transpose(1, 2)

    class TimeFeatureEmbedding(nn.Module):
        def __init__(self, d_inp, d_model):
            super().__init__()
            self.embed = nn.Linear(d_inp, d_model, bias=False)

        def forward(self, x):
            return self.embed(x)

    class ConvLayer(nn.Module):
        def __init__(self, c_in):
            super().__init__()
            self.downConv = nn.Conv1d(c_in, c_in, kernel_size=3, padding=1, padding_mode="circular")
            self.norm = nn.BatchNorm1d(c_in)
            self.activation = nn.ELU()
            self.maxPool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

        def forward(self, x):
            x = self.downConv(x.permute(0, 2, 1))
            x = self.norm(x)
            x = self.activation(x)
            x = self.maxPool(x)
            return x.transpose(1, 2)

    class Encoder(nn.Module):
        def __init__(self, c_in, d_model):
            super().__init__()
            self.value_embedding = TokenEmbedding(c_in, d_model)
            self.position_embedding = PositionalEmbedding(d_model)
            self.temporal_embedding = TimeFeatureEmbedding(4, d_model)
            self.dropout = nn.Dropout(p=0.0)
            self.distil = nn.ModuleList([ConvLayer(d_model), ConvLayer(d_model)])
            self.head = nn.Linear(d_model, 1)

        def forward(self, x, x_mark):
            x = (
                self.value_embedding(x)
                + self.temporal_embedding(x_mark)
                + self.position_embedding(x)
            )
            x = self.dropout(x)
            lengths = [x.shape[1]]
            for layer in self.distil:
                x = layer(x)
                lengths.append(x.shape[1])
            return self.head(x).squeeze(-1), lengths

    model = set_weights(torch, Encoder(3, 8), seed=25)
    L = 16
    x = torch.from_numpy(np.stack([_series(26 + c, 4, L) for c in range(3)], -1))
    hours = np.arange(L) % 24
    x_mark = np.stack([hours / 23.0 - 0.5, (np.arange(L) // 24 % 7) / 6.0 - 0.5,
                       np.zeros(L), np.full(L, 0.25)], -1).astype(np.float32)  # fmt: skip
    x_mark = torch.from_numpy(np.broadcast_to(x_mark, (4, L, 4)).copy())
    target = torch.from_numpy(arr(27, 4, 4, scale=0.5))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        out, lengths = model(x, x_mark)
        loss = F.mse_loss(out, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out_eval, _ = model(x, x_mark)
    return {
        "pe": model.position_embedding.pe[0, :6],
        "lengths": lengths,
        "losses": losses,
        "out_eval": out_eval,
        "running_var": model.distil[1].norm.running_var,
        "token_conv": model.value_embedding.tokenConv.weight,
    }


@program(rtol=5e-4, atol=5e-5)  # GRN stack + 4 Adam steps: float32 reduction order
def tsd_tft_grn_variable_selection(torch):
    nn = torch.nn
    F = nn.functional

    class GatedLinearUnit(nn.Module):
        def __init__(self, input_size, hidden_size, dropout=0.0):
            super().__init__()
            self.dropout = nn.Dropout(dropout)
            self.fc = nn.Linear(input_size, hidden_size * 2)

        def forward(self, x):
            return F.glu(self.fc(self.dropout(x)), dim=-1)

    class AddNorm(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.norm = nn.LayerNorm(size)

        def forward(self, x, skip):
            return self.norm(x + skip)

    class GatedResidualNetwork(nn.Module):
        def __init__(self, input_size, hidden_size, output_size, context_size=None):
            super().__init__()
            self.resample = (
                nn.Linear(input_size, output_size) if input_size != output_size else None
            )
            self.fc1 = nn.Linear(input_size, hidden_size)
            self.elu = nn.ELU()
            self.context = (
                nn.Linear(context_size, hidden_size, bias=False) if context_size else None
            )
            self.fc2 = nn.Linear(hidden_size, hidden_size)
            self.gate_norm_glu = GatedLinearUnit(hidden_size, output_size)
            self.gate_norm = AddNorm(output_size)

        def forward(self, x, context=None):
            residual = x if self.resample is None else self.resample(x)
            x = self.fc1(x)
            if context is not None:
                x = x + self.context(context)
            x = self.elu(x)
            x = self.fc2(x)
            return self.gate_norm(self.gate_norm_glu(x), residual)

    class VariableSelectionNetwork(nn.Module):
        def __init__(self, input_sizes, hidden_size, context_size):
            super().__init__()
            self.input_sizes = input_sizes
            self.flattened_grn = GatedResidualNetwork(sum(input_sizes.values()), hidden_size,
                                                      len(input_sizes), context_size)  # fmt: skip
            self.single_variable_grns = nn.ModuleDict({
                name: GatedResidualNetwork(size, hidden_size, hidden_size)
                for name, size in input_sizes.items()
            })  # fmt: skip
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, x: dict, context=None):
            var_outputs = [self.single_variable_grns[n](x[n]) for n in self.input_sizes]
            var_outputs = torch.stack(var_outputs, dim=-1)
            flat = torch.cat([x[n] for n in self.input_sizes], dim=-1)
            sparse_weights = self.softmax(self.flattened_grn(flat, context)).unsqueeze(-2)
            outputs = (var_outputs * sparse_weights).sum(dim=-1)
            return outputs, sparse_weights.squeeze(-2)

    class TinyTFT(nn.Module):
        def __init__(self):
            super().__init__()
            self.static_context = GatedResidualNetwork(3, 6, 6)
            self.vsn = VariableSelectionNetwork({"target": 1, "price": 1, "calendar": 3}, 6, 6)
            self.lstm = nn.LSTM(6, 6, batch_first=True)
            self.post_lstm_gate = GatedLinearUnit(6, 6)
            self.post_lstm_norm = AddNorm(6)
            self.output_layer = nn.Linear(6, 3)  # 3 quantiles

        def forward(self, static, x):
            c = self.static_context(static)
            emb, weights = self.vsn(x, c.unsqueeze(1).expand(-1, x["target"].shape[1], -1))
            lstm_out, _ = self.lstm(emb, (c.unsqueeze(0), torch.zeros_like(c).unsqueeze(0)))
            h = self.post_lstm_norm(self.post_lstm_gate(lstm_out), emb)
            return self.output_layer(h), weights

    model = set_weights(torch, TinyTFT(), seed=30)
    y = torch.from_numpy(_series(31, 4, 10))
    x = {
        "target": y[:, :-1].unsqueeze(-1),
        "price": torch.from_numpy(arr(32, 4, 9, 1)),
        "calendar": torch.from_numpy(arr(33, 4, 9, 3, scale=0.5)),
    }
    static = torch.from_numpy(arr(34, 4, 3))
    quantiles = torch.tensor([0.1, 0.5, 0.9])

    def quantile_loss(pred, target):
        errors = target.unsqueeze(-1) - pred
        return torch.max((quantiles - 1) * errors, quantiles * errors).mean()

    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        pred, weights = model(static, x)
        loss = quantile_loss(pred, y[:, 1:])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        pred, weights = model(static, x)
    return {
        "losses": losses,
        "pred": pred[:, -3:],
        "weights": weights.mean(dim=(0, 1)),
        "weights_row": weights[0],
        "grn_fc1": model.vsn.flattened_grn.fc1.weight,
        "ctx": model.vsn.flattened_grn.context.weight,
    }


@program(rtol=1e-3, atol=1e-4)  # transformer encoder + 3 AdamW steps: float32 reduction order
def tsd_revin_patchtst_unfold(torch):
    nn = torch.nn

    class RevIN(nn.Module):
        def __init__(self, num_features, eps=1e-5, affine=True):
            super().__init__()
            self.num_features = num_features
            self.eps = eps
            self.affine = affine
            if self.affine:
                self.affine_weight = nn.Parameter(torch.ones(self.num_features))
                self.affine_bias = nn.Parameter(torch.zeros(self.num_features))

        def forward(self, x, mode):
            if mode == "norm":
                self._get_statistics(x)
                x = self._normalize(x)
            elif mode == "denorm":
                x = self._denormalize(x)
            return x

        def _get_statistics(self, x):
            dim2reduce = tuple(range(1, x.ndim - 1))
            self.mean = torch.mean(x, dim=dim2reduce, keepdim=True).detach()
            self.stdev = torch.sqrt(
                torch.var(x, dim=dim2reduce, keepdim=True, unbiased=False) + self.eps
            ).detach()

        def _normalize(self, x):
            x = (x - self.mean) / self.stdev
            if self.affine:
                x = x * self.affine_weight + self.affine_bias
            return x

        def _denormalize(self, x):
            if self.affine:
                x = (x - self.affine_bias) / (self.affine_weight + self.eps * self.eps)
            x = x * self.stdev + self.mean
            return x

    class PatchTST(nn.Module):
        def __init__(self, c_in, seq_len, pred_len, patch_len=4, stride=2, d_model=8):
            super().__init__()
            self.patch_len, self.stride = patch_len, stride
            self.revin = RevIN(c_in)
            self.padding_patch_layer = nn.ReplicationPad1d((0, stride))
            patch_num = int((seq_len - patch_len) / stride + 1) + 1
            self.W_P = nn.Linear(patch_len, d_model)
            self.W_pos = nn.Parameter(torch.empty(patch_num, d_model))
            layer = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=16, dropout=0.0,
                                               batch_first=True, norm_first=True)  # fmt: skip
            self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
            self.flatten = nn.Flatten(start_dim=-2)
            self.head = nn.Linear(d_model * patch_num, pred_len)
            self.patch_num = patch_num

        def forward(self, x):  # (bs, seq_len, nvars)
            x = self.revin(x, "norm")
            z = x.permute(0, 2, 1)  # (bs, nvars, seq_len)
            z = self.padding_patch_layer(z)
            z = z.unfold(dimension=-1, size=self.patch_len, step=self.stride)
            bs, n_vars = z.shape[0], z.shape[1]
            u = self.W_P(z)  # channel independence: fold variables into the batch
            u = torch.reshape(u, (bs * n_vars, u.shape[2], u.shape[3])) + self.W_pos
            h = self.encoder(u)
            h = torch.reshape(h, (-1, n_vars, h.shape[-2], h.shape[-1]))
            out = self.head(self.flatten(h))  # (bs, nvars, pred_len)
            out = out.permute(0, 2, 1)
            return self.revin(out, "denorm"), z.shape

    seq_len, pred_len = 16, 4
    model = set_weights(torch, PatchTST(2, seq_len, pred_len), seed=40)
    with torch.no_grad():
        model.revin.affine_weight.fill_(1.0)
        model.revin.affine_bias.zero_()
    full = np.stack([_series(41, 3, seq_len + pred_len, level=50.0),
                     _series(42, 3, seq_len + pred_len, period=4, level=-3.0) * 4], -1)  # fmt: skip
    full = torch.from_numpy(full)
    x, y = full[:, :seq_len], full[:, seq_len:]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        pred, patch_shape = model(x)
        loss = nn.functional.mse_loss(pred, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        pred, patch_shape = model(x)
        xn = model.revin(x, "norm")
        roundtrip = model.revin(xn, "denorm")
    return {
        "patch_shape": list(patch_shape),
        "losses": losses,
        "pred": pred,
        "revin_mean": model.revin.mean,
        "revin_stdev": model.revin.stdev,
        "roundtrip_err": (roundtrip - x).abs().max() < 1e-3,
        "affine_weight": model.revin.affine_weight,
        "W_pos": model.W_pos,
    }


@program(rtol=5e-4, atol=5e-5)  # 5 Adam steps: float32 reduction order
def tsd_dlinear_individual_channels(torch):
    nn = torch.nn

    class MovingAvg(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.kernel_size = kernel_size
            self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=1, padding=0)

        def forward(self, x):
            front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            x = torch.cat([front, x, end], dim=1)
            return self.avg(x.permute(0, 2, 1)).permute(0, 2, 1)

    class DLinear(nn.Module):
        def __init__(self, seq_len, pred_len, channels, individual):
            super().__init__()
            self.decomposition = MovingAvg(5)
            self.individual = individual
            self.channels = channels
            self.pred_len = pred_len
            if individual:
                self.Linear_Seasonal = nn.ModuleList(
                    [nn.Linear(seq_len, pred_len) for _ in range(channels)]
                )
                self.Linear_Trend = nn.ModuleList(
                    [nn.Linear(seq_len, pred_len) for _ in range(channels)]
                )
                for i in range(channels):
                    self.Linear_Seasonal[i].weight = nn.Parameter(
                        (1 / seq_len) * torch.ones([pred_len, seq_len])
                    )
                    self.Linear_Trend[i].weight = nn.Parameter(
                        (1 / seq_len) * torch.ones([pred_len, seq_len])
                    )
            else:
                self.Linear_Seasonal = nn.Linear(seq_len, pred_len)
                self.Linear_Trend = nn.Linear(seq_len, pred_len)
                self.Linear_Seasonal.weight = nn.Parameter(
                    (1 / seq_len) * torch.ones([pred_len, seq_len])
                )
                self.Linear_Trend.weight = nn.Parameter(
                    (1 / seq_len) * torch.ones([pred_len, seq_len])
                )

        def forward(self, x):
            trend_init = self.decomposition(x)
            seasonal_init = x - trend_init
            seasonal_init, trend_init = seasonal_init.permute(0, 2, 1), trend_init.permute(0, 2, 1)
            if self.individual:
                seasonal_output = torch.zeros([seasonal_init.size(0), seasonal_init.size(1), self.pred_len],
                                              dtype=seasonal_init.dtype).to(seasonal_init.device)  # fmt: skip
                trend_output = torch.zeros_like(seasonal_output)
                for i in range(self.channels):
                    seasonal_output[:, i, :] = self.Linear_Seasonal[i](seasonal_init[:, i, :])
                    trend_output[:, i, :] = self.Linear_Trend[i](trend_init[:, i, :])
            else:
                seasonal_output = self.Linear_Seasonal(seasonal_init)
                trend_output = self.Linear_Trend(trend_init)
            return (seasonal_output + trend_output).permute(0, 2, 1)

    seq_len, pred_len = 16, 4
    data = np.stack(
        [_series(50, 6, seq_len + pred_len), _series(51, 6, seq_len + pred_len, period=4)], -1
    )
    data = torch.from_numpy(data)
    x, y = data[:, :seq_len], data[:, seq_len:]
    out = {}
    for individual in (True, False):
        model = DLinear(seq_len, pred_len, 2, individual)
        g = np.random.default_rng(52)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.copy_(torch.tensor(g.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))
        opt = torch.optim.Adam(model.parameters(), lr=5e-3)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        tag = "individual" if individual else "shared"
        with torch.no_grad():
            out[f"{tag}_pred"] = model(x)
        out[f"{tag}_losses"] = losses
        out[f"{tag}_params"] = params(model)
    return out


@program(rtol=5e-4, atol=5e-5)  # 4 Adam steps: float32 reduction order
def tsd_nhits_pooling_interpolation(torch):
    nn = torch.nn
    F = nn.functional
    input_size, h = 24, 6

    class NHITSBlock(nn.Module):
        def __init__(self, n_pool_kernel_size, n_freq_downsample, pooling_mode, interpolation_mode):
            super().__init__()
            pooled = int(np.ceil(input_size / n_pool_kernel_size))
            self.n_theta_f = max(h // n_freq_downsample, 1)
            self.interpolation_mode = interpolation_mode
            pool = nn.MaxPool1d if pooling_mode == "MaxPool1d" else nn.AvgPool1d
            self.pooling_layer = pool(kernel_size=n_pool_kernel_size, stride=n_pool_kernel_size,
                                      ceil_mode=True)  # fmt: skip
            self.mlp = nn.Sequential(nn.Linear(pooled, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
            self.theta = nn.Linear(16, input_size + self.n_theta_f)

        def forward(self, insample_y):
            x = self.pooling_layer(insample_y.unsqueeze(1)).squeeze(1)
            theta = self.theta(self.mlp(x))
            backcast = theta[:, :input_size]
            knots = theta[:, input_size:].unsqueeze(1)
            if self.interpolation_mode == "linear":
                forecast = F.interpolate(knots, size=h, mode="linear", align_corners=False)
            else:
                forecast = F.interpolate(knots, size=h, mode="nearest")
            return backcast, forecast.squeeze(1)

    class NHITS(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([
                NHITSBlock(4, 3, "MaxPool1d", "linear"),
                NHITSBlock(2, 2, "AvgPool1d", "nearest"),
                NHITSBlock(1, 1, "MaxPool1d", "linear"),
            ])  # fmt: skip

        def forward(self, insample_y, insample_mask):
            residuals = insample_y.flip(dims=(-1,))
            insample_mask = insample_mask.flip(dims=(-1,))
            forecast = insample_y[:, -1:]  # level with naive1
            block_forecasts = [forecast.repeat(1, h)]
            for block in self.blocks:
                backcast, block_forecast = block(residuals)
                residuals = (residuals - backcast) * insample_mask
                forecast = forecast + block_forecast
                block_forecasts.append(block_forecast)
            return forecast, torch.stack(block_forecasts, dim=-1)

    model = set_weights(torch, NHITS(), seed=60)
    y = torch.from_numpy(_series(61, 5, input_size + h, period=8, level=1.0))
    x, target = y[:, :input_size], y[:, input_size:]
    mask = torch.ones_like(x)
    mask[0, :3] = 0.0  # leading missing values
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        forecast, _ = model(x, mask)
        loss = (forecast - target).abs().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        forecast, stacked = model(x, mask)
    return {
        "losses": losses,
        "forecast": forecast,
        "block_forecasts": stacked,
        "theta_w": model.blocks[0].theta.weight,
    }


@program
def tsd_quantile_losses_monotone_heads(torch):
    nn = torch.nn
    F = nn.functional
    quantiles = [0.05, 0.25, 0.5, 0.75, 0.95]

    class QuantileLoss(nn.Module):  # pytorch-forecasting's form
        def __init__(self, quantiles):
            super().__init__()
            self.quantiles = quantiles

        def forward(self, y_pred, target):
            losses = []
            for i, q in enumerate(self.quantiles):
                errors = target - y_pred[..., i]
                losses.append(torch.max((q - 1) * errors, q * errors).unsqueeze(-1))
            return 2 * torch.cat(losses, dim=2)

    def pinball_where(y_pred, target, q):  # the torch.where form (GluonTS / Darts)
        q = torch.tensor(q).view(1, 1, -1)
        diff = target.unsqueeze(-1) - y_pred
        return torch.where(diff >= 0, q * diff, (q - 1) * diff)

    class MonotoneQuantileHead(nn.Module):  # non-crossing: median + cumulative softplus gaps
        def __init__(self, d_in, n_q):
            super().__init__()
            self.mid = n_q // 2
            self.proj = nn.Linear(d_in, n_q)

        def forward(self, x):
            raw = self.proj(x)
            center = raw[..., self.mid : self.mid + 1]
            up = torch.cumsum(F.softplus(raw[..., self.mid + 1 :]), dim=-1)
            down = torch.cumsum(F.softplus(raw[..., : self.mid]).flip(-1), dim=-1).flip(-1)
            return torch.cat([center - down, center, center + up], dim=-1)

    feats = torch.from_numpy(arr(70, 4, 6, 5))
    target = torch.from_numpy(_series(71, 4, 6, level=1.0))
    head = set_weights(torch, MonotoneQuantileHead(5, len(quantiles)), seed=72)
    crit = QuantileLoss(quantiles)
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        pred = head(feats)
        loss = crit(pred, target).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        pred = head(feats)
        per_q = crit(pred, target).mean(dim=(0, 1))
        where_form = pinball_where(pred, target, quantiles).mean(dim=(0, 1)) * 2
        monotone = bool((pred.diff(dim=-1) >= 0).all())
        below = (target.unsqueeze(-1) <= pred).float().mean(dim=(0, 1))
        # a free (crossing-prone) head sorted afterwards, as some repos do
        raw = head.proj(feats)
        sorted_q, order = torch.sort(raw, dim=-1)
        crossings = (raw.diff(dim=-1) < 0).sum()
        # weighted quantile loss (M5 / GluonTS): 2 * sum pinball / sum |y|
        wql = 2 * pinball_where(pred, target, quantiles).sum(dim=(0, 1)) / target.abs().sum()
    return {
        "losses": losses,
        "pred": pred,
        "per_quantile": per_q,
        "where_form": where_form,
        "monotone": monotone,
        "empirical_coverage": below,
        "sorted_q": sorted_q,
        "order": order,
        "crossings": crossings,
        "wql": wql,
        "mean_wql": wql.mean(),
    }


@program
def tsd_m4_metrics_smape_mase_owa(torch):
    def divide_no_nan(a, b):
        result = a / b
        result[result != result] = 0.0
        result[result == np.inf] = 0.0
        return result

    def mape_loss(forecast, target, mask):
        weights = divide_no_nan(mask, target)
        return torch.mean(torch.abs((forecast - target) * weights))

    def smape_loss(forecast, target, mask):
        return 200 * torch.mean(divide_no_nan(torch.abs(forecast - target),
                                              torch.abs(forecast.data) + torch.abs(target.data)) * mask)  # fmt: skip

    def mase_loss(insample, freq, forecast, target, mask):
        masep = torch.mean(torch.abs(insample[:, freq:] - insample[:, :-freq]), dim=1)
        masked_masep_inv = divide_no_nan(mask, masep[:, None])
        return torch.mean(torch.abs(target - forecast) * masked_masep_inv)

    insample = torch.from_numpy(np.abs(_series(80, 5, 24, period=4, level=10.0)))
    insample[4] = 3.0  # a constant series: zero seasonal-naive scale
    target = torch.from_numpy(np.abs(_series(81, 5, 6, period=4, level=10.0)))
    target[1, 2] = 0.0
    forecast = (target + torch.from_numpy(arr(82, 5, 6, scale=0.5))).requires_grad_()
    mask = torch.ones_like(target)
    mask[2, 4:] = 0.0
    freq = 4
    smape = smape_loss(forecast, target, mask)
    mase = mase_loss(insample, freq, forecast, target, mask)
    mape = mape_loss(forecast, target, mask)
    (smape + mase + mape).backward()
    with torch.no_grad():
        # Naive2 benchmark (seasonal naive repeated) and OWA relative to it
        naive2 = insample[:, -freq:].repeat(1, 2)[:, :6]
        smape_n = smape_loss(naive2, target, mask)
        mase_n = mase_loss(insample, freq, naive2, target, mask)
        owa = 0.5 * (smape / smape_n + mase / mase_n)
        per_series = 200 * (forecast - target).abs() / (forecast.abs() + target.abs())
        rmse = torch.sqrt(torch.nn.functional.mse_loss(forecast, target))
        nd = (forecast - target).abs().sum() / target.abs().sum()
        # Lightning-style nanmean of per-series MASE
        scale = (insample[:, freq:] - insample[:, :-freq]).abs().mean(1)
        per_mase = (forecast - target).abs().mean(1) / scale
        mase_nanmean = torch.where(torch.isinf(per_mase), torch.nan, per_mase).nanmean()
    return {
        "smape": smape,
        "mase": mase,
        "mape": mape,
        "forecast_grad": forecast.grad,
        "naive2": naive2,
        "owa": owa,
        "per_series_smape": per_series,
        "rmse": rmse,
        "nd": nd,
        "per_mase": per_mase,
        "mase_nanmean": mase_nanmean,
        "report": f"sMAPE {smape.item():.3f} MASE {mase.item():.3f} OWA {owa.item():.3f}",
    }


@program(rtol=5e-4, atol=5e-5)  # complex FFT products + 3 Adam steps: float32 rounding
def tsd_fedformer_fourier_block_complex_weights(torch):
    nn = torch.nn

    def get_frequency_modes(seq_len, modes):
        return list(range(min(modes, seq_len // 2)))

    class FourierBlock(nn.Module):
        def __init__(self, in_channels, out_channels, seq_len, modes, heads):
            super().__init__()
            self.index = get_frequency_modes(seq_len, modes)
            self.scale = 1 / (in_channels * out_channels)
            g = np.random.default_rng(90)
            shape = (heads, in_channels // heads, out_channels // heads, len(self.index))
            w = g.random(shape) + 1j * g.random(shape)
            self.weights1 = nn.Parameter(self.scale * torch.tensor(w.astype(np.complex64)))

        def compl_mul1d(self, input, weights):
            return torch.einsum("bhi,hio->bho", input, weights)

        def forward(self, q):
            B, L, H, E = q.shape
            x = q.permute(0, 2, 3, 1)
            x_ft = torch.fft.rfft(x, dim=-1)
            out_ft = torch.zeros(B, H, E, L // 2 + 1, dtype=torch.cfloat)
            for wi, i in enumerate(self.index):
                out_ft[:, :, :, wi] = self.compl_mul1d(x_ft[:, :, :, i], self.weights1[:, :, :, wi])
            return torch.fft.irfft(out_ft, n=x.size(-1))

    B, L, H, E = 2, 16, 2, 4
    block = FourierBlock(H * E, H * E, L, modes=4, heads=H)
    head = set_weights(torch, nn.Linear(H * E, 1), seed=91)
    q = torch.from_numpy(np.stack([_series(92 + i, H * E, L) for i in range(B)])
                         .transpose(0, 2, 1).reshape(B, L, H, E).copy())  # fmt: skip
    y = torch.from_numpy(arr(93, B, L, scale=0.3))
    opt = torch.optim.Adam(list(block.parameters()) + list(head.parameters()), lr=1e-2)
    losses = []
    for step in range(3):
        opt.zero_grad()
        out = block(q)  # (B, H, E, L)
        pred = head(out.permute(0, 3, 1, 2).reshape(B, L, H * E)).squeeze(-1)
        loss = nn.functional.mse_loss(pred, y)
        loss.backward()
        if step == 0:
            first_grad = block.weights1.grad.clone()
        opt.step()
        losses.append(loss.item())
    return {
        "losses": losses,
        "out": out.detach(),
        "first_grad": first_grad,
        "weights1": block.weights1.detach(),
        "dtype": str(block.weights1.dtype),
        "modes": block.index,
    }


@program(rtol=5e-4, atol=5e-5)  # conv2d inception + 2 Adam steps: float32 reduction order
def tsd_timesnet_fft_period_inception(torch):
    nn = torch.nn
    F = nn.functional

    def FFT_for_Period(x, k=2):
        xf = torch.fft.rfft(x, dim=1)
        frequency_list = abs(xf).mean(0).mean(-1)
        frequency_list[0] = 0
        _, top_list = torch.topk(frequency_list, k)
        top_list = top_list.detach().cpu().numpy()
        period = x.shape[1] // top_list
        return period, abs(xf).mean(-1)[:, top_list]

    class Inception_Block_V1(nn.Module):
        def __init__(self, in_channels, out_channels, num_kernels=2):
            super().__init__()
            self.kernels = nn.ModuleList([nn.Conv2d(in_channels, out_channels, kernel_size=2 * i + 1,
                                                    padding=i) for i in range(num_kernels)])  # fmt: skip

        def forward(self, x):
            res_list = [kernel(x) for kernel in self.kernels]
            return torch.stack(res_list, dim=-1).mean(-1)

    class TimesBlock(nn.Module):
        def __init__(self, seq_len, pred_len, d_model, d_ff, k):
            super().__init__()
            self.seq_len, self.pred_len, self.k = seq_len, pred_len, k
            self.conv = nn.Sequential(Inception_Block_V1(d_model, d_ff), nn.GELU(),
                                      Inception_Block_V1(d_ff, d_model))  # fmt: skip

        def forward(self, x):
            B, T, N = x.size()
            period_list, period_weight = FFT_for_Period(x, self.k)
            res = []
            for i in range(self.k):
                period = int(period_list[i])
                total = self.seq_len + self.pred_len
                if total % period != 0:
                    length = ((total // period) + 1) * period
                    padding = torch.zeros([x.shape[0], (length - total), x.shape[2]]).to(x.device)
                    out = torch.cat([x, padding], dim=1)
                else:
                    length, out = total, x
                out = out.reshape(B, length // period, period, N).permute(0, 3, 1, 2).contiguous()
                out = self.conv(out)
                out = out.permute(0, 2, 3, 1).reshape(B, -1, N)
                res.append(out[:, :total, :])
            res = torch.stack(res, dim=-1)
            period_weight = F.softmax(period_weight, dim=1)
            period_weight = period_weight.unsqueeze(1).unsqueeze(1).repeat(1, T, N, 1)
            return torch.sum(res * period_weight, -1) + x, period_list

    seq_len = 20
    block = set_weights(torch, TimesBlock(seq_len, 0, 3, 4, k=2), seed=100)
    x = np.stack([_series(101, 3, seq_len, period=5), _series(102, 3, seq_len, period=5),
                  _series(103, 3, seq_len, period=4)], -1)  # fmt: skip
    x = torch.from_numpy(x)
    norm = nn.LayerNorm(3)
    opt = torch.optim.Adam(block.parameters(), lr=1e-3)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        out, periods = block(x)
        loss = norm(out).pow(2).mean() + out.mean().abs()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {
        "periods": [int(p) for p in periods],
        "losses": losses,
        "out": out.detach(),
        "grads": grads(block),
    }


@program(rtol=5e-4, atol=5e-5)  # dynamic program over 8x8 cells: float32 logsumexp order
def tsd_soft_dtw_dilate_loss(torch):
    def pairwise_distances(x, y):
        x_norm = (x**2).sum(1).view(-1, 1)
        y_norm = (y**2).sum(1).view(1, -1)
        dist = x_norm + y_norm - 2.0 * torch.mm(x, torch.transpose(y, 0, 1))
        return torch.clamp(dist, 0.0, float("inf"))

    def soft_dtw(D, gamma):
        N, M = D.shape
        inf = torch.tensor(float("inf"))
        R = [[inf] * (M + 1) for _ in range(N + 1)]
        R[0][0] = torch.tensor(0.0)
        for i in range(1, N + 1):
            for j in range(1, M + 1):
                r = torch.stack([R[i - 1][j - 1], R[i - 1][j], R[i][j - 1]])
                softmin = -gamma * torch.logsumexp(-r / gamma, dim=0)
                R[i][j] = D[i - 1, j - 1] + softmin
        return R[N][M]

    def dilate_loss(outputs, targets, alpha, gamma):
        batch, N = outputs.shape[:2]
        shape_losses, temporal_losses = [], []
        omega = pairwise_distances(torch.arange(1, N + 1, dtype=torch.float32).view(N, 1),
                                   torch.arange(1, N + 1, dtype=torch.float32).view(N, 1))  # fmt: skip
        for k in range(batch):
            D = pairwise_distances(targets[k].view(-1, 1), outputs[k].view(-1, 1))
            value = soft_dtw(D, gamma)
            shape_losses.append(value)
            # the soft alignment path: gradient of soft-DTW w.r.t. the cost matrix (differentiable)
            (path,) = torch.autograd.grad(value, D, create_graph=True)
            temporal_losses.append(torch.sum(path * omega) / (N * N))
        loss_shape = torch.stack(shape_losses).mean()
        loss_temporal = torch.stack(temporal_losses).mean()
        return alpha * loss_shape + (1 - alpha) * loss_temporal, loss_shape, loss_temporal

    def path_of(outputs, targets):
        D = pairwise_distances(targets[0].view(-1, 1), outputs[0].view(-1, 1)).requires_grad_()
        (path,) = torch.autograd.grad(soft_dtw(D, 0.1), D)
        return path

    target = torch.from_numpy(_series(110, 2, 8, period=4))
    pred = torch.from_numpy(_series(111, 2, 8, period=4) * 0.8).requires_grad_()
    loss, shape, temporal = dilate_loss(pred, target, alpha=0.5, gamma=0.1)
    loss.backward()
    return {"loss": loss, "shape": shape, "temporal": temporal, "pred_grad": pred.grad,
            "path_row": path_of(pred.detach(), target)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # packed LSTM + 3 Adam steps: float32 reduction order
def tsd_packed_encoder_student_t_likelihood(torch):
    nn = torch.nn
    F = nn.functional
    rnn_utils = nn.utils.rnn
    max_len, horizon = 10, 3
    lengths = torch.tensor([10, 7, 9, 5])
    series = _series(120, 4, max_len + horizon, level=3.0)
    enc = torch.from_numpy(series[:, :max_len].copy())
    for b, n in enumerate(lengths.tolist()):
        enc[b, n:] = 0.0  # right padding past each encoder length
    dec_target = torch.from_numpy(series[:, max_len:].copy())
    last = enc[torch.arange(4), lengths - 1]

    class Forecaster(nn.Module):
        def __init__(self, hidden=6):
            super().__init__()
            self.encoder = nn.LSTM(1, hidden, batch_first=True)
            self.decoder = nn.LSTMCell(1, hidden)
            self.out = nn.Linear(hidden, 3)

        def forward(self, enc, lengths, last, horizon):
            packed = rnn_utils.pack_padded_sequence(enc.unsqueeze(-1), lengths, batch_first=True,
                                                    enforce_sorted=False)  # fmt: skip
            packed_out, (h, c) = self.encoder(packed)
            padded, out_lengths = rnn_utils.pad_packed_sequence(packed_out, batch_first=True,
                                                                total_length=max_len)  # fmt: skip
            h, c = h[0], c[0]
            inp = last.unsqueeze(-1)
            params_ = []
            for _ in range(horizon):
                h, c = self.decoder(inp, (h, c))
                p = self.out(h)
                params_.append(p)
                inp = p[:, 1:2]  # feed the predicted location back
            p = torch.stack(params_, 1)
            df = 2.0 + F.softplus(p[..., 0])
            loc = p[..., 1]
            scale = F.softplus(p[..., 2]) + 1e-3
            return torch.distributions.StudentT(df, loc, scale), padded, out_lengths

    model = set_weights(torch, Forecaster(), seed=121)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        dist, padded, out_lengths = model(enc, lengths, last, horizon)
        loss = -dist.log_prob(dec_target).mean()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        dist, padded, out_lengths = model(enc, lengths, last, horizon)
    return {
        "losses": losses,
        "loc": dist.loc,
        "scale": dist.scale,
        "df": dist.df,
        "variance": dist.variance,
        "padded_tail_zero": bool((padded[3, 5:] == 0).all()),
        "padded": padded[:, :, :2],
        "out_lengths": out_lengths,
        "params": params(model),
    }


@program
def tsd_preprocessing_ffill_scalers_differencing(torch):
    x = _series(130, 3, 12, period=4, level=5.0)
    x[0, [0, 3, 4]] = np.nan
    x[1, 7:9] = np.nan
    x[2, 5] = np.nan
    x = torch.from_numpy(x)
    observed = ~torch.isnan(x)
    # forward fill with cummax over the indices of the last observation (backfill the head)
    idx = torch.where(observed, torch.arange(x.shape[1]), torch.zeros_like(x, dtype=torch.long))
    idx = torch.cummax(idx, dim=1).values
    ffilled = x.gather(1, idx)
    first_obs = observed.float().argmax(dim=1, keepdim=True)
    ffilled = torch.where(torch.isnan(ffilled), x.gather(1, first_obs).expand_as(x), ffilled)
    # GluonTS-style scalers over the observed values
    weights = observed.float()
    data = torch.nan_to_num(x, nan=0.0)
    denominator = weights.sum(1, keepdim=True).clamp_min(1.0)
    loc = (data * weights).sum(1, keepdim=True) / denominator
    variance = (((data - loc) * weights) ** 2).sum(1, keepdim=True) / denominator
    std_scale = torch.sqrt(variance + 1e-5)
    ts_sum = (data.abs() * weights).sum(1, keepdim=True)
    num_observed = weights.sum(1, keepdim=True)
    default_scale = ts_sum.sum(0) / torch.clamp(num_observed.sum(0), min=1)
    mean_scale = torch.where(num_observed > 0, ts_sum / num_observed.clamp(min=1), default_scale)
    # robust scaling (median / IQR) ignoring NaNs
    median = torch.nanmedian(x, dim=1, keepdim=True).values
    q = torch.nanquantile(x, torch.tensor([0.25, 0.75]), dim=1, keepdim=True)
    robust = (x - median) / (q[1] - q[0])
    # seasonal differencing and its inversion with cumsum
    m = 4
    y = ffilled
    diff = y[:, m:] - y[:, :-m]
    first_diff = torch.diff(y, dim=1, prepend=y[:, :1])
    recon = [y[:, :m]]
    for k in range(diff.shape[1] // m):
        recon.append(recon[-1] + diff[:, k * m : (k + 1) * m])
    recon = torch.cat(recon, dim=1)
    lam = 0.5
    boxcox = torch.log(y) if lam == 0 else (y.pow(lam) - 1) / lam
    return {
        "observed": observed,
        "ffilled": ffilled,
        "loc": loc,
        "std_scale": std_scale,
        "mean_scale": mean_scale,
        "default_scale": default_scale,
        "median": median,
        "iqr": q,
        "robust": robust,
        "diff": diff,
        "first_diff": first_diff,
        "recon_err": (recon - y).abs().max(),
        "boxcox": boxcox,
        "log1p_inv": torch.expm1(torch.log1p(y.abs())),
    }


@program
def tsd_chronos_mean_scale_bucketize_tokens(torch):
    n_tokens, n_special = 32, 2
    low, high = -4.0, 4.0
    pad_token_id, eos_token_id = 0, 1
    centers = torch.linspace(low, high, n_tokens - n_special - 1)
    boundaries = torch.concat((torch.tensor([-1e20]), (centers[1:] + centers[:-1]) / 2,
                               torch.tensor([1e20])))  # fmt: skip
    ctx = _series(140, 3, 14, level=10.0) * np.array([[1.0], [50.0], [0.01]], dtype=np.float32)
    ctx[1, :4] = np.nan  # left padding of a shorter series
    ctx[2, 6] = np.nan
    context = torch.from_numpy(ctx)

    def context_input_transform(context):
        attention_mask = ~torch.isnan(context)
        scale = torch.nansum(torch.abs(context) * attention_mask, dim=-1) / torch.nansum(
            attention_mask, dim=-1
        )
        scale[~(scale > 0)] = 1.0
        scaled_context = context / scale.unsqueeze(dim=-1)
        token_ids = (torch.bucketize(input=scaled_context, boundaries=boundaries, right=True)
                     + n_special)  # fmt: skip
        token_ids.clamp_(0, n_tokens - 1)
        token_ids[~attention_mask] = pad_token_id
        return token_ids, attention_mask, scale

    def append_eos(token_ids, attention_mask):
        batch_size = token_ids.shape[0]
        eos_tokens = torch.full((batch_size, 1), fill_value=eos_token_id)
        token_ids = torch.concat((token_ids, eos_tokens), dim=1)
        eos_mask = torch.full((batch_size, 1), fill_value=True)
        return token_ids, torch.concat((attention_mask, eos_mask), dim=1)

    def output_transform(samples, scale):
        scale_unsqueezed = scale.unsqueeze(-1).unsqueeze(-1)
        indices = torch.clamp(samples - n_special - 1, min=0, max=len(centers) - 1)
        return centers[indices] * scale_unsqueezed

    token_ids, mask, scale = context_input_transform(context)
    token_ids, mask = append_eos(token_ids, mask)
    # "samples": deterministic token ids standing in for the decoder's draws
    samples = torch.from_numpy(ints(141, n_tokens, 3, 2, 4))
    samples[0, 0, 0] = 0  # a special token decodes to the lowest bin
    decoded = output_transform(samples, scale)
    quantiles = torch.quantile(decoded, torch.tensor([0.1, 0.5, 0.9]), dim=1)
    return {
        "boundaries": boundaries[1:-1],
        "token_ids": token_ids,
        "mask": mask,
        "scale": scale,
        "decoded": decoded,
        "quantiles": quantiles,
        "hist": torch.bincount(token_ids.flatten(), minlength=n_tokens),
    }


@program(rtol=5e-4, atol=5e-5)  # conv + weight-norm backward, 3 SGD steps
def tsd_tcn_parametrized_weight_norm_state_dict(torch):
    nn = torch.nn
    P = nn.utils.parametrizations
    parametrize = nn.utils.parametrize

    class CausalConv1d(nn.Conv1d):
        def __init__(self, in_ch, out_ch, kernel_size, dilation):
            super().__init__(in_ch, out_ch, kernel_size, dilation=dilation)
            self.left = (kernel_size - 1) * dilation

        def forward(self, x):
            return super().forward(nn.functional.pad(x, (self.left, 0)))

    class ResidualBlock(nn.Module):
        def __init__(self, ch, dilation):
            super().__init__()
            self.conv1 = P.weight_norm(CausalConv1d(ch, ch, 2, dilation))
            self.conv2 = P.weight_norm(CausalConv1d(ch, ch, 2, dilation))

        def forward(self, x):
            y = nn.functional.gelu(self.conv1(x))
            return x + self.conv2(y)

    model = nn.Sequential(nn.Conv1d(1, 4, 1), ResidualBlock(4, 1), ResidualBlock(4, 2),
                          ResidualBlock(4, 4), nn.Conv1d(4, 1, 1))  # fmt: skip
    set_weights(torch, model, seed=150)
    keys = sorted(model.state_dict().keys())
    x = torch.from_numpy(_series(151, 3, 17)).unsqueeze(1)
    inp, tgt = x[:, :, :-1], x[:, :, 1:]
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(inp), tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with parametrize.cached():
        cached_out = model(inp)
    conv = model[1].conv1
    weight = conv.weight.detach().clone()
    parametrize.remove_parametrizations(conv, "weight")
    with torch.no_grad():
        plain_out = model(inp)
    return {
        "keys": keys,
        "losses": losses,
        "cached_out": cached_out.detach(),
        "plain_out_equal": bool(torch.allclose(plain_out, cached_out, atol=1e-6)),
        "weight": weight,
        "removed_is_param": isinstance(conv.weight, nn.Parameter),
        "is_parametrized": parametrize.is_parametrized(model[1].conv2),
        "g": model[2].conv2.parametrizations.weight.original0,
    }


@program(rtol=5e-4, atol=5e-5)  # LBFGS iterations amplify float32 rounding
def tsd_harmonic_regression_complex_lbfgs(torch):
    nn = torch.nn
    period, n_harmonics, horizon = 12, 3, 6
    y = torch.from_numpy(_series(160, 2, 36, period=period, level=4.0))
    T_obs = y.shape[1]

    class HarmonicTrend(nn.Module):
        """Linear trend + complex Fourier seasonality: y_t = a + b t + Re(sum_k c_k e^{2 pi i k t / P})."""

        def __init__(self, n_series):
            super().__init__()
            self.level = nn.Parameter(torch.zeros(n_series, 1))
            self.slope = nn.Parameter(torch.zeros(n_series, 1))
            self.coef = nn.Parameter(torch.zeros(n_series, n_harmonics, dtype=torch.cfloat))
            k = torch.arange(1, n_harmonics + 1, dtype=torch.float32)
            self.register_buffer("omega", 2 * math.pi * k / period)

        def forward(self, t):
            phases = torch.polar(torch.ones(len(t), n_harmonics), torch.outer(t, self.omega))
            season = (self.coef.unsqueeze(1) * phases).sum(-1).real
            return self.level + self.slope * (t / T_obs) + season

    model = HarmonicTrend(2)
    with torch.no_grad():
        model.coef.copy_(torch.tensor(np.full((2, n_harmonics), 0.1 + 0.1j, dtype=np.complex64)))
    t = torch.arange(T_obs, dtype=torch.float32)
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=10, history_size=5,
                            line_search_fn="strong_wolfe")  # fmt: skip
    losses = []

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(t), y)
        loss.backward()
        return loss

    for _ in range(2):
        losses.append(opt.step(closure).item())
    with torch.no_grad():
        future = torch.arange(T_obs, T_obs + horizon, dtype=torch.float32)
        forecast = model(future)
        amplitude = model.coef.abs()
        phase = model.coef.angle()
    return {
        "losses": losses,
        "final_loss": closure().item(),
        "forecast": forecast,
        "amplitude": amplitude,
        "phase": phase,
        "level": model.level,
        "slope": model.slope,
        "n_iter": opt.state[model.level]["n_iter"],
    }
