"""Pinned host staging for a CuPy worker: uploads, fetches and peer transfers on a copy stream.

A copy between the device and ordinary (pageable) host memory is synchronous: the driver copies
through a hidden bounce buffer, and a freshly allocated host array first takes a page fault per
page. Copies to and from page-locked ("pinned") memory run at the link's speed and can be queued
on a stream of their own, so the host and the compute stream go on meanwhile. This module gives
each CuPy worker:

* a **copy stream** (non-blocking, so the legacy default stream the worker computes on does not
  serialise with it); a copy waits for the compute work queued before it (an event) and, for an
  upload, the compute stream waits for the copy (another event), so the order of the program is
  kept without stopping the host;
* **pinned buffers from CuPy's pinned memory pool**, which keeps freed blocks for reuse: a
  fetch or an all-reduce of the same size as the last one reuses its buffer;
* **lifetimes**: a buffer (host or device) that a queued copy still reads is held until the
  copy's event has completed, so neither pool hands it out early.

Arrays under :data:`STAGE_MIN` bytes go the plain way: for them the copy is shorter than the
bookkeeping. What is staged is chosen by ``GT_PINNED_STAGING`` (:func:`staging_mode`): by default
the transfers between workers (on an H200 a 64 MiB all-reduce of two workers ran 1.87x and 2.03x
as fast as unstaged, in two runs); ``all`` stages clients' uploads and fetches too, which is not
the default because two runs disagreed (uploads 0.94x and 1.08x, fetches 0.94x and 1.23x): those
bytes also cross the client's ZeroMQ socket, at 1-1.5 GB/s there, which the staging cannot speed
up; ``0`` turns staging off.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

import numpy as np

#: Arrays smaller than this are copied directly (pageable): staging would cost more than it saves.
STAGE_MIN = 256 * 1024


def staging_mode() -> str:
    """What CuPy workers stage through pinned memory (``$GT_PINNED_STAGING``): ``"peers"``
    (the default: transfers between workers), ``"all"`` (clients' uploads and fetches too) or
    ``"off"`` (``0``, ``off`` or ``no``)."""
    v = os.environ.get("GT_PINNED_STAGING", "peers").strip().lower()
    if v in ("0", "off", "no", "false"):
        return "off"
    return "all" if v == "all" else "peers"


class HostStaging:
    """Pinned staging buffers and a copy stream for one CuPy worker.

    Args:
        xp: the ``cupy`` module (or the CuPy test double).
        min_bytes: arrays at least this large are staged (default :data:`STAGE_MIN`).

    Attributes:
        stream: the copy stream.
        staged_in, staged_out: bytes copied host-to-device and device-to-host through pinned
            memory so far.
    """

    def __init__(self, xp: Any, min_bytes: int = STAGE_MIN):
        self.xp = xp
        self.min_bytes = min_bytes
        self.stream = xp.cuda.Stream(non_blocking=True)
        self._held: deque[tuple[Any, Any]] = deque()  # (event, what a queued copy still reads)
        self.staged_in = 0
        self.staged_out = 0

    # ------------------------------------------------------------------ buffers
    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A pinned host array (ordinary memory if the pinned pool is exhausted)."""
        dtype = np.dtype(dtype)
        count = 1
        for d in shape:
            count *= int(d)
        try:
            mem = self.xp.cuda.alloc_pinned_memory(max(1, count * dtype.itemsize))
        except Exception:  # page-locked memory is limited: a slower copy still works
            return np.empty(shape, dtype)
        return np.frombuffer(mem, dtype, count).reshape(shape)

    @staticmethod
    def is_pinned(arr: np.ndarray) -> bool:
        """Whether ``arr`` views a pinned buffer made by :meth:`empty`."""
        base: Any = arr
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if isinstance(base, memoryview):  # (numpy.frombuffer keeps a view of the exporter)
            base = base.obj
        return type(base).__name__ == "PinnedMemoryPointer"

    def _hold(self, event: Any, *objs: Any) -> None:
        self._held.append((event, objs))

    def release(self) -> None:
        """Let go of the buffers whose copies have completed."""
        held = self._held
        while held and held[0][0].done:
            held.popleft()

    # ------------------------------------------------------------------ device -> host
    def to_host_async(self, arr: Any) -> tuple[np.ndarray, Any]:
        """Start copying device array ``arr`` into a pinned host array once the work queued
        before it on the current stream has finished; returns ``(host array, event)``: the bytes
        are there when the event is done. The host does not wait."""
        xp = self.xp
        src = xp.ascontiguousarray(arr)
        out = self.empty(src.shape, src.dtype)
        stream = self.stream
        stream.wait_event(xp.cuda.get_current_stream().record())
        try:
            src.get(stream=stream, out=out, blocking=False)
        except TypeError:  # CuPy < 13 has no `blocking`; with a stream and pinned `out` it is async
            src.get(stream=stream, out=out)
        done = stream.record()
        # the compute stream may free src, and the caller out: both must outlive the copy (CuPy's
        # pinned pool hands a freed block out again at once, whatever copy still writes it)
        self._hold(done, src, out)
        self.staged_out += out.nbytes
        self.release()
        return out, done

    def to_host(self, arr: Any) -> np.ndarray:
        """A host copy of ``arr`` (pinned when large); returns once the bytes are there."""
        if arr.nbytes < self.min_bytes:
            return np.asarray(self.xp.asnumpy(arr), order="C")
        out, done = self.to_host_async(arr)
        done.synchronize()
        self.release()
        return out

    # ------------------------------------------------------------------ host -> device
    def from_host(self, host: np.ndarray) -> Any:
        """A device copy of ``host``. Large arrays are copied into pinned memory (unless they are
        pinned already) and sent on the copy stream; the compute stream waits for that copy, the
        host does not."""
        xp = self.xp
        if host.nbytes < self.min_bytes:
            return xp.asarray(host)
        if self.is_pinned(host) and host.flags.c_contiguous:
            staged = host
        else:
            staged = self.empty(host.shape, host.dtype)
            np.copyto(staged, host)
        out = xp.empty(host.shape, host.dtype)  # (for the compute stream, which may reuse a block)
        compute = xp.cuda.get_current_stream()
        stream = self.stream
        stream.wait_event(compute.record())  # earlier compute work may still use out's block
        out.set(staged, stream=stream)
        done = stream.record()
        compute.wait_event(done)
        self._hold(done, staged)
        self.staged_in += out.nbytes
        self.release()
        return out
