"""Publishing events: a small, never-blocking batcher in front of a PUSH socket.

``GT_TRACE`` picks the level: ``off`` (nothing is published), ``summary`` (per-batch events
without per-instruction durations) or ``full`` (the default; per-instruction columns included).
Batches go to the dispatcher's bus over a PUSH socket (a client's through its dispatcher
connection instead, where they are checked); the bus's PUB side drops them when no subscriber is
attached, so an unwatched run pays for building and sending batches only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from gt.trace import events as E

LEVELS = ("off", "summary", "full")
BATCH_EVENTS = 64
FLUSH_NS = 5_000_000


def trace_level() -> str:
    """The level from ``$GT_TRACE`` (default ``full``).

    Raises:
        ValueError: another value (a typo must not record everything, or nothing, silently).
    """
    level = os.environ.get("GT_TRACE", "").strip().lower() or "full"
    if level not in LEVELS:
        raise ValueError(f"$GT_TRACE must be off, summary or full, not {os.environ['GT_TRACE']!r}")
    return level


class Emitter:
    """Batches events from one source and publishes them without ever blocking.

    Args:
        ctx: the ZeroMQ context to make the PUB socket in.
        endpoint: the bus's ``events_in`` endpoint (``None`` or level ``off``: emit nothing).
        source: this publisher's name, e.g. ``"worker:0"``.
        clock_offset_ns: added to local monotonic time to get the run's clock.
        secure: ``secure(socket, endpoint)`` prepares the socket before it connects (CURVE over
            TCP; the runtime hands in :func:`gt.runtime.security.secure_connect`).
        send: publish a packed batch with this instead of a socket of its own (a client's batches
            go through its dispatcher connection, see :class:`gt.runtime.protocol.Events`); raises
            ``zmq.Again`` when it cannot take one now.
        lock: the lock that guards the batch (and ``send``'s socket, when the owner shares one).
    """

    def __init__(
        self,
        ctx: zmq.Context | None,
        endpoint: str | None,
        source: str,
        *,
        level: str | None = None,
        clock_offset_ns: int = 0,
        secure: Callable[[Any, str], Any] | None = None,
        send: Callable[[bytes], None] | None = None,
        lock: Any = None,
    ):
        self.level = level or trace_level()
        self.source = source
        self.offset = clock_offset_ns
        self._send = send
        self.enabled = self.level != "off" and (
            send is not None or (endpoint is not None and ctx is not None)
        )
        self.full = self.enabled and self.level == "full"
        self.seq = 0
        self.sent = 0
        self.dropped = 0
        self._buf: list = []
        self._first = 0
        self._lock = lock if lock is not None else threading.Lock()
        self._sock = None
        if self.enabled and send is None:
            # PUSH, not PUB: a PUB drops everything until the bus's subscription reaches it, so a
            # new client's first events would be lost; PUSH queues them until connected. The
            # bus's PUB side drops for absent subscribers, in C, on the dispatcher's proxy thread.
            s = ctx.socket(zmq.PUSH)
            s.setsockopt(zmq.LINGER, 200)
            s.setsockopt(zmq.SNDHWM, 10_000)
            if secure is not None:  # CURVE over TCP (gt.runtime.security.secure_connect)
                secure(s, endpoint)
            s.connect(endpoint)
            self._sock = s

    def now(self) -> int:
        """The run's clock in ns."""
        return time.monotonic_ns() + self.offset

    def emit(self, kind: str, fields: dict, t_ns: int | None = None) -> None:
        """Queue one event; publishes when the batch is full or old enough."""
        if not self.enabled:
            return
        t = self.now() if t_ns is None else t_ns
        with self._lock:
            if not self._buf:
                self._first = t
            self._buf.append([kind, t, fields])
            if len(self._buf) >= BATCH_EVENTS or t - self._first >= FLUSH_NS:
                self._flush_locked()

    def tick(self) -> None:
        """Publish a pending batch that has waited long enough (call from the owner's loop; it
        never waits for the lock: a busy owner publishes at its next emit or tick)."""
        if self.enabled and self._buf and self.now() - self._first >= FLUSH_NS:
            if self._lock.acquire(blocking=False):
                try:
                    self._flush_locked()
                finally:
                    self._lock.release()

    def flush(self) -> None:
        """Publish whatever is pending now."""
        if not self.enabled:
            return
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._buf:
            return
        events, self._buf = self._buf, []
        first = self.seq
        self.seq += len(events)
        try:
            batch = E.pack_batch(self.source, first, events)
            if self._send is not None:
                self._send(batch)
            else:
                self._sock.send_multipart([E.TOPIC, batch], zmq.NOBLOCK)
            self.sent += len(events)
        except zmq.Again:
            self.dropped += len(events)  # a gap in seq: subscribers see it as a drop

    def forward(self, batch: bytes) -> bool:
        """Publish another source's packed batch as it is (the dispatcher, for its clients);
        ``False`` if the bus could not take it now."""
        if self._sock is None:
            return False
        try:
            self._sock.send_multipart([E.TOPIC, batch], zmq.NOBLOCK)
            return True
        except zmq.Again:
            return False

    def close(self) -> None:
        """Publish what is pending and close the socket (if it has one of its own)."""
        if self.enabled:
            self.flush()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.enabled = False


def fields_for(kind: str, **values: Any) -> dict:
    """Build a fields dict for ``kind``, filling absent fields with ``None``."""
    return {k: values.get(k) for k in E.FIELDS[kind]}
