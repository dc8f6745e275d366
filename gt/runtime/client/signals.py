"""Signals and GT's client: Python runs a signal's handler in the main thread between any two
bytecodes, so a handler (Ctrl-C's ``KeyboardInterrupt``, a SIGTERM handler saving a checkpoint)
may run in the middle of GT's own code. Sending a batch holds SIGINT and SIGTERM back
(:func:`hold_signals`), and what a handler raises inside a tensor's finalizer, where Python would
drop it, is raised again (:func:`raise_later`)."""

from __future__ import annotations

import _thread
import signal
import threading
from typing import Any

#: Signals whose Python handlers must wait while a batch is being sent (``Connection._send_batch``).
_HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
#: The main thread's mask before the last hold (what a hold that a handler interrupted restores).
_before: Any = None


def refuse_signals() -> None:
    """Never take SIGINT or SIGTERM in this thread (GT's own threads): the kernel then delivers
    them to the main thread, and one taken here cannot trip a handler at any point of it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)


def hold_signals() -> Any:
    """Block SIGINT and SIGTERM for this thread if it is the main one (the only one Python runs
    handlers in); returns the mask to restore."""
    global _before
    if threading.current_thread() is not threading.main_thread():
        return None
    try:  # (one system call: this runs on every batch a program sends)
        before = _before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    except BaseException:
        # A handler due ran inside the call (CPython runs them there) and raised, after the
        # mask changed: put the mask back as it was the last time, or as it is by default.
        if _before is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, _before)
        else:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)
        raise
    return before


def release_signals(held: Any) -> None:
    """Restore the mask; a signal that came meanwhile is delivered now."""
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def raise_later(exc: BaseException) -> None:
    """Raise ``exc`` in the main thread as soon as it runs Python outside this finalizer: through
    a one-shot SIGINT handler (``_thread.interrupt_main`` simulates the signal)."""
    if threading.current_thread() is not threading.main_thread():
        return  # (signal handlers run in the main thread only: nothing of theirs is here)
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # (installed from C, not Python: the default's the best to go back to)
        previous = signal.default_int_handler

    def once(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, previous)
        raise exc

    signal.signal(signal.SIGINT, once)
    _thread.interrupt_main(signal.SIGINT)
