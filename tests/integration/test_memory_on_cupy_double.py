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
