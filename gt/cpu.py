"""``gt.cpu``: what ported code asks ``torch.cpu`` (its ``amp`` above all)."""

from __future__ import annotations

import sys
from typing import Any

from gt.amp import DeviceAmp
from gt.factories import sync

#: ``torch.cpu.amp``: ``autocast(enabled, dtype)`` for the "cpu" device type (bfloat16).
amp = DeviceAmp("cpu")


def is_available() -> bool:
    """True, as PyTorch's."""
    return True


def device_count() -> int:
    """1, as PyTorch's."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def synchronize(device: Any = None) -> None:
    """Wait until every op issued so far has run (``gt.sync()``)."""
    sync()


# ``from torch.cpu.amp import autocast``
sys.modules.setdefault(f"{__name__}.amp", amp)  # type: ignore[arg-type]

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]
