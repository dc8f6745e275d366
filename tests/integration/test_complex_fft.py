"""Complex tensors and ``gt.fft`` through a real local cluster (NumPy workers and CuPy-double
ones): values against NumPy, gradients against finite differences in PyTorch's convention for
complex inputs (``dL/dx + i dL/dy`` of a real loss ``L``), and the errors where complex numbers
have no meaning. Whole programs against PyTorch are in ``tests/api/programs/complex_fft.py``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(180)
rng = np.random.default_rng(11)


cluster = each_backend_cluster()


def _c(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _numeric_grad(loss, z0: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """``dL/dx + i dL/dy`` by central differences (``loss`` maps a complex array to a float)."""
    g = np.zeros_like(z0)
    for idx in np.ndindex(z0.shape):
        for step, part in ((eps, 1.0), (1j * eps, 1j)):
            hi, lo = z0.copy(), z0.copy()
            hi[idx] += step
            lo[idx] -= step
            g[idx] += part * (loss(hi) - loss(lo)) / (2 * eps)
    return g


def _check_grad(f, z0: np.ndarray, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """``f`` maps a complex128 tensor to a real scalar tensor; GT's gradient equals the numeric one."""
    z = gt.tensor(z0, requires_grad=True)
    f(z).backward()
    want = _numeric_grad(lambda a: float(f(gt.tensor(a)).item()), z0)
    np.testing.assert_allclose(z.grad.numpy(), want, rtol=rtol, atol=atol)


def test_python_complex_numbers_make_complex64_and_numpy_arrays_keep_their_dtype(conn):
    a = gt.tensor([1 + 2j, 3 - 1j])
    assert a.dtype == gt.complex64 == gt.cfloat and a.is_complex() and not a.is_floating_point()
    b = gt.tensor(np.array([1 + 1j]))
    assert b.dtype == gt.cdouble
    assert complex(a[0]) == 1 + 2j and a[1].item() == 3 - 1j
    np.testing.assert_array_equal(a.numpy(), np.array([1 + 2j, 3 - 1j], np.complex64))
    assert repr(a) == "tensor([1.+2.j, 3.-1.j])"
    assert repr(b) == "tensor([1.+1.j], dtype=gt.complex128)"


def test_promotion_follows_pytorch(conn):
    c64, f32, f64 = gt.zeros(2, dtype="cfloat"), gt.zeros(2), gt.zeros(2, dtype="float64")
    assert (c64 + f32).dtype == "complex64"
    assert (c64 + f64).dtype == "complex128"  # its parts must hold a double
    assert (f32 * 1j).dtype == "complex64" and (f64 * 1j).dtype == "complex128"
    assert (gt.arange(3) + 1j).dtype == "complex64"
    assert (f64 + gt.tensor(1j)).dtype == "complex128"  # a 0-d complex next to a double
    assert (c64 / 2).dtype == "complex64" and (c64 + 2.5).dtype == "complex64"
    assert gt.full((2,), 1 - 2j).dtype == "complex64"
    np.testing.assert_array_equal(gt.full((2,), 1 - 2j).numpy(), [1 - 2j, 1 - 2j])


def test_arithmetic_and_functions_match_numpy(conn):
    a0, b0 = _c(3, 4), _c(3, 4)
    a, b = gt.tensor(a0), gt.tensor(b0)
    for got, want in [
        (a + b, a0 + b0), (a * b, a0 * b0), (a / b, a0 / b0), (a - 2.5, a0 - 2.5),
        (a * 1j, a0 * 1j), ((1 + 1j) / a, (1 + 1j) / a0), (a**2, a0**2), (-a, -a0),
        (a.exp(), np.exp(a0)), (a.log(), np.log(a0)), (a.sqrt(), np.sqrt(a0)),
        (a.sin(), np.sin(a0)), (a.tanh(), np.tanh(a0)), (a.abs(), np.abs(a0)),
        (a.angle(), np.angle(a0)), (a.real, a0.real), (a.imag, a0.imag), (a.conj(), a0.conj()),
        (a @ b.mT, a0 @ b0.T), (a.sum(1), a0.sum(1)), (a.mean(), a0.mean()),
        (a.prod(0), a0.prod(0)), (a.var(1), a0.var(1, ddof=1)), (a.std(), a0.std(ddof=1)), (a.sgn(), a0 / np.abs(a0)), (gt.isreal(a), a0.imag == 0),
        (gt.view_as_real(a), np.stack([a0.real, a0.imag], -1)),
        (gt.view_as_complex(gt.view_as_real(a)), a0), (gt.polar(a.abs(), a.angle()), a0),
        (gt.complex(a.real, b.imag), a0.real + 1j * b0.imag), (a.norm(), np.linalg.norm(a0)),
        (gt.where(a.real > 0, a, 1j), np.where(a0.real > 0, a0, 1j)),
        (a.cumsum(1), np.cumsum(a0, 1)), (gt.vdot(a[0], b[0]), np.vdot(a0[0], b0[0])),
        (gt.linalg.vecdot(a, b), (a0.conj() * b0).sum(-1)),
        (gt.linalg.vector_norm(a, dim=1), np.linalg.norm(a0, axis=1)),
    ]:  # fmt: skip
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_closeness_checks_compare_complex_values(conn):
    a = gt.tensor([1 + 1j, 2 - 1j])
    assert gt.allclose(a, a + 1e-7) and not gt.allclose(a, a + 1e-3j)
    gt.testing.assert_close(a, a + 1e-7)
    with pytest.raises(AssertionError, match="not close"):
        gt.testing.assert_close(a, a.conj())


def test_in_place_ops_and_setitem_keep_the_imaginary_part(conn):
    a0 = _c(4)
    a = gt.tensor(a0)
    a.mul_(0.5)
    a += 1j
    a[0] = 2 - 3j
    a[1] = 4.0
    want = a0 * 0.5 + 1j
    want[0], want[1] = 2 - 3j, 4.0
    np.testing.assert_allclose(a.numpy(), want)


def test_fft_transforms_match_numpy(conn):
    x0, z0 = rng.standard_normal((4, 6)), _c(4, 5)
    x, z = gt.tensor(x0), gt.tensor(z0)
    for got, want in [
        (gt.fft.fft(x), np.fft.fft(x0)), (gt.fft.ifft(z, n=8, dim=0), np.fft.ifft(z0, n=8, axis=0)),
        (gt.fft.fftn(z, s=(3, 7), norm="ortho"), np.fft.fftn(z0, s=(3, 7), axes=(0, 1), norm="ortho")),
        (gt.fft.ifft2(z, norm="forward"), np.fft.ifft2(z0, norm="forward")),
        (gt.fft.rfft(x, n=5), np.fft.rfft(x0, n=5)), (gt.fft.rfftn(x), np.fft.rfftn(x0)),
        (gt.fft.irfft(z), np.fft.irfft(z0)), (gt.fft.irfft(z, n=9), np.fft.irfft(z0, n=9)),
        (gt.fft.irfft2(z, s=(4, 6)), np.fft.irfft2(z0, s=(4, 6))),
        (gt.fft.hfft(z), np.fft.hfft(z0)), (gt.fft.ihfft(x), np.fft.ihfft(x0)),
        (gt.fft.fftshift(x), np.fft.fftshift(x0)), (gt.fft.ifftshift(z, dim=0), np.fft.ifftshift(z0, axes=0)),
        (gt.fft.fftfreq(8, 0.1, dtype="float64"), np.fft.fftfreq(8, 0.1)),
        (gt.fft.rfftfreq(9, dtype="float64"), np.fft.rfftfreq(9)),
    ]:  # fmt: skip
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)
    assert gt.fft.rfft(gt.tensor(x0, dtype="float32")).dtype == "complex64"
    assert gt.fft.irfft(gt.tensor(z0).to("complex64")).dtype == "float32"
    assert gt.fft.fft(gt.arange(4)).dtype == "complex64"


@pytest.mark.parametrize("norm", ["backward", "forward", "ortho"])
def test_fft_gradients_match_finite_differences(conn, norm):
    z0 = _c(3, 4)
    weights = gt.tensor(_c(3, 6))
    _check_grad(lambda z: (gt.fft.fft(z, n=6, norm=norm) * weights).real.sum(), z0)
    _check_grad(lambda z: gt.fft.ifft2(z, s=(2, 5), norm=norm).abs().pow(2).sum(), z0)
    _check_grad(lambda z: (gt.fft.irfft(z, n=7, norm=norm) ** 2).sum(), z0)
    _check_grad(lambda z: (gt.fft.irfft(z, norm=norm) * gt.arange(6.0)).sum(), z0)
    _check_grad(lambda z: (gt.fft.hfft(z, norm=norm) ** 3).sum(), z0, rtol=1e-4)
    _check_grad(lambda z: gt.fft.rfft(z.real * z.imag, n=6, norm=norm).abs().sum(), z0)
    _check_grad(lambda z: gt.fft.rfftn(z.imag, s=(2, 3), norm=norm).angle().sum(), z0)


def test_elementwise_and_linear_gradients_match_finite_differences(conn):
    z0, m0 = _c(2, 3), _c(3, 3)
    m = gt.tensor(m0)
    w = gt.tensor(rng.standard_normal((2, 3)))
    _check_grad(lambda z: (z * z.conj()).real.sum() + (z * w).imag.sum(), z0)
    _check_grad(lambda z: (z @ m).abs().sum() + (1 / z).real.sum(), z0)
    _check_grad(lambda z: (z.exp() + z.log() + z.sqrt() + z.sin()).abs().pow(2).sum(), z0)
    _check_grad(lambda z: z.angle().sum() + (z**3).real.mean() + z.tanh().imag.sum(), z0)
    _check_grad(lambda z: gt.view_as_real(z[:, 1:] * 2).pow(2).sum(), z0)
    _check_grad(lambda z: (gt.complex(z.real, z.imag * 2) * w).abs().sum(), z0)
    _check_grad(lambda z: gt.view_as_complex(gt.view_as_real(z) * 2).prod().real, z0, rtol=1e-4)
    _check_grad(lambda z: (z.sum(0) * z.mean(1).reshape(2, 1)).real.sum(), z0)


def test_a_real_input_gets_a_real_gradient(conn):
    x = gt.tensor(rng.standard_normal(4), requires_grad=True)
    (x * (1 + 2j)).abs().sum().backward()
    assert x.grad.dtype == "float64"
    np.testing.assert_allclose(x.grad.detach().numpy(), np.sign(x.detach().numpy()) * np.sqrt(5))


def test_what_complex_numbers_cannot_do_is_refused_clearly(conn):
    z = gt.tensor([1 + 1j, 2 - 1j], requires_grad=True)
    for bad in (lambda: z < z, lambda: z.maximum(z), lambda: z.relu(), lambda: z.floor(),
                lambda: z // 2, lambda: gt.fft.rfft(z), lambda: z.softplus(), lambda: z.logsumexp(0), lambda: gt.special.i0(z),
                lambda: z.lgamma(), lambda: z.clamp(0, 1)):  # fmt: skip
        with pytest.raises((TypeError, RuntimeError)):
            bad()
    with pytest.raises(RuntimeError, match="real scalar"):
        z.sum().backward()
    with pytest.raises(NotImplementedError, match="clip for complex"):  # (before it is sent)
        z._apply("clip", [z, 0.0, 1.0])
    assert float(z.detach().sum().abs().item()) == pytest.approx(3.0)  # (nothing failed later)
    with pytest.raises(RuntimeError, match="non-complex"):
        gt.zeros(2).imag  # noqa: B018 - the property raises
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = z.detach().float()
    assert any("imaginary part" in str(w.message) for w in caught)
    np.testing.assert_array_equal(r.numpy(), [1.0, 2.0])


def test_complex_gaussian_samples_have_half_the_variance_in_each_part(conn):
    gt.manual_seed(3)
    z = gt.randn(20000, dtype="cfloat")
    assert z.dtype == "complex64"
    v = z.numpy()
    assert abs(v.real.var() - 0.5) < 0.03 and abs(v.imag.var() - 0.5) < 0.03
    assert abs(np.corrcoef(v.real, v.imag)[0, 1]) < 0.05


def test_stft_inverts_and_refuses_what_pytorch_refuses(conn):
    x0 = rng.standard_normal((3, 90))
    x = gt.tensor(x0)
    w = gt.hann_window(32, dtype="float64")
    spec = gt.stft(x, 32, hop_length=8, window=w, return_complex=True)
    assert spec.shape == (3, 17, 12) and spec.dtype == "complex128"
    frames = np.lib.stride_tricks.sliding_window_view(
        np.pad(x0, ((0, 0), (16, 16)), "reflect"), 32, -1
    )[:, ::8]
    np.testing.assert_allclose(spec.numpy(), np.fft.rfft(frames * w.numpy(), axis=-1).transpose(0, 2, 1),
                               rtol=1e-10, atol=1e-10)  # fmt: skip
    np.testing.assert_allclose(gt.istft(spec, 32, hop_length=8, window=w, length=90).numpy(), x0,
                               rtol=1e-10, atol=1e-10)  # fmt: skip
    with pytest.raises(RuntimeError, match="return_complex"):
        gt.stft(x, 32, window=w)
    with pytest.raises(RuntimeError, match="win_length"):
        gt.stft(x, 32, window=gt.hann_window(16), return_complex=True)
    with pytest.raises(RuntimeError, match="overlap"):  # a hop past the window leaves gaps
        gt.istft(gt.stft(x, 16, hop_length=24, window=gt.hann_window(16, dtype="float64"),
                         return_complex=True), 16, hop_length=24)  # fmt: skip


def test_a_captured_step_with_complex_weights_replays_as_the_eager_one(conn):
    x = gt.tensor(rng.standard_normal((4, 2)).astype(np.float32))
    w0 = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex64)

    def make():
        w = gt.tensor(w0, requires_grad=True)
        opt = gt.optim.Adam([w], lr=0.05)

        def step():
            opt.zero_grad()
            loss = (gt.fft.irfft(x.to(gt.cfloat) @ w, n=4) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        return w, step

    w_hot, step = make()
    hot = gt.hot(step)
    w_eager, eager = make()
    losses = [(float(hot().item()), float(eager().item())) for _ in range(6)]
    np.testing.assert_allclose(*zip(*losses), rtol=1e-6)
    np.testing.assert_allclose(w_hot.detach().numpy(), w_eager.detach().numpy(), rtol=1e-6)
    assert losses[-1][0] < losses[0][0]
