"""The worker's memory pool on its own (an executor, no sockets): counting, spilling, unspilling,
prefetch, quotas and out-of-memory, checked against unlimited runs of the same batches."""

from __future__ import annotations

import os

import numpy as np

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.executor import Executor
from gt.runtime.worker.pool import MemoryPool
from gt.runtime.worker.spill import SpillStore
from tests.helpers import wait_for
from tests.unit.test_executor import FakeIO, NoPeers, ins

OP = O.OPCODE
KB = 1024
F32 = "float32"


def make(tmp_path, limit=None, client_limit=None, threshold=1.0, prefetch=0, transfers=None):
    ex = Executor(Backend(np, "cpu"), NoPeers(), FakeIO())
    if limit is not None or client_limit is not None:
        log = transfers if transfers is not None else []
        pool = MemoryPool(limit=limit, client_limit=client_limit, threshold=threshold,
                          prefetch=prefetch, store=SpillStore(parent=str(tmp_path)),
                          transfer=lambda *a: log.append(a))  # fmt: skip
        ex.use_pool(pool)
    return ex


def run(ex, instrs, cno=1, frees=(), ahead=()):
    body = P.encode_body(list(instrs), list(frees), None)
    res = ex.run(cno, 1, b"tok", body, [], False, False, list(ahead))
    return res


def full(out, value, n, dtype=F32):
    """A vector of n float32 (4n bytes) filled with value."""
    return ins("full", out, [float(value)], {"shape": [n], "dtype": dtype})


def fetched(ex, req):
    arr, err = ex.io.replies[req]
    assert err is None, err
    return arr


def spill_files(ex):
    d = ex.pool.store._dir
    return sorted(os.listdir(d)) if d else []


# --------------------------------------------------------------------------- counting
def test_a_broadcast_view_counts_the_bytes_of_its_buffer_not_of_its_shape(tmp_path):
    for ex in (make(tmp_path), make(tmp_path, limit=1 << 30)):
        run(ex, [
            ins("full", 1, [1.0], {"shape": [1, 1], "dtype": F32}),
            ins("expand", 2, [1], {"shape": [8000, 8000]}),
            ins("transpose", 3, [2], {"perm": [1, 0]}),
        ])  # fmt: skip
        tensors, used, per = ex.holdings()
        assert (tensors, used, per) == (3, 4, {1: 4})


def test_a_buffer_is_counted_until_its_last_view_is_freed(tmp_path):
    ex = make(tmp_path, limit=1 << 30)
    run(ex, [full(1, 1, 1000), ins("reshape", 2, [1], {"shape": [10, 100]})], frees=[1])
    assert ex.holdings()[1] == 4000  # the reshape still views the buffer
    run(ex, [], frees=[2])
    assert ex.holdings()[:2] == (0, 0)


# --------------------------------------------------------------------------- spilling
def _workload():
    """Ten 40 KiB tensors, then every kind of op on each of them (views, reductions, matmul)."""
    n = 10 * KB
    instrs = [full(i, i, n) for i in range(1, 11)]
    req = 1000
    for i in range(1, 11):
        base = 100 + 10 * i
        instrs += [
            ins("add", base, [i, float(i)]),                              # elementwise
            ins("reshape", base + 1, [i], {"shape": [80, 128]}),    # view of a spilled one
            ins("transpose", base + 2, [base + 1], {"perm": [1, 0]}),
            ins("sum", base + 3, [base + 2], {"axis": [0], "keepdims": False}),  # reduce
            ins("matmul", base + 4, [base + 1, base + 2]),                # (80,128)@(128,80)
            ins("fetch", req + i, [base + 3]),
            ins("fetch", req + 100 + i, [base + 4]),
            ins("fetch", req + 200 + i, [base]),
        ]  # fmt: skip
    return instrs


def test_spilled_tensors_come_back_and_every_result_equals_the_unlimited_run(tmp_path):
    free = make(tmp_path)
    run(free, _workload())
    log: list = []
    tight = make(tmp_path, limit=160 * KB, transfers=log)  # the ten inputs alone need 400 KiB
    res = run(tight, _workload())
    assert res.errors == []
    assert free.io.replies.keys() == tight.io.replies.keys()
    for req in free.io.replies:
        np.testing.assert_array_equal(fetched(tight, req), fetched(free, req))
    pool = tight.pool
    assert pool.counters["spill_out"] > 0 and pool.counters["spill_in"] > 0
    assert pool.peak <= 160 * KB
    assert {d for d, *_ in log} >= {"spill", "unspill"}


def test_spilled_buffers_live_as_files_in_a_private_directory_until_freed(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(i, i, 10 * KB) for i in range(1, 5)])  # 160 KiB into 100 KiB
    files = spill_files(ex)
    assert len(files) == 2 and ex.pool.spilled_bytes == 80 * KB
    assert os.path.dirname(ex.pool.store.directory) == str(tmp_path)
    run(ex, [], frees=[1, 2, 3, 4])
    assert spill_files(ex) == [] and ex.pool.spilled_bytes == 0 and ex.holdings()[1] == 0
    ex.pool.close()
    assert not os.path.exists(ex.pool.store.parent + "/" + files[0])


def test_the_least_recently_used_buffer_spills_first(tmp_path):
    ex = make(tmp_path, limit=130 * KB)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB), full(3, 3, 10 * KB)])
    run(
        ex,
        [
            ins("sum", 9, [1], {"axis": None, "keepdims": False}),
            ins("sum", 10, [3], {"axis": None, "keepdims": False}),
        ],
    )  # 1 and 3 are used again
    run(ex, [full(4, 4, 10 * KB)])
    assert set(ex.pool.spilled) == {(1, 2)}  # tensor 2 was the least recently used


def test_a_buffer_the_queue_needs_soon_is_spilled_last(tmp_path):
    ex = make(tmp_path, limit=130 * KB)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB), full(3, 3, 10 * KB)])
    # Tensor 1 is the least recently used, but the next queued batch reads it.
    later = [(1, [ins("neg", 20, [1])])]
    run(ex, [full(4, 4, 10 * KB)], ahead=later)
    assert (1, 1) not in ex.pool.spilled and len(ex.pool.spilled) == 1


def test_views_spill_together_and_come_back_as_views_of_one_buffer(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(1, 3, 10 * KB), ins("reshape", 2, [1], {"shape": [80, 128]}),
             ins("transpose", 3, [2], {"perm": [1, 0]})])  # fmt: skip
    run(ex, [full(4, 4, 10 * KB), full(5, 5, 10 * KB)])  # pushes 1, 2, 3 out
    assert {(1, 1), (1, 2), (1, 3)} <= set(ex.pool.spilled)
    assert len(spill_files(ex)) == 1  # one buffer, one file
    run(ex, [ins("fetch", 7, [3])])
    tbl = ex.tables[1]
    assert all(dict.__contains__(tbl, t) for t in (1, 2, 3))  # the whole buffer came back
    assert np.shares_memory(dict.__getitem__(tbl, 1), dict.__getitem__(tbl, 3))
    assert fetched(ex, 7).shape == (128, 80) and (fetched(ex, 7) == 3).all()


def test_a_broadcast_view_spills_its_one_element_not_its_shape(tmp_path):
    ex = make(tmp_path, limit=84 * KB)
    run(ex, [ins("full", 1, [2.0], {"shape": [1, 2048], "dtype": F32}),
             ins("expand", 2, [1], {"shape": [4096, 2048]})])  # fmt: skip
    run(ex, [full(3, 3, 10 * KB)])  # 8 KiB + 40 KiB fit; the expand adds nothing
    run(ex, [full(4, 4, 10 * KB)])  # now the 8 KiB buffer spills, with its view
    assert (1, 2) in ex.pool.spilled and ex.pool.spilled_bytes == 8 * KB
    run(ex, [ins("sum", 5, [2], {"axis": None, "keepdims": False}), ins("fetch", 6, [5])])
    assert float(fetched(ex, 6)) == 2.0 * 4096 * 2048


# --------------------------------------------------------------------------- prefetch
def test_the_prefetch_thread_brings_back_what_a_queued_batch_needs(tmp_path):
    log: list = []
    ex = make(tmp_path, limit=200 * KB, threshold=0.5, prefetch=1 << 20, transfers=log)
    try:
        run(ex, [full(i, i, 10 * KB) for i in range(1, 4)])  # 120 KiB: 1 and 2 spill down to 100
        spilled = [k for k in ex.pool.spilled]
        assert spilled
        ex.pool.plan([(1, [ins("add", 50, [1, 2])])])  # the worker saw this batch queued
        wait_for(lambda: all(ex.pool.spilled[k].state == "ready" for k in spilled))
        run(ex, [ins("add", 50, [1, 2]), ins("fetch", 51, [50])])
        np.testing.assert_array_equal(fetched(ex, 51), np.full(10 * KB, 3, np.float32))
        assert ex.pool.counters["prefetch_hits"] >= 1 and ex.pool.counters["prefetched"] > 0
        assert any(d == "prefetch" for d, *_ in log)
    finally:
        ex.pool.close()


def test_prefetched_bytes_count_against_the_limit(tmp_path):
    ex = make(tmp_path, limit=100 * KB, threshold=0.5, prefetch=1 << 20)
    try:
        run(ex, [full(i, i, 10 * KB) for i in range(1, 4)])
        ex.pool.plan([(1, [ins("add", 50, [1, 2])])])
        # only one 40 KiB buffer fits in the headroom next to what is held
        wait_for(lambda: ex.pool.counters["prefetched"] >= 40 * KB)
        assert ex.pool.used + ex.pool.ready_bytes <= 100 * KB
    finally:
        ex.pool.close()


# --------------------------------------------------------------------------- limits
def test_a_result_larger_than_the_limit_fails_its_op_and_the_worker_goes_on(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    res = run(ex, [full(1, 1, 10 * KB), full(2, 2, 64 * KB, ), ins("neg", 3, [1]),
                   ins("fetch", 4, [3])])  # fmt: skip
    assert len(res.errors) == 1
    msg, code, _src = res.errors[0]
    assert code == OP["full"] and msg.startswith("OutOfMemory: ")
    assert "262.1 kB (262144 B)" in msg and "102400 B" in msg and "memory limit" in msg
    assert (fetched(ex, 4) == -1).all()
    assert ex.pool.used <= 100 * KB and ex.pool.counters["oom"] == 1


def test_a_client_over_its_quota_spills_its_own_tensors_not_anothers(tmp_path):
    ex = make(tmp_path, limit=1 << 30, client_limit=100 * KB)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB)], cno=2)  # the other client: 80 KiB
    run(ex, [full(i, i, 10 * KB) for i in range(1, 5)], cno=1)  # 160 KiB against 100
    assert {c for c, _ in ex.pool.spilled} == {1}
    assert ex.pool.client_used[1] <= 100 * KB and ex.pool.client_used[2] == 80 * KB
    res = run(ex, [full(9, 9, 30 * KB)], cno=1)  # 120 KiB alone: over the quota
    assert "client 1's quota" in res.errors[0][0]
    res = run(ex, [full(9, 9, 5 * KB), ins("fetch", 5, [2])], cno=2)
    assert res.errors == [] and (fetched(ex, 5) == 2).all()


def test_a_client_that_leaves_gives_back_its_memory_and_its_spill_files(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(i, i, 10 * KB) for i in range(1, 6)], cno=1)
    run(ex, [full(1, 1, 5 * KB)], cno=2)
    assert spill_files(ex)
    ex.drop_client(1)
    assert ex.pool.used == 20 * KB and ex.pool.client_used == {2: 20 * KB}
    assert spill_files(ex) == [] and ex.pool.spilled_bytes == 0


def test_lowering_the_limit_while_running_spills_at_once(tmp_path):
    ex = make(tmp_path, limit=1 << 30)
    run(ex, [full(i, i, 10 * KB) for i in range(1, 5)])
    ex.pool.configure(limit=130 * KB)
    assert ex.pool.used <= 130 * KB and ex.pool.spilled_bytes >= 40 * KB
    run(ex, [ins("add", 9, [1, 4]), ins("fetch", 10, [9])])
    assert (fetched(ex, 10) == 5).all()


def test_tensors_held_before_a_limit_was_set_are_counted_when_it_is(tmp_path):
    ex = make(tmp_path)
    run(ex, [full(1, 1, 10 * KB), ins("transpose", 2, [1], {"perm": [0]})])
    ex.use_pool(MemoryPool(limit=1 << 20, store=SpillStore(parent=str(tmp_path))))
    assert ex.pool.used == 40 * KB and ex.holdings() == (2, 40 * KB, {1: 40 * KB})
