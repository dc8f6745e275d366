"""The bitwise and ``searchsorted`` primitives without a cluster: their shape and dtype rules, the
client's promotion helpers, and their kernels, each test run on NumPy and on the CuPy test double
against a NumPy oracle (PyTorch's rules for out-of-range shifts written out by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from gt import shapes as S
from gt.errors import ShapeError
from gt.ops import bitwise
from gt.runtime import ops as O

INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
rng = np.random.default_rng(3)


def _ints(dtype: str, shape: tuple, lo: int = -100, hi: int = 100) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(max(lo, info.min), min(hi, info.max), shape).astype(dtype)


def _torch_shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    """PyTorch's shifts, element by element: out-of-range amounts give 0 or the sign fill."""
    a, b = np.broadcast_arrays(a, b)
    bits = a.dtype.itemsize * 8
    out = np.empty(a.shape, a.dtype)
    for i in np.ndindex(a.shape):
        x, s = int(a[i]), int(b[i])
        if 0 <= s < bits:
            v = x << s if left else x >> s
        else:
            v = 0 if left or x >= 0 else -1
        unsigned = np.array(v & ((1 << bits) - 1), dtype=f"u{a.dtype.itemsize}")
        out[i] = unsigned.view(a.dtype)  # the low bits, as C keeps them
    return out


# ------------------------------------------------------------------ rules
def test_bitwise_shape_rule_broadcasts_and_keeps_the_operand_dtype():
    op = O.get("bitwise_and")
    assert op.shape([(3, 1), (4,)], None) == (3, 4)
    assert op.dtype(["int8", "int8"], None) == "int8"
    assert op.dtype([None, "uint8"], None) == "uint8"  # 3 & x: the immediate has no dtype
    assert op.grad is None and op.shard == "elementwise"
    with pytest.raises(ShapeError, match="bitwise_and"):
        op.shape([(3,), (4,)], None)


def test_searchsorted_shape_rule_takes_values_shape_and_checks_leading_dims():
    rule, dtype = O.get("searchsorted").shape, O.get("searchsorted").dtype
    assert rule([(5,), (2, 3)], {}) == (2, 3)
    assert rule([(2, 5), (2, 7)], {}) == (2, 7)
    assert rule([(4,), ()], {}) == ()
    with pytest.raises(ShapeError, match="same leading dimensions"):
        rule([(2, 5), (3, 7)], {})
    with pytest.raises(ShapeError, match="at least one dimension"):
        rule([(), (3,)], {})
    assert dtype([], {"right": True}) == "int64"
    assert dtype([], {"dtype": "int32"}) == "int32"
    assert O.get("searchsorted").shard is None and O.get("searchsorted").grad is None


def test_python_ints_wrap_into_the_dtype_range_like_pytorch():
    assert S.wrap_int(255, "int8") == -1
    assert S.wrap_int(300, "int8") == 44
    assert S.wrap_int(-1, "uint8") == 255
    assert S.wrap_int(2**63, "int64") == -(2**63)
    assert S.wrap_int(7, "int32") == 7


def test_bitwise_dtype_check_names_the_op_and_the_dtype():
    bitwise.check_dtype("bitwise_and", "bool")
    bitwise.check_dtype("bitwise_left_shift", "uint8")
    with pytest.raises(TypeError, match='"bitwise_or" is not implemented for float32'):
        bitwise.check_dtype("bitwise_or", "float32")
    with pytest.raises(TypeError, match='"bitwise_right_shift" is not implemented for bool'):
        bitwise.check_dtype("bitwise_right_shift", "bool")


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_bitwise_kernels_match_numpy_for_every_integer_dtype(run, dtype):
    a, b = _ints(dtype, (3, 5)), _ints(dtype, (5,))
    for name, want in (("bitwise_and", a & b), ("bitwise_or", a | b), ("bitwise_xor", a ^ b)):
        got = run(name, [a, b])
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, want), name
    assert np.array_equal(run("bitwise_not", [a]), ~a)
    imm = S.wrap_int(-3, dtype)
    assert np.array_equal(run("bitwise_and", [imm, a]), a & np.array(imm, dtype))


def test_bitwise_kernels_on_bool_are_logical(run):
    a, b = rng.random(6) > 0.5, rng.random(6) > 0.5
    assert np.array_equal(run("bitwise_xor", [a, b]), a ^ b)
    assert np.array_equal(run("bitwise_not", [a]), ~a)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_by_tensors_follow_pytorch_past_the_width(run, dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = _ints(dtype, (2, 6))
    lo = 0 if dtype == "uint8" else -3
    amounts = np.array([lo, 0, 1, bits - 1, bits, bits + 5 if bits < 64 else 100], dtype=dtype)
    for name, left in (("bitwise_left_shift", True), ("bitwise_right_shift", False)):
        got = run(name, [a, amounts])
        assert got.dtype == np.dtype(dtype)
        assert np.array_equal(got, _torch_shift(a, amounts, left)), (name, got)


@pytest.mark.parametrize("amount", [-1, 0, 3, 7, 8, 70])
def test_shifts_by_python_ints_follow_pytorch(run, amount):
    a = np.array([1, -2, 127, -128, 5], np.int8)
    imm = S.wrap_int(amount, "int8")
    b = np.full(a.shape, imm, np.int8)
    for name, left in (("bitwise_left_shift", True), ("bitwise_right_shift", False)):
        got = run(name, [a, imm])
        assert got.dtype == np.int8 and np.array_equal(got, _torch_shift(a, b, left)), name


def test_reflected_shift_of_a_python_int_by_a_tensor(run):
    amounts = np.array([0, 1, 5, 40, -1], np.int32)
    got = run("bitwise_left_shift", [3, amounts])
    assert got.dtype == np.int32 and got.tolist() == [3, 6, 96, 0, 0]
    assert run("bitwise_right_shift", [-64, amounts]).tolist() == [-64, -32, -2, -1, -1]


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_matches_numpy_for_any_values_shape(run, right):
    seq = np.sort(rng.integers(0, 10, 12)).astype(np.float32)  # with repeats
    values = rng.integers(-1, 11, (3, 4)).astype(np.float32)
    got = run("searchsorted", [seq, values], {"right": right})
    want = np.searchsorted(seq, values, side="right" if right else "left")
    assert got.dtype == np.int64 and np.array_equal(got, want)
    zero_d = run("searchsorted", [seq, np.array(4.0, np.float32)], {"right": right})
    assert zero_d.shape == () and zero_d == np.searchsorted(seq, 4.0, "right" if right else "left")


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("n", [1, 2, 7, 16])
def test_searchsorted_rows_match_numpy_row_by_row(run, right, n):
    seq = np.sort(rng.integers(0, 6, (2, 3, n)), axis=-1).astype(np.int64)
    values = rng.integers(-1, 8, (2, 3, 5)).astype(np.int64)
    got = run("searchsorted", [seq, values], {"right": right, "dtype": "int32"})
    side = "right" if right else "left"
    want = np.stack(
        [np.searchsorted(s, v, side=side) for s, v in zip(seq.reshape(6, n), values.reshape(6, 5))]
    ).reshape(2, 3, 5)
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_searchsorted_puts_nan_values_last_on_both_paths(run):
    seq = np.array([1.0, 2.0, 3.0])
    values = np.array([np.nan, 2.0])
    assert run("searchsorted", [seq, values], {}).tolist() == [3, 1]
    rows = np.stack([seq, seq + 10])
    assert run("searchsorted", [rows, np.stack([values, values])], {}).tolist() == [[3, 1], [3, 0]]


def test_searchsorted_in_empty_rows_gives_zeros(run):
    got = run("searchsorted", [np.zeros((2, 0)), np.ones((2, 3))], {"right": True})
    assert got.tolist() == [[0, 0, 0], [0, 0, 0]]
