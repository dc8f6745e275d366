"""What a probe of ``torch.linalg`` against PyTorch 2.13 found on Dec 6 (7,655 cases), as PyTorch
behaves: ``inv_ex``/``solve_ex`` report a singular matrix in ``info`` (LAPACK's first zero pivot)
instead of failing; ``inv``/``solve`` of one raise ``LinAlgError`` with PyTorch's message at the
sync point; ``addmm(beta=0)`` does not read its input; ``norm(p="nuc")``; the older keywords
(``rcond``, ``tol``, ``driver``) and ``out=``; the older ``svd``'s ``V`` of a complex matrix. Every
test runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def _batch():
    return gt.tensor([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 2.0]]], dtype=gt.float64)


def test_inv_ex_and_solve_ex_report_a_singular_matrix_in_info(conn):
    a = _batch()
    inv = gt.linalg.inv_ex(a)
    assert inv.info.tolist() == [2, 0] and inv.info.dtype == gt.int32
    assert inv.inverse[1].tolist() == [[1.0, 0.0], [0.0, 0.5]]
    sol = gt.linalg.solve_ex(a, gt.ones(2, 2, 1, dtype=gt.float64))
    assert sol.info.tolist() == [2, 0] and sol.result[1].tolist() == [[1.0], [0.5]]
    assert gt.linalg.inv_ex(gt.eye(3, dtype=gt.float64)).info.item() == 0
    assert gt.linalg.inv_ex(gt.full((2, 2), float("nan"))).info.item() == 0  # (no zero pivot)
    with pytest.raises(gt.linalg.LinAlgError, match=r"linalg.inv_ex: \(Batch element 0\): The diagonal element 2 is zero"):  # fmt: skip
        gt.linalg.inv_ex(a, check_errors=True)
    with pytest.raises(RuntimeError, match="linalg.solve_ex: The solver failed"):
        gt.linalg.solve_ex(a[0], gt.ones(2, dtype=gt.float64), check_errors=True)


def test_a_singular_inv_or_solve_raises_linalg_error_at_the_sync(conn):
    a = _batch()
    with pytest.raises(gt.linalg.LinAlgError, match="input matrix is singular"):
        gt.linalg.inv(a).sum().item()
    with pytest.raises(gt.linalg.LinAlgError, match="The solver failed"):
        gt.linalg.solve(a[0], gt.ones(2, dtype=gt.float64)).tolist()
    assert gt.linalg.inv(a[1]).tolist() == [[1.0, 0.0], [0.0, 0.5]]  # (the worker is fine)


def test_a_singular_triangular_solve_gives_inf_and_nan_as_pytorchs_substitution(conn):
    # (PyTorch's triangular solve does not check its pivots: 1 / 0 and what follows from it)
    inf, nan = float("inf"), float("nan")
    ones = gt.ones(2, 1, dtype=gt.float64)
    upper = gt.tensor([[2.0, 1.0], [0.0, 0.0]], dtype=gt.float64)
    assert gt.linalg.solve_triangular(upper, ones, upper=True).tolist() == [[-inf], [inf]]
    lower = gt.tensor([[0.0, 0.0], [1.0, 3.0]], dtype=gt.float64)
    assert gt.linalg.solve_triangular(lower, ones, upper=False).tolist() == [[inf], [-inf]]
    got = gt.linalg.lu_solve(*gt.linalg.lu_factor_ex(gt.zeros(2, 2, dtype=gt.float64))[:2], ones)
    assert str(got.tolist()) == str([[nan], [inf]])
    # cholesky_inverse and lu_factor check, at the call, as PyTorch's do
    with pytest.raises(gt.linalg.LinAlgError, match=r"\(Batch element 1\): The diagonal element 2"):
        gt.cholesky_inverse(gt.stack([gt.eye(2), gt.tensor([[1.0, 0.0], [1.0, 0.0]])]))
    with pytest.raises(RuntimeError, match=r"lu_factor: \(Batch element 1\): U\[2,2\] is zero"):
        gt.linalg.lu_factor(gt.stack([gt.eye(2), gt.tensor([[1.0, 2.0], [2.0, 4.0]])]))


def test_addmm_with_beta_zero_does_not_read_its_input(conn):
    nan = float("nan")
    ones = gt.ones(2, 2)
    assert gt.addmm(gt.full((2, 2), nan), ones, ones, beta=0).tolist() == [[2.0, 2.0]] * 2
    assert gt.addmv(gt.full((2,), nan), ones, gt.ones(2), beta=0).tolist() == [2.0, 2.0]


def test_the_nuclear_norm_and_the_older_keywords(conn):
    x = gt.arange(6.0, dtype=gt.float64).reshape(2, 3)
    assert gt.norm(x, p="nuc").item() == pytest.approx(8.348469228349535)
    assert x.norm(p="nuc", keepdim=True).shape == (1, 1)
    m = gt.tensor([[1.0, 0.0], [0.0, 1e-3]], dtype=gt.float64)
    assert gt.linalg.matrix_rank(m, tol=1e-2).item() == 1
    assert gt.linalg.pinv(m, rcond=1e-2).tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert gt.linalg.svd(m, driver=None).S.tolist() == [1.0, 1e-3]
    assert gt.linalg.svdvals(m, driver=None).tolist() == [1.0, 1e-3]
    out = gt.empty(2, 2, dtype=gt.float64)
    assert gt.linalg.inv(m, out=out) is out and out.tolist() == [[1.0, 0.0], [0.0, 1000.0]]


def test_the_older_svd_gives_v_conjugated_and_square_zeros_without_uv(conn):
    z = gt.tensor([[1 + 2j, 0.5j], [3 - 1j, 1 + 1j], [0.25, -2j]], dtype=gt.complex128)
    u, s, v = gt.svd(z)
    assert (u @ gt.diag(s).to(z.dtype) @ v.mH - z).abs().max().item() < 1e-12
    none = gt.svd(gt.ones(3, 2), compute_uv=False)
    assert none.U.shape == (3, 3) and none.V.shape == (2, 2) and none.U.abs().sum().item() == 0


def test_conj_is_a_view_and_fft_helpers_at_the_edges(conn):
    z = gt.tensor([1 + 2j, 3 - 1j])
    c = z.conj()
    z.add_(10)
    assert c.tolist() == [11 - 2j, 13 + 1j] and c._base is z
    c[0] = 0
    assert z.tolist()[0] == 0j
    assert gt.fft.fftfreq(0).shape == (0,)
    freq = gt.fft.fftfreq(4, d=0).tolist()
    assert freq[1:] == [float("inf"), float("-inf"), float("-inf")] and freq[0] != freq[0]
    power = gt.float_power(gt.tensor([1 + 1j]), 2)
    assert power.dtype == gt.complex128 and power.tolist() == [2j]
