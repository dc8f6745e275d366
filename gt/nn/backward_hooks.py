"""Module backward hooks: ``register_full_backward_hook`` and ``register_full_backward_pre_hook``,
per module and for every module (``register_module_full_backward_hook``), as in PyTorch.

A call of a module with such hooks wraps its positional tensor inputs (before ``forward``) and its
tensor outputs (after the forward hooks) in one identity :class:`gt.autograd.Function` each,
:class:`BackwardHookFunction`, as PyTorch does. In the backward pass the outputs' identity node
runs first: it gathers ``grad_output`` (one entry per output, ``None`` for a non-tensor or an output
no gradient reached), lets the pre-hooks replace it, and keeps it. The inputs' identity node runs
once the gradients of all inputs are known: it calls the full hooks with ``(module, grad_input,
grad_output)`` (one ``grad_input`` entry per positional argument, ``None`` for a non-tensor or an
input that needs no gradient) and hands on what they return. Hence, as in PyTorch, ``forward``
receives aliases of its tensor inputs and the caller aliases of its outputs, a hook fires only
when a gradient reaches the module's outputs, and hooks registered after a call do not fire for
that call.

:data:`LIVE` holds the key of every backward hook registered now: while it is empty a module call
takes its fast path without looking at any backward hook table.
"""

from __future__ import annotations

import itertools
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt import guards
from gt.backprop import RemovableHandle
from gt.custom_function import Function
from gt.factories import zeros
from gt.grad_mode import _mode
from gt.ops.base import TensorBase
from gt.runtime.client.source_lines import _not_the_users

if TYPE_CHECKING:
    from gt.nn.module import Module

#: Keys of backward hooks, unique in the process (a handle removes by key).
_KEYS = itertools.count()
#: Keys of the backward hooks registered now, on any module or for all of them (see the module
#: docstring); an entry goes when its handle removes the hook or its module is collected.
LIVE: dict[int, None] = {}
#: Hooks of every module (``register_module_full_backward_hook`` ...), called before a module's own.
_GLOBAL_HOOKS: dict[int, tuple[Callable, bool]] = {}
_GLOBAL_PRE_HOOKS: dict[int, tuple[Callable, bool]] = {}


#: PyTorch's warning when a full backward hook fires with no module input requiring grad.
NO_INPUT_GRAD = (
    "Full backward hook is firing when gradients are computed with respect to module outputs "
    "since no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/"
    "torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more details."
)


def _warn_at_users_line(message: str) -> None:
    """``UserWarning(message)`` attributed to the program's line (its ``backward()``), where
    PyTorch's points, not to GT's autograd engine that runs the hook."""
    frame, level = sys._getframe(1), 2
    while frame is not None and _not_the_users(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


class _Handle(RemovableHandle):
    """A removable handle that also takes the hook's key out of :data:`LIVE`."""

    def __init__(self, hooks: dict, key: int, finalizer: Any = None):
        super().__init__(hooks, key)
        self._finalizer = finalizer

    def remove(self) -> None:
        """Unregister the hook."""
        super().remove()
        LIVE.pop(self._key, None)
        if self._finalizer is not None:
            self._finalizer.detach()  # (a module that adds and removes hooks each step keeps none)


def add(module: Module, table: dict, hook: Callable, prepend: bool) -> RemovableHandle:
    """Register ``hook`` in ``table``, one of ``module``'s backward hook tables."""
    if not callable(hook):
        raise TypeError(f"the hook must be callable, got {type(hook).__name__}")
    key = next(_KEYS)
    table[key] = (hook, False)  # (the entries of the forward hook tables have this form too)
    if prepend:
        for k in [k for k in table if k != key]:
            table[k] = table.pop(k)  # move the others behind the new one
    guards.bump()  # a captured step (gt.hot) that ran without this hook must be captured again
    return _Handle(table, key, _track(module, key))


def _track(module: Any, key: int) -> Any:
    """Put ``key`` in :data:`LIVE` until ``module`` is collected; the finalizer that takes it out."""
    LIVE[key] = None
    return weakref.finalize(module, LIVE.pop, key, None)


def retrack(module: Any) -> None:
    """Give the backward hooks of an unpickled or copied module keys of their own (the original's
    handles must not remove them) and put them in :data:`LIVE`."""
    for name in ("_backward_hooks", "_backward_pre_hooks"):
        new = {}
        for entry in (module.__dict__.get(name) or {}).values():
            key = next(_KEYS)
            new[key] = entry
            _track(module, key)
        module.__dict__[name] = new


def _add_global(table: dict, hook: Callable) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"the hook must be callable, got {type(hook).__name__}")
    key = next(_KEYS)
    table[key] = (hook, False)
    LIVE[key] = None
    guards.bump()
    return _Handle(table, key)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, grad_input, grad_output)`` for every module, as
    :meth:`gt.nn.Module.register_full_backward_hook` does for one (global hooks run first).

    Returns:
        A handle whose ``remove()`` unregisters the hook.
    """
    return _add_global(_GLOBAL_HOOKS, hook)


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, grad_output)`` for every module, as
    :meth:`gt.nn.Module.register_full_backward_pre_hook` does for one (global hooks run first).

    Returns:
        A handle whose ``remove()`` unregisters the hook.
    """
    return _add_global(_GLOBAL_PRE_HOOKS, hook)


class BackwardHookFunction(Function):
    """The identity, whose backward hands the gradients of its outputs to a callback (which may
    replace them) before they go on to its inputs."""

    @staticmethod
    def forward(ctx: Any, on_grad: Callable, *tensors: Any) -> tuple:
        ctx.on_grad = on_grad
        ctx.set_materialize_grads(False)  # an output no gradient reached is None, as in PyTorch
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return (None, *ctx.on_grad(grads))


def _pack(index: list[int], values: Any, n: int) -> tuple:
    """``values`` at positions ``index`` of an ``n``-tuple of ``None``."""
    out: list = [None] * n
    for i, v in zip(index, values):
        out[i] = v
    return tuple(out)


def _as_tuple(result: Any) -> tuple:
    # A lone tensor for a one-element tuple: PyTorch would take its length for the tuple's.
    return (result,) if isinstance(result, TensorBase) else tuple(result)


class BackwardHookCall:
    """One call of a module with backward hooks: the hooks as they were at the call, and what the
    outputs' backward leaves for the inputs' (PyTorch's ``BackwardHook``)."""

    __slots__ = (
        "module",
        "hooks",
        "pre_hooks",
        "n_inputs",
        "input_index",
        "inputs",
        "n_outputs",
        "output_index",
        "grad_outputs",
        "constants",
        "inputs_need_grad",
    )

    def __init__(self, module: Module, hooks: list, pre_hooks: list):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_index: list[int] | None = None
        self.inputs: list = []  # the aliases forward receives, to check that it leaves them be
        self.n_outputs = 0
        self.output_index: list[int] = []
        self.grad_outputs: tuple | None = None
        self.constants: list = []  # (position, shape, dtype) of the inputs needing no gradient
        self.inputs_need_grad = False

    def wrap_inputs(self, args: tuple) -> tuple:
        """``args`` with each tensor that requires grad replaced by its hooked alias."""
        self.n_inputs = len(args)
        if not _mode.enabled:
            return args
        index = [i for i, a in enumerate(args) if isinstance(a, TensorBase) and a.requires_grad]
        self.inputs_need_grad = bool(index)
        if not (index and self.hooks):  # (pre-hooks alone need only the outputs)
            return args
        wrapped = BackwardHookFunction.apply(self._on_grad_inputs, *[args[i] for i in index])
        self.input_index = index
        self.constants = [
            (i, a.shape, a.dtype)
            for i, a in enumerate(args)
            if isinstance(a, TensorBase) and not a.requires_grad
        ]
        self.inputs = [(t, t._version) for t in wrapped]
        new = list(args)
        for i, t in zip(index, wrapped):
            new[i] = t
        return tuple(new)

    def wrap_outputs(self, out: Any) -> Any:
        """``out`` (a tensor or a tuple) with each tensor that requires grad replaced by its hooked
        alias."""
        for t, version in self.inputs:
            if t._version != version:
                # The caller's tensor would not see the change (forward got an alias of it).
                raise RuntimeError(
                    f"{type(self.module).__name__}.forward modified one of its inputs in place "
                    "while the module has backward hooks; this is not allowed (as in PyTorch)"
                )
        self.inputs = []
        single = not isinstance(out, tuple)
        items = (out,) if single else out
        self.n_outputs = len(items)
        index = [i for i, o in enumerate(items) if isinstance(o, TensorBase) and o.requires_grad]
        if not (index and _mode.enabled):
            return out  # no gradient can reach the module's outputs: the hooks never fire
        wrapped = BackwardHookFunction.apply(self._on_grad_outputs, *[items[i] for i in index])
        self.output_index = index
        new = list(items)
        for i, t in zip(index, wrapped):
            new[i] = t
        if single:
            return new[0]
        # (a namedtuple stays one; tuple.__new__ skips a custom __new__'s processing)
        return tuple(new) if type(out) is tuple else tuple.__new__(type(out), new)

    def _on_grad_outputs(self, grads: tuple) -> list:
        grad_outputs = _pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            new = hook(self.module, grad_outputs)
            if new is None:
                continue
            new = _as_tuple(new)
            if len(new) != len(grad_outputs):
                raise RuntimeError(
                    "Backward pre hook returned an invalid number of grad_output, got "
                    f"{len(new)}, but expected {len(grad_outputs)}"
                )
            grad_outputs = new
        if self.input_index is None:
            # No input wants a gradient: the inputs' node never runs, so the hooks run here.
            if not self.inputs_need_grad:  # (not when only pre-hooks left the inputs unwrapped)
                _warn_at_users_line(NO_INPUT_GRAD)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, grad_outputs)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients."
                    )
        else:
            self.grad_outputs = grad_outputs
        return [grad_outputs[i] for i in self.output_index]

    def _on_grad_inputs(self, grads: tuple) -> list:
        assert self.input_index is not None
        grad_outputs = self.grad_outputs
        if grad_outputs is None:  # the gradient did not come through the module's outputs
            return list(grads)
        grad_inputs = _pack(self.input_index, grads, self.n_inputs)
        if self.constants:  # (PyTorch's hooks get zeros for a tensor input needing no gradient)
            filled = list(grad_inputs)
            for i, shape, dtype in self.constants:
                filled[i] = zeros(shape, dtype=dtype)
            grad_inputs = tuple(filled)
        for hook in self.hooks:
            new = hook(self.module, grad_inputs, grad_outputs)
            if new is None:
                continue
            new = _as_tuple(new)
            if len(new) != len(grad_inputs):
                raise RuntimeError(
                    "Backward hook returned an invalid number of grad_input, got "
                    f"{len(new)}, but expected {len(grad_inputs)}"
                )
            grad_inputs = new
        self.grad_outputs = None  # (frees them; a second backward gathers them again)
        return [grad_inputs[i] for i in self.input_index]


def begin(module: Module, args: tuple) -> tuple[BackwardHookCall | None, tuple]:
    """Start a call of ``module`` on ``args``: the call's hook state (``None`` when it has no
    backward hooks) and the arguments ``forward`` gets."""
    d = module.__dict__
    hooks = [h for h, _ in _GLOBAL_HOOKS.values()]
    hooks += [h for h, _ in d.get("_backward_hooks", {}).values()]
    pre = [h for h, _ in _GLOBAL_PRE_HOOKS.values()]
    pre += [h for h, _ in d.get("_backward_pre_hooks", {}).values()]
    if not (hooks or pre):
        return None, args
    call = BackwardHookCall(module, hooks, pre)
    return call, call.wrap_inputs(args)


__all__ = [
    "BackwardHookFunction",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]
