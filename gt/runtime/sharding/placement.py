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

from typing import Any

from gt.runtime import protocol as P
from gt.runtime.sharding import rules
from gt.runtime.sharding.config import validate
from gt.runtime.sharding.layout import (
    PARTIAL,
    REPL,
    ClientPlacement,
    Layout,
    Program,
    TensorInfo,
    local,
    satisfies,
)
from gt.runtime.sharding.relayout import keeps_in_place, move
from gt.runtime.sharding.shapeinfer import infer, infer_dtype, nbytes
from gt.runtime.sharding.special import SpecialOps, rule_for, rule_layout

_OP = P.OPCODE
_FETCH, _UPLOAD, _MARK, _PLACE = (_OP[n] for n in ("fetch", "upload", "mark", "place"))
_CREATE = frozenset(_OP[n] for n in ("full", "randn", "rand", "randint", "arange", "eye"))
_MATMUL = _OP["matmul"]

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
    ) -> Program:
        """Rewrite one client batch into per-worker instruction lists.

        Args:
            cno: the client; ``home``: its home worker; ``alive``: ids of the live workers.
            instrs: the batch's instructions (with the optional sixth element, the signal id).
            frees: ids the client dropped.
            signals: new signal table entries ``[id, name, backward, is_backward]`` from the header.
        """
        c = self.client(cno, home)
        for entry in signals or ():
            try:
                c.signals[int(entry[0])] = (
                    str(entry[1]),
                    entry[2] if isinstance(entry[2], str) else None,
                    bool(entry[3]),
                )
            except (TypeError, ValueError, IndexError):
                continue
        p = Program(next_tag=c.next_tag, next_tmp=c.next_tmp)
        alive = sorted(alive)
        for ins in instrs:
            try:
                code, out, args, attrs, src = ins[0], ins[1], ins[2], ins[3], ins[4]
                sid = ins[5] if len(ins) > 5 else 0
                if type(args) is not list:
                    raise TypeError
            except (TypeError, IndexError, KeyError):
                p.parts.setdefault(home, []).append(ins[:5] if type(ins) is list else ins)
                continue
            try:
                self._one(c, p, code, out, args, attrs, src, sid, alive)
            except Exception as exc:  # a rule failed: say so, and run it whole on the home worker
                p.errors.append([f"placement: {type(exc).__name__}: {exc}", code, src])
                try:
                    self._fallback(c, p, code, out, args, attrs, src)
                except Exception:
                    p.parts.setdefault(home, []).append([code, out, args, attrs, src])
        for tid in frees:
            info = c.tensors.pop(tid, None)
            for w in info.layout.workers if info is not None else (home,):
                p.free_later(w, tid)
        p.finish()
        c.next_tag, c.next_tmp = p.next_tag, p.next_tmp
        if any(w != home for w in p.parts) or any(w != home for w in p.frees):
            c.placed = True
        return p

    def _set(
        self,
        c: ClientPlacement,
        p: Program,
        tid: int,
        shape: Shape | None,
        dtype: str,
        lay: Layout,
        src: int,
    ) -> TensorInfo:
        old = c.tensors.get(tid)
        if old is not None:
            for w in old.layout.workers:
                if w not in lay.workers:
                    p.free_now(w, [tid], src)
        if lay == c.home_lay:
            lay = c.home_lay
        info = c.tensors[tid] = TensorInfo(shape, dtype, lay)
        return info

    def _one(
        self,
        c: ClientPlacement,
        p: Program,
        code: int,
        out: int,
        args: list,
        attrs: Any,
        src: int,
        sid: int,
        alive: list[int],
    ) -> None:
        home = c.home
        tensors = c.tensors
        if code == _FETCH:
            self._fetch(c, p, out, args, attrs, src)
            return
        if code == _MARK:
            p.add(home, code, out, args, attrs, src)
            return
        name, rule = rule_for(self.config["signals"], c.signals.get(sid)) if sid else (None, None)
        if code == _PLACE:
            self._place(c, p, out, attrs, src, name, rule, alive)
            return
        shape = infer(code, args, attrs, _Shapes(tensors))
        dtype = infer_dtype(code, args, attrs, _Shapes(tensors).dtype)
        if rule is None and (code not in _CREATE or not self.config["settings"]["auto_shard"]):
            hl = c.home_lay
            for a in args:
                if type(a) is int:
                    info = tensors.get(a)
                    if info is not None and info.layout is not hl:
                        break
            else:  # the common case: no rule, every operand on the home worker
                p.add(home, code, out, args, attrs, src)
                old = tensors.get(out)
                if old is not None and old.layout is not hl:
                    self._set(c, p, out, shape, dtype, hl, src)
                else:
                    tensors[out] = TensorInfo(shape, dtype, hl)
                return
        if code in _CREATE or code == _UPLOAD:
            self._create(c, p, code, out, args, attrs, src, shape, dtype, name, rule, alive)
            return
        ops: list[rules.Operand] = []
        known = shape is not None
        for a in args:
            if type(a) is int:
                info = tensors.get(a)
                if info is None or info.shape is None:
                    known = False
                    ops.append(rules.Operand(a, (), info.layout if info else local(home)))
                else:
                    ops.append(
                        rules.Operand(a, info.shape, info.layout, nbytes(info.shape, info.dtype))
                    )
            else:
                ops.append(rules.Operand(None, (), None))
        if not known:
            self._fallback(c, p, code, out, args, attrs, src, shape, dtype)
            return
        target = rule_layout(rule, shape, alive, False)
        choice = rules.choose(code, ops, attrs, shape, nbytes(shape, dtype), target, home)
        per_arg = self._gather_operands(c, p, ops, choice.needs, src)
        for i, w in enumerate(choice.out.workers):
            wargs = [a if ids is None else ids[w] for a, ids in zip(args, per_arg)]
            p.add(w, code, out, wargs, choice.attrs(i) if choice.attrs else attrs, src)
        info = self._set(c, p, out, shape, dtype, choice.out, src)
        if target is not None and not satisfies(choice.out, target):
            info.layout, _ = move(
                p, out, choice.out, target, nbytes(shape, dtype), src, True, exact=True
            )
        elif target is None and choice.out.kind == PARTIAL and code == _MATMUL:
            # A product's partial sums are needed whole almost always (gradients, activations):
            # combine them at once, in the background, while the workers go on computing (the
            # next gradient, say). Partial results of reductions stay partial until used.
            whole = Layout(REPL, choice.out.workers)
            info.layout, _ = move(p, out, choice.out, whole, nbytes(shape, dtype), src, True,
                                  background=True)  # fmt: skip

    def _gather_operands(
        self,
        c: ClientPlacement,
        p: Program,
        ops: list[rules.Operand],
        needs: list[Layout | None],
        src: int,
    ) -> list[dict[int, int] | None]:
        """Move each operand to the layout it is needed in; the ids to use on each worker."""
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
                lay, ids = move(p, o.tid, have, need, o.nbytes, src, keeps_in_place(have, need))
                if info is not None:
                    info.layout = lay
                done[key] = ids
            per_arg.append(done[key])
        return per_arg

    def _fallback(
        self,
        c: ClientPlacement,
        p: Program,
        code: int,
        out: int,
        args: list,
        attrs: Any,
        src: int,
        shape: Shape | None = None,
        dtype: str = "float32",
    ) -> None:
        """Run one instruction whole on the home worker, gathering placed operands there first."""
        home = c.home
        ops = []
        for a in args:
            info = c.tensors.get(a) if type(a) is int else None
            nb = nbytes(info.shape, info.dtype) if info is not None else 0
            ops.append(
                rules.Operand(
                    a if type(a) is int else None, (), info.layout if info else local(home), nb
                )
            )
        per_arg = self._gather_operands(
            c, p, ops, [local(home) if o.tid is not None else None for o in ops], src
        )
        wargs = [a if ids is None else ids[home] for a, ids in zip(args, per_arg)]
        p.add(home, code, out, wargs, attrs, src)
        if type(out) is int and code != _FETCH:
            self._set(c, p, out, shape, dtype, local(home), src)
