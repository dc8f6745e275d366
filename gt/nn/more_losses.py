"""More loss functions of ``gt.nn.functional``: triplet, Gaussian and Poisson negative
log-likelihood, hinge embedding, soft margin and the multi-class/multi-label margin losses
(PyTorch's names, arguments, formulas and messages).

Composed from tensor ops; class targets stay on the workers (the multi-label margin target's
``-1`` terminator is handled with masks, so nothing waits for the target's values).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gt import shapes as S
from gt.factories import arange
from gt.grad_graph import label
from gt.nn.losses import _legacy_reduction, _reduce
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.ops.random import checked_values
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6) -> Tensor:
    # F.pairwise_distance's formula (functional imports this module, so it is not imported here).
    return (x1 - x2 + eps).norm(p, -1)


@autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Tensor:  # fmt: skip
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the ``p``-norm distance (``swap``: use
    ``min(d(a, n), d(p, n))`` as the negative distance)."""
    red = _legacy_reduction(size_average, reduce, reduction)
    return _triplet(anchor, positive, negative,
                    lambda x, y: _pairwise_distance(x, y, p, eps), margin, swap, red,
                    "triplet_margin_loss")  # fmt: skip


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:  # fmt: skip
    """:func:`triplet_margin_loss` with any distance (default: the Euclidean pairwise distance)."""
    if margin <= 0:
        raise ValueError(
            f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead"
        )
    dist = distance_function if distance_function is not None else _pairwise_distance
    return _triplet(anchor, positive, negative, dist, margin, swap, reduction,
                    "triplet_margin_with_distance_loss")  # fmt: skip


def _triplet(anchor: Tensor, positive: Tensor, negative: Tensor, dist: Callable, margin: float,
             swap: bool, reduction: str, op: str) -> Tensor:  # fmt: skip
    a, p, n = anchor.ndim, positive.ndim, negative.ndim
    if not a == p == n:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of "
            f"dimensions, but got: anchor {a}D, positive {p}D, and negative {n}D inputs"
        )
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    loss = (d_pos - d_neg + margin).clamp(min=0.0)
    return _reduce(loss, reduction, op)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:  # fmt: skip
    """``0.5 * (log(var) + (input - target)^2 / var)`` (plus ``0.5 log(2 pi)`` with ``full``);
    ``var`` is clamped at ``eps`` for the value but not for the gradient, as in PyTorch."""
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.new_full(input.shape, float(var))
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:  # one variance per sample: broadcast over the last dim
            var = var.unsqueeze(-1)
        elif (
            input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1
        ):  # homoscedastic along the one dimension where var has size 1
            pass
        else:  # (a 0-d var tensor too, as in PyTorch: a plain float is the scalar spelling)
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any().item()):
        raise ValueError("var has negative entry/entries")
    var = var + (var.clamp(min=eps) - var).detach()
    d = input - target
    loss = 0.5 * (var.log() + d * d / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


@autocast_op("poisson_nll_loss")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood of ``target`` under a Poisson with rate ``exp(input)`` (or
    ``input`` with ``log_input=False``); ``full`` adds Stirling's term for targets above 1."""
    red = _legacy_reduction(size_average, reduce, reduction)
    if red not in ("none", "mean", "sum"):
        raise ValueError(red + " is not a valid value for reduction")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = target.clamp(
            min=1.0
        )  # the term is masked below; keep log() finite where it is not used
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, red, "poisson_nll_loss")


@autocast_op("hinge_embedding_loss")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Tensor:  # fmt: skip
    """``x`` where ``target`` is 1, ``max(0, margin - x)`` where it is -1."""
    red = _legacy_reduction(size_average, reduce, reduction)
    margin_part = where(target != 1, (margin - input).clamp(min=0.0), 0.0)
    self_part = where(target != -1, input, 0.0)
    return _reduce(margin_part + self_part, red, "hinge_embedding_loss")


@autocast_op("soft_margin_loss")
def soft_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:  # fmt: skip
    """``log(1 + exp(-target * input))`` (targets are 1 or -1)."""
    red = _legacy_reduction(size_average, reduce, reduction)
    target = _like_input(target, input)
    if isinstance(target, Tensor) and target.shape != input.shape:
        both = S.broadcast(input.shape, target.shape, "soft_margin_loss")
        if both != input.shape:  # (PyTorch writes the loss into a tensor of input's shape)
            raise RuntimeError(
                f"output with shape {list(input.shape)} doesn't match the broadcast shape "
                f"{list(both)}"
            )
    out = _reduce((-target * input).softplus(), red, "soft_margin_loss")
    return label(out, "SoftMarginLossBackward0")


def _like_input(target: Any, input: Tensor) -> Any:
    """A float ``target`` in ``input``'s float dtype: the losses whose result PyTorch gives in the
    input's dtype (``huber_loss``, ``soft_margin_loss``)."""
    if isinstance(target, Tensor) and input.is_floating_point() and target.is_floating_point():
        return target.to(input.dtype)
    return target


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: Any = None, reduce: Any = None,
                                reduction: str = "mean") -> Tensor:  # fmt: skip
    """Binary cross-entropy of ``sigmoid(input)`` against 0/1 targets, averaged over classes."""
    red = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * _logsigmoid(input) + (1 - target) * _logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.ndim - 1) * (1.0 / input.shape[-1])
    return _reduce(loss, red, "multilabel_soft_margin_loss")


def _logsigmoid(x: Tensor) -> Tensor:
    return -((-x).softplus())


@autocast_op("multi_margin_loss")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: Any = None, reduce: Any = None,
                      reduction: str = "mean") -> Tensor:  # fmt: skip
    """Multi-class hinge loss: ``sum_{j != y} max(0, margin - x[y] + x[j])^p / C`` per sample
    (times ``weight[y]``)."""
    red = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    if input.ndim not in (1, 2) or (input.ndim == 2 and target.ndim != 1):
        raise RuntimeError(
            "Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
            f"{list(input.shape)}"
        )
    x = input if input.ndim == 2 else input.unsqueeze(0)
    c = x.shape[1]
    y = checked_values(target.reshape(-1), "below", "target out of range", bound=c)
    is_y = y.unsqueeze(1) == arange(c)  # [N, C]
    x_y = where(is_y, x, 0.0).sum(1, keepdim=True)
    m = (margin - x_y + x).clamp(min=0.0)
    if p == 2:
        m = m * m
    if weight is not None:
        m = m * weight[y].unsqueeze(1)
    loss = where(is_y, 0.0, m).sum(1) * (1.0 / c)
    if input.ndim == 1:
        loss = loss.reshape(())
    return label(_reduce(loss, red, "multi_margin_loss"), "MultiMarginLossBackward0")


@autocast_op("multilabel_margin_loss")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: Any = None,
                           reduce: Any = None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Multi-label hinge loss: ``sum_{j in y, k not in y} max(0, 1 - (x[j] - x[k])) / C``, where
    ``y`` is each row of ``target`` up to its first ``-1``."""
    red = _legacy_reduction(size_average, reduce, reduction)
    if input.ndim not in (1, 2) or target.shape != input.shape:
        raise RuntimeError(
            f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}"
        )
    x = input if input.ndim == 2 else input.unsqueeze(0)
    t = target if target.ndim == 2 else target.unsqueeze(0)
    c = x.shape[1]
    # Entries before the first -1 are targets; the -1 and everything after it are ignored.
    valid = (t == -1).long().cumsum(1) == 0  # [N, C]
    hit = (t.unsqueeze(2) == arange(c)) & valid.unsqueeze(2)  # [N, slot, class]
    named = hit.long().sum(1)  # [N, C]: how often each class is named (PyTorch counts repeats)
    tgt = (named > 0).to(x.dtype)
    pair = (1.0 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0.0)  # [N, j, k]
    mask = named.to(x.dtype).unsqueeze(2) * (1.0 - tgt).unsqueeze(1)
    loss = (pair * mask).sum((1, 2)) * (1.0 / c)
    if input.ndim == 1:
        loss = loss.reshape(())
    return label(_reduce(loss, red, "multilabel_margin_loss"), "MultilabelMarginLossBackward0")


__all__ = [
    "gaussian_nll_loss", "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "poisson_nll_loss", "soft_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]  # fmt: skip
