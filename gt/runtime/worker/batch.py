"""One batch on a worker while it runs, and the checks its instructions pass first (pure).

:class:`Job` is a batch the executor has begun: its instructions, the frees due along it, and
how far it got (a batch may run in slices, see :mod:`gt.runtime.worker.schedule`).
:class:`BatchResult` is what one slice did. The checks bound what a client can make a worker do:
immediates are plain numbers, planner-only opcodes come from the planner, and no op makes or reads
more than :data:`MAX_ELEMENTS` elements.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gt.runtime import ops as O
from gt.runtime import protocol as P

MAX_ERRORS_PER_BATCH = 64
_EXPAND = O.OPCODE["expand"]
_HOT, _HOT_DEFINE = O.OPCODE["hot"], O.OPCODE["hot_define"]


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
        done: whether the batch has ended (``False``: a slice of it; more follow).
        fresh_errors: the errors of this slice alone (``errors`` has the batch's so far).
    """

    errors: list = field(default_factory=list)
    instrs: list = field(default_factory=list)
    t0: int = 0
    t1: int = 0
    durs: list = field(default_factory=list)
    hot: int = 0
    done: bool = True
    fresh_errors: list = field(default_factory=list)

    @property
    def busy_ns(self) -> int:
        """Nanoseconds the batch took."""
        return self.t1 - self.t0


def resolve_args(tbl: dict, args: list) -> list:
    """Argument values: tensors from the table (a bare int is a tensor id), immediates as they are.

    Raises:
        KeyError: a tensor is not in the table.
        ProtocolError: an immediate that no client makes (a string, a nested list ...).
    """
    return [tbl[a] if type(a) is int else (a if type(a) is float else immediate(a)) for a in args]


def immediate(a: Any) -> Any:
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


GUARDED = _PLANNER_ONLY | _SIZED | {_HOT, _HOT_DEFINE}
#: Elementwise ops of two or more inputs: their result has the inputs' broadcast shape, which may
#: be far larger than any input (``ones(n, 1) + ones(1, n)``).
BROADCASTING = frozenset(
    op.code for op in O.REGISTRY if op.shard == "elementwise" and (op.arity or 2) >= 2
)


def check_broadcast(code: int, vals: list) -> None:
    """Refuse an elementwise op whose inputs broadcast to more than :data:`MAX_ELEMENTS`
    (checked before the kernel allocates the result; inputs of one shape pass at once)."""
    if len(vals) == 2:  # the usual case, kept cheap: it runs before every binary op
        a, b = getattr(vals[0], "shape", None), getattr(vals[1], "shape", None)
        if a is None or b is None or a == b:
            return
        shapes = [a, b]
    else:
        shapes = [s for v in vals if (s := getattr(v, "shape", None)) is not None]
        if len(shapes) < 2 or shapes.count(shapes[0]) == len(shapes):
            return
    n = 1
    for i in range(1, max(map(len, shapes)) + 1):  # the broadcast's size (an upper bound when
        n *= max(int(s[-i]) if len(s) >= i else 1 for s in shapes)  # the shapes do not fit)
    if n > MAX_ELEMENTS:
        raise MemoryError(
            f"{O.op_name(code)} of shapes {' and '.join(str(list(s)) for s in shapes)} "
            f"broadcasts to {n:,} elements, over the limit of {MAX_ELEMENTS:,} elements per op "
            "(GT_MAX_ELEMENTS)"
        )


def check_guarded(code: int, attrs: Any, planned: bool) -> None:
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


class BatchState:
    """The state of one batch while it runs."""

    __slots__ = ("cno", "seq", "token", "tbl", "failed", "bufs", "errors", "planned", "hot",
                 "ack_with", "acked", "poisoned")  # fmt: skip

    def __init__(self, cno: int, seq: int, token: Any, tbl: dict, failed: dict, bufs: list,
                 planned: bool) -> None:  # fmt: skip
        self.cno, self.seq, self.token = cno, seq, token
        self.tbl, self.failed, self.bufs = tbl, failed, bufs
        self.planned = planned
        self.errors: list = []
        # Tensors an in-place op failed on in this batch (kept as they were): what reads them
        # later in the batch fails too (Executor._reads_failed). By the next batch the client
        # has the error, and raises it at its next sync point.
        self.poisoned: set = set()
        self.hot = 0  # captured steps replayed
        # The instruction whose fetch may acknowledge the batch (its last, when the dispatcher
        # allows it: see protocol.Run.ack), and whether one did.
        self.ack_with: Any = None
        self.acked = False

    def report(self, err: list) -> None:
        if len(self.errors) < MAX_ERRORS_PER_BATCH:
            # (fields a hostile instruction supplied are made well formed: a Done the dispatcher
            # refused would never free the worker's slot, and four of them wedged the worker)
            msg, code, src = (list(err[:3]) + [None, None, None])[:3]
            self.errors.append([msg if type(msg) is str else str(msg),
                                code if type(code) is int else -1, src if type(src) is int else 0])  # fmt: skip


class Job:
    """A batch being run (see :meth:`Executor.begin`): where it is, and what is left to free."""

    __slots__ = ("b", "instrs", "early", "late", "timed", "idx", "fi", "started", "reported")

    def __init__(self, b: BatchState, instrs: list, early: list, late: list, timed: bool) -> None:
        self.b, self.instrs, self.early, self.late, self.timed = b, instrs, early, late, timed
        self.idx = self.fi = self.reported = 0
        self.started = False

    @property
    def client(self) -> int:
        """The client it runs for."""
        return self.b.cno
