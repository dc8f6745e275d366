"""``gt run``: run a script as a GT client against a local (or given) cluster."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from gt.cli.common import Subparsers, exit_status
from gt.cli.dashboard import run_with_dashboard


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt run``."""
    p = subparsers.add_parser(
        "run", help="run a script as a client of a local cluster (dashboard alongside)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("GT_WORKERS", "2")),
        help="local workers (default 2, or $GT_WORKERS)",
    )
    p.add_argument("--config", help="shard config YAML for the script (sets GT_CONFIG)")
    p.add_argument("--record", metavar="FILE", help="record the run's events to FILE (.gtrace)")
    p.add_argument(
        "--no-tui", action="store_true", help="no dashboard: plain output, for CI and scripts"
    )
    p.add_argument("--hz", type=float, default=8.0, help="dashboard refresh rate (default 8)")
    p.add_argument("--readonly", action="store_true", help="dashboard cannot change the config")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gt run``; returns the script's exit status (2 when the script does not exist)."""
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
            recorder = RecorderProcess(address, record)
        env = {**os.environ, "GT_DISPATCHER": address}
        env.pop("GT_RECORD", None)  # recording is ours; the script must not start a second one
        if config:
            env["GT_CONFIG"] = os.path.abspath(config)
        if tui:
            return run_with_dashboard(address, cmd, env=env, hz=hz, readonly=readonly)
        proc = subprocess.Popen(cmd, env=env)
        # Ctrl-C reaches the script through the terminal; we wait for it to finish and report.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return exit_status(proc.wait())
        finally:
            signal.signal(signal.SIGINT, old)
    finally:
        if recorder is not None:
            recorder.stop()
            print(f"gt run: trace written to {record}", file=sys.stderr)
        if cluster is not None:
            cluster.stop()
