"""The ``normalize`` kernels: the forward rounds as the composition ``layer_norm`` and
``group_norm`` were built from (so results did not move), and the backward is the derivative."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.ops.normalization import _k_normalize, _k_normalize_backward


class _NumPy:
    xp = np
    name = "numpy"


FWD, BWD = _k_normalize(_NumPy), _k_normalize_backward(_NumPy)
rng = np.random.default_rng(5)


def _composed(x, axis, eps, shift):
    """What GT computed before, one primitive at a time (sum / n means, ``1 / sqrt``)."""
    n = x.shape[axis]
    if shift:
        first = np.take(x, [0], axis=axis)
        mu = first + np.sum(x - first, axis=axis, keepdims=True) / n
    else:
        mu = np.sum(x, axis=axis, keepdims=True) / n
    d = x - mu
    var = np.sum(d * d, axis=axis, keepdims=True) / n
    return d * (1.0 / np.sqrt(var + eps))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis, shift", [(-1, False), (2, True), (0, False)])
def test_the_forward_kernel_rounds_as_the_composition(dtype, axis, shift):
    x = (rng.standard_normal((6, 5, 40)) * 3 + 2).astype(dtype)
    got = FWD([x], {"axis": axis, "eps": 1e-5, "shift": shift})
    assert got.dtype == dtype
    assert np.array_equal(got, _composed(x, axis, 1e-5, shift))


def test_a_constant_group_is_exactly_zero_with_the_shifted_mean():
    x = np.full((2, 3, 50), 0.7, np.float32)
    assert not np.any(FWD([x], {"axis": 2, "eps": 1e-5, "shift": True}))


def test_the_backward_kernel_is_the_derivative():
    x = rng.standard_normal((4, 30))
    g = rng.standard_normal((4, 30))
    at = {"axis": 1, "eps": 1e-3}
    got = BWD([g, x], at)
    # central differences of <g, normalize(x)> in float64
    h, num = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += h
        down[idx] -= h
        num[idx] = (np.sum(g * FWD([up], at)) - np.sum(g * FWD([down], at))) / (2 * h)
    assert np.allclose(got, num, rtol=1e-6, atol=1e-7)


def test_the_backward_kernel_takes_a_broadcast_gradient():
    x = rng.standard_normal((3, 8)).astype(np.float32)
    ones = np.broadcast_to(np.float32(1.0), x.shape)  # (what backward of a sum hands on)
    got = BWD([ones, x], {"axis": 1, "eps": 1e-5})
    assert np.allclose(got, 0.0, atol=1e-5)  # a sum of normalized values does not depend on x
