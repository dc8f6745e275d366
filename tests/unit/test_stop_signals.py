"""The stop-signal handler of ``gt dispatcher``/``gt worker``/``gt record``: it must return at
once, whatever ``stop`` does, and ask for the stop once."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from gt.cli.common import install_stop_signals


@pytest.fixture
def restore_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_the_handler_returns_at_once_even_while_stop_would_block(restore_handlers):
    # As when a second SIGTERM lands while the first one's Event.set holds the event's lock in
    # the main thread: calling stop there never returned, and the process hung for good.
    release = threading.Event()
    calls = []

    def stop():
        calls.append(threading.current_thread().name)
        release.wait(3)

    install_stop_signals(stop)
    handler = signal.getsignal(signal.SIGTERM)
    t0 = time.monotonic()
    handler(signal.SIGTERM, None)
    handler(signal.SIGINT, None)  # a second signal right after: no second stop
    assert time.monotonic() - t0 < 1.0
    release.set()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == ["gt-stop"]


def test_a_held_event_lock_does_not_deadlock_the_handler(restore_handlers):
    stopped = threading.Event()
    install_stop_signals(stopped.set)
    handler = signal.getsignal(signal.SIGTERM)
    with stopped._cond:  # the lock Event.set takes, held by this (the main) thread
        handler(signal.SIGTERM, None)
    assert stopped.wait(5)
