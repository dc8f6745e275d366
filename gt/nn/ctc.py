"""Connectionist temporal classification: ``F.ctc_loss`` and ``nn.CTCLoss`` (PyTorch's arguments,
shapes, reductions and gradient).

The loss is the forward (alpha) recursion of Graves et al. in log space, composed from tensor ops
and vectorised over the batch and over the positions of the extended label sequence ``l'`` (the
targets with a blank before, between and after them, length ``2 S + 1``). One step per time step:

``alpha_t[s] = logsumexp(alpha_{t-1}[s], alpha_{t-1}[s-1], alpha_{t-1}[s-2] if skip[s])
+ log_probs[t, l'[s]]``

where ``skip[s]`` holds when ``l'[s]`` is a label that differs from ``l'[s-2]``. A sample stops
at its input length; its log-likelihood is the logsumexp of its last two ``alpha`` entries.
Autograd through the recursion gives the gradient (plus PyTorch's ``exp(log_probs)`` term, see
:func:`ctc_loss`). Unreachable states are ``-inf``; the inner ``logsumexp`` is written so they
pass no NaN backwards, so an impossible alignment costs ``inf`` (and, as in PyTorch, a NaN
gradient for its sample) or, with ``zero_infinity=True``, 0 with a zero gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt import shapes as S
from gt.custom_function import Function
from gt.errors import ShapeError
from gt.grad_mode import is_grad_enabled
from gt.nn.module import Module
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.ops.shaping import cat, stack
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)

_WHERE = " (while checking arguments for ctc_loss_allocate_outputs)"


def _host_lengths(input_lengths: Any, target_lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both length arguments as int64 host arrays: lengths given as tensors are read in one
    transfer (a sync point, as in PyTorch, which copies them to the CPU)."""
    given = [input_lengths, target_lengths]
    tensors = [v for v in given if isinstance(v, Tensor)]
    if len(tensors) == 2:
        flat = [v.reshape(-1).to("int64") for v in tensors]
        both = cat(flat)._host()
        n = flat[0].shape[0]
        return both[:n], both[n:]
    out = []
    for v in given:
        if isinstance(v, Tensor):
            v = v._host()
        out.append(np.asarray(v, dtype=np.int64).reshape(-1))
    return out[0], out[1]


def _check(il: np.ndarray, tl: np.ndarray, targets: Tensor, n: int, t_max: int,
           batched: bool) -> None:  # fmt: skip
    """PyTorch's checks of the lengths against the batch, the targets and ``T``."""
    if len(il) != n:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tl) != n:
        raise RuntimeError("target_lengths must be of size batch_size")
    for name, values in (("target_lengths", tl), ("input_lengths", il)):
        for v in values:
            if v < 0:
                raise RuntimeError(f"Expected {name} to have value at least 0, but got value {v}"
                                   f"{_WHERE}")  # fmt: skip
    if batched and targets.ndim == 1:
        if targets.shape[0] != int(tl.sum()):
            raise RuntimeError(
                f"Expected tensor to have size {int(tl.sum())} at dimension 0, but got size "
                f"{targets.shape[0]} for argument #2 'targets'{_WHERE}"
            )
    else:
        width = targets.shape[-1]
        for v in tl:
            if v > width:
                raise RuntimeError(
                    f"Expected tensor to have size at least {v} at dimension 1, but got size "
                    f"{width} for argument #2 'targets'{_WHERE}"
                )
    for v in il:
        if v > t_max:
            raise RuntimeError(
                f"Expected input_lengths to have value at most {t_max}, but got value {v}{_WHERE}"
            )


def _padded_targets(targets: Tensor, tl: np.ndarray, s_max: int, batched: bool) -> Tensor:
    """``[N, s_max]`` int64 targets (entries past a sample's length are arbitrary)."""
    if not batched:
        return targets.reshape(1, -1)[:, :s_max].to("int64")
    if targets.ndim == 2:
        return targets[:, :s_max].to("int64")
    # concatenated: sample n's targets start where the previous ones end
    starts = np.cumsum(tl) - tl
    idx = np.minimum(starts[:, None] + np.arange(s_max)[None, :], max(targets.shape[0] - 1, 0))
    return targets.to("int64")[targets._upload(np.ascontiguousarray(idx, dtype=np.int64))]


def _logsumexp(terms: Tensor, safe: bool) -> Tensor:
    """``logsumexp`` over dimension 0 of ``terms``. With ``safe``, where every term is ``-inf``
    the result is ``-inf`` with a zero (not NaN) gradient."""
    m = terms.detach().amax(0)
    m = where(m.isfinite(), m, 0.0)
    total = (terms - m).exp().sum(0)
    if not safe:
        return total.log() + m
    pos = total > 0
    return where(pos, where(pos, total, 1.0).log() + m, -math.inf)


class _PyTorchGradient(Function):
    """The identity on the per-sample losses whose backward also sends ``grad * exp(log_probs)``
    (where ``within``; NaN where ``impossible``) to ``log_probs``: PyTorch's extra term (see
    :func:`ctc_loss`). The term is computed in backward from the saved ``log_probs``, so it is
    differentiable too (second derivatives)."""

    @staticmethod
    def forward(ctx: Any, loss: Tensor, log_probs: Tensor, within: Tensor,
                impossible: Any) -> Tensor:  # fmt: skip
        ctx.save_for_backward(log_probs)
        ctx.within, ctx.impossible = within, impossible
        return loss.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        (lp,) = ctx.saved_tensors
        scale = where(ctx.within, lp.exp(), 0.0)
        if ctx.impossible is not None:
            scale = where(ctx.impossible, math.nan, scale)
        return grad, grad.reshape(1, -1, 1) * scale, None, None


@autocast_op("ctc_loss")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:  # fmt: skip
    """The CTC loss: ``-log p(target | input)`` summed over every alignment.

    Args:
        log_probs: ``[T, N, C]`` (or ``[T, C]``, one sample) log-probabilities, e.g. a
            ``log_softmax`` over ``C``.
        targets: ``[N, S]`` padded targets, or all targets concatenated into one 1-d tensor
            (``sum(target_lengths)`` long); class indices other than ``blank``.
        input_lengths: ``N`` lengths (at most ``T``): a tensor, list or tuple.
        target_lengths: ``N`` lengths: a tensor, list or tuple.
        blank: the blank class.
        reduction: ``"none"`` (one loss per sample), ``"sum"``, or ``"mean"``: each loss divided
            by its target length (at least 1), then averaged over the batch.
        zero_infinity: impossible alignments (infinite losses) give 0 and a zero gradient.

    Lengths given as tensors are read to the host once (a sync point, as in PyTorch, whose kernels
    copy them to the CPU): they bound the recursion and are checked with PyTorch's messages.

    The gradient is PyTorch's: its kernel returns ``exp(log_probs) - posterior`` (the gradient
    with respect to the logits under a ``log_softmax``), which differs from the exact derivative
    with respect to ``log_probs`` by ``exp(log_probs)`` on each sample's first
    ``input_length`` steps; that term is added here too (it vanishes through a ``log_softmax``,
    so the gradient of the logits is exact).
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.ndim not in (2, 3):
        raise ShapeError(f"ctc_loss: log_probs must be [T, N, C] or [T, C], got "
                         f"{list(log_probs.shape)}")  # fmt: skip
    if targets.ndim not in (1, 2):
        raise ShapeError(f"ctc_loss: targets must be [N, S] or 1-d, got {list(targets.shape)}")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    if lp.dtype not in S.FLOAT_DTYPES:
        lp = lp.to(S.DEFAULT_FLOAT)
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    il, tl = _host_lengths(input_lengths, target_lengths)
    _check(il, tl, targets, n, t_max, batched)

    s_max = int(tl.max()) if n else 0
    width = 2 * s_max + 1
    labels = _padded_targets(targets, tl, s_max, batched).clamp(0, c - 1)  # [N, S]
    blanks = labels.new_full((n, s_max), blank)
    ext = cat([labels.new_full((n, 1), blank), stack([labels, blanks], 2).reshape(n, 2 * s_max)],
              1)  # fmt: skip
    # skip[s]: l'[s] is a label different from l'[s-2] (additive: 0 allowed, -inf not)
    before = cat([ext.new_full((n, 2), blank), ext[:, :-2]], 1) if width > 2 else ext
    skip = (ext != blank) & (ext != before)
    skip_add = where(skip, 0.0, -math.inf).to(lp.dtype)
    emit = lp.gather(2, ext.unsqueeze(0).expand(t_max, n, width))  # [T, N, L]

    # alpha before the first step: all mass at position 0, so step 0 reaches positions 0 and 1
    start = np.full((n, width), -np.inf)
    start[:, 0] = 0.0
    alpha = lp._upload(start.astype(np.dtype(lp.dtype)))
    steps = int(il.max()) if n else 0
    active = lp._upload(np.arange(steps)[:, None, None] < il[None, :, None])  # [steps, N, 1]
    wall = lp._upload(np.full((n, 2), -np.inf, dtype=np.dtype(lp.dtype)))  # shifted in
    for t in range(steps):
        shifted = cat([wall, alpha], 1)
        terms = stack([alpha, shifted[:, 1:-1], shifted[:, :-2] + skip_add])
        alpha = where(active[t], _logsumexp(terms, safe=True) + emit[t], alpha)

    last = np.stack([2 * tl, np.maximum(2 * tl - 1, 0)], 1)
    ends = alpha.gather(1, lp._upload(np.ascontiguousarray(last, dtype=np.int64)))
    ends = where(lp._upload(np.stack([tl >= 0, tl > 0], 1)), ends, -math.inf)
    loss = -_logsumexp(ends.T, safe=zero_infinity)  # [N]

    if lp.requires_grad and is_grad_enabled():
        within = lp._upload(np.arange(t_max)[:, None, None] < il[None, :, None])
        impossible = None
        if not zero_infinity:  # an impossible alignment: a NaN gradient for its steps
            impossible = within & loss.detach().isinf().reshape(1, n, 1)
        loss = _PyTorchGradient.apply(loss, lp, within, impossible)
    if zero_infinity:
        loss = where(loss.isinf(), 0.0, loss)
    if reduction == "none":
        return loss if batched else loss.reshape(())
    if reduction == "sum":
        return loss.sum()
    per = loss / lp._upload(np.maximum(tl, 1).astype(np.dtype(lp.dtype)))
    return per.mean()


class CTCLoss(Module):
    """The connectionist temporal classification loss (see :func:`ctc_loss`).

    Args:
        blank: the blank class.
        reduction: ``"mean"`` (each loss over its target length, then the batch mean), ``"sum"``
            or ``"none"``.
        zero_infinity: infinite losses (impossible alignments) and their gradients become 0.
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__()
        self.blank, self.reduction, self.zero_infinity = blank, reduction, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any,
                target_lengths: Any) -> Tensor:  # fmt: skip
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)  # fmt: skip


__all__ = ["CTCLoss", "ctc_loss"]
