"""Mutable per-worker and per-client records behind :class:`gt.trace.model.ClusterModel`, and
small pure helpers (interval union, span merging, tolerant field coercion)."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

from gt.trace.state import Span

SPAN_HISTORY = 4096  # exec batches (and transfers) kept per worker for windows and timelines
MEM_HISTORY = 120


class WorkerRecord:
    """What the model keeps per worker (mutable, bounded)."""

    __slots__ = (
        "wid", "device", "backend", "host", "pid", "alive", "reason", "execs", "xfers",
        "counts", "times", "last_ops", "last_srcs", "last_client", "queue", "instructions",
        "batches", "errors", "hot", "memory", "mem_hist", "device_stats", "in_flight", "snaps",
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


def as_int(v: Any) -> int | None:
    return v if type(v) is int else None


def as_num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def as_count(v: Any) -> int:
    """An ``errors`` field may be a count or a list of errors."""
    if type(v) is int:
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
