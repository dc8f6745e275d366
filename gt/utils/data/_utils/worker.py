"""``DataLoader`` workers, as PyTorch's behave, run in the calling process.

PyTorch's ``num_workers=N`` starts N processes; each holds its own copy of the dataset, calls
``worker_init_fn(id)`` once, seeds its own ``random``, NumPy and torch generators, sees a
:class:`WorkerInfo` from :func:`get_worker_info`, and takes every N-th batch (an
``IterableDataset`` is iterated once per worker, each batching its own stream, and the batches come
round-robin). GT's tensors live on its cluster's workers already, so a loader gains nothing from
processes of its own: :class:`LoaderWorker` gives each worker's code what it would see there (its
own dataset copy, its info, its generators' states, kept apart from the program's) while it runs in
the calling process, so batches come in PyTorch's order and a dataset that shards itself by worker
yields what it yields there.
"""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gt.ops import random as _random
from gt.settings import rng_bytes, set_rng_state


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker knows about itself (PyTorch's fields)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: str | None = "multiprocessing"


_current: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The current ``DataLoader`` worker's :class:`WorkerInfo` (inside a dataset's methods and
    ``worker_init_fn`` while a loader with ``num_workers > 0`` runs them); ``None`` elsewhere."""
    return _current


class LoaderWorker:
    """One worker of a loader: its dataset copy, info and generator states (see the module doc).

    Args:
        wid, num_workers: its id and how many there are.
        seed: its seed (the loader's base seed plus ``wid``, as PyTorch's).
        dataset: the loader's dataset (copied: what a worker changes in it stays its own).
        init_fn: the loader's ``worker_init_fn``, called once inside the worker.
    """

    def __init__(self, wid: int, num_workers: int, seed: int, dataset: Any, init_fn: Any) -> None:
        self.dataset = copy.copy(dataset)
        self.info = WorkerInfo(wid, num_workers, seed, self.dataset)
        saved = _states()
        try:
            random.seed(seed)
            np.random.seed(seed % 2**32)
            _random.manual_seed(seed)
            self.states = (random.getstate(), np.random.get_state(), rng_bytes())
        finally:
            _restore(saved)
        self.stream: Iterator | None = None  # an IterableDataset's iterator in this worker
        if init_fn is not None:
            with self.running():
                init_fn(wid)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Run the block as this worker: its info and generators; the program's come back after."""
        global _current
        saved = (_states(), _current)
        _restore(self.states)
        _current = self.info
        try:
            yield
        finally:
            self.states = _states()
            _restore(saved[0])
            _current = saved[1]


def _states() -> tuple:
    return random.getstate(), np.random.get_state(), rng_bytes()


def _restore(states: tuple) -> None:
    random.setstate(states[0])
    np.random.set_state(states[1])
    set_rng_state(states[2])


__all__ = ["LoaderWorker", "WorkerInfo", "get_worker_info"]
