"""Convolution, pooling and resampling modules, with PyTorch's initialization and ``repr``."""

from __future__ import annotations

import math
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn import convolution as C
from gt.nn import functional as fn
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor


def _ntuple(v: Any, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        return tuple(v)
    return (v,) * n


def _uniform(shape: tuple[int, ...], bound: float, dtype: Any) -> Parameter:
    with no_grad():
        return Parameter(F.rand(*shape, dtype=dtype) * (2.0 * bound) - bound)


class _ConvNd(Module):
    """Shared by every convolution: parameters (PyTorch's ``kaiming_uniform_(a=sqrt(5))``
    initialization, i.e. uniform in ``±1/sqrt(fan_in)`` for weight and bias) and ``repr``."""

    _dims = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", output_padding: Any = 0, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode={padding_mode!r} is not supported")
        n = self._dims
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.output_padding = _ntuple(output_padding, n)
        self.groups, self.padding_mode = groups, padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = _uniform(shape, bound, dtype)
        if bias:
            self.bias = _uniform((out_channels,), bound, dtype)
        else:
            self.register_parameter("bias", None)

    def extra_repr(self) -> str:
        n = self._dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self._transposed and self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    """2-d convolution over ``[N, C, H, W]``."""

    def forward(self, x: Tensor) -> Tensor:
        return C.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)  # fmt: skip


class Conv1d(_ConvNd):
    """1-d convolution over ``[N, C, L]``."""

    _dims = 1

    def forward(self, x: Tensor) -> Tensor:
        return C.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)  # fmt: skip


class ConvTranspose2d(_ConvNd):
    """Transposed 2-d convolution (``output_padding`` adds rows/columns on one side)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device, dtype)  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return C.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)  # fmt: skip


class ConvTranspose1d(ConvTranspose2d):
    """Transposed 1-d convolution."""

    _dims = 1

    def forward(self, x: Tensor) -> Tensor:
        return C.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)  # fmt: skip


class _MaxPoolNd(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False):  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool2d(_MaxPoolNd):
    """Largest value of each window of ``[N, C, H, W]``."""

    def forward(self, x: Tensor) -> Tensor:
        return C.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)  # fmt: skip


class MaxPool1d(_MaxPoolNd):
    """Largest value of each window of ``[N, C, L]``."""

    def forward(self, x: Tensor) -> Tensor:
        return C.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)  # fmt: skip


class AvgPool2d(Module):
    """Mean of each window of ``[N, C, H, W]``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None):  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return C.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(Module):
    """Mean of each window of ``[N, C, L]``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True):  # fmt: skip
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return C.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    def __init__(self, output_size: Any, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average pooling to a fixed output size."""

    def forward(self, x: Tensor) -> Tensor:
        return C.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool2d(_AdaptivePool):
    """Max pooling to a fixed output size."""

    def forward(self, x: Tensor) -> Tensor:
        return C.adaptive_max_pool2d(x, self.output_size)


class AdaptiveAvgPool1d(_AdaptivePool):
    """1-d average pooling to a fixed output size."""

    def forward(self, x: Tensor) -> Tensor:
        return C.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """1-d max pooling to a fixed output size."""

    def forward(self, x: Tensor) -> Tensor:
        return C.adaptive_max_pool1d(x, self.output_size)


class Upsample(Module):
    """Resize by ``size`` or ``scale_factor`` (see :func:`gt.nn.functional.interpolate`)."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None):  # fmt: skip
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = (
            float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        )
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return C.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class Unfold(Module):
    """Sliding windows as columns (``F.unfold``)."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (
            kernel_size,
            dilation,
            padding,
            stride,
        )

    def forward(self, x: Tensor) -> Tensor:
        return C.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
            f"stride={self.stride}"
        )


class Fold(Unfold):
    """Columns summed back into an image (``F.fold``)."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1):  # fmt: skip
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return C.fold(
            x, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, " + super().extra_repr()


class ZeroPad2d(Module):
    """Pad the last two dimensions with zeros (``padding``: one size or left, right, top, bottom)."""

    def __init__(self, padding: Any):
        super().__init__()
        self.padding = _ntuple(padding, 4)

    def forward(self, x: Tensor) -> Tensor:
        return fn.pad(x, self.padding)

    def extra_repr(self) -> str:
        return f"{self.padding}"
