"""``gt.distributed``: PyTorch's process-group API for the one process a GT program is.

GT places work itself: one program (one process) drives every worker of its cluster, and a shard
config spreads its tensors over them (``gt.signal``, the README's "Signals and sharding"). So the
data-parallel scaffolding of a ported script -- ``init_process_group``, ``get_rank``,
``all_reduce`` of gradients, ``DistributedDataParallel``, ``DistributedSampler`` -- runs here as
a group of one: rank 0 of a world of 1, where every collective leaves its tensors as they are
(the sum, mean, maximum ... of one contribution) and ``barrier`` returns at once.

A launch with several processes (``torchrun --nproc-per-node 4``: ``WORLD_SIZE`` > 1) is refused
with a clear error rather than run four independent programs that each think they average
gradients with the others.
"""

from __future__ import annotations

import os
from enum import Enum
from typing import Any

__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "barrier",
    "broadcast", "broadcast_object_list", "destroy_process_group", "gather", "gather_object",
    "get_backend", "get_rank", "get_world_size", "init_process_group", "is_available",
    "is_initialized", "is_torchelastic_launched", "new_group", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "scatter_object_list",
]  # fmt: skip


class ReduceOp(Enum):
    """How a collective combines contributions (with one contribution, each leaves it as it is)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"


class Backend(str):
    """Backend names (``"gloo"``, ``"nccl"`` ...): accepted; GT's own transport is used."""

    GLOO, NCCL, MPI, UCC, GT = "gloo", "nccl", "mpi", "ucc", "gt"


class ProcessGroup:
    """A group of processes: here, always the one process (rank 0)."""

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1


class GroupMember:
    """``GroupMember.WORLD``: the default group."""

    WORLD = ProcessGroup()
    NON_GROUP_MEMBER = None


class Work:
    """What an ``async_op=True`` collective returns: already complete."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


_state: dict[str, Any] = {"backend": None}


def is_available() -> bool:
    """True: the API is here (as a group of one)."""
    return True


def is_initialized() -> bool:
    """Whether :func:`init_process_group` was called (and not destroyed since)."""
    return _state["backend"] is not None


def is_torchelastic_launched() -> bool:
    """Whether ``torchrun`` started this process (its ``TORCHELASTIC_RUN_ID`` is set)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def init_process_group(backend: Any = None, init_method: Any = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, store: Any = None,
                       group_name: str = "", pg_options: Any = None, device_id: Any = None,
                       **_: Any) -> None:  # fmt: skip
    """Join the default group: rank 0 of a world of 1.

    Raises:
        RuntimeError: a world of several processes was asked for (argument or ``WORLD_SIZE``),
            or it is initialized already.
    """
    if is_initialized():
        raise RuntimeError("trying to initialize the default process group twice!")
    size = world_size if world_size != -1 else int(os.environ.get("WORLD_SIZE", "1"))
    me = rank if rank != -1 else int(os.environ.get("RANK", "0"))
    if size != 1 or me != 0:
        raise RuntimeError(
            f"gt.distributed: a world of {size} processes (this one rank {me}) was asked for, "
            "but a GT program is one process: it drives every worker of its cluster itself. Run "
            "the script once (python train.py, not torchrun) and spread the work with a shard "
            "config (gt.load_config, GT_AUTO_SHARD=1); see the README's 'Signals and sharding'."
        )
    _state["backend"] = str(backend or "gt")


def destroy_process_group(group: Any = None) -> None:
    """Leave the default group."""
    _state["backend"] = None


def _check(op: str) -> None:
    if not is_initialized():
        raise ValueError(
            f"{op}: Default process group has not been initialized, please make sure to call "
            "init_process_group."
        )


def get_rank(group: Any = None) -> int:
    """0: the only process."""
    _check("get_rank")
    return 0


def get_world_size(group: Any = None) -> int:
    """1: the only process."""
    _check("get_world_size")
    return 1


def get_backend(group: Any = None) -> str:
    """The backend name given to :func:`init_process_group` (``"gt"`` by default)."""
    _check("get_backend")
    return _state["backend"]


def new_group(
    ranks: Any = None, timeout: Any = None, backend: Any = None, **_: Any
) -> ProcessGroup:
    """A group of the given ranks (which can only be rank 0)."""
    _check("new_group")
    if ranks is not None and any(int(r) != 0 for r in ranks):
        raise ValueError(f"new_group: ranks {list(ranks)} are not in a world of 1")
    return ProcessGroup()


def _done(async_op: bool) -> Work | None:
    return Work() if async_op else None


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Returns at once: there is no one to wait for."""
    _check("barrier")
    return _done(async_op)


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None,
               async_op: bool = False) -> Work | None:  # fmt: skip
    """Combines one contribution: ``tensor`` stays as it is."""
    _check("all_reduce")
    return _done(async_op)


def reduce(tensor: Any, dst: int = 0, op: ReduceOp = ReduceOp.SUM, group: Any = None,
           async_op: bool = False) -> Work | None:  # fmt: skip
    """As :func:`all_reduce`, to rank ``dst`` (0)."""
    _check("reduce")
    return _done(async_op)


def broadcast(tensor: Any, src: int = 0, group: Any = None, async_op: bool = False) -> Work | None:
    """From rank ``src`` (0, this process) to everyone: ``tensor`` stays as it is."""
    _check("broadcast")
    return _done(async_op)


def _one(tensors: Any, op: str) -> Any:
    if len(tensors) != 1:
        raise ValueError(f"{op}: expected a list of 1 tensor (the world size), got {len(tensors)}")
    return tensors[0]


def all_gather(tensor_list: list, tensor: Any, group: Any = None, async_op: bool = False) -> Work | None:  # fmt: skip
    """``tensor_list[0]`` becomes ``tensor``."""
    _check("all_gather")
    _one(tensor_list, "all_gather").copy_(tensor)
    return _done(async_op)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None,
                           async_op: bool = False) -> Work | None:  # fmt: skip
    """``output_tensor`` becomes ``input_tensor`` (the concatenation of one)."""
    _check("all_gather_into_tensor")
    output_tensor.copy_(input_tensor.reshape(output_tensor.shape))
    return _done(async_op)


def gather(tensor: Any, gather_list: list | None = None, dst: int = 0, group: Any = None,
           async_op: bool = False) -> Work | None:  # fmt: skip
    """``gather_list[0]`` becomes ``tensor``."""
    _check("gather")
    if gather_list is not None:
        _one(gather_list, "gather").copy_(tensor)
    return _done(async_op)


def scatter(tensor: Any, scatter_list: list | None = None, src: int = 0, group: Any = None,
            async_op: bool = False) -> Work | None:  # fmt: skip
    """``tensor`` becomes ``scatter_list[0]``."""
    _check("scatter")
    if scatter_list is not None:
        tensor.copy_(_one(scatter_list, "scatter"))
    return _done(async_op)


def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Work | None:  # fmt: skip
    """``output`` becomes ``input_list[0]``."""
    _check("reduce_scatter")
    output.copy_(_one(input_list, "reduce_scatter"))
    return _done(async_op)


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None,  # noqa: A002
                          async_op: bool = False) -> Work | None:  # fmt: skip
    """``output`` becomes ``input`` (its one shard)."""
    _check("reduce_scatter_tensor")
    output.copy_(input.reshape(output.shape))
    return _done(async_op)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group: Any = None,
               async_op: bool = False) -> Work | None:  # fmt: skip
    """``output_tensor_list[0]`` becomes ``input_tensor_list[0]``."""
    _check("all_to_all")
    _one(output_tensor_list, "all_to_all").copy_(_one(input_tensor_list, "all_to_all"))
    return _done(async_op)


def all_gather_object(object_list: list, obj: Any, group: Any = None) -> None:
    """``object_list[0]`` becomes ``obj``."""
    _check("all_gather_object")
    _one(object_list, "all_gather_object")
    object_list[0] = obj


def gather_object(obj: Any, object_gather_list: list | None = None, dst: int = 0,
                  group: Any = None) -> None:  # fmt: skip
    """``object_gather_list[0]`` becomes ``obj``."""
    _check("gather_object")
    if object_gather_list is not None:
        _one(object_gather_list, "gather_object")
        object_gather_list[0] = obj


def broadcast_object_list(object_list: list, src: int = 0, group: Any = None, device: Any = None) -> None:  # fmt: skip
    """The objects stay as they are (rank 0 is the source)."""
    _check("broadcast_object_list")


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list: list | None,
                        src: int = 0, group: Any = None) -> None:  # fmt: skip
    """``scatter_object_output_list[0]`` becomes ``scatter_object_input_list[0]``."""
    _check("scatter_object_list")
    if scatter_object_input_list is not None:
        scatter_object_output_list[0] = _one(scatter_object_input_list, "scatter_object_list")
