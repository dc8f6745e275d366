"""The prefetch thread of a worker's memory pool (:mod:`gt.runtime.worker.pool`).

It walks the queued instructions ahead of the executor and reads back the spilled buffers they
need, into the headroom between the spill threshold and the limit. It runs below the executor's
priority, for the client whose turn it is, and not while clients share the worker; a read is
given up between pieces once another client's turn begins.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from gt.runtime.worker.pool_table import SpilledBuffer

#: Seconds since another client's turn during which the worker counts as shared (no prefetch).
SHARED_S = 0.25
#: Seconds the prefetch thread waits after a read that failed (the device refused it, say).
FAILED_BACKOFF_S = 0.1
#: How much nicer than the executor the prefetch thread runs (``setpriority``; 19 is the lowest).
PREFETCH_NICE = 10


class Prefetcher:
    """The prefetch half of :class:`~gt.runtime.worker.pool.MemoryPool` (which holds the state
    these methods read: the lock, the spilled buffers, the queue, the budgets)."""

    def _start_prefetch(self) -> None:
        self._thread = threading.Thread(target=self._prefetch_loop, name="gt-prefetch",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _next_prefetch(self) -> SpilledBuffer | None:
        """(Under the lock.) The first spilled buffer the queue needs, if it fits the budget."""
        if not self.spilled or not self.prefetch or self._shared():
            return None
        upcoming = self.upcoming
        pending = self.ready_bytes + self.loading_bytes
        room = self.prefetch - pending
        if self.limit is not None:  # only into the headroom the threshold keeps under the limit
            # (measured from the threshold, not from what is held now: filled from below it, the
            # prefetches would be dropped unread as results brought the pool back up to it)
            floor = max(self.used, self.limit * self.threshold)
            room = min(room, self.limit - floor - pending)
        running = self.running
        for i in range(max(0, self.cursor), len(upcoming)):
            for k in upcoming[i]:
                rec = self.spilled.get(k)
                # only for the client whose turn it is: a prefetch competes for the CPU and the
                # memory bus with the batch that runs, so it belongs to that client's turn
                if rec is not None and rec.state == "out" and rec.cno == running:
                    return rec if rec.nbytes <= min(room, self._client_room(rec.cno)) else None
        return None

    def _shared(self) -> bool:
        """(Under the lock.) Whether another client than the running one had a turn lately.

        While clients share the worker there is no prefetch: its reads would run during the other
        clients' turns, taking CPU and memory bandwidth from them (``bench_memory.py``'s
        neighbour, with the spilling client's prefetch on: +4 to +16 %; off: -6 to +4 %), whereas
        a read on demand is part of its own client's turn, which the scheduler keeps to its share."""
        running, turns = self.running, self._turns
        if len(turns) < 2:
            return False
        now = time.monotonic()
        for c, t in list(turns.items()):
            if now - t > SHARED_S:
                del turns[c]
        return any(c != running for c in turns)

    def _client_room(self, cno: int) -> float:
        """(Under the lock.) What a client's quota (its tenant's, shared by its programs) leaves
        for prefetching its buffers."""
        if self.client_limit is None:
            return float("inf")
        a = self.accounts.get(cno, cno)
        members = self._account_members(a)
        pending = sum(r.nbytes for r in set(self.spilled.values())
                      if r.cno in members and r.state in ("ready", "loading"))  # fmt: skip
        return self.client_limit - self.account_used(a) - pending

    def _prefetch_loop(self) -> None:
        _lower_priority()
        while True:
            with self.lock:
                rec = None
                while not self._stop:
                    rec = self._next_prefetch()
                    if rec is not None:
                        break
                    self.lock.wait(0.05 if self.spilled else None)
                if self._stop:
                    return
                rec.state = "loading"
                self.loading_bytes += rec.nbytes
            t0 = time.monotonic_ns()
            failed = False
            try:
                # given up (and read on demand, if need be) once another client's turn begins
                raw = self.store.get(rec.handle, rec.nbytes, self._stream(),
                                     lambda c=rec.cno: self.running == c)  # fmt: skip
            except Exception:  # freed meanwhile (file gone), or the device refused: read on demand
                raw, failed = None, True
            t1 = time.monotonic_ns()
            with self.lock:
                self.loading_bytes -= rec.nbytes
                if rec.state == "loading" and raw is not None:
                    rec.state, rec.data = "ready", raw
                    self.ready_bytes += rec.nbytes
                    self.counters["prefetched"] += rec.nbytes
                elif rec.state == "loading":
                    rec.state = "out"
                self.lock.notify_all()
                if failed and not self._stop:  # not straight back at the same read (a full
                    self.lock.wait(FAILED_BACKOFF_S)  # device would refuse it again at once)
            if raw is not None and self.transfer is not None:
                self.transfer("prefetch", t0, t1, rec.nbytes, rec.cno)

    def _stream(self) -> Any:
        """The prefetch thread's own CUDA stream (``None`` on NumPy)."""
        xp = self.store.xp
        if xp is None or not hasattr(xp, "cuda"):
            return None
        s = getattr(self, "_cuda_stream", None)
        if s is None:
            if self.store.device is not None:
                xp.cuda.Device(self.store.device).use()
            s = self._cuda_stream = xp.cuda.Stream(non_blocking=True)
        return s


def _lower_priority() -> None:
    """Run the calling thread below the executor (Linux: a thread's own nice value), so that a
    prefetch takes CPU the executor leaves idle rather than a share of a busy BLAS call's."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PREFETCH_NICE)
    except (AttributeError, OSError):  # not Linux, or not allowed: the same priority still works
        pass
