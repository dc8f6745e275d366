"""What the monitor shows against what happened: a worker inside a long batch says so while it
runs (``busy`` events) and ``gt top --once`` shows it busy with that op, not idle; the bytes of
uploads and fetches count as moved."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zmq
from helpers import wait_for

import gt
from gt.runtime import ops as O
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster
from gt.trace import events as E

pytestmark = pytest.mark.timeout(180)


def _subscriber(cluster: LocalCluster) -> zmq.Socket:
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(cluster.endpoints["events"])
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    return sub


def _long_matmul(seconds: float) -> int:
    """A float64 matmul size that takes about ``seconds`` on this machine (measured here)."""
    n = 600
    a = np.ones((n, n))
    t0 = time.perf_counter()
    a @ a
    per = max(time.perf_counter() - t0, 1e-4)
    return int(n * (seconds / per) ** (1 / 3))


def test_a_worker_in_a_long_op_announces_it_and_top_shows_it_busy():
    n = _long_matmul(4.0)
    with LocalCluster(workers=1) as cluster:
        sub = _subscriber(cluster)
        try:
            gt.connect(cluster.address, timeout=120)
            a = gt.ones(n, n, dtype=gt.float64)
            gt.sync()
            done = threading.Event()

            def run():
                try:
                    (a @ a).sum().item()
                finally:
                    done.set()

            threading.Thread(target=run, daemon=True).start()
            busy = None
            deadline = time.monotonic() + 120
            while busy is None and not done.is_set() and time.monotonic() < deadline:
                if sub.poll(100):
                    _src, _seq, events = E.unpack_batch(sub.recv_multipart()[1])
                    busy = next((f for k, _t, f in events
                                 if k == E.BUSY and f["op"] == O.OPCODE["matmul"]), None)  # fmt: skip
            assert busy is not None, "no busy event naming the matmul while it ran"
            assert busy["worker"] == 0 and busy["t0"] > 0
            if not done.is_set():  # (on a slow machine: the same view as a user's gt top)
                out = subprocess.run(
                    [sys.executable, "-m", "gt", "top", "--once", "--json", "--connect",
                     cluster.address], capture_output=True, text=True, timeout=60,
                )  # fmt: skip
                if not done.is_set():
                    (w,) = json.loads(out.stdout)["workers"]
                    assert w["current_op"] == "matmul" and w["compute"] > 0.5
            assert done.wait(120)
        finally:
            sub.close()
            gt.disconnect()


def test_uploads_and_fetches_count_as_bytes_moved_to_and_from_the_client():
    # (only bytes between workers were counted: a 64 MiB upload and fetch showed "0B moved")
    with LocalCluster(workers=1) as cluster:
        sub = _subscriber(cluster)
        try:
            gt.connect(cluster.address, timeout=60)
            # (once a batch's events arrive, the subscription is in effect)
            deadline = time.monotonic() + 60
            while not sub.poll(50) and time.monotonic() < deadline:
                gt.ones(1).sum().item()
            data = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
            x = gt.tensor(data)
            back = (x + 1).numpy()
            assert back[-1] == data[-1] + 1
            moved: dict = {}
            deadline = time.monotonic() + 60
            while len(moved) < 2 and time.monotonic() < deadline:
                if sub.poll(100):
                    _src, _seq, events = E.unpack_batch(sub.recv_multipart()[1])
                    for k, _t, f in events:
                        if k == E.TRANSFER and f["bytes"] == data.nbytes:
                            moved[f["direction"]] = f
            assert set(moved) == {"from_client", "to_client"}
            for f in moved.values():
                assert f["peer"] is None and f["client"] == gt.session.current().client_no
                assert f["t1"] >= f["t0"]
        finally:
            sub.close()
            gt.disconnect()


def test_a_workers_stats_count_the_bytes_its_clients_fetched(conn, cluster):
    x = gt.ones(256, 1024)  # 1 MiB
    for _ in range(3):
        x.numpy()

    def fetched() -> int:
        workers = request(cluster.address, "stats", timeout=10.0)["workers"]
        return sum((w.get("stats") or {}).get("client_bytes", 0) for w in workers)

    # (a monitor that attaches later adds these to what it counts as moved)
    assert wait_for(lambda: fetched() >= 3 * 2**20, timeout=20)
