"""The client side of a GT connection: ids, batching, sync points and errors.

A :class:`Connection` owns one DEALER socket to the dispatcher and, for workers on the same host, a
direct DEALER to each worker's data socket (large uploads and fetch replies skip the dispatcher).
Ops are appended to a pending batch and sent when the batch is full, when a sync point needs a
result, or when a short timer fires on a background thread. The socket is only ever used under
``self._lock`` (ZeroMQ sockets are not thread-safe; a lock gives the memory barrier they need).
"""

from __future__ import annotations

import contextvars
import itertools
import os
import socket
import sys
import threading
import time
import uuid
from collections import Counter, deque
from typing import Any

import numpy as np
import zmq

from gt.errors import DispatcherLost, GTTimeout
from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime import security
from gt.runtime.client.hooks import CaptureHooks
from gt.runtime.client.receiving import Receiving
from gt.runtime.client.requests import Requests
from gt.runtime.client.signals import hold_signals, release_signals
from gt.runtime.client.source_lines import SourceLines
from gt.runtime.env_checks import seconds
from gt.runtime.liveness import (
    DEFAULT_TIMEOUT,
    RunningClock,
    env_seconds,
    heartbeat_options,
    run_clock_offset,
    wait_for_event,
    watch,
    watch_disconnects,
)
from gt.runtime.sockets import check_address, raw_bytes, send_parts
from gt.trace import events as E
from gt.trace.emit import Emitter

_FETCH = O.OPCODE["fetch"]
_UPLOAD = O.OPCODE["upload"]
_HEARTBEAT = P.encode(P.Heartbeat())
_EVENTS = P.encode(P.Events())
_NOBLOCK = int(zmq.NOBLOCK)
# The gt package itself (gt/runtime/client/connection.py -> gt/): frames inside it are not the user's.

_POS_SPAN = 1 << 24  # a free is packed as id * _POS_SPAN + its position in the pending batch

#: Arrays at least this large go over the direct client->worker data socket when one exists.
DIRECT_MIN_BYTES = 64 * 1024
#: Seconds a client waits to reach a worker on another host directly before it gives up on that.
DIRECT_REACH_S = 2.0
#: The roles a program connects as: the strongest its keys hold.
PROGRAM_ROLES = ("admin", "client")

#: The active ``gt.signal`` key (``(name, backward, is_backward)``), set by :mod:`gt.signal`.
SIGNAL: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("gt_signal", default=None)
#: How many signal contexts are open in any thread: 0 keeps :meth:`Connection.emit` on its fast path.
SIGNAL_DEPTH = 0


def _drain(q: deque) -> list:
    """Everything in ``q`` now, removed from it; what another thread appends meanwhile stays."""
    out = []
    pop = q.popleft
    try:
        while True:
            out.append(pop())
    except IndexError:
        return out


def _program_name() -> str:
    """What monitors call this program: the script's name, or the command it ran as (``gt demo``,
    ``python -m pkg``, not ``__main__.py``)."""
    path = sys.argv[0] if sys.argv and sys.argv[0] else ""
    name = os.path.basename(path)
    if name == "__main__.py":  # python -m PKG: name the package (gt's own command is "gt")
        return os.path.basename(os.path.dirname(path)) or "python"
    return name or "python"


class Connection(Receiving, Requests, CaptureHooks, SourceLines):
    """One client's connection to a dispatcher.

    Args:
        address: the dispatcher's front endpoint (``tcp://host:port`` or ``ipc://path``).
        timeout: seconds a sync point may wait for its result (``$GT_TIMEOUT``, default 300).
        window: batches that may be unacknowledged before :meth:`flush` blocks (backpressure).
        batch_limit: instructions per batch before it is sent without waiting for the timer.
        flush_interval: seconds after which a pending batch is sent by the timer thread.
        connect_timeout: seconds to wait for the dispatcher's welcome.
    """

    def __init__(
        self,
        address: str,
        *,
        timeout: float | None = None,
        window: int = 16,
        batch_limit: int = 512,
        flush_interval: float = 0.002,
        connect_timeout: float = 10.0,
        cluster: Any = None,
    ):
        self.address = check_address(address, "GT_DISPATCHER or gt.connect()")
        self.timeout = (timeout if timeout is not None else
                        seconds(os.environ["GT_TIMEOUT"], "GT_TIMEOUT")
                        if os.environ.get("GT_TIMEOUT", "").strip() else 300.0)  # fmt: skip
        self.window = window
        self.batch_limit = batch_limit
        self.flush_interval = flush_interval
        self.cluster = cluster  # a launch.LocalCluster this connection owns, stopped on close
        self.recorder: Any = None  # a launch.RecorderProcess this connection owns, stopped on close
        self.closed = False
        self.token = uuid.uuid4().bytes
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        # Liveness (gt.runtime.liveness): libzmq's own heartbeats on the link, its disconnect
        # events, and silence counted on a clock that stands still while this process does not run.
        heartbeat_options(self._sock, env_seconds("GT_CLIENT_TIMEOUT", DEFAULT_TIMEOUT))
        self._monitor = watch_disconnects(self._sock)
        self._clock = RunningClock(period=0.5, stall=2.0)
        self._cut_at: float | None = None  # running time the dispatcher's connection closed
        try:  # CURVE over TCP: this program's keys (gt.runtime.security)
            self.role = security.secure_connect(self._sock, address, PROGRAM_ROLES)
        except security.KeysMissing as exc:
            self._sock.close(0)
            self._monitor.close(0)
            raise DispatcherLost(f"cannot connect to {address}: {exc}") from None
        self._sock.connect(address)
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._watched: dict[int, Any] = {}  # id -> called when it is freed (gt.hot)
        self._on_close: list[Any] = []  # called first thing in close()
        self._rec_instrs: list | None = None  # recording a call of a hot function
        self._rec_freed: set | None = None
        self._reqs = itertools.count(1)
        self._batch_seq = 0
        self._instrs: list[list] = []
        # Appended by Tensor.__del__ from any thread without the lock: a deque, whose append and
        # popleft are atomic, so a free that races with a flush lands in this batch or the next.
        self._frees: deque[int] = deque()
        self._bufs: list[Any] = []
        self._init_source_lines()
        self._wake = threading.Event()
        # The timer thread sleeps long only once the program has been quiet for a while, and a
        # new op wakes it only then: waking it for every batch cost a thread switch (and a turn
        # of the GIL) on every sync round trip.
        self._timer_asleep = False
        self._signal_ids: dict[tuple, int] = {}
        self._new_signals: list[list] = []
        self._annotated = False
        # Direct batches (gt.runtime.worker.direct): sent straight to the home worker once it
        # knows us (Known) while the dispatcher allows it (Route), and never after a batch with
        # signals (the dispatcher may have placed our tensors); ``_route_direct``: the way the
        # batches in flight went (a switch waits until they are all acknowledged).
        self._direct_known = False
        self._direct_allowed = False
        self._planned_once = False
        self._route_direct = False
        self._refused: tuple | None = None  # (running time, why) the worker refused a batch
        self.direct_batches = 0
        self._control_reply: tuple | None = None
        self._first_pending = 0.0
        self._in_flight = 0
        self._replies: dict[int, tuple] = {}
        self._errors: list[tuple] = []  # worker errors not yet raised by gt.sync()
        self._raised: Counter = Counter()  # raised by a fetch before their batch's ack came
        self._broken: Exception | None = None
        self._unsent: Exception | None = None  # ops a timer flush dropped: raised at the next one
        self._last_heard = self._clock.now()
        self._last_sent = time.monotonic()
        self.sent_instructions = 0
        self.sent_batches = 0
        self._welcome(connect_timeout)
        # A client's events go through its dispatcher connection, which checks that each is this
        # client's own (a tenant cannot publish on the bus as a worker or as another tenant). The
        # emitter shares the connection's lock: its sends share the connection's socket.
        self.events = Emitter(None, None, f"client:{self.client_no}", clock_offset_ns=self.clock_offset,
                              send=self._send_events, lock=self._lock)  # fmt: skip
        self._direct: zmq.Socket | None = None
        self._open_direct()
        self._poller = zmq.Poller()
        self._poller.register(self._sock, zmq.POLLIN)
        # (not the monitor: each socket polled costs two system calls per wait; the monitor is
        # read every LOOK_S instead, well within the reconnect grace)
        self._look_due = 0.0
        if self._direct is not None:
            self._poller.register(self._direct, zmq.POLLIN)
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._timer_loop, name="gt-flush", daemon=True)
        self._timer.start()
        self._apply_env_config()

    # ----------------------------------------------------------------------------- setup
    def _welcome(self, connect_timeout: float) -> None:
        argv = [_program_name(), *(str(a)[:80] for a in sys.argv[1:4])]
        self._sock.send(P.encode(P.Hello(os.getpid(), socket.gethostname(), argv, self.token)))
        if not self._sock.poll(int(connect_timeout * 1000)):
            self._abandon()
            raise DispatcherLost(
                f"no dispatcher answered at {self.address} within {connect_timeout:.0f}s"
                + security.silence_hint(self.address)
            )
        try:
            msg = P.parse(self._sock.recv_multipart()[0])
        except P.ProtocolError as exc:
            self._abandon()
            raise DispatcherLost(
                f"{self.address} answered with a malformed message: {exc}"
            ) from None
        if type(msg) is P.Error:
            self._abandon()
            raise DispatcherLost(
                f"dispatcher at {self.address} refused the connection: {msg.message}"
            )
        if type(msg) is not P.Welcome:
            self._abandon()
            raise DispatcherLost(f"unexpected answer {type(msg).__name__} from {self.address}")
        self.client_no, self.home_worker, self.workers = msg.client, msg.home, msg.workers
        settings = msg.settings
        self.heartbeat_interval = float(settings.get("heartbeat", 1.0))
        self.liveness = float(settings.get("liveness", DEFAULT_TIMEOUT))
        self.clock_offset = run_clock_offset(settings.get("clock"), settings.get("boot"))
        self._direct_allowed = settings.get("direct") is True

    def _abandon(self) -> None:
        """Close the sockets of a connection that never got going."""
        self._sock.close(0)
        self._monitor.close(0)

    def _open_direct(self) -> None:
        """Connect straight to the home worker's data socket when it can be reached from here:
        at once on this host; on another, once the connection (and its CURVE handshake) is up
        within :data:`DIRECT_REACH_S` -- else uploads and fetches go through the dispatcher."""
        if os.environ.get("GT_NO_DIRECT"):
            return
        home = next((w for w in self.workers if w["id"] == self.home_worker), None)
        if home is None or not home.get("data"):
            return
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.IDENTITY, self.token)
        try:
            security.secure_connect(s, home["data"], PROGRAM_ROLES, server_key=home.get("data_key"))
        except security.KeysMissing:
            s.close(0)
            return
        local = home.get("host") == socket.gethostname()
        mon = None if local else watch(s, zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_CONNECTED)
        s.connect(home["data"])
        if mon is not None:
            ok = wait_for_event(mon, zmq.EVENT_HANDSHAKE_SUCCEEDED if security.is_tcp(home["data"])
                                else zmq.EVENT_CONNECTED, DIRECT_REACH_S)  # fmt: skip
            s.disable_monitor()
            mon.close(0)
            if not ok:  # not reachable from here (another network): the dispatcher carries data
                s.close(0)
                return
        self._direct = s

    # ----------------------------------------------------------------------------- ops
    def new_id(self) -> int:
        """A fresh tensor id (ids are never reused within a connection)."""
        return next(self._ids)

    def emit(self, opcode: int, out: int, args: list, attrs: Any = None) -> None:
        """Queue one instruction; sends the batch once it reaches ``batch_limit``."""
        if self._broken is not None:
            raise self._broken
        ins = [opcode, out, args, attrs, self.srcloc()]
        if self._rec_instrs is not None:
            self._rec_instrs.append(ins)
        if SIGNAL_DEPTH and SIGNAL.get() is not None:
            ins.append(self._signal_id(SIGNAL.get()))
            with self._lock:
                self._annotated = True  # under the lock: the batch that carries ins says so
                self._append_locked(ins)
            return
        with self._lock:
            self._append_locked(ins)

    def _append_locked(self, ins: list) -> None:
        if self._instrs:
            self._instrs.append(ins)
        else:
            self._first_pending = time.monotonic()
            self._instrs.append(ins)
            # (appended before the flag is read, and the timer sets the flag before it looks at
            # the queue: one of the two sees the other, so an op never waits out a long sleep)
            if self._timer_asleep:
                self._wake.set()
        if len(self._instrs) >= self.batch_limit:
            self._flush_locked()

    def _signal_id(self, key: tuple) -> int:
        """Intern a signal key; new ones travel in the next batch's header."""
        sid = self._signal_ids.get(key)
        if sid is None:
            with self._lock:
                sid = self._signal_ids.get(key)
                if sid is None:
                    sid = len(self._signal_ids) + 1
                    self._signal_ids[key] = sid
                    self._new_signals.append([sid, key[0], key[1], bool(key[2])])
        return sid

    def upload(self, out: int, array: np.ndarray) -> None:
        """Queue an upload of a C-contiguous host array as tensor ``out``."""
        attrs = {"shape": list(array.shape), "dtype": array.dtype.name}
        with self._lock:
            if self._direct is not None and array.nbytes >= DIRECT_MIN_BYTES:
                tok = next(self._reqs)
                self._direct.send(P.encode(P.Upload(tok)), zmq.SNDMORE)
                self._direct.send(raw_bytes(array), copy=False)
                attrs["tok"] = tok
            else:
                attrs["buf"] = len(self._bufs)
                self._bufs.append(array)
            # Still under the (reentrant) lock: a timer flush between adding the buffer and
            # queueing its instruction would send the buffer in a batch that does not name it.
            self.emit(_UPLOAD, out, [], attrs)

    def free(self, tid: int) -> None:
        """Called from ``Tensor.__del__``: the id rides along in the next batch."""
        # One append (atomic under the GIL, from any thread): the id and how many instructions of
        # the pending batch came before its death. A stale count only frees it later, never early.
        self._frees.append(tid * _POS_SPAN + min(len(self._instrs), _POS_SPAN - 1))
        if self._rec_freed is not None:
            self._rec_freed.add(tid)
        if tid in self._watched:  # captured steps rely on it (gt.hot): they must be told
            for told in self._watched.pop(tid, None) or ():
                told(tid)

    def _send_events(self, batch: bytes) -> None:
        # (called by self.events with self._lock held)
        self._sock.send_multipart([_EVENTS, batch], zmq.NOBLOCK)

    def mark(self, label: str) -> None:
        """Publish a named mark (shown on every timeline and kept in recordings)."""
        with self._lock:
            self.events.emit(E.MARK, {"client": self.client_no, "label": str(label)})
            self.events.flush()

    def flush(self) -> None:
        """Send the pending batch now (blocking while the in-flight window is full)."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._unsent is not None and threading.current_thread() is not self._timer:
            exc, self._unsent = self._unsent, None  # (what the timer thread's flush could not send)
            raise exc
        if not self._instrs and not self._frees:
            return
        if self._broken is not None:
            raise self._broken
        deadline = time.monotonic() + self.timeout
        window = min(self.window, P.DIRECT_WINDOW) if self._route_direct else self.window
        while self._in_flight >= window:
            self._pump(self._wait_slice())
            if self._broken is not None:
                raise self._broken
            if time.monotonic() > deadline:
                raise GTTimeout(
                    f"the dispatcher accepted no batch for {self.timeout:g}s (GT_TIMEOUT)"
                )
        if self._annotated or self._new_signals:
            self._planned_once = True
        direct = self._goes_direct()
        if direct is not self._route_direct:
            # The two ways reach the worker by different paths: a batch sent one way could
            # overtake one sent the other. Switch once everything in flight is acknowledged.
            self._drain_in_flight(deadline, "switching between the dispatcher and the worker")
            direct = self._route_direct = self._goes_direct()
        # (a signal handler -- Ctrl-C's KeyboardInterrupt, a SIGTERM handler saving a checkpoint --
        # runs between any two bytecodes of this thread: held back until the batch is on its way,
        # so that it neither loses the batch nor overtakes it with one of its own)
        held = hold_signals()
        try:
            self._send_batch(direct, deadline)
        finally:
            release_signals(held)

    def _send_batch(self, direct: bool, deadline: float) -> None:
        """Take the pending instructions and frees and send them as one batch."""
        instrs, self._instrs = self._instrs, []
        packed = _drain(self._frees)
        frees = [k // _POS_SPAN for k in packed]
        free_at = [k % _POS_SPAN for k in packed]
        bufs, self._bufs = self._bufs, []
        srclocs, self._new_srclocs = self._new_srclocs, []
        self._batch_seq += 1
        try:
            body = P.encode_body(instrs, frees, free_at)
            refused = None
        except (TypeError, ValueError, OverflowError) as exc:  # (ops check their arguments: a bug)
            instrs, refused = self._encodable(instrs, exc)
            body = P.encode_body(instrs, frees, free_at)
        sock = self._sock
        if direct:
            self._send_direct(P.encode(P.Batch(self._batch_seq, len(instrs))), body, bufs,
                              srclocs, deadline)  # fmt: skip
        elif self._annotated or self._new_signals:
            signals, self._new_signals = self._new_signals, []
            self._annotated = False
            hdr = P.encode(P.Batch(self._batch_seq, len(instrs), srclocs or None, signals))
            send_parts(sock, [hdr, body, *map(raw_bytes, bufs)] if bufs else [hdr, body])
            self._last_sent = time.monotonic()
        else:
            hdr = P.encode(P.Batch(self._batch_seq, len(instrs), srclocs or None))
            send_parts(sock, [hdr, body, *map(raw_bytes, bufs)] if bufs else [hdr, body])
            self._last_sent = time.monotonic()
        ev = self.events
        if ev.enabled:
            if srclocs:
                ev.emit(E.SRCLOC, {"client": self.client_no, "locs": dict(srclocs)})
            # No per-instruction work here: the client is the pipeline's busiest process, and the
            # worker's exec event already carries every opcode.
            ev.emit(
                E.QUEUED,
                {
                    "client": self.client_no,
                    "batch": self._batch_seq,
                    "n": len(instrs),
                    "ops": None,
                    "first_id": instrs[0][1] if instrs else None,
                },
            )
        self._in_flight += 1
        self.sent_batches += 1
        self.sent_instructions += len(instrs)
        if refused is not None:
            raise refused

    def _encodable(self, instrs: list, exc: Exception) -> tuple[list, Exception]:
        """The instructions of a batch that msgpack can encode, and the error that names the
        first one it cannot: the rest of the batch still goes, so one bad argument costs its own
        op (whose result will be missing), not every tensor made since the last flush."""
        kept, bad = [], []
        for ins in instrs:
            try:
                P.packb(ins)
                kept.append(ins)
            except (TypeError, ValueError, OverflowError):
                bad.append(ins)
        if not bad:  # (every op encodes alone: not an argument's fault)
            raise exc
        first = bad[0]
        where = self.srclocs.get(first[4], "?") if type(first[4]) is int else "?"
        err = TypeError(
            f"{O.op_name(first[0])} at {where} was not sent: {exc} ({len(bad)} such op(s) dropped "
            "from the batch; their results do not exist)"
        )
        return kept, err

    def _goes_direct(self) -> bool:
        """Whether the next batch may go straight to the home worker."""
        return (
            self._direct_known
            and self._direct_allowed
            and not self._planned_once
            and self._direct is not None
        )

    def _send_direct(
        self, hdr: bytes, body: bytes, bufs: list, srclocs: list, deadline: float
    ) -> None:
        """Send a batch straight to the home worker; its new source lines (and a heartbeat, when
        one is due) go to the dispatcher, which no longer sees our batches."""
        if srclocs:
            self._sock.send(P.encode(P.SourceLines(srclocs)))
        # (after source lines too: the dispatcher answers them with nothing, and a program that
        # makes new lines all the time -- exec, a long notebook -- would hear nothing back and
        # take the dispatcher for gone)
        if time.monotonic() - self._last_sent >= self.heartbeat_interval:
            self._sock.send(_HEARTBEAT)
            self._last_sent = time.monotonic()
        parts = [hdr, body, *map(raw_bytes, bufs)] if bufs else [hdr, body]
        while True:
            try:  # (not blocking: a DEALER whose worker went away would block for ever)
                send_parts(self._direct, parts, _NOBLOCK)
                break
            except zmq.Again:
                self._pump(self._wait_slice())  # the dispatcher says why, or the link comes back
                if self._broken is not None:
                    raise self._broken from None
                if time.monotonic() > deadline:
                    raise GTTimeout(
                        f"the worker took no batch for {self.timeout:g}s (GT_TIMEOUT)"
                    ) from None
        self.direct_batches += 1

    def fetch(self, tid: int) -> np.ndarray:
        """Wait for tensor ``tid`` and return its data as a NumPy array."""
        req = next(self._reqs)
        self.emit(_FETCH, req, [tid])
        with self._lock:
            self._flush_locked()
            deadline = time.monotonic() + self.timeout
            while req not in self._replies:
                if self._broken is not None:
                    raise self._broken
                if time.monotonic() > deadline:
                    raise GTTimeout(
                        f"no result for tensor {tid} within {self.timeout:g}s (GT_TIMEOUT)"
                    )
                self._pump(self._wait_slice())
            dtype, shape, err, frame = self._replies.pop(req)
        if err is not None:
            self._seen(err)
            raise self.worker_error(err)
        arr = (
            np.frombuffer(frame, dtype=dtype)
            if frame is not None and len(frame)
            else np.empty(0, dtype=dtype)
        )
        return arr.reshape(shape)

    def sync(self) -> None:
        """Wait until every instruction sent so far has run; raise the first unseen worker error."""
        with self._lock:
            self._flush_locked()
            deadline = time.monotonic() + self.timeout
            while self._in_flight > 0:
                if self._broken is not None:
                    raise self._broken
                if time.monotonic() > deadline:
                    raise GTTimeout(f"sync did not finish within {self.timeout:g}s (GT_TIMEOUT)")
                self._pump(self._wait_slice())
            if self._errors:
                err = self._errors[0]
                self._errors.clear()
                raise self.worker_error(err)

    # ----------------------------------------------------------------------------- teardown
    def close(self) -> None:
        """Send what is pending, say goodbye (the dispatcher frees our tensors) and close."""
        if self.closed:
            return
        for fn in list(self._on_close):  # e.g. captured steps say how far they got
            try:
                fn()
            except Exception:  # noqa: BLE001 - closing must go on
                pass
        self.closed = True
        self._stop.set()
        self._wake.set()
        if self._timer.is_alive() and self._timer is not threading.current_thread():
            self._timer.join(timeout=1)
        with self._lock:
            try:
                if self._broken is None:
                    self._instrs.clear()
                    self._frees.clear()
                    self.events.close()  # before the Bye: after it the dispatcher knows us not
                    self._sock.send(P.encode(P.Bye()), zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            self.events.close()
            self._sock.close(linger=200)
            self._monitor.close(0)
            if self._direct is not None:
                self._direct.close(0)
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
