"""``F.linear_cross_entropy`` and ``nn.LinearCrossEntropyOptions`` (PyTorch 2.13): the cross
entropy of ``linear(input, linear_weight, linear_bias)`` and a target (the module,
``nn.LinearCrossEntropyLoss``, is in :mod:`gt.nn.linear_cross_entropy_loss`).

GT always computes PyTorch's reference path (the logits, then ``cross_entropy``). The options of
PyTorch's chunked path are accepted and checked as PyTorch checks them, and change nothing: the
chunks only bound PyTorch's peak memory, the values are the same.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gt.nn.losses import cross_entropy
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")
_ACC_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch's chunking options for :func:`linear_cross_entropy` (accepted; GT does not chunk).

    Attributes:
        allow_retain_graph: allow a second backward (always allowed in GT).
        batch_chunk_size: rows per chunk (``None``: one chunk).
        chunking_method: ``"auto"``, ``"aspect_ratio"``, ``"aspect_ratio:N"`` or ``None``.
        acc_policy: ``"auto"``, ``"accurate"``, ``"balanced"`` or ``"compact"``.
        acc_dtype: accumulation dtype (``None``: chosen per call).
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None

    def __post_init__(self) -> None:
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        size = self.batch_chunk_size
        if not (size is None or (isinstance(size, int) and size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {size!r}")
        if self.acc_dtype is not None and _dtype_name(self.acc_dtype) not in _ACC_DTYPES:
            raise ValueError(
                "acc_dtype must be one of {None, torch.float16, torch.bfloat16, torch.float32, "
                f"torch.float64}}, got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                "automatically."
            )


def _dtype_name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Tensor | None = None, weight: Tensor | None = None,
                         reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0,
                         options: LinearCrossEntropyOptions | None = None) -> Tensor:  # fmt: skip
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``.

    Args:
        input: ``[in_features]`` or ``[N, in_features]``.
        linear_weight: ``[C, in_features]``, or ``[C, d1, ..., dK, in_features]`` for a
            K-dimensional loss (logits ``[N, C, d1, ..., dK]``).
        target: class indices or class probabilities (shaped like the logits).
        ignore_index: ``None`` is PyTorch's default (-100 for class indices; not allowed with
            probabilities).
        options: accepted and unused (see the module doc).
    """
    if input.ndim < 1 or input.ndim > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(
            f"expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}"
        )
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "expected equal input and linear_weight last dimensions (in_features), got "
            f"{in_features} and {linear_weight.shape[-1]}, respectively"
        )
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(
            f"expected linear_bias shape {(classes, *out_features)}, got {tuple(linear_bias.shape)}"
        )
    if out_features and not batches:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} "
            f"requires batched input, (N, {in_features}), got unbatched input with shape "
            f"{tuple(input.shape)}"
        )
    logits_shape = (*batches, classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    rows = math.prod(out_features) * classes
    logits = input @ linear_weight.reshape(rows, in_features).T
    if linear_bias is not None:
        logits = logits + linear_bias.reshape(rows)
    return cross_entropy(logits.reshape(logits_shape), target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index,
                         label_smoothing=label_smoothing)  # fmt: skip


__all__ = ["LinearCrossEntropyOptions", "linear_cross_entropy"]
