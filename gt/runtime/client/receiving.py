"""How a client connection hears from its dispatcher: the poll loop behind every sync point, the
flush timer thread, what each kind of message does and the errors workers send back (a mixin of
:class:`gt.runtime.client.connection.Connection`, whose state it uses)."""

from __future__ import annotations

import time

import zmq

from gt.errors import DispatcherLost, GTTimeout, WorkerError, WorkerLost, worker_error_class
from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.client.signals import refuse_signals
from gt.runtime.liveness import DEFAULT_RECONNECT_GRACE, read_event
from gt.runtime.sockets import take


def error_key(err: list) -> tuple:
    """A worker error ``[message, opcode, src]`` as a hashable key."""
    return (str(err[0]), err[1], err[2])


_HEARTBEAT = P.encode(P.Heartbeat())
#: How often (seconds of the running clock) a waiting client looks whether its dispatcher is gone:
#: its process, its connection's monitor, its silence. Not at every wake: that is a system call or
#: two on every reply, and a cut connection has a grace of seconds anyway.
LOOK_S = 0.05
#: Seconds (running clock) a client waits, after its worker refused a direct batch, for its
#: dispatcher to say why (a revoked key, a dropped client) before it gives the worker's reason.
REFUSED_GRACE_S = 2.0
#: Flush ticks (2 ms each) without an op or a batch before the timer thread sleeps until woken.
QUIET_TICKS = 25


class Receiving:
    """Receiving and the timer thread (see the module docstring)."""

    def _wait_slice(self) -> float:
        return min(self.heartbeat_interval, 0.5)

    def _pump(self, wait: float) -> None:
        """Handle whatever arrives within ``wait`` seconds; detect a silent dispatcher."""
        now = time.monotonic()
        if now - self._last_sent >= self.heartbeat_interval:
            self._sock.send(_HEARTBEAT)
            self._last_sent = now
        events = dict(self._poller.poll(int(wait * 1000)))
        # Drain by asking the socket whether more is waiting: cheaper than catching zmq.Again.
        running = self._clock.tick()
        if self._direct is not None and self._direct in events:  # (a fetch waits for this)
            direct = self._direct
            frames = take(direct, ready=True)
            while frames is not None:
                self._handle(frames, direct=True)
                frames = take(direct)
        if self._sock in events:
            sock = self._sock
            frames = take(sock, ready=True)
            while frames is not None:
                self._handle(frames)
                frames = take(sock)
            self._last_heard = running
        if self._broken is None and running >= self._look_due:
            self._look_due = running + LOOK_S
            self._broken = self._lost(running)
        refused = self._refused
        if refused is not None and self._broken is None and running - refused[0] > REFUSED_GRACE_S:
            self._broken = DispatcherLost(f"the worker refused this program's batch: {refused[1]}")

    def _drain_in_flight(self, deadline: float, doing: str) -> None:
        """Wait until every batch sent is acknowledged."""
        while self._in_flight > 0:
            self._pump(self._wait_slice())
            if self._broken is not None:
                raise self._broken
            if time.monotonic() > deadline:
                raise GTTimeout(f"{doing}: no acknowledgement for {self.timeout:g}s (GT_TIMEOUT)")

    def worker_error(self, err: list) -> WorkerError:
        """Build the user-facing exception from a worker's ``[message, opcode, src]``."""
        msg, opcode, src = err[0], err[1], err[2]
        op = O.op_name(opcode)
        cls = worker_error_class(msg)
        return cls(msg, op, self.srclocs.get(src, "?"))

    def _lost(self, running: float) -> Exception | None:
        """Whether the dispatcher is gone: its process ended (a cluster we started), its
        connection closed and did not come back, or it was silent for ``liveness`` seconds."""
        cluster = self.cluster
        if cluster is not None and cluster.proc.poll() is not None:
            return DispatcherLost(
                f"the local cluster's dispatcher exited with code {cluster.proc.returncode}"
            )
        while (ev := read_event(self._monitor)) is not None:
            if ev[0] == zmq.EVENT_DISCONNECTED:
                self._cut_at = self._cut_at if self._cut_at is not None else running
            elif ev[0] == zmq.EVENT_CONNECTED:
                self._cut_at = None
        if self._cut_at is not None and running - self._cut_at > DEFAULT_RECONNECT_GRACE:
            return DispatcherLost(
                f"the dispatcher at {self.address} closed the connection and did not come back "
                f"within {DEFAULT_RECONNECT_GRACE:g}s (it stopped or crashed)"
            )
        if running - self._last_heard > self.liveness:
            return DispatcherLost(
                f"the dispatcher at {self.address} has not answered for {self.liveness:.0f}s"
            )
        return None

    def _seen(self, err: list) -> None:
        """A worker error a fetch raised: the sync point after it does not raise it again (it
        comes in the batch's acknowledgement too, before or after the fetch's reply)."""
        key = error_key(err)
        with self._lock:
            for i, e in enumerate(self._errors):
                if error_key(e) == key:
                    del self._errors[i]
                    return
            self._raised[key] += 1

    def _handle(self, frames: list, direct: bool = False) -> None:
        try:
            msg = P.parse(frames[0].buffer)
        except P.ProtocolError:
            return  # nothing legitimate sends us garbage; ignore rather than die
        kind = type(msg)
        if kind is P.Ack:
            if not msg.told:  # (told: the worker acknowledged it with its data already)
                self._in_flight -= 1
            for err in msg.errors:
                key = error_key(err)
                if self._raised[key]:  # (a fetch raised it already)
                    self._raised[key] -= 1
                else:
                    self._errors.append(err)
        elif kind is P.Data:
            buf = frames[1].buffer if len(frames) > 1 else None
            self._replies[msg.req] = (msg.dtype, msg.shape, msg.error, buf)
            if msg.ack is not None:  # the batch this fetch ended has run: no Ack will follow
                self._in_flight -= 1  # (but one that is told, if the batch's fence fails)
        elif kind is P.Reply:
            self._control_reply = (msg.ok, msg.payload)
        elif kind is P.Known:  # our worker runs batches we send it straight (worker.direct)
            if msg.client == self.client_no:
                self._direct_known = True
        elif kind is P.Route:
            self._direct_allowed = msg.direct
        elif kind is P.Error and direct:  # the worker refused a batch: the dispatcher says why
            if self._refused is None:
                self._refused = (self._clock.now(), msg.message)
        elif kind is P.Error and self._broken is None:  # (the first says why: later ones follow)
            if msg.code == P.E_WORKER_LOST:
                self._broken = WorkerLost(
                    f"{msg.message}. This connection can do no more: gt.disconnect() (or "
                    "gt.connect() anew) goes on with new tensors"
                )
            else:
                self._broken = DispatcherLost(f"dispatcher error ({msg.code}): {msg.message}")

    def _timer_loop(self) -> None:
        refuse_signals()  # (they go to the main thread, where Python runs their handlers)
        idle_wait = min(0.25, self.heartbeat_interval / 2)
        quiet_ticks, seen = 0, -1
        while not self._stop.is_set():
            # Quiet for QUIET_TICKS ticks (nothing queued, no batch sent): sleep until an op
            # arrives (or a heartbeat is due), not every 2 ms. While the program works, tick.
            sent = self.sent_batches
            quiet_ticks = quiet_ticks + 1 if sent == seen and not self._instrs else 0
            seen = sent
            if quiet_ticks >= QUIET_TICKS:
                self._timer_asleep = True
                if not self._instrs:  # (see Connection._append_locked)
                    self._wake.wait(idle_wait)
                self._timer_asleep = False
                self._wake.clear()  # (still quiet after it: back to sleep after one tick)
            if self._stop.wait(self.flush_interval):
                return
            self.events.tick()
            if self._instrs or self._frees:
                if time.monotonic() - self._first_pending < self.flush_interval and self._instrs:
                    continue
                if self._lock.acquire(blocking=False):
                    try:
                        if self._broken is None:
                            self._flush_locked()
                    except TypeError as exc:  # ops it could not encode: the program's next
                        self._unsent = exc  # flush raises this, from the program's own thread
                    except Exception:  # reported at the next sync point instead
                        pass
                    finally:
                        self._lock.release()
            elif time.monotonic() - self._last_sent >= self.heartbeat_interval:
                if self._lock.acquire(blocking=False):
                    try:
                        self._sock.send(_HEARTBEAT, zmq.NOBLOCK)
                        self._last_sent = time.monotonic()
                        self._drain_locked()
                    except zmq.ZMQError:
                        pass
                    finally:
                        self._lock.release()

    def _drain_locked(self) -> None:
        """Handle already-arrived messages without waiting (acks, errors)."""
        while True:
            frames = take(self._sock)
            if frames is None:
                return
            self._last_heard = self._clock.now()
            self._handle(frames)
