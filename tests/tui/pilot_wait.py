"""Waiting in Pilot tests: on a condition, never for a fixed time."""

from __future__ import annotations

import time


async def wait_async(pilot, predicate, timeout: float = 15.0):
    """Let the app run until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(0.05)
    raise AssertionError(f"condition not met within {timeout}s")
