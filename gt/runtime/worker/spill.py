"""Where spilled buffers go, and how they come back: a buffer's bytes and the views over it.

A spilled *buffer* is one allocation (a NumPy array that owns its memory, a CuPy memory block); the
tensors over it (the buffer itself, transposes, broadcast views ...) are recorded as *views*:
``(byte offset, shape, strides, dtype)``. Bringing the buffer back rebuilds every view over one new
allocation, so views stay views and a buffer is never counted twice.

Two tiers, chosen by what the arrays are:

* NumPy arrays (the pool is RAM): the bytes go to disk, as Dask's workers spill, into one unnamed
  temporary file per worker (``O_TMPFILE``: no other process can open it, and the OS frees it even
  when the worker is killed). Buffers take page-aligned extents of it, and a freed extent is reused
  by the next spill: overwriting pages the kernel already holds costs about a third of writing a
  new file (measured: 0.5-0.7 against 1.4-2.6 ms per 4 MB on the 2-core VM). Reading back fills a
  fresh array. ``$GT_SPILL_DIR`` picks the directory (default: the system's temporary directory).
* CuPy arrays (the pool is the GPU's memory): the bytes go to pinned host memory, and come back
  with a host-to-device copy (on the prefetch thread's own stream when prefetched).
"""

from __future__ import annotations

import bisect
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

_U8 = np.dtype(np.uint8)


def _is_cupy(arr: Any) -> bool:
    if isinstance(arr, np.generic):  # (a bfloat16 NumPy scalar's ``.data`` raises TypeError)
        return False
    data = getattr(arr, "data", None)
    return data is not None and hasattr(data, "mem") and hasattr(data, "ptr")


def root_of(arr: Any) -> tuple[int, Any, int] | None:
    """``(key, root, nbytes)`` of the buffer ``arr`` views, or ``None`` for a value with no buffer.

    The key identifies the allocation while ``root`` is alive (the caller keeps it). For NumPy the
    root is the array that owns the memory (following broadcast and stride-trick views to it), for
    CuPy the memory block.
    """
    if isinstance(arr, np.ndarray):
        r = arr
        while True:
            b = r.base
            if isinstance(b, np.ndarray):
                r = b
            elif b is not None and isinstance(getattr(b, "base", None), np.ndarray):
                r = b.base  # as_strided's DummyArray: the view's real owner is behind it
            else:
                break
        return id(r), r, r.nbytes
    if _is_cupy(arr):
        mem = arr.data.mem
        if mem is None:
            return None
        return id(mem), mem, int(mem.size)
    n = getattr(arr, "nbytes", None)
    return (id(arr), arr, int(n)) if type(n) is int and n > 0 else None


def _ptr(arr: Any) -> int:
    if isinstance(arr, np.ndarray):
        return arr.__array_interface__["data"][0]
    return int(arr.data.ptr)


def spillable(root: Any) -> bool:
    """Whether a buffer can be spilled (a contiguous NumPy owner, or a CuPy block)."""
    if isinstance(root, np.ndarray):
        f = root.flags
        return f.c_contiguous or f.f_contiguous
    return hasattr(root, "ptr") and hasattr(root, "size")


def view_of(arr: Any, root: Any) -> tuple[int, tuple, tuple, str]:
    """How ``arr`` sits on ``root``'s bytes: ``(offset, shape, strides, dtype)``."""
    base = _ptr(root) if isinstance(root, np.ndarray) else int(root.ptr)
    return _ptr(arr) - base, tuple(arr.shape), tuple(arr.strides), arr.dtype.str


def _raw_numpy(root: np.ndarray) -> np.ndarray:
    """The root's bytes as a flat uint8 array (no copy)."""
    flat = root.ravel(order="K")
    return flat.view(_U8) if flat.ndim else flat.reshape(1).view(_U8)


#: Extents of the spill file are whole pages (aligned copies, and room for a buffer of any size).
PAGE = 4096
#: Free space at the end of the spill file kept for reuse; beyond it the file is cut back.
TAIL_KEEP = 64 << 20
#: Bytes a prefetch reads between two looks at whether it should go on.
READ_PIECE = 1 << 20


class FileExtent:
    """Where a spilled NumPy buffer lies in the spill file: ``offset`` and ``length`` (whole
    pages), ``nbytes`` (the buffer's size)."""

    __slots__ = ("offset", "length", "nbytes")

    def __init__(self, offset: int, length: int, nbytes: int) -> None:
        self.offset, self.length, self.nbytes = offset, length, nbytes

    def __repr__(self) -> str:
        return f"FileExtent({self.offset}, {self.length}, {self.nbytes})"


class SpillStore:
    """The spill tier of one worker (a file for NumPy buffers, pinned host memory for CuPy's).

    Thread-safe: the prefetch thread reads while the executor writes and drops. Extents are taken
    best fit from the free ones (coalesced as they are freed), else from the end of the file.
    """

    def __init__(self, xp: Any = None, parent: str | None = None) -> None:
        self.xp = xp
        self.parent = parent or os.environ.get("GT_SPILL_DIR") or None
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._free: list[tuple[int, int]] = []  # (offset, length), sorted by offset, coalesced
        self._end = 0  # the end of the last extent in use
        self._size = 0  # the file's size
        self.in_use = 0  # bytes of the file's extents that hold a spilled buffer
        self.extents = 0  # how many
        self.device = None  # the CUDA device the worker is pinned to (set by the pool)
        self.compute_stream: Any = None  # the stream the executor computes on (CuPy; ditto)

    # ------------------------------------------------------------------ the file's extents
    def _file(self) -> int:
        if self._fd is None:
            f = tempfile.TemporaryFile(dir=self.parent)  # (unnamed where the OS allows)
            self._fd = os.dup(f.fileno())
            f.close()
        return self._fd

    def _take(self, nbytes: int) -> FileExtent:
        length = max(PAGE, -(-nbytes // PAGE) * PAGE)
        with self._lock:
            fd = self._file()
            best = -1
            for i, (_off, ln) in enumerate(self._free):
                if ln >= length and (best < 0 or ln < self._free[best][1]):
                    best = i
                    if ln == length:
                        break
            if best >= 0:
                off, ln = self._free.pop(best)
                if ln > length:
                    bisect.insort(self._free, (off + length, ln - length))
            else:
                off = self._end
                self._end += length
                if self._end > self._size:
                    os.ftruncate(fd, self._end)
                    self._size = self._end
            self.in_use += length
            self.extents += 1
            return FileExtent(off, length, nbytes)

    def _give_back(self, ext: FileExtent) -> None:
        with self._lock:
            off, ln = ext.offset, ext.length
            ext.length = 0  # (a second drop of the same extent is harmless)
            if ln <= 0 or self._fd is None:  # (after close() the file and its books are gone)
                return
            self.in_use -= ln
            self.extents -= 1
            free = self._free
            i = bisect.bisect_left(free, (off, ln))
            if i < len(free) and free[i][0] == off + ln:  # merge with the next free extent
                ln += free.pop(i)[1]
            if i > 0 and free[i - 1][0] + free[i - 1][1] == off:  # and with the previous one
                off, ln = free[i - 1][0], free[i - 1][1] + ln
                free.pop(i - 1)
                i -= 1
            if off + ln == self._end:  # the free tail: the file may shrink
                self._end = off
                if self._size - off > TAIL_KEEP and self._fd is not None:
                    self._size = off + TAIL_KEEP
                    os.ftruncate(self._fd, self._size)
            else:
                free.insert(i, (off, ln))

    # ------------------------------------------------------------------ buffers
    def put(self, root: Any) -> Any:
        """Copy a buffer out; returns the handle :meth:`get` takes."""
        if isinstance(root, np.ndarray):
            raw = _raw_numpy(root)
            ext = self._take(raw.nbytes)
            try:
                view, off = memoryview(raw), ext.offset
                while view.nbytes:  # (positional I/O, without the GIL: the prefetch thread reads)
                    n = os.pwritev(self._fd, [view], off)
                    view, off = view[n:], off + n
            except BaseException:
                self._give_back(ext)
                raise
            return ext
        cp = self.xp
        dev = cp.ndarray((int(root.size),), _U8, memptr=cp.cuda.MemoryPointer(root, 0))
        host = _pinned(cp, int(root.size))
        dev.get(out=host)
        return host

    def get(self, handle: Any, nbytes: int, stream: Any = None,
            go_on: Callable[[], bool] | None = None) -> Any:  # fmt: skip
        """The bytes of a spilled buffer, in a new allocation (a uint8 array of the pool's kind).

        ``go_on``: asked between pieces of a file read (of :data:`READ_PIECE` bytes); when it says
        no, the read is given up and ``None`` returned.
        """
        if isinstance(handle, FileExtent):
            fd, off = self._fd, handle.offset
            if fd is None or handle.length < nbytes or handle.nbytes != nbytes:
                raise OSError(f"spill extent {handle} does not hold {nbytes} bytes")
            raw = np.empty((nbytes,), dtype=_U8)
            view = memoryview(raw)
            piece = READ_PIECE if go_on is not None else nbytes
            while view.nbytes:
                if go_on is not None and view.nbytes < nbytes and not go_on():
                    return None
                n = os.preadv(fd, [view[:piece]], off)
                if n <= 0:
                    raise OSError(f"spill file ended inside {handle}")
                view, off = view[n:], off + n
            return raw
        cp = self.xp
        if stream is None:
            return cp.asarray(handle)
        # Allocated for the compute stream, which will use and free it: CuPy gives a freed block
        # back to the stream it was allocated on, so a block of the copy stream's would be handed
        # to the next read-back while compute kernels may still read the tensor freed from it.
        # The copy waits for the compute work queued so far (which may still use this block).
        compute = self.compute_stream or cp.cuda.get_current_stream()
        with compute:
            dev = cp.empty((nbytes,), _U8)
        stream.wait_event(compute.record())
        dev.set(handle, stream=stream)
        stream.synchronize()
        return dev

    def rebuild(self, raw: Any, view: tuple[int, tuple, tuple, str]) -> Any:
        """One view over restored bytes."""
        offset, shape, strides, dtype = view
        if isinstance(raw, np.ndarray):
            return np.ndarray(shape, np.dtype(dtype), buffer=raw, offset=offset, strides=strides)
        return self.xp.ndarray(shape, np.dtype(dtype), memptr=raw.data + offset, strides=strides)

    def drop(self, handle: Any) -> None:
        """Forget a spilled buffer (its extent is free for the next one)."""
        if isinstance(handle, FileExtent):
            self._give_back(handle)

    def close(self) -> None:
        """Close (and so delete) the spill file."""
        with self._lock:
            fd, self._fd = self._fd, None
            self._free, self._end, self._size, self.in_use, self.extents = [], 0, 0, 0, 0
        if fd is not None:
            os.close(fd)


def _pinned(cp: Any, n: int) -> np.ndarray:
    """A pinned host buffer of ``n`` bytes (page-locked, so copies run at full PCIe speed)."""
    try:
        return np.frombuffer(cp.cuda.alloc_pinned_memory(n), _U8, n)
    except Exception:  # pinned memory exhausted or unavailable: ordinary host memory still works
        return np.empty((n,), dtype=_U8)
