"""Worker-to-worker transfers and the collectives built on them (never through the dispatcher).

Every worker binds a ROUTER data socket; to talk to a peer it connects a DEALER (identity
``w<id>``) to the peer's data socket. A message is a :class:`~gt.runtime.protocol.Peer` header
plus one raw buffer frame, sent with ``copy=False`` and wrapped on arrival without a copy.
Messages that arrive before the instruction that wants them wait in a stash keyed by
``(client, tag, sender, step)``; a receive waits for its key at most ``$GT_PEER_TIMEOUT`` seconds
(default 120), so a lost peer is an error, never a hang.

The planner puts the same collective instruction, with the same tag, in the streams of all its
participants in one global order, and sends never block, so the participants cannot deadlock.
The algorithms (ring all-reduce, all-gather and reduce-scatter, tree broadcast, direct
scatter/gather) are in :mod:`gt.runtime.worker.collectives`, on host arrays. A failed input
travels as an error marker instead of data, so every participant fails with the original message
instead of waiting.

On a GPU the data is staged through host memory: pinned buffers on the worker's copy stream
(:mod:`gt.runtime.worker.staging`), so a background all-reduce never stops the compute stream: its
device-to-host copy is queued behind the compute work that makes its input, its ring steps advance
between the worker's other instructions as messages arrive (:meth:`Peers.progress`), and its result
goes back on the copy stream, which the compute stream waits for. Between CuPy workers on distinct
GPUs of one host, all-reduces, all-gathers, reduce-scatters and broadcasts go over NCCL instead
(:mod:`gt.runtime.worker.nccl`), device to device, where NCCL can do exactly what the ring does.
Transfer events say the path (``via``: ``"zmq"`` between host buffers, ``"zmq+pinned"`` staged
from a GPU, ``"nccl"``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import zmq

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime import security
from gt.runtime.ops import ALL_REDUCE
from gt.runtime.sockets import raw_bytes
from gt.runtime.worker.collectives import ALGOS, all_reduce_steps
from gt.runtime.worker.nccl import FAIL, NCCL, NCCL_CODES, Launched, NcclLink, load_nccl
from gt.trace import events as E

ZERO_COPY_MIN = 64 * 1024
#: Waits shorter than this are not reported as their own slice (the message was on its way).
WAIT_MIN_NS = 20_000


def peer_timeout() -> float:
    """Seconds a receive waits for its peer (``$GT_PEER_TIMEOUT``, default 120)."""
    try:
        return float(os.environ.get("GT_PEER_TIMEOUT", 120.0))
    except ValueError:
        return 120.0


class PeerFailure(Exception):
    """A collective's input failed somewhere; carries the original ``[message, opcode, src]``."""

    def __init__(self, err: list):
        super().__init__(err[0])
        self.err = list(err[:3])


class Peers:
    """One worker's peer links: sockets, the stash of early messages, and the collectives.

    Args:
        wid: this worker's id.
        ctx: the worker's ZeroMQ context.
        data: the worker's ROUTER data socket (peer messages arrive there).
        drain: call to pull everything waiting on ``data`` into the stash (and uploads).
        events: the worker's event emitter (``transfer`` events).
        backend: the array backend (host staging on GPUs).
        stopped: returns True once the worker is shutting down (a waiting receive gives up).
    """

    def __init__(
        self,
        wid: int,
        ctx: zmq.Context,
        data: zmq.Socket,
        drain: Any,
        events: Any,
        backend: Any,
        stopped: Any,
    ):
        self.wid = wid
        self.ctx = ctx
        self.data = data
        self.drain = drain
        self.events = events
        self.backend = backend
        self.stopped = stopped
        self.timeout = peer_timeout()
        self.endpoints: dict[int, str] = {}
        self.keys: dict[int, bytes] = {}  # peer -> its data socket's CURVE public key (TCP)
        self.socks: dict[int, zmq.Socket] = {}
        self.stash: dict[tuple, tuple[Any, Any, float]] = {}  # -> (message, frame, arrived)
        self.cno = 0
        self.batch = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.waited_ns = 0  # time blocked on peers (and, via the worker, on uploads)
        self.inflight: list[Pending] = []  # background all-reduces, oldest first
        self._progress_at = 0  # monotonic ns before which progress() does not look again
        self.via = "zmq+pinned" if getattr(backend, "transfer_path", "host") == "pinned" else "zmq"
        self._nccl: NcclLink | None = None  # made at the first collective
        self.nccl_unused = ""  # why this worker's collectives do not use NCCL ("": they may)

    # ------------------------------------------------------------------ links
    def set_endpoints(self, endpoints: dict, keys: dict | None = None) -> None:
        """Learn the peers' data endpoints, and over TCP their CURVE keys (from the dispatcher's
        PEERS message)."""
        for k, v in endpoints.items():
            wid = int(k)
            key = (keys or {}).get(wid)
            if (self.endpoints.get(wid), self.keys.get(wid)) != (v, key) and wid in self.socks:
                self.socks.pop(wid).close(0)
            if self.endpoints.get(wid) not in (None, str(v)) and self._nccl is not None:
                self._nccl.forget(wid)  # a new process under that id: a new communicator
            self.endpoints[wid] = str(v)
            if key is not None:
                self.keys[wid] = key

    def _sock(self, peer: int) -> zmq.Socket:
        s = self.socks.get(peer)
        if s is None:
            ep = self.endpoints.get(peer)
            if ep is None:
                raise RuntimeError(f"worker {self.wid} does not know worker {peer}'s address")
            s = self.ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 1000)
            s.setsockopt(
                zmq.SNDHWM, 0
            )  # a send must never block: receivers drain in their own order
            s.setsockopt(zmq.IDENTITY, b"w%d" % self.wid)
            security.secure_connect(s, ep, ("worker",), server_key=self.keys.get(peer))
            s.connect(ep)
            self.socks[peer] = s
        return s

    def accept(self, ident: bytes, msg: P.Peer, frame: Any) -> None:
        """File one PEER message from the data socket under its key."""
        if not ident.startswith(b"w"):
            return
        try:
            src = int(ident[1:])
        except ValueError:
            return
        self.stash[(msg.client, msg.tag, src, msg.step)] = (msg, frame, time.monotonic())

    def expire(self, keep_s: float, max_bytes: int) -> None:
        """Drop early messages no transfer claimed within ``keep_s``, and the oldest beyond
        ``max_bytes`` (a peer that vanished, or a stranger writing to our data socket)."""
        now = time.monotonic()
        total = 0
        for key, (_msg, frame, arrived) in sorted(self.stash.items(), key=lambda kv: -kv[1][2]):
            total += len(frame.buffer) if hasattr(frame, "buffer") else len(frame)
            if now - arrived > keep_s or total > max_bytes:
                del self.stash[key]

    def drop(self, cno: int) -> None:
        """Forget stashed messages of a departed client."""
        for key in [k for k in self.stash if k[0] == cno]:
            del self.stash[key]

    def close(self) -> None:
        """Close every peer socket (and abort the NCCL communicators)."""
        if self._nccl is not None:
            self._nccl.close()
        for s in self.socks.values():
            s.close(0)
        self.socks.clear()

    # ------------------------------------------------------------------ point to point
    def _event(self, peer: int | None, nbytes: int, t0: int, t1: int, direction: str, what: str,
               via: str | None = None) -> None:  # fmt: skip
        ev = self.events
        if ev is not None and ev.enabled:
            off = ev.offset
            ev.emit(E.TRANSFER, {"worker": self.wid, "peer": peer, "bytes": nbytes, "t0": t0 + off,
                                 "t1": t1 + off, "direction": direction, "what": what, "client": self.cno,
                                 "batch": self.batch,
                                 "via": (via or self.via) if direction in ("send", "recv") else None},
                    t0 + off)  # fmt: skip

    def send(
        self,
        peer: int,
        tag: int,
        step: int,
        arr: np.ndarray | None,
        what: str,
        err: list | None = None,
        quiet: bool = False,
    ) -> None:
        """Send a host array (or an error marker) to ``peer``; never blocks. ``quiet``: no
        transfer event (a few bytes of set-up, not data)."""
        t0 = time.monotonic_ns()
        if err is not None or arr is None:
            hdr = P.encode(
                P.Peer(self.cno, tag, step, None, None, err or ["peer input missing", -1, 0])
            )
            self._sock(peer).send_multipart([hdr, b""])
            self._event(peer, 0, t0, time.monotonic_ns(), "send", what)
            return
        arr = np.ascontiguousarray(arr)
        hdr = P.encode(P.Peer(self.cno, tag, step, arr.dtype.name, list(arr.shape), None))
        payload = raw_bytes(arr)
        self._sock(peer).send_multipart([hdr, payload], copy=arr.nbytes < ZERO_COPY_MIN)
        if not quiet:
            self.bytes_sent += arr.nbytes
            self._event(peer, arr.nbytes, t0, time.monotonic_ns(), "send", what)

    def recv(self, peer: int, tag: int, step: int, what: str, quiet: bool = False) -> np.ndarray:
        """Wait for the message ``(tag, step)`` from ``peer``; a host array (read-only, no copy).
        ``quiet``: no transfer event (the wait, if any, is still its own slice).

        Raises:
            PeerFailure: the peer sent an error marker (its input had failed).
            TimeoutError: nothing came within :attr:`timeout` seconds.
        """
        key = (self.cno, tag, peer, step)
        t0 = time.monotonic_ns()
        deadline = time.monotonic() + self.timeout
        stash = self.stash
        if key not in stash:
            self.drain()
        while key not in stash:
            self.drain()
            if key in stash:
                break
            left = deadline - time.monotonic()
            if left <= 0 or self.stopped():
                raise TimeoutError(
                    f"worker {self.wid} waited {self.timeout:.0f}s for {what} data from worker {peer}"
                    " (GT_PEER_TIMEOUT)"
                )
            self.data.poll(int(min(left, 0.2) * 1000) + 1)
        t_arrived = time.monotonic_ns()
        self.waited(peer, t0, t_arrived, what)
        msg, frame, _ = stash.pop(key)
        if msg.error is not None:
            raise PeerFailure(msg.error)
        dtype, shape = P.check_dtype(msg.dtype), P.check_shape(msg.shape)
        buf = frame.buffer if hasattr(frame, "buffer") else frame
        arr = (
            np.frombuffer(buf, dtype=dtype).reshape(shape)
            if len(buf)
            else np.empty(shape, dtype=dtype)
        )
        if not arr.flags.aligned:  # (at an odd address in the message: see Backend.from_frame)
            arr = arr.copy()
        if not quiet:
            self.bytes_received += arr.nbytes
            self._event(peer, arr.nbytes, max(t0, t_arrived), time.monotonic_ns(), "recv", what)
        return arr

    def waited(self, peer: int | None, t0: int, t1: int, what: str) -> None:
        """Account time blocked on data that had not arrived: its own ``wait`` slice on the
        timeline (not part of the op that needed it), and :attr:`waited_ns` for the executor."""
        if t1 - t0 < WAIT_MIN_NS:
            return  # a message that was already there: no wait worth a slice
        self.waited_ns += t1 - t0
        self._event(peer, 0, t0, t1, "wait", what)

    def _completed(self, t0: int, waited: int) -> None:
        """Account the completion of a background collective (begun at ``t0``; ``waited`` is
        :attr:`waited_ns` then): receiving, reducing and sending its remaining steps are the
        collective's own communication, so the op that needed its result is not charged for
        them. They become a ``reduce`` slice on the comm lane (the waits inside it stay waits)."""
        t1 = time.monotonic_ns()
        rest = (t1 - t0) - (self.waited_ns - waited)
        if rest <= 0:
            return
        self.waited_ns += rest  # the executor subtracts this from the running op's time
        self._event(None, 0, t0, t1, "reduce", "all_reduce")

    # ------------------------------------------------------------------ instructions
    def run(self, code: int, vals: list, attrs: dict, err: list | None = None) -> Any:
        """Execute one transfer/collective instruction; returns the value for its output id.

        ``err`` (set when an input had failed) makes this participant send error markers in place
        of data, so its peers fail fast; it then raises :class:`PeerFailure`.
        """
        run = _Run(self, attrs.get("tag", 0), O.OPS[code], err)
        comm = self._communicator(run, code, attrs)
        if comm is not None:
            x = vals[0] if vals and err is None else None
            link, ws = self._nccl, list(attrs["workers"])
            link.send_headers(run, x, ws)
            how, heads = link.decide(run, code, x, attrs)
            if how == NCCL:  # the worker is busy with it from its launch to its end
                t0 = time.monotonic_ns()
                launched = self._launch(code, comm, x, heads, attrs)
                value = link.result(launched, ws, self.timeout)
                self._nccl_events(code, launched.moved, t0, time.monotonic_ns())
                return value
            if how == FAIL:
                raise PeerFailure(run.err)
        host = None
        if vals and vals[0] is not None and err is None:
            host = self.backend.to_host(vals[0], peer=True)
        result = ALGOS[code](run, host, attrs)
        if run.err is not None:
            raise run.local_error() if run.local else PeerFailure(run.err)
        if result is None:
            return vals[0] if vals else None
        if result is host:
            return vals[0]
        return self.backend.from_host(result, peer=True)

    def start(self, code: int, vals: list, attrs: dict) -> Pending:
        """Begin an all-reduce without waiting: its input's host copy is queued behind the work
        that makes it, and its first sends leave as soon as the bytes are there (ZeroMQ's I/O
        thread moves them while the worker computes); :meth:`progress` moves it on between
        instructions and :meth:`finish` completes it."""
        if code != ALL_REDUCE:
            raise ValueError(f"{O.OPS[code]} cannot run asynchronously")
        run = _Run(self, attrs.get("tag", 0), O.OPS[code], None)
        run.background = True
        comm = self._communicator(run, code, attrs)
        if comm is not None:  # its headers now; the all-reduce once everyone's are here
            self._nccl.send_headers(run, vals[0], list(attrs["workers"]))
            pend = Pending(run, None, None, attrs, self.cno, self.batch)
            pend.nccl = (comm, vals[0])
        else:
            host, ready = self.backend.to_host_async(vals[0])
            pend = Pending(run, host, ready, attrs, self.cno, self.batch)
        self.inflight.append(pend)
        try:
            self._advance(pend)
        except BaseException:
            self.inflight.remove(pend)
            raise
        return pend

    def _communicator(self, run: _Run, code: int, attrs: dict) -> Any:
        """The NCCL communicator for this collective's group (made at its first), or ``None``:
        the ZeroMQ algorithms."""
        if code not in NCCL_CODES or len(attrs.get("workers") or ()) < 2:
            return None
        if self._nccl is None:
            nccl, self.nccl_unused = load_nccl(self.backend)
            self._nccl = NcclLink(self.backend, nccl)
        # (a worker without NCCL takes part in the group's decision too: it says it cannot)
        return self._nccl.communicator(run, list(attrs["workers"]))

    def _launch(self, code: int, comm: Any, x: Any, heads: list, attrs: dict) -> Launched:
        """Queue one NCCL collective (counting the bytes NCCL's ring moves)."""
        launched = self._nccl.launch(code, comm, x, heads, attrs)
        self.bytes_sent += launched.moved
        self.bytes_received += launched.moved
        return launched

    def _nccl_events(self, code: int, moved: int, t0: int, t1: int) -> None:
        """The transfer events of an NCCL collective that occupied the worker from ``t0`` to
        ``t1``: its communication, as the ring's sends and receives are."""
        self._event(None, moved, t0, t1, "send", O.OPS[code], "nccl")
        self._event(None, moved, t1, t1, "recv", O.OPS[code], "nccl")

    def _advance(self, pend: Pending) -> None:
        """Run ``pend`` up to the next message that has not arrived (or to its end)."""
        if pend.nccl is not None:
            comm, x = pend.nccl
            link, ws = self._nccl, list(pend.attrs["workers"])
            if pend.run.background and link.headers_missing(pend.run, ws):
                return
            how, heads = link.decide(pend.run, ALL_REDUCE, x, pend.attrs)
            pend.nccl = None
            if how == NCCL:  # queued beside the compute stream: only the launch is the worker's
                t0 = time.monotonic_ns()
                pend.launched = self._launch(ALL_REDUCE, comm, x, heads, pend.attrs)
                self._nccl_events(ALL_REDUCE, pend.launched.moved, t0, time.monotonic_ns())
                pend.done = True
                return
            if how == FAIL:
                pend.done = True
                return
            pend.host, pend.ready = self.backend.to_host_async(x)  # the ring, from here
        if pend.steps is None:
            if pend.ready is not None and not pend.ready.done:
                if pend.run.background:
                    return  # its input is still on its way to the host
                # waited for (finish): synchronize, which raises for a failed GPU, where a query
                # of the event would say "not done" for ever
                pend.ready.synchronize()
                pend.ready = None
            pend.steps = all_reduce_steps(pend.run, pend.host, pend.attrs)
        try:
            next(pend.steps)
        except StopIteration as stop:
            pend.result = stop.value
            pend.done = True

    def progress(self) -> None:
        """Move the background all-reduces on as far as they go without waiting (called between
        instructions; looks at most every 50 µs). The time this takes is the collectives' own
        communication: it is not charged to the instruction around it."""
        t0 = time.monotonic_ns()
        if t0 < self._progress_at or not self.inflight:
            return
        cno, batch, waited = self.cno, self.batch, self.waited_ns
        try:
            for pend in self.inflight:
                if not pend.done:
                    self.cno, self.batch = pend.cno, pend.batch
                    try:
                        self._advance(pend)
                    except Exception as exc:  # the all-reduce's own failure, not the running op's
                        pend.fail(f"{type(exc).__name__}: {exc}")
        finally:
            self.cno, self.batch = cno, batch
        t1 = time.monotonic_ns()
        self._progress_at = t1 + 50_000
        if t1 - t0 > WAIT_MIN_NS:
            self._completed(t0, waited)

    def finish(self, pend: Pending) -> Any:
        """Complete an all-reduce begun by :meth:`start`; returns its value (raises like :meth:`run`)."""
        if pend in self.inflight:
            self.inflight.remove(pend)
        if not pend.done:
            cno, batch = self.cno, self.batch
            self.cno, self.batch = pend.cno, pend.batch
            t0, waited = time.monotonic_ns(), self.waited_ns
            pend.run.background = False  # from here on, a receive waits for its message
            try:
                if pend.steps is None and pend.ready is not None:
                    pend.ready.synchronize()
                    # (copied: not asked again, since a query of an event reports a GPU that
                    # failed meanwhile as "not done", for ever, where synchronize raised)
                    pend.ready = None
                while not pend.done:
                    self._advance(pend)
            finally:
                self._completed(t0, waited)
                self.cno, self.batch = cno, batch
        run = pend.run
        if run.err is not None:
            raise run.local_error() if run.local else PeerFailure(run.err)
        if pend.launched is not None:  # what is left of it is a wait for the device
            t0 = time.monotonic_ns()
            value = self._nccl.result(pend.launched, list(pend.attrs["workers"]), self.timeout)
            self.waited(None, t0, time.monotonic_ns(), "all_reduce")
            return value
        return self.backend.from_host(pend.result, peer=True)


class Pending:
    """An all-reduce in flight (see :meth:`Peers.start`): its input's host copy (ready when the
    ``ready`` event is done; ``None``: already), and the ring's steps once begun."""

    __slots__ = ("run", "host", "ready", "attrs", "steps", "cno", "batch", "result", "done",
                 "nccl", "launched")  # fmt: skip

    def __init__(self, run: _Run, host: Any, ready: Any, attrs: dict, cno: int, batch: int):
        self.run, self.host, self.ready, self.attrs = run, host, ready, attrs
        self.cno, self.batch = cno, batch
        self.steps: Any = None
        self.result: Any = None
        self.done = False
        self.nccl: tuple | None = None  # (communicator, input) until its headers are read
        self.launched: Launched | None = None  # what NcclLink.launch queued

    def fail(self, message: str) -> None:
        """End it with an error that started here (:meth:`Peers.finish` raises it)."""
        if self.run.err is None:
            self.run.err, self.run.local = [message, ALL_REDUCE, 0], True
        self.done = True


class _Run:
    """One execution of a transfer instruction: tracks a failure and keeps the message pattern."""

    def __init__(self, peers: Peers, tag: int, what: str, err: list | None):
        self.p = peers
        self.tag = tag
        self.what = what
        self.err = err
        self.local = False  # the failure started here (a timeout): it must be reported
        self.exc: Exception | None = None  # the exception that started it here, if one did
        self.me = peers.wid
        self.background = False  # a background all-reduce: pause where a message is missing

    def missing(self, peer: int, step: int) -> bool:
        """In the background, whether the message ``step`` from ``peer`` has yet to arrive (the
        caller then pauses); always False otherwise (the receive waits for it)."""
        if not self.background:
            return False
        p = self.p
        key = (p.cno, self.tag, peer, step)
        if key in p.stash:
            return False
        p.drain()
        return key not in p.stash

    def send(self, peer: int, step: int, arr: np.ndarray | None) -> None:
        try:
            self.p.send(peer, self.tag, step, None if self.err else arr, self.what, self.err)
        except Exception as exc:  # noqa: BLE001 - the peer must hear of it, not wait it out
            if self.err is None:
                self.err = [f"{type(exc).__name__}: {exc}", O.OPCODE[self.what], 0]
                self.local, self.exc = True, exc
            try:
                self.p.send(peer, self.tag, step, None, self.what, self.err)
            except zmq.ZMQError:
                pass  # (the link itself is broken: the peer's own timeout reports it)

    def local_error(self) -> Exception:
        """The exception to raise for a failure that started here."""
        if self.exc is not None:
            return self.exc
        msg = self.err[0] if self.err else "transfer failed"
        if msg.startswith("TimeoutError: "):
            return TimeoutError(msg.removeprefix("TimeoutError: "))
        return RuntimeError(msg)

    def recv(self, peer: int, step: int) -> np.ndarray | None:
        try:
            got = self.p.recv(peer, self.tag, step, self.what)
        except PeerFailure as f:
            self.err = self.err or f.err
            return None
        except TimeoutError as exc:
            if self.err is None:
                self.err, self.local = [f"TimeoutError: {exc}", O.OPCODE[self.what], 0], True
            return None
        return None if self.err else got
