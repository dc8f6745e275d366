"""The base class of the learning-rate schedulers (PyTorch's ``LRScheduler``): construction sets
``group["initial_lr"]`` and takes the first step; ``step()`` advances ``last_epoch`` and sets the
optimizer's rates from ``get_lr()``."""

from __future__ import annotations

import warnings
from typing import Any

from gt import guards
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class LRScheduler:
    """Base class: ``base_lrs``, ``last_epoch``, ``step()``, ``get_last_lr()``, state dicts."""

    _is_initial = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copied(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                        "an optimizer"
                    )
        self.base_lrs = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        self._get_lr_called_within_step = False  # (PyTorch's key, so state dicts match)
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The rates for the current ``last_epoch`` (computed from the current ones)."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rates the last ``step()`` set."""
        guards.read_rates(self.optimizer.param_groups)  # (inside a recorded call: numbers now)
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``) and set the optimizer's rates."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch "
                "1.1.0 and later, you should call them in the opposite order: `optimizer.step()` "
                "before `lr_scheduler.step()`.  Failure to do this will result in PyTorch "
                "skipping the first value of the learning rate schedule. See more details at "
                "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                UserWarning,
                stacklevel=2,
            )
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        # (strict: a group added after the scheduler was made has no rate of a per-group list;
        # PyTorch's zip raises the same ValueError)
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            set_group_value(group, "lr", lr)
        self._last_lr = self._lrs()

    def _lrs(self) -> list[float]:
        return group_values(self.optimizer, "lr")

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.__dict__.update(state_dict)


def _per_group(value: Any, groups: list) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"expected {len(groups)} values, got {len(value)}")
        return list(value)
    return [value] * len(groups)


def set_group_value(group: dict, key: str, value: Any) -> None:
    """Set a param group's ``lr`` (or another value): a tensor there is filled in place, as
    PyTorch's schedulers do (a program holding it sees the new rate), anything else replaced."""
    old = group[key]
    if isinstance(old, Tensor):
        old[...] = value  # (an indexed write keeps the tensor: a captured step reads it there)
    else:
        group[key] = value


def group_values(optimizer: Optimizer, key: str) -> list:
    """Each param group's ``key``, tensors copied (``base_lrs`` and ``get_last_lr()`` are not
    the optimizer's own tensors)."""
    return [_copied(group[key]) for group in optimizer.param_groups]


def _copied(value: Any) -> Any:
    return value.clone() if isinstance(value, Tensor) else value
