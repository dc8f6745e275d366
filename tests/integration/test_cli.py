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


def test_gt_ps_without_dispatchers_says_so(tmp_path):
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path)}
    out = subprocess.run(gt_cmd("ps"), env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "no live GT dispatchers" in out.stdout


def test_worker_without_a_dispatcher_fails_with_one_line():
    out = subprocess.run(
        gt_cmd("worker", "--connect", "tcp://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode != 0
    assert "no GT dispatcher answered" in out.stderr
    assert "Traceback" not in out.stderr
