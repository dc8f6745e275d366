"""``gt.optim.swa_utils``: PyTorch's stochastic weight averaging (SWA) and exponential moving
averages (EMA) of a model's weights.

:class:`AveragedModel` keeps a copy of a model and averages the model's parameters (and, with
``use_buffers``, its buffers) into it at every :meth:`~AveragedModel.update_parameters`; its
``state_dict`` is ``module.*`` plus the ``n_averaged`` counter, as in PyTorch. :class:`SWALR`
anneals each group's rate to its ``swa_lr``; :func:`update_bn` recomputes the batch-norm running
statistics with one pass over a loader.

The averages use PyTorch's formulas: the default (equal weights) is ``avg + (p - avg) / (n + 1)``
(PyTorch's formula off CUDA); the ``multi_avg_fn`` helpers are in-place linear interpolations
(``lerp``) with PyTorch's two-branch formula. ``update_parameters`` reads ``n_averaged`` (one sync
point per call).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from gt.autograd import no_grad
from gt.factories import tensor
from gt.nn.module import Module
from gt.nn.norm_layers import _BatchNorm
from gt.optim.optimizer import Optimizer
from gt.optim.scheduler_base import LRScheduler
from gt.tensor import Tensor

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]

_FLOATING = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def _is_float(t: Tensor) -> bool:
    return t.dtype in _FLOATING


def _lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """PyTorch's ``lerp`` for a scalar weight: ``start + w * (end - start)`` when ``|w| < 0.5``,
    else ``end - (end - start) * (1 - w)`` (the weight taken in the tensors' precision)."""
    if start.dtype == "float32":
        w = np.float32(weight)
        one_minus = float(np.float32(1.0) - w)
        w = float(w)
    else:
        w, one_minus = float(weight), 1.0 - float(weight)
    diff = end - start
    if abs(w) < 0.5:
        return start + diff * w
    return end - diff * one_minus


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An in-place EMA over lists of tensors: ``ema = lerp(ema, p, 1 - decay)`` (for integer
    tensors ``ema * decay + p * (1 - decay)``, truncated back).

    Raises:
        ValueError: ``decay`` is outside ``[0, 1]``.
    """
    _check_decay(decay)

    def ema_update(ema_param_list: Sequence[Tensor], current_param_list: Sequence[Tensor],
                   _: Any) -> None:  # fmt: skip
        with no_grad():
            floating = _is_float(ema_param_list[0])
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                if floating:
                    p_ema.copy_(_lerp(p_ema, p_model, 1 - decay))
                else:
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """An in-place equal-weight average over lists of tensors: ``avg = lerp(avg, p, 1 / (n + 1))``
    (for integer tensors ``avg + (p - avg) / (n + 1)``, truncated back)."""

    def swa_update(averaged_param_list: Sequence[Tensor], current_param_list: Sequence[Tensor],
                   num_averaged: Tensor | int) -> None:  # fmt: skip
        n = int(num_averaged.item()) if isinstance(num_averaged, Tensor) else num_averaged
        with no_grad():
            floating = _is_float(averaged_param_list[0])
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                if floating:
                    p_avg.copy_(_lerp(p_avg, p_model, 1 / (n + 1)))
                else:
                    p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """``(ema, p, n) -> decay * ema + (1 - decay) * p``.

    Raises:
        ValueError: ``decay`` is outside ``[0, 1]``.
    """
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """``(avg, p, n) -> avg + (p - avg) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor,
                   num_averaged: Tensor | int) -> Tensor:  # fmt: skip
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are running averages (SWA, or EMA) of ``model``'s.

    Args:
        model: the model to average (deep-copied; the copy is ``self.module``).
        device: accepted for PyTorch's signature (placement is the cluster's business).
        avg_fn: ``(averaged, current, n_averaged) -> new averaged`` per tensor.
        multi_avg_fn: ``(averaged_list, current_list, n_averaged)`` updating the first list in
            place (tensors grouped by dtype). With neither, an equal-weight average.
        use_buffers: average the buffers too (else they are copied from ``model``).

    Raises:
        AssertionError: both ``avg_fn`` and ``multi_avg_fn`` are given.
    """

    def __init__(self, model: Module, device: Any = None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:  # fmt: skip
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype="int64"))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The averaged copy's forward."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current parameters (and buffers, with ``use_buffers``) in; the
        first call copies them. Without ``use_buffers`` the buffers are copied. A sync point
        (reads ``n_averaged``)."""
        if self.use_buffers:
            mine = [*self.module.parameters(), *self.module.buffers()]
            theirs = [*model.parameters(), *model.buffers()]
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
        pairs = list(zip(mine, theirs))
        n = int(self.n_averaged.item())
        with no_grad():
            if n == 0:
                for p_avg, p_model in pairs:
                    p_avg.data.copy_(p_model.detach())
            elif self.avg_fn is not None:
                for p_avg, p_model in pairs:
                    p_avg.data.copy_(self.avg_fn(p_avg.data, p_model.detach(), self.n_averaged))
            elif self.multi_avg_fn is not None:
                groups: dict[str, tuple[list[Tensor], list[Tensor]]] = {}
                for p_avg, p_model in pairs:
                    a, b = groups.setdefault(p_avg.dtype, ([], []))
                    a.append(p_avg.data)
                    b.append(p_model.detach())
                for a, b in groups.values():
                    self.multi_avg_fn(a, b, self.n_averaged)
            else:
                avg = get_swa_avg_fn()
                for p_avg, p_model in pairs:
                    p_avg.data.copy_(avg(p_avg.data, p_model.detach(), self.n_averaged))
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b_swa.data.copy_(b_model.detach())
            self.n_averaged.data.add_(1)


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute every batch norm's running statistics with one pass over ``loader`` (the
    statistics are reset and averaged cumulatively; ``momentum`` and the mode are restored).

    Args:
        loader: batches: tensors, or lists/tuples whose first item is the input.
        model: the model (its forward is called on each input in training mode).
        device: if given, each input is moved with ``.to(device)``.
    """
    momenta: dict[Module, Any] = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's rate to its ``swa_lr`` over ``anneal_epochs`` epochs, then hold it.

    Args:
        optimizer: the wrapped optimizer (each group gets ``group["swa_lr"]``).
        swa_lr: the final rate, for every group or one per group.
        anneal_epochs: epochs of the annealing phase (a non-negative int).
        anneal_strategy: ``"cos"`` or ``"linear"``.
        last_epoch: the index of the last epoch (``-1`` to start).

    Raises:
        ValueError: a bad ``anneal_strategy``, ``anneal_epochs`` or number of ``swa_lr`` values.
    """

    def __init__(self, optimizer: Optimizer, swa_lr: float | Sequence[float],
                 anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1) -> None:  # fmt: skip
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(
                    f"swa_lr must have the same length as optimizer.param_groups. swa_lr has "
                    f"{len(swa_lr)} values, param_groups has {len(groups)}."
                )
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * len(groups)
        for lr, group in zip(swa_lrs, groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer and the annealing function."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
