"""Shared fixtures: a real local cluster (dispatcher + workers in separate processes) per module,
and a fresh client connection per test so tests never share state."""

from __future__ import annotations

import os

import pytest

import gt
from gt.runtime.launch import LocalCluster

# Keep BLAS single-threaded in tests: 2-core CI machines, several processes.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def cluster():
    """A dispatcher with 2 workers, shared by the tests of one module."""
    with LocalCluster(workers=2) as c:
        yield c


@pytest.fixture
def conn(cluster):
    """A new connection to the module's cluster, made current for gt's factories."""
    c = gt.connect(cluster.address, timeout=30)
    try:
        yield c
    finally:
        gt.disconnect()
