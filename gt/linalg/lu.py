"""The LU factorisation with partial pivoting: ``linalg.lu_factor`` (``_ex``), ``linalg.lu``,
``linalg.lu_solve``, ``lu_unpack`` and the older ``torch.lu``.

Composed on the client, one column at a time (a pivot ``argmax``, a row swap by ``gather``, one
elimination step), batched over leading dimensions, with no sync point; so autograd differentiates
it like any other composition. Pivots are LAPACK's: 1-based int32 row swaps applied in order. A
zero pivot leaves its column unscaled (as LAPACK does) and is reported in ``info`` (the 1-based
index of the first one), so a singular matrix factors without NaNs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gt.errors import ShapeError
from gt.factories import arange, eye
from gt.linalg.core import solve_triangular
from gt.ops.arith import where
from gt.ops.shaping import cat, stack
from gt.ops.views import as_new
from gt.runtime.ops import return_types

if TYPE_CHECKING:
    from gt.tensor import Tensor

LUFactorResult = return_types.linalg_lu_factor  # (as PyTorch's torch.return_types)
LUFactorExResult = return_types.linalg_lu_factor_ex
LUResult = return_types.linalg_lu  # (lu_unpack's: return_types.lu_unpack)

_FLOATS = ("float32", "float64", "complex64", "complex128")


def _check(op: str, a: Tensor) -> None:
    if a.ndim < 2:
        raise ShapeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if a.dtype not in _FLOATS:
        raise TypeError(
            f"{op}: Expected a floating point or complex tensor (float32, float64, complex64 or "
            f"complex128), got {a.dtype}"
        )


def _swap_index(m: int, j: int, p: Tensor, like: Tensor) -> Tensor:
    """Row indices ``0 .. m-1`` with ``j`` and ``p`` (per batch entry) exchanged."""
    rows = arange(m, dtype="int64").reshape((1,) * (like.ndim - 2) + (m,))
    pj = p.unsqueeze(-1)
    return where(rows == j, pj, where(rows == pj, j, rows))


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:  # noqa: N803
    """``LU`` (``L`` below the diagonal, unit diagonal implied, ``U`` on and above), LAPACK's
    ``pivots`` and ``info`` (0, or the 1-based column of the first zero pivot)."""
    _check("linalg.lu_factor_ex", A)
    if not pivot:
        raise NotImplementedError(
            "linalg.lu_factor: pivot=False is only supported on CUDA in PyTorch"
        )
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    lu = A
    pivots, zero_at = [], None
    for j in range(k):
        p = lu[..., j:, j].abs().argmax(-1) + j
        pivots.append(p)
        idx = _swap_index(m, j, p, lu)
        lu = lu.gather(-2, idx.unsqueeze(-1).expand(*lu.shape))
        if j == m - 1:
            break
        head = lu[..., j : j + 1, j : j + 1]
        zero = head == 0
        first = where(zero, j + 1, 0).reshape(tuple(lu.shape[:-2]))
        zero_at = first if zero_at is None else where(zero_at > 0, zero_at, first)
        factor = where(zero, 0.0, lu[..., j + 1 :, j : j + 1] / where(zero, 1.0, head))
        trailing = lu[..., j + 1 :, j + 1 :] - factor * lu[..., j : j + 1, j + 1 :]
        lower = cat([lu[..., j + 1 :, :j], factor, trailing], -1)
        lu = cat([lu[..., : j + 1, :], lower], -2)
    if k and m - 1 < k:  # the last pivot of a square (or wide) matrix is checked here
        last = lu[..., k - 1, k - 1] == 0
        tail = where(last, k, 0)
        zero_at = tail if zero_at is None else where(zero_at > 0, zero_at, tail)
    batch = tuple(A.shape[:-2])
    piv = (
        (stack(pivots, -1) + 1).to("int32") if pivots else A.new_zeros(batch + (0,), dtype="int32")
    )
    info = zero_at.to("int32") if zero_at is not None else A.new_zeros(batch, dtype="int32")
    if check_errors and bool((info > 0).any().item()):
        raise RuntimeError("linalg.lu_factor_ex: The factorization could not be completed because "
                           "the input is not invertible.")  # fmt: skip
    return LUFactorExResult(lu, piv, info)


def lu_factor(A: Tensor, *, pivot: bool = True) -> LUFactorResult:  # noqa: N803
    """The compact LU factorisation ``(LU, pivots)`` of each matrix (``P A = L U``). A singular
    matrix (a zero pivot) raises PyTorch's error at the call: like PyTorch's, on GPUs too, the
    check reads ``info`` back (a sync point); ``lu_factor_ex`` does not check."""
    out = lu_factor_ex(A, pivot=pivot)
    if A.numel():
        info = out.info.reshape(-1).tolist()
        bad = next((k for k, i in enumerate(info) if i > 0), None)
        if bad is not None:
            batch = f"(Batch element {bad}): " if A.ndim > 2 else ""
            raise RuntimeError(
                f"torch.linalg.lu_factor: {batch}U[{info[bad]},{info[bad]}] is zero and using it "
                "on lu_solve would result in a division by zero. If you still want to perform "
                "the factorization, consider calling linalg.lu(A, pivot) or "
                "linalg.lu_factor_ex(A, pivot)"
            )
    return LUFactorResult(out.LU, out.pivots)


def _permutation(pivots: Tensor, m: int) -> Tensor:
    """The row order ``perm`` with ``(P^T A)[i] = A[perm[i]]`` from LAPACK's swaps."""
    perm = arange(m, dtype="int64").reshape((1,) * (pivots.ndim - 1) + (m,))
    perm = perm.expand(*pivots.shape[:-1], m)
    for j in range(pivots.shape[-1]):
        p = pivots[..., j].long() - 1
        idx = _swap_index(m, j, p, perm.unsqueeze(-1))
        perm = perm.gather(-1, idx)
    return perm


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,  # noqa: N803
              unpack_pivots: bool = True) -> Any:  # fmt: skip
    """``P, L, U`` with ``A = P @ L @ U`` from a compact factorisation."""
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    L = U = P = None  # noqa: N806
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + eye(m, k, dtype=LU_data.dtype)  # noqa: N806
        U = LU_data[..., :k, :].triu()  # noqa: N806
    if unpack_pivots:
        perm = _permutation(LU_pivots, m)
        # P^T A = A[perm], so P[perm[i], i] = 1
        # (a new tensor: PyTorch's P is contiguous, the transpose of a temporary is not)
        P = as_new(eye(m, dtype=LU_data.dtype)[perm].mT)  # noqa: N806
    return return_types.lu_unpack(P, L, U)


def lu(A: Tensor, *, pivot: bool = True) -> LUResult:  # noqa: N803
    """``P, L, U`` with ``A = P @ L @ U`` (``L`` unit lower, ``U`` upper)."""
    _check("linalg.lu", A)
    f = lu_factor_ex(A, pivot=pivot)
    return LUResult(*lu_unpack(f.LU, f.pivots))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803
             adjoint: bool = False) -> Tensor:  # fmt: skip
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``; ``adjoint``: with ``A^H``, the
    transpose of a real matrix) from ``A``'s compact LU factorisation."""
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return lu_solve(LU, pivots, B.mH, left=True, adjoint=not adjoint).mH
    m = LU.shape[-1]
    perm = _permutation(pivots, m)
    if not adjoint:  # A = P L U: X = U^-1 L^-1 P^T B
        rows = B.gather(-2, perm.unsqueeze(-1).expand(*perm.shape, B.shape[-1]))
        y = solve_triangular(LU, rows, upper=False, unitriangular=True)
        return solve_triangular(LU, y, upper=True)
    # A^H = U^H L^H P^T: X = P L^-H U^-H B
    y = solve_triangular(LU.mH, B, upper=False)
    z = solve_triangular(LU.mH, y, upper=True, unitriangular=True)
    inverse = perm.argsort(-1)
    return z.gather(-2, inverse.unsqueeze(-1).expand(*inverse.shape, z.shape[-1]))


def torch_lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> Any:  # noqa: N803
    """The older ``torch.lu``: ``(LU, pivots)`` (and ``infos``)."""
    f = lu_factor_ex(A, pivot=pivot)
    return (f.LU, f.pivots, f.info) if get_infos else (f.LU, f.pivots)


__all__ = ["LUFactorExResult", "LUFactorResult", "LUResult", "lu", "lu_factor", "lu_factor_ex",
           "lu_solve"]  # fmt: skip
# (lu_unpack and torch_lu are torch-level: see gt.linalg.toplevel)
