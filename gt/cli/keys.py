"""``gt keys``: the cluster's CURVE keys -- make them, show them, and give each role its own.

    gt keys                                  make the keyring if there is none, then show it
    gt keys --dir DIR [--force]              another place (or new keys: every peer needs them)
    gt keys export --role client DIR         what a client's machine needs (then GT_KEYS=DIR)
    gt keys export --role worker DIR         what a worker's machine needs
    gt keys tenant add alice                 a key of alice's own (shown by name in gt top)
    gt keys export --tenant alice DIR        what alice's machine needs
    gt keys tenant remove alice              alice's access ends (running programs included)

See :mod:`gt.runtime.security` for what each role may do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gt.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt keys``."""
    p = subparsers.add_parser(
        "keys",
        help="the cluster's CURVE keys: make them and say where (no ACTION), export one "
        "role's, add or remove a tenant's",
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
    e = sub.add_parser("export", help="copy what one role (or one tenant) needs into a directory")
    who = e.add_mutually_exclusive_group(required=True)
    who.add_argument("--role", choices=["worker", "client", "monitor", "admin"])
    who.add_argument("--tenant", metavar="NAME", help="a tenant's own key (acts as a client)")
    e.add_argument("dest", help="the directory to write (made mode 0700)")
    e.set_defaults(func=run)
    t = sub.add_parser("tenant", help="add or remove a tenant's own key")
    t.add_argument("change", choices=["add", "remove"])
    t.add_argument("name", help="letters, digits, _ . - (at most 32)")
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gt keys``; 1 on a missing argument or keyring, 2 on an existing one with --force."""
    from gt.runtime import security

    path = Path(args.dir) if args.dir else security.default_dir()
    if args.action == "export":
        try:
            files = security.export(security.load(path), args.role or "client", args.dest,
                                    tenant=args.tenant)  # fmt: skip
        except security.KeysMissing as exc:
            print(f"gt keys: {exc}", file=sys.stderr)
            return 1
        except FileExistsError:  # (a file where the directory should go)
            print(f"gt keys: {args.dest}: a file, not a directory to export into", file=sys.stderr)
            return 1
        except OSError as exc:
            print(
                f"gt keys: cannot write {exc.filename or args.dest}: {exc.strerror}",
                file=sys.stderr,
            )
            return 1
        who = f"tenant {args.tenant}'s" if args.tenant else f"the {args.role}"
        print(f"wrote {who} keys to {args.dest} ({len(files)} files); on that machine: "
              f"GT_KEYS={args.dest}")  # fmt: skip
        return 0
    if args.action == "tenant":
        return _tenant(security, path, args.change, args.name)
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
    for key, name in sorted(ring.tenants.items(), key=lambda kv: kv[1]):
        print(f"  tenant {name:<10}  {key.decode()}")
    return 0


def _tenant(security: Any, path: Path, change: str, name: str) -> int:
    """``gt keys tenant add|remove NAME``."""
    try:
        if change == "add":
            security.add_tenant(path, name)
            print(f"made tenant {name}'s keys in {path / security.TENANTS}; give them theirs with: "
                  f"gt keys export --tenant {name} DIR")  # fmt: skip
        else:
            security.remove_tenant(path, name)
            print(f"removed tenant {name}: a running dispatcher using {path} refuses the key and "
                  "ends its programs within a second; remote workers keep the public key until "
                  "their keys are exported again")  # fmt: skip
    except (security.KeysMissing, FileExistsError) as exc:
        print(f"gt keys: {exc}", file=sys.stderr)
        return 1
    return 0
