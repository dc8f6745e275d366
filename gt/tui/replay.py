"""Replaying a ``.gtrace`` recording as if live, on a clock that can pause, speed up and seek.

:class:`ReplaySource` reads the trace lazily (the file is memory-mapped, nothing is loaded up
front) and folds its batches into the same :class:`~gt.trace.model.ClusterModel` a live monitor
uses, up to the :class:`ReplayClock` 's position. A seek backwards, or far forwards, restores the
model from the trace's keyframes (:class:`~gt.trace.index.TraceIndex` picks one) and folds
only the events between it and the target: a model keyframe (written with
:class:`~gt.trace.keyframes.ModelKeyframer`) restores exactly; a recorder's compact keyframe
restores membership, memory, devices, counts and moments, and totals that it lacks are marked
approximate (``≈`` in the header).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from gt.trace import keyframes as K
from gt.trace.export import export_chrome
from gt.trace.index import Moment, TraceIndex
from gt.trace.model import ClusterModel
from gt.trace.reader import Batch, Reader
from gt.trace.recorder import RECORDER_SOURCE
from gt.trace.state import ClusterState
from gt.tui.sources import Source
from gt.tui.tables import Status

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
INTERVALS_NS = tuple(int(x * 1e9) for x in (0.001, 0.01, 0.1, 1, 5, 10, 60))


class ReplayClock:
    """A playback position over ``[t_start, t_end]`` that can pause, change speed and seek.

    Args:
        wall: the wall clock in seconds (injectable for tests; default ``time.monotonic``).
    """

    def __init__(self, t_start: int, t_end: int, *, speed: float = 1.0,
                 wall: Callable[[], float] = time.monotonic):  # fmt: skip
        self.t_start, self.t_end = t_start, t_end
        self.speed = speed
        self.paused = False
        self._wall = wall
        self._pos = t_start
        self._at = wall()

    def position(self) -> int:
        """The current position on the run clock."""
        if self.paused:
            return self._pos
        pos = self._pos + int((self._wall() - self._at) * 1e9 * self.speed)
        return min(self.t_end, max(self.t_start, pos))

    def _rebase(self) -> None:
        self._pos, self._at = self.position(), self._wall()

    def pause(self, paused: bool = True) -> None:
        """Stop (or restart) the clock where it is."""
        self._rebase()
        self.paused = paused

    def set_speed(self, speed: float) -> None:
        """Play ``speed`` times real time from here on (clamped to x0.25..x64)."""
        self._rebase()
        self.speed = min(SPEEDS[-1], max(SPEEDS[0], float(speed)))

    def seek(self, t_ns: int) -> None:
        """Jump to ``t_ns`` (clamped to the recording)."""
        self._pos = min(self.t_end, max(self.t_start, int(t_ns)))
        self._at = self._wall()

    @property
    def at_end(self) -> bool:
        """Whether the position has reached the end of the recording."""
        return self.position() >= self.t_end


class ReplaySource(Source):
    """Plays a recording as if live (see the module docstring).

    Args:
        reader: the open trace (closed by :meth:`stop`).
        speed: the initial playback speed.
        wall: the wall clock for the :class:`ReplayClock`.
        address: what the header shows as the source (default: the file's name).
        **kw: :class:`~gt.tui.sources.Source` options (``op_names`` defaults to the header's).
    """

    kind = "replay"
    replay = True

    def __init__(self, reader: Reader, *, speed: float = 1.0, wall: Callable[[], float] = time.monotonic,
                 address: str | None = None, **kw: Any) -> None:  # fmt: skip
        names = reader.header.get("op_names")
        if names and kw.get("op_names") is None:
            kw["op_names"] = tuple(names)
        kw.setdefault("count_gaps", False)  # the recorder wrote a drop event for every gap
        super().__init__(**kw)
        self.reader = reader
        self.index = TraceIndex(reader)
        self.clock = ReplayClock(self.index.t_start, self.index.t_end, speed=speed, wall=wall)
        self.address = address or os.path.basename(str(reader.path))
        self.selection: tuple[int, int] | None = None
        self.interval_ns = INTERVALS_NS[4]
        self.approximate = False  # totals restored from a compact keyframe
        self.restores = 0  # keyframe restores so far (tests and the benchmark read it)
        self.last_export: str | None = None
        self.header_config = reader.header.get("config") or {}
        self._batches: Iterator[Batch] = iter(())
        self._pending: Batch | None = None
        self._folded = self.index.t_start - 1  # the model holds every event up to here
        self._restore(self.index.t_start)

    @property
    def warning(self) -> str | None:
        """What is wrong with the recording (cut off, damaged records passed over), or ``None``."""
        return self.reader.warning

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kw: Any) -> ReplaySource:
        """A replay of a ``.gtrace`` file.

        Raises:
            gt.trace.reader.TraceFormatError: the file is not a readable trace.
            OSError: the file cannot be opened.
        """
        # A damaged batch in the middle must not end the replay: it is passed over and said.
        reader = Reader(path, skip_damaged=True)
        try:
            return cls(reader, **kw)
        except Exception:
            reader.close()
            raise

    def stop(self) -> None:
        """Close the trace file."""
        self.reader.close()

    # -- folding --------------------------------------------------------------------------------

    def _history_ns(self) -> int:
        return self.timeline_ns + self.model.window_ns

    def _restore(self, t_ns: int) -> None:
        """Rebuild the model for ``t_ns`` from the best keyframe; fold up to ``t_ns``."""
        idx, r = self.index, self.reader
        k = idx.base(t_ns, self._history_ns(), len(self.model.workers))
        opts = dict(window_ns=self.model.window_ns)
        names = self.model.op_names
        self.approximate = False
        if k < 0:
            model = ClusterModel(names, count_gaps=False, **opts)
            K.attach(model, r.header.get("workers"))
            start = r.data_start
        else:
            kf, st = idx.keyframe_state(k)
            info = idx.keyframes[k]
            if info.model:
                model = K.restore_model(st["model"], names, **opts)
                self._catch_up(model, info.offset, st.get("applied") or {})
            else:
                earlier = [(m.kind, m.t_ns, m.source, m.fields)
                           for m in (*idx.srclocs, *idx.moments) if m.t_ns <= info.t_ns]  # fmt: skip
                model = K.model_from_compact(st if isinstance(st, dict) else {}, seq=kf.get("seq"),
                                             t_ns=info.t_ns, t_first=idx.t_start, op_names=names,
                                             earlier=sorted(earlier, key=lambda e: e[1]), **opts)  # fmt: skip
                self.approximate = True
            start = info.offset  # batches() skips the keyframe record itself
        model.count_gaps = False
        self.model = model
        self._batches = r.batches(start=start)
        self._pending = next(self._batches, None)
        self._folded = idx.t_start - 1 if k < 0 else idx.keyframes[k].t_ns
        self.restores += 1
        self._fold_to(t_ns)

    def _catch_up(self, model: ClusterModel, kf_offset: int, applied: dict) -> None:
        """Fold what was written just before a model keyframe but is not in it (by sequence)."""
        r = self.reader
        start = r.chunk_start_before(kf_offset, 1 if r.clean else 8)
        model.count_gaps = True  # as the recorder did for these batches: a gap is a drop
        for b in r.batches(start=start):
            if b.offset >= kf_offset:
                break
            if b.source == RECORDER_SOURCE:
                continue
            first = applied.get(b.source)
            events = b.events
            if first is not None:
                if b.first_seq + len(events) <= first:
                    continue
                if first > b.first_seq:
                    events = events[first - b.first_seq :]
                    model.apply_batch(b.source, first, events)
                    continue
            model.apply_batch(b.source, b.first_seq, events)

    def _fold_to(self, t_ns: int) -> None:
        """Fold every batch (in file order) whose first event is at or before ``t_ns``."""
        apply = self.model.apply_batch
        b = self._pending
        while b is not None and b.t0 <= t_ns:
            apply(b.source, b.first_seq, b.events)
            b = next(self._batches, None)
        self._pending = b
        self._folded = max(self._folded, t_ns)

    def _goto(self, t_ns: int) -> None:
        """Bring the model to ``t_ns``: fold on, or restore when that is cheaper or needed."""
        if t_ns < self._folded:
            self._restore(t_ns)
            return
        k = self.index.base(t_ns, self._history_ns(), len(self.model.workers))
        pending = self._pending.offset if self._pending is not None else self.reader.size
        if k >= 0 and self.index.keyframes[k].offset > pending:
            self._restore(t_ns)  # a keyframe lies ahead of what is folded: jump over the gap
        else:
            self._fold_to(t_ns)

    # -- the Source interface -------------------------------------------------------------------

    def now(self) -> int:
        return self.clock.position()

    def status(self) -> Status:
        c = self.clock
        state = "paused" if c.paused else f"x{c.speed:g}"
        pos, length = (self.now() - c.t_start) / 1e9, (c.t_end - c.t_start) / 1e9
        approx = "  ≈totals" if self.approximate else ""
        return Status(
            self.kind, self.address, True, f"replay {state} {pos:.3f}s/{length:.3f}s{approx}"
        )

    def snapshot(self) -> ClusterState:
        with self._lock:
            self._goto(self.clock.position())
        return self.compute()

    def set_view(self, *, timeline_ns: int | None = None, paused: bool | None = None) -> None:
        """Zoom as any source; pausing a replay pauses its clock (the timeline follows it)."""
        super().set_view(timeline_ns=timeline_ns)
        if paused is not None:
            self.clock.pause(paused)

    # -- controls -------------------------------------------------------------------------------

    def seek(self, t_ns: int) -> None:
        """Move the playback position to ``t_ns`` (clamped to the recording)."""
        with self._lock:
            self.clock.seek(t_ns)
            self._goto(self.clock.position())
            if self.frozen_end is not None:
                self.frozen_end = self.clock.position()

    def step(self, seconds: float) -> None:
        """Seek ``seconds`` forward (negative: back)."""
        self.seek(self.clock.position() + int(seconds * 1e9))

    def step_interval(self, direction: int) -> None:
        """Seek one chosen interval (:attr:`interval_ns`) forward (+1) or back (-1)."""
        self.seek(self.clock.position() + direction * self.interval_ns)

    def cycle_interval(self, direction: int = 1) -> int:
        """Choose the next (or previous) step interval; returns it in ns."""
        i = INTERVALS_NS.index(self.interval_ns) if self.interval_ns in INTERVALS_NS else 4
        self.interval_ns = INTERVALS_NS[(i + direction) % len(INTERVALS_NS)]
        return self.interval_ns

    def step_event(self, direction: int) -> bool:
        """Pause and move to the next (+1) or previous (-1) recorded event; False if none."""
        self.clock.pause(True)
        t = self.index.neighbour_event(self.clock.position(), forward=direction > 0)
        if t is None:
            return False
        self.seek(t)
        return True

    def jump(self, kind: str | None, direction: int) -> Moment | None:
        """Move to the next (+1) or previous (-1) moment of ``kind`` (mark, error, config; None: any)."""
        m = self.index.next_moment(self.clock.position(), kind, forward=direction > 0)
        if m is not None:
            self.seek(m.t_ns)
        return m

    def toggle_play(self) -> bool:
        """Pause or resume playback (at the end, play restarts from the start); returns paused."""
        c = self.clock
        if c.paused and c.at_end:
            self.seek(c.t_start)
        c.pause(not c.paused)
        return c.paused

    def set_speed(self, speed: float) -> float:
        """Set the playback speed (x0.25..x64); returns it."""
        self.clock.set_speed(speed)
        return self.clock.speed

    def change_speed(self, direction: int) -> float:
        """One step faster (+1) or slower (-1) on :data:`SPEEDS`; returns the new speed."""
        s = self.clock.speed
        faster = [x for x in SPEEDS if x > s + 1e-9]
        slower = [x for x in SPEEDS if x < s - 1e-9]
        if direction > 0:
            return self.set_speed(faster[0] if faster else SPEEDS[-1])
        return self.set_speed(slower[-1] if slower else SPEEDS[0])

    # -- windows and export ---------------------------------------------------------------------

    def mark_window(self) -> tuple[int, int] | None:
        """Start a window at the position, or end it there (a third press clears it)."""
        pos = self.clock.position()
        sel = self.selection
        if sel is None:
            self.selection = (pos, pos)  # started
        elif sel[0] == sel[1]:
            self.selection = (min(sel[0], pos), max(sel[0], pos))  # ended
        else:
            self.selection = None  # cleared
        return self.selection

    def set_window(self, t0_rel_ns: int | None, t1_rel_ns: int | None) -> tuple[int, int]:
        """Select ``[t0, t1]`` given in ns since the start of the recording (None: an end)."""
        c = self.clock
        a = c.t_start if t0_rel_ns is None else c.t_start + t0_rel_ns
        b = c.t_end if t1_rel_ns is None else c.t_start + t1_rel_ns
        self.selection = (max(c.t_start, min(a, b)), min(c.t_end, max(a, b)))
        return self.selection

    def export_range(self) -> tuple[int, int] | None:
        """What ``x`` exports: the window; a window only started runs to the end of the recording
        (the time bar shows it open: "window from 0:01.000…"); ``None``: the whole recording."""
        sel = self.selection
        if sel is None:
            return None
        return (sel[0], sel[1]) if sel[1] > sel[0] else (sel[0], self.clock.t_end)

    def export_window(self, out: str | os.PathLike[str]) -> dict:
        """Write :meth:`export_range` (or the whole trace) as Chrome trace JSON; returns counts."""
        window = None
        rng = self.export_range()
        if rng is not None:
            origin = self.index.t_start
            window = (rng[0] - origin, rng[1] - origin)
        # its own reader: this runs on a worker thread
        with Reader(self.reader.path, skip_damaged=True) as r:
            return export_chrome(r, out, window=window)

    def default_export_path(self) -> str:
        """``<trace>-<from>s-<to>s.json`` next to the trace (in the working directory if unwritable)."""
        stem = os.path.splitext(str(self.reader.path))[0]
        rng = self.export_range()
        if rng is not None:
            a, b = ((x - self.index.t_start) / 1e9 for x in rng)
            stem += f"-{a:.3f}s-{b:.3f}s"
        path = stem + ".json"
        if not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
            path = os.path.basename(path)
        return path

    # -- the config in force --------------------------------------------------------------------

    def config_at(self, t_ns: int | None = None) -> Any:
        """The shard config (YAML form) in force at ``t_ns`` (default: the position)."""
        t = self.clock.position() if t_ns is None else t_ns
        cfg = self.header_config
        for m in self.index.moments_until(t, ("config",)):
            cfg = m.fields.get("after", cfg)
        return cfg
