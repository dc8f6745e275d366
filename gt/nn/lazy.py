"""Lazy modules (``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d``, ``LazyInstanceNorm1d/2d/3d``): the input size (``in_features``,
``in_channels``, ``num_features``) is taken from the first input.

Until then the module holds :class:`~gt.nn.UninitializedParameter` (and, for running statistics,
:class:`~gt.nn.UninitializedBuffer`) placeholders and prints the sizes it was given with 0 for the
missing one, as PyTorch does; the first call materializes the placeholders in place with the eager
module's initialization and turns the module into that module (``LazyLinear`` becomes ``Linear``),
so it prints and behaves exactly as one. The parameters stay the same objects, so an optimizer may
be made before the first call. A lazy instance norm that tracks running statistics (PyTorch's
default for the lazy ones) becomes an ``InstanceNorm*d`` subclass from
:mod:`gt.nn.instance_norm_stats` that prints as ``InstanceNorm*d``.
"""

from __future__ import annotations

import math
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn.conv_layers import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    _ConvNd,
    _ConvTransposeNd,
)
from gt.nn.instance_norm_stats import (
    InstanceNorm1dWithStats,
    InstanceNorm2dWithStats,
    InstanceNorm3dWithStats,
)
from gt.nn.layers import Linear
from gt.nn.norm_layers import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _BatchNorm,
    _InstanceNorm,
)
from gt.nn.uninitialized import (
    UninitializedBuffer,
    UninitializedParameter,
    fill_placeholder,
    is_lazy,
)
from gt.tensor import Tensor


def _uniform_value(shape: tuple[int, ...], fan_in: int, dtype: str) -> Tensor:
    """PyTorch's default Linear/Conv values: uniform in ``±1/sqrt(fan_in)``."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    with no_grad():
        return F.rand(*shape, dtype=dtype) * (2.0 * bound) - bound


class LazyModuleMixin:
    """What every lazy module has: ``has_uninitialized_params``, and a ``load_state_dict`` that
    gives each placeholder the shape of its tensor in the checkpoint (the first call keeps the
    values loaded), as PyTorch's."""

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
        with no_grad():
            for table in (self._parameters, self._buffers):  # type: ignore[attr-defined]
                for name, t in table.items():
                    src = state_dict.get(prefix + name)
                    if is_lazy(t) and isinstance(src, Tensor) and not is_lazy(src):
                        t.materialize(src.shape)
        super()._load_from_state_dict(state_dict, prefix, *args)  # type: ignore[misc]

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer is still a placeholder."""
        tensors = list(self._parameters.values()) + list(self._buffers.values())  # type: ignore[attr-defined]
        return any(is_lazy(t) for t in tensors)


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is the last dimension of the first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None):
        super().__init__(0, out_features, bias, dtype=dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def forward(self, input: Tensor) -> Tensor:
        self.in_features = n = int(input.shape[-1])
        w, b = self.weight, self.bias
        if is_lazy(w):  # (not when a checkpoint was loaded into it)
            fill_placeholder(w, _uniform_value((self.out_features, n), n, w.dtype))
        if is_lazy(b):
            fill_placeholder(b, _uniform_value((self.out_features,), n, b.dtype))
        self.__class__ = self.cls_to_become
        return self.forward(input)


class _LazyConvMixin(LazyModuleMixin):
    """Shared by the lazy (transposed) convolutions: ``in_channels`` from the first input."""

    _dims: int
    cls_to_become: type

    def _placeholders(self, bias: bool, dtype: Any) -> None:
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def _materialize(self, x: Tensor) -> None:
        n = self._dims
        if x.ndim not in (n + 1, n + 2):
            raise RuntimeError(
                f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                f"{type(self).__name__}, but got input of size: {list(x.shape)}"
            )
        self.in_channels = int(x.shape[1] if x.ndim == n + 2 else x.shape[0])
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        if self._transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        fan_in = shape[1] * math.prod(self.kernel_size)
        if is_lazy(self.weight):  # (not when a checkpoint was loaded into it)
            fill_placeholder(self.weight, _uniform_value(shape, fan_in, self.weight.dtype))
        if is_lazy(self.bias):
            fill_placeholder(
                self.bias, _uniform_value((self.out_channels,), fan_in, self.bias.dtype)
            )
        self.__class__ = self.cls_to_become


class _LazyConvNd(_LazyConvMixin, _ConvNd):
    cls_to_become: type = Conv2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype=dtype)  # fmt: skip
        self._placeholders(bias, dtype)

    def forward(self, input: Tensor) -> Tensor:
        self._materialize(input)
        return self.forward(input)


class LazyConv1d(_LazyConvNd):
    """``Conv1d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 1, Conv1d


class LazyConv2d(_LazyConvNd):
    """``Conv2d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 2, Conv2d


class LazyConv3d(_LazyConvNd):
    """``Conv3d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 3, Conv3d


class _LazyConvTransposeNd(_LazyConvMixin, _ConvTransposeNd):
    cls_to_become: type = ConvTranspose2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups,
                         bias, dilation, padding_mode, dtype=dtype)  # fmt: skip
        self._placeholders(bias, dtype)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        self._materialize(input)
        return self.forward(input, output_size)


class LazyConvTranspose1d(_LazyConvTransposeNd):
    """``ConvTranspose1d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 1, ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd):
    """``ConvTranspose2d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 2, ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd):
    """``ConvTranspose3d`` whose ``in_channels`` comes from the first input."""

    _dims, cls_to_become = 3, ConvTranspose3d


class _LazyNormMixin(LazyModuleMixin):
    """Placeholders and materialization shared by the lazy batch and instance norms."""

    def _placeholders(self, affine: bool, track: bool, bias: bool, dtype: Any) -> None:
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)

    def _materialize(self, n: int) -> None:
        # As PyTorch: with nothing to materialize (no affine, no running stats), num_features
        # stays 0.
        if not self.has_uninitialized_params():
            return
        self.num_features = n
        for name, fill in (("weight", F.ones), ("bias", F.zeros), ("running_mean", F.zeros),
                           ("running_var", F.ones)):  # fmt: skip
            t = getattr(self, name, None)
            if is_lazy(t):
                fill_placeholder(t, fill(n, dtype=t.dtype))


class _LazyBatchNorm(_LazyNormMixin, _BatchNorm):
    cls_to_become: type = BatchNorm1d

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True):  # fmt: skip
        super().__init__(0, eps, momentum, affine, track_running_stats, dtype=dtype, bias=bias)
        self._placeholders(affine, track_running_stats, bias, dtype)

    def forward(self, input: Tensor) -> Tensor:
        dims = self.cls_to_become._expected_dims
        if input.ndim not in dims:
            raise ValueError(
                f"expected {' or '.join(f'{d}D' for d in dims)} input (got {input.ndim}D input)"
            )
        self._materialize(int(input.shape[1]))
        self.__class__ = self.cls_to_become
        return self.forward(input)


class LazyBatchNorm1d(_LazyBatchNorm):
    """``BatchNorm1d`` whose ``num_features`` comes from the first input."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm):
    """``BatchNorm2d`` whose ``num_features`` comes from the first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm):
    """``BatchNorm3d`` whose ``num_features`` comes from the first input."""

    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNormMixin, _InstanceNorm):
    """PyTorch's defaults for the lazy instance norms: ``affine`` and ``track_running_stats``."""

    _unbatched_dims = 3
    cls_to_become: type = InstanceNorm2d
    _with_stats: type = InstanceNorm2dWithStats

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True):  # fmt: skip
        super().__init__(0, eps, momentum, False, False, dtype=dtype)  # type: ignore[arg-type]
        self.affine, self.track_running_stats = affine, track_running_stats
        self._placeholders(affine, track_running_stats, bias, dtype)
        if track_running_stats:
            self.register_buffer("num_batches_tracked", F.zeros((), dtype="int64"))

    def forward(self, input: Tensor) -> Tensor:
        d = self._unbatched_dims
        if input.ndim not in (d, d + 1):
            raise ValueError(f"expected {d}D or {d + 1}D input (got {input.ndim}D input)")
        self._materialize(int(input.shape[0] if input.ndim == d else input.shape[1]))
        self.__class__ = self._with_stats if self.track_running_stats else self.cls_to_become
        return self.forward(input)


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """``InstanceNorm1d`` whose ``num_features`` comes from the first input."""

    _unbatched_dims, cls_to_become, _with_stats = 2, InstanceNorm1d, InstanceNorm1dWithStats


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """``InstanceNorm2d`` whose ``num_features`` comes from the first input."""

    _unbatched_dims, cls_to_become, _with_stats = 3, InstanceNorm2d, InstanceNorm2dWithStats


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """``InstanceNorm3d`` whose ``num_features`` comes from the first input."""

    _unbatched_dims, cls_to_become, _with_stats = 4, InstanceNorm3d, InstanceNorm3dWithStats


__all__ = [
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
    "LazyModuleMixin",
]
