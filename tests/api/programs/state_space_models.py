"""State-space and linear-recurrence sequence models as their reference implementations write them:
S4D with ZOH/bilinear discretisation, Vandermonde kernels, bidirectional FFT convolution and the
recurrent step, HiPPO-LegS with its normal-plus-low-rank eigendecomposition, the LRU (exponential
parameterisation, gamma normalisation, log-depth scan), S5's odd/even associative scan, a Mamba
selective scan (sequential, chunked with state passing, Heinsen's complex logcumsumexp), RWKV-4's
GPT mode against ChatRWKV's RNN state, RWKV-5's matrix-valued state, RetNet's parallel, recurrent
and chunkwise retention, H3 and Hyena long convolutions, squashed long-conv kernels and Griffin's
RG-LRU. Everything is trained for a few steps; the equivalent forms are checked equal."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


def _fftconv(torch, u, k, D):
    """H3/Hyena's reference FFT convolution: causal, zero-padded to twice the length."""
    seqlen = u.shape[-1]
    fft_size = 2 * seqlen
    k_f = torch.fft.rfft(k, n=fft_size) / fft_size
    u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)  # k (H L) broadcasts over leading dims
    y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
    out = y + u * D.unsqueeze(-1)
    return out.to(dtype=u.dtype)


@program(rtol=5e-4, atol=5e-5)  # FFT convolutions: pocketfft/cuFFT sum in other orders
def ssm_s4d_zoh_bilinear_bidirectional_conv_vs_step(torch):
    nn, F = torch.nn, torch.nn.functional
    H, N, L, batch = 4, 8, 10, 3
    rng = np.random.default_rng(6001)

    def init_A(init):  # S4D-Lin and S4D-Inv
        n = torch.arange(N // 2, dtype=torch.float)
        if init == "lin":
            imag = math.pi * n
        else:
            imag = N / math.pi * (N / (1 + 2 * n) - 1)
        return torch.log(0.5 * torch.ones(H, N // 2)), imag.repeat(H, 1)

    class S4DKernel(nn.Module):
        def __init__(self, init="lin", disc="zoh", channels=1):
            super().__init__()
            self.disc = disc
            log_dt = np.log(rng.uniform(1e-2, 1e-1, H)).astype(np.float32)
            self.log_dt = nn.Parameter(torch.tensor(log_dt))
            C = rng.standard_normal((channels, H, N // 2, 2)).astype(np.float32) * 0.5**0.5
            self.C = nn.Parameter(torch.tensor(C))
            log_A_real, A_imag = init_A(init)
            self.log_A_real = nn.Parameter(log_A_real)
            self.A_imag = nn.Parameter(A_imag)
            self.register_buffer("B", torch.ones(H, N // 2, dtype=torch.cfloat))

        def discretize(self):
            dt = torch.exp(self.log_dt).unsqueeze(-1)  # (H 1)
            A = -torch.exp(self.log_A_real) + 1j * self.A_imag
            dtA = dt * A
            if self.disc == "zoh":
                dA = torch.exp(dtA)
                dB = self.B * (dA - 1.0) / A
            else:  # bilinear
                dA = (1.0 + dtA / 2) / (1.0 - dtA / 2)
                dB = self.B * dt / (1.0 - dtA / 2)
            return dA, dB

        def forward(self, L):
            dA, dB = self.discretize()
            C = torch.view_as_complex(self.C) * dB  # (c H N)
            vandermonde = torch.exp(torch.log(dA).unsqueeze(-1) * torch.arange(L))  # (H N L)
            return 2 * torch.einsum("chn,hnl->chl", C, vandermonde).real

    class S4D(nn.Module):
        def __init__(self, init, disc, bidirectional):
            super().__init__()
            self.bidirectional = bidirectional
            self.kernel = S4DKernel(init, disc, channels=2 if bidirectional else 1)
            self.D = nn.Parameter(torch.tensor(rng.standard_normal((1, H)).astype(np.float32)))
            self.output_linear = nn.Sequential(nn.Conv1d(H, 2 * H, kernel_size=1), nn.GLU(dim=-2))

        def forward(self, u):  # (B H L)
            L = u.size(-1)
            k = self.kernel(L)
            if self.bidirectional:
                k0, k1 = k[0], k[1]
                k = F.pad(k0, (0, L)) + F.pad(k1.flip(-1), (L, 0))
            else:
                k = k[0]
            k_f = torch.fft.rfft(k, n=2 * L)
            u_f = torch.fft.rfft(u, n=2 * L)
            y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
            y = y + u * self.D.unsqueeze(-1)
            return self.output_linear(F.gelu(y))

        @torch.no_grad()
        def step(self, u_t, state):  # unidirectional recurrent view, (B H) -> (B H)
            dA, dB = self.kernel.discretize()
            C = torch.view_as_complex(self.kernel.C)[0]
            state = dA * state + dB * u_t.unsqueeze(-1)
            y = 2 * torch.einsum("hn,bhn->bh", C, state).real + u_t * self.D
            return y, state

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(2, H)
            self.layers = nn.ModuleList(
                [S4D("lin", "zoh", bidirectional=True), S4D("inv", "bilinear", bidirectional=False)]
            )
            self.norms = nn.ModuleList([nn.LayerNorm(H) for _ in self.layers])
            self.decoder = nn.Linear(H, 1)

        def forward(self, x):
            x = self.encoder(x).transpose(-1, -2)
            for layer, norm in zip(self.layers, self.norms):
                z = norm(x.transpose(-1, -2)).transpose(-1, -2)
                x = x + layer(z)
            return self.decoder(x.transpose(-1, -2)).squeeze(-1)

    model = Model()
    for i, m in enumerate(model.modules()):
        if isinstance(m, (nn.Linear, nn.Conv1d)):
            set_weights(torch, m, seed=6010 + i)
    x = torch.from_numpy(arr(6002, batch, L, 2))
    target = torch.cumsum(x[..., 0], dim=1) * 0.3  # a running-sum task
    ssm_params = [p for n, p in model.named_parameters() if "kernel" in n]
    other = [p for n, p in model.named_parameters() if "kernel" not in n]
    opt = torch.optim.AdamW(
        [{"params": other}, {"params": ssm_params, "lr": 1e-3, "weight_decay": 0.0}],
        lr=1e-2,
        weight_decay=0.01,
    )
    losses = []
    for _ in range(4):
        loss = F.mse_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    layer = model.layers[1]
    with torch.no_grad():
        u = torch.from_numpy(arr(6003, 2, H, L))
        k = layer.kernel(L)[0]
        conv = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)
        conv = conv[..., :L] + u * layer.D.unsqueeze(-1)
        state = torch.zeros(2, H, N // 2, dtype=torch.cfloat)
        ys = []
        for t in range(L):
            y_t, state = layer.step(u[..., t], state)
            ys.append(y_t)
        stepped = torch.stack(ys, dim=-1)
        bi_k = model.layers[0].kernel(L)
        dA, dB = model.layers[0].kernel.discretize()
    return {"losses": losses, "grads": grads(model), "conv": conv, "stepped": stepped,
            "conv_eq_step": torch.allclose(conv, stepped, atol=1e-5), "bi_kernel": bi_k,
            "uni_kernel": k, "dA": dA, "dB_abs": dB.abs(), "final_state": state,
            "log_dt": model.layers[1].kernel.log_dt}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # eigh, solve and matrix_exp: LAPACK rounding differs
def ssm_hippo_legs_nplr_eigh_diagonal_kernel(torch):
    nn, F = torch.nn, torch.nn.functional
    N, L, H, batch = 8, 12, 3, 2

    def transition_legs(N):
        q = torch.arange(N, dtype=torch.float64)
        col, row = torch.meshgrid(q, q, indexing="xy")
        r = 2 * q + 1
        M = -(torch.where(row >= col, r, 0.0) - torch.diag(q))
        T = torch.sqrt(torch.diag(2 * q + 1))
        A = T @ M @ torch.linalg.inv(T)
        B = torch.diag(T)[:, None]
        return A, B

    def nplr_legs(N):
        A, B = transition_legs(N)
        P = torch.sqrt(0.5 + torch.arange(N, dtype=torch.float64)).unsqueeze(0)  # rank 1
        S = A + torch.sum(P.unsqueeze(-2) * P.unsqueeze(-1), dim=-3)
        S_diag = torch.diagonal(S)
        Lambda_real = torch.mean(S_diag) * torch.ones_like(S_diag)
        Lambda_imag, V = torch.linalg.eigh(S * -1j)
        V = V * torch.exp(-1j * torch.angle(V[:1]))  # a unique phase: first entries real > 0
        Lambda = Lambda_real + 1j * Lambda_imag
        return A, B, P, S, Lambda, V

    A, B, P, S, Lambda, V = nplr_legs(N)
    V_inv = V.conj().T
    recon = V @ torch.diag_embed(Lambda) @ V_inv
    # HiPPO-LegS online compression of a signal, bilinear discretisation with the 1/t timescale
    f = torch.from_numpy(arr(6101, 32).cumsum() * 0.2).double()
    eye = torch.eye(N, dtype=torch.float64)
    c = torch.zeros(N, dtype=torch.float64)
    for t in range(f.numel()):
        At, Bt = A / (t + 1), B.squeeze(-1) / (t + 1)
        Ad = torch.linalg.solve(eye - At / 2, eye + At / 2)
        Bd = torch.linalg.solve(eye - At / 2, Bt)
        c = Ad @ c + Bd * f[t]
    x = torch.linspace(0, 1, 32, dtype=torch.float64)
    n = torch.arange(N, dtype=torch.float64)
    rows = [torch.ones_like(x), 2 * x - 1]  # P_n(2x - 1) by the three-term recurrence
    for k in range(1, N - 1):
        rows.append(((2 * k + 1) * (2 * x - 1) * rows[k] - k * rows[k - 1]) / (k + 1))
    basis = torch.stack(rows, 0) * torch.sqrt(2 * n + 1)[:, None]
    reconstruction = c @ basis
    recon_err = F.mse_loss(reconstruction, f).item()

    class S4DLegS(nn.Module):  # the diagonal part of the NPLR form, conjugate pairs kept once
        def __init__(self):
            super().__init__()
            keep = Lambda.imag > 0
            lam = Lambda[keep].to(torch.cfloat)
            self.log_A_real = nn.Parameter(torch.log(-lam.real).repeat(H, 1))
            self.A_imag = nn.Parameter(lam.imag.repeat(H, 1))
            Bv = (V_inv @ B.to(V_inv.dtype)).squeeze(-1)[keep].to(torch.cfloat)
            self.register_buffer("B", Bv.repeat(H, 1))
            C = torch.tensor(arr(6102, H, N // 2, 2) * 0.5**0.5)
            self.C = nn.Parameter(C)
            self.log_dt = nn.Parameter(torch.log(torch.tensor([0.05, 0.1, 0.2])))
            self.D = nn.Parameter(torch.ones(H))

        def kernel(self, L):
            dt = torch.exp(self.log_dt)[:, None]
            A = -torch.exp(self.log_A_real) + 1j * self.A_imag
            dtA = A * dt
            C = torch.view_as_complex(self.C) * self.B * (torch.exp(dtA) - 1.0) / A
            K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)
            return 2 * torch.einsum("hn,hnl->hl", C, torch.exp(K)).real

        def forward(self, u):  # (B H L)
            L = u.size(-1)
            k = self.kernel(L)
            y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)
            return y[..., :L] + u * self.D[:, None]

    layer = S4DLegS()
    with torch.no_grad():  # the dense kernel of the normal part: C exp(dt S)^l B_zoh
        dt = 0.1
        Sd = torch.linalg.matrix_exp(dt * S)
        Bz = torch.linalg.solve(S, (Sd - eye) @ B)
        Cd = torch.from_numpy(arr(6103, 1, N)).double()
        dense = torch.cat(
            [Cd @ torch.linalg.matrix_power(Sd, i) @ Bz for i in range(L)], dim=-1
        ).squeeze(0)
        Lam_dt = torch.exp(Lambda * dt)
        Bdiag = (Lam_dt - 1) / Lambda * (V_inv @ B.to(V_inv.dtype)).squeeze(-1)
        Cdiag = (Cd.to(V.dtype) @ V).squeeze(0)
        diag = torch.einsum("n,nl->l", Cdiag * Bdiag, Lam_dt[:, None] ** torch.arange(L)).real
    u = torch.from_numpy(arr(6104, batch, H, L))
    target = torch.from_numpy(arr(6105, batch, H, L))
    opt = torch.optim.Adam(layer.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(layer(u), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"A": A, "B": B, "S_diag": torch.diagonal(S), "S_skew": torch.allclose(S + S.T, -eye),
            "Lambda_imag": Lambda.imag, "Lambda_real": Lambda.real,
            "recon_ok": torch.allclose(recon, S.to(recon.dtype), atol=1e-10),
            "coeffs": c, "recon_err": recon_err, "dense_kernel": dense, "diag_kernel": diag,
            "dense_eq_diag": torch.allclose(dense, diag, atol=1e-8), "losses": losses,
            "grads": grads(layer), "kernel": layer.kernel(L).detach()}  # fmt: skip


@program
def ssm_lru_exp_param_gamma_norm_sequential_vs_log_depth_scan(torch):
    nn, F = torch.nn, torch.nn.functional
    H, N, L, batch, n_classes = 6, 8, 12, 3, 3
    rng = np.random.default_rng(6201)

    def sequential_scan(Lambda, Bu):  # h_t = Lambda * h_{t-1} + Bu_t
        h = torch.zeros_like(Bu[:, 0])
        hs = []
        for t in range(Bu.size(1)):
            h = Lambda * h + Bu[:, t]
            hs.append(h)
        return torch.stack(hs, dim=1)

    def log_depth_scan(Lambda, Bu):  # Hillis-Steele over (a, b) pairs
        a, b = Lambda.expand_as(Bu), Bu
        shift = 1
        while shift < Bu.size(1):
            b = torch.cat([b[:, :shift], a[:, shift:] * b[:, :-shift] + b[:, shift:]], dim=1)
            a = torch.cat([a[:, :shift], a[:, shift:] * a[:, :-shift]], dim=1)
            shift *= 2
        return b

    class LRU(nn.Module):
        def __init__(self, r_min=0.4, r_max=0.9, max_phase=math.pi):
            super().__init__()
            u1 = torch.tensor(rng.uniform(size=N).astype(np.float32))
            u2 = torch.tensor(rng.uniform(size=N).astype(np.float32))
            nu_log = torch.log(-0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2))
            theta_log = torch.log(max_phase * u2)
            Lambda_mod = torch.exp(-torch.exp(nu_log))
            self.nu_log = nn.Parameter(nu_log)
            self.theta_log = nn.Parameter(theta_log)
            self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - torch.abs(Lambda_mod) ** 2)))
            normal = lambda *s: torch.tensor(rng.standard_normal(s).astype(np.float32))  # noqa: E731
            self.B_re = nn.Parameter(normal(N, H) / math.sqrt(2 * H))
            self.B_im = nn.Parameter(normal(N, H) / math.sqrt(2 * H))
            self.C_re = nn.Parameter(normal(H, N) / math.sqrt(N))
            self.C_im = nn.Parameter(normal(H, N) / math.sqrt(N))
            self.D = nn.Parameter(normal(H))

        def forward(self, x, parallel=False):  # (B L H)
            Lambda = torch.exp(-torch.exp(self.nu_log) + 1j * torch.exp(self.theta_log))
            B_norm = (self.B_re + 1j * self.B_im) * torch.exp(self.gamma_log).unsqueeze(-1)
            C = self.C_re + 1j * self.C_im
            Bu = x.to(B_norm.dtype) @ B_norm.T  # (B L N)
            h = log_depth_scan(Lambda, Bu) if parallel else sequential_scan(Lambda, Bu)
            return (h @ C.T).real + self.D * x

    class LRUBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.lru = nn.LayerNorm(H), LRU()
            self.out1, self.out2 = nn.Linear(H, H), nn.Linear(H, H)

        def forward(self, x, parallel=False):
            y = F.gelu(self.lru(self.norm(x), parallel))
            return x + self.out1(y) * torch.sigmoid(self.out2(y))  # GLU

    class DeepLRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(1, H)
            self.blocks = nn.ModuleList([LRUBlock(), LRUBlock()])
            self.decoder = nn.Linear(H, n_classes)

        def forward(self, x, parallel=False):
            x = self.encoder(x)
            for block in self.blocks:
                x = block(x, parallel)
            return self.decoder(x.mean(dim=1))

    model = DeepLRU()
    for i, m in enumerate(model.modules()):
        if isinstance(m, nn.Linear):
            set_weights(torch, m, seed=6210 + i)
    x = torch.from_numpy(arr(6202, batch, L, 1))
    y = torch.from_numpy(ints(6203, n_classes, batch))
    slow = ("nu_log", "theta_log", "gamma_log")
    recurrent = [p for n, p in model.named_parameters() if n.split(".")[-1] in slow]
    rest = [p for n, p in model.named_parameters() if n.split(".")[-1] not in slow]
    opt = torch.optim.AdamW([{"params": rest, "weight_decay": 0.05},
                             {"params": recurrent, "lr": 2.5e-3, "weight_decay": 0.0}], lr=5e-3)  # fmt: skip
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    seq_grads = {n: g.clone() for n, g in grads(model).items()}
    model.zero_grad()
    F.cross_entropy(model(x, parallel=True), y).backward()
    lru = model.blocks[0].lru
    with torch.no_grad():
        u = torch.from_numpy(arr(6204, 2, L, H))
        seq, par = lru(u), lru(u, parallel=True)
        Lambda = torch.exp(-torch.exp(lru.nu_log) + 1j * torch.exp(lru.theta_log))
        idx = torch.arange(L)
        diff = idx[:, None] - idx[None, :]
        powers = Lambda[:, None, None] ** diff.clamp(min=0)  # (N L L) Toeplitz of Lambda^(t-s)
        toeplitz = torch.where(diff >= 0, powers, torch.zeros_like(powers))
        B_norm = (lru.B_re + 1j * lru.B_im) * torch.exp(lru.gamma_log).unsqueeze(-1)
        Bu = u.to(torch.cfloat) @ B_norm.T
        h_conv = torch.einsum("nts,bsn->btn", toeplitz, Bu)
        conv = (h_conv @ (lru.C_re + 1j * lru.C_im).T).real + lru.D * u
    return {"losses": losses, "seq_grads": seq_grads, "par_grads": grads(model), "seq": seq,
            "par": par, "conv": conv, "seq_eq_par": torch.allclose(seq, par, atol=1e-5),
            "seq_eq_conv": torch.allclose(seq, conv, atol=1e-5), "Lambda_abs": Lambda.abs(),
            "Lambda_angle": Lambda.angle(), "gamma": torch.exp(lru.gamma_log)}  # fmt: skip


@program
def ssm_s5_zoh_mimo_odd_even_associative_scan(torch):
    nn, F = torch.nn, torch.nn.functional
    P, H, L, batch = 4, 3, 11, 2
    rng = np.random.default_rng(6301)

    def binary_operator(q_i, q_j):
        A_i, b_i = q_i
        A_j, b_j = q_j
        return A_j * A_i, A_j * b_i + b_j

    def interleave(a, b):  # a0 b0 a1 b1 ... along dim 0 (a may be one longer)
        if a.size(0) == b.size(0):
            return torch.stack([a, b], dim=1).flatten(0, 1)
        return torch.cat([torch.stack([a[:-1], b], dim=1).flatten(0, 1), a[-1:]], dim=0)

    def associative_scan(op, elems):  # the odd/even recursion of jax.lax.associative_scan
        n = elems[0].size(0)
        if n < 2:
            return elems
        reduced = op([e[0:-1:2] for e in elems], [e[1::2] for e in elems])
        odd = associative_scan(op, reduced)
        if n % 2 == 0:
            even = op([e[:-1] for e in odd], [e[2::2] for e in elems])
        else:
            even = op(odd, [e[2::2] for e in elems])
        even = [torch.cat([e[:1], r], dim=0) for e, r in zip(elems, even)]
        return [interleave(ev, od) for ev, od in zip(even, odd)]

    class S5SSM(nn.Module):
        def __init__(self):
            super().__init__()
            self.Lambda_re = nn.Parameter(-0.5 * torch.ones(P))
            self.Lambda_im = nn.Parameter(math.pi * torch.arange(P, dtype=torch.float32))
            B = rng.standard_normal((P, H, 2)) * math.sqrt(1 / (2 * H))
            C = rng.standard_normal((H, P, 2)) * math.sqrt(0.5)
            self.B = nn.Parameter(torch.tensor(B.astype(np.float32)))
            self.C = nn.Parameter(torch.tensor(C.astype(np.float32)))
            self.D = nn.Parameter(torch.tensor(rng.standard_normal(H).astype(np.float32)))
            log_step = np.log(0.01) + rng.random(P) * (np.log(0.1) - np.log(0.01))
            self.log_step = nn.Parameter(torch.tensor(log_step.astype(np.float32)))

        def discretize(self, step_rescale):
            Lambda = torch.complex(self.Lambda_re.clamp(max=-1e-4), self.Lambda_im)
            Delta = step_rescale * torch.exp(self.log_step)
            Lambda_bar = torch.exp(Lambda * Delta)
            B_bar = (1 / Lambda * (Lambda_bar - 1.0))[..., None] * torch.view_as_complex(self.B)
            return Lambda_bar, B_bar

        def forward(self, u, step_rescale=1.0, sequential=False):  # (L B H), time first
            Lambda_bar, B_bar = self.discretize(step_rescale)
            Bu = u.to(B_bar.dtype) @ B_bar.T  # (L B P)
            if sequential:
                x, xs = torch.zeros_like(Bu[0]), []
                for t in range(Bu.size(0)):
                    x = Lambda_bar * x + Bu[t]
                    xs.append(x)
                xs = torch.stack(xs)
            else:
                _, xs = associative_scan(binary_operator, [Lambda_bar.expand_as(Bu), Bu])
            ys = 2 * (xs @ torch.view_as_complex(self.C).T).real  # conjugate symmetry
            return ys + self.D * u

    class S5Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.ssm = nn.LayerNorm(H), S5SSM()
            self.out1, self.out2 = nn.Linear(H, H), nn.Linear(H, H)

        def forward(self, x, **kw):
            y = F.gelu(self.ssm(self.norm(x), **kw))
            return x + self.out1(y) * torch.sigmoid(self.out2(F.gelu(y)))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(2, H)
            self.blocks = nn.ModuleList([S5Block(), S5Block()])
            self.decoder = nn.Linear(H, 1)

        def forward(self, x, **kw):  # (B L 2)
            x = self.encoder(x).transpose(0, 1)
            for block in self.blocks:
                x = block(x, **kw)
            return self.decoder(x.transpose(0, 1)).squeeze(-1)

    model = Model()
    for i, m in enumerate(model.modules()):
        if isinstance(m, nn.Linear):
            set_weights(torch, m, seed=6310 + i)
    x = torch.from_numpy(arr(6302, batch, L, 2))
    target = torch.from_numpy(np.sin(np.cumsum(arr(6303, batch, L), axis=1)).astype(np.float32))
    ssm_names = ("Lambda_re", "Lambda_im", "log_step", "B")
    ssm = [p for n, p in model.named_parameters() if n.split(".")[-1] in ssm_names]
    regular = [p for n, p in model.named_parameters() if n.split(".")[-1] not in ssm_names]
    opt = torch.optim.AdamW([{"params": ssm, "lr": 2e-3, "weight_decay": 0.0},
                             {"params": regular, "lr": 8e-3, "weight_decay": 0.05}])  # fmt: skip
    losses = []
    for _ in range(3):
        loss = F.mse_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    scan_grads = {n: g.clone() for n, g in grads(model).items()}
    model.zero_grad()
    F.mse_loss(model(x, sequential=True), target).backward()
    with torch.no_grad():
        par, seq = model(x), model(x, sequential=True)
        half = model(x[:, ::2], step_rescale=2.0)  # the same model at half the sampling rate
        a = torch.tensor([2.0, 0.5, -1.0, 3.0, 1.5, 0.25, 2.0])
        b = torch.arange(7.0)
        prefix = associative_scan(binary_operator, [a, b])
    return {"losses": losses, "scan_grads": scan_grads, "seq_grads": grads(model), "par": par,
            "seq": seq, "same": torch.allclose(par, seq, atol=1e-5), "half_rate": half,
            "prefix_a": prefix[0], "prefix_b": prefix[1],
            "Lambda_bar": model.blocks[0].ssm.discretize(1.0)[0]}  # fmt: skip


@program
def ssm_mamba_selective_scan_ref_chunked_state_passing_heinsen(torch):
    nn, F = torch.nn, torch.nn.functional
    V, d_model, d_state, d_conv, expand, T, batch = 9, 6, 4, 3, 2, 10, 2
    d_inner, dt_rank = expand * d_model, math.ceil(d_model / 16)
    rng = np.random.default_rng(6401)

    def selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, return_last_state=False):
        """u, delta, z: (b d l); A: (d n); B, C: (b n l)."""
        delta = F.softplus(delta + delta_bias[..., None].float())
        b, d, n = u.shape[0], A.shape[0], A.shape[1]
        deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
        deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)
        x = A.new_zeros((b, d, n))
        ys = []
        for i in range(u.shape[2]):
            x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
            ys.append(torch.einsum("bdn,bn->bd", x, C[:, :, i]))
        out = (torch.stack(ys, dim=2) + u * D[..., None]) * F.silu(z)
        return (out, x) if return_last_state else out

    def selective_scan_chunked(u, delta, A, B, C, D, z, delta_bias, chunk_size=4,
                               return_last_state=False):  # fmt: skip
        delta = F.softplus(delta + delta_bias[..., None].float())
        log_a = torch.einsum("bdl,dn->bdln", delta, A)
        deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)
        state = A.new_zeros((u.shape[0], A.shape[0], A.shape[1]))
        ys = []
        for la, bu, c in zip(log_a.split(chunk_size, dim=2), deltaB_u.split(chunk_size, dim=2),
                             C.split(chunk_size, dim=2)):  # fmt: skip
            cs = torch.cumsum(la, dim=2)  # (b d t n)
            Lc = cs.size(2)
            seg = cs.unsqueeze(3) - cs.unsqueeze(2)  # (b d t s n): sum of log_a over (s, t]
            causal = torch.tril(torch.ones(Lc, Lc, dtype=torch.bool))[:, :, None]
            decay = torch.exp(seg.masked_fill(~causal, float("-inf")))
            h = torch.einsum("bdtsn,bdsn->bdtn", decay, bu) + torch.exp(cs) * state.unsqueeze(2)
            ys.append(torch.einsum("bdtn,bnt->bdt", h, c))
            state = h[:, :, -1]
        out = (torch.cat(ys, dim=2) + u * D[..., None]) * F.silu(z)
        return (out, state) if return_last_state else out

    def complex_log(x, eps=1e-12):
        real = x.abs().clamp(min=eps).log()
        imag = (x < 0).to(x.dtype) * math.pi
        return torch.complex(real, imag)

    def heinsen_scan(log_coeffs, values, h0):  # h_t = a_t h_{t-1} + b_t, along the last dim
        a_star = F.pad(torch.cumsum(log_coeffs, dim=-1), (1, 0))
        log_values = complex_log(torch.cat([h0.unsqueeze(-1), values], dim=-1))
        log_h = a_star + torch.logcumsumexp(log_values - a_star, dim=-1)
        return torch.exp(log_h).real[..., 1:]

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class Mamba(nn.Module):
        def __init__(self, dt_min=0.001, dt_max=0.1, dt_init_floor=1e-4):
            super().__init__()
            self.in_proj = nn.Linear(d_model, d_inner * 2, bias=False)
            self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
            self.x_proj = nn.Linear(d_inner, dt_rank + d_state * 2, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
            nn.init.constant_(self.dt_proj.weight, dt_rank**-0.5)
            dt = torch.exp(
                torch.tensor(rng.random(d_inner).astype(np.float32))
                * (math.log(dt_max) - math.log(dt_min))
                + math.log(dt_min)
            ).clamp(min=dt_init_floor)
            inv_dt = dt + torch.log(-torch.expm1(-dt))  # the inverse of softplus
            with torch.no_grad():
                self.dt_proj.bias.copy_(inv_dt)
            A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1).contiguous()
            self.A_log = nn.Parameter(torch.log(A))
            self.A_log._no_weight_decay = True
            self.D = nn.Parameter(torch.ones(d_inner))
            self.D._no_weight_decay = True
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)
            self.scan = selective_scan_ref

        def forward(self, hidden_states):
            b, seqlen, _ = hidden_states.shape
            xz = (self.in_proj.weight @ hidden_states.reshape(-1, d_model).t()).view(-1, b, seqlen)
            xz = xz.permute(1, 0, 2)  # "d (b l) -> b d l"
            A = -torch.exp(self.A_log.float())
            x, z = xz.chunk(2, dim=1)
            x = F.silu(self.conv1d(x)[..., :seqlen])
            x_dbl = self.x_proj(x.transpose(1, 2).reshape(b * seqlen, d_inner))
            dt, B, C = torch.split(x_dbl, [dt_rank, d_state, d_state], dim=-1)
            dt = (self.dt_proj.weight @ dt.t()).view(d_inner, b, seqlen).permute(1, 0, 2)
            B = B.view(b, seqlen, d_state).transpose(1, 2).contiguous()
            C = C.view(b, seqlen, d_state).transpose(1, 2).contiguous()
            y = self.scan(x, dt, A, B, C, self.D.float(), z, self.dt_proj.bias.float())
            return self.out_proj(y.transpose(1, 2))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, d_model)
            self.norm, self.mixer, self.norm_f = RMSNorm(d_model), Mamba(), RMSNorm(d_model)
            self.lm_head = nn.Linear(d_model, V, bias=False)

        def forward(self, ids):
            h = self.embedding(ids)
            h = h + self.mixer(self.norm(h))
            return self.lm_head(self.norm_f(h))

    model = LM()
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, (nn.Linear, nn.Embedding, nn.Conv1d)) and name != "mixer.dt_proj":
                set_weights(torch, m, seed=6410 + len(name))
    decay, no_decay = [], []
    for p in model.parameters():
        (no_decay if getattr(p, "_no_weight_decay", False) or p.ndim < 2 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=4e-3, betas=(0.9, 0.95))  # fmt: skip
    data = torch.from_numpy(ints(6402, V, batch, T + 1))
    ids, targets = data[:, :-1], data[:, 1:]
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(ids).flatten(0, 1), targets.flatten())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    ref_grads = {n: g.clone() for n, g in grads(model).items()}
    model.zero_grad()
    model.mixer.scan = selective_scan_chunked
    F.cross_entropy(model(ids).flatten(0, 1), targets.flatten()).backward()
    with torch.no_grad():
        d = 3
        u = torch.from_numpy(arr(6403, batch, d, T))
        delta = torch.from_numpy(arr(6404, batch, d, T))
        A = -torch.exp(torch.from_numpy(arr(6405, d, d_state, scale=0.5)))
        B, C = (torch.from_numpy(arr(6406 + i, batch, d_state, T)) for i in range(2))
        Dv, z, bias = torch.ones(d), torch.from_numpy(arr(6408, batch, d, T)), torch.zeros(d)
        ref, ref_last = selective_scan_ref(u, delta, A, B, C, Dv, z, bias, return_last_state=True)
        chunked, ch_last = selective_scan_chunked(u, delta, A, B, C, Dv, z, bias, chunk_size=3,
                                                  return_last_state=True)  # fmt: skip
        dt = F.softplus(delta)
        log_a = torch.einsum("bdl,dn->bdnl", dt, A)
        bu = torch.einsum("bdl,bnl,bdl->bdnl", dt, B, u)
        h = heinsen_scan(log_a, bu, torch.zeros(batch, d, d_state))
        heinsen = (torch.einsum("bdnl,bnl->bdl", h, C) + u) * F.silu(z)
    return {"losses": losses, "ref_grads": ref_grads, "chunked_grads": grads(model),
            "ref": ref, "ref_last": ref_last, "chunked": chunked, "chunked_last": ch_last,
            "heinsen": heinsen, "chunked_ok": torch.allclose(ref, chunked, atol=1e-5),
            "heinsen_ok": torch.allclose(ref, heinsen, atol=1e-4),
            "dt_bias": model.mixer.dt_proj.bias, "A_log": model.mixer.A_log}  # fmt: skip


@program
def ssm_rwkv4_gpt_mode_softmax_wkv_vs_chatrwkv_rnn_state(torch):
    nn, F = torch.nn, torch.nn.functional
    V, C, n_layer, T, batch = 11, 8, 2, 7, 2

    def wkv_parallel(time_decay, time_first, k, v):  # (B T C), as one masked softmax over s <= t
        w = -torch.exp(time_decay)
        t = torch.arange(k.size(1))
        dist = (t[:, None] - 1 - t[None, :]).float()
        logits = w * dist[:, :, None] + k[:, None, :, :]  # (B T S C)
        logits = torch.where((t[:, None] > t[None, :])[..., None], logits, float("-inf"))
        diag = torch.eye(k.size(1), dtype=torch.bool)[..., None]
        logits = torch.where(diag, (time_first + k)[:, :, None, :], logits)
        return torch.einsum("btsc,bsc->btc", torch.softmax(logits, dim=2), v)

    class TimeMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            ratio_0_to_1, ratio_1_to_almost0 = layer_id / (n_layer - 1), 1.0 - layer_id / n_layer
            ddd = (torch.arange(C, dtype=torch.float32) / C).view(1, 1, C)
            self.time_decay = nn.Parameter(
                torch.tensor(
                    [-5 + 8 * (h / (C - 1)) ** (0.7 + 1.3 * ratio_0_to_1) for h in range(C)]
                )
            )
            zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(C)]) * 0.5
            self.time_first = nn.Parameter(torch.ones(C) * math.log(0.3) + zigzag)
            self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(torch.pow(ddd, 0.5 * ratio_1_to_almost0))
            self.key, self.value = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.receptance, self.output = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)

        def forward(self, x):
            xx = F.pad(x, (0, 0, 1, -1))  # token shift
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            k, v, r = self.key(xk), self.value(xv), torch.sigmoid(self.receptance(xr))
            return self.output(r * wkv_parallel(self.time_decay, self.time_first, k, v))

    class ChannelMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            ddd = (torch.arange(C, dtype=torch.float32) / C).view(1, 1, C)
            self.time_mix_k = nn.Parameter(torch.pow(ddd, 1.0 - layer_id / n_layer))
            self.time_mix_r = nn.Parameter(torch.pow(ddd, 1.0 - layer_id / n_layer))
            self.key, self.value = nn.Linear(C, 4 * C, bias=False), nn.Linear(4 * C, C, bias=False)
            self.receptance = nn.Linear(C, C, bias=False)

        def forward(self, x):
            xx = F.pad(x, (0, 0, 1, -1))
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            k = torch.square(torch.relu(self.key(xk)))
            return torch.sigmoid(self.receptance(xr)) * self.value(k)

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.att, self.ffn = TimeMix(i), ChannelMix(i)

        def forward(self, x):
            x = x + self.att(self.ln1(x))
            return x + self.ffn(self.ln2(x))

    class RWKV(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln0 = nn.Embedding(V, C), nn.LayerNorm(C)
            self.blocks = nn.ModuleList([Block(i) for i in range(n_layer)])
            self.ln_out, self.head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

        def forward(self, idx):
            x = self.ln0(self.emb(idx))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_out(x))

    class RWKV_RNN:  # ChatRWKV's inference: one token at a time, the state in one tensor
        def __init__(self, state_dict):
            self.w = {}
            for k, v in state_dict.items():
                v = v.detach().float()
                if ".time_" in k:
                    v = v.squeeze()
                if ".time_decay" in k:
                    v = -torch.exp(v)
                self.w[k] = v

        def layer_norm(self, x, name):
            return F.layer_norm(
                x, (C,), weight=self.w[name + ".weight"], bias=self.w[name + ".bias"]
            )

        def channel_mixing(self, x, state, i, p):
            xk = x * self.w[p + "time_mix_k"] + state[5 * i + 0] * (1 - self.w[p + "time_mix_k"])
            xr = x * self.w[p + "time_mix_r"] + state[5 * i + 0] * (1 - self.w[p + "time_mix_r"])
            state[5 * i + 0] = x
            r = torch.sigmoid(self.w[p + "receptance.weight"] @ xr)
            k = torch.square(torch.relu(self.w[p + "key.weight"] @ xk))
            return r * (self.w[p + "value.weight"] @ k)

        def time_mixing(self, x, state, i, p):
            w = lambda n: self.w[p + n]  # noqa: E731
            xk = x * w("time_mix_k") + state[5 * i + 1] * (1 - w("time_mix_k"))
            xv = x * w("time_mix_v") + state[5 * i + 1] * (1 - w("time_mix_v"))
            xr = x * w("time_mix_r") + state[5 * i + 1] * (1 - w("time_mix_r"))
            state[5 * i + 1] = x
            r = torch.sigmoid(w("receptance.weight") @ xr)
            k, v = w("key.weight") @ xk, w("value.weight") @ xv
            aa, bb, pp = state[5 * i + 2], state[5 * i + 3], state[5 * i + 4]
            ww = w("time_first") + k
            qq = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - qq), torch.exp(ww - qq)
            a, b = e1 * aa + e2 * v, e1 * bb + e2
            wkv = a / b
            ww = pp + w("time_decay")
            qq = torch.maximum(ww, k)
            e1, e2 = torch.exp(ww - qq), torch.exp(k - qq)
            state[5 * i + 2] = e1 * aa + e2 * v
            state[5 * i + 3] = e1 * bb + e2
            state[5 * i + 4] = qq
            return w("output.weight") @ (r * wkv)

        def forward(self, token, state):
            with torch.no_grad():
                if state is None:
                    state = torch.zeros(n_layer * 5, C)
                    for i in range(n_layer):
                        state[5 * i + 4] = -1e30
                x = self.layer_norm(self.w["emb.weight"][token], "ln0")
                for i in range(n_layer):
                    att, ffn = f"blocks.{i}.att.", f"blocks.{i}.ffn."
                    x = x + self.time_mixing(self.layer_norm(x, f"blocks.{i}.ln1"), state, i, att)
                    x = x + self.channel_mixing(
                        self.layer_norm(x, f"blocks.{i}.ln2"), state, i, ffn
                    )
                x = self.w["head.weight"] @ self.layer_norm(x, "ln_out")
                return x.float(), state

    model = RWKV()
    for i, m in enumerate(m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))):
        set_weights(torch, m, seed=6500 + i, scale=0.5 if isinstance(m, nn.Embedding) else None)
    data = torch.from_numpy(ints(6501, V, batch, T + 1))
    idx, targets = data[:, :-1], data[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for _ in range(3):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, V), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    rnn = RWKV_RNN(model.state_dict())
    with torch.no_grad():
        gpt_logits = model(idx)
    state, rnn_logits = None, []
    for token in idx[0].tolist():
        out, state = rnn.forward(token, state)
        rnn_logits.append(out)
    rnn_logits = torch.stack(rnn_logits)
    generated = []
    for _ in range(4):  # greedy continuation from the RNN state
        token = int(torch.argmax(out))
        generated.append(token)
        out, state = rnn.forward(token, state)
    return {"losses": losses, "grads": grads(model), "gpt_logits": gpt_logits,
            "rnn_logits": rnn_logits, "same": torch.allclose(gpt_logits[0], rnn_logits, atol=1e-4),
            "state": state, "generated": generated,
            "time_decay": rnn.w["blocks.1.att.time_decay"]}  # fmt: skip


@program
def ssm_rwkv5_multihead_matrix_state_loop_vs_chunked(torch):
    nn, F = torch.nn, torch.nn.functional
    V, C, H, T, batch, n_layer = 10, 8, 2, 10, 2, 2
    K = C // H

    def wkv_loop(r, k, v, w, u, s):  # (B H T K); w, u: (H K); s: (B H K K)
        out = []
        for t in range(r.size(2)):
            kv = k[:, :, t, :, None] @ v[:, :, t, None, :]
            out.append((r[:, :, t, None, :] @ (u[..., None] * kv + s)).squeeze(2))
            s = kv + w[..., None] * s
        return torch.stack(out, dim=2), s

    def wkv_chunked(r, k, v, w, u, s, chunk=4):
        log_w = torch.log(w)[:, None, :]  # (H 1 K)
        outs = []
        for rc, kc, vc in zip(r.split(chunk, 2), k.split(chunk, 2), v.split(chunk, 2)):
            n = rc.size(2)
            idx = torch.arange(n, dtype=torch.float32)[:, None]
            r_dec = rc * torch.exp(log_w * idx)  # r_t w^t
            k_dec = kc * torch.exp(-log_w * (idx + 1))  # k_s w^(-s-1)
            att = (r_dec @ k_dec.transpose(-1, -2)).tril(-1)
            att = att + torch.diag_embed((rc * u[:, None, :] * kc).sum(-1))
            outs.append(att @ vc + r_dec @ s)
            k_state = kc * torch.exp(log_w * (n - 1 - idx))
            s = torch.exp(log_w.squeeze(1) * n)[..., None] * s + k_state.transpose(-1, -2) @ vc
        return torch.cat(outs, dim=2), s

    class TimeMix(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            ratio_0_to_1, ratio_1_to_almost0 = layer_id / (n_layer - 1), 1.0 - layer_id / n_layer
            ddd = (torch.arange(C, dtype=torch.float32) / C).view(1, 1, C)
            self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(torch.pow(ddd, 0.5 * ratio_1_to_almost0))
            self.time_mix_g = nn.Parameter(torch.pow(ddd, 0.5 * ratio_1_to_almost0))
            decay = [-6 + 5 * (n / (C - 1)) ** (0.7 + 1.3 * ratio_0_to_1) for n in range(C)]
            self.time_decay = nn.Parameter(torch.tensor(decay).reshape(H, K))
            faaaa = [ratio_0_to_1 * (1 - n / (C - 1)) + ((n + 1) % 3 - 1) * 0.1 for n in range(C)]
            self.time_faaaa = nn.Parameter(torch.tensor(faaaa).reshape(H, K))
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            self.receptance, self.key = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.value, self.gate = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.output = nn.Linear(C, C, bias=False)
            self.ln_x = nn.GroupNorm(H, C, eps=64e-5)
            self.chunked = False

        def forward(self, x):
            B, T, _ = x.size()
            xx = self.time_shift(x)
            mix = lambda m: x * m + xx * (1 - m)  # noqa: E731
            heads = lambda t: t.view(B, T, H, K).transpose(1, 2)  # noqa: E731
            r = heads(self.receptance(mix(self.time_mix_r)))
            k = heads(self.key(mix(self.time_mix_k)))
            v = heads(self.value(mix(self.time_mix_v)))
            g = F.silu(self.gate(mix(self.time_mix_g)))
            w = torch.exp(-torch.exp(self.time_decay.float()))
            s0 = torch.zeros(B, H, K, K)
            wkv = wkv_chunked if self.chunked else wkv_loop
            out, self.last_state = wkv(r, k, v, w, self.time_faaaa, s0)
            out = self.ln_x(out.transpose(1, 2).reshape(B * T, C) / 8).view(B, T, C)
            return self.output(out * g)

    class ChannelMix(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            self.time_mix_k = nn.Parameter(torch.full((1, 1, C), 0.6))
            self.time_mix_r = nn.Parameter(torch.full((1, 1, C), 0.4))
            self.key, self.value = nn.Linear(C, 2 * C, bias=False), nn.Linear(2 * C, C, bias=False)
            self.receptance = nn.Linear(C, C, bias=False)

        def forward(self, x):
            xx = self.time_shift(x)
            xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
            xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
            return torch.sigmoid(self.receptance(xr)) * self.value(torch.relu(self.key(xk)) ** 2)

    class RWKV5(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln0 = nn.Embedding(V, C), nn.LayerNorm(C)
            self.ln1 = nn.ModuleList([nn.LayerNorm(C) for _ in range(n_layer)])
            self.ln2 = nn.ModuleList([nn.LayerNorm(C) for _ in range(n_layer)])
            self.att = nn.ModuleList([TimeMix(i) for i in range(n_layer)])
            self.ffn = nn.ModuleList([ChannelMix() for _ in range(n_layer)])
            self.ln_out, self.head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

        def forward(self, idx):
            x = self.ln0(self.emb(idx))
            for ln1, att, ln2, ffn in zip(self.ln1, self.att, self.ln2, self.ffn):
                x = x + att(ln1(x))
                x = x + ffn(ln2(x))
            return self.head(self.ln_out(x))

    model = RWKV5()
    for i, m in enumerate(m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))):
        set_weights(torch, m, seed=6600 + i, scale=0.5 if isinstance(m, nn.Embedding) else None)
    data = torch.from_numpy(ints(6601, V, batch, T + 1))
    idx, targets = data[:, :-1], data[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(idx).transpose(1, 2), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.zero_grad()
    F.cross_entropy(model(idx).transpose(1, 2), targets).backward()
    loop_grads = {n: g.clone() for n, g in grads(model).items()}
    loop_state = model.att[1].last_state.detach()
    for att in model.att:
        att.chunked = True
    model.zero_grad()
    logits = model(idx)
    F.cross_entropy(logits.transpose(1, 2), targets).backward()
    chunked_grads = grads(model)
    same_grads = all(torch.allclose(loop_grads[n], g, atol=1e-5) for n, g in chunked_grads.items())
    return {"losses": losses, "loop_grads": loop_grads, "chunked_grads": chunked_grads,
            "logits": logits, "loop_state": loop_state, "chunked_state": model.att[1].last_state,
            "same_grads": same_grads, "decay": torch.exp(-torch.exp(model.att[0].time_decay))}  # fmt: skip


@program
def ssm_retnet_retention_parallel_recurrent_chunkwise(torch):
    nn, F = torch.nn, torch.nn.functional
    V, d, heads, T, chunk, batch = 10, 8, 2, 8, 4, 2
    dk, dv = d // heads, 2 * d // heads

    def rotate(x, n):  # (B T H dk): e^{i n theta} on pairs of features, in complex form
        theta = 1.0 / (10000 ** (torch.arange(0, x.size(-1), 2, dtype=torch.float32) / x.size(-1)))
        angles = torch.polar(torch.ones(len(n), theta.numel()), n[:, None].float() * theta)
        angles = angles[:, None, :]  # broadcast over heads
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * angles).flatten(-2)

    def parallel_retention(q, k, v, decay_mask):
        return ((q @ k.transpose(-1, -2)) * decay_mask) @ v

    def recurrent_retention(q, k, v, past_kv, gamma):  # one position: (B H dk), (B H dv)
        kv = gamma[:, None, None] * past_kv + k.unsqueeze(-1) * v.unsqueeze(-2)
        return torch.sum(q.unsqueeze(-1) * kv, dim=-2), kv

    def chunkwise_retention(q, k, v, past_kv, decay_mask, chunk_decay, inner_decay, value_decay):
        inner = ((q @ k.transpose(-1, -2)) * decay_mask) @ v
        cross = (q @ past_kv) * inner_decay
        kv = chunk_decay * past_kv + k.transpose(-1, -2) @ (v * value_decay)
        return inner + cross, kv

    class MultiScaleRetention(nn.Module):
        def __init__(self):
            super().__init__()
            self.gamma = 1 - 2 ** (-5 - torch.arange(heads, dtype=torch.float32))
            self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.v_proj, self.g_proj = (
                nn.Linear(d, 2 * d, bias=False),
                nn.Linear(d, 2 * d, bias=False),
            )
            self.out_proj = nn.Linear(2 * d, d, bias=False)
            self.group_norm = nn.GroupNorm(heads, 2 * d, affine=False)

        def decay_mask(self, n):
            i = torch.arange(n)
            diff = i[:, None] - i[None, :]
            mask = self.gamma[:, None, None] ** diff.clamp(min=0)
            return torch.where(diff >= 0, mask, torch.zeros(()))

        def forward(self, x, mode="parallel"):
            B, T, _ = x.shape
            pos = torch.arange(T)
            q = rotate(self.q_proj(x).view(B, T, heads, dk), pos).transpose(1, 2)
            k = rotate(self.k_proj(x).view(B, T, heads, dk), pos).transpose(1, 2)
            k = k * dk**-0.5
            v = self.v_proj(x).view(B, T, heads, dv).transpose(1, 2)
            if mode == "parallel":
                o = parallel_retention(q, k, v, self.decay_mask(T))
            elif mode == "recurrent":
                kv, outs = torch.zeros(B, heads, dk, dv), []
                for t in range(T):
                    o_t, kv = recurrent_retention(
                        q[:, :, t], k[:, :, t], v[:, :, t], kv, self.gamma
                    )
                    outs.append(o_t)
                o = torch.stack(outs, dim=2)
            else:
                mask = self.decay_mask(chunk)
                j = torch.arange(chunk, dtype=torch.float32)
                chunk_decay = (self.gamma**chunk)[:, None, None]
                inner_decay = (self.gamma[:, None] ** (j + 1))[..., None]
                value_decay = (self.gamma[:, None] ** (chunk - 1 - j))[..., None]
                kv, outs = torch.zeros(B, heads, dk, dv), []
                for c in range(T // chunk):
                    sl = slice(c * chunk, (c + 1) * chunk)
                    o_c, kv = chunkwise_retention(q[:, :, sl], k[:, :, sl], v[:, :, sl], kv, mask,
                                                  chunk_decay, inner_decay, value_decay)  # fmt: skip
                    outs.append(o_c)
                o = torch.cat(outs, dim=2)
            self.raw = o
            o = self.group_norm(o.transpose(1, 2).reshape(B * T, heads * dv)).view(B, T, -1)
            return self.out_proj(F.silu(self.g_proj(x)) * o)

    class RetNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.ln1, self.ln2, self.ln_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
            self.msr = MultiScaleRetention()
            self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.head = nn.Linear(d, V, bias=False)

        def forward(self, idx, mode="parallel"):
            x = self.emb(idx)
            x = x + self.msr(self.ln1(x), mode)
            x = x + self.ffn(self.ln2(x))
            return self.head(self.ln_f(x))

    model = set_weights(torch, RetNet(), seed=6701)
    data = torch.from_numpy(ints(6702, V, batch, T + 1))
    idx, targets = data[:, :-1], data[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, betas=(0.9, 0.98), weight_decay=0.05)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(idx, "chunkwise").flatten(0, 1), targets.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    chunk_grads = {n: g.clone() for n, g in grads(model).items()}
    model.zero_grad()
    F.cross_entropy(model(idx, "parallel").flatten(0, 1), targets.flatten()).backward()
    outs = {}
    with torch.no_grad():
        for mode in ("parallel", "recurrent", "chunkwise"):
            outs[mode] = model(idx, mode)
            outs[mode + "_raw"] = model.msr.raw
    return {"losses": losses, "chunk_grads": chunk_grads, "parallel_grads": grads(model), **outs,
            "rec_eq_par": torch.allclose(outs["recurrent_raw"], outs["parallel_raw"], atol=1e-5),
            "chunk_eq_par": torch.allclose(outs["chunkwise_raw"], outs["parallel_raw"], atol=1e-5),
            "decay_mask": model.msr.decay_mask(5)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # FFT convolutions: pocketfft/cuFFT sum in other orders
def ssm_h3_shift_and_diagonal_ssm_fftconv_multihead(torch):
    nn, F = torch.nn, torch.nn.functional
    V, d_model, head_dim, N, L, batch = 12, 8, 2, 4, 10, 2
    H = d_model // head_dim
    rng = np.random.default_rng(6801)

    class ShiftKernel(nn.Module):  # A is the shift matrix and B = e_1: the kernel is C itself
        def __init__(self, channels):
            super().__init__()
            self.C = nn.Parameter(
                torch.tensor(rng.standard_normal((channels, N)).astype(np.float32))
            )

        def forward(self, L):
            return F.pad(self.C, (0, L - N))

    class DiagKernel(nn.Module):  # S4D-Lin, zero-order hold
        def __init__(self, channels):
            super().__init__()
            log_dt = np.log(rng.uniform(1e-3, 1e-1, channels)).astype(np.float32)
            self.log_dt = nn.Parameter(torch.tensor(log_dt))
            self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(channels, N // 2)))
            self.A_imag = nn.Parameter(math.pi * torch.arange(N // 2).float().repeat(channels, 1))
            C = rng.standard_normal((channels, N // 2, 2)).astype(np.float32) * 0.5**0.5
            self.C = nn.Parameter(torch.tensor(C))

        def forward(self, L):
            dt = torch.exp(self.log_dt)[:, None]
            A = -torch.exp(self.log_A_real) + 1j * self.A_imag
            C = torch.view_as_complex(self.C) * (torch.exp(dt * A) - 1.0) / A
            vandermonde = torch.exp((dt * A)[..., None] * torch.arange(L))
            return 2 * torch.einsum("hn,hnl->hl", C, vandermonde).real

    class H3(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.v_proj = nn.Linear(d_model, d_model)
            self.ssm_k_kernel, self.ssm_k_D = (
                ShiftKernel(d_model),
                nn.Parameter(torch.zeros(d_model)),
            )
            self.kernel, self.D = DiagKernel(H), nn.Parameter(torch.ones(H))
            self.output_linear = nn.Linear(d_model, d_model)

        def forward(self, u):  # (B L D)
            b, L, _ = u.shape
            q, k, v = (p(u).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
            k = _fftconv(torch, k, self.ssm_k_kernel(L), self.ssm_k_D)  # the shift SSM
            k5 = k.view(b, H, head_dim, L).permute(0, 2, 1, 3).unsqueeze(2)  # b d1 1 h l
            v5 = v.view(b, H, head_dim, L).permute(0, 2, 1, 3).unsqueeze(1)  # b 1 d2 h l
            kv = _fftconv(torch, k5 * v5, self.kernel(L), self.D)  # the diagonal SSM per head
            q5 = q.view(b, H, head_dim, L).permute(0, 2, 1, 3).unsqueeze(2)
            y = (kv * q5).sum(dim=1)  # b d2 h l
            y = y.permute(0, 3, 2, 1).reshape(b, L, H * head_dim)
            return self.output_linear(y)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, d_model)
            self.norm1, self.mixer = nn.LayerNorm(d_model), H3()
            self.norm2 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d_model, d_model))  # fmt: skip
            self.head = nn.Linear(d_model, V, bias=False)

        def forward(self, ids):
            x = self.emb(ids)
            x = x + self.mixer(self.norm1(x))
            x = x + self.mlp(self.norm2(x))
            return self.head(x)

    model = LM()
    for i, m in enumerate(m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))):
        set_weights(torch, m, seed=6810 + i)
    data = torch.from_numpy(ints(6802, V, batch, L + 1))
    ids, targets = data[:, :-1], data[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.1)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(ids).view(-1, V), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    mixer = model.mixer
    with torch.no_grad():
        u = torch.from_numpy(arr(6803, batch, d_model, L))
        shift_fft = _fftconv(torch, u, mixer.ssm_k_kernel(L), mixer.ssm_k_D)
        kernel = mixer.ssm_k_kernel.C.flip(-1).unsqueeze(1)
        shift_direct = (
            F.conv1d(F.pad(u, (N - 1, 0)), kernel, groups=d_model) + u * mixer.ssm_k_D[:, None]
        )
        diag_kernel = mixer.kernel(L)
    return {"losses": losses, "grads": grads(model), "shift_fft": shift_fft,
            "shift_direct": shift_direct, "same": torch.allclose(shift_fft, shift_direct, atol=1e-5),
            "diag_kernel": diag_kernel, "shift_C": mixer.ssm_k_kernel.C}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # FFT convolutions: pocketfft/cuFFT sum in other orders
def ssm_hyena_implicit_filter_associative_recall(torch):
    nn, F = torch.nn, torch.nn.functional
    n_keys, d_model, order, emb_dim, filter_order, batch = 4, 8, 2, 5, 16, 6
    V, L = 2 * n_keys, 2 * 3 + 1  # keys 0..3, values 4..7; three pairs and a query

    class Sin(nn.Module):
        def __init__(self, dim, w=10, train_freq=True):
            super().__init__()
            self.freq = (
                nn.Parameter(w * torch.ones(1, dim)) if train_freq else w * torch.ones(1, dim)
            )

        def forward(self, x):
            return torch.sin(self.freq * x)

    class PositionalEmbedding(nn.Module):
        def __init__(self, emb_dim, seq_len):
            super().__init__()
            t = torch.linspace(0, 1, seq_len)[None, :, None]  # 1, L, 1
            bands = (emb_dim - 1) // 2
            t_rescaled = torch.linspace(0, seq_len - 1, seq_len)[None, :, None]
            w = 2 * math.pi * t_rescaled / seq_len
            f = torch.linspace(1e-4, bands - 1, bands)[None, None]
            z = torch.exp(-1j * f * w)
            self.register_buffer("z", torch.cat([t, z.real, z.imag], dim=-1))
            self.register_buffer("t", t)

        def forward(self, L):
            return self.z[:, :L], self.t[:, :L]

    class ExponentialModulation(nn.Module):
        def __init__(self, d, fast_decay_pct=0.3, slow_decay_pct=1.5, target=1e-2, shift=0.05):
            super().__init__()
            self.shift = shift
            max_decay, min_decay = (
                math.log(target) / fast_decay_pct,
                math.log(target) / slow_decay_pct,
            )
            self.register_buffer("deltas", torch.linspace(min_decay, max_decay, d)[None, None])

        def forward(self, t, x):
            return x * (torch.exp(-t * self.deltas.abs()) + self.shift)

    class HyenaFilter(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos_emb = PositionalEmbedding(emb_dim, L)
            self.implicit_filter = nn.Sequential(
                nn.Linear(emb_dim, filter_order), Sin(filter_order),
                nn.Linear(filter_order, filter_order), Sin(filter_order),
                nn.Linear(filter_order, d_model * (order - 1), bias=False),
            )  # fmt: skip
            self.modulation = ExponentialModulation(d_model * (order - 1))
            self.bias = nn.Parameter(torch.tensor(arr(6901, d_model * (order - 1))))

        def filter(self, L):
            z, t = self.pos_emb(L)
            return self.modulation(t, self.implicit_filter(z))

        def forward(self, x, L, k, bias):
            return _fftconv(torch, x, k, bias)

    class HyenaOperator(nn.Module):
        def __init__(self):
            super().__init__()
            inner = d_model * (order + 1)
            self.in_proj, self.out_proj = nn.Linear(d_model, inner), nn.Linear(d_model, d_model)
            self.short_filter = nn.Conv1d(inner, inner, 3, padding=2, groups=inner)
            self.filter_fn = HyenaFilter()

        def forward(self, u):
            seqlen = u.size(-2)
            u = self.in_proj(u).transpose(1, 2)  # "b l d -> b d l"
            uc = self.short_filter(u)[..., :seqlen]
            *x, v = uc.split(d_model, dim=1)
            k = self.filter_fn.filter(seqlen)[0]  # (l, (o d))
            k = k.view(seqlen, order - 1, d_model).permute(1, 2, 0)  # "l (o d) -> o d l"
            bias = self.filter_fn.bias.view(order - 1, d_model)
            for o, x_i in enumerate(reversed(x[1:])):
                v = self.filter_fn(v * x_i, seqlen, k=k[o], bias=bias[o])
            return self.out_proj((v * x[0]).transpose(1, 2))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.norm = nn.Embedding(V, d_model), nn.LayerNorm(d_model)
            self.hyena, self.head = HyenaOperator(), nn.Linear(d_model, V)

        def forward(self, ids):
            x = self.emb(ids)
            x = x + self.hyena(self.norm(x))
            return self.head(x[:, -1])

    g = np.random.default_rng(6902)  # associative recall: k1 v1 k2 v2 k3 v3 q -> value of q
    seqs, answers = [], []
    for _ in range(batch):
        keys = g.permutation(n_keys)[:3]
        values = g.integers(n_keys, V, 3)
        seq = np.stack([keys, values], 1).ravel()
        q = g.integers(0, 3)
        seqs.append(np.concatenate([seq, keys[q : q + 1]]))
        answers.append(values[q])
    ids, answers = torch.tensor(np.stack(seqs)), torch.tensor(np.array(answers))
    model = Model()
    for i, m in enumerate(
        m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding, nn.Conv1d))
    ):
        set_weights(torch, m, seed=6910 + i)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    losses, accs = [], []
    for _ in range(4):
        logits = model(ids)
        loss = F.cross_entropy(logits, answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        accs.append((logits.argmax(-1) == answers).float().mean().item())
    filt = model.hyena.filter_fn
    with torch.no_grad():
        z, t = filt.pos_emb(L)
        h = filt.filter(L)
    return {"losses": losses, "accs": accs, "grads": grads(model), "z": z, "t": t, "filter": h,
            "freq": filt.implicit_filter[1].freq, "logits": logits}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # FFT convolutions: pocketfft/cuFFT sum in other orders
def ssm_long_conv_squash_smooth_kernel_l1(torch):
    nn, F = torch.nn, torch.nn.functional
    H, L, batch, n_classes = 4, 16, 4, 3

    class LongConvKernel(nn.Module):
        def __init__(self, lam=0.02, smooth_k=3):
            super().__init__()
            self.lam, self.smooth_k = lam, smooth_k
            self.kernel = nn.Parameter(torch.from_numpy(arr(7001, H, L, scale=0.1)))

        def forward(self):
            k = F.avg_pool1d(
                self.kernel, kernel_size=self.smooth_k, stride=1, padding=self.smooth_k // 2
            )
            return F.relu(torch.abs(k) - self.lam) * torch.sign(k)  # squash: soft threshold

    class LongConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.kernel = LongConvKernel()
            self.D = nn.Parameter(torch.from_numpy(arr(7002, H)))
            self.output_linear = nn.Sequential(nn.Conv1d(H, 2 * H, kernel_size=1), nn.GLU(dim=-2))

        def forward(self, u):  # (B H L)
            L = u.size(-1)
            k = self.kernel()
            k_f = torch.fft.rfft(F.pad(k, (0, L)))
            u_f = torch.fft.rfft(F.pad(u, (0, L)))
            y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L] + u * self.D[:, None]
            return self.output_linear(F.gelu(y))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(1, H)
            self.conv, self.norm = LongConv(), nn.BatchNorm1d(H)
            self.decoder = nn.Linear(H, n_classes)

        def forward(self, x):
            x = self.encoder(x.unsqueeze(-1)).transpose(1, 2)
            x = self.norm(x + self.conv(x))
            return self.decoder(x.mean(-1))

    model = Model()
    for i, m in enumerate(m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d))):
        set_weights(torch, m, seed=7010 + i)
    x = torch.from_numpy(arr(7003, batch, L))
    y = torch.from_numpy(ints(7004, n_classes, batch))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses, sparsity = [], []
    for _ in range(3):
        ce = F.cross_entropy(model(x), y)
        loss = ce + 1e-3 * model.conv.kernel().abs().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        sparsity.append((model.conv.kernel() == 0).float().mean().item())
    model.eval()
    with torch.no_grad():
        k = model.conv.kernel()
        u = torch.from_numpy(arr(7005, 2, H, L))
        fft = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)[
            ..., :L
        ]
        direct = F.conv1d(F.pad(u, (L - 1, 0)), k.flip(-1).unsqueeze(1), groups=H)
        eval_logits = model(x)
    return {"losses": losses, "sparsity": sparsity, "grads": grads(model), "kernel": k,
            "fft": fft, "direct": direct, "same": torch.allclose(fft, direct, atol=1e-5),
            "running_mean": model.norm.running_mean, "running_var": model.norm.running_var,
            "eval_logits": eval_logits}  # fmt: skip


@program
def ssm_griffin_rglru_block_diagonal_gates_segment_resets(torch):
    nn, F = torch.nn, torch.nn.functional
    V, width, heads, T, batch, conv_width = 11, 8, 2, 10, 2, 4
    max_sqrt_gradient = 1000.0
    rng = np.random.default_rng(7101)

    class SqrtBoundDerivative(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sqrt(x)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            clipped_x_times_4 = torch.clip(4.0 * x, min=max_sqrt_gradient**-2)
            return grad_output / torch.sqrt(clipped_x_times_4)

    def rnn_param_init(width, min_rad=0.9, max_rad=0.999):
        unif = torch.tensor(rng.uniform(min_rad**2, max_rad**2, width).astype(np.float32))
        x = unif.log().mul_(0.5)  # the log of the radius
        return x.neg_().exp_().sub_(1.0).log_()  # softplus^-1(-log a)

    class BlockDiagonalLinear(nn.Module):
        def __init__(self, width, num_blocks):
            super().__init__()
            self.num_blocks, self.block_width = num_blocks, width // num_blocks
            w = rng.standard_normal((num_blocks, self.block_width, self.block_width)) / math.sqrt(
                self.block_width
            )
            self.w = nn.Parameter(torch.tensor(w.astype(np.float32)))
            self.b = nn.Parameter(torch.zeros(num_blocks, self.block_width))

        def forward(self, x):
            x = x.view(*x.shape[:-1], self.num_blocks, self.block_width)  # "... (h i) -> ... h i"
            y = torch.einsum("... h i, h i j -> ... h j", x, self.w) + self.b
            return y.flatten(-2)

    def rnn_scan(x, a, reset, h0=None):
        a = a * ~reset[..., None]
        h = torch.zeros_like(x[:, 0]) if h0 is None else h0
        ys = []
        for t in range(x.size(1)):
            h = a[:, t] * h + x[:, t]
            ys.append(h)
        return torch.stack(ys, dim=1), h

    class RGLRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.a_param = nn.Parameter(rnn_param_init(width))
            self.input_gate = BlockDiagonalLinear(width, heads)
            self.a_gate = BlockDiagonalLinear(width, heads)

        def forward(self, x, segment_pos, prev_h=None):
            reset = segment_pos == 0
            gate_x = torch.sigmoid(self.input_gate(x))
            gate_a = torch.sigmoid(self.a_gate(x))
            log_a = -8.0 * gate_a * F.softplus(self.a_param)
            a, a_square = torch.exp(log_a), torch.exp(2 * log_a)
            multiplier = SqrtBoundDerivative.apply(1 - a_square)
            multiplier = reset[..., None] + ~reset[..., None] * multiplier
            normalized_x = x * gate_x * multiplier.type(x.dtype)
            return rnn_scan(normalized_x, a, reset, prev_h)

    class Conv1D(nn.Module):  # a causal temporal conv that does not look across documents
        def __init__(self):
            super().__init__()
            w = rng.standard_normal((conv_width, width)) / math.sqrt(conv_width)
            self.w = nn.Parameter(torch.tensor(w.astype(np.float32)))
            self.b = nn.Parameter(torch.zeros(width))

        def forward(self, x, segment_pos):
            out = torch.zeros_like(x)
            for shift in range(conv_width):
                window = F.pad(x, (0, 0, shift, 0))[:, : x.size(1)]
                same_doc = (segment_pos >= shift)[..., None]
                out = out + window * same_doc * self.w[conv_width - shift - 1]
            return out + self.b

    class RecurrentBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_y, self.linear_x = nn.Linear(width, width), nn.Linear(width, width)
            self.linear_out = nn.Linear(width, width)
            self.conv_1d, self.rg_lru = Conv1D(), RGLRU()

        def forward(self, x, segment_pos):
            y = F.gelu(self.linear_y(x), approximate="tanh")
            x = self.conv_1d(self.linear_x(x), segment_pos)
            x, last_h = self.rg_lru(x, segment_pos)
            return self.linear_out(x * y), last_h

    class RMSNorm(nn.Module):
        def __init__(self, eps=1e-6):
            super().__init__()
            self.eps, self.scale = eps, nn.Parameter(torch.zeros(width))

        def forward(self, x):
            var = torch.mean(torch.square(x), dim=-1, keepdim=True)
            return x * torch.rsqrt(var + self.eps) * (self.scale + 1)

    class Griffin(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedder = nn.Embedding(V, width)
            self.temporal_pre_norm, self.block = RMSNorm(), RecurrentBlock()
            self.channel_pre_norm = RMSNorm()
            self.ffw_up = nn.Linear(width, 2 * 2 * width)
            self.ffw_down = nn.Linear(2 * width, width)
            self.final_norm = RMSNorm()

        def forward(self, ids, segment_pos):
            x = self.embedder(ids) * math.sqrt(width)
            y, last_h = self.block(self.temporal_pre_norm(x), segment_pos)
            x = x + y
            gate, up = self.ffw_up(self.channel_pre_norm(x)).chunk(2, dim=-1)
            x = x + self.ffw_down(F.gelu(gate, approximate="tanh") * up)
            logits = self.final_norm(x) @ self.embedder.weight.T
            c = 30.0
            return torch.tanh(logits / c) * c, last_h  # logit soft-capping

    model = Griffin()
    for i, m in enumerate(m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))):
        set_weights(torch, m, seed=7110 + i)
    ids = torch.from_numpy(ints(7102, V, batch, T + 1))
    doc_start = torch.zeros(batch, T, dtype=torch.bool)  # packed documents
    doc_start[:, 0] = True
    doc_start[0, 6] = True
    doc_start[1, 3] = True
    doc_start[1, 8] = True
    pos = torch.arange(T).expand(batch, T)
    segment_pos = (
        pos - torch.cummax(torch.where(doc_start, pos, torch.zeros_like(pos)), dim=1).values
    )
    inputs, targets = ids[:, :-1], ids[:, 1:].masked_fill(torch.roll(doc_start, -1, 1), -100)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(3):
        logits, _ = model(inputs, segment_pos)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        packed, last_h = model(inputs, segment_pos)
        alone, _ = model(inputs[:1, 6:], torch.arange(T - 6)[None])  # the second document alone
        x = torch.tensor([0.0, 1e-9, 0.25, 1.0], requires_grad=True)
    SqrtBoundDerivative.apply(x).sum().backward()
    return {"losses": losses, "grads": grads(model), "segment_pos": segment_pos, "packed": packed,
            "last_h": last_h, "alone": alone, "same_doc": torch.allclose(packed[:1, 6:], alone, atol=1e-5),
            "sqrt_grad": x.grad, "a_param": model.block.rg_lru.a_param}  # fmt: skip
