"""The core of ``gt.linalg``: norms, products, the registry's factorisations and solves.

Norms, products (``vecdot``, ``cross``, ``matrix_power``, ``multi_dot``) and ``diagonal`` are
composed on the client from ordinary ops. ``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``
and ``solve_triangular`` (:mod:`gt.runtime.ops.linalg`) and ``qr``, ``eigh``, ``svd``
(:mod:`gt.runtime.ops.linalg_decomp`) are primitives of the op registry, where their derivative
rules are; ``pinv``, ``lstsq``, ``matrix_rank`` and the ``"nuc"``/``2``/``-2`` matrix norms are
built on the SVD. Every function batches over leading dimensions as PyTorch does, for float32,
float64, complex64 and complex128.

Complex matrices: every function of ``gt.linalg`` takes them, with PyTorch's complex gradients;
``eig``/``eigvals`` give complex results for real matrices too. Not here:
``qr(mode="complete")`` for tall matrices, QR gradients for wide matrices. Spectral gradients (``eigh``, ``svd``) assume distinct eigen/singular values, as
PyTorch's do.
Errors: wrong shapes raise PyTorch's message at the call; a singular matrix fails on the worker
and raises at the next sync point that needs it; ``cholesky`` of a matrix that is not positive
definite raises :class:`LinAlgError` at the call, as PyTorch's does (a sync).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt.errors import LinAlgError, ShapeError
from gt.factories import zeros
from gt.grad_graph import label
from gt.ops.arith import where
from gt.ops.shaping import stack
from gt.ops.views import as_new
from gt.runtime.ops import return_types
from gt.runtime.ops.linalg import (
    SlogdetResult,
    check_float_square,
    check_square,
    checked_cholesky,
    det_api,
    inverse_api,
    slogdet_api,
)
from gt.runtime.ops.linalg_decomp import unpack_eigh, unpack_qr, unpack_svd
from gt.runtime.ops.linalg_eig import unpack_eig
from gt.runtime.ops.linalg_info import singular_message

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: What ``cholesky_ex`` returns (``gt.return_types.linalg_cholesky_ex``, as PyTorch's).
CholeskyExResult = return_types.linalg_cholesky_ex

_FLOATS = ("float32", "float64")


def _float(op: str, a: Tensor) -> None:
    """PyTorch's error for a matrix function given integers (or half precision)."""
    if a.dtype not in _FLOATS:
        raise ShapeError(
            f"{op}: Expected a floating point tensor as input. Got {a.dtype} "
            "(GT's linear algebra runs in float32 and float64)"
        )


_square = check_float_square


# ----------------------------------------------------------------------------- norms
def vector_norm(
    x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:  # noqa: A002
    """The ``ord``-norm of ``x`` over ``dim`` (all elements when None), as a vector norm."""
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype in S.COMPLEX_DTYPES:
        x = x.abs()  # (the norm of the moduli; the gradient flows through abs)
    if x.dtype not in _FLOATS and x.dtype not in ("float16", "bfloat16"):
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {x.dtype}"
        )
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if dim is None and keepdim:
        out = x.reshape(-1).norm(ord, 0, False)
        return out.reshape((1,) * x.ndim)
    return x.norm(ord, dim if dim is None else _dims(dim), keepdim)


def _dims(dim: Any) -> Any:
    return tuple(dim) if isinstance(dim, (list, tuple)) else dim


def matrix_norm(
    a: Tensor, ord: Any = "fro", dim: Sequence[int] = (-2, -1), keepdim: bool = False, *,
    dtype: Any = None,
) -> Tensor:  # fmt: skip  # noqa: A002
    """The ``ord``-norm of the matrices over ``dim``: ``"fro"``, ``"nuc"``, 1, -1, 2, -2, inf or
    -inf (``"nuc"`` and +-2 through the singular values)."""
    if dtype is not None:
        a = a.to(dtype)
    if a.dtype in ("float16", "bfloat16") and ord not in ("nuc", 2, -2):
        # (PyTorch's kernels sum half precision in float32 and round once)
        return matrix_norm(a.float(), ord, dim, keepdim).to(a.dtype)
    if a.dtype not in S.COMPLEX_DTYPES:
        _float("linalg.matrix_norm", a)
    if a.ndim < 2:
        raise RuntimeError(
            "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."
        )
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {list(dim)}")
    d0, d1 = (S.normalize_axis(d, a.ndim, "linalg.matrix_norm") for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if ord == "fro":
        sq = (a * a.conj()).real if a.dtype in S.COMPLEX_DTYPES else a * a
        return label(sq.sum((d0, d1), keepdim)._sqrt_zero_grad(), "LinalgVectorNormBackward0")
    if ord in ("nuc", 2, -2):
        rest = [i for i in range(a.ndim) if i not in (d0, d1)]
        sv = svdvals(a.permute(*rest, d0, d1))
        out = sv.sum(-1) if ord == "nuc" else (sv[..., 0] if ord == 2 else sv[..., -1])
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out if ord == "nuc" else label(out, "AmaxBackward0" if ord == 2 else "AminBackward0")
    if ord in (1, -1):  # the largest (smallest) column sum: sum over rows (d0), pick over d1
        inner, outer = d0, d1
    elif ord in (math.inf, -math.inf):
        inner, outer = d1, d0
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    s = a.abs().sum(inner, keepdim=True)
    out = s.amax(outer, keepdim=True) if ord > 0 else s.amin(outer, keepdim=True)
    out = out if keepdim else out.squeeze((d0, d1) if d0 > d1 else (d1, d0))
    return label(out, "AmaxBackward0" if ord > 0 else "AminBackward0")


def norm(
    a: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:  # noqa: A002
    """``vector_norm`` or ``matrix_norm``, chosen as PyTorch does (by ``dim`` and ``ord``)."""
    if dim is not None:
        dims = _dims(dim)
        if isinstance(dims, tuple) and len(dims) == 2:
            return matrix_norm(a, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        return vector_norm(a, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(a, 2, None, keepdim, dtype=dtype)
    if a.ndim == 2:
        return matrix_norm(a, ord, (-2, -1), keepdim, dtype=dtype)
    if a.ndim == 1:
        return vector_norm(a, ord, None, keepdim, dtype=dtype)
    raise RuntimeError(
        f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
        f"Got {a.ndim}D."
    )


# ----------------------------------------------------------------------------- products
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of ``x`` and ``y`` along ``dim`` (broadcast first; ``x`` conjugated)."""
    return (x.conj() * y).sum(dim)


def cross(a: Tensor, b: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcast first)."""
    if a.ndim != b.ndim:
        raise RuntimeError(
            f"linalg.cross: inputs must have the same number of dimensions. "
            f"Got {a.ndim} and {b.ndim}"
        )
    d = S.normalize_axis(dim, a.ndim, "linalg.cross")
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. "
            f"Got {a.shape[d]} and {b.shape[d]}"
        )
    perm = [i for i in range(a.ndim) if i != d] + [d]  # the vector dimension last
    a, b = a.permute(*perm), b.permute(*perm)
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)
    back = [perm.index(i) for i in range(a.ndim)]
    # (a tensor of its own, as PyTorch's: contiguous, not the vector dimension moved back)
    return label(as_new(out.permute(*back)), "LinalgCrossBackward0")


def matrix_power(a: Tensor, n: int) -> Tensor:
    """``a`` multiplied by itself ``n`` times (``n < 0``: the inverse's power; 0: identity).
    Any dtype that multiplies (integer, float, complex: ``U ** 2**k`` of a unitary); a negative
    power only of what inverts (floats and complex), as PyTorch's."""
    check_square("linalg.matrix_power", tuple(a.shape))
    if n < 0:
        _square("linalg.inv", a, complex_ok=True)
    return a.matrix_power(n)  # (square and multiply: O(log n) products)


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """``tensors[0] @ tensors[1] @ ...``; the first (last) may be 1-d: a row (column) vector."""
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    ts = list(tensors)
    first_1d, last_1d = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_1d:
        ts[0] = ts[0].unsqueeze(0)
    if last_1d:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i, t in enumerate(ts):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    out = ts[0]
    for i, t in enumerate(ts[1:], 1):
        if out.shape[-1] != t.shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i - 1} and {i} with shapes {list(ts[i - 1].shape)} and "
                f"{list(t.shape)} cannot be multiplied"
            )
        out = out @ t
    if first_1d:
        out = out.squeeze(0)
    if last_1d:
        out = out.squeeze(-1)
    return label(out, "ViewBackward0")  # (PyTorch's product is a view, whatever the ends)


def diagonal(a: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The ``offset``-th diagonal over ``dim1`` and ``dim2``, as the last dimension."""
    return a.diagonal(offset, dim1, dim2)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` (``torch.linalg.matmul``)."""
    return a @ b


# ----------------------------------------------------------------------------- primitives
def inv(a: Tensor) -> Tensor:
    """The inverse of each square matrix of ``a``."""
    return inverse_api(a)


def inv_ex(a: Tensor, *, check_errors: bool = False) -> Any:
    """``(inverse, info)``, without failing: ``info`` is 0, or for a singular matrix the 1-based
    column of LU's first zero pivot (its inverse is then NaN); ``check_errors=True`` raises
    PyTorch's ``LinAlgError`` for the first singular matrix (a sync point)."""
    check_float_square("linalg.inv_ex", a, complex_ok=True)
    out = label(a._apply("linalg_inv", [a], {"ex": True}), "LinalgInvExBackward0")
    info = lu_info(a)
    if check_errors:
        raise_if_singular("linalg.inv_ex", info)
    return return_types.linalg_inv_ex(out, info)


def lu_info(a: Tensor) -> Tensor:
    """LAPACK ``getrf``'s ``info`` of each square matrix of ``a`` (int32, ``a``'s batch shape)."""
    return a._apply("linalg_lu_info", [a])


def raise_if_singular(op: str, info: Tensor) -> None:
    """PyTorch's ``LinAlgError`` if ``info`` marks a singular matrix (reads it: a sync point)."""
    values = info._host()
    if values.size and values.max() > 0:
        raise LinAlgError(singular_message(op, values))


def solve(a: Tensor, b: Tensor, *, left: bool = True) -> Tensor:
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``); ``B`` may be a (batch of) vector."""
    return solve_with(a, b, left, None)


def solve_with(a: Tensor, b: Tensor, left: bool, attrs: Any) -> Tensor:
    """:func:`solve` with the worker's ``attrs`` (``{"ex": True}``: NaN for a singular matrix)."""
    _square("linalg.solve", a, complex_ok=True)
    if b.dtype not in S.COMPLEX_DTYPES:
        _float("linalg.solve", b)
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{a.dtype} and B of type {b.dtype} instead"
        )
    if not left:
        return label(solve_with(a.mT, b.mT, True, attrs).mT, "LinalgSolveExBackward0")
    # PyTorch's rule: B is a vector when it is 1-d, or its shape is A's batch shape plus n.
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if vector:
        x = a._apply("linalg_solve", [a, b.unsqueeze(-1)], attrs).squeeze(-1)
    else:
        x = a._apply("linalg_solve", [a, b], attrs)
    return label(x, "LinalgSolveExBackward0")  # (PyTorch's node: linalg_solve_ex's)


def det(a: Tensor) -> Tensor:
    """The determinant of each square matrix of ``a``."""
    return det_api(a)


def slogdet(a: Tensor) -> SlogdetResult:
    """``(sign, log|det|)`` of each square matrix (``log|det| = -inf`` for a singular one)."""
    return return_types.linalg_slogdet(*slogdet_api(a))


def cholesky(a: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of each symmetric positive-definite matrix: lower ``L`` with
    ``A = L L^T`` (``upper=True``: ``U = L^T``, ``A = U^T U``). Only the lower triangle is read."""
    check_float_square("linalg.cholesky", a, complex_ok=True)
    el = checked_cholesky(a, "linalg.cholesky")
    return label(el.mH if upper else el, "LinalgCholeskyExBackward0")


def cholesky_ex(a: Tensor, *, upper: bool = False, check_errors: bool = False) -> Any:
    """``(L, info)``, without failing: ``info`` is ``0`` where the factorization succeeded and
    ``i > 0`` where the leading minor of order ``i`` is not positive definite (``L`` then holds
    LAPACK's partial factor, whose ``i``-th diagonal entry is the first non-positive pivot);
    ``check_errors=True`` raises PyTorch's message for the first failing matrix instead."""
    check_float_square("linalg.cholesky_ex", a, complex_ok=True)
    el = a._apply("linalg_cholesky", [a], {"ex": True})
    d = el.diagonal(dim1=-2, dim2=-1)
    bad = ~((d.real if d.dtype in S.COMPLEX_DTYPES else d) > 0)
    first = bad.int().argmax(-1) + 1 if a.shape[-1] else bad.int().sum(-1)
    info = where(bad.any(-1), first, 0).int()
    if check_errors:
        flat = info.reshape(-1).tolist()
        failed = next((k for k, i in enumerate(flat) if i), None)
        if failed is not None:
            batch = f"(Batch element {failed}): " if a.ndim > 2 else ""
            raise LinAlgError(
                f"linalg.cholesky_ex: {batch}The factorization could not be completed because the "
                f"input is not positive-definite (the leading minor of order {flat[failed]} is not "
                "positive-definite)."
            )
    return CholeskyExResult(label(el.mH if upper else el, "LinalgCholeskyExBackward0"), info)


def solve_triangular(
    a: Tensor, b: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """``X`` with ``T X = B`` (``left=False``: ``X T = B``), ``T`` the upper or lower triangle of
    ``a`` (its diagonal taken as ones when ``unitriangular``)."""
    _square("linalg.solve_triangular", a, complex_ok=True)
    if b.dtype not in S.COMPLEX_DTYPES:
        _float("linalg.solve_triangular", b)
    if b.ndim < 2:
        raise RuntimeError(
            "linalg.solve_triangular: The input tensor B must have at least 2 dimensions."
        )
    if not left:  # X T = B  <=>  T^T X^T = B^T, and T^T is the other triangle
        x = solve_triangular(a.mT, b.mT, upper=not upper, unitriangular=unitriangular).mT
        return label(x, "LinalgSolveTriangularBackward0")
    attrs = {"upper": bool(upper), "unitriangular": bool(unitriangular)}
    return a._apply("linalg_solve_triangular", [a, b], attrs)


# ----------------------------------------------------------------------------- decompositions
QRResult = return_types.linalg_qr  # (the types of gt.return_types, as PyTorch's)
EighResult = return_types.linalg_eigh
EigResult = return_types.linalg_eig
SVDResult = return_types.linalg_svd
LstsqResult = return_types.linalg_lstsq

#: Machine epsilon per dtype (PyTorch's default tolerance for ranks and pseudo-inverses).
_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}
_EPS.update(complex64=_EPS["float32"], complex128=_EPS["float64"])


def _matrix(op: str, a: Tensor, complex_ok: bool = False) -> tuple[int, int]:
    if not (complex_ok and a.dtype in S.COMPLEX_DTYPES):
        _float(op, a)
    if a.ndim < 2:
        raise ShapeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    return a.shape[-2], a.shape[-1]


def qr(a: Tensor, mode: str = "reduced") -> QRResult:
    """The QR factorization ``A = Q R`` of each matrix (``mode`` ``"reduced"``, ``"r"``, or
    ``"complete"``: Q square). Gradients need ``m >= n`` (and not ``"complete"`` with ``m > n``,
    as in PyTorch)."""
    m, n = _matrix("linalg.qr", a, complex_ok=True)
    if mode not in ("reduced", "r", "complete"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}'")
    if mode == "complete" and m > n:  # (Q gains columns that span the rest of the space)
        q, r = unpack_qr(a._apply("linalg_qr", [a], {"mode": "complete"}), m, n, True)
        return QRResult(label(q, "LinalgQrBackward0"), label(r, "LinalgQrBackward0"))
    q, r = unpack_qr(a._apply("linalg_qr", [a]), m, n)
    q, r = label(q, "LinalgQrBackward0"), label(r, "LinalgQrBackward0")
    if mode == "r":
        return QRResult(zeros((0,), dtype=a.dtype), r)
    return QRResult(q, r)


def eigh(a: Tensor, UPLO: str = "L") -> EighResult:  # noqa: N803 - PyTorch's name
    """Eigenvalues (ascending) and orthonormal eigenvectors of each symmetric matrix, read from
    its lower (``UPLO="U"``: upper) triangle. Gradients assume distinct eigenvalues."""
    check_float_square("linalg.eigh", a, complex_ok=True)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    src = a if UPLO == "L" else a.mH  # the upper triangle of A is the lower one of A^H
    w, v = unpack_eigh(a._apply("linalg_eigh", [src]))
    w = w.real if w.dtype in S.COMPLEX_DTYPES else w  # (Hermitian: real ones)
    w = as_new(w)  # (a column of the packed result: PyTorch's eigenvalues are contiguous)
    return EighResult(label(w, "LinalgEighBackward0"), label(v, "LinalgEighBackward0"))


def eigvalsh(a: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803 - PyTorch's name
    """The eigenvalues (ascending) of each symmetric matrix."""
    return eigh(a, UPLO).eigenvalues


def eig(a: Tensor) -> EigResult:
    """Eigenvalues and eigenvectors (unit columns) of each general square matrix: complex, in
    LAPACK's order, computed on the host (a CuPy worker copies the matrices there and back, as
    PyTorch's CUDA ``eig`` synchronises with the CPU). Gradients assume distinct eigenvalues."""
    check_float_square("linalg.eig", a, complex_ok=True)
    w, v = unpack_eig(a._apply("linalg_eig", [a]))
    w = as_new(w)  # (a column of the packed result: PyTorch's eigenvalues are contiguous)
    return EigResult(label(w, "LinalgEigBackward0"), label(v, "LinalgEigBackward0"))


def eigvals(a: Tensor) -> Tensor:
    """The eigenvalues of each general square matrix (complex)."""
    return eig(a).eigenvalues


def svd(a: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:
    """``A = U diag(S) Vh`` with descending ``S``; ``full_matrices=True`` (the default, as in
    PyTorch) completes ``U`` and ``Vh`` of a non-square matrix to square orthonormal ones (as
    LAPACK does; the completing columns get no gradient, as in PyTorch). Gradients assume
    distinct, nonzero singular values."""
    m, n = _matrix("linalg.svd", a, complex_ok=True)
    full = bool(full_matrices) and m != n  # (square: the two factorizations agree)
    attrs = {"full": True} if full else None
    u, s, vh = unpack_svd(a._apply("linalg_svd", [a], attrs), m, n, full)
    s = s.real if s.dtype in S.COMPLEX_DTYPES else s  # (real values)
    s = as_new(s)  # (a slice of the packed result: PyTorch's singular values are contiguous)
    return SVDResult(*(label(t, "LinalgSvdBackward0") for t in (u, s, vh)))


def svdvals(a: Tensor, *, driver: str | None = None) -> Tensor:
    """The singular values of each matrix, descending (``driver``: cuSOLVER's choice in
    PyTorch, accepted and ignored, as PyTorch ignores it on the CPU)."""
    return svd(a, full_matrices=False).S


def _tolerance(s: Tensor, dtype: str, m: int, n: int, atol: Any, rtol: Any) -> Any:
    """PyTorch's cut-off ``max(atol, rtol * s_max)`` for each matrix (keepdim on the last dim)."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else _EPS[dtype] * max(m, n)
    tol = s[..., :1] * rtol
    return tol.clamp(min=atol) if atol is not None else tol


def matrix_rank(
    a: Tensor, tol: Any = None, *, atol: Any = None, rtol: Any = None, hermitian: bool = False
) -> Tensor:
    """The number of singular values above the tolerance, per matrix (int64; no sync);
    ``tol``: the older spelling of ``atol`` (with ``rtol`` 0), as PyTorch's."""
    if tol is not None:
        atol, rtol = tol, 0.0 if rtol is None else rtol
    m, n = _matrix("linalg.matrix_rank", a, complex_ok=True)
    s = eigvalsh(a).abs().sort(-1, descending=True).values if hermitian else svdvals(a)
    s = s.detach()
    return (s > _tolerance(s, a.dtype, m, n, atol, rtol)).sum(-1)


def pinv(
    a: Tensor, rcond: Any = None, *, atol: Any = None, rtol: Any = None, hermitian: bool = False
) -> Tensor:
    """The Moore-Penrose pseudo-inverse through the SVD; singular values at or below the
    tolerance count as zero (``rcond``: the older spelling of ``rtol``, with ``atol`` 0, as
    PyTorch's). ``hermitian`` is accepted and uses the SVD too."""
    if rcond is not None:
        atol, rtol = 0.0 if atol is None else atol, rcond
    m, n = _matrix("linalg.pinv", a, complex_ok=True)
    u, s, vh = svd(a, full_matrices=False)
    sd = s.detach()
    keep = sd > _tolerance(sd, a.dtype, m, n, atol, rtol)
    inv_s = where(keep, 1.0 / where(keep, s, 1.0), 0.0)  # (no 1/0 in the value or gradient)
    return label(vh.mH @ (inv_s.unsqueeze(-1).to(u.dtype) * u.mH), "LinalgPinvBackward0")


def lstsq(a: Tensor, b: Tensor, rcond: Any = None, *, driver: Any = None) -> LstsqResult:
    """Least squares ``min ||A X - B||`` through the pseudo-inverse (any rank: the minimum-norm
    solution, as PyTorch's CPU drivers give). The other fields are filled for the drivers that
    fill them in PyTorch (``residuals`` only where ``m > n``)."""
    m, n = _matrix("torch.linalg.lstsq", a, complex_ok=True)
    vector = b.ndim == a.ndim - 1
    bb = b.unsqueeze(-1) if vector else b
    if bb.shape[-2] != m:
        raise RuntimeError(
            f"torch.linalg.lstsq: input.size(-2) should match other.size(-2) "
            f"({m} and {bb.shape[-2]})"
        )
    x = pinv(a, rtol=rcond) @ bb
    empty = zeros((0,), dtype=a.dtype)
    # What PyTorch fills in, by driver (on the CPU; default "gelsy"): residuals for every driver
    # but gelsy (m > n), ranks for all but gels, singular values for gelsd and gelss.
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(
            "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"
        )
    residuals = ((a @ x - bb).abs() ** 2).sum(-2) if m > n and driver != "gelsy" else empty
    sv = svdvals(a) if driver in ("gelsd", "gelss") else empty
    rank = matrix_rank(a, rtol=rcond) if driver != "gels" else zeros((0,), dtype="int64")
    x = label(x.squeeze(-1) if vector else x, "LinalgLstsqBackward0")
    return LstsqResult(x, residuals, rank, sv)


__all__ = [
    "EigResult",
    "EighResult",
    "eig",
    "eigvals",
    "LstsqResult",
    "QRResult",
    "SVDResult",
    "eigh",
    "eigvalsh",
    "lstsq",
    "matrix_rank",
    "pinv",
    "qr",
    "svd",
    "svdvals",
    "SlogdetResult",
    "cholesky",
    "cholesky_ex",
    "cross",
    "det",
    "diagonal",
    "inv",
    "inv_ex",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "multi_dot",
    "norm",
    "slogdet",
    "solve",
    "solve_triangular",
    "vecdot",
    "vector_norm",
]
