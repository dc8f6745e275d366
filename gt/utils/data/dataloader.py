"""``gt.utils.data.dataloader``: ``DataLoader``, as ``torch.utils.data.dataloader``.

Batches are loaded in the calling process. With ``num_workers > 0`` each worker's code still runs
as it would in a PyTorch worker process (its own dataset copy, ``worker_init_fn``,
:func:`get_worker_info`, its own generators; batches in PyTorch's round-robin order: see
:mod:`gt.utils.data._utils.worker`); ``prefetch_factor``, ``pin_memory``, ``timeout`` and
``multiprocessing_context`` are checked as PyTorch checks them and kept. A ``TensorDataset``, or
``Subset`` of one, batched by the default ``collate_fn``, takes each batch with one indexing op per
tensor on the cluster's workers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from gt.ops.random import default_generator
from gt.utils.data._random import torch_stream
from gt.utils.data._utils.collate import default_collate, default_convert
from gt.utils.data._utils.worker import LoaderWorker, get_worker_info
from gt.utils.data.dataset import Dataset as Dataset  # (the names torch's module also holds)
from gt.utils.data.dataset import IterableDataset, Subset, TensorDataset
from gt.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class _InfiniteConstantSampler(Sampler[None]):
    """``None`` forever: the sampler of a loader over an ``IterableDataset``."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader:
    """Batches of a dataset: ``for x, y in DataLoader(TensorDataset(X, Y), batch_size=32)``.

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``, optionally
            ``__getitems__``) or an :class:`IterableDataset` (batched as its stream comes).
        batch_size: samples per batch (``None``: no batching; samples go through
            :func:`default_convert`).
        shuffle: a new random order each pass (map-style datasets only).
        sampler, batch_sampler: custom index orders (map-style datasets only).
        collate_fn: joins a list of samples into a batch (default: :func:`default_collate`).
        drop_last: drop a last, smaller batch.
        generator: a ``gt.Generator`` for the shuffle order.

    Raises:
        ValueError: the argument combinations PyTorch rejects, with its messages.
    """

    __initialized = False

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler[list] | Iterable[list] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):  # fmt: skip
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")  # fmt: skip
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing.let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset, self.num_workers, self.prefetch_factor = dataset, num_workers, prefetch_factor
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.timeout, self.worker_init_fn = timeout, worker_init_fn
        self.multiprocessing_context, self.in_order = multiprocessing_context, in_order

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")  # fmt: skip
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")  # fmt: skip
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")  # fmt: skip
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")  # fmt: skip
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")  # fmt: skip
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called: int | None = None
        self.__initialized = True

    def __setattr__(self, attr: str, value: Any) -> None:
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last",
                                           "dataset", "persistent_workers"):  # fmt: skip
            raise ValueError(
                f"{attr} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(attr, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _LoaderIter:
        if self.num_workers == 0 and self.timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        return _LoaderIter(self)

    def _start_workers(self, torch_seed: int | None = None) -> list[LoaderWorker]:
        """The workers of a new pass (none for ``num_workers=0``): new ones each pass, or the
        same ones every pass with ``persistent_workers``, seeded from a draw of ``gt``'s stream
        (or ``generator``) as PyTorch seeds its own."""
        if self.num_workers == 0:
            return []
        kept = self.__dict__.get("_persistent")
        if kept is not None:
            return kept
        base = (
            torch_seed
            if torch_seed is not None
            else (
                (self.generator or default_generator).next_seed()  # (a draw, made here)
            )
        )
        workers = [LoaderWorker(i, self.num_workers, base + i, self.dataset, self.worker_init_fn)
                   for i in range(self.num_workers)]  # fmt: skip
        if self.persistent_workers:
            self.__dict__["_persistent"] = workers
        return workers

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is not None:
            length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)  # fmt: skip
        return length


class _Stream:
    """An ``IterableDataset``'s iterator in one worker (or in the loader's process)."""

    def __init__(self, it: Iterator) -> None:
        self.it, self.ended = it, False


def _torch_base_seed(loader: DataLoader) -> int | None:
    """The base seed PyTorch's loader draws from its ``generator`` as each pass begins (and only
    the first with persistent workers) -- from a seeded generator's PyTorch-like stream, so its
    sampler's order that follows is PyTorch's too. ``None`` without one."""
    host = torch_stream(loader.generator)
    if host is None or "_persistent" in loader.__dict__:
        return None
    return host.int64()


class _LoaderIter:
    """One pass over a :class:`DataLoader`: in the calling process, or as its ``num_workers``
    workers would run it (:class:`~gt.utils.data._utils.worker.LoaderWorker`: batch ``k`` by
    worker ``k % num_workers``; an ``IterableDataset`` iterated by each, round-robin)."""

    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._index_sampler = loader._index_sampler
        self._indices = iter(self._index_sampler)
        self._len_called = loader._IterableDataset_len_called
        self._workers = loader._start_workers(_torch_base_seed(loader))
        self._turn = 0  # batches handed to workers so far
        if loader._iterable:
            if self._workers:
                for w in self._workers:
                    with w.running():
                        w.stream = _Stream(iter(w.dataset))
            else:
                self._stream = _Stream(iter(loader.dataset))
        self._active = list(self._workers)
        self._num_yielded = 0
        self._rows = _tensor_rows(loader.dataset) if loader.collate_fn is default_collate else None

    def __iter__(self) -> _LoaderIter:
        return self

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __next__(self) -> Any:
        loader = self._loader
        if self._workers:
            data = self._from_workers()
        elif loader._iterable:
            data = self._fetch_stream(next(self._indices), self._stream)
        else:
            data = self._fetch(next(self._indices), loader.dataset)
        self._num_yielded += 1
        if self._len_called is not None and self._num_yielded > self._len_called:
            warnings.warn(
                f"Length of IterableDataset {loader.dataset} was reported to be "
                f"{self._len_called}(when accessing len(dataloader)), but {self._num_yielded} "
                "samples have been fetched. ",
                stacklevel=2,
            )
        return data

    def _from_workers(self) -> Any:
        if not self._loader._iterable:
            index = next(self._indices)
            w = self._workers[self._turn % len(self._workers)]
            self._turn += 1
            with w.running():
                return self._fetch(index, w.dataset)
        while self._active:  # the next worker whose stream has not ended, in turn
            w = self._workers[self._turn % len(self._workers)]
            self._turn += 1
            if w not in self._active:
                continue
            index = next(self._indices)
            with w.running():
                try:
                    return self._fetch_stream(index, w.stream)
                except StopIteration:
                    self._active.remove(w)
        raise StopIteration

    def _fetch(self, index: Any, dataset: Any) -> Any:
        loader = self._loader
        if not loader._auto_collation:
            return loader.collate_fn(dataset[index])
        ints = _ints(index) if self._rows is not None else None
        if ints is not None:  # one indexing op per tensor, on the workers
            tensors, maps = self._rows
            index = ints
            for m in maps:
                index = [m[i] for i in index]
            key = _as_slice(index)
            if type(key) is slice and key.stop <= len(tensors[0]):
                # (a new tensor, as a collated batch is: a slice would be a view of the dataset,
                # and an in-place change of the batch would reach it)
                return [t[key].clone() for t in tensors]
            return [t[index] for t in tensors]  # (an index past the end raises, as PyTorch's)
        if callable(getattr(dataset, "__getitems__", None)):
            return loader.collate_fn(dataset.__getitems__(index))
        return loader.collate_fn([dataset[i] for i in index])

    def _fetch_stream(self, index: Any, stream: _Stream) -> Any:
        if stream.ended:
            raise StopIteration
        loader = self._loader
        if not loader._auto_collation:
            return loader.collate_fn(next(stream.it))
        batch = []
        for _ in index:
            try:
                batch.append(next(stream.it))
            except StopIteration:
                stream.ended = True
                break
        if not batch or (loader.drop_last and len(batch) < len(index)):
            raise StopIteration
        return loader.collate_fn(batch)


def _tensor_rows(dataset: Any) -> tuple[tuple, list] | None:
    """``(tensors, index maps)`` where ``dataset`` is a ``TensorDataset`` or a chain of ``Subset``
    of one (neither with its own ``__getitem__``); the maps apply outermost first."""
    maps = []
    while type(dataset).__getitem__ is Subset.__getitem__ and isinstance(dataset, Subset):
        if type(dataset).__getitems__ is not Subset.__getitems__:
            return None
        maps.append(dataset.indices)
        dataset = dataset.dataset
    if (
        isinstance(dataset, TensorDataset)
        and type(dataset).__getitem__ is TensorDataset.__getitem__
        and getattr(type(dataset), "__getitems__", None)
        is getattr(TensorDataset, "__getitems__", None)
    ):
        return dataset.tensors, maps
    return None


def _ints(index: Any) -> list[int] | None:
    """A batch of indices as Python ints (NumPy integers too), or ``None`` when it holds
    anything else (tensors, a tuple's nested keys ...): those are fetched sample by sample, as
    PyTorch fetches them, for a batch is never itself a key."""
    if type(index) is not list and type(index) is not tuple:
        return None
    out = []
    for i in index:
        if type(i) is not int:
            if not isinstance(i, np.integer):
                return None
            i = int(i)
        out.append(i)
    return out


def _as_slice(idx: list[int]) -> Any:
    """A run of consecutive indices as a slice (cheaper than an index list), else the list."""
    if (
        idx
        and idx[0] >= 0
        and idx[-1] - idx[0] == len(idx) - 1
        and all(b - a == 1 for a, b in zip(idx, idx[1:]))
    ):
        return slice(idx[0], idx[-1] + 1)
    return idx


__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]
