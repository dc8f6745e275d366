"""What a config change did: per worker, busy share, instructions/s and batch time before vs after,
and the step time (between consecutive marks), all from the recorded ``exec`` and ``mark`` events.

Events do not name the signal an instruction was made under, so a signal's part is shown as the
workers its rule names before and after the change (starred in the table).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from gt.runtime.sharding import config as C
from gt.trace import events as E
from gt.trace.records import union_length
from gt.trace.state import ConfigChange
from gt.tui.render import human_count, human_span

SPAN_NS = 5_000_000_000  # compare this much time on each side of the change


@dataclass(frozen=True)
class Side:
    """One worker on one side of the change."""

    busy: float | None  # share of the window inside exec batches
    rate: float | None  # instructions per second
    batch_ns: float | None  # mean exec batch duration


def side(execs: list[tuple[int, int, int]], lo: int, hi: int) -> Side:
    """Busy share, rate and mean batch time of ``(t0, t1, n)`` execs within ``[lo, hi]``."""
    if hi <= lo:
        return Side(None, None, None)
    inside = [(max(a, lo), min(b, hi), n) for a, b, n in execs if b >= lo and a <= hi]
    if not inside:
        return Side(0.0, 0.0, None)
    busy = union_length([(a, b) for a, b, _ in inside]) / (hi - lo)
    rate = sum(n for *_x, n in inside) / ((hi - lo) / 1e9)
    return Side(busy, rate, sum(b - a for a, b, _ in inside) / len(inside))


def step_time(marks: Iterable[int], lo: int, hi: int) -> float | None:
    """The mean time between consecutive marks inside ``[lo, hi]`` (``None``: fewer than two)."""
    ts = sorted(t for t in marks if lo <= t <= hi)
    return (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else None


def collect(source: Any, lo: int, hi: int) -> tuple[dict[int, list], list[int], int]:
    """``(execs per worker, mark times, now)`` around a change, from a replay's file or a model."""
    execs: dict[int, list] = {}
    marks: list[int] = []
    reader = getattr(source, "reader", None)
    if reader is not None:
        for ev in reader.events(lo - SPAN_NS // 10, hi + SPAN_NS // 10, kinds=(E.EXEC, E.MARK)):
            f = ev.fields
            if ev.kind == E.MARK:
                marks.append(ev.t_ns)
            elif type(f.get("worker")) is int:
                n = f.get("n") if type(f.get("n")) is int else len(f.get("ops") or ())
                execs.setdefault(f["worker"], []).append(
                    (f.get("t0", ev.t_ns), f.get("t1", ev.t_ns), n)
                )
        return execs, marks, source.clock.t_end
    with source._lock:
        model = source.model
        for wid, w in model.workers.items():
            execs[wid] = [(r[0], r[1], r[2]) for r in w.execs if r[1] >= lo and r[0] <= hi]
        marks = [m.t_ns for m in model.marks]
    return execs, marks, source.now()


def impact_text(source: Any, change: ConfigChange, signal: str | None = None) -> Table | Text:
    """The before/after table for ``change`` (at most :data:`SPAN_NS` on each side)."""
    tc = change.t_ns
    lo = tc - SPAN_NS
    execs, marks, now = collect(source, lo, tc + SPAN_NS)
    hi = min(tc + SPAN_NS, now)
    if hi <= tc:
        return Text("the change was just applied: no events after it yet", style="dim")
    starred = _signal_workers(change, signal, sorted(execs))
    # A worker younger than the span is compared over its own life, not over time before it was there
    los = {wid: max(lo, _first_seen(source, wid, tc)) for wid in execs}
    before = tc - min(los.values(), default=lo)
    title = (f"{human_span(before)} before vs {human_span(hi - tc)} after" if before > 0 else
             f"{human_span(hi - tc)} after (no worker before it)")  # fmt: skip
    table = Table(title=title, title_justify="left", box=None, padding=(0, 1))
    for col in ("worker", "busy", "instr/s", "batch"):
        table.add_column(col, justify="right" if col != "worker" else "left", no_wrap=True)
    for wid in sorted(execs):
        b, a = side(execs[wid], los[wid], tc), side(execs[wid], tc, hi)
        mark = "*" if wid in starred else " "
        table.add_row(f"w{wid}{mark}", _pair(b.busy, a.busy, _pct), _pair(b.rate, a.rate, human_count),
                      _pair(b.batch_ns, a.batch_ns, _ms, lower_is_better=True))  # fmt: skip
    sb, sa = step_time(marks, lo, tc), step_time(marks, tc, hi)
    step = Text("step (between marks): ")
    step.append_text(
        _pair(sb, sa, _ms, lower_is_better=True)
        if sb or sa
        else Text("N/A (no marks)", style="dim")
    )
    note = Text()
    if signal:
        note.append(
            f"\n{signal}: workers {sorted(starred) or 'none'} after the change (*)", style="cyan"
        )
    return _group(table, step, note)


def _first_seen(source: Any, wid: int, default: int) -> int:
    """When the source's model first heard of worker ``wid`` (a recording's start at the earliest)."""
    model = getattr(source, "model", None)
    w = model.workers.get(wid) if model is not None else None
    seen = getattr(w, "seen", None)
    return max(0, seen if type(seen) is int else default - SPAN_NS)


def _group(*parts: Any) -> Any:
    from rich.console import Group

    return Group(*parts)


def _signal_workers(change: ConfigChange, signal: str | None, alive: list[int]) -> set[int]:
    if not signal or not isinstance(change.after, dict) or signal not in change.after:
        return set()
    try:
        rule = C.validate({signal: change.after[signal]})["signals"][signal]
    except (C.ConfigError, KeyError):
        return set()
    return set(C.resolve_workers(rule["workers"], alive))


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}ms"


def _pair(before: float | None, after: float | None, fmt, *, lower_is_better: bool = False) -> Text:
    """``before → after`` with the after value green when it improved, red when it got worse."""
    t = Text()
    t.append("N/A" if before is None else fmt(before), style="dim" if before is None else "")
    t.append(" → ")
    style = ""
    if before and after is not None and before != after:
        better = after < before if lower_is_better else after > before
        style = "green" if better else "red"
    t.append(
        "N/A" if after is None else fmt(after), style=style or ("dim" if after is None else "")
    )
    return t
