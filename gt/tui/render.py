"""Pure renderables: plain data in, Rich ``Text`` out. No app, no widgets, no clock.

Everything the monitor draws that has any logic in it lives here (or in
:mod:`gt.tui.tables`), so it can be unit-tested by looking at the characters and styles.
``None`` always draws as ``N/A``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence

import numpy as np
from rich.text import Text

from gt.trace.state import COMM, WAIT, Lane, Mark

NA = "N/A"
NA_STYLE = "dim"
# One glyph and one colour per part of a worker's time, the same in the share bars, the timeline
# and the legend, so a bar can be read without colour too: █ compute, ▒ comm, ░ wait, · idle.
COMPUTE_STYLE = "green"
COMM_STYLE = "magenta"
WAIT_STYLE = "yellow"
IDLE_STYLE = "bright_black"
COMPUTE_CHAR, COMM_CHAR, WAIT_CHAR, IDLE_CHAR = "█", "▒", "░", "·"
MEMORY_STYLE = "cyan"
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


def short_bytes(n: float | None) -> str:
    """Bytes in at most four characters where possible: ``512B``, ``1.5K``, ``300M``, ``12G``."""
    if n is None:
        return NA
    n = float(n)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if unit == "B" or abs(n) >= 10 else f"{n:.1f}{unit}"
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


def human_span(ns: float) -> str:
    """A span of time with at most three significant digits: ``250ms``, ``2.31s``, ``2m19s``.

    Axis labels, window lengths and "before vs after" spans all use it, so a measured span never
    prints as ``2.31116s``.
    """
    ns = max(0.0, float(ns))
    if ns < 1_000_000:
        return f"{ns / 1000:.3g}us"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.3g}ms"
    s = ns / 1e9
    if s < 60:
        return f"{s:.3g}s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s" if sec else f"{m}m"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if m else f"{h}h"


def percent(x: float | None) -> str:
    """``37%``; ``N/A`` for ``None``."""
    return NA if x is None else f"{x * 100:.0f}%"


def na_text(value: str | None, style: str = "") -> Text:
    """A cell: the string, or a dim ``N/A``."""
    return Text(NA, style=NA_STYLE) if value is None or value == NA else Text(value, style=style)


# ---------------------------------------------------------------------- bars
def share_bar(
    compute: float | None,
    comm: float | None,
    wait: float | None,
    idle: float | None,
    width: int = 10,
) -> Text:
    """A stacked bar of a worker's time: compute █, comm ▒, wait ░, idle · (they add up to 1).

    Each part gets its rounded share of the cells; whatever rounding leaves over is idle.
    """
    if compute is None or width <= 0:
        return Text(NA.ljust(max(width, 0)), style=NA_STYLE)
    text = Text()
    left = width
    for share, char, style in ((compute, COMPUTE_CHAR, COMPUTE_STYLE), (comm, COMM_CHAR, COMM_STYLE),
                               (wait, WAIT_CHAR, WAIT_STYLE)):  # fmt: skip
        n = max(0, min(left, round((share or 0.0) * width)))
        if n:
            text.append(char * n, style=style)
        left -= n
    text.append(IDLE_CHAR * left, style=IDLE_STYLE)
    return text


def memory_capacity(memory: object, device_total: int | None = None) -> int | None:
    """What a worker's used memory is measured against: its pool's limit, else the device's size
    (the memory sample's ``capacity``, else NVML's total), else ``None``."""
    limit = getattr(memory, "limit", None)
    capacity = getattr(memory, "capacity", None)  # newer memory samples carry the device's size
    return limit or capacity or device_total or None


def memory_cached(memory: object) -> int | None:
    """Bytes the allocator keeps free for reuse: the sample's ``cached``, else reserved - used."""
    cached = getattr(memory, "cached", None)
    if cached is not None:
        return cached
    used, reserved = getattr(memory, "used", None), getattr(memory, "reserved", None)
    return None if used is None or reserved is None else max(0, reserved - used)


def memory_bar(used: int | None, capacity: int | None, width: int = 10) -> Text:
    """Used memory (cyan █) against the capacity (dim ·).

    Without a capacity (no limit, no device size) there is nothing honest to draw a bar against:
    the result is blank, and the caller shows the number alone. Cached blocks (reserved but free)
    are not part of the bar: they are free for reuse, so they are shown apart.
    """
    if width <= 0:
        return Text()
    if used is None or not capacity:
        return Text(" " * width)
    u = max(0, min(width, round(used / capacity * width)))
    if used > 0 and u == 0:
        u = 1  # something is held: never draw it as empty
    text = Text()
    text.append("█" * u, style=MEMORY_STYLE)
    text.append(IDLE_CHAR * (width - u), style=IDLE_STYLE)
    return text


def memory_amount(used: int | None, capacity: int | None) -> str:
    """``300M/2.0G`` (used of capacity), or ``300M`` when there is no capacity."""
    if used is None:
        return NA
    return f"{short_bytes(used)}/{short_bytes(capacity)}" if capacity else short_bytes(used)


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


_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")  # a window title and the like


def output_line(line: str) -> Text:
    """A line a program printed, as a pane shows it: its colours kept, and nothing that would
    move the terminal's cursor or clear it (a ``\\r`` progress bar shows its last state)."""
    return Text.from_ansi(_OSC.sub("", line.rstrip("\r\n").rsplit("\r", 1)[-1]))


def op_color(name: str) -> str:
    """A stable colour per op name (the same in every run and every process)."""
    color = OP_COLORS.get(name)
    return color if color is not None else PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


# ---------------------------------------------------------------------- timeline
def lane_cover(
    lane: Lane, start: int, end: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str | None]]:
    """How much of each of ``width`` cells over ``[start, end]`` a lane's spans cover.

    Returns ``(compute, comm, wait, names)``: nanoseconds per cell of each kind, and per cell the
    op that covers most of its compute (``None`` where nothing computes). A binned span (``busy``
    set) spreads its busy time evenly over its extent; a zero-length span counts as a sliver of
    its cell, so an instant still shows.

    This runs for every lane on every repaint, and a zoomed-out lane holds hundreds of binned
    spans, nearly all inside one or two cells: those are summed with ``bincount``; the few that
    cross more cells (zoomed in) are split one by one.
    """
    comp, comm, wait = np.zeros(width), np.zeros(width), np.zeros(width)
    names: list[str | None] = [None] * max(width, 0)
    spans = lane.spans
    if not spans or width <= 0 or end <= start:
        return comp, comm, wait, names
    dt = (end - start) / width
    t0s, t1s, span_names, span_kinds, busys = zip(*spans)
    t0 = np.array(t0s, dtype=np.float64)
    t1 = np.array(t1s, dtype=np.float64)
    busy = np.array([-1.0 if x is None else x for x in busys], dtype=np.float64)
    kind = np.array([_KIND_CODE.get(k, 0) for k in span_kinds], dtype=np.int64)
    a, b = np.maximum(t0, start), np.minimum(t1, end)
    length = t1 - t0
    density = np.where((busy >= 0) & (length > 0), busy / np.where(length > 0, length, 1.0), 1.0)
    instant = (b == a) & (t0 >= start) & (t0 < end)
    keep = (b > a) | instant
    c0 = np.minimum(((a - start) / dt).astype(np.int64), width - 1)
    c1 = np.minimum(((b - start) / dt).astype(np.int64), width - 1)
    # (span, cell, ns) pieces: the part in c0, the part in c1 when that is the next cell
    split = np.minimum(b, start + (c0 + 1) * dt)
    first = np.where(instant, dt * 0.01, (np.where(c1 > c0, split, b) - a) * density)
    second = np.where(c1 > c0, (b - split) * density, 0.0)
    idx = [np.flatnonzero(keep), np.flatnonzero(keep & (c1 == c0 + 1))]
    cells = [c0[idx[0]], c0[idx[1]] + 1]
    amounts = [first[idx[0]], second[idx[1]]]
    for i in np.flatnonzero(keep & (c1 > c0 + 1)).tolist():  # long spans: every cell they cross
        lo = np.arange(c0[i] + 1, c1[i] + 1)
        cover = (np.minimum(b[i], start + (lo + 1) * dt) - (start + lo * dt)) * density[i]
        idx.append(np.full(len(lo), i))
        cells.append(lo)
        amounts.append(cover)
    which = np.concatenate(idx)
    cell = np.concatenate(cells)
    amount = np.concatenate(amounts)
    k = kind[which]
    comp = np.bincount(cell[k == 0], amount[k == 0], minlength=width)[:width]
    comm = np.bincount(cell[k == 1], amount[k == 1], minlength=width)[:width]
    wait = np.bincount(cell[k == 2], amount[k == 2], minlength=width)[:width]
    on = k == 0
    if on.any():
        distinct = sorted(set(span_names[i] for i in which[on].tolist()))
        code = {n: j for j, n in enumerate(distinct)}
        name_of = np.array([code.get(n, 0) for n in span_names], dtype=np.int64)
        flat = cell[on] * len(distinct) + name_of[which[on]]
        by_name = np.bincount(flat, amount[on], minlength=width * len(distinct))
        top = by_name[: width * len(distinct)].reshape(width, len(distinct)).argmax(axis=1)
        for c in np.flatnonzero(comp > 0).tolist():
            names[c] = distinct[top[c]]
    return comp, comm, wait, names


_KIND_CODE = {COMM: 1, WAIT: 2}  # everything else computes


def timeline_lane(lane: Lane, start: int, end: int, width: int, marks: Iterable[Mark] = ()) -> Text:
    """One worker's lane over ``[start, end]`` in ``width`` cells.

    Each cell shows what filled most of its time, as the time shares count it (waiting wins over
    communication, communication over compute where they overlap, and idle is a share like the
    others): an op (█, coloured by op, ▌ when under half busy), a transfer (▒ magenta), a wait for
    a transfer or input (░ yellow), or nothing (· dim). Marks draw as a yellow │ over the lane. See
    :func:`lane_cover`.
    """
    if width <= 0 or end <= start:
        return Text()
    dt = (end - start) / width
    comp, comm, wait, names = lane_cover(lane, start, end, width)
    if lane.parts:  # the time split as the shares split it (spans overlap: a batch holds transfers)
        own, comm, wait, _ = lane_cover(
            Lane(lane.worker, lane.alive, lane.parts), start, end, width
        )
    else:  # (no split given: a batch's time includes the transfers and waits inside it)
        own = np.clip(comp - comm - wait, 0.0, None)
    idle = (dt - own - comm - wait).tolist()
    comm_l, wait_l, own = comm.tolist(), wait.tolist(), own.tolist()
    mark_cols = {
        min(width - 1, int((m.t_ns - start) / dt)) for m in marks if start <= m.t_ns <= end
    }
    dim = " dim" if not lane.alive else ""
    half = dt * 0.5
    cells: list[tuple[str, str]] = []
    for c in range(width):
        cm, wt, most = comm_l[c], wait_l[c], max(own[c], comm_l[c], wait_l[c])
        if c in mark_cols:
            cells.append(("│", MARK_STYLE))
        elif most <= 0 or idle[c] > most:
            cells.append((IDLE_CHAR, IDLE_STYLE))
        elif own[c] > 0 and own[c] >= cm and own[c] >= wt:
            cells.append(("█" if own[c] >= half else "▌", op_color(names[c] or "batch") + dim))
        elif wt >= cm:
            cells.append((WAIT_CHAR, WAIT_STYLE + dim))
        else:
            cells.append((COMM_CHAR, COMM_STYLE + dim))
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


def timeline_lines(
    lanes: Sequence[Lane],
    start: int,
    end: int,
    width: int,
    marks: Sequence[Mark] = (),
    *,
    paused: bool = False,
    label_width: int = 5,
    flags: bool = True,
) -> list[Text]:
    """A row of mark flags (``flags``), every lane with its label, and the time axis: one
    ``Text`` per line."""
    inner = max(0, width - label_width)
    out: list[Text] = []
    if flags:
        row = Text(" " * label_width)
        row.append_text(timeline_marks_row(marks, start, end, inner))
        out.append(row)
    for lane in lanes:
        label = f"w{lane.worker}" + ("✗" if not lane.alive else "")
        row = Text(
            label[: label_width - 1].ljust(label_width),
            style=DEAD_STYLE if not lane.alive else "bold",
        )
        row.append_text(timeline_lane(lane, start, end, inner, marks))
        out.append(row)
    axis = Text(" " * label_width)
    axis.append_text(timeline_axis(start, end, inner, paused=paused))
    out.append(axis)
    return out


def timeline(
    lanes: Sequence[Lane],
    start: int,
    end: int,
    width: int,
    marks: Sequence[Mark] = (),
    *,
    paused: bool = False,
    label_width: int = 5,
    flags: bool = True,
) -> Text:
    """:func:`timeline_lines` as one ``Text``."""
    lines = timeline_lines(lanes, start, end, width, marks, paused=paused,
                           label_width=label_width, flags=flags)  # fmt: skip
    return Text("\n").join(lines)


def timeline_legend(lanes: Sequence[Lane], start: int, end: int, limit: int = 6) -> Text:
    """The ops that fill the most time in the window, each in its colour, then the symbols."""
    totals: dict[str, int] = {}
    for lane in lanes:
        for s in lane.spans:
            if s.kind not in (COMM, WAIT):
                totals[s.name] = totals.get(s.name, 0) + max(0, min(s.t1, end) - max(s.t0, start))
    text = Text()
    for name, _t in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
        text.append("█", style=op_color(name))
        text.append(f" {name}  ")
    text.append(COMM_CHAR, style=COMM_STYLE)
    text.append(" transfer  ")
    text.append(WAIT_CHAR, style=WAIT_STYLE)
    text.append(" wait  ")
    text.append("│", style=MARK_STYLE)
    text.append(" mark")
    return text
