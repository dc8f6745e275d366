"""The planner's rules: for one compute instruction, the ways it could run over the workers.

Each :class:`Choice` names the layout every tensor operand must have, the layout of the result,
and (where shapes in the attributes must shrink to a worker's block) per-worker attributes. The
rules follow the data:

* elementwise ops on co-sharded operands run per shard; an operand that broadcasts along the
  sharded axis is replicated; partial sums pass through linear ops (``neg``, ``+``/``-`` of two
  partials, ``*``/``/`` by a replicated value or a scalar);
* ``matmul``: row-sharded x replicated -> row-sharded; replicated x column-sharded ->
  column-sharded; both sharded on the contraction axis -> partial sums (combined later by an
  all-reduce or reduce-scatter, where the result is needed); batch axes shard like elementwise;
* reductions reduce per shard; over the sharded axis they leave partial results (``sum``,
  ``max``, ``min``) that are combined across workers where needed;
* ``reshape`` keeps the sharding when the blocks stay contiguous blocks of one axis, ``transpose``
  moves it, ``expand`` keeps it, basic ``getitem`` keeps it when the sharded axis is taken whole,
  ``concat`` keeps it along another axis;
* anything else runs on one worker (the operands are gathered there first).

:func:`choose` adds the cost of the re-layouts each choice needs (see :mod:`relayout`) to a rough
compute time divided by the number of workers that share it, and picks the cheapest.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gt import shapes as S
from gt.runtime.ops import Op
from gt.runtime.ops.reduce import reduce_axes
from gt.runtime.sharding import relayout as R
from gt.runtime.sharding.layout import (
    LOCAL,
    PARTIAL,
    REPL,
    SHARD,
    Layout,
    local,
    partial,
    repl,
    shard,
    split_sizes,
)

FLOPS = float(os.environ.get("GT_PLAN_FLOPS", 3e10))
ELEMS = float(os.environ.get("GT_PLAN_ELEMS", 1e9))
_FLOAT = ("float16", "float32", "float64")

Shape = tuple[int, ...]


@dataclass
class Operand:
    """What the rules know about one argument: an immediate, or a tensor's id, shape and layout."""

    tid: int | None
    shape: Shape
    layout: Layout | None
    nbytes: int = 0


@dataclass
class Choice:
    """One way to run an instruction: operand layouts, result layout, per-worker attributes."""

    out: Layout
    needs: list[Layout | None]
    attrs: Callable[[int], Any] | None = None  # block index in out.workers -> attrs
    par: int = 1


def _par(lay: Layout) -> int:
    return len(lay.workers) if lay.kind in (SHARD, PARTIAL) else 1


def _with_shape(
    attrs: dict, shape: Shape, axis: int, sizes: tuple[int, ...]
) -> Callable[[int], Any]:
    def f(i: int) -> Any:
        s = list(shape)
        s[axis] = sizes[i]
        return {**attrs, "shape": s}

    return f


# ----------------------------------------------------------------------------- elementwise
def _ew_need(out: Layout, shp: Shape, oshape: Shape) -> Layout:
    if out.kind == SHARD:
        ai = out.axis - (len(oshape) - len(shp))
        if ai >= 0 and shp[ai] == oshape[out.axis]:
            return Layout(SHARD, out.workers, ai, out.sizes)
        return repl(out.workers)
    return out


def _ew_from(lay: Layout, shp: Shape, oshape: Shape) -> Layout | None:
    if lay.kind == SHARD:
        a = lay.axis + (len(oshape) - len(shp))
        return Layout(SHARD, lay.workers, a, lay.sizes) if oshape[a] == shp[lay.axis] else None
    return lay if lay.kind in (LOCAL, REPL) else None


def _ew_partial(op: Op, ops: list[Operand], attrs: Any) -> Choice | None:
    """Partial results pass through ops that are linear in them (the registry's ``partial``)."""
    rule = op.partial
    ts = [o for o in ops if o.tid is not None]
    parts = [o for o in ts if o.layout.kind == PARTIAL]
    if rule is None or not parts:
        return None
    p = parts[0].layout
    if rule == "copy" or rule == "unary" and p.op == "sum" and len(ts) == 1:
        if type(attrs) is dict and "dtype" in attrs and attrs["dtype"] not in _FLOAT:
            return None  # a partial sum cast to integers is not the integers' sum
        return Choice(p, [p], par=len(p.workers))
    if p.op != "sum":
        return None
    if rule == "sum" and len(ts) == 2 and all(o.layout == p for o in ts):
        return Choice(p, [p, p], par=len(p.workers))
    if rule in ("mul", "div") and len(parts) == 1 and (rule == "mul" or ops[0].layout == p):
        return Choice(
            p,
            [p if o.layout == p else (None if o.tid is None else repl(p.workers)) for o in ops],
            par=len(p.workers),
        )
    return None


def elementwise(
    op: Op, ops: list[Operand], attrs: Any, oshape: Shape, extra: list[Layout]
) -> list[Choice]:
    """Choices for an elementwise op (``extra``: more result layouts to consider)."""
    out: list[Choice] = []
    pc = _ew_partial(op, ops, attrs)
    if pc is not None:
        out.append(pc)
    seen: set[Layout] = set()
    wanted = [_ew_from(o.layout, o.shape, oshape) for o in ops if o.tid is not None]
    for lay in [*wanted, *extra]:
        if lay is None or lay in seen or lay.kind == PARTIAL:
            continue
        seen.add(lay)
        needs = [None if o.tid is None else _ew_need(lay, o.shape, oshape) for o in ops]
        out.append(Choice(lay, needs, par=_par(lay)))
    return out


# ----------------------------------------------------------------------------- matmul
def matmul(
    ops: list[Operand], oshape: Shape, sets: list[tuple[int, ...]], extra: list[Layout]
) -> list[Choice]:
    """Choices for ``a @ b`` (both at least 2-d; the client reshapes vectors)."""
    a, b = ops
    if len(a.shape) < 2 or len(b.shape) < 2:
        return []
    na, nb, no = len(a.shape), len(b.shape), len(oshape)
    k = a.shape[-1]
    out: list[Choice] = []
    for lay in (a.layout, b.layout):  # contraction-sharded operands -> partial sums
        if lay.kind == SHARD and (
            (lay is a.layout and lay.axis == na - 1) or (lay is b.layout and lay.axis == nb - 2)
        ):
            ws, sz = lay.workers, lay.sizes
            out.append(
                Choice(
                    partial(ws),
                    [Layout(SHARD, ws, na - 1, sz), Layout(SHARD, ws, nb - 2, sz)],
                    par=len(ws),
                )
            )
    for ws in sets:
        if k >= len(ws):
            use = ws[: min(len(ws), k)]
            sz = split_sizes(k, len(use))
            out.append(
                Choice(
                    partial(use),
                    [Layout(SHARD, use, na - 1, sz), Layout(SHARD, use, nb - 2, sz)],
                    par=len(use),
                )
            )
    cands: list[Layout] = []
    for o, n in ((a, na), (b, nb)):
        lay = o.layout
        if lay.kind == SHARD:
            if o is a and lay.axis == na - 2:
                cands.append(Layout(SHARD, lay.workers, no - 2, lay.sizes))
            elif o is b and lay.axis == nb - 1:
                cands.append(Layout(SHARD, lay.workers, no - 1, lay.sizes))
            elif lay.axis < n - 2:
                cands.append(Layout(SHARD, lay.workers, lay.axis + no - n, lay.sizes))
        elif lay.kind in (LOCAL, REPL):
            cands.append(lay)
    for ws in sets:
        for axis in (no - 2, no - 1):
            if oshape[axis] >= 2:
                use = ws[: min(len(ws), oshape[axis])]
                cands.append(shard(axis, use, split_sizes(oshape[axis], len(use))))
        cands.append(repl(ws))
    seen: set[Layout] = set()
    for lay in [*cands, *extra]:
        if lay in seen or lay.kind == PARTIAL:
            continue
        seen.add(lay)
        if lay.kind != SHARD:
            out.append(Choice(lay, [lay, lay]))
            continue
        ws, sz, ax = lay.workers, lay.sizes, lay.axis
        if ax == no - 2:
            needs = [Layout(SHARD, ws, na - 2, sz), repl(ws)]
        elif ax == no - 1:
            needs = [repl(ws), Layout(SHARD, ws, nb - 1, sz)]
        else:
            needs = [
                _ew_need(lay, a.shape[:-2], oshape[:-2]),
                _ew_need(lay, b.shape[:-2], oshape[:-2]),
            ]
        out.append(Choice(lay, needs, par=len(ws)))
    return out


# ----------------------------------------------------------------------------- reductions
def reduction(
    op: Op, ops: list[Operand], attrs: Any, oshape: Shape, extra: list[Layout]
) -> list[Choice]:
    """Choices for ``sum``/``max``/``min``/``argmax``/``argmin``."""
    x = ops[0]
    nd = len(x.shape)
    axes, keep = reduce_axes(attrs, nd)
    reduced = set(range(nd)) if axes is None else set(axes)
    kept = [i for i in range(nd) if i not in reduced]
    out: list[Choice] = []
    lay = x.layout
    if lay.kind == SHARD:
        if lay.axis not in reduced:
            oa = lay.axis if keep else kept.index(lay.axis)
            o = Layout(SHARD, lay.workers, oa, lay.sizes)
            out.append(Choice(o, [lay], par=len(lay.workers)))
        elif op.reduce is not None:
            out.append(Choice(partial(lay.workers, op.reduce), [lay], par=len(lay.workers)))
    elif lay.kind == PARTIAL and op.reduce is not None and op.reduce == lay.op:
        out.append(Choice(lay, [lay], par=len(lay.workers)))
    elif lay.kind in (LOCAL, REPL):
        out.append(Choice(lay, [lay]))
    for o in extra:
        if o.kind == SHARD:
            xa = o.axis if keep else (kept[o.axis] if o.axis < len(kept) else None)
            if xa is not None and x.shape[xa] == oshape[o.axis]:
                out.append(Choice(o, [Layout(SHARD, o.workers, xa, o.sizes)], par=len(o.workers)))
        elif o.kind in (LOCAL, REPL):
            out.append(Choice(o, [o]))
    return out


# ----------------------------------------------------------------------------- along one axis
def along_axis(ops: list[Operand], attrs: Any, oshape: Shape, extra: list[Layout]) -> list[Choice]:
    """Ops along ``attrs["axis"]`` that keep the shape (``log_softmax``, ``cumsum``; with two
    operands of that shape, ``normalize_backward``): tensors sharded on another axis run them
    per shard, every operand laid out as the first; sharded along the axis, they are gathered
    first."""
    x = ops[0]
    lay = x.layout
    ax = attrs["axis"] % max(len(oshape), 1)
    out: list[Choice] = []
    if lay.kind in (LOCAL, REPL) or lay.kind == SHARD and lay.axis != ax:
        out.append(Choice(lay, [lay if o.tid is not None else None for o in ops], par=_par(lay)))
    for o in extra:
        if o.kind in (LOCAL, REPL) or o.kind == SHARD and o.axis != ax:
            out.append(Choice(o, [o if p.tid is not None else None for p in ops], par=_par(o)))
    return out


# ----------------------------------------------------------------------------- shape ops
def _reshape_axis(old: Shape, new: Shape, lay: Layout) -> tuple[int, tuple[int, ...]] | None:
    """Where the blocks of a shard land after a reshape, if they stay blocks of one axis."""
    a = lay.axis
    pre = S.prod(old[:a])
    rest = S.prod(old[a + 1 :])
    for b in range(len(new)):
        if S.prod(new[:b]) != pre or new[b] == 1 and b + 1 < len(new):
            continue
        rn = S.prod(new[b + 1 :])
        if rn == 0 or any((s * rest) % rn for s in lay.sizes) or new[b] * rn != old[a] * rest:
            continue
        return b, tuple(s * rest // rn for s in lay.sizes)
    return None


def shape_op(op: Op, ops: list[Operand], attrs: Any, oshape: Shape) -> list[Choice]:
    """Choices for ``reshape``, ``transpose``, ``expand``, ``getitem`` and ``concat``."""
    x = ops[0]
    lay = x.layout
    if lay.kind in (LOCAL, REPL):
        return [Choice(lay, [lay if o.tid is not None else None for o in ops])]
    family = op.shard
    if family == "concat":
        ax = attrs["axis"] % len(oshape)
        if lay.kind == SHARD and lay.axis != ax and all(o.layout == lay for o in ops):
            return [Choice(lay, [lay] * len(ops), par=len(lay.workers))]
        return []
    if family == "getitem" and (len(ops) > 1 or any(it[0] in ("l", "t") for it in attrs["key"])):
        return []
    if lay.kind == PARTIAL:
        return [Choice(lay, [lay], par=len(lay.workers))]
    if family == "transpose":
        perm = list(attrs["perm"])
        o = Layout(SHARD, lay.workers, perm.index(lay.axis), lay.sizes)
        return [Choice(o, [lay], par=len(lay.workers))]
    if family == "expand":
        oa = lay.axis + len(oshape) - len(x.shape)
        o = Layout(SHARD, lay.workers, oa, lay.sizes)
        return [Choice(o, [lay], _with_shape(attrs, oshape, oa, lay.sizes), len(lay.workers))]
    if family == "reshape":
        hit = _reshape_axis(x.shape, oshape, lay)
        if hit is None:
            return []
        b, sizes = hit
        o = Layout(SHARD, lay.workers, b, sizes)
        return [Choice(o, [lay], _with_shape(attrs, oshape, b, sizes), len(lay.workers))]
    if family == "getitem":
        return _getitem(attrs, x.shape, lay)
    return []


def _expand_key(key: list, nd: int) -> list:
    """The key with its Ellipsis spelled out and missing trailing axes taken whole."""
    n_index = sum(1 for it in key if it[0] in ("i", "s"))
    items: list = []
    for it in key:
        if it[0] == "e":
            items.extend([["s", None, None, None]] * (nd - n_index))
        else:
            items.append(it)
    items.extend([["s", None, None, None]] * (nd - sum(1 for it in items if it[0] in ("i", "s"))))
    return items


def _getitem(attrs: dict, shape: Shape, lay: Layout) -> list[Choice]:
    """Basic indexing of a sharded tensor: each worker indexes its own block.

    A slice (step 1) along the sharded axis keeps the blocks that overlap it, cut down; an int
    there picks the one worker that holds it. Other axes may be indexed freely.
    """
    items = _expand_key(attrs["key"], len(shape))
    dim = oa = 0
    pos = -1
    for k, it in enumerate(items):
        if it[0] == "n":
            oa += 1
            continue
        if dim == lay.axis:
            pos = k
            break
        dim += 1
        oa += it[0] == "s"
    if pos < 0:
        return []
    it = items[pos]
    starts = lay.starts()
    if it[0] == "i":
        i = it[1] + shape[lay.axis] if it[1] < 0 else it[1]
        for b, (lo, n) in enumerate(zip(starts, lay.sizes)):
            if lo <= i < lo + n:
                key = [*items[:pos], ["i", i - lo], *items[pos + 1 :]]
                return [Choice(local(lay.workers[b]), [lay], lambda _i, k=key: {**attrs, "key": k})]
        return []
    if it[3] not in (None, 1):
        return []
    a, b, _ = slice(it[1], it[2]).indices(shape[lay.axis])
    ws, sizes, keys = [], [], []
    for w, lo, n in zip(lay.workers, starts, lay.sizes):
        s0, s1 = max(a, lo), min(b, lo + n)
        if s1 > s0:
            ws.append(w)
            sizes.append(s1 - s0)
            keys.append([*items[:pos], ["s", s0 - lo, s1 - lo, None], *items[pos + 1 :]])
    if not ws:
        return []
    out = shard(oa, ws, tuple(sizes))
    return [Choice(out, [lay], lambda i, ks=keys: {**attrs, "key": ks[i]}, len(ws))]


# ----------------------------------------------------------------------------- choosing
def compute_seconds(op: Op, ops: list[Operand], oshape: Shape) -> float:
    """A rough compute time, used only to compare choices."""
    n = S.prod(oshape)
    if op.shard == "matmul":
        return 2.0 * n * ops[0].shape[-1] / FLOPS
    return max(n, max((S.prod(o.shape) for o in ops if o.tid is not None), default=0)) / ELEMS


def candidates(
    op: Op, ops: list[Operand], attrs: Any, oshape: Shape, target: Layout | None, home: int
) -> list[Choice]:
    """Every choice the rules offer for one instruction, natural ones first, one-worker ones last."""
    sets = sorted({o.layout.workers for o in ops if o.tid is not None and o.layout.kind != LOCAL})
    extra: list[Layout] = []
    if target is not None:
        extra.append(target)
        if target.kind != LOCAL and target.workers not in sets:
            sets.append(target.workers)
    for ws in sets:
        extra.append(repl(ws))
    out: list[Choice] = []
    family = op.shard
    if family == "elementwise":
        out = elementwise(op, ops, attrs, oshape, extra)
    elif family == "matmul":
        out = matmul(ops, oshape, sets, extra)
    elif family == "reduce":
        out = reduction(op, ops, attrs, oshape, extra)
    elif family == "along_axis":
        out = along_axis(ops, attrs, oshape, extra)
    elif family is not None:
        out = shape_op(op, ops, attrs, oshape)
    if (
        target is not None
        and target.kind in (LOCAL, REPL)
        and not any(c.out == target for c in out)
    ):
        out.append(Choice(target, [target if o.tid is not None else None for o in ops]))
    holders = [
        o.layout.workers[0] for o in ops if o.tid is not None and o.layout.kind in (LOCAL, REPL)
    ]
    for w in dict.fromkeys([*holders, home]):
        lay = local(w)
        if not any(c.out == lay for c in out):
            out.append(Choice(lay, [lay if o.tid is not None else None for o in ops]))
    return out


def choose(
    op: Op,
    ops: list[Operand],
    attrs: Any,
    oshape: Shape,
    out_nbytes: int,
    target: Layout | None,
    home: int,
) -> Choice:
    """The cheapest choice: moves of the operands, compute, and the move of the result to ``target``.

    With a ``target`` (the signal's rule), the work runs on the target's workers: only choices
    whose result lives on exactly those workers compete (the result is then moved, e.g. partial
    sums reduce-scattered, to the target layout).
    """
    work = compute_seconds(op, ops, oshape)
    best: Choice | None = None
    best_cost = 0.0
    cands = candidates(op, ops, attrs, oshape, target, home)
    if target is not None:
        on_target = [c for c in cands if set(c.out.workers) == set(target.workers)]
        cands = on_target or cands
    for c in cands:
        cost = work / c.par
        moved: set[tuple[int, Layout]] = set()
        for o, need in zip(ops, c.needs):
            if need is None or o.tid is None or (o.tid, need) in moved:
                continue
            moved.add((o.tid, need))
            cost += R.cost(o.layout, need, o.nbytes)
        if target is not None:
            cost += R.cost(c.out, target, out_nbytes)
        elif c.out.kind == PARTIAL and op.shard == "matmul":  # combined at once, in the background
            cost += 0.5 * R.cost(c.out, Layout(REPL, c.out.workers), out_nbytes)
        if best is None or cost < best_cost - 1e-12:
            best, best_cost = c, cost
    assert best is not None  # candidates always include local(home)
    return best
