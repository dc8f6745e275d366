"""The cluster model: a pure fold of instrumentation events into an immutable cluster state.

Events go in (:meth:`ClusterModel.apply_batch`, one call per published batch, and
:meth:`ClusterModel.apply_snapshot` for the control endpoint's ``stats`` answer); a frozen
:class:`~gt.trace.state.ClusterState` comes out of :meth:`ClusterModel.state`. No sockets, no
threads, no clock: the caller says what time it is, so the same events always give the same state.

Applying is the hot path (tens of thousands of events per second), so it only appends references
to bounded deques and bumps counters; the work of windows, shares and timeline lanes happens in
:meth:`~ClusterModel.state`, which a monitor calls a few times per second.

Op names: ``exec`` events carry opcodes. ``gt.trace`` never imports ``gt.runtime``, so the caller
passes ``op_names`` (the TUI passes ``gt.runtime.protocol.OPS``); without it opcodes show as
``op12``. An op that already arrives as a string is shown as is.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import eq
from typing import Any

from gt.trace import events as E
from gt.trace.checks import is_int
from gt.trace.records import (
    LANE_RESOLUTION,
    ClientRecord,
    PartBins,
    WorkerRecord,
    as_count,
    as_int,
    as_num,
    as_text,
    exec_columns,
    lane_spans,
    set_facts,
    span_times,
    who,
)
from gt.trace.state import (
    ClusterState,
    ConfigChange,
    HotPath,
    Lane,
    LogEntry,
    Mark,
    Span,
    Totals,
)
from gt.trace.timeshare import BACKGROUND, MEMORY_TRAFFIC
from gt.trace.views import client_state, worker_state

WINDOW_NS = 2_000_000_000
TIMELINE_NS = 10_000_000_000
LOG_SIZE = 1000


class ClusterModel:
    """Folds event batches and control snapshots into cluster state.

    Args:
        op_names: opcode -> op name (pass ``gt.runtime.protocol.OPS``); ``None`` shows ``opN``.
        window_ns: the sliding window for shares and rates.
        count_gaps: count sequence gaps as drops (off for recordings, whose recorder already
            wrote a ``drop`` event for every gap it saw).
    """

    def __init__(self, op_names: Sequence[str] | None = None, *, window_ns: int = WINDOW_NS,
                 count_gaps: bool = True):  # fmt: skip
        self.op_names = tuple(op_names or ())
        self.window_ns = window_ns
        self.count_gaps = count_gaps
        self.workers: dict[int, WorkerRecord] = {}
        self.clients: dict[int, ClientRecord] = {}
        self.srclocs: dict[tuple[Any, int], str] = {}
        self.next_seq: dict[str, int] = {}
        self.drops: Counter = Counter()
        self.marks: deque[Mark] = deque(maxlen=256)
        self.configs: deque[ConfigChange] = deque(maxlen=64)
        self.hot: dict[tuple[int, int], HotPath] = {}  # (client, plan) -> latest
        self.log: deque[LogEntry] = deque(maxlen=LOG_SIZE)
        self.counters: dict[str, dict] = {}
        self.events = self.instructions = self.batches = 0
        self.transfer_bytes = self.errors = self.bad_events = 0
        self.t_first: int | None = None
        self.t_last: int | None = None
        self.uptime: tuple[float, int] | None = None  # (uptime_s, at t_ns) from a snapshot
        self.snapshots = 0
        self._now: int | None = None  # the time of the event being applied
        self._undated_attach: str | None = None  # logged at the first event's time
        # What the dispatcher counted before we attached (from its snapshots), so totals are
        # since it started, not since this monitor did.
        self.base: dict[str, int] = {}
        self._handlers = {
            E.EXEC: self._exec, E.TRANSFER: self._transfer, E.QUEUED: self._queued,
            E.MEMORY: self._memory, E.DEVICE: self._device, E.SRCLOC: self._srcloc,
            E.WORKER_JOINED: self._worker_joined, E.WORKER_LEFT: self._worker_left,
            E.CLIENT_JOINED: self._client_joined, E.CLIENT_LEFT: self._client_left,
            E.ERROR: self._error, E.MARK: self._mark, E.CONFIG: self._config, E.DROP: self._drop,
            E.HOT: self._hot, E.BUSY: self._busy,
        }  # fmt: skip

    # ------------------------------------------------------------------ applying
    def apply_batch(self, source: str, first_seq: int, events: Iterable[list]) -> None:
        """Fold one event batch from ``source``; a gap in its sequence numbers counts as drops.

        A batch whose ``first_seq`` is lower than expected means the source restarted (or the
        monitor re-attached); it is applied and the sequence restarts from it, with no drops counted.
        """
        events = events if isinstance(events, list) else list(events)
        expected = self.next_seq.get(source)
        if expected is not None and first_seq > expected and self.count_gaps:
            missing = first_seq - expected
            self.drops[source] += missing
            t = events[0][1] if events else (self.t_last or 0)
            self.log.append(LogEntry(t, E.DROP, source, f"lost {missing} event(s) from {source}"))
        self.next_seq[source] = first_seq + len(events)
        handlers = self._handlers
        for ev in events:
            try:
                kind, t, f = ev
                if type(t) is not int:  # checked before anything changes: no half-folded event
                    raise TypeError("event time")
                if self.t_first is None:
                    self.t_first = t
                    if self._undated_attach is not None:
                        self.log.append(LogEntry(t, "attach", "snapshot", self._undated_attach))
                        self._undated_attach = None
                if self.t_last is None or t > self.t_last:
                    self.t_last = t
                self._now = t
                h = handlers.get(kind)
                if h is not None:
                    h(t, f, source)
                elif kind == E.STATS and isinstance(f.get("counters") or {}, dict):
                    self.counters[source] = f.get("counters") or {}
            except Exception:  # an event of the right shape with fields that make no sense
                self.bad_events += 1
        self.events += len(events)

    def apply_events(self, events: Iterable[list], source: str = "local") -> None:
        """Fold events that carry no sequence numbers (tests, fixtures)."""
        events = list(events)
        self.apply_batch(source, self.next_seq.get(source, 0), events)

    def _worker(self, wid: Any) -> WorkerRecord:
        w = self.workers.get(wid)
        if w is None:
            if not is_int(wid):
                raise TypeError("worker id")
            w = self.workers[wid] = WorkerRecord(wid)
            w.seen = self._now
        elif w.seen is None:  # (named by a recording's header or summary before any event)
            w.seen = self._now
        return w

    def _client(self, cno: Any) -> ClientRecord:
        c = self.clients.get(cno)
        if c is None:
            if not is_int(cno):
                raise TypeError("client id")
            c = self.clients[cno] = ClientRecord(cno)
        return c

    def _exec(self, t: int, f: dict, source: str) -> None:
        t0, t1 = span_times(f, t)  # every field is checked before the worker changes
        ops, durs, n, srcs = exec_columns(f)
        w = self._worker(f["worker"])
        if durs and len(durs) == len(ops):
            times, counts = w.times, w.counts
            if len(set(ops)) == len(ops):  # the usual batch: no op twice, so no per-op sums
                for o, d in zip(ops, durs):  # plain item updates: Counter.update is 10x slower
                    times[o] += d
                    counts[o] += 1
                top = ops[durs.index(max(durs))]
            else:
                per = _time_by_op(ops, durs)
                for o, d in per.items():
                    times[o] += d
                    counts[o] += per.count[o]
                top = max(per, key=per.__getitem__)
        elif ops:
            c = Counter(ops)
            w.counts.update(c)
            share = (t1 - t0) / len(ops)
            for o, k in c.items():  # no per-op durations: split the batch time by count
                w.times[o] += int(share * k)
            top = max(c, key=c.__getitem__)
            durs = ()
        else:
            top = None
        # Kept as tuples: a tuple of ints leaves the cyclic GC's books at its first collection,
        # where 4,096 kept lists of up to 512 ints each made every full collection walk millions
        # of references (70-180 ms with the GIL held: the screen froze that long).
        w.execs.append((t0, t1, n, top, tuple(ops), tuple(durs)))
        w.time.batch(t0, t1)
        if w.running is not None and t1 >= w.running[0]:  # the long batch ended (or a slice)
            w.running = None
        cno = as_int(f.get("client"))
        if ops:  # a batch of frees only leaves the current op as it was
            w.last_ops, w.last_srcs, w.last_client = ops, srcs, cno
        q = as_int(f.get("queue"))
        if q is not None:
            w.queue = q
        w.instructions += n
        last = not f.get("more")  # (a slice of a batch that goes on says more=True)
        w.batches += last
        w.errors += as_count(f.get("errors"))
        hot = f.get("hot")
        if hot:  # captured steps replayed (older traces: True for a hot batch)
            w.hot += as_count(hot) if type(hot) is int else 1
        self.instructions += n
        self.batches += last
        batch = f.get("batch")
        c = self.clients.get(cno)
        if (
            last
            and c is not None
            and is_int(batch)
            and (c.done_batch is None or batch > c.done_batch)
        ):
            c.done_batch = batch

    def _busy(self, t: int, f: dict, source: str) -> None:
        t0 = as_int(f.get("t0"))
        if t0 is None or t0 > t:
            raise TypeError("t0")
        w = self._worker(f["worker"])
        if w.time.last is not None and t0 < w.time.last:  # (its exec event came first)
            return
        w.running = (t0, as_int(f.get("op")), as_int(f.get("client")), as_int(f.get("src")))

    def _transfer(self, t: int, f: dict, source: str) -> None:
        t0, t1 = span_times(f, t)
        peer, direction = f.get("peer"), f.get("direction")
        if not (peer is None or is_int(peer)) or not (direction is None or type(direction) is str):
            raise TypeError("peer or direction")
        w = self._worker(f["worker"])
        nbytes = max(0, as_int(f.get("bytes")) or 0)
        if direction in MEMORY_TRAFFIC:  # the spill tier: not bytes between processes
            if direction in BACKGROUND:  # a prefetch overlaps compute: no part of the worker's time
                return
            w.xfers.append((t0, t1, None, nbytes, direction))
            w.n_xfers += 1
            w.time.transfer(t0, t1, True)
            return
        w.xfers.append((t0, t1, peer, nbytes, direction))
        w.n_xfers += 1
        w.time.transfer(t0, t1, direction == "wait")
        if direction in ("send", "to_client"):
            w.sent += nbytes
        elif direction in ("recv", "from_client"):
            w.received += nbytes
        if direction in ("send", "recv") and type(f.get("via")) is str:
            w.via = f["via"][:20]
        self.transfer_bytes += nbytes

    def _queued(self, t: int, f: dict, source: str) -> None:
        c = self._client(f["client"])
        n = max(0, as_int(f.get("n")) or 0)
        c.queued += n
        c.rate.append((t, n))
        b = f.get("batch")
        if is_int(b):
            c.last_batch = b

    def _memory(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        used = as_int(f.get("used"))
        w.memory = (
            used,
            as_int(f.get("reserved")),
            as_int(f.get("limit")),
            as_int(f.get("spilled")),
            as_int(f.get("tensors")),
            _memory_extras(f),
        )
        if used is not None:
            w.mem_hist.append(used)

    def _device(self, t: int, f: dict, source: str) -> None:
        self._worker(f["worker"]).device_stats = f

    def _srcloc(self, t: int, f: dict, source: str) -> None:
        cno, locs = f.get("client"), f.get("locs") or {}
        if not (cno is None or is_int(cno)) or not isinstance(locs, dict):
            raise TypeError("client or locs")
        for k, v in locs.items():
            if is_int(i := int(k)):
                self.srclocs[(cno, i)] = as_text(v, 500)

    def _worker_joined(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        set_facts(w, f)
        w.alive, w.reason, w.left = True, None, None
        where = f"{w.device or '?'} on {w.host or '?'}, pid {w.pid if w.pid is not None else '?'}"
        self.log.append(LogEntry(t, E.WORKER_JOINED, source, f"worker {w.wid} joined ({where})"))

    def _worker_left(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        w.alive, w.reason, w.left = False, as_text(f.get("reason")), t
        w.running = None
        if w.memory is not None:  # (what it held is gone with it)
            w.memory = (0, 0, w.memory[2], 0, 0, {})
            w.mem_hist.append(0)
        self.log.append(
            LogEntry(t, E.WORKER_LEFT, source, f"worker {w.wid} left: {w.reason or 'unknown'}")
        )

    def _client_joined(self, t: int, f: dict, source: str) -> None:
        c = self._client(f["client"])
        c.host = who(f.get("tenant"), f.get("host"))
        c.pid, c.home = as_int(f.get("pid")), as_int(f.get("home"))
        argv = f.get("argv")
        c.argv = tuple(as_text(a) or "" for a in argv) if isinstance(argv, (list, tuple)) else ()
        c.alive, c.reason = True, None
        script = " ".join(c.argv[:2]) or "?"
        self.log.append(
            LogEntry(
                t,
                E.CLIENT_JOINED,
                source,
                f"client {c.cno} joined: {script} (pid {c.pid}, {c.host})",
            )
        )

    def _client_left(self, t: int, f: dict, source: str) -> None:
        c = self._client(f["client"])
        c.alive, c.reason = False, as_text(f.get("reason"))
        self.log.append(
            LogEntry(t, E.CLIENT_LEFT, source, f"client {c.cno} left: {c.reason or 'unknown'}")
        )

    def _error(self, t: int, f: dict, source: str) -> None:
        cno = f.get("client")
        where = f.get("source")
        if type(where) is int:
            where = self.srclocs.get((cno, where), f"src#{where}")
        c = self.clients.get(cno)
        if c is not None:
            c.errors += 1
        self.errors += 1
        op = f.get("op")
        op = self.op_name(op) if type(op) is int else as_text(op)
        text = f"{op + ': ' if op else ''}{as_text(f.get('message'), 500) or 'error'}"
        if where:
            text += f"  at {where}"
        wid = f.get("worker")
        who = f"client {cno}" if cno is not None else source
        if wid is not None:
            who += f" on worker {wid}"
        self.log.append(LogEntry(t, E.ERROR, source, f"{who}: {text}"))

    def _mark(self, t: int, f: dict, source: str) -> None:
        label = as_text(f.get("label", ""), 500) or ""
        self.marks.append(Mark(t, label, as_int(f.get("client"))))
        self.log.append(LogEntry(t, E.MARK, source, f"mark {label!r}"))

    def _hot(self, t: int, f: dict, source: str) -> None:
        cno, plan = as_int(f.get("client")), as_int(f.get("plan"))
        if cno is None or plan is None:
            raise TypeError("client or plan")
        h = HotPath(cno, plan, as_text(f.get("name"), 80) or "?", as_count(f.get("steps")),
                    as_text(f.get("state"), 200) or "?", as_count(f.get("calls")),
                    as_int(f.get("eager_ns")), as_int(f.get("hot_ns")))  # fmt: skip
        old = self.hot.get((cno, plan))
        if old is None or old.state != h.state:
            what = (f"captured {h.name} ({h.steps} instructions a call)"
                    if h.state == "replaying" else f"{h.name} runs {h.state}")  # fmt: skip
            self.log.append(LogEntry(t, E.HOT, source, f"client {cno}: {what}"))
        self.hot[(cno, plan)] = h
        if len(self.hot) > 256:  # bounded: the oldest go
            del self.hot[next(iter(self.hot))]

    def _config(self, t: int, f: dict, source: str) -> None:
        by = as_text(f.get("by"))
        self.configs.append(ConfigChange(t, f.get("before"), f.get("after"), by))
        self.log.append(LogEntry(t, E.CONFIG, source, f"config applied by {f.get('by') or '?'}"))

    def _drop(self, t: int, f: dict, source: str) -> None:
        missing = max(0, as_int(f.get("missing")) or 0)
        src = as_text(f.get("source") or source) or source
        self.drops[src] += missing
        self.log.append(LogEntry(t, E.DROP, src, f"lost {missing} event(s) from {src}"))

    def apply_snapshot(self, snap: dict, t_ns: int | None = None) -> None:
        """Fold the control endpoint's ``stats`` or ``snapshot`` answer (workers, clients, source lines).

        ``t_ns`` is when it was taken on the run clock (default: its ``clock`` field, else the
        newest event time).
        """
        if t_ns is None:
            t_ns = snap["clock"] if type(snap.get("clock")) is int else self.t_last
        undated = t_ns is None  # a recording's header, before any event: date it by the first
        t = t_ns or 0
        if as_num(snap.get("uptime")) is not None:
            self.uptime = (float(snap["uptime"]), t)
        self._rebase(snap)
        for info in snap.get("workers") or ():
            if not isinstance(info, dict) or not is_int(info.get("id")):
                continue
            w = self._worker(info["id"])
            set_facts(w, info)
            if "alive" in info:
                w.alive = bool(info["alive"])
                if not w.alive and info.get("reason") is not None:
                    w.reason = as_text(info["reason"])
            w.in_flight = as_int(info.get("in_flight"))
            instr = as_int(info.get("instructions"))
            if instr is not None:
                w.snaps.append((t, instr))
                w.base[0] = max(w.base[0], instr - w.instructions)
            batches = as_int(info.get("batches"))
            if batches is not None:
                w.base[1] = max(w.base[1], batches - w.batches)
            stats = info.get("stats") if isinstance(info.get("stats"), dict) else {}
            if not w.alive:  # (what a dead worker held is gone with it)
                if w.memory is not None:
                    w.memory = (0, 0, w.memory[2], 0, 0, {})
            elif w.memory is None and as_int(stats.get("bytes")) is not None:
                w.memory = (stats["bytes"], None, None, None, as_int(stats.get("tensors")))
        for info in snap.get("clients") or ():
            if not isinstance(info, dict) or not is_int(info.get("id")):
                continue
            c = self._client(info["id"])
            c.host = who(info.get("tenant"), info.get("host", c.host))
            c.pid = as_int(info.get("pid")) if info.get("pid") is not None else c.pid
            c.home = as_int(info.get("home")) if info.get("home") is not None else c.home
            if isinstance(info.get("argv"), (list, tuple)):
                c.argv = tuple(as_text(a) or "" for a in info["argv"])
            c.snap_in_flight = (as_int(info.get("in_flight")) or 0) + (
                as_int(info.get("queued")) or 0
            )
            c.errors = max(c.errors, as_int(info.get("errors")) or 0)
            if info.get("broken"):
                c.reason = as_text(info["broken"])
        srclocs = snap.get("srclocs")
        if isinstance(srclocs, dict):
            for cno, locs in srclocs.items():
                if isinstance(locs, dict):
                    self._srcloc(t, {"client": int(cno), "locs": locs}, "snapshot")
        if not self.snapshots:
            n_w, n_c = len(snap.get("workers") or ()), len(snap.get("clients") or ())
            text = f"attached: {n_w} worker(s), {n_c} client(s)"
            if undated:
                self._undated_attach = text
            else:
                self.log.append(LogEntry(t, "attach", "snapshot", text))
        self.snapshots += 1

    def _rebase(self, snap: dict) -> None:
        """Totals since the dispatcher started: what its snapshot counted beyond our events."""
        workers = [w for w in snap.get("workers") or () if isinstance(w, dict)]
        counted = {
            "instructions": (self.instructions, sum(as_int(w.get("instructions")) or 0 for w in workers)),
            "batches": (self.batches, sum(as_int(w.get("batches")) or 0 for w in workers)),
            "transfer_bytes": (self.transfer_bytes, sum(  # (every end of a move, as _transfer)
                as_int((w.get("stats") or {}).get(k)) or 0
                for w in workers for k in ("sent", "received", "client_bytes"))),
            "errors": (self.errors, sum(as_int(c.get("errors")) or 0
                                        for c in snap.get("clients") or () if isinstance(c, dict))),
        }  # fmt: skip
        for key, (seen, total) in counted.items():
            self.base[key] = max(self.base.get(key, 0), total - seen)

    # ------------------------------------------------------------------ reading
    def op_name(self, op: Any) -> str:
        """The display name of an opcode."""
        if type(op) is int:
            return self.op_names[op] if 0 <= op < len(self.op_names) else f"op{op}"
        return str(op)

    def state(
        self,
        now_ns: int | None = None,
        *,
        timeline_ns: int = TIMELINE_NS,
        timeline_end_ns: int | None = None,
    ) -> ClusterState:
        """The cluster as of ``now_ns`` (default: the newest event time).

        Args:
            now_ns: the run clock's current time; shares and rates use ``[now - window, now]``.
            timeline_ns: the width of the timeline window.
            timeline_end_ns: the timeline's right edge (default ``now_ns``; set it to pause).
        """
        now = now_ns if now_ns is not None else (self.t_last or 0)
        end = timeline_end_ns if timeline_end_ns is not None else now
        start = end - timeline_ns
        workers = tuple(worker_state(self, w, now) for _, w in sorted(self.workers.items()))
        # (a client whose batch a worker is inside has it in flight, whatever the counts say: a
        # direct batch reaches the dispatcher's count only once it ran, and a client waiting at a
        # sync point publishes its own events after the wait)
        running = {
            w.running[2] for w in self.workers.values()
            if w.alive and w.running is not None and w.running[0] < now
        }  # fmt: skip
        clients = tuple(
            client_state(c, now, self.window_ns, c.cno in running)
            for _, c in sorted(self.clients.items())
        )
        lanes = tuple(
            self._lane(w, start, end, timeline_ns) for _, w in sorted(self.workers.items())
        )
        uptime = None
        if self.uptime is not None:
            uptime = self.uptime[0] + (now - self.uptime[1]) / 1e9
        elif self.t_first is not None:
            uptime = (now - self.t_first) / 1e9
        disp = self.counters.get("dispatcher") or {}
        base = self.base
        totals = Totals(self.events, self.instructions + base.get("instructions", 0),
                        self.batches + base.get("batches", 0),
                        self.transfer_bytes + base.get("transfer_bytes", 0),
                        self.errors + base.get("errors", 0), sum(self.drops.values()), self.bad_events,
                        _count(disp.get("bad_messages")), _count(disp.get("internal_errors")))  # fmt: skip
        return ClusterState(
            now_ns=now, window_ns=self.window_ns, timeline_start_ns=start, timeline_end_ns=end,
            uptime_s=uptime, workers=workers, clients=clients, lanes=lanes,
            marks=tuple(m for m in self.marks if m.t_ns <= now), configs=tuple(self.configs),
            log=tuple(self.log), totals=totals, drops=tuple(sorted(self.drops.items())),
            hot=tuple(self.hot.values()),
        )  # fmt: skip

    def _lane(self, w: WorkerRecord, start: int, end: int, width_ns: int) -> Lane:
        spans = lane_spans(w, start, end, width_ns, self.op_name)
        res = max(1, width_ns // LANE_RESOLUTION)
        if w.parts is None or w.parts.res != res:
            w.parts = PartBins(res)
        w.parts.update(w.time)
        loose = [Span(a, b, "", part) for a, b, part in w.time.loose(start, end)]
        parts = tuple(w.parts.spans(start, end) + loose)
        return Lane(worker=w.wid, alive=w.alive, spans=tuple(spans), parts=parts)


_MEMORY_COUNTS = ("cached", "capacity", "client_limit", "peak", "spill_out", "spill_in",
                  "prefetched", "prefetch_hits", "prefetch_misses", "oom")  # fmt: skip


def _memory_extras(f: dict) -> dict:
    """The fields of a memory event beyond the first five, checked (see :class:`MemoryState`)."""
    out: dict = {}
    for k in _MEMORY_COUNTS:
        v = as_int(f.get(k))
        if v is not None and v >= 0:
            out[k] = v
    used, spilled = f.get("clients"), f.get("clients_spilled")
    if isinstance(used, dict):
        sp = spilled if isinstance(spilled, dict) else {}
        rows = []
        for c, b in list(used.items())[:256]:
            c = as_int(c)
            if c is not None:
                rows.append((c, max(0, as_int(b) or 0), max(0, as_int(sp.get(c)) or 0)))
        for c, b in list(sp.items())[:256]:
            c = as_int(c)
            if c is not None and c not in used:
                rows.append((c, 0, max(0, as_int(b) or 0)))
        out["clients"] = tuple(sorted(rows))
    return out


def _count(v: object) -> int:
    """A counter from an event (0 when absent or not a count)."""
    return v if type(v) is int and v >= 0 else 0


class _OpTimes(dict):
    """Op -> its summed duration in one batch, first-seen order; ``count``: op -> how many."""

    count: Counter


def _time_by_op(ops: list, durs: list) -> _OpTimes:
    """Each op's summed duration in a batch where some op repeats (a tiny-op stream is hundreds
    of one op): counted by :class:`~collections.Counter` and summed one op at a time by
    ``compress``, both at C speed, when the batch holds a few distinct ops."""
    per = _OpTimes()
    per.count = Counter(ops)
    if len(per.count) <= 8:
        for o in per.count:
            per[o] = sum(compress(durs, map(eq, ops, repeat(o))))
    else:
        for o, d in zip(ops, durs):
            per[o] = per.get(o, 0) + d
    return per
