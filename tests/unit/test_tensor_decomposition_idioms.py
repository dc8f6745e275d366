"""Idioms of tensor-decomposition code that GT once got wrong (found by the
``tensor_decompositions`` programs). Expected values are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.runtime import ops as O


def test_tensordot_counts_negative_dims_from_the_end(conn):
    # TT-SVD code chains cores with ``tensordot(full, core, dims=([-1], [0]))``: GT matched no
    # dimension for -1 and returned the outer product (every dimension of both).
    a = gt.arange(12.0).reshape(1, 4, 3)
    b = gt.arange(18.0).reshape(3, 2, 3)
    out = gt.tensordot(a, b, dims=([-1], [0]))
    assert tuple(out.shape) == (1, 4, 2, 3)
    assert out.sum().item() == 3654.0
    np.testing.assert_array_equal(out.numpy(), np.tensordot(a.numpy(), b.numpy(), axes=([2], [0])))
    x, y = gt.arange(24.0).reshape(2, 4, 3), gt.arange(30.0).reshape(3, 5, 2)
    both = gt.tensordot(x, y, dims=([-1, 0], [0, -1]))
    np.testing.assert_array_equal(
        both.numpy(), np.tensordot(x.numpy(), y.numpy(), axes=([2, 0], [0, 2]))
    )


def test_tensordot_sums_over_a_contracted_dimension_of_size_one_and_checks_the_rest(conn):
    # PyTorch contracts a size-1 dimension against any size by summing the other side over it.
    c = gt.tensordot(gt.ones(2, 1, 3), gt.arange(12.0).reshape(4, 3), dims=([1, 2], [0, 1]))
    assert c.tolist() == [66.0, 66.0]
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        gt.tensordot(gt.ones(2, 3), gt.ones(4, 2), dims=([1], [0]))
    with pytest.raises(RuntimeError, match="same length"):
        gt.tensordot(gt.ones(2, 3), gt.ones(3, 2), dims=([1], [0, 1]))
    with pytest.raises(RuntimeError, match="dims >= 0"):
        gt.tensordot(gt.ones(2, 3), gt.ones(3, 2), dims=-1)
    with pytest.raises(IndexError, match="out of range"):
        gt.tensordot(gt.ones(2, 3), gt.ones(3, 2), dims=([-3], [0]))


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (2, 3, 5)])
def test_svd_with_full_matrices_of_a_non_square_matrix_gives_square_factors(conn, shape):
    # ``U, S, Vh = torch.linalg.svd(unfold(X, n))`` (the default full_matrices=True) on a wide
    # unfolding, as HOSVD code writes it, raised NotImplementedError.
    a0 = np.random.default_rng(0).standard_normal(shape)
    U, S, Vh = gt.linalg.svd(gt.tensor(a0))
    m, n = shape[-2:]
    k = min(m, n)
    assert tuple(U.shape) == (*shape[:-2], m, m) and tuple(Vh.shape) == (*shape[:-2], n, n)
    u, s, vh = U.numpy(), S.numpy(), Vh.numpy()
    np.testing.assert_allclose(s, np.linalg.svd(a0, compute_uv=False), atol=1e-12)
    np.testing.assert_allclose(
        u.swapaxes(-1, -2) @ u, np.broadcast_to(np.eye(m), u.shape), atol=1e-12
    )
    np.testing.assert_allclose(
        vh @ vh.swapaxes(-1, -2), np.broadcast_to(np.eye(n), vh.shape), atol=1e-12
    )
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a0, atol=1e-12)
    U2, _, V2 = gt.svd(gt.tensor(a0), some=False)
    assert tuple(U2.shape[-2:]) == (m, m) and tuple(V2.shape[-2:]) == (n, n)


def test_svd_with_full_matrices_differentiates_the_leading_factors_only(conn):
    # PyTorch's rule for full_matrices=True: the reduced rule on the first k columns of U and rows
    # of Vh; the completing ones get no gradient.
    W = gt.tensor([[1.0, -2.0, 0.5, 0.25], [0.0, 1.0, 3.0, -1.0], [2.0, 0.5, 0.0, 1.0],
                   [-1.0, 0.0, 1.0, 2.0]], dtype=gt.float64)  # fmt: skip
    A = gt.tensor([[2.0, 0.5, -1.0, 0.3], [0.1, 1.5, 0.7, -0.4]], dtype=gt.float64,
                  requires_grad=True)  # fmt: skip
    U, S, Vh = gt.linalg.svd(A)
    (S.sum() + (Vh[:2].mT @ Vh[:2] * W).sum() + Vh[2:].abs().sum()).backward()
    np.testing.assert_allclose(
        A.grad.numpy(),
        [[1.6996014417669176, -0.5245485645241462, 0.7145000037251762, -0.37270437011482643],
         [0.17431894957421812, 0.7777037962405113, 0.6609213276604661, -0.14733140521399923]],
        rtol=1e-12, atol=1e-14,
    )  # fmt: skip
    B = gt.tensor([[2.0, 0.5], [0.1, 1.5], [-1.0, 0.7]], dtype=gt.float64, requires_grad=True)
    U, S, Vh = gt.linalg.svd(B)
    ((U[:, :2] @ U[:, :2].mT * W[:3, :3]).sum() + U[:, 2:].abs().sum()).backward()
    np.testing.assert_allclose(
        B.grad.numpy(),
        [[0.6478976671072662, 0.26945615761399905], [-0.7840799793017871, -0.32609343915069944],
         [1.2173873362843537, 0.5063029713129285]],
        rtol=1e-12, atol=1e-14,
    )  # fmt: skip


def test_the_full_svd_kernel_packs_square_factors_as_its_shape_rule_says(run):
    a = np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32)
    op = O.BY_NAME["linalg_svd"]
    out = run("linalg_svd", [a], {"full": True})
    assert out.shape == tuple(op.shape([a.shape], {"full": True})) == (2, 9 + 3 + 25)
    assert out.dtype == np.float32
    reduced = run("linalg_svd", [a], None)
    assert reduced.shape == tuple(op.shape([a.shape], None)) == (2, 9 + 3 + 15)
    np.testing.assert_allclose(out[:, 9:12], reduced[:, 9:12], rtol=1e-5)
