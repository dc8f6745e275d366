"""Loss functions of ``gt.nn.functional`` (PyTorch's names, arguments and formulas).

Composed from tensor ops, except ``binary_cross_entropy``, a primitive (see
:mod:`gt.runtime.ops.mathfn`). Class targets live on the workers, so an out-of-range class index is
reported by the worker at the next sync point, as on a GPU in PyTorch.
"""

from __future__ import annotations

import warnings
from typing import Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.factories import arange
from gt.grad_graph import label
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.ops.base import BATCHING
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)

_REDUCTIONS = ("mean", "sum", "none")
_REAL_FLOATS = ("float32", "float64", "float16", "bfloat16")


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


# ------------------------------------------------------------------ losses
@autocast_op("mse_loss")
def _numeric(target: Any) -> Any:
    """A bool target as 0/1 in uint8 (PyTorch promotes it; GT refuses bool subtraction)."""
    return target.to("uint8") if getattr(target, "dtype", None) == "bool" else target


def _warn_size(input: Tensor, target: Any) -> None:
    """PyTorch's warning for a regression loss whose target has another shape than its input:
    the two broadcast, almost always by mistake (``(N, 1)`` against ``(N,)`` gives ``(N, N)``)."""
    shape = getattr(target, "shape", None)
    if shape is not None and tuple(shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input size "
            f"({input.size()}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            stacklevel=3,
        )


def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean") -> Tensor:  # fmt: skip
    """Mean squared error (``target`` broadcasts against ``input``, with PyTorch's warning)."""
    _warn_size(input, target)
    d = input - _numeric(target)
    out = _reduce(d * d, _legacy_reduction(size_average, reduce, reduction), "mse_loss")
    return label(out, "MseLossBackward0")


@autocast_op("l1_loss")
def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean") -> Tensor:  # fmt: skip
    """Mean absolute error."""
    _warn_size(input, target)
    red = _legacy_reduction(size_average, reduce, reduction)
    return _reduce((input - target).abs(), red, "l1_loss")


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


def _scalar(t: Tensor) -> str:
    """PyTorch's scalar type name of ``t``'s dtype (``Float``, ``Long`` ...)."""
    return S.SCALAR_NAMES.get(str.__str__(t.dtype), str(t.dtype))


def _check_target(input: Tensor, target: Tensor, op: str) -> None:
    if target.dtype not in S.INT_DTYPES:
        raise TypeError(f"{op}: expected an integer target tensor, got {target.dtype}")
    if target.dtype not in ("int64", "uint8"):  # (PyTorch's kernels take these two only)
        raise RuntimeError(
            "expected target dtype to be Long or Byte, but got "
            + S.SCALAR_NAMES.get(str.__str__(target.dtype), str(target.dtype))
        )
    expect = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if target.shape != expect:
        raise ShapeError(
            f"{op}: expected target of shape {list(expect)} for input of shape {list(input.shape)}, "
            f"got {list(target.shape)}"
        )


def _one_primitive(x: Tensor, weight: Tensor | None, ignore_index: Any, reduction: str) -> bool:
    """Whether ``nll_loss`` is the ``nll_loss`` primitive (see :mod:`gt.runtime.ops.nll`): real
    float inputs, a weight that needs no gradient (PyTorch has none for it), and not inside
    ``vmap``'s batched run (which has a rule for the ops it composes, not for this one)."""
    return (
        x.dtype in _REAL_FLOATS
        and type(ignore_index) is int
        and reduction in _REDUCTIONS
        and not BATCHING
        and (weight is None or (weight.dtype == x.dtype and not weight.requires_grad
                                and weight.shape == (x.shape[1],)))
    )  # fmt: skip


@autocast_op("nll_loss")
def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of integer class targets given log-probabilities ``[N, C]``.

    Targets equal to ``ignore_index`` contribute nothing (and are not counted by the mean).
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_target(input, target, "nll_loss")
    out_shape = target.shape
    x, t = _class_last(input, target, "nll_loss")
    if _one_primitive(x, weight, ignore_index, reduction):
        at = {"ignore_index": ignore_index, "reduction": reduction}
        loss = x._apply("nll_loss", [x, t, weight], at)
        if reduction == "none" and loss.shape != tuple(out_shape):
            return label(loss.reshape(out_shape), "NllLossBackward0")  # ([N, d1, ...] inputs)
        return loss
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
        return label(loss.sum() / w.sum(), "NllLossBackward0")
    return label(_reduce(loss.reshape(out_shape), reduction, "nll_loss"), "NllLossBackward0")


@autocast_op("cross_entropy")
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy of logits ``[N, C]`` (or ``[N, C, d1, ...]`` / ``[C]``) and targets.

    Targets are class indices (an integer tensor of shape ``[N]``) or class probabilities (a float
    tensor shaped like ``input``).
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if label_smoothing > 1.0:  # (PyTorch's check: a negative one passes, and computes)
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have at least one dimension (the classes)")
    cdim = 0 if input.ndim == 1 else 1
    if target.dtype in S.FLOAT_DTYPES:
        if target.ndim == input.ndim - 1:  # (the shape of class indices, stored as floats)
            raise RuntimeError(
                "expected target dtype to be Long or Byte, but got "
                + S.SCALAR_NAMES.get(str.__str__(target.dtype), str(target.dtype))
            )
        _same_shape(input, target, "cross_entropy")
    else:
        _check_target(input, target, "cross_entropy")
    logp = input.log_softmax(cdim)
    if target.dtype in S.FLOAT_DTYPES:
        x, t = _class_last(logp, target, "cross_entropy")
        if label_smoothing:
            t = t * (1.0 - label_smoothing) + label_smoothing / x.shape[1]
        per = -(x * (t if weight is None else t * weight)).sum(1)
        out = _reduce(
            per.reshape(target.shape[:1] + target.shape[2:] if input.ndim > 1 else ()),
            reduction,
            "cross_entropy",
        )
        return label(out, "DivBackward1" if reduction == "mean" else "NegBackward0")
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return loss
    # PyTorch's smoothing term: the (class-weighted) sum of -log p over the classes, averaged like
    # the NLL term (over the targets' weights), times label_smoothing / C.
    x, t = _class_last(logp, target, "cross_entropy")
    keep = (t != ignore_index).to(x.dtype)
    per = -((x * weight).sum(1) if weight is not None else x.sum(1)) * keep
    if reduction == "mean":
        if weight is not None:
            smooth = per.sum() / (weight[where(t != ignore_index, t, 0)] * keep).sum()
        else:
            smooth = per.sum() / keep.sum()
    else:
        smooth = _reduce(per.reshape(target.shape), reduction, "cross_entropy")
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / x.shape[1])


@autocast_op("binary_cross_entropy")
def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross entropy of probabilities (logs clamped at -100, as in PyTorch).

    One primitive with PyTorch's derivative ``(p - t) / max(p (1 - p), 1e-12)``, which stays finite
    when a sigmoid before it saturates to exactly 0 or 1.
    """
    _same_shape(input, target, "binary_cross_entropy")
    if isinstance(target, Tensor) and not target.is_floating_point():
        raise RuntimeError(
            f"Found dtype {_scalar(target)} but expected {_scalar(input)}"
        )  # (integer labels: PyTorch wants them as the input's float dtype)
    loss = input._apply("binary_cross_entropy", [input, target.to(input.dtype)])
    if weight is not None:
        loss = loss * weight
    out = _reduce(loss, _legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy")
    return label(out, "BinaryCrossEntropyBackward0")


@autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross entropy of logits, without overflow: ``(1 - t) x + softplus(-x)`` (weighted by
    ``1 + (pos_weight - 1) t``), whose derivative ``sigmoid(x) - t`` is right at 0 too."""
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    if isinstance(target, Tensor) and not target.is_floating_point():
        raise RuntimeError(
            f"result type {_scalar(input)} can't be cast to the desired output type "
            f"{_scalar(target)}"
        )  # (PyTorch's loss is computed into a tensor of the target's dtype)
    log1p_exp = (-input).softplus()  # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1.0 - target) * input + log1p_exp
    else:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * log1p_exp
    if weight is not None:
        loss = loss * weight
    red = _legacy_reduction(size_average, reduce, reduction)
    out = _reduce(loss, red, "binary_cross_entropy_with_logits")
    return label(out, "BinaryCrossEntropyWithLogitsBackward0")


@autocast_op("smooth_l1_loss")
def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
    reduction: str = "mean", beta: float = 1.0,
) -> Tensor:  # fmt: skip
    """Squared error below ``beta`` (halved, over ``beta``), absolute error above."""
    if beta == 0:  # PyTorch's l1_loss then, and its nodes
        return l1_loss(input, target, size_average, reduce, reduction)
    _warn_size(input, target)
    d = input - _numeric(target)
    a = d.abs()
    loss = where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)
    out = _reduce(loss, _legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")
    return label(out, "SmoothL1LossBackward0")


@autocast_op("huber_loss")
def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0
) -> Tensor:
    """Squared error below ``delta`` (halved), ``delta`` times the absolute error above (in the
    input's dtype, as PyTorch's)."""
    _warn_size(input, target)
    if isinstance(target, Tensor) and input.is_floating_point() and target.is_floating_point():
        target = target.to(input.dtype)
    d = input - _numeric(target)
    a = d.abs()
    loss = where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return label(_reduce(loss, reduction, "huber_loss"), "HuberLossBackward0")


@autocast_op("kl_div")
def kl_div(
    input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
    reduction: str = "mean", log_target: bool = False,
) -> Tensor:  # fmt: skip
    """KL divergence of log-probabilities ``input`` from ``target`` (probabilities, or log ones
    with ``log_target``); ``reduction="batchmean"`` divides the sum by the batch size."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # target * log(target), taken as 0 where target is 0 (xlogy: NaN for a negative one)
        safe = where(target == 0, 1.0, target)
        loss = target * safe.log() - target * input
    red = _legacy_reduction(size_average, reduce, reduction)
    if red == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    if red == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            stacklevel=2,
        )
    return _reduce(loss, red, "kl_div")


@autocast_op("margin_ranking_loss")
def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``."""
    loss = (-target * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction, "margin_ranking_loss")


@autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """``1 - cos`` for similar pairs (target 1), ``max(0, cos - margin)`` for dissimilar (-1)."""
    eps = 1e-12
    prod = (input1 * input2).sum(-1)
    mag = ((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)
    cos = prod / mag.sqrt()
    loss = where(target == 1, 1.0 - cos, (cos - margin).clamp(min=0.0))
    return _reduce(loss, reduction, "cosine_embedding_loss")


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` flags, mapped to ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"
