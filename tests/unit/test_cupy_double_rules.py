"""The CuPy test double refuses what CuPy refuses and wraps what CuPy wraps, and GT's kernels on it
raise ``IndexError`` like NumPy's. (A test tool's tests: they pin the rules the double enforces,
which mirror CuPy 14's documented behaviour; the ``gpu`` tests compare with the real thing.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.ops.base import private
from gt.runtime.worker.backend import Backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

BE = Backend(cp, name="cupy", cupyx=cp.cupyx)


def test_implicit_host_conversion_is_refused_explicit_copies_are_fine():
    d = cp.arange(4, dtype=cp.float32)
    for convert in (np.asarray, np.array, np.ascontiguousarray, memoryview, np.frombuffer):
        with pytest.raises(TypeError):
            convert(d)
    assert float(d.sum()) == 6.0 and int(d[1]) == 1 and d[2].item() == 2.0
    assert cp.asnumpy(d).tolist() == [0, 1, 2, 3] and d.get().dtype == np.float32
    assert bytes(d) == np.arange(4, dtype=np.float32).tobytes()  # CuPy's __bytes__ copies
    host = d.get()
    host[0] = 9  # a copy, not a view of the device array
    assert d[0].item() == 0


def test_host_arrays_mixed_into_device_work_are_refused():
    d, h = cp.ones(3), np.ones(3)
    for f in (lambda: d + h, lambda: h + d, lambda: np.add(d, h), lambda: cp.add(d, h),
              lambda: cp.concatenate([d, h]), lambda: d.__setitem__(slice(None), h)):  # fmt: skip
        with pytest.raises(TypeError, match="Unsupported type"):
            f()
    assert type(np.add(d, 1)) is cp.ndarray  # a NumPy ufunc on device arrays runs on the device
    assert type(np.concatenate([d, d])) is cp.ndarray
    with pytest.raises(AttributeError):
        cp.errstate  # noqa: B018 - NumPy has it, CuPy does not


def test_out_of_range_index_arrays_wrap_around_as_in_cupy():
    d = cp.arange(3.0)
    assert d[cp.asarray([7, -4])].tolist() == [1.0, 2.0]
    assert d[[5]].tolist() == [2.0]
    d[cp.asarray([4])] = 9.0
    assert d.tolist() == [0.0, 9.0, 2.0]
    m = cp.zeros((2, 3))
    cp.cupyx.scatter_add(m, (slice(None), cp.asarray([3, 3])), 1.0)
    np.testing.assert_array_equal(m.get(), [[2, 0, 0], [2, 0, 0]])
    cp.add.at(d, cp.asarray([-1, 5]), 1.0)
    assert d.tolist() == [0.0, 9.0, 4.0]
    with pytest.raises(IndexError):
        d[3]  # a scalar out of range raises in CuPy too


def test_views_refer_to_their_base_so_in_place_writes_see_sharing():
    x = cp.arange(6.0)
    v = x.reshape(2, 3)
    assert v.base is x and x.base is None
    refs_with_view = sys.getrefcount(x)
    del v
    assert sys.getrefcount(x) == refs_with_view - 1
    assert x.flags.c_contiguous and not hasattr(x.flags, "writeable")


def test_asynchronous_copies_happen_when_their_stream_is_synchronized():
    s = cp.cuda.Stream(non_blocking=True)
    pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(4 * 4), np.float32, 4)
    pinned[:] = 1.0
    d = cp.zeros(4, dtype=cp.float32)
    d.set(pinned, stream=s)
    pinned[:] = 2.0  # reused before the copy finished: the copy reads 2.0, as on a GPU
    assert not s.done
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record(s)
    end.record(s)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="cudaErrorNotReady"):
        cp.cuda.get_elapsed_time(start, end)
    with s:  # work on the same stream sees the copy
        assert float(d.sum()) == 8.0
    end.synchronize()
    assert cp.cuda.get_elapsed_time(start, end) >= 0.0
    out = np.zeros(4, np.float32)
    d.get(stream=s, out=out, blocking=False)
    assert not out.any()  # still in flight
    s.synchronize()
    assert out.tolist() == [2.0] * 4


def test_no_device_raises_a_cuda_runtime_error(monkeypatch):
    monkeypatch.setenv("CUPY_DOUBLE_DEVICES", "0")
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="cudaErrorNoDevice"):
        cp.cuda.runtime.getDeviceCount()


def test_a_cuda_runtime_error_is_made_from_its_status_as_cupys_is():
    import pickle

    err = cp.cuda.runtime.CUDARuntimeError(700)
    assert (err.status, str(err)) == (700, "cudaErrorIllegalAddress: an illegal memory access "
                                           "was encountered")  # fmt: skip
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.status, str(again)) == (type(err), 700, str(err))


@pytest.mark.parametrize(
    ("op", "args", "key", "message"),
    [
        ("getitem", [cp.arange(3.0), cp.asarray([0, 3])], [["t", 0]], "index 3 is out of bounds for axis 0 with size 3"),
        ("getitem", [cp.zeros((2, 3)), cp.asarray([-4])], [["e"], ["t", 0]], "index -4 is out of bounds for axis 1"),
        ("setitem", [cp.arange(3.0), 1.0, cp.asarray([7])], [["t", 0]], "index 7 is out of bounds"),
        ("index_add", [cp.zeros((2, 3)), 1.0, cp.asarray([2])], [["t", 0], ["s", None, None, None]], "axis 0 with size 2"),
        ("getitem", [cp.arange(3.0)], [["l", [0, 5]]], "index 5 is out of bounds"),
    ],
)  # fmt: skip
def test_indexing_kernels_raise_index_error_like_numpy(op, args, key, message):
    with pytest.raises(IndexError, match=message):
        BE.handlers[O.OPCODE[op]](list(args), {"key": key})


def test_indexing_kernels_accept_in_range_negative_and_mask_indices():
    x = cp.arange(6.0).reshape(2, 3)
    got = BE.handlers[O.OPCODE["getitem"]]([x, cp.asarray([True, False]), cp.asarray([-1])],
                                           {"key": [["t", 0], ["t", 1]]})  # fmt: skip
    assert got.tolist() == [2.0]
    out = BE.handlers[O.OPCODE["index_add"]]([cp.zeros(3), 1.0, cp.asarray([2, 2])],
                                             {"key": [["t", 0]]})  # fmt: skip
    assert out.tolist() == [0.0, 0.0, 2.0]


def test_private_sees_views_on_the_double_as_on_cupy():
    def check(x):  # the worker's handler holds its argument the same way
        return private(x)

    a = cp.zeros(3)
    assert check(a)
    v = a[0:2]
    assert not check(a) and not check(v)


def test_sorting_is_stable_as_in_cupy():
    ties = cp.zeros(100)
    assert cp.argsort(ties).tolist() == list(range(100)) == ties.argsort().tolist()
