"""What ``nn.Module`` checks and calls when a module registers a parameter, a buffer or a
submodule: PyTorch's name rules, its messages, and the registration hooks of every module
(``register_module_*_registration_hook``, which accelerate and others install)."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from gt.backprop import RemovableHandle
from gt.tensor import Tensor

#: Keys of registered registration hooks, unique in the process (a handle removes by key).
_KEYS = itertools.count()

#: Every hook table a module has (PyTorch's names).
_HOOK_TABLES = (
    "_backward_pre_hooks", "_backward_hooks", "_forward_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)  # fmt: skip
#: ``register_module_*_registration_hook``'s hooks, by key: ``hook(module, name, value)``.
_PARAMETER_REGISTRATION_HOOKS: dict = OrderedDict()
_BUFFER_REGISTRATION_HOOKS: dict = OrderedDict()
_MODULE_REGISTRATION_HOOKS: dict = OrderedDict()
#: PyTorch's names of those tables (``torch.nn.modules.module._global_*``).
_global_parameter_registration_hooks = _PARAMETER_REGISTRATION_HOOKS
_global_buffer_registration_hooks = _BUFFER_REGISTRATION_HOOKS
_global_module_registration_hooks = _MODULE_REGISTRATION_HOOKS


def _registration_hook(table: dict, hook: Callable) -> RemovableHandle:
    key = next(_KEYS)
    table[key] = hook
    return RemovableHandle(table, key)


def register_module_parameter_registration_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, name, param)`` whenever any module registers a parameter; a result
    that is not ``None`` is registered instead. Returns the handle that removes it."""
    return _registration_hook(_PARAMETER_REGISTRATION_HOOKS, hook)


def register_module_buffer_registration_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, name, buffer)`` whenever any module registers a buffer; a result
    that is not ``None`` is registered instead. Returns the handle that removes it."""
    return _registration_hook(_BUFFER_REGISTRATION_HOOKS, hook)


def register_module_module_registration_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, name, submodule)`` whenever any module registers a submodule; a
    result that is not ``None`` is registered instead. Returns the handle that removes it."""
    return _registration_hook(_MODULE_REGISTRATION_HOOKS, hook)


def _registered(table: dict, module: Any, name: str, value: Any) -> Any:
    """``value`` after the registration hooks in ``table`` (one returning ``None`` keeps it)."""
    for hook in list(table.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


def _typename(obj: Any) -> str:
    if isinstance(obj, Tensor):
        return obj.type()
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _check_name(name: Any, kind: str, show: bool = False) -> None:
    """PyTorch's checks of a name to register (a string, not empty, with no dot)."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."' + (f", got: {name}" if show else ""))
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
