"""Idioms of robotics and control code that GT once got wrong (found while writing the
``robotics_control`` programs): a training log that prints the gains of a differentiable LQR
(``linalg.solve``) or the learned cost matrix (``torch.diag``) shows PyTorch's ``grad_fn`` names,
so the linear-algebra functions composed on the client name their result's node as PyTorch's
ops do (``LinalgSolveExBackward0``, ``LinalgMatrixExpBackward0``, ``LinalgCrossBackward0`` ...),
not after the last primitive they ended with. Expected names are PyTorch 2's; gradients are
unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _inputs():
    rng = np.random.default_rng(0)
    a = gt.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    b = gt.tensor(rng.standard_normal(4), requires_grad=True)
    r = gt.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    spd = a @ a.T + gt.eye(4, dtype=gt.float64)
    return a, b, r, spd


CASES = [
    ("solve_vector", lambda a, b, r, s: gt.linalg.solve(a, b), "LinalgSolveExBackward0"),
    ("solve_matrix", lambda a, b, r, s: gt.linalg.solve(a, a), "LinalgSolveExBackward0"),
    ("solve_right", lambda a, b, r, s: gt.linalg.solve(a, a, left=False), "LinalgSolveExBackward0"),
    ("solve_ex", lambda a, b, r, s: gt.linalg.solve_ex(a, b)[0], "LinalgSolveExBackward0"),
    ("inv", lambda a, b, r, s: gt.linalg.inv(a), "LinalgInvExBackward0"),
    ("inverse", lambda a, b, r, s: gt.inverse(a), "LinalgInvExBackward0"),
    ("tensor_inverse", lambda a, b, r, s: a.inverse(), "LinalgInvExBackward0"),
    ("matrix_power_neg", lambda a, b, r, s: gt.linalg.matrix_power(a, -1), "LinalgInvExBackward0"),
    ("linalg_cholesky", lambda a, b, r, s: gt.linalg.cholesky(s), "LinalgCholeskyExBackward0"),
    ("linalg_cholesky_upper", lambda a, b, r, s: gt.linalg.cholesky(s, upper=True), "LinalgCholeskyExBackward0"),
    ("cholesky_ex_upper", lambda a, b, r, s: gt.linalg.cholesky_ex(s, upper=True)[0], "LinalgCholeskyExBackward0"),
    ("torch_cholesky", lambda a, b, r, s: gt.cholesky(s), "CholeskyBackward0"),
    ("tensor_cholesky_upper", lambda a, b, r, s: s.cholesky(upper=True), "CholeskyBackward0"),
    ("matrix_exp", lambda a, b, r, s: gt.linalg.matrix_exp(a), "LinalgMatrixExpBackward0"),
    ("tensor_matrix_exp", lambda a, b, r, s: a.matrix_exp(), "LinalgMatrixExpBackward0"),
    ("linalg_cross", lambda a, b, r, s: gt.linalg.cross(b[:3], b[1:]), "LinalgCrossBackward0"),
    ("cross_rows", lambda a, b, r, s: gt.linalg.cross(a[:, :3], a[:, 1:]), "LinalgCrossBackward0"),
    ("torch_cross", lambda a, b, r, s: gt.cross(r, r.flip(0), dim=1), "LinalgCrossBackward0"),
    ("pinv", lambda a, b, r, s: gt.linalg.pinv(r), "LinalgPinvBackward0"),
    ("lstsq", lambda a, b, r, s: gt.linalg.lstsq(a, b).solution, "LinalgLstsqBackward0"),
    ("cholesky_solve", lambda a, b, r, s: gt.cholesky_solve(b[:, None], a), "CholeskySolveBackward0"),
    ("cholesky_inverse", lambda a, b, r, s: gt.cholesky_inverse(gt.linalg.cholesky(s)), "CholeskyInverseBackward0"),
    ("solve_triangular_right", lambda a, b, r, s: gt.linalg.solve_triangular(a, a, upper=True, left=False), "LinalgSolveTriangularBackward0"),
    ("eigvalsh", lambda a, b, r, s: gt.linalg.eigvalsh(s), "LinalgEighBackward0"),
    ("eigh_vectors", lambda a, b, r, s: gt.linalg.eigh(s, UPLO="U")[1], "LinalgEighBackward0"),
    ("svdvals", lambda a, b, r, s: gt.linalg.svdvals(r), "LinalgSvdBackward0"),
    ("svd_U", lambda a, b, r, s: gt.linalg.svd(r)[0], "LinalgSvdBackward0"),
    ("svd_Vh", lambda a, b, r, s: gt.linalg.svd(r, full_matrices=False)[2], "LinalgSvdBackward0"),
    ("torch_svd_V", lambda a, b, r, s: gt.svd(a)[2], "TransposeBackward0"),
    ("qr_Q", lambda a, b, r, s: gt.linalg.qr(r)[0], "LinalgQrBackward0"),
    ("qr_r_mode", lambda a, b, r, s: gt.linalg.qr(a, mode="r")[1], "LinalgQrBackward0"),
    ("eigvals", lambda a, b, r, s: gt.linalg.eigvals(a), "LinalgEigBackward0"),
    ("slogdet", lambda a, b, r, s: gt.linalg.slogdet(a)[1], "LinalgSlogdetBackward0"),
    ("slogdet_sign", lambda a, b, r, s: gt.slogdet(a)[0], "LinalgSlogdetBackward0"),
    ("trace", lambda a, b, r, s: gt.trace(a), "TraceBackward0"),
    ("diag_of_vector", lambda a, b, r, s: gt.diag(b.exp()), "DiagEmbedBackward0"),
    ("diag_of_vector_offset", lambda a, b, r, s: gt.diag(b, -1), "DiagEmbedBackward0"),
    ("diag_of_matrix", lambda a, b, r, s: gt.diag(a, 1), "DiagonalBackward0_copy"),
    ("diagonal_view", lambda a, b, r, s: a.diagonal(), "DiagonalBackward0"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "how", "want"), CASES, ids=[c[0] for c in CASES])
def test_linear_algebra_results_are_named_as_pytorchs(conn, name, how, want):
    out = how(*_inputs())
    assert out.grad_fn.name() == want
    assert f"grad_fn=<{want}>" in repr(out)


def test_names_do_not_change_gradients_and_no_grad_results_have_no_node(conn):
    a, b, _, _ = _inputs()
    x = gt.linalg.solve(a, b)
    (x * gt.arange(4.0, dtype=gt.float64)).sum().backward()
    an, bn = a.detach().numpy(), b.detach().numpy()
    gb = np.linalg.solve(an.T, np.arange(4.0))
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-10)
    np.testing.assert_allclose(a.grad.numpy(), -np.outer(gb, np.linalg.solve(an, bn)), rtol=1e-10)
    with gt.no_grad():
        assert gt.linalg.matrix_exp(a).grad_fn is None
        assert gt.diag(b).grad_fn is None
    assert gt.linalg.inv(a.detach()).grad_fn is None


def test_a_printed_lqr_gain_reads_as_pytorchs(conn):
    q = gt.zeros(2, dtype=gt.float64, requires_grad=True)
    Q = gt.diag(q.exp())
    K = gt.linalg.solve(Q + gt.eye(2, dtype=gt.float64), gt.ones(2, 2, dtype=gt.float64))
    assert repr(Q).endswith("dtype=gt.float64, grad_fn=<DiagEmbedBackward0>)")
    assert repr(K) == (
        "tensor([[0.5000, 0.5000],\n        [0.5000, 0.5000]], dtype=gt.float64,\n"
        "       grad_fn=<LinalgSolveExBackward0>)"
    )
