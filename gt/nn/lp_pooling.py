"""Power-average pooling in 1, 2 and 3-d (``F.lp_pool2d``, ``nn.LPPool2d``), PyTorch's definition:
``(sum over the window of x^p)^(1/p)``, computed as an average pool of ``x^p`` times the kernel's
size (so with ``ceil_mode`` a window cut short by the input's end is scaled up as in PyTorch),
then the ``1/p`` power. ``p = inf`` is max pooling of ``|x|``, ``p = -inf`` min pooling of it.
Where a window's sum is 0 the gradient is 0, as in PyTorch (not the infinite derivative of
``s^(1/p)`` at 0).
"""

from __future__ import annotations

import math
from typing import Any

from gt.nn.convolution import _pair
from gt.nn.module import Module
from gt.nn.pooling import avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d, max_pool2d, max_pool3d
from gt.ops.arith import where
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)

_AVG = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}
_MAX = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}


def _lp_pool(input: Tensor, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool,
             dims: int) -> Tensor:  # fmt: skip
    if norm_type == math.inf:
        return _MAX[dims](input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -_MAX[dims](-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    mean = _AVG[dims](input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    total = mean * math.prod(_pair(kernel_size, dims))
    # PyTorch's sign(s) * relu(|s|): the value of s, with no gradient where s == 0
    nonzero = total != 0
    root = where(nonzero, total, 1.0).pow(1.0 / norm_type)
    return where(nonzero, root, total.detach().pow(1.0 / norm_type))


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:  # fmt: skip
    """1-d power-average pooling of ``[N, C, L]``: ``(sum of x^p over each window)^(1/p)``."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:  # fmt: skip
    """2-d power-average pooling of ``[N, C, H, W]`` (``stride`` defaults to the kernel)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:  # fmt: skip
    """3-d power-average pooling of ``[N, C, D, H, W]``."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


class _LPPoolNd(Module):
    _dims = 2

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return _lp_pool(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode,
                        self._dims)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """1-d power-average pooling (see :func:`lp_pool1d`)."""

    _dims = 1


class LPPool2d(_LPPoolNd):
    """2-d power-average pooling (see :func:`lp_pool2d`)."""


class LPPool3d(_LPPoolNd):
    """3-d power-average pooling (see :func:`lp_pool3d`)."""

    _dims = 3


__all__ = ["LPPool1d", "LPPool2d", "LPPool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d"]
