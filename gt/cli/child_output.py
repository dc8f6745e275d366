"""A child process's output as a terminal would show it, for ``gt run``'s dashboard.

The child runs on a pseudo-terminal: its stdout and stderr are one stream, so a ``print`` before an
exception appears before the traceback, as in a terminal; the child sees a TTY, so it flushes every
line and keeps its colours. :class:`ChildOutput` reads that stream on a thread into a queue of lines
for the output pane, and keeps the last screenful, which :meth:`ChildOutput.tail` hands back to be
printed on the real terminal once the dashboard has closed (a crashed script's traceback is never
lost).
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import queue
import struct
import subprocess
import tempfile
import termios
import threading
from collections import deque
from collections.abc import Sequence

from gt.cli.common import exit_status

#: Lines kept for the screenful printed when the dashboard closes.
TAIL_LINES = 200


class ChildOutput:
    """Start ``cmd`` on a pseudo-terminal and collect what it prints.

    Args:
        cmd: the command.
        env, cwd: its environment and working directory.
        columns: the width the child sees (its terminal's size; for wrapping and progress bars).
        log: also write every line to a temporary file (``log_path``), which the caller removes.

    Attributes:
        proc: the child (a ``subprocess.Popen``).
        lines: a queue of text lines (ANSI colour codes kept) and finally ``None``; a last line
            says how the child ended.
    """

    def __init__(self, cmd: Sequence[str], *, env: dict | None = None, cwd: str | None = None,
                 columns: int = 120, log: bool = False) -> None:  # fmt: skip
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, max(20, columns), 0, 0))
        try:
            self.proc = subprocess.Popen(
                list(cmd), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave,
                stderr=slave, start_new_session=True,
            )  # fmt: skip
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)  # the child holds it now; EOF reaches us when the child is done
        self.lines: queue.Queue = queue.Queue(maxsize=10_000)
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        # (with ``log``, every line also goes to a file: the pane and the tail keep the last ones)
        self.log_path: str | None = None
        self._log = None
        if log:
            fd, self.log_path = tempfile.mkstemp(prefix="gt-run-", suffix=".log")
            self._log = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        self.count = 0  # lines printed
        self._master = master
        self._reader = threading.Thread(target=self._read, name="gt-run-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(self._master, 65536)
                except OSError as exc:  # EIO: every holder of the terminal's other end is gone
                    if exc.errno not in (errno.EIO, errno.EBADF):
                        raise
                    break
                if not chunk:
                    break
                pending += chunk
                *done, pending = pending.split(b"\n")
                for raw in done:
                    self._line(raw)
                if done and self._log is not None:  # on disk as they arrive (a hangup keeps them)
                    self._log.flush()
            if pending:
                self._line(pending)
        finally:
            os.close(self._master)
            code = self.proc.wait()
            self._put(f"[exited with code {exit_status(code)}]")
            if self._log is not None:
                self._log.close()
            self.lines.put(None)

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if "\r" in text:  # a progress bar redrawn in place: the terminal would show the last one
            text = text.rsplit("\r", 1)[-1]
        self._put(text)

    def _put(self, text: str) -> None:
        self._tail.append(text)
        self.count += 1
        if self._log is not None and not self._log.closed:
            self._log.write(text + "\n")
        try:
            self.lines.put(text, timeout=5.0)
        except queue.Full:  # nobody is draining (the dashboard closed): keep the tail only
            pass

    def tail(self, n: int) -> list[str]:
        """The last ``n`` lines the child printed (and how it ended, once it has)."""
        self._reader.join(timeout=2.0)
        return list(self._tail)[-n:] if n > 0 else []
