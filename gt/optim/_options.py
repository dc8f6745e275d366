"""Helpers shared by the optimizers added after the first five: argument checks with PyTorch's
messages, the options GT accepts but cannot honour, and the step count (a Python number, or a
tensor on the worker with ``capturable=True``)."""

from __future__ import annotations

import numbers
from typing import Any

from gt import guards
from gt.factories import full, zeros, zeros_like
from gt.guards import Hyperparameters
from gt.tensor import Tensor


def require(ok: bool, message: str) -> None:
    """Raise ``ValueError(message)`` (PyTorch's wording for a bad hyperparameter) unless ``ok``."""
    if not ok:
        raise ValueError(message)


def check_lr_eps_wd(lr: float, eps: float | None, weight_decay: float) -> None:
    """The checks every optimizer makes, with PyTorch's messages."""
    require(0.0 <= lr, f"Invalid learning rate: {lr}")
    if eps is not None:
        require(0.0 <= eps, f"Invalid epsilon value: {eps}")
    require(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")


def check_betas(betas: tuple[float, float]) -> None:
    """Both betas in ``[0, 1)``, with PyTorch's messages."""
    for i, b in enumerate(betas):
        require(0.0 <= b < 1.0, f"Invalid beta parameter at index {i}: {b}")


def reject_differentiable(name: str, differentiable: bool) -> None:
    """``differentiable=True`` asks autograd to follow the step itself (for meta-learning). GT
    updates parameters in place under ``no_grad``, so it cannot: say so rather than ignore it."""
    if differentiable:
        raise NotImplementedError(
            f"{name}: differentiable=True is not supported: GT runs the update in place under "
            "no_grad, so autograd cannot follow it"
        )


def new_step(capturable: bool) -> int | Tensor:
    """A fresh step count. With ``capturable`` it is a float64 tensor on the worker, so that the
    step-dependent factors are computed there and a step under ``@gt.hot`` is the same
    instructions every call (as Adam's ``capturable``); otherwise a Python int."""
    return zeros((), dtype="float64") if capturable else 0


#: The state entries that change every step and feed the update's factors as Python numbers
#: (the step count; ASGD's ``eta`` and ``mu``; NAdam's ``mu_product``).
_PER_STEP = ("step", "eta", "mu", "mu_product")


def on_worker_when_captured(p: Tensor, state: dict[str, Any]) -> None:
    """Inside a ``@gt.hot`` call that is being recorded, move ``state``'s per-step Python numbers
    to float64 tensors on the worker, as ``capturable=True`` keeps them: the factors computed from
    them are then worker ops, the same instructions every call, and the step can be captured
    without the user asking for ``capturable``. The values are the same float64 numbers (each
    factor is computed as the Python float would be, then rounded once where it meets ``p``), so
    the updates do not change (``tests/integration/test_hot.py``)."""
    if getattr(p._conn, "_rec_instrs", None) is None:
        return
    for name in _PER_STEP:
        value = dict.get(state, name)
        if type(value) in (int, float):
            state[name] = full((), float(value), dtype="float64")


def group_lr(group: dict[str, Any], p: Tensor) -> Any:
    """``group["lr"]`` for updating ``p``: the Python number, or -- inside a ``@gt.hot`` call that
    is being recorded -- the float64 0-d tensor on the worker that holds it
    (:attr:`gt.guards.Hyperparameters.on_worker`, made here, or by the group when a rate a
    capture had baked changes). A
    scheduler's new rate is then written into that tensor and the captured step replays with
    it, where a number would have been baked into the capture. Callers compute with it as with
    the number (float64, then rounded once where it meets ``p``) so that the update is the same
    bit for bit. Only for a group whose rate has changed since it was made (a constant one stays a
    number), and float32 and float64 parameters (any other bakes the number)."""
    return _on_worker(group, "lr", dict.get(group, "lr"), p)


def group_momentum(group: dict[str, Any], p: Tensor) -> Any:
    """``group["momentum"]`` for updating ``p``, as :func:`group_lr` reads the rate (a cycled
    momentum: ``OneCycleLR``, ``CyclicLR``). Round what is computed from the worker's tensor to
    ``p``'s dtype (:func:`like`) where it meets ``p``, as the Python number would be."""
    return _on_worker(group, "momentum", dict.get(group, "momentum"), p)


def group_betas(group: dict[str, Any], p: Tensor) -> tuple[Any, Any]:
    """``group["betas"]`` for updating ``p``: beta1 as :func:`group_momentum` reads momentum (the
    schedulers that cycle momentum cycle it), beta2 the number (a new one captures again)."""
    b1, b2 = dict.get(group, "betas")
    return _on_worker(group, "betas", b1, p), b2


def near_p(value: Any, b: Any, group: dict[str, Any], p: Tensor) -> Any:
    """``value``, computed from ``b`` (a beta1 or momentum :func:`group_betas` or
    :func:`group_momentum` gave), as it meets ``p``: rounded to ``p``'s dtype when ``b`` is the
    worker's float64 tensor, as the Python number would be (``1 - b1`` for a ``lerp_``); else
    as is (a number, or what the program's own tensor gave)."""
    held = getattr(group, "on_worker", None)
    return like(value, p) if held and any(b is t for t in held.values()) else value


def _on_worker(group: dict[str, Any], key: str, value: Any, p: Tensor) -> Any:
    if getattr(p._conn, "_rec_instrs", None) is None or not isinstance(group, Hyperparameters):
        return value
    if isinstance(value, Tensor):  # (the program's own: the capture reads it where it is)
        return value
    if not isinstance(value, numbers.Real):  # (anything else is a number baked in)
        group.baked.add(key)
        return value
    held = group.on_worker.get(key)
    if p.dtype not in ("float32", "float64") or (held is None or held._conn is not p._conn) and (
        key not in group.varies or key in group.baked
    ):  # fmt: skip
        group.baked.add(key)  # (read as a number by this capture: a new value captures again)
        return value
    if held is None or held._conn is not p._conn:
        held = group.on_worker[key] = full((), float(value), dtype="float64")
    return held  # (also once the value is baked elsewhere: every call of a capture reads alike)


def decay_weights(p: Tensor, g: Tensor, group: dict[str, Any], decoupled: bool) -> Tensor:
    """Weight decay: ``p *= 1 - lr*wd`` when decoupled (AdamW's way), else ``g + wd*p``."""
    wd = group["weight_decay"]
    if not wd:
        return g
    if decoupled:
        lr = group_lr(group, p)
        decay = 1.0 - lr * wd
        if lr is not dict.get(group, "lr"):  # the rate on the worker (float64): rounded to p's
            decay = decay.to(p.dtype)  # dtype as the Python number would be
        p.mul_(decay)
        return g
    return g + p * wd


guards.make_rate = lambda value: full((), value, dtype="float64")


def advance(state: dict[str, Any]) -> int | Tensor:
    """Add one to ``state["step"]`` (in place for a tensor) and return it."""
    counting = getattr(state, "count", None)  # (a ParamState reads its step as a tensor)
    step = counting() if counting is not None else state["step"]
    if isinstance(step, Tensor):
        step.add_(1.0)
    elif counting is not None:
        step += 1
        state.counted(step)
    else:
        step += 1
        state["step"] = step
    return step


def like(value: Any, p: Tensor) -> Any:
    """A factor computed from the step, in ``p``'s dtype when it is a tensor (a Python number
    is used as is)."""
    return value.to(p.dtype) if isinstance(value, Tensor) else value


def add_ratio(p: Tensor, num: Tensor, den: Tensor, value: Any) -> None:
    """``p += value * num / den`` in place; ``value`` a Python number or a worker-side scalar."""
    if isinstance(value, Tensor):
        p.add_(num / den * value)
    else:
        p.addcdiv_(num, den, value=value)


def begin(
    p: Tensor, g: Tensor, group: dict, state: dict, buffers: tuple[str, ...], **scalars: Any
) -> tuple[Tensor, int | Tensor]:
    """What every update starts with: the sign for ``maximize``; on the first step, the state in
    PyTorch's key order (the step count, the ``scalars`` -- Python numbers, or float64 tensors on
    the worker with ``capturable`` -- and zero ``buffers`` shaped like ``p``); then one step
    more. Returns the gradient to use and the step count."""
    if group["maximize"]:
        g = -g
    if not state:
        capturable = group["capturable"]
        state["step"] = new_step(capturable)
        for name, value in scalars.items():
            state[name] = full((), float(value), dtype="float64") if capturable else value
        for name in buffers:
            state[name] = zeros_like(p)
    on_worker_when_captured(p, state)
    return g, advance(state)
