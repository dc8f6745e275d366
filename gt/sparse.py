"""``gt.sparse``: sparse COO matrices for what graph code does with them (PyTorch's ``torch.sparse``).

A :class:`SparseTensor` holds an integer ``indices`` tensor (``sparse_dim × nnz``), a ``values``
tensor (``nnz`` values, or ``nnz`` rows of a dense part) and a shape, as PyTorch's
``sparse_coo`` layout does; GCN code builds one from an edge list and multiplies it into dense
features (``torch.sparse.mm(adj, x)``, ``torch.spmm``, ``adj @ x``, ``torch.mm``). The product is
a gather of the dense rows, a scale by the values and an ``index_add`` into the result rows, in
the order of the entries, so it is differentiable in the dense operand and in the values (a
gradient of the values is dense, where PyTorch's of a sparse operand is sparse). ``coalesce()``
sorts the entries and adds up duplicates, reading the indices from the worker (a sync point).
``Embedding(sparse=True)``'s weight gets a sparse gradient (``gt.optim.SparseAdam`` reads it; two
gradients add up by appending entries). CSR matrices are in
:mod:`gt.sparse_csr`. Not built: ``EmbeddingBag``'s sparse gradients, the CSC/BSR layouts, and
elementwise ops between sparse tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.ops import functions
from gt.ops.base import TensorBase as Tensor
from gt.ops.shaping import cat  # (isinstance checks and annotations)
from gt.ops.typeinfo import Size
from gt.settings import layout

#: PyTorch's ``torch.sparse_coo``.
sparse_coo = layout("sparse_coo")


class SparseValues:
    """What a sparse tensor does through its values alone (``_v``; ``_with(values)`` makes the
    same entries with other values): dtype, device and grad flags, conversions, scaling by a
    number. Shared by the COO and CSR layouts."""

    __slots__ = ()
    _v: Tensor

    def _with(self, values: Tensor) -> Any:
        raise NotImplementedError

    dtype = property(lambda self: self._v.dtype, doc="The values' dtype.")
    device = property(lambda self: self._v.device, doc="The values' device.")
    requires_grad = property(lambda self: self._v.requires_grad, doc="Whether the values do.")
    is_cuda = property(lambda self: self._v.is_cuda, doc="As the values'.")
    grad_fn = property(lambda self: None, doc="None: sparse tensors are not recorded.")

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """The values converted (a dtype) or moved (a device): indices are kept."""
        return self._with(self._v.to(*args, **kwargs))

    def cpu(self) -> Any:
        """Itself (GT's data lives on its workers)."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Any:
        """Itself (GT's data lives on its workers)."""
        return self

    def float(self) -> Any:
        """Float32 values."""
        return self.to("float32")

    def double(self) -> Any:
        """Float64 values."""
        return self.to("float64")

    def detach(self) -> Any:
        """The same entries, out of autograd."""
        return self._with(self._v.detach())

    def requires_grad_(self, requires_grad: bool = True) -> Any:
        """Let the values require grad (in place)."""
        self._v.requires_grad_(requires_grad)
        return self

    def mul(self, other: Any) -> Any:
        """Values times a number (or a 0-d tensor)."""
        if isinstance(other, SparseValues) or (isinstance(other, Tensor) and other.ndim > 0):
            raise NotImplementedError("gt.sparse: only multiplying by a number is supported")
        return self._with(self._v * other)

    __mul__ = __rmul__ = mul

    def div(self, other: Any) -> Any:
        """Values divided by a number (or a 0-d tensor)."""
        return self._with(self._v / other)

    __truediv__ = div

    def __neg__(self) -> Any:
        return self._with(-self._v)

    neg = __neg__

    # (functions that keep zeros zero: applied to the stored values, as PyTorch's sparse kernels,
    # duplicates added up first: they are not linear)
    def _summed(self) -> Any:
        coalesce = getattr(self, "coalesce", None)
        return coalesce() if coalesce is not None else self

    def abs(self) -> Any:
        """``|x|`` of every entry."""
        s = self._summed()
        return s._with(s._v.abs())

    __abs__ = abs

    def sqrt(self) -> Any:
        """``sqrt(x)`` of every entry."""
        s = self._summed()
        return s._with(s._v.sqrt())

    def square(self) -> Any:
        """``x * x`` of every entry."""
        s = self._summed()
        return s._with(s._v * s._v)

    def sign(self) -> Any:
        """The sign of every entry."""
        s = self._summed()
        return s._with(s._v.sign())

    def relu(self) -> Any:
        """``max(x, 0)`` of every entry."""
        s = self._summed()
        return s._with(s._v.relu())

    def pow(self, exponent: Any) -> Any:
        """Every entry to a positive number's power (zeros stay zeros)."""
        if not isinstance(exponent, (int, float)) or exponent <= 0:
            raise RuntimeError("pow: a sparse tensor to a power that is not a positive number")
        s = self._summed()
        return s._with(s._v**exponent)

    __pow__ = pow

    def half(self) -> Any:
        """Float16 values."""
        return self.to("float16")

    def bfloat16(self) -> Any:
        """Bfloat16 values."""
        return self.to("bfloat16")

    def long(self) -> Any:
        """Int64 values."""
        return self.to("int64")

    def int(self) -> Any:
        """Int32 values."""
        return self.to("int32")

    def bool(self) -> Any:
        """Bool values."""
        return self.to("bool")

    def numel(self) -> int:
        """The number of elements of the dense tensor."""
        return S.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0]


class SparseTensor(SparseValues):
    """A sparse COO tensor (see the module's docstring). Made by :func:`sparse_coo_tensor`,
    ``torch.sparse.FloatTensor(indices, values, size)`` or ``dense.to_sparse()``."""

    __slots__ = ("_i", "_v", "_shape", "_coalesced")

    def __init__(self, indices: Tensor, values: Tensor, shape: tuple[int, ...], coalesced: bool):
        self._i, self._v, self._shape, self._coalesced = indices, values, Size(shape), coalesced

    # ------------------------------------------------------------------ what it is
    is_sparse = property(lambda self: True, doc="True.")
    layout = property(lambda self: sparse_coo, doc="``gt.sparse_coo``.")
    shape = property(lambda self: self._shape, doc="The (dense) shape.")

    def size(self, dim: int | None = None) -> Any:
        """The shape, or one dimension of it."""
        return (
            self._shape if dim is None else self._shape[S.normalize_axis(dim, self.dim(), "size")]
        )

    def dim(self) -> int:
        """The number of dimensions (sparse and dense)."""
        return len(self._shape)

    ndim = property(dim)

    def sparse_dim(self) -> int:
        """How many leading dimensions the indices address."""
        return self._i.shape[0]

    def dense_dim(self) -> int:
        """How many trailing dimensions each value has."""
        return self.dim() - self.sparse_dim()

    def _nnz(self) -> int:
        """The number of stored entries (duplicates counted until :meth:`coalesce`)."""
        return self._i.shape[1]

    def is_coalesced(self) -> bool:
        """Whether the entries are sorted with no duplicates."""
        return self._coalesced

    def _indices(self) -> Tensor:
        """The indices as stored (``sparse_dim × nnz``)."""
        return self._i

    def _values(self) -> Tensor:
        """The values as stored."""
        return self._v

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor.

        Raises:
            RuntimeError: it is not coalesced (as PyTorch's ``indices()``).
        """
        self._need_coalesced("indices")
        return self._i

    def values(self) -> Tensor:
        """The values of a coalesced tensor (raises as :meth:`indices`)."""
        self._need_coalesced("values")
        return self._v

    def _need_coalesced(self, what: str) -> None:
        if not self._coalesced:
            raise RuntimeError(
                f"Cannot get {what} on an uncoalesced tensor, please call .coalesce() first"
            )

    # ------------------------------------------------------------------ conversions
    def coalesce(self) -> SparseTensor:
        """The same tensor with sorted entries and duplicates added up (itself if it is already)."""
        if self._coalesced:
            return self
        idx = np.asarray(self._i._host(), dtype=np.int64)
        dims = self._shape[: self.sparse_dim()]
        flat = np.ravel_multi_index(tuple(idx), dims) if idx.size else np.zeros(0, np.int64)
        keys, inverse = np.unique(flat, return_inverse=True)
        new_idx = np.stack(np.unravel_index(keys, dims)) if keys.size else idx[:, :0]
        where = self._i.new_tensor(inverse.reshape(-1).astype(np.int64))
        values = self._v.new_zeros((len(keys), *self._v.shape[1:])).index_add(0, where, self._v)
        return SparseTensor(self._i.new_tensor(new_idx.astype(np.int64)), values, self._shape, True)

    def to_dense(self, dtype: Any = None) -> Tensor:
        """The dense tensor (duplicates added up), differentiable in the values."""
        dense = self._v.new_zeros(self._shape, dtype=dtype)
        values = self._v if dtype is None else self._v.to(dtype)
        if self._nnz() == 0:
            return dense
        return dense.index_put(tuple(self._i.unbind(0)), values, accumulate=True)

    def to_sparse(self, *args: Any, layout: Any = None, **kwargs: Any) -> Any:
        """Itself (or, with ``layout=gt.sparse_csr``, a CSR matrix)."""
        return self.to_sparse_csr() if layout == "sparse_csr" else self

    def to_sparse_coo(self) -> SparseTensor:
        """Itself."""
        return self

    # to_sparse_csr(): :mod:`gt.sparse_csr` (which builds on this module) adds it

    def _with(self, values: Tensor) -> SparseTensor:
        return SparseTensor(self._i, values, self._shape, self._coalesced)

    # ------------------------------------------------------------------ arithmetic
    def t(self) -> SparseTensor:
        """The transpose of a 2-d sparse matrix (not coalesced, as in PyTorch)."""
        if self.dim() != 2 or self.sparse_dim() != 2:
            raise ShapeError(f"t() expects a 2-d sparse matrix, got shape {list(self._shape)}")
        return SparseTensor(self._i.flip(0), self._v, (self._shape[1], self._shape[0]), False)

    def mm(self, other: Tensor) -> Tensor:
        """``self @ other`` for a 2-d sparse matrix and a dense matrix (a sparse one: a sparse
        result, through a dense intermediate)."""
        return mm(self, other)

    def mul(self, other: Any) -> Any:
        """Times a number, or elementwise times a tensor of the same shape (dense: the entries
        times the dense values at their indices; sparse: through the dense product), sparse."""
        if isinstance(other, SparseValues):
            if tuple(other.shape) != tuple(self._shape):
                raise ShapeError(f"sparse mul: shapes {list(self._shape)} and {list(other.shape)}")
            return to_sparse(self.to_dense() * other.to_dense(), self.sparse_dim())
        if isinstance(other, Tensor) and other.ndim > 0:
            if tuple(other.shape) != tuple(self._shape):
                raise ShapeError(f"sparse mul: shapes {list(self._shape)} and {list(other.shape)}")
            at = tuple(self._i.unbind(0)) if self._nnz() else None
            picked = other[at] if at is not None else other.new_zeros((0, *self._v.shape[1:]))
            return SparseTensor(self._i, self._v * picked, self._shape, self._coalesced)
        return self._with(self._v * other)

    __mul__ = __rmul__ = mul

    matmul = mm
    __matmul__ = mm

    def add(self, other: Any) -> Any:
        """The entries of both (``other``'s first, then these: PyTorch's order), merged when both
        are coalesced (as PyTorch's: equal indices added, the result coalesced; a sync point) and
        left uncoalesced otherwise; for a dense tensor, the dense sum."""
        if isinstance(other, SparseTensor):
            if other._shape != self._shape:
                raise ShapeError(f"sparse add: shapes {list(self._shape)} and {list(other._shape)}")
            i = cat([other._i, self._i], 1)
            both = SparseTensor(i, cat([other._v, self._v], 0), self._shape, False)
            return both.coalesce() if self._coalesced and other._coalesced else both
        return self.to_dense() + other

    __add__ = __radd__ = add

    def zero_(self) -> SparseTensor:
        """No entries any more (in place), as ``optimizer.zero_grad(set_to_none=False)`` leaves a
        sparse gradient."""
        self._i, self._v, self._coalesced = self._i[:, :0], self._v[:0], True
        return self

    def clone(self) -> SparseTensor:
        """A copy of the entries."""
        return SparseTensor(self._i.clone(), self._v.clone(), self._shape, self._coalesced)

    def sum(self, dim: Any = None) -> Any:
        """:func:`sum`."""
        return sum(self, dim)

    def __repr__(self) -> str:
        idx = repr(self._i).replace("\n", "\n" + " " * 15)
        val = repr(self._v).replace("\n", "\n" + " " * 14)
        return (
            f"tensor(indices={idx},\n       values={val},\n       size={tuple(self._shape)}, "
            f"nnz={self._nnz()}, layout=gt.sparse_coo)"
        )


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, requires_grad: bool = False,
                      check_invariants: bool | None = None, is_coalesced: bool | None = None
                      ) -> SparseTensor:  # fmt: skip
    """A sparse COO tensor with entries ``values`` at ``indices`` (``sparse_dim × nnz``); the
    shape is inferred as one past the largest index when ``size`` is not given (a sync point).

    Raises:
        ShapeError: indices and values disagree, or an index is outside ``size``.
    """
    tensor = functions.number_tensor  # (gt.tensor, which gt.factories registers there)
    i = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices, np.int64))
    v = values if isinstance(values, Tensor) else tensor(values)
    if dtype is not None:
        v = v.to(dtype)
    if i.ndim != 2 or i.shape[1] != v.shape[0]:
        raise ShapeError(
            f"sparse_coo_tensor: indices must be sparse_dim x nnz and values nnz x ..., got "
            f"{list(i.shape)} and {list(v.shape)}"
        )
    if i.dtype != "int64":
        i = i.long()
    if size is None:
        top = i.amax(1).tolist() if i.shape[1] else [-1] * i.shape[0]
        size = (*(int(t) + 1 for t in top), *v.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != i.shape[0] + v.ndim - 1:
        raise ShapeError(
            f"sparse_coo_tensor: size {list(size)} has {len(size)} dimensions, but the indices "
            f"address {i.shape[0]} and each value has {v.ndim - 1}"
        )
    if check_invariants and i.shape[1]:
        top = i.amax(1).tolist()
        low = i.amin(1).tolist()
        if any(t >= s for t, s in zip(top, size)) or min(low) < 0:
            raise ShapeError(f"sparse_coo_tensor: an index is out of bounds for size {list(size)}")
    if requires_grad:
        v = v.detach().requires_grad_(True)
    # (one entry or none is coalesced whatever the caller says, as PyTorch's constructor marks it)
    return SparseTensor(i, v, size, bool(is_coalesced) or i.shape[1] <= 1)


def FloatTensor(indices: Any, values: Any, size: Any = None) -> SparseTensor:  # noqa: N802
    """PyTorch's legacy ``torch.sparse.FloatTensor(indices, values, size)``."""
    return sparse_coo_tensor(indices, values, size, dtype="float32")


def DoubleTensor(indices: Any, values: Any, size: Any = None) -> SparseTensor:  # noqa: N802
    """PyTorch's legacy ``torch.sparse.DoubleTensor(indices, values, size)``."""
    return sparse_coo_tensor(indices, values, size, dtype="float64")


def mm(sparse: SparseTensor, dense: Tensor) -> Tensor:
    """``sparse @ dense`` for a 2-d sparse matrix and a 2-d dense one (``torch.sparse.mm``,
    ``torch.spmm``): each entry's value times its column's dense row, added into its row of the
    result in the entries' order."""
    if not isinstance(sparse, SparseTensor):
        return sparse.mm(dense)
    if isinstance(dense, SparseTensor):  # (sparse @ sparse: sparse, as PyTorch's)
        return to_sparse(mm(sparse, dense.to_dense()))
    if sparse.dim() != 2 or sparse.sparse_dim() != 2 or dense.ndim != 2:
        raise ShapeError(
            f"sparse.mm: expected a 2-d sparse matrix and a 2-d dense one, got "
            f"{list(sparse.shape)} and {list(dense.shape)}"
        )
    n, k = sparse.shape
    if dense.shape[0] != k:
        raise ShapeError(
            f"sparse.mm: shapes {list(sparse.shape)} and {list(dense.shape)} cannot be multiplied"
        )
    dtype = S.promote(sparse.dtype, dense.dtype)
    out = dense.new_zeros((n, dense.shape[1]), dtype=dtype)
    if sparse._nnz() == 0:
        return out
    rows, cols = sparse._i[0], sparse._i[1]
    return out.index_add(0, rows, sparse._v.unsqueeze(1) * dense.index_select(0, cols))


spmm = mm


def addmm(mat: Tensor, sparse: SparseTensor, dense: Tensor, *, beta: float = 1.0,
          alpha: float = 1.0) -> Tensor:  # fmt: skip
    """``beta * mat + alpha * (sparse @ dense)`` (``torch.sparse.addmm``); with ``beta=0``
    ``mat`` is not read (its NaN do not pass, as in PyTorch: the ``empty`` + ``beta=0`` idiom)."""
    product = mm(sparse, dense) * alpha
    if beta == 0:
        return product + product.new_zeros(mat.shape) if product.shape != mat.shape else product
    return mat * beta + product


def sum(input: SparseTensor, dim: Any = None) -> Any:  # noqa: A001 - PyTorch's name
    """The sum of all entries (a dense 0-d tensor), or over ``dim``, as ``torch.sparse.sum``: a
    dense tensor when every sparse dimension is summed, else a sparse tensor of the rest (its
    dense dimensions kept dense; ``.to_dense()`` gives e.g. a graph's degrees)."""
    if dim is None:
        return input._v.sum()
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:  # (nothing summed: the tensor itself, as PyTorch gives it)
        return input
    axes = tuple(sorted({S.normalize_axis(d, input.dim(), "sparse.sum") for d in dims}))
    dense = input.to_dense().sum(axes)
    kept_sparse = input.sparse_dim() - len([a for a in axes if a < input.sparse_dim()])
    if kept_sparse == 0:
        return dense
    return to_sparse(dense, kept_sparse)


def to_sparse(dense: Tensor, sparse_dim: int | None = None) -> SparseTensor:
    """``dense.to_sparse()``: its nonzero entries, coalesced (a sync point)."""
    nd = dense.ndim if sparse_dim is None else int(sparse_dim)
    if nd == dense.ndim:
        where = dense.nonzero().t()
        values = dense[tuple(where.unbind(0))] if where.shape[1] else dense.new_zeros(0)
    else:
        keep = dense.reshape(*dense.shape[:nd], -1).ne(0).any(-1)
        where = keep.nonzero().t()
        values = dense[tuple(where.unbind(0))]
    return SparseTensor(where, values, tuple(dense.shape), True)


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is a sparse tensor."""
    return isinstance(x, SparseTensor)


__all__ = ["DoubleTensor", "FloatTensor", "SparseTensor", "addmm", "is_sparse", "mm", "sparse_coo",
           "sparse_coo_tensor", "spmm", "sum", "to_sparse"]  # fmt: skip
