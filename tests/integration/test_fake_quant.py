"""Fake quantisation's errors (its values and gradients are PyTorch's in the differential
programs of ``tests/api/programs/quantization.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import gt


def test_bad_ranges_dtypes_and_shapes_are_refused_clearly(conn):
    x = gt.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(ValueError, match="quant_min \\(5\\) must not exceed quant_max \\(4\\)"):
        gt.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 4)
    with pytest.raises(TypeError, match="expected a float tensor, not gt.int64"):
        gt.fake_quantize_per_tensor_affine(gt.tensor([1, 2]), 0.1, 0, 0, 255)
    scale, zp = gt.tensor([0.1, 0.2]), gt.tensor([0, 0], dtype=gt.int32)
    with pytest.raises(ValueError, match="must have 3 elements"):
        gt.fake_quantize_per_channel_affine(x, scale, zp, 1, -8, 7)
    with pytest.raises(TypeError, match="zero_point must be an integer tensor"):
        gt.fake_quantize_per_channel_affine(x, scale, scale, 0, -8, 7)
    with pytest.raises(RuntimeError, match="`zero_point` must be between `quant_min` and"):
        gt.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255)  # PyTorch's check and message


def test_values_sit_on_the_grid_and_the_gradient_is_the_unclamped_mask(conn):
    x = gt.tensor([-2.0, -0.26, 0.05, 0.15, 0.31, 2.0], requires_grad=True)
    y = gt.fake_quantize_per_tensor_affine(x, 0.1, 0, -10, 10)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), [-1.0, -0.3, 0.0, 0.2, 0.3, 1.0], atol=1e-7)
    np.testing.assert_array_equal(x.grad.numpy(), [0, 1, 1, 1, 1, 0])  # (0.05 and 0.15: to even)
