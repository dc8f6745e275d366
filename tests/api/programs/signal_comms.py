"""Wireless communications and classical signal processing as link-level simulators and
autoencoder-based comms papers write them in PyTorch: Gray-coded QAM and PSK constellations as
complex tensors with bits mapped to symbol indices through bit weights, AWGN with fixed noise,
exact and max-log LLR demapping with ``logsumexp``, Rayleigh MIMO channels equalised by
zero-forcing and LMMSE (complex ``linalg.solve`` / ``inv``), OFDM with ``ifft``/``fft`` and a
cyclic prefix over a multipath channel with least-squares pilot estimation, an end-to-end
autoencoder with average-power normalisation, a learned demapper, geometric constellation
shaping through complex parameters, LMS and RLS equalisers in a time loop, root-raised-cosine
pulse shaping and matched filtering with ``conv1d``, Schmidl-Cox frequency-offset estimation, and
BER/SER counting against the closed-form curves."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, ints, set_weights


def _bits(seed: int, *shape: int) -> np.ndarray:
    return ints(seed, 2, *shape)


def _cnoise(seed: int, *shape: int) -> np.ndarray:
    """Unit-variance circularly symmetric complex Gaussian noise (complex64)."""
    return ((arr(seed, *shape) + 1j * arr(seed + 1000, *shape)) / math.sqrt(2)).astype(np.complex64)


def _qam_constellation(torch, num_bits_per_symbol):
    """Gray-coded square QAM with unit average energy, indexed by the integer whose binary
    digits are the symbol's bits (MSB first), as Sionna builds it."""
    half = num_bits_per_symbol // 2
    m = 2**half
    levels = torch.arange(m, dtype=torch.float32) * 2 - (m - 1)  # -3, -1, 1, 3
    gray = torch.tensor([i ^ (i >> 1) for i in range(m)])
    pam = torch.empty(m)
    pam[gray] = levels  # the level whose Gray label is g
    idx = torch.arange(2**num_bits_per_symbol)
    re = pam[idx >> half]
    im = pam[idx & (m - 1)]
    points = torch.complex(re, im)
    return points / points.abs().pow(2).mean().sqrt()


def _bit_labels(torch, num_bits_per_symbol):
    """``labels[s, k]``: bit ``k`` (MSB first) of symbol index ``s``."""
    idx = torch.arange(2**num_bits_per_symbol)
    shifts = torch.arange(num_bits_per_symbol - 1, -1, -1)
    return (idx[:, None] >> shifts) & 1


@program
def comms_qam16_gray_mapping_awgn_hard_decisions(torch):
    """16-QAM: bits reshaped into groups of four and turned into symbol indices with a dot
    product against bit weights, mapped through a Gray-coded unit-energy constellation, sent
    over AWGN at several Es/N0 (fixed NumPy noise), detected by minimum distance and demapped
    back to bits; SER and BER counted per SNR."""
    k = 4
    n_sym = 96
    bits = torch.tensor(_bits(1, n_sym * k))
    points = _qam_constellation(torch, k)
    weights = 2 ** torch.arange(k - 1, -1, -1)
    sym_idx = (bits.view(-1, k) * weights).sum(-1)
    x = points[sym_idx]
    noise = torch.from_numpy(_cnoise(2, 3, n_sym))
    snr_db = torch.tensor([4.0, 10.0, 16.0])
    no = 10 ** (-snr_db / 10)
    y = x + torch.sqrt(no)[:, None] * noise
    dist = (y.unsqueeze(-1) - points).abs()
    sym_hat = dist.argmin(-1)
    labels = _bit_labels(torch, k)
    bits_hat = labels[sym_hat].reshape(3, -1)
    ser = (sym_hat != sym_idx).float().mean(-1)
    bit_errors = (bits_hat != bits).sum(-1)
    ber = bit_errors.double() / bits.numel()
    evm = ((y - x).abs().pow(2).mean(-1) / x.abs().pow(2).mean()).sqrt()
    return {"points": points, "energy": points.abs().square().mean(), "sym_idx": sym_idx,
            "x": x, "y": y[1], "sym_hat": sym_hat, "ser": ser, "bit_errors": bit_errors,
            "ber": ber, "evm_db": 20 * torch.log10(evm), "dtype": str(x.dtype)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # logsumexp over 8 points at high SNR: float32 cancellation
def comms_psk_llr_demapping_exact_and_maxlog(torch):
    """8-PSK with a Gray labelling built by ``torch.polar``; exact LLRs by ``logsumexp`` over the
    points whose bit is 0 versus 1 and the max-log approximation by ``amax``, both computed with
    masked ``-inf`` fills; hard decisions from the LLR sign, BER, and the bit-metric-decoding
    rate estimated with binary cross-entropy."""
    k = 3
    m = 2**k
    gray = torch.tensor([i ^ (i >> 1) for i in range(m)])
    phases = 2 * math.pi * torch.arange(m, dtype=torch.float32) / m + math.pi / m
    points = torch.zeros(m, dtype=torch.complex64)
    points[gray] = torch.polar(torch.ones(m), phases)
    labels = _bit_labels(torch, k)
    bits = torch.tensor(_bits(3, 64, k))
    sym = (bits * torch.tensor([4, 2, 1])).sum(-1)
    no = 0.2
    y = points[sym] + math.sqrt(no) * torch.from_numpy(_cnoise(4, 64))
    metric = -(y[:, None] - points[None, :]).abs().square() / no  # [n, m]
    is_one = labels.bool().T  # [k, m]
    neg_inf = torch.tensor(float("-inf"))
    m1 = torch.where(is_one, metric[:, None, :], neg_inf)
    m0 = torch.where(~is_one, metric[:, None, :], neg_inf)
    llr = torch.logsumexp(m1, dim=-1) - torch.logsumexp(m0, dim=-1)
    llr_maxlog = m1.amax(-1) - m0.amax(-1)
    bits_hat = (llr > 0).long()
    ber = (bits_hat != bits).float().mean()
    bce = torch.nn.functional.binary_cross_entropy_with_logits(llr, bits.float())
    rate = k * (1 - bce / math.log(2))
    return {"points": torch.view_as_real(points), "llr": llr, "llr_maxlog": llr_maxlog,
            "bits_hat": bits_hat, "ber": ber, "bce": bce, "rate": rate,
            "agree": (llr.sign() == llr_maxlog.sign()).all()}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # complex solves of ill-conditioned draws in float32
def comms_rayleigh_mimo_zero_forcing_and_lmmse(torch):
    """A 4x4 spatial-multiplexing link over i.i.d. Rayleigh fading, a batch of channel draws:
    zero-forcing by ``linalg.solve(H, y)``, LMMSE by ``(H^H H + N0 I)^-1 H^H y`` with
    ``linalg.inv`` and ``.mH`` and again with ``cholesky_solve`` (error covariance from
    ``cholesky_inverse``), per-stream post-equalisation SINR from the diagonal of the error
    covariance, QPSK detection by the signs of real and imaginary parts, and symbol errors."""
    batch, nt, nr = 6, 4, 4
    H = torch.from_numpy(_cnoise(5, batch, nr, nt))
    bits = torch.tensor(_bits(6, batch, nt, 2))
    x = torch.complex(1 - 2 * bits[..., 0].float(), 1 - 2 * bits[..., 1].float()) / math.sqrt(2)
    no = 0.1
    y = (H @ x.unsqueeze(-1)).squeeze(-1) + math.sqrt(no) * torch.from_numpy(_cnoise(7, batch, nr))
    x_zf = torch.linalg.solve(H, y)
    eye = torch.eye(nt, dtype=torch.complex64)
    gram = H.mH @ H
    w = torch.linalg.inv(gram + no * eye) @ H.mH
    x_mmse = (w @ y.unsqueeze(-1)).squeeze(-1)
    # the same LMMSE estimate through a Cholesky factor of the Hermitian regularised Gram matrix
    chol = torch.linalg.cholesky(gram + no * eye)
    x_chol = torch.cholesky_solve(H.mH @ y.unsqueeze(-1), chol).squeeze(-1)
    err_cov = no * torch.cholesky_inverse(chol)
    mse = err_cov.diagonal(dim1=-2, dim2=-1).real
    sinr_db = 10 * torch.log10(1 / mse - 1)
    zf_noise = no * torch.linalg.inv(gram).diagonal(dim1=-2, dim2=-1).real

    def detect(z):
        return torch.stack([(z.real < 0).long(), (z.imag < 0).long()], -1)

    errs_zf = (detect(x_zf) != bits).sum()
    errs_mmse = (detect(x_mmse) != bits).sum()
    cond = torch.linalg.cond(H)
    return {"x_zf": x_zf, "x_mmse": x_mmse, "x_chol": x_chol, "sinr_db": sinr_db, "zf_noise": zf_noise,
            "errs_zf": errs_zf, "errs_mmse": errs_mmse, "cond": cond,
            "residual": (H @ x_zf.unsqueeze(-1)).squeeze(-1) - y}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 FFTs of length 32: summation order differs
def comms_ofdm_cyclic_prefix_multipath_ls_estimation(torch):
    """OFDM: QPSK on 32 subcarriers with comb pilots, ``ifft(norm="ortho")``, a cyclic prefix
    glued on with ``cat``, a 3-tap multipath channel applied by a complex linear convolution
    (shifted sums), AWGN, prefix removal, ``fft``, least-squares estimates at the pilots
    linearly interpolated to all subcarriers, one-tap equalisation and the true frequency
    response from ``fft(h, n)``."""
    n_fft, cp, n_ofdm = 32, 8, 3
    pilot_idx = torch.arange(0, n_fft, 4)
    bits = torch.tensor(_bits(8, n_ofdm, n_fft, 2))
    qpsk = torch.complex(1 - 2 * bits[..., 0].float(), 1 - 2 * bits[..., 1].float()) / math.sqrt(2)
    X = qpsk.clone()
    X[:, pilot_idx] = 1 + 0j
    x = torch.fft.ifft(X, dim=-1, norm="ortho")
    x_cp = torch.cat([x[:, -cp:], x], dim=-1)
    tx = x_cp.reshape(-1)
    h = torch.tensor(np.array([0.8, 0.4 - 0.3j, 0.2j], dtype=np.complex64))
    rx = torch.zeros(tx.numel() + h.numel() - 1, dtype=torch.complex64)
    for tap in range(h.numel()):
        rx[tap : tap + tx.numel()] += h[tap] * tx
    rx = rx[: tx.numel()] + 0.05 * torch.from_numpy(_cnoise(9, tx.numel()))
    y = rx.view(n_ofdm, n_fft + cp)[:, cp:]
    Y = torch.fft.fft(y, dim=-1, norm="ortho")
    H_true = torch.fft.fft(h, n=n_fft)
    H_ls = Y[:, pilot_idx] / X[:, pilot_idx]
    # linear interpolation between pilots (wrapping the last pilot to the first)
    nxt = torch.roll(H_ls, -1, dims=-1)
    frac = (torch.arange(n_fft) % 4).float() / 4
    seg = torch.arange(n_fft) // 4
    H_hat = H_ls[:, seg] * (1 - frac) + nxt[:, seg] * frac
    X_hat = Y / H_hat
    data = torch.ones(n_fft, dtype=torch.bool)
    data[pilot_idx] = False
    bits_hat = torch.stack([(X_hat.real < 0), (X_hat.imag < 0)], -1).long()
    errors = (bits_hat[:, data] != bits[:, data]).sum()
    papr = (x.abs().square().amax(-1) / x.abs().square().mean(-1)).log10() * 10
    mse = (H_hat - H_true).abs().square().mean()
    return {"x_cp": x_cp, "Y": Y, "H_true": H_true, "H_ls": H_ls, "H_hat": H_hat,
            "X_hat": X_hat[:, data], "errors": errors, "papr_db": papr, "mse": mse,
            "shifted": torch.fft.fftshift(H_true.abs())}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # a few Adam steps through softmax/CE in float32
def comms_autoencoder_end_to_end_power_normalised(torch):
    """The O'Shea-Hoydis autoencoder: one-hot messages (M=16) through a dense encoder to n=7
    complex channel uses, average-power normalisation, an AWGN layer at a fixed Eb/N0 with
    fixed noise, a dense decoder and cross-entropy, trained for a few Adam steps; losses, block
    error rate and the learned constellation's energy."""
    nn = torch.nn
    M, n_ch, k = 16, 7, 4
    ebno_db = 7.0
    rate = k / n_ch
    sigma = math.sqrt(1 / (2 * rate * 10 ** (ebno_db / 10)))

    class Autoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(M, M), nn.ReLU(), nn.Linear(M, 2 * n_ch))
            self.decoder = nn.Sequential(nn.Linear(2 * n_ch, M), nn.ReLU(), nn.Linear(M, M))

        def encode(self, one_hot):
            x = self.encoder(one_hot)
            # average power constraint across the batch: E|x|^2 = 1 per channel use
            return x / x.pow(2).mean().mul(2).sqrt()

        def forward(self, one_hot, noise):
            x = self.encode(one_hot)
            return self.decoder(x + sigma * noise), x

    model = set_weights(torch, Autoencoder(), seed=10)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    msgs = torch.tensor(ints(11, M, 4, 32))
    noises = torch.tensor(arr(12, 4, 32, 2 * n_ch))
    losses = []
    for step in range(4):
        one_hot = nn.functional.one_hot(msgs[step], M).float()
        logits, _ = model(one_hot, noises[step])
        loss = nn.functional.cross_entropy(logits, msgs[step])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        eye = torch.eye(M)
        logits, x = model(eye, noises[0, :M])
        bler = (logits.argmax(-1) != torch.arange(M)).float().mean()
        const = torch.view_as_complex(x.view(M, n_ch, 2).contiguous())
    return {"losses": losses, "bler": bler, "const": const,
            "power": const.abs().square().mean(), "enc_w": model.encoder[2].weight}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # training through exact LLR targets in float32
def comms_neural_demapper_bce_vs_exact_llr(torch):
    """A learned 16-QAM demapper (MLP on real and imaginary parts plus the noise variance in
    dB) trained with ``BCEWithLogitsLoss`` on received samples, compared with the exact LLRs
    from ``logsumexp``; bitwise mutual information estimated before and after training."""
    nn = torch.nn
    k = 4
    points = _qam_constellation(torch, k)
    labels = _bit_labels(torch, k).float()
    bits = torch.tensor(_bits(13, 128, k))
    sym = bits @ (2 ** torch.arange(k - 1, -1, -1))
    no = 0.05
    y = points[sym] + math.sqrt(no) * torch.from_numpy(_cnoise(14, 128))
    feats = torch.stack([y.real, y.imag, torch.full_like(y.real, 10 * math.log10(no))], -1)
    net = set_weights(torch, nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, k)), 15)
    opt = torch.optim.Adam(net.parameters(), lr=2e-2)
    bce = nn.BCEWithLogitsLoss()
    target = bits.float()
    losses = []
    for _ in range(6):
        loss = bce(net(feats), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    d = -(y[:, None] - points).abs().square() / no  # [n, 16]
    lse1 = torch.logsumexp(d[:, None, :] + torch.log(labels.T)[None], -1)
    lse0 = torch.logsumexp(d[:, None, :] + torch.log(1 - labels.T)[None], -1)
    exact = lse1 - lse0
    with torch.no_grad():
        learned = net(feats)
    mi_exact = 1 - nn.functional.binary_cross_entropy_with_logits(exact, target) / math.log(2)
    mi_learned = 1 - bce(learned, target) / math.log(2)
    return {"losses": losses, "exact": exact[:8], "learned": learned[:8],
            "mi_exact": mi_exact, "mi_learned": mi_learned,
            "sign_agree": (exact.sign() == learned.sign()).float().mean()}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # gradients through complex abs/exp in float32
def comms_geometric_shaping_learned_constellation(torch):
    """Geometric constellation shaping: 8 points stored as a real ``[M, 2]`` parameter viewed as
    complex, normalised to unit energy, and trained with SGD to maximise the symbol-wise mutual
    information of an AWGN channel estimated from a softmax demapper over fixed noise samples;
    the complex gradient flows through ``view_as_complex``, ``abs`` and ``log_softmax``."""
    nn = torch.nn
    M = 8
    init = np.stack([np.cos(2 * np.pi * np.arange(M) / M), np.sin(2 * np.pi * np.arange(M) / M)], 1)
    init = init * (1 + 0.1 * arr(16, M, 1).astype(np.float64))
    pts = nn.Parameter(torch.tensor(init.astype(np.float32)))
    opt = torch.optim.SGD([pts], lr=0.2, momentum=0.5)
    no = 0.15
    noise = torch.from_numpy(_cnoise(17, 4, M, 6))
    history, grads = [], []
    for step in range(4):
        c = torch.view_as_complex(pts)
        c = c / c.abs().square().mean().sqrt()
        y = c[:, None] + math.sqrt(no) * noise[step]  # [M, 6]
        logits = -(y[..., None] - c).abs().square() / no  # [M, 6, M]
        logp = logits.log_softmax(-1)
        target = torch.arange(M)[:, None].expand(M, 6)
        ce = nn.functional.nll_loss(logp.reshape(-1, M), target.reshape(-1))
        mi = math.log2(M) - ce / math.log(2)
        opt.zero_grad()
        (-mi).backward()
        grads.append(pts.grad.clone())
        opt.step()
        history.append(mi.item())
    with torch.no_grad():
        c = torch.view_as_complex(pts)
        c = c / c.abs().square().mean().sqrt()
        dmin = (c[:, None] - c).abs().add(torch.eye(M) * 10).amin()
    return {"mi": history, "grads": grads, "points": pts, "dmin": dmin,
            "angles": c.angle().sort().values}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def comms_lms_and_rls_adaptive_equalizers(torch):
    """Adaptive linear equalisers in a sample-by-sample loop (float64, as textbook Haykin code):
    BPSK through an ISI channel, a tapped delay line shifted with ``torch.roll`` and a new sample
    written at the front, LMS ``w += mu * e * u`` and RLS with the inverse correlation matrix
    updated by ``P = (P - k u^T P) / lam``; learning curves and final taps."""
    n, taps, delay = 120, 5, 2
    rng = np.random.default_rng(18)
    s = torch.tensor(1.0 - 2.0 * rng.integers(0, 2, n), dtype=torch.float64)
    ch = torch.tensor([0.3, 1.0, 0.3], dtype=torch.float64)
    r = torch.nn.functional.conv1d(s.view(1, 1, -1), ch.flip(0).view(1, 1, -1), padding=2)
    r = r.view(-1)[:n] + 0.05 * torch.tensor(rng.standard_normal(n))
    mu, lam = 0.03, 0.99
    w_lms = torch.zeros(taps, dtype=torch.float64)
    w_rls = torch.zeros(taps, dtype=torch.float64)
    P = torch.eye(taps, dtype=torch.float64) * 100.0
    u = torch.zeros(taps, dtype=torch.float64)
    e_lms = torch.zeros(n, dtype=torch.float64)
    e_rls = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        u = torch.roll(u, 1)
        u[0] = r[i]
        d = s[i - delay] if i >= delay else torch.tensor(0.0, dtype=torch.float64)
        e = d - w_lms @ u
        w_lms += mu * e * u
        e_lms[i] = e
        pi = P @ u
        gain = pi / (lam + u @ pi)
        e2 = d - w_rls @ u
        w_rls = w_rls + gain * e2
        P = (P - torch.outer(gain, u @ P)) / lam
        e_rls[i] = e2
    decisions = torch.sign(torch.nn.functional.conv1d(r.view(1, 1, -1), w_rls.flip(0).view(1, 1, -1), padding=taps - 1).view(-1)[:n])  # fmt: skip
    errors = (decisions[60:] != s[60 - delay : n - delay]).sum()
    mse_db = 10 * torch.log10(e_lms.square().view(-1, 20).mean(-1))
    return {"w_lms": w_lms, "w_rls": w_rls, "P_trace": P.trace(), "mse_lms_db": mse_db,
            "mse_rls_db": 10 * torch.log10(e_rls.square().view(-1, 20).mean(-1)),
            "errors": errors, "r": r[:10]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 conv1d over 33 taps: summation order differs
def comms_rrc_pulse_shaping_matched_filter_conv1d(torch):
    """Root-raised-cosine pulse shaping and matched filtering: the RRC impulse response computed
    in closed form with ``torch.where`` for the special points, symbols upsampled by strided
    assignment into zeros, transmit and receive filtering with ``conv1d`` (I and Q as two
    channels, ``groups=2``), sampling at the peak of the overall response, and the ISI left."""
    F = torch.nn.functional
    sps, span, beta = 4, 8, 0.35
    t = (torch.arange(-span * sps // 2, span * sps // 2 + 1, dtype=torch.float64)) / sps
    pi = math.pi
    num = torch.sin(pi * t * (1 - beta)) + 4 * beta * t * torch.cos(pi * t * (1 + beta))
    den = pi * t * (1 - (4 * beta * t) ** 2)
    special = (4 * beta * t).abs().sub(1).abs() < 1e-8
    safe_den = torch.where((den.abs() < 1e-12), torch.ones_like(den), den)
    h = torch.where(t == 0, torch.full_like(t, 1 - beta + 4 * beta / pi), num / safe_den)
    val = beta / math.sqrt(2) * ((1 + 2 / pi) * math.sin(pi / (4 * beta))
                                 + (1 - 2 / pi) * math.cos(pi / (4 * beta)))  # fmt: skip
    h = torch.where(special, torch.full_like(t, val), h)
    h = (h / h.square().sum().sqrt()).float()
    n_sym = 24
    bits = torch.tensor(_bits(19, n_sym, 2))
    sym = torch.complex(1 - 2 * bits[:, 0].float(), 1 - 2 * bits[:, 1].float()) / math.sqrt(2)
    up = torch.zeros(2, n_sym * sps)
    up[0, ::sps] = sym.real
    up[1, ::sps] = sym.imag
    kernel = h.flip(0).view(1, 1, -1).repeat(2, 1, 1)
    tx = F.conv1d(up.unsqueeze(0), kernel, padding=h.numel() - 1, groups=2)
    rx = tx + 0.05 * torch.tensor(arr(20, *tx.shape))
    mf = F.conv1d(rx, kernel, padding=0, groups=2)  # matched filter (h is symmetric)
    g = torch.nn.functional.conv1d(h.view(1, 1, -1), h.flip(0).view(1, 1, -1), padding=h.numel() - 1).view(-1)  # fmt: skip
    peak = int(g.argmax())
    delay = peak - (h.numel() - 1)  # the valid matched filter already removed len(h)-1 samples
    samples = mf[0, :, delay::sps][:, :n_sym]
    z = torch.complex(samples[0], samples[1])
    isi = g[peak % sps :: sps]
    errors = ((z.real < 0).long() != bits[:, 0]).sum() + ((z.imag < 0).long() != bits[:, 1]).sum()
    return {"h": h, "g_peak": g.max(), "peak": peak, "isi": isi, "tx": tx[0, :, :16],
            "z": z, "errors": errors, "energy": h.square().sum()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 complex autocorrelation sums
def comms_schmidl_cox_cfo_estimation_and_correction(torch):
    """Carrier-frequency-offset synchronisation the Schmidl-Cox way: a preamble with two
    identical halves, the timing metric ``|P(d)|^2 / R(d)^2`` from a sliding complex
    autocorrelation (``unfold`` windows of ``conj`` products), the fractional CFO from
    ``angle`` of the correlation at the detected start, and de-rotation with ``exp(-1j * ...)``."""
    L = 16
    rng = np.random.default_rng(21)
    half = (rng.choice([-1.0, 1.0], L) + 1j * rng.choice([-1.0, 1.0], L)) / math.sqrt(2)
    pre = torch.tensor(np.concatenate([half, half]).astype(np.complex64))
    data = torch.from_numpy(_cnoise(22, 40))
    lead = torch.from_numpy(_cnoise(23, 12)) * 0.1
    tx = torch.cat([lead, pre, data])
    n = torch.arange(tx.numel(), dtype=torch.float32)
    eps = 0.12  # CFO: the phase advances 2*pi*eps per half-preamble of L samples
    rot = torch.exp(1j * (2 * math.pi * eps / L) * n)
    rx = tx * rot + 0.05 * torch.from_numpy(_cnoise(24, tx.numel()))
    prod = rx[:-L].conj() * rx[L:]  # r*(d+m) r(d+m+L)
    P = prod.unfold(0, L, 1).sum(-1)
    energy = rx[L:].abs().square().unfold(0, L, 1).sum(-1)
    metric = P.abs().square() / energy.square()
    d_hat = int(metric.argmax())
    eps_hat = P[d_hat].angle() / (2 * math.pi)
    corrected = rx * torch.exp(-1j * (2 * math.pi * eps_hat / L) * n)
    resid = (corrected[12 : 12 + 2 * L] - tx[12 : 12 + 2 * L]).abs().mean()
    return {"metric": metric[:20], "d_hat": d_hat, "eps_hat": eps_hat, "P_peak": P[d_hat],
            "corrected": corrected[12:20], "resid": resid}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def comms_ber_curves_bpsk_qpsk_vs_theory(torch):
    """Monte-Carlo BER of BPSK and Gray-coded QPSK over a grid of Eb/N0 values in one
    vectorised pass (float64 noise from NumPy broadcast against the SNR grid), error counts by
    comparison, and the closed-form ``Q(sqrt(2 Eb/N0)) = erfc(sqrt(Eb/N0)) / 2``; plus a
    per-SNR report string as simulation scripts print it."""
    ebno_db = torch.arange(0.0, 9.0, 2.0, dtype=torch.float64)
    ebno = 10 ** (ebno_db / 10)
    n = 400
    bits = torch.tensor(_bits(25, n))
    s = 1.0 - 2.0 * bits.double()
    noise = torch.tensor(np.random.default_rng(26).standard_normal((n,)))
    sigma = torch.sqrt(1 / (2 * ebno))
    y = s + sigma[:, None] * noise
    err_bpsk = ((y < 0).long() != bits).sum(-1)
    qb = torch.tensor(_bits(27, n // 2, 2))
    q = torch.complex(1 - 2.0 * qb[:, 0].double(), 1 - 2.0 * qb[:, 1].double()) / math.sqrt(2)
    cn = torch.tensor(np.random.default_rng(28).standard_normal((n // 2, 2)))
    sigma_q = torch.sqrt(1 / (2 * 2 * ebno))  # Es = 1 = 2 Eb: per-dimension noise
    yq = q + sigma_q[:, None] * torch.complex(cn[:, 0], cn[:, 1])
    err_qpsk = ((yq.real < 0).long() != qb[:, 0]).sum(-1) + ((yq.imag < 0).long() != qb[:, 1]).sum(-1)  # fmt: skip
    theory = 0.5 * torch.special.erfc(torch.sqrt(ebno))
    lines = [f"Eb/N0={e:4.1f} dB  BER={b / n:.4f}  theory={t:.4e}"
             for e, b, t in zip(ebno_db.tolist(), err_bpsk.tolist(), theory.tolist())]  # fmt: skip
    ser_qpsk_theory = 2 * theory - theory.square()
    return {"err_bpsk": err_bpsk, "err_qpsk": err_qpsk, "theory": theory,
            "ser_qpsk_theory": ser_qpsk_theory, "report": "\n".join(lines),
            "ber_db": 10 * torch.log10(err_bpsk.double().clamp(min=1) / n)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # complex Cholesky/SVD/logdet in float32
def comms_mimo_capacity_svd_waterfilling_kronecker(torch):
    """Ergodic-capacity style evaluation of correlated MIMO channels: exponential correlation
    matrices ``rho^|i-j|`` with a complex phase, their Cholesky factors colouring i.i.d. Rayleigh
    draws (Kronecker model ``R_r^1/2 H_w R_t^1/2``), equal-power capacity
    ``log2 det(I + snr/Nt H H^H)`` with ``logdet`` of a Hermitian matrix, SVD precoding with
    water-filling power allocation (sorted gains, ``cumsum``, the water level per active
    stream count) and the capacity it reaches; ``eigvalsh`` of ``H H^H`` as a check."""
    batch, n = 5, 4
    snr = 10.0
    idx = torch.arange(n)
    dist = (idx[:, None] - idx[None, :]).float()
    phase = torch.polar(torch.ones(n, n), 0.3 * dist)
    R_t = (0.7 ** dist.abs()) * phase
    R_r = (0.4 ** dist.abs()) * phase
    L_t = torch.linalg.cholesky(R_t)
    L_r = torch.linalg.cholesky(R_r)
    Hw = torch.from_numpy(_cnoise(30, batch, n, n))
    H = L_r @ Hw @ L_t.mH
    eye = torch.eye(n, dtype=torch.complex64)
    gram = H @ H.mH
    c_equal = torch.linalg.slogdet(eye + snr / n * gram).logabsdet / math.log(2)
    c_logdet = torch.logdet(eye + snr / n * gram).real / math.log(2)
    U, S, Vh = torch.linalg.svd(H)
    gains = (S**2).sort(dim=-1, descending=True).values
    inv_g = 1 / (snr * gains)  # noise-to-gain levels
    k = torch.arange(1, n + 1, dtype=torch.float32)
    mu = (1 + inv_g.cumsum(-1)) / k  # water level if the first k streams are active
    active = mu > inv_g
    k_star = active.long().cumprod(-1).sum(-1)  # largest prefix that stays active
    level = mu.gather(-1, (k_star - 1)[:, None])
    powers = (level - inv_g).clamp(min=0)
    c_wf = torch.log2(1 + snr * gains * powers).sum(-1)
    x = torch.from_numpy(_cnoise(31, batch, n))
    precoded = (Vh.mH @ (powers.sqrt().to(torch.complex64) * x)[..., None]).squeeze(-1)
    y = (U.mH @ H @ precoded[..., None]).squeeze(-1)
    eig = torch.linalg.eigvalsh(gram)
    return {"L_t": L_t, "c_equal": c_equal, "c_logdet": c_logdet, "S": S, "powers": powers,
            "k_star": k_star, "c_wf": c_wf, "diag_gain": (y / x).abs(), "eig": eig,
            "total_power": powers.sum(-1)}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def comms_convolutional_code_viterbi_soft_decoding(torch):
    """The rate-1/2 (7, 5) convolutional code: encoding of a terminated bit stream with
    ``conv1d`` on the generator taps and ``% 2``, BPSK over AWGN with fixed noise, and soft
    Viterbi decoding as in textbook code: branch metrics for every state transition from a
    precomputed trellis, add-compare-select with ``min`` over the two predecessors per step,
    survivor indices stored in a preallocated tensor and a traceback loop with ``gather``."""
    F = torch.nn.functional
    K, n_info = 3, 20
    info = torch.tensor(_bits(32, n_info))
    u = torch.cat([info, torch.zeros(K - 1, dtype=torch.long)])  # zero tail terminates
    g = torch.tensor([[1, 1, 1], [1, 0, 1]], dtype=torch.float32)  # octal 7 and 5
    coded = F.conv1d(F.pad(u.float().view(1, 1, -1), (K - 1, 0)), g.flip(-1).view(2, 1, K))
    coded = coded.view(2, -1).long() % 2  # [2, T]
    T = u.numel()
    tx = 1.0 - 2.0 * coded.float()
    rx = tx + 0.8 * torch.tensor(arr(33, 2, T))
    n_states = 2 ** (K - 1)
    states = torch.arange(n_states)
    # next state and outputs for (state, input); state = the last two inputs, newest first
    nxt = torch.stack([(states >> 1) | (b << (K - 2)) for b in (0, 1)], 1)
    taps = torch.stack([torch.full((n_states,), b) for b in (0, 1)], 1)[..., None]
    reg = torch.cat([taps, ((states[:, None, None] >> torch.tensor([1, 0])) & 1).expand(-1, 2, -1)], -1)  # fmt: skip
    out = (reg.float() @ g.T).long() % 2  # [state, input, 2]
    expected = 1.0 - 2.0 * out.float()
    INF = 1e9
    metric = torch.full((n_states,), INF)
    metric[0] = 0.0
    survivors = torch.zeros(T, n_states, dtype=torch.long)
    survivor_bits = torch.zeros(T, n_states, dtype=torch.long)
    # the two predecessors of each state and the input bit that leads into it
    pred = torch.stack([(states & 1) << 1, ((states & 1) << 1) | 1], 1)
    in_bit = (states >> 1)[:, None].expand(-1, 2)
    for t in range(T):
        bm = (rx[:, t] - expected).square().sum(-1)  # [state, input]
        cand = metric[pred] + bm[pred, in_bit]  # [next state, 2]
        metric, choice = cand.min(dim=-1)
        survivors[t] = pred.gather(1, choice[:, None]).squeeze(1)
        survivor_bits[t] = in_bit[:, 0]
    state = torch.tensor([0])
    decoded = torch.zeros(T, dtype=torch.long)
    for t in reversed(range(T)):
        decoded[t] = survivor_bits[t].gather(0, state)[0]
        state = survivors[t].gather(0, state)
    hard = (rx < 0).long()
    return {"coded": coded, "decoded": decoded[:n_info], "errors": (decoded[:n_info] != info).sum(),
            "raw_errors": (hard != coded).sum(), "final_metric": metric,
            "nxt": nxt, "out": out}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # Adam on complex parameters through complex solves, float32
def comms_learned_complex_precoder_mmse_receiver(torch):
    """A linear precoder learned with a complex ``nn.Parameter``: downlink symbols precoded by
    ``W``, scaled to a total power budget with the Frobenius norm, sent through fixed complex
    channels, equalised by an LMMSE receiver written with ``linalg.solve`` on
    ``H_eff^H H_eff + N0 I``, and the MSE to the sent symbols minimised with Adam (complex
    gradients, Wirtinger convention); the sum rate from the post-equaliser SINRs per step."""
    nn = torch.nn
    batch, n = 3, 3
    no = 0.3
    H = torch.from_numpy(_cnoise(34, batch, n, n))
    x = torch.from_numpy(_cnoise(35, batch, n, 8))
    noise = torch.from_numpy(_cnoise(36, batch, n, 8))
    w0 = (np.eye(n) + 0.1 * (arr(37, n, n) + 1j * arr(38, n, n))).astype(np.complex64)
    W = nn.Parameter(torch.tensor(w0))
    opt = torch.optim.Adam([W], lr=0.05)
    eye = torch.eye(n, dtype=torch.complex64)
    losses, rates = [], []
    for _ in range(5):
        Wn = W * math.sqrt(n) / torch.linalg.matrix_norm(W)
        He = H @ Wn
        y = He @ x + math.sqrt(no) * noise
        A = He.mH @ He + no * eye
        x_hat = torch.linalg.solve(A, He.mH @ y)
        loss = (x_hat - x).abs().square().mean()
        mse = no * torch.linalg.inv(A).diagonal(dim1=-2, dim2=-1).real
        rate = torch.log2(1 / mse).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        rates.append(rate.item())
    return {"losses": losses, "rates": rates, "W": W, "grad": W.grad,
            "norm": torch.linalg.matrix_norm(W)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # complex conv1d + Adam in float32: summation order differs
def comms_complex_cnn_equalizer_trained_on_pilots(torch):
    """A complex-valued FIR equaliser learned as a ``Conv1d`` with a complex weight (PyTorch
    convolves complex tensors directly), trained with Adam on a known pilot sequence sent over a
    complex ISI channel plus a mild cubic power-amplifier nonlinearity; MSE over steps, the
    learned taps, the equalised constellation's EVM and the detected pilots."""
    nn = torch.nn
    n, taps = 64, 7
    bits = torch.tensor(_bits(40, n, 2))
    s = torch.complex(1 - 2 * bits[:, 0].float(), 1 - 2 * bits[:, 1].float()) / math.sqrt(2)
    pa = s - 0.05 * s * s.abs().square()  # AM/AM compression
    h = torch.tensor(np.array([[[0.2 + 0.1j, 1.0, -0.3 + 0.2j]]], dtype=np.complex64))
    r = nn.functional.conv1d(pa.view(1, 1, -1), h, padding=1)
    r = r + 0.03 * torch.from_numpy(_cnoise(41, 1, 1, n))
    eq = nn.Conv1d(1, 1, taps, padding=taps // 2, bias=False, dtype=torch.complex64)
    w0 = np.zeros((1, 1, taps), dtype=np.complex64)
    w0[0, 0, taps // 2] = 1.0
    with torch.no_grad():
        eq.weight.copy_(torch.tensor(w0))
    opt = torch.optim.Adam(eq.parameters(), lr=0.03)
    losses = []
    for _ in range(6):
        out = eq(r).view(-1)
        loss = (out - s).abs().square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        z = eq(r).view(-1)
    evm_db = 10 * torch.log10((z - s).abs().square().mean() / s.abs().square().mean())
    det = torch.stack([(z.real < 0).long(), (z.imag < 0).long()], -1)
    return {"losses": losses, "taps": eq.weight, "grad": eq.weight.grad, "z": z[:10],
            "evm_db": evm_db, "errors": (det != bits).sum(), "dtype": str(z.dtype)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 FFT periodograms averaged
def comms_spectrum_sensing_welch_psd_and_stft(torch):
    """Spectrum sensing: a Welch power-spectral-density estimate written by hand (``unfold``
    into overlapping segments, a Hann window from ``torch.hann_window``, ``rfft`` and the
    window-power normalisation), the same spectrum from ``torch.stft`` with
    ``return_complex=True``, an energy detector per band against a noise-only calibration,
    and the occupied bands found by thresholding in dB."""
    fs, n, nper = 1000.0, 512, 64
    t = torch.arange(n, dtype=torch.float32) / fs
    sig = torch.cos(2 * math.pi * 125.0 * t) + 0.5 * torch.cos(2 * math.pi * 312.5 * t + 0.3)
    noise = torch.tensor(arr(42, n)) * 0.3
    x = sig + noise
    win = torch.hann_window(nper)
    seg = x.unfold(0, nper, nper // 2)  # [n_seg, nper]
    seg = seg - seg.mean(-1, keepdim=True)
    X = torch.fft.rfft(seg * win, dim=-1)
    scale = 1.0 / (fs * win.square().sum())
    psd = X.abs().square().mean(0) * scale
    psd[1:-1] *= 2  # one-sided
    freqs = torch.fft.rfftfreq(nper, d=1 / fs)
    spec = torch.stft(x, n_fft=nper, hop_length=nper // 2, window=win, center=False,
                      return_complex=True)  # fmt: skip
    stft_power = spec.abs().square().mean(-1)
    bands = psd[1:].view(8, 4).sum(-1)
    noise_psd = torch.fft.rfft(noise.unfold(0, nper, nper // 2) * win, dim=-1).abs().square()
    noise_bands = (noise_psd.mean(0) * scale)[1:].view(8, 4).sum(-1) * 2
    ratio_db = 10 * torch.log10(bands / noise_bands)
    occupied = (ratio_db > 6).nonzero().flatten()
    peak_hz = freqs[psd.argmax()]
    return {"psd_db": 10 * torch.log10(psd), "freqs": freqs, "stft_power": stft_power,
            "spec_shape": list(spec.shape), "ratio_db": ratio_db, "occupied": occupied,
            "peak_hz": peak_hz, "total_power": psd.sum() * (fs / nper)}  # fmt: skip


@program(rtol=1e-5, atol=1e-5)
def comms_ldpc_min_sum_belief_propagation(torch):
    """Belief-propagation decoding of a small LDPC-style code (the (7, 4) Hamming parity-check
    matrix) with the normalised min-sum rule written on an edge list, as vectorised decoders in
    the Sionna/AFF3CT style do: variable-to-check messages by ``index_add_`` totals minus the
    edge's own message, check-to-variable magnitudes from the two smallest per check (``sort``
    and ``scatter_reduce`` with ``amin``), signs from a parity of negative counts, early
    stopping on a zero syndrome, for a batch of noisy codewords."""
    Hm = torch.tensor([[1, 1, 0, 1, 1, 0, 0], [1, 0, 1, 1, 0, 1, 0], [0, 1, 1, 1, 0, 0, 1]])
    chk, var = Hm.nonzero(as_tuple=True)
    n_chk, n_var = Hm.shape
    G = torch.tensor([[1, 0, 0, 0, 1, 1, 0], [0, 1, 0, 0, 1, 0, 1], [0, 0, 1, 0, 0, 1, 1],
                      [0, 0, 0, 1, 1, 1, 1]])  # fmt: skip
    msgs = torch.tensor(_bits(43, 8, 4))
    cw = (msgs @ G) % 2
    batch = cw.shape[0]
    no = 1.2
    y = (1 - 2 * cw.float()) + math.sqrt(no) * torch.tensor(arr(44, batch, n_var))
    llr_ch = 2 * y / no
    c2v = torch.zeros(batch, chk.numel())
    alpha = 0.8
    iters_used = []
    history = []
    for _ in range(5):
        total = llr_ch.clone().index_add_(1, var, c2v)
        v2c = total[:, var] - c2v
        mag = v2c.abs()
        neg = (v2c < 0).long()
        neg_count = torch.zeros(batch, n_chk, dtype=torch.long).index_add_(1, chk, neg)
        sign = 1 - 2 * ((neg_count[:, chk] - neg) % 2)
        min1 = torch.full((batch, n_chk), float("inf")).scatter_reduce(1, chk.expand(batch, -1), mag, "amin")  # fmt: skip
        is_min = mag == min1[:, chk]
        mag_wo = mag.masked_fill(is_min, float("inf"))
        min2 = torch.full((batch, n_chk), float("inf")).scatter_reduce(1, chk.expand(batch, -1), mag_wo, "amin")  # fmt: skip
        other_min = torch.where(is_min, min2[:, chk], min1[:, chk])
        c2v = alpha * sign.float() * other_min
        post = llr_ch.clone().index_add_(1, var, c2v)
        hard = (post < 0).long()
        syndrome = (hard @ Hm.T) % 2
        history.append(post.abs().mean().item())
        iters_used.append(int((syndrome.sum(-1) != 0).sum()))
        if not syndrome.any():
            break
    return {"post": post, "hard": hard, "errors": (hard != cw).sum(-1),
            "raw_errors": ((y < 0).long() != cw).sum(-1), "syndrome": syndrome,
            "history": history, "unsatisfied": iters_used, "cw": cw}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # complex eigh/pinv of a float32 covariance
def comms_music_and_esprit_direction_of_arrival(torch):
    """Direction-of-arrival estimation with a uniform linear array: steering vectors
    ``exp(1j*pi*m*sin(theta))``, two sources with fixed complex amplitudes plus noise, the sample
    covariance ``X X^H / N``, its ``eigh`` split into signal and noise subspaces, the MUSIC
    pseudo-spectrum ``1 / ||E_n^H a(theta)||^2`` on a grid and its two peaks, and ESPRIT's
    rotational invariance solved with ``linalg.pinv`` and ``linalg.eigvals``."""
    m_ant, n_snap = 8, 40
    doas = torch.tensor([-20.0, 25.0]) * math.pi / 180
    m = torch.arange(m_ant, dtype=torch.float32)
    A = torch.exp(1j * math.pi * m[:, None] * torch.sin(doas)[None, :])  # [M, K]
    S = torch.from_numpy(_cnoise(45, 2, n_snap))
    X = A @ S + 0.3 * torch.from_numpy(_cnoise(46, m_ant, n_snap))
    R = X @ X.mH / n_snap
    evals, evecs = torch.linalg.eigh(R)
    En = evecs[:, : m_ant - 2]  # noise subspace: the smallest eigenvalues
    Es = evecs[:, m_ant - 2 :]
    grid = torch.linspace(-60, 60, 121) * math.pi / 180
    a_grid = torch.exp(1j * math.pi * m[:, None] * torch.sin(grid)[None, :])
    proj = (En.mH @ a_grid).abs().square().sum(0)
    spectrum_db = -10 * torch.log10(proj / proj.max())
    is_peak = (spectrum_db[1:-1] > spectrum_db[:-2]) & (spectrum_db[1:-1] > spectrum_db[2:])
    peak_idx = is_peak.nonzero().flatten() + 1
    top = spectrum_db[peak_idx].topk(2).indices
    music_deg = (grid[peak_idx[top]] * 180 / math.pi).sort().values
    phi = torch.linalg.pinv(Es[:-1]) @ Es[1:]
    z = torch.linalg.eigvals(phi)
    esprit_deg = (torch.asin(z.angle() / math.pi) * 180 / math.pi).sort().values
    return {"evals": evals, "spectrum_db": spectrum_db, "music_deg": music_deg,
            "esprit_deg": esprit_deg, "proj_min": proj.min(), "R_trace": R.diagonal().sum()}  # fmt: skip
