"""``gt.utils.data``: datasets, samplers and ``DataLoader`` with PyTorch's names and batching.

Laid out as ``torch.utils.data`` (``dataset``, ``sampler``, ``distributed``, ``dataloader`` and
``_utils.collate``), so ``from gt.utils.data.sampler import Sampler`` works as with torch.

A ``DataLoader`` over a ``TensorDataset`` (or a ``Subset`` of one) takes each batch with one
indexing op per tensor, on the workers; other datasets are indexed per sample (or per batch, with
``__getitems__``) and collated as PyTorch's default ``collate_fn`` does. Loading runs in the
calling process; with ``num_workers`` each worker's code runs as in a PyTorch worker (its dataset
copy, ``worker_init_fn``, :func:`get_worker_info`, its own generators, PyTorch's batch order).

Random orders (shuffling, ``RandomSampler``, ``SubsetRandomSampler``, ``WeightedRandomSampler``,
``random_split``) draw from GT's seed or a ``gt.Generator``: reproducible, not PyTorch's numbers.
``DistributedSampler``'s shuffle depends only on ``seed + epoch`` and gives PyTorch's exact order.
"""

from __future__ import annotations

from gt.utils.data import dataloader, dataset, distributed, sampler
from gt.utils.data._utils.collate import default_collate, default_convert
from gt.utils.data._utils.worker import get_worker_info
from gt.utils.data.dataloader import DataLoader
from gt.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from gt.utils.data.distributed import DistributedSampler
from gt.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "dataloader",
    "dataset",
    "default_collate",
    "default_convert",
    "distributed",
    "get_worker_info",
    "random_split",
    "sampler",
]
