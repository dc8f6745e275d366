"""Seeking a replay through keyframes gives the state a fold from the start gives, quickly."""

from __future__ import annotations

import copy
import functools
import random

import pytest

from gt.runtime.ops import OPS
from gt.trace import events as E
from gt.trace.index import TraceIndex
from gt.trace.keyframes import ModelKeyframer, restore_model, snapshot_model
from gt.trace.reader import Reader
from gt.trace.recorder import Recorder
from gt.trace.state import state_to_dict
from gt.tui.replay import ReplaySource
from gt.tui.sample import sample_batches
from gt.tui.sources import ListSource

pytestmark = pytest.mark.timeout(60)
S = 1_000_000_000


def record(path, *, model: bool, every: int = 300, fold_first: bool = False):
    kf = ModelKeyframer(OPS) if model else None
    with Recorder(
        path, start_ns=0, op_names=OPS, keyframe_fn=kf, keyframe_every_events=every
    ) as rec:
        for source, first, events in sample_batches():
            if kf is not None and fold_first:
                kf.on_batch(source, first, events)
            rec.write_batch(source, first, events)
            if kf is not None and not fold_first:
                kf.on_batch(source, first, events)
    return path


def folded(t_ns: int, timeline_ns: int = 10 * S):
    """The reference: every batch up to ``t_ns`` folded from the start."""
    return copy.deepcopy(_folded(t_ns, timeline_ns))


@functools.lru_cache(maxsize=64)
def _folded(t_ns: int, timeline_ns: int) -> dict:  # the same for every way of recording
    batches = [b for b in sample_batches() if b[2][0][1] <= t_ns]
    src = ListSource(batches, now_ns=t_ns, count_gaps=True)
    src.set_view(timeline_ns=timeline_ns)
    return state_to_dict(src.snapshot())


def replay_state(src: ReplaySource, t_ns: int) -> dict:
    src.seek(t_ns)
    return state_to_dict(src.snapshot())


@pytest.mark.parametrize("fold_first", [False, True])
@pytest.mark.parametrize("timeline_ns", [S // 2, 10 * S])
def test_model_keyframes_restore_exactly_at_any_time(tmp_path, fold_first, timeline_ns):
    src = ReplaySource.from_file(record(tmp_path / "m.gtrace", model=True, fold_first=fold_first),
                                 wall=lambda: 0.0)  # fmt: skip
    src.set_view(timeline_ns=timeline_ns)
    assert len(src.index.keyframes) > 10 and all(k.model for k in src.index.keyframes)
    rng = random.Random(0)
    targets = [rng.randint(src.clock.t_start, src.clock.t_end) for _ in range(4)]
    for t in [*targets, src.clock.t_end, 2 * S, 11 * S]:  # forwards and backwards
        got, want = replay_state(src, t), folded(t, timeline_ns)
        # the recording holds one more event than the bus carried: the recorder's drop event
        want["totals"]["events"] += want["totals"]["dropped"]
        for key in ("workers", "clients", "totals", "marks", "configs", "drops", "lanes"):
            assert got[key] == want[key], (t, key)
    assert src.restores > 3


def test_compact_keyframes_restore_membership_moments_and_counts(tmp_path):
    src = ReplaySource.from_file(record(tmp_path / "c.gtrace", model=False), wall=lambda: 0.0)
    src.set_view(
        timeline_ns=S
    )  # 3 s of history (timeline + rate window) to rebuild, not the whole run
    assert not any(k.model for k in src.index.keyframes)
    got = replay_state(src, 10 * S)
    want = folded(10 * S)
    want["lanes"] = state_to_dict(ListSource([b for b in sample_batches() if b[2][0][1] <= 10 * S],
                                             now_ns=10 * S, count_gaps=True).model.state(10 * S, timeline_ns=S))["lanes"]  # fmt: skip
    assert src.approximate and "≈" in src.status().detail
    assert [w["alive"] for w in got["workers"]] == [w["alive"] for w in want["workers"]]
    assert got["marks"] == want["marks"] and got["configs"] == want["configs"]
    assert got["totals"]["events"] == want["totals"]["events"] + 1  # + the recorder's drop event
    assert got["totals"]["errors"] == 1 and got["totals"]["dropped"] == 1
    assert got["lanes"] == want["lanes"]  # the visible history is folded, not approximated


def test_a_backward_seek_restores_from_a_keyframe_not_from_the_start(tmp_path, monkeypatch):
    src = ReplaySource.from_file(record(tmp_path / "m.gtrace", model=True), wall=lambda: 0.0)
    src.set_view(timeline_ns=S)
    src.seek(11 * S)
    src.snapshot()
    read: list[int] = []
    orig = Reader.batches

    def spy(self, *a, **kw):
        for b in orig(self, *a, **kw):
            read.append(b.offset)
            yield b

    monkeypatch.setattr(Reader, "batches", spy)
    src.seek(10 * S)
    assert read and min(read) > src.reader.data_start + 10_000  # did not start at the beginning


def test_snapshot_round_trip_keeps_every_counter():
    kf = ModelKeyframer(OPS)
    for b in sample_batches():
        kf.on_batch(*b)
    m = restore_model(snapshot_model(kf.model), OPS, count_gaps=True)
    a, b = m.state(12 * S), kf.model.state(12 * S)
    assert a.totals == b.totals and a.marks == b.marks and a.configs == b.configs
    # windowed rates come back as events are folded after the keyframe; everything else is kept
    assert [c._replace(ops_rate=None) if hasattr(c, "_replace") else c.__class__(**{**c.__dict__, "ops_rate": None})
            for c in a.clients] == [c.__class__(**{**c.__dict__, "ops_rate": None}) for c in b.clients]  # fmt: skip
    assert [w.ops for w in a.workers] == [w.ops for w in b.workers]
    with pytest.raises(ValueError, match="not a model snapshot"):
        restore_model({"workers": 3})


def test_a_keyframe_keeps_the_hot_paths():
    kf = ModelKeyframer(OPS)
    kf.on_batch("client:1", 0, [E.event(E.HOT, 5, client=1, plan=2, name="step", steps=7,
                                        state="replaying", calls=9, eager_ns=None, hot_ns=30)])  # fmt: skip
    snap = snapshot_model(kf.model)
    assert restore_model(snap, OPS).state(6).hot == kf.model.state(6).hot != ()
    snap["hot"] = [[1, 2, "step"]]  # a keyframe from a hostile hand
    with pytest.raises(ValueError, match="not a model snapshot"):
        restore_model(snap, OPS)


def test_index_finds_moments_without_decoding_every_stretch(tmp_path, monkeypatch):
    path = record(tmp_path / "m.gtrace", model=True, every=200)
    decoded: list[int] = []
    orig = Reader._decode_batch

    def spy(self, offset, *a):
        decoded.append(offset)
        return orig(self, offset, *a)

    monkeypatch.setattr(Reader, "_decode_batch", spy)
    with Reader(path) as r:
        idx = TraceIndex(r)
        total = r.summary()["batches"]
    assert [(m.kind, m.t_ns) for m in idx.moments] == [
        (E.MARK, 4 * S), (E.CONFIG, 5 * S), (E.ERROR, 6_500 * 1_000_000), (E.MARK, 9 * S)]  # fmt: skip
    assert (
        len(decoded) < total // 2 + total // 4
    )  # only the stretches with moments or source lines (+ summary)


def test_reader_seek_helpers(tmp_path):
    path = record(tmp_path / "m.gtrace", model=True)
    with Reader(path) as r:
        assert r.t_last == max(ev.t_ns for ev in r.events())
        kf_t, kf_off = r.keyframes[3]
        before = r.chunk_start_before(kf_off)
        assert r.data_start <= before < kf_off
        assert r.offset_for(kf_t + 1) >= before
        assert r.offset_for(0) == r.data_start


def test_base_keyframe_keeps_enough_history_within_a_budget(tmp_path):
    path = record(tmp_path / "m.gtrace", model=True, every=100)
    with Reader(path) as r:
        idx = TraceIndex(r)
        k_now = idx.base(11 * S)
        k_hist = idx.base(11 * S, history_ns=4 * S, workers=3)
        assert 0 <= k_hist < k_now
        assert idx.keyframes[k_hist].t_ns <= 7 * S + S // 2
        assert idx.base(-1) == -1
