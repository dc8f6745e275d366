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
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from gt.trace.export import export_chrome
from gt.trace.facts import plain
from gt.trace.keyframes import attach
from gt.trace.model import ClusterModel
from gt.trace.reader import Reader, TraceFormatError
from gt.trace.records import as_text
from gt.trace.state import MemoryState
from gt.trace.timeshare import KINDS, lifetime, shares

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
    except BrokenPipeError:
        raise  # our reader went away (`gt trace stats F | head`): not a problem of the file
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
        with Reader(path, skip_damaged=True) as r:
            damaged = r.verify()  # (a file with an index may still hold a damaged record)
            info = r.info()
        info["damaged"] = damaged
        if damaged:
            info["clean"] = False
        if json:
            print(_json.dumps(plain(info), indent=2))
            return 0
        _warn_info(info)
        state = (
            f"{damaged} damaged record(s), skipped"
            if damaged
            else "clean"
            if info["clean"]
            else ("truncated" if info["truncated"] else "no index")
        )
        print(f"trace     {info['path']}  ({fmt_bytes(info['size'])}, {state})")
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["wall_time"] or 0))
        print(f"run       {as_text(info['run_id'], 80)}  recorded {started}")
        print(
            f"span      {fmt_ns(info['duration_ns'])}  ·  {info['events']:,} events in "
            f"{info['batches']:,} batches  ·  {info['keyframes']} keyframes"
        )
        print(f"workers   {len(info['workers'])}")
        for w in info["workers"]:  # the fields are as recorded: anything, shown short
            dev, host, pid = (as_text(w.get(k), 60) or "N/A" for k in ("device", "host", "pid"))
            print(f"  {w['id']!s:>4}  {dev:<14} {host}  pid {pid}")
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


def trace_stats(reader: Reader, op_names: list[str] | None = None) -> dict:
    """Per worker: compute, communication, waiting and idle time, batches, bytes moved, top ops.

    The trace is folded into the same cluster model ``gt top`` uses, so the numbers are the
    model's: the four shares of a worker add up to 100 % of the time it was in the trace (from
    its start, or the worker's first event, to its end, or the worker's death; see
    :mod:`gt.trace.timeshare`). Op times need per-instruction durations (``GT_TRACE=full``).
    """
    names = list(op_names or reader.header.get("op_names") or [])
    model = ClusterModel(names, count_gaps=False)
    attach(model, reader.workers())  # workers that never ran anything still get a row
    for b in reader.batches():
        model.apply_batch(b.source, b.first_seq, b.events)
    summary = reader.summary()
    t_first, t_last = summary.get("t_first") or 0, summary.get("t_last") or 0
    span = max(0, t_last - t_first)
    state = model.state(t_last)
    at_start = {w.get("id") for w in reader.header.get("workers") or () if isinstance(w, dict)}
    op_time: Counter = Counter()
    op_count: Counter = Counter()
    workers_out = {}
    for w in state.workers:
        rec = model.workers[w.id]
        op_time.update(rec.times)
        op_count.update(rec.counts)
        parts = rec.time.totals()
        joined = None  # (a worker of the header was there from the start)
        if w.id not in at_start:  # else from its first event, or its first span if earlier
            known = [t for t in (rec.seen, rec.time.start()) if t is not None]
            joined = min(known) if known else None
        sh = shares(parts, lifetime(t_first, t_last, joined, rec.left)) or {}
        top = sorted(rec.times.items(), key=lambda kv: -kv[1])[:5]
        workers_out[w.id] = {
            "batches": w.batches, "instructions": w.instructions, "hot": w.hot, "errors": w.errors,
            "sent": w.sent_bytes, "recv": w.received_bytes, "via": w.via,
            **{f"{k}_ns": parts[k] for k in KINDS},
            **{k: sh.get(k) for k in (*KINDS, "idle")},
            "top_ops": [[model.op_name(k), v] for k, v in top],
            "memory": _memory_stats(w.memory),
        }  # fmt: skip
    durations = any(w.ops and sum(o.time_ns for o in w.ops) for w in state.workers)
    return {
        "span_ns": span,
        "workers": workers_out,
        "has_durations": bool(durations) and _has_durs(model),
        "top_by_time": [[model.op_name(k), v, op_count.get(k, 0)] for k, v in op_time.most_common(10)],
        "top_by_count": [[model.op_name(k), n] for k, n in op_count.most_common(10)],
        "op_time_ns": sum(op_time.values()),
        "hot": [{"client": h.client, "name": h.name, "steps": h.steps, "state": h.state,
                 "calls": h.calls, "eager_ns": h.eager_ns, "hot_ns": h.hot_ns,
                 "speedup": h.speedup} for h in state.hot],
    }  # fmt: skip


#: The memory pool's counters ``gt trace stats`` reports, from the worker's last memory sample.
MEMORY_STATS = ("limit", "peak", "spill_out", "spill_in", "prefetched", "prefetch_hits",
                "prefetch_misses", "oom")  # fmt: skip


def _memory_stats(m: MemoryState) -> dict | None:
    """A worker's memory pool as of its last sample (``None``: the trace holds no sample).

    The counters run since the worker started, as the worker reports them, so a trace recorded
    from a cluster's start (``gt run --record``) counts its whole run.
    """
    if m.used is None and m.peak is None:
        return None
    return {k: getattr(m, k) for k in MEMORY_STATS}


def _has_durs(model: ClusterModel) -> bool:
    """Whether any recorded batch carried per-instruction durations."""
    return any(rec[5] for w in model.workers.values() for rec in w.execs)


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{100 * x:.1f}%"


def cmd_trace_stats(path: str | os.PathLike[str], json: bool = False) -> int:
    """Print per-worker compute/comm/wait/idle shares, bytes moved and the top ops of a trace.

    Args:
        path: the ``.gtrace`` file.
        json: print one JSON object instead of text.
    """

    def run() -> int:
        with Reader(path, skip_damaged=True) as r:
            st = trace_stats(r)
            _warn(r)  # (after the pass: it also names the damaged records it skipped)
            workers = {w.get("id"): w for w in r.workers()}
        if json:
            print(_json.dumps(plain(st), indent=2))
            return 0
        print(f"{path}: {fmt_ns(st['span_ns'])}, {len(st['workers'])} workers")
        print()
        print(
            f"{'worker':<8}{'device':<16}{'compute':>8}{'comm':>8}{'wait':>8}{'idle':>8}"
            f"{'batches':>10}{'instrs':>10}{'sent':>12}{'recv':>12}"
        )
        for w in sorted(st["workers"], key=lambda x: (str(type(x)), x)):
            s = st["workers"][w]
            dev = str(workers.get(w, {}).get("device") or "N/A")[:15]
            shares_ = "".join(f"{_pct(s[k]):>8}" for k in ("compute", "comm", "wait", "idle"))
            print(
                f"{w!s:<8}{dev:<16}{shares_}{s['batches']:>10,}{s['instructions']:>10,}"
                f"{fmt_bytes(s['sent']):>12}{fmt_bytes(s['recv']):>12}"
            )
        print("(shares of the whole trace; they add up to 100 % per worker)")
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
        _print_memory(st["workers"])
        _print_hot(st["hot"])
        return 0

    return _guard(path, run)


def _print_memory(workers: dict) -> None:
    """Per worker: its limit, peak, spill traffic and prefetch hits (the pool's own counters)."""
    rows = {w: s["memory"] for w, s in workers.items() if s.get("memory")}
    if not rows:
        return
    print("memory (since each worker started)")
    print(
        f"  {'worker':<8}{'limit':>11}{'peak':>11}{'spill out':>11}{'spill in':>11}"
        f"{'prefetched':>12}{'hits':>7}{'misses':>8}{'oom':>5}"
    )
    for w in sorted(rows, key=lambda x: (str(type(x)), x)):
        m = rows[w]
        limit = "none" if m["limit"] is None else fmt_bytes(m["limit"])
        print(
            f"  {w!s:<8}{limit:>11}{fmt_bytes(m['peak']):>11}{fmt_bytes(m['spill_out']):>11}"
            f"{fmt_bytes(m['spill_in']):>11}{fmt_bytes(m['prefetched']):>12}"
            f"{m['prefetch_hits']:>7,}{m['prefetch_misses']:>8,}{m['oom']:>5,}"
        )


def _print_hot(hot: list[dict]) -> None:
    """The steps captured with ``gt.hot``: calls, and time per call eager and replayed."""
    if not hot:
        return
    print("hot paths (gt.hot; time per call as the program saw it)")
    for h in hot:
        line = f"  c{h['client']} {h['name']:<20}{h['steps']:>6} instr{h['calls']:>10,} calls  "
        if h["state"] != "replaying":
            line += h["state"]
        else:
            line += f"{fmt_ns(h['eager_ns'])} -> {fmt_ns(h['hot_ns'])} a call"
            if h["speedup"] is not None:
                line += f"  ({h['speedup']:.2f}x)"
        print(line)


# -- export ------------------------------------------------------------------------------------


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


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
    if str(target) == "-":
        target = Path("/dev/stdout")
    if _same_file(path, target):
        return _fail(f"{target}: is the trace itself; give another output (-o FILE.json)")
    # (the summary goes to stderr when the JSON goes to stdout)
    say = sys.stderr if str(target).startswith("/dev/") else sys.stdout

    def run() -> int:
        with Reader(path, skip_damaged=True) as r:
            length = (r.t_last or 0) - (r.t_first or 0)
            if win is not None and win[0] is not None and win[0] > length:
                return _fail(f"the window starts at {win[0] / 1e9:g} s, after the trace ends "
                             f"({length / 1e9:.2f} s): nothing to export")  # fmt: skip
            try:
                counts = export_chrome(r, target, window=win, workers=ws)
            except OSError as exc:
                return _fail(f"{target}: cannot write ({exc.strerror or exc})")
            _warn(r)
        if ws is not None and not counts["workers"] and not str(target).startswith("/dev/"):
            target.unlink(missing_ok=True)  # (an empty trace would look like a working export)
            return _fail(f"no worker {','.join(map(str, ws))} in {path}: nothing written")
        rate = counts["events_in"] / counts["seconds"] if counts["seconds"] else 0
        print(
            f"wrote {target}: {counts['slices']:,} slices, {counts['flows']:,} flows, "
            f"{counts['counters']:,} counters, {counts['instants']:,} instants "
            f"({fmt_bytes(counts['bytes'])}, {counts['events_in']:,} events in "
            f"{counts['seconds']:.2f} s, {rate:,.0f} events/s); open it at https://ui.perfetto.dev",
            file=say,
        )
        return 0

    return _guard(path, run)
