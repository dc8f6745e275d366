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
    """Print one line per live dispatcher; 1 when there is none (0 with ``--json``).

    Each one is asked for its workers and clients (half a second at most), so a dispatcher that
    does not answer, or has no worker left, says so instead of looking well.
    """
    from gt.runtime.control import ControlError, request
    from gt.runtime.discovery import live_dispatchers

    found = live_dispatchers()
    for info in found:
        try:
            stats = request(info["front"], "stats", timeout=0.5)
        except (ControlError, KeyError):
            info["answering"] = False
            continue
        workers = stats.get("workers") or []
        info["answering"] = True
        info["workers"] = sum(1 for w in workers if w.get("alive"))
        info["workers_lost"] = sum(1 for w in workers if not w.get("alive"))
        info["clients"] = len(stats.get("clients") or [])
    if args.json:
        print(json.dumps(found))
        return 0
    if not found:
        print("no live GT dispatchers")
        return 1
    for info in found:
        if info["answering"]:
            lost = f" ({info['workers_lost']} lost)" if info["workers_lost"] else ""
            health = f"{info['workers']} worker(s){lost}, {info['clients']} client(s)"
        else:
            health = "NOT ANSWERING (busy, stopped or stuck)"
        print(f"pid {info['pid']:>7}  {info['front']:<28} {health}  control {info['control']}")
    return 0
