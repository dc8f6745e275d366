"""Exporting a ``.gtrace`` to Chrome trace event JSON (opens in Perfetto and ``chrome://tracing``).

The JSON is streamed to disk as the trace is read, so memory stays flat however long the run.
Layout: one process per worker (named with its device) with lanes for compute (``exec``
batches, with one child slice per instruction when durations were recorded) and communication
(``transfer`` slices); a ``clients`` process with one lane per client (its queued batches); flow
arrows from a client's queued batch to the worker exec of that batch and from each transfer's
send to its recv; counters for memory and device samples; global instants for marks, config
changes, errors, joins, leaves and lost events. Times are microseconds since the first event.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gt.trace import events as E
from gt.trace.checks import is_int, is_key, is_num, short
from gt.trace.reader import Reader
from gt.trace.records import as_text
from gt.trace.timeshare import BACKGROUND, MEMORY_TRAFFIC, TimeAccount, lifetime, shares

CLIENTS_PID = 100_000
DISPATCHER_PID = 100_001
COMPUTE_TID = 1
COMM_TID = 1001
#: A span is stamped at its start or its end, so one that overlaps a window edge may be stamped
#: outside it: read this much (ns) beyond each edge. Longer spans across an edge are left out.
WINDOW_SLACK_NS = 1_000_000_000
_PENDING_MAX = 10_000  # flow ends kept for matching (a batch runs soon after it is queued)
_FLUSH_EVERY = 1024
_DEVICE_COUNTERS = (
    ("util", "utilization %"),
    ("temp", "temperature C"),
    ("power", "power W"),
    ("mem_used", "device memory"),
    ("pcie_tx", "pcie tx"),
    ("pcie_rx", "pcie rx"),
)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    return str(obj)


#: Clients drawn per worker in the "memory by client" counter (a bound against hostile events).
_CLIENTS_MAX = 64


def _dumps(obj: Any) -> str:
    """JSON for a value from the trace; always valid JSON, whatever a field holds."""
    try:
        return json.dumps(obj, separators=(",", ":"), default=_jsonable, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # odd keys, nan, deep nesting: say what it was
        return json.dumps(short(obj))


def _time(v: Any) -> int | None:
    """A time (or duration) field as integer ns, or ``None`` when it is none."""
    return v if is_int(v) else int(v) if is_num(v) else None


def _list(v: Any) -> list:
    """A column field (``ops``, ``durs``, ...): a list, or empty when it is not one."""
    return v if type(v) is list else []


def _op(code: Any) -> str:
    """JSON for an opcode without a name (or an op recorded by name)."""
    return _dumps(code if type(code) is str else f"op{short(code)}")


def _key(v: Any) -> Any:
    """A field used to match events (a client, a batch): itself if an id, else its short form."""
    return v if is_key(v) else short(v)


class _Lanes:
    """Packs slices onto lanes so that slices on one lane never overlap."""

    def __init__(self, base_tid: int):
        self.base = base_tid
        self.ends: list[int] = []

    def place(self, t0: int, t1: int) -> int:
        for i, end in enumerate(self.ends):
            if t0 >= end:
                self.ends[i] = t1
                return self.base + i
        self.ends.append(t1)
        return self.base + len(self.ends) - 1


class _Exporter:
    def __init__(
        self,
        reader: Reader,
        out,
        op_names: Sequence[str] | None,
        window: tuple[int | None, int | None] | None,
        workers: Iterable[int] | None,
    ):
        self.r = reader
        self.out = out
        names = list(op_names or reader.header.get("op_names") or [])
        self.op_json = [_dumps(n) for n in names]
        self.origin = (
            reader.t_first
            if reader.t_first is not None
            else int(reader.header.get("start_ns") or 0)
        )
        ws, we = window or (None, None)
        self.w_lo = None if ws is None else self.origin + int(ws)
        self.w_hi = None if we is None else self.origin + int(we)
        self.workers = None if workers is None else {int(w) for w in workers}
        self.buf: list[str] = []
        self.sep = ""
        self.counts = {"slices": 0, "flows": 0, "counters": 0, "instants": 0, "events_in": 0}
        self.time: dict[int, TimeAccount] = {}  # the one definition of time, per worker
        self.compute: dict[int, _Lanes] = {}
        self.comm: dict[int, _Lanes] = {}
        self.seen_workers: set[int] = set()
        # When each worker joined (its first event; workers of the recording's header were
        # there from its start) and left: its shares are of that time (timeshare.lifetime).
        self.joined: dict[int, int] = {}
        self.left: dict[int, int] = {}
        self.clients: dict[Any, int] = {}  # client -> its lane (tid)
        self.client_end: dict[Any, int] = {}  # client -> end of its last slice (ns)
        self.srclocs: dict[Any, dict] = {}  # client -> {source id: JSON string of "file:line"}
        self.queued: OrderedDict[tuple, tuple[int, int]] = OrderedDict()
        self.waiting: OrderedDict[tuple, list[tuple[int, int, int]]] = OrderedDict()
        self.sends: dict[tuple, deque] = {}
        self.recvs: dict[tuple, deque] = {}
        self.flow_id = 0

    # -- output --------------------------------------------------------------------------------

    def ts(self, t: int) -> str:
        return f"{(t - self.origin) / 1000:.3f}"

    def emit(self, s: str) -> None:
        self.buf.append(s)
        if len(self.buf) >= _FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.out.write(self.sep + ",\n".join(self.buf))
            self.sep = ",\n"
            self.buf = []

    def slice(
        self, pid: int, tid: int, t0: int, t1: int, name_json: str, args: dict | None = None
    ) -> None:
        a = f',"args":{_dumps(args)}' if args else ""
        self.emit(
            f'{{"ph":"X","pid":{pid},"tid":{tid},"ts":{self.ts(t0)},'
            f'"dur":{(t1 - t0) / 1000:.3f},"name":{name_json}{a}}}'
        )
        self.counts["slices"] += 1

    def instant(self, t: int, name: str, args: dict | None = None) -> None:
        a = {k: v for k, v in (args or {}).items() if v is not None}
        self.emit(
            f'{{"ph":"i","s":"g","pid":{DISPATCHER_PID},"tid":0,"ts":{self.ts(t)},'
            f'"name":{_dumps(name)},"args":{_dumps(a)}}}'
        )
        self.counts["instants"] += 1

    def counter(self, pid: int, t: int, name: str, values: dict) -> None:
        vals = {k: v for k, v in values.items() if is_num(v)}
        if vals:
            self.emit(
                f'{{"ph":"C","pid":{pid},"tid":0,"ts":{self.ts(t)},"name":{_dumps(name)},'
                f'"args":{_dumps(vals)}}}'
            )
            self.counts["counters"] += 1

    def flow(self, a: tuple[int, int, int], b: tuple[int, int, int], name: str) -> None:
        """A flow arrow from (pid, tid, t) ``a`` to (pid, tid, t) ``b``."""
        self.flow_id += 1
        fid, n = self.flow_id, _dumps(name)
        self.emit(
            f'{{"ph":"s","id":{fid},"pid":{a[0]},"tid":{a[1]},"ts":{self.ts(a[2])},"name":{n},"cat":"flow"}}'
        )
        self.emit(
            f'{{"ph":"f","bp":"e","id":{fid},"pid":{b[0]},"tid":{b[1]},"ts":{self.ts(b[2])},'
            f'"name":{n},"cat":"flow"}}'
        )
        self.counts["flows"] += 1

    # -- events --------------------------------------------------------------------------------

    def in_window(self, t0: int, t1: int) -> bool:
        return (self.w_lo is None or t1 >= self.w_lo) and (self.w_hi is None or t0 <= self.w_hi)

    def worker_ok(self, w: Any) -> bool:
        if not is_int(w) or w < 0:
            return False
        if self.workers is not None and w not in self.workers:
            return False
        self.seen_workers.add(w)
        return True

    def run(self) -> None:
        lo = None if self.w_lo is None else self.w_lo - WINDOW_SLACK_NS
        hi = None if self.w_hi is None else self.w_hi + WINDOW_SLACK_NS
        handlers = {
            E.EXEC: self.on_exec,
            E.TRANSFER: self.on_transfer,
            E.QUEUED: self.on_queued,
            E.MEMORY: self.on_memory,
            E.DEVICE: self.on_device,
            E.SRCLOC: self.on_srcloc,
        }
        instants = {E.MARK, E.CONFIG, E.ERROR, E.DROP, E.WORKER_JOINED, E.WORKER_LEFT,
                    E.CLIENT_JOINED, E.CLIENT_LEFT}  # fmt: skip
        n = 0
        for b in self.r.batches(lo, hi):
            n += len(b.events)
            for kind, t, f in b.events:
                w = f.get("worker") if type(f) is dict else None
                if is_int(w):
                    self.joined.setdefault(w, t)  # (its first event; spans: see _shares_label)
                    if kind == E.WORKER_LEFT:
                        self.left[w] = t
                    elif kind == E.WORKER_JOINED:
                        self.left.pop(w, None)
                h = handlers.get(kind)
                if h is not None:
                    h(t, f)
                elif kind in instants and self.in_window(t, t):
                    self.on_instant(kind, t, f)
        self.counts["events_in"] = n
        self.metadata()
        self.flush()

    def on_srcloc(self, t: int, f: dict) -> None:
        locs = f.get("locs")
        if isinstance(locs, dict):  # kept as JSON strings, ready for the instruction slices
            self.srclocs.setdefault(_key(f.get("client")), {}).update(
                {k: _dumps(v) for k, v in locs.items() if is_key(k)}
            )

    def on_exec(self, t: int, f: dict) -> None:
        w = f.get("worker")
        t0, t1 = _time(f.get("t0")), _time(f.get("t1"))
        if t0 is None or t1 is None or not self.worker_ok(w) or not self.in_window(t0, t1):
            return
        t1 = max(t0, t1)
        pid = w + 1
        self._account(w).batch(t0, t1)
        tid = self.compute.setdefault(w, _Lanes(COMPUTE_TID)).place(t0, t1)
        client, batch = _key(f.get("client")), _key(f.get("batch"))
        ops = _list(f.get("ops"))
        args = {
            "client": client,
            "batch": batch,
            "n": f.get("n"),
            "hot": f.get("hot"),
            "queue": f.get("queue"),
            "errors": f.get("errors"),
        }
        self.slice(pid, tid, t0, t1, '"hot batch"' if f.get("hot") else '"batch"', args)
        durs = _list(f.get("durs"))
        if durs:
            outs, srcs = _list(f.get("outs")), _list(f.get("srcs"))
            self.instructions(pid, tid, t0, t1, ops, durs, outs, srcs, self.srclocs.get(client, {}))
        key = (client, batch)
        end = (pid, tid, t0)
        q = self.queued.get(key)
        if q is not None:
            self.flow(q, end, "batch")
        else:
            self.waiting.setdefault(key, []).append(end)
            if len(self.waiting) > _PENDING_MAX:
                self.waiting.popitem(last=False)

    def instructions(
        self,
        pid: int,
        tid: int,
        t0: int,
        t1: int,
        ops: list,
        durs: list,
        outs: list,
        srcs: list,
        locs: dict,
    ) -> None:
        """One slice per instruction, laid out back to back from ``t0`` and clipped to ``t1``."""
        op_json, n_names, origin, buf = self.op_json, len(self.op_json), self.origin, self.buf
        head = f'{{"ph":"X","pid":{pid},"tid":{tid},"ts":'
        n_ops, n_outs, n_srcs = len(ops), len(outs), len(srcs)
        cur = t0
        n = 0
        for i, d in enumerate(durs):
            d = _time(d)
            if cur >= t1 or d is None:
                break
            end = cur + d if d > 0 else cur
            if end > t1:
                end = t1
            code = ops[i] if i < n_ops else None
            name = op_json[code] if type(code) is int and 0 <= code < n_names else _op(code)
            args = ""
            if i < n_outs:
                out = outs[i]
                args = f'"out":{out}' if type(out) is int else f'"out":{_dumps(out)}'
            if i < n_srcs and is_key(srcs[i]):
                loc = locs.get(srcs[i])
                if loc is not None:
                    args = f'{args},"src":{loc}' if args else f'"src":{loc}'
            buf.append(
                f'{head}{(cur - origin) / 1000:.3f},"dur":{(end - cur) / 1000:.3f},'
                f'"name":{name},"args":{{{args}}}}}'
            )
            n += 1
            cur = end
        self.counts["slices"] += n
        if len(buf) >= _FLUSH_EVERY:
            self.flush()

    def on_transfer(self, t: int, f: dict) -> None:
        w, peer = f.get("worker"), _key(f.get("peer"))
        t0, t1 = _time(f.get("t0")), _time(f.get("t1"))
        if t0 is None or t1 is None or not self.worker_ok(w) or not self.in_window(t0, t1):
            return
        t1 = max(t0, t1)
        pid = w + 1
        direction = as_text(f.get("direction"), 40)
        if direction not in BACKGROUND:  # as the model counts it (gt.trace.timeshare)
            self._account(w).transfer(t0, t1, direction == "wait" or direction in MEMORY_TRAFFIC)
        tid = self.comm.setdefault(w, _Lanes(COMM_TID)).place(t0, t1)
        nbytes, what = _key(f.get("bytes")), _key(f.get("what"))
        client, batch = _key(f.get("client")), _key(f.get("batch"))
        name = f"{direction or 'transfer'} {as_text(what, 80) or ''}".strip()
        args = {"peer": peer, "bytes": nbytes, "client": client, "batch": batch}
        if f.get("via") is not None:
            args["via"] = as_text(f.get("via"), 20)
        self.slice(pid, tid, t0, t1, _dumps(name), args)
        if direction == "send":
            key, mine, other = (w, peer), self.sends, self.recvs
        elif direction == "recv":
            key, mine, other = (peer, w), self.recvs, self.sends
        else:
            return
        key += (client, batch, what, nbytes)
        pending = other.get(key)
        if pending:
            o = pending.popleft()
            if not pending:
                del other[key]
            send, recv = ((pid, tid, t0, t1), o) if direction == "send" else (o, (pid, tid, t0, t1))
            # finish inside the recv slice, not before the send started where that is possible
            t_f = min(recv[3], max(recv[2], send[2]))
            self.flow((send[0], send[1], send[2]), (recv[0], recv[1], t_f), "transfer")
        else:
            mine.setdefault(key, deque()).append((pid, tid, t0, t1))

    def on_queued(self, t: int, f: dict) -> None:
        client = _key(f.get("client"))
        if not self.in_window(t, t):
            return
        tid = self.clients.setdefault(client, len(self.clients) + 1)
        t0 = max(t, self.client_end.get(client, t))
        t1 = t0 + 1000  # 1 us: queuing is an instant, but flows need a slice to start from
        self.client_end[client] = t1
        self.slice(
            CLIENTS_PID,
            tid,
            t0,
            t1,
            _dumps(f"queued {as_text(f.get('n'), 40)}"),
            {"batch": f.get("batch"), "first_id": f.get("first_id")},
        )
        key = (client, _key(f.get("batch")))
        start = (CLIENTS_PID, tid, t0)
        self.queued[key] = start
        if len(self.queued) > _PENDING_MAX:
            self.queued.popitem(last=False)
        for end in self.waiting.pop(key, ()):
            self.flow(start, end, "batch")

    def on_memory(self, t: int, f: dict) -> None:
        w = f.get("worker")
        if self.worker_ok(w) and self.in_window(t, t):
            self.counter(
                w + 1, t, "memory",
                {k: f.get(k) for k in ("used", "cached", "reserved", "limit", "spilled")},
            )  # fmt: skip
            clients = f.get("clients")
            if isinstance(clients, dict):  # who holds it: one counter track per client
                self.counter(w + 1, t, "memory by client",
                             {f"client {c}": b for c, b in list(clients.items())[:_CLIENTS_MAX]})  # fmt: skip
            # Spill traffic as running byte counters (Perfetto draws the slope as the rate).
            traffic = {k: f.get(k) for k in ("spill_out", "spill_in", "prefetched")}
            if any(is_num(v) and v for v in traffic.values()):
                self.counter(w + 1, t, "spill traffic", traffic)

    def on_device(self, t: int, f: dict) -> None:
        w = f.get("worker")
        if self.worker_ok(w) and self.in_window(t, t):
            for key, name in _DEVICE_COUNTERS:
                self.counter(w + 1, t, name, {key: f.get(key)})

    def on_instant(self, kind: str, t: int, f: dict) -> None:
        w = f.get("worker")
        if (
            kind in (E.ERROR, E.WORKER_JOINED, E.WORKER_LEFT)
            and self.workers is not None
            and not (is_int(w) and w in self.workers)
        ):
            return
        if kind == E.MARK:
            self.instant(t, f"mark: {as_text(f.get('label'))}", {"client": f.get("client")})
        elif kind == E.CONFIG:
            self.instant(t, "config applied", f)
        elif kind == E.ERROR:
            self.instant(t, f"error: {as_text(f.get('op')) or '?'}", f)
        elif kind == E.DROP:
            what = f"{as_text(f.get('missing'), 40)} events from {as_text(f.get('source'))}"
            self.instant(t, f"lost {what}", f)
        else:
            self.instant(t, kind.replace("_", " "), f)

    def _account(self, w: int) -> TimeAccount:
        acc = self.time.get(w)
        if acc is None:
            acc = self.time[w] = TimeAccount(keep=1)  # totals only: the export streams
        return acc

    def _shares_label(self, w: int) -> str:
        """The model's shares of the exported span (the same numbers as ``gt trace stats``)."""
        acc = self.time.get(w)
        lo = self.w_lo if self.w_lo is not None else self.origin
        hi = self.w_hi if self.w_hi is not None else (self.r.summary().get("t_last") or lo)
        joined = None
        if w not in self._at_start:  # as the model takes it: its first event or span
            known = [t for t in (self.joined.get(w), acc.start() if acc else None) if t is not None]
            joined = min(known) if known else None
        span = lifetime(lo, hi, joined, self.left.get(w))
        sh = shares(acc.totals(), span) if acc is not None else None
        if not sh:
            return ""
        return " · " + " ".join(
            f"{k} {100 * sh[k]:.0f}%" for k in ("compute", "comm", "wait", "idle")
        )

    @property
    def _at_start(self) -> set:
        """The workers the recording's header names (there from its start)."""
        return {w.get("id") for w in self.r.header.get("workers") or () if isinstance(w, dict)}

    def metadata(self) -> None:
        devices = {w.get("id"): w for w in self.r.workers()}
        meta = []
        for w in sorted(self.seen_workers | set(self.compute) | set(self.comm)):
            info = devices.get(w, {})
            label = f"worker {w}" + (f" ({as_text(info['device'])})" if info.get("device") else "")
            meta.append((w + 1, 0, "process_name", {"name": label + self._shares_label(w)}))
            meta.append((w + 1, 0, "process_sort_index", {"sort_index": w}))
            for lanes, what in ((self.compute.get(w), "compute"), (self.comm.get(w), "comm")):
                for i in range(len(lanes.ends) if lanes else 0):
                    name = what if i == 0 else f"{what} {i + 1}"
                    meta.append((w + 1, lanes.base + i, "thread_name", {"name": name}))
        if self.clients:
            meta.append((CLIENTS_PID, 0, "process_name", {"name": "clients"}))
            for c, tid in self.clients.items():
                meta.append((CLIENTS_PID, tid, "thread_name", {"name": f"client {c}"}))
        meta.append((DISPATCHER_PID, 0, "process_name", {"name": "events"}))
        for pid, tid, name, args in meta:
            self.emit(f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"{name}","args":{_dumps(args)}}}')


def export_chrome(
    trace: str | os.PathLike[str] | Reader,
    out: str | os.PathLike[str],
    *,
    window: tuple[int | None, int | None] | None = None,
    workers: Iterable[int] | None = None,
    op_names: Sequence[str] | None = None,
) -> dict:
    """Write a trace as Chrome trace event JSON, streaming.

    Args:
        trace: a ``.gtrace`` path or an open :class:`Reader`.
        out: the JSON file to write.
        window: ``(t_start, t_end)`` in ns since the first event; either may be ``None``.
        workers: only these worker ids (clients and global instants are kept).
        op_names: opcode -> name; defaults to the trace header's ``op_names``, then ``op<code>``.

    Returns:
        Counts: ``events_in`` (read), ``slices``, ``flows``, ``counters``, ``instants``,
        ``bytes`` written, ``seconds`` taken.

    Raises:
        TraceFormatError: the trace is not readable.
    """
    started = time.perf_counter()
    reader = trace if isinstance(trace, Reader) else Reader(trace)
    try:
        out_path = Path(out)
        with open(out_path, "w", encoding="utf-8") as fh:
            other = {
                "run_id": reader.header.get("run_id"),
                "origin_ns": None,
                "generator": "gt export",
            }
            ex = _Exporter(reader, fh, op_names, window, workers)
            other["origin_ns"] = ex.origin
            fh.write('{"displayTimeUnit":"ns","otherData":' + _dumps(other) + ',"traceEvents":[\n')
            ex.run()
            fh.write("\n]}\n")
        counts = dict(ex.counts, workers=len(ex.seen_workers))
    finally:
        if reader is not trace:
            reader.close()
    counts["bytes"] = out_path.stat().st_size
    counts["seconds"] = time.perf_counter() - started
    return counts
