"""PyTorch's dtype rules where GT's kernels or client differed: sums of small integers widen to
int64 (NumPy would give uint64, a dtype the wire does not carry), ``sum``/``cumsum`` with
``dtype=`` stay in (and wrap in) that dtype, half-precision sums, running sums, means and
arithmetic with a Python number are computed in float32 and rounded once, ``sign(nan)`` is 0,
``isclose`` never calls opposite infinities close, dtype refusals are RuntimeErrors,
``to(copy=True)`` copies, and ``result_type``/``promote_types`` give dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.errors import DtypeError
from gt.runtime import ops as O


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32"])
def test_sum_of_small_integers_is_int64_as_declared(run, dtype):
    x = (
        np.array([[1, 0, 1], [1, 1, 0]], dtype=dtype)
        if dtype == "bool"
        else np.full((2, 3), 200).astype(dtype)
    )
    for attrs in (None, {"axis": [1], "keepdims": False}):
        out = run("sum", [x], attrs)
        assert out.dtype == np.int64
        assert out.dtype.name == O.BY_NAME["sum"].dtype([dtype], attrs)
    assert run("sum", [x], None) == x.astype(np.int64).sum()


def test_sum_and_cumsum_with_a_dtype_wrap_in_it(run):
    x = np.array([200, 100], dtype=np.uint8)
    assert run("sum", [x], {"axis": None, "keepdims": False, "dtype": "uint8"}).tolist() == 44
    y = np.array([30000, 30000], dtype=np.int16)
    out = run("cumsum", [y], {"axis": 0, "dtype": "int16"})
    assert out.dtype == np.int16 and out.tolist() == [30000, -5536]


def test_half_sums_and_running_sums_accumulate_in_float32(run):
    ones = np.ones(4096, dtype=np.float16)
    assert run("sum", [ones], None) == 4096  # a half accumulator stalls at 2048
    running = run("cumsum", [ones], {"axis": 0})
    assert running.dtype == np.float16 and running[-3:].tolist() == [4094.0, 4096.0, 4096.0]


def test_half_times_a_python_float_rounds_once(run):
    h = np.array([2.5, -1.5], dtype=np.float16)
    out = run("mul", [h, 3.14159])
    assert out.dtype == np.float16
    assert out.tolist() == (h.astype(np.float32) * np.float32(3.14159)).astype(np.float16).tolist()
    assert out[0] == np.float16(7.855)  # not 2.5 * float16(3.14159) = 7.8515625
    assert run("add", [2048.5, np.array([1.0], dtype=np.float16)]).tolist() == [2050.0]
    assert run("lt", [np.array([0.1], dtype=np.float16), 0.1]).tolist() == [False]


def test_sign_of_nan_is_zero_and_of_bool_itself(run):
    x = np.array([-2.0, np.nan, 0.0, np.inf], dtype=np.float32)
    assert run("sign", [x], None).tolist() == [-1.0, 0.0, 0.0, 1.0]
    assert run("sign", [np.array([-3, 0, 4])], None).tolist() == [-1, 0, 1]
    assert run("sign", [np.array([True, False])], None).tolist() == [True, False]


# ----------------------------------------------------------------------------- client rules
def test_promote_types_and_result_type_are_dtypes():
    assert gt.promote_types(gt.uint8, gt.int8) is gt.int16
    assert str(gt.promote_types(gt.float16, gt.bfloat16)) == "gt.float32"
    assert isinstance(gt.result_type(gt.tensor([1, 2]), 2.5), gt.dtype)
    assert gt.result_type(2, 2.5) is gt.float32


def test_dtype_refusals_are_runtime_errors(conn):
    b = gt.tensor([True, False])
    with pytest.raises(RuntimeError, match="bool"):
        b - gt.tensor([True, True])
    with pytest.raises(RuntimeError, match="bool"):
        _ = -b
    with pytest.raises(RuntimeError, match="can't be cast"):
        gt.zeros(2, dtype=gt.int64).add_(gt.tensor([0.5, 1.5]))
    with pytest.raises(DtypeError):  # (a TypeError too)
        b - True
    assert issubclass(DtypeError, TypeError)


def test_mean_and_var_of_integers_are_refused_but_mean_with_a_dtype_works(conn):
    y = gt.tensor([1, 2, 4])
    with pytest.raises(RuntimeError, match="mean"):
        y.mean()
    with pytest.raises(RuntimeError, match="floating point"):
        y.std()
    assert y.mean(dtype=gt.float64).item() == pytest.approx(7 / 3)
    assert y.float().mean().item() == pytest.approx(7 / 3)


def test_small_integer_sums_reach_the_client(conn):
    u8 = gt.tensor(np.array([[200, 100], [1, 2]], dtype=np.uint8))
    assert u8.sum().item() == 303 and u8.sum().dtype == gt.int64
    assert u8.sum(1).tolist() == [300, 3]
    assert u8.sum(dtype=gt.uint8).dtype == gt.uint8 and u8.sum(dtype=gt.uint8).item() == 47
    assert gt.nansum(u8).item() == 303
    i16 = gt.tensor(np.array([30000, 30000], dtype=np.int16))
    assert i16.cumsum(0, dtype=gt.int16).tolist() == [30000, -5536]
    assert i16.cumsum(0).tolist() == [30000, 60000]


def test_half_mean_is_rounded_once(conn):
    tenths = gt.full((1000,), 0.1, dtype=gt.float16)
    m = tenths.mean()
    assert m.dtype == gt.float16 and m.item() == float(np.float16(0.1))


def test_isclose_never_calls_opposite_infinities_close(conn):
    a = gt.tensor([float("inf"), float("-inf"), float("inf"), 1.0])
    b = gt.tensor([float("inf"), float("inf"), 1e30, 1.0])
    assert gt.isclose(a, b).tolist() == [True, False, False, True]
    assert not gt.allclose(a, b)


def test_to_with_copy_returns_a_new_tensor(conn):
    x = gt.tensor([1.0, 2.0])
    assert x.to(gt.float32) is x
    y = x.to(gt.float32, copy=True)
    assert y is not x and y.tolist() == [1.0, 2.0]
    assert x.to(gt.float32, False, True) is not x
    y.add_(1.0)
    assert x.tolist() == [1.0, 2.0]
