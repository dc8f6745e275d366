"""SVG snapshots of the main views, drawn from the fixed sample trace (no wall clock anywhere), at
140×45 and at the small sizes the layout must survive: 80×24 and 120×40.

Update them after an intended visual change with ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from gt.tui.app import make_app
from gt.tui.sample import T_END, sample_batches
from gt.tui.sources import ListSource

pytestmark = pytest.mark.timeout(60)
SIZE = (140, 45)
SMALL, MEDIUM = (80, 24), (120, 40)


def sample_app():
    return make_app(ListSource(sample_batches(), now_ns=T_END, address="sample.gtrace"))


def test_top_view_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SIZE)


def test_top_view_at_80x24_snapshot(snap_compare):
    # every worker column, abbreviated; the header on two lines; the timeline without legend
    assert snap_compare(sample_app(), terminal_size=SMALL)


def test_top_view_at_120x40_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=MEDIUM)


def test_help_screen_at_80x24_scrolled_to_the_end_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SMALL, press=["question_mark", "end"])


def test_worker_detail_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SIZE, press=["enter"])


def test_help_screen_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SIZE, press=["question_mark"])


def test_zoomed_in_paused_timeline_snapshot(snap_compare):
    # 10s -> 5s -> 2s -> 1s -> 500ms, frozen: instruction-level spans, the "paused" axis label
    assert snap_compare(
        sample_app(), terminal_size=SIZE, press=["plus", "plus", "plus", "plus", "space"]
    )


def replay_app(tmp_path_factory):
    """The sample recorded to a trace, replayed paused at 6.6 s with a window selected."""
    from replay_fixtures import FakeWall, S, write_sample

    from gt.tui.replay import ReplaySource

    path = write_sample(tmp_path_factory.mktemp("replay") / "sample.gtrace")
    src = ReplaySource.from_file(path, wall=FakeWall())
    src.clock.pause(True)
    src.seek(src.clock.t_start + 5 * S)
    src.mark_window()
    src.seek(src.clock.t_start + 6_600_000_000)
    src.mark_window()
    return make_app(src, readonly=True, title="gt replay sample.gtrace")


def test_replay_screen_snapshot(snap_compare, tmp_path_factory):
    assert snap_compare(replay_app(tmp_path_factory), terminal_size=SIZE)


def test_replay_screen_at_120x40_snapshot(snap_compare, tmp_path_factory):
    # every footer key fits
    assert snap_compare(replay_app(tmp_path_factory), terminal_size=MEDIUM)


def test_config_editor_snapshot(snap_compare):
    # the sample's config change (at 5 s) in the history, an edit with an error, the diff
    async def edit(pilot):
        await pilot.press("c")
        await pilot.pause()
        pilot.app.screen.load(
            "layer1:\n  shard: {axis: 0, workers: [0, 2]}\nlayer2:\n  replicate: {workers: [0, 9]}\n"
        )
        await pilot.pause()

    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=edit)
