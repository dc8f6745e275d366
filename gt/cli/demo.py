"""``gt demo``: a real local cluster running a small training-style workload.

With more than one worker the demo runs data-parallel under a shard config: the samples are split
over the workers (each computes its rows of the predictions and its part of the gradient), the
weights are replicated, and the gradient's partial sums are all-reduced over direct worker links
every step -- so ``gt top`` shows every worker computing and the transfers between them.

In a terminal the dashboard runs in this process and the workload (:func:`run_demo`) in a client
process (``gt demo --no-tui``) of the same local cluster.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from gt.cli.common import Subparsers, count_arg, positive_arg, record_problem
from gt.cli.run import run_command, worker_count

#: The demo's shard config: the data split by rows over every worker, the parameters replicated.
DEMO_CONFIG = {"data": {"shard": {"axis": 0}}, "params": {"replicate": {}}}


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt demo``."""
    p = subparsers.add_parser(
        "demo", help="a local cluster running a sample sharded training workload, dashboard live"
    )
    p.add_argument("--workers", type=worker_count, default=2, help="workers (default 2)")
    p.add_argument(
        "--steps",
        type=_steps,
        default=None,
        help="training steps (default 20000 with the dashboard, 200 without)",
    )
    p.add_argument(
        "--no-tui",
        action="store_true",
        help="no dashboard: print progress (the default when not in a terminal)",
    )
    p.add_argument(
        "--record", metavar="FILE", help="also record the run to FILE (.gtrace) for `gt replay`"
    )
    p.add_argument(
        "--hz", type=positive_arg, default=8.0, help="dashboard refresh rate (default 8)"
    )
    p.set_defaults(func=run)


#: ``--steps``: a number of training steps, at least 1.
_steps = count_arg("step")


def run(args: argparse.Namespace) -> int:
    """Run ``gt demo``; returns the workload's exit status (0 when the fit converged, or got
    better over fewer steps than converging takes)."""
    if args.record and record_problem(args.record):
        print(f"gt demo: {record_problem(args.record)}", file=sys.stderr)
        return 2
    if args.no_tui or not sys.stdout.isatty():
        if args.record and not os.environ.get("GT_DISPATCHER"):
            os.environ["GT_RECORD"] = args.record
        return run_demo(workers=args.workers, steps=args.steps or 200)
    # The dashboard runs here; the workload is a client process of the same local cluster.
    child = [
        sys.executable,
        "-m",
        "gt",
        "demo",
        "--no-tui",
        "--workers",
        str(args.workers),
        "--steps",
        str(args.steps or 20000),
    ]
    return run_command(child, workers=args.workers, record=args.record, tui=True, hz=args.hz)


def _wait_for_workers(conn: object, n: int, timeout: float = 30.0) -> int:
    """Wait until ``n`` workers have registered (so the config spreads over all of them)."""
    deadline = time.monotonic() + timeout
    alive = 0
    while time.monotonic() < deadline:
        alive = sum(1 for w in conn.control("stats")["workers"] if w["alive"])
        if alive >= n:
            break
        time.sleep(0.05)
    return alive


def run_demo(workers: int = 2, steps: int = 200) -> int:
    """Start a local cluster, run a least-squares fit by gradient descent, print what happened."""
    import gt

    gt.gpu_workers(workers)
    t0 = time.perf_counter()
    conn = gt.session.get_connection()
    alive = _wait_for_workers(conn, workers)
    print(f"started a local cluster: dispatcher {conn.address}, {alive} worker(s) "
          f"({', '.join(w['device'] for w in conn.control('stats')['workers'])})")  # fmt: skip
    if alive > 1:
        gt.load_config(DEMO_CONFIG)
        print(f"shard config: samples split by rows over {alive} workers, weights replicated, "
              "gradients all-reduced between the workers")  # fmt: skip
    gt.manual_seed(0)
    n, d, k = 2048, 256, 16
    with gt.signal.context("data"):
        x = gt.randn(n, d)
    with gt.signal.context("params"):
        w_true = gt.randn(d, k)
        w = gt.zeros(d, k)
    with gt.signal.context("data"):
        y = x @ w_true
    lr = 0.1
    first = None
    for step in range(steps):
        with gt.signal.context("data"):
            err = x @ w - y  # each worker: its rows
        grad = (
            x.T @ err * (2.0 / n)
        )  # per-worker partial sums, combined where the update needs them
        w = w - grad * lr
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            loss = (err * err).mean().item()
            first = loss if first is None else first
            print(f"step {step:4d}  loss {loss:.6f}")
    gt.sync()
    dt = time.perf_counter() - t0
    with gt.signal.context("data"):
        final = float(((x @ w - y) ** 2).mean())
    if alive > 1:
        where = conn.control("placement").get(conn.client_no, {})
        print(f"where the data lives: x {where.get(x.id, '?')}, w {where.get(w.id, '?')}")
    print(f"{conn.sent_instructions} instructions in {conn.sent_batches} batches, {dt:.2f}s; "
          f"final loss {final:.2e}")  # fmt: skip
    converged = final < 1e-3 and math.isfinite(final)
    # a short run (the user asked for few steps) is fine as long as the fit got better
    ok = converged or (math.isfinite(final) and first is not None and final < first)
    if converged:
        print("demo finished")
    elif ok:
        print(f"demo finished: loss {first:.3g} -> {final:.3g} in {steps} steps "
              "(not converged yet: 200 steps converge)")  # fmt: skip
    else:
        print("demo did not converge")
    gt.disconnect()
    return 0 if ok else 1
