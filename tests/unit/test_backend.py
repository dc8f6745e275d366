"""Choosing the worker's backend: the test kernel before CuPy, the one-time fallback note, device
pinning and identity, bfloat16's clear refusal, and host copies that keep shapes."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.worker import backend as B
from gt.runtime.worker.devices import complete_uuid

SUPPORT = str(Path(__file__).resolve().parents[1] / "support")


@pytest.fixture
def double(monkeypatch):
    """The CuPy test double as this process's CuPy, with two pretend devices."""
    monkeypatch.syspath_prepend(SUPPORT)
    monkeypatch.setenv(B.CUPY_DOUBLE_ENV, "1")
    monkeypatch.setenv("CUPY_DOUBLE_DEVICES", "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(B, "_said_fallback", False)
    import cupy_double

    return cupy_double


class _NoDevice(Exception):
    pass


def _fake_cupy(count=None, kernel_error=None) -> types.SimpleNamespace:
    """A CuPy whose runtime raises like real CuPy does without a driver, or whose kernels fail."""

    def get_count():
        if count is None:
            raise _NoDevice("cudaErrorNoDevice: no CUDA-capable device is detected")
        return count

    class Device:
        def __init__(self, i):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def use(self):
            pass

    def arange(*a, **k):
        raise kernel_error

    runtime = types.SimpleNamespace(getDeviceCount=get_count)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime, Device=Device),
                                 arange=arange, float32=np.float32)  # fmt: skip


def test_numpy_is_chosen_quietly_when_cupy_is_not_installed(monkeypatch, capfd):
    def missing():
        raise ModuleNotFoundError("No module named 'cupy'", name="cupy")

    monkeypatch.setattr(B, "_import_cupy", missing)
    monkeypatch.setattr(B, "_said_fallback", False)
    be = B.load_backend("auto")
    assert be.name == "numpy" and be.identity is None and be.device.startswith("cpu")
    assert capfd.readouterr().err == ""
    with pytest.raises(B.CupyUnavailable, match="GT_BACKEND=cupy, but CuPy is not installed"):
        B.load_backend("cupy")


def test_a_cuda_runtime_error_counting_devices_means_no_gpu_and_is_said_once(monkeypatch, capfd):
    monkeypatch.setattr(B, "_import_cupy", lambda: (_fake_cupy(count=None), None))
    monkeypatch.setattr(B, "_said_fallback", False)
    assert B.load_backend("auto").name == "numpy"
    assert B.load_backend("auto").name == "numpy"
    err = capfd.readouterr().err
    assert err.count("using NumPy, not CuPy") == 1 and "cudaErrorNoDevice" in err
    with pytest.raises(B.CupyUnavailable, match="no usable device"):
        B.load_backend("cupy")


def test_auto_runs_a_kernel_before_choosing_cupy(monkeypatch, capfd):
    broken = _fake_cupy(count=1, kernel_error=RuntimeError("nvrtc: libnvrtc.so.13 not found"))
    monkeypatch.setattr(B, "_import_cupy", lambda: (broken, None))
    monkeypatch.setattr(B, "_said_fallback", False)
    assert B.load_backend("auto").name == "numpy"
    assert "test kernel failed on CUDA device 0" in capfd.readouterr().err
    with pytest.raises(B.CupyUnavailable, match="libnvrtc"):
        B.load_backend("cupy")


def test_a_kernel_failure_on_the_double_falls_back(double, monkeypatch, capfd):
    monkeypatch.setenv("CUPY_DOUBLE_BROKEN", "1")
    assert B.load_backend("auto").name == "numpy"
    assert "cudaErrorInsufficientDriver" in capfd.readouterr().err


def test_a_worker_of_gpu_1_makes_no_context_on_gpu_0(double):
    # leaving ``with Device(1)`` would make device 0 current again: on CUDA 12 a context there
    # (memory on GPU 0 for every worker, and no start at all in exclusive-process mode)
    double.cuda.runtime.setDevice(0)
    double.cuda._contexts.clear()
    be = B.cupy_backend(1)
    assert be.identity.index == 1 and double.cuda.runtime.getDevice() == 1
    assert double.cuda._contexts == {1}


def test_a_worker_is_pinned_to_its_device_and_knows_its_identity(double):
    be = B.load_backend("cupy", device=1)
    assert be.name == "cupy" and be.xp is double
    assert double.cuda.runtime.getDevice() == 1
    ident = be.identity
    assert ident.index == 1 and ident.pci_bus_id == "0000:11:00.0"
    assert ident.uuid == "d00b1e01-0102-0304-0506-0708090a0b0c"
    assert (
        be.device
        == "cuda:1 CuPy test double (0000:11:00.0, GPU-d00b1e01-0102-0304-0506-0708090a0b0c)"
    )
    assert ident.as_dict()["nvml_uuid"].startswith("GPU-")
    with pytest.raises(B.CupyUnavailable, match="CUDA device 5 does not exist: 2 visible"):
        B.load_backend("cupy", device=5)
    assert B.device_count() == 2
    assert [d["index"] for d in B.list_devices("cupy")] == [0, 1]
    assert B.list_devices("numpy") == [] and B.device_count("numpy") == 0


def test_a_numpy_backend_cannot_be_pinned_to_a_gpu():
    with pytest.raises(ValueError, match="only a CuPy backend"):
        B.Backend(np, 0)


def test_bfloat16_is_refused_clearly_where_it_cannot_be_computed(double, monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # (as if it were not installed)
    with pytest.raises(TypeError, match=r"runs NumPy without it \(pip install ml_dtypes\)"):
        B.numpy_backend().dtype("bfloat16")
    be = B.load_backend("cupy")
    with pytest.raises(TypeError, match=r"CuPy 14 or later with NumPy 2.1.2"):
        be.dtype("bfloat16")
    assert be.dtype("float32") == "float32"
    with pytest.raises(TypeError, match="bfloat16"):
        B.numpy_backend().from_frame(b"\x00" * 4, "bfloat16", (2,))


def test_a_numpy_backend_computes_bfloat16_in_float32_once_it_holds_one():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    be = B.numpy_backend()
    run = be.handlers[O.OPCODE["matmul"]]
    a = np.random.default_rng(0).standard_normal((16, 64)).astype(bf16)
    b = np.random.default_rng(1).standard_normal((64, 8)).astype(bf16)
    assert (run([a, b], None) == a @ b).all()  # before any bfloat16 was asked for: as NumPy
    assert be.dtype("bfloat16") == bf16
    run = be.handlers[O.OPCODE["matmul"]]
    once = (a.astype(np.float32) @ b.astype(np.float32)).astype(bf16)  # PyTorch's CPU result
    got = run([a, b], None)
    assert got.dtype == bf16 and (got == once).all() and (once != a @ b).any()
    cast = be.handlers[O.OPCODE["cast"]]([a], {"dtype": "float32"})
    assert cast.dtype == np.float32 and (cast == a.astype(np.float32)).all()  # (not rounded back)
    x = np.ones(3, np.float32)
    assert be.handlers[O.OPCODE["add"]]([x, x], None).dtype == np.float32


def test_host_copies_keep_zero_dim_shapes_and_device_arrays_never_reach_numpy(double):
    be = B.load_backend("cupy")
    scalar = be.xp.matmul(be.xp.ones(4), be.xp.ones(4))
    host = be.to_host(scalar)
    assert type(host) is np.ndarray and host.shape == () and host == 4.0
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(scalar)
    arr = be.from_frame(np.arange(6, dtype=np.float32).tobytes(), "float32", (2, 3))
    assert type(arr) is double.ndarray and be.to_host(arr).flags.c_contiguous
    arr[0, 0] = 7.0  # a device copy: writeable, and the received frame is untouched
    assert be.to_host(arr)[0, 0] == 7.0


def test_a_uuid_cupy_cut_short_is_completed_only_by_one_that_begins_with_it(double, monkeypatch):
    cut = double.cuda.runtime.getDeviceProperties(0)["uuid"]
    assert cut == bytes([0xD0, 0x0B, 0x1E])  # as real CuPy returns a UUID with a zero byte
    monkeypatch.setattr(B, "nvml_uuid_at", lambda bus: None)  # no NVML
    assert B.read_identity(double, 0).uuid is None  # then matched by bus id, never guessed
    other = "GPU-d00b1e05-0102-0304-0506-0708090a0b0c"  # the same start, but no zero byte after
    monkeypatch.setattr(B, "nvml_uuid_at", lambda bus: other)
    assert B.read_identity(double, 0).uuid is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-d00b1e00-0102-0304-0506-0708090a0b0c,1")
    assert B.read_identity(double, 0).uuid == "d00b1e00-0102-0304-0506-0708090a0b0c"
    assert complete_uuid(b"\xd0\x0b", ["MIG-d00b0000-0000-0000-0000-000000000000"]) == (
        "d00b0000-0000-0000-0000-000000000000"
    )
    assert complete_uuid(b"\xd0", ["garbage", None, "GPU-zz"]) is None


def test_list_devices_says_how_collectives_between_the_gpus_travel(double, monkeypatch, capsys):
    from gt.cli import main

    # device 0's UUID has a zero byte, where CuPy cuts it short: NVML (by bus id) completes it
    nvml = {"0000:10:00.0": "GPU-d00b1e00-0102-0304-0506-0708090a0b0c"}
    monkeypatch.setattr(B, "nvml_uuid_at", nvml.get)
    assert main(["worker", "--list-devices", "--backend", "cupy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "cuda:0  CuPy test double  0000:10:00.0  GPU-d00b1e00-0102-0304-0506-0708090a0b0c",
        "cuda:1  CuPy test double  0000:11:00.0  GPU-d00b1e01-0102-0304-0506-0708090a0b0c",
    ]
    assert out[2] == "collectives: NCCL 2.21.5 between workers on distinct GPUs (GT_NCCL=0: ZeroMQ)"
    monkeypatch.setenv("GT_NCCL", "0")
    assert main(["worker", "--list-devices", "--backend", "cupy"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "collectives: ZeroMQ through pinned host memory (GT_NCCL=0)"
    )
