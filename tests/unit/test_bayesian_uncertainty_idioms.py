"""Idioms of Bayesian deep learning code that GT once got wrong (found while writing the
``bayesian_uncertainty`` programs): ``linalg.cholesky_ex`` reporting which matrices are not
positive definite (GPyTorch's ``psd_safe_cholesky`` and Laplace code retry with jitter on its
``info``), and ``F.gaussian_nll_loss``'s rules for the shape of ``var``. Expected values are
PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)

F = gt.nn.functional

#: (matrix, PyTorch's cholesky_ex factor, info)
NOT_POSITIVE_DEFINITE = [
    ([[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [2.0, -3.0]], 2),
    ([[-1.0, 0.0], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]], 1),
    (
        [[4.0, 2, 1, 0], [2, 3, 0, 1], [1, 0, -5, 2], [0, 1, 2, 1]],
        [[2.0, 0, 0, 0], [1, 2**0.5, 0, 0], [0.5, -(2**-1.5), -5.375, 0], [0, 2**-0.5, 2, 1]],
        3,
    ),
]


def test_cholesky_ex_kernel_keeps_lapacks_partial_factor_instead_of_failing(run):
    for a, want, _ in NOT_POSITIVE_DEFINITE:
        got = run("linalg_cholesky", [np.array(a, np.float64)], {"ex": True})
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    spd = np.array([[4.0, 2.0], [2.0, 3.0]])
    np.testing.assert_allclose(
        run("linalg_cholesky", [spd], {"ex": True}), np.linalg.cholesky(spd), rtol=1e-12
    )


def test_cholesky_ex_reports_the_first_failing_minor_per_matrix(conn):
    batch = gt.tensor([[[4.0, 2.0], [2.0, 3.0]], [[1.0, 2.0], [2.0, 1.0]], [[-1.0, 0], [0, 1.0]]])
    L, info = gt.linalg.cholesky_ex(batch)
    assert info.dtype == gt.int32
    np.testing.assert_array_equal(info.numpy(), [0, 2, 1])
    np.testing.assert_allclose(L.numpy()[0], [[2.0, 0.0], [1.0, 2**0.5]], rtol=1e-6)
    np.testing.assert_allclose(L.numpy()[1], [[1.0, 0.0], [2.0, -3.0]])
    a, want, order = NOT_POSITIVE_DEFINITE[2]
    U, info = gt.linalg.cholesky_ex(gt.tensor(a), upper=True)
    assert info.item() == order
    np.testing.assert_allclose(U.numpy(), np.array(want).T, rtol=1e-6, atol=1e-6)
    L, info = gt.linalg.cholesky_ex(gt.eye(3, dtype=gt.float64) * 4)
    assert info.item() == 0
    np.testing.assert_allclose(L.numpy(), np.eye(3) * 2)
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\).*leading minor of order 2"):
        gt.linalg.cholesky_ex(batch, check_errors=True)


def test_psd_safe_cholesky_jitter_loop_stops_at_the_first_positive_definite_shift(conn):
    # GPyTorch's psd_safe_cholesky: add growing jitter until cholesky_ex's info is zero
    a = gt.tensor([[1.0, 0.0, 0.0], [0.0, -0.05, 0.0], [0.0, 0.0, 2.0]], dtype=gt.float64)
    L, info = gt.linalg.cholesky_ex(a)
    tries, prev, shifted = 0, 0.0, a.clone()
    while gt.any(info):
        jitter = 1e-3 * 10**tries
        shifted.diagonal(dim1=-2, dim2=-1).add_(jitter - prev)
        prev, tries = jitter, tries + 1
        L, info = gt.linalg.cholesky_ex(shifted)
    assert tries == 3  # 1e-3 and 1e-2 leave -0.05 + jitter negative; 0.1 does not
    np.testing.assert_allclose(np.diag(L.numpy()), np.sqrt([1.1, 0.05, 2.1]), rtol=1e-12)


def test_cholesky_ex_factor_still_has_cholesky_gradients(conn):
    a = gt.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=gt.float64, requires_grad=True)
    L, _ = gt.linalg.cholesky_ex(a)
    (g,) = gt.autograd.grad(L.sum(), [a])
    b = gt.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=gt.float64, requires_grad=True)
    (want,) = gt.autograd.grad(gt.linalg.cholesky(b).sum(), [b])
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-12)


def test_gaussian_nll_loss_var_shapes_follow_pytorchs_rules(conn):
    mu, target = gt.zeros(2, 3, 4), gt.ones(2, 3, 4)
    # var broadcast along the one dimension where it has size 1 (not only the last one)
    per_pixel = F.gaussian_nll_loss(mu, target, gt.full((2, 1, 4), 2.0), reduction="none")
    assert per_pixel.shape == (2, 3, 4)
    np.testing.assert_allclose(per_pixel.numpy(), 0.5 * (np.log(2.0) + 0.5), rtol=1e-6)
    one_short = F.gaussian_nll_loss(mu, target, gt.full((2, 3), 2.0), reduction="none")
    assert one_short.shape == (2, 3, 4)
    for bad in (gt.ones(2, 1, 1), gt.ones(2, 3, 2), gt.tensor(0.5)):  # a 0-d tensor too
        with pytest.raises(ValueError, match="var is of incorrect size"):
            F.gaussian_nll_loss(mu, target, bad)
    x, t = gt.arange(6.0) / 3, gt.ones(6)  # mean (x - 1)^2 = 19/54
    want = 0.5 * (np.log(0.5) + 19 / 54 / 0.5)
    np.testing.assert_allclose(F.gaussian_nll_loss(x, t, 0.5).item(), want, rtol=1e-5)
    np.testing.assert_allclose(F.gaussian_nll_loss(x, t, gt.tensor(0.5)).item(), want, rtol=1e-5)
