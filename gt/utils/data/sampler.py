"""``gt.utils.data.sampler``: index orders for a ``DataLoader``, as ``torch.utils.data.sampler``.

The random samplers draw from a ``gt.Generator`` (``generator=``) or GT's global seed: the same
seed gives the same order every run. A generator seeded with ``manual_seed`` gives PyTorch's
orders (:mod:`gt.utils.data._random`); GT's global seed does not (PyTorch's comes from its own RNG).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from gt.factories import tensor
from gt.tensor import Tensor
from gt.utils.data._random import _SMALL_N, rng, torch_stream

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base class of index orders: ``__iter__`` (and, for ``len(loader)``, ``__len__``)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A random permutation per pass (``num_samples`` beyond the length continue with new
    permutations), or ``num_samples`` independent draws with ``replacement=True``."""

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None):  # fmt: skip
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                "num_samples should be a positive integer value, "
                f"but got num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        """Indices per pass (default: the length of ``data_source``)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        host = torch_stream(self.generator)
        if host is not None and n < _SMALL_N:  # (PyTorch's draws, in PyTorch's chunks)
            if self.replacement:
                for _ in range(self.num_samples // 32):
                    yield from host.randint(n, 32)
                yield from host.randint(n, self.num_samples % 32)
                return
            for _ in range(self.num_samples // n):
                yield from host.randperm(n)
            yield from host.randperm(n)[: self.num_samples % n]
            return
        draws = rng(self.generator)
        if self.replacement:
            yield from draws.integers(0, n, self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from draws.permutation(n).tolist()
        yield from draws.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order (a ``gt.Tensor`` of indices is kept as a list)."""

    def __init__(self, indices: Sequence[int], generator: Any = None):
        self.indices = indices.tolist() if isinstance(indices, Tensor) else indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        n, host = len(self.indices), torch_stream(self.generator)
        order = (host.randperm(n) if host is not None and n < _SMALL_N
                 else rng(self.generator).permutation(n).tolist())  # fmt: skip
        for i in order:
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``, as
    ``torch.multinomial``: with replacement, or without (each index at most once; indices of
    weight 0 come only after every positive one is taken).

    ``weights`` is kept as a float64 ``gt.Tensor`` (made on first access); the draws run on the
    host from ``generator`` (PyTorch's indices for one seeded with ``manual_seed``) or GT's
    global seed.
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None):  # fmt: skip
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        self._weights_np = _host_float64(weights)
        self._weights: Tensor | None = weights if _is_f64_vector(weights) else None
        if self._weights_np.ndim != 1:
            raise ValueError(
                "weights should be a 1d sequence but given "
                f"weights have shape {tuple(self._weights_np.shape)}"
            )
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    @property
    def weights(self) -> Tensor:
        """The weights as a float64 tensor."""
        if self._weights is None:
            self._weights = tensor(self._weights_np)
        return self._weights

    @weights.setter
    def weights(self, value: Any) -> None:
        self._weights_np = _host_float64(value)
        self._weights = value if _is_f64_vector(value) else None

    def __iter__(self) -> Iterator[int]:
        yield from _multinomial(self._weights_np, self.num_samples, self.replacement,
                                self.generator)  # fmt: skip

    def __len__(self) -> int:
        return self.num_samples


def _host_float64(values: Any) -> np.ndarray:
    if isinstance(values, Tensor):
        values = values.detach().numpy()
    return np.array(values, dtype=np.float64)


def _is_f64_vector(values: Any) -> bool:
    return isinstance(values, Tensor) and str(values.dtype).endswith("float64")


def _multinomial(w: np.ndarray, k: int, replacement: bool, generator: Any) -> list:
    """``torch.multinomial(w, k, replacement, generator=generator)``'s checks and distribution,
    on the host: PyTorch's draws for a seeded generator, GT's own otherwise."""
    if not replacement and k > w.shape[0]:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    if not (w >= 0).all():  # (NaN fails this test too, as in PyTorch)
        raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
    if np.isinf(w).any():
        raise RuntimeError(
            "invalid multinomial distribution (encountering probability entry = infinity or NaN)"
        )
    total = w.sum()
    if not total > 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    host = torch_stream(generator)
    if host is not None:
        return host.multinomial(w, k, replacement)
    draws = rng(generator)
    if replacement:
        return draws.choice(w.shape[0], size=k, p=w / total).tolist()
    # the largest w / Exp(1) keys: a draw without replacement, zero weights last (as PyTorch)
    keys = w / draws.exponential(size=w.shape[0])
    return np.argsort(-keys, kind="stable")[:k].tolist()


class BatchSampler(Sampler[list[int]]):
    """Group a sampler's indices into lists of ``batch_size`` (the last one shorter, or dropped
    with ``drop_last``)."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]
