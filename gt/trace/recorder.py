"""Recording the event bus to a ``.gtrace`` file.

A ``.gtrace`` file is append-only::

    MAGIC (8 bytes)
    record: header      {format, schema, run_id, start_ns, wall_time, workers, config, op_names, meta}
    record: batch       [source, first_seq, events]   (exactly as it came off the bus)
    record: keyframe    {t_ns, seq, source, state}     (every second or every N events)
    ...
    record: index       {chunks, keyframes, summary}   (only when closed cleanly)
    trailer             <u64 offset of the index record> b"GTINDEX\\0"

Every record is a fixed 25-byte head ``<u32 length, u8 type, i64 t_first, i64 t_last,
u32 crc32>`` followed by ``length`` bytes of msgpack. The head's time range lets a reader skip
records without decoding them; the checksum tells a corrupt record from a truncated one. The
index lists *chunks* (runs of records: offset, earliest and latest event time) and keyframes, so
a reader can seek without a scan; a file without one (the recorder died) is scanned instead.

The recorder writes what the bus delivers. Sequence numbers are contiguous per source, so every
gap is counted and written as a ``drop`` event from the source ``"recorder"``.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgpack
import zmq

from gt.trace import events as E

MAGIC = b"GTRACE\x00\x01"
FORMAT_VERSION = 1
#: Record head: payload length, record type, first and last event time (ns), crc32 of the payload.
REC = struct.Struct("<IBqqI")
R_HEADER, R_BATCH, R_KEYFRAME, R_INDEX = 1, 2, 3, 4
RECORD_TYPES = {R_HEADER: "header", R_BATCH: "batch", R_KEYFRAME: "keyframe", R_INDEX: "index"}
#: Trailer after the index record: its offset, then a marker.
TRAILER = struct.Struct("<Q8s")
TRAILER_MAGIC = b"GTINDEX\x00"
#: The source name of events the recorder makes itself (``drop``).
RECORDER_SOURCE = "recorder"

_STATEFUL = frozenset({E.WORKER_JOINED, E.WORKER_LEFT, E.CLIENT_JOINED, E.CLIENT_LEFT})
_STATEFUL |= {E.MEMORY, E.DEVICE, E.CONFIG, E.DROP}


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _normalize_workers(workers: Iterable[Any] | Mapping[Any, Any] | None) -> list[dict]:
    """Workers as ``[{"id", "host", "pid", "device", ...}]`` from a list of dicts or an id->info map."""
    if not workers:
        return []
    if isinstance(workers, Mapping):  # only integer ids: what a reader accepts (gt.trace.checks)
        return [{"id": k, **dict(v)} for k, v in workers.items() if type(k) is int]
    return [dict(w) for w in workers if isinstance(w, Mapping) and type(w.get("id")) is int]


class Recorder:
    """Writes event batches to a ``.gtrace`` file.

    Args:
        path: the file to create (overwritten if it exists).
        run_id: the run's id (a random one if not given).
        start_ns: the run clock at the start of the recording (default: this process's monotonic clock).
        workers: known workers, a list of dicts (``id``, ``host``, ``pid``, ``device``) or an id->dict map.
        config: the shard config in force when recording started.
        op_names: opcode -> op name, stored in the header so exports can name instructions.
        meta: any other msgpack-able facts for the header.
        keyframe_fn: returns the full state for a keyframe; ``None`` writes the recorder's own
            compact state (sequence numbers, event counts, drops, workers, clients, last memory and
            device samples, config).
        keyframe_every_ns: write a keyframe when this much run time has passed since the last one.
        keyframe_every_events: ... or when this many events were written since the last one.
        index_every: records per index chunk (a seek reads at most this many records to skip).
        flush_every_s: flush the file at least this often while writing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        run_id: str | None = None,
        start_ns: int | None = None,
        workers: Iterable[Any] | Mapping[Any, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        op_names: Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
        keyframe_fn: Callable[[], dict] | None = None,
        keyframe_every_ns: int = 1_000_000_000,
        keyframe_every_events: int = 20_000,
        index_every: int = 8,
        flush_every_s: float = 0.5,
    ):
        self.path = Path(path)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.start_ns = time.monotonic_ns() if start_ns is None else int(start_ns)
        self.keyframe_fn = keyframe_fn
        self.keyframe_every_ns = keyframe_every_ns
        self.keyframe_every_events = keyframe_every_events
        self.index_every = max(1, index_every)
        self.flush_every_s = flush_every_s
        self.closed = False
        self.header = {
            "format": FORMAT_VERSION,
            "schema": E.SCHEMA_VERSION,
            "run_id": self.run_id,
            "start_ns": self.start_ns,
            "wall_time": time.time(),
            "workers": _normalize_workers(workers),
            "config": dict(config) if config else {},
            "op_names": list(op_names) if op_names else [],
            "meta": {"host": socket.gethostname(), "pid": os.getpid(), **(meta or {})},
        }
        # counters (see :attr:`stats`)
        self.events = self.batches = self.bad = self.keyframe_errors = 0
        self.resets: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._drops: dict[str, int] = {}
        self._next: dict[str, int] = {}
        self._first: dict[str, int] = {}
        self._first_t: dict[str, int] = {}
        self._joined: set[str] = set()  # sources whose joining we recorded
        self._late_heads: list[str] = []
        self._own_seq = 0
        self._t_first: int | None = None
        self._t_last: int | None = None
        self._kf_t: int | None = None  # time of the last keyframe
        # compact state for the default keyframe
        self._workers: dict[Any, dict] = {w.get("id"): dict(w) for w in self.header["workers"]}
        self._clients: dict[Any, dict] = {}
        self._memory: dict[Any, dict] = {}
        self._device: dict[Any, dict] = {}
        self._config: Any = self.header["config"]
        # index bookkeeping
        self._chunks: list[list[int]] = []
        self._chunk: list[int] | None = None
        self._chunk_n = self._kf_events = 0
        self._keyframes: list[list[int]] = []
        self._f = open(self.path, "wb")  # closed in close()
        self._last_flush = time.monotonic()
        self._f.write(MAGIC)
        self._pos = len(MAGIC)
        self._write_record(R_HEADER, _pack(self.header), self.start_ns, self.start_ns, index=False)
        self._f.flush()

    # -- writing -------------------------------------------------------------------------------

    def write_batch(self, source: str, first_seq: int, events: list) -> None:
        """Append one event batch ``(source, first_seq, [[kind, t_ns, fields], ...])``."""
        self._write_batch(source, first_seq, events, None)

    def write_packed(self, data: bytes | memoryview) -> tuple[str, int, list]:
        """Validate and append one packed batch as it came off the bus; returns it decoded.

        Raises:
            EventFormatError: the bytes are not an event batch (nothing is written).
        """
        source, first_seq, events = E.unpack_batch(data)
        self._write_batch(source, first_seq, events, bytes(data))
        return source, first_seq, events

    def note_bad(self) -> None:
        """Count a message that was not an event batch."""
        self.bad += 1

    def _write_batch(self, source: str, first_seq: int, events: list, raw: bytes | None) -> None:
        if self.closed:
            raise ValueError(f"recorder for {self.path} is closed")
        if not events:
            return
        expected = self._next.get(source)
        if expected is None:
            self._first[source] = first_seq
            self._first_t[source] = events[0][1]
            if first_seq > 0 and source in self._joined:  # it joined while we recorded
                self._drop(source, first_seq, events[0][1])
        elif first_seq > expected:
            self._drop(source, first_seq - expected, events[0][1])
        elif first_seq < expected:
            self.resets[source] = self.resets.get(source, 0) + 1  # the source restarted
        self._next[source] = first_seq + len(events)
        self._append(source, first_seq, events, raw)
        while self._late_heads:  # sources announced as joined after their first batch came
            src = self._late_heads.pop()
            self._drop(src, self._first[src], self._first_t[src])
        self._maybe_keyframe()
        if time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def _drop(self, source: str, missing: int, t: int) -> None:
        """Write a ``drop`` event: ``missing`` events of ``source`` never arrived."""
        drop = [[E.DROP, t, {"source": source, "missing": missing}]]
        self._append(RECORDER_SOURCE, self._own_seq, drop, None)
        self._own_seq += 1

    def _joined_source(self, source: str) -> None:
        """A source started while we recorded: its events from seq 0 on should all arrive."""
        if source not in self._joined:
            self._joined.add(source)
            if self._first.get(source, 0) > 0:
                self._late_heads.append(source)

    def _append(self, source: str, first_seq: int, events: list, raw: bytes | None) -> None:
        counts = self._counts
        lo = hi = events[0][1]
        for ev in events:
            kind, t = ev[0], ev[1]
            if t < lo:
                lo = t
            elif t > hi:
                hi = t
            counts[kind] = counts.get(kind, 0) + 1
            if kind in _STATEFUL:
                self._observe(kind, ev[2])
        payload = raw if raw is not None else E.pack_batch(source, first_seq, events)
        self._write_record(R_BATCH, payload, lo, hi)
        n = len(events)
        self.events += n
        self.batches += 1
        self._kf_events += n
        if self._t_first is None or lo < self._t_first:
            self._t_first = lo
        if self._t_last is None or hi > self._t_last:
            self._t_last = hi

    def _observe(self, kind: str, f: dict) -> None:
        """Fold one event into the compact state (the default keyframe). An event whose ids are
        not ids is still recorded as it came, but changes nothing here (and counts as bad)."""
        if kind == E.DROP:
            missing = f.get("missing")
            if type(missing) is not int or not 0 <= missing < 1 << 62:
                self.note_bad()
                return
            src = str(f.get("source"))[:200]
            self._drops[src] = min(1 << 62, self._drops.get(src, 0) + missing)
            return
        if kind == E.CONFIG:
            self._config = f.get("after")
            return
        key = "worker" if kind in (E.MEMORY, E.DEVICE, E.WORKER_JOINED, E.WORKER_LEFT) else "client"
        who = f.get(key)
        if type(who) is not int:
            self.note_bad()
            return
        if kind == E.MEMORY:
            self._memory[who] = f
        elif kind == E.DEVICE:
            self._device[who] = f
        elif kind == E.WORKER_JOINED:
            self._joined_source(f"worker:{who}")
            self._workers[who] = {"id": who, **f, "alive": True}
        elif kind == E.WORKER_LEFT:
            self._workers.setdefault(who, {"id": who})["alive"] = False
        elif kind == E.CLIENT_JOINED:
            self._joined_source(f"client:{who}")
            self._clients[who] = {"id": who, **f, "alive": True}
        elif kind == E.CLIENT_LEFT:
            self._clients.setdefault(who, {"id": who})["alive"] = False

    def _write_record(
        self, rtype: int, payload: bytes, t0: int, t1: int, *, index: bool = True
    ) -> None:
        if index:
            if self._chunk is None or self._chunk_n >= self.index_every or rtype == R_KEYFRAME:
                self._close_chunk()
                self._chunk = [self._pos, t0, t1]
            else:
                c = self._chunk
                if t0 < c[1]:
                    c[1] = t0
                if t1 > c[2]:
                    c[2] = t1
            self._chunk_n += 1
        self._f.write(REC.pack(len(payload), rtype, t0, t1, zlib.crc32(payload)))
        self._f.write(payload)
        self._pos += REC.size + len(payload)

    def _close_chunk(self) -> None:
        if self._chunk is not None:
            self._chunks.append(self._chunk)
        self._chunk = None
        self._chunk_n = 0

    # -- keyframes -----------------------------------------------------------------------------

    def _maybe_keyframe(self) -> None:
        if self._kf_t is None:
            self._kf_t = self._t_first
        if (
            self._kf_events >= self.keyframe_every_events
            or (self._t_last or 0) - (self._kf_t or 0) >= self.keyframe_every_ns
        ):
            self.keyframe()

    def compact_state(self) -> dict:
        """The recorder's own state (what a keyframe holds when no ``keyframe_fn`` is given)."""
        return {
            "counts": dict(self._counts),
            "drops": dict(self._drops),
            "workers": {k: dict(v) for k, v in self._workers.items()},
            "clients": {k: dict(v) for k, v in self._clients.items()},
            "memory": dict(self._memory),
            "device": dict(self._device),
            "config": self._config,
        }

    def keyframe(self) -> None:
        """Write a keyframe now: the state after every event written so far."""
        t = self._t_last if self._t_last is not None else self.start_ns
        self._kf_t = t
        self._kf_events = 0
        try:
            if self.keyframe_fn is not None:
                state, source = self.keyframe_fn(), "custom"
            else:
                state, source = self.compact_state(), "recorder"
            payload = _pack({"t_ns": t, "seq": dict(self._next), "source": source, "state": state})
        except Exception:
            self.keyframe_errors += 1  # a broken snapshot must not stop the recording
            return
        self._keyframes.append([t, self._pos])
        self._write_record(R_KEYFRAME, payload, t, t)

    # -- finishing -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Push buffered records to the file."""
        if not self.closed:
            self._f.flush()
            self._last_flush = time.monotonic()

    def summary(self) -> dict:
        """Facts about everything written so far (stored in the index)."""
        return {
            "events": self.events,
            "batches": self.batches,
            "t_first": self._t_first,
            "t_last": self._t_last,
            "counts": dict(self._counts),
            "drops": dict(self._drops),
            "dropped": sum(self._drops.values()),
            "workers": [dict(w) for w in self._workers.values()],
            "sources": {s: [self._first[s], n] for s, n in self._next.items()},
            "resets": dict(self.resets),
            "bad": self.bad,
        }

    @property
    def stats(self) -> dict:
        """Counters: events, batches, bytes, drops per source, resets, bad messages, keyframes."""
        extra = {"bytes": self._pos, "keyframes": len(self._keyframes)}
        return {**self.summary(), **extra, "keyframe_errors": self.keyframe_errors}

    def close(self) -> None:
        """Write the index and trailer and close the file (idempotent)."""
        if self.closed:
            return
        self._close_chunk()
        index = {"chunks": self._chunks, "keyframes": self._keyframes, "summary": self.summary()}
        t0 = self._t_first if self._t_first is not None else self.start_ns
        t1 = self._t_last if self._t_last is not None else self.start_ns
        offset = self._pos
        self._write_record(R_INDEX, _pack(index), t0, t1, index=False)
        self._f.write(TRAILER.pack(offset, TRAILER_MAGIC))
        self._pos += TRAILER.size
        self._f.close()
        self.closed = True

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_trace(
    path: str | os.PathLike[str], batches: Iterable[Sequence[Any]], **header: Any
) -> dict:
    """Write a whole trace from ``(source, first_seq, events)`` batches (fixtures, tests, tools).

    Args:
        path: the file to create.
        batches: the batches in arrival order.
        **header: keyword arguments for :class:`Recorder`.

    Returns:
        The recorder's :attr:`Recorder.stats`.
    """
    with Recorder(path, **header) as rec:
        for source, first_seq, events in batches:
            rec.write_batch(source, first_seq, events)
        return rec.stats


def record_from_bus(
    events_endpoint: str,
    path: str | os.PathLike[str],
    duration: float | None = None,
    stop_event: threading.Event | None = None,
    *,
    ctx: zmq.Context | None = None,
    ready: threading.Event | None = None,
    on_batch: Callable[[str, int, list], None] | None = None,
    rcvhwm: int = 1_000_000,
    poll_ms: int = 50,
    linger_s: float = 0.3,
    secure: Callable[[Any, str], Any] | None = None,
    **recorder_kwargs: Any,
) -> dict:
    """Subscribe to a live event bus and record it until stopped.

    Stops when ``duration`` seconds have passed, when ``stop_event`` is set, or on Ctrl-C; then
    keeps recording for ``linger_s`` more (publishers hold events for a few ms before they send,
    and an idle one up to its poll interval), writes the index and returns. Every gap in a source's
    sequence numbers is written as a ``drop`` event and counted in the returned stats.

    Args:
        events_endpoint: the bus's subscriber endpoint (``tcp://host:port`` or ``ipc://...``).
        path: the ``.gtrace`` file to write.
        duration: seconds to record (``None``: until stopped).
        stop_event: set it to stop recording.
        ctx: the ZeroMQ context to use (a private one by default).
        ready: set once the socket is subscribed and the file is open.
        on_batch: called with every recorded batch (e.g. to fold it into a model for keyframes).
        rcvhwm: receive high-water mark in messages.
        poll_ms: how often the stop conditions are checked.
        linger_s: how long to keep recording once asked to stop (not after a second Ctrl-C).
        secure: ``secure(socket, endpoint)`` prepares the socket before it connects (CURVE).
        **recorder_kwargs: passed to :class:`Recorder` (run_id, workers, config, op_names, ...).

    Returns:
        :attr:`Recorder.stats` plus ``elapsed_s`` and ``events_per_s``.
    """
    own_ctx = ctx is None
    context = zmq.Context() if ctx is None else ctx
    sock = context.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, rcvhwm)
    sock.setsockopt(zmq.SUBSCRIBE, E.TOPIC)
    rec: Recorder | None = None
    started = time.monotonic()
    try:
        if secure is not None:
            secure(sock, events_endpoint)
        sock.connect(events_endpoint)
        rec = Recorder(path, **recorder_kwargs)
        if ready is not None:
            ready.set()
        deadline = None if duration is None else started + duration
        try:
            _record_until(sock, rec, on_batch, deadline, stop_event, poll_ms, linger_s)
        except KeyboardInterrupt:
            pass
        _drain(sock, rec, on_batch, 100_000)  # what had arrived when we stopped
    finally:
        sock.close(0)
        if own_ctx:
            context.term()
        if rec is not None:
            rec.close()
    stats = rec.stats
    elapsed = time.monotonic() - started
    stats["elapsed_s"] = elapsed
    stats["events_per_s"] = stats["events"] / elapsed if elapsed > 0 else 0.0
    return stats


def _record_until(
    sock: zmq.Socket,
    rec: Recorder,
    on_batch: Callable | None,
    deadline: float | None,
    stop_event: threading.Event | None,
    poll_ms: int,
    linger_s: float,
) -> None:
    """Record until ``deadline`` or ``stop_event``, then ``linger_s`` more (events on their way)."""
    end = None
    while True:
        now = time.monotonic()
        stopping = stop_event is not None and stop_event.is_set()
        if end is None and (stopping or (deadline is not None and now >= deadline)):
            end = now + linger_s
        if end is not None and now >= end:
            return
        limit = end if end is not None else deadline
        wait = poll_ms if limit is None else max(1, min(poll_ms, int((limit - now) * 1000) + 1))
        if sock.poll(wait):
            _drain(sock, rec, on_batch, 4096)
        else:
            rec.flush()


def _drain(sock: zmq.Socket, rec: Recorder, on_batch: Callable | None, limit: int) -> None:
    """Record up to ``limit`` messages that are waiting, without blocking."""
    for _ in range(limit):
        try:
            frames = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        if len(frames) != 2 or frames[0] != E.TOPIC:
            rec.note_bad()
            continue
        try:
            batch = rec.write_packed(frames[1])
        except E.EventFormatError:
            rec.note_bad()
            continue
        if on_batch is not None:
            on_batch(*batch)
