"""The worker's executor: runs one batch of instructions in order and says what happened.

It owns the tensor tables (one per client, so ids never collide and a departed client's tensors go
in one step) and nothing else: no sockets. What needs the outside world goes through two objects
the worker's socket shell hands in: ``io`` (the data of a direct upload, a fetch reply) and
``peers`` (transfers and collectives with other workers). :meth:`Executor.run` returns a
:class:`BatchResult` -- errors, timings and the columns of the ``exec`` event -- which the shell
reports.

An instruction that fails marks its output failed with ``[message, opcode, src]``; anything
computed from a failed tensor fails with the same message, and the error is reported once.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.backend import Backend
from gt.runtime.worker.clock import SYNC_EACH_OP, clock_for
from gt.runtime.worker.hot import HotPlans
from gt.runtime.worker.memory import release_cached
from gt.runtime.worker.peers import PeerFailure
from gt.runtime.worker.pool import MemoryPool
from gt.runtime.worker.spill import root_of

MAX_ERRORS_PER_BATCH = 64
_NEVER = 1 << 62
_UPLOAD, _FETCH, _MARK, _FREE, _PLACE, _EXPAND = (
    O.OPCODE[n] for n in ("upload", "fetch", "mark", "free", "place", "expand")
)
_ALL_REDUCE = O.ALL_REDUCE
_COMM = O.COMM_OPS
_HOT, _HOT_DEFINE = O.OPCODE["hot"], O.OPCODE["hot_define"]


class ExecutorIO(Protocol):
    """What the executor asks of the worker's sockets."""

    def upload(self, token: bytes | None, tok: int) -> Any:
        """The frame a client sent on the data socket for upload ``tok`` (waits, bounded)."""

    def reply(self, client: int, token: bytes | None, req: int, arr: Any, err: list | None) -> None:
        """Send a fetch's array (or its error) to the client."""


@dataclass
class BatchResult:
    """What one batch did: its errors, its instructions, and when each ran.

    Attributes:
        errors: ``[message, opcode, src]`` of each newly failed instruction (at most 64).
        instrs: the batch's instructions (the event columns come from them).
        t0, t1: monotonic ns around the whole batch.
        durs: per-instruction ns (empty unless per-instruction timing was asked for).
        busy_ns: the batch's duration (``t1 - t0``).
        hot: how many captured steps (``hot`` instructions) it replayed.
    """

    errors: list = field(default_factory=list)
    instrs: list = field(default_factory=list)
    t0: int = 0
    t1: int = 0
    durs: list = field(default_factory=list)
    hot: int = 0

    @property
    def busy_ns(self) -> int:
        """Nanoseconds the batch took."""
        return self.t1 - self.t0


def _resolve(tbl: dict, args: list) -> list:
    """Argument values: tensors from the table (a bare int is a tensor id), immediates as they are.

    Raises:
        KeyError: a tensor is not in the table.
        ProtocolError: an immediate that no client makes (a string, a nested list ...).
    """
    return [tbl[a] if type(a) is int else (a if type(a) is float else _immediate(a)) for a in args]


def _immediate(a: Any) -> Any:
    """A bool, ``None``, or an integer immediate ``[v]``; anything else is refused (it could make
    arrays of Python objects, whose arithmetic has no bound)."""
    if a is None or type(a) is bool:
        return a
    if type(a) is list and len(a) == 1 and type(a[0]) is int and -(1 << 63) <= a[0] < 1 << 64:
        return a[0]
    raise P.ProtocolError(
        f"an argument is a tensor id, a float, a bool, None or [int], not {a!r:.40}"
    )


#: The most elements any one op may make or read through a broadcast view: a bound on its time
#: and memory that a client cannot lift (``$GT_MAX_ELEMENTS``).
MAX_ELEMENTS = int(os.environ.get("GT_MAX_ELEMENTS", 1 << 32))
_PLANNER_ONLY = frozenset((*O.COMM_OPS, O.OPCODE["free"]))
_SIZED = frozenset(op.code for op in O.REGISTRY if op.kind == "create" or op.name == "expand")


_GUARDED = _PLANNER_ONLY | _SIZED | {_HOT, _HOT_DEFINE}


def _check_guarded(code: int, attrs: Any, planned: bool) -> None:
    """The rules for the few opcodes that need them (kept off the common path)."""
    if code in _PLANNER_ONLY and not planned:
        raise P.ProtocolError(
            f"{O.op_name(code)} may only come from the dispatcher's planner, not from a client"
        )
    if code in _SIZED:
        shape = O.REGISTRY[code].shape([], attrs) if code != _EXPAND else attrs["shape"]
        n = 1
        for d in shape:
            n *= int(d)
        if n > MAX_ELEMENTS:
            raise MemoryError(
                f"{O.op_name(code)} of shape {list(shape)} ({n:,} elements) is over the limit of "
                f"{MAX_ELEMENTS:,} elements per op (GT_MAX_ELEMENTS)"
            )


class _Batch:
    """The state of one batch while it runs."""

    __slots__ = ("cno", "seq", "token", "tbl", "failed", "bufs", "errors", "planned", "hot")

    def __init__(self, cno: int, seq: int, token: Any, tbl: dict, failed: dict, bufs: list,
                 planned: bool) -> None:  # fmt: skip
        self.cno, self.seq, self.token = cno, seq, token
        self.tbl, self.failed, self.bufs = tbl, failed, bufs
        self.planned = planned
        self.errors: list = []
        self.hot = 0  # captured steps replayed

    def report(self, err: list) -> None:
        if len(self.errors) < MAX_ERRORS_PER_BATCH:
            self.errors.append(err[:3])


class Executor:
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
        self.peers = peers
        self.io = io
        self.tables: dict[int, dict[int, Any]] = {}
        self.pool: MemoryPool | None = None  # set once a memory limit or quota is
        self.clock = clock_for(backend)  # CUDA events on a GPU: op times are device times
        self.sync_each_op = SYNC_EACH_OP and self.clock.device
        self.sticky_error: str | None = None  # the device failed for good (the worker must stop)
        self.failed: dict[int, dict[int, list]] = {}
        self.hot = HotPlans()
        self.pending: dict[int, tuple] = {}  # out id -> (all-reduce in flight, src), oldest first
        self.batches = 0
        self.instructions = 0
        self.busy_ns = 0

    # ------------------------------------------------------------------ clients
    def use_pool(self, pool: MemoryPool) -> None:
        """Keep the books of ``pool`` from now on (the tensors already held are counted)."""
        self.pool = pool
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
        planned: bool = False, lookahead: Any = (),
    ) -> BatchResult:  # fmt: skip
        """Run one batch for client ``cno``.

        Args:
            body: the batch's body frame (instructions and frees, see :func:`P.parse_body`).
            bufs: the upload frames that came with it.
            timed: also time every instruction (``durs``).
            planned: the dispatcher's planner wrote it (transfers between workers are allowed).
            lookahead: ``(client, instructions, frees)`` of the batches queued after this one
                (the memory pool spills what they need last, prefetches it, and does not spill
                what they free).

        ``body`` may also be :func:`P.parse_body`'s result, when the caller already parsed it.
        """
        res = BatchResult()
        b = _Batch(cno, seq, token, self._table(cno), self.failed.setdefault(cno, {}), bufs,
                   planned)  # fmt: skip
        self.peers.cno, self.peers.batch = cno, seq
        try:
            instrs, frees, free_at = body if type(body) is tuple else P.parse_body(body)
        except P.ProtocolError as exc:
            instrs, frees, free_at = [], [], None
            b.report([str(exc), -1, 0])
        if self.pool is not None:
            self.pool.plan([(cno, instrs, frees), *lookahead])
        # Frees the client made between instructions are applied at that point of the batch.
        early = sorted(zip(free_at, frees)) if free_at else []
        late = [] if free_at else frees
        dclock = self.clock
        marks: list = []
        waits: list[int] = []
        res.t0 = time.monotonic_ns()
        self._loop(b, instrs, early, (marks, waits) if timed else None)
        if self.pending:  # nothing stays in flight past the batch: peers may wait for it
            self._complete_pending(b)
        for f in late:
            self._free(b, f)
        if dclock.device:  # the batch is done when the device has done it
            if marks:
                marks.append(dclock.mark())
            try:
                dclock.fence()
            except Exception as exc:
                self._device_failed(b, instrs, exc)
        res.t1 = time.monotonic_ns()
        if marks:
            if not dclock.device:
                marks.append(res.t1)
            waits.append(self.peers.waited_ns)
            # An instruction's time excludes what it spent waiting for data (shown as a wait slice
            # of its own): an op that needs an all-reduce's result is not charged for the all-reduce.
            res.durs = [
                max(0, d - (w1 - w0))
                for d, w0, w1 in zip(dclock.durations(marks), waits, waits[1:])
            ]
        res.errors, res.instrs, res.hot = b.errors, instrs, b.hot
        self.batches += 1
        self.instructions += len(instrs)
        self.busy_ns += res.busy_ns
        return res

    def _loop(self, b: _Batch, instrs: list, early: list, stamp: Any) -> None:
        """The hot loop: frees due at each position, then the instruction.

        ``stamp``: ``None``, or two lists for the clock's mark before each instruction and the
        worker's total wait so far (per-instruction timing).
        """
        peers = self.peers
        stamp_t, stamp_w = (stamp[0].append, stamp[1].append) if stamp is not None else (None, None)
        mark = self.clock.mark
        sync_each = self.sync_each_op
        next_free = early[0][0] if early else _NEVER
        fi = 0
        for idx, ins in enumerate(instrs):
            if next_free <= idx:
                while fi < len(early) and early[fi][0] <= idx:
                    self._free(b, early[fi][1])
                    fi += 1
                next_free = early[fi][0] if fi < len(early) else _NEVER
            if stamp_t is not None:
                stamp_t(mark())
                stamp_w(peers.waited_ns)
            try:
                self._one(b, ins)
                if sync_each:  # a device error then lands on the op that caused it
                    self.clock.fence()
            except PeerFailure as exc:  # an input failed on another worker, which reported it
                out = ins[P.I_OUT]
                b.tbl.pop(out, None)
                b.failed[out] = [*exc.err, False]
            except Exception as exc:  # the op failed: record it against its output
                self._op_failed(b, ins, exc)
        for _, f in early[fi:]:
            self._free(b, f)

    def _one(self, b: _Batch, ins: Any) -> None:
        code, out, args, attrs, src = ins  # (a malformed one raises here and fails alone)
        if type(code) is not int or type(out) is not int or type(args) is not list:
            raise P.ProtocolError("an instruction is [opcode, out, args, attrs, src]")
        if attrs is not None:
            if type(attrs) is not dict:
                raise P.ProtocolError("an instruction's attrs are a dict or None")
            if "dtype" in attrs and attrs["dtype"] not in P.DTYPE_SET:
                raise P.ProtocolError(f"unsupported dtype {attrs['dtype']!r:.40}")
        if code in _GUARDED:
            if code == _HOT:
                self._hot(b, args, attrs, src)
                return
            if code == _HOT_DEFINE:
                self.hot.define(b.cno, attrs)
                return
            _check_guarded(code, attrs, b.planned)
        if self.pool is not None:
            self.pool.step(b.cno, args, code)
        tbl = b.tbl
        try:
            vals = _resolve(tbl, args)
        except KeyError:
            vals = None
            if self.pending:  # an input is an all-reduce in flight: complete it first
                self._complete_pending(b)
                try:
                    vals = _resolve(tbl, args)
                except KeyError:
                    pass
        if vals is None:
            self._input_missing(b, code, out, args, attrs, src)
            return
        h = self.handlers[code] if type(code) is int and 0 <= code < len(self.handlers) else None
        if h is not None:
            try:
                r = h(vals, attrs)
            except MemoryError:  # the allocator refused: spill what we may, then once more
                if self.pool is None or not self.pool.make_room():
                    raise
                release_cached(self.backend)
                r = h(vals, attrs)
            tbl[out] = r
        elif code in _COMM:
            self._comm(b, code, out, vals, attrs, src)
        elif code == _UPLOAD:
            tbl[out] = self._upload(b, attrs)
        elif code == _FETCH:
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

    def _device_failed(self, b: _Batch, instrs: list, exc: Exception) -> None:
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

    def _hot(self, b: _Batch, args: list, attrs: Any, src: int) -> None:
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
            fast = plan.compiled(self.handlers)
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
    def _free(b: _Batch, tid: int) -> None:
        if b.tbl.pop(tid, None) is None:
            b.failed.pop(tid, None)

    def _op_failed(self, b: _Batch, ins: Any, exc: Exception) -> None:
        ok = type(ins) is list
        code = ins[P.I_OP] if ok and ins else -1
        src = ins[P.I_SRC] if ok and len(ins) > P.I_SRC else 0
        out = ins[P.I_OUT] if ok and len(ins) > P.I_OUT else None
        err = [f"{type(exc).__name__}: {exc}", code, src if type(src) is int else 0, False]
        if code == _FETCH and type(out) is int:
            self.io.reply(b.cno, b.token, out, None, err[:3])
        elif type(out) is int:
            b.tbl.pop(out, None)  # (set if the op ran and its device failed afterwards)
            b.failed[out] = err
        b.report(err)

    def _input_missing(
        self, b: _Batch, code: int, out: Any, args: list, attrs: Any, src: int
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
        elif type(out) is int:
            b.failed[out] = err
        if code in _COMM:  # send error markers, so the peers fail too instead of waiting
            self._comm_failed(b, code, out, attrs, err)
        if err[3]:
            err[3] = False
            b.report(err)

    def _comm(self, b: _Batch, code: int, out: int, vals: list, attrs: Any, src: int) -> None:
        if self.pending:  # keep every worker's collectives in one order
            self._complete_pending(b)
        if code == _ALL_REDUCE and attrs.get("async"):
            b.tbl.pop(out, None)  # until it completes, a use of out waits for it
            b.failed.pop(out, None)
            self.pending[out] = (self.peers.start(code, vals, attrs), src)
        else:
            b.tbl[out] = self.peers.run(code, vals, attrs)

    def _complete_pending(self, b: _Batch) -> None:
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

    def _comm_failed(self, b: _Batch, code: int, out: Any, attrs: Any, err: list) -> None:
        try:
            self.peers.run(code, [None], attrs, err[:3])
        except Exception:  # PeerFailure, or malformed attrs: the peers then time out instead
            pass
        if type(out) is int:
            b.tbl.pop(out, None)
            b.failed[out] = [*err[:3], False]

    def _upload(self, b: _Batch, attrs: dict) -> Any:
        dtype = P.check_dtype(attrs["dtype"])
        shape = P.check_shape(attrs["shape"])
        frame = self.io.upload(b.token, attrs["tok"]) if "tok" in attrs else b.bufs[attrs["buf"]]
        return self.backend.from_frame(frame, dtype, shape)
