"""``skip_init``: a module whose parameter values do not matter (PyTorch's
``torch.nn.utils.skip_init``)."""

from __future__ import annotations

import inspect
from typing import Any

from gt.nn.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Module:
    """An instance of ``module_cls(*args, **kwargs)`` whose parameter values are unspecified.

    PyTorch builds it on the meta device and allocates uninitialized memory; GT has no meta
    device, so the module is built as usual (its values are then simply its default
    initialization, which is one of the values "uninitialized" allows).

    Raises:
        RuntimeError: ``module_cls`` is not a module class, or takes no ``device`` argument.
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
