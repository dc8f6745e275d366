"""The records of a worker's memory pool (:mod:`gt.runtime.worker.pool`): a client's tracked
tensor table, the buffers it holds and the ones in the spill tier."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gt.runtime import ops as O
from gt.runtime.memory_settings import human

if TYPE_CHECKING:
    from gt.runtime.worker.pool import MemoryPool


class OutOfMemory(MemoryError):
    """A result does not fit under a worker's memory limit (or a client's quota), even after
    spilling. The message names the sizes; :attr:`requested` and :attr:`limit` are bytes."""

    def __init__(self, message: str, requested: int, limit: int):
        super().__init__(message)
        self.requested = requested
        self.limit = limit


def over_limit(op: int, requested: int, limit: int, what: str, held: int,
               spilled: int) -> OutOfMemory:  # fmt: skip
    """:class:`OutOfMemory` for a result of ``requested`` bytes that does not fit under ``what``
    (a limit or a quota of ``limit`` bytes) with ``held`` bytes that cannot be spilled now."""
    return OutOfMemory(
        f"{O.op_name(op)}'s result of {human(requested)} ({requested} B) does not fit under "
        f"{what} ({limit} B): {human(held)} is held by tensors that cannot be spilled now "
        f"(inputs of this op, or too small); {human(spilled)} is spilled. "
        "Free tensors, or raise the limit with gt.config.set(memory_limit=...)",
        requested,
        limit,
    )


#: How CUDA's libraries say that an allocation of their own failed (cuBLAS's and cuSOLVER's
#: workspaces, cuFFT's plans, a module's load): errors that are no ``MemoryError`` in CuPy.
_OOM_TEXT = ("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "CUBLAS_STATUS_ALLOC_FAILED",
             "CUSOLVER_STATUS_ALLOC_FAILED", "CUFFT_ALLOC_FAILED")  # fmt: skip


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the device ran out of memory (CuPy's pool, or a CUDA library)."""
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc) for t in _OOM_TEXT)


def allocation_size(exc: BaseException) -> int | None:
    """The bytes an allocator's out-of-memory error says it was asked for (CuPy: "Out of memory
    allocating 4,000,256 bytes ..."), or ``None``."""
    m = re.search(r"allocating ([\d,]+) bytes", str(exc))
    return int(m.group(1).replace(",", "")) if m else None


def device_out_of_memory(exc: MemoryError, op: int, held: int | None, spilled: int,
                         ram_cap: int | None = None) -> OutOfMemory:  # fmt: skip
    """:class:`OutOfMemory` for an allocation the device itself refused (CuPy's
    ``OutOfMemoryError``), or a NumPy worker's RAM cap (:mod:`gt.runtime.worker.ram_cap`), after
    the pool spilled what it could; ``held`` is ``None`` without a pool. The allocator's own
    message says how much was asked for."""

    if held is None:
        where = ("no memory limit is set on this worker, so nothing was spilled "
                 "(--memory-limit or gt.config.set(memory_limit=...) lets it spill)")  # fmt: skip
    else:
        where = (f"{human(held)} is held by tensors that cannot be spilled now, "
                 f"{human(spilled)} is spilled")  # fmt: skip
    if ram_cap is not None:
        return OutOfMemory(
            f"{O.op_name(op)}'s result does not fit under this worker's RAM cap of "
            f"{human(ram_cap)} ({exc}); {where}. The cap keeps the machine's OOM killer from "
            "taking the worker and every program's tensors with it (GT_RAM_CAP sets it). Free "
            "tensors, or set a memory limit below the cap to spill to disk",
            0,
            0,
        )
    return OutOfMemory(
        f"{O.op_name(op)}'s result does not fit in the device's memory ({exc}); {where}. Free "
        "tensors, or leave more of the device to this worker",
        0,
        0,
    )


class Accounts:
    """Who shares a quota (a mixin of :class:`~gt.runtime.worker.pool.MemoryPool`, whose
    ``accounts``, ``client_used`` and ``lock`` it reads): the programs of a tenant with a key of its
    own count against one quota; any other client against its own. An *account* is a tenant's
    name or a client's number."""

    accounts: dict[int, str]
    client_used: dict[int, int]
    lock: Any

    def set_account(self, cno: int, tenant: str | None) -> None:
        """Client ``cno`` runs for ``tenant`` (its own key): its bytes count against the quota
        that tenant's programs share (a client with no tenant has a quota of its own)."""
        if tenant is not None and self.accounts.get(cno) != tenant:
            with self.lock:  # (the prefetch thread reads the accounts)
                self.accounts[cno] = tenant

    def account_used(self, a: Any) -> int:
        """Bytes held against account ``a``: a tenant's (all its programs'), else one client's."""
        if isinstance(a, str):
            return sum(self.client_used.get(c, 0) for c in self._account_members(a))
        return self.client_used.get(a, 0)

    def _account_members(self, a: Any) -> set[int]:
        """The clients whose bytes count against account ``a`` (a tenant's name, or a client)."""
        return {c for c, t in self.accounts.items() if t == a} if isinstance(a, str) else {a}

    def _accounts(self) -> set[Any]:
        """The accounts of the clients holding memory."""
        return {self.accounts.get(c, c) for c in self.client_used}


class PoolBuffer:
    """A buffer held in the pool: its owner, size, client, and the tensors over it.

    ``clean``: the spill tier's handle of an identical copy of its bytes (kept when the buffer was
    read back from a file: the worker never writes into such a buffer), so spilling it again
    writes nothing.
    """

    __slots__ = ("root", "nbytes", "cno", "refs", "clean")

    def __init__(self, root: Any, nbytes: int, cno: int) -> None:
        self.root, self.nbytes, self.cno = root, nbytes, cno
        self.refs: set[int] = set()
        self.clean: Any = None


class SpilledBuffer:
    """A buffer in the spill tier: its handle, size and the views to rebuild.

    ``state``: ``"out"`` (in the tier), ``"loading"`` (the prefetch thread is reading it),
    ``"ready"`` (read back, waiting in ``data`` to be claimed), ``"gone"`` (freed).
    """

    __slots__ = ("cno", "nbytes", "handle", "views", "state", "data")

    def __init__(self, cno: int, nbytes: int, handle: Any, views: dict) -> None:
        self.cno, self.nbytes, self.handle, self.views = cno, nbytes, handle, views
        self.state = "out"
        self.data: Any = None


class TrackedTable(dict):
    """A client's tensor table that keeps the pool's books (and reads spilled tensors back)."""

    __slots__ = ("pool", "cno")

    def __init__(self, pool: MemoryPool, cno: int) -> None:
        super().__init__()
        self.pool, self.cno = pool, cno

    def __setitem__(self, tid: int, arr: Any) -> None:
        pool = self.pool
        if dict.__contains__(self, tid):
            pool.unref(self.cno, tid)
        else:
            pool.forget_spilled(self.cno, tid)
        dict.__setitem__(self, tid, arr)
        try:
            pool.ref(self.cno, tid, arr)
        except OutOfMemory:
            dict.pop(self, tid, None)
            pool.unref(self.cno, tid)
            raise

    def __missing__(self, tid: int) -> Any:
        return self.pool.unspill(self.cno, tid)

    def pop(self, tid: int, *default: Any) -> Any:
        if dict.__contains__(self, tid):
            arr = dict.pop(self, tid)
            self.pool.unref(self.cno, tid)
            return arr
        if self.pool.forget_spilled(self.cno, tid):
            return True  # it was spilled: gone now
        if default:
            return default[0]
        raise KeyError(tid)

    def __delitem__(self, tid: int) -> None:
        self.pop(tid)

    def holds(self, tid: int) -> bool:
        """Whether the tensor exists here, resident or spilled."""
        return dict.__contains__(self, tid) or (self.cno, tid) in self.pool.spilled
