"""The NumPy float32 ``gelu`` kernels: PyTorch's CPU formula (Abramowitz and Stegun's ``erf``),
within that formula's error of the exact values, element by element, whatever the chunking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gt.runtime.ops import gelu as G
from gt.runtime.ops.error_function import erf

rng = np.random.default_rng(5)
#: A bound on |erf error|: A&S 7.1.26's 1.5e-7, and the float32 roundings of
#: ``1 - t * r(t) * exp(-u * u)`` near 1 (an ulp of 1 is 1.2e-7; measured worst 5.6e-7).
ERF_ERR = 7e-7


def _exact(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``gelu`` and its derivative in float64."""
    x = x.astype(np.float64)
    cdf = 0.5 * (1.0 + erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return x * cdf, cdf + x * pdf


def _ulp(v: np.ndarray) -> np.ndarray:
    return np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)


def _inputs() -> np.ndarray:
    return np.concatenate([
        rng.standard_normal(70_000) * 3,  # (over two chunks, and a ragged last one)
        rng.uniform(-1e-3, 1e-3, 1000),
        np.linspace(-12, 12, 4001),
    ]).astype(np.float32)  # fmt: skip


def test_forward_is_within_the_approximations_error_of_the_exact_gelu():
    x = _inputs()
    got = G.gelu_float32(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    want, _ = _exact(x)
    # erf's absolute error, scaled by x / 2, plus a few roundings of the result
    bound = 0.5 * np.abs(x) * ERF_ERR + 3 * _ulp(want)
    assert np.all(np.abs(got - want) <= bound)


def test_backward_is_within_the_approximations_error_of_the_exact_derivative():
    x = _inputs()
    g = rng.standard_normal(x.shape).astype(np.float32)
    got = G.gelu_backward_float32(g, x)
    _, slope = _exact(x)
    want = g * slope
    bound = np.abs(g) * (0.5 * ERF_ERR + 4 * _ulp(slope)) + 2 * _ulp(want)
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize("chunk", [7, 4096, 1 << 15])
def test_the_result_does_not_depend_on_the_chunking(monkeypatch, chunk):
    x = (rng.standard_normal((3, 5, 1001)) * 4).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    whole_f, whole_b = G.gelu_float32(x), G.gelu_backward_float32(g, x)
    monkeypatch.setattr(G, "CHUNK", chunk)
    np.testing.assert_array_equal(G.gelu_float32(x), whole_f)
    np.testing.assert_array_equal(G.gelu_backward_float32(g, x), whole_b)


def test_large_arguments_saturate_and_special_values_pass_as_pytorchs_do():
    x = np.array([0.0, -0.0, 10.0, -10.0, 1e30, -1e30, np.inf, -np.inf, np.nan], np.float32)
    with np.errstate(invalid="ignore"):
        got = G.gelu_float32(x)
    assert got[0] == 0 and not np.signbit(got[0]) and got[1] == 0 and np.signbit(got[1])
    assert got[2] == 10.0 and abs(got[3]) < 1e-6
    assert got[4] == np.float32(1e30) and abs(got[5]) < 1e-6 * 1e30
    assert got[6] == np.inf
    assert np.isnan(got[7]) and np.isnan(got[8])  # (-inf * 0, as PyTorch's kernel gives)
    slope = G.gelu_backward_float32(np.ones_like(x), x)
    assert slope[2] == 1.0 and abs(slope[3]) < 1e-20 and np.isnan(slope[8])


def test_a_non_contiguous_input_is_read_in_its_logical_order():
    x = (rng.standard_normal((64, 48)) * 2).astype(np.float32)
    np.testing.assert_array_equal(G.gelu_float32(x.T), G.gelu_float32(x).T)
    np.testing.assert_array_equal(
        G.gelu_backward_float32(x.T, x.T), G.gelu_backward_float32(x, x).T
    )
