"""More of ``gt.nn.functional``: pixel and channel shuffles, ``bilinear``, the shrink activations,
``rrelu``, 3-d and alpha dropout, and ``gumbel_softmax`` (PyTorch's names, arguments and messages).

Everything is composed from tensor ops (reshape, permute, matmul, ``where``, ``rand``), so the
gradients come from the primitives' rules; nothing here adds a registry primitive.
"""

from __future__ import annotations

from gt.factories import arange, rand
from gt.grad_graph import label, recorded_rule, zero_second_derivative
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.ops.inplace import apply_inplace
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


# ------------------------------------------------------------------ shuffles
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``[*, C*r*r, H, W]`` to ``[*, C, H*r, W*r]`` (sub-pixel convolution's rearrangement)."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            "pixel_shuffle expects input to have at least 3 dimensions, but got input with "
            f"{input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
            f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    # [.., C, r1, r2, H, W] -> [.., C, H, r1, W, r2]
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return label(x.reshape(*lead, c // (r * r), h * r, w * r), "PixelShuffleBackward0")


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``[*, C, H*r, W*r]`` to ``[*, C*r*r, H, W]`` (the inverse of :func:`pixel_shuffle`)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            "pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
            f"{input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r:
        raise RuntimeError(
            "pixel_unshuffle expects height to be divisible by downscale_factor, but "
            f"input.size(-2)={h} is not divisible by {r}"
        )
    if w % r:
        raise RuntimeError(
            "pixel_unshuffle expects width to be divisible by downscale_factor, but "
            f"input.size(-1)={w} is not divisible by {r}"
        )
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    # [.., C, H, r1, W, r2] -> [.., C, r1, r2, H, W]
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return label(x.reshape(*lead, c * r * r, h // r, w // r), "PixelUnshuffleBackward0")


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels (dimension 1) of ``groups`` groups (ShuffleNet's shuffle)."""
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")  # fmt: skip
    if input.ndim < 3:
        raise RuntimeError(
            "channel_shuffle expects input to have at least 3 dimensions, but got input with "
            f"{input.ndim} dimension(s)"
        )
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups."
        )
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


# ------------------------------------------------------------------ layers and activations
@autocast_op("bilinear")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = input1 @ weight[o] @ input2 + bias[o]`` (``weight``: ``[out, in1, in2]``)."""
    out_f, in1, in2 = weight.shape
    for k, (x, n) in enumerate(((input1, in1), (input2, in2)), 1):
        if x.shape[-1] != n:
            raise RuntimeError(
                f"bilinear(): input{k} size does not match weight size: got {x.shape[-1]} but "
                f"expected {n}"
            )
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(
            "bilinear(): input batch dimensions do not match: got "
            f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}"
        )
    lead = input1.shape[:-1]
    # One 2-d matmul: x1 [B, in1] @ W' [in1, out*in2], then a product with x2 and a sum over in2.
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    t = (input1.reshape(-1, in1) @ w).reshape(-1, out_f, in2)
    out = (t * input2.reshape(-1, 1, in2)).sum(-1).reshape(*lead, out_f)
    return out + bias if bias is not None else label(out, "ViewBackward0")


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    # (the zero where |x| <= lambd, as PyTorch's kernel: a NaN stays NaN)
    out = label(where(input.abs() <= lambd, 0.0, input), "HardshrinkBackward0")
    return recorded_rule(out, zero_second_derivative)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        name, top = (
            ("Double", "1.79769e+308") if input.dtype == "float64" else ("Float", "3.40282e+38")
        )
        raise RuntimeError(
            f"lambda must be in range [0, {top}] for input dtype {name}, but found {lambd:g}"
        )
    # (the middle as PyTorch's backward tests it: a NaN is outside, stays NaN, keeps its gradient)
    middle = (input >= -lambd) & (input <= lambd)
    out = where(middle, input * 0.0, where(input > lambd, input - lambd, input + lambd))
    return recorded_rule(label(out, "SoftshrinkBackward0"), zero_second_derivative)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:  # fmt: skip
    """Randomized leaky ReLU: negative inputs times a slope drawn from ``U(lower, upper)`` per
    element while training, times ``(lower + upper) / 2`` otherwise."""
    if inplace:
        return apply_inplace(input, "rrelu_", lambda x: rrelu(x, lower, upper, training))
    # (x > 0 as PyTorch: at 0 the gradient is the slope, as leaky_relu's)
    if not training:
        slope = (lower + upper) / 2.0
        out = where(input > 0, input, input * slope)
    else:
        a = rand(input.shape, dtype=input.dtype) * (upper - lower) + lower
        out = where(input > 0, input, input * a)
    return recorded_rule(label(out, "RreluWithNoiseBackward0"), zero_second_derivative)


# ------------------------------------------------------------------ dropout
def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels (dimension 1 of ``[N, C, D, H, W]``) with probability ``p``."""
    if inplace and training and p > 0.0:
        return apply_inplace(input, "dropout3d_", lambda x: dropout3d(x, p, training))
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (rand(input.shape[:-3] + (1, 1, 1), dtype=input.dtype) >= p).to(input.dtype)
    return input * keep * (1.0 / (1.0 - p))


# SELU's ``-alpha * scale``: the value a SELU unit saturates to, which alpha dropout drops to.
_ALPHA_PRIME = 1.7580993408473766


def _alpha_dropout(input: Tensor, p: float, training: bool, mask_shape: tuple[int, ...]) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (rand(mask_shape, dtype=input.dtype) >= p).to(input.dtype)
    # PyTorch's affine correction keeps zero mean and unit variance of SELU activations.
    a = 1.0 / ((_ALPHA_PRIME**2 * p + 1.0) * (1.0 - p)) ** 0.5
    b = (keep - 1.0) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p
    return input * (keep * a) + b


def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Dropout that keeps SELU's self-normalization (dropped units go to SELU's saturation)."""
    if inplace and training and p > 0.0:  # (the caller's tensor changes too, as PyTorch's)
        return apply_inplace(input, "alpha_dropout_", lambda x: alpha_dropout(x, p, training))
    return _alpha_dropout(input, p, training, input.shape)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Alpha dropout of whole channels (dimension 1)."""
    if inplace and training and p > 0.0:
        return apply_inplace(input, "feature_alpha_dropout_",
                             lambda x: feature_alpha_dropout(x, p, training))  # fmt: skip
    shape = input.shape[:2] + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, shape)


# ------------------------------------------------------------------ sampling
def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:  # fmt: skip
    """A sample from the Gumbel-softmax distribution over ``dim``: soft probabilities, or with
    ``hard=True`` one-hot vectors whose gradient is the soft sample's (straight-through)."""
    # -log(E) for E ~ Exp(1) is a standard Gumbel sample; 1 - U lies in (0, 1], so log is finite.
    e = -((1.0 - rand(logits.shape, dtype=logits.dtype)).log())
    gumbels = -(e.clamp(min=1e-30).log())
    y_soft = ((logits + gumbels) * (1.0 / tau)).softmax(dim)
    if not hard:
        return y_soft
    d = dim % logits.ndim
    index = y_soft.argmax(d, keepdim=True)
    classes = arange(logits.shape[d]).reshape((-1,) + (1,) * (logits.ndim - 1 - d))
    y_hard = (index == classes).to(logits.dtype)
    return y_hard - y_soft.detach() + y_soft


__all__ = [
    "alpha_dropout", "bilinear", "channel_shuffle", "dropout3d", "feature_alpha_dropout",
    "gumbel_softmax", "hardshrink", "pixel_shuffle", "pixel_unshuffle", "rrelu", "softshrink",
]  # fmt: skip
