"""``gt.nn.utils``: gradient clipping, parameters as one vector; ``gt.nn.utils.rnn`` packs
variable-length sequences."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.autograd import no_grad
from gt.factories import zeros
from gt.nn.utils import rnn
from gt.ops.shaping import cat, stack
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


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Every parameter flattened and joined into one 1-d tensor (differentiable)."""
    parts = [p.reshape(-1) for p in parameters]
    if not parts:
        raise RuntimeError("parameters_to_vector: no parameters")
    return cat(parts)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-d ``vec`` into the parameters (not recorded)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.shape[0] != total:
        raise RuntimeError(
            f"vector_to_parameters: a vector of {total} elements was expected, got shape "
            f"{list(vec.shape)}"
        )
    start = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[start : start + n].reshape(p.shape))
            start += n


__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "rnn",
    "vector_to_parameters",
]
