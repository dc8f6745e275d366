"""The worker's executor: runs one batch of instructions in order and says what happened.

It owns the tensor tables (one per client, so ids never collide and a departed client's tensors go
in one step) and nothing else: no sockets. What needs the outside world goes through two objects
the worker's socket shell hands in: ``io`` (the data of a direct upload, a fetch reply) and
``peers`` (transfers and collectives with other workers). :meth:`Executor.run` runs a batch to
its end; :meth:`Executor.begin` and :meth:`Executor.step` run it in slices, so other clients'
batches can go between. Each returns a :class:`BatchResult` -- errors, timings and the columns of
the ``exec`` event -- which the shell reports.

An instruction that fails marks its output failed with ``[message, opcode, src]``; anything
computed from a failed tensor fails with the same message, and the error is reported once.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.batch import (
    BROADCASTING,
    GUARDED,
    BatchResult,
    BatchState,
    Job,
    check_broadcast,
    check_guarded,
    resolve_args,
)
from gt.runtime.worker.clock import SYNC_EACH_OP, clock_for
from gt.runtime.worker.failures import FailureHandling, Refused, op_error_text
from gt.runtime.worker.hot import HotPlans
from gt.runtime.worker.memory import release_cached
from gt.runtime.worker.peers import PeerFailure
from gt.runtime.worker.pool import MemoryPool
from gt.runtime.worker.pool_table import (
    allocation_size,
    out_of_memory,
)
from gt.runtime.worker.spill import root_of

_NEVER = 1 << 62
_UPLOAD, _FETCH, _MARK, _FREE, _PLACE, _EXPAND = (
    O.OPCODE[n] for n in ("upload", "fetch", "mark", "free", "place", "expand")
)
_ALL_REDUCE = O.ALL_REDUCE
_COMM = O.COMM_OPS
_HOT, _HOT_DEFINE = O.OPCODE["hot"], O.OPCODE["hot_define"]


class UploadNotYet(Exception):  # noqa: N818 - a signal, not an error
    """A direct upload has not arrived and another client's batch waits (see
    :meth:`ExecutorIO.upload`): the slice ends before it."""


class ExecutorIO(Protocol):
    """What the executor asks of the worker's sockets."""

    def upload(self, token: bytes | None, tok: int, give_way: Any = None) -> Any:
        """The frame a client sent on the data socket for upload ``tok`` (waits, bounded; raises
        :class:`UploadNotYet` when ``give_way()`` says another client waits)."""

    def reply(
        self, client: int, token: bytes | None, req: int, arr: Any, err: list | None,
        ack: int | None = None,
    ) -> None:  # fmt: skip
        """Send a fetch's array (or its error) to the client; ``ack``: the batch it ends, which
        the client may then count as done (no error so far)."""

    def client_transfer(self, direction: str, t0: int, t1: int, nbytes: int, cno: int) -> None:
        """Publish bytes that moved from a client (``"from_client"``: an upload taken) or to one
        (``"to_client"``), from ``t0`` to ``t1`` (monotonic ns)."""


class Executor(FailureHandling):
    """Per-client tensor tables and the loop that runs batches against them.

    Args:
        backend: the array backend (its handler table runs compute and create ops).
        peers: the worker's peer links (``run``, ``start``, ``finish``; ``cno``/``batch`` are set
            to the running batch so transfers are tagged with it).
        io: the socket shell's :class:`ExecutorIO`.
    """

    def __init__(self, backend: Backend, peers: Any, io: ExecutorIO):
        self.backend = backend
        self.handlers = backend.handlers
        # a replayed step's chains of in-place updates as one CUDA kernel (GT_FUSED_CHAINS=0: off)
        self._fuse = (
            getattr(backend, "elementwise_kernel", None)
            if getattr(backend, "name", "") == "cupy" and os.environ.get("GT_FUSED_CHAINS") != "0"
            else None
        )
        self.peers = peers
        self.io = io
        self.tables: dict[int, dict[int, Any]] = {}
        self.pool: MemoryPool | None = None  # set once a memory limit or quota is
        self.clock = clock_for(backend)  # CUDA events on a GPU: op times are device times
        self.sync_each_op = SYNC_EACH_OP and self.clock.device
        self.sticky_error: str | None = None  # the device failed for good (the worker must stop)
        self.ram_cap: int | None = None  # a NumPy worker's (gt.runtime.worker.ram_cap)
        self.failed: dict[int, dict[int, list]] = {}
        self.hot = HotPlans()
        self.pending: dict[int, tuple] = {}  # out id -> (all-reduce in flight, src), oldest first
        self.batches = 0
        self.instructions = 0
        self.busy_ns = 0
        # The slice running now and when it began (read by the worker's BusyReporter thread).
        self.running: Job | None = None
        self.running_since = 0
        self._give_way: Any = None  # the running slice's stop(): may an upload wait give way?

    # ------------------------------------------------------------------ clients
    def use_pool(self, pool: MemoryPool) -> None:
        """Keep the books of ``pool`` from now on (the tensors already held are counted)."""
        self.pool = pool
        pool.ram_cap = self.ram_cap
        for cno, tbl in list(self.tables.items()):
            self.tables[cno] = pool.table(cno, tbl)

    def _table(self, cno: int) -> dict:
        tbl = self.tables.get(cno)
        if tbl is None:
            tbl = self.tables[cno] = {} if self.pool is None else self.pool.table(cno)
        return tbl

    def drop_client(self, cno: int) -> None:
        """Forget every tensor of a client that left."""
        self.tables.pop(cno, None)
        self.failed.pop(cno, None)
        self.hot.drop_client(cno)
        if self.pool is not None:
            self.pool.drop_client(cno)
        release_cached(self.backend)  # a shared device gets the departed client's memory back

    def holdings(self) -> tuple[int, int, dict[int, int]]:
        """``(tensors, bytes, {client: bytes})`` held, each buffer counted once however many
        tensors view it (a broadcast view of one element is one element)."""
        pool = self.pool
        if pool is not None:
            n = sum(len(t) for t in self.tables.values())
            return n, pool.used, dict(pool.client_used)
        n = nbytes = 0
        per: dict[int, int] = {}
        seen: set[int] = set()
        for cno, tbl in list(self.tables.items()):
            mine = 0
            for a in list(tbl.values()):
                n += 1
                r = root_of(a)
                if r is not None and r[0] not in seen:
                    seen.add(r[0])
                    mine += r[2]
            per[cno] = mine
            nbytes += mine
        return n, nbytes, per

    # ------------------------------------------------------------------ batches
    def run(
        self, cno: int, seq: int, token: Any, body: Any, bufs: list, timed: bool,
        planned: bool = False, lookahead: Any = (), ack: bool = False,
    ) -> BatchResult:  # fmt: skip
        """Run one batch for client ``cno`` to its end (see :meth:`begin` for the arguments)."""
        return self.step(self.begin(cno, seq, token, body, bufs, timed, planned, lookahead, ack))

    def begin(
        self, cno: int, seq: int, token: Any, body: Any, bufs: list, timed: bool,
        planned: bool = False, lookahead: Any = (), ack: bool = False,
    ) -> Job:  # fmt: skip
        """Start one batch for client ``cno``; :meth:`step` runs it (in one go, or in slices).

        Args:
            body: the batch's body frame (instructions and frees, see :func:`P.parse_body`), or
                :func:`P.parse_body`'s result when the caller already parsed it.
            bufs: the upload frames that came with it.
            timed: also time every instruction (``durs``).
            planned: the dispatcher's planner wrote it (transfers between workers are allowed).
            lookahead: ``(client, instructions, frees)`` of the batches queued after this one
                (the memory pool spills what they need last, prefetches it, and does not spill
                what they free).
            ack: a fetch that ends the batch may acknowledge it to the client
                (:attr:`P.Run.ack`; ``BatchState.acked`` says whether one did).
        """
        b = BatchState(cno, seq, token, self._table(cno), self.failed.setdefault(cno, {}), bufs,
                   planned)  # fmt: skip
        try:
            instrs, frees, free_at = body if type(body) is tuple else P.parse_body(body)
        except P.ProtocolError as exc:
            instrs, frees, free_at = [], [], None
            b.report([str(exc), -1, 0])
        if ack and instrs:
            b.ack_with = instrs[-1]
        # Frees the client made between instructions are applied at that point of the batch.
        early = sorted(zip(free_at, frees)) if free_at else []
        job = Job(b, instrs, early, [] if free_at else frees, timed)
        if self.pool is not None:
            self.pool.plan([(cno, instrs, frees), *lookahead])
        return job

    def step(self, job: Job, stop: Any = None) -> BatchResult:
        """Run ``job`` until it ends, or -- with ``stop`` -- until ``stop()`` is true when asked
        between two instructions (a *slice*: another client's work is waiting). ``stop`` is asked
        only once ``time.monotonic()`` has passed its ``deadline`` attribute (it may move the
        deadline on), so a slice costs one clock read per instruction. The result covers this
        slice (``done``: the batch has ended; ``errors``: all of the batch's so far).
        """
        b = job.b
        res = BatchResult()
        self.peers.cno, self.peers.batch = b.cno, b.seq
        if job.started and self.pool is not None:  # resumed after another client's slice
            self.pool.plan([(b.cno, job.instrs[job.idx :], job.late)])
        job.started = True
        start, dclock = job.idx, self.clock
        marks: list = []
        waits: list[int] = []
        res.t0 = self.running_since = time.monotonic_ns()
        self.running = job  # (until the device has done the slice's work too)
        self._give_way = stop
        try:
            job.idx = self._loop(job, (marks, waits) if job.timed else None, stop)
            res.done = job.idx >= len(job.instrs)
            if res.done:
                if self.pending:  # nothing stays in flight past the batch: peers may wait for it
                    self._complete_pending(b)
                for f in job.late:
                    self._free(b, f)
            if dclock.device:  # a slice is done when the device has done it
                try:
                    if marks:
                        marks.append(dclock.mark())
                    dclock.fence()
                except Exception as exc:  # (recording an event fails too once the GPU has failed)
                    marks.clear()  # no device times for this slice
                    self._device_failed(b, job.instrs[start : job.idx], exc)
                else:
                    self.backend.release_staged()  # (its copies are done with the slice's work)
        finally:
            self.running = None
        res.t1 = time.monotonic_ns()
        if marks:
            if not dclock.device:
                marks.append(res.t1)
            waits.append(self.peers.waited_ns)
            # An instruction's time excludes what it spent waiting for data (shown as a wait slice
            # of its own): an op that needs an all-reduce's result is not charged for the all-reduce.
            try:
                times = dclock.durations(marks)
            except Exception:  # the device failed after the fence: the slice goes untimed
                times = []
            res.durs = [max(0, d - (w1 - w0)) for d, w0, w1 in zip(times, waits, waits[1:])]
        res.errors, res.instrs = b.errors, job.instrs[start : job.idx]
        res.fresh_errors, job.reported = b.errors[job.reported :], len(b.errors)
        res.hot, b.hot = b.hot, 0
        self.instructions += len(res.instrs)
        self.busy_ns += res.busy_ns
        if res.done:
            self.batches += 1
        return res

    def _loop(self, job: Job, stamp: Any, stop: Any) -> int:
        """The hot loop: frees due at each position, then the instruction; from ``job.idx`` to
        the end, or to where ``stop()`` says (asked once past ``stop.deadline``).
        Returns where it stopped.

        ``stamp``: ``None``, or two lists for the clock's mark before each instruction and the
        worker's total wait so far (per-instruction timing).
        """
        b, instrs, early = job.b, job.instrs, job.early
        peers = self.peers
        stamp_t, stamp_w = (stamp[0].append, stamp[1].append) if stamp is not None else (None, None)
        mark = self.clock.mark
        sync_each = self.sync_each_op
        fi = job.fi
        next_free = early[fi][0] if fi < len(early) else _NEVER
        n = len(instrs)
        idx = job.idx
        first = idx
        now = time.monotonic
        while idx < n:
            if stop is not None and idx > first and now() >= stop.deadline and stop():
                break
            job.idx = idx  # (where a long batch is, for the worker's busy events)
            ins = instrs[idx]
            if next_free <= idx:
                while fi < len(early) and early[fi][0] <= idx:
                    self._free(b, early[fi][1])
                    fi += 1
                next_free = early[fi][0] if fi < len(early) else _NEVER
            if self.pending:  # an all-reduce runs in the background: move it on
                peers.progress()
            if stamp_t is not None:
                try:
                    stamp_t(mark())
                except Exception:  # the GPU has failed: the slice goes untimed (the fence says why)
                    stamp[0].clear()
                    stamp_t = None
                else:
                    stamp_w(peers.waited_ns)
            try:
                self._one(b, ins)
                if sync_each:  # a device error then lands on the op that caused it
                    self.clock.fence()
            except UploadNotYet:  # its data has not come, and another client waits: the slice
                if stamp_t is not None:  # ends before it (it runs when this batch's turn comes)
                    stamp[0].pop()
                    stamp[1].pop()
                break
            except PeerFailure as exc:  # an input failed on another worker, which reported it
                out = ins[P.I_OUT]
                b.tbl.pop(out, None)
                b.failed[out] = [*exc.err, False]
            except Exception as exc:  # the op failed: record it against its output
                self._op_failed(b, ins, exc)
            idx += 1
        if idx >= n:
            for _, f in early[fi:]:
                self._free(b, f)
            fi = len(early)
        job.fi = fi
        return idx

    def _one(self, b: BatchState, ins: Any) -> None:
        code, out, args, attrs, src = ins  # (a malformed one raises here and fails alone)
        if type(code) is not int or type(out) is not int or type(args) is not list:
            raise P.ProtocolError("an instruction is [opcode, out, args, attrs, src]")
        if attrs is not None:
            if type(attrs) is not dict:
                raise P.ProtocolError("an instruction's attrs are a dict or None")
            if "dtype" in attrs and attrs["dtype"] not in P.DTYPE_SET:
                raise P.ProtocolError(f"unsupported dtype {attrs['dtype']!r:.40}")
        if code in GUARDED:
            if code == _HOT:
                self._hot(b, args, attrs, src)
                return
            if code == _HOT_DEFINE:
                self.hot.define(b.cno, attrs)
                return
            check_guarded(code, attrs, b.planned)
        if self.pool is not None:
            self.pool.step(b.cno, args, code)
        tbl = b.tbl
        try:
            vals = resolve_args(tbl, args)
        except KeyError:
            vals = None
            if self.pending:  # an input is an all-reduce in flight: complete it first
                self._complete_pending(b)
                try:
                    vals = resolve_args(tbl, args)
                except KeyError:
                    pass
        if vals is None:
            self._input_missing(b, code, out, args, attrs, src)
            return
        h = self.handlers[code] if type(code) is int and 0 <= code < len(self.handlers) else None
        if h is not None:
            if b.poisoned and self._reads_failed(b, out, args):
                return
            if code in BROADCASTING:
                check_broadcast(code, vals)
            try:
                r = h(vals, attrs)
            except Exception as exc:
                if not out_of_memory(exc):
                    raise
                # the allocator refused (on a GPU: the device, its pool's limit, or a CUDA
                # library's workspace); retried below, once this handler's frame (which holds
                # the attempt's temporaries) is gone
                r = Refused(allocation_size(exc))
            if type(r) is Refused:
                r = self._after_refusal(code, lambda: h(vals, attrs), r.size)
            tbl[out] = r
        elif code in _COMM:
            self._comm(b, code, out, vals, attrs, src)
        elif code == _UPLOAD:
            tbl[out] = self._upload(b, attrs)
        elif code == _FETCH:
            if b.failed and args[0] in b.failed:  # (an in-place op on it failed: see _op_failed)
                err = b.failed[args[0]]
                self.io.reply(b.cno, b.token, out, None, err[:3])
                self._delivered(b, err)
            elif ins is b.ack_with and not b.errors:  # the batch's end, and nothing failed
                self.io.reply(b.cno, b.token, out, vals[0], None, b.seq)
                b.acked = True
            else:
                self.io.reply(b.cno, b.token, out, vals[0], None)
        elif code == _FREE:
            if self.pending:
                self._complete_pending(b)
            for f in attrs["ids"]:
                self._free(b, f)
        elif code == _PLACE:
            tbl[out] = vals[0]
        elif code != _MARK:
            raise P.ProtocolError(f"unknown opcode {code!r}")

    def _hot(self, b: BatchState, args: list, attrs: Any, src: int) -> None:
        """Replay a captured step: bound to the kernels when it can be, else instruction by
        instruction through :meth:`_one` (under a memory limit, so the pool keeps its books, and
        when an input is missing, so it fails as it would eagerly); temporaries are dropped after
        their last use."""
        try:
            plan, inputs, outs, seeds = self.hot.call(b.cno, args, attrs)
        except P.ProtocolError as exc:
            err = [f"ProtocolError: {exc}", _HOT, src, False]
            for o in attrs.get("outs", ()) if type(attrs) is dict else ():
                if type(o) is int:  # what the client waits for says why it never came
                    b.failed[o] = err
            b.report(err)
            return
        b.hot += 1
        if self.pool is None and not self.sync_each_op:
            fast = plan.compiled(self.handlers, self._fuse)
            if fast is not None:
                ran, errors = fast.run(b.tbl, b.failed, inputs, outs, seeds)
                if ran:
                    for e in errors:
                        b.report(e)
                    return
        drop = plan.drop_after
        for i, ins in enumerate(plan.instructions(inputs, outs, seeds)):
            try:
                self._one(b, ins)
            except Exception as exc:  # the op failed: its output, and what uses it, fail
                self._op_failed(b, ins, exc)
            for t in drop[i]:
                self._free(b, t)

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def _free(b: BatchState, tid: int) -> None:
        if b.tbl.pop(tid, None) is None:
            b.failed.pop(tid, None)

    def _op_failed(self, b: BatchState, ins: Any, exc: Exception) -> None:
        ok = type(ins) is list
        code = ins[P.I_OP] if ok and ins and type(ins[P.I_OP]) is int else -1
        src = ins[P.I_SRC] if ok and len(ins) > P.I_SRC else 0
        out = ins[P.I_OUT] if ok and len(ins) > P.I_OUT else None
        err = [op_error_text(exc, self.sync_each_op), code, src if type(src) is int else 0, False]
        if code == _FETCH and type(out) is int:
            self.io.reply(b.cno, b.token, out, None, err[:3])
        elif type(out) is int:
            args = ins[P.I_ARGS] if ok and len(ins) > P.I_ARGS else None
            attrs = ins[P.I_ATTRS] if ok and len(ins) > P.I_ATTRS else None
            # An in-place op that raised (x[out_of_range] = v) wrote nothing: the tensor stays as
            # it was, as PyTorch's does, and the error goes to its next fetch, once; until then
            # what reads it fails too (_reads_failed). Otherwise the output is gone (set if the
            # op ran and its device failed afterwards).
            kept = (type(attrs) is dict and attrs.get("inplace") and type(args) is list and args
                    and args[0] == out and not self.sticky_error)  # fmt: skip
            if kept:
                b.poisoned.add(out)
            else:
                b.tbl.pop(out, None)
            b.failed[out] = err
        b.report(err)

    @staticmethod
    def _reads_failed(b: BatchState, out: int, args: list) -> bool:
        """Whether an input is a tensor an in-place op failed on earlier in the batch (kept as
        it was, see :meth:`_op_failed`): then this op fails with that error too, unreported (it
        was). In PyTorch the failed op raised at its line and nothing after it ran; here the
        program learns of it at its next sync point, and what the batch computed meanwhile from
        the tensor it meant to change must not come back as a silent result."""
        for a in args:
            if type(a) is int and a in b.poisoned:
                b.failed[out] = b.failed[a]
                if out in args:  # an in-place op on another tensor: that one stays as it was
                    b.poisoned.add(out)
                else:
                    b.tbl.pop(out, None)
                return True
        return False

    @staticmethod
    def _delivered(b: BatchState, err: list) -> None:
        """A fetch has raised ``err`` in the program: the tensors an in-place op failed on with
        it (kept as they were) are usable again, as a tensor is in PyTorch once the exception
        of the op that failed on it is caught."""
        for tid in [t for t, e in b.failed.items() if e is err and t in b.tbl]:
            del b.failed[tid]
            b.poisoned.discard(tid)

    def _input_missing(
        self, b: BatchState, code: int, out: Any, args: list, attrs: Any, src: int
    ) -> None:
        """An input is missing: its failure (or "does not exist") becomes the output's."""
        err = None
        for a in args:
            if type(a) is int and a not in b.tbl:
                err = b.failed.get(a)
                if err is None:  # never made (or freed): the client must hear about it
                    msg = f"tensor {a} does not exist on this worker (freed, or never created)"
                    err = [msg, code, src, True]
                break
        if err is None:
            return
        if code == _FETCH:
            self.io.reply(b.cno, b.token, out, None, err[:3])
            self._delivered(b, err)
        elif type(out) is int:
            b.failed[out] = err
            if out in b.tbl:  # an in-place op's: the tensor stays as it was (see _op_failed)
                b.poisoned.add(out)
        if code in _COMM:  # send error markers, so the peers fail too instead of waiting
            self._comm_failed(b, code, out, attrs, err)
        if err[3]:
            err[3] = False
            b.report(err)

    def _comm(self, b: BatchState, code: int, out: int, vals: list, attrs: Any, src: int) -> None:
        if self.pending:  # keep every worker's collectives in one order
            self._complete_pending(b)
        if code == _ALL_REDUCE and attrs.get("async"):
            b.tbl.pop(out, None)  # until it completes, a use of out waits for it
            b.failed.pop(out, None)
            self.pending[out] = (self.peers.start(code, vals, attrs), src)
        else:
            b.tbl[out] = self.peers.run(code, vals, attrs)

    def _complete_pending(self, b: BatchState) -> None:
        """Finish every all-reduce in flight, oldest first (the order all participants use)."""
        pending, self.pending = self.pending, {}
        for out, (pend, src) in pending.items():
            try:
                b.tbl[out] = self.peers.finish(pend)
            except PeerFailure as exc:
                b.failed[out] = [*exc.err, False]
            except Exception as exc:
                b.failed[out] = [f"{type(exc).__name__}: {exc}", _ALL_REDUCE, src, False]
                b.report(b.failed[out])

    def _comm_failed(self, b: BatchState, code: int, out: Any, attrs: Any, err: list) -> None:
        try:
            self.peers.run(code, [None], attrs, err[:3])
        except Exception:  # PeerFailure, or malformed attrs: the peers then time out instead
            pass
        if type(out) is int:
            b.tbl.pop(out, None)
            b.failed[out] = [*err[:3], False]

    def _upload(self, b: BatchState, attrs: dict) -> Any:
        dtype = P.check_dtype(attrs["dtype"])
        shape = P.check_shape(attrs["shape"])
        try:
            frame = (self.io.upload(b.token, attrs["tok"], self._give_way) if "tok" in attrs
                     else b.bufs[attrs["buf"]])  # fmt: skip
        except TimeoutError as exc:
            raise self._upload_refused(dtype, shape) or exc from None
        try:
            t0 = time.monotonic_ns()
            arr = self.backend.from_frame(frame, dtype, shape)
            self.io.client_transfer("from_client", t0, time.monotonic_ns(), arr.nbytes, b.cno)
            return arr
        except MemoryError as exc:  # the device refused the copy: as for any other op's result
            size = allocation_size(exc)  # (retried outside this handler, as in _one)
        return self._after_refusal(
            _UPLOAD, lambda: self.backend.from_frame(frame, dtype, shape), size
        )
