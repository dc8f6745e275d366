"""``gt.nn.utils``: gradient clipping; ``gt.nn.utils.rnn`` packs variable-length sequences."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.autograd import no_grad
from gt.factories import zeros
from gt.nn.utils import rnn
from gt.ops.shaping import stack
from gt.tensor import Tensor


def _grads(parameters: Any) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(
    parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0
) -> Tensor:
    """Scale gradients in place so their joint norm is at most ``max_norm``; returns that norm.

    Runs without a sync point: the norm and the scale stay on the worker.
    """
    grads = _grads(parameters)
    with no_grad():
        if not grads:
            return zeros(())
        norms = stack([g.norm(norm_type).to("float32") for g in grads])
        total = norms.norm(norm_type)
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]``, in place."""
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


__all__ = ["clip_grad_norm_", "clip_grad_value_", "rnn"]
