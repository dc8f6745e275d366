"""Tenants on one worker take turns: a client's long batch is cut into slices while another
client waits, so the other's small round trips are not held up for the length of that batch."""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import gt
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster

pytestmark = pytest.mark.timeout(120)

#: Client A: one batch of heavy ops (sent whole: its timer never flushes on its own), timed; at
#: least argv[2] ops, more where the machine is fast enough to run those in under a second.
LONG_BATCH = textwrap.dedent(
    """
    import sys, time, gt
    gt.connect(sys.argv[1], timeout=60, flush_interval=60.0, batch_limit=1_000_000)
    x = gt.ones(1_000_000)
    x.numpy()
    t = time.perf_counter()       # calibrate: the batch must run about 1 s on this machine,
    for _ in range(200):          # however fast it is today
        x = x * 1.0000001
    x.numpy()
    n = min(30_000, max(int(sys.argv[2]), int(200 * 1.0 / (time.perf_counter() - t))))
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(n):
        x = x * 1.0000001
    t = time.time()
    x.numpy()                       # the batch goes now, whole, and this waits for its end
    print(t, time.time(), flush=True)
    """
)


def test_a_long_batch_of_one_client_does_not_hold_up_another_clients_round_trips():
    with LocalCluster(workers=1) as cluster:
        a = subprocess.Popen([sys.executable, "-c", LONG_BATCH, cluster.address, "3000"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert a.stdout.readline().strip() == "ready"
            gt.connect(cluster.address, timeout=60)
            y = gt.zeros(4)
            y.numpy()
            trips: list[tuple[float, float]] = []  # (sent, answered), wall clock as A's
            done = threading.Event()

            def b_client() -> None:
                while not done.is_set():
                    t = time.time()
                    assert (y + 1).numpy()[0] == 1.0
                    trips.append((t, time.time()))

            b = threading.Thread(target=b_client)
            b.start()
            a.stdin.write("go\n")
            a.stdin.flush()
            a_start, a_end = map(float, a.stdout.readline().split())
            done.set()
            b.join(30)
        finally:
            gt.disconnect()
            a.kill()
            a.wait()
    a_seconds = a_end - a_start
    inside = [b - s for s, b in trips if s >= a_start and b <= a_end]
    assert a_seconds > 0.3, a_seconds  # A's batch ran long enough to be worth cutting
    # Run to completion, B's round trip sent during A's batch would wait for all of it: at most
    # one would finish inside A's window. Cut into slices, B keeps going all along.
    print(
        f"A ran {a_seconds:.2f} s; B: {len(inside)} round trips inside, median {statistics.median(inside or [0]) * 1e3:.1f} ms"
    )
    assert len(inside) >= 5, (len(inside), a_seconds, trips[-5:])
    assert statistics.median(inside) < a_seconds / 5, (statistics.median(inside), a_seconds)


#: Client A queues batches on its worker, then leaves before they have run.
LEAVES_EARLY = textwrap.dedent(
    """
    import sys, gt
    conn = gt.connect(sys.argv[1], timeout=60)
    x = gt.ones(1_000_000)
    x.numpy()
    for _ in range(6):
        for _ in range(300):
            x = x * 1.0000001
        conn.flush()
    gt.disconnect()
    print("left", flush=True)
    """
)


def test_batches_of_a_client_that_left_are_reported_done_so_the_worker_takes_more():
    with LocalCluster(workers=1) as cluster:
        a = subprocess.run([sys.executable, "-c", LEAVES_EARLY, cluster.address],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert a.stdout.strip() == "left", a.stderr
        deadline = time.monotonic() + 30
        while True:
            workers = request(cluster.address, "stats", timeout=5)["workers"]
            if all(w["in_flight"] == 0 for w in workers):
                break
            assert time.monotonic() < deadline, (
                f"batches of a departed client stay in flight: {workers}"
            )
            time.sleep(0.05)
        conn = gt.connect(cluster.address, timeout=30)
        try:
            assert (gt.zeros(3) + 2).numpy().tolist() == [2.0, 2.0, 2.0]
        finally:
            gt.disconnect()
        assert conn.closed
