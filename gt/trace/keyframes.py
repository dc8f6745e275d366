"""Model keyframes: the cluster model's state as plain data, so a replay can start anywhere.

A ``.gtrace`` keyframe holds whatever its recorder's ``keyframe_fn`` returned. With
:class:`ModelKeyframer` as that function (and its :meth:`~ModelKeyframer.on_batch` fed every
recorded batch) a keyframe holds the :class:`~gt.trace.model.ClusterModel` itself: every counter,
histogram, membership fact, source line, mark, config change and log line, but of the span
history behind the timeline lanes and the windowed rates only each worker's last batch and
transfer (the history is bounded, and a replay rebuilds it by folding the events before the
target time). :func:`restore_model` turns it back into a
model that folds on exactly as the original would.

Pure: no files, no sockets. ``msgpack`` carries everything here (tuples come back as lists).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import astuple
from typing import Any

from gt.trace import events as E
from gt.trace.checks import TraceFormatError, check_model_snapshot, is_int, map_of
from gt.trace.model import WINDOW_NS, ClusterModel
from gt.trace.records import ClientRecord, WorkerRecord
from gt.trace.state import ConfigChange, HotPath, LogEntry, Mark

#: ``keyframe["kind"]`` of a model keyframe (a recorder's own compact keyframe has no ``kind``).
KIND = "gt.model"
VERSION = 1
#: Log lines kept in a keyframe (the log panel shows the newest few dozen).
LOG_KEEP = 200

_W_SCALARS = ("device", "backend", "host", "pid", "alive", "reason", "last_ops", "last_srcs",
              "last_client", "queue", "instructions", "batches", "errors", "hot", "memory",
              "device_stats", "in_flight", "n_xfers", "sent", "received", "base")  # fmt: skip
_C_SCALARS = ("host", "pid", "argv", "home", "alive", "reason", "queued", "last_batch",
              "done_batch", "errors", "snap_in_flight")  # fmt: skip
_M_SCALARS = ("events", "instructions", "batches", "transfer_bytes", "errors", "bad_events",
              "t_first", "t_last", "snapshots")  # fmt: skip


def snapshot_model(model: ClusterModel) -> dict:
    """The model as plain data (no span history; see the module docstring)."""
    workers = []
    for w in model.workers.values():
        d: dict[str, Any] = {k: getattr(w, k) for k in _W_SCALARS}
        d["wid"] = w.wid
        d["counts"] = list(w.counts.items())
        d["times"] = list(w.times.items())
        d["mem_hist"] = list(w.mem_hist)
        d["snaps"] = list(w.snaps)
        d["last_exec"] = list(w.execs[-1]) if w.execs else None  # keeps "has run" and its span
        d["last_xfer"] = list(w.xfers[-1]) if w.xfers else None
        d["time"] = [w.time.total, w.time.first, w.time.last, w.seen, w.time.pending()]
        workers.append(d)
    clients = []
    for c in model.clients.values():
        d = {k: getattr(c, k) for k in _C_SCALARS}
        d["cno"] = c.cno
        clients.append(d)
    out: dict[str, Any] = {k: getattr(model, k) for k in _M_SCALARS}
    out.update(
        workers=workers,
        clients=clients,
        srclocs=[[c, i, s] for (c, i), s in model.srclocs.items()],
        next_seq=dict(model.next_seq),
        drops=dict(model.drops),
        marks=[[m.t_ns, m.label, m.client] for m in model.marks],
        configs=[[c.t_ns, c.before, c.after, c.by] for c in model.configs],
        log=[[e.t_ns, e.kind, e.source, e.text] for e in list(model.log)[-LOG_KEEP:]],
        counters=dict(model.counters),
        base=dict(model.base),
        uptime=list(model.uptime) if model.uptime is not None else None,
        hot=[list(astuple(h)) for h in model.hot.values()],
    )
    return out


def restore_model(snap: dict, op_names: Sequence[str] | None = None, *, window_ns: int = WINDOW_NS,
                  count_gaps: bool = False) -> ClusterModel:  # fmt: skip
    """A model that continues from :func:`snapshot_model` 's data.

    Every field's type is checked first (a keyframe comes from a file), so a model restored here
    folds on and draws like any other.

    Raises:
        TraceFormatError: (a ``ValueError``) the data is not a model snapshot.
    """
    try:
        check_model_snapshot(snap)
    except TraceFormatError as exc:
        raise TraceFormatError(f"not a model snapshot: {exc}") from None
    return _restore(snap, op_names, window_ns, count_gaps)


def _restore(snap: dict, op_names, window_ns: int, count_gaps: bool) -> ClusterModel:
    m = ClusterModel(op_names, window_ns=window_ns, count_gaps=count_gaps)
    for k in _M_SCALARS:
        setattr(m, k, snap[k])
    for d in snap["workers"]:
        w = WorkerRecord(d["wid"])
        for k in _W_SCALARS:
            setattr(w, k, d.get(k, getattr(w, k)))
        if w.memory is not None:
            w.memory = tuple(w.memory)
        w.counts = Counter(dict(_pairs(d["counts"])))
        w.times = Counter(dict(_pairs(d["times"])))
        w.mem_hist.extend(d["mem_hist"])
        w.snaps.extend(tuple(s) for s in d["snaps"])
        if d.get("last_exec"):
            w.execs.append(tuple(d["last_exec"]))
        if d.get("last_xfer"):
            w.xfers.append(tuple(d["last_xfer"]))
        if d.get("time"):  # the totals; the segments behind windows are rebuilt by warming up
            total, w.time.first, w.time.last, w.seen, pending = d["time"]
            w.time.total.update(total)
            for t0, t1, part in pending:  # transfers of a batch that had not ended yet
                w.time.transfer(t0, t1, part == "wait")
        m.workers[w.wid] = w
    for d in snap["clients"]:
        c = ClientRecord(d["cno"])
        for k in _C_SCALARS:
            setattr(c, k, d.get(k, getattr(c, k)))
        c.argv = tuple(c.argv or ())
        m.clients[c.cno] = c
    m.srclocs = {(c, i): s for c, i, s in snap["srclocs"]}
    m.next_seq = dict(snap["next_seq"])
    m.drops = Counter(snap["drops"])
    m.marks.extend(Mark(*x) for x in snap["marks"])
    m.configs.extend(ConfigChange(*x) for x in snap["configs"])
    m.log.extend(LogEntry(*x) for x in snap["log"])
    m.counters = dict(snap["counters"])
    m.base = dict(snap.get("base") or {})
    m.uptime = tuple(snap["uptime"]) if snap.get("uptime") is not None else None
    for row in snap.get("hot") or ():
        h = HotPath(*row)
        m.hot[(h.client, h.plan)] = h
    return m


def _pairs(items: Any) -> list[tuple[Any, Any]]:
    return [(k, v) for k, v in items]


def is_model_keyframe(state: Any) -> bool:
    """Whether a keyframe's state is a model keyframe written by :class:`ModelKeyframer`."""
    return (
        isinstance(state, dict)
        and state.get("kind") == KIND
        and isinstance(state.get("model"), dict)
    )


def attach(model: ClusterModel, workers: Sequence[dict] | None) -> None:
    """Tell a fresh model about the workers a recording's header lists (they joined before it)."""
    ws = [w for w in workers if isinstance(w, dict) and is_int(w.get("id"))] if isinstance(
        workers, (list, tuple)) else []  # fmt: skip
    if ws:
        model.apply_snapshot({"workers": ws})  # dated by the recording's first event


class ModelKeyframer:
    """Folds recorded batches into a model and hands the recorder model keyframes.

    Use it as both ``Recorder(keyframe_fn=k)`` and ``record_from_bus(on_batch=k.on_batch)``. A
    recorder calls ``keyframe_fn`` right after writing a batch, possibly before ``on_batch`` saw
    it: a keyframe names what its model folded (``applied``, per source the next sequence number)
    and a replay folds whatever came before the keyframe and is not in it.

    Args:
        op_names: opcode -> name (only for display; keyframes hold opcodes).
        config: the shard config in force when recording started.
        workers: the workers the recording's header lists (those that joined before it started).
    """

    def __init__(self, op_names: Sequence[str] | None = None, config: Any = None,
                 workers: Sequence[dict] | None = None) -> None:  # fmt: skip
        self.model = ClusterModel(op_names, count_gaps=True)
        attach(self.model, workers)
        self.counts: dict[str, int] = {}
        self.config = config

    def on_batch(self, source: str, first_seq: int, events: list) -> None:
        """Fold one recorded batch."""
        counts = self.counts
        for ev in events:
            kind = ev[0]
            counts[kind] = counts.get(kind, 0) + 1
            if kind == E.CONFIG and isinstance(ev[2], dict):
                self.config = ev[2].get("after")
        m = self.model
        dropped = sum(m.drops.values())
        m.apply_batch(source, first_seq, events)
        if sum(m.drops.values()) > dropped:  # the recorder wrote this gap as one drop event
            m.events += 1
            counts[E.DROP] = counts.get(E.DROP, 0) + 1

    def __call__(self) -> dict:
        """The keyframe: the model, plus the counts per kind and the config in force."""
        m = self.model
        return {
            "kind": KIND,
            "version": VERSION,
            "counts": dict(self.counts),
            "drops": dict(m.drops),
            "config": self.config,
            "applied": dict(m.next_seq),
            "model": snapshot_model(m),
        }


def model_from_compact(state: dict, *, seq: dict | None = None, t_ns: int | None = None,
                       t_first: int | None = None, op_names: Sequence[str] | None = None,
                       window_ns: int = WINDOW_NS, earlier: Sequence[tuple[str, int, str, dict]] = ()
                       ) -> ClusterModel:  # fmt: skip
    """A model from a recorder's compact keyframe (membership, memory, device, counts, drops).

    What the compact state lacks (instruction and byte totals, op histograms) starts from zero,
    so those totals cover only what is folded after it. ``earlier`` are ``(kind, t, source,
    fields)`` events from before the keyframe that the model should still know: source lines,
    marks, config changes and errors.
    """
    state = state if isinstance(state, dict) else {}
    m = ClusterModel(op_names, window_ns=window_ns, count_gaps=False)
    for wid, info in _items(state.get("workers")):  # a keyframe comes from a file: skip nonsense
        if is_int(wid) and isinstance(info, dict):
            w = m.workers[wid] = WorkerRecord(wid)
            w.device, w.backend, w.host = (_str(info.get(k)) for k in ("device", "backend", "host"))
            w.pid = info.get("pid") if is_int(info.get("pid")) else None
            w.alive = bool(info.get("alive", True))
    for wid, f in _items(state.get("memory")):
        if wid in m.workers and isinstance(f, dict):
            m._memory(t_ns or 0, {**f, "worker": wid}, "keyframe")
    for wid, f in _items(state.get("device")):
        if wid in m.workers and isinstance(f, dict):
            m.workers[wid].device_stats = f
    for cno, info in _items(state.get("clients")):
        if is_int(cno) and isinstance(info, dict):
            c = m.clients[cno] = ClientRecord(cno)
            c.host = _str(info.get("host"))
            c.pid, c.home = (info.get(k) if is_int(info.get(k)) else None for k in ("pid", "home"))
            argv = info.get("argv")
            c.argv = tuple(str(a)[:200] for a in argv) if isinstance(argv, list) else ()
            c.alive = bool(info.get("alive", True))
    for kind, t, source, f in earlier:
        handler = m._handlers.get(kind)
        if handler is not None:
            try:
                handler(t, f, source)
            except Exception:  # noqa: BLE001 - a senseless event is skipped, as when folding
                pass
    counts = {k: v for k, v in _items(state.get("counts")) if is_int(v) and v >= 0}
    m.events = sum(counts.values())
    m.batches = counts.get(E.EXEC, 0)
    m.errors = counts.get(E.ERROR, 0)
    m.drops = Counter({str(k)[:200]: v for k, v in _items(state.get("drops")) if is_int(v)})
    m.next_seq = dict(seq) if map_of(_is_str, is_int)(seq) else {}
    m.t_first, m.t_last = t_first, t_ns
    return m


def _items(d: Any) -> Any:
    """A dict's items, or none for anything else."""
    return d.items() if isinstance(d, dict) else ()


def _is_str(v: Any) -> bool:
    return type(v) is str


def _str(v: Any) -> str | None:
    return v if type(v) is str else None
