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
calls capture it again.
"""

from __future__ import annotations

import functools
import gc
import itertools
import statistics
import time
from typing import Any

from gt import autograd as A
from gt import guards
from gt.ops import autocast
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
from gt.tensor import Tensor, TensorBase

_HOT, _HOT_DEFINE = O.OPCODE["hot"], O.OPCODE["hot_define"]
#: Captures kept per function (one per argument signature), and failed tries before giving up.
MAX_SIGNATURES = 8
MAX_TRIES = 4
#: Calls after which a step whose instructions kept changing is recorded again (doubling each
#: time it still changes, up to RETRY_MAX): a warm-up or a run of early changes ends, and the
#: step is the same from then on.
RETRY_AFTER = 32
RETRY_MAX = 4096
#: Seconds between the ``hot`` events a replaying step publishes (and the calls at which it
#: publishes one anyway, so short runs are seen too).
EVENT_EVERY_S = 1.0
EVENT_AT_CALLS = frozenset((1, 10, 100, 1000, 10_000))
_plan_ids = itertools.count(1)


def hot(fn: Any = None, *, name: str | None = None) -> Any:
    """Capture ``fn`` as a hot path (usable as ``@gt.hot`` or ``@gt.hot(name="step")``)."""
    if fn is None:
        return lambda f: HotFunction(f, name=name)
    return HotFunction(fn, name=name)


def _flatten(value: Any, leaves: list) -> Any:
    """The shape of a result with each tensor replaced by its index in ``leaves``.

    Raises:
        NotCapturable: the result holds something other than tensors, ``None`` and containers.
    """
    if isinstance(value, TensorBase):
        leaves.append(value)
        return ("t", len(leaves) - 1)
    if value is None:
        return ("n",)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, dict):
        return ("d", tuple((k, _flatten(v, leaves)) for k, v in value.items()))
    raise NotCapturable(f"it returns a {type(value).__name__} (return tensors, or nothing)")


def _unflatten(spec: tuple, leaves: list) -> Any:
    kind = spec[0]
    if kind == "t":
        return leaves[spec[1]]
    if kind == "n":
        return None
    if kind == "d":
        return {k: _unflatten(v, leaves) for k, v in spec[1]}
    items = [_unflatten(v, leaves) for v in spec[1]]
    return tuple(items) if kind == "tuple" else items


def _signature(args: tuple, kwargs: dict) -> tuple | None:
    """What a capture is for: each argument's shape and dtype, or its value, and which tensor
    arguments are the same tensor; ``None`` when an argument cannot be compared (the call then
    runs eagerly)."""
    sig: list = []
    first: dict[int, int] = {}
    alias: list[int] = []
    for v in (*args, *(kwargs[k] for k in sorted(kwargs))):
        if isinstance(v, TensorBase):
            sig.append(("T", v.shape, v.dtype, v._rg))
            alias.append(first.setdefault(v.id, len(alias)))
        else:
            try:
                hash(v)
            except TypeError:
                return None
            sig.append(("V", type(v).__name__, v))
    # (autocast decides each op's dtype: a step captured outside a region differs inside it)
    amp = (tuple(autocast.REGIONS), tuple(sorted(autocast.BASE.items())))
    return (tuple(sig), tuple(sorted(kwargs)), tuple(alias), A._mode.enabled, amp)


def carries_graph(t: Any) -> bool:
    """Whether tensor ``t`` carries a gradient graph that backward has not yet run through."""
    node = t._node
    return (
        node is not None
        and getattr(node, "saved", None) is not None
        and not getattr(node, "spent", False)
    )


def _tensor_ids(args: tuple, kwargs: dict) -> list[int]:
    """The ids of the tensor arguments, each tensor once, in order (as the template has them)."""
    ids = [v.id for v in (*args, *(kwargs[k] for k in sorted(kwargs))) if isinstance(v, TensorBase)]
    return list(dict.fromkeys(ids))


class _Capture:
    """One argument signature of a hot function: recording, then replaying."""

    def __init__(self, owner: HotFunction) -> None:
        self.owner = owner
        self.conn: Any = None
        self.prev: CallRecord | None = None
        self.prev_canon: list | None = None
        self.tries = 0
        self.given_up: str | None = None
        self.retry_in: int | None = None  # calls left until a step that kept changing tries again
        self.retry_after = RETRY_AFTER
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
        rec = CallRecord(lo + 1, _tensor_ids(args, kwargs))
        held = [(t, t.id) for t in (*args, *kwargs.values()) if isinstance(t, TensorBase)]
        conn.record(rec.instrs, rec.freed)
        guards.recording += 1
        guards.written = None
        try:
            result = self.owner.fn(*args, **kwargs)
        except BaseException:
            conn.record(None, None)
            raise
        finally:
            guards.recording -= 1
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
            spec = _flatten(result, leaves)
            if self.owner.keep_graphs and any(carries_graph(t) for t in leaves):
                raise NotCapturable("its results carry a gradient graph (backward outside it)")
            for t in leaves:  # results are detached: the step's graph goes now
                t._node = None
            gc.collect()  # and with it what only the graph held
            conn.record(None, None)
            rec.returned = [t.id for t in leaves]
            rec.close()
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
            if same_step(self.prev_canon, canon):
                self.signalled = any(len(ins) > 5 for ins in rec.instrs)
                self._capture(conn, build_template(rec, self.prev), spec, leaves)
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
        conn.emit(_HOT_DEFINE, 0, [], tpl.attrs(self.plan, self.owner.name))
        conn.watch([*tpl.kept, *tpl.reads], self._invalidate)
        self.valid, self.prev, self.prev_canon = True, None, None
        self.retry_after = RETRY_AFTER  # (a later run of changes backs off from the start)
        self.guard = guards.version()
        self._event(conn, "replaying", force=True)
        conn.on_close(self._closing)

    def _replay(self, conn: Any, args: tuple, kwargs: dict) -> Any:
        tpl = self.template
        inputs = _tensor_ids(args, kwargs)
        outs = [conn.new_id() for _ in tpl.outs]
        fresh = [next_seed() for _ in range(self.n_seeds)]
        seeds = [fresh[k] for k in self.seed_slots]
        conn.emit(_HOT, 0, inputs, {"plan": self.plan, "outs": outs, "seeds": seeds})
        self.calls += 1
        leaves = [Tensor(conn, i, shape, dtype) for i, (shape, dtype) in zip(outs, self.results)]
        if self.calls in EVENT_AT_CALLS or time.monotonic() >= self._next_event:
            self._event(conn, "replaying", force=True)
        return _unflatten(self.spec, leaves)

    # -- state -----------------------------------------------------------------------------------
    def _invalidate(self, _tid: int) -> None:
        self.valid = False  # a tensor the step relies on is gone: capture again

    def _drop(self, conn: Any, why: str) -> None:
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
            "plan": self.plan or 0, "name": self.owner.name, "state": state,
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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sig = _signature(args, kwargs)
        if sig is None:
            return self.fn(*args, **kwargs)
        cap = self._captures.get(sig)
        if cap is None:
            if len(self._captures) >= MAX_SIGNATURES:
                return self.fn(*args, **kwargs)
            cap = self._captures[sig] = _Capture(self)
        return cap(get_connection(), args, kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """Methods: ``@gt.hot`` on a ``def step(self, x)`` binds like the function would."""
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    @property
    def state(self) -> dict:
        """Per argument signature: ``"replaying"``, ``"recording"`` or ``"eager: <why>"``, and
        the replays so far."""
        out = {}
        for sig, cap in self._captures.items():
            state = (
                "replaying"
                if cap.valid
                else f"eager: {cap.given_up}"
                if cap.given_up
                else "recording"
            )
            out[sig] = {"state": state, "calls": cap.calls}
        return out
