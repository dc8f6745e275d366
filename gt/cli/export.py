"""``gt export FILE``: a recorded ``.gtrace`` as Chrome trace JSON (to open in Perfetto)."""

from __future__ import annotations

import argparse

from gt.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt export``."""
    p = subparsers.add_parser(
        "export", help="export a trace to Chrome trace JSON (open it in Perfetto)"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``gt export``'s arguments (``gt trace export`` takes the same)."""
    p.add_argument("file", help="a .gtrace file")
    p.add_argument("-o", "--output", help="the .json file to write (default: FILE with .json)")
    p.add_argument("--window", help="time window, e.g. 10s:20s, 1.5s:, :500ms")
    p.add_argument("--workers", help="comma-separated worker ids, e.g. 0,1")


def run(args: argparse.Namespace) -> int:
    """Run ``gt export``; returns the exit status."""
    from gt.trace import commands

    return commands.cmd_export(args.file, args.output, window=args.window, workers=args.workers)
