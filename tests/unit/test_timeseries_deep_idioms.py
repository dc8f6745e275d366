"""Idioms of deep time-series code that GT once got wrong (found while writing the
``timeseries_deep`` programs): LBFGS fitting complex harmonic amplitudes sees a complex parameter
as (real, imaginary) pairs, as PyTorch's does. Expected values are PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_fits_complex_harmonic_amplitudes(conn, line_search):
    t = gt.arange(8.0)
    y = gt.tensor([1.0, 0.5, -0.3, 0.2, 0.9, -0.4, 0.1, 0.6])
    freqs = gt.outer(t, gt.tensor([1.0, 2.0])).to(gt.complex64)
    basis = gt.exp(2j * math.pi * freqs / 8)
    c = gt.nn.Parameter(gt.tensor([0.1 + 0.2j, -0.3 + 0.1j], dtype=gt.complex64))
    level = gt.nn.Parameter(gt.tensor(0.0))
    opt = gt.optim.LBFGS([c, level], max_iter=4, history_size=3, line_search_fn=line_search)

    def closure():
        opt.zero_grad()
        loss = ((basis @ c).real + level - y).pow(2).mean()
        loss.backward()
        return loss

    first = opt.step(closure)
    assert c.dtype == gt.complex64
    np.testing.assert_allclose(first.item(), 0.5271967, rtol=1e-6)
    np.testing.assert_allclose(closure().item(), 0.04871859, rtol=1e-5)
    np.testing.assert_allclose(
        c.detach().numpy(), [0.25480774 + 0.01161386j, 0.52499014 + 0.17499895j], atol=1e-6
    )
    np.testing.assert_allclose(level.item(), 0.32499349, atol=1e-6)


def test_lbfgs_complex_parameter_without_a_gradient_stays_put(conn):
    c = gt.nn.Parameter(gt.tensor([1.0 + 1.0j], dtype=gt.complex64))
    w = gt.nn.Parameter(gt.tensor([2.0]))
    opt = gt.optim.LBFGS([c, w], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = (w - 0.5).pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(w.item(), 0.5, atol=1e-6)
    np.testing.assert_array_equal(c.detach().numpy(), [1.0 + 1.0j])
