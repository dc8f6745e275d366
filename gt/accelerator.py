"""``gt.accelerator``: what ported code asks ``torch.accelerator``, answered for GT.

PyTorch's tutorials now pick their device with ``torch.accelerator.current_accelerator().type if
torch.accelerator.is_available() else "cpu"``. As with :mod:`gt.cuda`, no accelerator belongs to the
user's process (the cluster places data on its workers' devices), so there is none to report:
``is_available()`` is False, ``current_accelerator()`` None and ``device_count()`` 0, which keeps
ported code on its CPU path; ``synchronize()`` waits for the cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gt.factories import sync


def is_available() -> bool:
    """False: no accelerator belongs to this process (GT's workers choose their own devices)."""
    return False


def current_accelerator(check_available: bool = False) -> Any:
    """None, as PyTorch answers on a machine without an accelerator."""
    return None


def device_count() -> int:
    """0 (see :func:`is_available`)."""
    return 0


_NONE = "Cannot access accelerator device when none is available."


def current_device_index() -> int:
    """Raises RuntimeError, as PyTorch does when there is no accelerator."""
    raise RuntimeError(_NONE)


def set_device_index(device: Any) -> None:
    """Raises RuntimeError, as PyTorch does when there is no accelerator."""
    raise RuntimeError(_NONE)


current_device_idx = current_device_index
set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device: Any) -> Iterator[None]:
    """A context that changes nothing for ``None``; any index raises (there is no device)."""
    if device is not None:
        raise RuntimeError(_NONE)
    yield


def synchronize(device: Any = None) -> None:
    """Wait until every op issued so far has run (``gt.sync()``)."""
    sync()


__all__ = [
    "current_accelerator",
    "current_device_idx",
    "current_device_index",
    "device_count",
    "device_index",
    "is_available",
    "set_device_idx",
    "set_device_index",
    "synchronize",
]
