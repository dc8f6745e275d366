"""Gradient clipping with PyTorch's names: ``clip_grad_norm_`` (= ``get_total_norm`` of the
gradients, then ``clip_grads_with_norm_``), ``clip_grad_value_``.

Nothing here is a sync point unless ``error_if_nonfinite=True`` asks for the norm's value: the
norms and the scale stay on the workers.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable
from typing import Any

from gt.autograd import no_grad
from gt.factories import tensor
from gt.ops.shaping import stack
from gt.tensor import Tensor

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
]


def _tensors(tensors: Any) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:  # fmt: skip
    """The ``norm_type``-norm of the norms of ``tensors`` (say, the gradients): their joint norm,
    as if they were one vector, outside autograd (as PyTorch's). ``foreach`` is accepted (GT
    batches anyway).

    Raises:
        RuntimeError: with ``error_if_nonfinite``, the norm is ``nan`` or ``inf`` (this reads it:
            a sync point).
    """
    ts = _tensors(tensors)
    norm_type = float(norm_type)
    if not ts:
        return tensor(0.0)
    with no_grad():
        return _total_norm(ts, norm_type, error_if_nonfinite)


def _total_norm(ts: list, norm_type: float, error_if_nonfinite: bool) -> Tensor:
    norms = [t.norm(norm_type) for t in ts]
    dtypes = {n.dtype for n in norms}
    if len(dtypes) > 1:  # stack in the widest dtype, as PyTorch's promotion does
        widest = "float64" if "float64" in dtypes else "float32"
        norms = [n.to(widest) for n in norms]
    total = stack(norms).norm(norm_type)
    if error_if_nonfinite and not bool(total.isfinite().item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    return total


def clip_grads_with_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                          total_norm: Tensor, foreach: bool | None = None) -> None:  # fmt: skip
    """Scale the gradients of ``parameters`` in place by ``min(1, max_norm / (total_norm +
    1e-6))``, ``total_norm`` being computed beforehand (say by :func:`get_total_norm`)."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        scale = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            if g.dtype in ("float16", "bfloat16"):  # (PyTorch's kernel multiplies in float32)
                g.copy_(g.float().mul_(scale))
            else:
                g.mul_(scale.to(g.dtype))


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:  # fmt: skip
    """Scale gradients in place so their joint norm is at most ``max_norm``; returns that norm
    (before clipping).

    Raises:
        RuntimeError: with ``error_if_nonfinite``, the norm is ``nan`` or ``inf``.
    """
    is_generator = isinstance(parameters, types.GeneratorType)
    params = _tensors(parameters)
    if is_generator and not params:
        warnings.warn(
            "`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2
        )
    grads = [p.grad for p in params if p.grad is not None]
    with no_grad():
        total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
        clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                   norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:  # fmt: skip
    """Deprecated spelling of :func:`clip_grad_norm_` (warns ``FutureWarning``)."""
    warnings.warn(
        "`gt.nn.utils.clip_grad_norm` is now deprecated in favor of `gt.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:  # fmt: skip
    """Clamp every gradient element to ``[-clip_value, clip_value]``, in place."""
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(-float(clip_value), float(clip_value))
