"""The ``torch.<name>`` spellings of some linear algebra (``gt.matrix_exp``, ``gt.lu``,
``gt.lu_unpack``, ``gt.lu_solve``, ``gt.cholesky_solve``, ``gt.cholesky_inverse``,
``gt.vander``, ``gt.orgqr``), with PyTorch's argument orders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gt.linalg.lu import lu_solve as _lu_solve
from gt.linalg.lu import lu_unpack, torch_lu
from gt.linalg.more import cholesky_inverse, cholesky_solve, householder_product, matrix_exp
from gt.linalg.more import vander as _vander

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


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of a 1-d ``x`` (decreasing powers unless ``increasing``)."""
    v = _vander(x, N=N)
    return v if increasing else v.flip(-1)


__all__ = ["cholesky_inverse", "cholesky_solve", "lu", "lu_solve", "lu_unpack", "matrix_exp",
           "orgqr", "vander"]  # fmt: skip
