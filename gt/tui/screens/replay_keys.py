"""The replay controls of the top view: play, speed, steps, jumps, a window and its export.

A mixin for :class:`~gt.tui.screens.top.TopScreen`: its bindings exist only when the app's
source is a replay (:attr:`gt.tui.replay.ReplaySource.replay`).
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from gt.trace import events as E
from gt.tui import timebar as TB
from gt.tui.render import human_span

# Pairs share one footer entry ("[] speed"), so every shown key fits at 120 columns.
SPEED = Binding.Group("speed", compact=True)
STEP = Binding.Group("step", compact=True)
REPLAY_BINDINGS = [
    Binding("left_square_bracket", "replay_speed(-1)", "slower", key_display="[", group=SPEED),
    Binding("right_square_bracket", "replay_speed(1)", "faster", key_display="]", group=SPEED),
    Binding("comma", "replay_step(-1)", "step back", key_display=",", group=STEP),
    Binding("full_stop", "replay_step(1)", "step forward", key_display=".", group=STEP),
    Binding("greater_than_sign", "replay_event(1)", "next event", key_display=">", show=False),
    Binding("less_than_sign", "replay_event(-1)", "previous event", key_display="<", show=False),
    Binding("i", "replay_interval", "step size", show=False),
    Binding("g", "replay_goto", "go to"),
    Binding("m", "replay_jump('mark', 1)", "next mark", show=False),
    Binding("M", "replay_jump('mark', -1)", "previous mark", show=False),
    Binding("e", "replay_jump('error', 1)", "next error", show=False),
    Binding("E", "replay_jump('error', -1)", "previous error", show=False),
    Binding("k", "replay_jump('config', 1)", "next config change", show=False),
    Binding("K", "replay_jump('config', -1)", "previous config change", show=False),
    Binding("home,0", "replay_home", "to the start", key_display="0", show=False),
    Binding("end,dollar_sign", "replay_end", "to the end", key_display="$", show=False),
    Binding("v", "replay_window", "window"),
    Binding("x", "replay_export", "export"),
]
REPLAY_ACTIONS = frozenset(b.action.split("(")[0] for b in REPLAY_BINDINGS)
_KIND_NAMES = {E.MARK: "mark", E.ERROR: "error", E.CONFIG: "config change"}


class ReplayKeys:
    """Actions behind :data:`REPLAY_BINDINGS` (mixed into a screen that has a ``#goto`` Input)."""

    app: object

    @property
    def replay(self):
        """The app's replay source, or ``None`` when it is not a replay."""
        src = self.app.source
        return src if getattr(src, "replay", False) else None

    def bar_state(self) -> TB.BarState | None:
        """What the time bar shows now."""
        src = self.replay
        if src is None:
            return None
        c = src.clock
        return TB.BarState(c.t_start, c.t_end, c.position(), c.paused, c.speed, src.interval_ns,
                           TB.moments_of(src.index.moments), src.selection)  # fmt: skip

    def _redraw(self) -> None:
        src = self.replay
        if src is not None:
            self.app.paused = src.clock.paused
        self.app.tick()

    def action_replay_speed(self, direction: int) -> None:
        """Play faster or slower (x0.25 .. x64)."""
        self.replay.change_speed(direction)
        self._redraw()

    def action_replay_step(self, direction: int) -> None:
        """Step the chosen interval forward or back."""
        self.replay.step_interval(direction)
        self._redraw()

    def action_replay_event(self, direction: int) -> None:
        """Pause and step to the next or previous recorded event."""
        if not self.replay.step_event(direction):
            self.notify("no more events that way", timeout=1.5)
        self._redraw()

    def action_replay_interval(self) -> None:
        """Cycle the step interval (1ms .. 1m)."""
        ns = self.replay.cycle_interval(1)
        self.notify(f"step {human_span(ns)}", timeout=1.5)
        self._redraw()

    def action_replay_jump(self, kind: str, direction: int) -> None:
        """Jump to the next or previous mark, error or config change."""
        m = self.replay.jump(kind, direction)
        if m is None:
            way = "after" if direction > 0 else "before"
            self.notify(f"no {_KIND_NAMES.get(kind, kind)} {way} this point", timeout=2)
        else:
            self.notify(f"{TB.fmt_time(m.t_ns - self.replay.clock.t_start)}  {m.label}", timeout=3)
        self._redraw()

    def action_replay_home(self) -> None:
        """Back to the start of the recording."""
        self.replay.seek(self.replay.clock.t_start)
        self._redraw()

    def action_replay_end(self) -> None:
        """To the end of the recording."""
        self.replay.seek(self.replay.clock.t_end)
        self._redraw()

    def action_replay_goto(self) -> None:
        """Ask for a time to jump to."""
        box = self.query_one("#goto", Input)
        box.value = ""
        box.display = True
        box.focus()

    def goto(self, text: str) -> bool:
        """Jump to what the user typed; False (with a notice) when it is not a time."""
        src = self.replay
        c = src.clock
        try:
            t = TB.parse_time(text, c.t_start, c.t_end, c.position())
        except ValueError as exc:
            self.notify(str(exc), severity="error", timeout=3)
            return False
        src.seek(t)
        self._redraw()
        return True

    def action_replay_window(self) -> None:
        """Start the export window here, end it here, or clear it."""
        sel = self.replay.mark_window()
        if sel is None:
            self.notify("window cleared", timeout=1.5)
        elif sel[0] == sel[1]:
            self.notify("window starts here: move, then press v again to end it (x now exports "
                        "from here to the end)", timeout=3)  # fmt: skip
        else:
            start = self.replay.clock.t_start
            self.notify(f"window {TB.fmt_time(sel[0] - start)}–{TB.fmt_time(sel[1] - start)}: "
                        "x exports it", timeout=3)  # fmt: skip
        self._redraw()

    def action_replay_export(self) -> None:
        """Export the window (or the whole recording) to Chrome trace JSON, in the background."""
        src = self.replay
        path = src.default_export_path()
        self.notify(f"exporting to {path} ...", timeout=2)

        def work() -> None:
            try:
                counts = src.export_window(path)
            except Exception as exc:  # a full disk or a vanished file: say so, keep running
                self.app.call_from_thread(self.notify, f"export failed: {exc}", severity="error")
                return
            src.last_export = path
            msg = f"wrote {path}: {counts['slices']} slices (open it in Perfetto)"
            self.app.call_from_thread(self.notify, msg, timeout=6)

        self.app.run_worker(work, thread=True, group="export", exclusive=True)
