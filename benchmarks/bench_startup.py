"""Start-up: how long GT's processes take to start, against what they cannot avoid importing.

Run ``python benchmarks/bench_startup.py [--runs 10]`` from the repository root (~30 s on 2 cores).

* **imports**: a fresh interpreter running ``import numpy, zmq`` (the floor: every GT process
  needs both) against ``import gt`` (a program's first line), ``gt --help``, and what a worker and
  a dispatcher import before serving. Medians of ``--runs`` interpreters each; ratios to the floor.
* **a local cluster**: ``LocalCluster(workers=2)`` until both workers have registered, and its
  ``stop()`` (the dispatcher and its workers gone), ``--runs`` times: median and max. This is what
  every ``gt run``, ``gt demo`` and the first op of a program without ``GT_DISPATCHER`` pay, and
  what the test suite pays for each of its clusters.

Nothing here has a pass/fail target; the numbers go to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402 - the benchmarks' shared helpers, next to this file

REPO = Path(__file__).resolve().parent.parent

IMPORTS = {
    "floor: import numpy, zmq": ["-c", "import numpy, zmq"],
    "import gt": ["-c", "import gt"],
    "gt --help": ["-m", "gt", "--help"],
    "a worker's imports": ["-c", "import gt.runtime.worker.loop, gt.cli; "
                           "from gt.runtime.worker.backend import load_backend; load_backend()"],
    "a dispatcher's imports": ["-c", "import gt.runtime.dispatcher.loop, gt.cli"],
}  # fmt: skip


def _interpreter_s(args: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def _cluster_s(runs: int) -> tuple[list[float], list[float]]:
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    starts, stops = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        c = LocalCluster(workers=2)
        t1 = time.perf_counter()
        c.stop()
        starts.append(t1 - t0)
        stops.append(time.perf_counter() - t1)
    return starts, stops


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=10, help="interpreters / clusters per figure")
    args = p.parse_args(argv)
    common.print_machine(common.machine_info())
    floor = None
    for name, cmd in IMPORTS.items():
        med = statistics.median(_interpreter_s(cmd, args.runs))
        floor = floor or med
        print(f"  {name:26s} {med * 1e3:6.0f} ms  ({med / floor:.2f}x the floor)", flush=True)
    starts, stops = _cluster_s(args.runs)
    print(f"  LocalCluster(workers=2)    start median {statistics.median(starts):.2f} s "
          f"(max {max(starts):.2f}), stop median {statistics.median(stops):.2f} s "
          f"(max {max(stops):.2f}) over {args.runs} runs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
