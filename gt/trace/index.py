"""What a replay knows about a whole ``.gtrace`` before playing it: keyframes and moments.

:class:`TraceIndex` reads the keyframes (their time, where they are, how many events of each
kind came before them) and the *moments*: marks, errors and config changes (plus source-line
events, which a replay restored from a compact keyframe needs to name lines). Keyframes count
events per kind, so only the stretches between two keyframes whose counts of those kinds grew are
decoded; a long trace with a few marks opens in milliseconds.

:meth:`TraceIndex.base` picks the keyframe to restore for a target time: the last one written
before any event at the target minus the history the view needs, bounded by an event budget.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from gt.trace import events as E
from gt.trace.checks import TraceFormatError, check_model_snapshot, is_count, is_int, map_of, short
from gt.trace.keyframes import is_model_keyframe
from gt.trace.reader import Batch, Reader
from gt.trace.records import SPAN_HISTORY

#: Kinds the timeline shows as moments (and can jump to).
MOMENT_KINDS = (E.MARK, E.ERROR, E.CONFIG)
_SCANNED = frozenset((*MOMENT_KINDS, E.SRCLOC))
#: At most this many events are folded to rebuild the history before a target time.
WARM_EVENTS = 60_000


class Moment(NamedTuple):
    """One recorded event worth jumping to (or, for ``srcloc``, worth keeping)."""

    t_ns: int
    kind: str
    source: str
    fields: dict

    @property
    def label(self) -> str:
        """A short description for the time bar and notices."""
        f = self.fields  # free-form: whatever a field holds, a label stays short
        if self.kind == E.MARK:
            return f"mark {short(f.get('label', ''))}"
        if self.kind == E.ERROR:
            return f"error: {_text(f.get('message') or '?')}"
        if self.kind == E.CONFIG:
            return f"config applied by {_text(f.get('by') or '?')}"
        return self.kind


@dataclass(frozen=True)
class KeyframeInfo:
    """A keyframe's place: its time, its offset, the events per kind before it (or ``None``)."""

    t_ns: int
    offset: int
    counts: dict | None
    model: bool  # holds a cluster model (exact restore) rather than the recorder's compact state


class TraceIndex:
    """Keyframes and moments of an open trace (see the module docstring).

    Args:
        reader: an open :class:`~gt.trace.reader.Reader` (the index does not close it).
    """

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.skipped = 0  # damaged keyframes left out
        first = reader.t_first
        self.t_start = first if first is not None else int(reader.header.get("start_ns") or 0)
        last = reader.t_last
        self.t_end = max(self.t_start, last if last is not None else self.t_start)
        self.keyframes = self._read_keyframes()
        self._kf_offsets = [k.offset for k in self.keyframes]
        self.moments: list[Moment] = []
        self.srclocs: list[Moment] = []
        self._scan_moments()
        self._times = {k: [m.t_ns for m in self.moments if m.kind == k] for k in MOMENT_KINDS}
        self._all = [m.t_ns for m in self.moments]

    def _read_keyframes(self) -> list[KeyframeInfo]:
        """The usable keyframes; a damaged one is skipped (a seek uses an earlier one)."""
        out, first = [], None
        for t, offset in self.reader.keyframes:
            try:
                kf = self.reader.read_keyframe(offset)
                st = kf["state"]
                model = is_model_keyframe(st)
                if model:  # checked now, so that a replay can restore it without surprises
                    if not map_of(_is_str, is_int)(st.get("applied") or {}):
                        raise TraceFormatError(f"applied is {short(st.get('applied'))}")
                    check_model_snapshot(st["model"])
            except TraceFormatError as exc:
                self.skipped += 1
                first = first or str(exc).removeprefix(f"{self.reader.path}: ")
                continue
            counts = st.get("counts") if isinstance(st, dict) else None
            ok = map_of(_is_str, is_count)(counts)
            out.append(KeyframeInfo(t, offset, counts if ok else None, model))
        if self.skipped:
            self.reader.note(f"skipped {self.skipped} damaged keyframe(s); the first: {first}")
        return out

    def _scan_moments(self) -> None:
        """Decode only the stretches between keyframes where a moment or a source line was written."""
        r = self.reader
        # model keyframes carry their source lines: only compact ones need srcloc events found
        wanted = _SCANNED if not all(k.model for k in self.keyframes) else frozenset(MOMENT_KINDS)
        lo, prev = r.data_start, {}
        stretches: list[tuple[int, int | None]] = []
        for k in self.keyframes:
            counts = k.counts
            if counts is None or any(counts.get(x, 0) > prev.get(x, 0) for x in wanted):
                stretches.append((lo, k.offset))
            lo, prev = k.offset, counts or {}
        stretches.append((lo, None))
        merged: list[tuple[int, int | None]] = []
        for a, b in stretches:  # neighbouring stretches are read in one go
            if merged and merged[-1][1] == a:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        for a, b in merged:
            for batch in self._batches_between(a, b):
                for kind, t, f in batch.events:
                    if kind in _SCANNED and isinstance(f, dict):
                        m = Moment(t, kind, batch.source, f)
                        (self.srclocs if kind == E.SRCLOC else self.moments).append(m)
        self.moments.sort(key=lambda m: m.t_ns)
        self.srclocs.sort(key=lambda m: m.t_ns)

    def _batches_between(self, start: int, stop: int | None) -> Iterator[Batch]:
        for b in self.reader.batches(start=start):
            if stop is not None and b.offset >= stop:
                return
            yield b

    # -- moments --------------------------------------------------------------------------------

    def next_moment(
        self, t_ns: int, kind: str | None = None, *, forward: bool = True
    ) -> Moment | None:
        """The first moment (of ``kind``, or any) strictly after ``t_ns`` (before it: ``forward=False``)."""
        times = self._all if kind is None else self._times.get(kind, [])
        pool = self.moments if kind is None else [m for m in self.moments if m.kind == kind]
        if forward:
            i = bisect_right(times, t_ns)
            return pool[i] if i < len(pool) else None
        i = bisect_left(times, t_ns) - 1
        return pool[i] if i >= 0 else None

    def moments_until(self, t_ns: int, kinds: tuple[str, ...] | None = None) -> list[Moment]:
        """Moments at or before ``t_ns`` (of these kinds), oldest first."""
        return [m for m in self.moments if m.t_ns <= t_ns and (kinds is None or m.kind in kinds)]

    # -- events ---------------------------------------------------------------------------------

    def neighbour_event(self, t_ns: int, *, forward: bool = True) -> int | None:
        """The time of the nearest recorded event strictly after (or before) ``t_ns``."""
        span = 1_000_000  # look in growing windows: the index skips what lies outside them
        limit = max(self.t_end - self.t_start, 1) * 2
        while True:
            lo, hi = (t_ns + 1, t_ns + span) if forward else (t_ns - span, t_ns - 1)
            best = None
            for ev in self.reader.events(lo, hi):
                if best is None or (ev.t_ns < best if forward else ev.t_ns > best):
                    best = ev.t_ns
            if best is not None:
                return best
            if span > limit or (forward and lo > self.t_end) or (not forward and hi < self.t_start):
                return None
            span *= 8

    # -- keyframes ------------------------------------------------------------------------------

    def base(self, t_ns: int, history_ns: int = 0, workers: int = 1) -> int:
        """The keyframe to restore to show ``t_ns`` with ``history_ns`` of history (-1: none).

        The keyframe precedes every event at or after ``t_ns - history_ns``, or at least enough
        ``exec`` events to fill the model's span history of ``workers`` workers (a dense trace's
        timeline cannot show more than that), and never more than :data:`WARM_EVENTS` events
        before the keyframe for ``t_ns`` itself.
        """
        k_t = self._for_time(t_ns)
        if k_t < 0 or history_ns <= 0:
            return k_t
        k_h = self._for_time(t_ns - history_ns)
        here = self.keyframes[k_t].counts
        enough = SPAN_HISTORY * max(1, workers)
        k = k_t
        while k > k_h and here is not None:
            cur = self.keyframes[k].counts
            before = self.keyframes[k - 1].counts if k > 0 else {}  # k = -1: the start of the file
            if cur is None or before is None or here.get(E.EXEC, 0) - cur.get(E.EXEC, 0) >= enough:
                break
            if sum(here.values()) - sum(before.values()) > WARM_EVENTS:
                break
            k -= 1
        return k

    def _for_time(self, t_ns: int) -> int:
        """The last keyframe written before any event at or after ``t_ns`` (-1: none)."""
        return bisect_right(self._kf_offsets, self.reader.offset_for(t_ns)) - 1

    def keyframe_state(self, k: int) -> tuple[dict, Any]:
        """Keyframe ``k`` as read from the file: ``(record, state)``."""
        kf = self.reader.read_keyframe(self.keyframes[k].offset)
        return kf, kf.get("state")


def _is_str(v: Any) -> bool:
    return type(v) is str


def _text(v: Any) -> str:
    """A free-form field as a short line."""
    return v[:120] if type(v) is str else short(v)
