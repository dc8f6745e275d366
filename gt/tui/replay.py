"""Replaying recorded event batches as if live, on a clock that can pause, speed up and seek.

:class:`ReplaySource` takes time-ordered ``(source, first_seq, events)`` batches. It is the stub
that ``gt replay`` completes once the ``.gtrace`` reader lands: the reader yields the same batches,
and its keyframes will replace the refold-from-start on a backward seek.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from gt.trace.model import ClusterModel
from gt.trace.state import ClusterState
from gt.tui.sources import Batch, Source
from gt.tui.tables import Status


class ReplayClock:
    """A playback position over ``[t_start, t_end]`` that can pause, change speed and seek.

    Args:
        wall: the wall clock in seconds (injectable for tests; default ``time.monotonic``).
    """

    def __init__(
        self,
        t_start: int,
        t_end: int,
        *,
        speed: float = 1.0,
        wall: Callable[[], float] = time.monotonic,
    ):
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
        """Play ``speed`` times real time from here on."""
        self._rebase()
        self.speed = max(0.01, float(speed))

    def seek(self, t_ns: int) -> None:
        """Jump to ``t_ns`` (clamped to the recording)."""
        self._pos = min(self.t_end, max(self.t_start, int(t_ns)))
        self._at = self._wall()


class ReplaySource(Source):
    """Plays recorded batches (time-ordered) as if live, driven by a :class:`ReplayClock`.

    Batches are held in memory; a backward seek refolds from the start (the recorder's keyframes
    could shorten that). Folding happens on the caller's thread in :meth:`snapshot`, bounded by
    the batches between two repaints (a long forward seek folds more at once).
    """

    kind = "replay"

    def __init__(self, batches: Sequence[Batch], *, speed: float = 1.0, wall: Callable[[], float] = time.monotonic,
                 address: str | None = None, **kw):  # fmt: skip
        super().__init__(**kw)
        self.batches = sorted(batches, key=lambda b: b[2][0][1] if b[2] else 0)
        times = [ev[1] for b in self.batches for ev in (b[2][0], b[2][-1])] if self.batches else []
        self.clock = ReplayClock(
            min(times, default=0), max(times, default=0), speed=speed, wall=wall
        )
        self.address = address
        self.warning: str | None = None
        self._next = 0

    @classmethod
    def from_file(cls, path: str, **kw) -> ReplaySource:
        """A replay of a ``.gtrace`` file (op names from its header unless ``op_names`` is given).

        Raises:
            gt.trace.reader.TraceFormatError: the file is not a readable trace.
        """
        from gt.trace.reader import Reader

        with Reader(path) as r:
            batches = [(b.source, b.first_seq, b.events) for b in r.batches() if b.events]
            names = r.header.get("op_names")
            warning = r.warning
        if names and kw.get("op_names") is None:
            kw["op_names"] = tuple(names)
        kw.setdefault("count_gaps", False)  # the recorder wrote a drop event for every gap
        kw.setdefault("address", os.path.basename(str(path)))
        src = cls(batches, **kw)
        src.warning = warning
        return src

    def now(self) -> int:
        return self.clock.position()

    def status(self) -> Status:
        c = self.clock
        state = "paused" if c.paused else f"{c.speed:g}x"
        pos, length = (self.now() - c.t_start) / 1e9, (c.t_end - c.t_start) / 1e9
        return Status(self.kind, self.address, True, f"replay {state} {pos:.1f}s/{length:.1f}s")

    def seek(self, t_ns: int) -> None:
        """Move the playback position; seeking backwards refolds from the start."""
        with self._lock:
            if t_ns < self.clock.position():
                self.model = ClusterModel(
                    self.model.op_names,
                    window_ns=self.model.window_ns,
                    count_gaps=self.model.count_gaps,
                )
                self._next = 0
            self.clock.seek(t_ns)
            if self.frozen_end is not None:
                self.frozen_end = self.clock.position()

    def step(self, seconds: float) -> None:
        """Seek ``seconds`` forward (negative: back)."""
        self.seek(self.clock.position() + int(seconds * 1e9))

    def toggle_play(self) -> bool:
        """Pause or resume playback; returns whether it is paused now."""
        self.clock.pause(not self.clock.paused)
        return self.clock.paused

    def set_view(self, *, timeline_ns: int | None = None, paused: bool | None = None) -> None:
        """Zoom as any source; pausing a replay pauses its clock (the timeline follows it)."""
        super().set_view(timeline_ns=timeline_ns)
        if paused is not None:
            self.clock.pause(paused)

    def snapshot(self) -> ClusterState:
        with self._lock:
            pos = self.clock.position()
            while self._next < len(self.batches):
                source, first, events = self.batches[self._next]
                if events and events[0][1] > pos:
                    break
                self.model.apply_batch(source, first, events)
                self._next += 1
        return self.compute()
