"""A background all-reduce moves on between the worker's instructions (``Peers.progress``) without
ever waiting for a peer, over real ZeroMQ sockets; on a CuPy worker (the test double) its data goes
through pinned staging and its transfer events say so."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from gt.runtime import ops as O
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.staging import STAGE_MIN
from tests.integration.test_sharding_peers import Node, in_threads
from tests.unit.test_peers_accounting import _Events as Events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ALL_REDUCE = O.OPCODE["all_reduce"]


@pytest.fixture
def make_nodes(tmp_path):
    ctx = zmq.Context()
    made: list[Node] = []

    def make(n: int, backend=None) -> list[Node]:
        for i in range(n):
            node = Node(ctx, i, str(tmp_path))
            if backend is not None:  # the same sockets, another array backend
                node.peers.backend = backend()
                node.peers.via = "zmq+pinned" if backend().transfer_path == "pinned" else "zmq"
            node.peers.events = Events()
            made.append(node)
        table = {i: x.endpoint for i, x in enumerate(made)}
        for x in made:
            x.peers.set_endpoints(table)
        return made

    yield make
    for x in made:
        x.peers.close()
        x.data.close(0)
    ctx.term()


def _in_threads(nodes, work) -> dict:
    return in_threads(lambda i: work(i, nodes[i].peers), range(len(nodes)))


@pytest.mark.parametrize("n", [2, 3])
def test_progress_alone_completes_a_background_all_reduce(make_nodes, n):
    nodes = make_nodes(n)
    xs = [np.arange(12, dtype=np.float32) * (w + 1) for w in range(n)]
    attrs = {"workers": list(range(n)), "op": "sum", "tag": 1, "async": True}

    def work(w, peers):
        pend = peers.start(ALL_REDUCE, [xs[w]], attrs)
        deadline = time.monotonic() + 20
        while not pend.done and time.monotonic() < deadline:
            peers.progress()  # what the executor calls between instructions
            time.sleep(0.001)
        done_by_progress = pend.done
        return done_by_progress, peers.finish(pend)

    out = _in_threads(nodes, work)
    for w in range(n):
        done_by_progress, value = out[w]
        assert done_by_progress
        np.testing.assert_array_equal(value, np.sum(xs, axis=0))
        assert nodes[w].peers.inflight == []


def test_progress_does_not_wait_for_a_peer_that_has_not_started(make_nodes):
    nodes = make_nodes(2)
    for x in nodes:
        x.peers.timeout = 5.0
    attrs = {"workers": [0, 1], "op": "sum", "tag": 2, "async": True}
    first = nodes[0].peers
    pend = first.start(ALL_REDUCE, [np.ones(8, np.float32)], attrs)
    for _ in range(5):
        first._progress_at = 0  # (look every time)
        first.progress()  # returns although worker 1 has sent nothing yet
    assert not pend.done and pend.run.err is None
    late = {}
    t = threading.Thread(
        target=lambda: late.setdefault(
            "v", nodes[1].peers.run(ALL_REDUCE, [np.full(8, 2, np.float32)], attrs)
        )
    )
    t.start()
    value = first.finish(pend)
    t.join(30)
    np.testing.assert_array_equal(value, np.full(8, 3, np.float32))
    np.testing.assert_array_equal(late["v"], np.full(8, 3, np.float32))


def test_on_a_cupy_worker_the_data_goes_through_pinned_staging(make_nodes):
    nodes = make_nodes(2, backend=lambda: Backend(cp, name="cupy"))
    count = STAGE_MIN // 4 * 2  # float32: well over the staging threshold
    xs = [cp.arange(count, dtype=cp.float32) + w for w in range(2)]
    attrs = {"workers": [0, 1], "op": "sum", "tag": 3, "async": True}

    def work(w, peers):
        return peers.finish(peers.start(ALL_REDUCE, [xs[w]], attrs))

    out = _in_threads(nodes, work)
    want = np.arange(count, dtype=np.float32) * 2 + 1
    for w in range(2):
        assert type(out[w]) is cp.ndarray
        np.testing.assert_array_equal(cp.asnumpy(out[w]), want)
        moves = [f for _k, f in nodes[w].peers.events.emitted if f["direction"] in ("send", "recv")]
        assert moves and {f["via"] for f in moves} == {"zmq+pinned"}
        assert nodes[w].peers.backend.staging.staged_out >= xs[w].nbytes
