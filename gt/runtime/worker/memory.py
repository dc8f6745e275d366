"""Process-level memory of a worker: how glibc keeps freed memory, and giving it back."""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

_LIBC: Any = None


def _libc() -> Any:
    """glibc, or ``False`` where there is none (macOS, musl)."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else False
        except OSError:
            _LIBC = False
    return _LIBC


def keep_freed_memory() -> bool:
    """Make glibc keep freed memory in the process instead of returning it to the OS.

    A worker frees and allocates arrays of the same large sizes every step; handing them back to
    the kernel (big blocks are ``mmap``-ed and ``munmap``-ed) makes every step page-fault them in
    again, which in a virtual machine can cost more than the arithmetic. ``$GT_WORKER_KEEP_MEMORY=0``
    turns this off. What is kept is reported as *cached* and given back by :func:`release_cached`.
    Returns whether it was applied.
    """
    if os.environ.get("GT_WORKER_KEEP_MEMORY", "1") == "0":
        return False
    libc = _libc()
    if not libc:
        return False
    try:
        m_trim_threshold, m_mmap_max, m_arena_max = -1, -4, -8
        ok = libc.mallopt(m_arena_max, 1)  # ZeroMQ's I/O threads allocate receive buffers too
        ok &= libc.mallopt(m_mmap_max, 0)
        ok &= libc.mallopt(m_trim_threshold, 2**31 - 1)  # an int: 1 << 62 would wrap to 0
        return bool(ok)
    except AttributeError:
        return False


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]  # fmt: skip


def cached_bytes(backend: Any) -> int | None:
    """Bytes the allocator holds free for reuse: the free blocks of CuPy's pool, or on NumPy the
    C heap's free bytes (glibc's ``mallinfo2``). ``None`` where it cannot be known."""
    if backend.name == "cupy":
        try:
            pool = backend.xp.get_default_memory_pool()
            return int(pool.total_bytes() - pool.used_bytes())
        except Exception:  # a CuPy without these counters
            return None
    libc = _libc()
    if not libc or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _Mallinfo2
    return int(libc.mallinfo2().fordblks)


def release_cached(backend: Any) -> None:
    """Give the allocator's free blocks back (to the device, or to the OS): a client left, the
    pool is under pressure, or the worker has been idle a while."""
    if backend.name == "cupy":
        try:
            backend.xp.get_default_memory_pool().free_all_blocks()
            backend.xp.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # a CuPy without pools: nothing is cached
            pass
        return
    libc = _libc()
    if libc and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
