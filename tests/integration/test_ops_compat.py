"""PyTorch's other spellings, in-place forms and composed methods (``gt/ops/compat.py`` and
``gt/ops/compat_inplace.py``) through a real local cluster, against NumPy. Derivatives are checked
in ``test_autograd_ops.py`` and against PyTorch in the differential programs
(``tests/api/programs/tensor_api_more.py``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import gt
from gt.errors import ShapeError

pytestmark = pytest.mark.timeout(120)
rng = np.random.default_rng(11)


def _close(t, want, **kw):
    np.testing.assert_allclose(t.numpy(), want, **{"rtol": 1e-6, "atol": 1e-7, **kw})


def _eq(t, want):
    got = t.numpy()
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- aliases
def test_aliases_match_their_operators(conn):
    a, b = rng.standard_normal((2, 3)), rng.uniform(0.5, 2.0, (2, 3))
    x, y = gt.tensor(a), gt.tensor(b)
    _close(gt.divide(x, y), (a / b).astype(np.float32), rtol=1e-5)
    _close(x.multiply(y), (a * b).astype(np.float32), rtol=1e-5)
    _close(gt.subtract(x, y, alpha=2), (a - 2 * b).astype(np.float32), rtol=1e-5)
    _close(gt.negative(x), -a.astype(np.float32))
    _close(gt.absolute(x), np.abs(a).astype(np.float32))
    _close(gt.true_divide(gt.tensor([1, 2]), 4), [0.25, 0.5])
    for name, fn in [("greater", np.greater), ("greater_equal", np.greater_equal),
                     ("less", np.less), ("less_equal", np.less_equal),
                     ("not_equal", np.not_equal)]:  # fmt: skip
        _eq(getattr(gt, name)(x, 0.1), fn(a.astype(np.float32), np.float32(0.1)))
    assert gt.positive(x) is x
    with pytest.raises(TypeError, match="bool"):
        gt.positive(gt.tensor([True]))
    i = np.array([-7, 7, 9, -2])
    _eq(gt.tensor(i).floor_divide(2), i // 2)
    _eq(gt.tensor(i).remainder(3), np.remainder(i, 3))
    _eq(gt.remainder(gt.tensor(i), gt.tensor([3, -3, 4, 5])), np.remainder(i, [3, -3, 4, 5]))


def test_divide_rounding_modes(conn):
    i = np.array([-7, 7, 9, -2, 0])
    _eq(gt.tensor(i).divide(2, rounding_mode="trunc"), np.trunc(i / 2).astype(np.int64))
    _eq(gt.tensor(i).divide(gt.tensor([-2, -2, 4, 3, 1]), rounding_mode="trunc"),
        np.trunc(i / np.array([-2, -2, 4, 3, 1])).astype(np.int64))  # fmt: skip
    _eq(gt.divide(gt.tensor(i), 2, rounding_mode="floor"), i // 2)
    f = gt.tensor([-7.5, 7.5])
    out = f.divide(2, rounding_mode="trunc")
    assert out.dtype == "float32" and out.tolist() == [-3.0, 3.0]


def test_transposes_ravel_and_their_errors(conn):
    a = rng.standard_normal((2, 3, 4))
    x = gt.tensor(a, dtype="float64")
    _close(x.swapdims(0, 2), a.swapaxes(0, 2))
    _close(gt.swapdims(x, 1, 2), a.swapaxes(1, 2))
    _close(x.mH, a.swapaxes(1, 2))
    _close(gt.adjoint(x), a.swapaxes(1, 2))
    _close(x[0].H, a[0].T)
    assert gt.tensor(2.0).H.item() == 2.0
    _close(gt.ravel(x.transpose(0, 2)), a.transpose(2, 1, 0).reshape(-1))
    for bad in (lambda: x.H, lambda: x[0, 0].mH, lambda: x[0, 0].adjoint()):
        with pytest.raises(ShapeError, match="matrices"):
            bad()
    y = x.clone()
    y.transpose_(0, 1)
    assert y.shape == (3, 2, 4)
    y.swapdims_(1, 2)
    _close(y, a.transpose(1, 2, 0))


def test_xlogy_method_is_zero_where_x_is_zero_and_nan_where_y_is(conn):
    x, y = gt.tensor([0.0, 0.0, 2.0, 1.5]), gt.tensor([0.0, math.nan, 3.0, 0.5])
    got = x.xlogy(y).numpy()
    assert got[0] == 0.0 and math.isnan(got[1])
    np.testing.assert_allclose(got[2:], [2 * math.log(3), 1.5 * math.log(0.5)], rtol=1e-6)
    _close(gt.tensor([0, 1, 2]).xlogy(2.0), [0.0, math.log(2), 2 * math.log(2)])


# ----------------------------------------------------------------------------- in-place forms
INPLACE = [
    ("asin_", (), np.arcsin), ("atan_", (), np.arctan), ("arcsinh_", (), np.arcsinh),
    ("atanh_", (), np.arctanh), ("cosh_", (), np.cosh), ("sinh_", (), np.sinh),
    ("tan_", (), np.tan), ("erf_", (), np.vectorize(math.erf)),
    ("erfc_", (), np.vectorize(math.erfc)), ("exp2_", (), np.exp2), ("expm1_", (), np.expm1),
    ("lgamma_", (), lambda a: np.array([math.lgamma(v) if v else math.inf for v in a])), ("deg2rad_", (), np.deg2rad),
    ("rad2deg_", (), np.rad2deg), ("frac_", (), lambda a: a - np.trunc(a)),
    ("fix_", (), np.trunc), ("sgn_", (), np.sign), ("hypot_", (0.5,), lambda a: np.hypot(a, 0.5)),
    ("copysign_", (-1.0,), lambda a: -np.abs(a)), ("fmod_", (0.3,), lambda a: np.fmod(a, 0.3)),
    ("remainder_", (0.3,), lambda a: np.remainder(a, 0.3)),
    ("floor_divide_", (0.3,), lambda a: np.floor_divide(a, 0.3)),
    ("ldexp_", (3,), lambda a: a * 8), ("eq_", (0.25,), lambda a: (a == 0.25).astype(a.dtype)),
    ("lt_", (0.0,), lambda a: (a < 0).astype(a.dtype)),
    ("greater_equal_", (0.0,), lambda a: (a >= 0).astype(a.dtype)),
    ("logical_not_", (), lambda a: (a == 0).astype(a.dtype)),
    ("logical_or_", (0.0,), lambda a: (a != 0).astype(a.dtype)),
    ("multiply_", (3.0,), lambda a: a * 3), ("subtract_", (1.0,), lambda a: a - 1),
    ("divide_", (4.0,), lambda a: a / 4), ("true_divide_", (2.0,), lambda a: a / 2),
    ("negative_", (), np.negative), ("absolute_", (), np.abs),
    ("nan_to_num_", (), np.nan_to_num), ("xlogy_", (2.0,), lambda a: a * math.log(2)),
    ("cumprod_", (0,), np.cumprod),
    ("heaviside_", lambda: (gt.tensor(0.5, dtype="float64"),), lambda a: np.heaviside(a, 0.5)),
]  # fmt: skip


@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_form_keeps_the_object_and_matches_numpy(conn, case):
    name, args, fn = case
    a = np.array([-0.75, -0.25, 0.0, 0.25, 0.5, 0.875])
    x = gt.tensor(a, dtype="float64")
    ident, version = id(x), x._version
    out = getattr(x, name)(*(args() if callable(args) else args))
    assert out is x and id(x) == ident and x._version > version and x.dtype == "float64"
    _close(x, fn(a.copy()), rtol=1e-6, atol=1e-12)


def test_inplace_forms_refuse_a_wider_dtype_and_a_broadcast(conn):
    i = gt.tensor([1, 2, 3])
    with pytest.raises(TypeError, match="can't be cast"):
        i.asin_()
    with pytest.raises(TypeError, match="can't be cast"):
        i.hypot_(gt.tensor([1.0, 2.0, 3.0]))
    assert i.tolist() == [1, 2, 3]
    with pytest.raises(TypeError, match="float_power_"):
        gt.tensor([1.0]).float_power_(2)
    f = gt.tensor([1.0, 2.0], dtype="float64")
    f.float_power_(2)
    assert f.tolist() == [1.0, 4.0]
    i.gt_(1)  # a bool result fits any dtype
    assert i.dtype == "int64" and i.tolist() == [0, 1, 1]
    x = gt.ones(3)
    with pytest.raises(ShapeError, match="doesn't match the broadcast shape"):
        x.hypot_(gt.ones(2, 3))


def test_inplace_forms_follow_autograd_rules(conn):
    leaf = gt.tensor([0.1, 0.2], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.asin_()
    with gt.no_grad():
        w = leaf.clone()  # (under no_grad: a tensor that does not require grad)
        w.sinh_()
    assert not w.requires_grad
    y = leaf * 2
    y.atan_()
    y.hypot_(leaf)
    y.sum().backward()
    a = np.array([0.1, 0.2], dtype=np.float32)
    t = np.arctan(2 * a)
    want = (t * 2 / (1 + 4 * a * a) + a) / np.hypot(t, a)
    np.testing.assert_allclose(leaf.grad.numpy(), want, rtol=1e-5)
    x = gt.tensor([0.5, 0.25], requires_grad=True)
    z = x * 1
    s = z * z  # saves z
    z.tan_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (s + z).sum().backward()


# ----------------------------------------------------------------------------- reductions
def test_aminmax_fmax_fmin(conn):
    a = rng.standard_normal((3, 4))
    x = gt.tensor(a, dtype="float64")
    lo, hi = gt.aminmax(x)
    assert lo.item() == a.min() and hi.item() == a.max()
    r = x.aminmax(dim=1, keepdim=True)
    _close(r.min, a.min(1, keepdims=True))
    _close(r.max, a.max(1, keepdims=True))
    p, q = np.array([1.0, np.nan, 3.0, np.nan]), np.array([np.nan, 2.0, 1.0, np.nan])
    _close(gt.fmax(gt.tensor(p), gt.tensor(q)), np.fmax(p, q).astype(np.float32))
    _close(gt.tensor(p).fmin(gt.tensor(q)), np.fmin(p, q).astype(np.float32))
    _eq(gt.fmax(gt.tensor([1, 5]), gt.tensor([3, 2])), [3, 5])


def test_nanmedian_ignores_nans(conn):
    a = rng.standard_normal((4, 5))
    a[0, 1] = a[2, :] = a[3, 0] = np.nan
    x = gt.tensor(a, dtype="float64")
    assert x.nanmedian().item() == np.sort(a[~np.isnan(a)])[(np.sum(~np.isnan(a)) - 1) // 2]
    values, idx = gt.nanmedian(x, 1)
    for r in (0, 1, 3):
        row = a[r]
        want = np.sort(row[~np.isnan(row)])[(np.sum(~np.isnan(row)) - 1) // 2]
        assert values.numpy()[r] == want and row[idx.numpy()[r]] == want
    assert math.isnan(values.numpy()[2])
    assert x.nanmedian(0, keepdim=True).values.shape == (1, 5)
    _eq(gt.tensor([3, 1, 2, 7]).nanmedian(0).values, np.int64(2))


def test_mode_is_the_smallest_most_frequent_value_at_its_last_index(conn):
    a = np.array([[1, 5, 5, 2, 1], [7, 7, 0, 0, 3], [4, 4, 4, 9, 4]])
    values, idx = gt.tensor(a).mode(1)
    _eq(values, [1, 0, 4])
    _eq(idx, [4, 3, 4])
    v, i = gt.mode(gt.tensor(a.T.astype(np.float64)), 0, keepdim=True)
    _eq(v, [[1.0, 0.0, 4.0]])
    _eq(i, [[4, 3, 4]])


# ----------------------------------------------------------------------------- splitting
def test_tensor_split_and_friends(conn):
    a = np.arange(24).reshape(2, 3, 4)
    x = gt.tensor(a)
    for spec, dim in [(3, 2), ([1, 3], 2), ([0, 5], 1), (2, 1)]:
        got = x.tensor_split(spec, dim)
        want = np.array_split(a, spec, dim)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _eq(g, w)
    _eq(gt.tensor_split(x, gt.tensor(2), 0)[1], a[1:])
    _eq(x.tensor_split(gt.tensor([1, 2]), 1)[1], a[:, 1:2])
    for g, w in zip(gt.hsplit(x, 3), np.hsplit(a, 3)):
        _eq(g, w)
    for g, w in zip(x.vsplit([1]), np.vsplit(a, [1])):
        _eq(g, w)
    for g, w in zip(gt.dsplit(x, 2), np.dsplit(a, 2)):
        _eq(g, w)
    _eq(gt.hsplit(gt.tensor([1, 2, 3, 4]), 2)[1], [3, 4])
    with pytest.raises(RuntimeError, match="not divisible"):
        x.hsplit(2)
    with pytest.raises(ShapeError, match="at least 3"):
        gt.tensor(a[0]).dsplit(2)
    parts = x.split_with_sizes([1, 3], dim=2)
    _eq(parts[1], a[:, :, 1:])
    _eq(gt.fliplr(x), np.fliplr(a))
    _eq(x.flipud(), np.flipud(a))
    with pytest.raises(ShapeError):
        gt.tensor([1, 2]).fliplr()


def test_unfold_makes_sliding_windows(conn):
    a = np.arange(30.0).reshape(3, 10)
    x = gt.tensor(a)
    want = np.lib.stride_tricks.sliding_window_view(a, 3, axis=1)[:, ::2]
    _eq(x.unfold(1, 3, 2), want.astype(np.float32))
    _eq(
        x.unfold(0, 2, 1), np.lib.stride_tricks.sliding_window_view(a, 2, axis=0).astype(np.float32)
    )
    _eq(gt.tensor(5.0).unfold(0, 1, 1), [5.0])
    with pytest.raises(RuntimeError, match="maximum size"):
        x.unfold(0, 4, 1)


# ----------------------------------------------------------------------------- indexing
def test_take_select_narrow_copy_and_index_copy(conn):
    a = rng.standard_normal((3, 4))
    x = gt.tensor(a, dtype="float64")
    idx = np.array([[0, 11], [-1, 5]])
    _close(gt.take(x, gt.tensor(idx)), np.take(a, idx))
    _close(x.select(1, -1), a[:, -1])
    _close(gt.narrow_copy(x, 1, 1, 2), a[:, 1:3])
    src = rng.standard_normal((3, 2))
    out = x.index_copy(1, gt.tensor([3, 0]), gt.tensor(src))
    want = a.copy()
    want[:, [3, 0]] = src
    _close(out, want)
    x.index_copy_(0, gt.tensor([1]), gt.zeros(1, 4, dtype="float64"))
    a[1] = 0
    _close(x, a)


def test_masked_scatter_fills_in_order(conn):
    a = np.arange(6.0).reshape(2, 3)
    mask = np.array([[True, False, True], [False, True, True]])
    src = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    want = a.copy()
    want[mask] = src[: mask.sum()]
    _eq(gt.tensor(a).masked_scatter(gt.tensor(mask), gt.tensor(src)), want.astype(np.float32))
    row = np.array([True, False, True])  # broadcast over the rows
    want = a.copy()
    want[np.broadcast_to(row, a.shape)] = src[:4]
    x = gt.tensor(a)
    x.masked_scatter_(gt.tensor(row), gt.tensor(src))
    _eq(x, want.astype(np.float32))


def test_index_put_and_put(conn):
    a = np.zeros((3, 2))
    x = gt.tensor(a)
    rows = np.array([0, 2, 0])
    want = a.copy()
    np.add.at(want, rows, 1.5)
    _eq(x.index_put((gt.tensor(rows),), gt.tensor(1.5), accumulate=True), want.astype(np.float32))
    want = a.copy()
    want[[1, 2], [0, 1]] = [7.0, 8.0]
    _eq(x.index_put((gt.tensor([1, 2]), gt.tensor([0, 1])), gt.tensor([7.0, 8.0])), want)
    want = np.arange(6).reshape(2, 3)
    np.put(want, [0, 5], [10, 20])
    _eq(gt.arange(6).reshape(2, 3).put(gt.tensor([0, 5]), gt.tensor([10, 20])), want)
    y = gt.zeros(4)
    y.put_(gt.tensor([1, 1]), gt.tensor([2.0, 3.0]), accumulate=True)
    assert y.tolist() == [0.0, 5.0, 0.0, 0.0]


def test_select_slice_and_diagonal_scatter(conn):
    a = rng.standard_normal((4, 3))
    x = gt.tensor(a, dtype="float64")
    want = a.copy()
    want[:, 1] = [1.0, 2.0, 3.0, 4.0]
    _close(gt.select_scatter(x, gt.tensor([1.0, 2.0, 3.0, 4.0], dtype="float64"), 1, 1), want)
    want = a.copy()
    want[1:4:2] = 0.0
    _close(x.slice_scatter(gt.zeros(2, 3, dtype="float64"), 0, 1, 4, 2), want)
    for offset in (-1, 0, 1):
        want = a.copy()
        n = len(np.diagonal(a, offset))
        r0, c0 = max(0, -offset), max(0, offset)
        want[np.arange(n) + r0, np.arange(n) + c0] = -np.arange(1.0, n + 1)
        got = x.diagonal_scatter(gt.tensor(-np.arange(1.0, n + 1)), offset)
        _close(got, want)
    b = rng.standard_normal((2, 3, 3))
    src = np.arange(6.0).reshape(3, 2)  # the diagonals over dims 0 and 2, one row per b[:, i]
    want = b.copy()
    for i in range(3):
        for j in range(2):
            want[j, i, j] = src[i, j]
    _close(gt.diagonal_scatter(gt.tensor(b), gt.tensor(src, dtype="float64"), 0, 0, 2), want)


# ----------------------------------------------------------------------------- products
def test_add_products_mv_vdot_and_chain_matmul(conn):
    m, v, w = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal(3)
    b1, b2 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    c = rng.standard_normal((3, 5))
    T = lambda a: gt.tensor(a, dtype="float64")  # noqa: E731
    _close(gt.addmv(T(w), T(m), T(v), beta=0.5, alpha=2), 0.5 * w + 2 * m @ v)
    _close(T(m).mv(T(v)), m @ v)
    _close(gt.addr(T(m), T(w), T(v), alpha=-1), m - np.outer(w, v))
    _close(T(c).addbmm(T(b1), T(b2)), c + (b1 @ b2).sum(0))
    _close(gt.baddbmm(T(c), T(b1), T(b2), beta=2, alpha=0.5), 2 * c + 0.5 * (b1 @ b2))
    nan = T(np.full((3, 5), np.nan))
    _close(nan.addbmm(T(b1), T(b2), beta=0), (b1 @ b2).sum(0))  # beta=0 ignores self
    _close(gt.vdot(T(v), T(v * 2)), np.vdot(v, v * 2))
    _close(gt.chain_matmul(T(m), T(b2[0]), T(c.T)), m @ b2[0] @ c.T)
    x = T(w.copy())
    x.addmv_(T(m), T(v))
    _close(x, w + m @ v)
    with pytest.raises(ShapeError):
        T(m).mv(T(m))


def test_matrix_power_and_logdet(conn):
    a = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    x = gt.tensor(a, dtype="float64")
    for n in (0, 1, 3, -2):
        _close(gt.matrix_power(x, n), np.linalg.matrix_power(a, n), rtol=1e-9)
    spd = a[0] @ a[0].T + np.eye(3)
    _close(gt.tensor(spd).logdet(), np.log(np.linalg.det(spd)), rtol=1e-5)
    got = gt.logdet(gt.tensor([[0.0, 1.0], [1.0, 0.0]])).item()  # det = -1
    assert math.isnan(got)
    assert gt.tensor([[1.0, 2.0], [2.0, 4.0]]).logdet().item() == -math.inf
    with pytest.raises(ShapeError):
        gt.ones(2, 3).matrix_power(2)


# ----------------------------------------------------------------------------- others
def test_diagflat_sum_to_size_renorm_mvlgamma(conn):
    a = rng.standard_normal((2, 2))
    x = gt.tensor(a, dtype="float64")
    _close(gt.diagflat(x, -1), np.diagflat(a, -1))
    b = rng.standard_normal((2, 3, 4))
    y = gt.tensor(b, dtype="float64")
    _close(y.sum_to_size(3, 1), b.sum(0).sum(1, keepdims=True))
    _close(y.sum_to_size((1, 1, 4)), b.sum((0, 1), keepdims=True))
    with pytest.raises(RuntimeError, match="not expandable"):
        y.sum_to_size(2, 4)
    norms = np.sqrt((b**2).sum((0, 2), keepdims=True))
    want = b * np.where(norms > 1.5, 1.5 / (norms + 1e-7), 1.0)
    _close(gt.renorm(y, 2, 1, 1.5), want)
    y.renorm_(2, 1, 1.5)
    _close(y, want)
    with pytest.raises(ShapeError):
        gt.ones(3).renorm(2, 0, 1.0)
    p = np.array([1.5, 2.0, 4.0])
    want = 3 * 2 / 4 * math.log(math.pi) + sum(
        np.vectorize(math.lgamma)(p - i / 2) for i in range(3)
    )
    _close(gt.tensor(p).mvlgamma(3), want)


def test_unique_consecutive(conn):
    a = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    values, inverse, counts = gt.unique_consecutive(gt.tensor(a), return_inverse=True,
                                                    return_counts=True)  # fmt: skip
    _eq(values, [1, 2, 3, 1, 2])
    _eq(inverse, [0, 0, 1, 1, 2, 3, 3, 4])
    _eq(counts, [2, 2, 1, 2, 1])
    m = np.array([[1, 1], [1, 1], [2, 3], [1, 1]])
    values, counts = gt.tensor(m).unique_consecutive(return_counts=True, dim=0)
    _eq(values, [[1, 1], [2, 3], [1, 1]])
    _eq(counts, [2, 1, 1])
    values, inverse = gt.tensor(m).unique_consecutive(return_inverse=True, dim=1)
    _eq(values, m)
    _eq(inverse, [0, 1])
    _eq(gt.tensor(a.reshape(2, 4)).unique_consecutive(), [1, 2, 3, 1, 2])


def test_predicates_sizes_and_conversions(conn):
    f, i = gt.ones(2, 3), gt.tensor([1, -2], dtype="int32")
    assert f.is_signed() and i.is_signed() and not i.byte().is_signed()
    assert not gt.tensor([True]).is_signed() and not gt.is_complex(f)
    assert f.nbytes == 24 and f.itemsize == 4 and i.nbytes == 8 and f.double().itemsize == 8
    assert gt.is_same_size(f, gt.zeros(2, 3)) and not f.is_same_size(i)
    assert f.is_contiguous() and gt.tensor([2.0]).is_nonzero() and not gt.is_nonzero(gt.tensor(0))
    for bad, msg in [(f, "more than one value"), (gt.zeros(0), "no values")]:
        with pytest.raises(RuntimeError, match=msg):
            bad.is_nonzero()
    assert f.bfloat16().dtype == "bfloat16" and i.char().dtype == "int8"
    assert gt.tensor([255.0, 3.0]).byte().tolist() == [255, 3]
    short = gt.tensor([3.7, -40000.0]).short()
    assert short.dtype == "int16" and short.tolist()[0] == 3


def test_stacking_functions(conn):
    v, w = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    m = np.arange(6.0).reshape(3, 2)
    T = gt.tensor
    _eq(gt.column_stack([T(v), T(m), T(w)]), np.column_stack([v, m, w]).astype(np.float32))
    _eq(gt.hstack([T(v), T(w)]), np.hstack([v, w]).astype(np.float32))
    _eq(gt.hstack([T(m), T(m)]), np.hstack([m, m]).astype(np.float32))
    _eq(gt.vstack([T(v), T(w)]), np.vstack([v, w]).astype(np.float32))
    _eq(gt.row_stack([T(m.T), T(v)]), np.vstack([m.T, v]).astype(np.float32))
    _eq(gt.dstack([T(v), T(w)]), np.dstack([v, w]).astype(np.float32))
    _eq(gt.dstack([T(m), T(m)]), np.dstack([m, m]).astype(np.float32))


def test_combinations_and_cartesian_prod(conn):
    v = np.array([10, 20, 30, 40])
    for r, rep in [(2, False), (3, False), (2, True)]:
        pick = itertools.combinations_with_replacement if rep else itertools.combinations
        want = np.array([[v[i] for i in c] for c in pick(range(4), r)])
        _eq(gt.combinations(gt.tensor(v), r, with_replacement=rep), want)
    assert gt.combinations(gt.tensor(v), 0).shape == (0,)
    assert gt.combinations(gt.tensor([1, 2]), 3).shape == (0, 3)
    a, b = np.array([1, 2]), np.array([5, 6, 7])
    _eq(gt.cartesian_prod(gt.tensor(a), gt.tensor(b)), np.array(list(itertools.product(a, b))))
    _eq(gt.cartesian_prod(gt.tensor(a)), a)


def test_statistics_and_membership_functions(conn):
    a = rng.standard_normal((3, 4))
    x = gt.tensor(a, dtype="float64")
    s, m = gt.std_mean(x, 1)
    _close(s, a.std(1, ddof=1))
    _close(m, a.mean(1))
    v, m = gt.var_mean(x, 0, keepdim=True, correction=0)
    _close(v, a.var(0, keepdims=True))
    _close(m, a.mean(0, keepdims=True))
    e, t = np.array([[1, 2], [3, 4]]), np.array([4, 1, 9])
    _eq(gt.isin(gt.tensor(e), gt.tensor(t)), np.isin(e, t))
    _eq(gt.isin(gt.tensor(e), 3, invert=True), ~np.isin(e, 3))
    _close(gt.rsub(x, 1.0, alpha=2), 1.0 - 2 * a)
    _close(gt.clamp_min(x, 0.0), np.maximum(a, 0.0))


def test_tensor_constructors(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    assert gt.as_tensor(x) is x and gt.asarray(x) is x
    y = gt.as_tensor(x, dtype="float64")
    assert y.dtype == "float64" and y.requires_grad
    c = gt.asarray(x, copy=True)
    assert c is not x and c.tolist() == [1.0, 2.0]
    assert gt.as_tensor([1, 2]).dtype == "int64" and gt.asarray([1.0]).dtype == "float32"
    assert gt.asarray(np.array([1.5])).dtype == "float64"
    assert gt.asarray([1.0], requires_grad=True).requires_grad
    _eq(gt.tril_indices(3, 4, 1), np.stack(np.tril_indices(3, 1, 4)))
    _eq(gt.triu_indices(4, 3, -1), np.stack(np.triu_indices(4, -1, 3)))
    assert gt.triu_indices(3, 3, dtype="int32").dtype == "int32"
