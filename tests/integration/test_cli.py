"""The command line: the two-terminal shared setup, `gt worker --connect`, `gt ps`, help."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from helpers import wait_for

from gt.runtime.control import request


def gt_cmd(*args):
    return [sys.executable, "-m", "gt", *args]


@pytest.fixture
def dispatcher_proc(tmp_path):
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run")}
    proc = subprocess.Popen(
        gt_cmd("dispatcher", "--workers", "1"), stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        match = re.search(r"clients connect to:\s+(\S+)", "".join(lines))
        assert match, lines
        yield match.group(1), env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_shared_dispatcher_serves_a_client_and_accepts_another_worker(dispatcher_proc, tmp_path):
    address, env = dispatcher_proc
    script = tmp_path / "train.py"
    script.write_text("import gt\nx = gt.ones(10)\nprint(int((x * 3).sum().item()))\n")
    out = subprocess.run(
        [sys.executable, str(script)],
        env={**env, "GT_DISPATCHER": address},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "30"
    worker = subprocess.Popen(
        gt_cmd("worker", "--connect", address), stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert "GT worker 1" in worker.stdout.readline()
        wait_for(lambda: len(request(address, "stats")["workers"]) >= 2, timeout=20)
        ps = subprocess.run(gt_cmd("ps"), env=env, capture_output=True, text=True, timeout=30)
        assert address in ps.stdout
    finally:
        worker.terminate()
        worker.wait(timeout=10)
        worker.stdout.close()


def test_help_lists_every_command():
    out = subprocess.run(gt_cmd("--help"), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for command in ("dispatcher", "worker", "demo", "ps"):
        assert command in out.stdout


def test_version_names_the_installed_distribution():
    from importlib.metadata import version

    out = subprocess.run(gt_cmd("--version"), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.strip() == f"gt {version('gt-multiplex')}"


def test_gt_ps_without_dispatchers_says_so(tmp_path):
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path)}
    out = subprocess.run(gt_cmd("ps"), env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "no live GT dispatchers" in out.stdout


def test_worker_without_a_dispatcher_fails_with_one_line():
    out = subprocess.run(
        gt_cmd("worker", "--connect", "tcp://127.0.0.1:9", "--timeout", "1"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode != 0
    assert "no GT dispatcher answered" in out.stderr and "within 1s" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_closed_pipe_ends_gt_trace_quietly(tmp_path):
    """`gt trace stats F | head -1`: the reader leaves early; that is not an error of the file."""
    from gt.trace import events as E
    from gt.trace.recorder import write_trace

    ex = dict(client=1, n=1, outs=[1], srcs=[0], hot=False, queue=0, errors=0, durs=[5])
    evs = [E.event(E.EXEC, t, worker=w, batch=t, t0=t, t1=t + 5, ops=[t % 40], **ex)
           for t in range(0, 4000, 10) for w in range(40)]  # fmt: skip
    path = tmp_path / "t.gtrace"
    write_trace(path, [("worker:0", 0, evs)])
    proc = subprocess.Popen(gt_cmd("trace", "stats", str(path)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    try:
        proc.stdout.close()  # hang up before it writes anything, like a `head` that has had enough
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
        assert "Broken pipe" not in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()


def test_gt_keys_adds_exports_lists_and_removes_a_tenant(tmp_path):
    ring = tmp_path / "ring"

    def keys(*args):
        return subprocess.run(gt_cmd("keys", "--dir", str(ring), *args), capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    assert keys().returncode == 0
    made = keys("tenant", "add", "alice")
    assert made.returncode == 0 and "gt keys export --tenant alice DIR" in made.stdout
    assert "tenant alice" in keys().stdout
    out = keys("export", "--tenant", "alice", str(tmp_path / "alice"))
    assert out.returncode == 0 and (tmp_path / "alice" / "client.key_secret").exists()
    assert keys("tenant", "add", "alice").returncode == 1  # exists
    gone = keys("tenant", "remove", "alice")
    assert gone.returncode == 0 and "tenant alice" not in keys().stdout
    again = keys("tenant", "remove", "alice")
    assert again.returncode == 1 and "no tenant alice" in again.stderr
