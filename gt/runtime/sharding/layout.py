"""Where a tensor's data lives, and the per-worker instruction lists the planner builds.

A :class:`Layout` is one of

* ``local(w)``: the whole tensor on worker ``w``;
* ``repl(W)``: a full copy on every worker of ``W``;
* ``shard(axis, W, sizes)``: worker ``W[i]`` holds ``sizes[i]`` consecutive slices along ``axis``
  (the ``i``-th block; uneven sizes are fine, empty blocks are not made);
* ``partial(W, op)``: every worker of ``W`` holds a same-shaped part; the value is their ``op``
  (``sum``, ``max``, ``min``) -- what a contraction-sharded matmul or a reduction over the sharded
  axis leaves, combined by an all-reduce or reduce-scatter only where a consumer needs it.

A tensor keeps its client-made id on every worker that holds a part of it. Pure data, no sockets.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gt.runtime import ops as O

LOCAL, REPL, SHARD, PARTIAL = "local", "repl", "shard", "partial"
_FREE = O.OPCODE["free"]


@dataclass(frozen=True, slots=True)
class Layout:
    """An immutable description of where a tensor lives (see the module docstring)."""

    kind: str
    workers: tuple[int, ...]
    axis: int = -1
    sizes: tuple[int, ...] = ()
    op: str = "sum"

    def describe(self) -> str:
        """A short human-readable form, e.g. ``shard(axis=0, [0, 1], [3, 2])``."""
        ws = list(self.workers)
        if self.kind == LOCAL:
            return f"local({ws[0]})"
        if self.kind == REPL:
            return f"repl({ws})"
        if self.kind == SHARD:
            return f"shard(axis={self.axis}, {ws}, {list(self.sizes)})"
        return f"partial({self.op}, {ws})"

    def starts(self) -> list[int]:
        """Offsets of the blocks of a shard layout along its axis."""
        out, at = [], 0
        for s in self.sizes:
            out.append(at)
            at += s
        return out


def local(w: int) -> Layout:
    """The whole tensor on worker ``w``."""
    return Layout(LOCAL, (w,))


def repl(workers: tuple[int, ...] | list[int]) -> Layout:
    """A full copy on each worker (one worker: :func:`local`)."""
    ws = tuple(sorted(set(workers)))
    return Layout(LOCAL, ws) if len(ws) == 1 else Layout(REPL, ws)


def partial(workers: tuple[int, ...], op: str = "sum") -> Layout:
    """Per-worker parts whose ``op`` is the value."""
    return Layout(PARTIAL, tuple(workers), op=op)


def split_sizes(n: int, parts: int) -> tuple[int, ...]:
    """Block sizes of ``n`` items over ``parts`` workers, as ``numpy.array_split`` makes them."""
    q, r = divmod(n, parts)
    return tuple(q + 1 if i < r else q for i in range(parts))


def shard(axis: int, workers: tuple[int, ...] | list[int], sizes: tuple[int, ...]) -> Layout:
    """Blocks along ``axis``; degenerates to :func:`local` when only one worker gets a block."""
    ws = tuple(w for w, s in zip(workers, sizes) if s > 0)
    sz = tuple(s for s in sizes if s > 0)
    if len(ws) <= 1:
        return local(ws[0] if ws else workers[0])
    return Layout(SHARD, ws, axis, sz)


def shard_even(shape: tuple[int, ...], axis: int, workers: tuple[int, ...]) -> Layout:
    """Split ``shape`` along ``axis`` over ``workers`` in near-equal blocks (none empty)."""
    n = shape[axis]
    use = tuple(workers[: max(1, min(len(workers), n))])
    return shard(axis, use, split_sizes(n, len(use)))


def satisfies(have: Layout, want: Layout) -> bool:
    """Whether data laid out as ``have`` can be used where ``want`` is needed, with no move."""
    if have == want:
        return True
    if have.kind == REPL and want.kind in (LOCAL, REPL):
        return set(want.workers) <= set(have.workers)
    return False


@dataclass
class Program:
    """The per-worker instruction lists for one client batch, in program order.

    Attributes:
        parts: worker id -> instructions ``[opcode, out, args, attrs, src]``.
        frees: worker id -> ids freed on that worker (the client's frees, and temporaries), each
            where the program no longer needs it: ``free_at[w][k]`` is how many of ``parts[w]``
            run before ``frees[w][k]`` is dropped (so memory held follows the program, not the
            batch size).
        moves: how many of each re-layout instruction were added (for the ``dispatched`` event).
        errors: ``[message, opcode, src]`` for instructions the planner could not place.
        internal: tracebacks of bugs in the planner's own code met while planning (the
            instructions ran whole on the home worker instead).
    """

    next_tag: int = 1
    next_tmp: int = -1
    parts: dict[int, list] = field(default_factory=dict)
    frees: dict[int, list] = field(default_factory=dict)
    free_at: dict[int, list] = field(default_factory=dict)
    moves: Counter = field(default_factory=Counter)
    errors: list = field(default_factory=list)
    temps: list = field(default_factory=list)
    internal: list = field(default_factory=list)

    def add(self, w: int, code: int, out: int, args: list, attrs: object, src: int) -> None:
        """Append one instruction to worker ``w``'s list."""
        self.parts.setdefault(w, []).append([code, out, args, attrs, src])
        if out < 0:
            self.temps.append((w, out))

    def tag(self) -> int:
        """A fresh transfer tag (unique per client)."""
        t = self.next_tag
        self.next_tag += 1
        return t

    def tmp(self) -> int:
        """A fresh temporary tensor id (negative: never a client id), freed once the client
        instruction it was made for has run (:meth:`release_temps`)."""
        t = self.next_tmp
        self.next_tmp -= 1
        return t

    def free_now(self, w: int, ids: list[int], src: int) -> None:
        """Drop ids on ``w`` at this point of its stream (the id may be written again later)."""
        if ids:
            self.parts.setdefault(w, []).append([_FREE, 0, [], {"ids": list(ids)}, src])

    def free_here(self, w: int, tid: int) -> None:
        """Drop ``tid`` on ``w`` after the instructions it has been given so far."""
        self.frees.setdefault(w, []).append(tid)
        self.free_at.setdefault(w, []).append(len(self.parts.get(w, ())))

    def release_temps(self) -> None:
        """Free the temporaries made so far where they were made: a temporary only ever feeds
        the client instruction it was made for, which has now been planned."""
        for w, t in self.temps:
            self.free_here(w, t)
        self.temps.clear()

    def finish(self) -> None:
        """Free what is left of the temporaries at the end of the batch."""
        self.release_temps()


@dataclass
class TensorInfo:
    """What the planner knows about one tensor."""

    shape: tuple[int, ...] | None
    dtype: str
    layout: Layout


@dataclass
class ClientPlacement:
    """One client's placement table and counters."""

    cno: int
    home: int
    tensors: dict[int, TensorInfo] = field(default_factory=dict)
    signals: dict[int, tuple] = field(default_factory=dict)
    next_tag: int = 1
    next_tmp: int = -1
    placed: bool = False  # some tensor left the home worker: every later batch is planned
    # Per signal whose rule shards an axis: [tensors made under it, how many had that axis, the
    # most axes one had]. A rule that fit none of them placed nothing (said at the program's end).
    axis_fits: dict[str, list[int]] = field(default_factory=dict)
    home_lay: Layout = field(init=False)

    def __post_init__(self) -> None:
        self.home_lay = local(self.home)  # one object: the fast path compares by identity


@dataclass(slots=True)
class Step:
    """One client instruction while the planner places it, and what it has learned about it."""

    c: ClientPlacement
    p: Program
    code: int
    out: int
    args: list
    attrs: Any
    src: int
    op: O.Op | None = None
    shape: tuple[int, ...] | None = None
    dtype: str = "float32"
    name: str | None = None  # the signal the instruction was made under
    rule: dict | None = None  # the config's rule for that signal
    alive: list[int] = field(default_factory=list)
