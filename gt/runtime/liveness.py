"""Telling slow from dead: the clocks and socket settings every process watches its peers with.

GT runs on shared machines, where a process is routinely descheduled for seconds (a loaded CPU, a
long GC pause, a ``SIGSTOP``). Being slow must never be taken for being dead, so:

* a local child process is watched through the OS (its exit is seen at once) and never timed out;
* a remote peer is watched by ZeroMQ itself: ZMTP heartbeats (:func:`heartbeat_options`) run in
  libzmq's I/O thread, so a busy Python loop cannot starve them, and a closed connection (a killed
  process, a broken link) shows as a disconnect event at once; on top of that an application
  timeout of tens of seconds (:data:`DEFAULT_TIMEOUT`);
* silence is counted on a :class:`RunningClock`, which does not advance while the watching process
  itself was not running, so a process never gives up on its peers because *it* was paused.

The pure parts (the clock) are here; the sockets stay in each process's shell.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

import zmq

#: Seconds a peer may stay silent (on the running clock) before it is declared lost.
DEFAULT_TIMEOUT = 60.0
#: Seconds a peer whose connection closed has to reconnect before it is declared lost.
DEFAULT_RECONNECT_GRACE = 3.0
#: ZMTP heartbeat period on every TCP connection, in seconds.
ZMTP_HEARTBEAT_S = 2.0


def _read_boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:  # not Linux: no way to tell, so clocks are always matched by a stamp
        return None


#: This machine's boot id (Linux): processes that share it read one ``CLOCK_MONOTONIC``.
BOOT_ID = _read_boot_id()


def run_clock_offset(clock: Any, boot: Any) -> int:
    """The run's clock minus this process's monotonic clock, in ns, from a peer's ``clock`` stamp
    (its ``time.monotonic_ns()`` when it sent it) and its ``boot`` id.

    On the same machine (same boot id) the two clocks are one clock and the offset is exactly 0;
    reading it off the stamp would add the message's delivery time, tens of milliseconds on a busy
    machine, and shift one process's events against another's by that much. Elsewhere the stamp
    is the estimate. (A container with its own time namespace shares the boot id but not the
    clock; GT does not detect that.)
    """
    if not isinstance(clock, int) or isinstance(clock, bool):
        return 0
    if boot is not None and boot == BOOT_ID:
        return 0
    return clock - time.monotonic_ns()


def env_seconds(name: str, default: float) -> float:
    """A duration in seconds from the environment (``default`` when unset or malformed)."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


class RunningClock:
    """Monotonic time that stands still while this process was not running.

    Call :meth:`tick` from the process's loop (it runs at least every ``period`` seconds). A gap
    longer than ``stall`` between two ticks means the process itself was descheduled, stopped or
    stuck in one long step; the excess is not counted, so a peer's silence over that gap is not
    held against it.

    Args:
        period: how often the owner's loop ticks, at most.
        stall: a gap between ticks longer than this is not counted (beyond ``period``).
    """

    def __init__(self, period: float = 0.1, stall: float = 1.0, now: float | None = None):
        self.period = period
        self.stall = max(stall, period)
        self._last = time.monotonic() if now is None else now
        self.stalled = 0.0  # seconds not counted so far

    def tick(self, now: float | None = None) -> float:
        """Advance; returns the running time."""
        t = time.monotonic() if now is None else now
        gap = t - self._last
        if gap > self.stall:
            self.stalled += gap - self.period
        self._last = t
        return t - self.stalled

    def now(self, now: float | None = None) -> float:
        """The running time (seconds, monotonic, less every stall seen by :meth:`tick`)."""
        t = time.monotonic() if now is None else now
        return t - self.stalled


def heartbeat_options(sock: zmq.Socket, timeout: float) -> None:
    """Turn on ZMTP heartbeats: libzmq pings the peer every :data:`ZMTP_HEARTBEAT_S` and drops the
    connection when no traffic came back for ``timeout`` seconds (a half-open TCP link, a host
    that vanished). Only TCP connections carry them; options for IPC or inproc do nothing."""
    sock.setsockopt(zmq.HEARTBEAT_IVL, int(ZMTP_HEARTBEAT_S * 1000))
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(timeout * 1000))
    sock.setsockopt(zmq.HEARTBEAT_TTL, int(timeout * 1000))


def watch_disconnects(sock: zmq.Socket) -> zmq.Socket:
    """A monitor socket that receives ``EVENT_ACCEPTED``/``EVENT_CONNECTED`` and
    ``EVENT_DISCONNECTED`` for ``sock`` (read it with :func:`read_event`)."""
    return watch(sock, zmq.EVENT_ACCEPTED | zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)


def watch(sock: zmq.Socket, events: int) -> zmq.Socket:
    """A monitor socket receiving ``events`` (a mask of ``zmq.EVENT_*``) of ``sock``."""
    # A name of our own: pyzmq's default names the socket's fd, and a closed socket's monitor
    # endpoint is unbound only when libzmq reaps it, so a new socket with the same fd could
    # collide with it ("Address already in use").
    addr = f"inproc://gt-monitor-{os.getpid()}-{next(_monitor_ids)}"
    sock.monitor(addr, events)
    mon = sock.context.socket(zmq.PAIR)
    mon.connect(addr)
    return mon


_monitor_ids = itertools.count()


def read_event(monitor: zmq.Socket) -> tuple[int, int] | None:
    """One pending monitor event as ``(event, fd)``, or ``None`` when none is waiting."""
    try:
        frames = monitor.recv_multipart(zmq.NOBLOCK)
    except zmq.Again:
        return None
    if not frames or len(frames[0]) < 6:
        return None
    event = int.from_bytes(frames[0][:2], "little")
    value = int.from_bytes(frames[0][2:6], "little")
    return event, value


def wait_for_event(monitor: zmq.Socket, event: int, timeout: float) -> bool:
    """Whether ``monitor`` reports ``event`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if not monitor.poll(int(left * 1000) + 1):
            return False
        got = read_event(monitor)
        if got is not None and got[0] == event:
            return True
    return False


def source_fd(frame: Any) -> int | None:
    """The file descriptor of the connection a received frame came on (``None`` if unknown)."""
    try:
        return int(frame.get(zmq.SRCFD))
    except (zmq.ZMQError, AttributeError, TypeError, ValueError):
        return None
