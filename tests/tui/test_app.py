"""Pilot tests: key bindings and screens of the app, driven by the fixed sample trace."""

from __future__ import annotations

import io
import queue

import pytest
from pilot_wait import wait_async
from rich.console import Console

from gt.tui.app import DARK, LIGHT, make_app
from gt.tui.sample import T_END, sample_batches
from gt.tui.screens import HelpScreen, TopScreen, WorkerScreen
from gt.tui.sources import ListSource
from gt.tui.widgets import ClusterHeader, OutputPane, TimelineView, WorkersTable

pytestmark = pytest.mark.timeout(60)
SIZE = (140, 45)


def sample_app(**kw):
    return make_app(ListSource(sample_batches(), now_ns=T_END, address="sample"), **kw)


def to_text(renderable) -> str:
    console = Console(width=140, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def plain(widget) -> str:
    return str(widget.render())


async def test_top_screen_shows_workers_dead_worker_and_na():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, TopScreen)
        table = app.screen.query_one(WorkersTable)
        assert table.row_count == 3
        w1 = [str(c) for c in table.get_row("1")]
        assert "N/A" in w1
        w2 = [str(c) for c in table.get_row("2")]
        assert "dead" in w2
        assert "dropped 1" in plain(app.screen.query_one(ClusterHeader))


async def test_question_mark_opens_help_and_escape_closes_it():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        await pilot.press("question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        await pilot.press("question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))


async def test_enter_opens_worker_detail_and_escape_returns():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")  # cursor to w1
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, WorkerScreen) and app.screen.wid == 1
        body = to_text(app.screen.body)
        assert "worker 1" in body and "util N/A" in body
        await pilot.press("escape")
        assert isinstance(app.screen, TopScreen)


async def test_clicking_a_worker_row_opens_its_detail():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(WorkersTable)
        for _ in range(50):  # the rows appear on the first repaint, later on a loaded machine
            if table.row_count:
                break
            await pilot.pause(0.05)
        for _ in range(3):  # the first click may only move the cursor
            # header row is y=1, w0 is y=2 inside the border
            await pilot.click(WorkersTable, offset=(5, 2))
            await pilot.pause()
            if isinstance(app.screen, WorkerScreen):
                break
        assert isinstance(app.screen, WorkerScreen)
        assert app.screen.wid == int(table.selected_key())


async def test_zoom_keys_change_the_timeline_window():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        start = app.source.timeline_ns
        await pilot.press("plus")
        assert app.source.timeline_ns < start
        assert app.state.timeline_end_ns - app.state.timeline_start_ns == app.source.timeline_ns
        await pilot.press("minus", "minus")
        assert app.source.timeline_ns > start


async def test_space_pauses_the_timeline_and_says_so():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        assert app.paused and app.source.frozen_end == T_END
        await pilot.pause()
        assert "paused" in plain(app.screen.query_one(ClusterHeader))
        assert str(app.screen.query_one(TimelineView).render()).split("\n")[-2].endswith("paused")
        await pilot.press("space")
        assert not app.paused and app.source.frozen_end is None


async def test_sort_and_filter_rows():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(WorkersTable)
        await pilot.press("s")
        assert table.sort_key == "compute"
        await pilot.press("slash")
        await pilot.press(*"numpy")
        await pilot.pause()
        assert table.row_count == 1 and table.selected_key() == "1"
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 3


async def test_theme_toggle():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == DARK
        await pilot.press("t")
        assert app.theme == LIGHT
        await pilot.press("t")
        assert app.theme == DARK


async def test_readonly_is_shown():
    app = sample_app(readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "[read-only]" in plain(app.screen.query_one(ClusterHeader))


async def test_output_pane_shows_child_lines_and_exit():
    lines: queue.Queue = queue.Queue()
    for i in range(3):
        lines.put(f"step {i} loss 0.5")
    lines.put(None)
    app = sample_app(output=lines, hz=20)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        pane = app.screen.query_one(OutputPane)
        text = "\n".join(strip.text for strip in pane.lines)
        assert "step 2 loss 0.5" in text and "[process exited]" in text and pane.ended


async def test_empty_source_draws_na_not_errors():
    app = make_app(ListSource([], now_ns=0))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "N/A" in plain(app.screen.query_one(ClusterHeader))
        await pilot.press("question_mark", "escape", "plus", "space", "s")
        assert isinstance(app.screen, TopScreen)


async def test_q_quits():
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 or app.return_code is None


async def test_q_asks_before_it_stops_a_script_that_still_runs():
    from gt.tui.screens.confirm import ConfirmQuit

    lines: queue.Queue = queue.Queue()
    lines.put("epoch 1")  # no None: the script runs on
    app = sample_app(output=lines, hz=20)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await wait_async(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("n")  # keep it running
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        assert app.is_running
        await pilot.press("q", "y")
        await wait_async(pilot, lambda: not app.is_running)


async def test_q_quits_at_once_once_the_script_ended():
    lines: queue.Queue = queue.Queue()
    lines.put(None)
    app = sample_app(output=lines, hz=20)
    async with app.run_test(size=SIZE) as pilot:
        await wait_async(pilot, lambda: app.screen.query_one(OutputPane).ended)
        await pilot.press("q")
        await wait_async(pilot, lambda: not app.is_running)


def test_a_repaint_due_with_no_screen_left_draws_nothing():
    """The repaint timer can fire while the app shuts down, after its last screen is gone (seen
    as ScreenStackError from a replay test on a busy machine): that repaint is skipped."""
    app = sample_app()
    assert not app.screen_stack  # not running: no screen, as after the last one is popped
    app.repaint()
    app.tick()


class _Recording(ListSource):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.gave_way: list[float] = []

    def give_way(self, seconds: float) -> None:
        self.gave_way.append(seconds)


async def test_a_key_asks_the_source_to_give_way_and_a_mouse_move_does_not():
    from textual import events

    from gt.tui.app import GIVE_WAY_S

    src = _Recording(sample_batches(), now_ns=T_END, address="sample")
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        before = len(src.gave_way)
        await app.on_event(events.MouseMove(None, 3, 3, 0, 0, 0, False, False, False))
        assert len(src.gave_way) == before
        await pilot.press("t")
        await wait_async(pilot, lambda: len(src.gave_way) > before)
        assert src.gave_way[-1] == GIVE_WAY_S


def test_a_live_source_gives_way_for_at_most_its_bound_and_never_less_than_asked():
    import time

    from gt.tui.sources import GIVE_WAY_MAX_S, LiveSource

    src = LiveSource({"front": "ipc:///nonexistent"})  # never started: no thread, no socket
    t0 = time.monotonic()
    src.give_way(60.0)
    assert t0 < src.give_way_until <= time.monotonic() + GIVE_WAY_MAX_S
    until = src.give_way_until
    src.give_way(0.001)  # a shorter request does not cut a longer one short
    assert src.give_way_until == until
