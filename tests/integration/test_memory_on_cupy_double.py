"""Memory limits with real processes, on a worker whose CuPy is the test double: the cases of
``test_memory`` again (results over a limit equal to an unlimited run's, out-of-memory at the user's
line, quotas, memory given back when a client leaves, the memory events), so the CuPy worker's pool,
its pinned-memory spill tier and its device pool's limit run end to end in CI."""

from __future__ import annotations

import pytest
from helpers import cupy_double_environment
from test_memory import *  # noqa: F403 - the same cases, on the double

from gt.runtime.control import request


@pytest.fixture(scope="module", autouse=True)
def cupy_double_env():
    """This module's workers load the double as their CuPy."""
    with cupy_double_environment():
        yield


def test_the_worker_under_these_cases_is_a_cupy_worker(cluster):  # noqa: F811 - test_memory's
    workers = request(cluster.address, "stats", timeout=10.0)["workers"]
    assert [w["backend"] for w in workers] == ["cupy"], workers
    assert "CuPy test double" in workers[0]["device"], workers


# (test_memory's RAM-cap case is a NumPy worker's: a CuPy worker takes none, its device's
# allocator refuses by itself, and CUDA's mappings would count against the kernel's limit)
del test_a_numpy_worker_over_its_ram_cap_refuses_the_op_and_keeps_running  # noqa: F821


def test_a_cupy_worker_takes_no_ram_cap(monkeypatch):
    monkeypatch.setenv("GT_RAM_CAP", "300MB")
    with LocalCluster(workers=1) as c:  # noqa: F405
        gt.connect(c.address, timeout=60)  # noqa: F405
        try:
            kept = [gt.full((25_000_000,), float(i)) for i in range(5)]  # noqa: F405 - 500 MB
            assert [t[-1].item() for t in kept] == [0.0, 1.0, 2.0, 3.0, 4.0]
        finally:
            gt.disconnect()  # noqa: F405
