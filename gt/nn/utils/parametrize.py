"""``gt.nn.utils.parametrize``: a module's parameter (or buffer) computed from other tensors.

:func:`register_parametrization` moves ``module.weight`` to ``module.parametrizations.weight
.original`` (or ``original0``, ``original1``, ... when the first parametrization's
``right_inverse`` returns several tensors) and makes ``module.weight`` a property that applies the
registered modules to it on every access, as PyTorch does: the module's class becomes a subclass
``Parametrized<Class>`` that holds the property, ``state_dict`` keys read
``parametrizations.weight.original``, and the optimizer trains the originals. :func:`cached`
computes each parametrized tensor once inside its block.
"""

from __future__ import annotations

import collections.abc
import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from gt import guards
from gt.autograd import no_grad
from gt.nn.containers import ModuleDict, ModuleList
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "transfer_parametrizations_and_params",
    "type_before_parametrizations",
]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextmanager
def cached() -> Iterator[None]:
    """Compute every parametrized tensor at most once inside the block (the values are dropped
    when the outermost block ends): useful when a forward reads a parametrized weight several
    times, as a recurrent cell does."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_value(dest: Tensor, src: Tensor) -> None:
    """``dest`` takes ``src``'s value in place (PyTorch's ``dest.set_(src)``), staying the same
    Python object (so an optimizer holding it keeps training it)."""
    if src is not dest:
        dest.data = src


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, and the original tensor(s) they start from.

    It is ``module.parametrizations[name]``; made by :func:`register_parametrization`, not by
    users. Its first module is called with the originals, each later one with the result of the
    one before.

    Args:
        modules: the parametrizations (at least one).
        original: the parameter or buffer being parametrized.
        unsafe: skip the checks that the result keeps the original's dtype and shape.
    """

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        new: Any = original
        with no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\n"
                    f"right_inverse(original).dtype: {new.dtype}"
                )
            with no_grad():
                _set_value(original, new)
            _register(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors "
                        f"(list, tuple...). Got element {i} of the sequence with type "
                        f"{type(part).__name__}."
                    )
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                part.requires_grad_(original.requires_grad)
                _register(self, f"original{i}", part)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized dtype: {dtype}\nparametrized dtype: {z.dtype}"
                )
            if tuple(z.shape) != tuple(shape):
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized shape: {list(shape)}\nparametrized shape: {list(z.shape)}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals from a value of the parametrized tensor: every parametrization's
        ``right_inverse``, last registered first, then the result into ``original`` (or
        ``original0``, ``original1``, ...).

        Raises:
            RuntimeError: a parametrization has no ``right_inverse``.
            ValueError: the result has the wrong kind, number or dtype.
        """
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(m).__name__} does not implement right_inverse."
                    )
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(
                        f"`right_inverse` should return a tensor. Got {type(value).__name__}"
                    )
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                        f"`original` has dtype {self.original.dtype}"
                    )
                _set_value(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}."
                )
            if len(value) != self.ntensors:
                raise ValueError(
                    "'right_inverse' must return a sequence of tensors of length "
                    f"{self.ntensors}. Got a sequence of length {len(value)}."
                )
            for i, t in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(t, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a sequence of tensors. Got element "
                        f"{i} of type {type(t).__name__}."
                    )
                if original_i.dtype != t.dtype:
                    raise ValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {t.dtype} while "
                        f"`original{i}` has dtype {original_i.dtype}"
                    )
                _set_value(original_i, t)

    def forward(self) -> Tensor:
        """The parametrized tensor: the modules applied in order to the originals."""
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _inject_new_class(module: Module) -> None:
    """Give ``module`` a class of its own, ``Parametrized<Class>``, to hold the properties."""
    cls = module.__class__

    def default_deepcopy(self: Module, memo: dict) -> Module:
        found = memo.get(id(self))
        if found is not None:
            return found
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__setstate__(copy.deepcopy(self.__dict__, memo))
        return replica

    def getstate(self: Module) -> Any:
        raise RuntimeError(
            "Serialization of parametrized modules is only supported through state_dict()."
        )

    namespace: dict[str, Any] = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    """Make ``module.<tensor_name>`` a property: reading it runs the parametrization (once per
    :func:`cached` block), assigning to it calls ``right_inverse``."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make ``module.<tensor_name>`` the result of ``parametrization`` (see the module docstring).

    A second parametrization on the same tensor is applied after the first. ``right_inverse``,
    when the parametrization has one, computes the original(s) from the current value at the
    first registration, and is what assigning to ``module.<tensor_name>`` calls.

    Args:
        module: the module that holds the tensor.
        tensor_name: the name of a parameter, a buffer or an already parametrized tensor.
        parametrization: a module mapping the original(s) to the tensor.
        unsafe: allow the parametrization to change the tensor's dtype and shape (no checks).

    Returns:
        ``module`` (whose class is now ``Parametrized<Class>``).

    Raises:
        ValueError: there is no such tensor, or the parametrization changes its dtype or shape.
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
            if x.dtype != y.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless the `unsafe` flag is enabled.\n"
                    f"module.{tensor_name}.dtype: {y.dtype}\n"
                    f"parametrization(module.{tensor_name}).dtype: {x.dtype}"
                )
            if tuple(x.shape) != tuple(y.shape):
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless the `unsafe` flag is enabled.\n"
                    f"module.{tensor_name}.shape: {list(y.shape)}\n"
                    f"parametrization(module.{tensor_name}).shape: {list(x.shape)}"
                )
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(z, Tensor):
                        raise ValueError(
                            "parametrization.right_inverse must return a tensor. Got: "
                            f"{type(z).__name__}"
                        )
                    if z.dtype != y.dtype or tuple(z.shape) != tuple(y.shape):
                        raise ValueError(
                            "The tensor returned by parametrization.right_inverse must have the "
                            f"same dtype and shape as module.{tensor_name}, unless the `unsafe` "
                            f"flag is enabled.\nmodule.{tensor_name}: {y.dtype} "
                            f"{list(y.shape)}\nreturned: {z.dtype} {list(z.shape)}"
                        )
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    guards.bump()  # a captured step (gt.hot) read the tensor the old way
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, or on any tensor)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Remove the parametrizations of ``module.<tensor_name>``.

    With ``leave_parametrized`` the tensor keeps its current (parametrized) value, else it goes
    back to the original (possible only with one original). The original's Python object stays
    the parameter (so an optimizer keeps training it); once no parametrization is left, the
    module gets its own class back.

    Raises:
        ValueError: the tensor is not parametrized, or ``leave_parametrized=False`` with several
            originals.
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _set_value(original, t)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                "parametrized in terms of a sequence of tensors."
            )
        t = getattr(module, tensor_name)
        original = Parameter(t) if t.requires_grad else t
    delattr(module.__class__, tensor_name)
    module.parametrizations.pop(tensor_name)
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    guards.bump()
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization was registered."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module``,
    sharing the originals; a tensor ``to_module`` lacks is created first.

    Returns:
        ``to_module``.
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        source = from_module.parametrizations[name]
        for p in source:
            register_parametrization(to_module, name, p)
        target = to_module.parametrizations[name]
        if source.is_tensor:
            target.original = source.original
        else:
            for i in range(source.ntensors):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
    return to_module
