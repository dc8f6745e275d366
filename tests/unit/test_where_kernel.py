"""The ``where`` kernel's bitwise forms give ``np.where``'s bits: masking with a +0.0 branch,
either side, and selecting between two arrays when the mask looks random."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.ops import where_kernel
from gt.runtime.ops.where_kernel import k_where


class _NumPy:
    xp = np
    name = "numpy"


WHERE = k_where(_NumPy)
rng = np.random.default_rng(2)


def _same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def _arrays(dtype):
    a = (rng.standard_normal((300, 400)) * 50).astype(dtype)
    b = (rng.standard_normal((300, 400)) * 50).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a[::7] = np.nan
        a[2::9] = np.inf
        b[1::5] = -0.0
    return a, b


def _masks(a, b):
    return {
        "random": a > b,
        "none": np.zeros(a.shape, bool),
        "every third": (np.arange(a.size) % 3 == 0).reshape(a.shape),
        "fortran order": np.asfortranarray(a > b),
    }


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int8, np.uint16, np.int64]
)
def test_selecting_between_two_arrays_gives_np_wheres_bits(dtype):
    a, b = _arrays(dtype)
    for c in _masks(a, b).values():
        _same_bits(WHERE([c, a, b], None), np.where(c, a, b))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("zero", [0.0, -0.0])
def test_masking_with_a_zero_on_either_side_gives_np_wheres_bits(dtype, zero):
    a, b = _arrays(dtype)
    for c in _masks(a, b).values():
        _same_bits(WHERE([c, a, zero], None), np.where(c, a, zero))
        _same_bits(WHERE([c, zero, b], None), np.where(c, zero, b))


def test_the_select_is_taken_for_a_random_mask_only():
    big = rng.standard_normal(1 << 17)
    assert where_kernel._looks_random(big > 0)
    assert not where_kernel._looks_random(np.arange(1 << 17) < 1000)
    assert not where_kernel._looks_random(np.ones(1 << 17, bool))
    assert where_kernel._bitwise_where(np.arange(1 << 17) < 1000, big, big * 2) is None
    assert where_kernel._bitwise_where(big > 0, big, big * 2) is not None
    small = big[:1000]
    assert where_kernel._bitwise_where(small > 0, small, small * 2) is None  # (np.where's)


def test_the_result_dtype_attribute_casts_the_result():
    a, b = _arrays(np.float32)
    c = a > b
    got = WHERE([c, a, b], {"dtype": "float64"})
    _same_bits(got, np.where(c, a, b).astype(np.float64))
