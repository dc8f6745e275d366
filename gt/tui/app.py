"""The monitor app and its one factory, :func:`make_app`, shared by the CLI and the tests."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable

from textual import events
from textual.app import App, ScreenStackError
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.message import Message

from gt.trace.state import ClusterState
from gt.tui.gcpace import IdlePacer
from gt.tui.screens import ConfigScreen, HelpScreen, TopScreen, WorkerScreen
from gt.tui.screens.confirm import ConfirmQuit
from gt.tui.screens.replay_keys import REPLAY_BINDINGS
from gt.tui.sources import Source
from gt.tui.textual_leaks import uncycle_strips, unpin_styles_caches
from gt.tui.widgets import OutputPane

DARK, LIGHT = "textual-dark", "textual-light"
#: How long the source's background work waits after a key or a click while the app answers it
#: (a press's repaint takes ~25 ms of CPU; two busy cores can stretch it past 100 ms).
GIVE_WAY_S = 0.1

# before any widget renders (see gt.tui.textual_leaks)
unpin_styles_caches()
uncycle_strips()


class SourceUpdated(Message):
    """Posted (from the source's thread) when a state worth showing at once is ready."""


class GTApp(App):
    """``gt top``: draws the latest state of a :class:`~gt.tui.sources.Source` at ``hz``.

    The app owns no sockets: it asks the source for its newest immutable state on a timer and
    hands it to the active screen. Nothing is drawn per event.
    """

    CSS_PATH = "gt.tcss"
    TITLE = "gt top"
    # htop has no command palette, and its key would take a place in the footer
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("q", "quit_asking", "quit"),  # (asks first while gt run's script still runs)
        # like htop, Ctrl-C quits (Textual would otherwise only say how to quit); a priority
        # binding, so it quits from the editor and the filter box too
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("t", "toggle_theme", "theme", show=False),
    ]

    def __init__(self, source: Source, *, hz: float = 8, readonly: bool = False, title: str | None = None,
                 output: queue.Queue | None = None, token: str | None = None,
                 gc_pacer: IdlePacer | None = None) -> None:  # fmt: skip
        super().__init__()
        self.source = source
        self.gc_pacer = gc_pacer
        self.token = token
        self.hz = hz
        self.readonly = readonly
        self.paused = False
        self.output = output
        self.state: ClusterState | None = None
        self.config_draft: str | None = None  # unsaved editor text, kept while the editor is closed
        if title:
            self.title = title
        self.theme = DARK

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, except that on Linux and macOS frames are written by the thread
        that rendered them (:mod:`gt.tui.direct_driver`: on a busy machine the writer thread's
        own wait for a CPU was the largest part of the slowest key presses)."""
        chosen = super().get_driver_class()
        if chosen.__module__ == "textual.drivers.linux_driver" and chosen.__name__ == "LinuxDriver":
            from gt.tui.direct_driver import DirectWriteDriver

            return DirectWriteDriver
        return chosen

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseEvent)):
            pacer = self.gc_pacer
            if pacer is not None:
                pacer.saw_input()
            if not isinstance(event, events.MouseMove):  # a key or click wants an answer now
                self.source.give_way(GIVE_WAY_S)
                if pacer is not None:  # just after the answer: a collection if one is overdue
                    self.set_timer(pacer.answer_s, pacer.tick)
        await super().on_event(event)

    def on_mount(self) -> None:
        if self.gc_pacer is not None:
            self.gc_pacer.install()
        if hasattr(self.source, "on_update"):  # e.g. the first snapshot: draw it at once
            self.source.on_update = lambda: self.post_message(SourceUpdated())
        self.source.start()
        self.push_screen(TopScreen(with_output=self.output is not None))
        self.set_interval(1.0 / max(0.5, self.hz), self.repaint)
        warning = getattr(self.source, "warning", None)
        if warning:  # e.g. a truncated recording: it plays up to its last whole record
            self.notify(warning, title="recording", severity="warning", timeout=10)

    def on_unmount(self) -> None:
        if self.gc_pacer is not None:
            self.gc_pacer.uninstall()
        if hasattr(self.source, "on_update"):
            self.source.on_update = None
        self.source.stop()

    def on_source_updated(self, message: SourceUpdated) -> None:
        """Draw a state the source says should not wait for the next repaint."""
        self.tick()

    def tick(self, full: bool = True) -> None:
        """Take the source's newest state and draw it on the active screen.

        Args:
            full: redraw every panel (after a key, a new snapshot); the timer's repaints pass
                ``False`` and the top view then redraws its tables and header at most
                :data:`~gt.tui.screens.top.SLOW_S` apart (see :meth:`repaint`).
        """
        try:
            screen = self.screen
        except ScreenStackError:  # a repaint due while the app shuts down: nothing to draw on
            return
        self.latest()
        show = getattr(screen, "show", None)
        if show is None or not screen.is_mounted:
            return
        try:
            if isinstance(screen, TopScreen):
                screen.show(self.state, self.source.status(), full=full)
            else:
                show(self.state, self.source.status())
        except NoMatches:
            pass  # the screen is being put together or torn down; the next tick draws it

    def latest(self) -> ClusterState:
        """The source's newest state (kept as :attr:`state`), with :attr:`paused` as a replay's
        clock says."""
        self.state = self.source.snapshot()
        if getattr(self.source, "replay", False):
            self.paused = self.source.clock.paused
        return self.state

    def repaint(self) -> None:
        """The timer's repaint: the timeline every time, the rest when it is due; then a full
        garbage collection if the pacer says the user is not waiting (see :mod:`gt.tui.gcpace`)."""
        self.tick(full=False)
        if self.gc_pacer is not None:
            self.gc_pacer.tick()

    async def action_quit_asking(self) -> None:
        """``q``: quit, after a yes when quitting would stop a script that still runs."""
        if not self._script_running():
            await self.action_quit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmQuit(), answered)

    def _script_running(self) -> bool:
        """Whether an output pane (``gt run``) shows a program that has not ended."""
        if self.output is None:
            return False
        panes = [p for s in self.screen_stack for p in s.query(OutputPane)]
        return any(not p.ended for p in panes)

    def open_worker(self, wid: int) -> None:
        """Push the detail screen for worker ``wid``."""
        if not self.is_screen_installed("worker"):  # made once, shown again for any worker
            self.install_screen(WorkerScreen(wid), "worker")
        screen = self.get_screen("worker")
        if screen.wid != wid:
            screen.wid = wid
            if screen.is_mounted:
                screen.query_one("#detail-box").scroll_home(animate=False)
        self.push_screen("worker")

    def action_help(self) -> None:
        """Show what the screen means and every key binding (``?`` again closes it)."""
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        if not self.is_screen_installed("help"):  # made once, shown again on each ?
            replay = getattr(self.source, "replay", False)
            top = [b for b in TopScreen.BINDINGS if replay or b not in REPLAY_BINDINGS]
            everywhere = [b for b in self.BINDINGS if isinstance(b, Binding)]
            groups = [("everywhere", everywhere), ("top view", top),
                      ("worker detail", list(WorkerScreen.BINDINGS)),
                      ("config editor", list(ConfigScreen.BINDINGS))]  # fmt: skip
            self.install_screen(HelpScreen(groups), "help")
        self.push_screen("help")

    def action_config(self) -> None:
        """Open the shard-config editor (read-only in a replay or with ``--readonly``)."""
        if not isinstance(self.screen, ConfigScreen):
            self.push_screen(ConfigScreen())

    def action_toggle_theme(self) -> None:
        """Switch between the dark and the light theme."""
        self.theme = LIGHT if self.theme == DARK else DARK


def lines_queue(lines: queue.Queue | Iterable[str] | None) -> queue.Queue | None:
    """A queue of output lines: a queue as is, an iterable pumped by a daemon thread (then ``None``)."""
    if lines is None or isinstance(lines, queue.Queue):
        return lines
    q: queue.Queue = queue.Queue()

    def pump() -> None:
        try:
            for line in lines:
                q.put(line)
        finally:
            q.put(None)

    threading.Thread(target=pump, name="gt-top-output", daemon=True).start()
    return q


def make_app(source: Source, *, hz: float = 8, readonly: bool = False, title: str | None = None,
             output: queue.Queue | Iterable[str] | None = None, token: str | None = None,
             gc_pacer: IdlePacer | None = None) -> GTApp:  # fmt: skip
    """The one way to build the monitor app (``gt top``, ``gt run``, ``gt replay``, tests).

    Args:
        source: where states come from (:class:`~gt.tui.sources.LiveSource`, ``ListSource``, ...).
        hz: repaints per second.
        readonly: show that this monitor must not change the cluster (config edits disabled).
        title: the terminal title.
        output: a child process's output lines (a queue, or an iterable read on a thread; ``None``
            ends it) shown in an extra pane.
        token: the control endpoint's credentials, needed to apply configs to a remote dispatcher.
        gc_pacer: runs full garbage collections while the user is idle (the CLI passes one; an
            app inside a test process leaves the process's GC alone).
    """
    return GTApp(source, hz=hz, readonly=readonly, title=title, output=lines_queue(output),
                 token=token, gc_pacer=gc_pacer)  # fmt: skip
