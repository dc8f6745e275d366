"""Batches sent straight to the home worker (protocol 4): when they go that way, when they do not,
and that nothing is lost either way (results, errors, source lines, the dispatcher's counts)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest
import zmq
from helpers import wait_for

import gt
from gt.runtime import protocol as P
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster

pytestmark = pytest.mark.timeout(120)
DP = {"rows": {"shard": {"axis": 0}}, "params": {"replicate": {}}}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    cl = LocalCluster(workers=2)
    yield cl
    cl.stop()


@pytest.fixture
def conn(cluster):
    request(cluster.endpoints["control"], "config_apply", {"config": {}, "by": "test"})
    c = gt.connect(cluster.address, timeout=30)
    yield c
    gt.disconnect()


def _client(cluster: LocalCluster, cno: int) -> dict:
    return next(c for c in request(cluster.address, "stats")["clients"] if c["id"] == cno)


def round_trips(n: int) -> list[float]:
    x = gt.zeros(4)
    return [float((x + i).numpy()[0]) for i in range(n)]


def test_round_trips_go_straight_to_the_worker_after_the_first(cluster, conn):
    assert round_trips(20) == [float(i) for i in range(20)]
    # the first batch goes through the dispatcher, which forwards it whole: then the worker knows
    # the client and says so, and the next ones go straight there
    assert conn.direct_batches >= 18, (conn.direct_batches, conn.sent_batches)

    # the dispatcher still counts every batch and instruction (told a few ms later)
    def counted() -> bool:
        c = _client(cluster, conn.client_no)
        return (c["batches"], c["instructions"]) == (conn.sent_batches, conn.sent_instructions)

    wait_for(counted)


def test_a_worker_error_in_a_direct_batch_is_raised_at_the_sync(conn):
    round_trips(3)
    before = conn.direct_batches
    x = gt.zeros(3)
    bad = x[gt.tensor([0, 7])]  # found out of range on the worker only
    bad.add_(1.0)
    with pytest.raises(gt.WorkerError, match="getitem"):
        gt.sync()  # (a batch without a fetch: the worker acknowledges it with its errors)
    assert conn.direct_batches > before
    assert round_trips(2) == [0.0, 1.0]  # and the connection goes on


def test_new_source_lines_of_direct_batches_reach_the_dispatcher(cluster, conn):
    round_trips(3)
    before = conn.direct_batches
    y = gt.ones(2) * 3.0  # a line of this file the client has not sent before
    assert y.numpy().tolist() == [3.0, 3.0]
    assert conn.direct_batches > before
    line = next(
        i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "y = gt.ones(2)" in t
    )

    def seen() -> bool:
        # (the lines travel to the dispatcher on the client's socket, this request on another:
        # on a busy machine the dispatcher may answer it first)
        locs = request(cluster.address, "snapshot")["srclocs"]
        mine = locs.get(conn.client_no) or locs.get(str(conn.client_no)) or {}
        return any(text.endswith(f"test_direct_batches.py:{line}") for text in mine.values())

    wait_for(seen)


def test_a_batch_with_signals_keeps_the_client_on_the_dispatcher(conn):
    round_trips(3)
    with gt.signal.context("rows"):
        y = gt.ones(4) + 1.0
    assert y.numpy().tolist() == [2.0] * 4
    before = conn.direct_batches
    assert round_trips(5) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert conn.direct_batches == before  # the dispatcher may have placed its tensors


def test_a_config_applied_mid_run_routes_batches_through_the_dispatcher_and_back(cluster, conn):
    control = cluster.endpoints["control"]
    round_trips(3)
    request(control, "config_apply", {"config": DP, "by": "test"})
    x = gt.arange(8, dtype=gt.float32)
    wait_for(lambda: (x + 0).numpy() is not None and not conn._route_direct, timeout=30)
    before = conn.direct_batches
    # planned now: a shard rule applies to this client's new tensors at once
    with gt.signal.context("rows"):
        z = gt.arange(20).reshape(10, 2)
    gt.sync()
    assert request(cluster.address, "placement")[conn.client_no][z.id].startswith("shard(axis=0")
    np.testing.assert_array_equal((z * 2).numpy(), np.arange(20).reshape(10, 2) * 2)
    assert conn.direct_batches == before
    request(control, "config_apply", {"config": {}, "by": "test"})
    np.testing.assert_array_equal((x + 1).numpy(), np.arange(8) + 1)  # (placed: stays planned)
    assert conn.direct_batches == before


def test_a_client_goes_straight_again_once_a_config_is_cleared(cluster):
    control = cluster.endpoints["control"]
    request(control, "config_apply", {"config": DP, "by": "test"})
    try:
        conn = gt.connect(cluster.address, timeout=30)
        assert round_trips(5) == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert conn.direct_batches == 0  # a config with rules: every batch is planned
        request(control, "config_apply", {"config": {}, "by": "test"})
        x = gt.zeros(4)
        wait_for(lambda: (x + 1).numpy()[0] == 1.0 and conn.direct_batches >= 2, timeout=30)
    finally:
        gt.disconnect()
        request(control, "config_apply", {"config": {}, "by": "test"})


def test_without_a_direct_link_batches_go_through_the_dispatcher(cluster, monkeypatch):
    monkeypatch.setenv("GT_NO_DIRECT", "1")
    conn = gt.connect(cluster.address, timeout=30)
    try:
        assert round_trips(10) == [float(i) for i in range(10)]
        assert conn.direct_batches == 0
    finally:
        gt.disconnect()


def test_a_batch_from_a_stranger_on_the_data_socket_is_refused_with_an_error(cluster, conn):
    round_trips(2)  # the worker is up and knows this client (not the stranger)
    data = conn.workers[0]["data"] if conn.home_worker == conn.workers[0]["id"] else None
    data = data or next(w["data"] for w in conn.workers if w["id"] == conn.home_worker)
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.IDENTITY, os.urandom(16))
    s.setsockopt(zmq.RCVTIMEO, 10_000)
    try:
        s.connect(data)
        body = msgpack.packb([[[1, 5, [1.0], {"shape": [2], "dtype": "float32"}, 0]], []])
        s.send_multipart([P.encode(P.Batch(1, 1)), body])
        msg = P.parse(s.recv_multipart()[0])
        assert type(msg) is P.Error and msg.code == P.E_UNKNOWN_CLIENT
    finally:
        s.close(0)
    assert round_trips(2) == [0.0, 1.0]  # the worker runs on


def test_exec_events_say_how_many_batches_wait_on_the_worker(cluster, conn):
    """The dispatcher no longer sees a direct client's batches in flight: the worker's own exec
    events say how deep its queue is (the dashboard's queue column)."""
    from gt.trace import events as E

    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(cluster.endpoints["events"])
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        wait_for(lambda: sub.poll(100), timeout=10)  # subscribed: the dispatcher's stats arrive
        round_trips(3)
        a = gt.ones(400, 400)
        for _ in range(60):  # one long batch (about a second on this machine) ...
            a = (a @ a) * 0.0025
        conn.flush()
        for i in range(3):  # ... and three short ones behind it
            gt.ones(2) + float(i)
            conn.flush()
        gt.sync()
        assert conn.direct_batches >= 4
        queues: list[int] = []

        def heard() -> bool:
            while sub.poll(50):
                source, _seq, events = E.unpack_batch(sub.recv_multipart()[1])
                queues.extend(f["queue"] for kind, _t, f in events
                              if kind == E.EXEC and f.get("client") == conn.client_no)  # fmt: skip
            return len(queues) >= 4 and queues[-1] == 0

        wait_for(heard, timeout=20)
        assert all(type(q) is int and q >= 0 for q in queues), queues
        assert max(queues) >= 1, queues  # the short batches waited behind the long one
    finally:
        sub.close(0)


def test_a_control_request_goes_after_the_direct_batches_sent_before_it(conn):
    """Configs and memory settings apply from the point of the program that asked for them: the
    dispatcher must not act on one before the worker has run what was sent before it."""
    round_trips(3)
    a = gt.ones(400, 400)
    for _ in range(60):  # a long batch, sent straight to the worker without a sync
        a = (a @ a) * 0.0025
    conn.flush()
    # (one batch, or more where the client's timer thread sent part of it first: a busy machine)
    assert conn._in_flight >= 1
    conn.control("stats")
    assert conn._in_flight == 0  # it ran before the request went


def test_a_window_wider_than_the_direct_links_is_capped_there(cluster):
    """A program may ask for a wide window; its worker takes at most DIRECT_WINDOW batches from
    the direct link, so the client waits there instead of being refused."""
    conn = gt.connect(cluster.address, timeout=30, window=200, batch_limit=1)
    try:
        round_trips(2)
        x = gt.zeros(4)
        for _ in range(300):  # one instruction a batch: 300 batches, pipelined
            x = x + 1
        assert x.numpy().tolist() == [300.0] * 4
        assert conn.direct_batches >= 300
    finally:
        gt.disconnect()


class _Frame:
    def __init__(self, data: bytes):
        self.buffer = memoryview(data)


def test_a_worker_refusal_waits_briefly_for_the_dispatcher_to_say_why(conn):
    """When a worker refuses a direct batch (it no longer knows the client), the dispatcher has
    usually said why on its own socket (a revoked key): that reason wins; without one, the
    worker's is raised after a grace instead of leaving the program waiting."""
    from gt.runtime.client.receiving import REFUSED_GRACE_S

    round_trips(2)
    refusal = P.encode(P.Error(P.E_UNKNOWN_CLIENT, "the worker does not know this client"))
    conn._handle([_Frame(refusal)], direct=True)
    assert conn._broken is None  # not yet: the dispatcher may say why
    conn._refused = (conn._clock.now() - REFUSED_GRACE_S - 1, conn._refused[1])
    conn._pump(0.01)
    assert isinstance(conn._broken, gt.DispatcherLost)
    assert "the worker refused this program's batch" in str(conn._broken)
    conn._broken = None
    conn._refused = None
    conn._handle([_Frame(refusal)], direct=True)  # and this time the dispatcher explains
    conn._handle([_Frame(P.encode(P.Error(P.E_REVOKED, "tenant carol's key was taken out")))])
    assert "carol's key was taken out" in str(conn._broken)
    conn._broken = None  # (the connection itself is fine: let the fixture close it)
