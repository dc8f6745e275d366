"""The differential suite's realistic programs again, on workers whose CuPy is the test double:
every kernel, view, reduction, optimizer step and print of a usual PyTorch program runs through the
CuPy code paths (explicit host copies, the device memory pool, only the CuPy API of the supported
versions), and must still give PyTorch's results."""

from __future__ import annotations

import pytest
from helpers import cupy_double_environment
from test_differential import test_program_gives_pytorchs_results  # noqa: F401 - run here too

from gt.runtime.control import request
from gt.runtime.launch import LocalCluster


@pytest.fixture(scope="module")
def cluster():
    """Two workers on the double (for the imported test's ``conn``)."""
    with cupy_double_environment(), LocalCluster(workers=2) as c:
        workers = request(c.address, "stats", timeout=10.0)["workers"]
        assert [w["backend"] for w in workers] == ["cupy", "cupy"], workers
        yield c
