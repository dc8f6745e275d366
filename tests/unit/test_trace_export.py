"""Chrome trace export: valid JSON that Perfetto opens, with lanes, flows, counters and instants."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from fixtures.gtrace_synth import (
    OP_NAMES,
    T0,
    synthetic_batches,
    synthetic_events,
    validate_chrome_trace,
)

from gt.trace import events as E
from gt.trace.export import CLIENTS_PID, export_chrome
from gt.trace.recorder import write_trace


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "run.gtrace"
    write_trace(
        path,
        synthetic_batches(workers=2, clients=2, batches=30),
        op_names=OP_NAMES,
        workers={0: {"host": "n", "pid": 1, "device": "cuda:0 (from the header)"}},
    )
    return path


def _events(path):
    return json.loads(path.read_text())["traceEvents"]


def test_export_is_valid_and_names_processes_and_lanes(trace, tmp_path):
    out = tmp_path / "run.json"
    counts = export_chrome(trace, out)
    v = validate_chrome_trace(out)
    doc = json.loads(out.read_text())
    assert doc["displayTimeUnit"] == "ns"
    # worker_joined is newer than the header; the model's shares of the span follow the name
    assert v["names"]["process"][1].startswith("worker 0 (cpu:0) · compute ")
    assert v["names"]["process"][2].startswith("worker 1 (cpu:1) · compute ")
    shares = [int(x.split()[1][:-1]) for x in v["names"]["process"][1].split(" · ")[1:2]]
    assert shares and 0 <= shares[0] <= 100
    assert v["names"]["process"][CLIENTS_PID] == "clients"
    lanes = set(v["names"]["thread"].values())
    assert {"compute", "comm", "client 1", "client 2"} <= lanes
    assert counts["slices"] == v["X"] and counts["flows"] == v["flows"]
    assert counts["events_in"] == sum(
        len(b[2]) for b in synthetic_batches(workers=2, clients=2, batches=30)
    )


def test_instruction_slices_are_named_by_op_and_laid_out_from_t0(trace, tmp_path):
    out = tmp_path / "run.json"
    export_chrome(trace, out)
    evs = _events(out)
    execs = [
        e
        for b in synthetic_batches(workers=2, clients=2, batches=30)
        for e in b[2]
        if e[0] == E.EXEC
    ]
    f = execs[0][2]
    lane = [e for e in evs if e["ph"] == "X" and e["pid"] == f["worker"] + 1 and e["tid"] == 1]
    start = (f["t0"] - T0) / 1000
    at = sorted(
        (e for e in lane if abs(e["ts"] - start) < 1e-6 or start < e["ts"] < (f["t1"] - T0) / 1000),
        key=lambda e: (e["ts"], -e["dur"]),
    )
    assert at[0]["name"] in ("batch", "hot batch") and at[0]["args"]["batch"] == f["batch"]
    names = [OP_NAMES[c] if c < len(OP_NAMES) else f"op{c}" for c in f["ops"]]
    assert [e["name"] for e in at[1:]] == names
    assert [round(e["dur"] * 1000) for e in at[1:]] == f["durs"]
    assert at[1]["ts"] == at[0]["ts"]
    assert at[1]["args"]["src"] == "train.py:10"  # resolved through the client's srcloc event


def test_op_names_argument_overrides_the_header(trace, tmp_path):
    out = tmp_path / "run.json"
    export_chrome(trace, out, op_names=[f"x{i}" for i in range(20)])
    names = {e["name"] for e in _events(out) if e["ph"] == "X" and e["pid"] in (1, 2)}
    assert "x5" in names and "matmul" not in names


def test_flows_link_queued_batches_to_execs_and_sends_to_recvs(trace, tmp_path):
    out = tmp_path / "run.json"
    export_chrome(trace, out)
    evs = _events(out)
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    batch = [i for i, e in starts.items() if e["name"] == "batch"]
    transfer = [i for i, e in starts.items() if e["name"] == "transfer"]
    assert len(batch) == 60  # every queued batch ran once
    assert len(transfer) == sum(1 for c in (1, 2) for b in range(30) if b % 3 == 0)
    for i in batch:
        assert starts[i]["pid"] == CLIENTS_PID and ends[i]["pid"] in (1, 2)
        assert ends[i]["ts"] >= starts[i]["ts"]
    for i in transfer:
        assert (
            starts[i]["pid"] != ends[i]["pid"]
            and starts[i]["tid"] >= 1001
            and ends[i]["tid"] >= 1001
        )


def test_counters_and_instants(trace, tmp_path):
    out = tmp_path / "run.json"
    export_chrome(trace, out)
    evs = _events(out)
    counters = {e["name"] for e in evs if e["ph"] == "C"}
    assert {"memory", "utilization %", "temperature C"} <= counters
    assert "power W" not in counters  # never sampled: no empty counter track
    instants = [e["name"] for e in evs if e["ph"] == "i"]
    assert "mark: half 1" in instants and "config applied" in instants
    assert "error: matmul" in instants and instants.count("worker joined") == 2


def test_memory_counters_carry_cached_spill_traffic_and_each_clients_bytes(tmp_path):
    mem = E.event(E.MEMORY, 10, worker=0, used=300, reserved=500, limit=1000, spilled=40,
                  tensors=2, cached=200, clients={1: 100, 2: 200}, clients_spilled={2: 40},
                  spill_out=40, spill_in=0, prefetched=0)  # fmt: skip
    path = tmp_path / "mem.gtrace"
    write_trace(path, [("worker:0", 0, [mem])], op_names=["a"])
    out = tmp_path / "mem.json"
    export_chrome(path, out)
    counters = {e["name"]: e["args"] for e in _events(out) if e["ph"] == "C"}
    assert counters["memory"] == {"used": 300, "cached": 200, "reserved": 500, "limit": 1000,
                                  "spilled": 40}  # fmt: skip
    assert counters["memory by client"] == {"client 1": 100, "client 2": 200}
    assert counters["spill traffic"] == {"spill_out": 40, "spill_in": 0, "prefetched": 0}


def test_window_keeps_only_what_overlaps_it(trace, tmp_path):
    out = tmp_path / "win.json"
    lo, hi = 2_000_000, 4_000_000  # ns since the first event
    export_chrome(trace, out, window=(lo, hi))
    validate_chrome_trace(out)
    evs = [e for e in _events(out) if e["ph"] in "XCi"]
    assert evs
    for e in evs:
        if "out" in e.get("args", {}):
            continue  # an instruction of a batch that overlaps the window
        end = e["ts"] + e.get("dur", 0)
        assert end >= lo / 1000 - 1e-3 and e["ts"] <= hi / 1000 + 1e-3, e
    full = tmp_path / "full.json"
    export_chrome(trace, full)
    assert len(evs) < len([e for e in _events(full) if e["ph"] in "XCi"])


def test_worker_subset(trace, tmp_path):
    out = tmp_path / "w1.json"
    export_chrome(trace, out, workers=[1])
    v = validate_chrome_trace(out)
    pids = {e["pid"] for e in _events(out) if e["ph"] != "M"}
    assert 1 not in pids and 2 in pids
    assert 1 not in v["names"]["process"]


def test_summary_level_trace_has_batch_slices_only(tmp_path):
    path = tmp_path / "summary.gtrace"
    per_source = synthetic_events(batches=10, durs=False)
    write_trace(path, [(s, 0, evs) for s, evs in per_source.items()], op_names=OP_NAMES)
    out = tmp_path / "summary.json"
    export_chrome(path, out)
    validate_chrome_trace(out)
    names = {
        e["name"] for e in _events(out) if e["ph"] == "X" and e["pid"] in (1, 2) and e["tid"] < 1000
    }
    assert names <= {"batch", "hot batch"}


def test_overlapping_spans_go_to_separate_lanes_and_missing_names_fall_back(tmp_path):
    path = tmp_path / "overlap.gtrace"
    ex = dict(
        worker=0,
        client=1,
        batch=0,
        n=2,
        ops=[0, 99],
        outs=[1, 2],
        srcs=[0, 0],
        hot=False,
        queue=0,
        errors=0,
    )
    overrun = {**ex, "t0": 100, "t1": 200, "durs": [60, 60]}  # durations overrun t1: clipped
    overlapping = {**ex, "batch": 1, "t0": 150, "t1": 250, "durs": [10, 10]}
    backwards = dict(worker=0, peer=None, bytes=8, t0=300, t1=250, direction=None, what=None)
    evs = [
        E.event(E.EXEC, 100, **overrun),
        E.event(E.EXEC, 150, **overlapping),
        E.event(E.TRANSFER, 260, **backwards, client=None, batch=None),
    ]
    batches = [("worker:0", 0, evs)]
    write_trace(path, batches, workers=[{"id": 0, "device": "cuda:0 H200"}])
    out = tmp_path / "overlap.json"
    export_chrome(path, out)
    v = validate_chrome_trace(out)
    assert v["names"]["process"][1].startswith("worker 0 (cuda:0 H200) ·")  # from the header only
    assert v["names"]["thread"][(1, 2)] == "compute 2"
    names = [e["name"] for e in _events(out) if e["ph"] == "X"]
    assert "op0" in names and "op99" in names  # no op names anywhere: op<code>
    assert v["flows"] == 0  # nothing to pair with


def test_export_streams_instead_of_building_a_list(tmp_path):
    path = tmp_path / "big.gtrace"
    write_trace(
        path, synthetic_batches(workers=2, clients=4, batches=800, seed=5), op_names=OP_NAMES
    )
    out = tmp_path / "big.json"
    tracemalloc.start()
    try:
        export_chrome(path, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = out.stat().st_size
    assert size > 3_000_000
    assert peak < size / 2, (peak, size)


@pytest.mark.parametrize(
    "bad, problem",
    [
        (
            [
                {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
                {"ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 10, "name": "b"},
            ],
            "overlaps",
        ),
        ([{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1, "name": "a"}], "negative duration"),
        ([{"ph": "s", "pid": 1, "tid": 1, "ts": 0, "id": 1, "name": "a"}], "unmatched flows"),
        (
            [{"ph": "C", "pid": 1, "tid": 0, "ts": 0, "name": "m", "args": {"used": "1"}}],
            "not numeric",
        ),
        ([{"ph": "i", "pid": 1, "tid": 0, "ts": 0, "name": "m"}], "without scope"),
    ],
)
def test_validator_catches_broken_traces(tmp_path, bad, problem):
    out = tmp_path / "bad.json"
    out.write_text(json.dumps({"traceEvents": bad}))
    with pytest.raises(AssertionError, match=problem):
        validate_chrome_trace(out)


def test_the_exports_shares_are_the_same_numbers_as_trace_stats(trace, tmp_path):
    from gt.trace.commands import trace_stats
    from gt.trace.reader import Reader

    out = tmp_path / "run.json"
    export_chrome(trace, out)
    names = validate_chrome_trace(out)["names"]["process"]
    with Reader(trace) as r:
        st = trace_stats(r)
    for wid, s in st["workers"].items():
        label = names[wid + 1]
        want = " ".join(f"{k} {100 * s[k]:.0f}%" for k in ("compute", "comm", "wait", "idle"))
        assert label.endswith(want), (label, want)
