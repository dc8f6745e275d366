"""``gt worker --connect ADDR``: add a worker (this machine's GPU, or NumPy) to a dispatcher."""

from __future__ import annotations

import argparse
import os
import sys

from gt.cli.common import Subparsers, install_stop_signals, resolve_endpoints


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt worker``."""
    p = subparsers.add_parser("worker", help="add a worker to a running dispatcher")
    p.add_argument("--connect", help="the dispatcher address printed by `gt dispatcher`")
    p.add_argument(
        "--backend",
        choices=["auto", "numpy", "cupy"],
        help="array backend (default auto: CuPy if a GPU is present)",
    )
    # used by the dispatcher's own workers: its back endpoint, and die with the dispatcher
    p.add_argument("--back", help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run a worker until its dispatcher goes away, SIGTERM or Ctrl-C; 1 if it cannot start."""
    from gt.runtime.worker.loop import Worker

    back = args.back
    if back is None:
        if args.connect is None:
            raise SystemExit(
                "gt worker: give --connect ADDRESS (the address `gt dispatcher` printed)"
            )
        back = resolve_endpoints(args.connect)["back"]
    if args.backend:
        os.environ["GT_BACKEND"] = args.backend
    try:
        w = Worker(back)
    except RuntimeError as exc:
        print(f"gt worker: {exc}", file=sys.stderr)
        return 1
    install_stop_signals(w._stop.set)
    if args.back is None:
        print(
            f"GT worker {w.wid} on {w.backend.device} ({w.backend.name}) serving {args.connect}",
            flush=True,
        )
    reason = w.run(parent_pid=args.parent_pid)
    if args.back is None:
        print(f"worker stopped: {reason or 'signal'}")
    return 0
