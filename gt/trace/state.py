"""The immutable cluster state that :class:`gt.trace.model.ClusterModel` produces.

Everything here is frozen plain data (dataclasses, named tuples, tuples, str, int, float, None), so
a snapshot can be handed to another thread, drawn, compared in tests or turned into JSON with
:func:`state_to_dict`. ``None`` always means *not available* (drawn as N/A), never zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

COMPUTE = "compute"
COMM = "comm"
WAIT = "wait"  # blocked on a transfer or an input that has not arrived (gt.trace.timeshare)


class Span(NamedTuple):
    """A block of time on a worker's timeline lane.

    ``busy`` is the time actually covered inside ``[t0, t1]`` when the span stands for several
    batches binned together (zoomed out); ``None`` means all of it.
    """

    t0: int
    t1: int
    name: str
    kind: str  # COMPUTE, COMM or WAIT
    busy: int | None = None


class OpStat(NamedTuple):
    """One row of a worker's op histogram (time is estimated where per-op durations are absent)."""

    name: str
    count: int
    time_ns: int


@dataclass(frozen=True)
class MemoryState:
    """A worker's memory pool: the latest sample plus a short history of ``used`` (bytes).

    ``used`` counts each buffer once however many tensors view it; ``cached`` is what the allocator
    keeps free for reuse (``reserved = used + cached``); ``limit`` the worker's memory limit and
    ``capacity`` the device's memory (``None`` where unknown); ``spilled`` what is in the spill
    tier now. The counters (``spill_out`` ... ``oom``) run since the worker started. ``clients``:
    ``(client, used, spilled)`` per client.
    """

    used: int | None = None
    reserved: int | None = None
    limit: int | None = None
    spilled: int | None = None
    tensors: int | None = None
    history: tuple[int, ...] = ()
    cached: int | None = None
    capacity: int | None = None
    client_limit: int | None = None
    peak: int | None = None
    spill_out: int = 0
    spill_in: int = 0
    prefetched: int = 0
    prefetch_hits: int = 0
    prefetch_misses: int = 0
    oom: int = 0
    clients: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class DeviceState:
    """The latest NVML device sample (every field ``None`` where the device has no such counter)."""

    name: str | None = None
    util: float | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    temp: float | None = None
    power: float | None = None


@dataclass(frozen=True)
class WorkerState:
    """One worker as the monitor sees it.

    ``compute``, ``comm``, ``wait`` and ``idle`` are fractions of the model's window (or of the
    part of it since the worker was first seen) and add up to 1; the ``*_ns`` totals count since
    the monitor first saw the worker (see :mod:`gt.trace.timeshare` for the one definition).
    """

    id: int
    device: str | None
    backend: str | None
    host: str | None
    pid: int | None
    alive: bool
    reason: str | None  # why it left, if it did
    current_op: str | None
    current_source: str | None
    compute: float | None
    comm: float | None
    wait: float | None
    idle: float | None
    queue: int | None
    in_flight: int | None
    instr_rate: float | None
    comm_rate: float | None  # bytes/s moved to or from peers
    instructions: int
    batches: int
    errors: int
    hot: int
    ops: tuple[OpStat, ...]
    memory: MemoryState
    device_stats: DeviceState
    compute_ns: int = 0
    comm_ns: int = 0
    wait_ns: int = 0
    seen_ns: int = 0  # time since the monitor first saw the worker (the totals' span)
    sent_bytes: int = 0  # to peers, since the monitor first saw the worker
    received_bytes: int = 0
    via: str | None = None  # how its bytes move to peers ("zmq", "zmq+pinned"), when seen


@dataclass(frozen=True)
class ClientState:
    """One client process."""

    id: int
    host: str | None
    pid: int | None
    argv: tuple[str, ...]
    home: int | None
    alive: bool
    reason: str | None
    ops_rate: float | None
    in_flight: int | None
    queued: int
    errors: int


@dataclass(frozen=True)
class HotPath:
    """A step a client captured with ``gt.hot``, as its latest ``hot`` event says.

    ``eager_ns`` / ``hot_ns``: the program's median time per call before capture and replayed
    (``None`` until measured); ``state`` is ``"replaying"`` or ``"eager: <why>"``.
    """

    client: int
    plan: int
    name: str
    steps: int
    state: str
    calls: int
    eager_ns: int | None
    hot_ns: int | None

    @property
    def speedup(self) -> float | None:
        """How many times faster a call is replayed than it ran eagerly."""
        if not self.eager_ns or not self.hot_ns:
            return None
        return self.eager_ns / self.hot_ns


@dataclass(frozen=True)
class Lane:
    """One worker's timeline lane: spans overlapping the timeline window, sorted by start."""

    worker: int
    alive: bool
    spans: tuple[Span, ...]
    #: the worker's time split as the shares split it: spans whose kind is the part (``busy``:
    #: its time in a bin) over the window, idle the rest: what a cell is drawn as. Empty: the
    #: spans above decide alone.
    parts: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Mark:
    """A user mark (``gt.mark(label)``)."""

    t_ns: int
    label: str
    client: int | None


@dataclass(frozen=True)
class ConfigChange:
    """A shard config applied to the dispatcher."""

    t_ns: int
    before: Any
    after: Any
    by: Any


@dataclass(frozen=True)
class LogEntry:
    """One line of the event log (joins, leaves, errors, config changes, marks, drops)."""

    t_ns: int
    kind: str
    source: str
    text: str


@dataclass(frozen=True)
class Totals:
    """Cluster-wide counters: since the dispatcher started where its snapshot says (instructions,
    batches, bytes moved, errors), else since the monitor attached (events, drops)."""

    events: int = 0
    instructions: int = 0
    batches: int = 0
    transfer_bytes: int = 0
    errors: int = 0
    dropped: int = 0
    bad_events: int = 0
    bad_messages: int = 0  # malformed or hostile messages the dispatcher dropped
    internal_errors: int = 0  # bugs in GT's own code the dispatcher met (logged with tracebacks)


@dataclass(frozen=True)
class ClusterState:
    """An immutable snapshot of the whole cluster at ``now_ns`` (run clock)."""

    now_ns: int
    window_ns: int
    timeline_start_ns: int
    timeline_end_ns: int
    uptime_s: float | None
    workers: tuple[WorkerState, ...] = ()
    clients: tuple[ClientState, ...] = ()
    lanes: tuple[Lane, ...] = ()
    marks: tuple[Mark, ...] = ()
    configs: tuple[ConfigChange, ...] = ()
    log: tuple[LogEntry, ...] = ()
    totals: Totals = Totals()
    drops: tuple[tuple[str, int], ...] = ()
    hot: tuple[HotPath, ...] = ()

    def hot_on(self, wid: int) -> tuple[HotPath, ...]:
        """The hot paths of the clients whose home is worker ``wid`` (where their steps run)."""
        homes = {c.id: c.home for c in self.clients}
        return tuple(h for h in self.hot if homes.get(h.client) == wid)

    def worker(self, wid: int) -> WorkerState | None:
        """The worker with id ``wid``, or ``None``."""
        for w in self.workers:
            if w.id == wid:
                return w
        return None


def empty_state(now_ns: int = 0) -> ClusterState:
    """A state with nothing in it (what a monitor shows before its first event)."""
    return ClusterState(
        now_ns=now_ns, window_ns=0, timeline_start_ns=now_ns, timeline_end_ns=now_ns, uptime_s=None
    )


def state_to_dict(state: ClusterState) -> dict[str, Any]:
    """The state as JSON-ready plain data (named tuples become lists)."""
    return _jsonable(dataclasses.asdict(state))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return str(obj)
