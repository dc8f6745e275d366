"""Grad mode: whether ops are recorded for backward in this thread (``no_grad``,
``enable_grad``, ``set_grad_enabled``, ``inference_mode``). Re-exported by :mod:`gt.autograd`."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any


class _GradMode(threading.local):
    enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    """Whether ops are being recorded for backward in this thread."""
    return _mode.enabled


def _decorated(fn: Callable, context: Callable[[], Any]) -> Callable:
    """``fn`` run inside a fresh ``context()`` at each call (the decorator form of a mode); a
    generator function's body runs inside it at each step (and not while its caller runs), as
    PyTorch's decorators do for generation loops."""
    if inspect.isgeneratorfunction(fn):
        return functools.wraps(fn)(_stepwise(fn, context))

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with context():
            return fn(*args, **kwargs)

    wrapper.__name__ = getattr(fn, "__name__", "wrapper")
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _stepwise(fn: Callable, context: Callable[[], Any]) -> Callable:
    """A generator function that drives ``fn``'s generator, each step inside ``context()``."""

    def steps(*args: Any, **kwargs: Any) -> Any:
        inner = fn(*args, **kwargs)
        try:
            with context():
                value = next(inner)
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    with context():
                        inner.close()
                    raise
                except BaseException as exc:  # (thrown in by the caller: thrown on, inside)
                    with context():
                        value = inner.throw(exc)
                else:
                    with context():
                        value = inner.send(sent)
        except StopIteration as done:
            return done.value

    return steps


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
        return _decorated(fn, lambda: set_grad_enabled(self.mode))


class _BareDecorator(set_grad_enabled):
    """A grad mode that also decorates without parentheses (``@gt.no_grad``)."""

    def __new__(cls, fn: Callable | None = None) -> Any:
        self = object.__new__(cls)
        if fn is None:
            return self
        self.__init__()  # used as @gt.no_grad, without parentheses: decorate fn now
        return self(fn)


class no_grad(_BareDecorator):
    """Context manager (or decorator) in which no op is recorded for backward.

    Example:
        >>> with gt.no_grad():
        ...     w -= 0.1 * w.grad
    """

    def __init__(self, fn: Callable | None = None) -> None:
        self.prev = _mode.enabled
        self.mode = False

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = False


#: Threads now inside ``inference_mode(True)``: tensors made there are inference tensors. Empty
#: almost always, so checking it costs a tensor's creation next to nothing.
INFERENCE_THREADS: set[int] = set()


#: Non-empty once this process has entered ``inference_mode``: only then can a tensor be an
#: inference tensor, which autograd must refuse to save (a check skipped until then).
INFERENCE_USED: list = []


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``inference_mode(True)``."""
    return threading.get_ident() in INFERENCE_THREADS


class inference_mode(set_grad_enabled):
    """PyTorch's ``inference_mode``: no op is recorded for backward, and the tensors made inside
    are inference tensors (``x.is_inference()``). ``inference_mode(False)`` turns it off again
    (recording on), as in PyTorch. A context manager, or a decorator with or without ``()``.

    Args:
        mode: ``True`` (the default) to enter inference mode, ``False`` to leave it.
    """

    def __new__(cls, mode: Any = True) -> Any:
        self = object.__new__(cls)
        if callable(mode) and not isinstance(mode, bool):  # @gt.inference_mode, no parentheses
            self.__init__()
            return self(mode)
        return self

    def __init__(self, mode: Any = True) -> None:
        self.prev = _mode.enabled
        self.mode = not bool(mode)  # the grad mode inside
        self.inference = bool(mode)
        self.prev_inference = False

    def __enter__(self) -> None:
        me = threading.get_ident()
        self.prev, self.prev_inference = _mode.enabled, me in INFERENCE_THREADS
        _mode.enabled = self.mode
        if self.inference:
            INFERENCE_THREADS.add(me)
            INFERENCE_USED[:] = [True]
        else:
            INFERENCE_THREADS.discard(me)

    def __exit__(self, *exc: Any) -> None:
        _mode.enabled = self.prev
        if self.prev_inference:
            INFERENCE_THREADS.add(threading.get_ident())
        else:
            INFERENCE_THREADS.discard(threading.get_ident())

    def __call__(self, fn: Callable) -> Callable:
        return _decorated(fn, lambda: inference_mode(self.inference))


class enable_grad(_BareDecorator):
    """Context manager (or decorator, with or without ``()``) that turns recording back on
    inside :class:`no_grad`."""

    def __init__(self, fn: Callable | None = None) -> None:
        self.prev = _mode.enabled
        self.mode = True

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = True
