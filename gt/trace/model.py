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
from typing import Any

from gt.trace import events as E
from gt.trace.records import (
    ClientRecord,
    WorkerRecord,
    as_count,
    as_int,
    as_num,
    lane_spans,
)
from gt.trace.state import (
    ClientState,
    ClusterState,
    ConfigChange,
    DeviceState,
    Lane,
    LogEntry,
    Mark,
    MemoryState,
    OpStat,
    Totals,
    WorkerState,
)
from gt.trace.timeshare import COMM, COMPUTE, WAIT, shares

WINDOW_NS = 2_000_000_000
TIMELINE_NS = 10_000_000_000
LOG_SIZE = 1000

_WORKER_FIELDS = ("device", "backend", "host", "pid")


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
                elif kind == E.STATS:
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
            if type(wid) is not int:
                raise TypeError("worker id")
            w = self.workers[wid] = WorkerRecord(wid)
            w.seen = self._now
        return w

    def _client(self, cno: Any) -> ClientRecord:
        c = self.clients.get(cno)
        if c is None:
            if type(cno) is not int:
                raise TypeError("client id")
            c = self.clients[cno] = ClientRecord(cno)
        return c

    def _exec(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        ops = f.get("ops") or ()
        durs = f.get("durs") or ()
        t0, t1 = f.get("t0", t), f.get("t1", t)
        n = f.get("n")
        n = n if type(n) is int else len(ops)
        if durs and len(durs) == len(ops):
            per: dict = {}
            for o, d in zip(ops, durs):
                per[o] = per.get(o, 0) + d
            w.times.update(per)
            w.counts.update(ops)
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
        w.execs.append((t0, t1, n, top, ops, durs))
        if type(t0) is int and type(t1) is int:
            w.time.batch(t0, t1)
        cno = f.get("client")
        if ops:  # a batch of frees only leaves the current op as it was
            w.last_ops, w.last_srcs, w.last_client = ops, f.get("srcs"), cno
        q = f.get("queue")
        if type(q) is int:
            w.queue = q
        w.instructions += n
        w.batches += 1
        w.errors += as_count(f.get("errors"))
        if f.get("hot"):
            w.hot += 1
        self.instructions += n
        self.batches += 1
        batch = f.get("batch")
        c = self.clients.get(cno)
        if c is not None and type(batch) is int and (c.done_batch is None or batch > c.done_batch):
            c.done_batch = batch

    def _transfer(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        nbytes = as_int(f.get("bytes")) or 0
        t0, t1, direction = f.get("t0", t), f.get("t1", t), f.get("direction")
        w.xfers.append((t0, t1, f.get("peer"), nbytes, direction))
        w.n_xfers += 1
        if type(t0) is int and type(t1) is int:
            w.time.transfer(t0, t1, direction == "wait")
        if direction == "send":
            w.sent += nbytes
        elif direction == "recv":
            w.received += nbytes
        self.transfer_bytes += nbytes

    def _queued(self, t: int, f: dict, source: str) -> None:
        c = self._client(f["client"])
        n = as_int(f.get("n")) or 0
        c.queued += n
        c.rate.append((t, n))
        b = f.get("batch")
        if type(b) is int:
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
        )
        if used is not None:
            w.mem_hist.append(used)

    def _device(self, t: int, f: dict, source: str) -> None:
        self._worker(f["worker"]).device_stats = f

    def _srcloc(self, t: int, f: dict, source: str) -> None:
        cno = f.get("client")
        for k, v in (f.get("locs") or {}).items():
            self.srclocs[(cno, int(k))] = str(v)

    def _worker_joined(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        for k in _WORKER_FIELDS:
            if f.get(k) is not None:
                setattr(w, k, f[k])
        w.alive, w.reason = True, None
        where = f"{w.device or '?'} on {w.host or '?'}, pid {w.pid if w.pid is not None else '?'}"
        self.log.append(LogEntry(t, E.WORKER_JOINED, source, f"worker {w.wid} joined ({where})"))

    def _worker_left(self, t: int, f: dict, source: str) -> None:
        w = self._worker(f["worker"])
        w.alive, w.reason = False, f.get("reason")
        self.log.append(
            LogEntry(t, E.WORKER_LEFT, source, f"worker {w.wid} left: {w.reason or 'unknown'}")
        )

    def _client_joined(self, t: int, f: dict, source: str) -> None:
        c = self._client(f["client"])
        c.host, c.pid, c.home = f.get("host"), as_int(f.get("pid")), as_int(f.get("home"))
        argv = f.get("argv")
        c.argv = tuple(str(a) for a in argv) if isinstance(argv, (list, tuple)) else ()
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
        c.alive, c.reason = False, f.get("reason")
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
        if type(op) is int:
            op = self.op_name(op)
        text = f"{op + ': ' if op else ''}{f.get('message') or 'error'}"
        if where:
            text += f"  at {where}"
        wid = f.get("worker")
        who = f"client {cno}" if cno is not None else source
        if wid is not None:
            who += f" on worker {wid}"
        self.log.append(LogEntry(t, E.ERROR, source, f"{who}: {text}"))

    def _mark(self, t: int, f: dict, source: str) -> None:
        label = str(f.get("label", ""))
        self.marks.append(Mark(t, label, as_int(f.get("client"))))
        self.log.append(LogEntry(t, E.MARK, source, f"mark {label!r}"))

    def _config(self, t: int, f: dict, source: str) -> None:
        self.configs.append(ConfigChange(t, f.get("before"), f.get("after"), f.get("by")))
        self.log.append(LogEntry(t, E.CONFIG, source, f"config applied by {f.get('by') or '?'}"))

    def _drop(self, t: int, f: dict, source: str) -> None:
        missing = as_int(f.get("missing")) or 0
        src = str(f.get("source") or source)
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
            if not isinstance(info, dict) or type(info.get("id")) is not int:
                continue
            w = self._worker(info["id"])
            for k in _WORKER_FIELDS:
                if info.get(k) is not None:
                    setattr(w, k, info[k])
            if "alive" in info:
                w.alive = bool(info["alive"])
            w.in_flight = as_int(info.get("in_flight"))
            instr = as_int(info.get("instructions"))
            if instr is not None:
                w.snaps.append((t, instr))
            stats = info.get("stats") if isinstance(info.get("stats"), dict) else {}
            if w.memory is None and as_int(stats.get("bytes")) is not None:
                w.memory = (stats["bytes"], None, None, None, as_int(stats.get("tensors")))
        for info in snap.get("clients") or ():
            if not isinstance(info, dict) or type(info.get("id")) is not int:
                continue
            c = self._client(info["id"])
            c.host = info.get("host", c.host)
            c.pid = as_int(info.get("pid")) if info.get("pid") is not None else c.pid
            c.home = as_int(info.get("home")) if info.get("home") is not None else c.home
            if isinstance(info.get("argv"), (list, tuple)):
                c.argv = tuple(str(a) for a in info["argv"])
            c.snap_in_flight = (as_int(info.get("in_flight")) or 0) + (
                as_int(info.get("queued")) or 0
            )
            c.errors = max(c.errors, as_int(info.get("errors")) or 0)
            if info.get("broken"):
                c.reason = str(info["broken"])
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
            "transfer_bytes": (self.transfer_bytes, sum(
                (as_int((w.get("stats") or {}).get("sent")) or 0) for w in workers)),
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
        workers = tuple(self._worker_state(w, now) for _, w in sorted(self.workers.items()))
        clients = tuple(self._client_state(c, now) for _, c in sorted(self.clients.items()))
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
        )  # fmt: skip

    def _worker_state(self, w: WorkerRecord, now: int) -> WorkerState:
        lo = now - self.window_ns
        win = self.window_ns or 1
        n_recent = 0
        for t0, t1, n, *_ in reversed(w.execs):
            if t1 < lo:
                break
            if t0 <= now and t1 <= now:
                n_recent += n
        moved = 0
        for t0, t1, _peer, nbytes, _d in reversed(w.xfers):
            if t1 < lo:
                break
            if t0 <= now:
                moved += nbytes
        # Shares over the window, or over the part of it since the worker was first seen.
        known = [t for t in (w.seen, w.time.start()) if t is not None]
        since = max(lo, min(known)) if known else lo
        parts = shares(w.time.window(since, now), now - since) if (w.execs or w.xfers) else None
        rate = n_recent / (win / 1e9) if w.execs else None
        tot = w.time.totals()
        since_ever = min(known) if known else None
        if rate is None and len(w.snaps) == 2 and w.snaps[1][0] > w.snaps[0][0]:
            (ta, ia), (tb, ib) = w.snaps
            rate = (ib - ia) / ((tb - ta) / 1e9)
        current = src = None
        if w.last_ops:
            current = self.op_name(w.last_ops[-1])
            if w.last_srcs:
                src = self.srclocs.get((w.last_client, w.last_srcs[-1]))
        ops = tuple(sorted((OpStat(self.op_name(o), k, int(w.times.get(o, 0))) for o, k in w.counts.items()),
                           key=lambda s: (-s.time_ns, -s.count, s.name)))  # fmt: skip
        m = w.memory or (None,) * 5
        d = w.device_stats or {}
        dev = DeviceState(
            name=d.get("name") if isinstance(d.get("name"), str) else None, util=as_num(d.get("util")),
            mem_used=as_int(d.get("mem_used")), mem_total=as_int(d.get("mem_total")),
            temp=as_num(d.get("temp")), power=as_num(d.get("power")),
        )  # fmt: skip
        return WorkerState(
            id=w.wid, device=w.device, backend=w.backend, host=w.host, pid=w.pid, alive=w.alive,
            reason=w.reason, current_op=current, current_source=src,
            compute=parts and parts[COMPUTE], comm=parts and parts[COMM],
            wait=parts and parts[WAIT], idle=parts and parts["idle"], queue=w.queue, in_flight=w.in_flight, instr_rate=rate,
            comm_rate=moved / (win / 1e9) if w.xfers else None, instructions=w.instructions,
            batches=w.batches, errors=w.errors, hot=w.hot, ops=ops,
            memory=MemoryState(*m, history=tuple(w.mem_hist)), device_stats=dev,
            compute_ns=tot[COMPUTE], comm_ns=tot[COMM], wait_ns=tot[WAIT], sent_bytes=w.sent,
            received_bytes=w.received,
            seen_ns=max(0, now - since_ever) if since_ever is not None else 0,
        )  # fmt: skip

    def _client_state(self, c: ClientRecord, now: int) -> ClientState:
        lo = now - self.window_ns
        n = 0
        for t, k in reversed(c.rate):
            if t < lo:
                break
            if t <= now:
                n += k
        if c.last_batch is not None:
            in_flight = max(0, c.last_batch - (c.done_batch if c.done_batch is not None else -1))
        else:
            in_flight = c.snap_in_flight
        return ClientState(
            id=c.cno, host=c.host, pid=c.pid, argv=c.argv, home=c.home, alive=c.alive,
            reason=c.reason, ops_rate=n / (self.window_ns / 1e9) if c.rate else None,
            in_flight=in_flight if c.alive else 0, queued=c.queued, errors=c.errors,
        )  # fmt: skip

    def _lane(self, w: WorkerRecord, start: int, end: int, width_ns: int) -> Lane:
        spans = lane_spans(w, start, end, width_ns, self.op_name)
        return Lane(worker=w.wid, alive=w.alive, spans=tuple(spans))


def _count(v: object) -> int:
    """A counter from an event (0 when absent or not a count)."""
    return v if type(v) is int and v >= 0 else 0
