"""The SLURM job and the Kubernetes manifest in configs/ start GT with flags GT has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from gt.cli import build_parser

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _parses(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.command == argv[0]


def test_the_kubernetes_manifest_runs_a_dispatcher_and_workers_with_gts_flags():
    docs = list(yaml.safe_load_all((CONFIGS / "k8s" / "gt.yaml").read_text()))
    kinds = {d["kind"] for d in docs}
    assert kinds == {"Service", "Deployment", "DaemonSet"}
    service = next(d for d in docs if d["kind"] == "Service")
    assert [p["port"] for p in service["spec"]["ports"]] == [5555, 5556, 5557, 5558, 5559]
    commands = []
    for d in docs:
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            argv = [a.replace("$(POD_IP)", "10.0.0.7") for a in c["args"]]
            _parses(argv)
            commands.append(argv[0])
    assert sorted(commands) == ["dispatcher", "worker"]


def test_the_slurm_job_runs_a_dispatcher_and_one_worker_per_task():
    text = (CONFIGS / "slurm" / "gt-job.sbatch").read_text()
    values = {'"$HEAD"': "head", "$HEAD": "head", '"$PORT"': "5555", "$PORT": "5555",
              '"$(hostname)"': "node1"}  # fmt: skip
    lines = [m.group(1) for m in re.finditer(r"\bgt ((?:dispatcher|worker) [^&\n]*)", text)]
    assert [line.split()[0] for line in lines] == ["dispatcher", "worker"]
    for line in lines:
        for k, v in values.items():
            line = line.replace(k, v)
        _parses(shlex.split(line))
