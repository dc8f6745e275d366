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


@pytest.fixture(scope="session", autouse=True)
def private_runtime_dir(tmp_path_factory):
    """Discovery files of the suite's dispatchers go to a temp dir, not the user's runtime dir
    (tests kill dispatchers with SIGKILL, which leaves their files behind)."""
    old = os.environ.get("GT_RUNTIME_DIR")
    os.environ["GT_RUNTIME_DIR"] = str(tmp_path_factory.mktemp("gt-run"))
    yield
    if old is None:
        os.environ.pop("GT_RUNTIME_DIR", None)
    else:
        os.environ["GT_RUNTIME_DIR"] = old


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
