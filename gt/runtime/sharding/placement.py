"""The dispatcher's placement planner: rewrites a client's instructions for the cluster (pure).

For every client it keeps a table ``tensor id -> (shape, dtype, layout)`` and, given the active
shard config, turns each client instruction into per-worker instructions plus explicit re-layout
instructions (see :mod:`gt.runtime.sharding.relayout`). The decisions:

* **creation** (``full``, ``randn``, ``arange`` ..., ``upload``) lands where the signal's rule says
  (``shard``/``replicate``/stage ``workers``), where auto-shard says (large tensors split on axis 0
  over all workers), or on the client's home worker (see :mod:`gt.runtime.sharding.special`, which also
  handles ``gt.signal.tensor`` and ``fetch``).
* **compute** follows :mod:`gt.runtime.sharding.rules`: the cheapest way to run given where the operands
  are. Under a signal's rule the work runs on the rule's workers and the result is moved to the
  rule's layout (partial sums reduce-scattered or all-reduced); without one, a matmul's partial
  sums are all-reduced at once in the background, and other results stay where they were made.
* instructions that touch nothing placed, under no rule, go to the home worker unchanged.
* frees go to every worker that holds a part.

Nothing here touches a socket; :class:`Placement` is driven by the dispatcher and unit-tested alone.
"""

from __future__ import annotations

import traceback
from typing import Any

from gt.runtime import ops as O
from gt.runtime.sharding import rules
from gt.runtime.sharding.config import validate
from gt.runtime.sharding.layout import (
    PARTIAL,
    REPL,
    ClientPlacement,
    Layout,
    Program,
    Step,
    TensorInfo,
    local,
    satisfies,
)
from gt.runtime.sharding.relayout import keeps_in_place, move
from gt.runtime.sharding.shapeinfer import infer, infer_dtype, nbytes
from gt.runtime.sharding.special import SpecialOps, note_axis_fit, rule_for, rule_layout

_FETCH, _MARK, _PLACE = (O.OPCODE[n] for n in ("fetch", "mark", "place"))
_PLANNER_ONLY = frozenset((*O.COMM_OPS, O.OPCODE["free"]))

Shape = tuple[int, ...]


class _Shapes:
    """``infer`` looks shapes up through this view of a client's table."""

    __slots__ = ("t",)

    def __init__(self, t: dict[int, TensorInfo]):
        self.t = t

    def get(self, tid: int) -> Shape | None:
        info = self.t.get(tid)
        return None if info is None else info.shape

    def dtype(self, tid: int) -> str | None:
        info = self.t.get(tid)
        return None if info is None else info.dtype


class Placement(SpecialOps):
    """The active config and every client's table; :meth:`plan` rewrites one batch."""

    def __init__(self) -> None:
        self.config: dict = validate(None)
        self.clients: dict[int, ClientPlacement] = {}

    # ------------------------------------------------------------------ config and clients
    @property
    def active(self) -> bool:
        """Whether a config with rules (or auto-shard) is in force: every batch is planned."""
        return bool(self.config["signals"]) or bool(self.config["settings"]["auto_shard"])

    def apply_config(self, raw: Any, alive: list[int]) -> tuple[dict, dict]:
        """Validate and install a config for new instructions; returns ``(before, after)``.

        Raises:
            gt.runtime.sharding.config.ConfigError: the config is malformed or names workers that do not exist.
        """
        new = validate(raw, alive)
        before, self.config = self.config, new
        return before, new

    def client(self, cno: int, home: int) -> ClientPlacement:
        """The table of client ``cno`` (made on first use)."""
        c = self.clients.get(cno)
        if c is None:
            c = self.clients[cno] = ClientPlacement(cno, home)
        return c

    def wants(self, cno: int) -> bool:
        """Whether an unannotated batch of client ``cno`` must be planned (not forwarded whole)."""
        if self.active:
            return True
        c = self.clients.get(cno)
        return c is not None and c.placed

    def drop(self, cno: int) -> None:
        """Forget a client's table."""
        self.clients.pop(cno, None)

    def clients_on(self, wid: int) -> list[int]:
        """Clients that hold some tensor on worker ``wid``."""
        return [
            c.cno
            for c in self.clients.values()
            if any(wid in i.layout.workers for i in c.tensors.values())
        ]

    # ------------------------------------------------------------------ planning
    def plan(
        self,
        cno: int,
        home: int,
        instrs: list,
        frees: list,
        alive: list[int],
        signals: list | None = None,
        free_at: list | None = None,
    ) -> Program:
        """Rewrite one client batch into per-worker instruction lists.

        A rule that raises is a bug in GT, not bad input: the instruction then runs whole on the
        home worker (results stay right) and the traceback is kept in ``Program.internal`` for the
        dispatcher to log and count.

        Args:
            cno: the client; ``home``: its home worker; ``alive``: ids of the live workers.
            instrs: the batch's instructions (with the optional sixth element, the signal id).
            frees: ids the client dropped; ``free_at``: where (how many of ``instrs`` ran before
                each was dropped; ``None``: after the batch). Each worker drops them at the same
                point of its own part.
            signals: new signal table entries ``[id, name, backward, is_backward]`` from the header.
        """
        c = self.client(cno, home)
        for sid, name, backward, is_backward in signals or ():
            c.signals[sid] = (name, backward, is_backward)
        p = Program(next_tag=c.next_tag, next_tmp=c.next_tmp)
        alive = sorted(alive)
        early = sorted(zip(free_at, frees)) if free_at else []
        fi = 0
        for i, ins in enumerate(instrs):
            while fi < len(early) and early[fi][0] <= i:
                self._free(c, p, home, early[fi][1])
                fi += 1
            if not _well_formed(ins):  # the worker reports what is wrong with it
                p.parts.setdefault(home, []).append(ins[:5] if type(ins) is list else ins)
                continue
            if ins[0] in _PLANNER_ONLY:  # transfers are the planner's to write, never a client's
                p.errors.append([f"{O.op_name(ins[0])} may only come from the dispatcher's planner",
                                 ins[0], ins[4]])  # fmt: skip
                continue
            s = Step(c, p, ins[0], ins[1], ins[2], ins[3], ins[4], alive=alive)
            try:
                self._one(s, ins[5] if len(ins) > 5 else 0)
            except Exception:
                p.internal.append(traceback.format_exc())
                try:
                    self._fallback(s)
                except Exception:
                    p.internal.append(traceback.format_exc())
                    p.parts.setdefault(home, []).append(ins[:5])
            p.release_temps()
        for _pos, tid in early[fi:] if free_at else [(None, t) for t in frees]:
            self._free(c, p, home, tid)
        p.finish()
        c.next_tag, c.next_tmp = p.next_tag, p.next_tmp
        if any(w != home for w in p.parts) or any(w != home for w in p.frees):
            c.placed = True
        return p

    @staticmethod
    def _free(c: Any, p: Program, home: int, tid: Any) -> None:
        """The client dropped ``tid``: every worker holding a part drops it here."""
        info = c.tensors.pop(tid, None) if type(tid) is int else None
        for w in info.layout.workers if info is not None else (home,):
            p.free_here(w, tid)

    def _set(self, s: Step, tid: int, lay: Layout) -> TensorInfo:
        """Record ``tid``'s new layout (with the step's shape and dtype), freeing old copies."""
        c = s.c
        old = c.tensors.get(tid)
        if old is not None:
            for w in old.layout.workers:
                if w not in lay.workers:
                    s.p.free_now(w, [tid], s.src)
        if lay == c.home_lay:
            lay = c.home_lay
        info = c.tensors[tid] = TensorInfo(s.shape, s.dtype, lay)
        return info

    def _one(self, s: Step, sid: int) -> None:
        c, p, code = s.c, s.p, s.code
        if code == _FETCH:
            self._fetch(s)
            return
        if code == _MARK:
            p.add(c.home, code, s.out, s.args, s.attrs, s.src)
            return
        if sid:
            s.name, s.rule = rule_for(self.config["signals"], c.signals.get(sid))
        if code == _PLACE:
            self._place(s)
            return
        s.op = O.REGISTRY[code] if 0 <= code < len(O.REGISTRY) else None
        shapes = _Shapes(c.tensors)
        s.shape = infer(code, s.args, s.attrs, shapes)
        s.dtype = infer_dtype(code, s.args, s.attrs, shapes.dtype)
        creates = s.op is not None and s.op.kind == "create"
        if s.rule is None and not (creates and self.config["settings"]["auto_shard"]):
            if self._all_home(s):
                return
        if s.op is not None and (creates or s.op.name == "upload"):
            self._create(s)
            return
        self._compute(s)

    def _all_home(self, s: Step) -> bool:
        """The common case: no rule and every operand on the home worker. Plans it; True if so."""
        c = s.c
        hl = c.home_lay
        tensors = c.tensors
        for a in s.args:
            if type(a) is int:
                info = tensors.get(a)
                if info is not None and info.layout is not hl:
                    return False
        s.p.add(c.home, s.code, s.out, s.args, s.attrs, s.src)
        old = tensors.get(s.out)
        if old is not None and old.layout is not hl:
            self._set(s, s.out, hl)
        else:
            tensors[s.out] = TensorInfo(s.shape, s.dtype, hl)
        return True

    def _compute(self, s: Step) -> None:
        """A compute instruction under a rule, or with placed operands: the cheapest choice."""
        c, p = s.c, s.p
        ops: list[rules.Operand] = []
        known = s.shape is not None and s.op is not None
        for a in s.args:
            if type(a) is int:
                info = c.tensors.get(a)
                if info is None or info.shape is None:
                    known = False
                    ops.append(rules.Operand(a, (), info.layout if info else local(c.home)))
                else:
                    ops.append(
                        rules.Operand(a, info.shape, info.layout, nbytes(info.shape, info.dtype))
                    )
            else:
                ops.append(rules.Operand(None, (), None))
        if not known:
            self._fallback(s)
            return
        size = nbytes(s.shape, s.dtype)
        target = rule_layout(s.rule, s.shape, s.alive, False)
        if s.rule is not None:
            note_axis_fit(c.axis_fits, s.name, s.rule, s.shape)
        choice = rules.choose(s.op, ops, s.attrs, s.shape, size, target, c.home)
        per_arg = self._gather_operands(s, ops, choice.needs)
        for i, w in enumerate(choice.out.workers):
            wargs = [a if ids is None else ids[w] for a, ids in zip(s.args, per_arg)]
            p.add(w, s.code, s.out, wargs, choice.attrs(i) if choice.attrs else s.attrs, s.src)
        info = self._set(s, s.out, choice.out)
        if target is not None and not satisfies(choice.out, target):
            info.layout, _ = move(p, s.out, choice.out, target, size, s.src, True, exact=True)
        elif target is None and choice.out.kind == PARTIAL and s.op.shard == "matmul":
            # A product's partial sums are needed whole almost always (gradients, activations):
            # combine them at once, in the background, while the workers go on computing (the
            # next gradient, say). Partial results of reductions stay partial until used.
            whole = Layout(REPL, choice.out.workers)
            info.layout, _ = move(p, s.out, choice.out, whole, size, s.src, True, background=True)

    def _gather_operands(
        self, s: Step, ops: list[rules.Operand], needs: list[Layout | None]
    ) -> list[dict[int, int] | None]:
        """Move each operand to the layout it is needed in; the ids to use on each worker."""
        c = s.c
        per_arg: list[dict[int, int] | None] = []
        done: dict[tuple[int, Layout], dict[int, int]] = {}
        for o, need in zip(ops, needs):
            if need is None or o.tid is None:
                per_arg.append(None)
                continue
            key = (o.tid, need)
            if key not in done:
                info = c.tensors.get(o.tid)
                have = info.layout if info is not None else local(c.home)
                lay, ids = move(s.p, o.tid, have, need, o.nbytes, s.src, keeps_in_place(have, need))
                if info is not None:
                    info.layout = lay
                done[key] = ids
            per_arg.append(done[key])
        return per_arg

    def _fallback(self, s: Step) -> None:
        """Run one instruction whole on the home worker, gathering placed operands there first."""
        c = s.c
        home = c.home
        ops = []
        for a in s.args:
            info = c.tensors.get(a) if type(a) is int else None
            nb = nbytes(info.shape, info.dtype) if info is not None else 0
            lay = info.layout if info else local(home)
            ops.append(rules.Operand(a if type(a) is int else None, (), lay, nb))
        per_arg = self._gather_operands(
            s, ops, [local(home) if o.tid is not None else None for o in ops]
        )
        wargs = [a if ids is None else ids[home] for a, ids in zip(s.args, per_arg)]
        s.p.add(home, s.code, s.out, wargs, s.attrs, s.src)
        if type(s.out) is int and s.code != _FETCH:
            self._set(s, s.out, local(home))


def _well_formed(ins: Any) -> bool:
    """``[int, int, list, attrs, int(, int)]``: what the planner can read (see the protocol)."""
    return (
        type(ins) is list
        and 5 <= len(ins) <= 6
        and type(ins[0]) is int
        and type(ins[1]) is int
        and type(ins[2]) is list
        and type(ins[4]) is int
        and (len(ins) == 5 or type(ins[5]) is int)
    )
