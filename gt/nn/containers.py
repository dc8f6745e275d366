"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from gt._dtype import name_of
from gt.nn.module import Module, Parameter, indent
from gt.tensor import Tensor


class Sequential(Module):
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

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):  # the slice keeps the modules' names, as in PyTorch
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[idx]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add a module at the end."""
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered."""

    def __init__(self, modules: Any = None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        """Add a module at the end."""
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Any) -> ModuleList:
        """Add several modules at the end."""
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
        mods = list(self._modules.values())
        return ModuleList(mods[idx]) if isinstance(idx, slice) else mods[idx]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[idx]
        self.add_module(key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

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

    def __init__(self, modules: dict[str, Module] | None = None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

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

    def update(self, modules: Any) -> None:
        """Add (or replace) modules from a dict or pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self.add_module(k, m)

    def __contains__(self, key: str) -> bool:
        return key in self._modules


class ParameterList(Module):
    """A list of parameters that are registered (tensors given are made parameters)."""

    def __init__(self, values: Any = None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value: Tensor) -> ParameterList:
        """Add a parameter at the end."""
        p = value if isinstance(value, Parameter) else Parameter(value)
        self.register_parameter(str(len(self._parameters)), p)
        return self

    def extend(self, values: Any) -> ParameterList:
        """Add several parameters at the end."""
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, idx: int) -> Parameter:
        return list(self._parameters.values())[idx]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def extra_repr(self) -> str:
        return "\n".join(
            f"({k}): Parameter containing: [gt.{name_of(p.dtype)} of size {'x'.join(map(str, p.shape))}]"
            for k, p in self._parameters.items()
        )


class ParameterDict(Module):
    """A dict of parameters that are registered."""

    def __init__(self, parameters: Any = None):
        super().__init__()
        items = parameters.items() if hasattr(parameters, "items") else parameters or ()
        for k, v in items:
            self[k] = v

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Tensor) -> None:
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def keys(self) -> Any:
        """The names."""
        return self._parameters.keys()

    def values(self) -> Any:
        """The parameters."""
        return self._parameters.values()

    def items(self) -> Any:
        """(name, parameter) pairs."""
        return self._parameters.items()
