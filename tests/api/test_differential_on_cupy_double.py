"""The differential suite's realistic programs again, on workers whose CuPy is the test double:
every kernel, view, reduction, optimizer step and print of a usual PyTorch program runs through the
CuPy code paths (explicit host copies, the device memory pool, only the CuPy API of the supported
versions), and must still give PyTorch's results.

To keep CI within its time, every tenth program of each module (in name order) runs here, which still reaches
every module and nearly every kernel (each kernel also runs alone on the double in
``tests/unit/test_kernels_on_cupy_double.py``); ``GT_DOUBLE_ALL_PROGRAMS=1`` runs them all, as
``scripts/gpu_check.sh --with-programs`` does on real CuPy."""

from __future__ import annotations

import inspect
import os
import re

import pytest
from helpers import cupy_double_environment
from programs import PROGRAMS, run
from test_differential import _case, compare

import gt
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster


@pytest.fixture(scope="module")
def cluster():
    """Two workers on the double (for the imported test's ``conn``)."""
    with cupy_double_environment(), LocalCluster(workers=2) as c:
        workers = request(c.address, "stats", timeout=10.0)["workers"]
        assert [w["backend"] for w in workers] == ["cupy", "cupy"], workers
        yield c


_ALL = os.environ.get("GT_DOUBLE_ALL_PROGRAMS") == "1"
_NAMES = (
    sorted(PROGRAMS)
    if _ALL
    else sorted(
        n
        for module in {p.module for p in PROGRAMS.values()}
        for n in sorted(n for n, p in PROGRAMS.items() if p.module == module)[::10]
    )
)


def _needs_bfloat16(name: str) -> bool:
    """Programs that compute in bfloat16: the double, like CuPy before 14, has no bfloat16 (real
    CuPy 14 has; ``scripts/gpu_check.sh --with-programs`` runs them there)."""
    return _BF16.search(inspect.getsource(PROGRAMS[name].fn)) is not None


_BF16 = re.compile(r"dtype=torch\.bfloat16|\.bfloat16\(\)")


def _on_double(name: str) -> object:
    if _needs_bfloat16(name):
        return pytest.param(name, marks=pytest.mark.skip(reason="the CuPy double has no bfloat16"))
    return _case(name)


@pytest.mark.parametrize("name", [_on_double(n) for n in _NAMES])
def test_program_gives_pytorchs_results(conn, name):
    problems = compare(name, run(PROGRAMS[name], gt))
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_module_has_programs_on_the_double():
    assert {PROGRAMS[n].module for n in _NAMES} == {p.module for p in PROGRAMS.values()}
