"""Local clusters and GPUs: one worker per usable GPU by default, slots spread round-robin, and
the CPU default unchanged (no CuPy is imported to count)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from gt.cli.dispatcher import _worker_count
from gt.runtime import launch


def test_slots_cycle_per_dispatcher_and_restart_from_zero():
    back = "tcp://127.0.0.1:1/test-slots"
    assert [launch.next_slot(back, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert launch.next_slot("tcp://127.0.0.1:2/other", 3) == 0


def test_a_worker_is_started_with_its_slot(monkeypatch):
    seen = {}

    def fake_popen(cmd, **kwargs):
        seen["cmd"] = cmd
        return "proc"

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    assert launch.spawn_worker("tcp://x:1", parent_pid=1, n_workers=2, slot=1) == "proc"
    cmd = seen["cmd"]
    assert cmd[cmd.index("--slot") + 1] == "1" and cmd[:4] == [sys.executable, "-m", "gt", "worker"]


def test_no_gpu_probe_without_cupy_or_with_numpy_forced(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("no probe process should start")

    monkeypatch.setattr(subprocess, "run", boom)
    monkeypatch.setenv("GT_BACKEND", "numpy")
    assert launch.local_gpus() == [] and launch.default_workers() == 1
    monkeypatch.delenv("GT_BACKEND")
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None)
    assert launch.local_gpus() == []


def test_the_gpu_count_comes_from_a_child_process(monkeypatch):
    monkeypatch.delenv("GT_BACKEND", raising=False)
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    out = b'[{"index": 0, "name": "H200"}, {"index": 1, "name": "H200"}]'
    monkeypatch.setattr(
        subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 0, out, b"")
    )
    assert launch.default_workers() == 2
    monkeypatch.setattr(
        subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, b"junk", b"")
    )
    assert launch.local_gpus() == []


def test_worker_counts_on_the_command_line():
    assert _worker_count("auto") == "auto" and _worker_count("3") == 3
    for bad in ("-1", "two"):
        with pytest.raises(argparse.ArgumentTypeError):
            _worker_count(bad)


def test_a_worker_takes_its_slots_gpu_or_its_slurm_tasks():
    from gt.cli.worker import pick_device

    assert pick_device(5, None, lambda: 4) == 1  # a dispatcher's 6th local worker on 4 GPUs
    assert pick_device(None, "3", lambda: 2) == 1  # srun: task 3 of the node, 2 GPUs
    assert pick_device(2, "7", lambda: 8) == 2  # the dispatcher's slot wins
    assert pick_device(None, None, lambda: 8) is None  # neither says: the default device
    assert pick_device(None, "0", lambda: 0) is None  # no GPU: NumPy
    # a dispatcher found GPUs 0, 1 and 3 usable (2 failed its probe): its slots take those
    assert [pick_device(k, None, lambda: 4, "0,1,3") for k in range(4)] == [0, 1, 3, 0]
    assert pick_device(None, "2", lambda: 4, "0,1,3") == 2  # (srun's tasks: as before)
