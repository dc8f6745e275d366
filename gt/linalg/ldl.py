"""The LDL factorisation of symmetric (or Hermitian) indefinite matrices: ``linalg.ldl_factor``,
``ldl_factor_ex`` and ``ldl_solve``, in LAPACK's ``?sytrf`` / ``?hetrf`` format (lower triangle).

``A = L D L^T`` (``L D L^H`` with ``hermitian=True`` for complex matrices), with ``L = P(1) L(1)
P(2) L(2) ...`` unit lower triangular in product form and ``D`` block diagonal with 1x1 and 2x2
blocks. ``LD`` holds ``D`` on the diagonal (and a 2x2 block's off-diagonal entry below it) and the
multipliers of ``L`` below, zeros above (as PyTorch returns it); ``pivots`` are LAPACK's 1-based
``ipiv``: ``k`` for a 1x1 block whose rows were interchanged with row ``k``, ``-k`` twice for a 2x2
block whose second row was interchanged with row ``k``.

Bunch-Kaufman pivoting exactly as LAPACK's unblocked ``?sytf2`` / ``?hetf2`` do it (``alpha = (1 +
sqrt 17) / 8``; magnitudes of complex entries are ``|re| + |im|``, as LAPACK's ``cabs1``), composed
on the client one column at a time and batched: every matrix of a batch makes its own choices
(which block size, which interchange) through ``where``, so there is no sync point. A zero column
(or a NaN on the diagonal) is reported in ``info`` (its 1-based index, the first one) and skipped,
as LAPACK does. Neither function is differentiable in PyTorch, so neither is here: the results
require grad when an input does, and a backward pass through them raises.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gt.custom_function import Function
from gt.errors import ShapeError
from gt.factories import arange
from gt.ops.arith import where
from gt.ops.shaping import cat, stack
from gt.runtime.ops import return_types

if TYPE_CHECKING:
    from gt.tensor import Tensor

LDLFactorResult = return_types.linalg_ldl_factor  # (as PyTorch's torch.return_types)
LDLFactorExResult = return_types.linalg_ldl_factor_ex

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0
_FLOATS = ("float32", "float64", "complex64", "complex128")


def _check(op: str, a: Tensor) -> None:
    if a.ndim < 2:
        raise ShapeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op}: A must be batches of square matrices, but they are "
                         f"{a.shape[-2]} by {a.shape[-1]} matrices")  # fmt: skip
    if a.dtype not in _FLOATS:
        raise TypeError(
            f"{op}: Expected a floating point or complex tensor as input. Got {a.dtype}"
        )


def _mag(t: Tensor) -> Tensor:
    """LAPACK's size of an entry: ``|t|``, or ``|re| + |im|`` (``cabs1``) for complex ones."""
    return t.real.abs() + t.imag.abs() if t.is_complex() else t.abs()


def _adj(t: Tensor, herm: bool) -> Tensor:
    return t.mH if herm else t.mT


def _real_diagonal(t: Tensor) -> Tensor:
    """``t`` with its diagonal's imaginary parts dropped (what ``?hetf2`` keeps of it)."""
    n = t.shape[-1]
    eye = arange(n, dtype="int64").unsqueeze(-1) == arange(n, dtype="int64")
    return where(eye, t.real.to(t.dtype), t)


def _mirror(t: Tensor, herm: bool) -> Tensor:
    """The full matrix from ``t``'s lower triangle (LAPACK only reads and writes that one)."""
    low = t.tril()
    full = low + _adj(low.tril(-1), herm)
    return _real_diagonal(full) if herm else full


def _swap(s: Tensor, kk: Tensor, kp: Tensor, do: Tensor) -> Tensor:
    """``s`` with rows and columns ``kk`` and ``kp`` (per batch entry, where ``do``) exchanged."""
    s = _swap_rows(s, kk, kp, do)
    idx = _swap_index(s.shape[-1], kk, kp, do)
    return s.gather(-1, idx.unsqueeze(-2).expand(*s.shape))


def _swap_index(n: int, kk: Tensor, kp: Tensor, do: Tensor) -> Tensor:
    """Per batch entry, ``0..n-1`` with ``kk`` and ``kp`` exchanged where ``do``."""
    local = arange(n, dtype="int64")
    kk, kp = kk.unsqueeze(-1), kp.unsqueeze(-1)
    idx = where(local == kk, kp, where(local == kp, kk, local))
    return where(do.unsqueeze(-1), idx, local)


def _one_by_one(s: Tensor, herm: bool) -> Tensor:
    """The block ``s`` after eliminating its first column with the 1x1 pivot ``s[0, 0]``."""
    d = s[..., 0:1, 0:1]
    if herm:
        d = d.real.to(s.dtype)
    r1 = 1.0 / where(d == 0, 1.0, d)  # (0 only where this branch is not taken)
    x = s[..., 1:, 0:1]
    trail = _mirror(s[..., 1:, 1:] - x * _adj(x * r1, herm), herm)
    col = cat([d, x * r1], -2)
    return cat([col, cat([s[..., 0:1, 1:], trail], -2)], -1)


def _two_by_two(s: Tensor, herm: bool) -> Tensor:
    """The block ``s`` after eliminating its first two columns with the 2x2 pivot ``s[:2, :2]``
    (LAPACK's formulas, scaled by the off-diagonal entry ``d21``, which is not 0 here)."""
    b = s[..., 1, 0]
    b = where(b == 0, 1.0, b)
    w0, w1 = s[..., 2:, 0], s[..., 2:, 1]
    if herm:
        size = b.abs()
        d11, d22 = s[..., 1, 1].real / size, s[..., 0, 0].real / size
        unit = b / size
        scale = (1.0 / (d11 * d22 - 1.0) / size).unsqueeze(-1)
        wk = scale * (d11.unsqueeze(-1) * w0 - unit.unsqueeze(-1) * w1)
        wkp1 = scale * (d22.unsqueeze(-1) * w1 - unit.conj().unsqueeze(-1) * w0)
    else:
        d11, d22 = s[..., 1, 1] / b, s[..., 0, 0] / b
        scale = ((1.0 / (d11 * d22 - 1.0)) / b).unsqueeze(-1)
        wk = scale * (d11.unsqueeze(-1) * w0 - w1)
        wkp1 = scale * (d22.unsqueeze(-1) * w1 - w0)
    outer = lambda u, v: u.unsqueeze(-1) * (v.conj() if herm else v).unsqueeze(-2)  # noqa: E731
    trail = _mirror(s[..., 2:, 2:] - outer(w0, wk) - outer(w1, wkp1), herm)
    head = _real_diagonal(s[..., 0:2, 0:2]) if herm else s[..., 0:2, 0:2]
    cols = cat([head, stack([wk, wkp1], -1)], -2)
    return cat([cols, cat([s[..., 0:2, 2:], trail], -2)], -1)


def _factor(a: Tensor, herm: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``(LD, pivots, info)`` of each matrix of ``a`` (not recorded for autograd)."""
    n, batch = a.shape[-1], tuple(a.shape[:-2])
    full = _mirror(a, herm)
    skip = a.new_zeros(batch, dtype="bool")  # column k is the second of a 2x2 block
    info = a.new_zeros(batch, dtype="int32")
    pending = a.new_zeros(batch, dtype="int64")  # that block's pivot entry
    pivots = []
    for k in range(n):
        m = n - k
        s = full[..., k:, k:]
        absakk = s[..., 0, 0].real.abs() if herm else _mag(s[..., 0, 0])
        zero = a.new_zeros(batch, dtype="int64")
        if m > 1:
            tail = _mag(s[..., 1:, 0])
            colmax, imax = tail.amax(-1), tail.argmax(-1) + 1
            row = _mag(s.gather(-2, imax.reshape(batch + (1, 1)).expand(*batch, 1, m)).squeeze(-2))
            rowmax = where(arange(m, dtype="int64") == imax.unsqueeze(-1), 0.0, row).amax(-1)
            dimax = s.diagonal(dim1=-2, dim2=-1).gather(-1, imax.unsqueeze(-1)).squeeze(-1)
            absimax = dimax.real.abs() if herm else _mag(dimax)
            ratio = colmax / where(rowmax == 0, 1.0, rowmax)
            keep = (absakk >= _ALPHA * colmax) | (absakk >= _ALPHA * colmax * ratio)
            swap_one = absimax >= _ALPHA * rowmax
        else:
            colmax, imax, keep, swap_one = absakk * 0, zero, absakk == absakk, absakk == absakk
        singular = ((absakk == 0) & (colmax == 0)) | (absakk != absakk)  # (x != x: NaN)
        keep = keep | singular
        active = ~skip
        two = active & ~keep & ~swap_one
        kp = where(keep, zero, imax)  # the row interchanged with kk (both within s)
        kk = where(two, zero + 1, zero)
        new = s
        if m > 1:
            s = _swap(s, kk, kp, active & (kp != kk))
            new = where(
                (active & ~singular & ~two).reshape(batch + (1, 1)), _one_by_one(s, herm), s
            )
            if m > 2:
                new = where(two.reshape(batch + (1, 1)), _two_by_two(s, herm), new)
        full = cat([full[..., :k, :], cat([full[..., k:, :k], new], -1)], -2) if k else new
        global_kp = kp + (k + 1)
        pivots.append(where(skip, pending, where(two, -global_kp, global_kp)))
        pending = -global_kp
        info = where((info == 0) & active & singular, k + 1, info)
        skip = two
    ld = full.tril()
    piv = stack(pivots, -1).to("int32") if pivots else a.new_zeros(batch + (0,), dtype="int32")
    return ld, piv, info


class _LDLFactor(Function):
    """``_factor`` with PyTorch's (missing) derivative."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, herm: bool) -> tuple:
        return _factor(a, herm)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        raise RuntimeError("derivative for linalg_ldl_factor_ex is not implemented (as in PyTorch)")


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False,  # noqa: N803 - PyTorch's name
                  check_errors: bool = False) -> LDLFactorExResult:  # fmt: skip
    """``(LD, pivots, info)``: the compact LDL factorisation of each symmetric (``hermitian``:
    Hermitian) matrix, read from its lower triangle (see the module docstring for the format).

    ``info`` is 0, or the 1-based index of the first zero column (whose ``D`` entry is 0, so
    ``ldl_solve`` would divide by it).

    Raises:
        ShapeError: not a batch of square matrices.
        TypeError: not a float or complex dtype.
        RuntimeError: ``check_errors`` and some ``info`` is not 0 (one sync point).
    """
    _check("torch.linalg.ldl_factor_ex", A)
    ld, piv, info = _LDLFactor.apply(A, bool(hermitian) and A.is_complex())
    if check_errors and bool((info > 0).any().item()):
        raise RuntimeError("torch.linalg.ldl_factor_ex: The factorization could not be completed: "
                           "a column of the matrix is zero, so D has a zero entry.")  # fmt: skip
    return LDLFactorExResult(ld, piv, info)


def ldl_factor(A: Tensor, *, hermitian: bool = False) -> LDLFactorResult:  # noqa: N803
    """``(LD, pivots)``: :func:`ldl_factor_ex` that raises where ``info`` is not 0 (one sync
    point; PyTorch raises there too).

    Raises:
        RuntimeError: a matrix has a zero column (``D`` would have a zero entry).
    """
    ld, piv, info = ldl_factor_ex(A, hermitian=hermitian)
    if bool((info > 0).any().item()):
        raise RuntimeError("torch.linalg.ldl_factor: The factorization could not be completed: "
                           "a column of the matrix is zero, so D has a zero entry.")  # fmt: skip
    return LDLFactorResult(ld, piv)


def _swap_rows(x: Tensor, kk: Tensor, kp: Tensor, do: Tensor) -> Tensor:
    """``x`` with rows ``kk`` and ``kp`` (per batch entry, where ``do``) exchanged."""
    idx = _swap_index(x.shape[-2], kk, kp, do)
    return x.gather(-2, idx.unsqueeze(-1).expand(*x.shape))


def _solve(ld: Tensor, piv: Tensor, x: Tensor, herm: bool) -> Tensor:
    """``A^-1 x`` from the factorisation, as LAPACK's ``?sytrs`` / ``?hetrs``: ``L D y = x``
    forwards (interchanges, then each block's column), then ``L^T`` (``L^H``) backwards."""
    n, batch = ld.shape[-1], tuple(ld.shape[:-2])
    mask = lambda t: t.reshape(batch + (1, 1))  # noqa: E731 - a per-matrix flag over rows
    piv = piv.long()
    skip = piv.new_zeros(batch, dtype="bool")
    seconds = []  # per column: the second of a 2x2 block
    for k in range(n):
        p = piv[..., k]
        active, two = ~skip, ~skip & (p < 0)
        kk = where(two, k + 1, k) + piv.new_zeros(batch)
        kp = where(p > 0, p - 1, -p - 1)
        x = _swap_rows(x, kk, kp, active & (kk != kp))
        d = ld[..., k : k + 1, k : k + 1]
        # (a zero D entry gives infinities, as LAPACK's division does)
        one = x[..., k : k + 1, :] * (1.0 / (d.real.to(d.dtype) if herm else d))
        one = cat(
            [one, x[..., k + 1 :, :] - ld[..., k + 1 :, k : k + 1] * x[..., k : k + 1, :]], -2
        )
        new = where(mask(active & ~two), one, x[..., k:, :])
        if k + 1 < n:
            b = ld[..., k + 1 : k + 2, k : k + 1]
            b = where(b == 0, 1.0, b)
            bc = b.conj() if herm else b
            akm1, ak = ld[..., k : k + 1, k : k + 1] / bc, ld[..., k + 1 : k + 2, k + 1 : k + 2] / b
            denom = akm1 * ak - 1.0
            bkm1, bk = x[..., k : k + 1, :] / bc, x[..., k + 1 : k + 2, :] / b
            below = x[..., k + 2 :, :] - ld[..., k + 2 :, k : k + 1] * x[..., k : k + 1, :]
            below = below - ld[..., k + 2 :, k + 1 : k + 2] * x[..., k + 1 : k + 2, :]
            block = cat([(ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom, below], -2)
            new = where(mask(two), block, new)
        x = cat([x[..., :k, :], new], -2) if k else new
        seconds.append(skip)
        skip = two
    for k in reversed(range(n)):
        p, second = piv[..., k], seconds[k]
        first = seconds[k + 1] if k + 1 < n else second & False
        if k + 1 < n:
            rest = x[..., k + 1 :, :]
            row_k = x[..., k : k + 1, :] - _adj(ld[..., k + 1 :, k : k + 1], herm) @ rest
            x = cat([x[..., :k, :], where(mask(~first), row_k, x[..., k : k + 1, :]), rest], -2)
            if k:
                before = x[..., k - 1 : k, :]
                column = _adj(ld[..., k + 1 :, k - 1 : k], herm)
                before = where(mask(second), before - column @ rest, before)
                x = cat([x[..., : k - 1, :], before, x[..., k:, :]], -2)
        kp = where(p > 0, p - 1, -p - 1)
        at = piv.new_zeros(batch) + k
        x = _swap_rows(x, at, kp, ~first & (at != kp))
    return x


class _LDLSolve(Function):
    """``_solve`` with PyTorch's (missing) derivative."""

    @staticmethod
    def forward(ctx: Any, ld: Tensor, piv: Tensor, b: Tensor, herm: bool) -> Tensor:
        return _solve(ld, piv, b, herm)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise RuntimeError("derivative for linalg_ldl_solve is not implemented (as in PyTorch)")


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *,  # noqa: N803 - PyTorch's names
              hermitian: bool = False) -> Tensor:  # fmt: skip
    """``X`` with ``A X = B`` from ``A``'s compact LDL factorisation (:func:`ldl_factor`),
    batch dimensions broadcast between ``LD`` and ``B``.

    Raises:
        ShapeError: shapes that do not fit (PyTorch's messages), or ``B`` of another dtype.
    """
    op = "torch.linalg.ldl_solve"
    _check(op, LD)
    if B.ndim < 2:
        raise ShapeError(f"{op}: The input tensor B must have at least 2 dimensions.")
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise ShapeError(f"{op}: Expected LD.shape[:-1] and pivots.shape to be the same, but got "
                         f"pivots with shape {list(pivots.shape)} instead")  # fmt: skip
    if pivots.dtype not in ("int32", "int64"):
        raise TypeError(f"{op}: Expected pivots to be integers. Got {pivots.dtype}")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise ShapeError(f"Incompatible matrix sizes for {op}: each A matrix is {n} by {n} but "
                         f"each b matrix is {B.shape[-2]} by {B.shape[-1]}")  # fmt: skip
    if B.dtype != LD.dtype:
        raise ShapeError(f"Expected b and A to have the same dtype, but found b of type {B.dtype} "
                         f"and A of type {LD.dtype} instead.")  # fmt: skip
    batch = _broadcast(tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    ld = LD.expand(*batch, n, n)
    piv = pivots.expand(*batch, n)
    b = B.expand(*batch, n, B.shape[-1])
    return _LDLSolve.apply(ld, piv, b, bool(hermitian) and LD.is_complex())


def _broadcast(a: tuple, b: tuple) -> tuple:
    from gt.ops.functional import broadcast_shapes  # noqa: PLC0415 - (a leaf of gt.ops)

    return tuple(broadcast_shapes(a, b))


__all__ = ["LDLFactorExResult", "LDLFactorResult", "ldl_factor", "ldl_factor_ex", "ldl_solve"]
