"""Idioms of wireless-communications code that GT once got wrong (found while writing the
``signal_comms`` programs): MIMO capacity written as ``torch.logdet(I + snr / Nt * H @ H.mH)``
raised for complex matrices (``logdet`` compared the complex sign with ``< 0``) instead of giving
the complex logarithm ``log(sign) + logabsdet`` as PyTorch does; an LMMSE equaliser through
``cholesky_solve(H^H y, cholesky(H^H H + N0 I))`` (and ``cholesky_inverse`` for the error
covariance) used the plain transpose of a complex Cholesky factor instead of its conjugate
transpose; and ``sigmoid`` of a complex tensor dropped the imaginary part (the real kernel's
sign split compared complex values). Expected values are PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_logdet_of_complex_matrices_is_the_complex_log_of_the_determinant(conn):
    a = gt.tensor([[2 + 1j, 0], [0, 1 - 0.5j]], dtype=gt.complex64, requires_grad=True)
    out = gt.logdet(a)
    assert out.dtype == gt.complex64
    np.testing.assert_allclose(out.item(), math.log(math.sqrt(5) * math.sqrt(1.25)), atol=1e-6)
    out.real.backward()
    np.testing.assert_allclose(a.grad.numpy(), [[0.4 + 0.2j, 0], [0, 0.8 - 0.4j]], atol=1e-6)
    neg = gt.tensor([[-2.0, 0], [0, 1]], dtype=gt.complex128)  # a negative determinant: log(-2)
    np.testing.assert_allclose(neg.logdet().item(), math.log(2) + 1j * math.pi, atol=1e-12)
    assert math.isnan(gt.logdet(gt.tensor([[-2.0, 0], [0, 1]])).item())  # real: NaN as before
    rng = np.random.default_rng(0)
    h = rng.standard_normal((3, 4, 4)) + 1j * rng.standard_normal((3, 4, 4))
    g = np.eye(4) + 2.5 * h @ h.conj().transpose(0, 2, 1)
    got = gt.logdet(gt.tensor(g)).numpy()
    np.testing.assert_allclose(got, np.log(np.linalg.det(g)), rtol=1e-10)


def test_cholesky_solve_and_inverse_use_the_conjugate_transpose_of_complex_factors(conn):
    rng = np.random.default_rng(1)
    h = (rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4))).astype(np.complex64)
    b = (rng.standard_normal((2, 4, 3)) + 1j * rng.standard_normal((2, 4, 3))).astype(np.complex64)
    a = h.conj().transpose(0, 2, 1) @ h + 0.1 * np.eye(4, dtype=np.complex64)
    want = np.linalg.solve(a, b)
    L = gt.linalg.cholesky(gt.tensor(a))
    np.testing.assert_allclose(
        gt.cholesky_solve(gt.tensor(b), L).numpy(), want, rtol=1e-3, atol=1e-4
    )
    U = gt.linalg.cholesky(gt.tensor(a), upper=True)
    got = gt.cholesky_solve(gt.tensor(b), U, upper=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(
        gt.cholesky_inverse(L).numpy(), np.linalg.inv(a), rtol=1e-3, atol=1e-4
    )
    real = a.real + 4 * np.eye(4, dtype=np.float32)  # real factors: unchanged
    got = gt.cholesky_solve(gt.tensor(b.real), gt.linalg.cholesky(gt.tensor(real))).numpy()
    np.testing.assert_allclose(got, np.linalg.solve(real, b.real), rtol=1e-4, atol=1e-5)


def test_sigmoid_of_complex_tensors_is_the_analytic_logistic_function(conn):
    v = np.array([0.3 + 0.5j, -1.2 + 0.1j, 0.7 - 0.9j], dtype=np.complex64)
    x = gt.tensor(v, requires_grad=True)
    y = gt.sigmoid(x)
    want = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(x.detach().sigmoid().numpy(), want, rtol=1e-5)
    (y * gt.tensor(np.array([1 + 2j, 0.5 - 1j, 2j], dtype=np.complex64))).real.sum().backward()
    # PyTorch's convention: conj(dy/dx) times the upstream gradient conj(c) of Re(c * y)
    c = np.array([1 + 2j, 0.5 - 1j, 2j])
    want_grad = (c * want * (1 - want)).conj()  # PyTorch: [0.29875-0.4988j, 0.09855+0.17317j, ...]
    np.testing.assert_allclose(x.grad.numpy(), want_grad, rtol=1e-4, atol=1e-6)
    real = gt.tensor([-30.0, 0.0, 30.0]).sigmoid().numpy()  # real inputs: still overflow-free
    np.testing.assert_allclose(real, [1 / (1 + np.exp(30.0)), 0.5, 1.0], rtol=1e-6)
