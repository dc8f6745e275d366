"""The ``?`` screen: what the numbers and symbols mean, then every key binding (generated from the
bindings themselves). It scrolls: ↑/↓, page keys, home/end or the mouse wheel.

It is a plain (opaque) screen made once per app and shown again on each ``?``: a modal screen
re-renders the whole dimmed top view behind it on every paint, and a Rich table re-lays itself
out each time, which made ``?`` take a tenth of a second or more on a busy machine.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gt.tui import render as R
from gt.tui.screens.kept import KeptStyles


def legend_text() -> Text:
    """The four parts of a worker's time, the symbols and what N/A and ``unknown`` mean."""
    t = Text()
    t.append("A worker's time", style="bold")
    t.append(" (over the last 2 s; the four add up to 100 %):\n")
    for char, style, name, what in (
        (R.COMPUTE_CHAR, R.COMPUTE_STYLE, "compute", "in instruction batches, not moving data or "
                                                     "waiting"),
        (R.COMM_CHAR, R.COMM_STYLE, "comm", "moving bytes to/from a peer or client, nothing "
                                            "computing"),
        (R.WAIT_CHAR, R.WAIT_STYLE, "wait", "blocked on a transfer or an input not yet arrived"),
        (R.IDLE_CHAR, R.IDLE_STYLE, "idle", "nothing to run"),
    ):  # fmt: skip
        t.append(f"  {char * 3} ", style=style)
        t.append(f"{name:<8}", style="bold")
        t.append(what + "\n")
    t.append("The bar (compute/comm/wait/idle, c/m/w/i when narrow) shows the four in this order; "
             "the number is compute. The timeline colours each op; ")  # fmt: skip
    t.append(R.COMM_CHAR, style=R.COMM_STYLE)
    t.append(" transfer, ")
    t.append(R.WAIT_CHAR, style=R.WAIT_STYLE)
    t.append(" wait, ")
    t.append("│ ▼", style=R.MARK_STYLE)
    t.append(" mark or config change.\n")
    t.append("Memory", style="bold")
    t.append(" is what tensors use, against the worker's limit (or its device's memory); blocks "
             "kept cached for reuse are shown apart, in the worker's detail (enter).\n")  # fmt: skip
    t.append("N/A", style=R.NA_STYLE)
    t.append(" means not available (e.g. no NVML on a CPU worker), never zero. A worker shown as ")
    t.append("unknown", style="yellow")
    t.append(" was alive when the monitor last heard from the dispatcher (see the header).\n")
    t.append("Tables", style="bold")
    t.append(" sort by the column marked ▲ or ▼: s picks the next column, S reverses, a click on a "
             "header sorts by it. / filters workers, their clients and their timeline lanes alike "
             "(w1 is worker 1).")  # fmt: skip
    return t


def bindings_text(groups: list[tuple[str, list[Binding]]]) -> Text:
    """Keys and what they do, one section per screen, in two aligned columns."""
    rows = [(b.key_display or b.key, b.description) for _t, bs in groups for b in bs]
    width = max((len(k) for k, _ in rows), default=0) + 3
    t = Text()
    for title, bindings in groups:
        t.append(f"\n  {title}\n", style="bold")
        for b in bindings:
            t.append(f"    {(b.key_display or b.key):<{width}}", style="bold cyan")
            t.append(f"{b.description}\n")
    return t


class HelpScreen(KeptStyles, Screen):
    """What the screen shows and every key; any of escape, q, ? closes it."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "close"),
        Binding("q", "app.pop_screen", "close"),
        Binding("question_mark", "app.pop_screen", "close", key_display="?"),
    ]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(legend_text(), id="help-text")
            yield Static(
                Text.assemble(("\nKeys", "bold"), bindings_text(self.groups)), id="help-keys"
            )

    def on_mount(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        box.border_title = "gt top — help"
        box.border_subtitle = "↑↓ pgup pgdn scroll · esc closes"

    def on_screen_resume(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        if box.scroll_y:  # each ? starts at the top (a scroll repaints: only when needed)
            box.scroll_home(animate=False)
        if self.focused is not box:
            box.focus()  # the keys scroll the box
