"""``gt record``: attach to a live dispatcher and write its event stream to a ``.gtrace`` file."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from gt.runtime import protocol as P
from gt.runtime.control import ControlError, request
from gt.trace.keyframes import ModelKeyframer
from gt.trace.recorder import record_from_bus


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
    try:
        snap = request(address, "snapshot")
    except ControlError as exc:
        print(f"gt record: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
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
    keyframer = ModelKeyframer(P.OPS, config=snap.get("config") or {}, workers=workers)

    def fold(source: str, first_seq: int, events: list) -> None:
        keyframer.on_batch(source, first_seq, events)
        on_batch(source, first_seq, events)

    stats: dict[str, Any] = record_from_bus(
        snap["endpoints"]["events"],
        path,
        duration=duration,
        stop_event=stop,
        on_batch=fold,
        keyframe_fn=keyframer,
        workers=workers,
        config=snap.get("config") or {},
        op_names=list(P.OPS),
        meta={"dispatcher": address, "trace_level": snap.get("trace")},
    )
    if not quiet:
        lost = (
            sum(stats.get("drops", {}).values())
            if isinstance(stats.get("drops"), dict)
            else stats.get("drops", 0)
        )
        print(
            f"recorded {stats.get('events', 0)} events to {path} in {stats.get('elapsed_s', 0):.1f}s"
            f" ({lost} lost)"
        )
    return 0
