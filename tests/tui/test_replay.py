"""Replaying a recorded ``.gtrace`` file: the source, its keys in the app, ``gt replay --json``."""

from __future__ import annotations

import json

import pytest

from gt.cli import main
from gt.runtime.ops import OPS
from gt.trace.recorder import Recorder
from gt.tui.app import make_app
from gt.tui.replay import ReplaySource
from gt.tui.sample import sample_batches

pytestmark = pytest.mark.timeout(60)
S = 1_000_000_000


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "sample.gtrace"
    rec = Recorder(path, start_ns=0, op_names=OPS)
    for source, first, events in sample_batches():
        rec.write_batch(source, first, events)
    rec.close()
    return path


class FakeWall:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_replay_from_file_matches_the_recorded_batches(trace):
    wall = FakeWall()
    src = ReplaySource.from_file(str(trace), wall=wall)
    assert src.address == "sample.gtrace"
    src.seek(src.clock.t_end)
    st = src.snapshot()
    assert len(st.workers) == 3 and not st.workers[2].alive
    assert st.totals.dropped == 1
    assert st.workers[0].current_op is not None and not st.workers[0].current_op.startswith("op")


async def test_replay_keys_pause_speed_and_seek(trace):
    wall = FakeWall()
    src = ReplaySource.from_file(str(trace), wall=wall)
    app = make_app(src, readonly=True)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.press("right_square_bracket")
        assert src.clock.speed == 2.0
        await pilot.press("full_stop")
        assert src.clock.position() == src.clock.t_start + 5 * S
        await pilot.press("comma")
        assert src.clock.position() == src.clock.t_start
        await pilot.press("space")
        assert src.clock.paused
        wall.t += 3
        assert src.clock.position() == src.clock.t_start
        await pilot.press("space")
        wall.t += 1
        assert src.clock.position() == src.clock.t_start + 2 * S  # at 2x


async def test_replay_keys_are_off_for_other_sources():
    from gt.tui.sources import ListSource

    app = make_app(ListSource(sample_batches()))
    async with app.run_test(size=(140, 45)) as pilot:
        assert app.screen.check_action("replay_step", (5,)) is False
        await pilot.press("full_stop", "right_square_bracket")  # nothing happens, nothing breaks
        assert app.screen.check_action("zoom_in", ()) is True


def test_gt_replay_json_at_a_time(trace, capsys):
    assert main(["replay", str(trace), "--json", "--at", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"]["kind"] == "replay"
    assert [m["label"] for m in data["marks"]] == ["epoch 1"]  # epoch 2 is at 9s
    assert all(w["alive"] for w in data["workers"])  # worker 2 died at 7.2s


def test_gt_replay_rejects_a_file_that_is_not_a_trace(tmp_path, capsys):
    bad = tmp_path / "x.gtrace"
    bad.write_bytes(b"not a trace at all")
    assert main(["replay", str(bad), "--once"]) == 1
    assert "gt replay:" in capsys.readouterr().err
