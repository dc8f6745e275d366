"""Pinned host staging of a CuPy worker (:mod:`gt.runtime.worker.staging`) on the CuPy test double,
whose copies on a non-default stream really are deferred: a staged copy whose buffer were reused
or read too early would show the wrong bytes here, as on a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime.worker.backend import Backend
from gt.runtime.worker.staging import STAGE_MIN, HostStaging

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

BIG = STAGE_MIN // 4 + 1  # float32 elements: just over the staging threshold


def test_a_large_fetch_lands_in_pinned_memory_with_the_same_bytes():
    st = HostStaging(cp)
    x = cp.arange(BIG, dtype=cp.float32) * 2
    host = st.to_host(x)
    assert HostStaging.is_pinned(host)
    np.testing.assert_array_equal(host, np.arange(BIG, dtype=np.float32) * 2)
    assert st.staged_out == host.nbytes
    assert not st._held  # the copy completed: nothing is held any more


def test_a_small_fetch_is_copied_directly():
    st = HostStaging(cp)
    host = st.to_host(cp.ones(8, dtype=cp.float32))
    assert not HostStaging.is_pinned(host) and st.staged_out == 0
    np.testing.assert_array_equal(host, np.ones(8, np.float32))


def test_an_async_fetch_is_complete_only_when_its_event_is():
    st = HostStaging(cp)
    x = cp.full((BIG,), 3.0, dtype=cp.float64)
    host, done = st.to_host_async(x)
    assert not done.done  # queued on the copy stream: the host did not wait
    assert len(st._held) == 1 and st._held[0][1][0] is x  # the source outlives the copy
    done.synchronize()
    np.testing.assert_array_equal(host, np.full(BIG, 3.0))
    st.release()
    assert not st._held


def test_an_upload_is_staged_and_the_compute_stream_waits_for_it():
    st = HostStaging(cp)
    src = np.random.default_rng(0).standard_normal(BIG).astype(np.float32)
    dev = st.from_host(src)
    src[:] = -1  # the caller's buffer may change at once: the copy reads the staged one
    out = cp.asnumpy(dev * 1)  # compute after the upload sees the uploaded bytes
    np.testing.assert_array_equal(
        out, np.random.default_rng(0).standard_normal(BIG).astype(np.float32)
    )
    assert st.staged_in == dev.nbytes


def test_a_pinned_array_is_uploaded_without_another_host_copy():
    st = HostStaging(cp)
    host = st.empty((BIG,), np.float32)
    host[:] = 7
    made = []
    st.empty = lambda *a: made.append(a)  # (a second staging buffer would be made here)
    dev = st.from_host(host)
    assert made == []
    np.testing.assert_array_equal(cp.asnumpy(dev), np.full(BIG, 7, np.float32))


def test_a_non_contiguous_upload_is_made_contiguous_on_the_way():
    st = HostStaging(cp)
    a = np.arange(2 * BIG, dtype=np.float32).reshape(2, BIG).T  # Fortran order
    np.testing.assert_array_equal(cp.asnumpy(st.from_host(a)), a)


@pytest.mark.parametrize(
    ("env", "peers", "clients"),
    [(None, True, False), ("peers", True, False), ("all", True, True), ("0", False, False)],
)
def test_what_the_backend_stages_is_chosen_by_the_environment(monkeypatch, env, peers, clients):
    if env is None:
        monkeypatch.delenv("GT_PINNED_STAGING", raising=False)
    else:
        monkeypatch.setenv("GT_PINNED_STAGING", env)
    be = Backend(cp, name="cupy")
    assert be.transfer_path == ("pinned" if peers else "pageable")
    x = cp.arange(BIG, dtype=cp.float32)
    for peer, staged in ((True, peers), (False, clients)):
        host = be.to_host(x, peer=peer)
        assert HostStaging.is_pinned(host) == staged
        back = be.from_host(host, peer=peer)
        np.testing.assert_array_equal(cp.asnumpy(back), np.arange(BIG, dtype=np.float32))
    assert HostStaging.is_pinned(be.host_empty((BIG,), np.float32)) == peers
    assert HostStaging.is_pinned(be.to_host_async(x)[0]) == peers


def test_numpy_workers_neither_stage_nor_copy():
    be = Backend(np, "cpu")
    x = np.arange(BIG, dtype=np.float32)
    assert be.staging is None and be.transfer_path == "host"
    host, ready = be.to_host_async(x)
    assert host is x and ready is None and be.from_host(x) is x
