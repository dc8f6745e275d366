"""``gt replay FILE [--speed X] [--at TIME] [--window FROM:TO] [--paused] [--once] [--json]``.

The dashboard over a recorded ``.gtrace``, with a time bar (``?`` in the app lists the keys).
"""

from __future__ import annotations

import argparse
import sys

from gt.cli.common import Subparsers, positive_arg
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
        help="start there: 42s, 1m30s, 250ms, 1:02, 50%% (of the recording), +5s (from its start), "
        "--at=-5s (before its end)",
    )
    parser.add_argument(
        "--once", action="store_true", help="print the state at --at (default: the end) and exit"
    )
    parser.add_argument("--json", action="store_true", help="print that state as JSON and exit")
    parser.add_argument(
        "--hz", type=positive_arg, default=8.0, help="repaints per second (default 8)"
    )
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


def _at(text: str, t_start: int, t_end: int) -> int:
    """``--at``, as the app's "jump to" reads it (``42s``, ``1:02``, ``50%``, ``+5s``), except that
    ``-5s`` counts back from the end (there is no position yet to count from) -> run-clock ns."""
    from gt.tui.timebar import parse_time

    s = text.strip()
    try:
        return parse_time(s, t_start, t_end, t_end if s.startswith("-") else t_start)
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (try 42s, 1m30s, 250ms, 1:02, 50%, +5s, -5s)"
        ) from None


def _open_error(path: str, exc: OSError) -> str:
    """One line for a recording that cannot be opened, worded as ``gt trace`` words it."""
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a trace"
    return f"{exc.filename or path}: {exc.strerror or exc}"


def run(args: argparse.Namespace) -> int:
    """Run ``gt replay FILE``; returns the exit status (2 for a bad ``--at`` or ``--window``)."""
    from gt.trace.commands import parse_window
    from gt.trace.reader import TraceFormatError
    from gt.tui.replay import ReplaySource

    try:
        if args.at is not None:
            _at(args.at, 0, 1)  # (its form is checked before the file is opened)
        window = parse_window(args.window) if getattr(args, "window", None) else None
    except ValueError as exc:
        print(f"gt replay: {exc}", file=sys.stderr)
        return 2
    try:
        src = ReplaySource.from_file(args.file, speed=args.speed)
    except OSError as exc:
        print(f"gt replay: {_open_error(args.file, exc)}", file=sys.stderr)
        return 1
    except TraceFormatError as exc:
        print(f"gt replay: {exc}", file=sys.stderr)
        return 1
    if src.warning:
        print(f"gt replay: {src.warning}", file=sys.stderr)
    clock = src.clock
    at = None if args.at is None else _at(args.at, clock.t_start, clock.t_end)
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
            clock.pause()  # (before the seek: a running clock would move on from where it lands)
            src.seek(clock.t_end if at is None else at)
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
        src.seek(at)
    from gt.tui.app import make_app
    from gt.tui.gcpace import IdlePacer

    app = make_app(src, hz=args.hz, readonly=True, title=f"gt replay {src.address}",
                   gc_pacer=IdlePacer())  # fmt: skip
    try:
        app.run()
    finally:
        src.stop()
    return int(app.return_code or 0)
