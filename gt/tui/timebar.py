"""The replay time bar, drawn purely: positions, moments and a window in, Rich ``Text`` out.

Also :func:`parse_time`, which reads what the user types to jump (``42s``, ``1m30s``, ``+5s``,
``-250ms``, ``50%``, ``1:02``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text

from gt.trace import events as E
from gt.tui.render import MARK_STYLE, human_span

MOMENT_STYLES = {E.MARK: MARK_STYLE, E.ERROR: "bold red", E.CONFIG: "bold cyan"}
MOMENT_CHARS = {E.MARK: "▼", E.ERROR: "✖", E.CONFIG: "◆"}
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
          "m": 60_000_000_000, "min": 60_000_000_000, "h": 3_600_000_000_000}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|min|s|m|h)?")


@dataclass(frozen=True)
class BarState:
    """What the time bar shows (plain data; the widget builds it from the replay source)."""

    t_start: int
    t_end: int
    pos: int
    paused: bool
    speed: float
    interval_ns: int
    moments: tuple[tuple[int, str], ...] = ()  # (t_ns, kind)
    selection: tuple[int, int] | None = None


def fmt_time(ns: int) -> str:
    """A position as ``m:ss.mmm`` (``h:mm:ss.mmm`` past an hour), rounded to the millisecond as
    the header's ``1.234s`` is (a truncated bar would read 1 ms behind it)."""
    ns = max(0, int(ns))
    ms_total = (ns + 500_000) // 1_000_000
    s, ms = divmod(ms_total, 1000)
    m, s = divmod(s, 60)
    if m >= 60:
        h, m = divmod(m, 60)
        return f"{h}:{m:02d}:{s:02d}.{ms:03d}"
    return f"{m}:{s:02d}.{ms:03d}"


def bar_line(b: BarState, width: int) -> Text:
    """The bar: played (━), to come (─), the selected window (highlighted), moments, the head (●)."""
    if width <= 0:
        return Text()
    span = max(1, b.t_end - b.t_start)

    def col(t: int) -> int:
        return max(0, min(width - 1, int((t - b.t_start) / span * (width - 1) + 0.5)))

    head = col(b.pos)
    cells = [("━", "bold green") if c < head else ("─", "bright_black") for c in range(width)]
    if b.selection is not None:
        a, z = col(b.selection[0]), col(b.selection[1])
        for c in range(a, z + 1):
            cells[c] = (cells[c][0], "black on yellow")
    for t, kind in sorted(b.moments, key=lambda m: _priority(m[1])):
        if b.t_start <= t <= b.t_end:
            cells[col(t)] = (MOMENT_CHARS.get(kind, "│"), MOMENT_STYLES.get(kind, ""))
    cells[head] = ("●", "bold white" if not b.paused else "bold yellow")
    text = Text()
    for ch, style in cells:
        text.append(ch, style=style)
    return text


def _priority(kind: str) -> int:
    """Errors draw over config changes, which draw over marks."""
    return {E.MARK: 0, E.CONFIG: 1, E.ERROR: 2}.get(kind, 0)


def status_line(b: BarState) -> Text:
    """``▶ x4  0:42.000 / 1:30.000  step 1s  window 0:10.000–0:20.000`` and the legend."""
    t = Text()
    t.append(
        "⏸ paused" if b.paused else "▶ playing", style="bold yellow" if b.paused else "bold green"
    )
    t.append(f"  x{b.speed:g}", style="bold")
    t.append(
        f"  {fmt_time(b.pos - b.t_start)} / {fmt_time(b.t_end - b.t_start)}", style="bold cyan"
    )
    t.append(f"  step {human_span(b.interval_ns)}")
    if b.selection is not None:
        a, z = (x - b.t_start for x in b.selection)
        t.append("  window ", style="")
        t.append(
            f"{fmt_time(a)}–{fmt_time(z)}" if z > a else f"from {fmt_time(a)}…",
            style="black on yellow",
        )
    t.append("   ")
    for kind, name in ((E.MARK, "mark"), (E.ERROR, "error"), (E.CONFIG, "config")):
        t.append(MOMENT_CHARS[kind], style=MOMENT_STYLES[kind])
        t.append(f" {name} ", style="dim")
    return t


def time_bar(b: BarState, width: int) -> Text:
    """Both lines of the time bar."""
    text = bar_line(b, width)
    text.append("\n")
    text.append_text(status_line(b))
    return text


def moments_of(items: Iterable) -> tuple[tuple[int, str], ...]:
    """``(t_ns, kind)`` pairs from :class:`~gt.trace.index.Moment` s."""
    return tuple((m.t_ns, m.kind) for m in items)


def parse_duration(text: str) -> int:
    """``1m30s``, ``250ms``, ``1.5`` (seconds), ``1:02`` (m:ss) or ``1:02:03`` -> ns.

    Raises:
        ValueError: not a duration.
    """
    s = text.strip().lower().replace(" ", "")
    if not s:
        raise ValueError("empty time")
    if ":" in s:
        parts = s.split(":")
        if len(parts) > 3 or not all(parts):
            raise ValueError(f"not a time: {text!r}")
        secs = 0.0
        for p in parts:
            secs = secs * 60 + float(p)
        return int(secs * 1e9)
    total, pos = 0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"not a time: {text!r} (try 42s, 1m30s, 250ms, +5s, 50%)")
        total += int(float(m.group(1)) * _UNITS[m.group(2) or "s"])
        pos = m.end()
    return total


def parse_time(text: str, t_start: int, t_end: int, pos: int) -> int:
    """Where a "jump to" entry points on the run clock: relative (``+5s``/``-5s``), a share of the
    recording (``50%``) or a time since its start (``42s``). Clamped to the recording.

    Raises:
        ValueError: the text is not a time.
    """
    s = text.strip()
    if s.endswith("%"):
        share = float(s[:-1]) / 100
        t = t_start + int((t_end - t_start) * share)
    elif s[:1] in "+-" and s[1:2] != "":
        d = parse_duration(s[1:])
        t = pos + d if s[0] == "+" else pos - d
    else:
        t = t_start + parse_duration(s)
    return max(t_start, min(t_end, t))
