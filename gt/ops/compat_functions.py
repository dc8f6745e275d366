"""``torch.*`` functions that are not tensor methods, composed from GT's ops: ``as_tensor``,
``asarray``, ``tril_indices``/``triu_indices`` (over :func:`gt.tensor`: this module imports
:mod:`gt.factories`, which imports :mod:`gt.tensor`, so the tensor mixins cannot),
``column_stack``/``hstack``/``vstack``/``dstack``, ``combinations``, ``cartesian_prod``,
``std_mean``/``var_mean``, ``isin``, ``rsub``, ``chain_matmul`` and ``remainder`` (whose first
argument may be a number)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from gt.errors import ShapeError
from gt.factories import tensor
from gt.grad_graph import label
from gt.ops.base import TensorBase
from gt.ops.shaping import cat, stack

if TYPE_CHECKING:
    from gt.tensor import Tensor


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Any:
    """``data`` itself when it is a tensor of ``dtype`` (converted otherwise, keeping its
    autograd history); anything else is copied as :func:`gt.tensor` does."""
    if isinstance(data, TensorBase):
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype)


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
            requires_grad: bool = False) -> Any:  # fmt: skip
    """:func:`as_tensor`, with ``copy=True`` always giving a new tensor and ``requires_grad``
    for new leaves."""
    if isinstance(obj, TensorBase):
        out = as_tensor(obj, dtype)
        out = out.clone() if copy and out is obj else out
        return out.requires_grad_(True) if requires_grad and out.is_leaf else out
    return tensor(obj, dtype, requires_grad)


def _indices(found: tuple, dtype: Any) -> Any:
    return tensor(
        np.stack(found).astype(np.int64).reshape(2, -1), "int64" if dtype is None else dtype
    )


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, **_: Any) -> Any:
    """The ``(2, N)`` row and column indices of the lower triangle of a ``row x col`` matrix
    (on and below diagonal ``offset``), row by row."""
    return _indices(np.tril_indices(row, offset, col), dtype)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, **_: Any) -> Any:
    """The ``(2, N)`` row and column indices of the upper triangle of a ``row x col`` matrix
    (on and above diagonal ``offset``), row by row."""
    return _indices(np.triu_indices(row, offset, col), dtype)


def remainder(input: Any, other: Any) -> Tensor:  # noqa: A002 - PyTorch's name
    """``input % other`` (the sign of ``other``); ``input`` may be a number."""
    return input % other


def rsub(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``other - alpha * input``."""
    return other - (input if alpha == 1 else input * alpha)


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of the matrices, left to right."""
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out.clone() if len(matrices) == 1 else out


def _as_2d_columns(t: Tensor) -> Tensor:
    return t.reshape(-1, 1) if t.ndim < 2 else t


def column_stack(tensors: Any) -> Tensor:
    """The tensors side by side as columns (0-d and 1-d ones become columns)."""
    return cat([_as_2d_columns(t) for t in tensors], 1)


def hstack(tensors: Any) -> Tensor:
    """Joined along dim 1 (along dim 0 when all are 1-d; 0-d ones become 1-d)."""
    ts = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    return cat(ts, 0 if all(t.ndim == 1 for t in ts) else 1)


def vstack(tensors: Any) -> Tensor:
    """Joined along dim 0 after making each at least 2-d (a vector becomes a row)."""
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


row_stack = vstack


def dstack(tensors: Any) -> Tensor:
    """Joined along dim 2 after making each at least 3-d (``(n,)`` -> ``(1, n, 1)``, ``(m, n)``
    -> ``(m, n, 1)``)."""
    ts = [t.reshape(1, -1, 1) if t.ndim < 2 else (t.unsqueeze(-1) if t.ndim == 2 else t)
          for t in tensors]  # fmt: skip
    return cat(ts, 2)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """Every length-``r`` combination of a 1-d tensor's elements, one per row (as
    ``itertools.combinations``, or ``combinations_with_replacement``)."""
    if input.ndim != 1:
        raise ShapeError(f"combinations: expect a 1D vector, but got shape {list(input.shape)}")
    if r == 0:
        return input.new_zeros((0,))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return input.new_zeros((0, r))
    return stack([input[[row[i] for row in rows]] for i in range(r)], 1)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every tuple of one element from each 1-d tensor, one per row (a single tensor: itself)."""
    if len(tensors) == 1:
        return tensors[0]
    shape = tuple(t.shape[0] for t in tensors)
    cols = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[i] = shape[i]
        cols.append(t.reshape(view).expand(shape).reshape(-1))
    return stack(cols, 1)


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:  # noqa: A002 # fmt: skip
    """``(std, mean)`` over ``dim`` (a bool first argument is ``unbiased``)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    std = input.std(dim, unbiased, keepdim, correction=correction)
    mean = input.mean(dim=dim, keepdim=keepdim)
    return label(std, "StdMeanBackward0"), label(mean, "StdMeanBackward0")


def var_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:  # noqa: A002 # fmt: skip
    """``(var, mean)`` over ``dim`` (a bool first argument is ``unbiased``)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    var = input.var(dim, unbiased, keepdim, correction=correction)
    mean = input.mean(dim=dim, keepdim=keepdim)
    return label(var, "VarMeanBackward0"), label(mean, "VarMeanBackward0")


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:  # fmt: skip
    """Where each of ``elements`` is one of ``test_elements`` (either may be a number)."""
    if not isinstance(elements, TensorBase):
        elements = test_elements.new_tensor(elements)
    if isinstance(test_elements, TensorBase):
        found = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)
    else:
        found = elements == test_elements
    return ~found if invert else found


__all__ = [
    "as_tensor",
    "asarray",
    "cartesian_prod",
    "chain_matmul",
    "column_stack",
    "combinations",
    "dstack",
    "hstack",
    "isin",
    "remainder",
    "row_stack",
    "rsub",
    "std_mean",
    "tril_indices",
    "triu_indices",
    "var_mean",
    "vstack",
]
