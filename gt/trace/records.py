"""Mutable per-worker and per-client records behind :class:`gt.trace.model.ClusterModel`, the
incremental time bins of the timeline lanes, and small pure helpers (interval union, span merging,
tolerant field coercion)."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from itertools import islice
from typing import Any

from gt.trace.checks import all_durations, all_keys, is_count, is_int, is_num, short
from gt.trace.state import COMM, COMPUTE, WAIT, Span
from gt.trace.timeshare import TimeAccount

SPAN_HISTORY = 4096  # exec batches (and transfers) kept per worker for windows and timelines
MEM_HISTORY = 120


class WorkerRecord:
    """What the model keeps per worker (mutable, bounded)."""

    __slots__ = (
        "wid", "device", "backend", "host", "pid", "alive", "reason", "execs", "xfers",
        "counts", "times", "last_ops", "last_srcs", "last_client", "queue", "instructions",
        "batches", "errors", "hot", "memory", "mem_hist", "device_stats", "in_flight", "snaps",
        "n_xfers", "lane", "parts", "time", "seen", "sent", "received", "via", "running", "base",
        "left",
    )  # fmt: skip

    def __init__(self, wid: int):
        self.wid = wid
        self.device = self.backend = self.host = self.pid = None
        self.alive = True
        self.reason: str | None = None
        # (t0, t1, n, dominant opcode, ops, durs)
        self.execs: deque[tuple] = deque(maxlen=SPAN_HISTORY)
        # (t0, t1, peer, bytes, direction)
        self.xfers: deque[tuple] = deque(maxlen=SPAN_HISTORY)
        self.counts: Counter = Counter()
        self.times: Counter = Counter()
        self.last_ops: list | None = None
        self.last_srcs: list | None = None
        self.last_client: int | None = None
        self.queue: int | None = None
        self.instructions = self.batches = self.errors = self.hot = 0
        self.memory: tuple | None = None  # (used, reserved, limit, spilled, tensors)
        self.mem_hist: deque[int] = deque(maxlen=MEM_HISTORY)
        self.device_stats: dict | None = None
        self.in_flight: int | None = None
        self.snaps: deque[tuple[int, int]] = deque(maxlen=2)  # (t_ns, instructions) from stats
        self.n_xfers = 0  # transfers ever appended (execs: ``batches``)
        self.lane: tuple[LaneBins, LaneBins] | None = None  # (compute, comm) bins for the timeline
        self.parts: PartBins | None = None  # the time account per bin, for the timeline's cells
        self.time = TimeAccount()  # compute / comm / wait, one definition (gt.trace.timeshare)
        self.seen: int | None = None  # when the model first heard of this worker (run clock)
        self.sent = self.received = 0  # bytes to and from peers and clients
        self.via: str | None = None  # how the last of them moved ("zmq", "zmq+pinned")
        # A batch still running, from its busy events: (t0, opcode, client, src), until its
        # exec event ends it.
        self.running: tuple | None = None
        # What the dispatcher's snapshots counted for this worker beyond our events (it ran
        # before we attached): [instructions, batches].
        self.base = [0, 0]
        self.left: int | None = None  # when it left or died (run clock)


class LaneBins:
    """Spans binned by start time at one resolution, filled incrementally.

    A lane zoomed out over seconds holds thousands of batches; binning them once (each new record
    is added to the bin of its start time) keeps each state's work to the bins in its window.
    """

    __slots__ = ("res", "seen", "bins", "longest")

    def __init__(self, res: int):
        self.res = max(1, res)
        self.seen = 0  # records added so far (compared with the record's running count)
        self.bins: dict[int, list] = {}  # bin -> [t0, t1, busy, {key: time}, cached Span]
        self.longest = 0

    def add(self, t0: int, t1: int, key: Any) -> None:
        """Add one record (its whole duration counts as busy, credited to ``key``)."""
        busy = max(0, t1 - t0)
        if busy > self.longest:
            self.longest = busy
        k = t0 // self.res
        b = self.bins.get(k)
        if b is None:
            self.bins[k] = [t0, t1, busy, {key: busy}, None]
            return
        if t0 < b[0]:
            b[0] = t0
        if t1 > b[1]:
            b[1] = t1
        b[2] += busy
        names = b[3]
        names[key] = names.get(key, 0) + busy
        b[4] = None

    def spans(self, start: int, end: int, kind: str, name: Callable[[Any], str]) -> list[Span]:
        """One span per bin overlapping ``[start, end]``, named by the key with the most time."""
        out = []
        get = self.bins.get
        for k in range((start - self.longest) // self.res, end // self.res + 1):
            b = get(k)
            if b is None or b[1] < start:
                continue
            if b[4] is None:
                names = b[3]
                top = max(names, key=names.__getitem__)
                b[4] = Span(b[0], b[1], name(top), kind, min(b[2], b[1] - b[0]))
            out.append(b[4])
        return out

    def prune(self, before: int) -> None:
        """Forget bins that start before ``before`` (their records left the history)."""
        cut = before // self.res
        for k in [k for k in self.bins if k < cut]:
            del self.bins[k]


class PartBins:
    """A worker's time segments (:class:`~gt.trace.timeshare.TimeAccount`) summed per bin of one
    resolution, filled incrementally: the timeline draws each cell as the shares split its time,
    at a cost per bin, not per segment (a busy worker adds thousands a second)."""

    __slots__ = ("res", "seen", "last", "bins")

    def __init__(self, res: int):
        self.res = max(1, res)
        self.seen = 0  # the account's ``added`` when last updated
        self.last: tuple[int, int, str] | None = None  # the newest segment, as it was counted
        self.bins: dict[int, dict[str, int]] = {}  # bin -> part -> ns

    def _add(self, t0: int, t1: int, part: str, sign: int = 1) -> None:
        k = t0 // self.res
        while t0 < t1:
            edge = min(t1, (k + 1) * self.res)
            b = self.bins.setdefault(k, {})
            b[part] = b.get(part, 0) + sign * (edge - t0)
            t0, k = edge, k + 1

    def update(self, acc: TimeAccount) -> None:
        """Count the segments added since the last update (and the growth of the newest)."""
        segs = acc.segments
        if not segs:
            return
        new = acc.added - self.seen
        if self.last is not None and new < len(segs):  # the newest may have grown in place
            self._add(*self.last, sign=-1)
            new += 1
        elif self.last is None:
            new = len(segs)  # (an account restored from a keyframe: all of it is new here)
        for seg in islice(segs, max(0, len(segs) - new), None):
            self._add(*seg)
        self.seen, self.last = acc.added, segs[-1]
        if len(self.bins) > 4 * len(segs) + 64:  # forget bins older than the account's history
            cut = segs[0][0] // self.res
            for k in [k for k in self.bins if k < cut]:
                del self.bins[k]

    def spans(self, start: int, end: int) -> list[Span]:
        """Per bin overlapping ``[start, end]``, a span per part, ``busy`` its time in the bin."""
        out = []
        get = self.bins.get
        for k in range(start // self.res, end // self.res + 1):
            b = get(k)
            if b:
                t0 = k * self.res
                out += [Span(t0, t0 + self.res, "", part, ns) for part, ns in b.items() if ns > 0]
        return out


class ClientRecord:
    """What the model keeps per client (mutable, bounded)."""

    __slots__ = (
        "cno", "host", "pid", "argv", "home", "alive", "reason", "queued", "rate",
        "last_batch", "done_batch", "errors", "snap_in_flight",
    )  # fmt: skip

    def __init__(self, cno: int):
        self.cno = cno
        self.host = self.pid = self.home = None
        self.argv: tuple[str, ...] = ()
        self.alive = True
        self.reason: str | None = None
        self.queued = 0
        self.rate: deque[tuple[int, int]] = deque(maxlen=SPAN_HISTORY)  # (t, n) per queued batch
        self.last_batch: int | None = None
        self.done_batch: int | None = None
        self.errors = 0
        self.snap_in_flight: int | None = None


def as_text(v: Any, limit: int = 200) -> str | None:
    """A free-form field as a short string (``None`` stays ``None``)."""
    if v is None or type(v) is str:
        return v if v is None or len(v) <= limit else v[:limit]
    return short(v, limit)


def span_times(f: dict, t: int) -> tuple[int, int]:
    """An ``exec`` or ``transfer`` event's ``(t0, t1)``, the event's time where absent.

    Raises:
        TypeError: a time that is not an integer (the event is bad; nothing was changed).
    """
    t0, t1 = f.get("t0"), f.get("t1")
    t0, t1 = t if t0 is None else t0, t if t1 is None else t1
    if not (is_int(t0) and is_int(t1)):
        raise TypeError("t0 or t1")
    return t0, max(t0, t1)


def exec_columns(f: dict) -> tuple[list, list, int, list | None]:
    """An ``exec`` event's ``(ops, durs, n, srcs)``: opcodes, per-instruction durations (empty
    when absent or not durations), instruction count and source-line ids (``None`` when absent or
    not ids).

    Raises:
        TypeError: ``ops`` is not a list of opcodes.
    """
    ops = f.get("ops") or []
    durs = f.get("durs") or []
    srcs = f.get("srcs")
    n = f.get("n")
    n = n if is_count(n) else None
    if type(ops) is list and type(durs) is list and type(srcs) is list:
        # What workers send: three columns of small non-negative integers, checked together at
        # C speed (replaying a long trace folds millions of these).
        cols = ops + durs + srcs
        if not cols or (set(map(type, cols)) == _INT and min(cols) >= 0 and max(cols) < _I64_TOP):
            return ops, durs, len(ops) if n is None else n, srcs
    if not isinstance(ops, (list, tuple)) or not all_keys(ops):
        raise TypeError("ops")
    if not isinstance(durs, (list, tuple)) or not all_durations(durs):
        durs = []
    return list(ops), list(durs), len(ops) if n is None else n, key_list(srcs)


_INT = {int}
_I64_TOP = 1 << 63


def key_list(v: Any) -> list | None:
    """A column of ids (``srcs``, say) as a list, or ``None`` when it is not one."""
    return list(v) if isinstance(v, (list, tuple)) and all_keys(v) else None


def set_facts(w: WorkerRecord, info: dict) -> None:
    """Take a worker's device, backend, host and pid from an event or a snapshot (if typed)."""
    for k in ("device", "backend", "host"):
        if type(info.get(k)) is str:
            setattr(w, k, info[k][:200])
    if is_int(info.get("pid")):
        w.pid = info["pid"]


def as_int(v: Any) -> int | None:
    return v if is_int(v) else None


def as_num(v: Any) -> float | None:
    return float(v) if is_num(v) else None


def as_count(v: Any) -> int:
    """An ``errors`` field may be a count or a list of errors."""
    if is_count(v):
        return v
    return len(v) if isinstance(v, (list, tuple, dict)) else 0


def union_length(intervals: list[tuple[int, int]]) -> int:
    """Total length covered by possibly overlapping ``(t0, t1)`` intervals."""
    total, cur0, cur1 = 0, None, None
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if cur1 is None or a > cur1:
            if cur1 is not None:
                total += cur1 - cur0
            cur0, cur1 = a, b
        elif b > cur1:
            cur1 = b
    if cur1 is not None:
        total += cur1 - cur0
    return total


def merge_spans(spans: list[Span], gap: int) -> list[Span]:
    """Merge consecutive spans of the same name that are at most ``gap`` apart."""
    out: list[Span] = []
    for s in spans:
        if out:
            p = out[-1]
            if p.name == s.name and s.t0 - p.t1 <= gap:
                out[-1] = Span(p.t0, max(p.t1, s.t1), p.name, p.kind)
                continue
        out.append(s)
    return out


# ---------------------------------------------------------------------- timeline lanes
EXPAND_LIMIT = 400  # show single instructions when a lane's window holds at most this many
LANE_RESOLUTION = 600  # zoomed out, a lane is binned into this many bins over its window


def lane_spans(
    w: WorkerRecord, start: int, end: int, width_ns: int, op_name: Callable[[Any], str]
) -> list[Span]:
    """A worker's timeline spans over ``[start, end]``, sorted by start.

    Zoomed in (at most :data:`EXPAND_LIMIT` instructions in the window) every instruction is a
    span; zoomed out, batches are binned (:class:`LaneBins`) so the cost stays per bin, not per batch.
    """
    spans = _expanded(w, start, end, op_name)
    if spans is not None:
        return spans
    res = max(1, width_ns // LANE_RESOLUTION)
    if w.lane is None or w.lane[0].res != res:
        w.lane = (LaneBins(res), LaneBins(res))
    comp, comm = w.lane
    _fill(comp, w.execs, w.batches, lambda r: (r[0], r[1], r[3]))
    _fill(comm, w.xfers, w.n_xfers, lambda r: (r[0], r[1], (r[4], r[2])))
    spans = comp.spans(start, end, COMPUTE, lambda top: _exec_name(top, op_name))
    spans += [s._replace(kind=WAIT) if s.name.startswith(("wait", "spill", "unspill")) else s
              for s in comm.spans(start, end, COMM, _xfer_name)]  # fmt: skip
    spans.sort(key=lambda s: s.t0)
    return spans


def _exec_name(top: Any, op_name: Callable[[Any], str]) -> str:
    return op_name(top) if top is not None else "batch"


def _expanded(
    w: WorkerRecord, start: int, end: int, op_name: Callable[[Any], str]
) -> list[Span] | None:
    """Per-instruction spans, or ``None`` when the window holds more than ``EXPAND_LIMIT``."""
    recs, count = [], 0
    for rec in reversed(w.execs):
        if rec[1] < start:
            break
        if rec[0] <= end:
            count += len(rec[5]) or 1
            if count > EXPAND_LIMIT:
                return None
            recs.append(rec)
    xfers = []
    for x in reversed(w.xfers):
        if x[1] < start:
            break
        if x[0] <= end:
            xfers.append(x)
            if len(xfers) > EXPAND_LIMIT:
                return None
    spans: list[Span] = []
    for t0, t1, _n, top, ops, durs in reversed(recs):
        if durs:
            t = t0
            for o, d in zip(ops, durs):
                spans.append(Span(t, t + d, op_name(o), COMPUTE))
                t += d
        else:
            spans.append(Span(t0, t1, _exec_name(top, op_name), COMPUTE))
    spans = merge_spans(spans, 0)
    spans += [Span(x[0], x[1], _xfer_name((x[4], x[2])),
                   WAIT if x[4] in ("wait", "spill", "unspill") else COMM)
              for x in reversed(xfers)]  # fmt: skip
    spans.sort(key=lambda s: s.t0)
    return spans


def _fill(bins: LaneBins, records: deque, total: int, key: Callable[[tuple], tuple]) -> None:
    """Add the records appended since the bins last looked (at most the whole history)."""
    new = min(total - bins.seen, len(records))
    if new > 0:
        for i in range(len(records) - new, len(records)):
            t0, t1, k = key(records[i])
            bins.add(t0, t1, k)
        if len(bins.bins) > 2 * len(records) + 64:
            bins.prune(records[0][0])
    bins.seen = total


def _xfer_name(key: tuple) -> str:
    direction, peer = key
    if direction in ("spill", "unspill"):  # the memory pool, to or from its spill tier
        return direction
    if direction == "wait":
        return f"wait w{peer}" if peer is not None else "wait"
    arrow = "→" if direction == "send" else "←"
    return f"{arrow}w{peer}" if peer is not None else "xfer"


def who(tenant: object, host: object) -> str | None:
    """Where a client runs, as the clients table shows it: ``alice@host`` when it holds tenant
    alice's own key (``gt keys tenant``), else the host."""
    host = as_text(host)
    tenant = as_text(tenant, 32)
    return f"{tenant}@{host or '?'}" if tenant else host
