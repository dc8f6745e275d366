"""More modules with PyTorch's names: pixel and channel shuffles, ``Softmax2d``, the fixed-mode
upsamplers, distances, ``Bilinear``, shrink activations, ``RReLU`` and more dropouts. Each module
calls its function in :mod:`gt.nn.functional` and prints as PyTorch's does."""

from __future__ import annotations

import math
from typing import Any

from gt.nn import functional as fn
from gt.nn import more_functional as MF
from gt.nn.conv_layers import Upsample
from gt.nn.layers import _DropoutNd, _uniform
from gt.nn.module import Module
from gt.nn.resetting import redraw
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names


class PixelShuffle(Module):
    """``[*, C*r*r, H, W]`` to ``[*, C, H*r, W*r]``."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return MF.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``[*, C, H*r, W*r]`` to ``[*, C*r*r, H, W]``."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return MF.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of ``groups`` groups."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return MF.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Softmax2d(Module):
    """Softmax over the channels of ``[N, C, H, W]`` (or ``[C, H, W]``) at each location."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return input.softmax(-3)


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``[N, C, H, W]`` by ``size`` or ``scale_factor``."""

    def __init__(self, size: Any = None, scale_factor: Any = None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling with ``align_corners=True``, as PyTorch's."""

    def __init__(self, size: Any = None, scale_factor: Any = None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class CosineSimilarity(Module):
    """Cosine similarity of two inputs along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return fn.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` along the last dimension."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return fn.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Bilinear(Module):
    """``y = x1 @ weight @ x2 + bias`` with ``weight`` ``[out, in1, in2]``, initialized uniform in
    ``±1/sqrt(in1_features)`` (PyTorch's default)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features) if in1_features > 0 else 0.0
        self.weight = _uniform((out_features, in1_features, in2_features), bound, dtype)
        if bias:
            self.bias = _uniform((out_features,), bound, dtype)
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """Draw ``weight`` and ``bias`` again, as the constructor did."""
        n = self.in1_features
        redraw(self, ("weight", "bias"), 1.0 / math.sqrt(n) if n > 0 else 0.0)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return MF.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class _Shrink(Module):
    """What ``Hardshrink`` and ``Softshrink`` share (unrelated classes in PyTorch)."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """``x`` where ``|x| > lambd``, else 0."""

    def forward(self, input: Tensor) -> Tensor:
        return MF.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""

    def forward(self, input: Tensor) -> Tensor:
        return MF.softshrink(input, self.lambd)


class RReLU(Module):
    """Randomized leaky ReLU: slopes drawn from ``U(lower, upper)`` while training, their mean in
    eval mode."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return MF.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (
            ", inplace=True" if self.inplace else ""
        )


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``[N, C, D, H, W]`` with probability ``p`` while training."""

    def forward(self, input: Tensor) -> Tensor:
        return MF.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU activations normalized; the identity in eval mode."""

    def forward(self, input: Tensor) -> Tensor:
        return MF.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels; the identity in eval mode."""

    def forward(self, input: Tensor) -> Tensor:
        return MF.feature_alpha_dropout(input, self.p, self.training, self.inplace)
