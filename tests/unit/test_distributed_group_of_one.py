"""``gt.distributed``: a process group of one, and the refusal of a multi-process launch."""

from __future__ import annotations

import pytest

from gt import distributed as dist


@pytest.fixture(autouse=True)
def _fresh_group():
    dist.destroy_process_group()
    yield
    dist.destroy_process_group()


def test_a_world_of_one_is_rank_0_and_collectives_leave_values_alone():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        dist.get_rank()
    dist.init_process_group("nccl")
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "nccl")
    assert dist.barrier() is None and dist.barrier(async_op=True).wait()
    objs = [None]
    dist.all_gather_object(objs, {"loss": 1.5})
    assert objs == [{"loss": 1.5}]
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group()
    with pytest.raises(ValueError, match="world size"):
        dist.all_gather_object([None, None], 1)
    assert dist.new_group([0]).size() == 1
    with pytest.raises(ValueError, match="not in a world of 1"):
        dist.new_group([0, 1])


def test_a_multi_process_launch_is_refused_with_what_to_do_instead(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(RuntimeError, match="a world of 4 processes .* shard config"):
        dist.init_process_group("gloo")
    assert not dist.is_initialized()
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    with pytest.raises(RuntimeError, match="a world of 2"):
        dist.init_process_group(world_size=2, rank=0)
