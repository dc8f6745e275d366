"""Where spilled buffers go, and how they come back: a buffer's bytes and the views over it.

A spilled *buffer* is one allocation (a NumPy array that owns its memory, a CuPy memory block); the
tensors over it (the buffer itself, transposes, broadcast views ...) are recorded as *views*:
``(byte offset, shape, strides, dtype)``. Bringing the buffer back rebuilds every view over one new
allocation, so views stay views and a buffer is never counted twice.

Two tiers, chosen by what the arrays are:

* NumPy arrays (the pool is RAM): the bytes go to a file in a private temporary directory, as Dask's
  workers spill to disk; reading them back allocates a fresh array. ``$GT_SPILL_DIR`` picks the
  parent directory (default: the system's temporary directory).
* CuPy arrays (the pool is the GPU's memory): the bytes go to pinned host memory, and come back
  with a host-to-device copy (on the prefetch thread's own stream when prefetched).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any

import numpy as np

_U8 = np.dtype(np.uint8)


def _is_cupy(arr: Any) -> bool:
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


class SpillStore:
    """The spill tier of one worker (files for NumPy buffers, pinned host memory for CuPy's).

    Thread-safe: the prefetch thread reads while the executor writes and drops.
    """

    def __init__(self, xp: Any = None, parent: str | None = None) -> None:
        self.xp = xp
        self.parent = parent or os.environ.get("GT_SPILL_DIR") or None
        self._dir: str | None = None
        self._lock = threading.Lock()
        self._next = 0
        self.device = None  # the CUDA device the worker is pinned to (set by the pool)

    @property
    def directory(self) -> str:
        """The private directory the files go to (made on first use, removed by :meth:`close`)."""
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="gt-spill-", dir=self.parent)
            return self._dir

    def put(self, root: Any) -> Any:
        """Copy a buffer out; returns the handle :meth:`get` takes."""
        if isinstance(root, np.ndarray):
            raw = _raw_numpy(root)
            with self._lock:
                self._next += 1
                n = self._next
            path = os.path.join(self.directory, f"{n}.bin")
            with open(path, "wb") as f:
                raw.tofile(f)  # writes straight from the buffer, without the GIL
            return path
        cp = self.xp
        dev = cp.ndarray((int(root.size),), _U8, memptr=cp.cuda.MemoryPointer(root, 0))
        host = _pinned(cp, int(root.size))
        dev.get(out=host)
        return host

    def get(self, handle: Any, nbytes: int, stream: Any = None) -> Any:
        """The bytes of a spilled buffer, in a new allocation (a uint8 array of the pool's kind)."""
        if isinstance(handle, str):
            raw = np.fromfile(handle, dtype=_U8)
            if raw.size != nbytes:
                raise OSError(f"spill file {handle} holds {raw.size} bytes, expected {nbytes}")
            return raw
        cp = self.xp
        if stream is None:
            return cp.asarray(handle)
        with stream:
            dev = cp.empty((nbytes,), _U8)
            dev.set(handle, stream=stream)
        stream.synchronize()
        return dev

    def rebuild(self, raw: Any, view: tuple[int, tuple, tuple, str]) -> Any:
        """One view over restored bytes."""
        offset, shape, strides, dtype = view
        if isinstance(raw, np.ndarray):
            return np.ndarray(shape, np.dtype(dtype), buffer=raw, offset=offset, strides=strides)
        return self.xp.ndarray(shape, np.dtype(dtype), memptr=raw.data + offset, strides=strides)

    @staticmethod
    def drop(handle: Any) -> None:
        """Forget a spilled buffer (its file is removed)."""
        if isinstance(handle, str):
            try:
                os.unlink(handle)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Remove the spill directory and everything in it."""
        with self._lock:
            d, self._dir = self._dir, None
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)


def _pinned(cp: Any, n: int) -> np.ndarray:
    """A pinned host buffer of ``n`` bytes (page-locked, so copies run at full PCIe speed)."""
    try:
        return np.frombuffer(cp.cuda.alloc_pinned_memory(n), _U8, n)
    except Exception:  # pinned memory exhausted or unavailable: ordinary host memory still works
        return np.empty((n,), dtype=_U8)
