"""``gt.cuda``: what ported code asks ``torch.cuda``, answered for GT.

GT's tensors are not CUDA tensors of the user's process: the cluster decides where data lives (a
worker's GPU, with CuPy, or its CPU), and ``.cuda()`` / ``.to("cuda")`` are accepted and ignored.
So ``is_available()`` is False and ``device_count()`` 0, which keeps ported code on its portable
path; the seeding functions do nothing (GT has one seed stream: ``gt.manual_seed``) and
``synchronize()`` waits for the cluster.
"""

from __future__ import annotations

from typing import Any

from gt.amp import DeviceAmp
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


__all__ = [
    "amp",
    "device_count",
    "empty_cache",
    "is_available",
    "is_bf16_supported",
    "manual_seed",
    "manual_seed_all",
    "synchronize",
]
