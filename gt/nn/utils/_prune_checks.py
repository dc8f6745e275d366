"""The amounts, dimensions and norms of :mod:`gt.nn.utils.prune` (checked as PyTorch checks
them, with its messages)."""

from __future__ import annotations

import numbers
from typing import Any

from gt.tensor import Tensor


def _validate_pruning_amount_init(amount: Any) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)
    ):
        raise ValueError(
            f"amount={amount} should either be a float in the range [0, 1] or a non-negative "
            "integer"
        )


def _validate_pruning_amount(amount: Any, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(
            f"amount={amount} should be smaller than the number of parameters to "
            f"prune={tensor_size}"
        )


def _validate_structured_pruning(t: Tensor) -> None:
    shape = tuple(t.shape)
    if len(shape) <= 1:
        raise ValueError(
            "Structured pruning can only be applied to multidimensional tensors. Found tensor "
            f"of shape {shape} with {len(shape)} dims"
        )


def _compute_nparams_toprune(amount: Any, tensor_size: int) -> int:
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * tensor_size)


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _compute_norm(t: Tensor, n: Any, dim: int) -> Tensor:
    """The ``L_n`` norm of each channel along ``dim`` (over all other dimensions)."""
    dims = [d for d in range(t.dim()) if d != dim % t.dim()]
    return t.norm(p=n, dim=dims)


def _channel_shape(t: Tensor, dim: int) -> list[int]:
    """The shape that broadcasts one value per channel along ``dim``."""
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    return shape
