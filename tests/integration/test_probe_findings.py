"""What grid probes against PyTorch 2.13 found on Dec 6 (dtypes, special values, empty and 0-d
shapes), each written out as PyTorch behaves: exact ``log2``/``log10``/``exp2``/``sinh``/``cosh``/
``hypot`` kernels, NaN through the shrink activations and ``histc``, in-place ops that refuse a
result their dtype cannot hold, ``//=`` and ``%=`` in place, an empty ``dim`` that reduces every
dimension, 0-d results that stay 0-d, half ``erf`` data in half, ``alpha`` terms in the sum's
dtype, and NumPy bools as operands. Every test runs on NumPy workers and on workers whose CuPy is
the test double."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt
from gt.errors import DtypeError

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)
F = gt.nn.functional
NAN, INF = float("nan"), float("inf")


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values, NaN where NaN, and the same sign of zero."""
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_base_2_and_10_functions_are_exact_where_the_answer_is(conn, dtype):
    x = gt.tensor([3.0, 30.0, -1.0, 0.0], dtype=dtype)
    _same(gt.exp2(x).numpy(), np.array([8.0, 2.0**30, 0.5, 1.0], dtype))
    p2 = gt.tensor([8.0, 1024.0, 0.5], dtype=dtype)
    _same(gt.log2(p2).numpy(), np.array([3.0, 10.0, -1.0], dtype))
    assert gt.floor(gt.log2(p2)).tolist() == [3.0, 10.0, -1.0]  # (log2(8) was 2.9999999999999996)
    p10 = gt.tensor([1000.0, 1e-3, 10.0], dtype=dtype)
    _same(gt.log10(p10).numpy(), np.array([3.0, -3.0, 1.0], dtype))
    assert gt.log2(gt.tensor([8, 2])).dtype == gt.float32  # (integers become float32)


def test_sinh_cosh_and_hypot_keep_tiny_and_huge_values(conn):
    x = gt.tensor([1e-30, 1e-7, -0.0, 89.0])
    _same(gt.sinh(x).numpy()[:3], np.array([1e-30, 1e-7, -0.0], np.float32))
    assert math.isfinite(gt.cosh(x).tolist()[3])  # 2.2e38: exp(89) / 2 fits, exp(89) does not
    a = gt.tensor([1e20, 1e-30, INF, 3.0])
    b = gt.tensor([0.0, 0.0, NAN, 4.0])
    _same(gt.hypot(a, b).numpy(), np.array([1e20, 1e-30, INF, 5.0], np.float32))


def test_the_exact_kernels_have_pytorchs_gradients_and_node_names(conn):
    a = gt.tensor([0.5, 2.0, 3.0], requires_grad=True)
    b = gt.tensor([1.0, 1.0, 4.0], requires_grad=True)
    outs = [gt.log2(a), gt.log10(a), gt.exp2(a), gt.sinh(a), gt.cosh(a), gt.hypot(a, b)]
    assert [o.grad_fn.name() for o in outs] == [
        "Log2Backward0", "Log10Backward0", "Exp2Backward0", "SinhBackward0", "CoshBackward0",
        "HypotBackward0",
    ]  # fmt: skip
    sum(o.sum() for o in outs).backward()
    v, w = np.array([0.5, 2.0, 3.0]), np.array([1.0, 1.0, 4.0])
    h = np.hypot(v, w)
    want_a = 1 / (v * np.log(2)) + 1 / (v * np.log(10)) + 2**v * np.log(2) + np.cosh(v)
    want_a += np.sinh(v) + v / h
    np.testing.assert_allclose(a.grad.numpy(), want_a, rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), w / h, rtol=1e-6)


def test_half_erf_is_computed_and_stored_in_half(conn):
    x = gt.tensor([0.5, 1.0], dtype=gt.float16)
    for out in (gt.erf(x), gt.special.ndtr(x)):
        assert out.numpy().dtype == np.float16  # (the fallback's float64 went out as float16)
    assert gt.erf(x).tolist() == [0.5205078125, 0.8427734375]


def test_shrink_activations_and_threshold_keep_nan(conn):
    x = gt.tensor([NAN, 0.2, -0.7, 0.9])
    for out in (F.softshrink(x, 0.5), F.hardshrink(x, 0.5), F.threshold(x, 0.5, -7.0)):
        assert math.isnan(out.tolist()[0])
    assert F.threshold(x, 0.5, -7.0).tolist()[1:] == [-7.0, -7.0, pytest.approx(0.9)]


def test_histc_counts_nothing_for_nan_and_leaves_the_connection_healthy(conn):
    x = gt.tensor([NAN, 1.0, 2.0, 2.5])
    assert gt.histc(x, bins=4, min=0, max=4).tolist() == [0.0, 1.0, 2.0, 0.0]
    gt.sync()  # (the NaN's index was INT64_MIN: an error at every later sync)


def test_an_in_place_op_refuses_a_result_its_dtype_cannot_hold(conn):
    for op in (
        lambda: gt.tensor([4, 9]).sqrt_(),
        lambda: gt.tensor([4, 9]).clamp_(1.5, 4.5),
        lambda: gt.tensor([4, 9]).exp2_(),
        lambda: gt.tensor([True]).bitwise_and_(3),
    ):
        with pytest.raises(DtypeError, match="can't be cast to the desired output type"):
            op()
    assert gt.tensor([4, 9]).clamp_(1, 5).tolist() == [4, 5]
    assert gt.tensor([1, 2], dtype=gt.int8).cumsum_(0).tolist() == [1, 3]


def test_floor_division_and_remainder_assignments_change_the_tensor(conn):
    x = gt.tensor([5, 7], dtype=gt.int8)
    alias = x
    x //= gt.tensor([2, 2])
    assert x is alias and x.dtype == gt.int8 and alias.tolist() == [2, 3]
    y = gt.tensor([5, 7])
    y_alias = y
    y %= 3
    assert y is y_alias and y.tolist() == [2, 1]


def test_an_empty_dim_reduces_every_dimension_and_a_0d_tensor_takes_dim_0(conn):
    x = gt.tensor([[1.0, -2.0, 3.5], [4.0, 0.0, -6.0]])
    assert x.sum(dim=()).shape == () and x.sum(dim=()).tolist() == 0.5
    assert x.mean(dim=[]).tolist() == pytest.approx(0.5 / 6)
    assert x.amax(dim=()).tolist() == 4.0
    assert x.std(dim=()).tolist() == pytest.approx(float(np.std(x.numpy(), ddof=1)))
    assert x.logsumexp(dim=()).shape == ()
    assert x.any(dim=()).shape == (2, 3)  # (PyTorch's any reduces nothing over an empty dim)
    s = gt.tensor(2.5)
    assert s.mean(dim=0).tolist() == 2.5 and s.var(dim=-1, correction=0).tolist() == 0.0


def test_0d_results_stay_0d(conn):
    for out in (gt.tensor(2.0).cumsum(0), gt.tensor(2).cumsum(-1), gt.tensor(True).cumsum(0)):
        assert out.shape == () and out.numpy().shape == ()
    _, inverse = gt.tensor(2.0).unique(return_inverse=True)
    assert inverse.shape == () and inverse.numpy().shape == ()
    _, inverse = gt.tensor(2.0).unique_consecutive(return_inverse=True)
    assert inverse.shape == ()


def test_any_and_all_of_uint8_are_uint8(conn):
    u = gt.tensor([0, 3], dtype=gt.uint8)
    assert u.any().dtype == gt.uint8 and u.any().tolist() == 1
    assert u.all(dim=0).dtype == gt.uint8 and u.all(dim=0).tolist() == 0


def test_alpha_and_value_terms_are_computed_in_the_sums_dtype(conn):
    f16, i = gt.tensor([1.0, 2.0], dtype=gt.float16), gt.tensor([3, 4])
    for out, want in (
        (gt.add(f16, i, alpha=1.5), [5.5, 8.0]),
        (gt.sub(f16, i, alpha=3), [-8.0, -10.0]),
        (gt.addcmul(f16, i, i, value=0.5), [5.5, 10.0]),
        (f16.clone().add_(i, alpha=1.5), [5.5, 8.0]),
    ):
        assert out.dtype == gt.float16 and out.tolist() == want
    out = gt.add(gt.tensor([1, 2], dtype=gt.int8), gt.tensor([True, False]), alpha=2)
    assert out.dtype == gt.int8 and out.tolist() == [3, 2]


def test_numpy_bools_and_literal_bools_act_as_pythons(conn):
    t, b = gt.tensor([1.0, 2.0]), gt.tensor([True, False])
    assert isinstance(t * np.bool_(True), gt.Tensor) and isinstance(np.bool_(True) * t, gt.Tensor)
    assert (b == np.bool_(True)).tolist() == [True, False]
    out = gt.div(gt.tensor([-2, 5]), np.int32(3), rounding_mode="trunc")
    assert out.tolist() == [0, 1]
    assert gt.where(b, True, False).dtype == gt.bool
    assert gt.tensor([True, False]).square().dtype == gt.int64


def test_fill_values_of_complex_tensors_keep_their_fraction_and_imaginary_part(conn):
    z = gt.zeros(2, dtype=gt.complex64)
    assert z.clone().fill_(2.5).tolist() == [2.5 + 0j, 2.5 + 0j]
    assert z.new_full((1,), 3 + 4j).tolist() == [3 + 4j]
    assert gt.add(2.5, gt.tensor([1 + 1j])).tolist() == [3.5 + 1j]


def test_xlogy_promotes_a_python_number_and_gives_zero_where_x_is_zero(conn):
    got = gt.xlogy(gt.tensor([1, 2]), 2.5)  # (2.5 was cast to the int tensor's dtype: log 2)
    np.testing.assert_allclose(got.numpy(), [math.log(2.5), 2 * math.log(2.5)], rtol=1e-6)
    assert got.dtype == gt.float32
    assert gt.xlogy(gt.tensor([1.5], dtype=gt.float16), gt.tensor([3])).dtype == gt.float16
    out = gt.xlogy(gt.tensor([0.0, -0.0, 0.0]), gt.tensor([INF, 2.0, NAN])).numpy()
    _same(out[:2], np.array([0.0, 0.0], np.float32))
    assert math.isnan(out[2])
    assert gt.special.xlog1py(gt.tensor([0.0]), gt.tensor([INF])).tolist() == [0.0]


def test_promotions_and_casts_between_floats_and_complex_numbers(conn):
    assert (gt.tensor([1.0]) + gt.tensor(1j, dtype=gt.complex128)).dtype == gt.complex64
    assert (gt.tensor([1.0], dtype=gt.float64) + gt.tensor(1j)).dtype == gt.complex128
    assert gt.can_cast(gt.float32, gt.complex64) and not gt.can_cast(gt.complex64, gt.float32)
    got = gt.copysign(gt.tensor([1, 2]), gt.tensor([-1.0], dtype=gt.float64))
    assert got.dtype == gt.float64 and got.tolist() == [-1.0, -2.0]
    z = gt.sinc(gt.tensor([0.5 + 1j, 0j]))
    assert z.dtype == gt.complex64
    w = np.pi * (0.5 + 1j)
    np.testing.assert_allclose(z.numpy(), [np.sin(w) / w, 1.0], rtol=1e-5)


def test_reductions_with_a_dtype_stay_in_it(conn):
    i = gt.tensor([100, 100, 100])
    for out, want in (
        (gt.prod(i, dtype=gt.int16), np.prod(np.int16([100] * 3), dtype=np.int16)),
        (gt.prod(i, 0, dtype=gt.int8), np.prod(np.int8([100] * 3), dtype=np.int8)),
        (gt.nansum(i, dtype=gt.int16), np.int16(300)),
    ):
        assert out.numpy().dtype == want.dtype and out.tolist() == want
    c = gt.cumprod(gt.tensor([1, 2, 3]), 0, dtype=gt.int16)
    assert c.dtype == gt.int16 and c.tolist() == [1, 2, 6]
    s = gt.sum(gt.tensor([1, -1]), dtype=gt.bool)
    assert s.dtype == gt.bool and s.tolist() is True
    d = gt.dot(gt.tensor([1, 2], dtype=gt.int8), gt.tensor([3, 4], dtype=gt.int8))
    assert d.dtype == gt.int8 and d.tolist() == 11


def test_logit_of_integers_and_lists_of_numpy_scalars(conn):
    assert math.isnan(gt.logit(gt.tensor([4], dtype=gt.uint8)).tolist()[0])  # (1 - 4 wrapped)
    assert gt.tensor([np.uint8(1)]).dtype == gt.uint8
    assert gt.tensor([np.complex128(1j)]).dtype == gt.complex128
    assert gt.tensor([np.int16(3), 4]).dtype == gt.int64  # (a Python int among them: int64)


def test_var_past_its_count_is_inf_as_in_pytorch(conn):
    x = gt.tensor([1.0, 2.0])
    assert x.var(correction=2).tolist() == INF and x.std(correction=3).tolist() == INF
    assert math.isnan(gt.tensor([1.0, 1.0]).var(correction=2).tolist())  # 0 / 0


def test_in_asks_whether_any_element_equals(conn):
    x = gt.arange(6.0).reshape(2, 3)
    assert 4.0 in x and 2.5 not in x and gt.tensor(3.0) in x
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar"):
        _ = "a" in x


def test_calls_that_raised_where_pytorch_computes(conn):
    b, x = gt.tensor([True, False]), gt.tensor([1.0, 2.0])
    assert gt.where(b, 1 + 2j, 0.0).tolist() == [1 + 2j, 0j]
    for out in (x.softmax(0, dtype=gt.float64), gt.softmax(x, 0, dtype=gt.float64),
                x.log_softmax(0, dtype=gt.float64), x.norm(dtype=gt.float64)):  # fmt: skip
        assert out.dtype == gt.float64
    assert gt.div(b, gt.tensor([2, 1]), rounding_mode="trunc").tolist() == [0, 0]
    np.testing.assert_allclose(gt.logaddexp(b, x).numpy(), np.logaddexp([1, 0], [1, 2]))
    np.testing.assert_allclose(gt.logaddexp(x, b).numpy(), np.logaddexp([1, 2], [1, 0]))
    assert gt.add(np.int32(3), x).tolist() == [4.0, 5.0]
    assert gt.floor_divide(7, gt.tensor([2, 3])).tolist() == [3, 2]


def test_angle_and_entr_at_zero_infinity_and_nan(conn):
    x = gt.tensor([INF, -0.0, 0.0, -2.0, NAN, -INF, 3.0])
    a = gt.angle(x).numpy()
    _same(a, np.array([0.0, 0.0, 0.0, np.pi, NAN, np.pi, 0.0], np.float32))
    e = gt.special.entr(x).numpy()
    _same(e[:6], np.array([-INF, 0.0, 0.0, -INF, NAN, -INF], np.float32))


def test_a_zero_remainder_has_the_dividends_sign(conn):
    a = gt.tensor([-0.0, 0.0, 1.0, -4.0, 4.0, 5.5, -5.5])
    b = gt.tensor([2.0, -2.0, -1.0, 2.0, -2.0, 2.0, 2.0])
    _same(gt.remainder(a, b).numpy(), np.array([-0.0, 0.0, 0.0, -0.0, 0.0, 1.5, 0.5], np.float32))
    _same((gt.tensor([-4.0, 4.0]) % 2).numpy(), np.array([-0.0, 0.0], np.float32))


def test_bool_keys_empty_chunks_0d_index_and_half_sinc(conn):
    x = gt.arange(6.0).reshape(2, 3)
    assert x[True].shape == (1, 2, 3) and x[False].shape == (0, 2, 3)
    assert x[gt.tensor(True)].tolist() == [x.tolist()] and x[gt.tensor(False)].shape == (0, 2, 3)
    assert [t.shape for t in gt.zeros(0, 3).chunk(3)] == [(0, 3)] * 3
    assert x.index_select(1, gt.tensor(2)).tolist() == [[2.0], [5.0]]
    s = gt.sinc(gt.tensor([1.0, 0.5, 65504.0], dtype=gt.float16)).numpy()  # (in float32, once)
    _same(s, np.array([-0.0, 0.63671875, 0.0], np.float16))
