"""Normalizations as functions: ``layer_norm``, ``batch_norm``, ``group_norm``, ``instance_norm``,
``rms_norm``.

Composed from reductions and elementwise ops with PyTorch's formulas: batch statistics use the
biased variance for normalizing and the unbiased one for the running estimate, which is updated in
place (without autograd) when training. ``layer_norm`` and ``group_norm`` normalize with one
``normalize`` instruction (and one ``normalize_backward`` for the gradient: see
:mod:`gt.runtime.ops.normalization`) instead of a dozen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt import shapes as S
from gt.autograd import no_grad
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.ops.autocast import autocast_op
from gt.ops.fused import one_instruction_each_way
from gt.ops.layout import keep_channels_last
from gt.ops.reduce import centered
from gt.runtime.ops.normalization import normalize_grad
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def normalized(x: Tensor, axis: int, eps: float, shift: bool = False) -> Tensor:
    """``(x - mean) / sqrt(var + eps)`` along ``axis`` (biased variance) of a float32 or float64
    tensor, as one ``normalize`` instruction; with ``shift``, the mean of
    :func:`~gt.ops.reduce.centered` (a constant row's deviations exactly 0). Its gradient is one
    ``normalize_backward`` instruction, or differentiable ops when the backward pass is recorded.
    """
    attrs = {"axis": axis % x.ndim, "eps": float(eps)}
    if shift:
        attrs["shift"] = True
    return one_instruction_each_way(x, "normalize", attrs, "normalize_backward", normalize_grad)


@autocast_op("layer_norm")
def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dimensions, then scale and shift (a half
    input in float32, rounded once at the end, as PyTorch's kernel)."""
    if input.dtype in ("float16", "bfloat16"):
        wide = [t.float() if t is not None else None for t in (weight, bias)]
        out = layer_norm(input.float(), normalized_shape, *wide, eps).to(input.dtype)
        return label(out, "NativeLayerNormBackward0")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if input.shape[input.ndim - k :] != shape or input.ndim < k:
        raise ShapeError(
            f"layer_norm: input of shape {list(input.shape)} does not end with normalized_shape {list(shape)}"
        )
    dims = tuple(range(input.ndim - k, input.ndim))
    n = S.prod(shape)
    if n and input.ndim and input.dtype in ("float32", "float64"):
        # one instruction each way (normalize, normalize_backward) where a dozen ran
        flat = input if k == 1 else input.reshape(input.shape[: input.ndim - k] + (n,))
        out = normalized(flat, -1, eps)
        out = out if k == 1 else out.reshape(input.shape)
    else:
        mu = input.mean(dims, keepdims=True)
        d = input - mu
        var = (d * d).mean(dims, keepdims=True)
        out = d * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return label(out, "NativeLayerNormBackward0")


def _channel_shape(x: Tensor) -> tuple[int, ...]:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel (dimension 1) by batch statistics (training, or no running
    statistics) or by the running ones; update the running ones in place when training (a half
    input in float32, rounded once at the end, as PyTorch's kernel)."""
    if input.dtype in ("float16", "bfloat16"):
        wide = [t.float() if t is not None else None for t in (weight, bias)]
        out = batch_norm(input.float(), running_mean, running_var, *wide, training, momentum, eps)
        return label(out.to(input.dtype), "NativeBatchNormBackward0")
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected at least 2-d input, got shape {list(input.shape)}")
    _per_channel(input, running_mean=running_mean, running_var=running_var, weight=weight,
                 bias=bias)  # fmt: skip
    dims = (0,) + tuple(range(2, input.ndim))
    cs = _channel_shape(input)
    if input.numel() == 0:  # (an empty batch: nothing to normalize, the running stats kept)
        out = input * 1.0 if weight is None else input * weight.reshape(cs)
        out = out if bias is None else out + bias.reshape(cs)  # (zero gradients reach both)
        return label(out, "NativeBatchNormBackward0")
    if training or running_mean is None or running_var is None:
        n = input.numel() // input.shape[1]
        if training and n <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {list(input.shape)}"
            )
        mean = input.mean(dims, keepdim=True)
        d = input - mean
        var = (d * d).mean(dims, keepdim=True)
        if training and running_mean is not None and running_var is not None:
            with no_grad():
                m = momentum
                running_mean.mul_(1.0 - m).add_(mean.reshape(-1).to(running_mean.dtype) * m)
                unbiased = var.reshape(-1) * (n / (n - 1))
                running_var.mul_(1.0 - m).add_(unbiased.to(running_var.dtype) * m)
        out = d * (var + eps).rsqrt()
    else:
        # PyTorch's evaluation kernel: one scale and one shift per channel, then two passes,
        # x * alpha + beta (rounded as it rounds), where normalizing, scaling and shifting the
        # input took four
        alpha = (running_var + eps).rsqrt()
        if weight is not None:
            alpha = alpha * weight
        shift = running_mean * alpha
        beta = 0.0 - shift if bias is None else bias - shift
        out = input * alpha.reshape(cs) + beta.reshape(cs)
        return label(keep_channels_last(out, input), "NativeBatchNormBackward0")
    if weight is not None:
        out = out * weight.reshape(cs)
    if bias is not None:
        out = out + bias.reshape(cs)
    return label(keep_channels_last(out, input), "NativeBatchNormBackward0")


def _per_channel(input: Tensor, **tensors: Tensor | None) -> None:
    """PyTorch's check that each per-channel tensor of a batch norm has one element per channel
    (a layer built for another channel count failed in an internal ``add_`` or ``reshape``)."""
    c = input.shape[1]
    for name, t in tensors.items():
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each sample's channels over their spatial dimensions. With running statistics:
    while ``use_input_stats``, each sample's own statistics normalize and ``running_mean`` and
    ``running_var`` (unbiased) move towards their batch averages by ``momentum``, in place; else
    the running statistics normalize (as PyTorch's ``track_running_stats=True`` in eval mode).
    A half input is normalized in float32 and rounded once (float32 parameters keep its dtype)."""
    if input.dtype in ("float16", "bfloat16"):
        wide = [t.float() if t is not None else None for t in (weight, bias)]
        out = instance_norm(input.float(), running_mean, running_var, *wide, use_input_stats,
                            momentum, eps)  # fmt: skip
        return label(out.to(input.dtype), "ViewBackward0")
    if weight is not None and input.ndim > 1 and weight.numel() != input.shape[1]:
        raise ValueError(  # (PyTorch's InstanceNorm module's own check)
            f"expected input's size at dim=1 to match num_features ({weight.numel()}), but got: "
            f"{input.shape[1]}."
        )
    dims = tuple(range(2, input.ndim))
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {input.shape}"
        )
    cs = _channel_shape(input)
    if use_input_stats or running_mean is None or running_var is None:
        mean = input.mean(dims, keepdim=True)
        d = input - mean
        var = (d * d).mean(dims, keepdim=True)
        out = d * (var + eps).rsqrt()
        if running_mean is not None and running_var is not None:
            n, c = input.shape[0], input.shape[1]
            count = input.numel() // max(n * c, 1)
            with no_grad():
                batch_mean = mean.reshape(n, c).mean(0)
                unbiased = var.reshape(n, c).mean(0) * (count / max(count - 1, 1))
                running_mean.mul_(1.0 - momentum).add_(batch_mean.to(running_mean.dtype) * momentum)
                running_var.mul_(1.0 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    else:
        out = (input - running_mean.reshape(cs)) * (running_var.reshape(cs) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(cs)
    if bias is not None:
        out = out + bias.reshape(cs)
    return label(out, "ViewBackward0")  # (PyTorch's: a batch norm of the reshaped input)


@autocast_op("group_norm")
def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each group of ``C / num_groups`` channels of each sample (a half input in
    float32, rounded once at the end, as PyTorch's kernel)."""
    if input.dtype in ("float16", "bfloat16"):
        wide = [t.float() if t is not None else None for t in (weight, bias)]
        out = group_norm(input.float(), num_groups, *wide, eps).to(input.dtype)
        return label(out, "NativeGroupNormBackward0")
    n, c = input.shape[:2]
    if c % num_groups:
        raise ShapeError(f"group_norm: {c} channels cannot be split into {num_groups} groups")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in "
                f"input, but got {name} of shape {list(t.shape)} and input of shape "
                f"{list(input.shape)}"
            )
    x = input.reshape(n, num_groups, input.numel() // max(n * num_groups, 1))
    if x.shape[2] and input.dtype in ("float32", "float64"):
        out = normalized(x, 2, eps, shift=True).reshape(input.shape)
    else:
        d = centered(x, (2,))
        out = (d * ((d * d).mean(-1, keepdim=True) + eps).rsqrt()).reshape(input.shape)
    cs = _channel_shape(input)
    if weight is not None:
        out = out * weight.reshape(cs)
    if bias is not None:
        out = out + bias.reshape(cs)
    return label(out, "NativeGroupNormBackward0")


@autocast_op("rms_norm")
def rms_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape`` dimensions
    (``eps`` defaults to the dtype's machine epsilon, as in PyTorch)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise ShapeError(
            f"rms_norm: input of shape {list(input.shape)} does not end with {list(shape)}"
        )
    if eps is None:
        eps = float(np.finfo(np.dtype(input.dtype)).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    # (in float32 for a half input, and in the input's dtype in the end, as PyTorch's composite:
    # a float32 weight on a half input keeps it half)
    x = input.float() if input.dtype in ("float16", "bfloat16") else input
    out = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    out = out * weight if weight is not None else out
    return out if out.dtype == input.dtype else out.to(input.dtype)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:  # fmt: skip
    """Normalize by the sum of squares over ``size`` neighbouring channels."""
    sq = input * input
    pad_front, pad_back = size // 2, (size - 1) // 2
    zeros_front = sq.new_zeros((sq.shape[0], pad_front) + tuple(sq.shape[2:]))
    zeros_back = sq.new_zeros((sq.shape[0], pad_back) + tuple(sq.shape[2:]))
    padded = sq._apply("concat", [zeros_front, sq, zeros_back], {"axis": 1}) if size > 1 else sq
    total = padded.narrow(1, 0, input.shape[1])
    for i in range(1, size):
        total = total + padded.narrow(1, i, input.shape[1])
    return input / (total * (alpha / size) + k) ** beta


__all__: list[Any] = [
    "batch_norm",
    "group_norm",
    "instance_norm",
    "local_response_norm",
    "rms_norm",
]
