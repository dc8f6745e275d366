"""The top view: header, workers, timeline, clients, event log (and a child's output)."""

from __future__ import annotations

import time

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input

from gt.trace.state import ClusterState
from gt.tui import tables as T
from gt.tui.render import human_span
from gt.tui.screens.replay_keys import REPLAY_ACTIONS, REPLAY_BINDINGS, ReplayKeys
from gt.tui.textual_leaks import Footer
from gt.tui.widgets import (
    ClientsTable,
    ClusterHeader,
    EventLog,
    OutputPane,
    RowTable,
    TimeBar,
    TimelineView,
    WorkersTable,
)

ZOOMS_NS = tuple(
    int(x * 1e9) for x in (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
)
#: Below this many rows the timeline leaves out its row of mark flags and its legend.
COMPACT_ROWS = 30
#: Seconds between redraws of the header, tables and log on the timer (keys redraw at once).
#: Their numbers are averages over seconds, and redrawing a table costs more than the timeline.
SLOW_S = 1.0
ZOOM = Binding.Group("zoom", compact=True)


class TopScreen(ReplayKeys, Screen):
    """Everything at once. Enter on a worker opens its detail; a replay adds a time bar."""

    BINDINGS = [
        Binding("space", "pause", "pause"),
        Binding("c", "app.config", "config"),
        Binding("plus,equals_sign", "zoom_in", "zoom in", key_display="+", group=ZOOM),
        Binding("minus", "zoom_out", "zoom out", key_display="-", group=ZOOM),
        Binding("s", "sort", "sort"),
        Binding("S", "reverse_sort", "reverse the sort", show=False),
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("enter", "open_worker", "detail", show=False),
        *REPLAY_BINDINGS,
    ]
    REPLAY_ACTIONS = REPLAY_ACTIONS

    def __init__(self, with_output: bool = False) -> None:
        super().__init__()
        self.with_output = with_output
        self.filter_text = ""  # one filter for workers, clients and timeline lanes
        self._slow_at = 0.0  # when the header, tables and log were last drawn
        self._shown_as: tuple[bool, bool] | None = None  # (connected, paused) they were drawn with

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="header")
        if self.replay is not None:
            yield TimeBar(id="timebar")
        yield WorkersTable(id="workers")
        with Vertical(id="timeline-box"):
            yield TimelineView(id="timeline")
        with Horizontal(id="bottom"):
            yield ClientsTable(id="clients")
            yield EventLog(id="log")
        if self.with_output:
            yield OutputPane(self.app.output, id="output")
        yield Input(placeholder="filter rows (esc clears)", id="filter")
        if self.replay is not None:
            yield Input(
                placeholder="go to: 42s, 1m30s, +5s, -250ms, 50%  (enter jumps, esc closes)",
                id="goto",
            )
        yield Footer(compact=True)

    def on_resize(self, event: events.Resize) -> None:
        """A narrow screen gives the clients more of the bottom row than the event log."""
        wide = event.size.width >= 120
        self.query_one(ClientsTable).styles.width = "3fr" if wide else "2fr"
        self.query_one(EventLog).styles.width = "2fr" if wide else "1fr"

    def on_mount(self) -> None:
        self.query_one("#timeline-box").border_title = "timeline"
        self.query_one("#clients").border_title = "clients"
        self.query_one("#log").border_title = "events"
        self.query_one("#workers").border_title = "workers"
        if self.with_output:
            self.query_one("#output").border_title = "output"
        self.query_one(WorkersTable).focus()
        self.show(self.app.latest(), self.app.source.status())  # at once, not at the first repaint

    def show(self, state: ClusterState, status: T.Status, *, full: bool = True) -> None:
        """Draw everything from this state (the header whole, the panels through the filter).

        Args:
            state: what to draw.
            status: where it comes from (the header; ``connected`` for the workers' state).
            full: redraw every panel; otherwise the timeline (and a replay's time bar), and the
                rest only once :data:`SLOW_S` has passed since it was last drawn.
        """
        app = self.app
        now = time.monotonic()
        view = T.filter_state(state, self.filter_text)
        changed = (status.connected, app.paused) != self._shown_as  # the header must say so now
        if full or changed or now - self._slow_at >= SLOW_S:
            self._slow_at, self._shown_as = now, (status.connected, app.paused)
            self.query_one(ClusterHeader).show(
                state, status, readonly=app.readonly, paused=app.paused
            )
            self.query_one(WorkersTable).show(view, connected=status.connected)
            self.query_one(ClientsTable).show(view)
            self.query_one(EventLog).show(state)
            where = f"  filter: {self.filter_text}" if self.filter_text else ""
            self.query_one("#workers").border_title = f"workers{where}"
            self.query_one("#clients").border_title = f"clients{where}"
        if self.with_output:  # the program's output as it comes (a no-op when none came)
            self.query_one(OutputPane).pump()
        tl = self.query_one(TimelineView)
        compact = (self.size.height or app.size.height) < COMPACT_ROWS
        tl.show(view, paused=app.paused, compact=compact)
        self.query_one("#timeline-box").border_title = f"timeline  last {_span(state)}"
        bar = self.bar_state()
        if bar is not None:
            self.query_one(TimeBar).show(bar)

    # ------------------------------------------------------------------ actions
    def action_pause(self) -> None:
        """Freeze (or resume) the timeline's scrolling."""
        app = self.app
        if self.replay is not None:
            app.paused = self.replay.toggle_play()
        else:
            app.paused = not app.paused
            app.source.set_view(paused=app.paused)
        app.tick()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys exist only when the source is a replay."""
        if action in self.REPLAY_ACTIONS:
            return self.replay is not None
        return True

    def _zoom(self, step: int) -> None:
        src = self.app.source
        i = min(range(len(ZOOMS_NS)), key=lambda k: abs(ZOOMS_NS[k] - src.timeline_ns))
        src.set_view(timeline_ns=ZOOMS_NS[max(0, min(len(ZOOMS_NS) - 1, i + step))])
        self.app.tick()

    def action_zoom_in(self) -> None:
        """Show a shorter stretch of time."""
        self._zoom(-1)

    def action_zoom_out(self) -> None:
        """Show a longer stretch of time."""
        self._zoom(+1)

    def _table(self) -> RowTable:
        focused = self.focused
        return focused if isinstance(focused, RowTable) else self.query_one(WorkersTable)

    def action_sort(self) -> None:
        """Sort the focused table by its next key."""
        key = self._table().cycle_sort()
        self.notify(f"sorted by {key}", timeout=1.5)
        self.app.tick()

    def action_reverse_sort(self) -> None:
        """Reverse the focused table's order."""
        self._table().flip_sort()
        self.app.tick()

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        """A click on a sortable column's header sorts by it (again: reverses the order)."""
        table = event.data_table
        if not isinstance(table, RowTable):
            return
        by = {T.sorted_column(k, table.COLUMN_ID): k for k in table.SORTS}
        sort = by.get(str(event.column_key.value))
        if sort is None:
            return
        if sort == table.sort_key:
            table.flip_sort()
        else:
            table.sort_key, table.reverse = sort, False
        self.app.tick()

    def action_filter(self) -> None:
        """Show the filter box."""
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        """Hide the filter (and go-to) box and show every row."""
        if self.replay is not None:
            self.query_one("#goto", Input).display = False
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self._set_filter("")
        self.query_one(WorkersTable).focus()

    def _set_filter(self, text: str) -> None:
        self.filter_text = text
        self.app.tick()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.display = False
        self.query_one(WorkersTable).focus()

    @on(Input.Submitted, "#goto")
    def _goto_done(self, event: Input.Submitted) -> None:
        if self.goto(event.value):
            event.input.display = False
            self.query_one(WorkersTable).focus()

    def action_open_worker(self) -> None:
        """Open the detail screen of the worker under the cursor."""
        key = self.query_one(WorkersTable).selected_key()
        if key is not None:
            self.app.open_worker(int(key))

    @on(DataTable.RowSelected, "#workers")
    def _worker_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.open_worker(int(event.row_key.value))


def _span(state: ClusterState) -> str:
    return human_span(state.timeline_end_ns - state.timeline_start_ns)
