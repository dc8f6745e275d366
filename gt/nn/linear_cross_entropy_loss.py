"""``nn.LinearCrossEntropyLoss`` (PyTorch 2.13): a ``Linear`` layer and the cross entropy of its
logits, computed by :func:`gt.nn.linear_cross_entropy.linear_cross_entropy` (kept apart from it so
that ``gt.nn.functional`` does not import the layers, which import it).
"""

from __future__ import annotations

import math
from typing import Any

from gt.nn.layers import Linear
from gt.nn.linear_cross_entropy import LinearCrossEntropyOptions, linear_cross_entropy
from gt.nn.module import Module
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


class LinearCrossEntropyLoss(Module):
    """A ``Linear`` layer (``self.linear``, flat ``[C * prod(out_features), in_features]``) and
    the cross entropy of its logits, as PyTorch's (same state dict keys and ``repr``).

    Args:
        in_features: size of each input row.
        num_classes: number of classes ``C``.
        out_features: ``(d1, ..., dK)`` for a K-dimensional loss.
        bias: give the linear layer a bias.
        weight: per-class rescaling (a buffer, ``[C]``).
        reduction, ignore_index, label_smoothing: as :func:`linear_cross_entropy`.
        options: a :class:`LinearCrossEntropyOptions` (accepted, unused).
    """

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple[int, ...] = (),
                 bias: bool = False, device: Any = None, dtype: Any = None,
                 reduction: str = "mean", weight: Tensor | None = None,
                 ignore_index: int | None = None, label_smoothing: float = 0.0,
                 options: LinearCrossEntropyOptions | None = None):  # fmt: skip
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(
                f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}"
            )
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(
                f"expected label_smoothing to be in range [0, 1], got {label_smoothing}"
            )
        super().__init__()
        self.reduction = reduction
        self.register_buffer("weight", weight)
        self.num_classes, self.out_features = num_classes, tuple(out_features)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.linear = Linear(in_features, math.prod(out_features) * num_classes, bias=bias,
                             dtype=dtype)  # fmt: skip
        self.options = options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        w = self.linear.weight.reshape(
            self.num_classes, *self.out_features, self.linear.in_features
        )
        b = self.linear.bias
        b = b.reshape(self.num_classes, *self.out_features) if b is not None else None
        return linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight,
                                    reduction=self.reduction, ignore_index=self.ignore_index,
                                    label_smoothing=self.label_smoothing, options=self.options)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )


__all__ = ["LinearCrossEntropyLoss"]
