"""``gt.nn.Module``, ``Parameter`` and the containers (``Sequential``, ``ModuleList``, ``ModuleDict``)."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from gt import guards
from gt.backprop import RemovableHandle, reset_grads
from gt.factories import zeros
from gt.nn import backward_hooks, forward_hooks
from gt.nn.backward_hooks import LIVE as _LIVE_BACKWARD_HOOKS
from gt.nn.backward_hooks import (  # noqa: F401 - torch.nn.modules.module has them
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from gt.nn.buffer import Buffer, _NonPersistentBuffer
from gt.nn.forward_hooks import (  # noqa: F401 - torch.nn.modules.module has them
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from gt.nn.module_conversion import ModuleConversions
from gt.nn.module_registration import (  # noqa: F401 - torch.nn.modules.module has them
    _BUFFER_REGISTRATION_HOOKS,
    _HOOK_TABLES,
    _MODULE_REGISTRATION_HOOKS,
    _PARAMETER_REGISTRATION_HOOKS,
    _check_name,
    _global_buffer_registration_hooks,
    _global_module_registration_hooks,
    _global_parameter_registration_hooks,
    _registered,
    _typename,
    register_module_buffer_registration_hook,
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)
from gt.nn.module_state import IncompatibleKeys, ModuleState  # noqa: F401 - (as in PyTorch)
from gt.ops import views
from gt.tensor import Tensor

#: Keys of registered forward hooks, unique in the process (a handle removes by key).
_HOOK_KEYS = itertools.count()
#: Forward hooks of every module, registered now (``register_module_forward_hook`` ...).
_GLOBAL_FORWARD = forward_hooks.GLOBAL


class Parameter(Tensor):
    """A tensor that is a module's learnable parameter (a leaf that requires grad by default).

    Args:
        data: the initial value (a tensor); the parameter shares it, as PyTorch's shares its
            storage: while ``data`` lives, an in-place change of either is seen by the other.
        requires_grad: whether the parameter is trained.
    """

    __slots__ = ()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        """Plain results, as PyTorch's Parameter (a subclass of it may define its own)."""
        return func(*args, **(kwargs or {}))

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor, got {type(data).__name__}")
        alias = data.detach()
        super().__init__(alias._conn, alias.id, alias.shape, alias.dtype)
        alias.id = None  # this parameter owns the value now
        views.link(data, self, "detach", None)
        if requires_grad:
            self.requires_grad_(True)


class Module(ModuleState, ModuleConversions):
    """Base class of layers and models: holds parameters, buffers and submodules.

    Assigning a :class:`Parameter` or a ``Module`` to an attribute registers it; ``parameters()``,
    ``state_dict()``, ``train()`` ... then see it, recursively.
    """

    training: bool
    _parameter_class = Parameter

    #: PyTorch's flag for classes whose ``__init__`` passes unused arguments to the next class.
    call_super_init: bool = False
    dump_patches: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:  # (PyTorch's message for a subclass passing its arguments on)
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                f"'{next(iter(kwargs))}'"
                if kwargs
                else f"{type(self).__name__}.__init__() takes 1 positional argument but "
                f"{len(args) + 1} were given"
            )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        # (PyTorch's tables, which libraries read: hooks by key; the keys of those called with
        # kwargs, or always, kept apart)
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_is_full_backward_hook"] = None
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks_always_called"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()
        d["_modules"] = {}

    # ------------------------------------------------------------------ attributes
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:  # (before Module.__init__: plain values only)
            for kind, what in ((Parameter, "parameters"), (Module, "module"), (Buffer, "buffer")):
                if isinstance(value, kind):
                    raise AttributeError(f"cannot assign {what} before Module.__init__() call")
            object.__setattr__(self, name, value)
            return
        params, bufs, mods = self._parameters, self._buffers, self._modules
        # PyTorch's rules: a Parameter or Module registers (replacing whatever had the name); a
        # registered name keeps its kind (a parameter takes a Parameter or None, a buffer a tensor
        # or None, a submodule a Module or None); anything else is a plain attribute.
        if isinstance(value, Parameter):
            for d in (self.__dict__, bufs, mods):
                d.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            # (through register_parameter, as PyTorch's: accelerate's init_empty_weights and
            # transformers' loading patch it to see every parameter a layer makes)
            self.register_parameter(name, value)
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(gt.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            for d in (self.__dict__, params, bufs):
                d.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            value = _registered(_MODULE_REGISTRATION_HOOKS, self, name, value)
            mods[name] = value
        elif name in mods:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(gt.nn.Module or None expected)"
                )
            mods[name] = None
        elif name in bufs or isinstance(value, Buffer):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(gt.Tensor or None expected)"
                )
            if isinstance(value, Buffer):  # an nn.Buffer registers itself, with its persistence
                self.register_buffer(name, value, value.persistent)
            else:
                bufs[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg in d and name in d[reg]:
                return d[reg][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __dir__(self) -> list[str]:
        # (PyTorch's: the class's and instance's attributes, and every registered name that is
        # a Python identifier, so completion in a notebook offers ``model.encoder``)
        keys = [*dir(type(self)), *self.__dict__, *self._parameters, *self._modules, *self._buffers]
        return sorted({k for k in keys if not k[0].isdigit()})

    def __delattr__(self, name: str) -> None:
        for reg in (self._parameters, self._buffers, self._modules):
            if name in reg:
                del reg[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (or ``None``, a placeholder) under ``name`` (a new name: one that
        is not an attribute already, with no dot), after the hooks of
        ``register_module_parameter_registration_hook``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter")
        if name not in self._parameters and hasattr(self, name):
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(
                    f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                    "(gt.nn.Parameter or None required)"
                )
            if param._node is not None:
                raise ValueError(
                    f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                    f"be created explicitly. To express '{name}' as a function of another Tensor, "
                    "compute the value in the forward() method."
                )
        param = _registered(_PARAMETER_REGISTRATION_HOOKS, self, name, param)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register a tensor that is state but not a parameter (in ``state_dict`` unless not
        ``persistent``), under a new name (or a buffer's), after the hooks of
        ``register_module_buffer_registration_hook``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer")
        if name not in self._buffers and hasattr(self, name):
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(gt Tensor or None required)"
            )
        tensor = _registered(_BUFFER_REGISTRATION_HOOKS, self, name, tensor)
        if type(tensor) in _PLAIN_BUFFERS:  # (an nn.Buffer is a plain tensor once registered,
            persistent_flag = tensor.persistent  # as PyTorch's always is)
            tensor.__class__ = Tensor
            tensor.__dict__.update(_is_buffer=True, persistent=persistent_flag)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a submodule under ``name`` (a new name, or a submodule's), after the hooks of
        ``register_module_module_registration_hook``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _check_name(name, "module", show=True)
        if name not in self._modules and hasattr(self, name):
            raise KeyError(f"attribute '{name}' already exists")
        module = _registered(_MODULE_REGISTRATION_HOOKS, self, name, module)
        self._modules[name] = module

    register_module = add_module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``"0.bias"``)."""
        mod, name = self._get_attr(target)
        if not isinstance(getattr(mod, name), Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return getattr(mod, name)

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target`` (``"1.running_mean"``)."""
        mod, name = self._get_attr(target)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    def _get_attr(self, target: str) -> tuple[Module, str]:
        owner, _, name = target.rpartition(".")
        mod = self.get_submodule(owner)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        return mod, name

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is this module)."""
        m: Module = self
        for part in target.split(".") if target else ():
            if not hasattr(m, part):
                raise AttributeError(f"{m._get_name()} has no attribute `{part}`")
            m = getattr(m, part)
            if not isinstance(m, Module):
                raise AttributeError(f"`{part}` is not an nn.Module")
        return m

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at dotted path ``target`` (its parent must exist; ``strict``: so must
        the name)."""
        if not target:
            raise ValueError("Cannot set the submodule without a target name!")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        setattr(parent, name, module)

    # ------------------------------------------------------------------ calling
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; subclasses override it."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The fast path: one global for all backward hooks (empty unless some module, or every
        # module, has one) and one for the forward hooks of every module, so that a call without
        # hooks costs no more than a bare forward.
        if not (self._forward_pre_hooks or self._forward_hooks or _LIVE_BACKWARD_HOOKS
                or _GLOBAL_FORWARD):  # fmt: skip
            return self.forward(*args, **kwargs)
        return forward_hooks.call(self, args, kwargs)

    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        """What calling the module does (PyTorch's name, which wrappers call directly)."""
        return self.__call__(*args, **kwargs)

    _wrapped_call_impl = _call_impl

    def _slow_forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """PyTorch's ``model.compile()`` compiles the module in place: accepted, and nothing to
        do in GT (a repeated step is captured and replayed by the runtime; see ``gt.hot``)."""
        return None

    def _named_members(
        self, get_members_fn: Callable, prefix: str = "", recurse: bool = True,
        remove_duplicate: bool = True,
    ) -> Iterator[tuple[str, Any]]:  # fmt: skip
        """``(dotted name, member)`` for what ``get_members_fn(module)`` gives of this module (and
        its submodules, with ``recurse``), each once with ``remove_duplicate`` (PyTorch's helper
        that libraries reuse)."""
        seen: set[int] = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in mods:
            for k, v in get_members_fn(module):
                if v is None or id(v) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def _add_hook(self, name: str, hook: Callable, with_kwargs: bool, prepend: bool) -> Any:
        if not callable(hook):
            raise TypeError(f"the hook must be callable, got {type(hook).__name__}")
        table, kwargs_keys = self.__dict__[name], self.__dict__[f"{name}_with_kwargs"]
        key = next(_HOOK_KEYS)
        table[key] = hook
        if with_kwargs:
            kwargs_keys[key] = True
        guards.bump()  # a captured step (gt.hot) that ran without this hook must be captured again
        if prepend:
            for k in [k for k in table if k != key]:
                table[k] = table.pop(k)  # move the others behind the new one
        return forward_hooks.Handle(table, key, kwargs_keys)

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """Call ``hook(module, args)`` before every ``forward``; a result that is not ``None``
        replaces the positional arguments (a non-tuple is wrapped). With ``with_kwargs=True``:
        ``hook(module, args, kwargs)`` returning ``None`` or ``(args, kwargs)``."""
        return self._add_hook("_forward_pre_hooks", hook, with_kwargs, prepend)

    def register_forward_hook(
        self,
        hook: Callable,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every ``forward``; a result that is not
        ``None`` replaces the output. With ``with_kwargs=True``: ``hook(module, args, kwargs,
        output)``. With ``always_call=True`` the hook also runs when the call raises (``output``
        is then ``None`` if ``forward`` did not return)."""
        handle = self._add_hook("_forward_hooks", hook, with_kwargs, prepend)
        if not always_call:
            return handle
        always = self.__dict__.setdefault("_forward_hooks_always_called", {})
        always[handle._key] = True
        return forward_hooks.Handle(
            self._forward_hooks, handle._key, always, self._forward_hooks_with_kwargs
        )

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` whenever the gradients with respect to
        this module's inputs are computed; a tuple it returns replaces ``grad_input``.

        ``grad_input`` has one entry per positional argument (``None`` for a non-tensor, zeros
        for a tensor needing no gradient), ``grad_output`` one per output (``None`` for a non-tensor or
        an output no gradient reached). With no input needing a gradient the hook gets
        ``grad_input`` all ``None`` and must return ``None``. ``forward`` then receives aliases
        of its inputs (and may not change them in place). See :mod:`gt.nn.backward_hooks`.

        Returns:
            A handle whose ``remove()`` unregisters the hook (``prepend``: run it first).
        """
        return backward_hooks.add(self, self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` whenever the gradients with respect to this module's
        outputs are computed, before the full backward hooks; a tuple it returns replaces
        ``grad_output`` for later pre-hooks, the full hooks and the gradients flowing into the
        module.

        Returns:
            A handle whose ``remove()`` unregisters the hook (``prepend``: run it first).
        """
        return backward_hooks.add(self, self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook: Callable) -> Any:
        """PyTorch's deprecated backward hook, run as :meth:`register_full_backward_hook`:
        ``grad_output`` is the same (what Grad-CAM code reads), and ``grad_input`` holds the
        gradients of the module's inputs, where PyTorch's gives those of the inputs of the last
        op of ``forward`` (for a ``Linear``, also its weight's and bias')."""
        return self.register_full_backward_hook(hook)

    # ------------------------------------------------------------------ traversal
    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, with dotted names (a module registered under two
        names once, unless not ``remove_duplicate``)."""
        if remove_duplicate:
            memo = set() if memo is None else memo
            if self in memo:  # (the modules themselves, as PyTorch's memo holds)
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(
                    memo, f"{prefix}.{name}" if prefix else name, remove_duplicate
                )

    def modules(self) -> Iterator[Module]:
        """This module and every submodule."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Direct submodules with their names (one registered under two names once)."""
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        """Direct submodules."""
        for _, m in self.named_children():
            yield m

    def _named(
        self, kind: str, prefix: str, recurse: bool, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else iter([(prefix, self)])
        )
        for mprefix, m in mods:
            for name, t in getattr(m, kind).items():
                if t is None or id(t) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(t))
                yield (f"{mprefix}.{name}" if mprefix else name), t

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """Every parameter with its dotted name (each once, even if shared, unless not
        ``remove_duplicate``)."""
        yield from self._named("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter (each once, even if shared)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """Every buffer with its dotted name."""
        yield from self._named("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ state
    def train(self, mode: bool = True) -> Module:
        """Set training mode (affects Dropout and BatchNorm) on this module, then through each
        child's own ``train`` (so a submodule that overrides it, to keep its BatchNorm frozen
        say, is obeyed)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        if self.__dict__.get("training") is not mode:
            object.__setattr__(self, "training", mode)
            guards.bump()  # a captured step (gt.hot) that ran in the other mode is captured again
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode (``train(False)``)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient (to ``None``, or to zeros in place)."""
        reset_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule, then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr``."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        # PyTorch's layout: extra_repr's lines, then one "(name): repr" per child, indented.
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): {indent(repr(m), 2)}" for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"

    def __setstate__(self, state: dict) -> None:
        d = self.__dict__
        d.update(state)
        old = d.pop("_non_persistent", None)  # (its name before Dec 6 2026)
        d.setdefault("_non_persistent_buffers_set", set() if old is None else old)
        for name in _HOOK_TABLES:
            d.setdefault(name, OrderedDict())
        d.setdefault("_is_full_backward_hook", None)
        backward_hooks.retrack(self)  # (a copy's hooks fire, and its original's handles spare them)


#: The classes of ``nn.Buffer`` values (not placeholders such as ``UninitializedBuffer``).
_PLAIN_BUFFERS = (Buffer, _NonPersistentBuffer)
#: PyTorch's names in ``torch.nn.modules.module`` that libraries import.
_IncompatibleKeys = IncompatibleKeys
_global_forward_hooks = forward_hooks._POST
_global_forward_pre_hooks = forward_hooks._PRE


def indent(text: str, spaces: int) -> str:
    """Indent every line of ``text`` but the first (blank lines stay blank), as PyTorch's reprs."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + ln if ln.strip() else "" for ln in lines[1:])


_addindent = indent
