"""Convolution (1, 2 and 3-d), pooling and resampling modules, with PyTorch's initialization and
``repr``."""

from __future__ import annotations

import math
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn import convolution as C
from gt.nn import functional as fn
from gt.nn import pooling as P
from gt.nn.module import Module, Parameter
from gt.nn.padding_layers import ZeroPad2d  # noqa: F401 - (its old home: pickles name it here)
from gt.nn.resetting import redraw
from gt.nn.resize import interpolate
from gt.tensor import Tensor


def _ntuple(v: Any, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        return tuple(v)
    return (v,) * n


def _uniform(shape: tuple[int, ...], bound: float, dtype: Any) -> Parameter:
    with no_grad():
        return Parameter(F.rand(*shape, dtype=dtype) * (2.0 * bound) - bound)


#: ``padding_mode`` values (all but ``"zeros"`` pad with :func:`gt.nn.functional.pad` first).
_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """Shared by every convolution: argument checks (PyTorch's messages), parameters (PyTorch's
    ``kaiming_uniform_(a=sqrt(5))`` initialization, i.e. uniform in ``±1/sqrt(fan_in)`` for weight
    and bias), ``padding_mode`` and ``repr``."""

    _dims = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None, *,
                 output_padding: Any = 0):  # fmt: skip
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.output_padding = _ntuple(output_padding, n)
        self.groups, self.padding_mode = groups, padding_mode
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}"
                )
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                f"padding_mode={padding_mode!r}"
            )
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
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

    def reset_parameters(self) -> None:
        """Draw ``weight`` and ``bias`` again, as the constructor did."""
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        redraw(self, ("weight", "bias"), 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0)

    def _mode_padding(self) -> list[int]:
        """``F.pad`` sizes (last dimension first) for a ``padding_mode`` other than zeros."""
        if self.padding == "valid":
            return [0, 0] * self._dims
        pads: list[int] = []
        for i in reversed(range(self._dims)):
            if self.padding == "same":  # the odd extra element on the right, as PyTorch does
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                pads += [total // 2, total - total // 2]
            else:
                pads += [self.padding[i], self.padding[i]]
        return pads

    def _conv_forward(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The convolution of ``x`` with these sizes (``weight`` and ``bias`` given, as PyTorch)."""
        padding = self.padding
        if self.padding_mode != "zeros":
            x, padding = fn.pad(x, self._mode_padding(), mode=self.padding_mode), 0
        conv = (C.conv1d, C.conv2d, C.conv3d)[self._dims - 1]
        return conv(x, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)

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


class Conv1d(_ConvNd):
    """1-d convolution over ``[N, C, L]``."""

    _dims = 1


class Conv2d(_ConvNd):
    """2-d convolution over ``[N, C, H, W]``."""


class Conv3d(_ConvNd):
    """3-d convolution over ``[N, C, D, H, W]`` (video, volumes): weight
    ``[out_channels, in_channels/groups, kd, kh, kw]``, PyTorch's initialization and ``repr``;
    ``padding`` may be ``"same"``/``"valid"``, ``padding_mode`` any of PyTorch's four."""

    _dims = 3


class _ConvTransposeNd(_ConvNd):
    """Shared by the transposed convolutions: PyTorch's argument order, and ``output_size`` in
    ``forward`` (it picks ``output_padding``)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype, output_padding=output_padding)  # fmt: skip

    def _output_padding(self, x: Tensor, output_size: Any) -> tuple:
        """``output_padding`` that gives ``output_size`` (PyTorch's rule and messages)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        lead = 2 if x.ndim == n + 2 else 1
        size = [int(v) for v in output_size]
        if len(size) == lead + n:
            size = size[lead:]
        if len(size) != n:
            raise ValueError(
                f"ConvTranspose{n}D: for {x.ndim}D input, output_size must have {n} or "
                f"{n + lead} elements (got {len(size)})"
            )
        low = [(x.shape[lead + d] - 1) * self.stride[d] - 2 * self.padding[d]
               + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]  # fmt: skip
        high = [lo + s - 1 for lo, s in zip(low, self.stride)]
        if any(not lo <= v <= hi for v, lo, hi in zip(size, low, high)):
            raise ValueError(
                f"requested an output size of {size}, but valid sizes range from {low} to {high} "
                f"(for an input of {list(x.shape[lead:])})"
            )
        return tuple(v - lo for v, lo in zip(size, low))

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        conv = (C.conv_transpose1d, C.conv_transpose2d, C.conv_transpose3d)[self._dims - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-d convolution."""

    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-d convolution (``output_padding`` adds rows/columns on one side)."""


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-d convolution over ``[N, C, D, H, W]`` (a learned upsampling, as in 3-d
    U-Nets): weight ``[in_channels, out_channels/groups, kd, kh, kw]``; ``forward(x,
    output_size=...)`` picks ``output_padding`` as PyTorch does."""

    _dims = 3


class _MaxPoolNd(Module):
    """Shared by the max poolings: PyTorch's arguments (``stride`` defaults to the kernel) and
    ``repr``."""

    _dims = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False):  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        pool = (P.max_pool1d, P.max_pool2d, P.max_pool3d)[self._dims - 1]
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                    self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """Largest value of each window of ``[N, C, L]``."""

    _dims = 1


class MaxPool2d(_MaxPoolNd):
    """Largest value of each window of ``[N, C, H, W]``."""


class MaxPool3d(_MaxPoolNd):
    """Largest value of each window of ``[N, C, D, H, W]`` (``dilation``, ``ceil_mode`` and
    ``return_indices`` as in PyTorch)."""

    _dims = 3


class _AvgPoolNd(Module):
    """Shared by the 2-d and 3-d average poolings: PyTorch's arguments and ``repr``."""

    _dims = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None):  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        pool = P.avg_pool3d if self._dims == 3 else P.avg_pool2d
        return pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                    self.count_include_pad, self.divisor_override)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """Mean of each window of ``[N, C, H, W]``."""


class AvgPool3d(_AvgPoolNd):
    """Mean of each window of ``[N, C, D, H, W]`` (``ceil_mode``, ``count_include_pad`` and
    ``divisor_override`` as in PyTorch)."""

    _dims = 3


class AvgPool1d(Module):
    """Mean of each window of ``[N, C, L]``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True):  # fmt: skip
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    """Shared by the adaptive poolings: ``output_size`` (``None`` entries keep the input's size)."""

    def __init__(self, output_size: Any, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """1-d average pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        return P.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        return P.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    """3-d average pooling of ``[N, C, D, H, W]`` to a fixed output size (``1``: global)."""

    def forward(self, input: Tensor) -> Tensor:
        return P.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """1-d max pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        return P.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    """Max pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        return P.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptivePool):
    """3-d max pooling of ``[N, C, D, H, W]`` to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        return P.adaptive_max_pool3d(input, self.output_size, self.return_indices)


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

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class _Windows(Module):
    """What ``Unfold`` and ``Fold`` share (PyTorch's two are unrelated classes)."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (
            kernel_size,
            dilation,
            padding,
            stride,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
            f"stride={self.stride}"
        )


class Unfold(_Windows):
    """Sliding windows as columns (``F.unfold``)."""

    def forward(self, input: Tensor) -> Tensor:
        return C.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(_Windows):
    """Columns summed back into an image (``F.fold``)."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1):  # fmt: skip
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return C.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, " + super().extra_repr()
