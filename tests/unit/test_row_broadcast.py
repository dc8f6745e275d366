"""A large array and a broadcast row, computed with the row tiled and the rows folded, give the
plain ufunc's result bit for bit, and every case the fold does not fit is left to the ufunc."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.ops.row_broadcast import FOLDABLE, MIN_ELEMENTS, _fold, folded

rng = np.random.default_rng(3)


@pytest.mark.parametrize("ufunc", sorted(FOLDABLE))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_a_folded_op_gives_the_ufuncs_bits(ufunc, dtype):
    fn = getattr(np, ufunc)
    big = (rng.standard_normal((512, 1024)) * 100).astype(dtype)
    row = (rng.standard_normal(1024) * 10 + 0.5).astype(dtype)
    if dtype == np.int32:
        row[row == 0] = 3
    with np.errstate(all="ignore"):
        for a, b in ((big, row), (row, big), (big, row[None]), (big.reshape(4, 128, 1024), row)):
            got = folded(fn, a, b)
            want = fn(a, b)
            assert got is not None
            assert got.shape == want.shape and got.dtype == want.dtype
            assert np.array_equal(got, want, equal_nan=True)


def test_nan_inf_and_signed_zeros_keep_their_bits():
    big = rng.standard_normal((300, 1024)).astype(np.float32)
    big[::7, ::3] = np.nan
    big[1::5, ::11] = -0.0
    row = rng.standard_normal(1024).astype(np.float32)
    row[::13] = np.inf
    row[1::17] = -0.0
    with np.errstate(all="ignore"):
        for fn in (np.multiply, np.add, np.maximum, np.divide):
            got, want = folded(fn, big, row), fn(big, row)
            assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_an_in_place_fold_writes_into_the_array_and_returns_it():
    big = rng.standard_normal((256, 1024)).astype(np.float32)
    row = rng.standard_normal(1024).astype(np.float32)
    want = big * row
    got = folded(np.multiply, big, row, out=big)
    assert got is big
    assert np.array_equal(big, want)


@pytest.mark.parametrize(
    "a, b",
    [
        (np.ones((4096, 1024), np.float32), np.ones((4096, 1), np.float32)),  # a column
        (np.ones((4096, 1024), np.float32), np.ones(1024, np.float64)),  # two dtypes
        (np.ones((64, 64), np.float32), np.ones(64, np.float32)),  # too small to matter
        (np.ones((1024, 4096), np.float32).T, np.ones(1024, np.float32)),  # not C-contiguous
        (np.ones((16, 16384), np.float32), np.ones(16384, np.float32)),  # a row past 64 KiB
        (np.ones((4096, 1024), np.float32), np.ones((1024, 2), np.float32)[:, 0]),  # strided
        (np.ones((4096, 1024), np.float32), 2.0),  # a number
    ],
)
def test_cases_the_fold_does_not_fit_are_left_to_the_ufunc(a, b):
    assert folded(np.multiply, a, b) is None


def test_rows_that_no_fold_divides_are_left_alone():
    prime_rows = 4099  # (a prime: no fold of 16 to 32 rows divides it)
    big = np.ones((prime_rows, 1024), np.float32)
    assert big.size >= MIN_ELEMENTS
    assert folded(np.add, big, np.ones(1024, np.float32)) is None
    assert _fold(prime_rows, 4096) == 1
    assert _fold(4096, 4096) == 16
    assert _fold(12288, 3072) == 24  # (22 rows reach 64 KiB; 24 is the first that divides)
