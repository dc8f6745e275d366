"""A worker process: the socket shell around the :class:`~gt.runtime.worker.executor.Executor`.

Sockets: a DEALER to the dispatcher's back endpoint (batches in, completions out), a ROUTER data
socket that clients on the same host use for large uploads and fetch replies (and peers for
transfers), and a heartbeat DEALER owned by a background thread (so a long kernel never looks like
a dead worker). This module only moves bytes and reports; the executor runs the batches.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
import zmq

from gt.runtime import discovery, security
from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.liveness import (
    DEFAULT_RECONNECT_GRACE,
    DEFAULT_TIMEOUT,
    RunningClock,
    heartbeat_options,
    read_event,
    run_clock_offset,
    watch_disconnects,
)
from gt.runtime.sockets import COPY_BELOW, raw_bytes, send_parts, take
from gt.runtime.worker.backend import Backend, load_backend
from gt.runtime.worker.busy import BusyReporter
from gt.runtime.worker.device_monitor import DeviceMonitor
from gt.runtime.worker.direct import DirectLink
from gt.runtime.worker.executor import Executor, UploadNotYet
from gt.runtime.worker.memory import keep_freed_memory
from gt.runtime.worker.memory_keeper import WorkerMemory
from gt.runtime.worker.peers import Peers
from gt.runtime.worker.reporting import Reporting
from gt.runtime.worker.schedule import RECHECK_S, Entry, Scheduler
from gt.trace import events as E
from gt.trace.emit import Emitter

#: Seconds an upload instruction waits for its data (sent before it on the direct socket).
UPLOAD_WAIT_S = 10.0
#: How long an upload is waited for before the worker turns to another client's waiting batch.
GIVE_WAY_NS = 20_000_000
#: Data that arrived and that nothing claimed is dropped after this long, or beyond this many bytes
#: (oldest first): a client, or anyone who can reach the socket, cannot fill the worker's memory.
UNCLAIMED_KEEP_S = float(os.environ.get("GT_UNCLAIMED_KEEP_S", 60.0))
UNCLAIMED_MAX_BYTES = int(os.environ.get("GT_UNCLAIMED_MAX_BYTES", 1 << 30))
_HEARTBEAT = P.encode(P.Heartbeat())

#: dtype -> its name: NumPy computes ``dtype.name`` in Python (µs a call, on every fetch's reply)
_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dt: Any) -> str:
    name = _DTYPE_NAMES[dt] = dt.name
    return name


#: Messages taken off the dispatcher's socket ahead of running them (the memory pool looks at the
#: queued batches to prefetch what they need and to spill what they do not).
INBOX_MAX = 64
#: How long the loop sleeps in its poll when it has nothing to run and nothing taken in (ms).
IDLE_POLL_MS = 100


def poll_timeout_ms(runnable: bool, inbox: int) -> int:
    """The main loop's poll timeout: 0 while a batch waits to run or messages wait in the inbox
    (a running batch's slice checks move the socket's messages there, where a poll cannot see
    them: waiting the idle timeout then stalled every batch behind a long one for 100 ms)."""
    return 0 if runnable or inbox else IDLE_POLL_MS


def route_to(endpoint: str) -> str:
    """The local address this machine reaches a TCP endpoint's host from (its own interface),
    or ``127.0.0.1`` when that cannot be told."""
    host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    if host in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))  # no packet is sent: the kernel only picks the route
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class Worker(Reporting):
    """One worker process's sockets and loop.

    Args:
        connect: the dispatcher's back endpoint.
        backend: an array backend (default: :func:`load_backend`).
        register_timeout: seconds to wait for the dispatcher to accept us.
        memory: this worker's own memory settings (``memory_limit``, ``client_memory_limit``,
            ``spill_threshold``, ``prefetch``; see :mod:`gt.runtime.memory_settings`).
    """

    def __init__(
        self, connect: str, *, backend: Backend | None = None, register_timeout: float = 30.0,
        memory: Mapping | None = None, bind: str | None = None, advertise: str | None = None,
        sharing: int = 1,
    ):  # fmt: skip
        self.keeps_memory = keep_freed_memory()
        self.backend = backend or load_backend()
        # log(0), 0/0, overflow: IEEE results, silently, as PyTorch gives them (NumPy would
        # print a RuntimeWarning into the user's terminal from this process)
        np.seterr(all="ignore")
        self.ctx = zmq.Context()
        self.guard: security.Guard | None = None
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        # Our identities, registered with the dispatcher: only our own heartbeat socket can keep
        # this worker alive there (not, say, a stale worker that reconnects to a reused port).
        self.ident = uuid.uuid4().bytes
        self.sock.setsockopt(zmq.IDENTITY, self.ident)
        heartbeat_options(self.sock, DEFAULT_TIMEOUT)  # libzmq watches the link (liveness.py)
        security.secure_connect(self.sock, connect, ("worker",))
        self.sock.connect(connect)
        self.data = self.ctx.socket(zmq.ROUTER)
        self.data.setsockopt(zmq.LINGER, 0)
        self.data.setsockopt(zmq.ROUTER_MANDATORY, 1)
        data_key = self._bind_data(connect, bind, advertise)
        self.connect_to = connect
        self.pending_uploads: dict[tuple[Any, int], tuple[Any, float]] = {}  # -> (frame, arrived)
        self.bad_messages = 0  # malformed or unexpected messages on the data socket, dropped
        self._stop = threading.Event()
        self.stop_reason = ""
        self.info = P.Register(
            host=socket.gethostname(),
            pid=os.getpid(),
            device=self.backend.device,
            backend=self.backend.name,
            data=self.data_endpoint,
            hb=self.ident + b"/hb",
            gpu=self.backend.identity.as_dict() if self.backend.identity is not None else None,
            data_key=data_key,
        )
        reg = self._register(connect, register_timeout)
        self.wid = reg.worker
        settings = reg.settings
        self.heartbeat = float(settings.get("heartbeat", 1.0))
        self.liveness = float(settings.get("liveness", DEFAULT_TIMEOUT))
        offset = run_clock_offset(settings.get("clock"), settings.get("boot"))
        self.events = Emitter(
            self.ctx, settings.get("events_in"), f"worker:{self.wid}", clock_offset_ns=offset,
            secure=lambda s, ep: security.secure_connect(s, ep, ("worker",)),
        )  # fmt: skip
        self.device_monitor = (
            DeviceMonitor(self.events, self.wid, self.backend.identity)
            if self.events.enabled
            else None
        )
        self.peers = Peers(self.wid, self.ctx, self.data, self._drain_data, self.events,
                           self.backend, self._stop.is_set)  # fmt: skip
        self.executor = Executor(self.backend, self.peers, self)
        self.busy = BusyReporter(self.executor, self.events, self.wid)
        self.memory = WorkerMemory(self.backend, self.executor, memory, self._pool_transfer,
                                   sharing=sharing)  # fmt: skip
        self.memory.configure(settings.get("memory"))
        self.inbox: deque[list] = deque()  # [frames, parsed header, parsed body]
        self._upload_asked: dict[tuple, float] = {}  # direct uploads waited for: since when
        self.sched = Scheduler()  # the batches to run, per client, in turn
        self.direct = DirectLink(self.data, self.sched, self.guard is not None)
        self._hb = threading.Thread(target=self._heartbeat_loop, name="gt-heartbeat", daemon=True)
        self._hb.start()

    def _bind_data(self, connect: str, bind: str | None, advertise: str | None) -> bytes | None:
        """Bind the data socket next to the dispatcher's kind of endpoint: ipc in its private
        directory, else TCP as a CURVE server on ``bind`` (default: the address this machine
        reaches the dispatcher from), advertised as ``advertise``. Returns its public key."""
        if connect.startswith("ipc://"):
            where = os.path.dirname(connect[len("ipc://") :])
            self.data.bind(f"ipc://{where}/w-{self.ident.hex()[:12]}")
            self.data_endpoint = self.data.getsockopt(zmq.LAST_ENDPOINT).decode()
            return None
        ring = security.keyring()
        self.guard = security.Guard(self.ctx, ring)
        pub, sec = security.keypair()
        self.guard.serve(self.data, "data", (pub, sec))
        host = bind or route_to(connect)
        port = self.data.bind_to_random_port(f"tcp://{host}")
        shown = advertise or (socket.gethostname() if host in ("0.0.0.0", "*") else host)
        self.data_endpoint = f"tcp://{shown}:{port}"
        return pub

    def _register(self, connect: str, timeout: float) -> P.Registered:
        self.sock.send(P.encode(self.info))
        if not self.sock.poll(int(timeout * 1000)):
            self.close()
            raise RuntimeError(f"no dispatcher answered at {connect} within {timeout:.0f}s")
        try:
            msg = P.parse(self.sock.recv_multipart()[0])
        except P.ProtocolError as exc:
            self.close()
            raise RuntimeError(f"{connect} answered with a malformed message: {exc}") from None
        if type(msg) is not P.Registered:
            self.close()
            raise RuntimeError(f"dispatcher refused registration: {msg}")
        return msg

    # ------------------------------------------------------------------ loop
    def run(self, parent_pid: int | None = None) -> str:
        """Serve until told to stop; returns why it stopped."""
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.data, zmq.POLLIN)
        next_stats = 0.0
        try:
            while not self._stop.is_set():
                wait = poll_timeout_ms(bool(self.sched.order), len(self.inbox))
                events = dict(poller.poll(self.direct.wait_ms(wait) if self.direct.owed else wait))
                if self.data in events:
                    self._drain_data(ready=True)
                if self.sock in events or self.inbox:
                    self._take_messages(self.sock in events)
                    while self.inbox:  # batches go to their client's queue, the rest is done now
                        self._on_message(self.inbox.popleft())
                        self._take_messages()
                if self.sched.order and not self._stop.is_set():
                    self._run_slice()
                if self.direct.owed and self.direct.due(time.monotonic()):
                    self.direct.flush(self.sock)
                self.events.tick()
                if time.monotonic() >= next_stats:
                    next_stats = time.monotonic() + 0.5
                    self._report_stats()
                    if parent_pid is not None and not discovery.pid_alive(parent_pid):
                        self.stop_reason = "parent process exited"
                        break
        finally:
            self.close()
        return self.stop_reason

    def _take_messages(self, ready: bool = False) -> None:
        """Move what the dispatcher sent into the inbox (up to ``INBOX_MAX`` waiting);
        ``ready``: a poll has just said a message waits."""
        while len(self.inbox) < INBOX_MAX:
            frames = take(self.sock, ready)
            if frames is None:
                return
            self.inbox.append([frames, None, None])
            ready = False

    @staticmethod
    def _parsed(item: list) -> Any:
        """An inbox item's header (parsed once); ``None`` if malformed."""
        if item[1] is None:
            try:
                item[1] = P.parse(item[0][0].buffer)
            except P.ProtocolError:
                item[1] = False
        # (``is False``, not truthiness: a kind with no fields, such as Stop, is an empty tuple)
        return None if item[1] is False else item[1]

    def _lookahead(self, now: Entry) -> list:
        """``(client, instructions, frees)`` of the batches queued besides ``now`` (starting),
        in about the order they will start (for the memory pool)."""
        out = []
        for e in self.sched.waiting():
            if e is now:
                continue
            item = e.item
            if item[2] is None:
                try:
                    item[2] = P.parse_body(item[0][1].buffer)
                except P.ProtocolError:
                    item[2] = False
            if item[2]:
                out.append((e.msg.client, item[2][0], item[2][1]))
        return out

    def _run_slice(self) -> None:
        """Run the next client's batch, to its end or (with another client waiting) for a slice
        (:mod:`gt.runtime.worker.schedule`); report the slice, and the batch once it ends."""
        e = self.sched.next()
        msg, ex = e.msg, self.executor
        if e.job is None:
            if ex.pool is not None and msg.tenant is not None:  # its programs share a quota
                ex.pool.set_account(msg.client, msg.tenant)
            ahead = self._lookahead(e) if ex.pool is not None else ()
            frames = e.item[0]
            e.job = ex.begin(msg.client, msg.seq, msg.token, e.item[2] or frames[1].buffer,
                             frames[2:], self.events.full, msg.planned, ahead,
                             msg.ack)  # fmt: skip
        # a planned batch pairs its transfers with other workers': it is never cut
        stop = None if msg.planned else self._slice_stop(msg.client)
        res = ex.step(e.job, stop)
        if not res.done and ex.sticky_error is not None:  # the GPU failed mid-slice: no more of
            ex.abandon(e.job)  # this batch (nor any other) can run here
            res.done, res.errors = True, e.job.b.errors
        e.busy_ns += res.busy_ns
        if stop is not None and (not res.done or self.sched.others_waiting(msg.client)):
            # what of the slice another client waited for: since it began, or since the last
            # look found nobody waiting
            since = max(res.t0 / 1e9, stop.quiet)
            self.sched.charge(msg.client, res.t1 / 1e9 - since)
        if self.events.enabled:
            self._emit_exec(msg, res)
        if not res.done:
            self.sched.yielded()
            return
        self.sched.finished()
        self.memory.active()
        if ex.sticky_error is not None:  # the GPU is unusable: say so and go
            self.stop_reason = f"the GPU failed: {ex.sticky_error}"
            self._stop.set()
        if e.direct:  # acknowledged here; the dispatcher hears of it a little later
            self.direct.finished(e, res.errors, len(e.job.instrs), e.job.b.acked)
            return
        send_parts(
            self.sock,
            [
                P.encode(
                    P.Done(
                        msg.client,
                        msg.seq,
                        res.errors,
                        len(e.job.instrs),
                        e.busy_ns,
                        False,
                        e.job.b.acked,
                    )
                )
            ],  # fmt: skip
        )

    def _slice_stop(self, client: int) -> Any:
        """``stop()`` for the executor, asked once its ``deadline`` (the slice's end) has passed:
        true when another client's batch waits (in a queue, or just arrived); else it looks
        again a millisecond later, so a lone client's long batch polls its socket rarely."""
        sched = self.sched

        def stop() -> bool:
            if sched.others_waiting(client):
                return True
            self._drain_data()  # (direct batches queue at once: another client's may be there)
            if sched.others_waiting(client):
                return True
            self._take_messages()
            for item in self.inbox:
                msg = self._parsed(item)
                if type(msg) is P.Run and msg.client != client:
                    return True
            stop.quiet = now = time.monotonic()
            stop.deadline = now + RECHECK_S
            return False

        stop.deadline = time.monotonic() + sched.budget(client)
        stop.quiet = 0.0  # when a look last found no other client waiting
        return stop

    def _on_message(self, item: list) -> None:
        msg = self._parsed(item)
        if msg is None:
            return
        frames = item[0]
        kind = type(msg)
        if kind is P.Run:
            self.direct.learn(msg)
            if len(frames) >= 2:
                self.sched.add(msg.client, Entry(item, msg, msg.planned))
        elif kind is P.DropClient:
            # Its queued batches are nobody's now; each is still reported done (having run
            # nothing more), or the dispatcher would count them in flight for ever.
            self.direct.forget(msg.client)
            for e in self.sched.drop(msg.client):
                n = e.job.idx if e.job is not None else 0
                if e.direct:
                    self.direct.finished(e, [], n, False, dropped=True)
                else:
                    self.sock.send(P.encode(P.Done(msg.client, e.msg.seq, [], n, e.busy_ns, True)))
            self.executor.drop_client(msg.client)
            self.peers.drop(msg.client)
        elif kind is P.Peers:
            self.peers.set_endpoints(msg.endpoints, msg.keys)
        elif kind is P.Configure:
            self.memory.configure(msg.memory)
        elif kind is P.Stop:
            self.stop_reason = "stopped by the dispatcher"
            self._stop.set()

    def _drain_data(self, ready: bool = False) -> None:
        """Take every message waiting on the data socket (``ready``: a poll has just said one
        waits, so the first receive need not ask first)."""
        while True:
            frames = take(self.data, ready)
            ready = False
            if frames is None:
                return
            try:
                if len(frames) < 2:
                    raise P.ProtocolError("a data message is [identity, header, payload]")
                msg = P.parse(frames[1].buffer)
                if type(msg) is P.Batch:  # a direct batch (its own length: a body, then buffers)
                    entry = self.direct.accept(frames, msg)
                    self.sched.add(entry.msg.client, entry)
                    continue
                if len(frames) != 3:
                    raise P.ProtocolError("a data message is [identity, header, payload]")
                if type(msg) is P.Upload:
                    self.pending_uploads[(frames[0].bytes, msg.tok)] = (frames[2], time.monotonic())
                elif type(msg) is P.Peer:
                    if self.guard is not None and security.role_of(frames[1]) != "worker":
                        raise P.ProtocolError("peer data from a connection that is no worker's")
                    self.peers.accept(frames[0].bytes, msg, frames[2])
                else:
                    raise P.ProtocolError(f"unexpected {type(msg).__name__} on the data socket")
            except P.ProtocolError:
                self.bad_messages += 1

    def _expire_unclaimed(self) -> None:
        """Drop uploads nobody claimed in time, and the oldest beyond the byte budget."""
        now = time.monotonic()
        kept = sorted(self.pending_uploads.items(), key=lambda kv: kv[1][1], reverse=True)
        total = 0
        for key, (frame, arrived) in kept:
            total += len(frame.buffer)
            if now - arrived > UNCLAIMED_KEEP_S or total > UNCLAIMED_MAX_BYTES:
                del self.pending_uploads[key]
        self.peers.expire(UNCLAIMED_KEEP_S, UNCLAIMED_MAX_BYTES)

    # ------------------------------------------------------------------ ExecutorIO
    def upload(self, token: bytes | None, tok: int, give_way: Any = None) -> Any:
        """The data of direct upload ``tok`` (waits up to ``UPLOAD_WAIT_S`` for it to arrive,
        counted from the first time it was asked for).

        Raises:
            UploadNotYet: it has not arrived and ``give_way()`` says another client's batch waits
                (after a short wait): the slice ends before the upload, and asks again later.
            TimeoutError: it did not arrive in ``UPLOAD_WAIT_S``.
        """
        key = (token, tok)
        if key not in self.pending_uploads:
            self._drain_data()
        t0 = time.monotonic_ns()
        first = self._upload_asked.setdefault(key, time.monotonic())
        deadline = first + UPLOAD_WAIT_S
        while key not in self.pending_uploads:
            now = time.monotonic()
            if now > deadline:
                self._upload_asked.pop(key, None)
                raise TimeoutError("the upload's data never arrived on the direct data socket")
            if give_way is not None and (time.monotonic_ns() - t0) > GIVE_WAY_NS and give_way():
                # (a tenant whose data never comes must not hold the worker for other clients)
                self.peers.waited(None, t0, time.monotonic_ns(), "upload")
                raise UploadNotYet()
            if self.data.poll(50):
                self._drain_data()
        self._upload_asked.pop(key, None)
        self.peers.waited(None, t0, time.monotonic_ns(), "upload")
        return self.pending_uploads.pop(key)[0]

    def reply(
        self, client: int, token: bytes | None, req: int, arr: Any, err: list | None,
        ack: int | None = None,
    ) -> None:  # fmt: skip
        """Send a fetched array (or its error): straight to the client, else via the dispatcher;
        ``ack``: the batch it acknowledges (see :attr:`P.Data.ack`)."""
        t0 = time.monotonic_ns()
        if err is not None:
            dtype = shape = None
            payload: Any = b""
        else:
            host = self.backend.to_host(arr)
            dt = host.dtype
            dtype, shape, err = _DTYPE_NAMES.get(dt) or _dtype_name(dt), list(host.shape), None
            if dtype not in P.DTYPE_SET:  # a kernel's bug: an error for the client, not a hang
                err = [f"a kernel made a {dtype} array, a dtype GT does not carry (a bug in GT)",
                       O.OPCODE["fetch"], 0]  # fmt: skip
                dtype = shape = None
            # (small arrays are copied into the message anyway: tobytes is the cheaper copy)
            payload = b"" if err is not None else host.tobytes() if host.nbytes < COPY_BELOW else raw_bytes(host)  # fmt: skip
        if token is not None:
            try:
                send_parts(
                    self.data, [token, P.encode(P.Data(req, dtype, shape, err, ack)), payload]
                )
                self._replied(client, t0, payload)
                return
            except zmq.ZMQError:
                pass  # the client has no direct link to us: go through the dispatcher
        send_parts(self.sock, [P.encode(P.Relay(client, req, dtype, shape, err, ack)), payload])
        self._replied(client, t0, payload)

    def _replied(self, client: int, t0: int, payload: Any) -> None:
        """A fetch's bytes left for ``client``: on the timeline from the copy to host on."""
        nbytes = len(payload) if type(payload) is bytes else payload.nbytes
        if nbytes:
            self.client_transfer("to_client", t0, time.monotonic_ns(), nbytes, client)

    def _heartbeat_loop(self) -> None:
        """Heartbeats to the dispatcher, from a thread of their own (a long kernel does not stop
        them). The dispatcher is given up on only when its connection closed and did not come
        back, or it answered nothing for ``liveness`` seconds of this process's running time."""
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.IDENTITY, self.ident + b"/hb")
        heartbeat_options(s, self.liveness)
        monitor = watch_disconnects(s)
        security.secure_connect(s, self.connect_to, ("worker",))
        s.connect(self.connect_to)
        clock = RunningClock(period=self.heartbeat, stall=max(1.0, 3 * self.heartbeat))
        last_reply = clock.now()
        cut_at: float | None = None
        try:
            while not self._stop.is_set():
                s.send(_HEARTBEAT)
                if self._poll_unless_stopped(s, self.heartbeat):
                    try:
                        msg = P.parse(s.recv())
                    except P.ProtocolError:
                        continue
                    last_reply = clock.tick()
                    if type(msg) is P.Stop:
                        self.stop_reason = "the dispatcher no longer knows this worker"
                        self._stop.set()
                    self._stop.wait(self.heartbeat)
                now = clock.tick()
                while (ev := read_event(monitor)) is not None:
                    if ev[0] == zmq.EVENT_DISCONNECTED and cut_at is None:
                        cut_at = now
                    elif ev[0] == zmq.EVENT_CONNECTED:
                        cut_at = None
                if cut_at is not None and now - cut_at > DEFAULT_RECONNECT_GRACE:
                    self.stop_reason = "the dispatcher closed the connection and did not come back"
                    self._stop.set()
                elif now - last_reply > self.liveness:
                    self.stop_reason = f"the dispatcher answered nothing for {self.liveness:.0f}s"
                    self._stop.set()
        finally:
            monitor.close(0)
            s.close(0)

    def _poll_unless_stopped(self, sock: zmq.Socket, seconds: float) -> bool:
        """Whether ``sock`` has a message within ``seconds``; gives up at once (in 0.1 s steps)
        when the worker stops, so closing never waits a heartbeat period for this thread."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if sock.poll(int(min(left, 0.1) * 1000) + 1):
                return True
        return False

    def close(self) -> None:
        """Stop the heartbeat thread and close every socket."""
        self._stop.set()
        hb = getattr(self, "_hb", None)
        if hb is not None and hb is not threading.current_thread():
            hb.join(timeout=2)
        if getattr(self, "executor", None) is not None:
            self.executor.tables.clear()
        if getattr(self, "memory", None) is not None:
            self.memory.close()
        if getattr(self, "peers", None) is not None:
            self.peers.close()
        if getattr(self, "device_monitor", None) is not None:
            self.device_monitor.stop()
        if getattr(self, "busy", None) is not None:
            self.busy.stop()
        if getattr(self, "events", None) is not None:
            self.events.emit(E.MEMORY, {"worker": self.wid, "used": 0, "reserved": 0, "cached": 0,
                                        "limit": None, "spilled": 0, "tensors": 0})  # fmt: skip
            self.events.close()
        if getattr(self, "guard", None) is not None:
            self.guard.close()
        self.ctx.destroy(linger=0)
