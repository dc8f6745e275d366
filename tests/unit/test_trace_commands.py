"""The trace commands: readable output for good traces, one-line errors (exit 1) for bad files."""

from __future__ import annotations

import json

import pytest
from fixtures.gtrace_synth import OP_NAMES, synthetic_batches, validate_chrome_trace

from gt.trace import events as E
from gt.trace.commands import (
    cmd_export,
    cmd_trace_info,
    cmd_trace_stats,
    parse_duration,
    parse_window,
    parse_workers,
    trace_stats,
)
from gt.trace.reader import Reader
from gt.trace.recorder import write_trace


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "run.gtrace"
    write_trace(
        path,
        synthetic_batches(workers=2, clients=2, batches=20),
        run_id="run-42",
        op_names=OP_NAMES,
    )
    return path


def _bad_files(tmp_path, good):
    empty = tmp_path / "empty.gtrace"
    empty.write_bytes(b"")
    foreign = tmp_path / "foreign.gtrace"
    foreign.write_text("hello, I am a text file\n")
    cut = tmp_path / "cut.gtrace"
    cut.write_bytes(good.read_bytes()[:20])
    corrupt = tmp_path / "corrupt.gtrace"
    data = bytearray(good.read_bytes())
    data[40] ^= 0xFF  # inside the header record
    corrupt.write_bytes(bytes(data))
    folder = tmp_path / "folder.gtrace"
    folder.mkdir()
    return [tmp_path / "missing.gtrace", empty, foreign, cut, corrupt, folder]


@pytest.mark.parametrize("command", ["info", "info-json", "stats", "export"])
def test_bad_files_give_one_line_and_exit_1(trace, tmp_path, capsys, command):
    for path in _bad_files(tmp_path, trace):
        if command == "info":
            rc = cmd_trace_info(path)
        elif command == "info-json":
            rc = cmd_trace_info(path, json=True)
        elif command == "stats":
            rc = cmd_trace_stats(path)
        else:
            rc = cmd_export(path, tmp_path / "out.json")
        out, err = capsys.readouterr()
        assert rc == 1, path
        assert out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], err
        assert "Traceback" not in err


def test_corrupt_record_midway_is_skipped_with_a_warning_by_stats_and_export(
    trace, tmp_path, capsys
):
    with Reader(trace) as r:
        offset = list(r.batches())[5].offset
    data = bytearray(trace.read_bytes())
    data[offset + 30] ^= 0xFF
    trace.write_bytes(bytes(data))
    assert cmd_trace_stats(trace) == 0
    assert cmd_export(trace, tmp_path / "o.json") == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(f"corrupt record at byte {offset}" in line for line in err)
    assert all(line.endswith("skipped") for line in err)


def test_info_text_and_json(trace, capsys):
    assert cmd_trace_info(trace) == 0
    out = capsys.readouterr().out
    assert "run-42" in out and "cpu:1" in out and "exec 40" in out and "dropped   none" in out
    assert cmd_trace_info(trace, json=True) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["run_id"] == "run-42" and info["counts"]["exec"] == 40 and info["clean"]


def test_info_on_a_truncated_trace_warns_in_one_line(trace, capsys):
    data = trace.read_bytes()
    trace.write_bytes(data[: len(data) * 2 // 3])
    assert cmd_trace_info(trace) == 0
    out, err = capsys.readouterr()
    assert "truncated" in out
    assert len(err.strip().splitlines()) == 1 and "warning" in err and str(trace) in err


def test_stats_shares_from_exec_and_transfer_spans(tmp_path, capsys):
    ex = dict(worker=0, client=1, n=2, outs=[1, 2], srcs=[0, 0], hot=False, queue=0, errors=0)
    batches = [
        (
            "worker:0",
            0,
            [
                E.event(E.EXEC, 0, **ex, batch=0, t0=0, t1=30, ops=[1, 2], durs=[10, 20]),
                # published during batch 1, so before its exec event; it outlasts the batch
                E.event(
                    E.TRANSFER,
                    50,
                    worker=0,
                    peer=1,
                    bytes=1000,
                    t0=35,
                    t1=60,
                    direction="send",
                    what="x",
                    client=1,
                    batch=1,
                ),  # fmt: skip
                E.event(
                    E.EXEC, 20, **ex, batch=1, t0=20, t1=40, ops=[2, 2], durs=[5, 5]
                ),  # overlaps batch 0: counted once
                E.event(E.MARK, 100, client=1, label="end"),
            ],
        ),
        (
            "worker:1",
            0,
            [
                E.event(
                    E.TRANSFER,
                    60,
                    worker=1,
                    peer=0,
                    bytes=1000,
                    t0=40,
                    t1=60,
                    direction="recv",
                    what="x",
                    client=1,
                    batch=1,
                ),
            ],
        ),
    ]
    path = tmp_path / "s.gtrace"
    write_trace(path, batches, op_names=["a", "b", "c"])
    with Reader(path) as r:
        st = trace_stats(r)
    w0, w1 = st["workers"][0], st["workers"][1]
    assert st["span_ns"] == 100
    # compute 0..35 (the batches, less the transfer), comm 35..60, idle 60..100
    assert w0["compute"] == pytest.approx(0.35) and w0["comm"] == pytest.approx(0.25)
    assert w0["wait"] == 0 and w0["idle"] == pytest.approx(0.40)
    for w in (w0, w1):
        assert w["compute"] + w["comm"] + w["wait"] + w["idle"] == pytest.approx(1.0)
    assert w0["sent"] == 1000 and w1["recv"] == 1000 and w1["compute"] == 0
    assert w0["batches"] == 2 and w0["instructions"] == 4
    assert st["top_by_time"][0] == ["c", 30, 3]
    assert st["top_by_count"][0] == ["c", 3]
    assert cmd_trace_stats(path) == 0
    out = capsys.readouterr().out
    assert "35.0%" in out and "top ops by time" in out and "1000 B" in out


def test_stats_without_durations_says_so(tmp_path, capsys):
    ex = dict(worker=0, client=1, batch=0, n=1, outs=[1], srcs=[0], hot=False, queue=0, errors=0)
    path = tmp_path / "summary.gtrace"
    write_trace(path, [("worker:0", 0, [E.event(E.EXEC, 0, **ex, t0=0, t1=10, ops=[7], durs=[])])])
    assert cmd_trace_stats(path) == 0
    out = capsys.readouterr().out
    assert "N/A" in out and "op7" in out


def test_stats_report_each_workers_memory_pool_from_its_last_sample(tmp_path, capsys):
    ex = dict(worker=0, client=1, batch=0, n=1, outs=[1], srcs=[0], hot=False, queue=0, errors=0)
    mem = dict(worker=0, reserved=None, spilled=0, tensors=3, limit=20 << 20, oom=0)
    events = [
        E.event(E.EXEC, 0, **ex, t0=0, t1=10, ops=[1], durs=[10]),
        E.event(E.MEMORY, 5, **mem, used=8 << 20, peak=8 << 20, spill_out=0, spill_in=0,
                prefetched=0, prefetch_hits=0, prefetch_misses=0),
        E.event(E.MEMORY, 9, **mem, used=4 << 20, peak=19 << 20, spill_out=300 << 20,
                spill_in=200 << 20, prefetched=150 << 20, prefetch_hits=31, prefetch_misses=7),
    ]  # fmt: skip
    path = tmp_path / "mem.gtrace"
    write_trace(path, [("worker:0", 0, events), ("worker:1", 0, [])], op_names=["a", "b"])
    with Reader(path) as r:
        st = trace_stats(r)
    assert st["workers"][0]["memory"] == {
        "limit": 20 << 20, "peak": 19 << 20, "spill_out": 300 << 20, "spill_in": 200 << 20,
        "prefetched": 150 << 20, "prefetch_hits": 31, "prefetch_misses": 7, "oom": 0,
    }  # fmt: skip
    assert cmd_trace_stats(path) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines.index("memory (since each worker started)")
    assert lines[head + 2].split() == ["0", "20.0", "MiB", "19.0", "MiB", "300.0", "MiB",
                                       "200.0", "MiB", "150.0", "MiB", "31", "7", "0"]  # fmt: skip
    assert len(lines) == head + 3  # no row for a worker that sent no memory sample


def test_export_command_with_window_and_workers(trace, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert cmd_export(trace, out, window="1ms:", workers="1") == 0
    assert "wrote" in capsys.readouterr().out
    validate_chrome_trace(out)
    pids = {e["pid"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"}
    assert 1 not in pids and 2 in pids
    assert cmd_export(trace) == 0  # default output next to the trace
    assert trace.with_suffix(".json").exists()


@pytest.mark.parametrize(
    "window, workers", [("abc", None), ("5s:1s", None), ("1s", None), (None, "a,b")]
)
def test_export_rejects_bad_options_in_one_line(trace, tmp_path, capsys, window, workers):
    assert cmd_export(trace, tmp_path / "o.json", window=window, workers=workers) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "window, workers, words",
    [(None, "5", "no worker 5 in"), ("9s:10s", None, "after the trace ends")],
)
def test_export_that_would_select_nothing_says_so_and_writes_nothing(
    trace, tmp_path, capsys, window, workers, words
):
    out = tmp_path / "o.json"
    assert cmd_export(trace, out, window=window, workers=workers) == 1
    assert words in capsys.readouterr().err and not out.exists()


def test_export_to_an_unwritable_place(trace, tmp_path, capsys):
    assert cmd_export(trace, tmp_path / "no" / "such" / "dir.json") == 1
    err = capsys.readouterr().err
    assert "cannot write" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "text, ns",
    [
        ("10s", 10**10),
        ("1.5s", 1_500_000_000),
        ("500ms", 500_000_000),
        ("20us", 20_000),
        ("7ns", 7),
        ("2m", 120 * 10**9),
        ("3", 3 * 10**9),
        (" 0.25 s ", 250_000_000),
    ],
)
def test_parse_duration(text, ns):
    assert parse_duration(text) == ns


def test_parse_window_and_workers():
    assert parse_window("10s:20s") == (10**10, 2 * 10**10)
    assert parse_window("1.5s:") == (1_500_000_000, None)
    assert parse_window(":500ms") == (None, 500_000_000)
    assert parse_window(None) is None
    assert (
        parse_workers("0, 2") == [0, 2]
        and parse_workers([1]) == [1]
        and parse_workers(None) is None
    )
    for bad in ("x:1s", "1s", "2s:1s", "1 parsec:"):
        with pytest.raises(ValueError):
            parse_window(bad)


def test_a_workers_shares_are_of_the_time_it_was_there(tmp_path):
    # (a worker that died at 10 % of the trace showed 92 % idle, one that joined late "100 %
    # idle" over the whole trace: time before it started or after it died was counted idle)
    ex = dict(client=1, n=1, outs=[1], srcs=[0], hot=False, queue=0, errors=0, ops=[1], durs=[5])
    batches = [
        ("dispatcher", 0, [
            E.event(E.WORKER_JOINED, 0, worker=0, host="h", pid=1, device="cpu", backend="numpy"),
            E.event(E.WORKER_LEFT, 100, worker=0, reason="exited with code -9"),
            E.event(E.WORKER_JOINED, 600, worker=1, host="h", pid=2, device="cpu",
                    backend="numpy"),
            E.event(E.MARK, 1000, client=1, label="end"),
        ]),
        ("worker:0", 0, [E.event(E.EXEC, 50, worker=0, batch=0, t0=0, t1=50, **ex)]),
        ("worker:1", 0, [E.event(E.EXEC, 800, worker=1, batch=1, t0=700, t1=800, **ex)]),
    ]  # fmt: skip
    path = tmp_path / "life.gtrace"
    write_trace(path, batches, op_names=["a", "b", "c"])
    with Reader(path) as r:
        st = trace_stats(r)
    w0, w1 = st["workers"][0], st["workers"][1]
    assert w0["compute"] == pytest.approx(0.5) and w0["idle"] == pytest.approx(0.5)  # of 100
    assert w1["compute"] == pytest.approx(0.25) and w1["idle"] == pytest.approx(0.75)  # of 400
    out = tmp_path / "life.json"
    assert cmd_export(path, str(out)) == 0
    names = {e["pid"]: e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"]
             if e.get("name") == "process_name"}  # fmt: skip
    assert names[1].endswith("compute 50% comm 0% wait 0% idle 50%")
    assert names[2].endswith("compute 25% comm 0% wait 0% idle 75%")
