"""The worker's memory pool on a CuPy worker (the CuPy test double): counting by memory block,
spilling to pinned host memory and back, prefetch on the prefetch thread's own stream, quotas and
out-of-memory -- the tier-independent cases of ``test_memory_pool`` again, plus what only a device
pool shows: that a spill really gives the device memory back, and that the device pool's own
refusal (its limit) is met by spilling instead of failing the op.

The double's blocks are exactly an array's bytes (CuPy rounds each allocation up to 512 bytes), so
the byte counts of the NumPy cases hold here unchanged."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

import tests.unit.test_memory_pool as M
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.executor import Executor
from gt.runtime.worker.memory_keeper import capacity
from gt.runtime.worker.pool import MemoryPool
from gt.runtime.worker.spill import SpillStore
from tests.unit.test_executor import FakeIO, NoPeers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

KB = 1024
full, ins, run = M.full, M.ins, M.run


class DeviceIO(FakeIO):
    """Replies copied to the host explicitly, as the worker's own reply does."""

    def reply(self, client, token, req, arr, err, ack=None):
        self.replies[req] = (None if arr is None else cp.asnumpy(arr), err)


def make_on_double(tmp_path, limit=None, client_limit=None, threshold=1.0, prefetch=0,
                   transfers=None):  # fmt: skip
    ex = Executor(Backend(cp, name="cupy", cupyx=cp.cupyx), NoPeers(), DeviceIO())
    if limit is not None or client_limit is not None:
        log = transfers if transfers is not None else []
        pool = MemoryPool(limit=limit, client_limit=client_limit, threshold=threshold,
                          prefetch=prefetch, store=SpillStore(cp),
                          transfer=lambda *a: log.append(a))  # fmt: skip
        ex.use_pool(pool)
    return ex


@pytest.fixture(autouse=True)
def on_the_double(monkeypatch):
    """The imported cases build their executors on the double, with pinned memory as the tier."""
    monkeypatch.setattr(M, "make", make_on_double)
    yield
    cp.get_default_memory_pool().set_limit(size=0)


# The cases of test_memory_pool that do not look at the spill file itself.
CASES = [
    "test_a_broadcast_view_counts_the_bytes_of_its_buffer_not_of_its_shape",
    "test_a_buffer_is_counted_until_its_last_view_is_freed",
    "test_spilled_tensors_come_back_and_every_result_equals_the_unlimited_run",
    "test_the_least_recently_used_buffer_spills_first",
    "test_a_buffer_the_queue_needs_soon_is_spilled_last",
    "test_a_broadcast_view_spills_its_one_element_not_its_shape",
    "test_an_in_place_op_on_a_read_back_tensor_leaves_its_spilled_copy_alone",
    "test_the_prefetch_thread_brings_back_what_a_queued_batch_needs",
    "test_prefetched_bytes_count_against_the_limit",
    "test_prefetches_fill_only_the_headroom_above_the_threshold_and_are_not_dropped_unread",
    "test_the_prefetch_thread_reads_only_for_a_client_that_has_the_worker_to_itself",
    "test_a_result_larger_than_the_limit_fails_its_op_and_the_worker_goes_on",
    "test_a_client_over_its_quota_spills_its_own_tensors_not_anothers",
    "test_the_programs_of_one_tenant_share_one_quota",
    "test_lowering_the_limit_while_running_spills_at_once",
]


@pytest.mark.parametrize("case", CASES)
def test_memory_pool_case_on_a_cupy_worker(case, tmp_path):
    getattr(M, case)(tmp_path)


def _device_used() -> int:
    gc.collect()  # (the double's blocks go when their NumPy arrays do)
    return cp.get_default_memory_pool().used_bytes()


def test_views_come_back_as_views_of_one_device_block(tmp_path):
    ex = make_on_double(tmp_path, limit=100 * KB)
    run(ex, [full(1, 3, 10 * KB), ins("reshape", 2, [1], {"shape": [80, 128]}),
             ins("transpose", 3, [2], {"perm": [1, 0]})])  # fmt: skip
    run(ex, [full(4, 4, 10 * KB), full(5, 5, 10 * KB)])  # pushes 1, 2, 3 out
    assert {(1, 1), (1, 2), (1, 3)} <= set(ex.pool.spilled)
    run(ex, [ins("fetch", 7, [3])])
    tbl = ex.tables[1]
    a, t = dict.__getitem__(tbl, 1), dict.__getitem__(tbl, 3)
    assert type(a) is cp.ndarray and a.data.mem is t.data.mem  # one block, two views
    assert M.fetched(ex, 7).shape == (128, 80) and (M.fetched(ex, 7) == 3).all()


def test_a_spilled_buffer_gives_its_device_memory_back_and_lives_in_pinned_memory(tmp_path):
    ex = make_on_double(tmp_path, limit=100 * KB)
    base = _device_used()
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB)])  # 80 KiB on the device
    assert _device_used() - base == 80 * KB
    run(ex, [full(3, 3, 10 * KB)])  # 120 KiB > 100: tensor 1 leaves the device
    rec = ex.pool.spilled[(1, 1)]
    assert isinstance(rec.handle, np.ndarray) and rec.handle.nbytes == 40 * KB  # host memory
    assert _device_used() - base == 80 * KB  # the device holds 2 and 3 only
    run(ex, [ins("fetch", 9, [1])])  # back (and 2 out)
    assert (M.fetched(ex, 9) == 1).all() and _device_used() - base == 80 * KB
    ex.drop_client(1)
    assert _device_used() == base


def test_the_device_pools_refusal_is_met_by_spilling(tmp_path):
    """CuPy's pool refuses an allocation past its limit (``OutOfMemoryError``, a
    ``MemoryError``) before GT's accounting would: the op spills what it may and runs."""
    ex = make_on_double(tmp_path, limit=1 << 30)  # GT's own limit is far away
    base = _device_used()
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB)])
    cp.get_default_memory_pool().set_limit(size=base + 100 * KB)  # the device is nearly full
    res = run(ex, [full(3, 3, 10 * KB), ins("add", 4, [3, 1.0]), ins("fetch", 5, [4])])
    assert res.errors == [], res.errors
    assert (M.fetched(ex, 5) == 4).all()
    assert ex.pool.counters["spill_out"] > 0


def test_a_fractional_limit_is_a_fraction_of_the_devices_memory(monkeypatch):
    monkeypatch.setenv("CUPY_DOUBLE_MEMORY", str(3 << 30))
    assert capacity(Backend(cp, name="cupy", cupyx=cp.cupyx)) == 3 << 30
    # two local workers on that GPU: each limit is a fraction of its half, so 0.8 stays 0.8
    assert capacity(Backend(cp, name="cupy", cupyx=cp.cupyx), sharing=2) == 3 << 29


def test_who_shares_a_workers_device():
    from gt.cli.worker import sharing

    four_gpus = lambda: 4  # noqa: E731
    assert sharing(None, "8", 1, four_gpus) == 1  # started on its own
    assert sharing(1, "8", 1, four_gpus) == 2  # slots 1 and 5 on GPU 1
    assert sharing(0, "3", 0, four_gpus) == 1  # fewer workers than GPUs
    assert sharing(2, "6", 3, four_gpus, "1,3") == 3  # slots 1, 3, 5 on GPU 3 (of 1 and 3)
    assert sharing(0, "3", None, lambda: 0) == 3  # NumPy workers share the machine's RAM


def test_a_spilled_tensor_the_device_cannot_take_back_stays_spilled_and_its_op_fails(tmp_path):
    ex = make_on_double(tmp_path, limit=100 * KB)
    base = _device_used()
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB), full(3, 3, 10 * KB)])  # 1 spills
    cp.get_default_memory_pool().set_limit(size=base + 20 * KB)  # less than one tensor
    res = run(ex, [ins("neg", 4, [1]), ins("fetch", 5, [4])])
    assert len(res.errors) == 1
    msg = res.errors[0][0]
    assert msg.startswith("OutOfMemory: ") and "memory limit" not in msg
    assert "does not fit in the device's memory" in msg and "40,960 bytes" in msg
    assert (1, 1) in ex.pool.spilled  # still there: nothing was lost
    cp.get_default_memory_pool().set_limit(size=0)
    run(ex, [ins("neg", 6, [1]), ins("fetch", 7, [6])])
    assert (M.fetched(ex, 7) == -1).all()


def test_a_full_device_without_a_limit_is_an_out_of_memory_error_naming_the_op(tmp_path):
    ex = make_on_double(tmp_path)  # no limit: nothing to spill
    base = _device_used()
    run(ex, [full(1, 1, 10 * KB)])
    cp.get_default_memory_pool().set_limit(size=base + 60 * KB)  # other processes hold the rest
    res = run(ex, [full(2, 2, 10 * KB), ins("fetch", 3, [1])])
    msg, code, _src = res.errors[0]
    assert code == M.OP["full"] and msg.startswith("OutOfMemory: full's result does not fit in "
                                                   "the device's memory")  # fmt: skip
    assert "no memory limit is set on this worker" in msg
    assert (M.fetched(ex, 3) == 1).all()  # the worker goes on


def test_a_read_back_is_allocated_for_the_compute_stream_and_copied_after_its_work(monkeypatch):
    # CuPy gives a freed block back to the stream it was allocated on: a buffer allocated on the
    # prefetch stream, used and freed by the compute stream, would be handed to the next read-back
    # while compute kernels may still read it
    store = SpillStore(cp)
    compute, copy = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    store.compute_stream = compute
    seen, real_empty = [], cp.empty

    def empty(*a, **k):
        seen.append(cp.cuda.get_current_stream())
        return real_empty(*a, **k)

    monkeypatch.setattr(cp, "empty", empty)
    waited = []
    real_wait = copy.wait_event
    monkeypatch.setattr(copy, "wait_event", lambda ev: waited.append(ev) or real_wait(ev))
    host = np.arange(64, dtype=np.uint8)
    dev = store.get(host, 64, copy)
    assert seen == [compute] and len(waited) == 1
    assert (cp.asnumpy(dev) == host).all()


def test_an_allocation_larger_than_the_whole_limit_spills_nobodys_tensors(tmp_path):
    ex = make_on_double(tmp_path, limit=100 * KB)
    base = _device_used()
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB)])  # 80 KiB, on the device
    cp.get_default_memory_pool().set_limit(size=base + 100 * KB)  # the worker's, as it sets it
    res = run(ex, [full(3, 3, 64 * KB), ins("fetch", 4, [1])])  # 256 KiB: more than the limit
    assert len(res.errors) == 1 and res.errors[0][0].startswith("OutOfMemory: ")
    assert ex.pool.counters["spill_out"] == 0 and not ex.pool.spilled  # 1 and 2 stayed put
    assert (M.fetched(ex, 4) == 1).all()


def test_under_per_thread_default_streams_buffers_come_back_on_demand_only(monkeypatch):
    # the executor's stream is then "the calling thread's": the prefetch thread cannot order a
    # read-back after it, so it does not read back at all
    from gt.runtime.worker.memory_keeper import WorkerMemory

    be = Backend(cp, name="cupy", cupyx=cp.cupyx)
    settings = {"memory_limit": "1MB", "prefetch": "256kB"}
    plain = WorkerMemory(be, Executor(be, NoPeers(), DeviceIO()), settings, lambda *a: None)
    plain.apply()  # (as the worker does once it has heard from its dispatcher)
    assert plain.pool.prefetch > 0
    plain.pool.close()
    ptds = type("S", (), {"ptr": cp.cuda.runtime.streamPerThread})()
    monkeypatch.setattr(cp.cuda, "get_current_stream", lambda: ptds)
    per_thread = WorkerMemory(be, Executor(be, NoPeers(), DeviceIO()), settings, lambda *a: None)
    per_thread.apply()
    assert per_thread.pool.prefetch == 0 and per_thread.pool._thread is None
    per_thread.pool.close()
