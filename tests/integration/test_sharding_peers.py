"""Worker-to-worker collectives over real ZeroMQ sockets, one thread per simulated worker (ipc
sockets, as in a local cluster; TCP with CURVE is what test_multihost.py runs)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import zmq

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.peers import PeerFailure, Peers

pytestmark = pytest.mark.timeout(60)
OP = O.OPCODE


class Node:
    """One simulated worker: a data socket, its peer links, and a drain loop."""

    def __init__(self, ctx: zmq.Context, wid: int, where: str):
        self.data = ctx.socket(zmq.ROUTER)
        self.data.setsockopt(zmq.LINGER, 0)
        self.endpoint = f"ipc://{where}/w{wid}"
        self.data.bind(self.endpoint)
        self.peers = Peers(wid, ctx, self.data, self.drain, None, Backend(np, "cpu"), lambda: False)
        self.peers.timeout = 5.0

    def drain(self) -> None:
        while True:
            try:
                frames = self.data.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            msg = P.parse(frames[1].buffer)
            self.peers.accept(frames[0].bytes, msg, frames[2])


@pytest.fixture
def nodes(tmp_path):
    ctx = zmq.Context()
    made = [Node(ctx, i, str(tmp_path)) for i in range(5)]
    table = {i: n.endpoint for i, n in enumerate(made)}
    for n in made:
        n.peers.set_endpoints(table)
    yield made
    for n in made:
        n.peers.close()
        n.data.close(0)
    ctx.term()


def in_threads(work: Any, keys: Any) -> dict[Any, Any]:
    """``work(k)`` for each key in its own thread; results (or exceptions) by key."""
    results: dict[Any, Any] = {}

    def run(k: Any) -> None:
        try:
            results[k] = work(k)
        except Exception as exc:  # collected and checked by the test
            results[k] = exc

    threads = [threading.Thread(target=run, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a collective hung"
    return results


def run_all(nodes: list[Node], jobs: dict[int, tuple]) -> dict[int, Any]:
    """Run ``jobs[w] = (opcode, vals, attrs[, err])`` on each node in its own thread."""
    return in_threads(lambda w: nodes[w].peers.run(*jobs[w]), list(jobs))


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_ring_all_reduce(nodes, n, op):
    rng = np.random.default_rng(n)
    xs = [rng.standard_normal((5, 2)).astype(np.float32) for _ in range(n)]  # 10 values over n
    ws = list(range(n))
    out = run_all(
        nodes, {w: (OP["all_reduce"], [xs[w]], {"workers": ws, "op": op, "tag": 1}) for w in ws}
    )
    want = np.sum(xs, axis=0) if op == "sum" else np.max(xs, axis=0)
    for w in ws:
        np.testing.assert_allclose(out[w], want, rtol=1e-6)
        assert out[w].shape == (5, 2)


@pytest.mark.parametrize("n", [2, 4])
def test_ring_all_gather_and_reduce_scatter_with_uneven_blocks(nodes, n):
    rng = np.random.default_rng(0)
    sizes = [3, 1, 2, 1][:n]
    full = rng.standard_normal((4, sum(sizes))).astype(np.float32)
    starts = np.cumsum([0, *sizes])
    ws = list(range(n))
    attrs = {"workers": ws, "axis": 1, "tag": 2}
    out = run_all(
        nodes, {w: (OP["all_gather"], [full[:, starts[w] : starts[w + 1]]], attrs) for w in ws}
    )
    for w in ws:
        np.testing.assert_array_equal(out[w], full)
    parts = [rng.standard_normal((sum(sizes), 3)).astype(np.float32) for _ in ws]
    attrs = {"workers": ws, "axis": 0, "sizes": sizes, "op": "sum", "tag": 3}
    out = run_all(nodes, {w: (OP["reduce_scatter"], [parts[w]], attrs) for w in ws})
    total = np.sum(parts, axis=0)
    for w in ws:
        np.testing.assert_allclose(out[w], total[starts[w] : starts[w + 1]], rtol=1e-6)


def test_tree_broadcast_scatter_and_gather_with_an_outside_root(nodes):
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    ws = [3, 0, 1, 2, 4]  # root first
    out = run_all(
        nodes,
        {w: (OP["bcast"], [x] if w == 3 else [], {"workers": ws, "root": 3, "tag": 4}) for w in ws},
    )
    for w in ws:
        np.testing.assert_array_equal(out[w], x)
    attrs = {"workers": [0, 1, 2], "root": 4, "axis": 0, "sizes": [4, 3, 3], "tag": 5}
    jobs = {w: (OP["scatter"], [], attrs) for w in (0, 1, 2)}
    jobs[4] = (OP["scatter"], [x], attrs)
    out = run_all(nodes, jobs)
    np.testing.assert_array_equal(out[1], x[4:7])
    assert out[4] is x  # the root keeps its tensor
    attrs = {"workers": [0, 1, 2], "root": 4, "axis": 0, "tag": 6}
    jobs = {w: (OP["gather"], [out[w]], attrs) for w in (0, 1, 2)}
    jobs[4] = (OP["gather"], [], attrs)
    np.testing.assert_array_equal(run_all(nodes, jobs)[4], x)


def test_a_failed_input_fails_every_participant_with_the_original_error(nodes):
    ws = [0, 1, 2]
    err = ["IndexError: index 9 is out of bounds", OP["getitem"], 17]
    jobs = {
        w: (OP["all_reduce"], [np.ones(6, np.float32)], {"workers": ws, "op": "sum", "tag": 7})
        for w in ws
    }
    jobs[1] = (OP["all_reduce"], [None], {"workers": ws, "op": "sum", "tag": 7}, err)
    out = run_all(nodes, jobs)
    for w in ws:
        assert isinstance(out[w], PeerFailure) and out[w].err == err


def test_a_missing_peer_is_a_timeout_not_a_hang(nodes):
    nodes[0].peers.timeout = 0.3
    out = run_all(nodes, {0: (OP["recv"], [], {"peer": 1, "tag": 8})})
    assert isinstance(out[0], TimeoutError) and "GT_PEER_TIMEOUT" in str(out[0])
