"""``@gt.hot``: a step function captured once and replayed as one instruction per call.

    @gt.hot
    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for x, y in loader:
        loss = train_step(x, y)          # from the third call on: one small message per step

The first calls run eagerly while their instructions are recorded. Once two consecutive calls are
the same step (same ops, shapes, dtypes and data flow; :mod:`gt.runtime.client.capture`), the step
is sent to the client's home worker once and every later call is one ``hot`` instruction naming
this call's inputs and results: no Python of the function runs, no shape is inferred, nothing is
encoded but that one instruction. The worker replays the step through its ordinary executor, so
results, errors (with the user's source lines) and memory limits are exactly those of the eager
run; temporaries are dropped after their last use.

What a replay does not repeat is Python: a hot function must be a function of its tensor inputs
and of the tensors it updates (parameters, optimizer state, ``p.grad``). Its results come back
detached (backward belongs inside the step). A call whose arguments differ in shape, dtype or any
non-tensor value has a capture of its own; anything that cannot be replayed -- a sync point
(``.item()``, printing) or host data (``gt.tensor(array)``) inside, a signal while a shard
config is in force (with none, a signal changes nothing and the step is captured), a step that
keeps every call's result -- makes the function run eagerly, correctly, and the dashboard
says why. Freeing a tensor the step relies on (dropping the model, say) ends its capture; the next
calls capture it again (after three captures in a row that lasted fewer than eight calls, only
after 32 eager calls, then 64 ...: recording a call costs a garbage collection).

Gradients are followed where the loop leaves them. A step that calls ``zero_grad()`` itself
writes its new gradients over the tensors ``p.grad`` holds when it is called (another capture of
the step, for another batch shape, may have made them). With ``zero_grad()`` outside the step (each call
finds no gradients), every replay makes fresh ones and binds them to ``p.grad``, as the eager call
did. A step that adds to the gradients earlier calls left (gradient accumulation: forward and
backward captured, the optimizer stepped outside every few calls) reads and updates whatever
tensors ``p.grad`` holds when it is called. Whether those parameters have a gradient when a call
begins picks its capture (one that makes gradients, one that adds to them); a call that finds
them otherwise than its capture expects runs eagerly.
"""

from __future__ import annotations

import functools
import gc
import itertools
import statistics
import time
import weakref
from typing import Any

from gt import guards
from gt.hot_calls import (
    carries_graph,
    flatten,
    grad_effects,
    signature,
    tensor_args,
    tensor_ids,
    unflatten,
)
from gt.ops.random import next_seed
from gt.runtime import ops as O
from gt.runtime.client.capture import (
    CallRecord,
    NotCapturable,
    Template,
    build_template,
    canonical,
    numbers_differ,
    same_step,
)
from gt.session import get_connection
from gt.tensor import Tensor

_HOT, _HOT_DEFINE = O.OPCODE["hot"], O.OPCODE["hot_define"]
#: Captures kept per function (one per argument signature), and failed tries before giving up.
MAX_SIGNATURES = 8
MAX_TRIES = 4
#: Calls after which a step whose instructions kept changing is recorded again (doubling each
#: time it still changes, up to RETRY_MAX): a warm-up or a run of early changes ends, and the
#: step is the same from then on.
RETRY_AFTER = 32
RETRY_MAX = 4096
#: A capture dropped after fewer replays than this is short-lived; after SHORT_IN_A_ROW of them
#: in a row the step runs eagerly, unrecorded, for RETRY_AFTER calls (doubling, as above) before
#: it is recorded again: recording costs a garbage collection per call, and a step whose state
#: keeps changing would otherwise be recorded almost every call.
SHORT_LIVED = 8
SHORT_IN_A_ROW = 3
#: Seconds between the ``hot`` events a replaying step publishes (and the calls at which it
#: publishes one anyway, so short runs are seen too).
EVENT_EVERY_S = 1.0
EVENT_AT_CALLS = frozenset((1, 10, 100, 1000, 10_000))
_plan_ids = itertools.count(1)
#: Marks a capture's key that holds which accumulated gradients a call found (see
#: :meth:`HotFunction.__call__`).
_GRADS = object()


def _grads_found(key: tuple) -> str:
    """How the dashboard tells apart the captures of one step that differ in which gradients a
    call finds (see :meth:`HotFunction.__call__`)."""
    if key[0] is not _GRADS:
        return ""
    none = key[2]
    return (" (makes .grad)" if all(none) else " (adds to .grad)" if not any(none)
            else " (adds to some .grad)")  # fmt: skip


def hot(fn: Any = None, *, name: str | None = None) -> Any:
    """Capture ``fn`` as a hot path (usable as ``@gt.hot`` or ``@gt.hot(name="step")``)."""
    if fn is None:
        return lambda f: HotFunction(f, name=name)
    return HotFunction(fn, name=name)


class _Capture:
    """One argument signature of a hot function: recording, then replaying."""

    def __init__(self, owner: HotFunction, name: str) -> None:
        self.owner = owner
        self.name = name  # (the dashboard's: the function's, and which gradients it finds)
        self.conn: Any = None
        self.prev: CallRecord | None = None
        self.prev_canon: list | None = None
        self.tries = 0
        self.given_up: str | None = None
        self.retry_in: int | None = None  # calls left until a step that kept changing tries again
        self.retry_after = RETRY_AFTER
        self.short = 0  # captures in a row dropped after fewer than SHORT_LIVED replays
        self.captured_at = 0  # self.calls when last captured
        self.plan: int | None = None
        self.template: Template | None = None
        self.spec: tuple = ("n",)
        self.results: list[tuple] = []  # (shape, dtype) of each result
        self.n_seeds = 0
        self.seed_slots: list[int] = []
        self.valid = False
        self.guard = -1  # guards.version() when captured
        self.signalled = False  # it ran under a gt.signal (captured while no config placed it)
        self.calls = 0
        self.eager_ns: list[int] = []
        self.hot_ns: list[int] = []
        self._last_call: int | None = None
        self._overhead = 0
        self._next_event = 0.0
        # Gradients (see :func:`gt.hot_calls.grad_effects`): of the last recorded call, its
        # tensors; of the capture, the tensors whose gradient a replay writes over (an input of
        # the step), and those it binds a fresh one to.
        self._holders: dict[int, Any] = {}
        self.over: list[weakref.ref] = []
        self.rebind: list[tuple] = []

    # -- calls -----------------------------------------------------------------------------------
    def __call__(self, conn: Any, args: tuple, kwargs: dict) -> Any:
        t = time.perf_counter_ns()
        if self._last_call is not None:
            interval = t - self._last_call - self._overhead
            (self.hot_ns if self.valid and conn is self.conn else self.eager_ns).append(interval)
            del self.hot_ns[:-256], self.eager_ns[:-256]
        self._last_call, self._overhead = t, 0
        if (self.valid and conn is self.conn and guards.version() == self.guard
                and (not self.signalled or conn.plans_nothing())):  # fmt: skip
            return self._replay(conn, args, kwargs)
        if self.plan is not None:
            self._drop(conn, "a tensor the step relies on was freed" if not self.valid else
                       "Python state it read changed (a learning rate, train/eval)"
                       if guards.version() != self.guard else
                       "a shard config is now in force for its signals")  # fmt: skip
            if self.short >= SHORT_IN_A_ROW:
                self.short = 0
                self.given_up = f"its captures lasted fewer than {SHORT_LIVED} calls"
                self.retry_in, self.retry_after = self.retry_after, min(2 * self.retry_after,
                                                                        RETRY_MAX)  # fmt: skip
                self._event(conn, f"eager: {self.given_up}; recording again in "
                                  f"{self.retry_in} calls", force=True)  # fmt: skip
        if self.given_up is not None:
            if self.retry_in is None or self.retry_in > 0:
                if self.retry_in is not None:
                    self.retry_in -= 1
                return self.owner.fn(*args, **kwargs)
            self.given_up = self.retry_in = None  # (its changes may have ended: record again)
            self.prev = self.prev_canon = None
            self.tries = 0
        return self._eager(conn, args, kwargs)

    def _eager(self, conn: Any, args: tuple, kwargs: dict) -> Any:
        lo = conn.new_id()  # every id made by this call is above it
        rec = CallRecord(lo + 1, tensor_ids(args, kwargs))
        held = [(t, t.id) for t in tensor_args(args, kwargs)]
        conn.record(rec.instrs, rec.freed)
        guards.recording += 1
        guards.written = None
        outer_grads, guards.grads_set = guards.grads_set, []
        try:
            result = self.owner.fn(*args, **kwargs)
        except BaseException:
            conn.record(None, None)
            raise
        finally:
            guards.recording -= 1
            grads_set, guards.grads_set = guards.grads_set, outer_grads
            if outer_grads is not None:
                outer_grads.extend(grads_set)  # (a hot function called by one being recorded)
        t0 = time.perf_counter_ns()
        conn.record(None, rec.freed)  # frees that follow from the call still count
        try:
            if guards.written is not None:
                raise NotCapturable(guards.written)
            if any(t.id != i for t, i in held):
                # (``x.lerp_(...)`` on an argument computes a new value and points ``x`` at it:
                # a replay runs no Python, so the caller's tensor would keep its old value)
                raise NotCapturable("it updates an argument by an op that gives it a new value "
                                    "(lerp_, addcmul_, fill_ with a tensor ...): a replay "
                                    "could not pass that value back")  # fmt: skip
            leaves: list = []
            spec = flatten(result, leaves)
            if self.owner.keep_graphs and any(carries_graph(t) for t in leaves):
                raise NotCapturable("its results carry a gradient graph (backward outside it)")
            for t in leaves:  # results are detached: the step's graph goes now
                t._node = None
            gc.collect()  # and with it what only the graph held
            conn.record(None, None)
            rec.returned = [t.id for t in leaves]
            rec.close()
            self._holders = grad_effects(rec, grads_set)
            self.owner.accumulates([self._holders[i] for i in rec.grad_args])
            self._learn(conn, rec, spec, leaves)
        except NotCapturable as why:
            conn.record(None, None)
            self._give_up(conn, str(why))
        finally:
            self._overhead = time.perf_counter_ns() - t0
        return result

    def _learn(self, conn: Any, rec: CallRecord, spec: tuple, leaves: list) -> None:
        """Compare this call with the last; capture when they are the same step."""
        canon = canonical(rec, self.prev, conn.plans_nothing())
        if self.prev is not None and self.prev_canon is not None and conn is self.conn:
            if same_step(self.prev_canon, canon) and len(rec.args) == len(self.prev.args):
                self.signalled = any(len(ins) > 5 for ins in rec.instrs)
                tpl = build_template(rec, self.prev)
                self._bind_grads(tpl)
                self._capture(conn, tpl, spec, leaves)
                return
            self.tries += 1
            if self.tries >= MAX_TRIES:
                hint = (" (only Python numbers differ: a count or a schedule computed in "
                        "Python? pass the number as a tensor)"
                        if numbers_differ(self.prev_canon, canon) else "")  # fmt: skip
                why = f"its instructions changed in {MAX_TRIES} calls in a row{hint}"
                self.retry_in, self.retry_after = self.retry_after, min(2 * self.retry_after,
                                                                        RETRY_MAX)  # fmt: skip
                raise NotCapturable(f"{why}; recording again in {self.retry_in} calls")
        self.conn, self.prev, self.prev_canon = conn, rec, canon

    def _bind_grads(self, tpl: Template) -> None:
        """Which tensors' gradients a replay reads and writes over, and which it binds anew."""
        held = self._holders
        rebind = []
        for i in tpl.rebound:
            g = held[i]._grad
            rebind.append((weakref.ref(held[i]), g.shape, g.dtype))
        self.over = [weakref.ref(held[i]) for i in tpl.grad_inputs]
        self.rebind, self._holders = rebind, {}

    def _grad_inputs(self) -> list[int] | None:
        """The ids of the gradients this replay writes over (in the template's order), or
        ``None`` when the tensors' gradients are not as when captured (one that a replay reads
        is gone, or one it binds anew is there: the call then runs eagerly, and accumulates)."""
        ids = []
        for ref in self.over:
            h = ref()
            if h is None or h._grad is None:
                return None
            ids.append(h._grad.id)
        for ref, _, _ in self.rebind:
            h = ref()
            if h is None or h._grad is not None:
                return None
        return ids

    def _capture(self, conn: Any, tpl: Template, spec: tuple, leaves: list) -> None:
        self.plan = next(_plan_ids)
        self.template, self.spec = tpl, spec
        self.results = [(t.shape, t.dtype) for t in leaves]
        # One fresh seed per distinct seed of the captured call, shared as the call shared it
        # (a checkpointed block recomputes its dropout with the forward's seed).
        slots: dict = {}
        self.seed_slots = [slots.setdefault(s[3]["seed"], len(slots))
                           for s in tpl.steps if s[3] is not None and "seed" in s[3]]  # fmt: skip
        self.n_seeds = len(slots)
        conn.emit(_HOT_DEFINE, 0, [], tpl.attrs(self.plan, self.name))
        conn.watch([*tpl.kept, *tpl.reads], self._invalidate)
        self.valid, self.prev, self.prev_canon = True, None, None
        self.captured_at = self.calls
        self.guard = guards.version()
        self._event(conn, "replaying", force=True)
        conn.on_close(self._closing)

    def _replay(self, conn: Any, args: tuple, kwargs: dict) -> Any:
        tpl = self.template
        inputs = tensor_ids(args, kwargs)
        if self.over or self.rebind:
            grads = self._grad_inputs()
            if grads is not None and grads:
                inputs = list(dict.fromkeys(inputs + grads))
            if grads is None or len(inputs) != len(tpl.inputs):
                return self.owner.fn(*args, **kwargs)
        outs = [conn.new_id() for _ in tpl.outs]
        fresh = [next_seed() for _ in range(self.n_seeds)]
        seeds = [fresh[k] for k in self.seed_slots]
        conn.emit(_HOT, 0, inputs, {"plan": self.plan, "outs": outs, "seeds": seeds})
        self.calls += 1
        leaves = [Tensor(conn, i, shape, dtype) for i, (shape, dtype) in zip(outs, self.results)]
        for (ref, shape, dtype), i in zip(self.rebind, outs[len(self.results) :]):
            ref()._grad = Tensor(conn, i, shape, dtype)
        if self.calls in EVENT_AT_CALLS or time.monotonic() >= self._next_event:
            self._event(conn, "replaying", force=True)
        return unflatten(self.spec, leaves)

    # -- state -----------------------------------------------------------------------------------
    def _invalidate(self, _tid: int) -> None:
        self.valid = False  # a tensor the step relies on is gone: capture again

    def _drop(self, conn: Any, why: str) -> None:
        if self.calls - self.captured_at < SHORT_LIVED:
            self.short += 1
        else:
            self.short, self.retry_after = 0, RETRY_AFTER  # (it lived: back off from the start)
        if self.conn is conn and not conn.closed:
            conn.emit(_HOT_DEFINE, 0, [], {"plan": self.plan, "steps": None})
            conn.unwatch([*self.template.kept, *self.template.reads], self._invalidate)
            self._event(conn, f"eager: {why}; capturing again", force=True)
        self.plan = self.template = None
        self.valid, self.prev, self.prev_canon, self.tries = False, None, None, 0

    def _closing(self) -> None:
        """The connection closes: say how far the captured step got."""
        if self.valid and self.conn is not None:
            self._event(self.conn, "replaying", force=True)

    def _give_up(self, conn: Any, why: str) -> None:
        self.given_up = why
        self._event(conn, f"eager: {why}", force=True)

    def _event(self, conn: Any, state: str, force: bool = False) -> None:
        if not force and time.monotonic() < self._next_event:
            return
        self._next_event = time.monotonic() + EVENT_EVERY_S
        tpl = self.template
        conn.hot_event({
            "plan": self.plan or 0, "name": self.name, "state": state,
            "steps": len(tpl.steps) if tpl is not None else 0, "calls": self.calls,
            "eager_ns": int(statistics.median(self.eager_ns)) if self.eager_ns else None,
            "hot_ns": int(statistics.median(self.hot_ns)) if self.hot_ns else None,
        })  # fmt: skip


class HotFunction:
    """A function captured as a hot path (see the module). Call it as the function itself.

    Attributes:
        fn: the function.
        name: what the dashboard calls it (default: its qualified name).
        keep_graphs: a call whose results carry a gradient graph not yet backpropagated ends
            the capture and keeps its graph (``gt.compile``; ``gt.hot`` detaches results).
    """

    def __init__(self, fn: Any, *, name: str | None = None, keep_graphs: bool = False) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.keep_graphs = keep_graphs
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self._captures: dict[tuple, _Capture] = {}
        # Tensors whose gradient a recorded call accumulated into: whether each has one when a
        # call begins picks its capture (a loop that accumulates over several calls between
        # optimizer steps runs one capture that makes gradients and one that adds to them).
        self._accumulated: list[weakref.ref] = []

    def accumulates(self, holders: list) -> None:
        """A recorded call read the old gradients of ``holders`` (see
        :func:`gt.hot_calls.grad_effects`)."""
        for h in holders:
            if not any(r() is h for r in self._accumulated):
                self._accumulated.append(weakref.ref(h))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sig = signature(args, kwargs)
        if sig is None:
            return self.fn(*args, **kwargs)
        if self._accumulated:
            sig = (_GRADS, sig, tuple(None if (h := r()) is None else h._grad is None
                                      for r in self._accumulated))  # fmt: skip
        cap = self._captures.get(sig)
        if cap is None:
            if len(self._captures) >= MAX_SIGNATURES:
                return self.fn(*args, **kwargs)
            cap = self._captures[sig] = _Capture(self, self.name + _grads_found(sig))
        return cap(get_connection(), args, kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """Methods: ``@gt.hot`` on a ``def step(self, x)`` binds like the function would."""
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    @property
    def state(self) -> dict:
        """Per argument signature: ``"replaying"``, ``"recording"`` or ``"eager: <why>"``, and
        the replays so far (a signature whose calls find gradients there or not, as a loop that
        accumulates them does, has a capture for each: the best state, and their replays)."""
        out: dict = {}

        def rank(state: str) -> int:
            return 2 if state == "replaying" else state.startswith("eager")

        for key, cap in self._captures.items():
            sig = key[1] if key[0] is _GRADS else key
            state = (
                "replaying"
                if cap.valid
                else f"eager: {cap.given_up}"
                if cap.given_up
                else "recording"
            )
            had = out.get(sig)
            if had is not None:
                if rank(had["state"]) >= rank(state):
                    state = had["state"]
                out[sig] = {"state": state, "calls": had["calls"] + cap.calls}
            else:
                out[sig] = {"state": state, "calls": cap.calls}
        return out
