"""``gt.linalg`` against ``np.linalg``: values (batched, float32 and float64), PyTorch's errors,
and the ``torch.inverse``/``Tensor.det``-style aliases. Gradients are checked against finite
differences in ``test_autograd_ops.py`` (the ``linalg_*`` cases), second derivatives in
``test_autograd_higher_order.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.linalg as LA

rng = np.random.default_rng(5)
M = rng.standard_normal((2, 3, 4, 4)) + 4 * np.eye(4)  # a 2 x 3 batch, well conditioned
SPD = M @ M.swapaxes(-1, -2) + np.eye(4)
RHS = rng.standard_normal((3, 4, 2))


def _t(a: np.ndarray, dtype: str = "float64") -> gt.Tensor:
    return gt.tensor(a.astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inverse_determinants_and_cholesky_match_numpy(conn, dtype):
    tol = 1e-4 if dtype == "float32" else 1e-10
    a = _t(M, dtype)
    got = LA.inv(a)
    assert got.dtype == dtype and got.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(got.numpy(), np.linalg.inv(M), rtol=tol, atol=tol)
    np.testing.assert_allclose(LA.det(a).numpy(), np.linalg.det(M), rtol=tol)
    sign, logabs = LA.slogdet(a)
    want_sign, want_log = np.linalg.slogdet(M)
    np.testing.assert_array_equal(sign.numpy(), want_sign)
    np.testing.assert_allclose(logabs.numpy(), want_log, rtol=tol)
    el = LA.cholesky(_t(SPD, dtype))
    np.testing.assert_allclose(el.numpy(), np.linalg.cholesky(SPD), rtol=tol, atol=tol)
    u = LA.cholesky(_t(SPD, dtype), upper=True)
    np.testing.assert_allclose(u.numpy(), np.linalg.cholesky(SPD).swapaxes(-1, -2), atol=tol)


def test_solve_broadcasts_batches_and_takes_vectors_and_left_false(conn):
    a, b = _t(M), _t(RHS)
    np.testing.assert_allclose(LA.solve(a, b).numpy(), np.linalg.solve(M, RHS), rtol=1e-10)
    v = rng.standard_normal(4)
    got = LA.solve(a, _t(v))
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got.numpy(), np.linalg.solve(M, v[:, None])[..., 0], rtol=1e-10)
    bt = rng.standard_normal((2, 3, 5, 4))  # X A = B
    want = np.linalg.solve(M.swapaxes(-1, -2), bt.swapaxes(-1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(LA.solve(a, _t(bt), left=False).numpy(), want, rtol=1e-10)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_reads_only_its_triangle(conn, upper, left, unit):
    tri = np.triu(M) if upper else np.tril(M)
    if unit:
        tri = tri - np.eye(4) * np.diagonal(tri, 0, -2, -1)[..., None] + np.eye(4)
    b = rng.standard_normal((2, 3, 4, 2) if left else (2, 3, 2, 4))
    got = LA.solve_triangular(_t(M), _t(b), upper=upper, left=left, unitriangular=unit)
    want = np.linalg.solve(tri, b) if left else np.linalg.solve(tri.swapaxes(-1, -2), b.swapaxes(-1, -2)).swapaxes(-1, -2)  # fmt: skip
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-12)


def test_norms_match_numpy(conn):
    a = _t(M)
    for ord_ in ["fro", 1, -1, math.inf, -math.inf]:
        want = np.linalg.norm(M, ord_, axis=(-2, -1))
        np.testing.assert_allclose(LA.matrix_norm(a, ord_).numpy(), want, rtol=1e-12)
        np.testing.assert_allclose(LA.norm(a, ord_, dim=(-2, -1)).numpy(), want, rtol=1e-12)
    kd = LA.matrix_norm(a, 1, dim=(0, -1), keepdim=True)
    np.testing.assert_allclose(
        kd.numpy(), np.abs(M).sum(0, keepdims=True).max(-1, keepdims=True), rtol=1e-12
    )
    for ord_ in [2, 1, 3.5, math.inf, -math.inf, 0]:
        want = np.linalg.norm(M, ord_, axis=-1)
        np.testing.assert_allclose(LA.vector_norm(a, ord_, dim=-1).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(LA.vector_norm(a).numpy(), np.linalg.norm(M.reshape(-1)))
    assert LA.vector_norm(a, keepdim=True).shape == (1, 1, 1, 1)
    np.testing.assert_allclose(LA.norm(a).numpy(), np.linalg.norm(M.reshape(-1)))
    np.testing.assert_allclose(LA.norm(a[0, 0], 1).numpy(), np.linalg.norm(M[0, 0], 1))


def test_products_powers_and_diagonal_match_numpy(conn):
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    np.testing.assert_allclose(LA.cross(_t(x), _t(y)).numpy(), np.cross(x, y))
    np.testing.assert_allclose(
        LA.cross(_t(x.T), _t(y.T), dim=0).numpy(), np.cross(x.T, y.T, axis=0)
    )
    np.testing.assert_allclose(LA.vecdot(_t(x), _t(y)).numpy(), (x * y).sum(-1))
    for n in [0, 1, 2, 5, -1, -3]:
        np.testing.assert_allclose(
            LA.matrix_power(_t(M), n).numpy(), np.linalg.matrix_power(M, n), rtol=1e-9
        )
    a, b, c = rng.standard_normal(3), rng.standard_normal((3, 4)), rng.standard_normal(4)
    got = LA.multi_dot([_t(a), _t(b), _t(c)])
    assert got.shape == ()
    np.testing.assert_allclose(got.item(), np.linalg.multi_dot([a, b, c]))
    np.testing.assert_allclose(LA.diagonal(_t(M), offset=1).numpy(), np.diagonal(M, 1, -2, -1))


def test_aliases_on_gt_and_on_tensors(conn):
    a = _t(M[0, 0])
    np.testing.assert_allclose(a.inverse().numpy(), np.linalg.inv(M[0, 0]))
    np.testing.assert_allclose(gt.inverse(a).numpy(), np.linalg.inv(M[0, 0]))
    np.testing.assert_allclose(a.det().item(), np.linalg.det(M[0, 0]))
    np.testing.assert_allclose(gt.det(a).item(), np.linalg.det(M[0, 0]))
    np.testing.assert_allclose(gt.slogdet(a).logabsdet.item(), np.linalg.slogdet(M[0, 0])[1])
    s = _t(SPD[0, 0])
    np.testing.assert_allclose(s.cholesky().numpy(), np.linalg.cholesky(SPD[0, 0]))
    assert gt.linalg.inv is LA.inv


@pytest.mark.parametrize(
    "call",
    [
        lambda a: LA.inv(a[..., :3]),
        lambda a: LA.det(a[..., :3]),
        lambda a: LA.slogdet(a[..., :3]),
        lambda a: LA.cholesky(a[..., :3]),
        lambda a: LA.solve(a[..., :3], a),
        lambda a: LA.matrix_power(a[..., :3], 2),
    ],
)
def test_non_square_matrices_raise_pytorchs_error(conn, call):
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        call(_t(M))


def test_bad_operands_raise_at_the_call(conn):
    with pytest.raises(RuntimeError, match="Incompatible shapes of A and B"):
        LA.solve(_t(M), _t(rng.standard_normal((3, 2))))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.inv(_t(np.ones(3)))
    with pytest.raises(RuntimeError, match="Expected a floating point tensor"):
        LA.inv(gt.tensor(np.eye(3, dtype=np.int64)))
    with pytest.raises(RuntimeError, match="must have length 3"):
        LA.cross(_t(np.ones((2, 4))), _t(np.ones((2, 4))))
    with pytest.raises(RuntimeError, match="multi_dot"):
        LA.multi_dot([_t(np.ones((2, 3)))])
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        LA.eigh(_t(M[..., :3]))


def test_singular_and_indefinite_matrices_fail_at_the_sync_point(conn):
    singular = np.ones((3, 3))
    with pytest.raises(RuntimeError, match="[Ss]ingular"):
        LA.inv(_t(singular)).numpy()
    with pytest.raises(RuntimeError, match="[Ss]ingular"):
        LA.solve(_t(singular), _t(np.ones((3, 1)))).numpy()
    with pytest.raises(RuntimeError, match="positive.definite"):
        LA.cholesky(_t(-np.eye(3))).numpy()
    # det and slogdet of a singular matrix are values, as in PyTorch
    assert LA.det(_t(singular)).item() == 0.0
    assert LA.slogdet(_t(singular)).logabsdet.item() == -math.inf


@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (5, 5)])
def test_qr_svd_pinv_and_rank_match_numpy(conn, shape):
    a = rng.standard_normal(shape)
    q, r = LA.qr(_t(a))
    want_q, want_r = np.linalg.qr(a)
    np.testing.assert_allclose(q.numpy(), want_q, atol=1e-12)
    np.testing.assert_allclose(r.numpy(), want_r, atol=1e-12)
    u, s, vh = LA.svd(_t(a), full_matrices=False)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(((u * s.unsqueeze(-2)) @ vh).numpy(), a, atol=1e-12)
    np.testing.assert_allclose(LA.svdvals(_t(a)).numpy(), s.numpy())
    np.testing.assert_allclose(LA.pinv(_t(a)).numpy(), np.linalg.pinv(a), atol=1e-12)
    for ord_ in ["nuc", 2, -2]:
        want = np.linalg.norm(a, ord_, axis=(-2, -1))
        np.testing.assert_allclose(LA.matrix_norm(_t(a), ord_).numpy(), want, rtol=1e-12)
    low = a[..., :1] * np.ones(shape[-1])  # rank one
    rank = LA.matrix_rank(_t(low))
    assert rank.dtype == "int64"
    np.testing.assert_array_equal(rank.numpy(), np.linalg.matrix_rank(low))
    np.testing.assert_allclose(LA.pinv(_t(low)).numpy(), np.linalg.pinv(low), atol=1e-10)


def test_eigh_reads_the_chosen_triangle(conn):
    w, v = LA.eigh(_t(SPD))
    want_w, want_v = np.linalg.eigh(SPD)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-12)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(want_v), atol=1e-10)
    skewed = np.tril(SPD) + 5 * np.triu(rng.standard_normal(SPD.shape), 1)  # upper is junk
    np.testing.assert_allclose(LA.eigvalsh(_t(skewed)).numpy(), want_w, rtol=1e-12)
    np.testing.assert_allclose(
        LA.eigvalsh(_t(skewed.swapaxes(-1, -2)), UPLO="U").numpy(), want_w, rtol=1e-12
    )


def test_lstsq_matches_numpy_for_tall_and_rank_deficient_systems(conn):
    a, b = rng.standard_normal((7, 3)), rng.standard_normal((7, 2))
    x, residuals, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    got = LA.lstsq(_t(a), _t(b))
    np.testing.assert_allclose(got.solution.numpy(), x, atol=1e-12)
    assert got.rank.item() == rank and got.singular_values.shape == (0,)
    assert got.residuals.shape == (0,)  # the default driver (gelsy) gives none, as in PyTorch
    full = LA.lstsq(_t(a), _t(b), driver="gelsd")
    np.testing.assert_allclose(full.residuals.numpy(), residuals, rtol=1e-10)
    np.testing.assert_allclose(full.singular_values.numpy(), sv)
    low = a[:, :1] * np.ones(3)
    np.testing.assert_allclose(
        LA.lstsq(_t(low), _t(b[:, 0])).solution.numpy(),
        np.linalg.lstsq(low, b[:, 0], rcond=None)[0],
        atol=1e-10,
    )


def test_complete_qr_of_a_tall_matrix_gives_a_square_orthogonal_q_and_no_gradient(conn):
    a = np.random.default_rng(3).standard_normal((2, 5, 3))
    q, r = LA.qr(gt.tensor(a), mode="complete")
    assert tuple(q.shape) == (2, 5, 5) and tuple(r.shape) == (2, 5, 3)
    want_q, want_r = np.linalg.qr(a, mode="complete")  # (LAPACK's signs, as PyTorch's CPU)
    np.testing.assert_allclose(q.numpy(), want_q, atol=1e-12)
    np.testing.assert_allclose(r.numpy(), want_r, atol=1e-12)
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-12)
    x = gt.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete'"):
        LA.qr(x, mode="complete").Q.sum().backward()
