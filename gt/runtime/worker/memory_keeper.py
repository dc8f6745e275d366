"""A worker's memory settings and reports: which limit applies, the pool behind it, and the numbers
its ``memory`` events carry.

Settings arrive in layers (the first that says wins): what programs set while running
(``gt.config.set(memory_limit=...)``, passed on by the dispatcher), the worker's own flags, the
dispatcher's flags, the ``GT_*`` environment variables, then the defaults
(:mod:`gt.runtime.memory_settings`). A pool is only built once a limit or a quota is set: without
one the executor's tables are plain dicts and nothing is tracked per store.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from gt.runtime import memory_settings as MS
from gt.runtime.worker.executor import Executor
from gt.runtime.worker.memory import cached_bytes, release_cached
from gt.runtime.worker.pool import MemoryPool
from gt.runtime.worker.ram_cap import ENV as RAM_CAP_ENV
from gt.runtime.worker.ram_cap import apply_cap, cap_bytes, machine_ram
from gt.runtime.worker.spill import SpillStore

#: A worker that ran nothing for this long gives its cached blocks back.
IDLE_RELEASE_S = float(os.environ.get("GT_IDLE_RELEASE_S", 30.0))


def capacity(backend: Any, sharing: int = 1) -> int | None:
    """What a fractional limit is a fraction of: the GPU's memory, or the machine's RAM, divided
    among the ``sharing`` local workers on it (each may use its share, not all of it)."""
    share = max(1, sharing)
    try:
        if backend.name == "cupy":
            return int(backend.xp.cuda.Device().mem_info[1]) // share
        ram = machine_ram()  # (a container's cgroup limit, when it has less than the machine)
        return ram // share if ram else None
    except (AttributeError, ValueError, OSError):
        return None
    except Exception:  # a device that does not answer: fractions then mean no limit
        return None


def _per_thread(backend: Any, stream: Any) -> bool:
    """Whether ``stream`` is CuPy's per-thread default stream (``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM``)."""
    ptds = getattr(backend.xp.cuda.runtime, "streamPerThread", None)
    return ptds is not None and getattr(stream, "ptr", None) == ptds


class WorkerMemory:
    """The memory side of one worker.

    Args:
        backend: the worker's backend.
        executor: its executor (the pool is attached to it).
        flags: the worker's own settings (``gt worker --memory-limit ...``), not yet normalised.
        transfer: ``transfer(direction, t0, t1, nbytes, client)`` for spill traffic.
        sharing: the local workers on this worker's GPU (or machine, on NumPy), itself included:
            a fractional limit is of its share (see :func:`capacity`).
    """

    def __init__(self, backend: Any, executor: Executor, flags: Mapping | None,
                 transfer: Callable[[str, int, int, int, int], None], *,
                 sharing: int = 1) -> None:  # fmt: skip
        self.backend = backend
        self.executor = executor
        self.flags = MS.normalize(flags or {})
        self.env = MS.from_env()
        self.dispatcher: dict = {}
        self.runtime: dict = {}
        self.transfer = transfer
        self.capacity = capacity(backend, sharing)
        self.settings = MS.resolve([self.flags, self.env], self.capacity)
        # (NumPy only: a GPU's allocator refuses by itself, and CUDA's mappings would count)
        self.ram_cap = (
            apply_cap(cap_bytes(os.environ.get(RAM_CAP_ENV), machine_ram(), sharing))
            if backend.name != "cupy"
            else None
        )
        executor.ram_cap = self.ram_cap
        self.peak = 0
        self.last_active = time.monotonic()
        self.released_idle = False

    @property
    def pool(self) -> MemoryPool | None:
        """The pool, once a limit or quota made one."""
        return self.executor.pool

    def configure(self, memory: Mapping | None) -> None:
        """Apply the dispatcher's layers: ``{"flags": {...}, "runtime": {...}}``.

        A malformed layer is ignored (and said on stderr): a worker keeps running on what it had.
        """
        memory = memory or {}
        try:
            self.dispatcher = MS.normalize(memory.get("flags") or {})
            self.runtime = MS.normalize(memory.get("runtime") or {})
        except (MS.SettingError, AttributeError) as exc:
            print(f"gt worker: ignoring memory settings from the dispatcher: {exc}",
                  file=sys.stderr)  # fmt: skip
        self.apply()

    def apply(self) -> None:
        """Make the pool follow the merged settings (building it the first time one is needed)."""
        s = self.settings = MS.resolve(
            [self.runtime, self.flags, self.dispatcher, self.env], self.capacity
        )
        limit, quota = s["memory_limit"], s["client_memory_limit"]
        compute = self._compute_stream()
        # Under CuPy's per-thread default streams the executor's stream cannot be named from the
        # prefetch thread (its handle means "the calling thread's"), so a read-back there could
        # not be ordered after the executor's work: buffers come back on demand only.
        prefetch = (
            0 if compute is not None and _per_thread(self.backend, compute) else s["prefetch"]
        )
        pool = self.pool
        if pool is None and (limit is not None or quota is not None):
            store = SpillStore(self.backend.xp if self.backend.name == "cupy" else None)
            ident = getattr(self.backend, "identity", None)
            store.device = getattr(ident, "index", None)
            store.compute_stream = compute
            pool = MemoryPool(limit=limit, client_limit=quota, threshold=s["spill_threshold"],
                              prefetch=prefetch, store=store, transfer=self.transfer)  # fmt: skip
            self.executor.use_pool(pool)
        elif pool is not None:
            pool.configure(limit=limit, client_limit=quota, threshold=s["spill_threshold"],
                           prefetch=prefetch)  # fmt: skip
        if self.backend.name == "cupy":  # the device pool refuses past the limit by itself
            try:
                self.backend.xp.get_default_memory_pool().set_limit(size=limit or 0)
            except Exception as exc:  # an old CuPy: the accounting still holds the limit
                print(f"gt worker: CuPy's pool takes no limit ({exc})", file=sys.stderr)

    def _compute_stream(self) -> Any:
        """The stream the executor computes on (this thread's current one; CuPy only)."""
        if self.backend.name != "cupy":
            return None
        return self.backend.xp.cuda.get_current_stream()

    def active(self) -> None:
        """A batch ran."""
        self.last_active = time.monotonic()
        self.released_idle = False

    def tick(self) -> None:
        """Give cached blocks back after ``IDLE_RELEASE_S`` without work."""
        if not self.released_idle and time.monotonic() - self.last_active > IDLE_RELEASE_S:
            self.released_idle = True
            release_cached(self.backend)

    def report(self) -> dict:
        """The fields of a ``memory`` event (bytes; ``None`` where not known)."""
        n, used, per = self.executor.holdings()
        cached = cached_bytes(self.backend)
        limit = self.settings["memory_limit"]
        if cached and limit is not None and used + cached > limit:
            # (freed blocks the allocator keeps count against the machine as much as tensors
            # do: past the limit they go back, as CuPy's own pool does at its limit)
            release_cached(self.backend)
            cached = cached_bytes(self.backend)
        pool = self.pool
        self.peak = max(self.peak, used, pool.peak if pool is not None else 0)
        out = {
            "used": used,
            "reserved": used + cached if cached is not None else None,
            "cached": cached,
            "limit": self.settings["memory_limit"],
            "client_limit": self.settings["client_memory_limit"],
            "capacity": self.capacity,
            "tensors": n,
            "peak": self.peak,
            "clients": {c: b for c, b in per.items()},
            "spilled": 0,
            "spill_out": 0,
            "spill_in": 0,
            "prefetched": 0,
            "prefetch_hits": 0,
            "prefetch_misses": 0,
            "oom": 0,
            "spill_reused": 0,
        }
        if pool is not None:
            snap = pool.snapshot()
            out["spilled"] = snap["spilled"]
            for k in ("spill_out", "spill_in", "prefetched", "prefetch_hits", "prefetch_misses",
                      "oom", "spill_reused"):  # fmt: skip
                out[k] = snap[k]
            out["clients_spilled"] = pool.client_spilled()
        return out

    def close(self) -> None:
        """Stop the prefetch thread and remove the spill files."""
        if self.pool is not None:
            self.pool.close()
