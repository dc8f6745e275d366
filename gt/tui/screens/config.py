"""The shard-config editor (``c``): YAML validated as you type, a diff, apply, history, revert.

Against a live dispatcher, ``ctrl+s`` applies the edited config for new instructions; the
dispatcher answers with the config it installed or a precise error (the running one stays).
Every applied config arrives back as a ``config`` event, so the history (and every other
monitor, and every recording) shows it. In a replay, or with ``--readonly``, the editor shows the
config in force and its history but changes nothing.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TextArea

from gt.runtime.control import ConfigControl
from gt.runtime.sharding import config_text as CE
from gt.trace.state import ClusterState, ConfigChange
from gt.tui import config_view as CV
from gt.tui import tables as T
from gt.tui.impact import impact_text
from gt.tui.sources import ControlError
from gt.tui.timebar import fmt_time
from gt.tui.widgets import ClusterHeader
from gt.tui.widgets.yaml_area import YamlArea


class ConfigScreen(Screen):
    """Edit, check, diff and apply the shard config; escape goes back."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("ctrl+s", "apply", "apply"),
        Binding("ctrl+r", "reload", "reload running"),
        Binding("ctrl+t", "revert", "revert to selected"),
        Binding("tab", "app.focus_next", "next pane", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.control: ConfigControl | None = None
        self.running_text = CE.to_text(None)
        self.checked = CE.Checked()
        self.worker_ids: list[int] | None = None
        self.history: list[ConfigChange] = []
        self.applying = False
        self.last_result: str | None = None  # what the last apply said (tests read it)

    # -- layout ---------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="header")
        with Horizontal(id="config-main"):
            with Vertical(id="config-left"):
                yield YamlArea("", id="editor", read_only=self.readonly)
                yield Static(id="problems")
            with Vertical(id="config-right"):
                with VerticalScroll(id="diff-box"):
                    yield Static(id="diff")
                yield DataTable(id="history", cursor_type="row", zebra_stripes=False)
                with VerticalScroll(id="impact-box"):
                    yield Static(id="impact")
        yield Footer()

    @property
    def readonly(self) -> bool:
        """Nothing can be applied: ``--readonly``, a replay, or no dispatcher to talk to."""
        app = self.app
        return bool(app.readonly) or getattr(app.source, "endpoints", None) is None

    def on_mount(self) -> None:
        app = self.app
        self.query_one("#editor").border_title = "shard config (YAML)" + (
            "  read-only" if self.readonly else ""
        )
        self.query_one("#problems").border_title = "checks"
        self.query_one("#diff-box").border_title = "diff against the running config"
        self.query_one("#history").border_title = "history (enter loads, ctrl+t reverts)"
        self.query_one("#impact-box").border_title = "what the change did (before → after)"
        table = self.query_one("#history", DataTable)
        for col in ("time", "by", "config"):
            table.add_column(col, key=col)
        eps = getattr(app.source, "endpoints", None)
        if eps and eps.get("control"):
            self.control = ConfigControl(eps["control"], token=getattr(app, "token", None))
        state = app.source.snapshot()
        self.set_running(self._local_running(state))
        self.load(self.running_text)
        self.show(state, app.source.status())
        if self.control is not None:
            self.fetch_running()
        self.query_one("#editor").focus()

    def _local_running(self, state: ClusterState) -> dict:
        """The config in force as the events say (replay: at the playhead)."""
        config_at = getattr(self.app.source, "config_at", None)
        if config_at is not None:
            return CE.normal_yaml(config_at())
        if state.configs:
            return CE.normal_yaml(state.configs[-1].after)
        return {}

    # -- state ----------------------------------------------------------------------------------

    def set_running(self, cfg: dict) -> None:
        """The running config (YAML form) the diff compares against."""
        self.running_text = CE.to_text(cfg)
        self.refresh_checks()

    def load(self, text: str) -> None:
        """Put ``text`` in the editor (it is checked at once)."""
        self.query_one("#editor", YamlArea).load_text(text)
        self.refresh_checks()

    @property
    def text(self) -> str:
        """What the editor holds."""
        return self.query_one("#editor", YamlArea).text

    def refresh_checks(self) -> None:
        """Validate the editor's text against the live workers; redraw problems and diff."""
        if not self.is_mounted:
            return
        self.checked = CE.check_text(self.text, self.worker_ids)
        lines = frozenset(p.line for p in self.checked.problems if p.line)
        self.query_one("#editor", YamlArea).mark_lines(lines)
        self.query_one("#problems", Static).update(CV.problems_text(self.checked, self.worker_ids))
        self.query_one("#diff", Static).update(CV.diff_text(self.running_text, self.text))

    def show(self, state: ClusterState, status: T.Status) -> None:
        """Follow the cluster: live workers for validation, history of applied configs."""
        app = self.app
        self.query_one(ClusterHeader).show(state, status, readonly=self.readonly, paused=app.paused)
        ids = sorted(w.id for w in state.workers if w.alive)
        if state.workers and ids != self.worker_ids:
            self.worker_ids = ids
            self.refresh_checks()
        if list(state.configs) != self.history:
            grew = len(state.configs) > len(self.history)
            self.history = list(state.configs)
            self._draw_history(state)
            if grew and self.control is None:
                self.set_running(self._local_running(state))
        self.query_one("#impact", Static).update(self._impact())

    def _draw_history(self, state: ClusterState) -> None:
        table = self.query_one("#history", DataTable)
        table.clear()
        start = getattr(getattr(self.app.source, "clock", None), "t_start", None)
        t0 = start if start is not None else (state.now_ns - (state.uptime_s or 0) * 1e9)
        for i, c in reversed(list(enumerate(self.history))):
            summary = ", ".join(CE.normal_yaml(c.after)) or "(empty)"
            table.add_row(fmt_time(int(c.t_ns - t0)), str(c.by or "?"), summary[:60], key=str(i))

    def _selected(self) -> ConfigChange | None:
        table = self.query_one("#history", DataTable)
        if not self.history or table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return self.history[int(key)] if key is not None else None

    def _impact(self) -> Text:
        change = self._selected() or (self.history[-1] if self.history else None)
        if change is None:
            return Text("no config change yet", style="dim")
        return impact_text(self.app.source, change, self._signal_at_cursor())

    def _signal_at_cursor(self) -> str | None:
        raw = self.checked.raw
        if not isinstance(raw, dict):
            return None
        row = self.query_one("#editor", YamlArea).cursor_location[0]
        lines = self.text.splitlines()
        for r in range(min(row, len(lines) - 1), -1, -1):
            line = lines[r]
            if line and not line[0].isspace() and ":" in line and not line.startswith("#"):
                name = line.split(":", 1)[0].strip().strip("'\"")
                return name if name in raw else None
        return None

    # -- events ---------------------------------------------------------------------------------

    @on(TextArea.Changed, "#editor")
    def _edited(self, event: TextArea.Changed) -> None:
        self.refresh_checks()

    @on(DataTable.RowSelected, "#history")
    def _history_selected(self, event: DataTable.RowSelected) -> None:
        change = self._selected()
        if change is not None:
            self.load(CE.to_text(CE.normal_yaml(change.after)))
            self.notify("loaded into the editor: ctrl+s applies it", timeout=2)

    @on(DataTable.RowHighlighted, "#history")
    def _history_moved(self, event: DataTable.RowHighlighted) -> None:
        self.query_one("#impact", Static).update(self._impact())

    # -- actions --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Apply and revert exist only where the config can be changed."""
        if action in ("apply", "revert"):
            return not self.readonly
        return True

    def action_reload(self) -> None:
        """Put the running config back in the editor."""
        self.load(self.running_text)
        if self.control is not None:
            self.fetch_running()

    def action_revert(self) -> None:
        """Apply the config that was in force before the selected (or the latest) change."""
        change = self._selected() or (self.history[-1] if self.history else None)
        if change is None:
            self.notify("nothing to revert: no config change yet", timeout=2)
            return
        self.load(CE.to_text(CE.normal_yaml(change.before)))
        self.action_apply()

    def action_apply(self) -> None:
        """Send the edited config to the dispatcher (only when it is valid)."""
        if self.readonly or self.control is None:
            self.notify("read-only: this monitor cannot change the config", severity="warning")
            return
        if not self.checked.ok:
            n = len(self.checked.problems)
            self.notify(f"not applied: fix {n} problem{'s' * (n != 1)} first", severity="error")
            return
        why = self.control.refusal()
        if why is not None:
            self.notify(why, severity="error", timeout=6)
            return
        if not self.applying:
            self.applying = True
            self.apply_config(self.checked.raw)

    @work(thread=True, exclusive=True, group="config-apply")
    def apply_config(self, raw: object) -> None:
        """Apply on a worker thread; report back on the UI thread."""
        try:
            after = self.control.apply(raw)
        except ControlError as exc:
            self.app.call_from_thread(self._applied, None, str(exc))
        else:
            self.app.call_from_thread(self._applied, after, None)

    def _applied(self, after: dict | None, error: str | None) -> None:
        self.applying = False
        if error is not None:
            self.last_result = f"error: {error}"
            self.query_one("#problems", Static).update(Text(f"✗ the dispatcher refused it: {error}\n"
                                                            "the running config stays in force", style="bold red"))  # fmt: skip
            self.notify(f"not applied: {error}", severity="error", timeout=6)
            return
        self.last_result = "applied"
        self.set_running(CE.normal_yaml(after))
        self.notify("applied: new instructions follow it", timeout=3)

    @work(thread=True, exclusive=True, group="config-fetch")
    def fetch_running(self) -> None:
        """Ask the dispatcher for its config and workers (worker thread)."""
        try:
            cfg, ids = self.control.get(), self.control.workers()
        except ControlError as exc:
            self.app.call_from_thread(
                self.notify, f"cannot read the running config: {exc}", severity="warning"
            )
            return
        self.app.call_from_thread(self._fetched, CE.normal_yaml(cfg), ids)

    def _fetched(self, cfg: dict, ids: list[int]) -> None:
        editing = self.text != self.running_text
        self.worker_ids = ids
        self.set_running(cfg)
        if not editing:
            self.load(self.running_text)
