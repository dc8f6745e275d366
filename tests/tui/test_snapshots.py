"""SVG snapshots of the main views, drawn from the fixed sample trace (no wall clock anywhere).

Update them after an intended visual change with ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from gt.tui.app import make_app
from gt.tui.sample import T_END, sample_batches
from gt.tui.sources import ListSource

pytestmark = pytest.mark.timeout(60)
SIZE = (140, 45)


def sample_app():
    return make_app(ListSource(sample_batches(), now_ns=T_END, address="sample.gtrace"))


def test_top_view_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SIZE)


def test_worker_detail_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SIZE, press=["enter"])


def test_help_screen_snapshot(snap_compare):
    assert snap_compare(sample_app(), terminal_size=SIZE, press=["question_mark"])


def test_zoomed_in_paused_timeline_snapshot(snap_compare):
    # 10s -> 5s -> 2s -> 1s -> 500ms, frozen: instruction-level spans, the "paused" axis label
    assert snap_compare(
        sample_app(), terminal_size=SIZE, press=["plus", "plus", "plus", "plus", "space"]
    )
