"""What a trace's events add up to, read tolerantly: the summary a scan finds, merged workers, a
reader's facts, and plain data for JSON output.

Event fields are free-form (the bus checks a batch's shape, not what each field holds), so only
sensible values count here: a ``drop`` whose ``missing`` is not a count, or a ``worker_joined``
whose worker is not an id, is recorded but adds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.trace import events as E
from gt.trace.checks import is_count, is_int, short

#: JSON output keeps at most this much nesting of a free-form value (a header's config, say).
PLAIN_DEPTH = 32


def scan_summary(batches: Iterable[Any]) -> dict:
    """Event counts per kind, drops per source, time range and workers seen, from the batches."""
    counts: dict[str, int] = {}
    drops: dict[str, int] = {}
    workers: dict[int, dict] = {}
    sources: dict[str, list[int]] = {}
    n_events = n_batches = 0
    t_first = t_last = None
    for b in batches:
        n_batches += 1
        n_events += len(b.events)
        t_first = b.t0 if t_first is None or b.t0 < t_first else t_first
        t_last = b.t1 if t_last is None or b.t1 > t_last else t_last
        span = sources.setdefault(b.source, [b.first_seq, b.first_seq])
        span[1] = b.first_seq + len(b.events)
        for kind, _, f in b.events:
            counts[kind] = counts.get(kind, 0) + 1
            if kind == E.DROP and is_count(f.get("missing")):
                src = str(f.get("source"))[:200]
                drops[src] = drops.get(src, 0) + f["missing"]
            elif kind == E.WORKER_JOINED and is_int(f.get("worker")):
                w = f["worker"]
                workers[w] = {"id": w, **{k: v for k, v in f.items() if k != "worker"}}
    return {
        "events": n_events,
        "batches": n_batches,
        "t_first": t_first,
        "t_last": t_last,
        "counts": counts,
        "drops": drops,
        "dropped": sum(drops.values()),
        "workers": list(workers.values()),
        "sources": sources,
    }


def merge_workers(*lists: Iterable[dict]) -> list[dict]:
    """Worker dicts (checked: each has an integer ``id``) merged by id, later facts winning."""
    merged: dict[int, dict] = {}
    for ws in lists:
        for w in ws:
            merged.setdefault(w["id"], {}).update({k: v for k, v in w.items() if v is not None})
    return [merged[k] for k in sorted(merged)]


def reader_info(r: Any) -> dict:
    """What :meth:`gt.trace.reader.Reader.info` returns (its summary and header, checked)."""
    s, header = r.summary(), r.header
    workers = r.workers()
    t0, t1 = s.get("t_first"), s.get("t_last")
    return {
        "path": str(r.path),
        "size": r.size,
        "run_id": header.get("run_id"),
        "wall_time": header.get("wall_time"),
        "start_ns": header.get("start_ns"),
        "t_first": t0,
        "t_last": t1,
        "duration_ns": (t1 - t0) if t0 is not None and t1 is not None else 0,
        "workers": workers,
        "devices": [w.get("device") for w in workers if w.get("device") is not None],
        "events": s.get("events", 0),
        "batches": s.get("batches", 0),
        "counts": dict(s.get("counts") or {}),
        "drops": dict(s.get("drops") or {}),
        "dropped": s.get("dropped", 0),
        "keyframes": len(r.keyframes),
        "config": header.get("config"),
        "clean": r.clean,
        "truncated": r.truncated,
        "warning": r.warning,
    }


def plain(obj: Any, depth: int = 0) -> Any:
    """``obj`` as data ``json.dumps`` always accepts: string keys, no bytes, bounded nesting."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth >= PLAIN_DEPTH:
        return short(obj)
    if isinstance(obj, dict):
        return {k if isinstance(k, str) else short(k): plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v, depth + 1) for v in obj]
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).hex()
    return short(obj)
