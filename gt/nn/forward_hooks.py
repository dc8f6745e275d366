"""Module forward hooks: the hooks of every module (``register_module_forward_pre_hook``,
``register_module_forward_hook``) and the call of a module that has hooks, as PyTorch makes it.

:func:`call` runs the forward pre-hooks (every module's first, then the module's own; a result
replaces the arguments), ``forward``, then the forward hooks (every module's first; a result
replaces the output). A hook registered with ``always_call=True`` also runs when the call raises
(with the output ``None`` if ``forward`` did not return); an error it raises then is a warning
and the original exception propagates.

:data:`GLOBAL` holds the key of every hook of every module registered now: while it is empty (and
a module has no hooks of its own) a module call takes its fast path.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt import guards
from gt.grad_hooks import RemovableHandle, new_args_kwargs
from gt.nn import backward_hooks
from gt.nn.backward_hooks import LIVE as _LIVE_BACKWARD_HOOKS

if TYPE_CHECKING:
    from gt.nn.module import Module

#: Keys of the hooks of every module registered now (see the module docstring).
GLOBAL: dict[int, None] = {}
#: ``key -> hook`` of every module's forward pre-hooks.
_PRE: dict[int, Callable] = {}
#: ``key -> (hook, with_kwargs, always_call)`` of every module's forward hooks.
_POST: dict[int, tuple[Callable, bool, bool]] = {}
_KEYS = itertools.count()


class Handle(RemovableHandle):
    """A removable handle whose hook is in several tables (its entry goes from each)."""

    def __init__(self, hooks: dict, key: Any, *others: dict):
        super().__init__(hooks, key)
        self._others = others

    def remove(self) -> None:
        """Unregister the hook."""
        super().remove()
        for table in self._others:
            table.pop(self._key, None)


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, args)`` before the ``forward`` of every module (before the module's
    own pre-hooks); a result that is not ``None`` replaces the positional arguments.

    Returns:
        A handle whose ``remove()`` unregisters the hook.
    """
    key = _new_key(hook)
    _PRE[key] = hook
    return Handle(_PRE, key, GLOBAL)


def register_module_forward_hook(
    hook: Callable, *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """Call ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
    ``with_kwargs``) after the ``forward`` of every module, before the module's own forward
    hooks; a result that is not ``None`` replaces the output. ``always_call``: also when the call
    raises.

    Returns:
        A handle whose ``remove()`` unregisters the hook.
    """
    key = _new_key(hook)
    _POST[key] = (hook, with_kwargs, always_call)
    return Handle(_POST, key, GLOBAL)


def _new_key(hook: Callable) -> int:
    if not callable(hook):
        raise TypeError(f"the hook must be callable, got {type(hook).__name__}")
    key = next(_KEYS)
    GLOBAL[key] = None
    guards.bump()  # a captured step (gt.hot) that ran without this hook must be captured again
    return key


def call(module: Module, args: tuple, kwargs: dict) -> Any:
    """Call ``module`` with its hooks, every module's and those of the backward pass."""
    result = None
    always = module.__dict__.get("_forward_hooks_always_called") or {}
    called: set[int] = set()
    try:
        pre = [(h, False) for h in _PRE.values()] if _PRE else []
        kw = module._forward_pre_hooks_with_kwargs
        pre += [(h, k in kw) for k, h in module._forward_pre_hooks.items()]
        for hook, with_kwargs in pre:
            if with_kwargs:
                new = hook(module, args, kwargs)
                if new is not None:
                    args, kwargs = new_args_kwargs(new, "forward pre-hook")
            else:
                new = hook(module, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        # Backward hooks wrap the inputs after the forward pre-hooks, the outputs after the
        # forward hooks (as in PyTorch), so they see what forward got and what the caller gets.
        bw = None
        if _LIVE_BACKWARD_HOOKS:
            bw, args = backward_hooks.begin(module, args)
        result = module.forward(*args, **kwargs)
        post = list(_POST.items())
        kw = module._forward_hooks_with_kwargs
        post += [(k, (h, k in kw, k in always)) for k, h in module._forward_hooks.items()]
        for key, (hook, with_kwargs, always_call) in post:
            if always_call:
                called.add(key)
            new = hook(module, args, kwargs, result) if with_kwargs else hook(module, args, result)
            if new is not None:
                result = new
        if bw is not None:
            result = bw.wrap_outputs(result)
        return result
    except Exception:
        pending = [(k, h, False, "global module") for k, (h, _, a) in _POST.items() if a]
        kw = module._forward_hooks_with_kwargs
        pending += [(k, h, k in kw, "module") for k, h in module._forward_hooks.items()
                    if k in always]  # fmt: skip
        for key, hook, with_kwargs, kind in pending:
            if key in called:
                continue
            try:
                new = (hook(module, args, kwargs, result) if with_kwargs
                       else hook(module, args, result))  # fmt: skip
                if new is not None:
                    result = new
            except Exception as e:  # noqa: BLE001 - PyTorch warns and raises the first error
                warnings.warn(
                    f"{kind} forward hook with ``always_call=True`` raised an exception that was "
                    f"silenced as another error was raised in forward: {e}",
                    stacklevel=2,
                )
        raise
