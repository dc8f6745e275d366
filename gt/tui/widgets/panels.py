"""The header, the timeline, the event log and the output pane."""

from __future__ import annotations

import queue

from rich.text import Text
from textual import events
from textual.widget import Widget
from textual.widgets import RichLog, Static

from gt.trace.state import ClusterState, Mark, empty_state
from gt.tui import render as R
from gt.tui import tables as T


class ClusterHeader(Static):
    """Source, connection, uptime, counts, totals and drops (two lines)."""

    def show(self, state: ClusterState, status: T.Status, *, readonly: bool, paused: bool) -> None:
        """Draw the header for this state."""
        self.update(T.header_text(state, status, readonly=readonly, paused=paused))


class TimelineView(Widget):
    """One lane per worker over the timeline window; mouse wheel zooms."""

    DEFAULT_CSS = "TimelineView { height: auto; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.state = empty_state()
        self.paused = False

    def show(self, state: ClusterState, *, paused: bool) -> None:
        """Draw these lanes."""
        self.state, self.paused = state, paused
        self.styles.height = len(state.lanes) + 3
        self.refresh()

    def render(self) -> Text:
        s = self.state
        width = max(10, self.size.width)
        configs = tuple(Mark(c.t_ns, "config", None) for c in s.configs if c.t_ns <= s.now_ns)
        text = R.timeline(
            s.lanes,
            s.timeline_start_ns,
            s.timeline_end_ns,
            width,
            s.marks + configs,
            paused=self.paused,
        )
        text.append("\n")
        text.append_text(R.timeline_legend(s.lanes, s.timeline_start_ns, s.timeline_end_ns))
        return text

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.app.run_action("screen.zoom_in")

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.app.run_action("screen.zoom_out")


class EventLog(Widget):
    """The newest entries of the event log that fit."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.state = empty_state()
        self._last: object = None

    def show(self, state: ClusterState) -> None:
        """Draw this state's log (only when it changed)."""
        key = (len(state.log), state.log[-1] if state.log else None, state.now_ns // 1_000_000_000)
        self.state = state
        if key != self._last:
            self._last = key
            self.refresh()

    def render(self) -> Text:
        return T.log_lines(self.state.log, max(1, self.size.height), self.state.now_ns)


class OutputPane(RichLog):
    """A child process's output (``gt run``): lines arrive on a queue; ``None`` means it ended."""

    def __init__(self, lines: queue.Queue, **kw) -> None:
        super().__init__(max_lines=2000, wrap=False, markup=False, highlight=False, **kw)
        self.incoming = lines
        self.ended = False

    def pump(self, limit: int = 500) -> None:
        """Move up to ``limit`` waiting lines onto the pane (called at the repaint rate)."""
        for _ in range(limit):
            try:
                line = self.incoming.get_nowait()
            except queue.Empty:
                return
            if line is None:
                self.ended = True
                self.write(Text("[process exited]", style="bold"))
            else:
                self.write(Text(str(line).rstrip("\n")))
