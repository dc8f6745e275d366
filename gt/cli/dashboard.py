"""Dashboard helpers shared by ``gt top``, ``gt replay``, ``gt run`` and ``gt demo``.

* :func:`find_endpoints`: the newest live dispatcher, or the one at a front address;
* :func:`run_dashboard`: the live app against known endpoints, blocking, optionally with a pane of a
  child process's output; :func:`run_with_dashboard`: ``gt run`` 's child (on a pseudo-terminal,
  :mod:`gt.cli.child_output`) plus that dashboard, then the end of its output on the terminal;
* :func:`collect_state`, :func:`format_once`, :func:`format_json`: one look at a cluster, as text
  tables or JSON (``gt top --once`` / ``--json``, ``gt replay --once`` / ``--json``).

This module never imports the dispatcher or the worker; it talks to them over ZeroMQ. Textual is
imported only when a dashboard actually runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from gt.cli.child_output import ChildOutput
from gt.cli.common import exit_status


def find_endpoints(connect: str | None = None, *, timeout: float = 3.0) -> dict[str, Any] | None:
    """The endpoints of the dispatcher at front address ``connect``, else of the newest live one.

    Returns ``None`` when there is none (or it does not answer).
    """
    from gt.runtime.discovery import live_dispatchers
    from gt.tui.sources import ControlError, control_request

    if connect:
        try:
            eps = control_request(connect, "endpoints", timeout=timeout)
        except ControlError:
            return None
        return dict(eps) if isinstance(eps, dict) else None
    found = live_dispatchers()
    return found[0] if found else None


def resolver(connect: str | None) -> Callable[[], dict | None]:
    """A quick :func:`find_endpoints` of ``connect`` (to find a dispatcher that went away again)."""
    return lambda: find_endpoints(connect, timeout=0.5)


def collect_state(
    endpoints: dict, *, wait: float = 1.0, timeout: float = 5.0
) -> tuple[Any, Any] | None:
    """Attach, take the dispatcher's snapshot, gather ``wait`` seconds of events, detach.

    Returns ``(state, status)``, or ``None`` when the dispatcher does not answer within ``timeout``.
    Rates and shares are over the ``wait`` seconds.
    """
    from gt.tui.sources import LiveSource

    src = LiveSource(
        endpoints, hz=max(4.0, 1.0 / max(wait, 0.05)), window_ns=int(max(wait, 0.05) * 1e9)
    )
    src.start()
    try:
        if not src.ready.wait(timeout):
            return None
        time.sleep(max(0.0, wait))
        return src.compute(), src.status()
    finally:
        src.stop()


def format_once(state: Any, status: Any, width: int | None = None) -> str:
    """``gt top --once``: header, workers, clients and recent events as text tables, as wide as
    ``$COLUMNS``, else the terminal (160 columns into a file or a pipe)."""
    from rich.console import Console

    from gt.tui import tables as T

    if width is None:
        cols = os.environ.get("COLUMNS", "")
        if cols.isdigit() and int(cols) > 0:
            width = int(cols)
        else:
            width = shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 160
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    console.print(T.header_text(state, status, width=width))
    console.print(T.workers_table(state, width))
    console.print(T.clients_table(state, width))
    # (one row per event, cut at the width: Console.print wraps a Text unless told not to)
    console.print(T.log_lines(state.log, 10, state.now_ns), no_wrap=True, overflow="ellipsis")
    return buf.getvalue()


def format_json(state: Any, status: Any) -> str:
    """``gt top --json``: the whole state as one JSON document."""
    from dataclasses import asdict

    from gt.trace.state import state_to_dict

    return json.dumps({"source": asdict(status), **state_to_dict(state)})


def run_dashboard(
    endpoints: dict,
    *,
    hz: float = 8,
    readonly: bool = False,
    on_exit: Callable[[], Any] | None = None,
    output: queue.Queue | Iterable[str] | None = None,
    title: str | None = None,
    resolve: Callable[[], dict | None] | None = None,
    token: str | None = None,
) -> int:
    """Run the monitor against a live dispatcher until the user quits (blocking).

    Args:
        endpoints: the dispatcher's endpoints (``events`` and ``control`` are needed).
        hz: repaints per second.
        readonly: never change the cluster.
        on_exit: called once the app has exited (e.g. to stop ``gt run`` 's child).
        output: lines for an output pane (a queue, or an iterable read on a thread); ``None`` in
            the queue marks the end of the output.
        title: the terminal title (default ``gt top — <address>``).
        resolve: finds the dispatcher again after it went away (default: by its front address).
        token: the control endpoint's credentials (config edits on a remote dispatcher).
    """
    from gt.tui.app import make_app
    from gt.tui.gcpace import IdlePacer
    from gt.tui.sources import LiveSource

    front = endpoints.get("front")
    if resolve is None and front:
        resolve = resolver(front)
    source = LiveSource(endpoints, hz=hz, resolve=resolve)
    app = make_app(
        source,
        hz=hz,
        readonly=readonly,
        title=title or f"gt top — {front or 'dispatcher'}",
        output=output,
        token=token,
        gc_pacer=IdlePacer(),
    )
    try:
        app.run()
    finally:
        source.stop()
        if on_exit is not None:
            on_exit()
    return int(app.return_code or 0)


def stop_child(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """Interrupt a child (SIGINT, as Ctrl-C would), then terminate, then kill; always reaps it."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 2.0)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except OSError:
            break
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def run_with_dashboard(
    address: str,
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    hz: float = 8,
    readonly: bool = False,
    cwd: str | None = None,
) -> int:
    """``gt run`` with the dashboard: start ``cmd``, show its output in a pane under the monitor.

    The dashboard stays up after the child exits (its exit status is the pane's last line) until
    the user quits; quitting earlier interrupts the child (SIGINT, then SIGTERM, then SIGKILL).

    Returns:
        The child's exit status (``128 + N`` if a signal ended it); 1 if the dispatcher at
        ``address`` does not answer.
    """
    endpoints = find_endpoints(address, timeout=10.0)
    if endpoints is None:
        print(f"gt run: no GT dispatcher answered at {address}", file=sys.stderr)
        return 1
    size = shutil.get_terminal_size()
    child_env = dict(env if env is not None else os.environ)
    child = ChildOutput(cmd, env=child_env, cwd=cwd, columns=size.columns, log=True)
    name = " ".join(os.path.basename(c) for c in cmd[1:2]) or cmd[0]
    try:
        run_dashboard(endpoints, hz=hz, readonly=readonly, output=child.lines,
                      on_exit=lambda: stop_child(child.proc), title=f"gt run {name}")  # fmt: skip
    finally:
        # The dashboard is gone: show the end of the script's output where it ran, as a terminal
        # would have (a crashed script's traceback included).
        shown = child.tail(max(1, size.lines - 2))
        for line in shown:
            print(line)
        if child.count > len(shown):  # (nothing the script printed is lost: where the rest is)
            print(f"gt run: all {child.count:,} lines it printed are in {child.log_path}",
                  file=sys.stderr)  # fmt: skip
        else:
            with contextlib.suppress(OSError):
                os.unlink(child.log_path)
        sys.stdout.flush()
    return exit_status(child.proc.wait())
