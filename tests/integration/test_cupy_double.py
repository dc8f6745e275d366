"""The op suites again, on workers whose backend is the CuPy test double (tests/support/cupy_double).

The double is NumPy behind CuPy's rules: device arrays refuse implicit host conversion and host
arrays mixed into device work, index arrays wrap around, asynchronous copies wait for their
stream. Running the forward, backward, in-place and sharding cases on it exercises every CuPy code
path of the workers (``Backend`` with ``name == "cupy"``, the device-side bounds checks, host
staging of transfers) on a machine without a GPU. It says nothing about GPUs themselves: the
``gpu``-marked tests do that where there is one.

The test functions below are the other modules' own, imported: in this module they get this
module's ``cluster`` (workers on the double) instead of conftest's.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cupy_double_environment, wait_for
from test_autograd_ops import test_gradient_matches_finite_differences  # noqa: F401
from test_ops_forward import test_op_matches_numpy  # noqa: F401
from test_ops_inplace import *  # noqa: F403 - re-run those cases here
from test_sharding import *  # noqa: F403

import gt
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster


@pytest.fixture(scope="module", autouse=True)
def cupy_double_env():
    """Every worker this module starts (this module's clusters and the imported tests' own) loads
    the double as its CuPy."""
    with cupy_double_environment():
        yield


@pytest.fixture(scope="module")
def cluster(cupy_double_env):
    """Two workers on the double (overrides conftest's ``cluster`` for the imported tests)."""
    with LocalCluster(workers=2) as c:
        workers = request(c.address, "stats", timeout=5.0)["workers"]
        assert [w["backend"] for w in workers] == ["cupy", "cupy"], workers
        assert all("CuPy test double" in w["device"] for w in workers), workers
        yield c


def test_a_round_trip_through_a_worker_on_the_double(conn):
    x = gt.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal((x * 2).numpy(), [2.0, 4.0, 6.0])


def test_out_of_range_index_tensor_raises_on_cupy_like_numpy(conn):
    y = gt.arange(3.0)
    with pytest.raises(gt.WorkerError, match="index -4 is out of bounds for axis 0 with size 3"):
        y[gt.tensor([0, -4])].numpy()
    with pytest.raises(gt.WorkerError, match="index 3 is out of bounds for axis 1 with size 3"):
        (gt.zeros(2, 3)[:, gt.tensor([[1], [3]])] + 1).numpy()


def test_index_ops_refuse_a_negative_index_on_cupy_as_in_pytorch(conn):
    with pytest.raises(IndexError, match=r"gather\(\): index -1 is out of bounds for dimension 1"):
        gt.zeros(2, 3).gather(1, gt.tensor([[0], [-1]])).numpy()
    with pytest.raises(IndexError, match=r"index_select\(\): index out of range in self"):
        gt.arange(3.0).index_select(0, gt.tensor([0, 3])).numpy()
    with pytest.raises(IndexError, match=r"scatter_add\(\): index -2 is out of bounds"):
        gt.zeros(3).scatter_add(0, gt.tensor([0, -2]), gt.ones(2)).numpy()
    assert gt.arange(3.0)[gt.tensor([-1])].tolist() == [2.0]  # (x[t] wraps, as PyTorch's)


def test_failed_in_place_setitem_with_out_of_range_index_fails_the_tensor(conn):
    x = gt.zeros(3)
    x[gt.tensor([7])] = 1.0
    with pytest.raises(gt.WorkerError, match="index 7 is out of bounds"):
        x.numpy()


def test_random_numbers_are_the_same_as_on_numpy_workers(conn):
    gt.manual_seed(1234)
    on_double = [gt.randn(5, 7).numpy(), gt.rand(9).numpy(), gt.randint(0, 100, (11,)).numpy()]
    gt.disconnect()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GT_BACKEND", "numpy")
        with LocalCluster(workers=1) as c:
            gt.connect(c.address, timeout=30)
            try:
                gt.manual_seed(1234)
                on_numpy = [gt.randn(5, 7).numpy(), gt.rand(9).numpy(),
                            gt.randint(0, 100, (11,)).numpy()]  # fmt: skip
            finally:
                gt.disconnect()
    for a, b in zip(on_double, on_numpy):
        np.testing.assert_array_equal(a, b)


def test_local_workers_are_spread_round_robin_over_the_gpus(cupy_double_env, monkeypatch):
    monkeypatch.setenv("CUPY_DOUBLE_DEVICES", "2")
    with LocalCluster(workers=3) as c:
        workers = request(c.address, "stats", timeout=5.0)["workers"]
    devices = sorted(w["device"].split(" ")[0] for w in workers)
    assert devices == ["cuda:0", "cuda:0", "cuda:1"], workers


def test_one_worker_per_usable_gpu_and_none_on_a_gpu_that_fails_its_probe(cupy_double_env,
                                                                          monkeypatch):  # fmt: skip
    monkeypatch.setenv("CUPY_DOUBLE_DEVICES", "3")
    monkeypatch.setenv("CUPY_DOUBLE_BROKEN_DEVICES", "1")
    with LocalCluster(workers=None) as c:  # --workers auto
        ready = wait_for(
            lambda: len(request(c.address, "stats", timeout=5.0)["workers"]) >= 2, timeout=60
        )
        workers = request(c.address, "stats", timeout=5.0)["workers"]
    assert ready
    devices = sorted(w["device"].split(" ")[0] for w in workers)
    assert devices == ["cuda:0", "cuda:2"], workers  # (not cuda:1, falling back to NumPy)
