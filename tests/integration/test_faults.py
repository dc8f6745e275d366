"""Faults: dead workers, dead clients, a dead dispatcher, garbage on every socket."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import msgpack
import numpy as np
import pytest
import zmq
from helpers import wait_for

import gt
from gt.runtime import protocol as P
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster


@pytest.fixture
def fresh_cluster(monkeypatch):
    monkeypatch.setenv("GT_CLIENT_TIMEOUT", "2")
    with LocalCluster(workers=2) as c:
        yield c
    gt.disconnect()


def test_killing_a_worker_raises_worker_lost_quickly(fresh_cluster):
    conn = gt.connect(fresh_cluster.address, timeout=60)
    x = gt.randn(200, 200)
    x.sum().item()
    pid = request(fresh_cluster.address, "stats")["workers"][conn.home_worker]["pid"]
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(gt.WorkerLost, match="worker"):
        for _ in range(10_000):
            x = x @ x * 0.001
        x.numpy()
    assert time.monotonic() - t0 < 8
    # a new client is placed on the surviving worker and works
    gt.disconnect()
    gt.connect(fresh_cluster.address, timeout=30)
    assert gt.ones(3).sum().item() == 3


def test_killing_a_remote_worker_is_found_by_heartbeat(fresh_cluster, tmp_path):
    # a worker added from "another terminal" is not the dispatcher's child: only heartbeats tell
    extra = subprocess.Popen(
        [sys.executable, "-m", "gt", "worker", "--connect", fresh_cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: len(request(fresh_cluster.address, "stats")["workers"]) == 3, timeout=20)
        extra.kill()
        extra.wait(timeout=5)
        # a heartbeat from another socket must not keep the dead worker alive
        forger = zmq.Context.instance().socket(zmq.DEALER)
        forger.setsockopt(zmq.LINGER, 0)
        forger.connect(request(fresh_cluster.address, "endpoints")["back"])
        for _ in range(110):  # longer than the 3 s liveness limit
            forger.send(P.encode(P.Heartbeat()))
            time.sleep(0.05)
        forger.close(0)

        def extra_alive():
            return [
                w["alive"]
                for w in request(fresh_cluster.address, "stats")["workers"]
                if w["pid"] == extra.pid
            ]

        wait_for(lambda: extra_alive() == [False], timeout=1)
    finally:
        if extra.poll() is None:
            extra.kill()
        extra.wait(timeout=5)
        extra.stdout.close()


def test_a_killed_client_leaves_no_tensors_behind(fresh_cluster, tmp_path):
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent(f"""
        import gt, sys, time
        gt.connect({fresh_cluster.address!r})
        keep = [gt.randn(100, 100) for _ in range(20)]
        gt.sync()
        print("ready", flush=True)
        time.sleep(60)
    """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"

        def held():
            return sum(
                w["stats"].get("tensors", 0)
                for w in request(fresh_cluster.address, "stats")["workers"]
            )

        wait_for(lambda: held() == 20)
        proc.kill()
        wait_for(lambda: held() == 0, timeout=10)
        assert request(fresh_cluster.address, "stats")["clients"] == []
    finally:
        proc.kill()
        proc.wait(timeout=5)
        proc.stdout.close()


def test_batches_dropped_with_a_killed_client_are_not_counted_as_run(fresh_cluster, tmp_path):
    # The dispatcher's per-worker batch count and the worker's own must agree after a client
    # leaves with work still queued on its worker: those batches were dropped, not run.
    script = tmp_path / "busy.py"
    script.write_text(
        textwrap.dedent(f"""
        import gt, time
        gt.connect({fresh_cluster.address!r})
        x = gt.randn(800, 800)  # seconds of work a batch: some is still queued when the
        print("ready", flush=True)  # dispatcher learns of the kill, however busy the machine
        while True:
            for _ in range(300):
                x = (x @ x) * 0.00125
    """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    addr = fresh_cluster.address
    try:
        assert proc.stdout.readline().strip() == "ready"

        def worker_of_client() -> dict | None:
            for w in request(addr, "stats")["workers"]:
                if w["clients"] and w["in_flight"] >= 3:
                    return w
            return None

        wait_for(lambda: worker_of_client() is not None, timeout=60)
        proc.kill()

        def agreed() -> bool:
            stats = request(addr, "stats")
            return not stats["clients"] and all(
                w["in_flight"] == 0 and w["stats"].get("batches") == w["batches"]
                for w in stats["workers"]
            )

        wait_for(agreed, timeout=60)
        assert sum(w["dropped"] for w in request(addr, "stats")["workers"]) >= 1
    finally:
        proc.kill()
        proc.wait(timeout=5)
        proc.stdout.close()


def test_a_dead_dispatcher_raises_instead_of_hanging(fresh_cluster):
    gt.connect(fresh_cluster.address, timeout=60)
    x = gt.randn(10)
    x.sum().item()
    fresh_cluster.proc.kill()
    fresh_cluster.proc.wait()
    t0 = time.monotonic()
    with pytest.raises((gt.DispatcherLost, gt.WorkerLost)):
        (x + 1).numpy()
    assert time.monotonic() - t0 < 10


def test_garbage_on_every_socket_is_counted_and_ignored(fresh_cluster):
    conn = gt.connect(fresh_cluster.address, timeout=30)
    x = gt.arange(10)
    eps = request(fresh_cluster.address, "endpoints")
    data_ep = conn.workers[0]["data"]
    ctx = zmq.Context.instance()
    rng = np.random.default_rng(0)
    socks = []
    try:
        for ep, kind in [
            (eps["front"], zmq.DEALER),
            (eps["back"], zmq.DEALER),
            (eps["control"], zmq.DEALER),
            (data_ep, zmq.DEALER),
            (eps["events_in"], zmq.PUSH),
        ]:
            s = ctx.socket(kind)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(ep)
            socks.append(s)
        for s in socks:
            for _ in range(30):
                frames = [
                    rng.bytes(int(rng.integers(0, 64))) for _ in range(int(rng.integers(1, 4)))
                ]
                s.send_multipart(frames)
            # well-formed msgpack that is not a GT message, and a GT header with bad fields
            s.send_multipart([msgpack.packb({"hello": 1})])
            s.send_multipart([msgpack.packb([P.VERSION, P.Done.KIND, "x", None, None])])
            s.send_multipart([msgpack.packb([P.VERSION, P.Batch.KIND, 1, "n", None]), b"\x93"])
        wait_for(lambda: request(fresh_cluster.address, "stats")["bad_messages"] > 0, timeout=10)
        # the legitimate client carries on, and the dispatcher is still answering
        np.testing.assert_array_equal((x * 2).numpy(), np.arange(10) * 2)
        stats = request(fresh_cluster.address, "stats")
        assert stats["internal_errors"] == 0  # garbage is bad input, never a bug
        assert all(w["alive"] for w in stats["workers"])
    finally:
        for s in socks:
            s.close(0)


def test_garbage_and_unclaimed_uploads_on_a_workers_data_socket_are_counted_and_bounded(
    monkeypatch,
):
    monkeypatch.setenv("GT_UNCLAIMED_MAX_BYTES", str(3 << 20))
    with LocalCluster(workers=1) as cl:
        worker = request(cl.address, "stats")["workers"][0]
        conn = gt.connect(cl.address, timeout=30)
        try:
            data_ep = next(w["data"] for w in conn.workers if w["id"] == worker["id"])
            s = zmq.Context.instance().socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(data_ep)
            try:
                for tok in range(20):  # 20 MiB nobody will ever claim
                    s.send_multipart([P.encode(P.Upload(10_000 + tok)), b"\0" * (1 << 20)])
                s.send_multipart([b"not a header", b""])
                s.send_multipart([P.encode(P.Heartbeat()), b""])  # well formed, wrong socket

                def worker_stats() -> dict:
                    return request(cl.address, "stats")["workers"][0]["stats"]

                wait_for(lambda: worker_stats().get("bad_messages") == 2, timeout=20)
                wait_for(lambda: 0 < worker_stats().get("unclaimed", 0) <= 3 << 20, timeout=20)
            finally:
                s.close(0)
            np.testing.assert_array_equal(gt.arange(4).numpy(), [0, 1, 2, 3])  # still serving
        finally:
            gt.disconnect()
