"""Helpers shared by the ``gt`` commands: stop signals, finding a dispatcher and saying which one,
exit statuses."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

#: What each command module's ``add_parser`` receives: ``ArgumentParser.add_subparsers()``.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

NO_DISPATCHER = "no GT dispatcher is running; start one with `gt dispatcher` or try `gt demo`"


def port_arg(text: str) -> int:
    """``--port``: 0 (free ports) or a port that leaves room for the four after it (1..65531)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65531:
        raise argparse.ArgumentTypeError(
            f"{port} is not a port for it: 1 to 65531 (it takes P to P+4), or 0 for free ports"
        )
    return port


def count_arg(noun: str) -> Callable[[str], int]:
    """An argparse type for a whole number of ``noun``s, at least 1 (``--workers``, ``--steps``)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number of {noun}s, got {text!r}"
            ) from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"needs at least 1 {noun}, got {n}")
        return n

    parse.__name__ = f"{noun}_count"
    return parse


def positive_arg(text: str) -> float:
    """A number of seconds or a rate that must be above 0 (``--hz``, ``--duration``, ``--timeout``)."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not x > 0 or x == float("inf"):  # (NaN fails too)
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return x


def record_problem(path: str) -> str | None:
    """What is wrong with ``--record PATH`` before anything starts (else ``None``)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"--record {path}: a directory; name the .gtrace file to write"
    if not os.path.isdir(folder):
        return f"--record {path}: no such folder {folder}"
    return None


def install_stop_signals(stop: Callable[[], Any]) -> None:
    """Call ``stop`` on SIGTERM and on SIGINT (Ctrl-C) instead of raising.

    ``stop`` runs on a thread of its own, once: a handler runs in the main thread between any two
    bytecodes, so calling ``stop`` there (``threading.Event.set``, which takes a lock) deadlocks
    when the signal lands while the main thread holds that lock -- inside the first signal's own
    ``set``, when two stop signals come close together. A worker hung that way for good."""
    fired = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
            threading.Thread(target=stop, name="gt-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def resolve_endpoints(address: str, timeout: float = 5.0) -> dict[str, str]:
    """Ask the dispatcher at a front ``address`` for all of its endpoints (exits with a message)."""
    from gt.runtime.control import ControlError, request

    try:
        return request(address, "endpoints", timeout=timeout)
    except ControlError as exc:
        raise SystemExit(f"gt: {exc}") from None


def newest_dispatcher(command: str = "gt") -> str | None:
    """The front address of the newest live dispatcher, said on stderr (:func:`announce`);
    ``None`` (with a message) when none runs."""
    from gt.runtime.discovery import live_dispatchers

    found = live_dispatchers()
    if not found:
        print(f"{command}: {NO_DISPATCHER}", file=sys.stderr)
        return None
    announce(command, found[0])
    return found[0]["front"]


def owner_uid(info: Mapping[str, Any]) -> int | None:
    """Who started a dispatcher: its answer's ``uid``, else the owner of its discovery file."""
    uid = info.get("uid")
    if type(uid) is int:
        return uid
    path = info.get("file")
    if isinstance(path, str):
        try:
            return os.stat(path).st_uid
        except OSError:
            return None
    return None


def describe_dispatcher(info: Mapping[str, Any], *, now: float | None = None) -> str:
    """One line naming a dispatcher: address, pid, start time, and its user when not you.

    ``info`` is a discovery record or a ``ping``/``endpoints`` answer (``front``, ``pid``,
    ``started`` as a Unix time, ``uid``); what it lacks is left out. For example
    ``the dispatcher at tcp://127.0.0.1:5555 (pid 42, started 14:02:11, 1m30s ago)``.
    """
    from gt.tui.config_view import user_name
    from gt.tui.render import human_duration

    parts = []
    if info.get("pid") is not None:
        parts.append(f"pid {info['pid']}")
    started = info.get("started")
    if isinstance(started, (int, float)) and not isinstance(started, bool):
        ago = (time.time() if now is None else now) - started
        fmt = "%H:%M:%S" if ago < 86_400 else "%Y-%m-%d %H:%M"
        parts.append(f"started {time.strftime(fmt, time.localtime(started))}, "
                     f"{human_duration(ago)} ago")  # fmt: skip
    uid = owner_uid(info)
    if uid is not None and uid != os.getuid():
        parts.append(f"user {user_name(uid)}, not you")
    where = info.get("front") or info.get("control") or "?"
    return f"the dispatcher at {where}" + (f" ({', '.join(parts)})" if parts else "")


def announce(command: str, info: Mapping[str, Any]) -> None:
    """Say on stderr which dispatcher ``command`` picked by itself (stdout stays the command's)."""
    print(f"{command}: using {describe_dispatcher(info)}", file=sys.stderr)


def exit_status(returncode: int) -> int:
    """A child's exit status as a shell reports it (``128 + N`` when killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode
