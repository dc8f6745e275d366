"""Key press to repaint in ``gt top`` while the runtime runs the pipelined tiny-op benchmark.

Starts a 1-worker local cluster, a client thread that keeps ``x = x + 1`` going at full rate, and
``gt top`` in a pseudo-terminal; then presses ``?`` (help) and ``escape`` in turn and times how
long until the terminal shows the change. Target: < 200 ms.

    python benchmarks/bench_top_latency.py [--presses 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

import pexpect


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--presses", type=int, default=10)
    args = ap.parse_args()
    import gt
    from gt.runtime.launch import LocalCluster

    cluster = LocalCluster(workers=1)
    stop = threading.Event()
    done = {"ops": 0}

    def load() -> None:
        gt.connect(cluster.address)
        x = gt.zeros(4)
        while not stop.is_set():
            for _ in range(10_000):
                x = x + 1
            x.numpy()
            done["ops"] += 10_000
        gt.disconnect()

    worker = threading.Thread(target=load, daemon=True)
    tui = pexpect.spawn(
        sys.executable,
        ["-m", "gt", "top", "--connect", cluster.address],
        dimensions=(40, 140),
        timeout=10,
        encoding="utf-8",
    )
    lat: list[float] = []
    try:
        worker.start()
        tui.expect("workers", timeout=20)
        time.sleep(2.0)
        t_start, ops0 = time.perf_counter(), done["ops"]
        for _ in range(args.presses):
            tui.read_nonblocking(1_000_000, timeout=0.2) if tui.isalive() else None
            t0 = time.perf_counter()
            tui.send("?")
            tui.expect("everywhere", timeout=5)  # a heading of the help screen
            lat.append(time.perf_counter() - t0)
            time.sleep(0.3)
            tui.send("\x1b")
            tui.expect("timeline", timeout=5)
            time.sleep(0.5)
        rate = (done["ops"] - ops0) / (time.perf_counter() - t_start)
    finally:
        stop.set()
        tui.terminate(force=True)
        worker.join(timeout=10)
        cluster.stop()
    p50, worst = statistics.median(lat), max(lat)
    print(
        f"key press -> repaint in gt top under load (~{rate / 1000:.0f}k ops/s): "
        f"median {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms over {len(lat)} presses (target < 200 ms)"
    )
    return 0 if worst < 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
