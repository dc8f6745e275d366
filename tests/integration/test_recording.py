"""Recording a real 2-worker run: every instruction sent appears executed exactly once, with its line."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import numpy as np

import gt
from gt.runtime import ops as O
from gt.runtime.launch import RecorderProcess
from gt.trace.reader import Reader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from fixtures.gtrace_synth import validate_chrome_trace  # noqa: E402


def test_every_sent_instruction_is_recorded_as_executed_once(cluster, tmp_path):
    path = tmp_path / "run.gtrace"
    rec = RecorderProcess(cluster.address, str(path))
    conns = []
    try:
        for k in range(2):  # two clients, one per worker
            c = gt.connect(cluster.address, timeout=30)
            x = gt.ones(8, 8)
            for _ in range(300):
                x = x * 1.0 + 0.5  # the instrumented line
            gt.mark(f"client {k} done")
            np.testing.assert_allclose(x.numpy(), 151.0 * np.ones((8, 8)))
            conns.append((c.client_no, c.home_worker, c.sent_instructions))
            gt.disconnect()
    finally:
        assert rec.stop() == 0
    reader = Reader(path)
    executed: dict[tuple[int, int], int] = collections.Counter()
    locs: dict[int, dict] = collections.defaultdict(dict)
    marks = []
    workers_seen = set()
    for ev in reader.events():
        if ev.kind == "exec":
            f = ev.fields
            workers_seen.add(f["worker"])
            assert len(f["ops"]) == len(f["outs"]) == len(f["srcs"]) == f["n"]
            for op, out, src in zip(f["ops"], f["outs"], f["srcs"]):
                if op != O.OPCODE["fetch"]:
                    executed[(f["client"], out)] += 1
                    locs[f["client"]].setdefault(out, src)
        elif ev.kind == "srcloc":
            locs.setdefault(("text", ev.fields["client"]), {}).update(
                {int(k): v for k, v in ev.fields["locs"].items()}
            )
        elif ev.kind == "mark":
            marks.append(ev.fields["label"])
    assert workers_seen == {home for _, home, _ in conns}
    assert marks == ["client 0 done", "client 1 done"]
    for cno, _home, sent in conns:
        mine = {out: n for (c, out), n in executed.items() if c == cno}
        fetches = 1
        assert len(mine) == sent - fetches  # every instruction, each once
        assert set(mine.values()) == {1}
        texts = locs[("text", cno)]
        lines = {texts[src] for out, src in locs[cno].items()}
        assert any(t.startswith("test_recording.py:") for t in lines)
    info = reader.info()
    assert (
        sum(info.get("drops", {}).values()) == 0
        if isinstance(info.get("drops"), dict)
        else not info.get("drops")
    )


def test_gt_run_passes_the_exit_code_through(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import gt, sys\nprint(int(gt.ones(2).sum().item()))\nsys.exit(3)\n")
    out = subprocess.run(
        [sys.executable, "-m", "gt", "run", "--no-tui", "--workers", "1", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3, out.stderr
    assert out.stdout.strip() == "2"


def test_a_recorded_example_exports_a_valid_perfetto_trace(tmp_path):
    trace = tmp_path / "t.gtrace"
    example = Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gt",
            "run",
            "--no-tui",
            "--workers",
            "2",
            "--record",
            str(trace),
            str(example),
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    assert "final loss" in out.stdout
    exp = subprocess.run(
        [sys.executable, "-m", "gt", "export", str(trace), "-o", str(tmp_path / "t.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exp.returncode == 0, exp.stderr
    counts = validate_chrome_trace(tmp_path / "t.json")
    assert counts["X"] > 30 and counts["i"] >= 2  # instruction slices, marks


def test_the_nn_example_trains_under_gt_run(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "train_nn.py"
    out = subprocess.run(
        [sys.executable, "-m", "gt", "run", "--no-tui", "--workers", "1", str(example), "150"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    accuracy = float(out.stdout.strip().rsplit("accuracy", 1)[1])
    assert accuracy > 0.9


def test_gt_demo_records_its_own_lines_as_the_source_of_its_ops(tmp_path):
    """`python -m gt demo`: ops come from demo.py's lines, not from runpy's frozen frames."""
    import subprocess
    import sys

    path = tmp_path / "demo.gtrace"
    done = subprocess.run(
        [sys.executable, "-m", "gt", "demo", "--no-tui", "--steps", "200", "--record", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    with Reader(path) as r:
        texts = {v for ev in r.events() if ev.kind == "srcloc" for v in ev.fields["locs"].values()}
    assert texts and all(t.startswith("demo.py:") for t in texts), texts
