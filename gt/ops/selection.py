"""Scatter, index updates and data-dependent selection (a :class:`Tensor` mixin).

``scatter`` is a ``setitem`` and ``scatter_add``/``index_add`` the ``scatter_add`` primitive, each
at an index built like ``gather``'s (the index tensor along ``dim``, ``arange`` along the others),
so all are differentiable. ``nonzero``, ``masked_select`` and ``unique`` have result shapes that
depend on the data, so they are sync points (as on a GPU in PyTorch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt._dtype import name_of
from gt.autograd import _mode
from gt.errors import ShapeError
from gt.grad_graph import labels
from gt.indexing import encode_key
from gt.ops.base import TensorBase, zero_dim_as_one
from gt.ops.functions import numpy_names

if TYPE_CHECKING:
    from gt.tensor import Tensor


def _along(x: Tensor, d: int, index: Tensor, op: str) -> tuple:
    """The index tuple that addresses ``x`` at ``index`` along ``d`` (``gather``'s positions);
    a 0-d index addresses one entry of a 1-d ``x``, as PyTorch allows."""
    if index.ndim == 0 and x.ndim == 1 and index.dtype in S.INT_DTYPES:
        return (index.reshape(1),)  # (a 0-d index in a key is read as an int: a sync)
    if index.ndim != x.ndim or index.dtype not in S.INT_DTYPES:
        raise RuntimeError(
            f"{op}: index must be an integer tensor with as many dimensions as the input "
            f"(got {index.dtype} of shape {list(index.shape)} for shape {list(x.shape)})"
        )
    key = []
    for i in range(x.ndim):
        if i == d:
            key.append(index)
        else:
            shape = [1] * x.ndim
            shape[i] = index.shape[i]
            key.append(x._arange(index.shape[i]).reshape(shape))
    return tuple(key)


def _without(shape: tuple[int, ...], d: int) -> tuple[int, ...]:
    return shape[:d] + shape[d + 1 :]


def _source(src: Any, index: Tensor) -> Any:
    """``src`` cut to ``index``'s shape (PyTorch reads only that corner of a larger source)."""
    if not isinstance(src, TensorBase) or src.shape == index.shape:
        return src
    if not index.shape:  # (a 0-d index takes the source's first entry)
        return src.reshape(-1)[0]
    return src[tuple(slice(0, n) for n in index.shape)]


_REDUCES = ("amax", "amin", "prod")


def _keyed(x: Tensor, name: str, src: Tensor, tensors: list, attrs: dict) -> Tensor:
    """Primitive ``name`` (``scatter_add``, ``scatter_reduce``) of ``x``, ``src`` at a key.

    With nothing to record, a copy of ``x`` written in place by one instruction: when it fails
    (an index out of range) the worker keeps the copy as it was, so a tensor that takes it over
    (``index_add_``, ``scatter_add_``, ``scatter_reduce_``, ``index_put_``) is usable again once
    the error is caught, as in PyTorch (the kernels copy anyway)."""
    if _mode.enabled and (x.requires_grad or src.requires_grad):
        return x._apply(name, [x, src, *tensors], attrs)
    out = x.clone()
    return out._apply_(name, [out, src, *tensors], {**attrs, "inplace": True})


class SelectionOps:
    """Scatter and selection ops of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ scatter
    @labels(
        lambda self, dim, index, src=None, **kw: (
            "ScatterBackward0" if isinstance(src, TensorBase) else "ScatterBackward1"
        )
    )
    def scatter(self, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
                reduce: str | None = None) -> Tensor:  # fmt: skip
        """A copy with ``out[index[i][j]][j] = src[i][j]`` for ``dim=0`` (and so on for any
        ``dim``); ``src`` may be a number. ``reduce="add"`` adds instead."""
        v = value if src is None else src
        d = S.normalize_axis(dim, self.ndim, "scatter")
        if reduce in ("add", "sum"):
            if not isinstance(v, TensorBase):
                v = index.new_full(index.shape, v, dtype=self.dtype)
            return self.scatter_add(d, index, v)
        if reduce == "multiply":
            if not isinstance(v, TensorBase):
                v = index.new_full(index.shape, v, dtype=self.dtype)
            return self.scatter_reduce(d, index, v, "prod")
        if reduce is not None:
            raise RuntimeError(
                f"scatter: reduce argument must be either add or multiply, got {reduce}"
            )
        out = self.clone()
        out._setitem(_along(self, d, index, "scatter"), _source(v, index), "scatter")
        return out

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy with ``src`` added at ``index`` along ``dim`` (repeated indices accumulate)."""
        d = S.normalize_axis(dim, self.ndim, "scatter_add")
        key = _along(self, d, index, "scatter_add")
        return self._scatter_add_at(key, _source(src, index), "scatter_add")

    @labels("ScatterReduceBackward0")
    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str,
                       include_self: bool = True) -> Tensor:  # fmt: skip
        """Combine ``src`` into ``self`` at ``index`` along ``dim`` by ``reduce``: ``"sum"``,
        ``"mean"``, ``"amax"``, ``"amin"`` or ``"prod"``; with ``include_self=False`` the positions
        ``index`` addresses are combined from ``src`` alone (PyTorch's semantics and gradients:
        tied maxima share theirs evenly)."""
        if reduce == "sum":
            base = self if include_self else self._zeroed_at(dim, index)
            d = S.normalize_axis(dim, self.ndim, "scatter_reduce")
            key = _along(base, d, index, "scatter_reduce")
            return base._scatter_add_at(key, _source(src, index), "scatter_reduce")
        if reduce == "mean":
            total = self.scatter_reduce(dim, index, src, "sum", include_self)
            ones = index.new_ones(index.shape, dtype=self.dtype)
            start = self.new_ones(self.shape) if include_self else self.new_zeros(self.shape)
            count = start.scatter_add(dim, index, ones)
            if self.dtype in S.INT_DTYPES:  # PyTorch rounds an integer mean down
                return total.div(count.clamp(min=1), rounding_mode="floor")
            return total / count.clamp(min=1.0)
        if reduce not in _REDUCES:
            raise RuntimeError(
                "reduce argument must be either sum, prod, mean, amax or amin, got " + str(reduce)
            )
        d = S.normalize_axis(dim, self.ndim, "scatter_reduce")
        base = self
        wire, tensors, shape = encode_key(
            base, _along(base, d, index, "scatter_reduce"), "scatter_reduce"
        )
        src = _source(src, index)
        if not isinstance(src, TensorBase):
            src = base.new_full(shape, src)
        elif src.shape != shape:
            src = src.expand(shape)
        attrs = {"key": wire, "reduce": reduce, "include_self": bool(include_self)}
        return _keyed(base, "scatter_reduce", src.to(self.dtype), tensors,
                      {**attrs, "index_op": "scatter_reduce"})  # fmt: skip

    def _zeroed_at(self, dim: int, index: Tensor) -> Tensor:
        """``self`` with the positions ``index`` addresses along ``dim`` set to zero."""
        d = S.normalize_axis(dim, self.ndim, "scatter_reduce")
        return self.scatter(d, index, 0.0 if self.dtype in S.FLOAT_DTYPES else 0)

    def index_reduce(self, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                     include_self: bool = True) -> Tensor:  # fmt: skip
        """A copy with the slices of ``source`` combined by ``reduce`` (``"prod"``, ``"mean"``,
        ``"amax"``, ``"amin"``) into the entries ``index`` of ``dim`` (``scatter_reduce`` with
        ``index`` spread over ``source``'s shape)."""
        if reduce not in ("prod", "mean", "amax", "amin"):
            raise RuntimeError(
                f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}."
            )
        d = S.normalize_axis(dim, self.ndim, "index_reduce")
        shape = [1] * source.ndim
        shape[d] = index.shape[0]
        spread = index.reshape(shape).expand(source.shape)
        return self.scatter_reduce(d, spread, source, reduce, include_self=include_self)

    @labels("IndexAddBackward0")
    @zero_dim_as_one
    def index_add(self, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
        """A copy with ``alpha * source`` added at the entries ``index`` of ``dim``."""
        d = S.normalize_axis(dim, self.ndim, "index_add")
        if isinstance(source, TensorBase) and source.dtype != self.dtype:
            mine, theirs = (S.SCALAR_NAMES[name_of(t.dtype)] for t in (self, source))
            raise RuntimeError(
                f"index_add_(): self ({mine}) and source ({theirs}) must have the same scalar type"
            )
        if self.dtype in S.INT_DTYPES and type(alpha) is float:  # (cast to the dtype first, as
            alpha = int(alpha)  # PyTorch's kernel does: 2.5 adds twice)
        src = source if alpha == 1 else source * alpha
        return self._scatter_add_at((slice(None),) * d + (index,), src, "index_add")

    @labels("IndexFillBackward0")
    @zero_dim_as_one
    def index_fill(self, dim: int, index: Tensor, value: Any) -> Tensor:
        """A copy with the entries ``index`` of ``dim`` set to ``value``."""
        d = S.normalize_axis(dim, self.ndim, "index_fill")
        out = self.clone()
        out[(slice(None),) * d + (index,)] = value
        return out

    def _scatter_add_at(self, key: tuple, src: Tensor, index_op: str | None = None) -> Tensor:
        """``self`` with ``src`` added at ``key``; ``index_op``: the op whose index tensors must
        lie in ``[0, size)`` (``None``: a negative index counts from the end, as in
        ``index_put_``)."""
        wire, tensors, shape = encode_key(self, key, "scatter_add")
        if not isinstance(src, TensorBase):
            src = self.new_full(shape, src)
        if src.shape != shape:
            try:
                src = src.expand(shape)
            except ShapeError:
                raise ShapeError(
                    f"scatter_add: source of shape {list(src.shape)} does not fit the indexed "
                    f"shape {list(shape)}"
                ) from None
        attrs = {"key": wire} if index_op is None else {"key": wire, "index_op": index_op}
        return _keyed(self, "scatter_add", src.to(self.dtype), tensors, attrs)

    def take_along_dim(self, indices: Tensor, dim: int | None = None) -> Tensor:
        """``gather`` with ``indices`` broadcast against ``self`` outside ``dim`` (with no
        ``dim``, both flattened first, as in PyTorch)."""
        if dim is None:  # (PyTorch refuses a negative index here, and wraps it with a dim)
            return self.reshape(-1)._gather(0, indices.reshape(-1), "take_along_dim")
        d = S.normalize_axis(dim, self.ndim, "take_along_dim")
        outer = list(
            S.broadcast(_without(self.shape, d), _without(indices.shape, d), "take_along_dim")
        )
        x_shape = outer[:d] + [self.shape[d]] + outer[d:]
        idx_shape = outer[:d] + [indices.shape[d]] + outer[d:]
        return self.expand(x_shape)._gather(d, indices.expand(idx_shape), None)

    # ------------------------------------------------------------------ data-dependent shapes
    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """Indices of the nonzero elements (a sync point: the count depends on the data)."""
        found = np.nonzero(self._host().reshape(self.shape or (1,)))
        if as_tuple:
            return tuple(self._upload(np.ascontiguousarray(i, dtype=np.int64)) for i in found)
        if self.ndim == 0:  # PyTorch: one row (or none) of zero coordinates
            stacked = np.zeros((len(found[0]), 0), np.int64)
        else:
            stacked = np.stack(found, axis=1)
        return self._upload(np.ascontiguousarray(stacked, dtype=np.int64))

    argwhere = nonzero

    @numpy_names
    def count_nonzero(self, dim: Any = None) -> Tensor:
        """Number of nonzero elements (over ``dim``)."""
        return (self != 0).sum(dim)

    def unique(self, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
               return_counts: bool = False, dim: Any = None) -> Any:  # fmt: skip
        """The distinct elements, ascending, as a 1-d tensor (a sync point: how many there are
        depends on the data); with ``return_inverse`` also each element's index into them (in
        ``self``'s shape), with ``return_counts`` how often each occurs. Each NaN is distinct, as
        in PyTorch. ``sorted=False`` gives them sorted too (PyTorch allows any order). Not
        differentiable.

        With ``dim``, the distinct slices along ``dim`` (``x[i]`` for ``dim=0``: rows of a
        matrix), sorted lexicographically as PyTorch sorts them; the inverse and the counts are
        then 1-d, one entry per slice of ``self`` and per distinct slice. A slice holding a NaN
        is distinct from every other.

        Raises:
            IndexError: ``dim`` is out of range.
            RuntimeError: a dimension other than ``dim`` has size 0 (as in PyTorch).
        """
        if dim is None:
            values, inverse, counts = np.unique(
                self._host().reshape(-1), return_inverse=True, return_counts=True, equal_nan=False
            )
            inverse = inverse.reshape(self.shape)
        else:
            if self.ndim == 0:  # (PyTorch: a 0-d tensor has no slices)
                raise IndexError("unique: dimension specified as 0 but tensor has no dimensions")
            d = S.normalize_axis(dim, self.ndim, "unique")
            values, inverse, counts = unique_slices(self._host(), d)
        out = self._upload(np.ascontiguousarray(values))
        if not (return_inverse or return_counts):
            return out
        extra = []
        if return_inverse:
            # (np.array, not ascontiguousarray: that makes a 0-d tensor's inverse 1-d)
            extra.append(self._upload(np.array(inverse, dtype=np.int64)))
        if return_counts:
            extra.append(self._upload(np.ascontiguousarray(counts, dtype=np.int64)))
        return (out, *extra)

    def masked_select(self, mask: Tensor) -> Tensor:
        """The elements where ``mask`` (broadcast with ``self``) is true, as a 1-d tensor (a sync
        point)."""
        shape = S.broadcast(self.shape, mask.shape, "masked_select")
        return self.expand(shape)[mask.expand(shape)]


def unique_slices(a: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct slices of ``a`` along axis ``d`` in PyTorch's lexicographic order, each
    slice's index into them, and how often each occurs (what ``unique(dim=d)`` returns).

    Two slices are the same when all their elements are equal (``==``: a NaN never is).
    """
    sizes = a.shape
    if sizes[d] == 0:
        if sizes.count(0) > 1:
            raise RuntimeError(
                "Number of zero sized dimensions is more than one, so unique cannot be applied"
            )
        empty = np.zeros(0, np.int64)
        return a, empty, empty
    if 0 in sizes:
        raise RuntimeError(
            "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied"
        )
    moved = np.moveaxis(a, d, 0)
    rows = moved.reshape(sizes[d], -1)
    # lexsort's last key is the primary one: the slices' first elements, then the second ...
    # (stable, so equal slices keep their order; NaNs sort after every number)
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    starts = np.ones(len(ranked), bool)  # where a new distinct slice begins
    starts[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    inverse = np.empty(len(ranked), np.int64)
    inverse[order] = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    counts = np.diff(np.append(first, len(ranked)))
    values = ranked[first].reshape((len(first), *moved.shape[1:]))
    return np.moveaxis(values, 0, d), inverse, counts
