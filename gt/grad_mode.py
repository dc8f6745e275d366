"""Grad mode: whether ops are recorded for backward in this thread (``no_grad``,
``enable_grad``, ``set_grad_enabled``, ``inference_mode``). Re-exported by :mod:`gt.autograd`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class _GradMode(threading.local):
    enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    """Whether ops are being recorded for backward in this thread."""
    return _mode.enabled


class set_grad_enabled:
    """Turn recording on or off, as a context manager, a decorator, or a plain call.

    Args:
        mode: ``True`` to record ops for backward, ``False`` not to.
    """

    def __init__(self, mode: bool):
        self.prev = _mode.enabled
        self.mode = bool(mode)
        _mode.enabled = self.mode

    def __enter__(self) -> None:
        _mode.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        _mode.enabled = self.prev

    def __call__(self, fn: Callable) -> Callable:
        _mode.enabled = self.prev  # used as a decorator: undo the switch made by __init__

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(self.mode):
                return fn(*args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        wrapper.__doc__ = fn.__doc__
        return wrapper


class no_grad(set_grad_enabled):
    """Context manager (or decorator) in which no op is recorded for backward.

    Example:
        >>> with gt.no_grad():
        ...     w -= 0.1 * w.grad
    """

    def __new__(cls, fn: Callable | None = None) -> Any:
        self = object.__new__(cls)
        if fn is None:
            return self
        self.__init__()  # used as @gt.no_grad, without parentheses: decorate fn now
        return self(fn)

    def __init__(self, fn: Callable | None = None) -> None:
        self.prev = _mode.enabled
        self.mode = False

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = False


class inference_mode(no_grad):
    """PyTorch's ``inference_mode``: in GT, the same as :class:`no_grad`."""


class enable_grad(set_grad_enabled):
    """Context manager (or decorator) that turns recording back on inside :class:`no_grad`."""

    def __init__(self) -> None:
        self.prev = _mode.enabled
        self.mode = True

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = True
