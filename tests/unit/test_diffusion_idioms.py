"""NumPy scalars as diffusion code mixes them into tensor arithmetic, which GT once got wrong
(found while writing the ``diffusion_models`` programs): schedules kept as NumPy arrays give
``np.float32``/``np.int64`` scalars (``alphas_cumprod[t]``) that multiply integer tensors, and
``torch.tensor(np_scalar)`` keeps the scalar's own dtype. Expected values are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt import shapes as S

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("dtype", "value", "want"),
    [
        ("int64", np.float32(0.5), "float32"),
        ("int64", np.float16(0.5), "float32"),
        ("bool", np.int32(3), "int64"),
        ("int32", np.int64(3), "int32"),
        ("int64", np.complex64(1j), "complex64"),
        ("float64", np.float32(0.5), "float64"),
    ],
)
def test_numpy_scalars_promote_as_python_numbers(dtype, value, want):
    assert S.promote_scalar(dtype, value) == want


def test_integer_tensor_times_numpy_scalars(conn):
    t = gt.tensor([1, 2])
    schedule = np.linspace(0.5, 1.0, 3, dtype=np.float32)
    out = t * schedule[0]
    assert out.dtype == gt.float32
    np.testing.assert_allclose(out.numpy(), [0.5, 1.0])
    np.testing.assert_allclose((schedule[0] * t).numpy(), [0.5, 1.0])
    assert (t - np.int32(1)).dtype == gt.int64
    np.testing.assert_array_equal((t - np.int32(1)).numpy(), [0, 1])
    np.testing.assert_allclose((t / np.float16(2)).numpy(), [0.5, 1.0])
    c = t * np.complex64(1j)
    assert c.dtype == gt.complex64
    np.testing.assert_allclose(c.numpy(), [1j, 2j])


def test_tensor_of_a_numpy_scalar_keeps_its_dtype(conn):
    assert gt.tensor(np.float64(0.5)).dtype == gt.float64
    assert gt.tensor(np.float32(0.5)).dtype == gt.float32
    assert gt.tensor(np.int16(2)).dtype == gt.int16
    assert gt.tensor([np.float64(0.5), 1.0]).dtype == gt.float64
    assert gt.tensor([[1.0], [np.float64(2.0)]]).dtype == gt.float64
    assert gt.tensor([0.5, 1.0]).dtype == gt.float32  # Python floats: the default dtype
    assert gt.tensor(np.cumprod([0.9, 0.8])[1]).item() == pytest.approx(0.72, abs=1e-15)
