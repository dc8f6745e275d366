"""Streams and events of the CuPy test double: work that real CuPy does asynchronously is deferred.

Kernels run at once (NumPy underneath), so within one stream everything is in program order, as on
a GPU. What the double defers is what a GPU really leaves unfinished when the call returns:
copies between host and device issued on a non-default stream (``ndarray.set(arr, stream=s)``,
``ndarray.get(stream=s, out=pinned, blocking=False)``). Such a copy reads (or writes) its host
buffer only when its stream is synchronized, or when work runs on that stream (same-stream
order), or when another stream waits for an event recorded after it. So code that reuses a pinned
buffer before the copy finished, or reads a result on one stream that another stream is still
producing, sees the wrong data here too, as it might on a GPU.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

_local = threading.local()
_lock = threading.RLock()
_all: weakref.WeakSet = weakref.WeakSet()


#: CUDA's ``cudaGetErrorName`` and ``cudaGetErrorString`` of the statuses the double raises.
_ERRORS = {
    6: ("cudaErrorInvalidResourceHandle", "invalid resource handle"),
    35: (
        "cudaErrorInsufficientDriver",
        "CUDA driver version is insufficient for CUDA runtime version",
    ),  # fmt: skip
    100: ("cudaErrorNoDevice", "no CUDA-capable device is detected"),
    101: ("cudaErrorInvalidDevice", "invalid device ordinal"),
    600: ("cudaErrorNotReady", "device not ready"),
    700: ("cudaErrorIllegalAddress", "an illegal memory access was encountered"),
    999: ("cudaErrorUnknown", "unknown error"),
}


class CUDARuntimeError(RuntimeError):
    """What CuPy raises for a failed CUDA runtime call (``cupy.cuda.runtime.CUDARuntimeError``):
    made from the status alone, its text CUDA's name and description of it, as CuPy's is."""

    def __init__(self, status: int):
        name, text = _ERRORS.get(status, ("cudaErrorUnknown", "unknown error"))
        super().__init__(f"{name}: {text}")
        self.status = status

    def __reduce__(self):  # (pickles as CuPy's does: by its status)
        return (type(self), (self.status,))


class Stream:
    """A CUDA stream: a queue of deferred copies (see the module docstring).

    Args:
        null: the default (legacy null) stream, on which nothing is deferred.
        non_blocking, ptds: accepted, as CuPy does (``priority`` is CuPy 14's only).
    """

    _counter = 0

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False):
        Stream._counter += 1
        self.ptr = 0 if null else 0x5000 + Stream._counter
        self.is_null = null
        self.non_blocking = non_blocking
        self.pending: list[Callable[[], None]] = []
        self._prev: list[Stream] = []
        _all.add(self)

    # ------------------------------------------------------------------ deferred work
    def defer(self, thunk: Callable[[], None]) -> None:
        """Queue work that completes when this stream is synchronized (at once on the null
        stream, which the double treats as synchronous)."""
        if self.is_null:
            thunk()
        else:
            with _lock:
                self.pending.append(thunk)

    def flush(self, upto: int | None = None) -> None:
        """Complete the queued work (the first ``upto`` items, or all)."""
        with _lock:
            n = len(self.pending) if upto is None else min(upto, len(self.pending))
            todo, self.pending = self.pending[:n], self.pending[n:]
        for thunk in todo:
            thunk()

    # ------------------------------------------------------------------ CuPy's API
    @property
    def done(self) -> bool:
        """Whether every queued operation has completed."""
        return not self.pending

    def synchronize(self) -> None:
        """Wait for this stream's work."""
        self.flush()

    def record(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one by default) on this stream."""
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Make this stream wait for ``event`` (the double completes the work before it)."""
        event.synchronize()

    def use(self) -> Stream:
        """Make this the current stream of this thread."""
        _local.stream = self
        return self

    def __enter__(self) -> Stream:
        self._prev.append(current_stream())
        _local.stream = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.stream = self._prev.pop()

    def __repr__(self) -> str:
        return f"<Stream {self.ptr:#x} (double)>"


NULL = Stream(null=True)
Stream.null = NULL  # type: ignore[attr-defined]


def current_stream() -> Stream:
    """This thread's current stream (the null stream unless one was made current)."""
    return getattr(_local, "stream", NULL)


def sync_current() -> None:
    """Same-stream order: before work runs on the current stream, its queued copies complete."""
    s = getattr(_local, "stream", NULL)
    if s.pending:
        s.flush()


def synchronize_all() -> None:
    """``cudaDeviceSynchronize``: every stream's work completes."""
    for s in list(_all):
        s.flush()


class Event:
    """A CUDA event: a mark in a stream's queue, with the time it completed.

    Args:
        block, disable_timing, interprocess: accepted as CuPy does (interprocess needs
            ``disable_timing``).
    """

    def __init__(
        self, block: bool = False, disable_timing: bool = False, interprocess: bool = False
    ):
        if interprocess and not disable_timing:
            raise ValueError("Timing must be disabled for interprocess events")
        self.disable_timing = disable_timing
        self.ptr = id(self)
        self._stream: Stream | None = None
        self._mark = 0
        self.t_ns: int | None = None

    def _complete(self) -> None:
        self.t_ns = time.perf_counter_ns()

    @property
    def done(self) -> bool:
        """True once everything recorded before the event completed."""
        return self._stream is None or self.t_ns is not None

    def record(self, stream: Stream | None = None) -> None:
        """Record on ``stream`` (default: the current stream)."""
        s = stream or current_stream()
        self._stream = s
        with _lock:
            if s.is_null or not s.pending:  # nothing before it: complete now
                self._complete()
                self._mark = 0
                return
            self.t_ns = None
            s.pending.append(self._complete)
            self._mark = len(s.pending)

    def synchronize(self) -> None:
        """Wait until the event completed."""
        if self._stream is not None and self.t_ns is None:
            self._stream.flush(self._mark)
            if self.t_ns is None:  # others flushed part of the queue first: finish it
                self._stream.flush()


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Milliseconds between two completed events.

    Raises:
        CUDARuntimeError: an event has not completed (CUDA's ``cudaErrorNotReady``) or has no
            timing data.
    """
    start, end = start_event, end_event
    for e in (start, end):
        if e.disable_timing:
            raise CUDARuntimeError(6)  # (an event made with disable_timing)
        if e.t_ns is None:
            raise CUDARuntimeError(600)
    assert start.t_ns is not None and end.t_ns is not None
    return (end.t_ns - start.t_ns) / 1e6
