"""Slow is not dead: paused peers survive, dead ones are found fast, and a dispatcher without
workers says so. (The pauses here are the tests' input, SIGSTOP for a few seconds; every wait for
an outcome is on a condition.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import wait_for

import gt
from gt.runtime.control import ControlError, request
from gt.runtime.launch import LocalCluster


def _workers(address: str) -> list[dict]:
    return request(address, "stats", timeout=5.0)["workers"]


def _pause(pid: int, seconds: float) -> None:
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture
def cluster():
    with LocalCluster(workers=2) as c:
        yield c


def test_a_worker_paused_for_seconds_is_not_taken_for_dead(cluster, monkeypatch):
    monkeypatch.setenv("GT_WORKER_TIMEOUT", "60")
    conn = gt.connect(cluster.address, timeout=60)
    try:
        x = gt.arange(6, dtype=gt.float32)
        assert x.sum().item() == 15.0
        home = next(w for w in _workers(cluster.address) if w["id"] == conn.home_worker)
        _pause(home["pid"], 6.0)  # longer than any old 3 s limit
        assert (x * 2).sum().item() == 30.0  # its tensors are still there
        assert all(w["alive"] for w in _workers(cluster.address))
    finally:
        gt.disconnect()


def test_a_paused_dispatcher_loses_neither_workers_nor_clients(cluster):
    conn = gt.connect(cluster.address, timeout=60)
    try:
        x = gt.tensor([1.0, 2.0, 3.0])
        assert x.sum().item() == 6.0
        _pause(cluster.proc.pid, 5.0)
        np.testing.assert_allclose((x + 1).numpy(), [2.0, 3.0, 4.0])
        assert [w["alive"] for w in _workers(cluster.address)] == [True, True]
        assert conn.control("stats")["clients"][0]["broken"] is None
    finally:
        gt.disconnect()


def test_a_killed_local_worker_is_reported_within_a_second(cluster):
    pid = _workers(cluster.address)[0]["pid"]
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    wait_for(lambda: not _workers(cluster.address)[0]["alive"], timeout=5, interval=0.02)
    assert time.monotonic() - t0 < 1.0


def test_a_local_worker_that_dies_is_started_again_on_its_slot_a_few_times(cluster):
    # (on a GPU machine: a worker stopped by a GPU that failed under it gets a fresh context)
    first = _workers(cluster.address)
    gone = first[0]["pid"]
    os.kill(gone, signal.SIGKILL)
    wait_for(lambda: any(w["pid"] == gone and not w["alive"] for w in _workers(cluster.address)),
             timeout=10)  # fmt: skip
    wait_for(lambda: sum(w["alive"] for w in _workers(cluster.address)) == 2, timeout=30)
    now = _workers(cluster.address)
    new = [w for w in now if w["alive"] and w["pid"] not in {x["pid"] for x in first}]
    assert len(new) == 1 and new[0]["device"] == first[0]["device"]  # its slot's device
    gt.connect(cluster.address, timeout=30)
    try:
        assert gt.tensor([4.0]).item() == 4.0
    finally:
        gt.disconnect()
    for _ in range(2):  # it died twice more within the minute: it stays down
        pid = next(w["pid"] for w in _workers(cluster.address) if w["alive"]
                   and w["pid"] != first[1]["pid"])  # fmt: skip
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda pid=pid: not any(w["pid"] == pid and w["alive"]
                                         for w in _workers(cluster.address)), timeout=10)  # fmt: skip
        wait_for(lambda: cluster_settled(cluster), timeout=30)
    alive = [w for w in _workers(cluster.address) if w["alive"]]
    assert [w["pid"] for w in alive] == [first[1]["pid"]]  # the other worker, untouched


def cluster_settled(cluster) -> bool:
    """No local worker is starting (a restarted one has registered, or none was started)."""
    return request(cluster.address, "stats", timeout=5.0).get("starting", 0) == 0


def test_a_dispatcher_whose_workers_all_died_starts_new_local_ones(cluster):
    killed = {w["pid"] for w in _workers(cluster.address)}
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: sum(w["alive"] and w["pid"] not in killed for w in _workers(cluster.address)) == 2,
        timeout=30,
    )
    gt.connect(cluster.address, timeout=30)
    try:
        assert gt.tensor([4.0]).item() == 4.0
    finally:
        gt.disconnect()


def test_a_dispatcher_with_no_workers_refuses_clients_with_the_reason(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "gt", "dispatcher", "--workers", "0", "--ready-json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        import json

        address = json.loads(proc.stdout.readline())["front"]
        t0 = time.monotonic()
        with pytest.raises(gt.DispatcherLost, match="has no workers.*gt worker --connect"):
            gt.connect(address, timeout=10)
        assert time.monotonic() - t0 < 5  # at once, not after a connect timeout
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_a_killed_dispatcher_is_found_by_its_client_within_seconds(cluster):
    conn = gt.connect(cluster.address, timeout=60)
    try:
        x = gt.tensor([1.0])
        assert x.item() == 1.0
        os.kill(cluster.proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(gt.DispatcherLost):
            for _ in range(200):
                (x + 1).item()
        assert time.monotonic() - t0 < 8
        with pytest.raises(ControlError):
            request(conn.address, "ping", timeout=1.0)
    finally:
        gt.disconnect()


def test_gt_ps_says_how_each_dispatcher_is_and_which_does_not_answer(cluster):
    def ps() -> str:
        done = subprocess.run([sys.executable, "-m", "gt", "ps"], capture_output=True, text=True,
                              timeout=30)  # fmt: skip
        return next(line for line in done.stdout.splitlines() if cluster.address in line)

    assert "2 worker(s), 0 client(s)" in ps()
    os.kill(cluster.proc.pid, signal.SIGSTOP)
    try:
        assert "NOT ANSWERING" in ps()
    finally:
        os.kill(cluster.proc.pid, signal.SIGCONT)


def test_a_program_making_new_source_lines_all_the_time_keeps_hearing_its_dispatcher(
    monkeypatch,
):
    """Source lines sent beside direct batches get no answer: heartbeats must still go out, or
    a program that makes a new line every step (``exec``, a long notebook) took its dispatcher
    for gone once the liveness window passed (60 s by default; 2 s here)."""
    monkeypatch.setenv("GT_CLIENT_TIMEOUT", "2")
    monkeypatch.setenv("GT_HEARTBEAT", "0.2")
    with LocalCluster(workers=1) as c:
        conn = gt.connect(c.address)
        try:
            ns = {"gt": gt, "x": gt.ones(2)}
            deadline = time.monotonic() + 4.0  # two windows of the client's liveness
            i = 0
            while time.monotonic() < deadline:
                exec(f"y = (x + {i}).tolist()", ns)  # a code object of its own: a new line
                i += 1
            assert ns["y"] == [float(i), float(i)] and conn.direct_batches > 0
        finally:
            gt.disconnect()


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("cupy") is not None, reason="CuPy can start here"
)
@pytest.mark.timeout(60)
def test_workers_that_cannot_start_stop_their_dispatcher_and_the_program_is_told_at_once(
    monkeypatch,
):
    # GT_BACKEND=cupy is a valid value, but without CuPy every start of the worker fails: the
    # dispatcher gives up on the slot after its restarts and stops (it waited for ever before,
    # and the program with it, 150 s until its start deadline)
    monkeypatch.setenv("GT_BACKEND", "cupy")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="did not all start .its dispatcher stopped"):
        LocalCluster(workers=1, start_timeout=50)
    assert time.monotonic() - t0 < 40
