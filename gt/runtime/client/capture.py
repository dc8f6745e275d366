"""Capturing a repeated step (pure): recorded calls in, a template for the worker out.

A call of a hot function (:mod:`gt.hot`) is recorded as the instructions it emitted, the ids of
its tensor arguments, the ids it made (every id at or after the first one it allocated) and the
ids freed while it ran. Two consecutive calls are *the same step* when their instructions match
one for one, with every id written as what it is to its call (:func:`canonical`):

* ``("a", k)``: the call's k-th tensor argument;
* ``("m", j)``: made by the call's own instruction ``j``;
* ``("p", j)``: made by instruction ``j`` of the *previous* call (last step's gradients, which
  this step frees or reads);
* ``("x", id)``: anything else, by its id (parameters, optimizer state: the same every call).

Random seeds are compared as slots: "the call's k-th distinct seed" (each call draws new ones, and
ops that shared a seed -- a checkpointed block's recomputed dropout -- share one again). Comparing
two calls is linear in
their length. From the second of two matching calls, :func:`build_template` makes what the worker
stores (:mod:`gt.runtime.worker.hot`): its inputs, results and temporaries, with every ``("p", j)``
read pointing at this call's own ``j`` -- which replays overwrite in place, so the Python objects
that hold them (``p.grad``) stay right.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gt.runtime import ops as O

#: Instructions that end a capture: data from or to the user's process (a sync point, an
#: upload whose bytes change each call), and what only the planner or GT itself writes.
NOT_CAPTURABLE = frozenset(
    O.OPCODE[n] for n in ("upload", "fetch", "place", "free", "hot", "hot_define")
) | frozenset(O.COMM_OPS)


class NotCapturable(Exception):
    """The call cannot be replayed as recorded; the message says why (shown in the dashboard)."""


@dataclass
class CallRecord:
    """One recorded call.

    Attributes:
        lo: the first id allocated in the call (every id ``>= lo`` was made by it).
        args: ids of the call's tensor arguments, in order.
        instrs: ``[opcode, out, args, attrs, src(, signal)]`` as emitted.
        freed: ids freed from the start of the call until it was finalized.
        made: id -> index of the instruction that first wrote it (ids the call made).
        returned: ids of the tensors it returned.
        grads: each gradient the call made and left as a tensor's ``.grad`` (see
            :mod:`gt.hotpath`) -> the id of that tensor's gradient when the call began, which
            a replay writes the new one over, or ``None`` when it had none.
        grad_args: the gradients among ``args``: the call added to them (accumulating).
    """

    lo: int
    args: list[int]
    instrs: list = field(default_factory=list)
    freed: set = field(default_factory=set)
    made: dict = field(default_factory=dict)
    returned: list = field(default_factory=list)
    grads: dict = field(default_factory=dict)
    grad_args: list = field(default_factory=list)

    def close(self) -> None:
        """Index what the call made (call once it returned)."""
        lo, made = self.lo, self.made
        for j, ins in enumerate(self.instrs):
            out = ins[1]
            if out >= lo and out not in made:
                made[out] = j


def _token(a: int, argpos: dict, rec: CallRecord, prev: CallRecord | None) -> tuple:
    k = argpos.get(a)
    if k is not None:
        return ("a", k)
    j = rec.made.get(a)
    if j is not None:
        return ("m", j)
    if prev is not None:
        j = prev.made.get(a)
        if j is not None:
            return ("p", j)
    return ("x", a)


#: Seeds at or above this come from a ``gt.Generator`` (see :meth:`gt.ops.random.Generator.next_seed`).
_OWN_GENERATOR = 1 << 62


def canonical(rec: CallRecord, prev: CallRecord | None, signals_ok: bool = False) -> list:
    """The call's instructions with every id written as what it is to the call (see the module).
    ``signals_ok``: the dispatcher plans nothing of this client's (a signal changes nothing).

    Raises:
        NotCapturable: the call synchronised, uploaded data, or ran under a signal the
            dispatcher may place (a shard config is in force).
    """
    argpos = {a: k for k, a in reversed(list(enumerate(rec.args)))}
    slots: dict = {}  # seed -> its slot (random ops that shared a seed share one on replay)
    out = []
    for ins in rec.instrs:
        code, dst, args, attrs, src = ins[:5]
        if code in NOT_CAPTURABLE:
            raise NotCapturable(f"it runs {O.op_name(code)} (a sync point or data from the host)")
        if len(ins) > 5 and not signals_ok:
            raise NotCapturable(
                "it runs under a signal while a shard config is in force "
                "(the dispatcher places its tensors)"
            )
        if attrs is not None and attrs.get("seed", 0) >= _OWN_GENERATOR:
            raise NotCapturable(
                "it draws from a gt.Generator of its own (a replay draws from the global stream)"
            )
        if attrs is not None and "seed" in attrs:  # a fresh seed each call, shared as it was
            attrs = {**attrs, "seed": ("slot", slots.setdefault(attrs["seed"], len(slots)))}
        toks = tuple(_token(a, argpos, rec, prev) if type(a) is int else ("v", a) for a in args)
        out.append((code, _token(dst, argpos, rec, prev), toks, attrs, src))
    return out


def same_step(a: list, b: list) -> bool:
    """Whether two canonical calls are the same step (one pass; immediates compared as values)."""
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


def numbers_differ(a: list, b: list) -> bool:
    """Whether two calls differ only in the Python numbers they pass (immediates)."""
    if len(a) != len(b):
        return False

    def shape(c: tuple) -> tuple:
        return (c[0], c[1], tuple(t if t[0] != "v" else ("v",) for t in c[2]), c[3], c[4])

    return any(x != y for x, y in zip(a, b)) and all(shape(x) == shape(y) for x, y in zip(a, b))


@dataclass
class Template:
    """What :meth:`gt.runtime.worker.hot.HotPlans.define` takes (``attrs`` of ``hot_define``),
    and what the client needs to replay it.

    Attributes:
        steps: the instructions, over the captured call's ids.
        inputs, outs, temps: which of those ids are the arguments, results and temporaries.
        kept: ids the step made and the program keeps (rewritten by every replay).
        reads: ids from outside the step that it reads or updates (parameters, state).
        rebound: gradients the step made for tensors that had none when it began: the last of
            ``outs`` (fresh every replay, bound to their tensors' ``.grad`` by the client).
        grad_inputs: the last of ``inputs``: the gradients the step adds to or writes over
            (each replay passes the ones the tensors hold then).
    """

    steps: list
    inputs: list
    outs: list
    temps: list
    kept: list
    reads: list
    rebound: list = field(default_factory=list)
    grad_inputs: list = field(default_factory=list)

    def attrs(self, plan: int, name: str) -> dict:
        """The ``hot_define`` attrs."""
        return {"plan": plan, "name": name, "steps": self.steps, "inputs": self.inputs,
                "temps": self.temps, "outs": self.outs}  # fmt: skip


def build_template(rec: CallRecord, prev: CallRecord) -> Template:
    """The template of ``rec``, the second of two matching calls (``prev`` the first).

    A gradient the call made and left as a tensor's ``.grad`` (:attr:`CallRecord.grads`) is not
    kept at a fixed id: where the tensor had a gradient when the call began, that one is an
    input of the step, which writes the new one over it (whichever the tensor holds when a
    replay runs: another capture of the step, for another shape, may have made it); where it
    had none (``zero_grad()`` ran outside the step), the new one is a result, fresh every replay.

    Raises:
        NotCapturable: a result the call did not make; a tensor it made and kept that the next
            call does not replace (a program that keeps every step's copy, e.g. in a list); a
            tensor from outside the step that it freed; a gradient read after the call
            replaced it.
    """
    made_at = {j: i for i, j in rec.made.items()}
    returned = rec.returned
    was_returned = set(prev.returned)
    # (last call's gradients are this call's arguments, or replaced by fresh ones every replay:
    # no replay overwrites them where the program still holds them)
    kept_before = [
        i
        for i in prev.made
        if i not in prev.freed and i not in rec.freed and i not in was_returned
        and i not in prev.grads
    ]  # fmt: skip
    for i in returned:
        if i not in rec.made:
            raise NotCapturable("it returns a tensor it did not make (return a new one)")
    outs = list(dict.fromkeys(returned))
    out_set = set(outs)
    kept = [i for i in rec.made if i not in rec.freed and i not in out_set]
    kept_set = set(kept)
    over = {i: old for i, old in rec.grads.items() if old is not None and i in kept_set}
    rebound = [i for i in kept if i in rec.grads and rec.grads[i] is None]
    gone = set(over) | set(rebound)
    kept = [i for i in kept if i not in gone]
    kept_set = set(kept)
    temps = [i for i in rec.made if i in rec.freed and i not in out_set]
    unread = [old for old in over.values() if old not in rec.args]
    inputs = list(dict.fromkeys(rec.args + unread))
    prev_made, own = prev.made, set(rec.made) | set(inputs)
    _check_replaced_grads(rec, over)

    def now(a: int) -> int:
        """``a`` as the template names it (see the module docstring)."""
        if a in over:
            return over[a]
        if a in own:
            return a
        if a in prev_made:
            return _now(made_at, prev_made[a], kept_set)
        reads.add(a)
        return a

    steps, reads = [], set()
    for ins in rec.instrs:
        code, dst, args, attrs, src = ins[:5]
        steps.append([code, now(dst), [now(a) if type(a) is int else a for a in args], attrs, src])
    if reads & rec.freed:
        raise NotCapturable("it frees a tensor from outside it")
    if kept_before:
        raise NotCapturable(
            "it keeps every call's result alive (e.g. in a list): a replay would overwrite them"
        )
    grad_inputs = list(dict.fromkeys(rec.grad_args + unread))
    return Template(steps, inputs, outs + rebound, temps, kept, sorted(reads), rebound, grad_inputs)


def _check_replaced_grads(rec: CallRecord, over: dict) -> None:
    """A new gradient is written over the old one from the instruction that makes it on: the
    old one may not be used from there on (read, or written, or kept)."""
    if not over:
        return
    first = {old: rec.made[new] for new, old in over.items()}
    for j, ins in enumerate(rec.instrs):
        for a in (ins[1], *ins[2]):
            if type(a) is int and j > first.get(a, j):
                raise NotCapturable(
                    "it uses a tensor's old gradient after backward replaced it (clone it first)"
                )
    if any(old not in rec.freed for old in over.values()):
        raise NotCapturable("it keeps a tensor's old gradient after backward replaced it")


def _now(made_at: dict, j: int, kept: set) -> int:
    """The id this call made at instruction ``j`` (what last call's ``j`` is, one step on)."""
    i = made_at.get(j)
    if i is None or i not in kept:
        raise NotCapturable("it reads last call's tensors in a way this call does not repeat")
    return i
