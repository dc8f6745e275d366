"""SVG snapshots of the main views, drawn from a real recorded run (``tests/tui/fixtures/demo.gtrace``,
``gt demo`` on two CPU workers; no wall clock anywhere) exactly as ``scripts/make_screenshots.py``
draws the README's pictures, at 140×45 and at the small sizes the layout must survive: 80×24 and
120×40.

Update them after an intended visual change with ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gt.tui.app import make_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import make_screenshots as shots  # noqa: E402 - the pictures' own sources

pytestmark = pytest.mark.timeout(60)
SIZE = (140, 45)
SMALL, MEDIUM = (80, 24), (120, 40)


def sample_app():
    """The live view of the recorded run, at the moment the README's pictures show."""
    return make_app(shots.live_source(shots.TRACE))


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


def replay_app():
    """The recorded run replayed, paused at that moment with the second before it selected."""
    from replay_fixtures import FakeWall

    return make_app(shots.replay_source(shots.TRACE, FakeWall()), readonly=True,
                    title="gt replay demo.gtrace")  # fmt: skip


def test_replay_screen_snapshot(snap_compare):
    assert snap_compare(replay_app(), terminal_size=SIZE)


def test_replay_screen_at_120x40_snapshot(snap_compare):
    # every footer key fits
    assert snap_compare(replay_app(), terminal_size=MEDIUM)


def test_config_editor_snapshot(snap_compare):
    # the demo's config (applied at its start) in the history, an edit with an error, the diff
    async def edit(pilot):
        await pilot.press("c")
        await pilot.pause()
        pilot.app.screen.load(shots.EDITED)
        await pilot.pause()

    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=edit)
