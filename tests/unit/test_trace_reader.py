"""Reading traces: truncation at any byte, corrupt and foreign files, no index, seeking."""

from __future__ import annotations

import struct
import zlib

import msgpack
import pytest
from fixtures.gtrace_synth import OP_NAMES, synthetic_batches

from gt.trace import events as E
from gt.trace.reader import Reader, TraceFormatError
from gt.trace.recorder import MAGIC, R_BATCH, R_HEADER, REC, TRAILER, write_trace


@pytest.fixture
def small_trace(tmp_path):
    """A small cleanly closed trace with a few keyframes."""
    path = tmp_path / "small.gtrace"
    write_trace(
        path,
        synthetic_batches(workers=2, clients=1, batches=6),
        run_id="small",
        op_names=OP_NAMES,
        keyframe_every_events=12,
        index_every=2,
    )
    return path


@pytest.fixture
def big_trace(tmp_path):
    path = tmp_path / "big.gtrace"
    write_trace(
        path,
        synthetic_batches(workers=3, clients=3, batches=150, seed=3),
        keyframe_every_events=100,
        index_every=4,
    )
    return path


def _record_ends(data: bytes) -> list[tuple[int, int, int]]:
    """(start, end, type) of every record after the magic, walking the format by hand."""
    out, pos = [], len(MAGIC)
    while pos + REC.size <= len(data):
        n, rtype, *_ = REC.unpack_from(data, pos)
        out.append((pos, pos + REC.size + n, rtype))
        pos += REC.size + n
        if rtype == 4:
            break
    return out


def _strip_index(path, out):
    """A copy of ``path`` without its index and trailer, as if the recorder had died."""
    data = path.read_bytes()
    offset, _ = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    out.write_bytes(data[:offset])
    return out


def _cuts(data: bytes, records: list) -> list[int]:
    """Where to cut: every byte of the header and within a record header's length of each record
    boundary (where a reader's arithmetic can be off by one), every third byte elsewhere."""
    near = {k for start, end, _ in records for b in (start, end) for k in range(b - REC.size, b + REC.size + 1)}  # fmt: skip
    header_end = records[0][1]
    return [k for k in range(len(data) + 1) if k <= header_end or k in near or k % 3 == 0 or k == len(data)]  # fmt: skip


def test_truncation_anywhere_reads_up_to_the_last_whole_record(small_trace, tmp_path):
    data = small_trace.read_bytes()
    records = _record_ends(data)
    header_end = records[0][1]
    with Reader(small_trace) as r:
        full = [tuple(e) for e in r.events()]
        per_batch = [(b.offset, len(b.events)) for b in r.batches()]
    cut = tmp_path / "cut.gtrace"
    for k in _cuts(data, records):
        cut.write_bytes(data[:k])
        if k < header_end:
            with pytest.raises(TraceFormatError, match="cut.gtrace"):
                Reader(cut)
            continue
        with Reader(cut) as r:
            whole = sum(
                n for off, n in per_batch if next(e for s, e, _ in records if s == off) <= k
            )
            got = [tuple(e) for e in r.events()]
            assert got == full[:whole], f"cut at byte {k}"
            if k == len(data):
                assert r.clean and r.warning is None
            else:
                assert not r.clean and r.warning, f"cut at byte {k} gave no warning"
            info = r.info()
            assert info["events"] == whole
            seek = r.seek(info["t_first"] or 0)
            list(seek.events)


def test_cut_between_records_is_an_unclean_close_not_truncation(small_trace, tmp_path):
    with Reader(_strip_index(small_trace, tmp_path / "unclean.gtrace")) as r:
        assert not r.clean and not r.truncated
        assert "not closed cleanly" in r.warning


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty file"),
        (b"GTRA", "truncated inside the magic"),
        (b'{"traceEvents": []}', "not a .gtrace"),
        (b"\x00" * 100, "not a .gtrace"),
        (MAGIC + b"\x01\x02", "truncated inside the header"),
        (MAGIC + REC.pack(3, R_BATCH, 0, 0, 0) + b"abc", "first record is not a header"),
    ],
)
def test_foreign_and_damaged_files_raise_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.gtrace"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=message) as info:
        Reader(path)
    assert str(path) in str(info.value)


def _with_header(header) -> bytes:
    payload = msgpack.packb(header)
    return MAGIC + REC.pack(len(payload), R_HEADER, 0, 0, zlib.crc32(payload)) + payload


def test_unsupported_version_and_bad_header_payloads(tmp_path):
    path = tmp_path / "v.gtrace"
    path.write_bytes(_with_header({"format": 99}))
    with pytest.raises(TraceFormatError, match="unsupported .gtrace format version 99"):
        Reader(path)
    path.write_bytes(_with_header([1, 2, 3]))
    with pytest.raises(TraceFormatError, match="not a header"):
        Reader(path)


def test_corrupt_header_is_caught_by_its_checksum(small_trace):
    data = bytearray(small_trace.read_bytes())
    data[len(MAGIC) + REC.size + 3] ^= 0xFF
    small_trace.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="corrupt header record"):
        Reader(small_trace)


def test_corrupt_batch_raises_when_read(small_trace):
    data = bytearray(small_trace.read_bytes())
    start, end, _ = [r for r in _record_ends(bytes(data)) if r[2] == R_BATCH][3]
    data[end - 2] ^= 0xFF
    small_trace.write_bytes(bytes(data))
    with Reader(small_trace) as r:
        with pytest.raises(TraceFormatError, match=f"corrupt record at byte {start}"):
            list(r.events())


def test_unknown_record_type_in_an_unclean_file(small_trace, tmp_path):
    path = _strip_index(small_trace, tmp_path / "u.gtrace")
    data = bytearray(path.read_bytes())
    start, _, _ = _record_ends(bytes(data))[2]
    data[start + 4] = 77
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="unknown record type 77"):
        Reader(path)


def test_damaged_index_falls_back_to_a_scan(small_trace):
    data = bytearray(small_trace.read_bytes())
    offset, _ = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    data[offset + REC.size + 1] ^= 0xFF
    small_trace.write_bytes(bytes(data))
    with Reader(small_trace) as r:
        assert not r.clean and "index is damaged" in r.warning
        assert len(list(r.events())) == sum(
            len(b[2]) for b in synthetic_batches(workers=2, clients=1, batches=6)
        )


@pytest.mark.parametrize("indexed", [True, False])
def test_info_is_the_same_with_or_without_an_index(big_trace, tmp_path, indexed):
    path = big_trace if indexed else _strip_index(big_trace, tmp_path / "noindex.gtrace")
    batches = synthetic_batches(workers=3, clients=3, batches=150, seed=3)
    with Reader(path) as r:
        info = r.info()
        assert info["clean"] is indexed
        assert info["events"] == sum(len(b[2]) for b in batches)
        assert info["counts"][E.EXEC] == 450
        assert info["devices"] == ["cpu:0", "cpu:1", "cpu:2"]
        assert [w["id"] for w in info["workers"]] == [0, 1, 2]
        ts = [ev[1] for b in batches for ev in b[2]]
        assert info["duration_ns"] == max(ts) - min(ts)
        assert info["drops"] == {} and info["keyframes"] > 5


@pytest.mark.parametrize("indexed", [True, False])
def test_seek_gives_the_same_events_as_a_filtered_full_scan(big_trace, tmp_path, indexed):
    path = big_trace if indexed else _strip_index(big_trace, tmp_path / "noindex.gtrace")
    with Reader(path) as r:
        full = list(r.events())
        times = sorted({e.t_ns for e in full})
        probes = (
            [times[0] - 1, times[-1] + 1]
            + times[:: max(1, len(times) // 60)]
            + [t + 1 for t in times[::97]]
        )
        total = {}
        for e in full:
            total[e.kind] = total.get(e.kind, 0) + 1
        for t in probes:
            want = [e for e in full if e.t_ns >= t]
            assert list(r.events(t_start=t)) == want, t
            s = r.seek(t)
            after = list(s.events)
            assert [e for e in after if e.t_ns >= t] == want, t
            if s.keyframe is not None:
                assert s.keyframe_t_ns < t or not want
                # the keyframe plus the events after it account for every event
                counts = dict(s.keyframe["counts"])
                for e in after:
                    counts[e.kind] = counts.get(e.kind, 0) + 1
                assert counts == total


def test_seek_late_does_not_read_from_the_start(big_trace, monkeypatch):
    decoded = []
    real = Reader._decode_batch

    def counting(self, offset, payload, t0, t1):
        decoded.append(offset)
        return real(self, offset, payload, t0, t1)

    with Reader(big_trace) as r:
        n_batches = r.info()["batches"]
        t_late = r.info()["t_last"] - 1000
        monkeypatch.setattr(Reader, "_decode_batch", counting)
        s = r.seek(t_late)
        assert s.keyframe is not None
        list(s.events)
        assert len(decoded) < n_batches // 5
        decoded.clear()
        assert list(r.events(t_start=t_late))
        assert len(decoded) < n_batches // 20


def test_time_window_and_filters(big_trace):
    with Reader(big_trace) as r:
        full = list(r.events())
        lo, hi = full[len(full) // 3].t_ns, full[len(full) // 2].t_ns
        assert list(r.events(lo, hi)) == [e for e in full if lo <= e.t_ns <= hi]
        assert list(r.events(kinds=[E.EXEC], sources=["worker:1"])) == [
            e for e in full if e.kind == E.EXEC and e.source == "worker:1"
        ]


def test_malformed_event_inside_a_valid_record(tmp_path):
    path = tmp_path / "m.gtrace"
    write_trace(path, [("x", 0, [["mark", 1, {}]])])
    data = bytearray(path.read_bytes())
    bad = msgpack.packb(["x", 0, [["mark", 1]]])
    good = msgpack.packb(["x", 0, [["mark", 1, {}]]])
    i = data.index(good)
    assert len(bad) == len(good) - 1
    start = i - REC.size
    n, rtype, t0, t1, _ = REC.unpack_from(data, start)
    new = REC.pack(len(bad), rtype, t0, t1, zlib.crc32(bad)) + bad
    path.write_bytes(bytes(data[:start]) + new)  # no index after it: an unclean file
    with Reader(path) as r, pytest.raises(TraceFormatError, match="malformed event"):
        list(r.events())


def test_record_head_layout_is_stable():
    assert REC.size == 25 and TRAILER.size == 16 and len(MAGIC) == 8
    assert struct.calcsize("<IBqqI") == REC.size
