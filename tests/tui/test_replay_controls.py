"""Pilot tests of every replay control: play/pause, speed, steps, jumps, go to, window, export."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import wait_for
from replay_fixtures import FakeWall, S, write_sample

from gt.tui.app import make_app
from gt.tui.replay import SPEEDS, ReplaySource
from gt.tui.widgets import ClusterHeader, TimeBar

pytestmark = pytest.mark.timeout(60)
SIZE = (140, 45)


@pytest.fixture
def replay(tmp_path):
    wall = FakeWall()
    src = ReplaySource.from_file(write_sample(tmp_path / "sample.gtrace"), wall=wall)
    src.clock.pause(True)
    return src, wall


def at(src) -> float:
    """The position in seconds since the start of the recording."""
    return (src.clock.position() - src.clock.t_start) / S


async def test_space_plays_and_pauses_and_the_clock_moves_with_the_speed(replay):
    src, wall = replay
    app = make_app(src, readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        assert not src.clock.paused and not app.paused
        wall.t += 1.0
        assert at(src) == pytest.approx(1.0)
        await pilot.press("right_square_bracket", "right_square_bracket")  # x2, x4
        assert src.clock.speed == 4.0
        wall.t += 0.5
        assert at(src) == pytest.approx(3.0)
        await pilot.press("space")
        assert src.clock.paused and app.paused
        wall.t += 5
        assert at(src) == pytest.approx(3.0)
        await pilot.pause()
        assert "paused" in str(app.screen.query_one(TimeBar).render())


async def test_speed_is_bounded_from_x0_25_to_x64(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*["left_square_bracket"] * 5)
        assert src.clock.speed == SPEEDS[0] == 0.25
        await pilot.press(*["right_square_bracket"] * 12)
        assert src.clock.speed == SPEEDS[-1] == 64


async def test_step_by_interval_and_cycle_the_interval(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("full_stop")
        assert at(src) == pytest.approx(5.0)  # the default step is 5 s
        await pilot.press("comma")
        assert at(src) == pytest.approx(0.0)
        await pilot.press("i")  # 5 s -> 10 s
        await pilot.press("i", "i")  # -> 1 min -> 1 ms
        assert src.interval_ns == 1_000_000
        await pilot.press("full_stop", "full_stop")
        assert at(src) == pytest.approx(0.002)


async def test_step_by_event_lands_on_event_times_both_ways(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        start = src.clock.t_start
        await pilot.press("greater_than_sign")
        first = src.clock.position()
        assert first > start and src.clock.paused
        await pilot.press("greater_than_sign")
        second = src.clock.position()
        assert second > first
        await pilot.press("less_than_sign")
        assert src.clock.position() == first
        times = {ev.t_ns for ev in src.reader.events(start + 1, second)}
        assert min(times) == first  # nothing in between was skipped


async def test_jumps_to_marks_errors_and_config_changes_and_back(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        assert src.clock.position() == 4 * S
        await pilot.press("m")
        assert src.clock.position() == 9 * S
        await pilot.press("M")
        assert src.clock.position() == 4 * S
        await pilot.press("k")
        assert src.clock.position() == 5 * S
        await pilot.press("e")
        assert src.clock.position() == 6_500 * 1_000_000
        assert src.snapshot().totals.errors == 1
        await pilot.press("E")  # no error before this one: stays
        assert src.clock.position() == 6_500 * 1_000_000
        await pilot.press("K")
        assert src.clock.position() == 5 * S
        await pilot.press("dollar_sign")
        assert src.clock.position() == src.clock.t_end
        await pilot.press("0")
        assert src.clock.position() == src.clock.t_start
        assert src.snapshot().totals.errors == 0  # back at the start: the model was rebuilt


async def test_go_to_a_typed_time(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g", *"7.25s", "enter")
        assert at(src) == pytest.approx(7.25)
        await pilot.press("g", *"-1s", "enter")
        assert at(src) == pytest.approx(6.25)
        await pilot.press("g", *"50%", "enter")
        assert (
            src.clock.position() == src.clock.t_start + (src.clock.t_end - src.clock.t_start) // 2
        )
        await pilot.press("g", *"soon", "enter")  # not a time: a notice, the position stays
        assert (
            src.clock.position() == src.clock.t_start + (src.clock.t_end - src.clock.t_start) // 2
        )


async def test_clicking_the_time_bar_seeks_there(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(TimeBar)
        width = bar.content_size.width
        await pilot.click(TimeBar, offset=(1 + width // 2, 0))
        assert (
            abs(src.clock.position() - (src.clock.t_start + src.clock.t_end) // 2)
            < (src.clock.t_end - src.clock.t_start) / width * 2
        )


async def test_select_a_window_and_export_it_to_chrome_json(replay, tmp_path):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g", *"3s", "enter", "v", "g", *"4.5s", "enter", "v")
        assert src.selection == (src.clock.t_start + 3 * S, src.clock.t_start + 4_500_000_000)
        await pilot.press("x")
        await app.workers.wait_for_complete()
        await pilot.pause()
    data = json.loads((tmp_path / "sample-3.000s-4.500s.json").read_text())
    ts = [e["ts"] for e in data["traceEvents"] if e.get("ph") == "X"]
    assert ts and 2.0e6 <= min(ts) and max(ts) <= 4.6e6  # microseconds since the first event
    assert src.last_export.endswith("sample-3.000s-4.500s.json")


async def test_a_window_only_started_exports_from_its_start_to_the_end(replay, tmp_path):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g", *"3s", "enter", "v", "x")
        await app.workers.wait_for_complete()
        await pilot.pause()
    end = (src.clock.t_end - src.clock.t_start) / 1e9
    assert src.last_export.endswith(f"sample-3.000s-{end:.3f}s.json")
    ts = [
        e["ts"]
        for e in json.loads(open(src.last_export).read())["traceEvents"]
        if e.get("ph") == "X"
    ]
    assert ts and min(ts) >= 2.0e6  # (not the whole recording: nothing from before 3 s but the
    # batch running at 3 s)


async def test_v_three_times_clears_the_window(replay):
    src, _ = replay
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v", "full_stop", "v")
        assert src.selection is not None and src.selection[1] > src.selection[0]
        await pilot.press("v")
        assert src.selection is None


async def test_a_truncated_trace_replays_up_to_its_last_whole_record(tmp_path):
    path = write_sample(tmp_path / "cut.gtrace")
    data = path.read_bytes()
    # two thirds in, or a byte earlier when that falls between two records (the trace's
    # layout moves with the op registry): the file must end inside a record
    for cut in (len(data) * 2 // 3, len(data) * 2 // 3 - 1):
        path.write_bytes(data[:cut])
        src = ReplaySource.from_file(path, wall=FakeWall())
        if src.warning and "truncated" in src.warning:
            break
    assert src.warning and "truncated" in src.warning
    src.seek(src.clock.t_end)
    assert src.snapshot().totals.events > 1000
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("0", "m", "dollar_sign")
        assert "replay" in str(app.screen.query_one(ClusterHeader).render())


@pytest.mark.skipif(not shutil.which("tmux"), reason="needs tmux")
def test_gt_replay_in_a_real_terminal(tmp_path):
    """End to end: ``gt replay FILE --at 4s --paused`` in tmux; ``m`` jumps to the next mark; q quits."""
    path = write_sample(tmp_path / "sample.gtrace")
    session = f"gt-replay-test-{os.getpid()}"
    cmd = f"exec {sys.executable} -m gt replay {path} --at 4.5s --paused --hz 10"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "45", cmd],
        check=True,
        timeout=10,
    )

    def screen() -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                              timeout=10).stdout  # fmt: skip

    def wait_screen(text: str) -> str:
        return wait_for(
            lambda: (lambda s: s if text in s else None)(screen()), timeout=30, interval=0.2
        )

    try:
        shown = wait_screen("0:04.500 /")
        assert "paused" in shown and "w2" in shown
        subprocess.run(["tmux", "send-keys", "-t", session, "m"], check=True, timeout=10)
        wait_screen("0:08.990 /")  # the mark at 9 s; the recording starts at 10 ms
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True, timeout=10)

        def gone() -> bool:
            has = subprocess.run(["tmux", "has-session", "-t", session], capture_output=True)
            return has.returncode != 0

        wait_for(gone, timeout=10, interval=0.1)  # gt replay quits on q
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)
