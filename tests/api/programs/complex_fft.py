"""Complex numbers and FFTs as programs use them: rotary position embeddings written the LLaMA way
(``polar``, ``view_as_complex``, a complex product, ``view_as_real``), a Fourier-neural-operator
layer with complex weights trained by SGD, every ``torch.fft`` transform with its gradient, and
complex arithmetic, reductions, promotion and printing."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


@program(rtol=1e-4, atol=1e-5)
def rotary_embeddings_llama_style(torch):
    batch, seq, heads, dim = 2, 5, 2, 8
    freqs = 1.0 / (10000.0 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(seq).float()
    angles = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)  # complex64
    xq = torch.tensor(arr(1, batch, seq, heads, dim), requires_grad=True)
    xk = torch.tensor(arr(2, batch, seq, heads, dim), requires_grad=True)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis.view(1, seq, 1, dim // 2)
    xq_out = torch.view_as_real(xq_ * fc).flatten(3)
    xk_out = torch.view_as_real(xk_ * fc).flatten(3)
    scores = torch.einsum("bshd,bthd->bhst", xq_out, xk_out) / dim**0.5
    loss = scores.softmax(-1).pow(2).sum()
    loss.backward()
    return {"freqs_cis": freqs_cis, "freqs_dtype": freqs_cis.dtype == torch.complex64, "xq_out": xq_out,
            "scores": scores, "loss": loss, "xq_grad": xq.grad, "xk_grad": xk.grad}  # fmt: skip


@program(rtol=2e-4, atol=2e-5)
def fourier_neural_operator_layer_trains_with_complex_weights(torch):
    nn = torch.nn
    modes, width = 3, 4

    class SpectralConv1d(nn.Module):
        def __init__(self):
            super().__init__()
            scale = 1 / (width * width)
            w = (arr(3, width, width, modes) + 1j * arr(4, width, width, modes)) * scale
            self.weights = nn.Parameter(torch.tensor(w.astype(np.complex64)))

        def forward(self, x):
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(x.shape[0], width, x.size(-1) // 2 + 1, dtype=torch.cfloat)
            out_ft[:, :, :modes] = torch.einsum("bix,iox->box", x_ft[:, :, :modes], self.weights)
            return torch.fft.irfft(out_ft, n=x.size(-1))

    layer = SpectralConv1d()
    lift = nn.Linear(1, width)
    with torch.no_grad():
        lift.weight.copy_(torch.tensor(arr(5, width, 1)))
        lift.bias.copy_(torch.tensor(arr(6, width)))
    x = torch.tensor(arr(7, 3, 16, 1))
    target = torch.tensor(arr(8, 3, width, 16))
    opt = torch.optim.SGD([*layer.parameters(), *lift.parameters()], lr=0.05, momentum=0.9)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        h = lift(x).permute(0, 2, 1)
        loss = ((torch.nn.functional.gelu(layer(h)) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": layer.weights, "weights_grad": layer.weights.grad,
            "lift_grad": lift.weight.grad, "weights_dtype": layer.weights.dtype == torch.cfloat}  # fmt: skip


@program(rtol=1e-4, atol=1e-4)
def every_fft_transform_with_gradients(torch):
    x = torch.tensor(arr(9, 4, 6), requires_grad=True)
    z = torch.tensor((arr(10, 4, 5) + 1j * arr(11, 4, 5)).astype(np.complex64), requires_grad=True)
    out = {
        "fft": torch.fft.fft(x), "fft_n_dim0": torch.fft.fft(x, n=7, dim=0),
        "ifft_ortho": torch.fft.ifft(z, norm="ortho"), "fft2": torch.fft.fft2(z),
        "ifft2_s": torch.fft.ifft2(x, s=(3, 8)), "fftn": torch.fft.fftn(z, norm="forward"),
        "ifftn": torch.fft.ifftn(x, dim=(0,)), "rfft": torch.fft.rfft(x),
        "rfft_n": torch.fft.rfft(x, n=9, norm="ortho"), "rfft2": torch.fft.rfft2(x),
        "rfftn_s": torch.fft.rfftn(x, s=(5, 4)),
        "irfft": torch.fft.irfft(z), "irfft_n_odd": torch.fft.irfft(z, n=7, norm="forward"),
        "irfft2": torch.fft.irfft2(z), "irfftn_s": torch.fft.irfftn(z, s=(3, 6), norm="ortho"),
        "hfft": torch.fft.hfft(z), "ihfft": torch.fft.ihfft(x),
    }  # fmt: skip
    total = sum((v.abs() ** 2).sum() if v.is_complex() else (v * v).sum() for v in out.values())
    total = total + sum(v.real.sum() + 0.5 * v.imag.sum() for v in out.values() if v.is_complex())
    total.backward()
    helpers = {"fftfreq": torch.fft.fftfreq(7, d=0.5), "rfftfreq": torch.fft.rfftfreq(8),
               "fftshift": torch.fft.fftshift(x.detach()),
               "ifftshift_dim": torch.fft.ifftshift(x.detach(), dim=1),
               "roundtrip": torch.fft.irfft(torch.fft.rfft(x.detach()), n=6)}  # fmt: skip
    return {**out, **helpers, "x_grad": x.grad, "z_grad": z.grad,
            "dtypes": [_dtype_name(torch, v) for v in out.values()]}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def complex_arithmetic_reductions_and_promotion(torch):
    a = torch.tensor([1 + 2j, 3 - 1j, -0.5 + 0.25j])
    b = torch.tensor((arr(12, 3) + 1j * arr(13, 3)).astype(np.complex128))
    w = torch.tensor(arr(14, 3), requires_grad=True)
    m = torch.tensor((arr(15, 3, 3) + 1j * arr(16, 3, 3)).astype(np.complex64), requires_grad=True)
    v = torch.complex(w, w * 2)
    y = m @ v
    loss = (y.abs() ** 2).sum() + y.angle().sum() + (m.exp() * m.conj()).real.sum()
    loss = loss + (m.sqrt() * 0.1).imag.sum() + (y / (1 + 1j)).sgn().real.sum()
    loss.backward()
    out = {
        "sum": a * 2 + 1, "mul_j": a * 1j, "div": a / (2 - 1j), "rdiv": 1 / a, "pow": a**2,
        "promote64": a + b, "promote_float64": a + torch.ones(3, dtype=torch.float64),
        "abs": a.abs(), "angle": a.angle(), "real": a.real, "imag": a.imag, "conj": a.conj(),
        "exp": a.exp(), "log": a.log(), "sqrt": b.sqrt(), "sum_all": a.sum(), "mean": b.mean(),
        "prod": a.prod(), "matmul": m.detach() @ a, "isreal": torch.isreal(a),
        "eq": a == a.conj(), "cat": torch.cat([a, a.conj()]), "where": torch.where(a.real > 0, a, 0),
    }  # fmt: skip
    dtypes = {k: _dtype_name(torch, t) for k, t in out.items()}
    return {**out, "dtypes": dtypes, "loss": loss, "w_grad": w.grad, "m_grad": m.grad,
            "item": a[0].item().imag, "repr": repr(a), "repr64": repr(b[:2]),
            "is_complex": [a.is_complex(), w.is_complex()], "view_as_real": torch.view_as_real(a),
            "cfloat_zeros": torch.zeros(2, dtype=torch.cfloat)}  # fmt: skip


def _dtype_name(torch, t):
    names = {torch.complex64: "complex64", torch.complex128: "complex128",
             torch.float32: "float32", torch.float64: "float64", torch.bool: "bool"}  # fmt: skip
    return names[t.dtype]


@program(rtol=2e-4, atol=2e-5)
def complex_parameters_with_adaptive_optimizers(torch):
    results = {}
    for name in ("Adam", "AdamW", "RMSprop", "Adagrad", "NAdam"):
        w = torch.nn.Parameter(
            torch.tensor((arr(17, 3, 4) + 1j * arr(18, 3, 4)).astype(np.complex64))
        )
        x = torch.tensor((arr(19, 5, 3) + 1j * arr(20, 5, 3)).astype(np.complex64))
        target = torch.tensor(arr(21, 5, 4))
        opt = getattr(torch.optim, name)([w], lr=0.05)
        for _ in range(3):
            opt.zero_grad()
            loss = ((x @ w).abs() - target).pow(2).mean()
            loss.backward()
            opt.step()
        results[name] = {"w": w, "loss": loss}
    return results


@program(rtol=2e-4, atol=2e-5)
def spectrogram_loss_and_istft_round_trip(torch):
    x = torch.tensor(arr(22, 2, 160), requires_grad=True)
    window = torch.hann_window(64)
    spec = torch.stft(x, 64, hop_length=16, window=window, return_complex=True)
    mel = torch.tensor(np.abs(arr(23, 12, 33)))
    log_mel = (mel @ spec.abs().pow(2) + 1e-6).log()
    target = torch.tensor(arr(24, 2, 12, spec.shape[-1]))
    loss = (log_mel - target).pow(2).mean()
    back = torch.istft(spec, 64, hop_length=16, window=window, length=160)
    loss = loss + (back - x.detach() * 0.5).pow(2).mean()
    loss.backward()
    z = torch.tensor((arr(25, 50) + 1j * arr(26, 50)).astype(np.complex64))
    two_sided = torch.stft(z, 16, hop_length=4, window=torch.hamming_window(16),
                           return_complex=True)  # fmt: skip
    plain = x.detach()[0].stft(32, hop_length=8, win_length=24, window=torch.blackman_window(24),
                               center=False, normalized=True, return_complex=True)  # fmt: skip
    windows = {"hann_sym": torch.hann_window(7, periodic=False),
               "hamming": torch.hamming_window(8, True, 0.5, 0.5),
               "blackman": torch.blackman_window(9), "bartlett": torch.bartlett_window(6),
               "bartlett_sym": torch.bartlett_window(5, periodic=False),
               "kaiser": torch.kaiser_window(10, True, 8.0), "one": torch.hann_window(1),
               "hann64": torch.hann_window(4, dtype=torch.float64)}  # fmt: skip
    return {"spec": spec, "loss": loss, "x_grad": x.grad, "back": back,
            "two_sided": two_sided, "two_sided_back": torch.istft(two_sided, 16, hop_length=4,
                window=torch.hamming_window(16), onesided=False, return_complex=True),
            "plain": plain, "windows": windows}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def eigendecomposition_and_complex_linear_algebra(torch):
    a = torch.tensor(arr(27, 2, 4, 4).astype(np.float64), requires_grad=True)
    w, v = torch.linalg.eig(a)
    # a loss that does not depend on the eigenvectors' phases (PyTorch checks that it does not)
    loss = (w.abs() ** 2).sum() + w.real.sum() + (v.abs() ** 4).sum()
    z = torch.tensor((arr(28, 3, 3) + 1j * arr(29, 3, 3)).astype(np.complex128), requires_grad=True)
    rhs = torch.tensor((arr(30, 3, 2) + 1j * arr(31, 3, 2)).astype(np.complex128))
    loss = loss + torch.linalg.det(z).abs() + torch.linalg.inv(z).real.sum()
    loss = loss + torch.linalg.solve(z, rhs).abs().pow(2).sum() + torch.linalg.eigvals(z).imag.sum()
    loss.backward()
    spectrum = torch.linalg.eigvals(a.detach()[0])
    return {"loss": loss, "a_grad": a.grad, "z_grad": z.grad,
            "spectral_radius": spectrum.abs().max(),
            "sorted_real_parts": spectrum.real.sort().values}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def second_derivatives_through_ffts_and_complex_ops(torch):
    x = torch.tensor(arr(32, 6).astype(np.float64), requires_grad=True)
    y = (torch.fft.rfft(x * x).abs() ** 2).sum() + (torch.fft.fft(x) * (1 + 2j)).real.pow(3).sum()
    y = y + torch.fft.irfft(torch.fft.fft(x).conj() * torch.fft.fft(x.flip(0)), n=7).pow(2).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (h,) = torch.autograd.grad((g * torch.linspace(0.5, 2.0, 6, dtype=torch.float64)).sum(), x)
    return {"y": y, "grad": g, "hvp": h}


@program(rtol=1e-6, atol=1e-8)
def decompositions_of_complex_matrices_with_gradients(torch):
    m = torch.tensor((arr(33, 3, 3) + 1j * arr(34, 3, 3)).astype(np.complex128))
    hermitian = (m @ m.mH + 3 * torch.eye(3, dtype=torch.complex128)).requires_grad_()
    tall = torch.tensor(
        (arr(35, 4, 3) + 1j * arr(36, 4, 3)).astype(np.complex128), requires_grad=True
    )
    weights = torch.tensor(np.arange(9.0).reshape(3, 3) + 1j)
    chol = torch.linalg.cholesky(hermitian)
    w, v = torch.linalg.eigh(hermitian)
    q, r = torch.linalg.qr(tall)
    u, s, vh = torch.linalg.svd(tall, full_matrices=False)
    # losses that do not depend on the eigen/singular vectors' phases
    loss = (chol * weights).real.sum() + torch.linalg.cholesky(hermitian, upper=True).imag.sum()
    loss = (
        loss + (w**2).sum() + (v.abs() ** 4).sum() + (q.abs() ** 3).sum() + (r * weights).real.sum()
    )
    loss = loss + (s**2).sum() + (u.abs() ** 3).sum() + (vh.mH @ vh).real.pow(2).sum()
    loss.backward()
    return {"loss": loss, "eigenvalues": w, "singular_values": s, "r_diag_abs": r.diagonal().abs(),
            "hermitian_grad": hermitian.grad, "tall_grad": tall.grad,
            "adjoint": m.adjoint(), "mH": m.mH}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def complex_least_squares_pseudo_inverse_and_log_determinants(torch):
    a = torch.tensor((arr(37, 4, 3) + 1j * arr(38, 4, 3)).astype(np.complex128), requires_grad=True)
    b = torch.tensor((arr(39, 4, 2) + 1j * arr(40, 4, 2)).astype(np.complex128))
    z = torch.tensor(
        (arr(41, 2, 3, 3) + 1j * arr(42, 2, 3, 3)).astype(np.complex128), requires_grad=True
    )
    sol = torch.linalg.lstsq(a, b, driver="gelsd")
    sign, logabs = torch.linalg.slogdet(z)
    loss = torch.linalg.pinv(a).abs().sum() + sol.solution.abs().pow(2).sum()
    loss = loss + (sign * (1 + 2j)).real.sum() + 3 * logabs.sum() + sign.angle().sum()
    lu, piv = torch.linalg.lu_factor(z)
    rhs = torch.tensor((arr(43, 2, 3, 2) + 1j * arr(44, 2, 3, 2)).astype(np.complex128))
    x = torch.linalg.lu_solve(lu, piv, rhs)
    xa = torch.linalg.lu_solve(lu, piv, rhs, adjoint=True)
    loss = loss + x.abs().sum() + xa.real.sum() + torch.linalg.solve_triangular(
        z.triu(), rhs, upper=True).imag.sum()  # fmt: skip
    norms = [torch.linalg.matrix_norm(z, o) for o in ("fro", "nuc", 2, -2, 1, float("inf"))]
    loss = loss + sum(n.sum() for n in norms) + torch.linalg.cond(z).sum()
    expm = torch.linalg.matrix_exp(z * 1.5)
    loss = loss + expm.abs().sum()
    loss.backward()
    return {"loss": loss, "solution": sol.solution, "residuals": sol.residuals, "rank": sol.rank,
            "singular_values": sol.singular_values, "sign": sign, "logabsdet": logabs,
            "a_grad": a.grad, "z_grad": z.grad, "matrix_rank": torch.linalg.matrix_rank(a.detach()),
            "logabs_is_real": logabs.dtype == torch.float64, "lu": lu, "pivots": piv,
            "lu_solution": x, "lu_adjoint_solution": xa, "norms": norms,
            "cond_fro": torch.linalg.cond(z.detach(), "fro"), "matrix_exp": expm}  # fmt: skip
