"""Bitwise ops, ``searchsorted``/``bucketize``, ``quantile``/``nanquantile`` and ``unique`` through a
real local cluster, against NumPy, with PyTorch's dtype rules written out where NumPy's differ.
Every test runs twice: on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt
from gt.errors import ShapeError

pytestmark = pytest.mark.timeout(90)
rng = np.random.default_rng(11)
MODES = ("linear", "lower", "higher", "midpoint", "nearest")


cluster = each_backend_cluster(workers=2)


# ------------------------------------------------------------------ bitwise
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_integer_operators_match_numpy_and_keep_the_dtype(conn, dtype):
    a = rng.integers(0 if dtype == "uint8" else -50, 100, (3, 4)).astype(dtype)
    b = rng.integers(0, 100, (4,)).astype(dtype)
    x, y = gt.tensor(a), gt.tensor(b)
    cases = {
        "and": (x & y, a & b),
        "or": (x | y, a | b),
        "xor": (x ^ y, a ^ b),
        "not": (~x, ~a),
        "and_int": (x & 6, a & np.array(6, dtype)),
        "rand_int": (6 | x, a | np.array(6, dtype)),
        "shl": (x << 2, a << np.array(2, dtype)),
        "shr": (x >> (y % 5), a >> (b % 5)),
        "fn": (gt.bitwise_xor(x, y), a ^ b),
        "method": (x.bitwise_left_shift(1), a << np.array(1, dtype)),
    }
    for name, (got, want) in cases.items():
        assert got.dtype == dtype, name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)


def test_python_ints_wrap_into_the_tensor_dtype(conn):
    x = gt.tensor(np.array([1, -2, 127], np.int8))
    assert (x & 255).tolist() == [1, -2, 127] and (x | 300).tolist() == [45, -2, 127]
    assert (x << 3).tolist() == [8, -16, -8] and (x << 8).tolist() == [0, 0, 0]
    assert (x >> 70).tolist() == [0, -1, 0] and (x << -1).tolist() == [0, 0, 0]
    assert (3 << gt.tensor([1, 2])).tolist() == [6, 12]


def test_mixed_dtypes_promote_as_pytorch(conn):
    u8 = gt.tensor(np.array([5, 6], np.uint8))
    i64 = gt.tensor([3, 3])
    assert (u8 & i64).dtype == "int64"
    assert (u8 & gt.tensor(300)).dtype == "uint8"  # a 0-d tensor of the same category
    assert (gt.tensor(np.array([1, 2], np.int32)) ^ gt.tensor(7)).tolist() == [6, 5]
    flags = gt.tensor([True, False])
    assert (flags & 1).dtype == "int64" and (flags & 1).tolist() == [1, 0]
    assert (flags & u8).dtype == "uint8" and (flags & u8).tolist() == [1, 0]
    assert (u8 & np.array([1, 3], np.uint8)).tolist() == [1, 2]
    assert (flags << 1).dtype == "int64" and (flags << 1).tolist() == [2, 0]  # int64 shift
    assert (flags >> gt.tensor([0, 1])).tolist() == [1, 0]


def test_bool_operators_stay_logical(conn):
    a = gt.tensor([True, True, False, False])
    b = gt.tensor([True, False, True, False])
    for got, want in (
        (a & b, [True, False, False, False]),
        (a | b, [True, True, True, False]),
        (a ^ b, [False, True, True, False]),
        (~a, [False, False, True, True]),
        (a & True, [True, True, False, False]),
        (gt.bitwise_and(a, b), [True, False, False, False]),
    ):
        assert got.dtype == "bool" and got.tolist() == want


def test_logical_ops_look_at_truth_values_of_integers(conn):
    a, b = gt.tensor([0, 2, 4]), gt.tensor([1, 0, 4])
    assert gt.logical_and(a, b).tolist() == [False, False, True]
    assert gt.logical_or(a, b).tolist() == [True, True, True]
    assert a.logical_xor(b).tolist() == [True, True, False]


def test_in_place_bitwise_ops_keep_the_object_and_dtype(conn):
    x = gt.tensor(np.array([12, 10, 7], np.int32))
    same = x
    x &= 6
    x |= gt.tensor([1, 0, 0])  # int64 into int32: same category, allowed
    x ^= 2
    x <<= 1
    x >>= gt.tensor(np.array([1, 0, 1], np.int32))
    assert x is same and x.dtype == "int32" and x.tolist() == [7, 0, 4]
    assert x.bitwise_not_() is same and x.tolist() == [-8, -1, -5]
    flags = gt.tensor([True, False])
    flags |= gt.tensor([False, True])
    assert flags.tolist() == [True, True]
    with pytest.raises(TypeError, match="result type gt.int64 can't be cast to .* gt.bool"):
        flags &= gt.tensor([1, 0])


@pytest.mark.parametrize(
    "call",
    [
        lambda f, i: f & i,
        lambda f, i: i | f,
        lambda f, i: ~f,
        lambda f, i: i << 1.5,
        lambda f, i: gt.bitwise_xor(f, 1),
        lambda f, i: gt.tensor([True]) >> gt.tensor([False]),
    ],
)
def test_float_and_bool_shift_operands_raise_type_error_naming_the_op(conn, call):
    f, i = gt.tensor([1.0, 2.0]), gt.tensor([1, 2])
    with pytest.raises(TypeError, match=r'bitwise_\w+: "bitwise_\w+" is not implemented for'):
        call(f, i)


def test_bitwise_results_carry_no_gradient_but_masks_still_route_it(conn):
    w = gt.tensor([-1.0, 0.5, 3.0], requires_grad=True)
    mask = (w > 0) & (w < 2)
    assert not mask.requires_grad and not (gt.tensor([3]) & 1).requires_grad
    gt.where(mask, w * 2.0, w).sum().backward()
    assert w.grad.tolist() == [1.0, 2.0, 1.0]


# ------------------------------------------------------------------ searchsorted / bucketize
def test_searchsorted_1d_matches_numpy_on_both_sides(conn):
    seq = np.sort(rng.integers(0, 20, 15)).astype(np.float32)
    values = rng.integers(-2, 22, (4, 6)).astype(np.float32)
    s, v = gt.tensor(seq), gt.tensor(values)
    left, right = gt.searchsorted(s, v), gt.searchsorted(s, v, right=True)
    assert left.dtype == "int64" and left.shape == (4, 6)
    np.testing.assert_array_equal(left.numpy(), np.searchsorted(seq, values, "left"))
    np.testing.assert_array_equal(right.numpy(), np.searchsorted(seq, values, "right"))
    np.testing.assert_array_equal(gt.searchsorted(s, v, side="right").numpy(), right.numpy())
    scalar = gt.searchsorted(s, 7.0, out_int32=True)
    assert scalar.shape == () and scalar.dtype == "int32"
    assert scalar.item() == np.searchsorted(seq, 7.0)


def test_searchsorted_with_rows_sorter_and_promotion(conn):
    rows = np.sort(rng.normal(size=(3, 8)), axis=-1)
    values = rng.normal(size=(3, 5))
    got = gt.searchsorted(gt.tensor(rows), gt.tensor(values))
    want = np.stack([np.searchsorted(r, v) for r, v in zip(rows, values)])
    np.testing.assert_array_equal(got.numpy(), want)
    unsorted = np.array([30, 10, 20])
    order = gt.tensor(np.argsort(unsorted))
    got = gt.searchsorted(gt.tensor(unsorted), gt.tensor([15, 25, 35]), sorter=order)
    assert got.tolist() == [1, 2, 3]
    # int64 boundaries, float values: both go to float32 (PyTorch's promotion)
    assert gt.searchsorted(gt.tensor([1, 2, 3]), gt.tensor([1.5, 2.5])).tolist() == [1, 2]


def test_searchsorted_refuses_bad_arguments_at_the_call(conn):
    with pytest.raises(ShapeError, match="searchsorted: .*same leading dimensions"):
        gt.searchsorted(gt.zeros(2, 4), gt.zeros(3, 4))
    with pytest.raises(ValueError, match="searchsorted: side='left' and right=True"):
        gt.searchsorted(gt.zeros(4), gt.zeros(2), right=True, side="left")
    with pytest.raises(ValueError, match="searchsorted: sorter must be"):
        gt.searchsorted(gt.zeros(4), gt.zeros(2), sorter=gt.tensor([0, 1]))


def test_bucketize_right_false_puts_boundary_values_in_the_lower_bucket(conn):
    bounds = gt.tensor([1, 3, 5, 7, 9])
    x = gt.tensor([[3, 6, 9], [3, 6, 1]])
    assert gt.bucketize(x, bounds).tolist() == [[1, 3, 4], [1, 3, 0]]  # b[i-1] < x <= b[i]
    assert gt.bucketize(x, bounds, right=True).tolist() == [[2, 3, 5], [2, 3, 1]]
    assert gt.bucketize(4, bounds).tolist() == 2
    assert gt.bucketize(x, bounds, out_int32=True).dtype == "int32"
    with pytest.raises(ShapeError, match="bucketize: boundaries must be a 1-d tensor"):
        gt.bucketize(x, gt.zeros(2, 2))


# ------------------------------------------------------------------ quantile
@pytest.mark.parametrize("mode", MODES)
def test_quantile_matches_numpy_for_every_interpolation(conn, mode):
    a = rng.normal(size=(4, 7))
    x = gt.tensor(a)
    q = [0.0, 0.1, 0.25, 0.5, 0.9, 1.0]
    got = x.quantile(gt.tensor(q, dtype=gt.float64), dim=1, interpolation=mode)
    assert got.shape == (6, 4)
    np.testing.assert_allclose(got.numpy(), np.quantile(a, q, axis=1, method=mode), rtol=1e-12)
    flat = gt.quantile(x, 0.3, interpolation=mode)
    assert flat.shape == ()
    np.testing.assert_allclose(flat.item(), np.quantile(a, 0.3, method=mode), rtol=1e-12)


def test_quantile_shapes_with_keepdim_and_negative_dims(conn):
    x = gt.randn(2, 3, 5)
    q = gt.tensor([0.2, 0.8])
    assert x.quantile(0.5, dim=-1, keepdim=True).shape == (2, 3, 1)
    assert x.quantile(q, dim=1, keepdim=True).shape == (2, 2, 1, 5)
    assert x.quantile(q, dim=0).shape == (2, 3, 5)
    assert x.quantile(0.5, keepdim=True).shape == (1, 1, 1)
    assert gt.tensor(3.0).quantile(0.5, dim=0).shape == ()


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # (NumPy's oracle, on the all-NaN row)
def test_quantile_propagates_nan_and_nanquantile_skips_it(conn):
    a = np.array([[1.0, np.nan, 3.0, 4.0], [np.nan] * 4, [2.0, 1.0, 0.0, 5.0]], np.float32)
    x = gt.tensor(a)
    np.testing.assert_allclose(x.quantile(0.4, dim=1).numpy(), np.quantile(a, 0.4, axis=1))
    got = gt.nanquantile(x, gt.tensor([0.0, 0.4, 1.0]), dim=1).numpy()
    np.testing.assert_allclose(got, np.nanquantile(a, [0.0, 0.4, 1.0], axis=1), rtol=1e-6)


def test_quantile_gradient_reaches_the_two_neighbouring_values(conn):
    a = np.array([[3.0, 1.0, 2.0, 5.0, 4.0], [0.5, -1.0, 2.5, 0.0, 9.0]])
    x = gt.tensor(a, requires_grad=True)
    out = x.quantile(gt.tensor([0.3, 0.5], dtype=gt.float64), dim=1)
    (out * gt.tensor([[1.0], [2.0]], dtype=gt.float64)).sum().backward()
    eps, num = 1e-6, np.zeros_like(a)
    for i in np.ndindex(a.shape):  # central differences of the same objective
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps

        def f(v):
            return (np.quantile(v, [0.3, 0.5], axis=1) * [[1.0], [2.0]]).sum()

        num[i] = (f(hi) - f(lo)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), num, atol=1e-6)


@pytest.mark.parametrize(
    "call,err,match",
    [
        (lambda x: x.quantile(1.5), ValueError, r"quantile: q must be in the range \[0, 1\]"),
        (lambda x: x.quantile(gt.tensor([0.5, 2.0])), ValueError, r"q values must be in"),
        (lambda x: x.quantile(gt.tensor([0.5], dtype=gt.float64)), TypeError, "same dtype"),
        (lambda x: x.quantile(0.5, interpolation="cubic"), ValueError, "interpolation must be"),
        (lambda x: x.long().quantile(0.5), TypeError, "float or double"),
        (lambda x: x[:0].nanquantile(0.5), ValueError, "nanquantile: input tensor must be non"),
        (lambda x: x.quantile(0.5, dim=2), IndexError, "quantile"),
    ],
)
def test_quantile_argument_errors_name_the_op(conn, call, err, match):
    with pytest.raises(err, match=match):
        call(gt.tensor([1.0, 2.0, 3.0]))


# ------------------------------------------------------------------ unique
def test_unique_returns_sorted_values_inverse_and_counts(conn):
    a = np.array([[3, 1, 2], [1, 3, 3]])
    x = gt.tensor(a)
    values, inverse, counts = gt.unique(x, return_inverse=True, return_counts=True)
    assert values.tolist() == [1, 2, 3] and values.dtype == "int64"
    assert inverse.shape == (2, 3) and inverse.tolist() == [[2, 0, 1], [0, 2, 2]]
    assert counts.tolist() == [2, 1, 3]
    assert x.unique(sorted=False).tolist() == [1, 2, 3]
    only_counts = x.unique(return_counts=True)
    assert len(only_counts) == 2 and only_counts[1].tolist() == [2, 1, 3]
    nan = gt.tensor([np.nan, 1.0, np.nan]).unique(return_counts=True)
    assert nan[0].shape == (3,) and nan[1].tolist() == [1, 1, 1]  # each NaN is distinct
    assert (values + 1).tolist() == [2, 3, 4]  # an ordinary tensor on the worker


def test_unique_along_a_dim_out_of_range_raises(conn):
    with pytest.raises(IndexError, match="unique"):
        gt.tensor([[1, 2], [1, 2]]).unique(dim=2)


# ------------------------------------------------------------------ on sharded inputs
def test_the_ops_give_the_same_results_on_row_sharded_inputs(conn):
    a = rng.integers(-1000, 1000, (64, 16))
    f = rng.normal(size=(64, 16)).astype(np.float32)
    gt.load_config({"rows": {"shard": {"axis": 0}}})
    try:
        with gt.signal.context("rows"):
            x, y = gt.tensor(a), gt.tensor(f)
            mixed = ((x & 0xFF) ^ (x >> 3)) | (x << 2)
            bins = gt.bucketize(y, gt.tensor([-1.0, 0.0, 1.0]))
            rows = gt.searchsorted(y.sort(-1).values, gt.zeros(64, 1))
            med = y.quantile(gt.tensor([0.25, 0.5]), dim=1)
        np.testing.assert_array_equal(mixed.numpy(), ((a & 0xFF) ^ (a >> 3)) | (a << 2))
        np.testing.assert_array_equal(bins.numpy(), np.searchsorted([-1.0, 0.0, 1.0], f))
        np.testing.assert_array_equal(rows.numpy()[:, 0], (f < 0).sum(1))
        np.testing.assert_allclose(med.numpy(), np.quantile(f, [0.25, 0.5], axis=1), rtol=1e-5)
    finally:
        gt.config.clear()
