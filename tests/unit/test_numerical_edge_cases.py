"""Numerical edge cases of reductions, powers and special functions that GT once got wrong (found
by the ``numerical_edge_cases`` programs): empty reductions, ``pow``'s gradients at 0, NaN in
``median``, gradients of whole-tensor ``median``/``max``/``min`` split among ties and NaNs, and the
tails of ``log_ndtr`` and ``ndtri``. Expected values are PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

NAN = math.nan


def _close(got, want, rtol=1e-6, atol=0.0):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- empty reductions
def test_max_min_argmax_of_an_empty_tensor_raise_as_pytorch_or_give_empty_results(conn):
    e = gt.zeros(0, 3)
    assert e.amax(1).shape == (0,) and e.amin(1).shape == (0,)
    values, indices = e.max(dim=1)
    assert values.shape == (0,) and indices.shape == (0,) and indices.dtype == gt.int64
    assert e.argmax(1).shape == (0,)
    with pytest.raises(IndexError, match="non-zero size"):
        e.amax(0)
    with pytest.raises(IndexError, match="non-zero size"):
        e.max(dim=0)
    with pytest.raises(IndexError):
        e.argmax()
    with pytest.raises(RuntimeError, match="cannot reduce an empty tensor"):
        e.max()
    with pytest.raises(RuntimeError, match="cannot reduce an empty tensor"):
        gt.tensor([]).min()


def test_logsumexp_over_an_empty_dimension_is_minus_inf(conn):
    e = gt.zeros(0, 3)
    assert gt.logsumexp(e, dim=0).tolist() == [-math.inf] * 3
    assert e.logsumexp(1).shape == (0,)
    assert e.logsumexp((0, 1)).item() == -math.inf


# ----------------------------------------------------------------------------- pow at 0
def test_pow_gradients_at_a_zero_base_are_zero_where_pytorch_masks_them(conn):
    v = gt.tensor([0.0, 0.0, 0.0, 0.0, 2.0], requires_grad=True)
    e = gt.tensor([0.0, 1.0, 2.0, 1.5, 0.5], requires_grad=True)
    (g,) = gt.autograd.grad((v**0.0).sum(), v)
    assert g.tolist() == [0.0] * 5  # not 0 * 0 ** -1 = nan
    gv, ge = gt.autograd.grad(gt.pow(v, e).sum(), [v, e])
    _close(gv, [0.0, 1.0, 0.0, 0.0, 2**-0.5 / 2])
    _close(ge, [0.0, 0.0, 0.0, 0.0, math.sqrt(2) * math.log(2)])  # not 0 * log 0 = nan
    (ge,) = gt.autograd.grad((0.0**e).sum(), e)
    assert ge.tolist() == [0.0] * 5
    (gv,) = gt.autograd.grad((v**-1.0).sum(), v)
    assert gv.tolist()[:4] == [-math.inf] * 4


# ----------------------------------------------------------------------------- median and ties
def test_median_along_a_dim_is_nan_where_the_slice_holds_a_nan_at_the_first_nan(conn):
    y = gt.tensor([[1.0, NAN, 3.0, 2.0], [NAN, NAN, 1.0, 4.0], [4.0, 1.0, 3.0, 2.0]])
    values, indices = y.median(dim=1)
    _close(values, [NAN, NAN, 2.0])
    assert indices.tolist() == [1, 0, 3]
    assert math.isnan(y.median().item())
    assert y.nanmedian().item() == 2.0


def test_whole_tensor_median_max_and_min_split_the_gradient_among_ties_and_nans(conn):
    x = gt.tensor([[4.0, 1.0, 3.0, 1.0], [5.0, 1.0, 0.0, 5.0]], requires_grad=True)
    x.median().backward()  # the lower median, 1, is three elements
    _close(x.grad, [[0, 1 / 3, 0, 1 / 3], [0, 1 / 3, 0, 0]])
    x.grad = None
    x.max().backward()
    _close(x.grad, [[0, 0, 0, 0], [0.5, 0, 0, 0.5]])
    y = gt.tensor([[1.0, NAN, 3.0], [NAN, 0.0, 2.0]], requires_grad=True)
    for reduce in (gt.Tensor.max, gt.Tensor.min, gt.Tensor.median):
        y.grad = None
        reduce(y).backward()
        _close(y.grad, [[0, 0.5, 0], [0.5, 0, 0]])
    y.grad = None
    y.nanmedian().backward()
    _close(y.grad, [[1.0, 0, 0], [0, 0, 0]])  # the lower median of 1, 3, 0, 2
    assert y.max().grad_fn.name() == "MaxBackward1"


# ----------------------------------------------------------------------------- normal tails
def test_log_ndtr_is_accurate_in_both_tails_with_pytorchs_gradient(conn):
    z = gt.tensor([-40.0, -5.5, -1.0, 5.0, 40.0], dtype=gt.float64, requires_grad=True)
    out = gt.special.log_ndtr(z)
    _close(out.detach(), [-804.6084420137537, -17.779376352625256, -1.8410216450092634,
                 -2.8665161296376405e-07, -0.0], rtol=1e-12)  # fmt: skip
    out.sum().backward()
    _close(z.grad, [40.02496884720326, 5.671410313897281, 1.5251352761609809,
                    1.4867199409049054e-06, 0.0], rtol=1e-9)  # fmt: skip
    assert gt.special.log_ndtr(gt.tensor([-math.inf])).item() == -math.inf


def test_ndtri_is_finite_in_the_far_tails_and_exact_at_the_ends(conn):
    p = gt.tensor([0.0, 1e-30, 1e-10, 0.01, 0.5, 0.99, 1.0 - 1e-7, 1.0, 1.5], dtype=gt.float64)
    want = [-math.inf, -11.464024688443617, -6.3613409024040575, -2.326347874040841, 0.0,
            2.326347874040841, 5.199337582290661, math.inf, NAN]  # fmt: skip
    _close(gt.special.ndtri(p), want, rtol=1e-10)
    q = gt.tensor([1e-10, 0.5], requires_grad=True)
    gt.special.ndtri(q).sum().backward()
    _close(q.grad, [1535723698.1963983, math.sqrt(2 * math.pi)], rtol=1e-5)


def test_nanmedian_and_median_name_their_backward_as_pytorch(conn):
    x = gt.tensor([1.0, float("nan"), 3.0], requires_grad=True)
    assert x.nanmedian().grad_fn.name() == "NanmedianBackward0"
    assert x.median().grad_fn.name() == "MedianBackward0"
