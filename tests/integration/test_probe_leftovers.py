"""Probe findings left over from Dec 6, each as PyTorch 2.13 behaves: integers to negative integer
powers, 0-d tensors and 0-d indices where PyTorch takes them, the medians and linear algebra of
empty tensors, and NaN in ``searchsorted`` and ``mode``. Every test runs on NumPy workers and on
workers whose CuPy is the test double."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)
NAN = float("nan")


def test_integers_to_negative_integer_powers_are_zero_except_for_one_and_minus_one(conn):
    base = gt.tensor([-3, -2, -1, 0, 1, 2, 3, -1, 1])
    exp = gt.tensor([-2, -1, -1, -1, -1, -2, -3, -2, 5])
    assert (base**exp).tolist() == [0, 0, -1, 0, 1, 0, 0, 1, 1]
    assert (2 ** gt.tensor([-1, 0, 3])).tolist() == [0, 1, 8]
    assert ((-1) ** gt.tensor([-3, -2])).tolist() == [-1, 1]
    u8 = gt.tensor([2, 1], dtype=gt.uint8) ** gt.tensor([-1, -4])
    assert (u8.dtype, u8.tolist()) == (gt.int64, [0, 1])
    x = gt.tensor([2, 1, -1])
    x.pow_(gt.tensor([-1, -1, -1]))
    assert x.tolist() == [0, 1, -1]
    with pytest.raises(RuntimeError, match="negative integer powers"):
        gt.tensor([2, 3]) ** -1  # (a Python exponent is refused at the call, as in PyTorch)
    assert (gt.tensor([2.0, 4.0]) ** gt.tensor([-1, -2])).tolist() == [0.5, 0.0625]


def test_zero_dimensional_flip_gather_and_scatter(conn):
    assert gt.flip(gt.tensor(5.0), [0]).tolist() == 5.0
    assert gt.tensor(5.0).flip(-1).tolist() == 5.0
    g = gt.gather(gt.tensor([1.0, 2.0, 3.0]), 0, gt.tensor(1))
    assert (g.shape, g.tolist()) == ((), 2.0)
    assert gt.gather(gt.tensor(5.0), 0, gt.tensor(0)).tolist() == 5.0
    assert gt.zeros(3).scatter(0, gt.tensor(1), 5.0).tolist() == [0.0, 5.0, 0.0]
    src = gt.tensor([7.0, 8.0])
    assert gt.zeros(3).scatter(0, gt.tensor(2), src).tolist() == [0.0, 0.0, 7.0]
    with pytest.raises(IndexError):
        gt.gather(gt.ones(2, 2), 0, gt.tensor(1))  # (only a 1-d input takes a 0-d index)


def test_medians_of_nothing_are_nan(conn):
    assert np.isnan(gt.nanmedian(gt.tensor([])).tolist())
    assert np.isnan(gt.median(gt.tensor([])).tolist())


def test_linear_algebra_of_an_empty_batch_is_empty(conn):
    assert gt.linalg.svdvals(gt.zeros(0, 2, 2)).shape == (0, 2)
    u, s, vh = gt.linalg.svd(gt.zeros(0, 3, 2), full_matrices=False)
    assert (u.shape, s.shape, vh.shape) == ((0, 3, 2), (0, 2), (0, 2, 2))
    assert gt.linalg.det(gt.zeros(0, 2, 2)).shape == (0,)


def test_searchsorted_into_a_sequence_ending_in_nan_follows_pytorchs_comparisons(conn, request):
    if "cupy_double" in request.node.name:  # (CuPy keeps NumPy's order: see gt.runtime.ops.search)
        assert gt.searchsorted(gt.tensor([1.0, NAN]), gt.tensor([3.0])).tolist() == [1]
        return
    seq = gt.tensor([1.0, 2.0, NAN])
    vals = gt.tensor([0.5, 1.5, 3.0, NAN])
    assert gt.searchsorted(seq, vals).tolist() == [0, 1, 3, 3]
    assert gt.searchsorted(seq, vals, right=True).tolist() == [0, 1, 3, 3]
    # (PyTorch's binary search steps right past every NaN it probes)
    long = gt.tensor([1.0, 2.0, NAN, NAN, NAN, NAN])
    assert gt.searchsorted(long, gt.tensor([0.5, 1.5, 3.0])).tolist() == [6, 6, 6]
    assert gt.bucketize(gt.tensor([0.5, 1.5, NAN]), seq).tolist() == [0, 1, 3]
    assert gt.searchsorted(gt.tensor([1.0, 2.0, 3.0]), gt.tensor([2.0, NAN])).tolist() == [1, 3]


def test_mode_counts_each_nan_once_and_prefers_numbers(conn):
    for row, value, index in [
        ([1.0, NAN, NAN, 2.0], 1.0, 0),
        ([2.0, 2.0, NAN, NAN, NAN], 2.0, 1),
        ([5.0, NAN, 4.0], 4.0, 2),
        ([1.0, NAN, 1.0, 2.0], 1.0, 2),
    ]:
        m = gt.mode(gt.tensor(row))
        assert (m.values.tolist(), m.indices.tolist()) == (value, index), row
    m = gt.mode(gt.tensor([NAN, NAN]))
    assert np.isnan(m.values.tolist()) and m.indices.tolist() in (0, 1)
    rows = gt.mode(gt.tensor([[3, 1, 3], [2, 2, 1]]), dim=1)
    assert (rows.values.tolist(), rows.indices.tolist()) == ([3, 2], [2, 1])


def test_a_python_float_too_large_for_float32_is_inf_without_a_warning(conn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gt.tensor([1e308, -1e300]).tolist() == [float("inf"), float("-inf")]


def test_ldexp_is_exact_at_the_extremes(conn):
    x = gt.tensor([1.0, 1.5, -2.0, 0.0, 3.0, 0.5], dtype=gt.float64)
    e = gt.tensor([2000, -2000, 127, 1024, -1074, 1024])
    want = [float("inf"), 0.0, -(2.0**128), 0.0, 1.5e-323, 2.0**1023]
    assert gt.ldexp(x, e).tolist() == want  # (0 * 2^1024 was NaN, 0.5 * 2^1024 inf)
    h = gt.ldexp(gt.tensor([1.0, 0.0, 1.0], dtype=gt.float16), gt.tensor([2000, 1024, -30]))
    assert (h.dtype, h.tolist()) == (gt.float16, [float("inf"), 0.0, 0.0])
    a = gt.tensor([1.0, 3.0], requires_grad=True)
    gt.ldexp(a, gt.tensor([2, -1])).sum().backward()
    assert a.grad.tolist() == [4.0, 0.5]


def test_logaddexp2_of_equal_arguments_is_one_more(conn):
    a = gt.tensor([-1e4, 6e4, 0.0, float("-inf")], dtype=gt.float64)
    assert gt.logaddexp2(a, a).tolist() == [-9999.0, 60001.0, 1.0, float("-inf")]
    assert gt.logaddexp2(gt.tensor([-1e4]), gt.tensor([-1e4])).tolist() == [-9999.0]
    assert gt.logaddexp2(gt.tensor([1, 2]), gt.tensor([1, 2])).tolist() == [2.0, 3.0]
    assert gt.logaddexp2(a, a).grad_fn is None
    b = gt.tensor([1.0, 2.0], requires_grad=True)
    out = gt.logaddexp2(b, gt.tensor([1.0, 0.0]))
    assert out.grad_fn.name() == "Logaddexp2Backward0"
    out.sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), [0.5, 0.8], rtol=1e-6)
