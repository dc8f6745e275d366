"""The layout at 80×24 and 120×40, the help box, Ctrl-C, the footer, filter and sort (Pilot)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey

from gt.tui import tables as T
from gt.tui.app import make_app
from gt.tui.sample import T_END, sample_batches
from gt.tui.screens import HelpScreen, TopScreen
from gt.tui.sources import ListSource
from gt.tui.widgets import ClientsTable, ClusterHeader, OutputPane, TimelineView, WorkersTable

pytestmark = pytest.mark.timeout(60)
SMALL, MEDIUM = (80, 24), (120, 40)


def sample_app(**kw):
    return make_app(
        ListSource(sample_batches(), now_ns=T_END, address="tcp://127.0.0.1:45767"), **kw
    )


async def drawn(pilot, table: DataTable) -> None:
    """Wait (bounded) until the table has its rows: the first repaint may come late on a busy
    machine."""
    for _ in range(100):
        if table.row_count:
            return
        await pilot.pause(0.02)
    raise AssertionError("the table never got its rows")


def to_text(renderable) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def visible(widget) -> bool:
    """Whether the whole widget lies on the screen."""
    screen = widget.screen.region
    region = widget.region
    return region.width > 0 and region.height > 0 and screen.contains_region(region)


@pytest.mark.parametrize("size", [SMALL, MEDIUM])
async def test_header_and_every_worker_column_are_on_screen(size):
    app = sample_app()
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one(WorkersTable)
        await drawn(pilot, table)
        await pilot.pause()
        header = app.screen.query_one(ClusterHeader)
        assert visible(header) and header.region.y == 0
        assert [str(c.value) for c in table.columns] == list(T.WORKER_COLUMNS)
        # every column lies inside the panel: none is scrolled out of sight
        assert table.virtual_size.width <= table.scrollable_content_region.width
        for name in ("util", "temp", "power", "memory"):
            assert name in T.WORKER_COLUMNS
        text = " ".join(c.plain for c in table.get_row("0"))
        assert "%" in text and "°C" in text and "W" in text and "/2.0G" in text


@pytest.mark.parametrize("size", [SMALL, MEDIUM, (140, 45)])
async def test_no_panel_shows_a_horizontal_scrollbar(size):
    app = sample_app()
    async with app.run_test(size=size) as pilot:
        await drawn(pilot, app.screen.query_one(WorkersTable))
        await pilot.pause()
        shown = [w for w in app.screen.walk_children() if w.show_horizontal_scrollbar]
        assert not shown, [f"{w.__class__.__name__}#{w.id}" for w in shown]
        assert not app.screen.show_vertical_scrollbar  # the screen itself never overflows


async def test_with_the_output_pane_at_80x24_the_header_and_the_output_stay_on_screen():
    app = sample_app(output=[f"step {i}" for i in range(50)])
    async with app.run_test(size=SMALL) as pilot:
        await drawn(pilot, app.screen.query_one(WorkersTable))
        await pilot.pause()
        assert visible(app.screen.query_one(ClusterHeader))
        out = app.screen.query_one(OutputPane)
        assert visible(out) and out.region.height >= 3
        assert not app.screen.show_vertical_scrollbar


async def test_help_box_scrolls_to_its_end_at_80x24():
    app = sample_app()
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box")
        await pilot.pause()
        assert visible(box)
        assert box.max_scroll_y > 0  # more help than fits: it must scroll, not be cut off
        assert box.has_focus and "scroll" in str(box.border_subtitle)  # and say that it does
        await pilot.press("end")
        await pilot.pause()
        assert box.scroll_y == box.max_scroll_y
        await pilot.press("home", "pagedown")
        await pilot.pause()
        assert box.scroll_y > 0


async def test_help_explains_the_four_shares():
    app = sample_app()
    async with app.run_test(size=MEDIUM) as pilot:
        await pilot.press("question_mark")
        text = str(app.screen.query_one("#help-text").render())
        for part in ("compute", "comm", "wait", "idle", "100 %", "not yet arrived"):
            assert part in text


@pytest.mark.parametrize("where", ["top", "filter", "config", "help"])
async def test_ctrl_c_quits_from_anywhere(where):
    app = sample_app()
    async with app.run_test(size=MEDIUM) as pilot:
        await pilot.pause()
        if where == "filter":
            await pilot.press("slash", "w")
        elif where == "config":
            await pilot.press("c")
        elif where == "help":
            await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.return_code == 0, "ctrl+c did not quit"


def footer_keys(app) -> list[FooterKey]:
    return list(app.screen.query(FooterKey))


async def test_every_footer_key_of_a_replay_is_visible_at_120_columns(tmp_path):
    from replay_fixtures import FakeWall, write_sample

    from gt.tui.replay import ReplaySource

    src = ReplaySource.from_file(write_sample(tmp_path / "s.gtrace"), wall=FakeWall())
    app = make_app(src, readonly=True)
    async with app.run_test(size=MEDIUM) as pilot:
        await pilot.pause()
        keys = footer_keys(app)
        assert keys
        width = app.screen.region.width
        hidden = [k.key for k in keys if k.region.right > width or k.region.width == 0]
        assert not hidden, f"footer keys off screen: {hidden}"
        shown = {k.key for k in keys}
        assert {"q", "question_mark", "x", "v", "g", "left_square_bracket"} <= shown


async def test_quit_and_help_are_in_the_footer_at_80_columns():
    app = sample_app()
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        on_screen = {k.key for k in footer_keys(app) if k.region.right <= 80 and k.region.width}
        assert {"q", "question_mark"} <= on_screen


async def test_filter_applies_to_workers_timeline_and_clients_alike():
    app = sample_app()
    async with app.run_test(size=MEDIUM) as pilot:
        workers = app.screen.query_one(WorkersTable)
        await drawn(pilot, workers)
        await pilot.press("slash", "w", "1")
        await pilot.pause()
        assert [str(k.value) for k in workers.rows] == ["1"]
        assert [lane.worker for lane in app.screen.query_one(TimelineView).state.lanes] == [1]
        clients = app.screen.query_one(ClientsTable)
        assert [str(k.value) for k in clients.rows] == ["2"]  # c2 runs on w1: it stays
        await pilot.press("escape")
        await pilot.pause()
        assert workers.row_count == 3 and clients.row_count == 2


async def test_sorted_column_header_shows_an_arrow():
    app = sample_app()
    async with app.run_test(size=MEDIUM) as pilot:
        workers = app.screen.query_one(WorkersTable)
        await drawn(pilot, workers)
        labels = [c.label.plain for c in workers.columns.values()]
        assert labels[0].endswith("▲")
        await pilot.press("s")  # by compute, largest first
        await pilot.pause()
        labels = [c.label.plain for c in workers.columns.values()]
        assert labels[T.WORKER_COLUMNS.index("shares")].endswith("▼")
        assert not labels[0].endswith("▲")
        await pilot.press("S")
        await pilot.pause()
        labels = [c.label.plain for c in workers.columns.values()]
        assert labels[T.WORKER_COLUMNS.index("shares")].endswith("▲")


class GoneSource(ListSource):
    """The sample, as a live monitor sees it after its dispatcher went away."""

    def status(self) -> T.Status:
        return T.Status("live", "tcp://127.0.0.1:45767", False, "disconnected: no answer for 3s")


async def test_workers_are_not_shown_alive_when_the_dispatcher_is_gone():
    app = make_app(GoneSource(sample_batches(), now_ns=T_END))
    async with app.run_test(size=MEDIUM) as pilot:
        table = app.screen.query_one(WorkersTable)
        await drawn(pilot, table)
        state = T.WORKER_COLUMNS.index("state")
        assert table.get_row("0")[state].plain == "unknown"
        assert table.get_row("2")[state].plain == "dead"
        assert "disconnected" in str(app.screen.query_one(ClusterHeader).render())
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, TopScreen)
        assert "unknown: disconnected" in to_text(app.screen.body)
