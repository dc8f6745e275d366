"""One worker in detail: identity, device, memory history, op histogram."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gt.trace.state import ClusterState
from gt.tui import tables as T
from gt.tui.detail import worker_detail
from gt.tui.screens.kept import KeptStyles
from gt.tui.textual_leaks import Footer
from gt.tui.widgets import ClusterHeader


class WorkerScreen(KeptStyles, Screen):
    """Detail of worker ``wid``, updated live; escape goes back. Made once and shown again
    for whichever worker :attr:`wid` names (see :meth:`gt.tui.app.GTApp.open_worker`)."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("backspace", "app.pop_screen", "back", show=False),
    ]

    def __init__(self, wid: int) -> None:
        super().__init__()
        self.wid = wid
        self.body: RenderableType = Text("")

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="header")
        with VerticalScroll(id="detail-box"):
            yield Static(id="detail")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.show(self.app.source.snapshot(), self.app.source.status())

    def on_screen_resume(self) -> None:
        # shown again, maybe for another worker: draw it before the first paint
        self.show(self.app.source.snapshot(), self.app.source.status())

    def show(self, state: ClusterState, status: T.Status) -> None:
        """Draw the worker as it is in this state."""
        app = self.app
        self.query_one(ClusterHeader).show(state, status, readonly=app.readonly, paused=app.paused)
        w = state.worker(self.wid)
        body = self.query_one("#detail", Static)
        if w is None:
            self.body = Text(f"worker {self.wid} is not known to this monitor", style="bold red")
        else:
            self.body = worker_detail(w, max(40, self.size.width - 4), connected=status.connected,
                                      why=status.detail, hot=state.hot_on(self.wid))  # fmt: skip
        body.update(self.body)
