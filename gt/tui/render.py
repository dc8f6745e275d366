"""Pure renderables: plain data in, Rich ``Text`` out. No app, no widgets, no clock.

Everything the monitor draws that has any logic in it lives here (or in
:mod:`gt.tui.tables`), so it can be unit-tested by looking at the characters and styles.
``None`` always draws as ``N/A``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from rich.text import Text

from gt.trace.state import COMM, Lane, Mark

NA = "N/A"
NA_STYLE = "dim"
COMPUTE_STYLE = "green"
COMM_STYLE = "magenta"
IDLE_STYLE = "bright_black"
MARK_STYLE = "bold yellow"
DEAD_STYLE = "red"
# Tableau 20: distinct hues that read on dark and light backgrounds.
PALETTE = (
    "#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#8cd17d", "#b6992d", "#f1ce63", "#499894",
    "#86bcb6", "#e15759", "#ff9d9a", "#79706e", "#bab0ac", "#d37295", "#fabfd2", "#b07aa1", "#d4a6c8",
    "#9d7660", "#d7b5a6",
)  # fmt: skip
# The ops that fill most timelines get colours far apart from each other; the rest are hashed.
OP_COLORS = {
    "matmul": "#4e79a7", "add": "#f28e2b", "mul": "#59a14f", "sub": "#e15759", "div": "#b07aa1",
    "exp": "#f1ce63", "relu": "#499894", "sum": "#d37295", "transpose": "#9d7660", "tanh": "#8cd17d",
    "sigmoid": "#86bcb6", "log": "#ffbe7d", "max": "#ff9d9a", "reshape": "#d4a6c8", "getitem": "#a0cbe8",
    "upload": "#bab0ac", "fetch": "#79706e", "where": "#b6992d", "randn": "#fabfd2", "sqrt": "#d7b5a6",
}  # fmt: skip
SPARK = "▁▂▃▄▅▆▇█"


# ---------------------------------------------------------------------- numbers
def na(value: object, fmt: str = "{}") -> str:
    """``fmt.format(value)``, or ``N/A`` when the value is missing."""
    return NA if value is None else fmt.format(value)


def human_bytes(n: float | None) -> str:
    """Bytes with binary units: ``512B``, ``1.5K``, ``2.0G``; ``N/A`` for ``None``."""
    if n is None:
        return NA
    n = float(n)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return NA  # pragma: no cover


def human_count(x: float | None) -> str:
    """A count with SI suffixes: ``950``, ``12.3k``, ``1.2M``."""
    if x is None:
        return NA
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:.0f}"


def human_rate(x: float | None, unit: str = "/s") -> str:
    """A rate: ``12.3k/s``; ``N/A`` for ``None``."""
    return NA if x is None else human_count(x) + unit


def human_duration(seconds: float | None) -> str:
    """``45.2s``, ``3m05s``, ``2h07m``, ``3d04h``."""
    if seconds is None:
        return NA
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def human_span(ns: int) -> str:
    """A time span for axis labels: ``250ms``, ``10s``, ``2m``."""
    if ns < 1_000_000:
        return f"{ns / 1000:g}us"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:g}ms"
    s = ns / 1e9
    return f"{s:g}s" if s < 120 else f"{s / 60:g}m"


def percent(x: float | None) -> str:
    """``37%``; ``N/A`` for ``None``."""
    return NA if x is None else f"{x * 100:.0f}%"


def na_text(value: str | None, style: str = "") -> Text:
    """A cell: the string, or a dim ``N/A``."""
    return Text(NA, style=NA_STYLE) if value is None or value == NA else Text(value, style=style)


# ---------------------------------------------------------------------- bars
def share_bar(
    compute: float | None, comm: float | None, idle: float | None, width: int = 10
) -> Text:
    """A stacked bar: compute (green █), communication (magenta ▒), idle (dim ░)."""
    if compute is None or width <= 0:
        return Text(NA.ljust(max(width, 0)), style=NA_STYLE)
    c = max(0, min(width, round(compute * width)))
    m = max(0, min(width - c, round((comm or 0.0) * width)))
    text = Text()
    text.append("█" * c, style=COMPUTE_STYLE)
    text.append("▒" * m, style=COMM_STYLE)
    text.append("░" * (width - c - m), style=IDLE_STYLE)
    return text


def memory_bar(used: int | None, reserved: int | None, limit: int | None, width: int = 10) -> Text:
    """A memory bar: used (cyan █), reserved but free (blue ▒), free up to the limit (dim ░).

    The bar's full width is the limit, else the reserved size, else the used size.
    """
    scale = limit or reserved or used
    if used is None or not scale or width <= 0:
        return Text(NA.ljust(max(width, 0)), style=NA_STYLE)
    u = max(0, min(width, round(used / scale * width)))
    r = max(0, min(width - u, round(((reserved or used) - used) / scale * width)))
    text = Text()
    text.append("█" * u, style="cyan")
    text.append("▒" * r, style="blue")
    text.append("░" * (width - u - r), style=IDLE_STYLE)
    return text


def sparkline(
    values: Sequence[float], width: int, *, minimum: float | None = 0.0, style: str = "cyan"
) -> Text:
    """The last ``width`` values as block characters, scaled from ``minimum`` (or their min) to max."""
    vals = list(values)[-width:] if width > 0 else []
    if not vals:
        return Text(NA, style=NA_STYLE)
    lo = min(vals) if minimum is None else minimum
    hi = max(vals)
    span = hi - lo
    top = len(SPARK) - 1
    if span <= 0:
        return Text(SPARK[0] * len(vals), style=style)
    chars = [SPARK[max(0, min(top, round((v - lo) / span * top)))] for v in vals]
    return Text("".join(chars), style=style)


def op_color(name: str) -> str:
    """A stable colour per op name (the same in every run and every process)."""
    color = OP_COLORS.get(name)
    return color if color is not None else PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


# ---------------------------------------------------------------------- timeline
def timeline_lane(lane: Lane, start: int, end: int, width: int, marks: Iterable[Mark] = ()) -> Text:
    """One worker's lane over ``[start, end]`` in ``width`` cells.

    Each cell shows what filled most of its time: an op (█, coloured by op, ▌ when under half
    busy), a transfer (▒ magenta), or nothing (· dim). Marks draw as a yellow │ over the lane.
    A binned span (``busy`` set) spreads its busy time evenly over its extent.
    """
    if width <= 0 or end <= start:
        return Text()
    dt = (end - start) / width
    comp = [0.0] * width
    comm = [0.0] * width
    names: list[dict[str, float] | None] = [None] * width
    for s in lane.spans:
        a, b = max(s.t0, start), min(s.t1, end)
        if b < a or (b == a and not start <= s.t0 < end):
            continue
        density = 1.0
        if s.busy is not None and s.t1 > s.t0:
            density = s.busy / (s.t1 - s.t0)
        c0 = min(width - 1, int((a - start) / dt))
        c1 = min(width - 1, int((b - start) / dt))
        for c in range(c0, c1 + 1):
            lo = start + c * dt
            cover = (min(b, lo + dt) - max(a, lo)) * density if b > a else dt * 0.01
            if cover <= 0:
                continue
            if s.kind == COMM:
                comm[c] += cover
            else:
                comp[c] += cover
                d = names[c]
                if d is None:
                    d = names[c] = {}
                d[s.name] = d.get(s.name, 0.0) + cover
    mark_cols = {
        min(width - 1, int((m.t_ns - start) / dt)) for m in marks if start <= m.t_ns <= end
    }
    dim = " dim" if not lane.alive else ""
    cells: list[tuple[str, str]] = []
    for c in range(width):
        if c in mark_cols:
            cells.append(("│", MARK_STYLE))
        elif comp[c] > 0 and comp[c] >= comm[c]:
            d = names[c] or {}
            name = max(d, key=d.__getitem__)
            cells.append(("█" if comp[c] >= dt * 0.5 else "▌", op_color(name) + dim))
        elif comm[c] > 0:
            cells.append(("▒", COMM_STYLE + dim))
        else:
            cells.append(("·", IDLE_STYLE))
    return _runs(cells)


def _runs(cells: list[tuple[str, str]]) -> Text:
    """Text from (char, style) cells, one span per run of equal style."""
    text = Text()
    i = 0
    while i < len(cells):
        style = cells[i][1]
        j = i
        while j < len(cells) and cells[j][1] == style:
            j += 1
        text.append("".join(ch for ch, _ in cells[i:j]), style=style)
        i = j
    return text


def timeline_axis(start: int, end: int, width: int, *, paused: bool = False) -> Text:
    """The time axis under the lanes: labels relative to the right edge (``now``)."""
    if width <= 0:
        return Text()
    cells = [" "] * width
    total = end - start
    ticks = max(1, min(5, width // 14))
    for i in range(ticks + 1):
        ago = total - round(i * total / ticks)
        label = ("paused" if paused else "now") if ago == 0 else f"-{human_span(ago)}"
        col = round(i * (width - 1) / ticks)
        pos = 0 if i == 0 else width - len(label) if i == ticks else col - len(label) // 2
        pos = max(0, min(width - len(label), pos))
        for j, ch in enumerate(label):
            cells[pos + j] = ch
    return Text("".join(cells), style="dim")


def timeline_marks_row(marks: Iterable[Mark], start: int, end: int, width: int) -> Text:
    """A row of ``▼label`` flags over the lanes, one per mark in the window."""
    cells = [" "] * max(width, 0)
    if width <= 0 or end <= start:
        return Text()
    dt = (end - start) / width
    for m in sorted(marks, key=lambda m: m.t_ns):
        if not start <= m.t_ns <= end:
            continue
        col = min(width - 1, int((m.t_ns - start) / dt))
        label = "▼" + m.label
        for j, ch in enumerate(label[: width - col]):
            cells[col + j] = ch
    return Text("".join(cells), style=MARK_STYLE)


def timeline(
    lanes: Sequence[Lane],
    start: int,
    end: int,
    width: int,
    marks: Sequence[Mark] = (),
    *,
    paused: bool = False,
    label_width: int = 5,
) -> Text:
    """Every lane with its label, a row of mark flags above and a time axis below."""
    inner = max(0, width - label_width)
    out = Text()
    out.append(" " * label_width)
    out.append_text(timeline_marks_row(marks, start, end, inner))
    for lane in lanes:
        out.append("\n")
        label = f"w{lane.worker}" + ("✗" if not lane.alive else "")
        out.append(
            label[: label_width - 1].ljust(label_width),
            style=DEAD_STYLE if not lane.alive else "bold",
        )
        out.append_text(timeline_lane(lane, start, end, inner, marks))
    out.append("\n" + " " * label_width)
    out.append_text(timeline_axis(start, end, inner, paused=paused))
    return out


def timeline_legend(lanes: Sequence[Lane], start: int, end: int, limit: int = 6) -> Text:
    """The ops that fill the most time in the window, each in its colour, then the symbols."""
    totals: dict[str, int] = {}
    for lane in lanes:
        for s in lane.spans:
            if s.kind != COMM:
                totals[s.name] = totals.get(s.name, 0) + max(0, min(s.t1, end) - max(s.t0, start))
    text = Text()
    for name, _t in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
        text.append("█", style=op_color(name))
        text.append(f" {name}  ")
    text.append("▒", style=COMM_STYLE)
    text.append(" transfer  ")
    text.append("│", style=MARK_STYLE)
    text.append(" mark")
    return text
