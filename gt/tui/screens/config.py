"""The shard-config editor (``c``): YAML validated as you type, a diff, apply, history, revert.

Against a live dispatcher, ``ctrl+s`` applies the edited config for new instructions; the
dispatcher answers with the config it installed or a precise error (the running one stays).
Every applied config arrives back as a ``config`` event, so the history (and every other
monitor, and every recording) shows it. In a replay, or with ``--readonly``, the editor shows the
config in force and its history but changes nothing. A dispatcher started by another user of this
machine is read-only too (it is theirs to change).

The checks never claim more than they know: until the dispatcher has said what runs, and while an
apply is on its way, they say so instead of "valid". Leaving the editor with unsaved edits keeps
them for the next ``c``.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static, TextArea

from gt.runtime.control import ConfigControl, request
from gt.runtime.sharding import config_text as CE
from gt.trace.state import ClusterState, ConfigChange
from gt.tui import config_view as CV
from gt.tui import tables as T
from gt.tui.impact import impact_text
from gt.tui.sources import ControlError
from gt.tui.textual_leaks import Footer
from gt.tui.timebar import fmt_time
from gt.tui.widgets import ClusterHeader
from gt.tui.widgets.yaml_area import YamlArea


class ConfigScreen(Screen):
    """Edit, check, diff and apply the shard config; escape goes back."""

    BINDINGS = [
        Binding("escape", "back", "back"),
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
        self.loading = False  # waiting for the dispatcher to say which config runs
        self.owner_refusal: str | None = None  # set when the dispatcher is another user's
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
        yield Footer(compact=True)

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
        self.loading = self.control is not None
        self.set_running(self._local_running(state))
        draft = app.config_draft
        self.load(draft if draft is not None else self.running_text)
        if draft is not None:
            self.notify(
                "your unsaved edits are back (ctrl+r: the running config instead)", timeout=4
            )
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

    @property
    def edited(self) -> bool:
        """Whether the editor holds something other than the running config (formatting and
        comments aside)."""
        return CV.differs(self.running_text, self.text, self.checked)

    def refresh_checks(self) -> None:
        """Validate the editor's text against the live workers; redraw problems and diff."""
        if not self.is_mounted:
            return
        self.checked = CE.check_text(self.text, self.worker_ids)
        lines = frozenset(p.line for p in self.checked.problems if p.line)
        self.query_one("#editor", YamlArea).mark_lines(lines)
        if self.loading:
            status: Text | None = Text("… asking the dispatcher which config runs", style="dim")
        elif self.applying:
            status = Text("… applying: waiting for the dispatcher's answer", style="bold yellow")
        else:
            status = None
        self.query_one("#problems", Static).update(
            status or CV.problems_text(self.checked, self.worker_ids)
        )
        self.query_one("#diff", Static).update(
            Text("… the running config is not known yet", style="dim")
            if self.loading
            else CV.diff_text(self.running_text, self.text, self.checked)
        )

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

    def action_back(self) -> None:
        """Leave the editor; unsaved edits are kept for the next time it opens."""
        app = self.app
        if not self.readonly and self.edited:
            app.config_draft = self.text
            self.notify("unsaved edits kept: c reopens them", timeout=3)
        else:
            app.config_draft = None
        app.pop_screen()

    def action_reload(self) -> None:
        """Put the running config back in the editor (unsaved edits are dropped)."""
        self.app.config_draft = None
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
        why = self.control.refusal() or self.owner_refusal
        if why is not None:
            self.notify(why, severity="error", timeout=6)
            return
        if self.loading:
            self.notify("not yet: the dispatcher has not said which config runs", timeout=3)
            return
        if not self.applying:
            self.applying = True
            self.refresh_checks()
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
        self.refresh_checks()
        if error is not None:
            self.last_result = f"error: {error}"
            self.query_one("#problems", Static).update(Text(f"✗ the dispatcher refused it: {error}\n"
                                                            "the running config stays in force", style="bold red"))  # fmt: skip
            self.notify(f"not applied: {error}", severity="error", timeout=6)
            return
        self.last_result = "applied"
        self.app.config_draft = None
        self.set_running(CE.normal_yaml(after))  # the diff is now empty: the edits are running
        self.notify("applied: new instructions follow it", timeout=3)

    @work(thread=True, exclusive=True, group="config-fetch")
    def fetch_running(self) -> None:
        """Ask the dispatcher for its config, workers and owner (worker thread)."""
        try:
            cfg, ids = self.control.get(), self.control.workers()
            owner = request(self.control.endpoint, "ping", timeout=self.control.timeout)
        except ControlError as exc:
            self.app.call_from_thread(self._fetch_failed, str(exc))
            return
        uid = owner.get("uid") if isinstance(owner, dict) else None
        self.app.call_from_thread(self._fetched, CE.normal_yaml(cfg), ids, uid)

    def _fetch_failed(self, why: str) -> None:
        self.loading = False
        self.refresh_checks()
        self.notify(f"cannot read the running config: {why}", severity="warning")

    def _fetched(self, cfg: dict, ids: list[int], uid: object = None) -> None:
        editing = self.edited
        self.loading = False
        self.owner_refusal = CV.owner_refusal(uid, self.control.endpoint, self.control.token)
        if self.owner_refusal is not None:
            self.query_one("#editor").border_title = "shard config (YAML)  read-only: not yours"
        self.worker_ids = ids
        self.set_running(cfg)
        if not editing:
            self.load(self.running_text)
