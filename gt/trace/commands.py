"""The trace commands the CLI calls: ``gt trace info``, ``gt trace stats``, ``gt export``.

Each returns an exit status. A file that cannot be read (missing, foreign, corrupt) prints one
line naming the file and the problem to stderr and returns 1; a file that was cut short is read
up to its last whole record, with a one-line warning.
"""

from __future__ import annotations

import json as _json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gt.trace import events as E
from gt.trace.export import export_chrome
from gt.trace.reader import Reader, TraceFormatError

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """``"1.5s"``, ``"500ms"``, ``"20us"``, ``"2m"``, ``"300"`` (seconds) -> nanoseconds.

    Raises:
        ValueError: not a duration.
    """
    m = _DURATION.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or (unit and unit not in _UNITS):
        raise ValueError(f"not a duration: {text!r} (try 1.5s, 500ms, 20us)")
    return round(float(m.group(1)) * _UNITS[unit or "s"])


def parse_window(window: str | tuple | None) -> tuple[int | None, int | None] | None:
    """``"10s:20s"``, ``"1.5s:"``, ``":500ms"`` -> ``(start_ns, end_ns)`` since the first event.

    Raises:
        ValueError: not ``START:END`` of durations, or the end is before the start.
    """
    if window is None or isinstance(window, tuple):
        return window
    if ":" not in window:
        raise ValueError(f"not a time window: {window!r} (try 10s:20s, 1.5s:, :500ms)")
    a, b = window.split(":", 1)
    lo = parse_duration(a) if a.strip() else None
    hi = parse_duration(b) if b.strip() else None
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"time window ends before it starts: {window!r}")
    return lo, hi


def parse_workers(workers: str | Iterable[int] | None) -> list[int] | None:
    """``"0,2"`` or ``[0, 2]`` -> ``[0, 2]``; ``None`` -> every worker.

    Raises:
        ValueError: not a comma-separated list of worker ids.
    """
    if workers is None:
        return None
    if isinstance(workers, str):
        try:
            return [int(w) for w in workers.replace(" ", "").split(",") if w]
        except ValueError:
            raise ValueError(f"not a list of worker ids: {workers!r} (try 0,1)") from None
    return [int(w) for w in workers]


def _fail(msg: str) -> int:
    print(f"gt: error: {msg}", file=sys.stderr)
    return 1


def _guard(path: str | os.PathLike[str], fn: Callable[[], int]) -> int:
    """Run ``fn``, turning unreadable input into a one-line error and exit status 1."""
    try:
        return fn()
    except TraceFormatError as exc:
        return _fail(str(exc))
    except FileNotFoundError:
        return _fail(f"{path}: no such file")
    except IsADirectoryError:
        return _fail(f"{path}: is a directory, not a trace")
    except OSError as exc:
        return _fail(f"{exc.filename or path}: {exc.strerror or exc}")


def _warn(reader: Reader) -> None:
    if reader.warning:
        print(f"gt: warning: {reader.path}: {reader.warning}", file=sys.stderr)


def fmt_bytes(n: float | None) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    if n is None:
        return "N/A"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def fmt_ns(ns: float | None) -> str:
    """``1_500_000`` -> ``"1.50 ms"``."""
    if ns is None:
        return "N/A"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


# -- info --------------------------------------------------------------------------------------


def cmd_trace_info(path: str | os.PathLike[str], json: bool = False) -> int:
    """Print what a trace holds: run, time span, workers, event counts, drops.

    Args:
        path: the ``.gtrace`` file.
        json: print one JSON object instead of text.
    """

    def run() -> int:
        with Reader(path) as r:
            info = r.info()
        if json:
            print(_json.dumps(info, indent=2, default=str))
            return 0
        _warn_info(info)
        state = "clean" if info["clean"] else ("truncated" if info["truncated"] else "no index")
        print(f"trace     {info['path']}  ({fmt_bytes(info['size'])}, {state})")
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["wall_time"] or 0))
        print(f"run       {info['run_id']}  recorded {started}")
        print(
            f"span      {fmt_ns(info['duration_ns'])}  ·  {info['events']:,} events in "
            f"{info['batches']:,} batches  ·  {info['keyframes']} keyframes"
        )
        print(f"workers   {len(info['workers'])}")
        for w in info["workers"]:
            print(
                f"  {w.get('id')!s:>4}  {w.get('device') or 'N/A':<14} {w.get('host') or 'N/A'}"
                f"  pid {w.get('pid') or 'N/A'}"
            )
        print(
            "events    "
            + ("  ".join(f"{k} {v:,}" for k, v in sorted(info["counts"].items())) or "none")
        )
        drops = info["drops"]
        print(
            "dropped   "
            + (", ".join(f"{s} {n:,}" for s, n in sorted(drops.items())) if drops else "none")
        )
        return 0

    return _guard(path, run)


def _warn_info(info: dict) -> None:
    if info.get("warning"):
        print(f"gt: warning: {info['path']}: {info['warning']}", file=sys.stderr)


# -- stats -------------------------------------------------------------------------------------


class _Intervals:
    """A union of time intervals, merged as they arrive (mostly in order)."""

    def __init__(self) -> None:
        self.spans: list[list[int]] = []
        self.sorted = True

    def add(self, t0: int, t1: int) -> None:
        s = self.spans
        if s and t0 <= s[-1][1]:
            if t0 >= s[-1][0]:
                s[-1][1] = max(s[-1][1], t1)
                return
            self.sorted = False
        s.append([t0, t1])

    def merged(self) -> list[list[int]]:
        if self.sorted:
            return self.spans
        out: list[list[int]] = []
        for t0, t1 in sorted(self.spans):
            if out and t0 <= out[-1][1]:
                out[-1][1] = max(out[-1][1], t1)
            else:
                out.append([t0, t1])
        return out

    def total(self) -> int:
        return sum(b - a for a, b in self.merged())

    def union(self, other: _Intervals) -> int:
        both = _Intervals()
        for t0, t1 in sorted(self.merged() + other.merged()):
            both.add(t0, t1)
        return both.total()


def trace_stats(reader: Reader, op_names: list[str] | None = None) -> dict:
    """Per worker compute/comm/idle time, batches, bytes moved, and the top ops (pure; no printing).

    Shares are of the whole trace's span. Op times need per-instruction durations (``GT_TRACE=full``).
    """
    names = list(op_names or reader.header.get("op_names") or [])
    per: dict[Any, dict] = {}
    op_time: dict[Any, int] = {}
    op_count: dict[Any, int] = {}
    compute: dict[Any, _Intervals] = {}
    comm: dict[Any, _Intervals] = {}

    def worker(w: Any) -> dict:
        if w not in per:
            per[w] = {
                "batches": 0,
                "instructions": 0,
                "hot": 0,
                "errors": 0,
                "sent": 0,
                "recv": 0,
                "op_time": {},
            }
            compute[w], comm[w] = _Intervals(), _Intervals()
        return per[w]

    for w in reader.workers():  # workers that never ran anything still get a row
        if isinstance(w.get("id"), int):
            worker(w["id"])
    for b in reader.batches():
        for kind, _, f in b.events:
            if kind == E.EXEC:
                w = f.get("worker")
                s = worker(w)
                s["batches"] += 1
                s["hot"] += bool(f.get("hot"))
                s["errors"] += int(f.get("errors") or 0)
                t0, t1 = f.get("t0"), f.get("t1")
                if isinstance(t0, int) and isinstance(t1, int) and t1 >= t0:
                    compute[w].add(t0, t1)
                ops = f.get("ops") or []
                s["instructions"] += len(ops)
                durs = f.get("durs") or []
                for i, code in enumerate(ops):
                    op_count[code] = op_count.get(code, 0) + 1
                    if i < len(durs) and isinstance(durs[i], int):
                        op_time[code] = op_time.get(code, 0) + durs[i]
                        s["op_time"][code] = s["op_time"].get(code, 0) + durs[i]
            elif kind == E.TRANSFER:
                w = f.get("worker")
                s = worker(w)
                t0, t1 = f.get("t0"), f.get("t1")
                if isinstance(t0, int) and isinstance(t1, int) and t1 >= t0:
                    comm[w].add(t0, t1)
                key = "sent" if f.get("direction") == "send" else "recv"
                s[key] += int(f.get("bytes") or 0)

    def name(code: Any) -> str:
        return names[code] if isinstance(code, int) and 0 <= code < len(names) else f"op{code}"

    summary = reader.summary()
    span = max(0, (summary.get("t_last") or 0) - (summary.get("t_first") or 0))
    workers_out = {}
    for w, s in per.items():
        c, m = compute[w].total(), comm[w].total()
        busy = compute[w].union(comm[w])
        top = sorted(s.pop("op_time").items(), key=lambda kv: -kv[1])[:5]
        workers_out[w] = {
            **s,
            "compute_ns": c,
            "comm_ns": m,
            "busy_ns": busy,
            "compute": c / span if span else None,
            "comm": m / span if span else None,
            "idle": max(0.0, 1 - busy / span) if span else None,
            "top_ops": [[name(k), v] for k, v in top],
        }
    total_time = sum(op_time.values())
    return {
        "span_ns": span,
        "workers": workers_out,
        "has_durations": bool(op_time),
        "top_by_time": [
            [name(k), v, op_count.get(k, 0)]
            for k, v in sorted(op_time.items(), key=lambda kv: -kv[1])[:10]
        ],
        "top_by_count": [
            [name(k), n] for k, n in sorted(op_count.items(), key=lambda kv: -kv[1])[:10]
        ],
        "op_time_ns": total_time,
    }


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{100 * x:.1f}%"


def cmd_trace_stats(path: str | os.PathLike[str], json: bool = False) -> int:
    """Print per-worker compute/comm/idle shares, bytes moved and the top ops of a trace.

    Args:
        path: the ``.gtrace`` file.
        json: print one JSON object instead of text.
    """

    def run() -> int:
        with Reader(path) as r:
            _warn(r)
            st = trace_stats(r)
            workers = {w.get("id"): w for w in r.workers()}
        if json:
            print(_json.dumps(st, indent=2, default=str))
            return 0
        print(f"{path}: {fmt_ns(st['span_ns'])}, {len(st['workers'])} workers")
        print()
        print(
            f"{'worker':<8}{'device':<16}{'compute':>8}{'comm':>8}{'idle':>8}{'batches':>10}"
            f"{'instrs':>10}{'sent':>12}{'recv':>12}"
        )
        for w in sorted(st["workers"], key=lambda x: (str(type(x)), x)):
            s = st["workers"][w]
            dev = str(workers.get(w, {}).get("device") or "N/A")[:15]
            print(
                f"{w!s:<8}{dev:<16}{_pct(s['compute']):>8}{_pct(s['comm']):>8}{_pct(s['idle']):>8}"
                f"{s['batches']:>10,}{s['instructions']:>10,}{fmt_bytes(s['sent']):>12}{fmt_bytes(s['recv']):>12}"
            )
        print()
        if not st["top_by_count"]:
            print("top ops: none (no instructions recorded)")
            return 0
        if st["has_durations"]:
            print("top ops by time")
            for name, ns, count in st["top_by_time"]:
                share = ns / st["op_time_ns"] if st["op_time_ns"] else 0
                print(
                    f"  {name:<16}{fmt_ns(ns):>12}{_pct(share):>8}{count:>10,} calls"
                    f"{fmt_ns(ns / count if count else 0):>12} each"
                )
        else:
            print(
                "top ops by time: N/A (no per-instruction durations; recorded with GT_TRACE=summary)"
            )
        print("top ops by count")
        for name, count in st["top_by_count"]:
            print(f"  {name:<16}{count:>10,}")
        return 0

    return _guard(path, run)


# -- export ------------------------------------------------------------------------------------


def cmd_export(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    window: str | tuple | None = None,
    workers: str | Iterable[int] | None = None,
) -> int:
    """Export a trace to Chrome trace JSON for Perfetto.

    Args:
        path: the ``.gtrace`` file.
        out: the JSON file (default: the trace's name with ``.json``).
        window: ``"START:END"`` since the first event, e.g. ``"10s:20s"``, ``"1.5s:"``, ``":500ms"``.
        workers: only these workers, ``"0,1"`` or a list of ids.
    """
    try:
        win = parse_window(window)
        ws = parse_workers(workers)
    except ValueError as exc:
        return _fail(str(exc))
    target = Path(out) if out is not None else Path(path).with_suffix(".json")

    def run() -> int:
        with Reader(path) as r:
            _warn(r)
            try:
                counts = export_chrome(r, target, window=win, workers=ws)
            except OSError as exc:
                return _fail(f"{target}: cannot write ({exc.strerror or exc})")
        rate = counts["events_in"] / counts["seconds"] if counts["seconds"] else 0
        print(
            f"wrote {target}: {counts['slices']:,} slices, {counts['flows']:,} flows, "
            f"{counts['counters']:,} counters, {counts['instants']:,} instants "
            f"({fmt_bytes(counts['bytes'])}, {counts['events_in']:,} events in "
            f"{counts['seconds']:.2f} s, {rate:,.0f} events/s); open it at https://ui.perfetto.dev"
        )
        return 0

    return _guard(path, run)
