"""``gt top [--connect ADDR] [--once] [--json] [--hz N] [--readonly]``: watch a cluster live."""

from __future__ import annotations

import argparse
import gc
import sys

from gt.cli.common import NO_DISPATCHER, Subparsers, announce, positive_arg
from gt.cli.dashboard import (
    collect_state,
    find_endpoints,
    format_json,
    format_once,
    resolver,
    run_dashboard,
)


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt top``."""
    parser = subparsers.add_parser(
        "top", help="the live dashboard of a running cluster (htop-style)"
    )
    parser.add_argument(
        "--connect", metavar="ADDR", help="a dispatcher's address (default: the newest local one)"
    )
    parser.add_argument(
        "--once", action="store_true", help="print the current state as tables and exit"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the current state as JSON and exit"
    )
    # 4 repaints a second: the timeline scrolls smoothly enough, and each repaint costs a model
    # state plus the timeline's drawing (the tables redraw once a second either way)
    parser.add_argument(
        "--hz", type=positive_arg, default=4.0, help="repaints per second (default 4)"
    )
    parser.add_argument(
        "--readonly", action="store_true", help="never change the cluster (no config edits)"
    )
    parser.add_argument(
        "--token",
        help="control credentials for config edits on a remote dispatcher ($GT_CONTROL_TOKEN)",
    )
    # --once / --json: seconds of events to gather (tests shorten it)
    parser.add_argument("--wait", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gt top`` with parsed arguments; returns the exit status."""
    endpoints = find_endpoints(args.connect)
    if endpoints is None:
        where = f"no GT dispatcher answered at {args.connect}" if args.connect else NO_DISPATCHER
        print(f"gt top: {where}", file=sys.stderr)
        return 1
    if not args.connect:  # picked by itself: say which (the newest of this machine's dispatchers)
        announce("gt top", endpoints)
    if not (args.once or args.json) and not sys.stdout.isatty():
        # (a dashboard written into a file or a pipe would be escape codes for ever)
        print("gt top: stdout is not a terminal: printing the state once (--once)", file=sys.stderr)
        args.once = True
    if args.once or args.json:
        got = collect_state(endpoints, wait=getattr(args, "wait", 1.0))
        if got is None:
            print(
                f"gt top: the dispatcher at {endpoints.get('front')} did not answer",
                file=sys.stderr,
            )
            return 1
        state, status = got
        sys.stdout.write(
            format_json(state, status) + "\n" if args.json else format_once(state, status)
        )
        sys.stdout.flush()
        return 0
    # Everything imported by now lives as long as the process: keep the cyclic GC from walking it
    # on every full collection (each one pauses the screen for as long as the walk takes).
    gc.freeze()
    return run_dashboard(
        endpoints,
        hz=args.hz,
        readonly=args.readonly,
        resolve=resolver(args.connect),
        token=getattr(args, "token", None),
    )
