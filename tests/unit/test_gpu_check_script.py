"""The GPU check's parts that need no GPU: its plan, installing carried wheels with pip
``--no-index`` into a private folder, and the verdict on ``gt top --json`` output."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from gpu_top_check import check_workers  # noqa: E402


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *args], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def test_the_plan_names_every_step_and_fits_nine_minutes_normally():
    out = _run("--plan")
    assert out.returncode == 0, out.stderr
    steps = [line.split()[0] for line in out.stdout.splitlines()]
    assert steps == ["install", "env", "gpu-tests", "op-suites", "bench", "top"]
    limits = [int(line.split("(")[1].split()[0]) for line in out.stdout.splitlines()]
    assert sum(limits) + 5 * len(limits) < 9 * 60  # each step's limit plus its grace
    more = _run("--plan", "--with-programs").stdout.splitlines()
    assert [line.split()[0] for line in more] == [*steps, "programs"]
    # the programs alone fit one device call of 10 minutes (with the install before them)
    alone = _run("--plan", "--programs-only").stdout.splitlines()
    assert [line.split()[0] for line in alone] == ["install", "programs"]
    limits = [int(line.split("(")[1].split()[0]) for line in alone]
    assert sum(limits) + 5 * len(limits) < 10 * 60


def _wheel(folder: Path) -> None:
    """A minimal pure-Python wheel, made by hand (no network, no build)."""
    dist = "gtcheckdummy-0.1.dist-info"
    with zipfile.ZipFile(folder / "gtcheckdummy-0.1-py3-none-any.whl", "w") as z:
        z.writestr("gtcheckdummy/__init__.py", "VALUE = 42\n")
        z.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: gtcheckdummy\nVersion: 0.1\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                    "Tag: py3-none-any\n")  # fmt: skip
        z.writestr(f"{dist}/RECORD", "")


def test_carried_wheels_install_offline_into_a_private_folder(tmp_path):
    wheels, site, out = tmp_path / "whl", tmp_path / "site", tmp_path / "out"
    wheels.mkdir()
    _wheel(wheels)
    env = {"GT_CHECK_WHEELS": str(wheels), "GT_CHECK_SITE": str(site), "OUT": str(out),
           "PIP_NO_INDEX": "1", "PYTHON": sys.executable}  # fmt: skip
    res = _run("--install-only", env=env)
    summary = (out / "summary.txt").read_text()
    assert res.returncode == 0 and summary.startswith("install    PASS"), (res.stdout, summary)
    assert (site / "gtcheckdummy" / "__init__.py").exists()
    assert "zmq" in (out / "steps.log").read_text()  # the imports were checked
    assert "zmq" in (out / "step-install.log").read_text()  # (kept, step by step)


def _doc(**stats) -> dict:
    full = {"name": "NVIDIA H200", "util": 93.0, "mem_used": 1, "mem_total": 2, "temp": 60.0,
            "power": 500.0}  # fmt: skip
    dev = "cuda:0 NVIDIA H200 (0000:3b:00.0, GPU-8f3a)"
    return {"workers": [{"id": 0, "backend": "cupy", "device": dev,
                         "device_stats": {**full, **stats}}]}  # fmt: skip


def test_every_nvml_field_must_have_a_value():
    assert check_workers(_doc(), expect_na=False) == []
    assert check_workers(_doc(temp=None), expect_na=False) == [
        "worker 0 (cuda:0 NVIDIA H200 (0000:3b:00.0, GPU-8f3a)): NVML field temp is N/A"
    ]
    mig = _doc(util=None)
    mig["workers"][0]["device"] = "cuda:0 NVIDIA H200 MIG (MIG-1234)"
    assert check_workers(mig, expect_na=False) == []  # NVML has no per-instance utilization
    assert check_workers({"workers": []}, expect_na=False) == ["no workers in gt top's state"]


@pytest.mark.parametrize("filled", [False, True])
def test_a_dry_run_expects_na(filled):
    doc = _doc() if filled else _doc(**dict.fromkeys(("name", "util", "mem_used", "mem_total",
                                                      "temp", "power")))  # fmt: skip
    assert bool(check_workers(doc, expect_na=True)) == filled
