"""Settings of PyTorch's autograd engine that GT has as flags: ``set_multithreading_enabled``
(PyTorch runs a device's backward on a thread of its own; GT's walk is on the calling thread
either way and its instructions run on the workers, so the flag changes nothing but what
``is_multithreading_enabled`` says) and ``is_view_replay_enabled`` (always ``False``: GT derives
views' gradients from the view ops themselves)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt.grad_mode import _decorated

__all__ = ["is_multithreading_enabled", "is_view_replay_enabled", "set_multithreading_enabled"]

_multithreading = [True]


def is_multithreading_enabled() -> bool:
    """Whether the backward pass may run on threads of its own (the default: ``True``)."""
    return _multithreading[0]


def is_view_replay_enabled() -> bool:
    """Whether autograd replays view ops for views' gradients (``False``, as by default in
    PyTorch)."""
    return False


class set_multithreading_enabled:  # noqa: N801 - PyTorch's name
    """Turn the multithreaded backward on or off: as a context manager, a decorator, or a plain
    call (which sets it until changed again).

    Args:
        mode: ``True`` to allow it, ``False`` not to.
    """

    def __init__(self, mode: bool) -> None:
        self.prev = _multithreading[0]
        self.mode = bool(mode)
        _multithreading[0] = self.mode

    def __enter__(self) -> None:
        _multithreading[0] = self.mode

    def __exit__(self, *exc: Any) -> None:
        _multithreading[0] = self.prev

    def __call__(self, fn: Callable) -> Callable:
        _multithreading[0] = self.prev  # used as a decorator: undo the switch made by __init__
        return _decorated(fn, lambda: set_multithreading_enabled(self.mode))

    def clone(self) -> set_multithreading_enabled:
        """A fresh context with the same mode (as PyTorch's)."""
        return self.__class__(self.mode)
