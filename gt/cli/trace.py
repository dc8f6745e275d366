"""``gt trace info|stats|export FILE``: summaries of a recorded ``.gtrace``, and ``gt export``
under the name a user of ``gt trace`` reaches for."""

from __future__ import annotations

import argparse

from gt.cli import export
from gt.cli.common import Subparsers
from gt.cli.export import add_arguments


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt trace`` and its ``info``, ``stats`` and ``export`` subcommands."""
    p = subparsers.add_parser("trace", help="summaries of a recorded trace, and its export")
    sub = p.add_subparsers(dest="trace_command", metavar="info|stats|export", required=True)
    for name, text in (
        ("info", "run id, duration, workers, devices, event counts, drops"),
        ("stats", "per worker: compute / comm / idle share, top ops, bytes moved"),
    ):
        t = sub.add_parser(name, help=text)
        t.add_argument("file", help="a .gtrace file")
        t.add_argument("--json", action="store_true", help="print JSON")
    add_arguments(sub.add_parser("export", help="the same as gt export: Chrome trace JSON"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gt trace info`` or ``gt trace stats``; returns the exit status."""
    from gt.trace import commands

    if args.trace_command == "export":
        return export.run(args)
    if args.trace_command == "info":
        return commands.cmd_trace_info(args.file, json=args.json)
    return commands.cmd_trace_stats(args.file, json=args.json)
