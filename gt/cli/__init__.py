"""The ``gt`` command line: ``gt dispatcher | worker | demo | ps``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any


def _install_stop_signals(stop: Any) -> None:
    def handler(signum: int, frame: Any) -> None:
        stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def resolve_endpoints(address: str, timeout: float = 5.0) -> dict[str, str]:
    """Ask the dispatcher at a front ``address`` for all of its endpoints (exits with a message)."""
    from gt.runtime.control import ControlError, request

    try:
        return request(address, "endpoints", timeout=timeout)
    except ControlError as exc:
        raise SystemExit(f"gt: {exc}") from None


def cmd_dispatcher(args: argparse.Namespace) -> int:
    from gt.runtime.dispatcher.loop import Dispatcher
    from gt.runtime.launch import spawn_worker

    d = Dispatcher(args.host, args.port, max_in_flight=args.max_in_flight)
    _install_stop_signals(d.stop)
    for _ in range(args.workers):
        d.children.append(
            spawn_worker(d.endpoints["back"], parent_pid=os.getpid(), n_workers=args.workers)
        )
    if args.ready_json:
        sys.stdout.write(json.dumps(d.endpoints) + "\n")
        sys.stdout.flush()
    else:
        print(f"GT dispatcher (pid {os.getpid()}) with {args.workers} local worker(s)")
        print(f"  clients connect to:  {d.address}")
        print(f"    GT_DISPATCHER={d.address} python train.py")
        print(f"  add a worker:        gt worker --connect {d.address}")
        print(
            f"  watch it:            gt top   (control {d.endpoints['control']}, events {d.endpoints['events']})"
        )
        print("Ctrl-C stops it.", flush=True)
    d.run(parent_pid=args.parent_pid)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from gt.runtime.worker.loop import Worker

    back = args.back
    if back is None:
        if args.connect is None:
            raise SystemExit(
                "gt worker: give --connect ADDRESS (the address `gt dispatcher` printed)"
            )
        back = resolve_endpoints(args.connect)["back"]
    if args.backend:
        os.environ["GT_BACKEND"] = args.backend
    try:
        w = Worker(back)
    except RuntimeError as exc:
        print(f"gt worker: {exc}", file=sys.stderr)
        return 1
    _install_stop_signals(w._stop.set)
    if args.back is None:
        print(
            f"GT worker {w.wid} on {w.backend.device} ({w.backend.name}) serving {args.connect}",
            flush=True,
        )
    reason = w.run(parent_pid=args.parent_pid)
    if args.back is None:
        print(f"worker stopped: {reason or 'signal'}")
    return 0


def cmd_ps(args: argparse.Namespace) -> int:
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
            f"pid {info['pid']:>7}  {info['front']:<28} control {info['control']}  events {info['events']}"
        )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gt.cli.demo import run_demo

    if args.no_tui or not sys.stdout.isatty():
        if args.record and not os.environ.get("GT_DISPATCHER"):
            os.environ["GT_RECORD"] = args.record
        return run_demo(workers=args.workers, steps=args.steps or 200)
    from gt.cli.run import run_command

    # The dashboard runs here; the workload is a client process of the same local cluster.
    child = [
        sys.executable,
        "-m",
        "gt",
        "demo",
        "--no-tui",
        "--workers",
        str(args.workers),
        "--steps",
        str(args.steps or 20000),
    ]
    return run_command(child, workers=args.workers, record=args.record, tui=True, hz=args.hz)


def cmd_record(args: argparse.Namespace) -> int:
    from gt.cli.record import record

    address = args.connect or _newest_dispatcher()
    if address is None:
        return 1
    return record(
        address, args.output, duration=args.duration, ready_line=args.ready_line, quiet=args.quiet
    )


def _newest_dispatcher() -> str | None:
    from gt.runtime.discovery import live_dispatchers

    found = live_dispatchers()
    if not found:
        print(
            "gt: no GT dispatcher is running; start one with `gt dispatcher` or try `gt demo`",
            file=sys.stderr,
        )
        return None
    return found[0]["front"]


def cmd_run(args: argparse.Namespace) -> int:
    from gt.cli.run import run_script

    return run_script(
        args.script,
        args.args,
        workers=args.workers,
        config=args.config,
        record=args.record,
        tui=not args.no_tui and sys.stdout.isatty(),
        hz=args.hz,
        readonly=args.readonly,
    )


def cmd_trace(args: argparse.Namespace) -> int:
    from gt.trace import commands

    if args.trace_command == "info":
        return commands.cmd_trace_info(args.file, json=args.json)
    return commands.cmd_trace_stats(args.file, json=args.json)


def cmd_export(args: argparse.Namespace) -> int:
    from gt.trace import commands

    return commands.cmd_export(args.file, args.output, window=args.window, workers=args.workers)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``gt`` subcommand."""
    p = argparse.ArgumentParser(
        prog="gt",
        description="GT: a multiplexing tensor runtime for shared GPUs, with a live monitor.",
        epilog=(
            "examples:\n"
            "  gt demo                                  a sample sharded workload with the dashboard\n"
            "  gt run --record run.gtrace train.py      run a script on a local cluster, recorded\n"
            "  gt dispatcher --workers 4                serve many clients (prints the address)\n"
            "  GT_DISPATCHER=ADDR python train.py       a client of that dispatcher\n"
            "  gt top                                   watch the newest live dispatcher\n"
            "  gt replay run.gtrace --at 42s            scrub through a recording\n"
            "  gt export run.gtrace -o run.json         open it in Perfetto\n"
            "Every command has --help."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("dispatcher", help="run a dispatcher (and local workers) for many clients")
    d.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (0.0.0.0 to serve a network; default 127.0.0.1)",
    )
    d.add_argument("--port", type=int, default=0, help="client port (default: a free one)")
    d.add_argument(
        "--workers",
        type=int,
        default=1,
        help="local workers to start (default 1; 0 = wait for `gt worker`)",
    )
    d.add_argument(
        "--max-in-flight", type=int, default=4, help="batches in flight per worker (default 4)"
    )
    d.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    d.add_argument("--ready-json", action="store_true", help=argparse.SUPPRESS)
    d.set_defaults(func=cmd_dispatcher)

    w = sub.add_parser("worker", help="add a worker to a running dispatcher")
    w.add_argument("--connect", help="the dispatcher address printed by `gt dispatcher`")
    w.add_argument(
        "--backend",
        choices=["auto", "numpy", "cupy"],
        help="array backend (default auto: CuPy if a GPU is present)",
    )
    w.add_argument("--back", help=argparse.SUPPRESS)
    w.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    w.set_defaults(func=cmd_worker)

    ps = sub.add_parser("ps", help="list live dispatchers on this machine")
    ps.add_argument("--json", action="store_true", help="print JSON")
    ps.set_defaults(func=cmd_ps)

    dm = sub.add_parser(
        "demo", help="a local cluster running a sample sharded training workload, dashboard live"
    )
    dm.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    dm.add_argument(
        "--steps",
        type=int,
        default=None,
        help="training steps (default 20000 with the dashboard, 200 without)",
    )
    dm.add_argument(
        "--no-tui",
        action="store_true",
        help="no dashboard: print progress (the default when not in a terminal)",
    )
    dm.add_argument(
        "--record", metavar="FILE", help="also record the run to FILE (.gtrace) for `gt replay`"
    )
    dm.add_argument("--hz", type=float, default=8.0, help="dashboard refresh rate (default 8)")
    dm.set_defaults(func=cmd_demo)
    from gt.cli import dashboard as tui_cli

    top = sub.add_parser("top", help="the live dashboard of a running cluster (htop-style)")
    tui_cli.add_top_arguments(top)
    top.set_defaults(func=tui_cli.cmd_top)

    rp = sub.add_parser("replay", help="the dashboard, driven by a recorded .gtrace")
    tui_cli.add_replay_arguments(rp)
    rp.set_defaults(func=tui_cli.cmd_replay)

    from gt.cli import config as config_cli

    cf = sub.add_parser(
        "config", help="show, validate or apply the shard config of a live dispatcher"
    )
    config_cli.add_config_arguments(cf)

    r = sub.add_parser(
        "run", help="run a script as a client of a local cluster (dashboard alongside)"
    )
    from gt.cli.run import add_run_arguments

    add_run_arguments(r)
    r.set_defaults(func=cmd_run)

    rec = sub.add_parser("record", help="attach to a running dispatcher and record its events")
    rec.add_argument("-o", "--output", required=True, help="the .gtrace file to write")
    rec.add_argument("--connect", help="dispatcher address (default: the newest live one)")
    rec.add_argument("--duration", type=float, help="seconds to record (default: until Ctrl-C)")
    rec.add_argument("--ready-line", action="store_true", help=argparse.SUPPRESS)
    rec.add_argument("--quiet", action="store_true", help="print nothing when done")
    rec.set_defaults(func=cmd_record)

    tr = sub.add_parser("trace", help="summaries of a recorded trace")
    tsub = tr.add_subparsers(dest="trace_command", metavar="info|stats", required=True)
    for name, text in (
        ("info", "run id, duration, workers, devices, event counts, drops"),
        ("stats", "per worker: compute / comm / idle share, top ops, bytes moved"),
    ):
        t = tsub.add_parser(name, help=text)
        t.add_argument("file", help="a .gtrace file")
        t.add_argument("--json", action="store_true", help="print JSON")
    tr.set_defaults(func=cmd_trace)

    ex = sub.add_parser("export", help="export a trace to Chrome trace JSON (open it in Perfetto)")
    ex.add_argument("file", help="a .gtrace file")
    ex.add_argument("-o", "--output", help="the .json file to write (default: FILE with .json)")
    ex.add_argument("--window", help="time window, e.g. 10s:20s, 1.5s:, :500ms")
    ex.add_argument("--workers", help="comma-separated worker ids, e.g. 0,1")
    ex.set_defaults(func=cmd_export)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gt`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
