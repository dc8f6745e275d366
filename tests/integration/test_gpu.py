"""What only a real GPU can check (``gpu``-marked: skipped without CuPy and a CUDA device), and the
CPU default of a cluster started without a worker count.

On a GPU: ``auto`` picks CuPy, workers pin themselves one per GPU, their identity matches NVML's,
random numbers equal NumPy's, index tensors are bounds-checked, bfloat16 computes (or is refused
clearly), and the CuPy test double refuses what the real CuPy refuses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster
from gt.runtime.ops import creation as C
from gt.runtime.worker import backend as B
from gt.runtime.worker.device_monitor import DeviceMonitor, find_handle
from tests.unit.test_ops_registry import SAMPLES, run_sample

SUPPORT = str(Path(__file__).resolve().parents[1] / "support")


def test_a_cluster_without_a_count_starts_one_numpy_worker_without_gpus(monkeypatch):
    monkeypatch.setenv("GT_BACKEND", "numpy")
    with LocalCluster(workers=None) as c:
        assert c.workers == 1 and "local_workers" not in c.endpoints


@pytest.fixture(scope="module")
def cupy_be():
    be = B.load_backend("auto")
    assert be.name == "cupy", "auto did not choose CuPy on a GPU machine"
    return be


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_registry_kernel_on_the_gpu_gives_numpys_result(cupy_be, name):
    """Each primitive's kernel alone, on the device (the op suites test them through workers)."""
    want = run_sample(B.numpy_backend(), name)
    got = run_sample(cupy_be, name)
    assert got.dtype == want.dtype and got.shape == want.shape
    if name in ("linalg_eigh", "linalg_svd"):  # cuSOLVER and LAPACK may pick opposite signs
        got, want = _signs_fixed(name, got), _signs_fixed(name, want)
    if name in ("randn", "rand", "randint"):  # one Philox stream: the same numbers
        np.testing.assert_array_equal(got, want)
    else:  # (the GPU's transcendental functions and sums may differ in the last bits)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def _signs_fixed(name: str, packed: np.ndarray) -> np.ndarray:
    """A packed decomposition with each singular/eigen vector's sign chosen so that its largest
    entry is positive (the decompositions are unique only up to these signs; PyTorch's CPU and CUDA
    results differ in them too)."""
    from gt.runtime.ops.linalg_decomp import unpack_eigh, unpack_svd

    if name == "linalg_eigh":
        w, v = unpack_eigh(packed)
        v = v * _sign_of_largest(v, axis=-2)[..., None, :]
        return np.concatenate([w[..., None], v], axis=-1)
    n = packed.shape[-1]
    k = int(round((-1 + (1 + 8 * n) ** 0.5) / 4))  # square: n = 2k^2 + k  (k*k + k + k*k)
    u, s, vh = unpack_svd(packed, k, k)
    flip = _sign_of_largest(u, axis=-2)
    u, vh = u * flip[..., None, :], vh * flip[..., :, None]
    lead = packed.shape[:-1]
    return np.concatenate([u.reshape(*lead, -1), s, vh.reshape(*lead, -1)], axis=-1)


def _sign_of_largest(a: np.ndarray, axis: int) -> np.ndarray:
    at = np.expand_dims(np.abs(a).argmax(axis=axis), axis)
    return np.sign(np.take_along_axis(a, at, axis=axis)).squeeze(axis)


@pytest.mark.gpu
def test_every_device_is_pinned_and_identified(cupy_be):
    cp = cupy_be.xp
    for i in range(cp.cuda.runtime.getDeviceCount()):
        be = B.Backend(cp, i)
        assert cp.cuda.runtime.getDevice() == i
        ident = be.identity
        assert ident.index == i and ident.uuid and ident.pci_bus_id, ident
        assert be.device.startswith(f"cuda:{i} ")
    B.Backend(cp, 0)


@pytest.mark.gpu
def test_the_identity_is_the_device_nvml_samples(cupy_be):
    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    ident = cupy_be.identity
    h, how = find_handle(pynvml, ident)
    assert h is not None and how in ("uuid", "visible"), how
    mon = DeviceMonitor(None, 0, ident, nvml=pynvml)
    mon.stop()
    s = mon.sample()
    assert s["mem_total"] and s["name"] and s["uuid"].endswith(ident.uuid)
    if not s["mig"]:
        assert s["util"] is not None and s["temp"] is not None and s["power"] is not None, s


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_random_numbers_on_cupy_equal_numpys(cupy_be, dtype):
    n, seed = 100_003, 424242
    np.testing.assert_array_equal(C.random_words(cupy_be.xp, n, seed).get(),
                                  C.random_words(np, n, seed))  # fmt: skip
    got = C.draw_rand(cupy_be.xp, n, seed, dtype, np.dtype(dtype)).get()
    np.testing.assert_array_equal(got, C.draw_rand(np, n, seed, dtype, np.dtype(dtype)))
    got = C.draw_randint(cupy_be.xp, n, seed, -7, 2**40, np.int64).get()
    np.testing.assert_array_equal(got, C.draw_randint(np, n, seed, -7, 2**40, np.int64))
    # log/sin/cos round differently in CUDA and NumPy: the last bit or two may differ
    z = C.draw_randn(cupy_be.xp, n, seed, dtype, np.dtype(dtype)).get()
    tol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}[dtype]
    np.testing.assert_allclose(z, C.draw_randn(np, n, seed, dtype, np.dtype(dtype)), rtol=tol,
                               atol=tol)  # fmt: skip


@pytest.mark.gpu
def test_index_tensors_are_bounds_checked_on_cupy(cupy_be):
    cp = cupy_be.xp
    get = cupy_be.handlers[O.OPCODE["getitem"]]
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 3"):
        get([cp.arange(3.0), cp.asarray([0, 7])], {"key": [["t", 0]]})
    assert get([cp.arange(3.0), cp.asarray([-1])], {"key": [["t", 0]]}).get().tolist() == [2.0]
    put = cupy_be.handlers[O.OPCODE["setitem"]]
    with pytest.raises(IndexError, match="out of bounds"):
        put([cp.zeros(3), 1.0, cp.asarray([3])], {"key": [["t", 0]]})


@pytest.mark.gpu
def test_bfloat16_computes_on_cupy_or_is_refused_clearly(cupy_be):
    if cupy_be.bf16 is None:
        with pytest.raises(TypeError, match="bfloat16"):
            cupy_be.dtype("bfloat16")
        pytest.skip("this CuPy cannot compute in bfloat16 (needs CuPy 14+ and ml_dtypes)")
    x = cupy_be.handlers[O.OPCODE["randn"]]([], {"shape": [64, 64], "seed": 1,
                                                 "dtype": "bfloat16"})  # fmt: skip
    assert x.dtype == cupy_be.bf16
    y = (x @ x).astype(cupy_be.xp.float32).get()
    ref = x.astype(cupy_be.xp.float32).get()
    np.testing.assert_allclose(y, ref @ ref, rtol=0.05, atol=0.5)


@pytest.mark.gpu
def test_the_test_double_refuses_what_cupy_refuses(cupy_be, monkeypatch):
    monkeypatch.syspath_prepend(SUPPORT)
    import cupy_double

    for mod in (cupy_be.xp, cupy_double):
        d = mod.arange(3, dtype=mod.float32)
        with pytest.raises(TypeError) as info:
            np.asarray(d)
        assert "Implicit conversion to a NumPy array is not allowed" in str(info.value)
        with pytest.raises(TypeError):
            d + np.ones(3, dtype=np.float32)
        wrapped = d[mod.asarray([4, -5])]  # out of range: both wrap around
        assert mod.asnumpy(wrapped).tolist() == [1.0, 1.0]
        assert type(np.add(d, 1)) is mod.ndarray
    assert "cupy_double" in sys.modules


@pytest.mark.gpu
def test_a_cluster_starts_one_worker_per_gpu(monkeypatch):
    monkeypatch.delenv("GT_BACKEND", raising=False)
    n = len(B.list_devices("cupy"))
    with LocalCluster(workers=None) as c:
        assert c.workers == n
        workers = request(c.address, "stats", timeout=5.0)["workers"]
    assert sorted(w["device"].split(" ")[0] for w in workers) == [f"cuda:{i}" for i in range(n)]
    assert all(w["backend"] == "cupy" for w in workers)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_float_floor_division_and_remainder_equal_numpys_on_cupy(cupy_be, dtype):
    """CuPy's own ``floor(a / b)`` gives -3 for -0.9 // 0.3; the workers use NumPy's algorithm."""
    rng = np.random.default_rng(3)
    a = np.concatenate([[-0.9, 0.9, -0.0, 7.5], rng.standard_normal(4000) * 10]).astype(dtype)
    b = np.concatenate([[0.3, -0.3, 2.0, -2.5], rng.standard_normal(4000)]).astype(dtype)
    xp = cupy_be.xp
    for name, want in (("floor_divide", np.floor_divide(a, b)), ("remainder", np.remainder(a, b))):
        got = xp.asnumpy(cupy_be.handlers[O.OPCODE[name]]([xp.asarray(a), xp.asarray(b)], None))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_frexp_of_a_subnormal_float32_on_cupy_is_not_flushed_to_zero(cupy_be):
    x = np.array([1e-40, -3e-42, 0.75], np.float32)
    xp = cupy_be.xp
    m = xp.asnumpy(cupy_be.handlers[O.OPCODE["frexp_mantissa"]]([xp.asarray(x)], None))
    e = xp.asnumpy(cupy_be.handlers[O.OPCODE["frexp_exponent"]]([xp.asarray(x)], None))
    np.testing.assert_array_equal(m, np.frexp(x)[0])
    np.testing.assert_array_equal(e, np.frexp(x)[1])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_replayed_sgd_step_fused_on_the_gpu_equals_its_steps_bit_for_bit(cupy_be, dtype):
    """A chain of in-place updates runs as one CUDA kernel (no fused multiply-adds): the same
    bits as the steps' own kernels, which it must have replaced (one launch a replay)."""
    from gt.runtime.worker.executor import Executor
    from tests.unit.test_hot_chain import BUF, P_, PLAN, G, arrays
    from tests.unit.test_hot_worker import FakeIO, NoPeers, ins, run

    a = arrays(1 << 20, dtype, seed=6)
    results = []
    for fuse in (False, True):
        ex = Executor(cupy_be, NoPeers(), FakeIO())
        launches: list = []
        if fuse:
            real = cupy_be.elementwise_kernel

            def counted(*args, real=real, launches=launches):
                k = real(*args)
                return (lambda *xs: launches.append(1) or k(*xs)) if k is not None else None

            ex._fuse = counted
        else:
            ex._fuse = None
        run(ex, [ins("hot_define", 0, [], PLAN)])
        for k, v in a.items():
            ex.tables[1][k] = cupy_be.from_host(v.copy())
        for _ in range(3):
            run(ex, [ins("hot", 0, [G], {"plan": PLAN["plan"], "outs": [], "seeds": []})])
        assert len(launches) == (3 if fuse else 0)
        results.append({k: cupy_be.to_host(ex.tables[1][k]) for k in (P_, BUF)})
    for k in (P_, BUF):
        assert results[0][k].tobytes() == results[1][k].tobytes()


@pytest.mark.gpu
def test_on_two_gpus_a_gradient_is_all_reduced_over_nccl(monkeypatch):
    """Real NCCL between two worker processes on two GPUs (skipped with one: NCCL cannot make two
    ranks on one device, and the workers then take the ring)."""
    if len(B.list_devices("cupy")) < 2:
        pytest.skip("needs two GPUs")
    from tests.integration.test_nccl_all_reduce import data_parallel_gradient

    monkeypatch.setenv("GT_BACKEND", "cupy")
    got, want, moved = data_parallel_gradient()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert moved and {f["via"] for f in moved} == {"nccl"}, moved
