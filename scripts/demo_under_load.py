"""``gt demo --no-tui`` on a machine kept busy, with one worker paused mid-run: it must finish
and converge (slow is not dead).

    python scripts/demo_under_load.py [--busy 6] [--pause 10] [--steps 200]

Starts ``--busy`` busy-loop processes (which compete with GT's processes for the cores), runs the
demo, and once it has printed its first step sends ``SIGSTOP`` to one of its workers for
``--pause`` seconds. Prints the demo's output, how long it took, and exits with its status (0 when
the fit converged). Every process it starts is stopped when it ends.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from gt.runtime.control import request
from gt.runtime.discovery import live_dispatchers


def _children(pid: int) -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def _demo_worker(demo_pid: int, deadline: float) -> int:
    """The pid of a worker of the dispatcher that the demo started."""
    while time.monotonic() < deadline:
        kids = _children(demo_pid)
        for d in live_dispatchers():
            if d.get("pid") in kids:
                workers = request(d["front"], "stats", timeout=10.0)["workers"]
                if workers:
                    return int(workers[-1]["pid"])
        time.sleep(0.1)
    raise SystemExit("the demo's dispatcher did not show up")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=6, help="busy-loop processes (default 6)")
    ap.add_argument("--pause", type=float, default=10.0, help="seconds a worker is stopped")
    ap.add_argument("--steps", type=int, default=200, help="demo steps (default 200)")
    args = ap.parse_args()

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    demo = None
    try:
        t0 = time.monotonic()
        demo = subprocess.Popen(
            [sys.executable, "-m", "gt", "demo", "--no-tui", "--steps", str(args.steps)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert demo.stdout is not None
        paused = False
        for line in demo.stdout:
            print(line, end="", flush=True)
            if not paused and line.startswith("step"):
                pid = _demo_worker(demo.pid, time.monotonic() + 60)
                print(f"-- pausing worker pid {pid} for {args.pause:.0f}s", flush=True)
                os.kill(pid, signal.SIGSTOP)
                time.sleep(args.pause)
                os.kill(pid, signal.SIGCONT)
                print("-- resumed", flush=True)
                paused = True
        rc = demo.wait()
        load = os.getloadavg()[0]
        print(f"-- demo exited {rc} after {time.monotonic() - t0:.1f}s "
              f"({args.busy} busy loops, load {load:.1f}, worker paused: {paused})")  # fmt: skip
        return rc
    finally:
        for p in busy:
            p.kill()
        if demo is not None and demo.poll() is None:
            demo.terminate()
            demo.wait(10)


if __name__ == "__main__":
    sys.exit(main())
