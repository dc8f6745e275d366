"""``get_worker_info``: which ``DataLoader`` worker is running, as in PyTorch.

GT's ``DataLoader`` loads every batch in the calling process whatever ``num_workers`` is, so there
is never a worker and :func:`get_worker_info` always returns ``None`` (an ``IterableDataset`` that
shards itself by worker then yields its whole stream once, as PyTorch does with ``num_workers=0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker knows about itself (PyTorch's fields; GT never makes one)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: str | None = "multiprocessing"


def get_worker_info() -> WorkerInfo | None:
    """The current ``DataLoader`` worker's :class:`WorkerInfo`; ``None`` in the main process,
    which is where GT always loads."""
    return None


__all__ = ["WorkerInfo", "get_worker_info"]
