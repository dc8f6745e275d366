"""``gt.random``: PyTorch's ``torch.random`` (the global generator's seed and state, ``fork_rng``).

Every name works on GT's one global stream (:mod:`gt.ops.random`), the one ``gt.manual_seed``
seeds and ``gt.default_generator`` stands for. GT's random numbers are made on the workers from
seeds the client picks, so the state is the client's: saving and restoring it needs no
connection, and device generators have no state apart from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gt.ops import random as _random
from gt.ops.random import Generator, default_generator
from gt.settings import get_rng_state, initial_seed, rng_bytes, set_rng_state
from gt.utils.data._utils.worker import get_worker_info


def manual_seed(seed: int) -> Generator:
    """Seed the global stream; returns ``gt.default_generator``, as PyTorch's returns its own."""
    _random.manual_seed(seed)
    return default_generator


def seed() -> int:
    """Seed the global stream from the system's entropy; returns the seed."""
    return default_generator.seed()


@contextlib.contextmanager
def fork_rng(
    devices: Any = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: Any = None,
) -> Iterator[None]:
    """Restore the global stream's state on exit, so what the block draws leaves the draws after
    it unchanged. ``devices`` and ``device_type`` are accepted: GT's device generators are this
    same stream (``enabled=False`` forks nothing)."""
    if device_type == "meta" or not enabled:
        yield
        return
    if devices is not None:
        devices = list(devices)  # (a generator of ids is read once, as PyTorch reads it)
    state = rng_bytes()  # (bytes, not a tensor: forking costs no upload or fetch)
    try:
        yield
    finally:
        set_rng_state(state)


def thread_safe_generator() -> Generator | None:
    """The thread ``DataLoader`` worker's generator; None elsewhere, which is where GT loads."""
    info = get_worker_info()
    rng = getattr(info, "rng", None)
    return getattr(rng, "torch_generator", None) if rng is not None else None


__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng",
           "thread_safe_generator"]  # fmt: skip
