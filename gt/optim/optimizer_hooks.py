"""Optimizer hooks, as PyTorch's: before and after each ``step()`` (of one optimizer, or of every
optimizer: ``register_optimizer_step_pre_hook``), and around ``state_dict()`` and
``load_state_dict()``. Each registration returns a handle whose ``remove()`` unregisters it.

Every optimizer class's own ``step`` is wrapped once, when the class is made
(:meth:`OptimizerHooks.__init_subclass__`); a step without hooks costs one dictionary test. A
``step`` that calls its parent's (``super().step()``) runs the hooks once.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from gt.grad_hooks import RemovableHandle, new_args_kwargs

#: Hooks of every optimizer's step (``register_optimizer_step_pre_hook`` ...), by handle id.
_GLOBAL_PRE: dict[int, Callable] = {}
_GLOBAL_POST: dict[int, Callable] = {}
_ids = itertools.count()


def _register(table: dict, hook: Callable, prepend: bool = False) -> RemovableHandle:
    key = next(_ids)
    if prepend:
        items = list(table.items())
        table.clear()
        table[key] = hook
        table.update(items)
    else:
        table[key] = hook
    return RemovableHandle(table, key)


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` before every optimizer's ``step()``; it may return new
    ``(args, kwargs)``."""
    return _register(_GLOBAL_PRE, hook)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` after every optimizer's ``step()``."""
    return _register(_GLOBAL_POST, hook)


def _hooked(step: Callable) -> Callable:
    """``step`` running the optimizer's and the global step hooks around it."""

    @functools.wraps(step)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._opt_called = True  # (PyTorch's flag: a scheduler's first step looks for it)
        own = self.__dict__.get("_gt_step_hooks")
        if (own is None and not _GLOBAL_PRE and not _GLOBAL_POST) or self.__dict__.get(
            "_gt_in_step"
        ):
            return step(self, *args, **kwargs)
        pre, post = own if own is not None else ({}, {})
        for hook in (*_GLOBAL_PRE.values(), *pre.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                args, kwargs = new_args_kwargs(result, "optimizer step pre hook")
        self._gt_in_step = True
        try:
            out = step(self, *args, **kwargs)
        finally:
            self._gt_in_step = False
        for hook in (*post.values(), *_GLOBAL_POST.values()):
            hook(self, args, kwargs)
        return out

    run._gt_hooked = True  # type: ignore[attr-defined]
    return run


class OptimizerHooks:
    """The hook registrations of :class:`gt.optim.Optimizer`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_gt_hooked", False):
            cls.step = _hooked(step)

    def _gt_hook_table(self, name: str) -> dict:
        table = self.__dict__.get(name)
        if table is None:
            table = self.__dict__[name] = {}
        return table

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` before this optimizer's ``step()``; it may return
        new ``(args, kwargs)``."""
        return _register(self._gt_step_tables()[0], hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` after this optimizer's ``step()``."""
        return _register(self._gt_step_tables()[1], hook)

    def _gt_step_tables(self) -> tuple[dict, dict]:
        tables = self.__dict__.get("_gt_step_hooks")
        if tables is None:
            tables = self.__dict__["_gt_step_hooks"] = ({}, {})
        return tables

    def register_state_dict_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(optimizer)`` before ``state_dict()`` builds the dict."""
        return _register(self._gt_hook_table("_gt_sd_pre"), hook, prepend)

    def register_state_dict_post_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` after it; a dict it returns is the result."""
        return _register(self._gt_hook_table("_gt_sd_post"), hook, prepend)

    def register_load_state_dict_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` before ``load_state_dict()``; a dict it returns is
        loaded instead."""
        return _register(self._gt_hook_table("_gt_load_pre"), hook, prepend)

    def register_load_state_dict_post_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(optimizer)`` after ``load_state_dict()``."""
        return _register(self._gt_hook_table("_gt_load_post"), hook, prepend)

    def _gt_run(self, name: str, *args: Any) -> Any:
        """Run the hooks in table ``name`` with ``(self, *args)``; the last non-None result."""
        result = None
        for hook in list(self.__dict__.get(name, {}).values()):
            out = hook(self, *args)
            if out is not None:
                result = out
                if args:
                    args = (out, *args[1:])
        return result


__all__ = [
    "OptimizerHooks",
    "register_optimizer_step_post_hook",
    "register_optimizer_step_pre_hook",
]
