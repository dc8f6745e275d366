"""The replay time bar widget: draws :func:`gt.tui.timebar.time_bar`; a click seeks there."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widget import Widget

from gt.tui import timebar as TB


class TimeBar(Widget):
    """Two lines under the header of a replay: the bar with its moments, and the play state."""

    DEFAULT_CSS = "TimeBar { height: 2; padding: 0 1; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.bar: TB.BarState | None = None

    def show(self, bar: TB.BarState) -> None:
        """Draw this state (only when it changed)."""
        if bar != self.bar:
            self.bar = bar
            self.refresh()

    def render(self) -> Text:
        if self.bar is None:
            return Text("")
        return TB.time_bar(self.bar, max(10, self.content_size.width))

    def time_at(self, x: int) -> int | None:
        """The run-clock time under column ``x`` of the bar (``None`` before the first draw)."""
        b = self.bar
        width = max(10, self.content_size.width)
        if b is None:
            return None
        share = min(1.0, max(0.0, x / max(1, width - 1)))
        return b.t_start + int((b.t_end - b.t_start) * share)

    def on_click(self, event: events.Click) -> None:
        if event.y != 0:
            return
        t = self.time_at(event.x - self.styles.padding.left)
        seek = getattr(self.app.source, "seek", None)
        if t is not None and seek is not None:
            seek(t)
            self.app.tick()
