"""Sparse CSR matrices (PyTorch's ``torch.sparse_csr`` layout) for graph and scientific code.

A :class:`SparseCsrTensor` holds ``crow_indices`` (``rows + 1`` offsets), ``col_indices`` and
``values`` (``nnz`` each) of a 2-d matrix, as PyTorch's compressed-row layout does. What graph
code does with one works: build it (``torch.sparse_csr_tensor``, ``dense.to_sparse_csr()``,
``coo.to_sparse_csr()``), multiply it into a dense matrix or vector (``csr @ x``, ``torch.mm``,
``torch.sparse.mm``), scale it, convert it back (``to_dense()``, ``to_sparse_coo()``). Products
run as the COO ones of :mod:`gt.sparse` do (rows found from the offsets on the worker, no sync),
entries of a row added in their stored order, differentiable in the values and the dense operand.
Not built: the CSC/BSR layouts (so no ``t()``), batched CSR, and ops between two sparse tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.ops import functions
from gt.ops.base import TensorBase as Tensor
from gt.ops.search import searchsorted
from gt.ops.shaping import stack
from gt.ops.typeinfo import Size
from gt.settings import layout
from gt.sparse import SparseTensor, SparseValues
from gt.sparse import mm as _coo_mm

#: PyTorch's ``torch.sparse_csr``.
sparse_csr = layout("sparse_csr")


class SparseCsrTensor(SparseValues):
    """A 2-d sparse matrix in compressed-row form (see the module's docstring). Made by
    :func:`sparse_csr_tensor`, ``dense.to_sparse_csr()`` or ``coo.to_sparse_csr()``."""

    __slots__ = ("_crow", "_col", "_v", "_shape")

    def __init__(self, crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]):
        self._crow, self._col, self._v, self._shape = crow, col, values, Size(shape)

    # ------------------------------------------------------------------ what it is
    is_sparse = property(lambda self: False, doc="False: PyTorch's flag means the COO layout.")
    is_sparse_csr = property(lambda self: True, doc="True.")
    layout = property(lambda self: sparse_csr, doc="``gt.sparse_csr``.")
    shape = property(lambda self: self._shape, doc="The (dense) shape.")

    def size(self, dim: int | None = None) -> Any:
        """The shape, or one dimension of it."""
        return self._shape if dim is None else self._shape[S.normalize_axis(dim, 2, "size")]

    def dim(self) -> int:
        """2."""
        return 2

    ndim = property(dim)

    def _nnz(self) -> int:
        """The number of stored entries."""
        return self._col.shape[0]

    def crow_indices(self) -> Tensor:
        """Where each row's entries start (``rows + 1`` offsets, the last one ``nnz``)."""
        return self._crow

    def col_indices(self) -> Tensor:
        """Each entry's column."""
        return self._col

    def values(self) -> Tensor:
        """Each entry's value."""
        return self._v

    # ------------------------------------------------------------------ conversions
    def _rows(self) -> Tensor:
        """Each entry's row: how many row ends (``crow[1:]``) are at or before its position."""
        at = self._col.new_tensor(np.arange(self._nnz(), dtype=np.int64))
        return searchsorted(self._crow[1:], at, right=True)

    def to_sparse_coo(self) -> SparseTensor:
        """The same entries as a (coalesced) COO tensor."""
        return SparseTensor(stack([self._rows(), self._col]), self._v, tuple(self._shape), True)

    def to_sparse(self, *args: Any, layout: Any = None, **kwargs: Any) -> Any:
        """As COO (or, with ``layout=gt.sparse_csr``, itself)."""
        return self if layout == "sparse_csr" else self.to_sparse_coo()

    def to_sparse_csr(self) -> SparseCsrTensor:
        """Itself."""
        return self

    def to_dense(self, dtype: Any = None) -> Tensor:
        """The dense matrix, differentiable in the values."""
        return self.to_sparse_coo().to_dense(dtype)

    def _with(self, values: Tensor) -> SparseCsrTensor:
        return SparseCsrTensor(self._crow, self._col, values, tuple(self._shape))

    def clone(self) -> SparseCsrTensor:
        """A copy of the entries."""
        return SparseCsrTensor(self._crow.clone(), self._col.clone(), self._v.clone(),
                               tuple(self._shape))  # fmt: skip

    # ------------------------------------------------------------------ arithmetic
    def mm(self, other: Tensor) -> Tensor:
        """``self @ other`` for a dense matrix (or vector)."""
        if isinstance(other, Tensor) and other.ndim == 1:
            return _coo_mm(self.to_sparse_coo(), other.unsqueeze(1)).squeeze(1)
        return _coo_mm(self.to_sparse_coo(), other)

    matmul = mv = mm
    __matmul__ = mm

    def t(self) -> Any:
        """Refused: the transpose of a CSR matrix is a CSC one, a layout GT does not have."""
        raise NotImplementedError(
            "gt.sparse_csr: the transpose is a CSC matrix, which GT does not build; use "
            "to_sparse_coo().t()"
        )

    def __repr__(self) -> str:
        crow = repr(self._crow).replace("\n", "\n" + " " * 20)
        col = repr(self._col).replace("\n", "\n" + " " * 19)
        val = repr(self._v).replace("\n", "\n" + " " * 14)
        return (
            f"tensor(crow_indices={crow},\n       col_indices={col},\n       values={val}, "
            f"size={tuple(self._shape)}, nnz={self._nnz()},\n       layout=gt.sparse_csr)"
        )


def sparse_csr_tensor(crow_indices: Any, col_indices: Any, values: Any, size: Any = None, *,
                      dtype: Any = None, device: Any = None, requires_grad: bool = False,
                      check_invariants: bool | None = None) -> SparseCsrTensor:  # fmt: skip
    """A sparse CSR matrix; without ``size``, as many columns as one past the largest column
    index (a sync point).

    Raises:
        ShapeError: the parts disagree in length, or (with ``check_invariants``) the offsets do
            not rise from 0 to ``nnz`` or a column is out of range.
    """
    tensor = functions.number_tensor  # (gt.tensor, which gt.factories registers there)
    crow, col = (i if isinstance(i, Tensor) else tensor(np.asarray(i, np.int64))
                 for i in (crow_indices, col_indices))  # fmt: skip
    v = values if isinstance(values, Tensor) else tensor(values)
    if dtype is not None:
        v = v.to(dtype)
    if crow.ndim != 1 or col.ndim != 1 or v.ndim != 1 or col.shape[0] != v.shape[0]:
        raise ShapeError(
            "sparse_csr_tensor: crow_indices, col_indices and values must be 1-d, the last two "
            f"of one length, got {list(crow.shape)}, {list(col.shape)} and {list(v.shape)}"
        )
    if len(crow) < 1:
        raise ShapeError("sparse_csr_tensor: crow_indices needs at least one offset (0)")
    crow, col = (i if i.dtype == "int64" else i.long() for i in (crow, col))
    if size is None:
        size = (len(crow) - 1, int(col.max().item()) + 1 if len(col) else 0)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or size[0] != len(crow) - 1:
        raise ShapeError(
            f"sparse_csr_tensor: size {list(size)} is not a matrix of {len(crow) - 1} rows "
            "(crow_indices has one offset per row, plus one)"
        )
    if check_invariants:
        offsets = crow.tolist()
        cols = col.tolist()
        rising = all(a <= b for a, b in zip(offsets, offsets[1:]))
        if offsets[0] != 0 or offsets[-1] != len(cols) or not rising:
            raise ShapeError("sparse_csr_tensor: crow_indices must rise from 0 to nnz")
        if cols and (min(cols) < 0 or max(cols) >= size[1]):
            raise ShapeError(f"sparse_csr_tensor: a column index is out of bounds for {size}")
    if requires_grad:
        v = v.detach().requires_grad_(True)
    return SparseCsrTensor(crow, col, v, size)


def to_sparse_csr(x: Any) -> SparseCsrTensor:
    """``x.to_sparse_csr()`` of a 2-d dense or COO tensor (a sync point for a dense one)."""
    if isinstance(x, SparseCsrTensor):
        return x
    coo = x.coalesce() if isinstance(x, SparseTensor) else x.to_sparse()
    if coo.dim() != 2 or coo.sparse_dim() != 2:
        raise ShapeError(f"to_sparse_csr: expected a 2-d matrix, got shape {list(coo.shape)}")
    rows, cols = coo._indices()[0], coo._indices()[1]
    # entries are sorted by row: row r starts after every entry of a smaller row
    starts = rows.new_tensor(np.arange(coo.shape[0] + 1, dtype=np.int64))
    crow = searchsorted(rows, starts)
    return SparseCsrTensor(crow, cols, coo._values(), tuple(coo.shape))


# (``coo.to_sparse_csr()``: given to the COO class here, which gt.sparse cannot import)
SparseTensor.to_sparse_csr = to_sparse_csr  # type: ignore[attr-defined]

__all__ = ["SparseCsrTensor", "sparse_csr", "sparse_csr_tensor", "to_sparse_csr"]
