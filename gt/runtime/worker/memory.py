"""Process-level memory settings of a worker."""

from __future__ import annotations

import os
import sys


def keep_freed_memory() -> bool:
    """Make glibc keep freed memory in the process instead of returning it to the OS.

    A worker frees and allocates arrays of the same large sizes every step; handing them back to
    the kernel (big blocks are ``mmap``-ed and ``munmap``-ed) makes every step page-fault them in
    again, which in a virtual machine can cost more than the arithmetic. ``$GT_WORKER_KEEP_MEMORY=0``
    turns this off. Returns whether it was applied.
    """
    if os.environ.get("GT_WORKER_KEEP_MEMORY", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # noqa: PLC0415 - only on Linux, once

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max, m_arena_max = -1, -4, -8
        ok = libc.mallopt(m_arena_max, 1)  # ZeroMQ's I/O threads allocate receive buffers too
        ok &= libc.mallopt(m_mmap_max, 0)
        ok &= libc.mallopt(m_trim_threshold, 1 << 62)
        return bool(ok)
    except (OSError, AttributeError):
        return False
