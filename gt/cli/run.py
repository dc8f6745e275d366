"""``gt run``: run a script as a GT client against a local (or given) cluster."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from gt.cli.common import Subparsers, count_arg, exit_status, positive_arg, record_problem
from gt.cli.dashboard import run_with_dashboard


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt run``."""
    p = subparsers.add_parser(
        "run",
        help="run a script as a client of a local cluster (dashboard alongside)",
        usage="gt run [options] script.py [ARGS ...]",
    )
    p.add_argument(
        "--workers",
        type=worker_count,
        default=None,
        help="local workers (default: $GT_WORKERS, else 2)",
    )
    p.add_argument("--config", help="shard config YAML for the script (sets GT_CONFIG)")
    p.add_argument("--record", metavar="FILE", help="record the run's events to FILE (.gtrace)")
    p.add_argument(
        "--no-tui",
        action="store_true",
        help="no dashboard: plain output, and the script reads the terminal (the dashboard gives "
        "it no stdin); for CI and scripts",
    )
    p.add_argument(
        "--hz", type=positive_arg, default=8.0, help="dashboard refresh rate (default 8)"
    )
    p.add_argument("--readonly", action="store_true", help="dashboard cannot change the config")
    # One list for the script and its arguments: argparse would drop a "--" right after the
    # script, which the script must see as `python script.py -- x` shows it.
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="script.py ARGS",
                   help="the Python script to run, then its arguments (all passed as given)")  # fmt: skip
    p.set_defaults(func=run)


#: A number of local workers (at least 1), for ``--workers`` and ``$GT_WORKERS``.
worker_count = count_arg("worker")


def _checked(args: argparse.Namespace) -> str | None:
    """What is wrong with ``gt run``'s options, found before anything starts (else ``None``)."""
    if args.workers is None:
        try:
            args.workers = worker_count(os.environ.get("GT_WORKERS", "2"))
        except argparse.ArgumentTypeError as exc:
            return f"$GT_WORKERS: {exc}"
    if args.record and record_problem(args.record):
        return record_problem(args.record)
    if args.config:
        from gt.runtime.sharding import config_text  # (not for every `gt` command)

        try:
            with open(args.config, encoding="utf-8") as f:
                # (our own cluster's worker ids are known: a rule naming another is refused now,
                # not at the script's first op)
                ours = isinstance(args.workers, int) and not os.environ.get("GT_DISPATCHER")
                checked = config_text.check_text(f.read(), range(args.workers) if ours else None)
        except (OSError, UnicodeDecodeError) as exc:
            return f"--config {args.config}: cannot read it ({getattr(exc, 'strerror', exc)})"
        if not checked.ok:
            first = checked.problems[0]
            return f"{args.config}:{first.line or 1}: {first.message}"
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``gt run``; returns the script's exit status (2 when the script does not exist or an
    option is wrong)."""
    command = list(args.command)
    if command[:1] == ["--"]:  # (gt's own "no more options" mark, before the script)
        del command[0]
    if not command:
        print("gt run: which script? (gt run [options] script.py [ARGS ...])", file=sys.stderr)
        return 2
    args.script, args.args = command[0], command[1:]
    problem = _checked(args)
    if problem is not None:
        print(f"gt run: {problem}", file=sys.stderr)
        return 2
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


def run_script(
    script: str,
    args: list[str],
    *,
    workers: int = 1,
    config: str | None = None,
    record: str | None = None,
    tui: bool = False,
    hz: float = 8.0,
    readonly: bool = False,
) -> int:
    """Start a cluster (unless ``$GT_DISPATCHER`` names one), run ``script`` as a client, clean up.

    Returns:
        The script's exit code (``128 + N`` if it died of signal N).
    """
    if not os.path.exists(script):
        print(f"gt run: {script}: no such file", file=sys.stderr)
        return 2
    return run_command(
        [sys.executable, script, *args],
        workers=workers,
        config=config,
        record=record,
        tui=tui,
        hz=hz,
        readonly=readonly,
    )


def run_command(
    cmd: list[str],
    *,
    workers: int = 1,
    config: str | None = None,
    record: str | None = None,
    tui: bool = False,
    hz: float = 8.0,
    readonly: bool = False,
) -> int:
    """Like :func:`run_script`, for any command that acts as a GT client (``$GT_DISPATCHER``)."""
    from gt.runtime.launch import LocalCluster, RecorderProcess  # (not for every `gt` command)

    cluster = None
    recorder = None
    address = os.environ.get("GT_DISPATCHER")
    try:
        if not address:
            cluster = LocalCluster(workers=workers)
            address = cluster.address
        if record:
            recorder = RecorderProcess(address, record, local=cluster is not None)
        env = {**os.environ, "GT_DISPATCHER": address}
        env.pop("GT_RECORD", None)  # recording is ours; the script must not start a second one
        if config:
            env["GT_CONFIG"] = os.path.abspath(config)
        if tui:
            return run_with_dashboard(address, cmd, env=env, hz=hz, readonly=readonly)
        proc = subprocess.Popen(cmd, env=env)
        # Ctrl-C reaches the script through the terminal; we wait for it to finish and report.
        # A SIGTERM sent to us (a scheduler's preemption, `timeout`) goes on to the script, whose
        # handler may save a checkpoint through the cluster, still up until it exits; so does a
        # SIGINT the terminal did not send (`kill -INT`, a tool that runs us in the background).
        old_int = signal.signal(signal.SIGINT, lambda signum, frame: _interrupt(proc))
        old_term = signal.signal(signal.SIGTERM, lambda signum, frame: _forward(proc, signum))
        try:
            return exit_status(proc.wait())
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)
    finally:
        if recorder is not None:
            recorder.stop()
            print(f"gt run: trace written to {record}", file=sys.stderr)
        if cluster is not None:
            cluster.stop()


def _interrupt(proc: subprocess.Popen) -> None:
    if not _terminal_in_front():  # (a terminal's Ctrl-C reached the script itself already)
        _forward(proc, signal.SIGINT)


def _terminal_in_front() -> bool:
    """Whether we run in the foreground of a controlling terminal (whose Ctrl-C reaches our
    whole process group, the script included)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _forward(proc: subprocess.Popen, signum: int) -> None:
    if proc.poll() is None:
        proc.send_signal(signum)
