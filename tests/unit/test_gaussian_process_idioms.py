"""Idioms of Gaussian process code that GT once got wrong (found while writing the
``gaussian_processes`` programs): the ``try: linalg.cholesky(K) except RuntimeError:`` jitter
retry of older GPyTorch/BoTorch and hand-written GPs needs the error at the call (GT used to fail
on the worker and raise at a later sync point, outside the ``try``), as ``linalg.LinAlgError``
with PyTorch's message. Expected messages are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)

NOT_PD = [[1.0, 2.0], [2.0, 1.0]]
ORDER_2 = "the leading minor of order 2 is not positive-definite"


def _message(prefix: str, order: int, batch: str = "") -> str:
    return (
        f"{prefix}: {batch}The factorization could not be completed because the input is not "
        f"positive-definite (the leading minor of order {order} is not positive-definite)."
    )


def test_cholesky_of_a_matrix_that_is_not_positive_definite_raises_at_the_call(conn):
    a = gt.tensor(NOT_PD, dtype=gt.float64)
    caught = None
    try:
        gt.linalg.cholesky(a)  # no sync point after it: the error must come from the call
    except RuntimeError as e:
        caught = e
    assert isinstance(caught, gt.linalg.LinAlgError)
    assert str(caught) == _message("linalg.cholesky", 2)
    with pytest.raises(gt.linalg.LinAlgError) as e:
        gt.linalg.cholesky(a, upper=True)
    assert str(e.value) == _message("linalg.cholesky", 2)
    with pytest.raises(gt.linalg.LinAlgError) as e:
        gt.cholesky(a)
    assert str(e.value) == _message("cholesky", 2)
    with pytest.raises(gt.linalg.LinAlgError) as e:
        a.cholesky()
    assert str(e.value) == _message("cholesky", 2)
    batch = gt.stack([gt.eye(2, dtype=gt.float64), a, -gt.eye(2, dtype=gt.float64)])
    with pytest.raises(gt.linalg.LinAlgError) as e:
        gt.linalg.cholesky(batch)
    assert str(e.value) == _message("linalg.cholesky", 2, "(Batch element 1): ")
    with pytest.raises(gt.linalg.LinAlgError) as e:
        gt.linalg.cholesky(gt.full((3, 3), float("nan")))
    assert str(e.value) == _message("linalg.cholesky", 1)
    with pytest.raises(gt.linalg.LinAlgError, match=ORDER_2):
        gt.linalg.cholesky_ex(a, check_errors=True)


def test_jitter_retry_loop_catching_the_cholesky_error(conn):
    # older GPyTorch psd_safe_cholesky: catch, add growing jitter in place, retry
    a = gt.tensor([[1.0, 0.0, 0.0], [0.0, -0.05, 0.0], [0.0, 0.0, 2.0]], dtype=gt.float64)
    tries, prev, shifted, L = 0, 0.0, a.clone(), None
    while L is None:
        try:
            L = gt.linalg.cholesky(shifted)
        except gt.linalg.LinAlgError:
            jitter = 1e-3 * 10**tries
            shifted.diagonal(dim1=-2, dim2=-1).add_(jitter - prev)
            prev, tries = jitter, tries + 1
    assert tries == 3
    np.testing.assert_allclose(np.diag(L.numpy()), np.sqrt([1.1, 0.05, 2.1]), rtol=1e-12)


def test_cholesky_of_positive_definite_matrices_keeps_values_and_gradients(conn):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 4, 4))
    spd = m @ m.transpose(0, 2, 1) + 4 * np.eye(4)
    a = gt.tensor(spd, requires_grad=True)
    L = gt.linalg.cholesky(a)
    np.testing.assert_allclose(L.detach().numpy(), np.linalg.cholesky(spd), rtol=1e-12)
    np.testing.assert_allclose(
        gt.linalg.cholesky(a, upper=True).detach().numpy(),
        np.linalg.cholesky(spd).transpose(0, 2, 1),
        rtol=1e-12,
    )
    (g,) = gt.autograd.grad(L.diagonal(dim1=-2, dim2=-1).log().sum(), [a])
    # d/dA of log det(A) / 2 is inv(A) / 2 (symmetric)
    np.testing.assert_allclose(g.numpy(), np.linalg.inv(spd) / 2, rtol=1e-10, atol=1e-12)
    assert gt.linalg.cholesky(gt.zeros(0, 0)).shape == (0, 0)
