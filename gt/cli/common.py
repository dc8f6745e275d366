"""Helpers shared by the ``gt`` commands: stop signals, finding a dispatcher, exit statuses."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeAlias

#: What each command module's ``add_parser`` receives: ``ArgumentParser.add_subparsers()``.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

NO_DISPATCHER = "no GT dispatcher is running; start one with `gt dispatcher` or try `gt demo`"


def install_stop_signals(stop: Callable[[], Any]) -> None:
    """Call ``stop`` on SIGTERM and on SIGINT (Ctrl-C) instead of raising."""

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


def newest_dispatcher() -> str | None:
    """The front address of the newest live dispatcher; ``None`` (with a message) when none runs."""
    from gt.runtime.discovery import live_dispatchers

    found = live_dispatchers()
    if not found:
        print(f"gt: {NO_DISPATCHER}", file=sys.stderr)
        return None
    return found[0]["front"]


def exit_status(returncode: int) -> int:
    """A child's exit status as a shell reports it (``128 + N`` when killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode
