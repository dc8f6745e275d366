"""Signals: names for parts of a program that a shard config can place.

>>> with gt.signal.context("layer1"):
...     h = (x @ w1).relu()               # placed by the config's rule for "layer1"
>>> with gt.signal.context("layer2", backward="layer2_bwd"):
...     y = h @ w2                          # its gradients follow the rule for "layer2_bwd"
>>> gt.signal.tensor(w1, "layer1")        # put one existing tensor where "layer1" says

Instructions made inside a context carry the signal's interned id; the dispatcher looks the name up
in its config (see :mod:`gt.config`). A signal the config does not name changes nothing, and with
no config every annotation is ignored: the program gives the same results on one worker.
"""

from __future__ import annotations

import threading
from typing import Any

from gt.runtime import ops as O
from gt.runtime.client import connection as _client

_PLACE = O.OPCODE["place"]
_depth_lock = threading.Lock()

#: A signal key as it travels: ``(name, backward_name_or_None, is_backward)``.
SignalKey = tuple


def _enter(key: SignalKey) -> Any:
    with _depth_lock:
        _client.SIGNAL_DEPTH += 1
    return _client.SIGNAL.set(key)


def _exit(token: Any) -> None:
    _client.SIGNAL.reset(token)
    with _depth_lock:
        _client.SIGNAL_DEPTH -= 1


class context:  # noqa: N801 - used like a function: ``with gt.signal.context("layer1"):``
    """Tag every instruction made inside the ``with`` block with a signal.

    Args:
        name: the signal's name (a key of the shard config).
        backward: the signal whose rule places this block's gradients; default: the config's
            ``backward`` entry for ``name``, else the gradients follow their inputs.

    Contexts nest; the innermost one wins. They are per thread (and per asyncio task).
    """

    def __init__(self, name: str, backward: str | None = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a signal name is a non-empty string, got {name!r}")
        if backward is not None and (not isinstance(backward, str) or not backward):
            raise ValueError(f"backward names a signal (a non-empty string), got {backward!r}")
        self.key: SignalKey = (name, backward, False)
        self._tokens: list = []

    def __enter__(self) -> context:
        self._tokens.append(_enter(self.key))
        return self

    def __exit__(self, *exc: Any) -> None:
        _exit(self._tokens.pop())


class _Backward:
    """The context that autograd enters while it computes the gradients of a signal's ops."""

    def __init__(self, key: SignalKey | None):
        self.key = None if key is None else (key[0], key[1], True)
        self._token: Any = None

    def __enter__(self) -> None:
        if self.key is not None:
            self._token = _enter(self.key)

    def __exit__(self, *exc: Any) -> None:
        if self._token is not None:
            _exit(self._token)
            self._token = None


def current() -> SignalKey | None:
    """The innermost active signal key ``(name, backward, is_backward)``, or ``None``."""
    return _client.SIGNAL.get() if _client.SIGNAL_DEPTH else None


def capture() -> SignalKey | None:
    """What autograd stores with a recorded op: the signal active when it was made."""
    return _client.SIGNAL.get() if _client.SIGNAL_DEPTH else None


def backward_context(key: SignalKey | None) -> _Backward:
    """Enter around the derivative rule of an op recorded under ``key`` (from :func:`capture`)."""
    return _Backward(key)


def tensor(t: Any, name: str) -> Any:
    """Place an existing tensor by the rule of signal ``name`` (e.g. shard a weight); returns it.

    The move happens on the workers, in program order; without a config (or a rule for ``name``)
    the tensor stays where it is.
    """
    conn = getattr(t, "_conn", None)
    if conn is None or getattr(t, "id", None) is None:
        raise TypeError(f"gt.signal.tensor expects a gt.Tensor, got {type(t).__name__}")
    with context(name):
        conn.emit(_PLACE, t.id, [t.id], {"shape": list(t.shape), "dtype": t.dtype})
    return t


__all__ = ["backward_context", "capture", "context", "current", "tensor"]
