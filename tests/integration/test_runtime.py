"""The runtime end to end: batching, sync points, errors, frees, several connections."""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import wait_for

import gt
from gt.runtime import protocol as P
from gt.runtime.control import request


def worker_stats(address: str) -> list[dict]:
    return request(address, "stats")["workers"]


def test_pipelined_ops_arrive_in_order(conn):
    x = gt.zeros(4)
    for _ in range(2000):
        x = x + 1
    np.testing.assert_array_equal(x.numpy(), np.full(4, 2000, np.float32))
    assert conn.sent_batches < 2000  # batched, not one message per op


def test_scalars_are_immediates_with_pytorch_promotion(conn):
    i = gt.tensor([1, 2, 3])
    assert i.dtype == "int64"
    assert (i + 1).dtype == "int64"
    assert (i + 1.5).dtype == "float32"
    assert (i / 2).dtype == "float32"
    np.testing.assert_allclose((i / 2).numpy(), [0.5, 1.0, 1.5])
    np.testing.assert_array_equal((2 * i - 1).numpy(), [1, 3, 5])


def test_large_arrays_round_trip_through_the_direct_path(conn):
    a = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB
    assert conn._direct is not None
    np.testing.assert_array_equal(gt.from_numpy(a).numpy(), a)


def test_large_arrays_round_trip_without_the_direct_path(cluster, monkeypatch):
    monkeypatch.setenv("GT_NO_DIRECT", "1")
    c = gt.connect(cluster.address, timeout=30)
    try:
        assert c._direct is None
        a = np.arange(300_000, dtype=np.float64).reshape(300, 1000)
        np.testing.assert_array_equal((gt.from_numpy(a) * 2).numpy(), a * 2)
    finally:
        gt.disconnect()


def _count_messages(conn) -> dict:
    """Count the kinds of message the connection handles from now on."""
    seen: dict = {}
    handle = conn._handle

    def counting(frames, **kw):
        kind = type(P.parse(frames[0].buffer)).__name__
        seen[kind] = seen.get(kind, 0) + 1
        handle(frames, **kw)

    conn._handle = counting
    return seen


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "relayed"])
def test_a_sync_round_trip_is_acknowledged_by_its_data_alone(cluster, monkeypatch, direct):
    # the worker's data acknowledges the batch the fetch ended: no Ack message follows, the
    # client's count of batches in flight still comes back to zero, and errors still arrive
    if not direct:
        monkeypatch.setenv("GT_NO_DIRECT", "1")
    c = gt.connect(cluster.address, timeout=30)
    try:
        x = gt.zeros(4)
        gt.sync()
        seen = _count_messages(c)
        b0 = c.sent_batches
        for i in range(20):
            assert (x + i).numpy()[0] == i
        # (on a busy machine the flush timer may send an add before its fetch: that batch, which
        # no fetch ends, is acknowledged by the dispatcher as before, and its Ack may still be on
        # its way when the fetch's data is in: a sync waits for it)
        if c.sent_batches - b0 > 20:
            gt.sync()
        assert seen["Data"] == 20 and seen.get("Ack", 0) == c.sent_batches - b0 - 20
        assert c._in_flight == 0
        bad = gt.randn(3, 3)[gt.tensor([5])]  # fails on the worker: its batch needs the Ack
        c.flush()  # (a batch of its own, as the flush timer may have made it anyway)
        ok = gt.ones(2)
        np.testing.assert_array_equal(ok.numpy(), [1.0, 1.0])
        with pytest.raises(gt.WorkerError):
            gt.sync()  # (waits for that Ack: the batch is in flight until it comes)
        del bad
        # the failed batch needed its Ack: only the 21 batches that fetches ended were
        # acknowledged by their data
        assert seen["Data"] == 21 and seen["Ack"] == c.sent_batches - b0 - 21
        assert c._in_flight == 0
    finally:
        gt.disconnect()


def test_empty_and_zero_dim_tensors(conn):
    assert gt.zeros(0, 3).numpy().shape == (0, 3)
    s = gt.tensor(3.5)
    assert s.shape == () and s.item() == 3.5


def test_worker_error_raises_at_sync_with_op_and_source_line(conn):
    x = gt.randn(3, 3)
    idx = gt.tensor([5])  # out of range: only the worker can see the value
    y = x[idx]  # the failing line
    z = y + 1  # depends on the failure
    with pytest.raises(gt.WorkerError) as info:
        z.numpy()
    err = info.value
    assert err.op == "getitem"
    assert err.source.startswith("test_runtime.py:")
    assert "index 5 is out of bounds" in str(err)
    # the connection stays usable
    assert (x.sum() * 0).item() == 0


def test_sync_reports_errors_nothing_waited_on(conn):
    x = gt.randn(2, 2)
    _ = x[gt.tensor([9])]
    with pytest.raises(gt.WorkerError):
        gt.sync()
    gt.sync()  # reported once


def test_client_shape_errors_raise_at_the_users_line(conn):
    with pytest.raises(gt.ShapeError, match=r"matmul: shapes \[2, 3\] and \[2, 3\]"):
        gt.randn(2, 3) @ gt.randn(2, 3)
    with pytest.raises(gt.ShapeError, match="size of tensor a"):
        gt.randn(2, 3) + gt.randn(4, 3)


def test_freed_tensors_leave_the_worker(conn, cluster):
    home = conn.home_worker

    def held():
        return worker_stats(cluster.address)[home]["stats"].get("tensors")

    wait_for(lambda: held() == 0)  # earlier tests' clients are gone
    keep = [gt.randn(10) for _ in range(50)]
    gt.sync()
    wait_for(lambda: held() == 50)
    del keep
    gt.sync()
    wait_for(lambda: held() == 0)


def test_two_connections_in_one_process_are_isolated(cluster):
    a = gt.runtime.client.Connection(cluster.address, timeout=30)
    b = gt.runtime.client.Connection(cluster.address, timeout=30)
    try:
        assert a.client_no != b.client_no
        ta = gt.Tensor(a, a.new_id(), (3,), "float32")
        a.upload(ta.id, np.array([1, 2, 3], np.float32))
        tb = gt.Tensor(b, b.new_id(), (3,), "float32")
        b.upload(tb.id, np.array([7, 8, 9], np.float32))
        assert ta.id == tb.id  # same client-made id, different namespaces
        np.testing.assert_array_equal(a.fetch(ta.id), [1, 2, 3])
        np.testing.assert_array_equal(b.fetch(tb.id), [7, 8, 9])
        with pytest.raises(ValueError, match="different GT connections"):
            ta + tb
    finally:
        del ta, tb
        a.close()
        b.close()


def test_clients_spread_over_both_workers(cluster):
    conns = [gt.runtime.client.Connection(cluster.address, timeout=30) for _ in range(2)]
    try:
        assert {c.home_worker for c in conns} == {0, 1}
    finally:
        for c in conns:
            c.close()


def test_empty_arrays_upload_and_fetch(conn):
    t = gt.Tensor(conn, conn.new_id(), (0, 3), "float32")
    conn.upload(t.id, np.zeros((0, 3), np.float32))
    assert conn.fetch(t.id).shape == (0, 3)


def test_connection_stats_reports_this_client(conn):
    stats = conn.stats()
    assert conn.client_no in [c["id"] for c in stats["clients"]]


def test_an_op_after_a_quiet_spell_wakes_the_flush_timer_under_a_signal_scope_too(conn):
    # The timer sleeps once the program has been quiet; the first op after must wake it, or the
    # op waits out the sleep (up to 250 ms) before it is sent. Ops in a signal scope did not.
    x = gt.ones(4)
    x.numpy()
    for scoped in (False, True):
        wait_for(lambda: conn._timer_asleep, 30)
        if scoped:
            with gt.signal.context("layer"):
                y = x + 1
        else:
            y = x + 1
        assert conn._wake.is_set() or not conn._timer_asleep
        assert y.numpy().tolist() == [2.0] * 4


def test_an_idle_connections_flush_timer_sleeps(conn):
    # (it slept 250 ms at a time and ticked 25 times between: 87 wakes a second with nothing to
    # do, where 4-8 are its heartbeat look and a tick after each sleep)
    gt.ones(2).numpy()
    wait_for(lambda: conn._timer_asleep, 30)

    def switches() -> int:
        with open(f"/proc/self/task/{conn._timer.native_id}/status") as f:
            return next(int(v.split()[1]) for v in f if v.startswith("voluntary_ctxt_switches"))

    before, t0 = switches(), time.monotonic()
    time.sleep(1.0)  # (an idle spell is what is measured: nothing to wait for but time)
    rate = (switches() - before) / (time.monotonic() - t0)
    assert rate < 30, f"the idle flush timer woke {rate:.0f} times a second"
