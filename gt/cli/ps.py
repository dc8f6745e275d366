"""``gt ps``: list the live dispatchers on this machine (from their discovery files)."""

from __future__ import annotations

import argparse
import json

from gt.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt ps``."""
    p = subparsers.add_parser("ps", help="list live dispatchers on this machine")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print one line per live dispatcher; 1 when there is none (0 with ``--json``)."""
    from gt.runtime.discovery import live_dispatchers

    found = live_dispatchers()
    if args.json:
        print(json.dumps(found))
        return 0
    if not found:
        print("no live GT dispatchers")
        return 1
    for info in found:
        print(
            f"pid {info['pid']:>7}  {info['front']:<28} control {info['control']}"
            f"  events {info['events']}"
        )
    return 0
