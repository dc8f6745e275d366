"""What a worker does when the GPU or its allocator fails an op (a mixin of
:class:`~gt.runtime.worker.executor.Executor`, whose ``pool``, ``backend``, ``clock`` and
``sticky_error`` it uses).

* An allocation the allocator refuses (CuPy's pool, its limit, a CUDA library's workspace) is
  tried again after the pool spills what it may and the cached blocks go back, as long as that
  frees something; then it is the user's :class:`~gt.runtime.worker.pool_table.OutOfMemory`.
  On a NumPy worker the allocator is the kernel, refusing past the worker's RAM cap
  (:mod:`gt.runtime.worker.ram_cap`), and an upload that never came may be one it refused.
* An error the device raises at a batch's fence fails the batch's outputs; if the device keeps
  failing (a sticky error), the worker must stop, and what is left of a batch cut short fails
  with that error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.runtime import memory_settings as MS
from gt.runtime import protocol as P
from gt.runtime.worker.batch import BatchState, Job
from gt.runtime.worker.memory import release_cached
from gt.runtime.worker.pool_table import OutOfMemory, device_out_of_memory, out_of_memory
from gt.runtime.worker.ram_cap import data_in_use

#: What CuPy raises when the CUDA runtime or driver reports an error. A kernel's fault (an illegal
#: address) is reported at whichever later call first waits for the device: a fetch's copy, an
#: allocation, another launch.
_DEVICE_ERRORS = frozenset({"CUDARuntimeError", "CUDADriverError"})


def op_error_text(exc: Exception, exact: bool) -> str:
    """An op's error as its client reads it. A CUDA error not ``exact`` (ops not fenced one by
    one) may be an earlier op's fault: the text says so, and how to find the op."""
    text = f"{type(exc).__name__}: {exc}"
    if not exact and type(exc).__name__ in _DEVICE_ERRORS:
        text += (
            " (reported by the GPU at this op, which an earlier op of the batch may have "
            "caused: CUDA reports a kernel's fault at the next call that waits for the "
            "device; GT_CUDA_SYNC_EACH_OP=1 names the exact op)"
        )
    return text


class Refused:
    """An op's result the allocator refused (``size``: the bytes it asked for, if it said)."""

    __slots__ = ("size",)

    def __init__(self, size: int | None) -> None:
        self.size = size


class FailureHandling:
    """The executor's answers to refused allocations and device errors."""

    pool: Any  # (the executor's: its memory pool, backend, clock and state)
    backend: Any
    clock: Any
    sticky_error: str | None
    ram_cap: int | None  # a NumPy worker's RAM cap, named in its out-of-memory errors
    _free: Any

    def abandon(self, job: Job) -> None:
        """Fail what is left of a batch the GPU can no longer run (a sticky error mid-slice): its
        outputs fail with that error, as if each op had raised it, and the batch is done."""
        b = job.b
        why = f"the GPU failed before this op ran: {self.sticky_error}"
        first = None
        for ins in job.instrs[job.idx :]:
            if type(ins) is list and len(ins) > P.I_SRC and type(ins[P.I_OUT]) is int:
                src = ins[P.I_SRC] if type(ins[P.I_SRC]) is int else 0
                b.tbl.pop(ins[P.I_OUT], None)
                b.failed[ins[P.I_OUT]] = err = [why, ins[P.I_OP], src, False]
                first = first or err
        if first is not None:
            b.report(first)
        job.idx = len(job.instrs)
        for f in job.late:
            self._free(b, f)

    def _device_failed(self, b: BatchState, instrs: list, exc: Exception) -> None:
        """The device raised at the batch's fence: some op of this batch caused it. Its outputs
        are failed; if the device still fails, the error is sticky and the worker must stop."""
        last = instrs[-1] if instrs and type(instrs[-1]) is list else [-1, None, None, None, 0]
        msg = (f"{type(exc).__name__}: {exc} (raised by the GPU while it ran this batch; "
               "GT_CUDA_SYNC_EACH_OP=1 names the exact op)")  # fmt: skip
        err = [msg, last[P.I_OP], last[P.I_SRC] if type(last[P.I_SRC]) is int else 0, False]
        for ins in instrs:
            if type(ins) is list and len(ins) > P.I_OUT and type(ins[P.I_OUT]) is int:
                b.tbl.pop(ins[P.I_OUT], None)
                b.failed[ins[P.I_OUT]] = err
        b.report(err)
        try:
            self.clock.fence()
        except Exception as again:  # e.g. an illegal address: every later call fails too
            self.sticky_error = f"{type(again).__name__}: {again}"

    def _after_refusal(self, code: int, make: Any, size: int | None = None) -> Any:
        """``make()`` again after the allocator refused it: spill what the pool may and give the
        allocator's cached blocks back, as long as that frees something; then the refusal becomes
        the user's :class:`OutOfMemory` (naming the op, the sizes, and what is held). An
        allocation (``size`` bytes, if known) larger than the whole limit spills nothing: no room
        made would let it fit, and the other clients' tensors would leave the device for naught."""
        limit = self.pool.limit if self.pool is not None else None
        hopeless = size is not None and limit is not None and size > limit
        while True:
            spilled = not hopeless and self.pool is not None and self.pool.make_room()
            release_cached(self.backend)
            try:
                return make()
            except OutOfMemory:
                raise
            except Exception as exc:
                if not out_of_memory(exc):
                    raise
                if spilled:  # something left the device: try again
                    continue
                if self.pool is not None:
                    raise self.pool.device_refused(exc, code) from None
                raise device_out_of_memory(exc, code, None, 0, self.ram_cap) from None

    def _upload_refused(self, dtype: str, shape: list) -> OutOfMemory | None:
        """Why a direct upload never came, when the RAM cap is why: ZeroMQ drops a message whose
        buffer the kernel refused, and the worker only sees that nothing arrived."""
        if self.ram_cap is None:
            return None
        nbytes = int(np.dtype(dtype).itemsize) if dtype != "bfloat16" else 2
        for d in shape:
            nbytes *= int(d)
        used = data_in_use()
        if used is None or used + nbytes <= self.ram_cap:
            return None
        return OutOfMemory(
            f"upload of {MS.human(nbytes)} ({nbytes} B) did not fit under this worker's RAM cap of "
            f"{MS.human(self.ram_cap)} ({self.ram_cap} B; {MS.human(used)} in use), so its data was "
            "refused on arrival. The cap keeps the machine's OOM killer from taking the worker "
            "(GT_RAM_CAP sets it). Free tensors, or set a memory limit below the cap to spill",
            0,
            0,
        )
