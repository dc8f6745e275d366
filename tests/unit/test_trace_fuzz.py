"""Files with valid checksums and wrong contents: every reader reports one line, never a traceback.

The fuzz test rewrites one record of a valid trace (each record type in turn) with random msgpack
values -- whole payloads, one value deep inside, record-head times -- recomputing checksums and
index offsets so that only the contents are wrong, and runs every entry point on it: the reader,
seeking, ``gt trace info|stats``, ``gt export``, and what ``gt replay`` uses to open and seek.
``GT_FUZZ_SEEDS=500`` runs more seeds than the CI's few.
"""

from __future__ import annotations

import contextlib
import io
import os
import random

import pytest
from fixtures.gtrace_fuzz import (
    RECORD_TYPES,
    base_traces,
    exercise,
    mutate,
    payload,
    with_payload,
)

from gt.trace import commands as C
from gt.trace.index import TraceIndex
from gt.trace.keyframes import restore_model, snapshot_model
from gt.trace.model import ClusterModel
from gt.trace.reader import Reader, TraceFormatError
from gt.trace.recorder import R_BATCH, R_HEADER, R_INDEX, R_KEYFRAME, REC
from gt.trace.recorder import RECORD_TYPES as NAMES

pytestmark = pytest.mark.timeout(120)
SEEDS = int(os.environ.get("GT_FUZZ_SEEDS", "12"))


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    return base_traces(tmp_path_factory.mktemp("bases"))


@pytest.mark.parametrize("rtype", RECORD_TYPES, ids=[NAMES[t] for t in RECORD_TYPES])
def test_wrong_contents_give_one_line_errors_never_tracebacks(bases, tmp_path, rtype):
    failures = []
    for seed in range(SEEDS):
        for name, data in bases.items():
            path = tmp_path / f"{name}-{seed}.gtrace"
            path.write_bytes(mutate(data, random.Random(seed * 31 + rtype), rtype))
            failures += [f"seed {seed} {name}: {f}" for f in exercise(path, tmp_path)]
            path.unlink()
    assert not failures, "\n".join(failures[:5])


def _cmd(fn, *args) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = fn(*args)
    return rc, err.getvalue().splitlines()


@pytest.mark.parametrize(
    "header,message",
    [
        ([1, 2], "not a header"),
        ({"format": True}, "unsupported .gtrace format version True"),
        ({"format": 1, "workers": 3}, "header.workers is 3"),
        ({"format": 1, "op_names": ["add", 7]}, "header.op_names is ['add', 7]"),
        ({"format": 1, "start_ns": "x" * 10_000}, "header.start_ns is 'xxxx"),
        ({"format": 1, "wall_time": float("inf")}, "header.wall_time is inf"),
        ({"format": 1, "workers": [{"id": [0]}]}, "header.workers is [{'id': ["),
    ],
)
def test_a_header_of_the_wrong_shape_is_one_short_error(bases, tmp_path, header, message):
    path = tmp_path / "h.gtrace"
    path.write_bytes(with_payload(bases["compact"], R_HEADER, header))
    with pytest.raises(TraceFormatError, match="corrupt header|unsupported") as info:
        Reader(path)
    assert message in str(info.value) and len(str(info.value)) < 200
    for cmd in (C.cmd_trace_info, C.cmd_trace_stats):
        rc, lines = _cmd(cmd, path)
        assert rc == 1 and len(lines) == 1 and message in lines[0]


@pytest.mark.parametrize(
    "batch",
    [
        {"source": "x"},
        ["worker:0", -1, []],
        ["worker:0", 0, [["exec", 1 << 62, {}]]],  # a time out of range
        ["worker:0", 0, [["exec", 5, []]]],
        ["x" * 500, 0, [["mark", 5, {}]]],
    ],
)
def test_a_batch_that_is_not_an_event_batch_is_an_error_when_read(bases, tmp_path, batch):
    path = tmp_path / "b.gtrace"
    path.write_bytes(with_payload(bases["compact"], R_BATCH, batch, nth=3))
    with Reader(path) as r, pytest.raises(TraceFormatError, match="corrupt record at byte"):
        list(r.events())
    rc, lines = _cmd(C.cmd_trace_stats, path)  # (the commands skip it and say so, as replay)
    assert rc == 0 and any("corrupt record" in ln and ln.endswith("skipped") for ln in lines)


def test_a_replay_can_read_past_a_damaged_batch(bases, tmp_path):
    data = bases["compact"]
    path = _write(tmp_path / "ok.gtrace", data)
    with Reader(path) as r:
        whole = list(r.batches())
    path = _write(tmp_path / "b.gtrace", with_payload(data, R_BATCH, {"not": "a batch"}, nth=3))
    with Reader(path, skip_damaged=True) as r:
        got = list(r.batches())
        assert r.skipped == 1 and r.warning.endswith(
            "(event batch is not [source, first_seq, events]); skipped"
        )
        TraceIndex(r)
    assert [b.events for b in got] == [b.events for i, b in enumerate(whole) if i != 3]
    with Reader(_write(tmp_path / "ok2.gtrace", data)) as r:  # a keyframe with a bad checksum
        offset = r.keyframes[0][1]
    bad = bytearray(data)
    bad[offset + REC.size + 2] ^= 0xFF
    with Reader(_write(tmp_path / "k.gtrace", bytes(bad)), skip_damaged=True) as r:
        with pytest.raises(
            TraceFormatError, match=r"corrupt keyframe at byte \d+ \(checksum mismatch\)"
        ):
            r.read_keyframe(offset)
        assert TraceIndex(r).skipped == 1 and r.skipped == 1


def test_odd_field_values_are_recorded_but_count_for_nothing(bases, tmp_path):
    odd = [["drop", 5, {"source": "w", "missing": -7}], ["worker_joined", 6, {"worker": "x"}],
           ["exec", 7, {"worker": 0, "t0": "a", "t1": 9, "ops": [1], "durs": [float("inf")]}],
           ["exec", 8, {"worker": 0, "t0": 8, "t1": 9, "ops": {"a": 1}}],
           ["transfer", 9, {"worker": 0, "peer": [1], "t0": 1, "t1": 2}],
           ["srcloc", 9, {"client": 1, "locs": {"x": 1, 2: [[[]]]}}],
           ["exec", 10, {"worker": 0, "t0": 9, "t1": 10, "ops": [2], "srcs": {"a": 1},
                         "client": [1]}],  # counted; its source lines and client are none
           ["stats", 10, {"counters": [1, 2]}]]  # fmt: skip
    path = tmp_path / "f.gtrace"
    path.write_bytes(with_payload(bases["model"], R_BATCH, ["worker:0", 0, odd], index=False))
    with Reader(path) as r:
        s = r.summary()
        assert s["drops"] == {} and s["counts"]["exec"] >= 2 and "x" not in str(r.workers())
        st = C.trace_stats(r)
    assert all(w["batches"] >= 0 for w in st["workers"].values())
    model = ClusterModel()
    model.apply_batch("worker:0", 0, odd)
    assert model.bad_events == 5 and model.counters == {}  # all but the drop and the stats
    model.state()
    restore_model(snapshot_model(model)).state()  # what the model holds still snapshots


def test_a_damaged_keyframe_is_skipped_and_seeking_uses_an_earlier_one(bases, tmp_path):
    data = bases["model"]
    kf = payload(data, R_KEYFRAME, 1)
    kf["state"]["model"]["workers"][0]["memory"] = ["a"] * 5
    path = tmp_path / "k.gtrace"
    path.write_bytes(with_payload(data, R_KEYFRAME, kf, nth=1))
    with Reader(path) as r:
        idx = TraceIndex(r)
        assert idx.skipped == 1 and len(idx.keyframes) == len(r.keyframes) - 1
        assert "skipped 1 damaged keyframe" in r.warning and "memory" in r.warning
        with pytest.raises(TraceFormatError, match="not a model snapshot"):
            restore_model(kf["state"]["model"])
    path.write_bytes(with_payload(data, R_KEYFRAME, {"t_ns": "soon", "state": {}}, nth=1))
    with Reader(path) as r:
        second = r.keyframes[1][0]
        seek = r.seek(r.t_last)
        assert seek.keyframe_t_ns is not None and seek.keyframe_t_ns > second
        with pytest.raises(TraceFormatError, match=r"corrupt keyframe at byte \d+ \(keyframe.t_ns"):
            r.read_keyframe(r.keyframes[1][1])
        r.seek(second + 1)  # lands on the damaged one: falls back to the first
        assert "skipped a damaged keyframe" in r.warning


@pytest.mark.parametrize(
    "change",
    [
        lambda ix: ix["summary"].update(events=-1),
        lambda ix: ix["summary"].update(counts={"exec": "many"}),
        lambda ix: ix["summary"].update(t_first=[0]),
        lambda ix: ix.update(chunks=[[ix["chunks"][0][0] + 1, 0, 0]]),  # not a record boundary
        lambda ix: ix.update(keyframes=[[0, ix["chunks"][1][0]]]),  # a batch, not a keyframe
        lambda ix: ix.update(chunks=ix["chunks"][::-1]),
        lambda ix: ix.clear(),
    ],
)
def test_an_index_of_the_wrong_shape_is_scanned_around(bases, tmp_path, change):
    data = bases["compact"]
    index = payload(data, R_INDEX)
    with Reader(_write(tmp_path / "ok.gtrace", data)) as r:
        expected = r.info()
    change(index)
    with Reader(_write(tmp_path / "i.gtrace", with_payload(data, R_INDEX, index))) as r:
        assert not r.clean and r.warning == "the index is damaged; scanned the file instead"
        info = r.info()
        assert (info["events"], info["counts"], info["keyframes"]) == (
            expected["events"], expected["counts"], expected["keyframes"])  # fmt: skip


def _write(path, data: bytes):
    path.write_bytes(data)
    return path
