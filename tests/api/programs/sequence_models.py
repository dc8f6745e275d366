"""Sequence models as popular repositories write them: Mamba's selective scan (a Python loop, a
cumsum/exp parallel scan and Mamba-2's chunked segsum), S4D kernels convolved by FFT, RWKV's token
shift and WKV recurrence, linear attention and RetNet retention, ALiBi masks on
``nn.MultiheadAttention``, packed LSTMs with projections, the PyTorch chatbot tutorial and
bentrevett's packed seq2seq, torchmetrics-style metrics and an HF-style BERT fine-tuning loop."""

from __future__ import annotations

import itertools
import math
from functools import partial

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def mamba_selective_scan_loop_vs_cumsum_parallel_scan(torch):
    nn, F = torch.nn, torch.nn.functional
    V, d_model, d_state, d_conv, expand = 11, 8, 4, 4, 2
    d_inner, dt_rank = expand * d_model, math.ceil(d_model / 16)

    class RMSNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, d_inner * 2, bias=False)
            self.conv1d = nn.Conv1d(d_inner, d_inner, kernel_size=d_conv, groups=d_inner,
                                    padding=d_conv - 1, bias=True)  # fmt: skip
            self.x_proj = nn.Linear(d_inner, dt_rank + d_state * 2, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
            A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.D = nn.Parameter(torch.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)
            self.parallel = False

        def forward(self, x):
            b, L, d = x.shape
            x_and_res = self.in_proj(x)
            x, res = x_and_res.split(split_size=[d_inner, d_inner], dim=-1)
            x = x.transpose(1, 2)  # rearrange(x, 'b l d_in -> b d_in l')
            x = self.conv1d(x)[:, :, :L]
            x = F.silu(x.transpose(1, 2))
            y = self.ssm(x) * F.silu(res)
            return self.out_proj(y)

        def ssm(self, x):
            d_in, n = self.A_log.shape
            A = -torch.exp(self.A_log.float())
            D = self.D.float()
            x_dbl = self.x_proj(x)
            delta, B, C = x_dbl.split(split_size=[dt_rank, n, n], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            scan = self.parallel_scan if self.parallel else self.selective_scan
            return scan(x, delta, A, B, C, D)

        def selective_scan(self, u, delta, A, B, C, D):
            b, L, d_in = u.shape
            n = A.shape[1]
            deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
            deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
            x = torch.zeros((b, d_in, n))
            ys = []
            for i in range(L):
                x = deltaA[:, i] * x + deltaB_u[:, i]
                ys.append(torch.einsum("bdn,bn->bd", x, C[:, i, :]))
            return torch.stack(ys, dim=1) + u * D

        def parallel_scan(self, u, delta, A, B, C, D):
            log_a = torch.einsum("bld,dn->bldn", delta, A)  # h_t = a_t h_{t-1} + b_t
            a_star = torch.cumsum(log_a, dim=1)
            deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
            h = torch.exp(a_star) * torch.cumsum(deltaB_u * torch.exp(-a_star), dim=1)
            return (h @ C.unsqueeze(-1)).squeeze(-1) + u * D

        def step(self, x, conv_state, ssm_state):
            xz = self.in_proj(x)
            x, z = xz.chunk(2, dim=-1)
            conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
            conv_state[:, :, -1] = x
            x = torch.sum(conv_state * self.conv1d.weight.squeeze(1), dim=-1) + self.conv1d.bias
            x = F.silu(x)
            delta, B, C = self.x_proj(x).split([dt_rank, d_state, d_state], dim=-1)
            dt = F.softplus(self.dt_proj(delta))
            A = -torch.exp(self.A_log.float())
            dA = torch.exp(torch.einsum("bd,dn->bdn", dt, A))
            dB = torch.einsum("bd,bn->bdn", dt, B)
            ssm_state.copy_(ssm_state * dA + x.unsqueeze(-1) * dB)
            y = torch.einsum("bdn,bn->bd", ssm_state, C) + self.D * x
            return self.out_proj(y * F.silu(z))

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer, self.norm = MambaBlock(), RMSNorm(d_model)

        def forward(self, x):
            return self.mixer(self.norm(x)) + x

    class Mamba(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, d_model)
            self.layers = nn.ModuleList([ResidualBlock() for _ in range(2)])
            self.norm_f = RMSNorm(d_model)
            self.lm_head = nn.Linear(d_model, V, bias=False)
            self.lm_head.weight = self.embedding.weight

        def forward(self, input_ids):
            x = self.embedding(input_ids)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm_f(x))

    model = Mamba()
    with torch.no_grad():  # the A_log and D initialisation stays; the rest comes from NumPy
        keep = {n: p.clone() for n, p in model.named_parameters() if n.endswith(("A_log", ".D"))}
        set_weights(torch, model, seed=5001)
        for n, p in model.named_parameters():
            if n in keep:
                p.copy_(keep[n])
    data = torch.from_numpy(ints(5002, V, 3, 9))
    x, y = data[:, :-1], data[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for _ in range(3):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    loop_grads = {n: g.clone() for n, g in grads(model).items()}
    for m in model.modules():
        if isinstance(m, MambaBlock):
            m.parallel = True
    model.zero_grad()
    par_logits = model(x)
    F.cross_entropy(par_logits.view(-1, V), y.reshape(-1)).backward()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, MambaBlock):
                m.parallel = False
        ref = model(x)
        states = [
            (torch.zeros(3, d_inner, d_conv), torch.zeros(3, d_inner, d_state))
            for _ in model.layers
        ]
        steps = []
        for t in range(x.size(1)):
            h = model.embedding(x[:, t])
            for layer, (cs, ss) in zip(model.layers, states):
                h = layer.mixer.step(layer.norm(h), cs, ss) + h
            steps.append(model.lm_head(model.norm_f(h)))
        stepped = torch.stack(steps, dim=1)
    return {"losses": losses, "loop_grads": loop_grads, "parallel_grads": grads(model),
            "parallel_logits": par_logits, "loop_logits": ref, "stepped_logits": stepped,
            "parallel_matches": torch.allclose(par_logits, ref, atol=1e-4),
            "step_matches": torch.allclose(stepped, ref, atol=1e-4),
            "A": -torch.exp(model.layers[0].mixer.A_log)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mamba2_ssd_chunked_segsum_einsum(torch):
    nn, F = torch.nn, torch.nn.functional
    batch, seqlen, chunk_size, nheads, headdim, d_state, d_model = 2, 12, 4, 2, 3, 4, 6

    def segsum(x):
        """More stable segment sum calculation: exp(segsum(A)) is the 1-SS decay matrix."""
        T = x.size(-1)
        x = x[..., None].expand(*x.shape, T)  # repeat(x, "... d -> ... d e", e=T)
        mask = torch.tril(torch.ones(T, T, dtype=bool), diagonal=-1)
        x = x.masked_fill(~mask, 0)
        x_segsum = torch.cumsum(x, dim=-2)
        mask = torch.tril(torch.ones(T, T, dtype=bool), diagonal=0)
        return x_segsum.masked_fill(~mask, -torch.inf)

    def chunk(t):  # rearrange(t, "b (c l) ... -> b c l ...", l=chunk_size)
        return t.reshape(t.shape[0], t.shape[1] // chunk_size, chunk_size, *t.shape[2:])

    def ssd_minimal_discrete(X, A, B, C, block_len, initial_states=None):
        X, A, B, C = (chunk(t) for t in (X, A, B, C))
        A = A.permute(0, 3, 1, 2)  # "b c l h -> b h c l"
        A_cumsum = torch.cumsum(A, dim=-1)
        L = torch.exp(segsum(A))  # 1. the diagonal blocks
        Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)  # 2. each chunk's state
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
        if initial_states is None:  # 3. the inter-chunk recurrence
            initial_states = torch.zeros_like(states[:, :1])
        states = torch.cat([initial_states, states], dim=1)
        decay_chunk = torch.exp(segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
        new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
        states, final_state = new_states[:, :-1], new_states[:, -1]
        state_decay_out = torch.exp(A_cumsum)  # 4. state -> output per chunk
        Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, states, state_decay_out)
        Y = (Y_diag + Y_off).flatten(1, 2)  # "b c l h p -> b (c l) h p"
        return Y, final_state

    def naive_scan(X, A, B, C):
        h = torch.zeros(X.size(0), nheads, headdim, d_state)
        ys = []
        for t in range(X.size(1)):
            h = torch.exp(A[:, t])[..., None, None] * h + torch.einsum(
                "bhp,bhn->bhpn", X[:, t], B[:, t]
            )
            ys.append(torch.einsum("bhpn,bhn->bhp", h, C[:, t]))
        return torch.stack(ys, dim=1), h

    class SSDLayer(nn.Module):
        def __init__(self):
            super().__init__()
            d_inner = nheads * headdim
            self.in_proj = nn.Linear(
                d_model, 2 * d_inner + 2 * nheads * d_state + nheads, bias=False
            )
            self.dt_bias = nn.Parameter(
                torch.tensor(np.log(np.expm1(np.linspace(0.01, 0.1, nheads))).astype(np.float32))
            )
            self.A_log = nn.Parameter(torch.log(torch.arange(1, nheads + 1, dtype=torch.float32)))
            self.D = nn.Parameter(torch.ones(nheads))
            self.norm = nn.RMSNorm(d_inner, eps=1e-5)
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)

        def inputs(self, u):
            b, L, _ = u.shape
            d_inner = nheads * headdim
            z, x, B, C, dt = torch.split(
                self.in_proj(u),
                [d_inner, d_inner, nheads * d_state, nheads * d_state, nheads],
                dim=-1,
            )
            dt = F.softplus(dt + self.dt_bias)  # (b, l, h)
            A = -torch.exp(self.A_log)
            x = x.view(b, L, nheads, headdim)
            return (
                z,
                x,
                x * dt.unsqueeze(-1),
                A * dt,
                B.view(b, L, nheads, d_state),
                C.view(b, L, nheads, d_state),
            )

        def forward(self, u, naive=False):
            z, x, X, A, B, C = self.inputs(u)
            y, final = (
                naive_scan(X, A, B, C) if naive else ssd_minimal_discrete(X, A, B, C, chunk_size)
            )
            y = y + x * self.D[:, None]
            y = y.flatten(-2) * F.silu(z)
            return self.out_proj(self.norm(y)), final  # fmt: skip

    layer = SSDLayer()
    with torch.no_grad():
        layer.in_proj.weight.copy_(
            torch.from_numpy(arr(5101, *layer.in_proj.weight.shape, scale=0.4))
        )
        layer.out_proj.weight.copy_(
            torch.from_numpy(arr(5102, *layer.out_proj.weight.shape, scale=0.4))
        )
    u = torch.from_numpy(arr(5103, batch, seqlen, d_model))
    target = torch.from_numpy(arr(5104, batch, seqlen, d_model))
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        y, final = layer(u)
        loss = F.mse_loss(y, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    layer.zero_grad()
    F.mse_loss(layer(u)[0], target).backward()
    chunked_grads = {n: g.clone() for n, g in grads(layer).items()}
    layer.zero_grad()
    y_naive, final_naive = layer(u, naive=True)
    F.mse_loss(y_naive, target).backward()
    with torch.no_grad():
        y_chunked, final_chunked = layer(u)
        decay = torch.exp(segsum(torch.tensor([-0.5, -1.0, -0.25])))
    return {"losses": losses, "y": y_chunked, "final_state": final_chunked, "y_naive": y_naive,
            "final_naive": final_naive, "chunked_grads": chunked_grads, "naive_grads": grads(layer),
            "decay_matrix": decay, "same": torch.allclose(y_chunked, y_naive, atol=1e-5),
            "same_grads": all(torch.allclose(chunked_grads[n], g, atol=1e-4) for n, g in grads(layer).items())}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def s4d_vandermonde_kernel_fft_conv_training(torch):
    nn, F = torch.nn, torch.nn.functional
    d_input, d_model, d_output, N, L, n_layers = 2, 4, 3, 8, 10, 2
    rng = np.random.default_rng(5201)

    class S4DKernel(nn.Module):
        """Generate convolution kernel from diagonal SSM parameters."""

        def __init__(self, d_model, N=64, dt_min=0.001, dt_max=0.1, lr=None):
            super().__init__()
            H = d_model
            log_dt = torch.tensor(rng.random(H).astype(np.float32)) * (
                math.log(dt_max) - math.log(dt_min)
            ) + math.log(dt_min)
            C = torch.view_as_complex(
                torch.tensor(rng.standard_normal((H, N // 2, 2)).astype(np.float32) * 0.5**0.5)
            )
            self.C = nn.Parameter(torch.view_as_real(C))
            self.register("log_dt", log_dt, lr)
            log_A_real = torch.log(0.5 * torch.ones(H, N // 2))
            A_imag = math.pi * torch.arange(N // 2).float().repeat(H, 1)
            self.register("log_A_real", log_A_real, lr)
            self.register("A_imag", A_imag, lr)

        def forward(self, L):
            dt = torch.exp(self.log_dt)  # (H)
            C = torch.view_as_complex(self.C)  # (H N)
            A = -torch.exp(self.log_A_real) + 1j * self.A_imag  # (H N)
            dtA = A * dt.unsqueeze(-1)  # (H N)
            K = dtA.unsqueeze(-1) * torch.arange(L)  # (H N L)
            C = C * (torch.exp(dtA) - 1.0) / A
            return 2 * torch.einsum("hn, hnl -> hl", C, torch.exp(K)).real

        def register(self, name, tensor, lr=None):
            if lr == 0.0:
                self.register_buffer(name, tensor)
            else:
                self.register_parameter(name, nn.Parameter(tensor))
                optim = {"weight_decay": 0.0}
                if lr is not None:
                    optim["lr"] = lr
                getattr(self, name)._optim = optim

    class S4D(nn.Module):
        def __init__(self, d_model, d_state=64, dropout=0.0, transposed=True, **kernel_args):
            super().__init__()
            self.h, self.n, self.transposed = d_model, d_state, transposed
            self.D = nn.Parameter(torch.tensor(rng.standard_normal(self.h).astype(np.float32)))
            self.kernel = S4DKernel(self.h, N=self.n, **kernel_args)
            self.activation = nn.GELU()
            self.dropout = nn.Dropout1d(dropout) if dropout > 0.0 else nn.Identity()
            self.output_linear = nn.Sequential(
                nn.Conv1d(self.h, 2 * self.h, kernel_size=1), nn.GLU(dim=-2)
            )

        def forward(self, u, **kwargs):  # absorbs return_output and transformer src mask
            if not self.transposed:
                u = u.transpose(-1, -2)
            L = u.size(-1)
            k = self.kernel(L=L)  # (H L)
            k_f = torch.fft.rfft(k, n=2 * L)  # (H L)
            u_f = torch.fft.rfft(u, n=2 * L)  # (B H L)
            y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]  # (B H L)
            y = y + u * self.D.unsqueeze(-1)
            y = self.dropout(self.activation(y))
            y = self.output_linear(y)
            if not self.transposed:
                y = y.transpose(-1, -2)
            return y, None

    class S4Model(nn.Module):
        def __init__(self, prenorm=False):
            super().__init__()
            self.prenorm = prenorm
            self.encoder = nn.Linear(d_input, d_model)
            self.s4_layers, self.norms, self.dropouts = (
                nn.ModuleList(),
                nn.ModuleList(),
                nn.ModuleList(),
            )
            for _ in range(n_layers):
                self.s4_layers.append(
                    S4D(d_model, d_state=N, dropout=0.0, transposed=True, lr=min(0.001, 0.01))
                )
                self.norms.append(nn.LayerNorm(d_model))
                self.dropouts.append(nn.Dropout1d(0.0))
            self.decoder = nn.Linear(d_model, d_output)

        def forward(self, x):
            x = self.encoder(x)  # (B, L, d_input) -> (B, L, d_model)
            x = x.transpose(-1, -2)  # (B, L, d_model) -> (B, d_model, L)
            for layer, norm, dropout in zip(self.s4_layers, self.norms, self.dropouts):
                z = x
                if self.prenorm:
                    z = norm(z.transpose(-1, -2)).transpose(-1, -2)
                z, _ = layer(z)
                z = dropout(z)
                x = z + x
                if not self.prenorm:
                    x = norm(x.transpose(-1, -2)).transpose(-1, -2)
            x = x.transpose(-1, -2).mean(dim=1)
            return self.decoder(x)

    def setup_optimizer(model, lr, weight_decay, epochs):
        all_parameters = list(model.parameters())
        params = [p for p in all_parameters if not hasattr(p, "_optim")]
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
        hps = [p._optim for p in all_parameters if hasattr(p, "_optim")]
        hps = [dict(s) for s in sorted(list(dict.fromkeys(frozenset(hp.items()) for hp in hps)))]
        for hp in hps:
            params = [p for p in all_parameters if getattr(p, "_optim", None) == hp]
            optimizer.add_param_group({"params": params, **hp})
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
        return optimizer, scheduler

    model = S4Model()
    for i, m in enumerate(model.modules()):
        if isinstance(m, (nn.Linear, nn.Conv1d)):
            set_weights(torch, m, seed=5210 + i)
    optimizer, scheduler = setup_optimizer(model, lr=0.01, weight_decay=0.01, epochs=4)
    x = torch.from_numpy(arr(5202, 4, L, d_input))
    y = torch.from_numpy(ints(5203, d_output, 4))
    losses, lrs = [], []
    for _ in range(4):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        lrs.append([g["lr"] for g in optimizer.param_groups])
    layer = model.s4_layers[0]
    with torch.no_grad():
        u = torch.from_numpy(arr(5204, 2, d_model, L))
        k = layer.kernel(L=L)
        fft_conv = torch.fft.irfft(
            torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L
        )[..., :L]
        direct = F.conv1d(F.pad(u, (L - 1, 0)), k.flip(-1).unsqueeze(1), groups=d_model)
    return {"losses": losses, "lrs": lrs, "kernel": k, "fft_conv": fft_conv, "direct_conv": direct,
            "conv_matches": torch.allclose(fft_conv, direct, atol=1e-5), "grads": grads(model),
            "n_groups": len(optimizer.param_groups), "group_sizes": [len(g["params"]) for g in optimizer.param_groups],
            "group_wd": [g["weight_decay"] for g in optimizer.param_groups],
            "C_complex": torch.view_as_complex(layer.kernel.C)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def rwkv4_token_shift_time_mixing_wkv_recurrence(torch):
    nn, F = torch.nn, torch.nn.functional
    V, C, n_layer, T = 13, 8, 2, 7

    class L2Wrap(torch.autograd.Function):
        @staticmethod
        def forward(ctx, loss, y):
            ctx.save_for_backward(y)
            return loss

        @staticmethod
        def backward(ctx, grad_output):
            y = ctx.saved_tensors[0]
            factor = 1e-4 / (y.shape[0] * y.shape[1])  # to encourage the logits to be close to 0
            maxx, ids = torch.max(y, -1, keepdim=True)
            gy = torch.zeros_like(y)
            gy.scatter_(-1, ids, maxx * factor)
            return (grad_output, gy)

    def wkv(time_decay, time_first, k, v):
        B, T, C = k.shape
        w, u = -torch.exp(time_decay), time_first
        aa, bb = torch.zeros(B, C), torch.zeros(B, C)
        pp = torch.full((B, C), -1e38)
        out = []
        for t in range(T):
            kk, vv = k[:, t], v[:, t]
            ww = u + kk
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            out.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
            ww = w + pp
            p = torch.maximum(ww, kk)
            e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
            aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
        return torch.stack(out, dim=1)

    class RWKV_TimeMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            ratio_0_to_1 = layer_id / (n_layer - 1)
            ratio_1_to_almost0 = 1.0 - (layer_id / n_layer)
            decay_speed = torch.ones(C)
            for h in range(C):
                decay_speed[h] = -5 + 8 * (h / (C - 1)) ** (0.7 + 1.3 * ratio_0_to_1)
            self.time_decay = nn.Parameter(decay_speed)
            zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(C)]) * 0.5
            self.time_first = nn.Parameter(torch.ones(C) * math.log(0.3) + zigzag)
            x = torch.ones(1, 1, C)
            for i in range(C):
                x[0, 0, i] = i / C
            self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(torch.pow(x, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(torch.pow(x, 0.5 * ratio_1_to_almost0))
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            self.key = nn.Linear(C, C, bias=False)
            self.value = nn.Linear(C, C, bias=False)
            self.receptance = nn.Linear(C, C, bias=False)
            self.output = nn.Linear(C, C, bias=False)

        def forward(self, x):
            xx = self.time_shift(x)  # mix x with the previous timestep to produce xk, xv, xr
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            k, v, r = self.key(xk), self.value(xv), self.receptance(xr)
            sr = torch.sigmoid(r)
            return self.output(sr * wkv(self.time_decay, self.time_first, k, v))

    class RWKV_ChannelMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            ratio_1_to_almost0 = 1.0 - (layer_id / n_layer)
            x = torch.ones(1, 1, C)
            for i in range(C):
                x[0, 0, i] = i / C
            self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
            self.time_mix_r = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
            self.key = nn.Linear(C, 4 * C, bias=False)
            self.receptance = nn.Linear(C, C, bias=False)
            self.value = nn.Linear(4 * C, C, bias=False)

        def forward(self, x):
            xx = self.time_shift(x)
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            k = torch.square(torch.relu(self.key(xk)))
            return torch.sigmoid(self.receptance(xr)) * self.value(k)

    class Block(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.att, self.ffn = RWKV_TimeMix(layer_id), RWKV_ChannelMix(layer_id)

        def forward(self, x):
            x = x + self.att(self.ln1(x))
            return x + self.ffn(self.ln2(x))

    class RWKV(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, C)
            self.ln0 = nn.LayerNorm(C)
            self.blocks = nn.Sequential(*[Block(i) for i in range(n_layer)])
            self.ln_out = nn.LayerNorm(C)
            self.head = nn.Linear(C, V, bias=False)

        def forward(self, idx):
            return self.head(self.ln_out(self.blocks(self.ln0(self.emb(idx)))))

    model = RWKV()
    linears = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    for i, m in enumerate(linears):
        set_weights(torch, m, seed=5300 + i, scale=0.5 if isinstance(m, nn.Embedding) else None)
    data = torch.from_numpy(ints(5301, V, 3, T + 1))
    idx, targets = data[:, :-1], data[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for _ in range(3):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        loss = L2Wrap.apply(loss, logits)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    x = torch.from_numpy(arr(5302, 2, 4, C))
    shifted = nn.ZeroPad2d((0, 0, 1, -1))(x)
    return {"losses": losses, "logits": logits, "grads": grads(model), "shifted": shifted,
            "pad_same": torch.equal(shifted, F.pad(x, (0, 0, 1, -1))),
            "cat_same": torch.equal(shifted, torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)),
            "time_decay": model.blocks[1].att.time_decay, "time_first": model.blocks[0].att.time_first,
            "mix_k": model.blocks[0].ffn.time_mix_k}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def linear_attention_elu_feature_map_causal_cumsum(torch):
    nn, F = torch.nn, torch.nn.functional
    V, D, H, T, eps = 10, 8, 2, 6, 1e-6

    def elu_feature_map(x):
        return F.elu(x) + 1

    def linear_attention(queries, keys, values, key_mask):  # fast_transformers' LinearAttention
        Q, K = elu_feature_map(queries), elu_feature_map(keys)
        K = K * key_mask.float()[:, :, None, None]  # (a LengthMask's float_matrix)
        KV = torch.einsum("nshd,nshm->nhmd", K, values)
        Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + eps)
        return torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z).contiguous()

    def causal_linear_attention(queries, keys, values):  # the causal product as a cumsum
        Q, K = elu_feature_map(queries), elu_feature_map(keys)
        KV = torch.einsum("nlhd,nlhm->nlhdm", K, values).cumsum(dim=1)
        num = torch.einsum("nlhd,nlhdm->nlhm", Q, KV)
        den = torch.einsum("nlhd,nlhd->nlh", Q, K.cumsum(dim=1)) + eps
        return num / den.unsqueeze(-1)

    def quadratic_causal(queries, keys, values):
        Q, K = elu_feature_map(queries), elu_feature_map(keys)
        A = torch.einsum("nlhd,nshd->nhls", Q, K)
        A = A * torch.tril(torch.ones(A.size(-2), A.size(-1)))
        return torch.einsum("nhls,nshm->nlhm", A, values) / (
            A.sum(-1).transpose(1, 2)[..., None] + eps
        )

    def recurrent_linear_attention(queries, keys, values):  # one step at a time, as in generation
        Q, K = elu_feature_map(queries), elu_feature_map(keys)
        N, L, Hh, E = Q.shape
        Si = torch.zeros(N, Hh, E, values.size(-1))
        Zi = torch.zeros(N, Hh, E)
        outs = []
        for i in range(L):
            Si = Si + torch.einsum("nhd,nhm->nhdm", K[:, i], values[:, i])
            Zi = Zi + K[:, i]
            z = 1.0 / (torch.einsum("nhd,nhd->nh", Q[:, i], Zi) + eps)
            outs.append(torch.einsum("nhd,nhdm,nh->nhm", Q[:, i], Si, z))
        return torch.stack(outs, dim=1)

    class LinearTransformerLayer(nn.Module):
        def __init__(self, causal):
            super().__init__()
            self.causal = causal
            self.query, self.key, self.value = (nn.Linear(D, D) for _ in range(3))
            self.out = nn.Linear(D, D)
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, x, key_mask):
            N, L, _ = x.shape
            q = self.query(x).view(N, L, H, -1)
            k = self.key(x).view(N, L, H, -1)
            v = self.value(x).view(N, L, H, -1)
            if self.causal:
                a = causal_linear_attention(q, k, v)
            else:
                a = linear_attention(q, k, v, key_mask)
            x = self.norm1(x + self.out(a.reshape(N, L, -1)))
            return self.norm2(x + self.ff(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(V, D), nn.Parameter(torch.zeros(1, T, D))
            self.layers = nn.ModuleList(
                [LinearTransformerLayer(False), LinearTransformerLayer(True)]
            )
            self.head = nn.Linear(D, V)

        def forward(self, idx, key_mask):
            x = self.emb(idx) + self.pos[:, : idx.size(1)]
            for layer in self.layers:
                x = layer(x, key_mask)
            return self.head(x)

    model = set_weights(torch, Model(), seed=5401)
    idx = torch.from_numpy(ints(5402, V, 3, T))
    lengths = torch.tensor([6, 4, 5])
    key_mask = torch.arange(T)[None, :] < lengths[:, None]
    targets = torch.where(key_mask, torch.roll(idx, -1, dims=1), torch.full_like(idx, -100))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        logits = model(idx, key_mask)
        loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    q, k, v = (torch.from_numpy(arr(5403 + i, 2, 5, H, 4)) for i in range(3))
    q.requires_grad_(True)
    causal = causal_linear_attention(q, k, v)
    (causal * torch.linspace(-1, 1, 4)).sum().backward()
    with torch.no_grad():
        quad = quadratic_causal(q, k, v)
        rec = recurrent_linear_attention(q, k, v)
        full = linear_attention(q, k, v, torch.ones(2, 5, dtype=torch.bool))
    return {"losses": losses, "logits": logits, "grads": grads(model), "causal": causal, "dq": q.grad,
            "quadratic": quad, "recurrent": rec, "non_causal": full,
            "causal_eq_quadratic": torch.allclose(causal, quad, atol=1e-5),
            "causal_eq_recurrent": torch.allclose(causal, rec, atol=1e-5),
            "last_step_eq_full": torch.allclose(causal[:, -1], full[:, -1], atol=1e-5)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def retnet_multiscale_retention_parallel_vs_recurrent(torch):
    nn, F = torch.nn, torch.nn.functional
    embed_dim, value_dim, heads, T = 8, 16, 2, 6

    def rotate_every_two(x):
        x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    def theta_shift(x, sin, cos):
        return (x * cos) + (rotate_every_two(x) * sin)

    class RetNetRelPos(nn.Module):
        def __init__(self):
            super().__init__()
            angle = 1.0 / (10000 ** torch.linspace(0, 1, embed_dim // heads // 2))
            angle = angle.unsqueeze(-1).repeat(1, 2).flatten()
            decay = torch.log(1 - 2 ** (-5 - torch.arange(heads, dtype=torch.float)))
            self.register_buffer("angle", angle)
            self.register_buffer("decay", decay)

        def forward(self, slen, activate_recurrent=False):
            if activate_recurrent:
                sin = torch.sin(self.angle * (slen - 1))
                cos = torch.cos(self.angle * (slen - 1))
                return (sin, cos), self.decay.exp()
            index = torch.arange(slen).to(self.decay)
            sin = torch.sin(index[:, None] * self.angle[None, :])
            cos = torch.cos(index[:, None] * self.angle[None, :])
            mask = torch.tril(torch.ones(slen, slen).to(self.decay))
            mask = torch.masked_fill(index[:, None] - index[None, :], ~mask.bool(), float("inf"))
            mask = torch.exp(mask * self.decay[:, None, None])
            mask = torch.nan_to_num(mask)
            mask = mask / mask.sum(dim=-1, keepdim=True).sqrt()
            return (sin, cos), mask

    class MultiScaleRetention(nn.Module):
        def __init__(self):
            super().__init__()
            self.head_dim, self.key_dim = value_dim // heads, embed_dim // heads
            self.scaling = self.key_dim**-0.5
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=True)
            self.k_proj = nn.Linear(embed_dim, embed_dim, bias=True)
            self.v_proj = nn.Linear(embed_dim, value_dim, bias=True)
            self.g_proj = nn.Linear(embed_dim, value_dim, bias=True)
            self.out_proj = nn.Linear(value_dim, embed_dim, bias=True)
            self.group_norm = nn.RMSNorm(self.head_dim, eps=1e-6, elementwise_affine=False)

        def parallel_forward(self, qr, kr, v, mask):
            bsz, tgt_len, _ = v.size()
            vr = v.view(bsz, tgt_len, heads, self.head_dim).transpose(1, 2)
            qk_mat = qr @ kr.transpose(-1, -2)  # bsz * heads * tgt_len * tgt_len
            qk_mat = qk_mat * mask
            qk_mat = qk_mat / qk_mat.detach().abs().sum(dim=-1, keepdim=True).clamp(min=1, max=5e4)
            return torch.matmul(qk_mat, vr).transpose(1, 2)

        def recurrent_forward(self, qr, kr, v, decay, incremental_state):
            bsz = v.size(0)
            v = v.view(bsz, heads, self.head_dim, 1)
            kv = kr * v
            if "prev_key_value" in incremental_state:
                prev_kv = incremental_state["prev_key_value"]
                prev_scale = incremental_state["scale"]
                scale = prev_scale * decay + 1
                kv = prev_kv * (prev_scale.sqrt() * decay / scale.sqrt()).view(
                    heads, 1, 1
                ) + kv / scale.sqrt().view(heads, 1, 1)
            else:
                scale = torch.ones_like(decay)
            incremental_state["prev_key_value"] = kv
            incremental_state["scale"] = scale
            return torch.sum(qr * kv, dim=3).unsqueeze(1)  # bsz * 1 * heads * head_dim

        def forward(self, x, rel_pos, incremental_state=None):
            bsz, tgt_len, _ = x.size()
            (sin, cos), inner_mask = rel_pos
            q, k, v, g = self.q_proj(x), self.k_proj(x), self.v_proj(x), self.g_proj(x)
            k *= self.scaling
            q = q.view(bsz, tgt_len, heads, self.key_dim).transpose(1, 2)
            k = k.view(bsz, tgt_len, heads, self.key_dim).transpose(1, 2)
            qr, kr = theta_shift(q, sin, cos), theta_shift(k, sin, cos)
            if incremental_state is not None:
                output = self.recurrent_forward(qr, kr, v, inner_mask, incremental_state)
            else:
                output = self.parallel_forward(qr, kr, v, inner_mask)
            output = self.group_norm(output).reshape(bsz, tgt_len, self.head_dim * heads)
            output = F.silu(g) * output
            return self.out_proj(output)

    relpos = RetNetRelPos()
    msr = set_weights(torch, MultiScaleRetention(), seed=5501)
    ln = nn.LayerNorm(embed_dim)
    x = torch.from_numpy(arr(5502, 2, T, embed_dim))
    target = torch.from_numpy(arr(5503, 2, T, embed_dim))
    opt = torch.optim.AdamW([*msr.parameters(), *ln.parameters()], lr=1e-2)
    losses = []
    for _ in range(3):
        y = x + msr(ln(x), relpos(T))
        loss = F.mse_loss(y, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        parallel = msr(ln(x), relpos(T))
        state, steps = {}, []
        for t in range(T):
            steps.append(msr(ln(x[:, t : t + 1]), relpos(t + 1, activate_recurrent=True), state))
        recurrent = torch.cat(steps, dim=1)
    (_, _), mask = relpos(T)
    return {"losses": losses, "grads": grads(msr), "ln_grads": grads(ln), "decay_mask": mask,
            "parallel": parallel, "recurrent": recurrent, "scale": state["scale"],
            "parallel_eq_recurrent": torch.allclose(parallel, recurrent, atol=1e-5),
            "kv_state": state["prev_key_value"], "decay": relpos.decay, "angle": relpos.angle}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def multihead_attention_alibi_per_head_masks_bias_kv_zero_attn(torch):
    nn, F = torch.nn, torch.nn.functional
    E, H, T, V = 8, 4, 6, 9

    def get_slopes(n):
        def get_slopes_power_of_2(n):
            start = 2 ** (-(2 ** -(math.log2(n) - 3)))
            return [start * start**i for i in range(n)]

        if math.log2(n).is_integer():
            return get_slopes_power_of_2(n)
        closest = 2 ** math.floor(math.log2(n))
        return get_slopes_power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]

    def alibi_mask(n_heads, T):
        slopes = torch.Tensor(get_slopes(n_heads))
        pos = torch.arange(T)
        rel = (pos[None, :] - pos[:, None]).float()  # j - i, negative into the past
        bias = slopes[:, None, None] * rel[None]
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        return bias + causal  # (heads, T, T)

    class AlibiLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.attn = nn.MultiheadAttention(E, H, dropout=0.0, batch_first=True)
            self.ln = nn.LayerNorm(E)
            self.head = nn.Linear(E, V)

        def forward(self, idx, pad):
            B, T = idx.shape
            x = self.emb(idx)
            mask = alibi_mask(H, T).unsqueeze(0).expand(B, -1, -1, -1).reshape(B * H, T, T)
            a, w = self.attn(x, x, x, attn_mask=mask, key_padding_mask=pad, need_weights=True,
                             average_attn_weights=False)  # fmt: skip
            return self.head(self.ln(x + a)), w

    model = set_weights(torch, AlibiLM(), seed=5601)
    idx = torch.from_numpy(ints(5602, V, 3, T))
    lengths = torch.tensor([6, 3, 5])
    pad = torch.arange(T)[None] >= lengths[:, None]
    targets = torch.roll(idx, -1, 1).masked_fill(pad | (torch.arange(T) == T - 1), -100)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        logits, w = model(idx, pad)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    mha = set_weights(
        torch,
        nn.MultiheadAttention(E, 2, add_bias_kv=True, add_zero_attn=True, kdim=5, vdim=3),
        seed=5603,
    )
    q = torch.from_numpy(arr(5604, 4, 2, E)).requires_grad_(True)  # (L, N, E): sequence first
    k, v = torch.from_numpy(arr(5605, 7, 2, 5)), torch.from_numpy(arr(5606, 7, 2, 3))
    kpm = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    float_kpm = torch.zeros(2, 7).masked_fill(kpm, float("-inf"))
    attn_mask = torch.from_numpy(arr(5607, 2 * 2, 4, 7, scale=0.5))  # (N * heads, L, S)
    out, w_avg = mha(q, k, v, key_padding_mask=float_kpm, attn_mask=attn_mask)
    out2, w_heads = mha(
        q, k, v, key_padding_mask=float_kpm, attn_mask=attn_mask, average_attn_weights=False
    )
    (out.pow(2).sum() + out2.sum()).backward()
    out3, none = mha(q[:, 0], k[:, 0], v[:, 0], need_weights=False)  # unbatched
    causal = nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    return {"losses": losses, "weights": w, "grads": grads(model), "alibi": alibi_mask(H, T),
            "slopes_6": get_slopes(6), "out": out, "w_avg": w_avg, "w_heads": w_heads, "dq": q.grad,
            "mha_grads": grads(mha), "unbatched": out3, "no_weights": none is None,
            "causal64": causal, "bias_k_shape": list(mha.bias_k.shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lstm_proj_size_packed_unsorted_and_packed_data_rewrap(torch):
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    V, E, Hd, P, PAD = 14, 6, 8, 4, 0
    lengths_list = [3, 7, 5, 1, 6]
    seqs = [torch.from_numpy(ints(5701 + i, V - 1, n) + 1) for i, n in enumerate(lengths_list)]

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=PAD)
            self.in_norm = nn.LayerNorm(E)
            self.lstm = nn.LSTM(
                E, Hd, num_layers=2, bidirectional=True, proj_size=P, batch_first=True
            )
            self.gru = nn.GRU(2 * P, P, batch_first=True)
            self.tag = nn.Linear(P, 3)
            self.cls = nn.Linear(4 * P, 2)

        def forward(self, tokens, lengths):
            packed = rnn.pack_padded_sequence(
                self.emb(tokens), lengths, batch_first=True, enforce_sorted=False
            )
            packed = rnn.PackedSequence(self.in_norm(packed.data), packed.batch_sizes,
                                        packed.sorted_indices, packed.unsorted_indices)  # fmt: skip
            out, (h_n, c_n) = self.lstm(packed)
            out = out._replace(data=torch.tanh(out.data))
            out2, g_n = self.gru(out)  # a PackedSequence straight into the next RNN
            tags, out_lengths = rnn.pad_packed_sequence(
                out2, batch_first=True, padding_value=0.0, total_length=8
            )
            h = h_n.view(2, 2, tokens.size(0), P)[-1]  # (num_layers, directions, batch, proj_size)
            sentence = torch.cat([h[0], h[1], h_n[-1], g_n[-1]], dim=1)
            return self.tag(tags), self.cls(sentence), (h_n, c_n), out_lengths

    model = set_weights(torch, Tagger(), seed=5710)
    tokens = rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    lengths = torch.tensor(lengths_list)
    tag_targets = torch.from_numpy(ints(5711, 3, 5, 8))
    tag_targets[torch.arange(8)[None, :] >= lengths[:, None]] = -100
    cls_targets = torch.tensor([0, 1, 1, 0, 1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        tag_logits, cls_logits, (h_n, c_n), out_lengths = model(tokens, lengths)
        loss = F.cross_entropy(tag_logits.permute(0, 2, 1), tag_targets) + F.cross_entropy(
            cls_logits, cls_targets
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # the older idiom: sort by length by hand, pack sorted, then undo the sort
    sorted_lengths, perm = lengths.sort(0, descending=True)
    _, unperm = perm.sort(0)
    with torch.no_grad():
        packed = rnn.pack_padded_sequence(model.emb(tokens)[perm], sorted_lengths, batch_first=True)
        _, (h_sorted, _) = model.lstm(
            rnn.PackedSequence(model.in_norm(packed.data), packed.batch_sizes)
        )
        h_by_hand = h_sorted[:, unperm]
        _, _, (h_auto, _), _ = model(tokens, lengths)
    packed_seq = rnn.pack_sequence(seqs, enforce_sorted=False)
    return {"losses": losses, "tag_logits": tag_logits, "cls_logits": cls_logits, "h_n": h_n, "c_n": c_n,
            "out_lengths": out_lengths, "grads": grads(model), "h_by_hand": h_by_hand,
            "same_h": torch.allclose(h_by_hand, h_auto, atol=1e-6), "h_shape": list(h_n.shape),
            "c_shape": list(c_n.shape), "weight_hr_shape": list(model.lstm.weight_hr_l1_reverse.shape),
            "batch_sizes": packed_seq.batch_sizes, "sorted_indices": packed_seq.sorted_indices,
            "packed_double": packed_seq.to(torch.float64).data.dtype == torch.float64,
            "lstm_repr": repr(model.lstm)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def chatbot_tutorial_luong_attention_masked_nll(torch):
    nn, F = torch.nn, torch.nn.functional
    PAD_token, SOS_token, EOS_token, V, hidden_size = 0, 1, 2, 12, 8
    rng = np.random.default_rng(5801)
    pairs = [[list(rng.integers(3, V, n)) + [EOS_token], list(rng.integers(3, V, m)) + [EOS_token]]
             for n, m in ((4, 3), (2, 4), (5, 2), (3, 3))]  # fmt: skip

    def zeroPadding(batch, fillvalue=PAD_token):
        return list(itertools.zip_longest(*batch, fillvalue=fillvalue))

    def binaryMatrix(batch, value=PAD_token):
        return [[0 if token == PAD_token else 1 for token in seq] for seq in batch]

    def batch2TrainData(pair_batch):
        pair_batch.sort(key=lambda x: len(x[0]), reverse=True)
        input_batch, output_batch = [p[0] for p in pair_batch], [p[1] for p in pair_batch]
        lengths = torch.tensor([len(indexes) for indexes in input_batch])
        inp = torch.LongTensor(zeroPadding(input_batch))
        max_target_len = max([len(indexes) for indexes in output_batch])
        padList = zeroPadding(output_batch)
        mask = torch.BoolTensor(binaryMatrix(padList))
        return inp, lengths, torch.LongTensor(padList), mask, max_target_len

    class EncoderRNN(nn.Module):
        def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
            super().__init__()
            self.n_layers, self.hidden_size, self.embedding = n_layers, hidden_size, embedding
            self.gru = nn.GRU(hidden_size, hidden_size, n_layers,
                              dropout=(0 if n_layers == 1 else dropout), bidirectional=True)  # fmt: skip

        def forward(self, input_seq, input_lengths, hidden=None):
            embedded = self.embedding(input_seq)
            packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
            outputs, hidden = self.gru(packed, hidden)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
            outputs = outputs[:, :, : self.hidden_size] + outputs[:, :, self.hidden_size :]
            return outputs, hidden

    class Attn(nn.Module):
        def __init__(self, method, hidden_size):
            super().__init__()
            self.method, self.hidden_size = method, hidden_size
            if self.method == "general":
                self.attn = nn.Linear(self.hidden_size, hidden_size)
            elif self.method == "concat":
                self.attn = nn.Linear(self.hidden_size * 2, hidden_size)
                self.v = nn.Parameter(torch.FloatTensor(hidden_size))

        def dot_score(self, hidden, encoder_output):
            return torch.sum(hidden * encoder_output, dim=2)

        def general_score(self, hidden, encoder_output):
            return torch.sum(hidden * self.attn(encoder_output), dim=2)

        def concat_score(self, hidden, encoder_output):
            energy = self.attn(
                torch.cat((hidden.expand(encoder_output.size(0), -1, -1), encoder_output), 2)
            ).tanh()
            return torch.sum(self.v * energy, dim=2)

        def forward(self, hidden, encoder_outputs):
            if self.method == "general":
                attn_energies = self.general_score(hidden, encoder_outputs)
            elif self.method == "concat":
                attn_energies = self.concat_score(hidden, encoder_outputs)
            else:
                attn_energies = self.dot_score(hidden, encoder_outputs)
            attn_energies = attn_energies.t()
            return F.softmax(attn_energies, dim=1).unsqueeze(1)

    class LuongAttnDecoderRNN(nn.Module):
        def __init__(
            self, attn_model, embedding, hidden_size, output_size, n_layers=1, dropout=0.0
        ):
            super().__init__()
            self.n_layers, self.embedding = n_layers, embedding
            self.embedding_dropout = nn.Dropout(dropout)
            self.gru = nn.GRU(
                hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout)
            )
            self.concat = nn.Linear(hidden_size * 2, hidden_size)
            self.out = nn.Linear(hidden_size, output_size)
            self.attn = Attn(attn_model, hidden_size)

        def forward(self, input_step, last_hidden, encoder_outputs):
            embedded = self.embedding_dropout(self.embedding(input_step))
            rnn_output, hidden = self.gru(embedded, last_hidden)
            attn_weights = self.attn(rnn_output, encoder_outputs)
            context = attn_weights.bmm(encoder_outputs.transpose(0, 1))
            rnn_output, context = rnn_output.squeeze(0), context.squeeze(1)
            concat_output = torch.tanh(self.concat(torch.cat((rnn_output, context), 1)))
            return F.softmax(self.out(concat_output), dim=1), hidden

    def maskNLLLoss(inp, target, mask):
        nTotal = mask.sum()
        crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
        return crossEntropy.masked_select(mask).mean(), nTotal.item()

    def train(input_variable, lengths, target_variable, mask, max_target_len, encoder, decoder,
              encoder_optimizer, decoder_optimizer, batch_size, clip, teacher):  # fmt: skip
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        loss, print_losses, n_totals = 0, [], 0
        encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
        decoder_input = torch.LongTensor([[SOS_token for _ in range(batch_size)]])
        decoder_hidden = encoder_hidden[: decoder.n_layers]
        for t in range(max_target_len):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
            if teacher[t]:
                decoder_input = target_variable[t].view(1, -1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = torch.LongTensor([[topi[i][0] for i in range(batch_size)]])
            mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
            loss += mask_loss
            print_losses.append(mask_loss.item() * nTotal)
            n_totals += nTotal
        loss.backward()
        _ = nn.utils.clip_grad_norm_(encoder.parameters(), clip)
        _ = nn.utils.clip_grad_norm_(decoder.parameters(), clip)
        encoder_optimizer.step()
        decoder_optimizer.step()
        return sum(print_losses) / n_totals

    class GreedySearchDecoder(nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder

        def forward(self, input_seq, input_length, max_length):
            encoder_outputs, encoder_hidden = self.encoder(input_seq, input_length)
            decoder_hidden = encoder_hidden[: self.decoder.n_layers]
            decoder_input = torch.ones(1, 1, dtype=torch.long) * SOS_token
            all_tokens, all_scores = torch.zeros([0], dtype=torch.long), torch.zeros([0])
            for _ in range(max_length):
                decoder_output, decoder_hidden = self.decoder(
                    decoder_input, decoder_hidden, encoder_outputs
                )
                decoder_scores, decoder_input = torch.max(decoder_output, dim=1)
                all_tokens = torch.cat((all_tokens, decoder_input), dim=0)
                all_scores = torch.cat((all_scores, decoder_scores), dim=0)
                decoder_input = torch.unsqueeze(decoder_input, 0)
            return all_tokens, all_scores

    input_variable, lengths, target_variable, mask, max_target_len = batch2TrainData(pairs)
    teacher = np.random.default_rng(5802).random((3, max_target_len)) < 0.5
    out = {"input": input_variable, "target": target_variable, "mask": mask, "lengths": lengths}
    for k, attn_model in enumerate(("dot", "general", "concat")):
        embedding = nn.Embedding(V, hidden_size)
        encoder = set_weights(torch, EncoderRNN(hidden_size, embedding, n_layers=1), seed=5810 + k)
        decoder = set_weights(
            torch, LuongAttnDecoderRNN(attn_model, embedding, hidden_size, V, 1), seed=5820 + k
        )
        encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
        decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-2 * 5.0)
        encoder.train()
        decoder.train()
        losses = [train(input_variable, lengths, target_variable, mask, max_target_len, encoder, decoder,
                        encoder_optimizer, decoder_optimizer, 4, 1.0, teacher[i]) for i in range(3)]  # fmt: skip
        encoder.eval()
        decoder.eval()
        with torch.no_grad():
            tokens, scores = GreedySearchDecoder(encoder, decoder)(
                input_variable[:, :1], lengths[:1], 4
            )
        out[attn_model] = {"losses": losses, "tokens": tokens, "scores": scores,
                           "enc_grads": grads(encoder), "dec_grads": grads(decoder)}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def bentrevett_packed_bahdanau_seq2seq_outputs_buffer(torch):
    nn, F = torch.nn, torch.nn.functional
    SRC_PAD_IDX, TRG_PAD_IDX, SOS, EOS = 1, 1, 2, 3
    INPUT_DIM, OUTPUT_DIM, ENC_EMB_DIM, DEC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM = 13, 11, 6, 5, 7, 8
    rng = np.random.default_rng(5901)

    class Encoder(nn.Module):
        def __init__(self, input_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout):
            super().__init__()
            self.embedding = nn.Embedding(input_dim, emb_dim)
            self.rnn = nn.GRU(emb_dim, enc_hid_dim, bidirectional=True)
            self.fc = nn.Linear(enc_hid_dim * 2, dec_hid_dim)
            self.dropout = nn.Dropout(dropout)

        def forward(self, src, src_len):
            embedded = self.dropout(self.embedding(src))  # src = [src len, batch size]
            packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, src_len.to("cpu"))
            packed_outputs, hidden = self.rnn(packed_embedded)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs)
            hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
            return outputs, hidden

    class Attention(nn.Module):
        def __init__(self, enc_hid_dim, dec_hid_dim):
            super().__init__()
            self.attn = nn.Linear((enc_hid_dim * 2) + dec_hid_dim, dec_hid_dim)
            self.v = nn.Linear(dec_hid_dim, 1, bias=False)

        def forward(self, hidden, encoder_outputs, mask):
            src_len = encoder_outputs.shape[0]
            hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)
            encoder_outputs = encoder_outputs.permute(1, 0, 2)
            energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim=2)))
            attention = self.v(energy).squeeze(2)
            attention = attention.masked_fill(mask == 0, -1e10)
            return F.softmax(attention, dim=1)

    class Decoder(nn.Module):
        def __init__(self, output_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout, attention):
            super().__init__()
            self.output_dim, self.attention = output_dim, attention
            self.embedding = nn.Embedding(output_dim, emb_dim)
            self.rnn = nn.GRU((enc_hid_dim * 2) + emb_dim, dec_hid_dim)
            self.fc_out = nn.Linear((enc_hid_dim * 2) + dec_hid_dim + emb_dim, output_dim)
            self.dropout = nn.Dropout(dropout)

        def forward(self, input, hidden, encoder_outputs, mask):
            input = input.unsqueeze(0)
            embedded = self.dropout(self.embedding(input))
            a = self.attention(hidden, encoder_outputs, mask).unsqueeze(1)
            encoder_outputs = encoder_outputs.permute(1, 0, 2)
            weighted = torch.bmm(a, encoder_outputs).permute(1, 0, 2)
            rnn_input = torch.cat((embedded, weighted), dim=2)
            output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
            assert (output == hidden).all()
            embedded, output, weighted = embedded.squeeze(0), output.squeeze(0), weighted.squeeze(0)
            prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))
            return prediction, hidden.squeeze(0), a.squeeze(1)

    class Seq2Seq(nn.Module):
        def __init__(self, encoder, decoder, src_pad_idx):
            super().__init__()
            self.encoder, self.decoder, self.src_pad_idx = encoder, decoder, src_pad_idx

        def create_mask(self, src):
            return (src != self.src_pad_idx).permute(1, 0)

        def forward(self, src, src_len, trg, teacher_forcing_ratio=0.5):
            batch_size, trg_len = src.shape[1], trg.shape[0]
            outputs = torch.zeros(trg_len, batch_size, self.decoder.output_dim)
            encoder_outputs, hidden = self.encoder(src, src_len)
            input = trg[0, :]
            mask = self.create_mask(src)
            for t in range(1, trg_len):
                output, hidden, _ = self.decoder(input, hidden, encoder_outputs, mask)
                outputs[t] = output
                teacher_force = rng.random() < teacher_forcing_ratio
                top1 = output.argmax(1)
                input = trg[t] if teacher_force else top1
            return outputs

    def init_weights(m):
        for name, param in m.named_parameters():
            if "weight" not in name:
                nn.init.constant_(param.data, 0)

    def count_parameters(model):
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    attn = Attention(ENC_HID_DIM, DEC_HID_DIM)
    enc = Encoder(INPUT_DIM, ENC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, 0.0)
    dec = Decoder(OUTPUT_DIM, DEC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, 0.0, attn)
    model = set_weights(torch, Seq2Seq(enc, dec, SRC_PAD_IDX), seed=5902, scale=0.4)
    model.apply(init_weights)
    src_lens = [5, 4, 4, 2]  # sorted, longest first, as torchtext's BucketIterator gives them
    src = np.full((5, 4), SRC_PAD_IDX)
    trg = np.full((5, 4), TRG_PAD_IDX)
    for b, (n, m) in enumerate(zip(src_lens, (4, 3, 5, 3))):
        src[: n - 1, b], src[n - 1, b] = rng.integers(4, INPUT_DIM, n - 1), EOS
        trg[0, b], trg[1 : m - 1, b], trg[m - 1, b] = SOS, rng.integers(4, OUTPUT_DIM, m - 2), EOS
    src, trg, src_len = torch.tensor(src), torch.tensor(trg), torch.tensor(src_lens)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss(ignore_index=TRG_PAD_IDX)
    epoch_loss, norms = [], []
    model.train()
    for _ in range(3):
        optimizer.zero_grad()
        output = model(src, src_len, trg)
        output_dim = output.shape[-1]
        output = output[1:].view(-1, output_dim)
        loss = criterion(output, trg[1:].view(-1))
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1))
        optimizer.step()
        epoch_loss.append(loss.item())
    model.eval()
    with torch.no_grad():
        eval_output = model(src, src_len, trg, 0)  # turn off teacher forcing
        eval_loss = criterion(eval_output[1:].view(-1, OUTPUT_DIM), trg[1:].view(-1))
        # translate_sentence: one sentence, attention collected in a preallocated tensor
        src_tensor = src[: src_lens[1], 1:2]
        encoder_outputs, hidden = model.encoder(src_tensor, torch.LongTensor([src_lens[1]]))
        mask = model.create_mask(src_tensor)
        trg_indexes = [SOS]
        attentions = torch.zeros(6, 1, src_lens[1])
        for i in range(6):
            trg_tensor = torch.LongTensor([trg_indexes[-1]])
            output, hidden, attention = model.decoder(trg_tensor, hidden, encoder_outputs, mask)
            attentions[i] = attention
            pred_token = output.argmax(1).item()
            trg_indexes.append(pred_token)
            if pred_token == EOS:
                break
    return {"losses": epoch_loss, "norms": norms, "logits": output, "eval_output": eval_output,
            "eval_loss": eval_loss, "grads": grads(model), "n_params": count_parameters(model),
            "trg_indexes": trg_indexes, "attentions": attentions[: len(trg_indexes) - 1],
            "src": src, "trg": trg}  # fmt: skip


@program
def torchmetrics_stat_scores_auroc_ap_calibration_perplexity(torch):
    F = torch.nn.functional
    C, ignore_index = 4, -100

    def _safe_divide(num, denom, zero_division=0.0):
        num = num if num.is_floating_point() else num.float()
        denom = denom if denom.is_floating_point() else denom.float()
        zero_division = torch.tensor(zero_division, dtype=num.dtype, device=num.device)
        return torch.where(denom != 0, num / denom, zero_division)

    def _multiclass_confusion_matrix_update(preds, target, num_classes):
        unique_mapping = target.to(torch.long) * num_classes + preds.to(torch.long)
        bins = torch.bincount(unique_mapping, minlength=num_classes**2)
        return bins.reshape(num_classes, num_classes)

    def _adjust_weights_safe_divide(score, average, tp, fp, fn):
        if average is None or average == "none":
            return score
        if average == "weighted":
            weights = tp + fn
        else:
            weights = torch.ones_like(score)
            weights[tp + fp + fn == 0] = 0.0
        return _safe_divide(weights * score, weights.sum(-1, keepdim=True)).sum(-1)

    def _fbeta_reduce(tp, fp, tn, fn, beta, average):
        beta2 = beta**2
        if average == "micro":
            tp, fn, fp = tp.sum(dim=0), fn.sum(dim=0), fp.sum(dim=0)
            return _safe_divide((1 + beta2) * tp, (1 + beta2) * tp + beta2 * fn + fp)
        fbeta_score = _safe_divide((1 + beta2) * tp, (1 + beta2) * tp + beta2 * fn + fp)
        return _adjust_weights_safe_divide(fbeta_score, average, tp, fp, fn)

    class MulticlassStatScores(torch.nn.Module):  # a Metric: states as buffers, update then compute
        def __init__(self, num_classes, ignore_index=None):
            super().__init__()
            self.num_classes, self.ignore_index = num_classes, ignore_index
            self.register_buffer("confmat", torch.zeros(num_classes, num_classes, dtype=torch.long))

        def update(self, preds, target):
            if preds.is_floating_point():
                preds = preds.argmax(dim=1)
            if self.ignore_index is not None:
                idx = target != self.ignore_index
                preds, target = preds[idx], target[idx]
            self.confmat += _multiclass_confusion_matrix_update(preds, target, self.num_classes)

        def stats(self):
            tp = self.confmat.diag()
            fp = self.confmat.sum(0) - tp
            fn = self.confmat.sum(1) - tp
            tn = self.confmat.sum() - (fp + fn + tp)
            return tp, fp, tn, fn

        def reset(self):
            self.confmat.zero_()

    def _binary_clf_curve(preds, target, pos_label=1):
        with torch.no_grad():
            desc_score_indices = torch.argsort(preds, descending=True)
            preds, target = preds[desc_score_indices], target[desc_score_indices]
            distinct_value_indices = torch.where(preds[1:] - preds[:-1])[0]
            threshold_idxs = F.pad(distinct_value_indices, [0, 1], value=target.size(0) - 1)
            target = (target == pos_label).to(torch.long)
            tps = torch.cumsum(target, dim=0)[threshold_idxs]
            fps = 1 + threshold_idxs - tps
            return fps, tps, preds[threshold_idxs]

    def binary_roc(preds, target):
        fps, tps, thresholds = _binary_clf_curve(preds, target)
        tps = torch.cat([torch.zeros(1, dtype=tps.dtype, device=tps.device), tps])
        fps = torch.cat([torch.zeros(1, dtype=fps.dtype, device=fps.device), fps])
        thresholds = torch.cat(
            [torch.ones(1, dtype=thresholds.dtype, device=thresholds.device), thresholds]
        )
        return _safe_divide(fps, fps[-1]), _safe_divide(tps, tps[-1]), thresholds

    def binary_average_precision(preds, target):
        fps, tps, _ = _binary_clf_curve(preds, target)
        precision = tps / (tps + fps)
        recall = tps / tps[-1]
        precision = torch.cat([precision.flip(0), torch.ones(1, dtype=precision.dtype)])
        recall = torch.cat([recall.flip(0), torch.zeros(1, dtype=recall.dtype)])
        return -torch.sum((recall[1:] - recall[:-1]) * precision[:-1])

    def _binning_bucketize(confidences, accuracies, bin_boundaries):
        accuracies = accuracies.to(dtype=confidences.dtype)
        acc_bin = torch.zeros(len(bin_boundaries), dtype=confidences.dtype)
        conf_bin = torch.zeros(len(bin_boundaries), dtype=confidences.dtype)
        count_bin = torch.zeros(len(bin_boundaries), dtype=confidences.dtype)
        indices = torch.bucketize(confidences, bin_boundaries, right=True) - 1
        count_bin.scatter_add_(dim=0, index=indices, src=torch.ones_like(confidences))
        conf_bin.scatter_add_(dim=0, index=indices, src=confidences)
        conf_bin = torch.nan_to_num(conf_bin / count_bin)
        acc_bin.scatter_add_(dim=0, index=indices, src=accuracies)
        acc_bin = torch.nan_to_num(acc_bin / count_bin)
        prop_bin = count_bin / count_bin.sum()
        return acc_bin, conf_bin, prop_bin

    def _perplexity_update(preds, target, ignore_index=None):
        probs = torch.nn.functional.softmax(preds.reshape(-1, preds.shape[-1]), dim=1)
        target = target.reshape(-1)
        if ignore_index is not None:
            mask = target.ne(ignore_index)
            target = target.where(target != ignore_index, torch.tensor(0, device=target.device))
        else:
            mask = torch.ones_like(target, dtype=torch.bool)
        probs = probs[:, target].diagonal()[mask]
        return -probs.log().sum(), mask.sum()

    # token classification batches (B, T, C) with -100 on padding, as HF labels them
    metric = MulticlassStatScores(C, ignore_index=ignore_index)
    total_log_probs, count, top2_hits, n_tokens = torch.tensor(0.0), torch.tensor(0), 0, 0
    all_conf, all_correct = [], []
    for step in range(3):
        logits = torch.from_numpy(arr(6001 + step, 3, 5, C, scale=1.5))
        labels = torch.from_numpy(ints(6011 + step, C, 3, 5))
        labels[step, 3 + step % 2 :] = ignore_index
        metric.update(logits.reshape(-1, C), labels.reshape(-1))
        lp, n = _perplexity_update(logits, labels, ignore_index)
        total_log_probs, count = total_log_probs + lp, count + n
        keep = labels != ignore_index
        top2 = logits[keep].topk(2, dim=-1).indices
        top2_hits += (top2 == labels[keep][:, None]).any(dim=1).sum().item()
        n_tokens += int(keep.sum())
        conf, pred = logits[keep].softmax(-1).max(-1)
        all_conf.append(conf)
        all_correct.append(pred == labels[keep])
    tp, fp, tn, fn = metric.stats()
    out = {"confmat": metric.confmat.clone(), "tp": tp, "fp": fp, "tn": tn, "fn": fn,
           "perplexity": torch.exp(total_log_probs / count), "top2_acc": top2_hits / n_tokens}  # fmt: skip
    for average in ("micro", "macro", "weighted", "none"):
        out[f"f1_{average}"] = _fbeta_reduce(tp, fp, tn, fn, 1.0, average)
        out[f"f2_{average}"] = _fbeta_reduce(tp, fp, tn, fn, 2.0, average)
    out["accuracy_micro"] = _safe_divide(tp.sum(), tp.sum() + fn.sum())
    out["recall_macro"] = _safe_divide(tp, tp + fn).mean()
    out["precision_per_class"] = _safe_divide(tp, tp + fp)
    cm = metric.confmat.float()  # Matthews correlation from the confusion matrix
    t_sum, p_sum, n_correct, n = cm.sum(1), cm.sum(0), cm.trace(), cm.sum()
    cov_ytyp = n_correct * n - torch.dot(t_sum, p_sum)
    cov_ypyp, cov_ytyt = n**2 - torch.dot(p_sum, p_sum), n**2 - torch.dot(t_sum, t_sum)
    out["mcc"] = cov_ytyp / torch.sqrt(cov_ytyt * cov_ypyp)
    metric.reset()
    out["reset_sum"] = metric.confmat.sum()
    conf, correct = torch.cat(all_conf), torch.cat(all_correct)
    bins = torch.linspace(0, 1, 10 + 1)
    acc_bin, conf_bin, prop_bin = _binning_bucketize(conf, correct, bins)
    out.update(
        ece=torch.sum(torch.abs(acc_bin - conf_bin) * prop_bin), acc_bin=acc_bin, prop_bin=prop_bin
    )
    # binary detection scores rounded to two decimals: ties, as real scores have
    scores = torch.from_numpy(
        np.round(1 / (1 + np.exp(-arr(6021, 40, scale=2.0))), 1).astype(np.float32)
    )
    target = torch.from_numpy((arr(6022, 40) + 0.8 * arr(6021, 40, scale=2.0) > 0).astype(np.int64))
    fpr, tpr, thresholds = binary_roc(scores, target)
    out.update(fpr=fpr, tpr=tpr, thresholds=thresholds, auroc=torch.trapz(tpr, fpr),
               average_precision=binary_average_precision(scores, target))  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def hf_bert_extended_mask_trainer_accumulation_linear_warmup(torch):
    nn, F = torch.nn, torch.nn.functional
    V, Hs, heads, P, n_labels, PAD = 16, 8, 2, 12, 3, 0

    class BertEmbeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, Hs, padding_idx=PAD)
            self.position_embeddings = nn.Embedding(P, Hs)
            self.token_type_embeddings = nn.Embedding(2, Hs)
            self.LayerNorm = nn.LayerNorm(Hs, eps=1e-12)
            self.dropout = nn.Dropout(0.0)
            self.register_buffer("position_ids", torch.arange(P).expand((1, -1)), persistent=False)
            self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                                 persistent=False)  # fmt: skip

        def forward(
            self, input_ids, token_type_ids=None, position_ids=None, past_key_values_length=0
        ):
            seq_length = input_ids.size()[1]
            if position_ids is None:
                position_ids = self.position_ids[
                    :, past_key_values_length : seq_length + past_key_values_length
                ]
            if token_type_ids is None:
                buffered_token_type_ids = self.token_type_ids[:, :seq_length]
                token_type_ids = buffered_token_type_ids.expand(input_ids.shape[0], seq_length)
            embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(
                token_type_ids
            )
            embeddings += self.position_embeddings(position_ids)
            return self.dropout(self.LayerNorm(embeddings))

    class BertSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_attention_heads, self.attention_head_size = heads, Hs // heads
            self.all_head_size = heads * self.attention_head_size
            self.query, self.key, self.value = (nn.Linear(Hs, self.all_head_size) for _ in range(3))

        def transpose_for_scores(self, x):
            new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
            return x.view(new_x_shape).permute(0, 2, 1, 3)

        def forward(self, hidden_states, attention_mask=None, sdpa=False):
            query_layer = self.transpose_for_scores(self.query(hidden_states))
            key_layer = self.transpose_for_scores(self.key(hidden_states))
            value_layer = self.transpose_for_scores(self.value(hidden_states))
            if sdpa:
                context_layer = F.scaled_dot_product_attention(
                    query_layer, key_layer, value_layer, attn_mask=attention_mask
                )
                probs = None
            else:
                attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
                attention_scores = attention_scores / math.sqrt(self.attention_head_size)
                if attention_mask is not None:
                    attention_scores = attention_scores + attention_mask
                probs = nn.functional.softmax(attention_scores, dim=-1, dtype=torch.float32).to(
                    query_layer.dtype
                )
                context_layer = torch.matmul(probs, value_layer)
            context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
            new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
            return context_layer.view(new_context_layer_shape), probs

    class BertLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = BertSelfAttention()
            self.attn_out, self.attn_norm = nn.Linear(Hs, Hs), nn.LayerNorm(Hs, eps=1e-12)
            self.intermediate, self.output = nn.Linear(Hs, 4 * Hs), nn.Linear(4 * Hs, Hs)
            self.out_norm = nn.LayerNorm(Hs, eps=1e-12)

        def forward(self, x, mask, sdpa=False):
            a, probs = self.attention(x, mask, sdpa)
            x = self.attn_norm(self.attn_out(a) + x)
            return self.out_norm(self.output(F.gelu(self.intermediate(x))) + x), probs

    class BertForSequenceClassification(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = BertEmbeddings()
            self.layer = nn.ModuleList([BertLayer() for _ in range(2)])
            self.pooler = nn.Linear(Hs, Hs)
            self.classifier = nn.Linear(Hs, n_labels)

        def get_extended_attention_mask(self, attention_mask, dtype=torch.float32):
            extended_attention_mask = attention_mask[:, None, None, :]
            extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
            return (1.0 - extended_attention_mask) * torch.finfo(dtype).min

        def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None, sdpa=False):
            h = self.embeddings(input_ids, token_type_ids)
            mask = self.get_extended_attention_mask(attention_mask, h.dtype)
            all_probs = []
            for layer in self.layer:
                h, probs = layer(h, mask, sdpa)
                all_probs.append(probs)
            pooled = torch.tanh(self.pooler(h[:, 0]))
            logits = self.classifier(pooled)
            loss = (
                None
                if labels is None
                else F.cross_entropy(logits.view(-1, n_labels), labels.view(-1))
            )
            return loss, logits, all_probs

    def _get_linear_schedule_with_warmup_lr_lambda(
        current_step, *, num_warmup_steps, num_training_steps
    ):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(
            0.0,
            float(num_training_steps - current_step)
            / float(max(1, num_training_steps - num_warmup_steps)),
        )

    def get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps, num_training_steps, last_epoch=-1
    ):
        lr_lambda = partial(_get_linear_schedule_with_warmup_lr_lambda, num_warmup_steps=num_warmup_steps,
                            num_training_steps=num_training_steps)  # fmt: skip
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch)

    model = set_weights(torch, BertForSequenceClassification(), seed=6101)
    lens = [7, 4, 9, 2, 6, 8, 3, 5, 9, 1]
    batch_ids = np.zeros((10, 9), np.int64)
    token_types = np.zeros((10, 9), np.int64)
    for i, n in enumerate(lens):
        batch_ids[i, :n] = ints(6102 + i, V - 1, n) + 1
        token_types[i, n // 2 : n] = 1
    labels = torch.from_numpy(ints(6120, n_labels, 10))
    batch_ids, token_types = torch.from_numpy(batch_ids), torch.from_numpy(token_types)
    attention_mask = (batch_ids != PAD).long()

    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]  # fmt: skip
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-3, eps=1e-8)
    gradient_accumulation_steps, micro_batches = 2, [(0, 3), (3, 6), (6, 8), (8, 10), (0, 4)]
    num_update_steps = math.ceil(len(micro_batches) / gradient_accumulation_steps)
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, 1, num_update_steps)
    tr_loss, logged, grad_norms, lrs, global_step = torch.tensor(0.0), [], [], [], 0
    model.zero_grad()
    for step, (a, b) in enumerate(micro_batches):
        loss, logits, _ = model(batch_ids[a:b], attention_mask[a:b], token_types[a:b], labels[a:b])
        loss = loss / gradient_accumulation_steps
        loss.backward()
        tr_loss += loss.detach()
        is_last_step_and_steps_less_than_grad_acc = (
            len(micro_batches) <= gradient_accumulation_steps or step == len(micro_batches) - 1
        )
        if (
            step + 1
        ) % gradient_accumulation_steps == 0 or is_last_step_and_steps_less_than_grad_acc:
            grad_norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            optimizer.step()
            lr_scheduler.step()
            model.zero_grad()
            global_step += 1
            lrs.append(lr_scheduler.get_last_lr())
            logged.append(round(tr_loss.item() / global_step, 4))
    tr_loss -= tr_loss
    sched_state = lr_scheduler.state_dict()
    resumed = get_linear_schedule_with_warmup(
        torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-3), 1, num_update_steps
    )
    resumed.load_state_dict(sched_state)
    model.eval()
    with torch.no_grad():
        _, eager_logits, probs = model(batch_ids, attention_mask, token_types)
        _, sdpa_logits, _ = model(batch_ids, attention_mask, token_types, sdpa=True)
        _, default_tt_logits, _ = model(batch_ids[:2], attention_mask[:2])

    def _make_causal_mask(input_ids_shape, dtype, past_key_values_length=0):
        bsz, tgt_len = input_ids_shape
        mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
        mask_cond = torch.arange(mask.size(-1))
        mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
        mask = mask.to(dtype)
        if past_key_values_length > 0:
            mask = torch.cat(
                [torch.zeros(tgt_len, past_key_values_length, dtype=dtype), mask], dim=-1
            )
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)

    def _expand_mask(mask, dtype, tgt_len=None):
        bsz, src_len = mask.size()
        tgt_len = tgt_len if tgt_len is not None else src_len
        expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
        inverted_mask = 1.0 - expanded_mask
        return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)

    left_padded = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    causal16 = _make_causal_mask((2, 3), torch.float16, past_key_values_length=2)
    combined16 = _expand_mask(left_padded, torch.float16, tgt_len=3) + causal16
    combined32 = _make_causal_mask((2, 5), torch.float32).masked_fill(_expand_mask(left_padded, torch.float32).bool(),
                                                                      torch.finfo(torch.float32).min)  # fmt: skip
    position_ids = left_padded.long().cumsum(-1) - 1
    position_ids.masked_fill_(left_padded == 0, 1)
    return {"logged": logged, "grad_norms": grad_norms, "lrs": lrs, "global_step": global_step,
            "tr_loss_reset": tr_loss, "resumed_lr": resumed.get_last_lr(), "sched_last_epoch": sched_state["last_epoch"],
            "group_sizes": [len(g["params"]) for g in optimizer.param_groups], "eager_logits": eager_logits,
            "sdpa_logits": sdpa_logits, "default_token_types": default_tt_logits, "probs": probs,
            "params": params(model), "state_keys": sorted(model.state_dict().keys()),
            "buffers": sorted(n for n, _ in model.named_buffers()), "causal16": causal16,
            "combined16": combined16, "combined32": combined32, "position_ids": position_ids,
            "finfo": [torch.finfo(torch.float16).min, torch.finfo(torch.bfloat16).min, torch.finfo(torch.float32).eps]}  # fmt: skip
