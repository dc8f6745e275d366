"""``gt.utils.data``: datasets, samplers and ``DataLoader`` with PyTorch's names and batching.

A ``DataLoader`` over a ``TensorDataset`` (the common case) takes each batch with one indexing op
per tensor, on the workers; other datasets are indexed per sample and collated (stacked) as
PyTorch's default ``collate_fn`` does. Shuffling draws from GT's seed (or a ``gt.Generator``), so
the order is reproducible but not PyTorch's. ``num_workers`` is accepted and ignored: loading runs
in the calling process.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from gt.factories import tensor as _tensor
from gt.ops.random import next_seed
from gt.ops.shaping import stack
from gt.tensor import Tensor


def _rng(generator: Any) -> np.random.Generator:
    return np.random.default_rng(next_seed() if generator is None else generator.next_seed())


class Dataset:
    """Base class: ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dimension."""

    def __init__(self, *tensors: Tensor):
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after another."""

    def __init__(self, datasets: Sequence[Dataset]):
        self.datasets = list(datasets)
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1]) if self.cumulative_sizes else 0

    def __getitem__(self, idx: int) -> Any:
        if idx < 0:
            idx += len(self)
        k = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = int(self.cumulative_sizes[k - 1]) if k else 0
        return self.datasets[k][idx - start]


def random_split(dataset: Dataset, lengths: Sequence[float], generator: Any = None) -> list[Subset]:
    """Split into non-overlapping random subsets of the given lengths (or fractions)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
    else:
        sizes = [int(v) for v in lengths]
    if sum(sizes) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _rng(generator).permutation(n).tolist()
    out, start = [], 0
    for size in sizes:
        out.append(Subset(dataset, order[start : start + size]))
        start += size
    return out


class Sampler:
    """Base class of index orders."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len-1``."""

    def __init__(self, data_source: Any):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per pass (or ``num_samples`` draws with replacement)."""

    def __init__(self, data_source: Any, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None):  # fmt: skip
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples

    @property
    def num_samples(self) -> int:
        """Indices per pass."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, rng = len(self.data_source), _rng(self.generator)
        if self.replacement:
            return iter(rng.integers(0, n, self.num_samples).tolist())
        order = np.concatenate([rng.permutation(n) for _ in range(-(-self.num_samples // n))])
        return iter(order[: self.num_samples].tolist())

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in random order."""

    def __init__(self, indices: Sequence[int], generator: Any = None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices[i] for i in _rng(self.generator).permutation(len(self.indices)))

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Group a sampler's indices into lists of ``batch_size``."""

    def __init__(self, sampler: Any, batch_size: int, drop_last: bool):
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate(batch: list) -> Any:
    """Stack samples into batches as PyTorch does: tensors and arrays stacked, numbers made
    tensors, tuples/lists/dicts collated field by field."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(batch)
    if isinstance(first, np.ndarray):
        return _tensor(np.stack(batch))
    if isinstance(first, float):  # Python floats batch as float64, as in PyTorch
        return _tensor(np.asarray(batch, np.float64))
    if isinstance(first, (bool, int, np.number)):
        return _tensor(np.asarray(batch))
    if isinstance(first, (str, bytes)):
        return batch
    if isinstance(first, dict):
        return {k: default_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple keeps its type
        return type(first)(*(default_collate(list(f)) for f in zip(*batch)))
    if isinstance(first, (tuple, list)):  # PyTorch returns a list for both
        return [default_collate(list(f)) for f in zip(*batch)]
    return batch


class DataLoader:
    """Batches of a dataset: ``for x, y in DataLoader(TensorDataset(X, Y), batch_size=32)``.

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``).
        batch_size: samples per batch (``None``: no batching).
        shuffle: a new random order each pass.
        sampler, batch_sampler: custom index orders (as in PyTorch).
        collate_fn: joins a list of samples into a batch (default: :func:`default_collate`).
        drop_last: drop a last, smaller batch.
        generator: a ``gt.Generator`` for the shuffle order.
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Any = None,
                 generator: Any = None, **_: Any):  # fmt: skip
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.generator = num_workers, generator
        self.collate_fn = collate_fn
        if sampler is None:
            if shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler

    def __iter__(self) -> Iterator[Any]:
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.dataset[i]
            return
        fast = isinstance(self.dataset, TensorDataset) and self.collate_fn is None
        for idx in self.batch_sampler:
            if fast:  # one indexing op per tensor, on the workers
                key: Any = _as_slice(idx)
                yield [t[key] for t in self.dataset.tensors]
            else:
                yield (self.collate_fn or default_collate)([self.dataset[i] for i in idx])

    def __len__(self) -> int:
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)


def _as_slice(idx: list[int]) -> Any:
    """A run of consecutive indices as a slice (cheaper than an index list), else the list."""
    if idx and idx[-1] - idx[0] == len(idx) - 1 and all(b - a == 1 for a, b in zip(idx, idx[1:])):
        return slice(idx[0], idx[-1] + 1)
    return idx


__all__ = [
    "BatchSampler",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "default_collate",
    "random_split",
]
