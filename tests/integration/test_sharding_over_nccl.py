"""The sharding suite again, on two workers of the CuPy test double pinned to two (pretend) GPUs:
their all-reduces, all-gathers, reduce-scatters and broadcasts go over the double's
``cupy.cuda.nccl`` (see ``test_nccl_all_reduce``), between worker processes. Every result must be
what the ring gives; the double checks the NCCL calls' arguments, not NCCL itself.
"""

from __future__ import annotations

import pytest
from helpers import cupy_double_environment
from test_sharding import *  # noqa: F403 - re-run those cases here

from gt.runtime.control import request
from gt.runtime.launch import LocalCluster


@pytest.fixture(scope="module", autouse=True)
def nccl_double_env(tmp_path_factory):
    with cupy_double_environment(), pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPY_DOUBLE_DEVICES", "2")
        mp.setenv("CUPY_DOUBLE_NCCL_DIR", str(tmp_path_factory.mktemp("nccl")))
        yield


@pytest.fixture(scope="module")
def cluster(nccl_double_env):
    """Two workers on distinct double GPUs (overrides conftest's ``cluster``)."""
    with LocalCluster(workers=2) as c:
        workers = request(c.address, "stats", timeout=5.0)["workers"]
        assert sorted(w["device"].split(" ")[0] for w in workers) == ["cuda:0", "cuda:1"], workers
        yield c
