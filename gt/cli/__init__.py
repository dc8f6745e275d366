"""The ``gt`` command line.

One module per command; each has ``add_parser(subparsers)``, which registers its subcommand with
its help and arguments and sets ``func``, and ``run(args) -> int``, the command itself. Shared
helpers live in :mod:`gt.cli.common` and :mod:`gt.cli.dashboard`. Command modules import the
dispatcher, the worker, the trace reader and Textual inside ``run``, so ``gt --help`` and ``gt ps``
start fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from gt.cli import (
    config,
    demo,
    dispatcher,
    export,
    keys,
    ps,
    record,
    replay,
    run,
    top,
    trace,
    worker,
)

# The order of the subcommands in `gt --help`.
COMMANDS = (dispatcher, worker, keys, ps, demo, top, replay, config, run, record, trace, export)

DESCRIPTION = "GT: a multiplexing tensor runtime for shared GPUs, with a live monitor."
EPILOG = (
    "examples:\n"
    "  gt demo                                  a sample sharded workload with the dashboard\n"
    "  gt run --record run.gtrace train.py      run a script on a local cluster, recorded\n"
    "  gt dispatcher --workers 4                serve many clients (prints the address)\n"
    "  GT_DISPATCHER=ADDR python train.py       a client of that dispatcher\n"
    "  gt top                                   watch the newest live dispatcher\n"
    "  gt replay run.gtrace --at 42s            scrub through a recording\n"
    "  gt export run.gtrace -o run.json         open it in Perfetto\n"
    "Every command has --help."
)


def _version() -> str:
    """The installed distribution's version (``gt-multiplex``), without importing the tensor API."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gt-multiplex")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``gt`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="gt",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gt {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gt`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    connect = getattr(args, "connect", None)
    if isinstance(connect, str) and connect:
        from gt.runtime.sockets import check_address

        try:
            check_address(connect, "--connect")
        except ValueError as exc:
            parser.exit(2, f"gt: {exc}\n")
    from gt.runtime.memory_settings import SettingError

    try:
        return int(args.func(args) or 0)
    except SettingError as exc:  # a GT_* variable or flag that does not parse: one line
        print(f"gt: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of our output went away (`gt trace stats F | head`): that is how pipes end,
        # not an error. Point stdout at /dev/null so the interpreter's final flush stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
