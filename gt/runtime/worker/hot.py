"""Hot paths on the worker: a client's captured step, defined once and replayed by one instruction.

A client that captured a step (:mod:`gt.runtime.client.capture`) sends its instructions once, in a
``hot_define`` instruction, as a *template*: ordinary instructions over the ids of the call it was
captured from, plus which of those ids are the call's inputs, its temporaries and its results.
Every later call is one ``hot`` instruction naming the plan, the ids of this call's inputs and
results, and fresh random seeds. The worker resolves the template once (:meth:`HotPlan.resolve`)
and replays it through the executor's ordinary path, so every instruction is validated, timed as
part of the step, counted by the memory pool, and fails exactly as it would have eagerly.

* **inputs** are replaced by the ids the ``hot`` instruction names;
* **results** are written to the ids the ``hot`` instruction names (fresh ones every call);
* **temporaries** live under private negative ids and are dropped right after their last use;
* every other id (parameters, optimizer state, gradients the program keeps) is used as it is:
  the step updates the same tensors every call, as it did eagerly.

Pure apart from the executor it is handed: no sockets.
"""

from __future__ import annotations

from typing import Any

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.batch import (
    BROADCASTING,
    GUARDED,
    check_broadcast,
    check_guarded,
    immediate,
)
from gt.runtime.worker.hot_chain import Chain, find_chains

#: Plans one client may hold on a worker, and instructions per plan (bounds on what a client can
#: make a worker keep).
MAX_PLANS = 256
MAX_STEPS = 100_000
#: The ``own`` field of a compiled step that is a :class:`Chain` of steps.
_CHAIN = -2
#: Temporaries of a replay live under ``TEMP_BASE - k`` (the planner's own temporaries are
#: small negative numbers; client ids are positive).
TEMP_BASE = -(1 << 40)
#: What a template may not hold: hot instructions (a plan that replays itself would never end),
#: and what only the dispatcher's planner writes.
_REFUSED = frozenset((O.OPCODE["hot"], O.OPCODE["hot_define"], O.OPCODE["free"], *O.COMM_OPS))


class HotPlan:
    """One resolved template.

    Attributes:
        name: what the client calls it (its function's name), for the dashboard.
        steps: ``[code, out, args, attrs, src]`` with temporaries already renamed.
        inputs, outs: the template's ids of the call's inputs and results (in order).
        seeded: indices of the steps whose ``attrs.seed`` each call replaces.
        drop_after: per step, the temporaries whose last use it is.
    """

    __slots__ = ("name", "steps", "inputs", "outs", "seeded", "drop_after", "_compiled")

    def __init__(self, name: str, steps: list, inputs: list, outs: list, seeded: list,
                 drop_after: list) -> None:  # fmt: skip
        self.name, self.steps, self.inputs, self.outs = name, steps, inputs, outs
        self.seeded, self.drop_after = seeded, drop_after
        self._compiled: Any = False  # not tried yet

    def compiled(self, handlers: list, fuse: Any = None) -> Compiled | None:
        """The plan bound to these kernels (made once), or ``None`` if a step has none;
        ``fuse``: the backend's elementwise-kernel factory, for its chains (CuPy)."""
        if self._compiled is False:
            try:
                self._compiled = Compiled(self, handlers, fuse)
            except ValueError:
                self._compiled = None
        return self._compiled

    @classmethod
    def resolve(cls, attrs: Any) -> HotPlan:
        """Check a ``hot_define`` instruction's attrs and resolve its template.

        Raises:
            ProtocolError: the template is malformed (not instructions, ids that are not ints,
                more steps than :data:`MAX_STEPS` ...).
        """
        if type(attrs) is not dict:
            raise P.ProtocolError("hot_define takes attrs")
        steps, name = attrs.get("steps"), attrs.get("name", "")
        inputs, temps, outs = attrs.get("inputs"), attrs.get("temps"), attrs.get("outs")
        if type(steps) is not list or not 0 < len(steps) <= MAX_STEPS:
            raise P.ProtocolError(f"a hot plan has 1..{MAX_STEPS} steps")
        for ids in (inputs, temps, outs):
            if type(ids) is not list or any(type(i) is not int for i in ids):
                raise P.ProtocolError("a hot plan's inputs, temps and outs are lists of ids")
        rename = {t: TEMP_BASE - k for k, t in enumerate(temps)}
        last: dict[int, int] = {}
        resolved, seeded = [], []
        for i, ins in enumerate(steps):
            code, out, args, at, src = P.check_instruction(ins)
            if code in _REFUSED:
                raise P.ProtocolError(f"a hot plan cannot hold {O.op_name(code)}")
            args = [rename.get(a, a) if type(a) is int else a for a in args]
            out = rename.get(out, out)
            for a in (*args, out):
                if type(a) is int and a <= TEMP_BASE:
                    last[a] = i
            if at is not None and "seed" in at:
                seeded.append(i)
            resolved.append([code, out, args, at, src])
        drop_after: list[tuple[int, ...]] = [()] * len(resolved)
        by_step: dict[int, list[int]] = {}
        for t, i in last.items():
            by_step.setdefault(i, []).append(t)
        for i, ts in by_step.items():
            drop_after[i] = tuple(ts)
        return cls(str(name)[:80], resolved, list(inputs), list(outs), seeded, drop_after)

    def instructions(self, inputs: list, outs: list, seeds: list) -> list:
        """This call's steps: the template with this call's inputs, results and seeds (checked
        by :meth:`HotPlans.call`)."""
        m = dict(zip(self.inputs, inputs))
        m.update(zip(self.outs, outs))
        steps = [
            [c, m.get(o, o), [m.get(a, a) if type(a) is int else a for a in args], at, s]
            for c, o, args, at, s in self.steps
        ]
        for i, seed in zip(self.seeded, seeds):
            steps[i][3] = {**steps[i][3], "seed": seed}
        return steps


class _Failed:
    """A register whose op failed (its error travels to what uses it)."""

    __slots__ = ("err",)

    def __init__(self, err: list) -> None:
        self.err = err


def _checking_broadcast(h: Any, code: int) -> Any:
    """``h`` refusing inputs that broadcast past the element limit (as :meth:`Executor._one`)."""

    def run(vals: list, attrs: Any) -> Any:
        check_broadcast(code, vals)
        return h(vals, attrs)

    return run


class Compiled:
    """A plan bound to a backend's kernels, replayed without the executor's per-instruction path.

    Every id of the template gets a register: constants (the immediates) are filled once, inputs
    and the tensors the step reads from the table when a call starts, and what the step keeps or
    returns is written back when it ends; temporaries live only in registers (dropped after their
    last use). Only plans whose every step has a kernel compile; a call whose inputs are not all
    in the table runs the ordinary path instead, so a missing tensor fails exactly as eagerly.
    Runs of in-place updates over the same tensors (an optimizer's) become one :class:`Chain`
    step, which runs them a cache-sized block at a time where it can (:mod:`.hot_chain`).
    """

    __slots__ = ("steps", "base", "loads", "stores", "inputs", "outs", "seeded", "updated",
                 "kept")  # fmt: skip

    def __init__(self, plan: HotPlan, handlers: list, fuse: Any = None) -> None:
        regs: dict[Any, int] = {}
        base: list = []

        def reg(key: Any, value: Any = None) -> int:
            r = regs.get(key)
            if r is None:
                r = regs[key] = len(base)
                base.append(value)
            return r

        inputs = [reg(("id", i)) for i in plan.inputs]
        outs = [reg(("id", i)) for i in plan.outs]
        steps, written = [], set()
        for k, (code, out, args, attrs, src) in enumerate(plan.steps):
            h = handlers[code] if 0 <= code < len(handlers) else None
            if h is None:
                raise ValueError(f"{O.op_name(code)} has no kernel")
            if code in GUARDED:  # a step over the size limits runs (and fails) as eagerly
                try:
                    check_guarded(code, attrs, False)
                except Exception as exc:
                    raise ValueError(str(exc)) from None
            elif code in BROADCASTING:  # its inputs' shapes are known only when it runs
                h = _checking_broadcast(h, code)
            try:  # an immediate as the eager path reads it ([v] is the integer v)
                idx = tuple(reg(("id", a)) if type(a) is int
                            else reg(("c", len(base)), a if type(a) is float else immediate(a))
                            for a in args)  # fmt: skip
            except P.ProtocolError as exc:
                raise ValueError(str(exc)) from None
            o = reg(("id", out))
            written.add(out)
            drop = tuple(regs[("id", t)] for t in plan.drop_after[k])
            # an in-place step on its first input: the register is one reference more than the
            # eager path holds, and the kernel would take the array as shared and copy it
            own = o if type(attrs) is dict and attrs.get("inplace") and idx[:1] == (o,) else -1
            steps.append((h, idx, attrs, o, drop, code, src, own))
        fixed = set(plan.inputs) | set(plan.outs)
        temps = {t for t in written if t <= TEMP_BASE}
        # what the step reads or updates from the table: everything but inputs, results and temps
        self.loads = [(r, key[1]) for key, r in regs.items()
                      if key[0] == "id" and key[1] not in fixed and key[1] not in temps]  # fmt: skip
        self.stores = [(regs[("id", i)], i) for i in written if i not in fixed and i not in temps]
        # inputs the step updates in place (``x.mul_(2)`` on an argument): written back under
        # this call's id, since a kernel may hand back a new array (an upload's is read-only)
        self.updated = [(k, r) for k, r in enumerate(inputs) if plan.inputs[k] in written]
        # registers of tensors that existed before the call and that it updates
        self.kept = {r for r, _ in self.loads} | {r for _, r in self.updated}
        self.seeded = list(plan.seeded)
        for start, stop in reversed(find_chains(steps)):  # (a seeded step is never in a chain)
            chain = Chain(steps[start:stop])
            chain.kernel = fuse
            steps[start:stop] = [
                (None, (), chain, -1, (), steps[start][5], steps[start][6], _CHAIN)
            ]
            self.seeded = [i - (stop - start - 1) if i >= stop else i for i in self.seeded]
        self.steps, self.base, self.inputs, self.outs = steps, base, inputs, outs

    def run(self, tbl: Any, failed: dict, inputs: list, outs: list,
            seeds: list) -> tuple[bool, list]:  # fmt: skip
        """Replay on a client's table (``failed``: its failed ids); ``(ran, errors)`` -- ``ran``
        is False (and nothing done) when an input or a tensor it reads is not in the table."""
        r = list(self.base)
        try:
            for k, tid in zip(self.inputs, inputs):
                r[k] = tbl[tid]
            for k, tid in self.loads:
                r[k] = tbl[tid]
        except KeyError:
            return False, []
        steps = self.steps
        if seeds:
            steps = list(steps)
            for i, seed in zip(self.seeded, seeds):
                h, idx, at, o, drop, code, src, own = steps[i]
                steps[i] = (h, idx, {**at, "seed": seed}, o, drop, code, src, own)
        errors: list = []
        i = 0
        try:
            for h, idx, at, o, drop, _code, _src, own in steps:
                if own == _CHAIN:
                    if not (at.blocked(r) or at.fused(r)):
                        at.stepwise(r)
                    i += 1
                    continue
                vals = [r[j] for j in idx]
                if own >= 0:
                    r[own] = None
                r[o] = h(vals, at)
                for d in drop:
                    r[d] = None
                i += 1
        except Exception as exc:  # from here on, check every input for a failure
            rest = steps[i + 1 :]
            if steps[i][7] == _CHAIN:  # the step of the chain that raised, then the chain's rest
                chain = steps[i][2]
                rest = [*chain.steps[chain.at + 1 :], *rest]
                h, idx, at, o, drop, code, src, _own = chain.steps[chain.at]
            else:
                h, idx, at, o, drop, code, src, _own = steps[i]
            r[o] = _Failed([f"{type(exc).__name__}: {exc}", code, src, False])
            errors.append(r[o].err[:3])
            for d in drop:
                r[d] = None
            self._rest(r, rest, 0, errors)
        updated = [(r_, inputs[k]) for k, r_ in self.updated]
        for k, tid in (*zip(self.outs, outs), *self.stores, *updated):
            v = r[k]
            if type(v) is _Failed:
                # A tensor the step updates in place (a weight, optimizer state) stays as it was,
                # as an eager in-place op that fails leaves it (Executor._op_failed): dropping it
                # would fail every later call of the step for good.
                if k not in self.kept:
                    tbl.pop(tid, None)
                failed[tid] = v.err
            else:
                tbl[tid] = v
        return True, errors

    @staticmethod
    def _rest(r: list, steps: list, start: int, errors: list) -> None:
        steps = [
            s for step in steps[start:] for s in (step[2].steps if step[7] == _CHAIN else (step,))
        ]
        for h, idx, at, o, drop, code, src, _own in steps:
            vals = [r[j] for j in idx]
            bad = next((v for v in vals if type(v) is _Failed), None)
            if bad is not None:
                r[o] = bad
            else:
                try:
                    r[o] = h(vals, at)
                except Exception as exc:
                    r[o] = _Failed([f"{type(exc).__name__}: {exc}", code, src, False])
                    errors.append(r[o].err[:3])
            for d in drop:
                r[d] = None


class HotPlans:
    """The plans of every client of one worker."""

    def __init__(self) -> None:
        self.plans: dict[int, dict[int, HotPlan]] = {}
        self.calls: dict[tuple[int, int], int] = {}  # (client, plan) -> replays so far

    def define(self, cno: int, attrs: Any) -> None:
        """Store (or, with ``steps: None``, drop) plan ``attrs.plan`` of client ``cno``.

        Raises:
            ProtocolError: a malformed plan, or more than :data:`MAX_PLANS` of them.
        """
        pid = attrs.get("plan") if type(attrs) is dict else None
        if type(pid) is not int:
            raise P.ProtocolError("hot_define names its plan by an int")
        mine = self.plans.setdefault(cno, {})
        if attrs.get("steps") is None:
            mine.pop(pid, None)
            self.calls.pop((cno, pid), None)
            return
        if pid not in mine and len(mine) >= MAX_PLANS:
            raise P.ProtocolError(f"a client may keep {MAX_PLANS} hot plans on a worker")
        mine[pid] = HotPlan.resolve(attrs)

    def call(self, cno: int, args: list, attrs: Any) -> tuple[HotPlan, list, list, list]:
        """The plan, inputs, results and seeds of a ``hot`` instruction.

        Raises:
            ProtocolError: no such plan, or arguments that do not fit it.
        """
        if type(attrs) is not dict or type(attrs.get("plan")) is not int:
            raise P.ProtocolError("hot names its plan by an int")
        plan = self.plans.get(cno, {}).get(attrs["plan"])
        if plan is None:
            raise P.ProtocolError(f"hot plan {attrs['plan']} is not defined on this worker")
        outs, seeds = attrs.get("outs", []), attrs.get("seeds", [])
        if type(outs) is not list or any(type(o) is not int for o in outs):
            raise P.ProtocolError("a hot call's outs are ids")
        if any(type(a) is not int for a in args) or type(seeds) is not list:
            raise P.ProtocolError("a hot call's inputs are ids and its seeds a list")
        if len(args) != len(plan.inputs) or len(outs) != len(plan.outs):
            raise P.ProtocolError(
                f"hot plan {plan.name!r} takes {len(plan.inputs)} inputs and {len(plan.outs)} "
                f"results, not {len(args)} and {len(outs)}"
            )
        if len(seeds) != len(plan.seeded) or any(type(x) is not int for x in seeds):
            raise P.ProtocolError(f"hot plan {plan.name!r} takes {len(plan.seeded)} seeds")
        key = (cno, attrs["plan"])
        self.calls[key] = self.calls.get(key, 0) + 1
        return plan, args, outs, seeds

    def fused_launches(self) -> int:
        """Chains of in-place updates run as one kernel so far, over the plans still held."""
        return sum(
            step[2].launches
            for mine in self.plans.values()
            for plan in mine.values()
            if plan._compiled
            for step in plan._compiled.steps
            if step[7] == _CHAIN
        )

    def drop_client(self, cno: int) -> None:
        """Forget a client's plans."""
        self.plans.pop(cno, None)
        for key in [k for k in self.calls if k[0] == cno]:
            del self.calls[key]
