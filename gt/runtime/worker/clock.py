"""How long ops take where they run: host clocks on NumPy, CUDA events on a GPU.

CuPy queues kernels and returns at once, so a host clock around an op measures its launch, not its
work. On a CuPy worker the executor records a CUDA event on the worker's stream before each op and
one at the end of the batch, then waits for the last (the batch's fence): the differences between
events are what each op took on the device, and the batch is reported done only once the device
has finished it, so ``gt.sync()`` means "the work is done". Events are reused, not reallocated.

A CUDA error raised by a kernel surfaces at the fence (or at the op itself with
``GT_CUDA_SYNC_EACH_OP=1``, which synchronises after every op for exact attribution).
"""

from __future__ import annotations

import os
import time
from typing import Any

#: Synchronise after every op on a GPU (slow; errors then name their op exactly).
SYNC_EACH_OP = os.environ.get("GT_CUDA_SYNC_EACH_OP", "0") not in ("", "0")


class HostClock:
    """Op times from the host's monotonic clock (NumPy: an op has finished when it returns)."""

    device = False

    @staticmethod
    def mark() -> int:
        """A point in time before an op."""
        return time.monotonic_ns()

    @staticmethod
    def fence() -> None:
        """Wait until queued work has finished (nothing is ever queued on the host)."""

    @staticmethod
    def durations(marks: list) -> list[int]:
        """Nanoseconds between consecutive marks."""
        return [b - a for a, b in zip(marks, marks[1:])]


class CudaClock:
    """Op times from CUDA events on the current stream.

    Args:
        xp: the ``cupy`` module (events, elapsed time and the stream come from it).
    """

    device = True

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self._free: list[Any] = []  # events to reuse

    def mark(self) -> Any:
        """Record an event on the stream (it completes when the device gets there)."""
        ev = self._free.pop() if self._free else self.xp.cuda.Event()
        ev.record()
        return ev

    def fence(self) -> None:
        """Wait for everything queued on the stream; raises the device's error, if any."""
        self.xp.cuda.get_current_stream().synchronize()

    def durations(self, marks: list) -> list[int]:
        """Nanoseconds between consecutive events (after the last has completed); the events
        go back to the pool."""
        if not marks:
            return []
        marks[-1].synchronize()
        elapsed = self.xp.cuda.get_elapsed_time
        out = [max(0, int(elapsed(a, b) * 1e6)) for a, b in zip(marks, marks[1:])]
        self._free.extend(marks)
        return out


def clock_for(backend: Any) -> HostClock | CudaClock:
    """The clock that tells the truth for ``backend``."""
    xp = getattr(backend, "xp", None)
    if getattr(backend, "name", "") == "cupy" and hasattr(getattr(xp, "cuda", None), "Event"):
        return CudaClock(xp)
    return HostClock()
