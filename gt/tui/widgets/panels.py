"""The header, the timeline, the event log and the output pane."""

from __future__ import annotations

import queue

from rich.text import Text
from textual import events
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import RichLog, Static

from gt.trace.state import ClusterState, Mark, empty_state
from gt.tui import render as R
from gt.tui import tables as T


class ClusterHeader(Static):
    """Source, connection, uptime, counts, totals and drops: two lines, more when narrow."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._last: Text | None = None

    def show(self, state: ClusterState, status: T.Status, *, readonly: bool, paused: bool) -> None:
        """Draw the header for this state (its parts wrap to the width, never cut)."""
        width = self.content_size.width or max(20, self.app.size.width - 2)
        text = T.header_text(state, status, readonly=readonly, paused=paused, width=width)
        last = self._last
        if text != last:
            self._last = text
            # a new layout only when the header's height changes: a layout every repaint would
            # redraw every panel of the screen, which costs more than all the rest together
            lines = text.plain.count("\n")
            self.update(text, layout=last is None or lines != last.plain.count("\n"))


class TimelineView(Widget):
    """One lane per worker over the timeline window; mouse wheel zooms.

    With ``compact`` set (a short terminal) the row of mark flags and the legend are left out:
    marks still draw as │ on the lanes, and ``?`` explains the symbols.

    It repaints every frame, so it draws through Textual's line API from strips it builds once per
    state: turning a Rich ``Text`` of many coloured runs into Textual content on each paint cost
    more than drawing the lanes themselves.
    """

    DEFAULT_CSS = "TimelineView { height: auto; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.state = empty_state()
        self.paused = False
        self.compact = False
        self._strips: tuple[int, list[Strip]] | None = None  # (width, lines) of this state

    def show(self, state: ClusterState, *, paused: bool, compact: bool = False) -> None:
        """Draw these lanes."""
        self.state, self.paused, self.compact = state, paused, compact
        self.styles.height = len(state.lanes) + (1 if compact else 3)
        self._strips = None
        self.refresh()

    def lines(self) -> list[Text]:
        """The timeline, one ``Text`` per line (what :meth:`render_line` draws)."""
        s = self.state
        width = max(10, self.size.width)
        configs = tuple(Mark(c.t_ns, "config", None) for c in s.configs if c.t_ns <= s.now_ns)
        lines = R.timeline_lines(
            s.lanes,
            s.timeline_start_ns,
            s.timeline_end_ns,
            width,
            s.marks + configs,
            paused=self.paused,
            flags=not self.compact,
        )
        if not self.compact:
            legend = R.timeline_legend(s.lanes, s.timeline_start_ns, s.timeline_end_ns)
            legend.truncate(width, overflow="ellipsis")
            lines.append(legend)
        return lines

    def render(self) -> Text:
        """The whole timeline as one text (for tests and tools; painting uses the lines)."""
        return Text("\n").join(self.lines())

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self._strips is None or self._strips[0] != width:
            base = self.rich_style
            console = self.app.console
            strips = []
            for line in self.lines():
                line.style = base  # under the runs' own colours
                strips.append(
                    Strip(line.render(console), line.cell_len).crop_extend(0, width, base)
                )
            self._strips = (width, strips)
        lines = self._strips[1]
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        return lines[y]

    def on_resize(self, event: events.Resize) -> None:
        self._strips = None

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
        # a narrow pane drops the kind column (the text says it too, in the kind's colour)
        kinds = 13 if self.size.width >= 60 else 0
        return T.log_lines(self.state.log, max(1, self.size.height), self.state.now_ns,
                           kind_width=kinds)  # fmt: skip


class OutputPane(RichLog):
    """A child process's output (``gt run``): lines arrive on a queue; ``None`` means it ended."""

    def __init__(self, lines: queue.Queue, **kw) -> None:
        super().__init__(max_lines=2000, wrap=False, markup=False, highlight=False, **kw)
        self.incoming = lines
        self.ended = False

    def pump(self, limit: int = 50_000) -> None:
        """Take the waiting lines (up to ``limit``) and show the last the pane keeps (called at
        the repaint rate: a chatty program is never held up by the pane, and lines the pane would
        drop at once are not drawn; ``gt run`` keeps every line in its log)."""
        batch: list[str] = []
        ended = False
        for _ in range(limit):
            try:
                line = self.incoming.get_nowait()
            except queue.Empty:
                break
            if line is None:
                ended = True
                break
            batch.append(line)
        for line in batch[-(self.max_lines or len(batch)) :]:
            self.write(R.output_line(str(line)))
        if ended:
            self.ended = True
            self.write(Text("[process exited]", style="bold"))
