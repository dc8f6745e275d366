"""More of ``torch.linalg``, composed: ``matrix_exp``, ``cond``, ``solve_ex``, ``tensorinv``,
``tensorsolve``, ``vander``, ``householder_product``, and ``torch.cholesky_solve`` /
``cholesky_inverse``.

``matrix_exp`` is scaling and squaring with the degree-13 Padé approximant (N. J. Higham, "The
scaling and squaring method for the matrix exponential revisited", SIAM J. Matrix Anal. Appl. 26,
2005: its coefficients and its bound theta_13 = 5.37): one sync point reads the largest 1-norm of
the batch to choose how many squarings, then everything is matmuls and one solve, so the
gradient comes from differentiating those.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gt.errors import LinAlgError, ShapeError
from gt.factories import arange, eye
from gt.grad_graph import label
from gt.linalg.core import (
    inv,
    lu_info,
    matrix_norm,
    raise_if_singular,
    solve,
    solve_triangular,
    solve_with,
    svdvals,
)
from gt.runtime.ops import return_types

if TYPE_CHECKING:
    from gt.tensor import Tensor

SolveExResult = return_types.linalg_solve_ex  # (as PyTorch's torch.return_types)

_HOUSEHOLDER_DTYPES = ("float32", "float64", "complex64", "complex128")

#: Padé degree-13 coefficients b_0 .. b_13 (Higham 2005, table 2.3's source).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)  # fmt: skip
_THETA13 = 5.371920351148152


def matrix_exp(A: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
    """``exp(A)`` of each square matrix (one sync point: the norm that sets the scaling)."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are "
                         f"{A.shape[-2] if A.ndim > 1 else 1} by {A.shape[-1]} matrices")  # fmt: skip
    if not (A.is_floating_point() or A.is_complex()):
        raise TypeError(
            f"linalg.matrix_exp: expected a floating point or complex tensor, got {A.dtype}"
        )
    if A.dtype in ("float16", "bfloat16"):  # (computed in float32, rounded once)
        return matrix_exp(A.float()).to(A.dtype)
    n = A.shape[-1]
    if n == 0:
        return label(A.clone(), "LinalgMatrixExpBackward0")
    norm = float(A.abs().sum(-2).amax().item())  # the largest 1-norm in the batch
    squarings = max(0, math.ceil(math.log2(norm / _THETA13))) if norm > _THETA13 else 0
    a = A * (0.5**squarings) if squarings else A
    b = _PADE13
    ident = eye(n, dtype=A.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * ident)  # fmt: skip
    v = (
        a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2)
        + b[6] * a6
        + b[4] * a4
        + b[2] * a2
        + b[0] * ident
    )
    r = solve(v - u, v + u)
    for _ in range(squarings):
        r = r @ r
    return label(r, "LinalgMatrixExpBackward0")


def cond(A: Tensor, p: Any = None) -> Tensor:  # noqa: N803
    """The condition number of each matrix in the ``p``-norm (``None``/2: largest over smallest
    singular value; -2: the reverse; others: ``norm(A) * norm(inv(A))``)."""
    if p is None or p in (2, -2):
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return small / big if p == -2 else big / small
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803
             check_errors: bool = False) -> SolveExResult:  # fmt: skip
    """:func:`solve` and ``info`` (``A``'s batch shape), without failing: ``info`` is 0, or for
    a singular matrix the 1-based column of LU's first zero pivot (its solution is then NaN);
    ``check_errors=True`` raises PyTorch's ``LinAlgError`` for it (a sync point)."""
    x = solve_with(A, B, left, {"ex": True})
    info = lu_info(A)
    if check_errors:
        raise_if_singular("linalg.solve_ex", info)
    return SolveExResult(x, info)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:  # noqa: N803
    """The inverse of ``A`` read as a matrix of its first ``ind`` dims by the rest."""
    if ind <= 0:
        raise ValueError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise ShapeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                         f"prod(self.shape[:ind]), but got {math.prod(cols)} != "
                         f"{math.prod(rows)}")  # fmt: skip
    return inv(A.reshape(math.prod(rows), -1)).reshape(cols + rows)


def tensorsolve(A: Tensor, B: Tensor, dims: Any = None) -> Tensor:  # noqa: N803
    """``X`` with ``tensordot(A, X, X.ndim) = B``."""
    if dims is not None:
        order = [d for d in range(A.ndim) if d not in [x % A.ndim for x in dims]]
        A = A.permute(*order, *[x % A.ndim for x in dims])  # noqa: N806
    rest = tuple(A.shape[B.ndim :])
    x = solve(A.reshape(B.numel(), -1), B.reshape(-1, 1))
    return x.reshape(rest)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803
    """The Vandermonde matrix ``[1, x, x^2, ..., x^(N-1)]`` along a new last dim."""
    n = x.shape[-1] if N is None else int(N)
    if n <= 1 and N is not None and n < 1:
        raise ValueError("N must be greater than 1.")
    powers = arange(n, dtype=x.dtype if x.is_floating_point() else "int64")
    return x.unsqueeze(-1) ** powers


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803
    """``X`` with ``A X = B`` given ``A``'s Cholesky factor (``torch.cholesky_solve``): ``A = L
    L^H`` (``U^H U`` when ``upper``), the conjugate transpose for complex factors."""
    low = L.mH if upper else L
    x = solve_triangular(low.mH, solve_triangular(low, B, upper=False), upper=True)
    return label(x, "CholeskySolveBackward0")


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803
    """The inverse of ``A`` given its Cholesky factor (``torch.cholesky_inverse``). A zero on the
    factor's diagonal raises PyTorch's ``LinAlgError`` at the call (its check reads LAPACK's
    ``info`` back, on GPUs too: a sync point), where the solves would give inf and NaN."""
    if L.numel():
        zero = (L.diagonal(dim1=-2, dim2=-1) == 0).reshape(-1, L.shape[-1])
        if bool(zero.any().item()):
            rows = zero.tolist()
            k = next(i for i, r in enumerate(rows) if any(r))
            batch = f"(Batch element {k}): " if L.ndim > 2 else ""
            raise LinAlgError(
                f"cholesky_inverse: {batch}The diagonal element {rows[k].index(True) + 1} is "
                "zero, the inversion could not be completed because the input matrix is singular."
            )
    x = cholesky_solve(eye(L.shape[-1], dtype=L.dtype).expand(*L.shape), L, upper)
    return label(x, "CholeskyInverseBackward0")


def householder_product(A: Tensor, tau: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
    """The first ``n`` columns of the product ``H_1 H_2 ... H_k`` of Householder reflectors
    ``H_i = I - tau_i v_i v_i^H`` (LAPACK's ``orgqr``/``ungqr``; ``torch.orgqr`` is this).

    ``v_i`` is column ``i`` of ``A`` below the diagonal with an implicit 1 on it (what
    ``geqrf`` stores); the diagonal and what lies above it are not read. Composed of matmuls on
    the client, so it is differentiable in ``A`` (its strictly lower part) and ``tau``.

    Args:
        A: ``(*, m, n)`` with ``m >= n``, float or complex.
        tau: ``(*, k)`` with ``k <= n``, the same batch dimensions and dtype.

    Returns:
        ``(*, m, n)``: orthonormal (unitary) columns when every ``tau_i`` is ``2 / |v_i|^2``
        or 0, as ``geqrf`` makes them.

    Raises:
        ShapeError: shapes or dtypes that do not fit (PyTorch's messages).
        TypeError: an integer dtype.
    """
    op = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise ShapeError(f"{op}: input must have at least 2 dimensions.")
    if tau.ndim != A.ndim - 1:
        raise ShapeError(
            f"{op}: Expected tau to have one dimension less than input, but got tau.ndim equal "
            f"to {tau.ndim} and input.ndim is equal to {A.ndim}"
        )
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    if m < n:
        raise ShapeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise ShapeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(f"{op}: Expected batch dimensions of tau to be equal to "
                         f"input.shape[:-2], but got {list(tau.shape[:-1])}")  # fmt: skip
    if A.dtype not in _HOUSEHOLDER_DTYPES:
        raise TypeError(f"{op}: expected a floating point or complex input, got {A.dtype}")
    if tau.dtype != A.dtype:
        raise ShapeError(f"{op}: tau dtype {tau.dtype} does not match input dtype {A.dtype}")
    batch = tuple(A.shape[:-2])
    v = A[..., :, :k].tril(-1) + eye(m, k, dtype=A.dtype)  # the reflectors' vectors, as columns
    q = eye(m, n, dtype=A.dtype).expand(*batch, m, n)
    # Apply H_k first and H_1 last to the first n columns of I (as orgqr does): each step is an
    # m x n update, never an m x m product.
    for i in reversed(range(k)):
        vi = v[..., :, i : i + 1]  # (*, m, 1)
        q = q - (vi * tau[..., i : i + 1].unsqueeze(-1)) @ (vi.mH @ q)
    return label(q, "LinalgHouseholderProductBackward0") if k else q.clone()


__all__ = ["SolveExResult", "cond", "householder_product", "matrix_exp", "solve_ex", "tensorinv",
           "tensorsolve", "vander"]  # fmt: skip
