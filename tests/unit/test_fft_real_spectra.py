"""Spectra of real signals as PyTorch gives them (found while writing the ``weather_climate``
programs): the bins that are their own conjugates (index 0 and ``n / 2`` on every transformed
axis) are exactly real, so ``angle`` of a negative mean is exactly pi, not +-pi by the sign of
rounding noise. PyTorch transforms real input one-sided and fills the rest by symmetry."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _field() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((2, 3, 6, 10)).astype(np.float32)


def _self_conjugate(shape: tuple, axes: tuple) -> list[tuple]:
    per_axis = [(0, shape[a] // 2) if shape[a] % 2 == 0 else (0,) for a in axes]
    return list(itertools.product(*per_axis))


@pytest.mark.parametrize("name", ["fftn", "fft2", "rfft2", "rfftn", "ifft2"])
def test_self_conjugate_bins_of_a_real_signals_spectrum_are_exactly_real(conn, name):
    x = _field()
    spec = getattr(gt.fft, name)(gt.tensor(x), dim=(-2, -1)).numpy()
    for k0, k1 in _self_conjugate((6, 10), (0, 1)):
        np.testing.assert_array_equal(spec[..., k0, k1].imag, 0.0)


def test_one_dimensional_fft_of_real_input_and_angle_of_a_negative_mean(conn):
    x = _field()[0, 0] - 3.0
    spec = gt.fft.fft(gt.tensor(x), dim=-1)
    np.testing.assert_array_equal(spec.imag.numpy()[:, [0, 5]], 0.0)
    dc = gt.fft.fft2(gt.tensor(x)).angle().numpy()[0, 0]
    assert dc == np.float32(math.pi)
    # a complex input keeps its transform's own imaginary parts
    z = gt.tensor(x + 1j * _field()[1, 0]).to(gt.complex64)
    got = gt.fft.fft2(z).numpy()
    np.testing.assert_allclose(got, np.fft.fft2(x + 1j * _field()[1, 0]), rtol=1e-4, atol=1e-4)
    assert got[0, 0].imag != 0
