"""The dispatcher: one poll loop that moves bytes between clients and workers.

All decisions are made by :class:`gt.runtime.dispatcher.planner.Planner`; this shell owns the sockets:

* ``front`` (ROUTER): clients connect here;
* ``back`` (ROUTER): workers register, receive batches and report completion;
* ``control`` (ROUTER): request/reply for monitors and tools (ping, stats, snapshot, config);
* ``events``: a PULL/PUB proxy (``zmq.proxy`` in C, on its own thread): every component pushes
  instrumentation batches in, monitors subscribe on the PUB side.

Batches without signal annotations, from clients with nothing placed while no shard config is in
force, are forwarded whole to the client's home worker without being decoded (the fast path).
Everything else goes through :class:`gt.runtime.sharding.placement.Placement`, which rewrites the batch
into per-worker parts with explicit transfer instructions.

A malformed message is counted and dropped; it never stops the loop.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import zmq

from gt.runtime import discovery, security
from gt.runtime import memory_settings as MS
from gt.runtime import protocol as P
from gt.runtime.dispatcher.control import ControlRequests
from gt.runtime.dispatcher.keeping import PeerKeeping
from gt.runtime.dispatcher.planner import MultiBatch, Planner
from gt.runtime.dispatcher.workers import WorkerMessages
from gt.runtime.liveness import BOOT_ID, env_seconds
from gt.runtime.sharding import config as shard_config
from gt.runtime.sharding.placement import Placement
from gt.runtime.sockets import send_parts, take
from gt.trace import events as E
from gt.trace.emit import Emitter

log = logging.getLogger("gt.dispatcher")
_HEARTBEAT = P.encode(P.Heartbeat())
#: What a client's hello may make the dispatcher keep: its host name, and its command line's words
MAX_HOST, MAX_ARGV = 255, 64
#: Source lines kept per client (and their length): every monitor's snapshot carries them.
MAX_SRCLOCS = 20_000
MAX_SRCLOC_TEXT = 200
_STOP = P.encode(P.Stop())


class Dispatcher(WorkerMessages, ControlRequests, PeerKeeping):
    """A GT dispatcher bound to four endpoints.

    Args:
        host: interface to bind (``127.0.0.1`` keeps it local; ``0.0.0.0`` serves a network).
        port: front port (0 picks free ports for everything). With a port, the other endpoints
            take the next four (back, control, events_in, events: ``port+1`` .. ``port+4``), so
            a firewall or a Kubernetes service can name them all.
        max_in_flight: batches in flight per worker (see :class:`Planner`).
        heartbeat: seconds between application heartbeats.
        worker_timeout, client_timeout: seconds of silence (on the running clock) after which a
            remote worker or a client is lost (default ``$GT_WORKER_TIMEOUT`` /
            ``$GT_CLIENT_TIMEOUT``, else 60); local workers are watched through the OS instead.
        write_discovery: write a discovery file so ``gt top`` finds this dispatcher.
        ipc_dir: serve on ipc sockets in this private (0700) directory instead of TCP: a cluster
            for one user, guarded by the file system (what a program's own cluster uses).
        keys: the keyring directory for TCP (default :func:`gt.runtime.security.default_dir`);
            every TCP socket is a CURVE server letting in only the roles it serves.
        advertise: the host name or address peers should use (default: ``host``, or this
            machine's name when ``host`` is ``0.0.0.0``).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_in_flight: int = 4,
        heartbeat: float | None = None,
        worker_timeout: float | None = None,
        client_timeout: float | None = None,
        write_discovery: bool = True,
        memory: Mapping | None = None,
        ipc_dir: str | None = None,
        keys: str | None = None,
        advertise: str | None = None,
    ):
        self.heartbeat = heartbeat or env_seconds("GT_HEARTBEAT", 1.0)
        self.planner = Planner(max_in_flight)
        # Memory settings for the workers: this dispatcher's flags, and what programs set since.
        self.memory_flags = MS.normalize(memory or {})
        self.memory_runtime: dict = {}
        self.placement = Placement()
        self.control_token = os.environ.get("GT_CONTROL_TOKEN") or None
        self.ctx = zmq.Context()
        self.ipc_dir = ipc_dir
        if ipc_dir is not None:
            discovery.claim_ipc_dir(ipc_dir)
        self.keyring = None if ipc_dir else security.keyring(keys)
        self.guard = security.Guard(self.ctx, self.keyring) if self.keyring else None
        self.advertise = advertise
        ports = [port + k if port else 0 for k in range(5)]
        self.front = self._bind(zmq.ROUTER, host, ports[0], "front")
        self.back = self._bind(zmq.ROUTER, host, ports[1], "back")
        self.control = self._bind(zmq.ROUTER, host, ports[2], "control")
        self._bus_in = self._bind(zmq.PULL, host, ports[3], "events_in")  # publishers PUSH here
        self._bus_in.setsockopt(zmq.RCVHWM, 100_000)
        events_in = self._endpoint(self._bus_in, host)
        own_bus = f"inproc://gt-bus-{id(self)}"  # our own events: in-process, no keys needed
        self._bus_in.bind(own_bus)
        # PUB, not XPUB: an XPUB hands subscriptions to the proxy, which cannot forward them to a
        # PULL socket and then spins at 100% CPU; a PUB filters subscriptions itself.
        self._bus_out = self._bind(zmq.PUB, host, ports[4], "events")
        # A stalled subscriber may hold this many batches here before it loses events (counted as
        # gaps); more would only cost the dispatcher memory.
        self._bus_out.setsockopt(zmq.SNDHWM, 2_000)
        self._init_keeping(worker_timeout, client_timeout)
        self.endpoints = {
            name: self._endpoint(sock, host)
            for name, sock in (
                ("front", self.front),
                ("back", self.back),
                ("control", self.control),
                ("events", self._bus_out),
            )  # fmt: skip
        }
        self.endpoints["events_in"] = events_in
        self._proxy = threading.Thread(target=self._run_proxy, name="gt-event-bus", daemon=True)
        self._proxy.start()
        self.started = time.time()
        self.events = Emitter(self.ctx, own_bus, "dispatcher")
        self.bad_messages = 0  # malformed or hostile input, dropped
        self.internal_errors = 0  # exceptions from GT's own code (bugs), logged with tracebacks
        self.children: list[subprocess.Popen] = []
        self._pending_hellos: list[tuple[bytes, dict, float]] = []
        self._hb_idents: dict[bytes, int] = {}
        self._worker_by_ident: dict[bytes, int] = {}
        self._client_by_ident: dict[bytes, int] = {}
        self._srclocs: dict[int, dict[int, str]] = {}
        self._stop = threading.Event()
        self._next_stats = 0.0
        self.batches_routed = 0
        self.batches_planned = 0
        self._apply_env_config()
        self.discovery_file = None
        if write_discovery:
            self.discovery_file = discovery.write(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "started": self.started,
                    **self.endpoints,
                    **({"keys": str(self.keyring.path)} if self.keyring else {}),
                }
            )

    # ------------------------------------------------------------------ setup
    def _bind(self, kind: int, host: str, port: int, name: str) -> zmq.Socket:
        s = self.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        if kind == zmq.ROUTER:
            s.setsockopt(zmq.SNDHWM, 0)  # acks must never be dropped at the high-water mark
        if self.ipc_dir is not None:
            s.bind(f"ipc://{self.ipc_dir}/{name}")
            return s
        self.guard.serve(s, name)  # CURVE: only the roles this socket serves get in
        if port:
            s.bind(f"tcp://{host}:{port}")
        else:
            s.bind_to_random_port(f"tcp://{host}")
        return s

    def _endpoint(self, s: zmq.Socket, host: str) -> str:
        ep = s.getsockopt(zmq.LAST_ENDPOINT).decode()
        if self.advertise:
            ep = ep.replace(f"//{host}:", f"//{self.advertise}:").replace(
                "//0.0.0.0:", f"//{self.advertise}:"
            )
        elif host in ("0.0.0.0", "*"):
            ep = ep.replace("0.0.0.0", socket.gethostname())
        return ep

    def _run_proxy(self) -> None:
        try:
            zmq.proxy(self._bus_in, self._bus_out)
        except zmq.ZMQError:
            pass  # the context was terminated at shutdown
        finally:
            self._bus_in.close(0)
            self._bus_out.close(0)

    def _settings(self) -> dict:
        """What every peer needs to know at join: heartbeat, event bus, the run's clock."""
        return {
            "heartbeat": self.heartbeat,
            "liveness": self.worker_timeout,
            "events_in": self.endpoints["events_in"],
            "clock": time.monotonic_ns(),
            "boot": BOOT_ID,
            "trace": self.events.level,
            "memory": self.memory_layers(),
        }

    def _apply_env_config(self) -> None:
        """``$GT_CONFIG`` / ``$GT_AUTO_SHARD`` in the dispatcher's environment: the starting config."""
        try:
            raw = shard_config.from_env()
            if raw is not None:
                self.placement.config = shard_config.validate(raw)
        except shard_config.ConfigError as exc:
            # (stderr: stdout carries the ready line a launcher parses)
            print(f"gt dispatcher: ignoring GT_CONFIG: {exc}", file=sys.stderr, flush=True)

    @property
    def address(self) -> str:
        """The endpoint clients connect to."""
        return self.endpoints["front"]

    # ------------------------------------------------------------------ loop
    def stop(self) -> None:
        """Ask :meth:`run` to return (thread-safe)."""
        self._stop.set()

    def run(self, parent_pid: int | None = None) -> None:
        """Serve until :meth:`stop`, a STOP signal, or the death of ``parent_pid``."""
        poller = zmq.Poller()
        poller.register(self.back, zmq.POLLIN)
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.control, zmq.POLLIN)
        # (the connection monitors are read by the housekeeping instead: each socket polled costs
        # two system calls on every wake, and a closed connection only starts a grace period)
        next_house = 0.0
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(100))
                # clients first: a batch is on its program's critical path, a Done rarely is
                if self.front in events:
                    self._drain(self.front, self._on_client)
                if self.back in events:
                    self._drain(self.back, self._on_worker)
                if self.control in events:
                    self._drain(self.control, self._on_control)
                now = time.monotonic()
                if now >= next_house:  # (check_peers reads the connection monitors)
                    next_house = now + 0.1
                    self._housekeeping(now)
                    if parent_pid is not None and not discovery.pid_alive(parent_pid):
                        break
        finally:
            self.close()

    def _drain(self, sock: zmq.Socket, handler: Any) -> None:
        for i in range(256):
            frames = take(sock, ready=i == 0)  # (the poll said the first is there)
            if frames is None:
                return
            try:
                handler(frames)
            except P.ProtocolError:
                self.bad_messages += 1
            except Exception:  # a bug in GT, not bad input: say so loudly, keep serving
                self._internal_error("handling a message")

    def _internal_error(self, doing: str, tb: str | None = None) -> None:
        """Count and log a bug in GT's own code (with its traceback); it shows in ``gt top``."""
        self.internal_errors += 1
        if tb is None:
            log.exception("internal error while %s (a bug in GT)", doing)
        else:
            log.error("internal error while %s (a bug in GT):\n%s", doing, tb)

    # ------------------------------------------------------------------ clients
    def _on_client(self, frames: list) -> None:
        try:
            ident, msg = P.parse_routed(frames)
        except P.ProtocolError:
            version = P.hello_version(frames[1].buffer) if len(frames) > 1 else None
            if version is not None and version != P.VERSION:  # (a hello: it hears why)
                why = (f"this dispatcher speaks GT protocol {P.VERSION}, the program {version}: "
                       "run the same GT version on both sides")  # fmt: skip
                self.front.send_multipart([frames[0].bytes, P.encode(P.Error(P.E_PROTOCOL, why))])
            raise
        kind = type(msg)
        cno = self._client_by_ident.get(ident)
        if (
            self.ipc_dir is None  # (over ipc every peer is the owner: no roles to read)
            and kind is not P.Control
            and security.role_of(frames[1]) not in security.RUNS_PROGRAMS
        ):
            why = f"a {security.role_of(frames[1])}'s key may not run programs here"
            if kind is P.Hello:  # (it hears why, instead of waiting out its connect timeout)
                self.front.send_multipart([ident, P.encode(P.Error(P.E_PROTOCOL, why))])
            raise P.ProtocolError(why)
        if cno is not None:
            self.planner.clients[cno].last_seen = self.clock.now()
            self.heard("client", cno, frames[1], "front", ident)
        if kind is P.Batch:
            if cno is None:
                err = P.Error(P.E_UNKNOWN_CLIENT, "unknown client: reconnect")
                self.front.send_multipart([ident, P.encode(err)])
                return
            c = self.planner.clients[cno]
            if c.broken is not None:
                self.front.send_multipart([ident, P.encode(P.Error(P.E_WORKER_LOST, c.broken))])
                return
            if len(frames) < 3:
                raise P.ProtocolError("batch without a body")
            if msg.srclocs:
                self._keep_srclocs(cno, msg.srclocs)
            if msg.signals is None and not self.placement.wants(cno):
                self._send_batches(self.planner.submit(cno, (msg.seq, msg.n, frames[2:])))
            else:
                self._plan_batch(c, msg.seq, frames, msg.signals)
                self.tell_route(c)  # (before the batch's Ack: the client switches after it)
        elif kind is P.SourceLines:
            if cno is None:
                raise P.ProtocolError("source lines from an unknown client")
            self._keep_srclocs(cno, msg.srclocs)
        elif kind is P.Heartbeat:
            self.front.send_multipart([ident, _HEARTBEAT])
        elif kind is P.Hello:
            tenant = None if self.ipc_dir is not None else security.tenant_of(frames[1])
            # (bounded as source lines are: every snapshot carries them, to every monitor)
            argv = [a[:MAX_SRCLOC_TEXT] for a in msg.argv[:MAX_ARGV]]
            info = {"pid": msg.pid, "host": msg.host[:MAX_HOST], "argv": argv,
                    "token": msg.token, "tenant": tenant}  # fmt: skip
            self._hello(ident, info, frames[1])
        elif kind is P.Control:
            self.front.send_multipart([ident, P.encode(self._answer(msg, frames[1], cno))])
        elif kind is P.Events:
            if cno is None or len(frames) < 3:
                raise P.ProtocolError("events from an unknown client, or without a batch")
            try:  # published only if every event is the sender's own
                E.check_client_batch(frames[2].buffer, cno)
            except E.EventFormatError as exc:
                raise P.ProtocolError(str(exc)) from None
            self.events.forward(frames[2])
        elif kind is P.Bye:
            if cno is not None:
                self._drop_client(cno)
        else:
            raise P.ProtocolError(f"unexpected {kind.__name__} from a client")

    def _keep_srclocs(self, cno: int, srclocs: list) -> None:
        locs = self._srclocs.setdefault(cno, {})
        room = MAX_SRCLOCS - len(locs)  # a snapshot carries them all: keep them bounded
        if room > 0:
            locs.update((k, v[:MAX_SRCLOC_TEXT]) for k, v in srclocs[:room])

    def tell_route(self, c: Any) -> None:
        """Tell a client when whether its batches may go straight to its worker changes: not
        while a shard config or a placed tensor of its own makes the planner rewrite them."""
        direct = not self.placement.wants(c.cno)
        if direct is not c.direct:
            c.direct = direct
            self.front.send_multipart([c.ident, P.encode(P.Route(direct))])

    def _answer(self, msg: P.Control, frame: Any, tenant: int | None = None) -> P.Reply:
        role, name = security.role_of(frame), security.tenant_of(frame)
        try:
            return P.Reply(True, self.answer(msg.request, msg.args, role, tenant, name))
        except ValueError as exc:  # a refused request (unknown, bad config, wrong token)
            return P.Reply(False, str(exc))

    def _hello(self, ident: bytes, info: dict, frame: Any = None) -> None:
        name = info.get("tenant")
        if name is not None and name not in self.keyring.tenants.values():
            text = (
                f"tenant {name}'s key was taken out of this cluster's keys (gt keys tenant remove)"
            )
            self.front.send_multipart([ident, P.encode(P.Error(P.E_REVOKED, text))])
            return
        if ident in self._client_by_ident:
            self._drop_client(self._client_by_ident[ident], "reconnected")
        c = self.planner.add_client(ident, info, self.clock.now())
        if c is None:  # no worker: wait for one that is starting, else say so at once
            if self.can_wait_for_a_worker():
                self._pending_hellos.append((ident, info, self.clock.now()))
            else:
                err = P.Error(P.E_NO_WORKERS, self.no_workers_text())
                self.front.send_multipart([ident, P.encode(err)])
            return
        self._client_by_ident[ident] = c.cno
        if frame is not None:  # watched by its connection from now on, before it hears back (a
            # program killed at once then goes at once; its close cannot come before this)
            self.heard("client", c.cno, frame, "front", ident)
        workers = [
            {
                "id": w.wid,
                "host": w.info.get("host"),
                "data": w.info.get("data"),
                "data_key": w.info.get("data_key"),
                "device": w.info.get("device"),
                "backend": w.info.get("backend"),
            }
            for w in self.planner.alive_workers()
        ]
        c.direct = not self.placement.wants(c.cno)
        settings = {**self._settings(), "liveness": self.client_timeout, "direct": c.direct}
        self.front.send_multipart([ident, P.encode(P.Welcome(c.cno, c.home, workers, settings))])
        self.events.emit(
            E.CLIENT_JOINED,
            {
                "client": c.cno,
                "home": c.home,
                "host": info.get("host"),
                "pid": info.get("pid"),
                "argv": info.get("argv"),
                "tenant": name,
            },
        )

    def _drop_client(self, cno: int, reason: str = "bye") -> None:
        c = self.planner.remove_client(cno)
        if c is None:
            return
        self.events.emit(E.CLIENT_LEFT, {"client": cno, "reason": reason})
        self._client_by_ident.pop(c.ident, None)
        self._srclocs.pop(cno, None)
        placed = self.placement.clients.get(cno)
        everywhere = placed is not None and placed.placed
        self.placement.drop(cno)
        for w in self.planner.alive_workers():
            if w.wid == c.home or everywhere:
                self.back.send_multipart([w.ident, P.encode(P.DropClient(cno))])

    def _plan_batch(self, c: Any, seq: int, frames: list, signals: list | None) -> None:
        """Rewrite one client batch with the placement planner and queue its per-worker parts."""
        # Never leave a batch unanswered (the client would wait for it): a malformed body is bad
        # input, anything else that escapes the planner is a bug in GT.
        try:
            instrs, frees, free_at = P.parse_body(frames[2].buffer)
            alive = [w.wid for w in self.planner.alive_workers()]
            prog = self.placement.plan(c.cno, c.home, instrs, frees, alive, signals, free_at)
        except Exception as exc:
            if isinstance(exc, P.ProtocolError):
                self.bad_messages += 1
            else:
                self._internal_error("planning a batch")
            err = [f"the dispatcher could not plan this batch: {type(exc).__name__}: {exc}", -1, 0]
            self.front.send_multipart([c.ident, P.encode(P.Ack(seq, [err]))])
            return
        for tb in prog.internal:
            self._internal_error("placing an instruction", tb)
        self.batches_planned += 1
        batch = MultiBatch.from_program(prog, seq, c.home, frames[3:], len(instrs))
        if prog.errors:
            c.errors += len(prog.errors)
        self._send_batches(self.planner.submit(c.cno, batch))

    def _send_batches(self, sends: list) -> None:
        back = self.back
        ev = self.events
        for w, c, payload in sends:
            seq, n, rest = payload[0], payload[1], payload[2]
            self.batches_routed += 1
            w.running[(c.cno, seq)] += 1  # its Done, and data for its client, come from w alone
            planned = len(payload) > 3  # a part the planner wrote (a forwarded batch has 3)
            # a forwarded batch runs whole on w, which may acknowledge it with its last fetch
            run = P.encode(P.Run(c.cno, seq, n, c.info.get("token"), planned,
                                 c.info.get("tenant"), not planned))  # fmt: skip
            t = ev.now()
            send_parts(back, [w.ident, run, *rest])
            if ev.enabled:  # (after the send: the worker need not wait for the event)
                ev.emit(
                    E.DISPATCHED,
                    {
                        "client": c.cno,
                        "batch": seq,
                        "workers": [w.wid],
                        "n": n,
                        "rewrite": payload[3] if planned else None,
                        "queued_ns": None,
                    },
                    t,
                )

    # ------------------------------------------------------------------ housekeeping
    def _housekeeping(self, now: float) -> None:
        self.check_peers()
        if self.keyring is not None:  # a tenant removed: its programs end (one stat a turn)
            self.keyring.refresh_tenants()
            gone = self.keyring.take_revoked()
            if gone:
                self._revoke(gone)
        if now >= self._next_stats:
            self._next_stats = now + 0.1
            self._emit_stats()
        self.events.tick()

    def _revoke(self, names: list[str]) -> None:
        """End the programs of tenants whose keys were removed (their new connections are
        refused by the ZAP handler, which reads the same keyring)."""
        for c in list(self.planner.clients.values()):
            name = c.info.get("tenant")
            if name in names:
                text = f"tenant {name}'s key was taken out of this cluster's keys"
                self.front.send_multipart([c.ident, P.encode(P.Error(P.E_REVOKED, text))])
                self._drop_client(c.cno, "revoked")

    # ------------------------------------------------------------------ control
    def _on_control(self, frames: list) -> None:
        ident = frames[0].bytes
        try:
            msg = P.parse(frames[-1].buffer)
            if type(msg) is not P.Control:
                raise P.ProtocolError("the control socket takes Control requests")
            reply = self._answer(msg, frames[-1])
        except P.ProtocolError as exc:
            self.bad_messages += 1
            reply = P.Reply(False, str(exc))
        self.control.send_multipart([ident, *frames[1:-1], P.encode(reply)])

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Stop workers we started, tell clients, remove the discovery file, close sockets."""
        if self.ctx.closed:
            return
        bye = P.encode(P.Error(P.E_SHUTDOWN, self.shutdown_reason or "the dispatcher shut down"))
        waiting = [ident for ident, _info, _t in self._pending_hellos]
        for ident in [c.ident for c in self.planner.clients.values()] + waiting:
            try:
                self.front.send_multipart([ident, bye], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
        for w in self.planner.alive_workers():
            try:
                self.back.send_multipart([w.ident, _STOP], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
        deadline = time.monotonic() + 2.0
        for proc in self.children:
            try:
                proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.events.close()
        if self.ipc_dir is not None:
            discovery.release_ipc_dir(self.ipc_dir)
        if self.discovery_file is not None:
            try:
                os.unlink(self.discovery_file)
            except OSError:
                pass
        for s in (self.front, self.back, self.control, *self.monitors.values()):
            s.close(0)
        if self.guard is not None:
            self.guard.close()  # its ZAP socket must go before the context can end
        self.ctx.term()  # ends zmq.proxy on its thread, which then closes the bus sockets
