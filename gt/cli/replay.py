"""``gt replay FILE [--speed X] [--at TIME] [--window FROM:TO] [--paused] [--once] [--json]``.

The dashboard over a recorded ``.gtrace``, with a time bar (``?`` in the app lists the keys).
"""

from __future__ import annotations

import argparse
import sys

from gt.cli.common import Subparsers
from gt.cli.dashboard import format_json, format_once


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt replay``."""
    parser = subparsers.add_parser("replay", help="the dashboard, driven by a recorded .gtrace")
    parser.add_argument("file", help="a .gtrace recording")
    parser.add_argument(
        "--speed", type=_speed, default=1.0, help="playback speed, 0.25 to 64 (default 1)"
    )
    parser.add_argument(
        "--at",
        default=None,
        metavar="TIME",
        help="start this far into the recording (42, 42s, 1m30s)",
    )
    parser.add_argument(
        "--once", action="store_true", help="print the state at --at (default: the end) and exit"
    )
    parser.add_argument("--json", action="store_true", help="print that state as JSON and exit")
    parser.add_argument("--hz", type=float, default=8.0, help="repaints per second (default 8)")
    parser.add_argument(
        "--window",
        metavar="FROM:TO",
        help="select a window to export (x in the app), e.g. 10s:20s, 1.5s:, :500ms",
    )
    parser.add_argument("--paused", action="store_true", help="start paused")
    parser.set_defaults(func=run)


def _speed(text: str) -> float:
    """``--speed``: a playback speed within the app's range (x0.25 .. x64)."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.25 <= x <= 64:  # (NaN fails too)
        raise argparse.ArgumentTypeError(f"must be from 0.25 to 64, got {text}")
    return x


def _seconds(text: str | float) -> int:
    """``--at``: seconds (``42``, ``1.5``) or a duration (``42s``, ``1m30s``) -> ns."""
    from gt.tui.timebar import parse_duration

    return parse_duration(str(text))


def run(args: argparse.Namespace) -> int:
    """Run ``gt replay FILE``; returns the exit status (2 for a bad ``--at`` or ``--window``)."""
    from gt.trace.commands import parse_window
    from gt.trace.reader import TraceFormatError
    from gt.tui.replay import ReplaySource

    try:
        at = None if args.at is None else _seconds(args.at)
        window = parse_window(args.window) if getattr(args, "window", None) else None
    except ValueError as exc:
        print(f"gt replay: {exc}", file=sys.stderr)
        return 2
    try:
        src = ReplaySource.from_file(args.file, speed=args.speed)
    except (OSError, TraceFormatError) as exc:
        print(f"gt replay: {exc}", file=sys.stderr)
        return 1
    if src.warning:
        print(f"gt replay: {src.warning}", file=sys.stderr)
    clock = src.clock
    if window is not None:
        src.set_window(*window)
    if not (args.once or args.json) and not sys.stdout.isatty():
        print(
            "gt replay: stdout is not a terminal: printing the state at the end once (--once)",
            file=sys.stderr,
        )
        args.once = True
    if args.once or args.json:
        try:
            src.seek(clock.t_end if at is None else clock.t_start + at)
            clock.pause()
            state = src.snapshot()
            sys.stdout.write(
                format_json(state, src.status()) + "\n"
                if args.json
                else format_once(state, src.status())
            )
        finally:
            src.stop()
        return 0
    if getattr(args, "paused", False):
        clock.pause(True)
    if at is not None:
        src.seek(clock.t_start + at)
    from gt.tui.app import make_app
    from gt.tui.gcpace import IdlePacer

    app = make_app(src, hz=args.hz, readonly=True, title=f"gt replay {src.address}",
                   gc_pacer=IdlePacer())  # fmt: skip
    try:
        app.run()
    finally:
        src.stop()
    return int(app.return_code or 0)
