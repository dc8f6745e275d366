"""``gt.nn.functional``: activations, layers and losses as functions (PyTorch's names).

Everything here is composed from tensor ops, so gradients come from the primitives' rules.
Target values (class indices) live on the workers, so an out-of-range class index is reported by
the worker at the next sync point, as on a GPU in PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.factories import arange, rand
from gt.ops.arith import where
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, not {reduction!r}")


def _same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if input.shape != target.shape:
        raise ShapeError(
            f"{op}: using a target size ({list(target.shape)}) that is different to the input size "
            f"({list(input.shape)}) is not supported"
        )


# ------------------------------------------------------------------ activations
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``."""
    return input.relu()


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
    return input.silu()


def softplus(input: Tensor, beta: float = 1.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``."""
    return input.softplus(beta)


def softmax(input: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """Softmax over ``dim``."""
    return (input if dtype is None else input.to(dtype)).softmax(dim)


def log_softmax(input: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """Log-softmax over ``dim``."""
    return (input if dtype is None else input.to(dtype)).log_softmax(dim)


# ------------------------------------------------------------------ layers
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` (``weight`` is ``[out_features, in_features]``)."""
    if input.shape[-1:] != weight.shape[-1:]:
        raise ShapeError(
            f"linear: input of shape {list(input.shape)} does not match weight of shape "
            f"{list(weight.shape)} (in_features {weight.shape[-1]})"
        )
    out = input @ weight.T
    return out + bias if bias is not None else out


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (when training)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (rand(input.shape, dtype=input.dtype) >= p).to(input.dtype)
    return input * keep * (1.0 / (1.0 - p))


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dimensions, then scale and shift."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if input.shape[input.ndim - k :] != shape or input.ndim < k:
        raise ShapeError(
            f"layer_norm: input of shape {list(input.shape)} does not end with normalized_shape {list(shape)}"
        )
    dims = tuple(range(input.ndim - k, input.ndim))
    mu = input.mean(dims, keepdims=True)
    d = input - mu
    var = (d * d).mean(dims, keepdims=True)
    out = d * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def embedding(input: Tensor, weight: Tensor) -> Tensor:
    """Rows of ``weight`` picked by the integer tensor ``input``."""
    if input.dtype not in S.INT_DTYPES:
        raise TypeError(f"embedding: expected an integer index tensor, got {input.dtype}")
    return weight[input]


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``int64`` one-hot encoding along a new last dimension."""
    if tensor.dtype not in S.INT_DTYPES:
        raise TypeError(f"one_hot: expected an integer tensor, got {tensor.dtype}")
    if num_classes < 0:
        num_classes = int(tensor.max().item()) + 1
    return (tensor.unsqueeze(-1) == arange(num_classes)).long()


# ------------------------------------------------------------------ losses
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error (``target`` broadcasts against ``input``)."""
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error."""
    return _reduce((input - target).abs(), reduction, "l1_loss")


def _class_last(input: Tensor, target: Tensor, op: str) -> tuple[Tensor, Tensor]:
    """Bring ``[N, C, d1, ...]`` inputs to ``[N*d1*..., C]`` and targets to ``[N*d1*...]``."""
    if input.ndim == 1:
        return input.reshape(1, -1), target.reshape(
            1
        ) if target.dtype in S.INT_DTYPES else target.reshape(1, -1)
    if input.ndim == 2:
        return input, target
    perm = [0, *range(2, input.ndim), 1]
    x = input.permute(perm).reshape(-1, input.shape[1])
    if target.dtype in S.INT_DTYPES:
        return x, target.reshape(-1)
    return x, target.permute(perm).reshape(-1, input.shape[1])


def _check_target(input: Tensor, target: Tensor, op: str) -> None:
    if target.dtype not in S.INT_DTYPES:
        raise TypeError(f"{op}: expected an integer target tensor, got {target.dtype}")
    expect = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if target.shape != expect:
        raise ShapeError(
            f"{op}: expected target of shape {list(expect)} for input of shape {list(input.shape)}, "
            f"got {list(target.shape)}"
        )


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of integer class targets given log-probabilities ``[N, C]``.

    Targets equal to ``ignore_index`` contribute nothing (and are not counted by the mean).
    """
    _check_target(input, target, "nll_loss")
    out_shape = target.shape
    x, t = _class_last(input, target, "nll_loss")
    keep = t != ignore_index
    safe = where(keep, t, 0)
    picked = x[arange(x.shape[0]), safe]
    w = keep.to(x.dtype)
    if weight is not None:
        if weight.shape != (x.shape[1],):
            raise ShapeError(
                f"nll_loss: weight of shape {list(weight.shape)} should have one value per class ({x.shape[1]})"
            )
        w = w * weight[safe]
    loss = -(picked * w)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss.reshape(out_shape), reduction, "nll_loss")


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy of logits ``[N, C]`` (or ``[N, C, d1, ...]`` / ``[C]``) and targets.

    Targets are class indices (an integer tensor of shape ``[N]``) or class probabilities (a float
    tensor shaped like ``input``).
    """
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have at least one dimension (the classes)")
    cdim = 0 if input.ndim == 1 else 1
    if target.dtype in S.FLOAT_DTYPES:
        _same_shape(input, target, "cross_entropy")
    else:
        _check_target(input, target, "cross_entropy")
    logp = input.log_softmax(cdim)
    if target.dtype in S.FLOAT_DTYPES:
        x, t = _class_last(logp, target, "cross_entropy")
        if label_smoothing:
            t = t * (1.0 - label_smoothing) + label_smoothing / x.shape[1]
        per = -(x * (t if weight is None else t * weight)).sum(1)
        return _reduce(
            per.reshape(target.shape[:1] + target.shape[2:] if input.ndim > 1 else ()),
            reduction,
            "cross_entropy",
        )
    loss = nll_loss(logp, target, weight, ignore_index, reduction)
    if not label_smoothing:
        return loss
    x, t = _class_last(logp, target, "cross_entropy")
    keep = (t != ignore_index).to(x.dtype)
    smooth = -(x.mean(1) * keep)
    if reduction == "mean":
        smooth = smooth.sum() / keep.sum()
    else:
        smooth = _reduce(smooth.reshape(target.shape), reduction, "cross_entropy")
    return loss * (1.0 - label_smoothing) + smooth * label_smoothing


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """Binary cross entropy of probabilities (logs are clamped at -100, as in PyTorch)."""
    _same_shape(input, target, "binary_cross_entropy")
    loss = -(
        target * input.log().clamp(min=-100.0)
        + (1.0 - target) * (1.0 - input).log().clamp(min=-100.0)
    )
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross entropy of logits, computed without overflow."""
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    log1p_exp = (-input.abs()).exp().log1p() + (-input).relu()  # log(1 + exp(-x)), stably
    if pos_weight is None:
        loss = (1.0 - target) * input + log1p_exp
    else:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * log1p_exp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def kaiming_bound(fan_in: int) -> float:
    """PyTorch's default bound for Linear weights and biases: ``1/sqrt(fan_in)``."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
