"""Lazy modules (``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyBatchNorm1d/2d/3d``): the input size
(``in_features``, ``in_channels``, ``num_features``) is taken from the first input.

Until then the module holds the sizes it was given and prints them with 0 for the missing one, as
PyTorch does; the first call creates the parameters with the eager module's initialization and
turns the module into that module (``LazyLinear`` becomes ``Linear``), so it prints and behaves
exactly as one. Unlike PyTorch, the placeholders are empty ``Parameter`` objects rather than
``UninitializedParameter``: hand the parameters to an optimizer after the first call.
"""

from __future__ import annotations

import math
from typing import Any

from gt import factories as F
from gt.nn.conv_layers import Conv1d, Conv2d, Conv3d, _ConvNd
from gt.nn.conv_layers import _uniform as _conv_uniform
from gt.nn.layers import Linear, _uniform
from gt.nn.module import Parameter
from gt.nn.norm_layers import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm
from gt.tensor import Tensor


class LazyLinear(Linear):
    """``Linear`` whose ``in_features`` is the last dimension of the first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None):
        super().__init__(0, out_features, bias, dtype=dtype)
        self._lazy_dtype = dtype

    def forward(self, x: Tensor) -> Tensor:
        self.in_features = int(x.shape[-1])
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        self.weight = _uniform((self.out_features, self.in_features), bound, self._lazy_dtype)
        if self.bias is not None:
            self.bias = _uniform((self.out_features,), bound, self._lazy_dtype)
        del self._lazy_dtype
        self.__class__ = self.cls_to_become
        return self.forward(x)


class _LazyConvNd(_ConvNd):
    cls_to_become: type = Conv2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype=dtype)  # fmt: skip
        self._lazy_dtype = dtype

    def forward(self, x: Tensor) -> Tensor:
        n = self._dims
        if x.ndim not in (n + 1, n + 2):
            raise RuntimeError(
                f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                f"{type(self).__name__}, but got input of size: {list(x.shape)}"
            )
        self.in_channels = int(x.shape[1] if x.ndim == n + 2 else x.shape[0])
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = _conv_uniform(shape, bound, self._lazy_dtype)
        if self.bias is not None:
            self.bias = _conv_uniform((self.out_channels,), bound, self._lazy_dtype)
        del self._lazy_dtype
        self.__class__ = self.cls_to_become
        return self.forward(x)


class LazyConv1d(_LazyConvNd):
    """``Conv1d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 1, Conv1d


class LazyConv2d(_LazyConvNd):
    """``Conv2d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 2, Conv2d


class LazyConv3d(_LazyConvNd):
    """``Conv3d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 3, Conv3d


class _LazyBatchNorm(_BatchNorm):
    cls_to_become: type = BatchNorm1d

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__(0, eps, momentum, affine, track_running_stats, dtype=dtype)
        self._lazy_dtype = dtype

    def forward(self, x: Tensor) -> Tensor:
        dims = self.cls_to_become._expected_dims
        if x.ndim not in dims:
            raise ValueError(
                f"expected {' or '.join(f'{d}D' for d in dims)} input (got {x.ndim}D input)"
            )
        n, dtype = int(x.shape[1]), self._lazy_dtype
        self.num_features = n
        if self.affine:
            self.weight = Parameter(F.ones(n, dtype=dtype))
            self.bias = Parameter(F.zeros(n, dtype=dtype))
        if self.track_running_stats:
            self.register_buffer("running_mean", F.zeros(n, dtype=dtype))
            self.register_buffer("running_var", F.ones(n, dtype=dtype))
        del self._lazy_dtype
        self.__class__ = self.cls_to_become
        return self.forward(x)


class LazyBatchNorm1d(_LazyBatchNorm):
    """``BatchNorm1d`` whose ``num_features`` comes from the first input."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm):
    """``BatchNorm2d`` whose ``num_features`` comes from the first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm):
    """``BatchNorm3d`` whose ``num_features`` comes from the first input."""

    cls_to_become = BatchNorm3d
