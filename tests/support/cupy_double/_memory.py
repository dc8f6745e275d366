"""Device memory of the CuPy test double: allocations, pointers into them, and the pool's counters.

As in CuPy, every device array lives in a *memory block* (``a.data.mem``; views share their
array's block, ``a.data.ptr`` is the address of the first element), a pointer plus an offset is a
pointer, and ``cupy.ndarray(shape, dtype, memptr=p, strides=s)`` is a view over a block's bytes. The
default pool counts what device arrays hold (``used_bytes``) and what it keeps for reuse after they
die (``total_bytes - used_bytes``), rounding each allocation up to 512 bytes as CuPy does; with a
limit (``set_limit``) an allocation that would go past it frees the cached blocks and, if it still
does not fit, raises :class:`OutOfMemoryError` (a ``MemoryError``), as CuPy's pool does.

The blocks are NumPy arrays (the double has no device); the counters are what GT reads.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

#: CuPy's pool rounds every allocation up to this many bytes.
ALIGN = 512


class OutOfMemoryError(MemoryError):
    """``cupy.cuda.memory.OutOfMemoryError``: the pool (or the device) cannot give ``size`` bytes."""

    def __init__(self, size: int, total: int, limit: int = 0):
        text = f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes"
        if limit:
            text += f", limit set to: {limit:,} bytes"
        super().__init__(text + ").")


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


class Memory:
    """One device allocation (what ``ndarray.data.mem`` is): ``ptr``, ``size``, ``device_id``."""

    __slots__ = ("root", "ptr", "size", "device_id", "__weakref__")

    def __init__(self, root: np.ndarray):
        self.root = root  # (held: a pointer keeps its memory alive, as in CuPy)
        self.ptr = _address(root)
        self.size = int(root.nbytes)
        self.device_id = 0

    def raw(self) -> np.ndarray:
        """The block's bytes as a flat ``uint8`` array (a view, not a copy)."""
        r = self.root
        flat = r.reshape(-1, order="A") if r.ndim != 1 else r
        return flat.view(np.uint8)


class MemoryPointer:
    """``cupy.cuda.MemoryPointer(mem, offset)``: an address inside a block."""

    def __init__(self, mem: Memory | None, offset: int):
        self.mem = mem
        self._offset = int(offset)
        self.ptr = (mem.ptr + self._offset) if mem is not None else 0
        self.device_id = 0 if mem is None else mem.device_id

    def __add__(self, n: int) -> MemoryPointer:
        return MemoryPointer(self.mem, self._offset + int(n))

    def __int__(self) -> int:
        return self.ptr


_blocks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_lock = threading.RLock()


def root_of(a: np.ndarray) -> np.ndarray:
    """The NumPy array that owns the memory ``a`` views."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def block_of(a: np.ndarray) -> Memory:
    """The one block behind ``a`` (the same object for every view, while anything holds it)."""
    root = root_of(a)
    with _lock:
        mem = _blocks.get(id(root))
        if mem is None or mem.root is not root:
            mem = _blocks[id(root)] = Memory(root)
        return mem


_live: dict[int, int] = {}  # address -> bytes of every device allocation alive


def is_device_address(ptr: int, nbytes: int) -> bool:
    """Whether ``[ptr, ptr + nbytes)`` lies inside one live device allocation."""
    with _lock:
        return any(a <= ptr and ptr + nbytes <= a + n for a, n in list(_live.items()))


def view(shape: Any, dtype: Any, memptr: MemoryPointer, strides: Any = None) -> np.ndarray:
    """What ``cupy.ndarray(shape, dtype, memptr=..., strides=...)`` sees: a view over the block."""
    if memptr.mem is None:
        raise ValueError("a null pointer holds no array")
    raw = memptr.mem.raw()
    return np.ndarray(shape, np.dtype(dtype), buffer=raw, offset=memptr._offset, strides=strides)


class MemoryPool:
    """``cupy.get_default_memory_pool()``: the counters GT reads and the limit it sets."""

    def __init__(self) -> None:
        self._used = 0
        self._cached = 0
        self._cached_blocks = 0
        self._limit = 0

    # ------------------------------------------------------------------ what arrays call
    def allocated(self, a: np.ndarray) -> None:
        """Count a new device array that owns its memory (raises past the limit)."""
        size = -(-int(a.nbytes) // ALIGN) * ALIGN
        if size == 0:
            return
        with _lock:
            reuse = min(self._cached, size)  # (a cached block of the size is taken first)
            if self._limit and self._used + self._cached + size - reuse > self._limit:
                self._cached, self._cached_blocks = 0, 0  # free the cache, then try again
                reuse = 0
                if self._used + size > self._limit:
                    raise OutOfMemoryError(size, self._used, self._limit)
            self._cached -= reuse
            if reuse:
                self._cached_blocks = max(0, self._cached_blocks - 1)
            self._used += size
            addr = _address(root_of(a))
            _live[addr] = int(a.nbytes)
        weakref.finalize(a, self._freed, size, addr)

    def _freed(self, size: int, addr: int = 0) -> None:
        with _lock:
            _live.pop(addr, None)
            self._used -= size
            self._cached += size
            self._cached_blocks += 1

    # ------------------------------------------------------------------ CuPy's API
    def used_bytes(self) -> int:
        return self._used

    def free_bytes(self) -> int:
        return self._cached

    def total_bytes(self) -> int:
        return self._used + self._cached

    def n_free_blocks(self) -> int:
        return self._cached_blocks

    def free_all_blocks(self, stream: Any = None) -> None:
        with _lock:
            self._cached, self._cached_blocks = 0, 0

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        if fraction is not None:
            from .cuda import Device  # noqa: PLC0415

            size = int(Device().mem_info[1] * fraction)
        self._limit = int(size or 0)

    def get_limit(self) -> int:
        return self._limit


class PinnedMemoryPool:
    """``cupy.get_default_pinned_memory_pool()`` (the double's pinned memory is plain memory)."""

    def free_all_blocks(self) -> None:
        return None

    def n_free_blocks(self) -> int:
        return 0


DEFAULT_POOL = MemoryPool()
DEFAULT_PINNED_POOL = PinnedMemoryPool()
