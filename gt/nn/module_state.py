"""``nn.Module``'s state dict (a mixin of :class:`gt.nn.Module`): ``state_dict`` and
``load_state_dict`` with PyTorch's hooks, versions and extra state.

As in PyTorch, ``state_dict`` walks the modules: each runs its state-dict pre-hooks, saves its own
parameters, persistent buffers and extra state (``_save_to_state_dict``), then its children's,
then its post-hooks (``_register_state_dict_hook``, ``register_state_dict_post_hook``). The dict
it returns carries ``_metadata``: ``{module prefix: {"version": module._version}}``.

``load_state_dict`` copies the dict (with its ``_metadata``) and walks the modules the same way:
each module's ``_load_from_state_dict`` gets the part of the dict under its prefix, runs its
load pre-hooks (which may rename keys: a child sees what its parent left), copies its own tensors
in place and records missing and unexpected keys; after its children, its load post-hooks may
edit those lists. Errors are reported together at the end (the tensors loaded so far stay
loaded, as in PyTorch). Subclasses can override ``_load_from_state_dict`` to upgrade old
checkpoints by ``local_metadata.get("version")``, as BatchNorm does.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gt import guards
from gt.autograd import no_grad
from gt.grad_hooks import RemovableHandle
from gt.ops.typeinfo import Size
from gt.tensor import Tensor

#: The key suffix of a module's ``get_extra_state()`` in a state dict.
EXTRA_STATE_KEY_SUFFIX = "_extra_state"
#: Keys of state-dict hooks, unique in the process (a handle removes by key).
_KEYS = itertools.count()


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What :meth:`ModuleState.load_state_dict` returns: the missing and unexpected key names
    (printed ``<All keys matched successfully>`` when both are empty, and under PyTorch's class
    name otherwise)."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys


class _ModuleHook:
    """A load pre-hook registered with ``with_module``: called with the module first."""

    def __init__(self, hook: Callable, module: Any):
        self.hook, self.module = hook, module

    def __call__(self, *args: Any) -> Any:
        return self.hook(self.module, *args)


def _add(table: dict, hook: Any) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"the hook must be callable, got {type(hook).__name__}")
    key = next(_KEYS)
    table[key] = hook
    return RemovableHandle(table, key)


def hook_table(module: Any, name: str) -> dict:
    """``module``'s hook table ``name`` (made on first use, so modules unpickled from older
    versions have one too)."""
    table = module.__dict__.get(name)
    if table is None:
        table = module.__dict__[name] = {}
    return table


class ModuleState:
    """``state_dict``, ``load_state_dict``, their hooks and a module's extra state."""

    #: The version stored in ``state_dict()._metadata``; bump it when the layout of a module's
    #: state changes, and read it in ``_load_from_state_dict`` to load older checkpoints.
    _version: int = 1
    #: The class of parameters (``gt.nn.Parameter``: :class:`gt.nn.Module` sets it).
    _parameter_class: type = Tensor

    # ------------------------------------------------------------------ hooks
    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, prefix, keep_vars)`` before this module's ``state_dict`` entries
        are made."""
        return _add(hook_table(self, "_state_dict_pre_hooks"), hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata)`` after this module's (and its
        children's) entries are made; it edits ``state_dict`` in place and returns ``None``."""
        hook._from_public_api = True
        return _add(hook_table(self, "_state_dict_hooks"), hook)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's older post-hook: like :meth:`register_state_dict_post_hook`, but a dict it
        returns replaces the state dict (when this module is the one ``state_dict`` was called
        on)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        return _add(hook_table(self, "_state_dict_hooks"), hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before this module loads its part of a state dict (which
        the hook may edit: rename keys, convert values)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(
        self, hook: Callable, with_module: bool = False
    ) -> RemovableHandle:
        """As :meth:`register_load_state_dict_pre_hook`, the module not passed unless
        ``with_module``."""
        return _add(
            hook_table(self, "_load_state_dict_pre_hooks"),
            _ModuleHook(hook, self) if with_module else hook,
        )

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, incompatible_keys)`` after this module and its children loaded; it
        may edit ``incompatible_keys.missing_keys``/``unexpected_keys`` in place (which decides
        whether a strict load fails)."""
        return _add(hook_table(self, "_load_state_dict_post_hooks"), hook)

    # ------------------------------------------------------------------ extra state
    def get_extra_state(self) -> Any:
        """State beyond tensors to keep in ``state_dict`` under ``"<prefix>_extra_state"``;
        override it together with :meth:`set_extra_state`."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called."
        )

    def set_extra_state(self, state: Any) -> None:
        """Restore what :meth:`get_extra_state` returned."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called."
        )

    def _has_extra_state(self, method: str) -> bool:
        return getattr(type(self), method) is not getattr(ModuleState, method)

    # ------------------------------------------------------------------ saving
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """Put this module's own parameters, persistent buffers and extra state (not its
        children's) in ``destination``."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state("get_extra_state"):
            destination[prefix + EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> Any:
        """Parameters, persistent buffers and extra state keyed by dotted name, in registration
        order, with ``_metadata`` (each module's ``_version``).

        As in PyTorch the values are the tensors detached (without autograd history) and share
        the tensors' values: they follow later in-place updates of the model (``.clone()`` them,
        or ``copy.deepcopy`` the dict, for a snapshot), not a value put in their place
        (``p.data = ...``, ``model.double()``). ``keep_vars=True`` gives the tensors
        themselves. No sync point.
        """
        if args:  # PyTorch's deprecated positional form: destination, prefix, keep_vars
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 and prefix == "" else prefix
            keep_vars = args[2] if len(args) > 2 and keep_vars is False else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in list(hook_table(self, "_state_dict_pre_hooks").values()):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():  # a module registered twice appears twice
            if m is not None:
                m.state_dict(
                    destination=destination, prefix=f"{prefix}{name}.", keep_vars=keep_vars
                )
        for hook in list(hook_table(self, "_state_dict_hooks").values()):
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    # ------------------------------------------------------------------ loading
    def _load_from_state_dict(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Load this module's own tensors (not its children's) from ``state_dict`` (the keys
        under ``prefix``, a copy that may be edited), in place; record what is missing or
        unexpected and the errors."""
        for hook in list(hook_table(self, "_load_state_dict_pre_hooks").values()):
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs)  # fmt: skip
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update(
            (k, v)
            for k, v in self._buffers.items()
            if v is not None and k not in self._non_persistent_buffers_set
        )
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, t in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            _load_one(self, name, key, t, state_dict[key], assign, error_msgs)
        extra_key = prefix + EXTRA_STATE_KEY_SUFFIX
        if self._has_extra_state("set_extra_state"):
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or key == extra_key:
                    continue
                first, *rest = key[len(prefix) :].split(".", 1)
                if (rest and first not in self._modules) or (not rest and first not in local):
                    unexpected_keys.append(key)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> IncompatibleKeys:
        """Copy values (tensors or NumPy arrays) into the parameters and buffers, in place (with
        ``assign``, make the given tensors the module's, keeping each parameter's
        ``requires_grad``).

        Returns:
            ``(missing_keys, unexpected_keys)``.

        Raises:
            RuntimeError: a shape differs, or with ``strict`` names are missing or unexpected
                (after the load post-hooks have had their say).
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # the hooks may edit this copy
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module: Any, local_state: dict, prefix: str = "") -> None:
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state, prefix, local_metadata, True, missing, unexpected, errors
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = f"{prefix}{name}."
                    load(child, {k: v for k, v in local_state.items()
                                 if k.startswith(child_prefix)}, child_prefix)  # fmt: skip
            keys = IncompatibleKeys(missing, unexpected)
            for hook in list(hook_table(module, "_load_state_dict_post_hooks").values()):
                if hook(module, keys) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace."
                    )

        load(self, state_dict)
        if strict and unexpected:  # PyTorch's wording, missing keys first
            errors.insert(0, f"Unexpected key(s) in state_dict: {_quoted(unexpected)}. ")
        if strict and missing:
            errors.insert(0, f"Missing key(s) in state_dict: {_quoted(missing)}. ")
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        if assign:
            guards.bump()  # (new tensors: a captured step (gt.hot) holding the old is redone)
        return IncompatibleKeys(missing, unexpected)


def _load_one(module: Any, name: str, key: str, t: Tensor, value: Any, assign: bool,
              errors: list[str]) -> None:  # fmt: skip
    """Load ``value`` (the entry ``key``) into ``module``'s tensor ``name`` (``t``)."""
    Parameter = module._parameter_class  # noqa: N806
    if not isinstance(value, (Tensor, np.ndarray)):
        errors.append(
            f'While copying the parameter named "{key}", expected gt.Tensor or Tensor-like '
            f"object from checkpoint but received {type(value)}"
        )
        return
    shape = tuple(value.shape)
    if len(t.shape) == 0 and shape == (1,):  # PyTorch 0.3's one-element tensors
        value, shape = value[0], ()
    if shape != tuple(t.shape):
        errors.append(
            f"size mismatch for {key}: copying a param with shape {Size(shape)} from "
            f"checkpoint, the shape in current model is {Size(t.shape)}."
        )
        return
    try:
        with no_grad():
            if assign and isinstance(value, Tensor):
                if isinstance(t, Parameter):
                    if isinstance(value, Parameter):
                        value.requires_grad_(t.requires_grad)
                    else:
                        value = Parameter(value, requires_grad=t.requires_grad)
                setattr(module, name, value)
            else:
                t.copy_(value)
    except Exception as e:  # noqa: BLE001 - reported with the others, as PyTorch does
        errors.append(
            f'While copying the parameter named "{key}", whose dimensions in the model are '
            f"{Size(t.shape)} and whose dimensions in the checkpoint are {Size(shape)}, an "
            f"exception occurred : {e.args}."
        )


def _quoted(keys: list) -> str:
    return ", ".join(f'"{k}"' for k in keys)
