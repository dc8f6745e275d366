"""``gt.cuda``: what ported code asks ``torch.cuda``, answered for GT.

GT's tensors are not CUDA tensors of the user's process: the cluster decides where data lives (a
worker's GPU, with CuPy, or its CPU), and ``.cuda()`` / ``.to("cuda")`` are accepted and ignored.
So ``is_available()`` is False and ``device_count()`` 0, which keeps ported code on its portable
path; the seeding functions do nothing (GT has one seed stream: ``gt.manual_seed``) and
``synchronize()`` waits for the cluster.
"""

from __future__ import annotations

import sys
from typing import Any

from gt.amp import DeviceAmp
from gt.errors import OutOfMemory
from gt.factories import sync

#: ``torch.cuda.amp``: ``autocast(enabled, dtype)`` for the "cuda" device type, its ``GradScaler``.
amp = DeviceAmp("cuda")


def is_available() -> bool:
    """False: no CUDA device belongs to this process (GT's workers choose their own devices)."""
    return False


def device_count() -> int:
    """0 (see :func:`is_available`)."""
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored (GT's random numbers come from ``gt.manual_seed``'s stream)."""


manual_seed_all = manual_seed


def synchronize(device: Any = None) -> None:
    """Wait until every op issued so far has run (``gt.sync()``)."""
    sync()


def empty_cache() -> None:
    """Nothing to do: workers manage their own memory pools."""


def is_bf16_supported() -> bool:
    """False."""
    return False


def is_initialized() -> bool:
    """False: this process never initialises CUDA."""
    return False


def memory_allocated(device: Any = None) -> int:
    """0, as PyTorch's without a CUDA device (a worker's memory: ``gt top``, ``gt.memory``)."""
    return 0


memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated


def seed() -> None:
    """Accepted and ignored, as :func:`manual_seed`."""


def get_arch_list() -> list[str]:
    """``[]``: no CUDA architectures in this process."""
    return []


class device:  # noqa: N801 - PyTorch's name
    """``with torch.cuda.device(i):``: accepted, no effect (GT's workers own their devices)."""

    def __init__(self, device: Any):
        self.idx = device

    def __enter__(self) -> device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


#: ``torch.cuda.OutOfMemoryError``: GT's (a worker's memory limit).
OutOfMemoryError = OutOfMemory

# ``from torch.cuda.amp import autocast, GradScaler`` (older training scripts' spelling)
sys.modules.setdefault(f"{__name__}.amp", amp)  # type: ignore[arg-type]


__all__ = [
    "OutOfMemoryError",
    "amp",
    "device",
    "get_arch_list",
    "is_initialized",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "seed",
    "device_count",
    "empty_cache",
    "is_available",
    "is_bf16_supported",
    "manual_seed",
    "manual_seed_all",
    "synchronize",
]
