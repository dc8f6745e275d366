"""A Linux terminal driver that writes each frame from the app's own thread when the terminal
takes it at once.

Textual's ``LinuxDriver`` hands every frame to a writer thread, so the app's thread never blocks
on the terminal. On a machine busier than its cores that costs a second trip through the
scheduler for every frame: the writer thread is woken when the render is done and waits for a
CPU of its own, and because Linux schedules a session's threads as one group (autogroups), the
group has just spent its share on the render. Measured in ``gt top`` under load
(``benchmarks/bench_top_latency.py`` with the writer's flushes logged): the help screen was
rendered 27 ms after the key and written 119 ms after it; 38 ms between the two in another press.

:class:`DirectWriteDriver` writes from the thread that rendered, which has the CPU at that
moment, through a non-blocking descriptor of its own for the terminal (the terminal's shared one
stays blocking, for the shell after us). Whatever the terminal does not take at once (a slow
link, a terminal that is not reading) goes to a :class:`Backlog` that a thread of its own writes
out, in order; later frames queue behind it until it is empty, so the app's thread blocks on a
slow terminal no sooner than Textual's does (:data:`MAX_BACKLOG` bytes against 30 frames).
"""

from __future__ import annotations

import os
import select
import threading
from collections import deque

from textual.drivers.linux_driver import LinuxDriver

#: Bytes waiting for a slow terminal past which the app's thread waits too (Textual's writer
#: takes 30 frames; a full repaint of a large terminal is ~50 kB).
MAX_BACKLOG = 1 << 20
#: The longest one wait for the terminal to accept more lasts before it is checked again.
WRITABLE_WAIT_S = 0.5
#: How long leaving application mode waits for the backlog to reach the terminal.
DRAIN_S = 2.0


class Backlog:
    """Bytes for a non-blocking descriptor, in order: :meth:`write` tries the descriptor at once
    when nothing is queued and queues the rest for its thread, which waits for the descriptor
    with ``select``."""

    def __init__(self, fd: int, *, limit: int = MAX_BACKLOG) -> None:
        self.fd, self.limit = fd, limit
        self._queue: deque[bytes] = deque()
        self.queued = 0  # bytes in the queue
        self.direct = 0  # writes that went straight to the descriptor, whole
        self._cv = threading.Condition()
        self._closed = False
        self.gone = False  # the terminal went away (hung up): what is written is dropped
        self._thread = threading.Thread(target=self._run, name="gt-tty-backlog", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        """Write ``data`` after everything written before it."""
        with self._cv:
            if self.gone:
                return
            if not self._queue:
                try:
                    n = os.write(self.fd, data)
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError:  # hung up: nobody will read this (Textual's writer dies alike)
                    self.gone = True
                    return
                if n == len(data):
                    self.direct += 1
                    return
                data = data[n:]
            self._queue.append(data)
            self.queued += len(data)
            self._cv.notify_all()
            while self.queued > self.limit and not self._closed:
                self._cv.wait(WRITABLE_WAIT_S)  # a terminal this far behind slows the app too

    def drain(self, timeout: float) -> bool:
        """Wait until the queue has been written (at most ``timeout`` s); whether it has."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue, timeout)

    def close(self) -> None:
        """Stop the thread (what is still queued is dropped) and close the descriptor."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=WRITABLE_WAIT_S * 2)
        os.close(self.fd)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._queue or self._closed)
                if self._closed:
                    return
                head = self._queue[0]
            try:
                select.select([], [self.fd], [], WRITABLE_WAIT_S)
                n = os.write(self.fd, head)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:  # the terminal is gone: nobody will read the rest
                n = len(head)
                self.gone = True
            with self._cv:
                if n == len(head):
                    self._queue.popleft()
                elif n:
                    self._queue[0] = head[n:]
                self.queued -= n
                self._cv.notify_all()


def open_nonblocking(fd: int) -> int | None:
    """A non-blocking descriptor of its own for the terminal on ``fd`` (``None`` if ``fd`` is not
    a terminal: then there is nothing to gain, and reopening a file would not append)."""
    try:
        if not os.isatty(fd):
            return None
        return os.open(os.ttyname(fd), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None


class DirectWriteDriver(LinuxDriver):
    """``LinuxDriver`` whose :meth:`write` goes to the terminal from the calling (the app's)
    thread, through a :class:`Backlog`; where the output is not a terminal, as ``LinuxDriver``."""

    _backlog: Backlog | None = None
    _encoding: str = "utf-8"

    def start_application_mode(self) -> None:
        if self._backlog is None:
            try:
                self._file.flush()  # anything printed before the app started comes first
                fd = open_nonblocking(self._file.fileno())
            except (AttributeError, OSError, ValueError):
                fd = None
            if fd is not None:
                self._encoding = getattr(self._file, "encoding", None) or "utf-8"
                self._backlog = Backlog(fd)
        super().start_application_mode()

    def write(self, data: str) -> None:
        if self._backlog is None:
            super().write(data)
        else:
            self._backlog.write(data.encode(self._encoding, "replace"))

    def stop_application_mode(self) -> None:
        super().stop_application_mode()
        if self._backlog is not None:
            # What Textual prints next (a traceback) goes to the terminal directly: after ours.
            self._backlog.drain(DRAIN_S)

    def close(self) -> None:
        super().close()
        if self._backlog is not None:
            self._backlog.close()
            self._backlog = None
