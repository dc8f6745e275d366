"""Fold an evaluation-mode batch norm into the convolution or linear layer before it
(PyTorch's ``torch.nn.utils.fusion``): ``bn(conv(x)) == fused(x)``, with
``W' = W * gamma / sqrt(var + eps)`` (per output channel) and
``b' = (b - mean) * gamma / sqrt(var + eps) + beta``.
"""

from __future__ import annotations

import copy
from typing import TypeVar

from gt.factories import ones_like, zeros_like
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor

__all__ = [
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
]

M = TypeVar("M", bound=Module)


def fuse_conv_bn_eval(conv: M, bn: Module, transpose: bool = False) -> M:
    """A copy of ``conv`` (``ConvNd``, or ``ConvTransposeNd`` with ``transpose=True``) that
    computes ``bn(conv(x))``; both must be in eval mode.

    Raises:
        AssertionError: either module is training, or ``bn`` keeps no running statistics.
    """
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose,
    )  # fmt: skip
    return fused


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor,
                         bn_eps: float, bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:  # fmt: skip
    """The fused convolution's weight and bias (new parameters; a missing bias or affine
    weight/bias counts as zeros/ones)."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    if conv_b is None:
        conv_b = zeros_like(bn_rm)
    if bn_w is None:
        bn_w = ones_like(bn_rm)
    if bn_b is None:
        bn_b = zeros_like(bn_rm)
    rsqrt = (bn_rv + bn_eps).rsqrt()
    tail = [1] * (len(conv_w.shape) - 2)
    shape = [1, -1, *tail] if transpose else [-1, 1, *tail]
    fused_w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(w_dtype)
    fused_b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(b_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear: M, bn: Module) -> M:
    """A copy of ``linear`` that computes ``bn(linear(x))``; both must be in eval mode.

    Raises:
        AssertionError: either module is training, the sizes differ (``bn.num_features`` must be
            ``linear.out_features`` or 1), or ``bn`` keeps no running statistics.
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor,
                           bn_b: Tensor) -> tuple[Parameter, Parameter]:  # fmt: skip
    """The fused linear layer's weight and bias (new parameters; a missing bias counts as 0)."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    if linear_b is None:
        linear_b = zeros_like(bn_rm)
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1).to(w_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(b_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
