"""Re-layouts: the explicit transfer and collective instructions that move a tensor between layouts.

:func:`move` turns a tensor laid out one way into the layout an instruction needs, step by step
(e.g. partial -> all-reduce -> replicated -> local chunks -> sharded). Every step is an instruction
in the workers' streams (``send``/``recv``, ``bcast``, ``scatter``, ``gather``, ``all_gather``,
``all_reduce``, ``reduce_scatter``, ``chunk``), so it shows on the timelines. :func:`cost` runs the
same steps without emitting anything and returns an estimate in seconds, which the rules use to
pick the cheapest plan.
"""

from __future__ import annotations

import math
import os

from gt.runtime import ops as O
from gt.runtime.ops import (
    ALL_GATHER,
    ALL_REDUCE,
    BCAST,
    CHUNK,
    GATHER,
    RECV,
    REDUCE_SCATTER,
    SCATTER,
    SEND,
)
from gt.runtime.sharding.layout import (
    LOCAL,
    PARTIAL,
    REPL,
    SHARD,
    Layout,
    Program,
    local,
    repl,
    satisfies,
)


def _env(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


#: Link bandwidth (bytes/s), per-message latency (s), local copy bandwidth (bytes/s) for the model.
LINK_BW = _env("GT_PLAN_LINK_BW", 2e9)
LATENCY = _env("GT_PLAN_LATENCY", 50e-6)
COPY_BW = _env("GT_PLAN_COPY_BW", 8e9)


class _Mover:
    """Runs the re-layout steps, emitting instructions (``prog``) or only adding up their cost."""

    def __init__(self, prog: Program | None, src: int, nbytes: int, background: bool = False):
        self.p = prog
        self.src = src
        self.nb = nbytes
        self.seconds = 0.0
        self.background = background

    def out(self, tid: int, in_place: bool) -> int:
        if self.p is None:
            return 0
        return tid if in_place else self.p.tmp()

    def _xfer(self, nbytes: float, steps: int = 1) -> None:
        self.seconds += nbytes / LINK_BW + steps * LATENCY

    def _emit(self, w: int, code: int, out: int, args: list, attrs: dict) -> None:
        if self.p is not None:
            self.p.add(w, code, out, args, attrs, self.src)

    def _tag(self) -> int:
        if self.p is None:
            return 0
        self.p.moves[O.OPS[self._code]] += 1
        return self.p.tag()

    def tag(self, code: int) -> int:
        self._code = code
        return self._tag()

    # ---------------------------------------------------------------- steps
    def send(self, s: int, d: int, sid: int, out: int) -> None:
        tag = self.tag(SEND)
        self._emit(s, SEND, sid, [sid], {"peer": d, "tag": tag})
        self._emit(d, RECV, out, [], {"peer": s, "tag": tag})
        self._xfer(self.nb)

    def bcast(self, root: int, rid: int, others: list[int], out: int) -> None:
        ws = [root, *others]
        attrs = {"workers": ws, "root": root, "tag": self.tag(BCAST)}
        self._emit(root, BCAST, rid, [rid], attrs)
        for w in others:
            self._emit(w, BCAST, out, [], attrs)
        self._xfer(self.nb * math.ceil(math.log2(len(ws))), math.ceil(math.log2(len(ws))))

    def scatter(self, root: int, rid: int, want: Layout, out: int) -> None:
        attrs = {"workers": list(want.workers), "root": root, "axis": want.axis, "sizes": list(want.sizes),
                 "tag": self.tag(SCATTER)}  # fmt: skip
        self._emit(root, SCATTER, out if root in want.workers else rid, [rid], attrs)
        for w in want.workers:
            if w != root:
                self._emit(w, SCATTER, out, [], attrs)
        n = len(want.workers)
        self._xfer(self.nb * (n - 1) / n, n - 1)

    def gather(self, have: Layout, ids: dict[int, int], root: int, out: int) -> None:
        attrs = {
            "workers": list(have.workers),
            "root": root,
            "axis": have.axis,
            "tag": self.tag(GATHER),
        }
        for w in have.workers:
            self._emit(w, GATHER, out if w == root else ids[w], [ids[w]], attrs)
        if root not in have.workers:
            self._emit(root, GATHER, out, [], attrs)
        n = len(have.workers)
        self._xfer(self.nb * (n - 1) / n, n - 1)

    def all_gather(self, have: Layout, ids: dict[int, int], out: int) -> None:
        attrs = {"workers": list(have.workers), "axis": have.axis, "tag": self.tag(ALL_GATHER)}
        for w in have.workers:
            self._emit(w, ALL_GATHER, out, [ids[w]], attrs)
        n = len(have.workers)
        self._xfer(self.nb * (n - 1) / n, n - 1)

    def all_reduce(self, have: Layout, ids: dict[int, int], out: int) -> None:
        attrs = {"workers": list(have.workers), "op": have.op, "tag": self.tag(ALL_REDUCE)}
        if self.background:
            attrs["async"] = True  # the workers start it and go on computing; a use waits for it
        for w in have.workers:
            self._emit(w, ALL_REDUCE, out, [ids[w]], attrs)
        n = len(have.workers)
        self._xfer(2 * self.nb * (n - 1) / n, 2 * (n - 1))

    def reduce_scatter(self, have: Layout, ids: dict[int, int], want: Layout, out: int) -> None:
        attrs = {"workers": list(want.workers), "op": have.op, "axis": want.axis, "sizes": list(want.sizes),
                 "tag": self.tag(REDUCE_SCATTER)}  # fmt: skip
        for w in want.workers:
            self._emit(w, REDUCE_SCATTER, out, [ids[w]], attrs)
        n = len(want.workers)
        self._xfer(self.nb * (n - 1) / n, n - 1)

    def chunk(self, w: int, sid: int, want: Layout, i: int, out: int) -> None:
        start = want.starts()[i]
        self._code = CHUNK
        if self.p is not None:
            self.p.moves["chunk"] += 1
        self._emit(
            w, CHUNK, out, [sid], {"axis": want.axis, "start": start, "stop": start + want.sizes[i]}
        )
        self.seconds += self.nb / len(want.workers) / COPY_BW


def _step(
    m: _Mover, tid: int, have: Layout, ids: dict[int, int], want: Layout, in_place: bool
) -> tuple[Layout, dict[int, int]]:
    """One move towards ``want``; returns the new layout and per-worker ids."""
    kind = have.kind
    if kind == PARTIAL:
        out = m.out(tid, True)  # combining partial sums only ever helps: do it in place
        if want.kind == SHARD and want.workers == have.workers:
            m.reduce_scatter(have, ids, want, out)
            return want, dict.fromkeys(want.workers, out)
        m.all_reduce(have, ids, out)
        return Layout(REPL, have.workers), dict.fromkeys(have.workers, out)
    if kind == SHARD:
        out = m.out(tid, in_place)
        if want.kind == LOCAL:
            d = want.workers[0]
            m.gather(have, ids, d, out)
            return local(d), {d: out}
        m.all_gather(have, ids, out)
        return Layout(REPL, have.workers), dict.fromkeys(have.workers, out)
    if kind == LOCAL:
        s = have.workers[0]
        out = m.out(tid, in_place)
        if want.kind == LOCAL:
            m.send(s, want.workers[0], ids[s], out)
            if in_place:  # a move, not a copy: the source's copy is dropped by move()
                return want, {want.workers[0]: out}
            return want, {want.workers[0]: out}
        if want.kind == REPL:
            others = [w for w in want.workers if w != s]
            m.bcast(s, ids[s], others, out)
            new = {w: out for w in others}
            new[s] = ids[s]
            return repl((*want.workers, s)), new
        m.scatter(s, ids[s], want, out)
        return want, dict.fromkeys(want.workers, out)
    # REPL
    have_ws = set(have.workers)
    missing = [w for w in want.workers if w not in have_ws]
    if missing:
        root = have.workers[0]
        out = m.out(tid, in_place)
        if len(missing) == 1:
            m.send(root, missing[0], ids[root], out)
        else:
            m.bcast(root, ids[root], missing, out)
        new = dict(ids)
        new.update(dict.fromkeys(missing, out))
        return repl((*have.workers, *missing)), new
    # want is a shard of workers that all hold a copy: cut the blocks locally
    out = m.out(tid, in_place)
    for i, w in enumerate(want.workers):
        m.chunk(w, ids[w], want, i, out)
    return want, dict.fromkeys(want.workers, out)


def _run(
    m: _Mover, tid: int, have: Layout, want: Layout, in_place: bool
) -> tuple[Layout, dict[int, int]]:
    ids = dict.fromkeys(have.workers, tid)
    lay = have
    for _ in range(6):  # at most: partial -> repl -> (bcast) -> chunk
        if satisfies(lay, want):
            return lay, {w: ids[w] for w in want.workers}
        lay, ids = _step(m, tid, lay, ids, want, in_place)
    raise RuntimeError(
        f"no re-layout from {have.describe()} to {want.describe()}"
    )  # pragma: no cover


def cost(have: Layout, want: Layout, nbytes: int) -> float:
    """Estimated seconds to make data laid out as ``have`` usable as ``want``."""
    if satisfies(have, want):
        return 0.0
    m = _Mover(None, 0, nbytes)
    _run(m, 0, have, want, False)
    return m.seconds


def keeps_in_place(have: Layout, want: Layout) -> bool:
    """Whether moving ``have`` to ``want`` should change the tensor itself (not a temporary copy).

    Combining partial sums, and spreading a tensor that sits on one worker, only ever help later
    instructions too; anything that gathers or cuts a distributed tensor works on a copy.
    """
    return have.kind == PARTIAL or (have.kind == LOCAL and want.kind in (REPL, SHARD))


def move(
    prog: Program,
    tid: int,
    have: Layout,
    want: Layout,
    nbytes: int,
    src: int,
    in_place: bool,
    exact: bool = False,
    background: bool = False,
) -> tuple[Layout, dict[int, int]]:
    """Emit the instructions that make ``tid`` usable as ``want``.

    Args:
        in_place: change the tensor itself (else work on temporary copies).
        exact: (in place only) leave the tensor exactly as ``want``, dropping copies elsewhere;
            otherwise extra replicas that the moves made along the way are kept.
        background: let the workers run an all-reduce while they compute what follows (they
            wait for it where its result is used, or at the end of the batch).

    Returns:
        The layout ``tid`` has afterwards when moved in place (else ``have``), and the id to use
        on each worker of ``want`` (``tid`` itself, or a temporary freed after the batch).
    """
    m = _Mover(prog, src, nbytes, background)
    lay, ids = _run(m, tid, have, want, in_place)
    if in_place and exact and lay != want:  # lay holds extra replicas: drop them
        for w in lay.workers:
            if w not in want.workers:
                prog.free_now(w, [tid], src)
        have = Layout(
            have.kind,
            tuple(w for w in have.workers if w in want.workers or w not in lay.workers),
            have.axis,
            have.sizes,
            have.op,
        )
        lay = want
    if not in_place:
        if have.kind == PARTIAL:  # partial parts were combined in place on the way
            return _after_partial(have, want), ids
        return have, ids
    gone = [w for w in have.workers if w not in lay.workers]
    for w in gone:
        prog.free_now(w, [tid], src)
    return lay, ids


def _after_partial(have: Layout, want: Layout) -> Layout:
    if want.kind == SHARD and want.workers == have.workers:
        return want
    return Layout(REPL, have.workers)
