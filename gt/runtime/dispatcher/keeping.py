"""The dispatcher's watch over its peers: who is alive, who is lost, and local workers' lives.

A mixin of :class:`gt.runtime.dispatcher.loop.Dispatcher` (see :mod:`gt.runtime.liveness` for the
rules): local worker processes are watched through the OS and never timed out; a remote peer is
lost when its connection closes and it does not come back within a short grace, or when it stays
silent for the (long) timeout on the dispatcher's running clock. A local worker that dies (killed,
or stopped by a GPU that failed under it) is started again in its slot, so on its GPU, at most
:data:`RESTARTS` times within :data:`RESTART_WINDOW_S`; when every worker is gone for good, the
dispatcher says so to every client that asks, instead of queueing them forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import deque
from typing import Any

import zmq

from gt.runtime import protocol as P
from gt.runtime.launch import spawn_worker
from gt.runtime.liveness import (
    DEFAULT_RECONNECT_GRACE,
    DEFAULT_TIMEOUT,
    RunningClock,
    env_seconds,
    heartbeat_options,
    read_event,
    source_fd,
    watch_disconnects,
)

#: Restarts of one local worker's slot allowed per :data:`RESTART_WINDOW_S`.
RESTARTS = 2
RESTART_WINDOW_S = 60.0
#: Clients waiting for a worker to register at most (more are refused at once).
MAX_PENDING_HELLOS = 1000


class PeerKeeping:
    """Liveness and local workers, for the dispatcher (a mixin; see the module docstring)."""

    back: zmq.Socket
    front: zmq.Socket
    planner: Any
    children: list[subprocess.Popen]
    endpoints: dict
    _pending_hellos: list
    _stop: Any

    def _init_keeping(self, worker_timeout: float | None, client_timeout: float | None) -> None:
        self.worker_timeout = worker_timeout or env_seconds("GT_WORKER_TIMEOUT", DEFAULT_TIMEOUT)
        self.client_timeout = client_timeout or env_seconds("GT_CLIENT_TIMEOUT", DEFAULT_TIMEOUT)
        self.reconnect_grace = env_seconds("GT_RECONNECT_GRACE", DEFAULT_RECONNECT_GRACE)
        self.clock = RunningClock(period=0.1, stall=1.0)
        heartbeat_options(self.back, self.worker_timeout)
        heartbeat_options(self.front, self.client_timeout)
        self.monitors = {
            "back": watch_disconnects(self.back),
            "front": watch_disconnects(self.front),
        }
        # (socket, fd) -> (kind, pid, routing id) of the connection; and the (socket, routing id)
        # pairs whose fd is known, so a message on a known connection costs one set lookup
        self._fd_owner: dict[tuple[str, int], tuple[str, int, bytes]] = {}
        self._fd_known: set[tuple[str, bytes]] = set()
        self._cut: dict[tuple[str, int], float] = {}  # peer -> running time its connection closed
        self.local_workers = 0
        self._local_pids: set[int] = set()
        self._slot_of: dict[int, int] = {}  # a local worker's pid -> its slot (so its GPU)
        self._restarts: dict[int, deque[float]] = {}  # slot -> when it was restarted lately
        self._given_up: set[int] = set()  # slots whose worker is not started again
        self.shutdown_reason: str | None = None

    # ------------------------------------------------------------------ hearing from peers
    def heard(self, kind: str, pid: int, frame: Any, sock_name: str, ident: bytes) -> None:
        """A message arrived from worker or client ``pid`` (``kind``) on the connection with
        routing id ``ident``: it is alive, and that connection is its own."""
        if (sock_name, ident) not in self._fd_known:  # (forgotten when that connection closes)
            # A new connection may have the fd of one that closed since the housekeeping last
            # read the monitors: read them first, or that close would be taken for this one's.
            self.on_monitor_events()
            fd = source_fd(frame)
            if fd is not None:
                old = self._fd_owner.get((sock_name, fd))
                if old is not None:  # the OS reused the fd of a connection whose close we missed
                    self._fd_known.discard((sock_name, old[2]))
                self._fd_owner[(sock_name, fd)] = (kind, pid, ident)
                self._fd_known.add((sock_name, ident))
        if self._cut:
            self._cut.pop((kind, pid), None)

    def on_monitor_events(self) -> None:
        """Note connections that closed (read from the front and back monitor sockets)."""
        for name, mon in self.monitors.items():
            while (ev := read_event(mon)) is not None:
                event, fd = ev
                if event == zmq.EVENT_DISCONNECTED:
                    owner = self._fd_owner.pop((name, fd), None)
                    if owner is not None:
                        self._fd_known.discard((name, owner[2]))
                        self._cut.setdefault(owner[:2], self.clock.now())

    # ------------------------------------------------------------------ local workers
    def start_local_workers(self, n: int) -> None:
        """Start ``n`` worker processes connected to our back endpoint (they die with us)."""
        back = self.endpoints["back"]
        self.adopt_local_workers(
            [spawn_worker(back, parent_pid=os.getpid(), n_workers=n) for _ in range(n)]
        )

    def adopt_local_workers(self, procs: list[subprocess.Popen]) -> None:
        """Count ``procs`` (``gt worker`` children of this process, connected to our back
        endpoint) as our local workers: watched through the OS, restarted if they all die."""
        self.local_workers = max(self.local_workers, len(procs))
        for proc in procs:
            self.children.append(proc)
            self._local_pids.add(proc.pid)
            slot = _slot(proc)
            if slot is not None:
                self._slot_of[proc.pid] = slot

    def is_local(self, info: dict) -> bool:
        """Whether a registering worker is one of our own child processes."""
        return info.get("pid") in self._local_pids

    def starting(self) -> int:
        """Local workers started but not registered yet (and still running)."""
        registered = {w.info.get("pid") for w in self.planner.workers.values()}
        return sum(1 for p in self.children if p.poll() is None and p.pid not in registered)

    # ------------------------------------------------------------------ the checks
    def check_peers(self) -> None:
        """Run from the loop's housekeeping: find lost workers and clients."""
        now = self.clock.tick()
        died = []
        for proc in self.children:
            code = proc.poll()
            if code is not None:
                died.append(proc)
                for w in self.planner.workers.values():
                    if w.alive and w.info.get("pid") == proc.pid:
                        self._worker_lost(w.wid, f"exited with code {code}")
        self.children = [p for p in self.children if p.poll() is None]
        for proc in died:
            self._restart(proc, now)
        self.on_monitor_events()
        for (kind, pid), at in list(self._cut.items()):
            if now - at > self.reconnect_grace:
                del self._cut[(kind, pid)]
                why = (
                    f"closed its connection and did not come back within {self.reconnect_grace:g}s"
                )
                self._lose(kind, pid, why)
        for w in list(self.planner.workers.values()):
            if w.alive and not w.local and now - w.last_seen > self.worker_timeout:
                self._worker_lost(w.wid, f"sent nothing for {self.worker_timeout:g}s")
        for c in list(self.planner.clients.values()):
            if now - c.last_seen > self.client_timeout:
                self._drop_client(c.cno, f"silent for {self.client_timeout:g}s")
        if not self.planner.alive_workers():
            self._no_workers(now)

    def _lose(self, kind: str, pid: int, why: str) -> None:
        if kind == "worker":
            w = self.planner.workers.get(pid)
            if w is not None and w.alive:
                self._worker_lost(pid, why)
        elif pid in self.planner.clients:
            self._drop_client(pid, why)

    def _restart(self, proc: subprocess.Popen, now: float) -> None:
        """Start a local worker that died again, in its slot (on its GPU), unless that slot has
        used its restarts (then it stays down, and says so)."""
        slot = self._slot_of.pop(proc.pid, None)
        if slot is None or self._stop.is_set():
            return
        times = self._restarts.setdefault(slot, deque())
        while times and now - times[0] > RESTART_WINDOW_S:
            times.popleft()
        if len(times) >= RESTARTS:
            print(f"gt dispatcher: local worker {slot} died {RESTARTS + 1} times within "
                  f"{RESTART_WINDOW_S:g}s; it is not started again", file=sys.stderr)  # fmt: skip
            self._given_up.add(slot)
            return
        times.append(now)
        back = self.endpoints["back"]
        self.adopt_local_workers(
            [spawn_worker(back, parent_pid=os.getpid(), n_workers=self.local_workers, slot=slot)]
        )

    def _no_workers(self, now: float) -> None:
        """Every worker is gone: wait for local ones starting again, else tell waiting clients
        (and, if this dispatcher's own workers died as often as they may, stop)."""
        if self.starting():
            return
        # ours, and none will start again (also when none ever registered: a worker that cannot
        # start, a bad GT_BACKEND say, must not leave the program waiting for it)
        if self.local_workers and (
            self.planner.workers or len(self._given_up) >= self.local_workers
        ):
            self.shutdown_reason = (
                f"all {self.local_workers} local worker(s) died {RESTARTS + 1} times within "
                f"{RESTART_WINDOW_S:g}s; the dispatcher stops"
            )
            self._stop.set()
            return
        self.refuse_pending_hellos()

    def refuse_pending_hellos(self) -> None:
        """Answer clients waiting for a worker that will not come: no workers, and why."""
        if not self._pending_hellos:
            return
        text = self.no_workers_text()
        for ident, _info, _t in self._pending_hellos:
            self.front.send_multipart([ident, P.encode(P.Error(P.E_NO_WORKERS, text))])
        self._pending_hellos.clear()

    def no_workers_text(self) -> str:
        lost = [w for w in self.planner.workers.values() if not w.alive]
        why = f" ({len(lost)} lost)" if lost else ""
        return (
            f"the dispatcher at {self.endpoints['front']} has no workers{why}; add one with "
            f"`gt worker --connect {self.endpoints['front']}`"
        )

    def can_wait_for_a_worker(self) -> bool:
        """Whether a client that arrives while no worker is alive should wait (one is starting)."""
        return bool(self.starting()) and len(self._pending_hellos) < MAX_PENDING_HELLOS

    # implemented by the dispatcher
    def _worker_lost(self, wid: int, reason: str) -> None: ...

    def _drop_client(self, cno: int, reason: str = "bye") -> None: ...


def _slot(proc: subprocess.Popen) -> int | None:
    """The ``--slot`` a local worker was started with (see :func:`gt.runtime.launch.spawn_worker`)."""
    args = proc.args if isinstance(proc.args, list) else []
    try:
        return int(args[args.index("--slot") + 1])
    except (ValueError, IndexError):
        return None
