"""``gt keys``: the cluster's CURVE keys -- make them, show them, and give each role its own.

    gt keys                                  make the keyring if there is none, then show it
    gt keys --dir DIR [--force]              another place (or new keys: every peer needs them)
    gt keys export --role client DIR         what a tenant's machine needs (then GT_KEYS=DIR)
    gt keys export --role worker DIR         what a worker's machine needs

See :mod:`gt.runtime.security` for what each role may do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gt.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt keys``."""
    p = subparsers.add_parser(
        "keys",
        help="the cluster's CURVE keys: make, show, export one role's",
        description=__doc__.split("\n\n")[0],
        epilog="roles: worker (registers workers), client (runs programs), monitor (reads "
        "events and stats), admin (all, and alone changes shard configs and memory settings)",
    )
    p.add_argument(
        "--dir", default=None, help="the keyring (default $GT_KEYS or ~/.config/gt/keys)"
    )
    p.add_argument("--force", action="store_true", help="make new keys even if some exist")
    p.set_defaults(func=run, action="show")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    e = sub.add_parser("export", help="copy what one role needs into a directory")
    e.add_argument("--role", choices=["worker", "client", "monitor", "admin"], required=True)
    e.add_argument("dest", help="the directory to write (made mode 0700)")
    e.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gt keys``; 1 on a missing argument or keyring, 2 on an existing one with --force."""
    from gt.runtime import security

    path = Path(args.dir) if args.dir else security.default_dir()
    if args.action == "export":
        try:
            files = security.export(security.load(path), args.role, args.dest)
        except security.KeysMissing as exc:
            print(f"gt keys: {exc}", file=sys.stderr)
            return 1
        print(f"wrote the {args.role} keys to {args.dest} ({len(files)} files); on that machine: "
              f"GT_KEYS={args.dest}")  # fmt: skip
        return 0
    made = False
    if args.force or not (path / f"{security.SERVER}.key").exists():
        security.create(path, force=args.force)
        made = True
    try:
        ring = security.load(path)
    except security.KeysMissing as exc:
        print(f"gt keys: {exc}", file=sys.stderr)
        return 1
    print(f"{'made' if made else 'GT keys in'} {ring.path}")
    print(
        f"  dispatcher  {ring.server[0].decode()}" + ("" if ring.server[1] else "  (public only)")
    )
    for role in security.ROLES:
        if role in ring.public:
            held = "secret held" if role in ring.secret else "public only"
            print(f"  {role:<10}  {ring.public[role].decode()}  ({held})")
    return 0
