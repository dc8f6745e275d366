"""Floor division and remainder of floats as NumPy computes them (what CuPy workers now use),
checked against NumPy's own ufuncs bit for bit, signed zeros, infinities and NaNs included."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.ops.float_divmod import floor_divmod, is_float
from gt.runtime.worker.backend import Backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

SPECIAL_A = [-0.9, 0.9, -0.0, 0.0, 1.0, np.inf, -np.inf, np.nan, 7.5, -7.5, 1e-300, 3.0]
SPECIAL_B = [0.3, -0.3, 2.0, -2.0, 0.0, 3.0, -3.0, 1.0, np.inf, -np.inf, 1e300, -0.0]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bit patterns up to NaN payloads: values, NaNs and the signs of zeros."""
    return bool(
        got.dtype == want.dtype
        and np.array_equal(got, want, equal_nan=True)
        and np.array_equal(np.signbit(got), np.signbit(want))
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_quotient_and_remainder_equal_numpys(dtype):
    rng = np.random.default_rng(0)
    with np.errstate(all="ignore"):  # (1e300 is inf in the narrow types)
        a = np.concatenate([SPECIAL_A, rng.standard_normal(5000) * 10]).astype(dtype)
        b = np.concatenate([SPECIAL_B, rng.standard_normal(5000)]).astype(dtype)
        q, r = floor_divmod(np, a, b)
        assert _same(q, np.floor_divide(a, b)) and _same(r, np.remainder(a, b))
        for scalar in (0.3, -0.3, 7.0):  # a Python float is rounded to the array's dtype first
            q, r = floor_divmod(np, a, scalar)
            assert _same(q, np.floor_divide(a, scalar)) and _same(r, np.remainder(a, scalar))


def test_the_case_cupys_floor_of_the_quotient_gets_wrong():
    q, r = floor_divmod(np, np.array([-0.9]), 0.3)  # -0.9 / 0.3 rounds to -3.0 exactly
    assert q[0] == -4.0 and r[0] == pytest.approx(0.3)


def test_only_floats_take_the_exact_path():
    assert is_float(np.ones(2, np.float32)) and is_float(0.5)
    assert not is_float(np.ones(2, np.int64)) and not is_float(3)


def test_a_cupy_worker_divides_floats_numpys_way_and_integers_as_before():
    be = Backend(cp, name="cupy")
    fd, rem = be.handlers[O.OPCODE["floor_divide"]], be.handlers[O.OPCODE["remainder"]]
    x = cp.asarray(np.array([-0.9, 0.9, 5.0]))
    np.testing.assert_array_equal(cp.asnumpy(fd([x, 0.3], None)), [-4.0, 3.0, 16.0])
    np.testing.assert_allclose(cp.asnumpy(rem([x, 0.3], None)), np.remainder([-0.9, 0.9, 5.0], 0.3))
    i = cp.asarray(np.array([-7, 7], np.int64))
    got = fd([i, cp.asarray(np.array([2, -2], np.int64))], None)
    assert got.dtype == np.int64 and cp.asnumpy(got).tolist() == [-4, -4]


def test_a_cupy_worker_keeps_the_mantissa_of_a_subnormal_float32():
    be = Backend(cp, name="cupy")
    x = cp.asarray(np.array([1e-40, 0.75, -3.0], np.float32))
    m = cp.asnumpy(be.handlers[O.OPCODE["frexp_mantissa"]]([x], None))
    e = cp.asnumpy(be.handlers[O.OPCODE["frexp_exponent"]]([x], None))
    want_m, want_e = np.frexp(np.array([1e-40, 0.75, -3.0], np.float32))
    np.testing.assert_array_equal(m, want_m)
    np.testing.assert_array_equal(e, want_e)
    assert m.dtype == np.float32 and e.dtype == np.int32


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_narrow_floats_widen_exactly_from_their_bits(dtype):
    """``frexp`` on CuPy widens from the bits, since CuPy's float32 kernels flush subnormals."""
    from gt.runtime.ops.trig import _exact_float64  # noqa: PLC0415

    info = np.finfo(dtype)
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << (8 * info.dtype.itemsize), 4000, dtype=np.uint64)
    x = bits.astype(f"uint{8 * info.dtype.itemsize}").view(dtype)  # every class of value
    x = np.concatenate([x, np.array([info.smallest_subnormal, -info.smallest_subnormal, -0.0,
                                     info.tiny, info.max, np.inf], dtype)])  # fmt: skip
    with np.errstate(invalid="ignore"):  # (signalling NaNs among the random bits)
        got, want = _exact_float64(np, x), x.astype(np.float64)
    assert got.dtype == np.float64 and _same(got, want)
