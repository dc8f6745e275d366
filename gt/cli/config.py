"""``gt config show | validate FILE | apply FILE``: the editor's checks and apply, from a shell.

``show`` prints the running config as YAML; ``validate`` checks a file against the schema and,
when a dispatcher answers, against its live workers (every problem with its line; exit 1 if any);
``apply`` validates, applies for new instructions and prints what the dispatcher installed, or its
precise refusal (exit 1; the running config stays in force). Without ``--connect`` each says on
stderr which dispatcher it picked; ``apply`` refuses a dispatcher another user started.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gt.cli.common import NO_DISPATCHER, Subparsers, announce
from gt.cli.dashboard import find_endpoints


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt config`` and its ``show``, ``validate`` and ``apply`` subcommands."""
    parser = subparsers.add_parser(
        "config", help="show, validate or apply the shard config of a live dispatcher"
    )
    sub = parser.add_subparsers(dest="config_command", metavar="show|validate|apply", required=True)
    for name, text in (
        ("show", "print the running shard config as YAML"),
        ("validate", "check a config file (schema, live workers); each problem with its line"),
        ("apply", "validate a config file and apply it for new instructions"),
    ):
        p = sub.add_parser(name, help=text)
        if name != "show":
            p.add_argument("file", help="a YAML shard config ('-' reads standard input)")
        p.add_argument(
            "--connect",
            metavar="ADDR",
            help="a dispatcher's address (default: the newest local one)",
        )
        p.add_argument("--token", help="the control endpoint's credentials (or $GT_CONTROL_TOKEN)")
        p.add_argument("--json", action="store_true", help="print JSON")
        if name == "validate":
            p.add_argument(
                "--offline", action="store_true", help="check the schema only (no dispatcher)"
            )
    parser.set_defaults(func=run)


def _control(args: argparse.Namespace, *, required: bool) -> Any:
    from gt.runtime.control import ConfigControl

    eps = find_endpoints(args.connect)
    if eps is None or not eps.get("control"):
        if required:
            where = (
                f"no GT dispatcher answered at {args.connect}" if args.connect else NO_DISPATCHER
            )
            print(f"gt config: {where}", file=sys.stderr)
        return None
    if not args.connect:  # picked by itself: say which
        announce(f"gt config {args.config_command}", eps)
    return ConfigControl(eps["control"], token=args.token, by="gt config")


def _refusal(control: Any) -> str | None:
    """Why ``gt config apply`` must not change this dispatcher (another user's), else ``None``.

    Raises:
        ControlError: the dispatcher does not answer.
    """
    from gt.runtime.control import request
    from gt.tui.config_view import owner_refusal

    why = control.refusal()
    if why is not None:
        return why
    owner = request(control.endpoint, "ping", timeout=control.timeout)
    uid = owner.get("uid") if isinstance(owner, dict) else None
    return owner_refusal(uid, control.endpoint, control.token)


def _read(path: str) -> str:
    if path == "-":  # (bytes, decoded here: stdin's own decoding may hide bad bytes as surrogates)
        return sys.stdin.buffer.read().decode("utf-8")
    with open(path, encoding="utf-8") as f:
        return f.read()


def run(args: argparse.Namespace) -> int:
    """Run ``gt config show|validate|apply``; returns the exit status."""
    from gt.runtime.sharding import config_text as CE
    from gt.tui.sources import ControlError

    cmd = args.config_command
    offline = getattr(args, "offline", False)
    control = None if offline else _control(args, required=cmd != "validate")
    if control is None and cmd != "validate":
        return 1
    try:
        if cmd == "show":
            cfg = CE.normal_yaml(control.get())
            sys.stdout.write(json.dumps(cfg) + "\n" if args.json else CE.to_text(cfg))
            return 0
        try:
            text = _read(args.file)
        except OSError as exc:
            print(f"gt config: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
            return 1
        except UnicodeDecodeError:  # (an image, an archive: not YAML)
            print(f"gt config: {args.file}: not a text file (UTF-8 YAML)", file=sys.stderr)
            return 1
        ids = control.workers() if control is not None else None
        checked = CE.check_text(text, ids)
        if not checked.ok:
            if args.json:
                problems = [{"line": p.line, "message": p.message} for p in checked.problems]
                print(json.dumps({"ok": False, "problems": problems}))
            for p in checked.problems:
                print(f"{args.file}:{p.line or 1}: {p.message}", file=sys.stderr)
            return 1
        if cmd == "validate":
            where = (
                f"the live workers {ids}"
                if ids is not None
                else "the schema (no dispatcher to check workers)"
            )
            print(
                json.dumps({"ok": True, "config": checked.normal})
                if args.json
                else f"{args.file}: valid for {where}"
            )
            return 0
        why = _refusal(control)
        if why is not None:
            print(f"gt config: not applied: {why}", file=sys.stderr)
            return 1
        after = control.apply(checked.raw)
    except ControlError as exc:
        print(f"gt config: {exc}", file=sys.stderr)
        return 1
    cfg = CE.normal_yaml(after)
    sys.stdout.write(
        json.dumps(cfg) + "\n"
        if args.json
        else "applied; new instructions follow:\n" + CE.to_text(cfg)
    )
    return 0
