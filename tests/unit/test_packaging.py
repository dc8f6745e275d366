"""The install extras: one per CUDA major version, and none that could put a second CuPy over the
one a machine already has."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
EXTRAS = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[
    "project"
]["optional-dependencies"]


def _names(extra: str, seen: set | None = None) -> set[str]:
    """Every requirement an extra pulls in, following ``gt-multiplex[...]`` references."""
    seen = seen if seen is not None else set()
    out: set[str] = set()
    for req in EXTRAS[extra]:
        if req.startswith("gt-multiplex["):
            for inner in req[len("gt-multiplex[") : -1].split(","):
                if inner not in seen:
                    seen.add(inner)
                    out |= _names(inner, seen)
        else:
            out.add(req.split(">")[0].split("=")[0].split("<")[0].strip())
    return out


def test_each_cuda_major_has_its_cupy_wheel_and_nothing_else_pulls_one():
    assert "cupy-cuda12x" in _names("gpu-cuda12") and "cupy-cuda13x" in _names("gpu-cuda13")
    assert not {n for n in _names("gpu-cuda12") if n.startswith("cupy")} - {"cupy-cuda12x"}
    assert not {n for n in _names("gpu-cuda13") if n.startswith("cupy")} - {"cupy-cuda13x"}
    for extra in EXTRAS:
        if extra not in ("gpu-cuda12", "gpu-cuda13"):
            assert not any(n.startswith("cupy") for n in _names(extra)), extra


def test_nvml_and_the_gpu_alias():
    assert _names("nvml") == {"nvidia-ml-py"}
    assert {"nvidia-ml-py", "ml-dtypes"} <= _names("gpu")
