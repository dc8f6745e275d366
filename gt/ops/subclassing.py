"""Tensor subclasses as PyTorch's: a method of a program's subclass of :class:`gt.Tensor` goes
through the class's ``__torch_function__``, whose default runs the method and gives its tensor
results the subclass (``MyTensor + 1`` is a ``MyTensor``, as torchvision's ``tv_tensors`` expect).

``Tensor.__init_subclass__`` wraps, on each subclass a program defines, every method it inherits
(the operators included), so plain tensors pay nothing. Inside a ``__torch_function__`` call the
wrappers step aside (PyTorch's ``DisableTorchFunctionSubclass``): the method's own inner calls run
as on plain tensors and only its result is converted. ``gt.nn.Parameter`` and GT's other classes
are not wrapped; a subclass of ``Parameter`` gets plain results, as in PyTorch, unless it defines
``__torch_function__``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

#: Operators a subclass's instances use (the other dunders are not wrapped).
_OPERATORS = frozenset(
    f"__{name}__"
    for base in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
                 "xor", "lshift", "rshift")  # fmt: skip
    for name in (base, f"r{base}", f"i{base}")
) | frozenset(("__neg__", "__pos__", "__abs__", "__invert__", "__getitem__", "__lt__", "__le__",
               "__gt__", "__ge__", "__eq__", "__ne__"))  # fmt: skip

#: Methods whose results are not tensors, or that must see the instance as it is.
_PLAIN = frozenset(("numpy", "tolist", "item", "dim", "size", "numel", "nelement", "ndimension",
                    "element_size", "data_ptr", "stride", "storage_offset", "is_contiguous",
                    "is_floating_point", "is_complex", "untyped_storage", "register_hook",
                    "backward", "requires_grad_", "retain_grad", "as_subclass", "get_device",
                    "type", "__format__", "__repr__"))  # fmt: skip

_local = threading.local()


def disabled() -> bool:
    """Whether a ``__torch_function__`` call is running on this thread."""
    return getattr(_local, "depth", 0) > 0


def convert(value: Any, cls: type, base: type, args: tuple) -> Any:
    """``value`` with its plain tensors (fresh ones: not one of ``args``) of class ``cls``."""
    if type(value) is base and cls is not base and all(value is not a for a in args):
        value.__class__ = cls
        return value
    if type(value) in (tuple, list):
        return type(value)(convert(v, cls, base, args) for v in value)
    return value


def default_torch_function(cls: type, func: Any, types: Any, args: tuple = (),
                           kwargs: Any = None, base: type = object) -> Any:  # fmt: skip
    """Run ``func`` with subclass dispatch turned off; its tensor results become ``cls``'s."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        value = func(*args, **(kwargs or {}))
    finally:
        _local.depth -= 1
    return convert(value, cls, base, args)


def _wrapped(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if disabled():
            return fn(self, *args, **kwargs)
        cls = type(self)
        return cls.__torch_function__(fn, (cls,), (self, *args), kwargs)

    return method


def wrap_subclass(cls: type, base: type) -> None:
    """Give the program's subclass ``cls`` of ``base`` (``gt.Tensor``) its wrapped methods."""
    if cls.__module__.startswith("gt.") or cls.__module__ == "gt":
        return
    own = set(vars(cls))
    seen: set[str] = set()
    for klass in cls.__mro__[1:]:
        for name, attr in vars(klass).items():
            if name in seen or name in own:
                continue
            seen.add(name)
            if name in _PLAIN or not callable(attr) or isinstance(attr, (type, staticmethod)):
                continue
            if name.startswith("_") and name not in _OPERATORS:
                continue
            if isinstance(attr, classmethod):
                continue
            setattr(cls, name, _wrapped(name, attr))
    if "__eq__" not in own:  # (a class that defines ``__eq__`` loses its hash otherwise)
        cls.__hash__ = base.__hash__  # type: ignore[method-assign]
