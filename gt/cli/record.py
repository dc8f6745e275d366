"""``gt record``: attach to a live dispatcher and write its event stream to a ``.gtrace`` file."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from gt.cli.common import Subparsers, install_stop_signals, newest_dispatcher, positive_arg


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt record``."""
    p = subparsers.add_parser("record", help="attach to a running dispatcher and record its events")
    p.add_argument("-o", "--output", required=True, help="the .gtrace file to write")
    p.add_argument("--connect", help="dispatcher address (default: the newest live one)")
    p.add_argument(
        "--duration", type=positive_arg, help="seconds to record (default: until Ctrl-C)"
    )
    p.add_argument("--ready-line", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="print nothing when done")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gt record``; returns 1 when there is no dispatcher to record."""
    address = args.connect or newest_dispatcher("gt record")
    if address is None:
        return 1
    return record(
        address, args.output, duration=args.duration, ready_line=args.ready_line, quiet=args.quiet
    )


def record(
    address: str,
    path: str,
    *,
    duration: float | None = None,
    ready_line: bool = False,
    quiet: bool = False,
) -> int:
    """Record the dispatcher at front ``address`` until Ctrl-C, SIGTERM or ``duration``.

    Returns:
        0 on success, 1 when the dispatcher cannot be reached.
    """
    # imported here, not at the top: `gt --help` and the other commands need none of it
    from gt.runtime import ops as O
    from gt.runtime import security
    from gt.runtime.control import ControlError, request
    from gt.trace.keyframes import ModelKeyframer
    from gt.trace.recorder import record_from_bus

    try:
        snap = request(address, "snapshot")
    except ControlError as exc:
        print(f"gt record: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    install_stop_signals(stop.set)
    first = threading.Event()

    def on_batch(source: str, first_seq: int, events: list) -> None:
        if not first.is_set():
            first.set()
            if ready_line:  # the bus forwards to us now: the caller may start its work
                sys.stdout.write("ready\n")
                sys.stdout.flush()

    workers = [
        {k: w.get(k) for k in ("id", "host", "pid", "device", "backend")}
        for w in snap.get("workers", [])
    ]
    # keyframes hold the monitor's cluster model, so `gt replay` can start anywhere exactly
    keyframer = ModelKeyframer(O.OPS, config=snap.get("config") or {}, workers=workers)

    def fold(source: str, first_seq: int, events: list) -> None:
        keyframer.on_batch(source, first_seq, events)
        on_batch(source, first_seq, events)

    try:
        stats: dict[str, Any] = record_from_bus(
            snap["endpoints"]["events"],
            path,
            duration=duration,
            stop_event=stop,
            on_batch=fold,
            keyframe_fn=keyframer,
            workers=workers,
            config=snap.get("config") or {},
            op_names=list(O.OPS),
            meta={"dispatcher": address, "trace_level": snap.get("trace")},
            secure=lambda sock, ep: security.secure_connect(sock, ep, ("monitor", "admin")),
        )
    except OSError as exc:  # (no such folder, no permission, a full disk)
        print(f"gt record: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if not quiet:
        lost = (
            sum(stats.get("drops", {}).values())
            if isinstance(stats.get("drops"), dict)
            else stats.get("drops", 0)
        )
        events, elapsed = stats.get("events", 0), stats.get("elapsed_s", 0)
        print(f"recorded {events} events to {path} in {elapsed:.1f}s ({lost} lost)")
    return 0
