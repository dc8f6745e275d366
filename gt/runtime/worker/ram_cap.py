"""A NumPy worker's RAM cap: the kernel refuses its allocations past a share of the machine.

Without a memory limit a NumPy worker allocates what its programs ask, and a program that keeps
too much (a leak, a batch size off by a digit, a hostile tenant) brings in the kernel's OOM killer,
which kills the biggest process: the worker, with every other program's tensors. The cap is the
backstop for that: ``RLIMIT_DATA`` (the private writable memory a process may map, checked by the
kernel at each ``mmap``/``brk``) set to 90 % of the worker's share of the machine's RAM, so the
allocation that would cross it fails with ``MemoryError``, which the executor turns into
:class:`gt.OutOfMemory` for that one op; the worker and the other tensors stay. It costs nothing
per op (there is no accounting; a memory limit, ``--memory-limit``, does that and spills).

``GT_RAM_CAP`` sets it: a fraction of the worker's share (``0.9``, the default), a size (``20GB``),
or ``off``. The machine's RAM is the smaller of its physical memory and the memory limit of the
cgroup the worker runs in (a container's), and a share divides it among the local workers of one
dispatcher. CuPy workers take no cap: their tensors live on the GPU, whose allocator refuses by
itself, and CUDA's own mappings would count against it.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

from gt.runtime.env_checks import MIN_RAM_CAP, ram_cap_size

ENV = "GT_RAM_CAP"
DEFAULT_FRACTION = 0.9
#: The cgroup file systems' roots, v2 then v1 (``memory.max`` / ``memory.limit_in_bytes``).
_CGROUP_ROOTS = (
    ("/sys/fs/cgroup", "memory.max"),
    ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
)
#: A cgroup "limit" at least this large means none (v1 writes 2^63 rounded down to a page).
_UNLIMITED = 1 << 60


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cgroup_limit(proc_cgroup: str | None, read: Callable[[str], str | None] = _read) -> int | None:
    """The smallest memory limit of this process's cgroup and its ancestors (v1 or v2), from the
    text of ``/proc/self/cgroup``; ``None`` when there is none. ``read(path)`` gives a file's text
    (``None`` if it cannot be read)."""
    best: int | None = None
    for line in (proc_cgroup or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            root, name = _CGROUP_ROOTS[0]
        elif "memory" in controllers.split(","):
            root, name = _CGROUP_ROOTS[1]
        else:
            continue
        # (in a container the cgroup's own folder is often mounted as the root: look there too)
        dirs = [path.rstrip("/")]
        while dirs[-1]:
            dirs.append(dirs[-1].rsplit("/", 1)[0])
        for d in dirs:
            text = read(f"{root}{d}/{name}")
            value = (text or "").strip()
            if value.isdigit() and int(value) < _UNLIMITED:
                best = int(value) if best is None else min(best, int(value))
    return best


def machine_ram() -> int | None:
    """The RAM this process's machine (or container) has: physical memory, or the cgroup's
    limit if that is smaller."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        phys = None
    limit = cgroup_limit(_read("/proc/self/cgroup"))
    if phys is None:
        return limit
    return min(phys, limit) if limit is not None else phys


def cap_bytes(setting: str | None, ram: int | None, sharing: int = 1) -> int | None:
    """The cap for a worker: ``setting`` (``$GT_RAM_CAP``: a fraction of the worker's share of
    ``ram``, a size, or ``off``; unset is :data:`DEFAULT_FRACTION`); ``None`` for no cap.

    Raises:
        memory_settings.SettingError: a setting that does not parse.
    """
    if setting is None or not setting.strip():
        value: int | float | None = DEFAULT_FRACTION
    else:
        value = ram_cap_size(setting)
    if isinstance(value, float):  # (never below what the worker needs to start)
        return max(MIN_RAM_CAP, int(value * ram / max(1, sharing))) if ram else None
    return value


def data_in_use(status: str | None = None) -> int | None:
    """The private writable memory this process has mapped (``VmData`` of ``/proc/self/status``,
    what ``RLIMIT_DATA`` counts), in bytes; ``None`` where the system does not say."""
    text = _read("/proc/self/status") if status is None else status
    for line in (text or "").splitlines():
        if line.startswith("VmData:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def apply_cap(cap: int | None) -> int | None:
    """Set this process's ``RLIMIT_DATA`` soft limit to ``cap`` (never above the hard limit);
    returns the soft limit now in force (``None``: none)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if cap is not None:
        new = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (new, hard))
        soft = new
    return None if soft == resource.RLIM_INFINITY else soft


__all__ = [
    "DEFAULT_FRACTION",
    "ENV",
    "apply_cap",
    "cap_bytes",
    "cgroup_limit",
    "data_in_use",
    "machine_ram",
]
