"""Saying what a worker is running while it runs: ``busy`` events for long batches.

A worker publishes a batch's ``exec`` event when the batch ends, so a monitor that read only those
would take a worker inside a 10-second matmul for an idle one. While a batch (or a slice of one)
has run longer than :data:`EVERY_S`, a thread of the worker publishes a ``busy`` event every
:data:`EVERY_S` naming the batch, when it started and the instruction it is in; the monitor counts
the time since then as compute until the batch's ``exec`` event arrives (:mod:`gt.trace.views`).
Short batches publish nothing: the thread only reads two attributes the executor sets.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from gt.trace import events as E

#: How long a batch runs before it is announced, and how often it is announced again.
EVERY_S = 0.1


class BusyReporter:
    """The thread that announces long batches (see the module).

    Args:
        executor: the worker's executor (its ``running`` attribute: the job of the slice it is
            in, or ``None``; ``running_since``: ``time.monotonic_ns()`` when that slice began).
        events: the worker's emitter (thread-safe; its batches are flushed at once here).
        worker_id: the events' ``worker`` field.
    """

    def __init__(self, executor: Any, events: Any, worker_id: int, every_s: float = EVERY_S):
        self.executor, self.events, self.worker_id = executor, events, worker_id
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gt-busy", daemon=True)
        if events.enabled:
            self._thread.start()

    def _loop(self) -> None:
        every_ns = int(self.every_s * 1e9)
        while not self._stop.wait(self.every_s):
            ex = self.executor
            job, since = ex.running, ex.running_since
            if job is None or time.monotonic_ns() - since < every_ns:
                continue
            self.announce(job, since)

    def announce(self, job: Any, since: int) -> None:
        """Publish one ``busy`` event for ``job``, running since ``since`` (monotonic ns)."""
        instrs, idx = job.instrs, job.idx
        ins = instrs[idx] if 0 <= idx < len(instrs) else None
        op = src = None
        if type(ins) in (list, tuple) and len(ins) >= 5:
            op = ins[0] if type(ins[0]) is int else None
            src = ins[4] if type(ins[4]) is int else None
        ev = self.events
        ev.emit(E.BUSY, {"worker": self.worker_id, "client": job.b.cno, "batch": job.b.seq,
                         "t0": since + ev.offset, "op": op, "src": src})  # fmt: skip
        ev.flush()

    def stop(self) -> None:
        """End the thread (before the emitter closes)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
