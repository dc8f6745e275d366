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
from gt.runtime.worker.prefetch import SHARED_S
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


def spill_extents(ex):
    """How many buffers the spill file holds."""
    return ex.pool.store.extents


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
    # every byte moved is on the timeline once, each way (no prefetch here: every read is a miss;
    # a buffer spilled again from its clean copy moves nothing)
    c = pool.counters
    moved = {d: sum(a[3] for a in log if a[0] == d) for d in ("spill", "unspill")}
    assert moved == {"spill": c["spill_out"] - c["spill_reused"], "unspill": c["spill_in"]}


def test_spilled_buffers_live_in_one_unnamed_file_whose_space_is_reused(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(i, i, 10 * KB) for i in range(1, 5)])  # 160 KiB into 100 KiB
    store = ex.pool.store
    assert spill_extents(ex) == 2 and ex.pool.spilled_bytes == 80 * KB
    assert os.listdir(tmp_path) == []  # nothing another process could open, nothing left behind
    size = os.fstat(store._fd).st_size
    assert size == 80 * KB
    run(ex, [], frees=[1, 2])  # the two spilled ones go: their extents are free
    assert spill_extents(ex) == 0 and store.in_use == 0 and ex.pool.spilled_bytes == 0
    run(ex, [full(i, i, 10 * KB) for i in range(5, 7)])  # two more spill, into the same space
    assert spill_extents(ex) == 2 and os.fstat(store._fd).st_size == size
    run(ex, [ins("neg", 9, [3]), ins("fetch", 10, [9])])
    assert (fetched(ex, 10) == -3).all()
    run(ex, [], frees=[3, 4, 5, 6, 9])
    assert spill_extents(ex) == 0 and ex.holdings()[1] == 0
    ex.pool.close()
    assert store._fd is None


def test_the_spill_file_reuses_freed_extents_best_fit_and_coalesces_them(tmp_path):
    store = SpillStore(parent=str(tmp_path))
    try:
        bufs = [np.full(n, i, np.uint8) for i, n in enumerate([8192, 4096, 12288, 4096], 1)]
        ext = [store.put(b) for b in bufs]
        assert [e.offset for e in ext] == [0, 8192, 12288, 24576]
        store.drop(ext[1])
        store.drop(ext[0])  # 0..12288 is one free extent now
        small = store.put(np.full(100, 9, np.uint8))  # best fit: the start of the freed run
        assert (small.offset, small.length) == (0, 4096)
        big = store.put(np.full(8000, 8, np.uint8))  # the rest of the run fits it exactly
        assert big.offset == 4096 and os.fstat(store._fd).st_size == 28672
        for e, b in zip([ext[2], ext[3]], bufs[2:]):
            np.testing.assert_array_equal(store.get(e, b.nbytes), b)
        assert (store.get(small, 100) == 9).all() and (store.get(big, 8000) == 8).all()
        for e in (small, big, ext[2], ext[3]):
            store.drop(e)
        assert store.in_use == 0 and store._free == [] and store._end == 0
        late = store.put(bufs[0])
        store.close()
        store.drop(late)  # a drop after close changes nothing
        assert store.in_use == 0 and store.extents == 0
    finally:
        store.close()


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


def test_the_queue_is_read_for_spill_choices_only_when_something_must_spill(tmp_path):
    # (reading every queued instruction for every batch made tiny ops 4.5x slower under a limit)
    ex = make(tmp_path, limit=130 * KB)
    later = [(1, [ins("neg", 20, [1])])]
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB)], ahead=later)
    assert not ex.pool._planned  # under the threshold: nobody asked
    run(ex, [full(3, 3, 10 * KB), full(4, 4, 10 * KB)], ahead=later)
    assert ex.pool._planned and (1, 1) not in ex.pool.spilled and ex.pool.spilled


def test_views_spill_together_and_come_back_as_views_of_one_buffer(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(1, 3, 10 * KB), ins("reshape", 2, [1], {"shape": [80, 128]}),
             ins("transpose", 3, [2], {"perm": [1, 0]})])  # fmt: skip
    run(ex, [full(4, 4, 10 * KB), full(5, 5, 10 * KB)])  # pushes 1, 2, 3 out
    assert {(1, 1), (1, 2), (1, 3)} <= set(ex.pool.spilled)
    assert spill_extents(ex) == 1  # one buffer, one extent
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


def test_a_buffer_read_back_and_spilled_again_is_not_written_twice(tmp_path):
    log: list = []
    ex = make(tmp_path, limit=100 * KB, transfers=log)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB), full(3, 3, 10 * KB)])  # 1 spills
    assert set(ex.pool.spilled) == {(1, 1)}
    for req, t in enumerate([1, 2, 3, 1, 2, 3], 10):  # each read pushes the oldest out
        run(ex, [ins("fetch", req, [t])])
        assert (fetched(ex, req) == t).all()
    writes = [n for d, _t0, _t1, n, _c in log if d == "spill"]
    assert writes == [40 * KB] * 3  # once each: after that their extents still held them
    assert ex.pool.counters["spill_out"] == 7 * 40 * KB
    assert ex.pool.counters["spill_reused"] == 4 * 40 * KB
    assert spill_extents(ex) == 3


def test_an_in_place_op_on_a_read_back_tensor_leaves_its_spilled_copy_alone(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB), full(3, 3, 10 * KB)])  # 1 spills
    run(ex, [ins("reshape", 4, [1], {"shape": [80, 128]})])  # 1 is back; 4 views it
    run(ex, [ins("mul", 1, [1, 5.0], {"inplace": True})])  # asked in place: must not touch 4
    run(ex, [full(5, 5, 10 * KB), full(6, 6, 10 * KB)])  # everything old spills again
    run(ex, [ins("fetch", 10, [1]), ins("fetch", 11, [4])])
    assert (fetched(ex, 10) == 5).all() and (fetched(ex, 11) == 1).all()


def test_freeing_a_read_back_tensor_frees_its_extent(tmp_path):
    ex = make(tmp_path, limit=100 * KB)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB), full(3, 3, 10 * KB)])
    run(ex, [ins("fetch", 7, [1])])  # 1 back (its extent kept), 2 out
    assert spill_extents(ex) == 2
    run(ex, [], frees=[1, 2])
    assert spill_extents(ex) == 0
    run(ex, [full(1, 4, 10 * KB), full(2, 5, 10 * KB), full(4, 6, 10 * KB)])
    ex.drop_client(1)
    assert spill_extents(ex) == 0 and ex.pool.used == 0


def test_a_read_told_to_stop_between_pieces_gives_up(tmp_path):
    from gt.runtime.worker.spill import READ_PIECE

    store = SpillStore(parent=str(tmp_path))
    try:
        data = np.arange(3 * READ_PIECE, dtype=np.uint8)
        ext = store.put(data)
        asked = []
        assert store.get(ext, data.nbytes, go_on=lambda: asked.append(1) or len(asked) < 2) is None
        assert len(asked) == 2  # looked once after each piece, stopped at the second look
        np.testing.assert_array_equal(store.get(ext, data.nbytes, go_on=lambda: True), data)
    finally:
        store.close()


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


def test_prefetches_fill_only_the_headroom_above_the_threshold_and_are_not_dropped_unread(tmp_path):
    ex = make(tmp_path, limit=100 * KB, threshold=0.5, prefetch=1 << 20)
    try:
        run(ex, [full(i, i, 5 * KB) for i in range(1, 6)])  # 100 KiB: down to 40 KiB resident
        assert len(ex.pool.spilled) == 3 and ex.pool.used == 40 * KB
        later = [ins("neg", 10, [1]), ins("neg", 11, [2]), ins("neg", 12, [3])]
        ex.pool.plan([(1, later)])
        wait_for(lambda: ex.pool.ready_bytes == 40 * KB)  # 100 - 50 (the threshold), not 100 - 40
        # a result takes the pool up to its threshold: the two prefetched buffers stay
        run(ex, [full(20, 0, 2560), *later, ins("fetch", 30, [12])])
        assert (fetched(ex, 30) == -3).all()
        c = ex.pool.counters
        assert c["prefetch_hits"] >= 2 and c["prefetched"] == c["prefetch_hits"] * 20 * KB
    finally:
        ex.pool.close()


def test_the_prefetch_thread_reads_only_for_a_client_that_has_the_worker_to_itself(tmp_path):
    ex = make(tmp_path, limit=1 << 30, client_limit=60 * KB, threshold=0.5, prefetch=1 << 20)
    ex.pool.close()  # (no thread: the choice is looked at directly)
    run(ex, [full(i, i, 10 * KB) for i in range(1, 4)], cno=2)  # client 2 spills two of three
    spilled = sorted(t for c, t in ex.pool.spilled if c == 2)
    assert len(spilled) == 2
    reads = [(2, [ins("neg", 9, [spilled[0]])])]
    ex.pool.client_limit = None  # room to prefetch into
    ex.pool.plan([(1, [ins("neg", 8, [1])]), *reads])  # client 1's turn; 2's batch is queued
    assert ex.pool._next_prefetch() is None  # not in client 1's turn
    ex.pool.plan(reads)  # client 2's turn, client 1's a moment ago: they share the worker
    assert ex.pool._next_prefetch() is None
    ex.pool._turns[1] -= 2 * SHARED_S  # client 1 has not had a turn for a while
    assert ex.pool._next_prefetch() is ex.pool.spilled[(2, spilled[0])]


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
    assert spill_extents(ex)
    ex.drop_client(1)
    assert ex.pool.used == 20 * KB and ex.pool.client_used == {2: 20 * KB}
    assert spill_extents(ex) == 0 and ex.pool.spilled_bytes == 0


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


def test_the_programs_of_one_tenant_share_one_quota(tmp_path):
    ex = make(tmp_path, limit=1 << 30, client_limit=100 * KB)
    run(ex, [full(1, 1, 10 * KB), full(2, 2, 10 * KB)], cno=1)  # alice's first program: 80 KiB
    ex.pool.set_account(1, "alice")
    ex.pool.set_account(2, "alice")
    run(ex, [full(1, 1, 10 * KB)], cno=3)  # someone else: a quota of its own
    run(ex, [full(1, 3, 10 * KB)], cno=2)  # alice's second: 120 KiB against her 100
    assert ex.pool.account_used("alice") <= 100 * KB  # her first program's tensor made room
    assert {c for c, _ in ex.pool.spilled} == {1} and ex.pool.client_used[3] == 40 * KB
    res = run(ex, [full(9, 9, 30 * KB)], cno=2)  # 120 KiB in one tensor: over hers alone
    assert "tenant alice's (all its programs') quota" in res.errors[0][0]
    run(ex, [full(2, 2, 20 * KB)], cno=3)  # 120 KiB for the other: spills its own, not alice's
    assert ex.pool.client_used[3] <= 100 * KB
    ex.drop_client(1)
    ex.drop_client(2)
    assert ex.pool.account_used("alice") == 0 and ex.pool.accounts == {}


def test_freed_blocks_the_allocator_keeps_past_the_limit_are_given_back(monkeypatch):
    # (a NumPy worker's C heap kept freed blocks, so what it held of the machine passed its
    # limit while its tensors were under it)
    from gt.runtime.worker import memory_keeper as K

    heap = {"free": 30_000_000}
    monkeypatch.setattr(K, "cached_bytes", lambda be: heap["free"])
    monkeypatch.setattr(K, "release_cached", lambda be: heap.update(free=1_000))
    be = Backend(np, "cpu")
    keeper = K.WorkerMemory(be, Executor(be, NoPeers(), FakeIO()), {"memory_limit": "50MB"},
                            lambda *a: None)  # fmt: skip
    keeper.apply()
    try:
        assert keeper.report()["reserved"] <= 50_000_000  # under it: kept (reuse is cheap)
        assert heap["free"] == 30_000_000
        heap["free"] = 60_000_000
        assert keeper.report()["reserved"] == 1_000
    finally:
        keeper.pool.close()


def test_a_full_spill_tier_is_an_out_of_memory_error_and_leaves_every_tensor_whole(tmp_path):
    # (the buffer was taken off the pool's books before its write failed: the op got an OSError,
    # and tensors made earlier failed later with a KeyError of the pool's table)
    ex = make(tmp_path, limit=100 * KB)
    tier = ex.pool.store
    put = tier.put

    def full_disk(root):
        raise OSError(28, "No space left on device")

    tier.put = full_disk
    res = run(ex, [full(i, i, 10 * KB // 4) for i in range(1, 12)])  # 11 x 10 KiB, 100 KiB limit
    assert res.errors
    assert all("does not fit under" in e[0] and "No space left on device" in e[0]
               for e in res.errors), res.errors  # fmt: skip
    made = [i for i in range(1, 12) if i not in ex.failed.get(1, {})]
    tier.put = put  # (room in the tier again: every tensor made reads back whole)
    res = run(ex, [ins("sum", 100 + i, [i]) for i in made] +
              [ins("fetch", 200 + i, [100 + i]) for i in made])  # fmt: skip
    assert res.errors == []
    for i in made:
        assert fetched(ex, 200 + i) == i * (10 * KB // 4)
