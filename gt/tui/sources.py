"""Where the monitor's cluster state comes from.

A *source* owns a :class:`~gt.trace.model.ClusterModel` and hands the app an immutable
:class:`~gt.trace.state.ClusterState` on request (:meth:`Source.snapshot`), plus a
:class:`~gt.tui.tables.Status` for the header. The app never waits on a source:

* :class:`LiveSource` runs a background thread that subscribes to a dispatcher's event bus, and
  once the subscription is up asks its control endpoint for a snapshot (so no event falls between
  the two), folds events into the model and publishes a fresh state a few times per second, and at
  once when the snapshot arrives; the UI only reads the latest reference.
* :class:`ListSource` folds an in-memory list of events once, with a fixed clock (tests,
  screenshots); :meth:`ListSource.from_trace` takes them from a recording, as the live view
  showed them at one moment.
* :class:`gt.tui.replay.ReplaySource` plays recorded batches against a clock that can pause,
  change speed and seek.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

import zmq
from zmq.utils.monitor import recv_monitor_message

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime import security
from gt.runtime.control import ControlError as ControlError  # re-exported for the screens
from gt.runtime.control import request
from gt.runtime.liveness import run_clock_offset, watch
from gt.trace import events as E
from gt.trace.keyframes import attach
from gt.trace.model import TIMELINE_NS, WINDOW_NS, ClusterModel
from gt.trace.reader import Reader
from gt.trace.state import ClusterState
from gt.tui.render import human_duration
from gt.tui.tables import Status

Batch = tuple[str, int, list]
#: The roles a monitor connects as (an admin key also lets it apply configs).
MONITOR_ROLES = ("admin", "monitor")
#: The longest a live source's collector waits for the app to answer one key or click.
GIVE_WAY_MAX_S = 0.15


def control_request(
    endpoint: str, what: str, args: object = None, *, timeout: float = 3.0
) -> object:
    """One blocking control request (``ping``, ``stats``, ``snapshot``, ``endpoints``, ...).

    Works against the control endpoint and the front endpoint alike. Not for the UI thread.

    Raises:
        ControlError: no answer within ``timeout`` seconds, a malformed answer, or a refusal.
    """
    return request(endpoint, what, args, timeout=timeout)


class Source:
    """The interface the app uses (and the shared view handling: zoom and pause).

    Args:
        op_names: opcode -> name for the model (default ``gt.runtime.ops.OPS``).
        window_ns: the model's window for shares and rates.
        count_gaps: count sequence gaps as drops (see :class:`~gt.trace.model.ClusterModel`).
    """

    kind = "source"

    def __init__(self, op_names: Sequence[str] | None = None, *, window_ns: int = WINDOW_NS,
                 count_gaps: bool = True):  # fmt: skip
        self.model = ClusterModel(O.OPS if op_names is None else op_names, window_ns=window_ns,
                                  count_gaps=count_gaps)  # fmt: skip
        self.timeline_ns = TIMELINE_NS
        self.frozen_end: int | None = None  # the timeline's right edge while paused
        # called (on the source's own thread) when a state should be drawn without waiting for
        # the next repaint, e.g. the first snapshot; the app sets it
        self.on_update: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Begin collecting (no-op for sources that need no thread)."""

    def give_way(self, seconds: float) -> None:
        """The app is answering a key or a click: collecting may wait up to ``seconds`` (no-op
        for sources that need no thread)."""

    def stop(self) -> None:
        """Stop collecting and release every socket and thread."""

    def now(self) -> int:
        """The source's current time on the run clock."""
        return self.model.t_last or 0

    def status(self) -> Status:
        """Where the data comes from, for the header."""
        return Status(self.kind, None, True, self.kind)

    def set_view(self, *, timeline_ns: int | None = None, paused: bool | None = None) -> None:
        """Zoom the timeline and pause/resume its scrolling (takes effect on the next state)."""
        if timeline_ns is not None:
            self.timeline_ns = max(1_000_000, int(timeline_ns))
        if paused is not None:
            self.frozen_end = (self.frozen_end or self.now()) if paused else None

    def compute(self) -> ClusterState:
        """A fresh state from the model (callers hold no lock; this takes the source's)."""
        with self._lock:
            return self.model.state(
                self.now(), timeline_ns=self.timeline_ns, timeline_end_ns=self.frozen_end
            )

    def snapshot(self) -> ClusterState:
        """The latest state; cheap enough to call from the UI thread at the repaint rate."""
        return self.compute()


class ListSource(Source):
    """A fixed list of events or batches, folded once; the clock stands at ``now_ns``.

    Args:
        batches: ``(source, first_seq, events)`` batches, or plain events (``[kind, t, fields]``).
        now_ns: the fixed "now" (default: the newest event time).
        address: what the header shows as the source.
    """

    kind = "fixture"

    def __init__(
        self, batches: Sequence, *, now_ns: int | None = None, address: str | None = None, **kw
    ):
        super().__init__(**kw)
        items = list(batches)
        if items and isinstance(items[0][2], list):  # batches: (source, first_seq, [events])
            for source, first, events in items:
                self.model.apply_batch(source, first, events)
        else:
            self.model.apply_events(items)
        self._now = now_ns if now_ns is not None else (self.model.t_last or 0)
        self.address = address
        self._cache: tuple[tuple, ClusterState] | None = None

    @classmethod
    def from_trace(cls, path: str | os.PathLike[str], at_ns: int | None = None,
                   **kw: object) -> ListSource:  # fmt: skip
        """A recording as ``gt top`` showed it live at ``at_ns`` (run clock; default: its end):
        every event up to that moment, folded once, the clock standing there.

        Raises:
            gt.trace.reader.TraceFormatError: the file is not a readable trace.
        """
        with Reader(path) as reader:
            names = reader.header.get("op_names")
            if names:
                kw.setdefault("op_names", tuple(names))
            kw.setdefault("count_gaps", False)  # the recorder wrote a drop event for every gap
            at = reader.t_last if at_ns is None else at_ns
            src = cls([], now_ns=at, address=os.path.basename(path), **kw)
            attach(src.model, reader.header.get("workers"))  # those that joined before recording
            for b in reader.batches(t_end=at):
                events = []
                for ev in b.events:  # a prefix, so the sequence numbers stay contiguous
                    if ev[1] > at:
                        break
                    events.append(ev)
                if events:
                    src.model.apply_batch(b.source, b.first_seq, events)
        src.kind = "recording"
        return src

    def now(self) -> int:
        return self._now

    def status(self) -> Status:
        return Status(self.kind, self.address, True, "recorded")

    def snapshot(self) -> ClusterState:
        key = (self.timeline_ns, self.frozen_end)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self.compute())
        return self._cache[1]


class LiveSource(Source):
    """Subscribes to a running dispatcher; a background thread folds events and publishes states.

    Args:
        endpoints: the dispatcher's endpoints (needs ``events`` and ``control``; ``front`` is shown).
        hz: how often the collector publishes a fresh state.
        resolve: called while disconnected to find the dispatcher again (it may come back on new
            ports); returns new endpoints or ``None``.
        ping_s: seconds between control requests (``stats``: liveness plus fresh queue numbers);
            ``dead_s``: silence after which it is disconnected.
        subscribe_s: how long to wait for the event subscription before asking for the snapshot
            anyway (an events endpoint that does not answer must not keep the screen empty).
    """

    kind = "live"

    def __init__(self, endpoints: dict, *, hz: float = 8, resolve: Callable[[], dict | None] | None = None,
                 ping_s: float = 1.0, dead_s: float = 3.0, subscribe_s: float = 1.0, **kw):  # fmt: skip
        super().__init__(**kw)
        self.endpoints = dict(endpoints)
        self.period = 1.0 / max(0.5, hz)
        self.resolve = resolve
        self.ping_s, self.dead_s, self.subscribe_s = ping_s, dead_s, subscribe_s
        self.connected = False
        self.detail = "connecting"
        self.offset: int | None = None  # run clock - local monotonic clock
        self.dispatcher_pid: int | None = None
        self.received = 0
        self._latest = self.compute()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()  # set once the first snapshot's state is published
        self.subscribed = threading.Event()  # the event subscription is up (tests read it)
        self.give_way_until = 0.0  # monotonic time before which the collector waits
        self.silent_since: float | None = None  # disconnected: the last answer (monotonic s)

    def now(self) -> int:
        if self.offset is None:
            return self.model.t_last or 0
        # (disconnected, the clock stands at the last answer: what the monitor knew)
        lost = self.silent_since
        return (time.monotonic_ns() if lost is None else int(lost * 1e9)) + self.offset

    def status(self) -> Status:
        detail, lost = self.detail, self.silent_since
        if not self.connected and lost is not None:
            detail = f"disconnected: no answer for {human_duration(time.monotonic() - lost)}"
        return Status(self.kind, self.endpoints.get("front"), self.connected, detail)

    def snapshot(self) -> ClusterState:
        return self._latest

    def set_view(self, *, timeline_ns: int | None = None, paused: bool | None = None) -> None:
        super().set_view(timeline_ns=timeline_ns, paused=paused)
        self._latest = self.compute()  # the new view now (under the model's lock), not next tick

    def give_way(self, seconds: float) -> None:
        # The collector folds events with the GIL held for up to 5 ms at a time (Python's switch
        # interval), so a render that has to take the GIL back from it runs about half speed.
        # Events wait in the socket meanwhile (the state shown is that much older, nothing lost).
        self.give_way_until = max(
            self.give_way_until, time.monotonic() + min(seconds, GIVE_WAY_MAX_S)
        )

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gt-top-collector", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # ------------------------------------------------------------------ collector thread
    def _run(self) -> None:
        ctx = zmq.Context()
        try:
            _Collector(self, ctx).loop()
        finally:
            ctx.destroy(linger=0)


class _Collector:
    """The socket side of :class:`LiveSource` (runs only on its thread)."""

    def __init__(self, src: LiveSource, ctx: zmq.Context):
        self.src, self.ctx = src, ctx
        self.sub = self.dealer = self.monitor = None
        self.opened = 0.0  # when the sockets were opened
        self.pending: tuple[str, float] | None = None  # (request, sent at)
        self.last_reply = self.last_event = 0.0
        self.next_ping = 0.0
        self.lost_since: float | None = time.monotonic()
        self.uptime = 0.0  # the dispatcher's uptime at its last answer
        self._open()

    def _open(self) -> None:
        """Subscribe to the events, then (see :meth:`_subscribed`) ask for the snapshot.

        Subscribing first is what makes the snapshot plus the events complete: everything the
        dispatcher emits after answering arrives on the subscription. A ZeroMQ subscription is
        only in place once the connection's handshake is done, so the snapshot waits for it.
        """
        self._close()
        ep = self.src.endpoints
        self.src.subscribed.clear()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.RCVHWM, 100_000)
        self.sub.setsockopt(zmq.SUBSCRIBE, E.TOPIC)
        self.monitor = watch(self.sub, zmq.EVENT_HANDSHAKE_SUCCEEDED)
        security.secure_connect(self.sub, ep["events"], MONITOR_ROLES)  # CURVE over TCP
        self.sub.connect(ep["events"])
        self.dealer = self._control_socket()
        self.pending = None
        self.opened = time.monotonic()

    def _control_socket(self) -> zmq.Socket:
        d = self.ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        ep = self.src.endpoints["control"]
        security.secure_connect(d, ep, MONITOR_ROLES)
        d.connect(ep)
        return d

    def _subscribed(self) -> None:
        """The subscription is up (or waiting longer would only delay the first screen)."""
        if self.monitor is not None:
            try:
                self.sub.disable_monitor()
            except zmq.ZMQError:
                pass
            self.monitor.close(0)
            self.monitor = None
        self.src.subscribed.set()
        self.pending = None
        self._send("snapshot")

    def _on_monitor(self) -> None:
        try:
            event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
        except zmq.ZMQError:
            return
        if event.get("event") == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._subscribed()

    def _close(self) -> None:
        if self.monitor is not None:
            self.monitor.close(0)
            self.monitor = None
        for s in (self.sub, self.dealer):
            if s is not None:
                s.close(0)
        self.sub = self.dealer = None

    def _send(self, what: str) -> None:
        try:
            self.dealer.send(P.encode(P.Control(what, None)), zmq.NOBLOCK)
            self.pending = (what, time.monotonic())
        except zmq.ZMQError:
            self.pending = None

    def loop(self) -> None:
        src = self.src
        next_state = 0.0
        socks: tuple = ()
        poller = zmq.Poller()
        try:
            while not src._stop.is_set():
                self._give_way()
                if socks != (self.sub, self.dealer, self.monitor):  # new sockets: poll those
                    socks = (self.sub, self.dealer, self.monitor)
                    poller = zmq.Poller()
                    for sock in socks:
                        if sock is not None:
                            poller.register(sock, zmq.POLLIN)
                timeout = max(0.0, min(next_state - time.monotonic(), src.period))
                ready = dict(poller.poll(int(timeout * 1000)))
                # A key may have come while this thread slept in poll: answer it before folding.
                self._give_way()
                if self.monitor is not None and self.monitor in ready:
                    self._on_monitor()
                if self.sub in ready:
                    self._drain_events()
                if self.dealer in ready:
                    self._on_reply()
                now = time.monotonic()
                self._housekeeping(now)
                if now >= next_state and src.give_way_until <= now:  # (not while answering)
                    next_state = now + src.period
                    src._latest = src.compute()
        finally:
            self._close()

    def _give_way(self) -> None:
        """Wait while the app answers a key or a click (see :meth:`LiveSource.give_way`)."""
        src = self.src
        wait = src.give_way_until - time.monotonic()
        if wait > 0:
            src._stop.wait(min(wait, GIVE_WAY_MAX_S))

    def _drain_events(self) -> None:
        src = self.src
        model = src.model
        for i in range(2000):  # bounded, so states still get published under a flood
            if i % 16 == 15 and src.give_way_until > time.monotonic():
                break  # a key came mid-drain: the rest waits in the socket, nothing is lost
            try:
                frames = self.sub.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            if len(frames) != 2:
                continue
            try:
                source, first, events = E.unpack_batch(frames[1].buffer)
            except E.EventFormatError:
                model.bad_events += 1
                continue
            with src._lock:
                model.apply_batch(source, first, events)
            src.received += len(events)
            self.last_event = time.monotonic()
        if src.offset is None and model.t_last is not None:
            src.offset = model.t_last - time.monotonic_ns()

    def _on_reply(self) -> None:
        src = self.src
        try:
            msg = P.parse(self.dealer.recv_multipart()[-1])
        except P.ProtocolError:
            return
        what = self.pending[0] if self.pending else None
        self.pending = None
        self.last_reply = time.monotonic()
        if type(msg) is not P.Reply or not msg.ok:
            return
        payload = msg.payload
        if what == "ping" and isinstance(payload, dict):
            pid = payload.get("pid")
            if src.dispatcher_pid is not None and pid != src.dispatcher_pid:
                self._new_run()  # the dispatcher restarted: start over with a fresh model
                return
            src.dispatcher_pid = pid
        elif what == "stats" and isinstance(payload, dict):
            uptime = payload.get("uptime")
            if isinstance(uptime, (int, float)) and uptime + 0.5 < self.uptime:
                self._new_run()  # uptime went back: a new dispatcher on the same endpoints
                return
            self.uptime = float(uptime) if isinstance(uptime, (int, float)) else self.uptime
            with src._lock:  # fresh in-flight and queue numbers, and rates when tracing is off
                src.model.apply_snapshot(payload, t_ns=src.now())
        elif what == "snapshot" and isinstance(payload, dict):
            if type(payload.get("clock")) is int:
                src.offset = run_clock_offset(payload["clock"], payload.get("boot"))
            if isinstance(payload.get("uptime"), (int, float)):
                self.uptime = float(payload["uptime"])
            with src._lock:
                src.model.apply_snapshot(payload)
            self._set_connected(True)
            # the snapshot is the whole cluster: show it now, not at the next period
            src._latest = src.compute()
            src.ready.set()
            notify = src.on_update
            if notify is not None:
                notify()
            self._send("ping")
            return
        self._set_connected(True)

    def _new_run(self, ask: bool = True) -> None:
        src = self.src
        with src._lock:
            src.model = ClusterModel(
                src.model.op_names, window_ns=src.model.window_ns, count_gaps=src.model.count_gaps
            )
        src.dispatcher_pid = None
        src.offset = None
        self.uptime = 0.0
        if ask:
            self._send("snapshot")

    def _set_connected(self, ok: bool, why: str = "") -> None:
        src = self.src
        src.connected = ok
        src.detail = "connected" if ok else f"disconnected: {why}"
        src.silent_since = None if ok else max(self.last_reply, self.last_event) or time.monotonic()
        self.lost_since = None if ok else (self.lost_since or time.monotonic())

    def _housekeeping(self, now: float) -> None:
        src = self.src
        if self.monitor is not None:  # still waiting for the subscription
            if now - self.opened > src.subscribe_s:
                self._subscribed()
            return
        if self.pending is not None and now - self.pending[1] > src.dead_s:
            # No answer: drop the stale request (a fresh DEALER forgets it) and say so.
            self.dealer.close(0)
            self.dealer = self._control_socket()
            self.pending = None
            if now - self.last_event > src.dead_s:
                self._set_connected(False, "no answer")
        if not src.connected and self.lost_since is not None and src.resolve is not None \
                and now - self.lost_since > src.dead_s:  # fmt: skip
            self.lost_since = now  # try again after another dead_s
            try:
                found = src.resolve()
            except Exception:
                found = None
            if (
                found
                and found.get("events")
                and found.get("control")
                and _where(found) != _where(src.endpoints)
            ):
                src.endpoints = dict(found)
                self._new_run(ask=False)
                self._open()  # asks for a snapshot
        if self.pending is None and now >= self.next_ping:
            self.next_ping = now + src.ping_s
            self._send("stats" if src.ready.is_set() else "snapshot")


def _where(endpoints: dict) -> tuple:
    """What identifies a dispatcher's sockets (discovery files and replies carry more keys)."""
    return endpoints.get("events"), endpoints.get("control")
