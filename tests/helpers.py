"""Helpers shared by the test modules (importable because conftest.py's folder is on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (and return that); fail after
    ``timeout`` seconds with the last value. Tests wait on conditions like this, never on sleeps."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")


class HandClock:
    """A clock (seconds) that a test moves by hand: ``clock.t += 1.0``."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
