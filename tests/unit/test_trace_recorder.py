"""Recording: what goes in comes out of the reader; gaps in sequence numbers are counted."""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from fixtures.gtrace_synth import OP_NAMES, synthetic_batches

from gt.trace import events as E
from gt.trace.reader import Reader
from gt.trace.recorder import RECORDER_SOURCE, Recorder, record_from_bus, write_trace


def _flatten(batches):
    return [(s, q + i, *ev) for s, q, evs in batches for i, ev in enumerate(evs)]


def test_round_trip_keeps_every_event_in_order(tmp_path):
    batches = synthetic_batches(seed=1)
    path = tmp_path / "run.gtrace"
    stats = write_trace(
        path,
        batches,
        run_id="r1",
        op_names=OP_NAMES,
        config={"layer1": {"replicate": {}}},
        workers=[{"id": 0, "host": "h", "pid": 1, "device": "cuda:0"}],
    )
    with Reader(path) as r:
        assert r.clean and r.warning is None and not r.truncated
        assert [tuple(e) for e in r.events()] == _flatten(batches)
        assert r.header["run_id"] == "r1"
        assert r.header["op_names"] == list(OP_NAMES)
        assert r.header["config"] == {"layer1": {"replicate": {}}}
        assert r.header["workers"][0]["device"] == "cuda:0"
        assert [(b.source, b.first_seq, b.events) for b in r.batches()] == [
            tuple(b) for b in batches
        ]
    assert stats["events"] == sum(len(b[2]) for b in batches)
    assert stats["dropped"] == 0


def test_batches_are_stored_exactly_as_packed(tmp_path):
    path = tmp_path / "raw.gtrace"
    packed = E.pack_batch("worker:0", 0, [E.event(E.MARK, 5, client=None, label="x")])
    with Recorder(path) as rec:
        rec.write_packed(packed)
    assert packed in path.read_bytes()


def test_gap_in_sequence_numbers_is_written_as_a_drop(tmp_path):
    path = tmp_path / "gaps.gtrace"
    mark = lambda t: E.event(E.MARK, t, client=1, label=str(t))  # noqa: E731
    with Recorder(path) as rec:
        rec.write_batch("client:1", 0, [mark(1), mark(2)])
        rec.write_batch("client:1", 5, [mark(6)])  # 2, 3, 4 lost
        rec.write_batch("worker:0", 10, [mark(7)])  # first sight: not a loss
        rec.write_batch("client:1", 6, [mark(8)])
        rec.write_batch("client:1", 10, [mark(9)])  # 7, 8, 9 lost
        stats = rec.stats
    assert stats["drops"] == {"client:1": 6} and stats["dropped"] == 6
    with Reader(path) as r:
        drops = [e for e in r.events() if e.kind == E.DROP]
        assert [(e.source, e.fields) for e in drops] == [
            (RECORDER_SOURCE, {"source": "client:1", "missing": 3}),
            (RECORDER_SOURCE, {"source": "client:1", "missing": 3}),
        ]
        assert [e.seq for e in drops] == [0, 1]
        assert drops[0].t_ns == 6  # stamped with the first event after the gap
        assert r.info()["drops"] == {"client:1": 6}


def test_lost_head_of_a_source_that_joined_while_recording_is_a_drop(tmp_path):
    path = tmp_path / "heads.gtrace"
    joined = lambda t, c: E.event(E.CLIENT_JOINED, t, client=c, home=0, host="h", pid=1, argv=[])  # noqa: E731
    mark = lambda t: E.event(E.MARK, t, client=None, label="m")  # noqa: E731
    with Recorder(path) as rec:
        rec.write_batch("worker:0", 7, [mark(1)])  # was running before: not a loss
        rec.write_batch("dispatcher", 0, [joined(2, 1)])
        rec.write_batch("client:1", 3, [mark(3)])  # joined, but seq 0..2 never came
        rec.write_batch("client:2", 2, [mark(4)])  # its join is announced later
        rec.write_batch("dispatcher", 1, [joined(5, 2), joined(6, 2)])
        rec.write_batch("client:3", 0, [mark(7)])
        rec.write_batch("dispatcher", 3, [joined(8, 3)])
        stats = rec.stats
    assert stats["drops"] == {"client:1": 3, "client:2": 2}
    with Reader(path) as r:
        drops = [(e.t_ns, e.fields) for e in r.events(kinds=[E.DROP])]
    assert drops == [
        (3, {"source": "client:1", "missing": 3}),
        (4, {"source": "client:2", "missing": 2}),
    ]


def test_source_restart_is_not_a_drop(tmp_path):
    with Recorder(tmp_path / "restart.gtrace") as rec:
        rec.write_batch("worker:0", 0, [E.event(E.MARK, 1, label="a")] * 3)
        rec.write_batch("worker:0", 0, [E.event(E.MARK, 2, label="b")])
        stats = rec.stats
    assert stats["dropped"] == 0 and stats["resets"] == {"worker:0": 1}


def test_keyframes_hold_the_compact_state_by_default(tmp_path):
    path = tmp_path / "kf.gtrace"
    write_trace(path, synthetic_batches(), keyframe_every_events=40)
    with Reader(path) as r:
        assert len(r.keyframes) >= 3
        t, offset = r.keyframes[-1]
        kf = r.read_keyframe(offset)
        assert kf["t_ns"] == t and kf["source"] == "recorder"
        before = [e for b in r.batches() if b.offset < offset for e in b.events]
        assert sum(kf["state"]["counts"].values()) == len(before)
        assert set(kf["state"]["workers"]) == {0, 1}
        assert kf["seq"]["dispatcher"] > 0


def test_custom_keyframe_fn_and_a_failing_one(tmp_path):
    calls = []

    def snapshot():
        calls.append(1)
        return {"n": len(calls)}

    path = tmp_path / "custom.gtrace"
    write_trace(path, synthetic_batches(), keyframe_fn=snapshot, keyframe_every_events=50)
    with Reader(path) as r:
        states = [r.read_keyframe(o)["state"] for _, o in r.keyframes]
    assert states == [{"n": i + 1} for i in range(len(calls))] and calls

    def broken():
        raise RuntimeError("boom")

    stats = write_trace(
        tmp_path / "broken.gtrace",
        synthetic_batches(),
        keyframe_fn=broken,
        keyframe_every_events=50,
    )
    assert stats["keyframe_errors"] > 0 and stats["keyframes"] == 0
    assert stats["events"] == sum(len(b[2]) for b in synthetic_batches())


def test_write_packed_rejects_garbage_and_writes_nothing(tmp_path):
    with Recorder(tmp_path / "bad.gtrace") as rec:
        with pytest.raises(E.EventFormatError):
            rec.write_packed(b"\x93garbage")
        rec.write_batch("x", 0, [])  # empty batches are ignored
        assert rec.stats["batches"] == 0


def test_writing_after_close_fails(tmp_path):
    rec = Recorder(tmp_path / "closed.gtrace")
    rec.close()
    rec.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        rec.write_batch("x", 0, [E.event(E.MARK, 1, label="a")])


@pytest.mark.timeout(30)
def test_record_from_bus_counts_gaps_on_a_real_socket(tmp_path):
    path = tmp_path / "bus.gtrace"
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    stop, ready = threading.Event(), threading.Event()
    seen: dict[str, threading.Event] = {"probe": threading.Event(), "done": threading.Event()}
    result: dict = {}

    def on_batch(source, first_seq, events):
        if source == "probe":
            seen[events[-1][2]["label"]].set()

    def run():
        result.update(
            record_from_bus(
                f"tcp://127.0.0.1:{port}",
                path,
                stop_event=stop,
                ready=ready,
                on_batch=on_batch,
                ctx=ctx,
                run_id="bus",
                poll_ms=10,
            )
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    probe_seq = 0

    def probe(label):
        nonlocal probe_seq
        pub.send_multipart(
            [E.TOPIC, E.pack_batch("probe", probe_seq, [E.event(E.MARK, probe_seq, label=label)])]
        )
        probe_seq += 1

    try:
        assert ready.wait(10)
        deadline = time.monotonic() + 10
        # the subscription takes a moment to reach the publisher: probe until one arrives
        while not seen["probe"].wait(0.02):
            assert time.monotonic() < deadline, "the recorder never received a probe"
            probe("probe")
        sent = []
        for first, n in [(0, 5), (5, 5), (13, 3), (20, 2)]:  # 10..12 and 16..19 are lost
            evs = [
                E.event(E.MARK, 1000 + first + i, client=1, label=f"e{first + i}") for i in range(n)
            ]
            pub.send_multipart([E.TOPIC, E.pack_batch("client:1", first, evs)])
            sent += [(first + i, ev) for i, ev in enumerate(evs)]
        pub.send_multipart([E.TOPIC, b"not an event batch"])
        pub.send_multipart([b"gtx", E.pack_batch("other", 0, [E.event(E.MARK, 1, label="x")])])
        probe("done")
        assert seen["done"].wait(10)
    finally:
        stop.set()
        thread.join(10)
        pub.close(0)
        ctx.term()
    assert not thread.is_alive()
    assert result["drops"] == {"client:1": 7} and result["dropped"] == 7
    assert result["bad"] == 2
    with Reader(path) as r:
        assert r.clean and r.header["run_id"] == "bus"
        got = [(e.seq, [e.kind, e.t_ns, e.fields]) for e in r.events(sources=["client:1"])]
        assert got == sent
        missing = [e.fields["missing"] for e in r.events(kinds=[E.DROP])]
        assert missing == [3, 4]
