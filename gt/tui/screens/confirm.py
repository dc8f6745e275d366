"""A one-key question before ``q`` ends a program that still runs (``gt run``'s dashboard)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmQuit(ModalScreen[bool]):
    """Asks whether quitting may stop the script; dismissed with ``True`` (y) or ``False`` (n, esc).

    Users with an htop habit press ``q`` to leave a monitor, not to end a training run; Ctrl-C
    still quits at once (it is what a terminal would send the script).
    """

    BINDINGS = [
        Binding("y", "answer(True)", "quit and stop it"),
        Binding("n", "answer(False)", "keep running"),
        Binding("escape", "answer(False)", "keep running", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Static(
            "The script is still running: quitting stops it.\n\n"
            "[b]y[/b] quit and stop it    [b]n[/b] keep it running",
            id="confirm-box",
        )

    def action_answer(self, yes: bool) -> None:
        """Close the question with the answer."""
        self.dismiss(yes)
