"""``gt.nn.parallel``: ``DataParallel`` and ``DistributedDataParallel`` as pass-throughs.

GT spreads a program's work over its workers itself (shard configs, ``gt.signal``), and a GT
program is one process (``gt.distributed`` is a group of one), so both wrappers call their module
and change nothing else: the same parameters, the same gradients, ``.module`` for the wrapped one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gt.nn.legacy_layers import DataParallel
from gt.nn.module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


class DistributedDataParallel(Module):
    """Calls ``module``; there are no other replicas to average gradients with.

    Args:
        module: the wrapped module (``self.module``).
        device_ids, output_device, broadcast_buffers, process_group, bucket_cap_mb,
            find_unused_parameters, gradient_as_bucket_view, static_graph: PyTorch's arguments,
            kept and unused.
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, process_group: Any = None,
                 bucket_cap_mb: Any = None, find_unused_parameters: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 **_: Any) -> None:  # fmt: skip
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim, self.process_group = output_device, dim, process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters, self.static_graph = find_unused_parameters, static_graph

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradient accumulation without synchronising: there is nothing to synchronise."""
        yield

    @contextlib.contextmanager
    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False) -> Iterator[None]:  # fmt: skip
        """Uneven inputs across ranks: there is one rank."""
        yield

    def register_comm_hook(self, state: Any, hook: Any) -> None:
        """Accepted: there are no gradient buckets to communicate."""

    def _set_static_graph(self) -> None:
        self.static_graph = True
