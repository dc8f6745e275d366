"""The ``torch.<name>`` spellings of some linear algebra (``gt.matrix_exp``, ``gt.lu``,
``gt.lu_unpack``, ``gt.lu_solve``, ``gt.cholesky_solve``, ``gt.cholesky_inverse``,
``gt.vander``, ``gt.orgqr``, ``gt.geqrf``, ``gt.ormqr``), with PyTorch's argument orders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gt.errors import ShapeError
from gt.factories import eye
from gt.grad_graph import label
from gt.linalg.lu import lu_solve as _lu_solve
from gt.linalg.lu import lu_unpack, torch_lu
from gt.linalg.more import cholesky_inverse, cholesky_solve, householder_product, matrix_exp
from gt.linalg.more import vander as _vander
from gt.ops import views
from gt.runtime.ops import return_types
from gt.runtime.ops.linalg_decomp import unpack_geqrf

if TYPE_CHECKING:
    from gt.tensor import Tensor


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> Any:  # noqa: N803
    """The compact LU factorisation ``(LU, pivots[, infos])`` (the older ``torch.lu``)."""
    return torch_lu(A, pivot, get_infos)


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803
    """The older ``torch.lu_solve(b, LU_data, LU_pivots)``."""
    return _lu_solve(LU_data, LU_pivots, b)


def orgqr(input: Tensor, tau: Tensor) -> Tensor:  # noqa: A002 - PyTorch's name
    """``torch.orgqr``: the same as :func:`gt.linalg.householder_product`."""
    return householder_product(input, tau)


_QR_DTYPES = ("float32", "float64", "complex64", "complex128")
_LAPACK_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "bool": "Bool", "uint8": "Byte",
                 "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long"}  # fmt: skip


def _lapack_dtype(op: str, t: Tensor) -> None:
    if t.dtype not in _QR_DTYPES:
        name = _LAPACK_NAMES.get(t.dtype, t.dtype)
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for '{name}'")


def geqrf(input: Tensor) -> Any:  # noqa: A002 - PyTorch's name
    """``torch.geqrf``: LAPACK's QR factorisation in its compact form, ``(a, tau)``: ``R`` on and
    above the diagonal of ``a``, the Householder vectors ``v_i`` (an implicit 1 on the diagonal)
    below it, and ``tau`` (``(*, min(m, n))``) with ``Q = H_1 ... H_k``, ``H_i = I - tau_i v_i
    v_i^H`` (:func:`orgqr` makes ``Q``, :func:`ormqr` multiplies by it). Any ``m`` and ``n``,
    batched; float32/64 and complex. Not differentiable, as in PyTorch: a backward pass through
    it raises ``NotImplementedError``."""
    if input.ndim < 2:
        raise ShapeError("torch.geqrf: input must have at least 2 dimensions.")
    _lapack_dtype("geqrf", input)
    m, n = input.shape[-2], input.shape[-1]
    a, tau = unpack_geqrf(input._apply("geqrf", [input]), m, n)
    tau = views.as_new(tau)  # (a slice of the packed result: PyTorch's tau is contiguous)
    return return_types.geqrf(label(a, "GeqrfBackward0"), label(tau, "GeqrfBackward0"))


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True,  # noqa: A002
          transpose: bool = False) -> Tensor:  # fmt: skip
    """``torch.ormqr``: ``op(Q) @ other`` (``left``) or ``other @ op(Q)``, where ``Q = H_1 ...
    H_k`` is given by Householder reflectors as :func:`geqrf` returns them and ``op`` is the
    conjugate transpose when ``transpose``. Composed of matrix products (one reflector at a
    time, never the square ``Q``), so differentiable in all three inputs."""
    op = "torch.ormqr"
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must have at least 2 dimensions.")
    if other.ndim < 2:
        raise ShapeError(f"{op}: other must have at least 2 dimensions.")
    side = -2 if left else -1
    if tau.ndim != input.ndim - 1:
        raise ShapeError(
            f"{op}: Expected tau to have one dimension less than input, but got tau.ndim equal "
            f"to {tau.ndim} and input.ndim is equal to {input.ndim}"
        )
    if other.shape[side] != input.shape[-2]:
        raise ShapeError(f"{op}: other.shape[{side}] must be equal to input.shape[-2]")
    if tau.shape[-1] != min(other.shape[side], input.shape[-1]):
        raise ShapeError(f"{op}: tau.shape[-1] must be equal to min(other.shape[{side}], "
                         f"input.shape[-1])")  # fmt: skip
    if other.ndim != input.ndim:
        raise ShapeError(
            f"{op}: Expected other to have the same number of dimensions as input, but got "
            f"other.ndim equal to {other.ndim} and input.ndim is equal to {input.ndim}"
        )
    batch = tuple(input.shape[:-2])
    for what, t in (("tau", tau), ("other", other)):
        got = tuple(t.shape[: -1 if what == "tau" else -2])
        if got != batch:
            raise ShapeError(f"{op}: Expected batch dimensions of {what} to be equal to "
                             f"input.shape[:-2], but got {list(got)}")  # fmt: skip
    names = {"float32": "Float", "float64": "Double", "complex64": "ComplexFloat",
             "complex128": "ComplexDouble", **_LAPACK_NAMES}  # fmt: skip
    for what, t in (("tau", tau), ("other", other)):
        if t.dtype != input.dtype:
            raise ShapeError(f"{op}: Expected input and {what} to have the same dtype, but input "
                             f"has dtype{names.get(input.dtype, input.dtype)} and {what} has "
                             f"dtype {names.get(t.dtype, t.dtype)}")  # fmt: skip
    _lapack_dtype("ormqr", input)
    mn, k = input.shape[-2], tau.shape[-1]
    v = input[..., :, :k].tril(-1) + eye(mn, k, dtype=input.dtype)  # the reflectors, as columns
    # Q = H_1 ... H_k and Q^H = H_k^H ... H_1^H (H_i^H: tau_i conjugated): the factor next to
    # ``other`` is applied first.
    t = tau.conj() if transpose and tau.is_complex() else tau
    order = range(k) if left == transpose else reversed(range(k))
    out = other
    for i in order:
        vi = v[..., :, i : i + 1]  # (*, mn, 1)
        ti = t[..., i : i + 1].unsqueeze(-1)  # (*, 1, 1)
        if left:  # H C = C - tau v (v^H C)
            out = out - (vi * ti) @ (vi.mH @ out)
        else:  # C H = C - (C v) tau v^H
            out = out - (out @ vi) @ (ti * vi.mH)
    return label(out if k else other.clone(), "OrmqrBackward0")


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of a 1-d ``x`` (decreasing powers unless ``increasing``)."""
    v = _vander(x, N=N)
    return v if increasing else v.flip(-1)


__all__ = ["cholesky_inverse", "cholesky_solve", "lu", "lu_solve", "lu_unpack", "matrix_exp",
           "geqrf", "orgqr", "ormqr", "vander"]  # fmt: skip
