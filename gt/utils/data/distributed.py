"""``gt.utils.data.distributed``: ``DistributedSampler``, as ``torch.utils.data.distributed``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from gt.utils.data._random import torch_randperm
from gt.utils.data.sampler import Sampler


class DistributedSampler(Sampler[int]):
    """The share of the dataset's indices that replica ``rank`` of ``num_replicas`` reads: every
    ``num_replicas``-th index of one order, starting at ``rank``.

    Without ``drop_last`` the order is padded by repeating its start, so every replica gets
    ``ceil(len / num_replicas)`` indices; with it, the tail that does not divide evenly is dropped.
    ``shuffle`` permutes by ``seed + epoch`` (call :meth:`set_epoch` each epoch) with PyTorch's own
    CPU ``randperm``, so every replica, and PyTorch, sees the same order.

    ``num_replicas`` and ``rank`` default to the group's (:mod:`gt.distributed`: a world of 1).
    """

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):  # fmt: skip
        if num_replicas is None or rank is None:
            from gt import distributed  # noqa: PLC0415 - (a leaf: nothing of gt.utils imports it)

            if not distributed.is_initialized():
                raise ValueError(
                    "Default process group has not been initialized, please make sure to call "
                    "init_process_group."
                )
            num_replicas = distributed.get_world_size() if num_replicas is None else num_replicas
            rank = distributed.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / len(indices)))[:pad] if pad else []
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch, mixed into the shuffle's seed: a new order per epoch, the same on every
        replica."""
        self.epoch = epoch


__all__ = ["DistributedSampler"]
