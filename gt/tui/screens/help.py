"""The ``?`` screen: every key binding, generated from the bindings themselves."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP_TEXT = (
    "Shares are over the last 2 s: compute (green) is time inside instruction batches, comm "
    "(magenta) is peer-transfer time not hidden under compute, the rest is idle. N/A means the "
    "data is not available (e.g. no NVML on a CPU worker), never zero."
)


def bindings_table(groups: list[tuple[str, list[Binding]]]) -> Table:
    """A table of keys and what they do, one section per screen."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action")
    for title, bindings in groups:
        table.add_row(f"[b]{title}[/b]", "")
        for b in bindings:
            table.add_row(b.key_display or b.key, b.description)
    return table


class HelpScreen(ModalScreen):
    """Key bindings and what the colours mean; any of escape, q, ? closes it."""

    BINDINGS = [
        Binding("escape", "dismiss", "close"),
        Binding("q", "dismiss", "close"),
        Binding("question_mark", "dismiss", "close", key_display="?"),
    ]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static("[b]gt top — keys[/b]\n")
            yield Static(bindings_table(self.groups))
            yield Static("\n" + HELP_TEXT, id="help-text")
