"""``gt.linalg.householder_product`` (``gt.orgqr``, ``Tensor.orgqr``) and the LDL factorisation
(``ldl_factor``, ``ldl_factor_ex``, ``ldl_solve``) through a real cluster. Householder products
against NumPy's own QR (LAPACK's ``geqrf`` reflectors and ``orgqr``'s Q) and against the
reflectors multiplied out here, with gradients checked by finite differences; the LDL factors
against LAPACK's ``?sytrf`` / ``?hetrf`` as SciPy exposes them (skipped without SciPy) and solves
by their residuals; PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.linalg as LA

pytestmark = pytest.mark.timeout(120)
rng = np.random.default_rng(17)


def _complex(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _reflectors_multiplied(a: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``H_1 ... H_k`` (first n columns), one matrix at a time, as the definition reads."""
    *batch, m, n = a.shape
    out = np.empty(a.shape, dtype=np.result_type(a, tau))
    for idx in np.ndindex(*batch):
        q = np.eye(m, dtype=out.dtype)
        for i in range(tau.shape[-1]):
            v = np.zeros(m, dtype=out.dtype)
            v[i] = 1.0
            v[i + 1 :] = a[idx][i + 1 :, i]
            q = q @ (np.eye(m) - tau[idx][i] * np.outer(v, v.conj()))
        out[idx] = q[:, :n]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_householder_product_of_geqrf_output_is_the_q_of_qr(conn, dtype):
    a = _complex(2, 6, 4) if dtype.startswith("complex") else rng.standard_normal((2, 6, 4))
    h, tau = np.linalg.qr(a, mode="raw")  # LAPACK geqrf's reflectors (h is transposed)
    q_want = np.linalg.qr(a)[0]
    got = LA.householder_product(gt.tensor(h.swapaxes(-1, -2).astype(dtype)),
                                 gt.tensor(tau.astype(dtype)))  # fmt: skip
    assert got.dtype == dtype and got.shape == (2, 6, 4)
    tol = 1e-5 if dtype in ("float32", "complex64") else 1e-12
    np.testing.assert_allclose(got.numpy(), q_want, atol=tol)


@pytest.mark.parametrize("complex_", [False, True])
def test_fewer_reflectors_than_columns_and_any_tau(conn, complex_):
    a = _complex(3, 5, 4) if complex_ else rng.standard_normal((3, 5, 4))
    tau = _complex(3, 2) if complex_ else rng.standard_normal((3, 2))
    got = LA.householder_product(gt.tensor(a), gt.tensor(tau))
    np.testing.assert_allclose(got.numpy(), _reflectors_multiplied(a, tau), atol=1e-12)
    np.testing.assert_allclose(gt.orgqr(gt.tensor(a), gt.tensor(tau)).numpy(), got.numpy())
    np.testing.assert_allclose(gt.tensor(a).orgqr(gt.tensor(tau)).numpy(), got.numpy())


def _loss(q: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(w * q.real) + np.sum(np.abs(q) ** 2 * w))


@pytest.mark.parametrize("complex_", [False, True])
def test_householder_product_gradients_match_finite_differences(conn, complex_):
    a = _complex(5, 3) if complex_ else rng.standard_normal((5, 3))
    tau = _complex(3) if complex_ else rng.standard_normal(3)
    w = rng.standard_normal((5, 3))
    ga, gtau = gt.tensor(a, requires_grad=True), gt.tensor(tau, requires_grad=True)
    q = LA.householder_product(ga, gtau)
    gw = gt.tensor(w)
    ((q.real if complex_ else q) * gw).sum().add((q.abs() ** 2 * gw).sum()).backward()

    def numeric(x: np.ndarray, other: np.ndarray, first: bool) -> np.ndarray:
        # PyTorch's convention for complex leaves: dL/d(re) + i dL/d(im)
        grad = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            for unit in (1.0, 1j) if complex_ else (1.0,):
                hi, lo = x.copy(), x.copy()
                hi[idx] += 1e-6 * unit
                lo[idx] -= 1e-6 * unit
                f = [_loss(_reflectors_multiplied(*((y, other) if first else (other, y))), w)
                     for y in (hi, lo)]  # fmt: skip
                grad[idx] += unit * (f[0] - f[1]) / 2e-6
        return grad

    np.testing.assert_allclose(ga.grad.numpy(), numeric(a, tau, True), atol=1e-6)
    np.testing.assert_allclose(gtau.grad.numpy(), numeric(tau, a, False), atol=1e-6)
    assert np.all(np.triu(ga.grad.numpy()) == 0)  # the diagonal and above are never read


def test_householder_product_refuses_what_pytorch_refuses(conn):
    a, tau = gt.zeros(5, 3, dtype="float64"), gt.zeros(3, dtype="float64")
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.householder_product(gt.zeros(5), tau)
    with pytest.raises(RuntimeError, match="one dimension less than input"):
        LA.householder_product(a, gt.zeros(3, 1, dtype="float64"))
    with pytest.raises(RuntimeError, match=r"input.shape\[-2\] must be greater than or equal"):
        LA.householder_product(a.mT, gt.zeros(2, dtype="float64"))
    with pytest.raises(RuntimeError, match=r"input.shape\[-1\] must be greater than or equal"):
        LA.householder_product(a, gt.zeros(4, dtype="float64"))
    with pytest.raises(RuntimeError, match="batch dimensions of tau"):
        LA.householder_product(gt.zeros(2, 5, 3), gt.zeros(1, 3))
    with pytest.raises(
        RuntimeError, match="tau dtype gt.float32 does not match input dtype gt.float64"
    ):
        LA.householder_product(a, gt.zeros(3))
    with pytest.raises(TypeError):
        LA.householder_product(gt.zeros(5, 3, dtype="int64"), gt.zeros(3, dtype="int64"))
    assert LA.householder_product(gt.zeros(4, 0), gt.zeros(0)).shape == (4, 0)


# ------------------------------------------------------------------------------- LDL
def _indefinite(batch: int, n: int, complex_: bool = False) -> np.ndarray:
    """Random matrices made to need every kind of pivot: small or zero diagonals (2x2 blocks and
    interchanges), and one with a zero column (``info``)."""
    a = _complex(batch, n, n) if complex_ else rng.standard_normal((batch, n, n))
    a[0, np.arange(n), np.arange(n)] *= 0.01
    a[1, np.arange(n), np.arange(n)] = 0
    a[2, :, n // 2] = a[2, n // 2, :] = 0  # a zero row and column: D gets a zero
    return a


@pytest.mark.parametrize(
    ("dtype", "hermitian"),
    [("float64", False), ("float32", False), ("complex128", False), ("complex128", True)],
)
def test_ldl_factor_gives_lapacks_sytrf_and_hetrf_output(conn, dtype, hermitian):
    lapack = pytest.importorskip("scipy.linalg.lapack")
    n = 9
    a = _indefinite(4, n, dtype.startswith("complex")).astype(dtype)
    ld, piv, info = LA.ldl_factor_ex(gt.tensor(a), hermitian=hermitian)
    assert ld.dtype == dtype and piv.dtype == "int32" and info.dtype == "int32"
    prefix = {"float64": "d", "float32": "s", "complex128": "z"}[dtype]
    factor = getattr(lapack, f"{prefix}{'he' if hermitian else 'sy'}trf")
    tol = 1e-4 if dtype == "float32" else 1e-11
    kinds = set()
    for b in range(4):
        want_ld, want_piv, want_info = factor(a[b], lower=1)
        want_ld = np.tril(want_ld)  # (PyTorch's LD has zeros above the diagonal; LAPACK leaves A)
        if hermitian:
            want_ld[np.arange(n), np.arange(n)] = want_ld.diagonal().real
        np.testing.assert_array_equal(piv.numpy()[b], want_piv)
        assert info.numpy()[b] == want_info
        np.testing.assert_allclose(ld.numpy()[b], want_ld, rtol=tol, atol=tol)
        kinds |= {"2x2" if p < 0 else ("swap" if p != i + 1 else "1x1")
                  for i, p in enumerate(want_piv)}  # fmt: skip
        kinds |= {"zero column"} if want_info else set()
    assert kinds == {"1x1", "2x2", "swap", "zero column"}  # the inputs reach every path


@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_solve_solves_and_broadcasts_batches(conn, hermitian):
    n = 7
    a = _indefinite(3, n, complex_=hermitian)[:2]  # (the third has a zero column)
    low = np.tril(a)
    full = low + (np.conj(np.swapaxes(np.tril(a, -1), -1, -2)) if hermitian
                  else np.swapaxes(np.tril(a, -1), -1, -2))  # fmt: skip
    if hermitian:
        full[..., np.arange(n), np.arange(n)] = full.diagonal(0, -2, -1).real
    ld, piv = LA.ldl_factor(gt.tensor(a), hermitian=hermitian)
    b = _complex(3, 1, n, 2) if hermitian else rng.standard_normal((3, 1, n, 2))
    x = LA.ldl_solve(ld, piv, gt.tensor(b), hermitian=hermitian)
    assert x.shape == (3, 2, n, 2)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(full, b), rtol=1e-10, atol=1e-10)
    single = LA.ldl_solve(ld[0], piv[0], gt.tensor(b[0, 0]), hermitian=hermitian)
    np.testing.assert_allclose(single.numpy(), np.linalg.solve(full[0], b[0, 0]), atol=1e-10)


def test_ldl_has_no_derivative_as_in_pytorch(conn):
    a = gt.tensor(_indefinite(3, 4)[:2], requires_grad=True)
    ld, piv = LA.ldl_factor(a)
    assert ld.requires_grad and not piv.requires_grad
    with pytest.raises(RuntimeError, match="derivative for linalg_ldl_factor_ex"):
        ld.sum().backward()
    b = gt.tensor(rng.standard_normal((4, 1)), requires_grad=True)
    x = LA.ldl_solve(ld.detach(), piv, b)
    assert x.requires_grad
    with pytest.raises(RuntimeError, match="derivative for linalg_ldl_solve"):
        x.sum().backward()


def test_ldl_refuses_what_pytorch_refuses(conn):
    singular = gt.tensor([[0.0, 0.0], [0.0, 1.0]], dtype="float64")
    assert LA.ldl_factor_ex(singular).info.item() == 1
    with pytest.raises(RuntimeError, match="could not be completed"):
        LA.ldl_factor(singular)
    with pytest.raises(RuntimeError, match="could not be completed"):
        LA.ldl_factor_ex(singular, check_errors=True)
    with pytest.raises(RuntimeError, match="square matrices, but they are 3 by 4"):
        LA.ldl_factor(gt.zeros(3, 4))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.ldl_factor(gt.zeros(3))
    with pytest.raises(TypeError, match="floating point or complex"):
        LA.ldl_factor(gt.zeros(3, 3, dtype="int64"))
    ld, piv = LA.ldl_factor(gt.eye(3))
    with pytest.raises(RuntimeError, match="each A matrix is 3 by 3 but each b matrix is 4 by 2"):
        LA.ldl_solve(ld, piv, gt.zeros(4, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        LA.ldl_solve(ld, piv, gt.zeros(3, 2, dtype="float64"))
    with pytest.raises(RuntimeError, match=r"pivots with shape \[2\]"):
        LA.ldl_solve(ld, piv[:2], gt.zeros(3, 2))
    assert LA.ldl_factor(gt.zeros(0, 0)).LD.shape == (0, 0)
