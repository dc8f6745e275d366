"""``gt.nn.functional``: activations, layers and losses as functions (PyTorch's names).

Activations, ``linear``, ``dropout``, ``embedding``, ``pad`` and friends are here; losses are in
:mod:`gt.nn.losses`, convolutions in :mod:`gt.nn.convolution`, pooling in :mod:`gt.nn.pooling`,
normalizations in :mod:`gt.nn.normalization`, attention (``scaled_dot_product_attention``,
``multi_head_attention_forward``) in :mod:`gt.nn.attention_fn`, fractional max pooling in
:mod:`gt.nn.fractional_pooling`, ``linear_cross_entropy`` in :mod:`gt.nn.linear_cross_entropy`, shuffles,
shrinks, ``bilinear``, alpha dropout and ``gumbel_softmax`` in :mod:`gt.nn.more_functional`, the
triplet/NLL/margin losses in :mod:`gt.nn.more_losses`; this module re-exports them. Everything is composed from tensor ops (and the registry's primitives), so
gradients come from the primitives' rules. Where PyTorch's derivative at a kink differs from what a
naive composition gives, the composition is chosen to match it (``hardtanh`` and ``relu6`` pass no
gradient at their edges, ``leaky_relu`` and ``elu`` take the negative side's slope at 0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.factories import arange, rand
from gt.grad_graph import label, recorded_rule, zero_link, zero_second_derivative
from gt.grad_mode import is_grad_enabled
from gt.nn.activation_rules import clamped_hardtanh, hardswish_node, leaky_relu_rule
from gt.nn.attention_fn import _canonical_mask as _canonical_mask  # (PyTorch's private helpers,
from gt.nn.attention_fn import _none_or_dtype as _none_or_dtype  # which its layers' copies call)
from gt.nn.attention_fn import multi_head_attention_forward, scaled_dot_product_attention
from gt.nn.convolution import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    fold,
    pad,
    unfold,
)
from gt.nn.ctc import ctc_loss
from gt.nn.embedding_bag import embedding, embedding_bag
from gt.nn.fractional_pooling import (
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from gt.nn.grid_sampling import affine_grid, grid_sample
from gt.nn.linear_cross_entropy import linear_cross_entropy
from gt.nn.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from gt.nn.lp_pooling import lp_pool1d, lp_pool2d, lp_pool3d
from gt.nn.more_functional import (
    alpha_dropout,
    bilinear,
    channel_shuffle,
    dropout3d,
    feature_alpha_dropout,
    gumbel_softmax,
    hardshrink,
    pixel_shuffle,
    pixel_unshuffle,
    rrelu,
    softshrink,
)
from gt.nn.more_losses import (
    gaussian_nll_loss,
    hinge_embedding_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from gt.nn.normalization import (
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    rms_norm,
)
from gt.nn.pdist import pdist
from gt.nn.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_pool3d,
    max_pool3d_with_indices,
)
from gt.nn.resize import interpolate, upsample, upsample_bilinear, upsample_nearest
from gt.nn.softmax_fn import log_softmax, softmax, softmin
from gt.nn.unpooling import max_unpool1d, max_unpool2d, max_unpool3d
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.ops.inplace import apply_inplace
from gt.ops.shaping import stack
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


# ------------------------------------------------------------------ activations
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)`` (in place with ``inplace=True``)."""
    return input.relu_() if inplace else input.relu()


def relu_(input: Tensor) -> Tensor:
    """``relu`` in place."""
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``; no gradient at 0 and 6 (as in PyTorch)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``; the gradient is 1 strictly inside, else 0."""
    if inplace:
        return apply_inplace(input, "hardtanh_", lambda x: hardtanh(x, min_val, max_val))
    return label(clamped_hardtanh(input, min_val, max_val), "HardtanhBackward0")


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``negative_slope * x``."""
    if inplace:
        return apply_inplace(input, "leaky_relu_", lambda x: leaky_relu(x, negative_slope))
    if negative_slope <= 0 or input.dtype not in S.INEXACT_DTYPES or input.is_complex():
        out = where(input > 0, input, input * negative_slope)
        return recorded_rule(label(out, "LeakyReluBackward0"), zero_second_derivative)
    # max(x, x * slope) (min above a slope of 1) is ``x > 0 ? x : x * slope`` bit for bit, NaN,
    # infinities and signed zeros included (not for a slope <= 0: inf * 0 is NaN, and the zeros
    # of a negative slope swap their signs): two vectorised passes, where a where() on a random
    # mask took ten times as long
    scaled = input * negative_slope
    out = input.maximum(scaled) if negative_slope <= 1 else input.minimum(scaled)
    if out._node is not None:
        out._node.rule = leaky_relu_rule(negative_slope)
    return label(out, "LeakyReluBackward0")


@autocast_op("elu")
def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    if inplace:
        return apply_inplace(input, "elu_", lambda x: elu(x, alpha))
    # (``<= 0`` picks the curve, as PyTorch's kernel: a NaN takes the line, and its gradient)
    out = where(input <= 0, input.clamp(max=0.0).expm1() * alpha, input)
    return _elu_recorded(label(out, "EluBackward0"), input, alpha, None)


@autocast_op("celu")
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""
    if inplace:
        return apply_inplace(input, "celu_", lambda x: celu(x, alpha))
    out = where(input <= 0, (input.clamp(max=0.0) * (1.0 / alpha)).expm1() * alpha, input)
    out = _elu_recorded(label(out, "CeluBackward0"), input, alpha, 1.0 / alpha)
    node = out._node
    if node is not None and node.parents[2] is not None:  # (the input: the where's third)
        node.rule = _celu_rule(alpha)
    return out


def _celu_rule(alpha: float) -> Any:
    """PyTorch's derivative of ``celu`` (``elu_backward(grad, alpha, 1, 1.0 / alpha.toFloat(),
    false, self)``), op for op, so the gradient has its bits: ``g`` for ``x > 0``, else
    ``g * inv * alpha * exp(x * inv)`` with ``inv`` one over ``alpha`` rounded to float32 first
    (PyTorch's constant, in float64 too); a NaN input passes ``g`` on, as PyTorch's. Differentiated again, only ``x < 0`` counts, as in
    PyTorch's ``elu_double_backward``. (The one difference left: PyTorch's vectorised ``exp`` is
    SLEEF's, which is 1 ulp off the correctly rounded one NumPy and CuPy give at some points.)"""
    inv = 1.0 / float(np.float32(alpha))

    def rule(n: Any, g: Tensor) -> tuple:
        x = n.saved[-1]
        inner = where(x < 0, x, 0.0)  # (the derivative of x < 0 only)
        return None, None, where(x <= 0, ((g * inv) * alpha) * (inner * inv).exp(), g)

    return rule


def _elu_recorded(out: Tensor, input: Tensor, alpha: float, inv: float | None) -> Tensor:
    """Give the ``where`` node of an ELU (or CELU: ``x / alpha`` inside) PyTorch's derivative for
    recorded backward passes: the same first derivative (``alpha`` at 0, ``x <= 0`` counts), but
    its own derivative counts ``x < 0`` only (PyTorch's ``elu_double_backward``), where the
    composition's would give ``alpha`` at 0. The rule reads the input, which the composition's
    ``clamp`` keeps anyway."""
    node = out._node
    if node is None or node.parents[2] is None:  # (the input: the where's third)
        return out

    def rule(n: Any, g: Tensor) -> tuple:
        curve, x = n.saved[0], n.saved[-1]  # (curve: x <= 0, the where's condition)
        inner = where(x < 0, x, 0.0)  # (the value of x.clamp(max=0), the derivative of x < 0)
        e = (inner if inv is None else inner * inv).expm1() + 1.0
        gb = (where(curve, g, 0.0) * alpha) * e  # (the composition's rules, op for op)
        if inv is not None:
            gb = gb * inv
        return None, None, where(curve, 0.0, g) + where(x <= 0, gb, 0.0)

    return recorded_rule(out, rule, (input,))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@autocast_op("selu")
def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Scaled ELU with the self-normalizing constants."""
    if inplace:
        return apply_inplace(input, "selu_", selu)
    return label(elu(input, _SELU_ALPHA) * _SELU_SCALE, "EluBackward0")


@autocast_op("prelu")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` for ``x > 0``, else ``weight * x`` (one weight, or one per channel, dimension 1)."""
    w = weight
    if weight.numel() > 1 and input.ndim >= 2:
        w = weight.reshape((1, -1) + (1,) * (input.ndim - 2))
    elif input.ndim == 0 and weight.numel() == 1:  # (a 0-d input stays 0-d)
        w = weight.reshape(())
    out = where(input > 0, input, input * w)
    return recorded_rule(label(out, "PreluKernelBackward0"), zero_second_derivative)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, without overflow."""
    return label(-((-input).softplus()), "LogSigmoidBackward0")


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    if inplace:
        return apply_inplace(input, "mish_", mish)
    return label(input * input.softplus().tanh(), "MishBackward0")


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``. As PyTorch's, its gradient is differentiable once more only in name:
    a second derivative raises (PyTorch has no formula for ``hardsigmoid_backward``'s)."""
    if inplace:
        return apply_inplace(input, "hardsigmoid_", hardsigmoid)
    out = label(
        clamped_hardtanh(input + 3.0, 0.0, 6.0, False) / 6.0, "HardsigmoidBackward0"
    )  # (PyTorch's /)
    out = recorded_rule(out, _hardsigmoid_rule)
    if out._node is not None:
        out._node.rule = _hardsigmoid_rule
    return out


#: PyTorch's ``hardsigmoid_backward`` multiplies by ``1.0f / 6.0f``, a float32 constant, in every
#: dtype (float64 too).
_ONE_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))


def _hardsigmoid_rule(n: Any, g: Tensor) -> tuple:
    """``g / 6``'s node's derivative: PyTorch's ``g * (1.0f / 6.0f)`` (the ``hardtanh`` before it
    passes it on inside ``(-3, 3)``); recorded, a second derivative raises as PyTorch's."""
    if is_grad_enabled():
        g = zero_link(n, g, "aten::hardsigmoid_backward")
    return (g * _ONE_SIXTH_F32, None)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6`` (its second derivative is ``1/3`` strictly between -3 and 3)."""
    if inplace:
        return apply_inplace(input, "hardswish_", hardswish)
    if input.dtype in ("float32", "float64"):
        return hardswish_node(input)
    return label(
        input * (clamped_hardtanh(input + 3.0, 0.0, 6.0) * (1.0 / 6.0)), "HardswishBackward0"
    )


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    if inplace:
        return apply_inplace(input, "threshold_", lambda x: _threshold(x, threshold, value))
    return _threshold(input, threshold, value)


def _threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    # (``<=`` picks value, as PyTorch's kernel: a NaN stays NaN)
    out = where(input <= threshold, value, input)
    if out.dtype != input.dtype:  # (an integer input stays integer, as PyTorch's kernel keeps it)
        out = out.to(input.dtype)
    out = label(out, "ThresholdBackward0")
    return recorded_rule(out, zero_second_derivative)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` for the two halves ``a``, ``b`` of ``dim``."""
    a, b = input.chunk(2, dim)
    return label(a * b.sigmoid(), "GluBackward0")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit (exact, or ``approximate="tanh"``)."""
    return input.gelu(approximate)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid."""
    return input.sigmoid()


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return apply_inplace(input, "silu_", Tensor.silu) if inplace else input.silu()


@autocast_op("softplus")
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta`` (``x`` above ``threshold``); derivative ``sigmoid``."""
    return input.softplus(beta, threshold)


@autocast_op("normalize")
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``x / max(||x||_p, eps)`` over ``dim``."""
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


@autocast_op("cosine_similarity")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (norms clamped at ``eps``),
    after broadcasting them together (an ``(N, D)`` batch against a ``(D,)`` query)."""
    if x1.shape != x2.shape:
        shape = S.broadcast(tuple(x1.shape), tuple(x2.shape), "cosine_similarity")
        x1, x2 = x1.expand(shape), x2.expand(shape)
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last dimension."""
    return label((x1 - x2 + eps).norm(p, -1, keepdim), "NormBackward1")


# ------------------------------------------------------------------ layers
@autocast_op("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` (``weight`` is ``[out_features, in_features]``)."""
    if getattr(input, "is_nested", False):  # a gt.nested tensor: component by component
        return input._linear(weight, bias)
    if input.shape[-1:] != weight.shape[-1:]:
        raise ShapeError(
            f"linear: input of shape {list(input.shape)} does not match weight of shape "
            f"{list(weight.shape)} (in_features {weight.shape[-1]})"
        )
    if input.dtype in ("float16", "bfloat16") and weight.dtype == input.dtype:
        # PyTorch's addmm: the product and the bias added in float32, rounded to half once
        wide = input.float() @ weight.float().T
        out = (wide + bias.float() if bias is not None else wide).to(input.dtype)
    else:
        out = input @ weight.T
        if bias is not None:
            out = out + bias
    node = out._node
    if node is not None:  # PyTorch's names for what its one fused op leaves (print(model(x)))
        node.label = _LINEAR_NODE[min(input.ndim, 3) - 1][bias is not None]
    return out


#: PyTorch's ``grad_fn`` names of ``linear``'s result, by input rank (1, 2, more), without and
#: with a bias: ``addmm`` for a batch of vectors, views of it otherwise.
_LINEAR_NODE = (
    ("SqueezeBackward4", "ViewBackward0"),
    ("MmBackward0", "AddmmBackward0"),
    ("UnsafeViewBackward0", "ViewBackward0"),
)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (when training)."""
    if inplace and training and p > 0.0:
        return apply_inplace(input, "dropout_", lambda x: _dropout(x, p, training, x.shape))
    return _dropout(input, p, training, input.shape)


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels (dimension 1 of ``[N, C, L]``) with probability ``p``."""
    return in_place_if(inplace and training and p > 0.0, input, "dropout1d_",
                       lambda x: _dropout(x, p, training, x.shape[:-1] + (1,)))  # fmt: skip


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels (dimension 1 of ``[N, C, H, W]``) with probability ``p``."""
    return in_place_if(inplace and training and p > 0.0, input, "dropout2d_",
                       lambda x: _dropout(x, p, training, x.shape[:-2] + (1, 1)))  # fmt: skip


def in_place_if(inplace: bool, input: Tensor, name: str, compute: Any) -> Tensor:
    """``compute(input)``, written into ``input`` when ``inplace`` (the ``inplace=True`` of a
    dropout while training: the caller's tensor changes too, as PyTorch's)."""
    return apply_inplace(input, name, compute) if inplace else compute(input)


def _dropout(input: Tensor, p: float, training: bool, mask_shape: tuple[int, ...]) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (rand(mask_shape, dtype=input.dtype) >= p).to(input.dtype)
    return input * keep * (1.0 / (1.0 - p))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``int64`` one-hot encoding along a new last dimension."""
    if tensor.dtype not in S.INT_DTYPES:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes < 0:  # (a sync point, as in PyTorch: both bounds in one round trip)
        lo, hi = stack([tensor.min(), tensor.max()]).tolist() if tensor.numel() else (0, -1)
        if lo < 0:
            raise RuntimeError("Class values must be non-negative.")
        num_classes = int(hi) + 1
    else:
        # PyTorch's CPU checks the labels on the host; here the check rides on the worker's
        # bounds-checked gather (a negative label is sent out of range too), so a bad label is an
        # IndexError at the next sync point instead of a silent all-zero row, and no op waits.
        inside = where(tensor < 0, num_classes, tensor)
        tensor = tensor._arange(num_classes)[inside.reshape(-1)].reshape(tensor.shape)
    return (tensor.unsqueeze(-1) == arange(num_classes)).long()


def kaiming_bound(fan_in: int) -> float:
    """PyTorch's default bound for Linear weights and biases: ``1/sqrt(fan_in)``."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``elu`` in place."""
    return elu(input, alpha, True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``celu`` in place."""
    return celu(input, alpha, True)


def selu_(input: Tensor) -> Tensor:
    """``selu`` in place."""
    return selu(input, True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``hardtanh`` in place."""
    return hardtanh(input, min_val, max_val, True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``leaky_relu`` in place."""
    return leaky_relu(input, negative_slope, True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """``threshold`` in place."""
    return apply_inplace(input, "threshold_", lambda x: _threshold(x, threshold, value))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:  # fmt: skip
    """``rrelu`` in place."""
    return rrelu(input, lower, upper, training, True)


__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits", "celu", "celu_",
    "conv1d", "elu_", "hardtanh_", "leaky_relu_", "rrelu_", "selu_", "threshold_",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "cosine_embedding_loss", "cosine_similarity", "cross_entropy", "dropout",
    "dropout1d", "dropout2d", "elu", "embedding", "fold", "gelu", "glu", "group_norm",
    "hardsigmoid", "hardswish", "hardtanh", "huber_loss", "instance_norm", "interpolate",
    "kaiming_bound", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "linear",
    "local_response_norm", "log_softmax", "logsigmoid", "margin_ranking_loss", "max_pool1d",
    "max_pool2d", "max_pool3d", "mish", "mse_loss", "nll_loss", "normalize", "one_hot", "pad",
    "pairwise_distance", "prelu", "relu", "relu6", "relu_", "rms_norm",
    "scaled_dot_product_attention", "selu", "sigmoid", "silu", "smooth_l1_loss", "softmax",
    "softmin", "softplus", "softsign", "tanh", "tanhshrink", "threshold", "unfold", "upsample",
    "upsample_bilinear", "upsample_nearest",
    # gt.nn.more_functional and gt.nn.more_losses
    "alpha_dropout", "bilinear", "channel_shuffle", "dropout3d", "feature_alpha_dropout",
    "gaussian_nll_loss", "gumbel_softmax", "hardshrink", "hinge_embedding_loss",
    "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss", "rrelu", "soft_margin_loss",
    "softshrink", "triplet_margin_loss", "triplet_margin_with_distance_loss",
    # gt.nn.pooling and gt.nn.unpooling
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "max_unpool1d", "max_unpool2d", "max_unpool3d",
    # gt.nn.grid_sampling
    "affine_grid", "grid_sample",
    # gt.nn.ctc, gt.nn.embedding_bag, gt.nn.lp_pooling and gt.nn.pdist
    "ctc_loss", "embedding_bag", "lp_pool1d", "lp_pool2d", "lp_pool3d", "pdist",
    # gt.nn.fractional_pooling, gt.nn.attention_fn and gt.nn.linear_cross_entropy
    "fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices", "multi_head_attention_forward", "linear_cross_entropy",
]  # fmt: skip
