"""A worker: executes instruction batches in order on one device.

Sockets: a DEALER to the dispatcher's back endpoint (batches in, completions out), a ROUTER data
socket that clients on the same host use for large uploads and fetch replies, and a heartbeat
DEALER owned by a background thread (so a long kernel never looks like a dead worker).

Tensors are kept per client (``tables[client_no][tensor_id]``), so ids never collide and a departed
client's tensors are dropped in one step. An instruction that fails marks its output failed with
the message, op and source line; anything computed from a failed tensor fails the same way.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from typing import Any

import numpy as np
import zmq

from gt.runtime import discovery
from gt.runtime import protocol as P
from gt.runtime.protocol import ALL_REDUCE, COMM_OPS
from gt.runtime.worker.backend import Backend, load_backend
from gt.runtime.worker.device_monitor import DeviceMonitor
from gt.runtime.worker.peers import PeerFailure, Peers
from gt.trace import events as E
from gt.trace.emit import Emitter

_UPLOAD = P.OPCODE["upload"]
_FETCH = P.OPCODE["fetch"]
_MARK = P.OPCODE["mark"]
_FREE = P.OPCODE["free"]
_PLACE = P.OPCODE["place"]
MAX_ERRORS_PER_BATCH = 64
UPLOAD_WAIT_S = 30.0
_NEVER = 1 << 62


def keep_freed_memory() -> bool:
    """Make glibc keep freed memory in the process instead of returning it to the OS.

    A worker frees and allocates arrays of the same large sizes every step; handing them back to
    the kernel (big blocks are ``mmap``-ed and ``munmap``-ed) makes every step page-fault them in
    again, which in a virtual machine can cost more than the arithmetic. ``$GT_WORKER_KEEP_MEMORY=0``
    turns this off. Returns whether it was applied.
    """
    if os.environ.get("GT_WORKER_KEEP_MEMORY", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max, m_arena_max = -1, -4, -8
        ok = libc.mallopt(m_arena_max, 1)  # ZeroMQ's I/O threads allocate receive buffers too
        ok &= libc.mallopt(m_mmap_max, 0)
        ok &= libc.mallopt(m_trim_threshold, 1 << 62)
        return bool(ok)
    except (OSError, AttributeError):
        return False


class Worker:
    """One worker process's state and loop.

    Args:
        connect: the dispatcher's back endpoint.
        backend: an array backend (default: :func:`load_backend`).
        register_timeout: seconds to wait for the dispatcher to accept us.
    """

    def __init__(
        self, connect: str, *, backend: Backend | None = None, register_timeout: float = 30.0
    ):
        self.keeps_memory = keep_freed_memory()
        self.backend = backend or load_backend()
        self.handlers = self.backend.handlers
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        # Our identities, registered with the dispatcher: only our own heartbeat socket can keep
        # this worker alive there (not, say, a stale worker that reconnects to a reused port).
        self.ident = uuid.uuid4().bytes
        self.sock.setsockopt(zmq.IDENTITY, self.ident)
        self.sock.connect(connect)
        self.data = self.ctx.socket(zmq.ROUTER)
        self.data.setsockopt(zmq.LINGER, 0)
        self.data.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.data.bind_to_random_port("tcp://127.0.0.1")
        self.connect_to = connect
        self.tables: dict[int, dict[int, Any]] = {}
        self.failed: dict[int, dict[int, list]] = {}
        self.pending_uploads: dict[tuple[bytes, int], Any] = {}
        self.batches = 0
        self.instructions = 0
        self.busy_ns = 0
        self._stop = threading.Event()
        self.stop_reason = ""
        self.info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": self.backend.device,
            "backend": self.backend.name,
            "data": self.data.getsockopt(zmq.LAST_ENDPOINT).decode(),
            "hb": self.ident + b"/hb",
        }
        self.sock.send(P.header(P.REGISTER, self.info))
        if not self.sock.poll(int(register_timeout * 1000)):
            self.close()
            raise RuntimeError(
                f"no dispatcher answered at {connect} within {register_timeout:.0f}s"
            )
        msg = P.parse_header(self.sock.recv_multipart()[0])
        if msg[1] != P.REGISTERED:
            self.close()
            raise RuntimeError(f"dispatcher refused registration: {msg}")
        self.wid = msg[2]
        settings = msg[3] if isinstance(msg[3], dict) else {}
        self.heartbeat = float(settings.get("heartbeat", 0.5))
        clock = settings.get("clock")
        offset = clock - time.monotonic_ns() if isinstance(clock, int) else 0
        self.events = Emitter(
            self.ctx, settings.get("events_in"), f"worker:{self.wid}", clock_offset_ns=offset
        )
        self.device_monitor = DeviceMonitor(self.events, self.wid) if self.events.enabled else None
        self.peers = Peers(
            self.wid,
            self.ctx,
            self.data,
            self._drain_data,
            self.events,
            self.backend,
            self._stop.is_set,
        )
        self._cur_cno, self._cur_token, self._cur_seq = 0, None, 0
        self.pending: dict[int, tuple] = {}  # out id -> (all-reduce in flight, src), oldest first
        self._hb = threading.Thread(target=self._heartbeat_loop, name="gt-heartbeat", daemon=True)
        self._hb.start()

    # ------------------------------------------------------------------ loop
    def run(self, parent_pid: int | None = None) -> str:
        """Serve until told to stop; returns why it stopped."""
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.data, zmq.POLLIN)
        next_stats = 0.0
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(100))
                if self.data in events:
                    self._drain_data()
                if self.sock in events:
                    for _ in range(64):
                        try:
                            frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        self._on_message(frames)
                now = time.monotonic()
                self.events.tick()
                if now >= next_stats:
                    next_stats = now + 0.5
                    st = self.stats()
                    self.sock.send(P.header(P.STATS, st))
                    self.events.emit(
                        E.MEMORY,
                        {
                            "worker": self.wid,
                            "used": st["bytes"],
                            "reserved": st["reserved"],
                            "limit": None,
                            "spilled": 0,
                            "tensors": st["tensors"],
                        },
                    )
                    if parent_pid is not None and not discovery.pid_alive(parent_pid):
                        self.stop_reason = "parent process exited"
                        break
        finally:
            self.close()
        return self.stop_reason

    def _on_message(self, frames: list) -> None:
        try:
            msg = P.parse_header(frames[0].buffer)
        except P.ProtocolError:
            return
        kind = msg[1]
        if kind == P.BATCH:
            self._run_batch(msg, frames)
        elif kind == P.DROP_CLIENT:
            self.tables.pop(msg[2], None)
            self.failed.pop(msg[2], None)
            self.peers.drop(msg[2])
        elif kind == P.PEERS:
            if isinstance(msg[2], dict):
                self.peers.set_endpoints(msg[2])
        elif kind == P.STOP:
            self.stop_reason = "stopped by the dispatcher"
            self._stop.set()

    def _drain_data(self) -> None:
        while True:
            try:
                frames = self.data.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if len(frames) != 3:
                continue
            try:
                msg = P.parse_header(frames[1].buffer)
            except P.ProtocolError:
                continue
            if msg[1] == P.UPLOAD:
                self.pending_uploads[(frames[0].bytes, msg[2])] = frames[2]
            elif msg[1] == P.PEER and len(msg) >= 8:
                self.peers.accept(frames[0].bytes, msg, frames[2])

    # ------------------------------------------------------------------ execution
    def _run_batch(self, msg: list, frames: list) -> None:
        cno, seq = msg[2], msg[3]
        token = msg[5] if len(msg) > 5 else None
        self._cur_cno, self._cur_token, self._cur_seq = cno, token, seq
        self.peers.cno, self.peers.batch = cno, seq
        t0 = time.perf_counter_ns()
        errors: list = []
        try:
            instrs, frees, free_at = P.parse_body_ordered(frames[1].buffer)
        except P.ProtocolError as exc:
            instrs, frees, free_at = [], [], None
            errors.append([str(exc), -1, 0])
        # Frees the client made between instructions are applied at that point of the batch.
        early: list = []
        if free_at:
            try:
                early = sorted(zip(free_at, frees))
            except TypeError:
                early = []
            frees = []
        next_free = early[0][0] if early else _NEVER
        fi = 0
        tbl = self.tables.setdefault(cno, {})
        failed = self.failed.setdefault(cno, {})
        bufs = frames[2:]
        handlers = self.handlers
        nops = len(handlers)
        full = self.events.full
        stamps: list[int] = []
        stamp = stamps.append
        clock = time.monotonic_ns
        t_start = clock()
        for idx, ins in enumerate(instrs):
            if next_free <= idx:
                while fi < len(early) and early[fi][0] <= idx:
                    if tbl.pop(early[fi][1], None) is None:
                        failed.pop(early[fi][1], None)
                    fi += 1
                next_free = early[fi][0] if fi < len(early) else _NEVER
            if full:
                stamp(clock())
            try:
                code, out, args, attrs, src = ins
                try:
                    vals = [
                        tbl[a] if type(a) is int else (a[0] if type(a) is list else a) for a in args
                    ]
                except KeyError:
                    vals = None
                    if self.pending:  # an input is an all-reduce in flight: complete it first
                        self._complete_pending(tbl, failed, errors)
                        try:
                            vals = [
                                tbl[a] if type(a) is int else (a[0] if type(a) is list else a)
                                for a in args
                            ]
                        except KeyError:
                            vals = None
                if vals is None:
                    err = self._input_error(ins, tbl, failed)
                    if code in COMM_OPS and err is not None:
                        self._comm_failed(code, out, attrs, err, tbl, failed)
                    if err is not None and err[3] and len(errors) < MAX_ERRORS_PER_BATCH:
                        err[3] = False
                        errors.append(err[:3])
                    continue
                h = handlers[code] if type(code) is int and 0 <= code < nops else None
                if h is not None:
                    tbl[out] = h(vals, attrs)
                elif code == _UPLOAD:
                    tbl[out] = self._upload(attrs, bufs, token)
                elif code == _FETCH:
                    self._reply(cno, token, out, vals[0], None)
                elif code == _MARK:
                    pass
                elif code in COMM_OPS:
                    if self.pending:  # keep every worker's collectives in one order
                        self._complete_pending(tbl, failed, errors)
                    if code == ALL_REDUCE and attrs.get("async"):
                        tbl.pop(out, None)  # until it completes, a use of out waits for it
                        failed.pop(out, None)
                        self.pending[out] = (self.peers.start(code, vals, attrs), src)
                    else:
                        tbl[out] = self.peers.run(code, vals, attrs)
                elif code == _FREE:
                    if self.pending:
                        self._complete_pending(tbl, failed, errors)
                    for f in attrs["ids"]:
                        if tbl.pop(f, None) is None:
                            failed.pop(f, None)
                elif code == _PLACE:
                    tbl[out] = vals[0]
                else:
                    raise P.ProtocolError(f"unknown opcode {code!r}")
            except PeerFailure as exc:  # an input failed on another worker, which reported it
                tbl.pop(ins[1], None)
                failed[ins[1]] = [*exc.err, False]
            except Exception as exc:  # an op failed: record it against its output
                err = [
                    f"{type(exc).__name__}: {exc}",
                    ins[0] if type(ins) is list and ins else -1,
                    ins[4] if type(ins) is list and len(ins) > 4 else 0,
                    False,
                ]
                out = ins[1] if type(ins) is list and len(ins) > 1 else None
                if type(ins) is list and ins and ins[0] == _FETCH:
                    self._reply(cno, token, out, None, err[:3])
                elif type(out) is int:
                    failed[out] = err
                if len(errors) < MAX_ERRORS_PER_BATCH:
                    errors.append(err[:3])
        if self.pending:  # nothing stays in flight past the batch: peers may wait for it
            self._complete_pending(tbl, failed, errors)
        for f in frees + [f for _, f in early[fi:]]:
            if tbl.pop(f, None) is None:
                failed.pop(f, None)
        t_end = clock()
        self.batches += 1
        self.instructions += len(instrs)
        dt = time.perf_counter_ns() - t0
        self.busy_ns += dt
        self.sock.send(P.header(P.DONE, cno, seq, errors, len(instrs), dt))
        if self.events.enabled:
            self._emit_exec(cno, seq, instrs, stamps, t_start, t_end, errors)

    def _emit_exec(
        self, cno: int, seq: int, instrs: list, stamps: list, t0: int, t1: int, errors: list
    ) -> None:
        ev = self.events
        off = ev.offset
        try:
            ops = [i[0] for i in instrs]
            outs = [i[1] for i in instrs]
            srcs = [i[4] for i in instrs]
        except (TypeError, IndexError, KeyError):
            ops, outs, srcs = [], [], []
        durs: list[int] = []
        if stamps:
            stamps.append(t1)
            durs = [b - a for a, b in zip(stamps, stamps[1:])]
        ev.emit(
            E.EXEC,
            {
                "worker": self.wid,
                "client": cno,
                "batch": seq,
                "t0": t0 + off,
                "t1": t1 + off,
                "n": len(instrs),
                "ops": ops,
                "outs": outs,
                "srcs": srcs,
                "durs": durs,
                "hot": False,
                "queue": None,
                "errors": len(errors),
            },
            t0 + off,
        )
        for msg, opcode, src in errors[:8]:
            op = P.OPS[opcode] if type(opcode) is int and 0 <= opcode < len(P.OPS) else str(opcode)
            ev.emit(
                E.ERROR,
                {"client": cno, "worker": self.wid, "message": msg, "op": op, "source": src},
            )

    def _complete_pending(self, tbl: dict, failed: dict, errors: list) -> None:
        """Finish every all-reduce in flight, oldest first (the order all participants use)."""
        pending, self.pending = self.pending, {}
        for out, (pend, src) in pending.items():
            try:
                tbl[out] = self.peers.finish(pend)
            except PeerFailure as exc:
                failed[out] = [*exc.err, False]
            except Exception as exc:
                failed[out] = [f"{type(exc).__name__}: {exc}", ALL_REDUCE, src, False]
                if len(errors) < MAX_ERRORS_PER_BATCH:
                    errors.append(failed[out][:3])

    def _comm_failed(
        self, code: int, out: Any, attrs: Any, err: list, tbl: dict, failed: dict
    ) -> None:
        """A transfer's input had failed: send error markers so the peers fail too, not wait."""
        try:
            self.peers.run(code, [None], attrs, err[:3])
        except PeerFailure:
            pass
        except Exception:  # malformed attrs: the peers time out instead
            pass
        if type(out) is int:
            tbl.pop(out, None)
            failed[out] = [*err[:3], False]

    def _input_error(self, ins: Any, tbl: dict, failed: dict) -> list | None:
        """An input was missing: propagate its failure to the output (or to the fetch reply)."""
        try:
            code, out, args = ins[0], ins[1], ins[2]
        except (TypeError, IndexError):
            return None
        err = None
        for a in args:
            if type(a) is int and a not in tbl:
                err = failed.get(a)
                if err is None:
                    err = [
                        f"tensor {a} does not exist on this worker (freed, or never created)",
                        code,
                        ins[4] if len(ins) > 4 else 0,
                        True,
                    ]
                break
        if err is None:
            return None
        if code == _FETCH:
            self._reply(self._cur_cno, self._cur_token, out, None, err[:3])
        elif type(out) is int:
            failed[out] = err
        return err

    def _upload(self, attrs: dict, bufs: list, token: Any) -> Any:
        dtype = P.check_dtype(attrs["dtype"])
        shape = P.check_shape(attrs["shape"])
        if "tok" in attrs:
            key = (token, attrs["tok"])
            deadline = time.monotonic() + UPLOAD_WAIT_S
            while key not in self.pending_uploads:
                if time.monotonic() > deadline:
                    raise TimeoutError("the upload's data never arrived on the direct data socket")
                if self.data.poll(50):
                    self._drain_data()
            frame = self.pending_uploads.pop(key)
        else:
            frame = bufs[attrs["buf"]]
        arr = np.frombuffer(frame.buffer, dtype=dtype)
        expect = 1
        for d in shape:
            expect *= d
        if arr.size != expect:
            raise ValueError(
                f"upload carries {arr.size} elements, shape {list(shape)} needs {expect}"
            )
        return self.backend.from_host(arr.reshape(shape))

    def _reply(self, cno: int, token: Any, req: int, arr: Any, err: list | None) -> None:
        if err is not None:
            hdr = [req, None, None, err]
            payload = b""
        else:
            host = self.backend.to_host(arr)
            hdr = [req, host.dtype.name, list(host.shape), None]
            payload = memoryview(host.reshape(-1)).cast("B") if host.size else b""
        if token is not None:
            try:
                self.data.send_multipart([token, P.header(P.DATA, *hdr), payload], copy=False)
                return
            except zmq.ZMQError:
                pass  # the client has no direct link to us: go through the dispatcher
        self.sock.send_multipart([P.header(P.DATA, *hdr, cno), payload], copy=False)

    # ------------------------------------------------------------------ status
    def stats(self) -> dict:
        """Plain-data counters: tensors and bytes held, batches and instructions run."""
        n = 0
        nbytes = 0
        for tbl in self.tables.values():
            n += len(tbl)
            for a in tbl.values():
                nbytes += getattr(a, "nbytes", 0)
        return {
            "tensors": n,
            "bytes": nbytes,
            "reserved": self.backend.reserved_bytes(nbytes),
            "clients": len(self.tables),
            "batches": self.batches,
            "instructions": self.instructions,
            "busy_ns": self.busy_ns,
        }

    def _heartbeat_loop(self) -> None:
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.IDENTITY, self.ident + b"/hb")
        s.connect(self.connect_to)
        liveness = max(3.0, self.heartbeat * 6)
        last_reply = time.monotonic()
        try:
            while not self._stop.is_set():
                s.send(P.header(P.HEARTBEAT, self.wid))
                if s.poll(int(self.heartbeat * 1000)):
                    try:
                        msg = P.parse_header(s.recv())
                    except P.ProtocolError:
                        continue
                    last_reply = time.monotonic()
                    if msg[1] == P.STOP:
                        self.stop_reason = "the dispatcher no longer knows this worker"
                        self._stop.set()
                    self._stop.wait(self.heartbeat)
                elif time.monotonic() - last_reply > liveness:
                    self.stop_reason = f"the dispatcher sent no heartbeat for {liveness:.0f}s"
                    self._stop.set()
        finally:
            s.close(0)

    def close(self) -> None:
        """Stop the heartbeat thread and close every socket."""
        self._stop.set()
        hb = getattr(self, "_hb", None)
        if hb is not None and hb is not threading.current_thread():
            hb.join(timeout=2)
        self.tables.clear()
        if getattr(self, "peers", None) is not None:
            self.peers.close()
        if getattr(self, "device_monitor", None) is not None:
            self.device_monitor.stop()
        if getattr(self, "events", None) is not None:
            self.events.emit(
                E.MEMORY,
                {
                    "worker": self.wid,
                    "used": 0,
                    "reserved": 0,
                    "limit": None,
                    "spilled": 0,
                    "tensors": 0,
                },
            )
            self.events.close()
        self.ctx.destroy(linger=0)
