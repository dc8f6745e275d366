"""Pinned staging on a real GPU (``gpu``-marked: skipped without CuPy and a CUDA device): fetches
land in reused pinned buffers, copies on the copy stream keep the compute stream's order both ways,
and a CuPy backend moves its data this way by default. (The same code runs on the CuPy test double
in CI: tests/unit/test_staging_on_cupy_double.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.worker import backend as B
from gt.runtime.worker.staging import STAGE_MIN, HostStaging

pytestmark = pytest.mark.gpu
N = 2048  # a 2048 x 2048 float32 product: 16 MiB, and long enough to be still running


@pytest.fixture(scope="module")
def cp():
    be = B.load_backend("auto")
    if be.name != "cupy":
        pytest.skip("needs a CUDA GPU and CuPy")
    return be.xp


def test_a_fetch_queued_behind_a_kernel_gets_the_kernels_result(cp):
    st = HostStaging(cp)
    a = cp.asarray(np.random.default_rng(1).standard_normal((N, N)).astype(np.float32))
    c = a @ a  # queued on the compute stream; the copy stream must wait for it
    host, done = st.to_host_async(c)
    done.synchronize()
    assert HostStaging.is_pinned(host)
    np.testing.assert_array_equal(host, cp.asnumpy(c))


def test_an_upload_is_there_for_the_next_kernel(cp):
    st = HostStaging(cp)
    src = np.random.default_rng(2).standard_normal((N, N)).astype(np.float32)
    dev = st.from_host(src)
    out = dev * 2  # the compute stream waits for the copy stream's event
    np.testing.assert_array_equal(cp.asnumpy(out), src * 2)
    cp.cuda.get_current_stream().synchronize()
    st.release()
    assert not st._held


def test_a_fetch_of_the_same_size_reuses_the_pinned_buffer(cp):
    st = HostStaging(cp)
    x = cp.ones(STAGE_MIN, dtype=cp.float32)
    first = st.to_host(x)
    where = first.ctypes.data
    del first  # back to CuPy's pinned memory pool
    second = st.to_host(x)
    assert second.ctypes.data == where
    np.testing.assert_array_equal(second, np.ones(STAGE_MIN, np.float32))


def test_a_cupy_backend_stages_peer_transfers_through_pinned_memory_by_default(cp, monkeypatch):
    monkeypatch.delenv("GT_PINNED_STAGING", raising=False)
    be = B.load_backend("cupy")
    assert be.transfer_path == "pinned"
    x = cp.arange(STAGE_MIN, dtype=cp.float32)
    host = be.to_host(x, peer=True)
    assert HostStaging.is_pinned(host) and not HostStaging.is_pinned(be.to_host(x))
    np.testing.assert_array_equal(cp.asnumpy(be.from_host(host, peer=True)), host)
