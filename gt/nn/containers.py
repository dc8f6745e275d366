"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``."""

from __future__ import annotations

import collections.abc
import operator
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from gt._dtype import name_of
from gt.nn.module import Module, Parameter, indent
from gt.tensor import Tensor


def _key_at(modules: dict, idx: int) -> str:
    """The name of the module at position ``idx`` (negative from the end)."""
    idx = operator.index(idx)
    if not -len(modules) <= idx < len(modules):
        raise IndexError(f"index {idx} is out of range")
    return list(modules)[idx]


def _renumber(container: Module) -> None:
    """Name the modules ``"0"``, ``"1"`` ... in order again (after a deletion, as PyTorch does)."""
    mods = list(container._modules.values())
    container._modules.clear()
    container._modules.update((str(i), m) for i, m in enumerate(mods))


class _NumberedModules(Module):
    """What :class:`Sequential` and :class:`ModuleList` share: modules named ``"0"``, ``"1"`` ...
    in order, addressed by position (negative from the end), renumbered after a deletion."""

    def append(self, module: Module) -> Any:
        """Add a module at the end."""
        self.add_module(str(len(self._modules)), module)
        return self

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, _key_at(self._modules, idx), module)

    def __delitem__(self, idx: Any) -> None:
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [_key_at(self._modules, idx)]:
            delattr(self, key)
        _renumber(self)

    def pop(self, key: Any) -> Any:
        """Remove and return the module (or a container of the modules) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class Sequential(_NumberedModules):
    """Modules applied one after the other.

    Args:
        *modules: the modules, or one ``dict`` of name -> module.
    """

    def __init__(self, *modules: Any):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, input: Any) -> Any:
        for m in self._modules.values():
            input = m(input)
        return input

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):  # the slice keeps the modules' names, as in PyTorch
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[_key_at(self._modules, idx)]

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")  # fmt: skip
        return Sequential().extend(self).extend(other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")  # fmt: skip
        offset = len(self)
        for i, m in enumerate(list(other)):
            self.add_module(str(i + offset), m)
        return self

    def __mul__(self, n: int) -> Sequential:
        if not isinstance(n, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(n)}")
        if n <= 0:
            raise ValueError(f"Non-positive multiplication factor {n} for {type(self)}")
        return Sequential(*(list(self) * n))

    __rmul__ = __mul__

    def __imul__(self, n: int) -> Sequential:
        mods = list(self * n)
        for i, m in enumerate(mods[len(self) :], len(self)):
            self.add_module(str(i), m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert a module before ``index`` (the ones after it move up a number)."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index = index + n if index < 0 else index
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential: Any) -> Sequential:
        """Add the modules of ``sequential`` (any iterable of modules) at the end."""
        for m in list(sequential):
            self.append(m)
        return self


class ModuleList(_NumberedModules):
    """A list of modules whose parameters are registered."""

    def __init__(self, modules: Any = None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def extend(self, modules: Any) -> ModuleList:
        """Add several modules at the end."""
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert a module before ``index``."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[_key_at(self._modules, idx)]

    def __add__(self, other: Any) -> ModuleList:
        return ModuleList([*self, *other])

    def __iadd__(self, modules: Any) -> ModuleList:
        return self.extend(modules)

    def __repr__(self) -> str:
        # PyTorch compresses runs of identical children: "(0-2): 3 x Linear(...)".
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list[list[Any]] = []
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for start, end, r in runs:
            head = f"({start})" if start == end else f"({start}-{end}): {end - start + 1} x"
            lines.append(indent(f"{head}: {r}" if start == end else f"{head} {r}", 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules whose parameters are registered."""

    def __init__(self, modules: Any = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self) -> Any:
        """The names."""
        return self._modules.keys()

    def values(self) -> Any:
        """The modules."""
        return self._modules.values()

    def items(self) -> Any:
        """(name, module) pairs."""
        return self._modules.items()

    def pop(self, key: str) -> Module:
        """Remove and return the module named ``key``."""
        return self._modules.pop(key)

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def update(self, modules: Any) -> None:
        """Add (or replace) modules from a mapping, or from an iterable of ``(name, module)``
        pairs."""
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                + type(modules).__name__
            )
        if isinstance(modules, (collections.abc.Mapping, ModuleDict)):
            for k, m in modules.items():
                self[k] = m
            return
        for j, pair in enumerate(modules):
            if not isinstance(pair, collections.abc.Iterable):
                raise TypeError(
                    f"ModuleDict update sequence element #{j} should be Iterable; is "
                    + type(pair).__name__
                )
            if len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required"
                )
            self[pair[0]] = pair[1]

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __contains__(self, key: str) -> bool:
        return key in self._modules


class ParameterList(Module):
    """A list of parameters that are registered (tensors given are made parameters; other
    objects are kept as they are, as in PyTorch)."""

    def __init__(self, values: Any = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, idx: int) -> str:
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx + len(self) if idx < 0 else idx)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(*idx.indices(len(self)))])
        return getattr(self, self._index(idx))

    def __setitem__(self, idx: int, value: Any) -> None:
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, self._index(idx), value)

    def append(self, value: Any) -> ParameterList:
        """Add a value (a tensor becomes a parameter) at the end."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Any) -> ParameterList:
        """Add several values at the end."""
        if isinstance(values, Tensor) or not isinstance(values, collections.abc.Iterable):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, but got "
                + type(values).__name__
            )
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values: Any) -> ParameterList:
        return self.extend(values)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(str(i), p, typename=False) for i, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters that are registered (tensors given are made parameters;
    ``update`` with a plain ``dict`` adds its keys in sorted order, as PyTorch does)."""

    def __init__(self, parameters: Any = None):
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, _str_key(key))

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, _str_key(key), value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, _str_key(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

    def keys(self) -> Any:
        """The names."""
        return self._keys.keys()

    def values(self) -> Any:
        """The parameters."""
        return (self[k] for k in self._keys)

    def items(self) -> Any:
        """(name, parameter) pairs."""
        return ((k, self[k]) for k in self._keys)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        return self[key] if key in self else default

    def setdefault(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, set to ``default`` first if it is not there."""
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str) -> Any:
        """Remove ``key`` and return its value."""
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last ``(key, value)`` added."""
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def clear(self) -> None:
        """Remove every entry."""
        for k in list(self._keys):
            del self[k]

    def copy(self) -> ParameterDict:
        """A new ParameterDict with the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def fromkeys(self, keys: Any, default: Any = None) -> ParameterDict:
        """A new ParameterDict with ``keys``, each set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def update(self, parameters: Any) -> None:
        """Add (or replace) entries from a mapping or ``(key, value)`` pairs."""
        if not isinstance(parameters, collections.abc.Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, "
                "but got " + type(parameters).__name__
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, collections.abc.Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = []
            for j, p in enumerate(parameters):
                if not isinstance(p, collections.abc.Iterable):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be "
                                    f"Iterable; is{type(p).__name__}")  # fmt: skip
                if len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length "
                                     f"{len(p)}; 2 is required")  # fmt: skip
                pairs.append(p)
        for k, v in pairs:
            self[k] = v

    def __or__(self, other: ParameterDict) -> ParameterDict:
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: Any) -> Any:
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p, typename=True) for k, p in self.items())


def _str_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(
            "Index given to ParameterDict cannot be used as a key as it is not a string (type is "
            f"'{type(key).__name__}'). Open an issue on github if you need non-string keys."
        )
    return key


def _entry_repr(key: str, p: Any, typename: bool) -> str:
    """One line of a parameter container's ``repr``: PyTorch prints a list's dtype
    (``gt.float32``) and a dict's type name (``torch.typename``: ``torch.FloatTensor``)."""
    from gt.torch_functions import typename as type_name  # noqa: PLC0415 - (it imports gt.nn)

    if not isinstance(p, Tensor):
        return f"  ({key}): Object of type: {type(p).__name__}"
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    name = type_name(p) if typename else f"gt.{name_of(p.dtype)}"
    return f"  ({key}): {kind} containing: [{name} of size {'x'.join(map(str, p.shape))}]"
