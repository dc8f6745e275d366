"""Sources without sockets: the fixed list, replay with an injected clock, view changes."""

from __future__ import annotations

from helpers import HandClock

from gt.trace import events as E
from gt.tui.replay import ReplayClock, ReplaySource
from gt.tui.sample import T_END, sample_batches, sample_events
from gt.tui.sources import ListSource

S = 1_000_000_000


def test_list_source_takes_batches_or_plain_events_alike():
    a = ListSource(sample_batches(), now_ns=T_END).snapshot()
    b = ListSource(sample_events(), now_ns=T_END).snapshot()
    assert a.totals.instructions == b.totals.instructions > 0
    assert a.totals.dropped == 1 and b.totals.dropped == 0  # plain events carry no sequence gaps


def test_list_source_snapshot_is_cached_until_the_view_changes():
    src = ListSource(sample_batches(), now_ns=T_END)
    first = src.snapshot()
    assert src.snapshot() is first
    src.set_view(timeline_ns=S)
    zoomed = src.snapshot()
    assert zoomed is not first and zoomed.timeline_end_ns - zoomed.timeline_start_ns == S


def test_pause_freezes_the_timeline_end_until_resumed():
    src = ListSource(sample_batches(), now_ns=T_END)
    src.set_view(paused=True)
    assert src.snapshot().timeline_end_ns == T_END
    src.set_view(paused=False)
    assert src.frozen_end is None


def test_replay_clock_plays_pauses_speeds_up_and_seeks():
    wall = HandClock()
    clock = ReplayClock(0, 10 * S, wall=wall)
    wall.t += 1
    assert clock.position() == S
    clock.pause()
    wall.t += 5
    assert clock.position() == S
    clock.pause(False)
    clock.set_speed(4)
    wall.t += 1
    assert clock.position() == 5 * S
    clock.seek(2 * S)
    assert clock.position() == 2 * S
    wall.t += 100
    assert clock.position() == 10 * S  # clamped to the recording


def test_replay_source_folds_up_to_the_clock_and_refolds_on_a_backward_seek(tmp_path):
    from replay_fixtures import write_sample

    wall = HandClock()
    src = ReplaySource.from_file(write_sample(tmp_path / "s.gtrace"), wall=wall, speed=1.0)
    start = src.clock.t_start
    wall.t += 5
    mid = src.snapshot()
    assert mid.now_ns == start + 5 * S
    assert all(m.t_ns <= mid.now_ns for m in mid.marks)
    wall.t += 20
    end = src.snapshot()
    assert end.totals.events > mid.totals.events
    src.seek(start + S)
    early = src.snapshot()
    assert early.totals.events < mid.totals.events
    assert "replay" in src.status().detail
    src.stop()


def test_events_in_batches_with_unknown_kinds_do_not_break_a_source():
    src = ListSource([E.event("from_the_future", 5, x=1), E.event(E.MARK, 6, client=1, label="m")])
    assert [m.label for m in src.snapshot().marks] == ["m"]
