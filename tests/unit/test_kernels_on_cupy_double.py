"""Every compute and create kernel of the op registry, run on the CuPy test double, gives NumPy's
result; and the double itself holds code to the API of the CuPy versions GT supports (recorded by
``scripts/make_cupy_api.py``), so a kernel that leans on a NumPy-only function, keyword or method
fails here rather than on a user's first GPU run."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest
from test_ops_registry import SAMPLES, run_sample

from gt.runtime import ops as O
from gt.runtime.worker.backend import Backend

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import cupy_double as cp  # noqa: E402
from cupy_double import _api, _array, _memory, _streams  # noqa: E402
from cupy_double import cuda as cp_cuda  # noqa: E402

NP = Backend(np, "cpu")
DOUBLE = Backend(cp, name="cupy", cupyx=cp.cupyx)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_kernel_on_the_cupy_double_gives_numpys_result(name):
    want = run_sample(NP, name)
    got = run_sample(DOUBLE, name)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


# ------------------------------------------------------------------ the double and CuPy's API
def test_api_files_cover_the_cupy_majors_gt_installs():
    majors = {v.split(".")[0] for v in _api.VERSIONS}
    assert {"13", "14"} <= majors, _api.VERSIONS  # gpu-cuda12: cupy-cuda12x>=13; gpu-cuda13: 14


@pytest.mark.parametrize(
    "call",
    [
        lambda a: cp.add(a, a, where=True),  # NumPy's ufuncs take where=, CuPy's do not
        lambda a: cp.sum(a, where=a > 0),
        lambda a: a.sum(initial=0.0),
        lambda a: cp.cumsum(a, 0, None, None, "extra"),
        lambda a: cp.add.reduce(a, 0, None, None, False, 0.0),  # (initial)
    ],
)
def test_arguments_cupy_does_not_take_are_refused(call):
    with pytest.raises(TypeError):
        call(cp.arange(4, dtype=cp.float32))


@pytest.mark.parametrize(
    "get",
    [
        lambda: cp.errstate,
        lambda: cp.put_along_axis,  # in NumPy, not in CuPy 13
        lambda: cp.linalg.matrix_norm,
        lambda: cp.arange(3).tostring,
        lambda: cp.random.default_rng(0).normal,  # a NumPy Generator method CuPy's lacks
    ],
)
def test_names_cupy_lacks_are_refused(get):
    with pytest.raises(AttributeError):
        get()


def _params(f: object) -> set[str]:
    f = inspect.unwrap(f)
    sig = inspect.signature(f)
    return {
        p.name
        for p in sig.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in ("self", "_")
    }


def _cupy_params(space: str, name: str) -> set[str] | None:
    found: set[str] | None = None
    for rec in _api.records(space, name):
        if rec.get("params") is None:
            return None
        names = {t.lstrip("*").rstrip("=") for t in rec["params"] if t not in ("/", "*")}
        found = names if found is None else found & names
    return found


def _public(obj: object) -> dict[str, object]:
    found = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    found.update(
        {k: getattr(obj, k) for k in vars(type(obj)) if not k.startswith("_")}
        if isinstance(obj, type(sys))
        else {}
    )  # a module object's class (runtime)
    return found


@pytest.mark.parametrize(
    ("space", "obj", "skip"),
    [
        ("cupy", cp, cp.DOUBLE_ONLY),
        ("cupy.cuda", cp_cuda, set()),
        ("cupy.cuda.runtime", cp_cuda.runtime, set()),
        ("cupy.ndarray", _array.ndarray, set()),
        ("cupy.cuda.Stream", _streams.Stream, {"defer", "flush", "pending"}),
        ("cupy.cuda.Event", _streams.Event, set()),
        ("cupy.cuda.Device", cp_cuda.Device, set()),
        ("cupy.cuda.MemoryPointer", _memory.MemoryPointer, set()),
        ("cupy.cuda.MemoryPool", _memory.MemoryPool, {"allocated"}),
        ("cupy.cuda.PinnedMemoryPool", _memory.PinnedMemoryPool, set()),
        ("cupy.cuda.PinnedMemoryPointer", cp_cuda.PinnedMemoryPointer, set()),
    ],
)
def test_what_the_double_defines_is_cupys_and_takes_no_more_arguments(space, obj, skip):
    """The double's own definitions (not only what it passes through from NumPy) are CuPy names,
    methods where CuPy has methods and attributes where it has attributes, and where CuPy
    documents a signature they take no keyword CuPy's lacks."""
    wrong = []
    for name, member in _public(obj).items():
        if name in skip or inspect.ismodule(member):
            continue
        if not getattr(member, "__module__", "cupy_double").startswith("cupy_double"):
            continue  # imported for the double's own use (typing.Any ...)
        if not _api.has(space, name):
            wrong.append(f"{space}.{name} is not in every supported CuPy")
            continue
        cupy_kind = _api.records(space, name)[0]["kind"]
        is_method = callable(member) and not isinstance(member, property)
        if cupy_kind == "attribute" and is_method and not isinstance(member, type):
            wrong.append(f"{space}.{name} is a method here, an attribute in CuPy")
        elif cupy_kind == "function" and not is_method:
            wrong.append(f"{space}.{name} is an attribute here, a method in CuPy")
        elif callable(member) and not isinstance(member, (type, property)):
            cupy_names = _cupy_params(space, name)
            if cupy_names is not None:
                extra = _params(member) - cupy_names
                if extra:
                    wrong.append(f"{space}.{name} takes {sorted(extra)}, CuPy's does not")
    assert not wrong, wrong


@pytest.mark.parametrize(("name", "cls"), [("Stream", _streams.Stream), ("Event", _streams.Event)])
def test_stream_and_event_constructors_take_no_more_than_cupys(name, cls):
    extra = _params(cls.__init__) - (_cupy_params("cupy.cuda", name) or set())
    assert not extra, f"cupy.cuda.{name}() takes no {sorted(extra)}"


@pytest.mark.parametrize("reduce", ["amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_scatter_reduce_on_the_double_gives_numpys_result(reduce, include_self, dtype):
    """CuPy has no ``multiply.at``: its product goes through sums of logs, signs and zero counts,
    which must still give NumPy's products (zeros, negatives and integers included)."""
    x = np.array([[2, -3, 0, 5], [1, 4, -2, 3]], dtype)
    src = np.array([[0, -2, 3], [-1, 5, 2]], dtype)
    rows = np.array([[0], [1]], np.int64)
    cols = np.array([[1, 1, 3], [0, 0, 0]], np.int64)
    attrs = {"key": [["t", 0], ["t", 1]], "reduce": reduce, "include_self": include_self}
    code = O.BY_NAME["scatter_reduce"].code
    results = []
    for be in (NP, DOUBLE):
        args = [be.from_host(a.copy()) for a in (x, src, rows, cols)]
        results.append(be.to_host(be.handlers[code](args, attrs)))
    want, got = results
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.float16, np.int64, np.int32, np.uint8, np.bool_]
)
def test_cupy_scatter_max_and_min_are_numpys_for_every_dtype(reduce, dtype):
    """A CuPy worker's scatter max/min (sorted runs, not CuPy's atomics, which round float64 and
    refuse int64) combine repeated positions exactly as NumPy's ``maximum.at``/``minimum.at``,
    NaN winning, with index arrays, slices and an empty selection."""
    rng = np.random.default_rng(1)
    ufunc = np.maximum if reduce == "amax" else np.minimum
    scatter = DOUBLE.scatter_max if reduce == "amax" else DOUBLE.scatter_min
    floats = np.dtype(dtype).kind == "f"
    for trial in range(12):
        n, m = int(rng.integers(1, 5)), int(rng.integers(1, 8))
        x = (rng.standard_normal((n, m)) * 5).astype(dtype)
        src = (rng.standard_normal((n, m + 3)) * 5).astype(dtype)
        if floats and trial % 3 == 0:
            src.flat[rng.integers(src.size)] = np.nan
        cols = rng.integers(0, m, (n, m + 3))
        rows = np.broadcast_to(np.arange(n)[:, None], cols.shape).copy()
        for key in ((rows, cols), (slice(None), cols[0])):
            part = src if key[0] is rows else src[:, : cols.shape[1]]
            want = x.copy()
            ufunc.at(want, key, part)
            out = DOUBLE.from_host(x.copy())
            dev_key = tuple(k if isinstance(k, slice) else DOUBLE.from_host(k) for k in key)
            scatter(out, dev_key, DOUBLE.from_host(part))
            np.testing.assert_array_equal(DOUBLE.to_host(out), want)
    out = DOUBLE.from_host(x.copy())
    scatter(out, (DOUBLE.from_host(np.zeros(0, np.int64)),), DOUBLE.from_host(src[:0, 0]))
    np.testing.assert_array_equal(DOUBLE.to_host(out), x)


def test_a_half_product_on_cupy_is_accumulated_in_float32_as_pytorchs_cuda_kernel():
    # CuPy's cumprod is a tree scan, so the CPU kernel's running half product is not there to be
    # had; PyTorch's CUDA kernel accumulates in float32 and rounds once
    x = np.random.default_rng(0).uniform(0.9, 1.1, 1000).astype(np.float16)
    once = np.float16(np.prod(x.astype(np.float32)))
    running = np.cumprod(x)[-1]
    assert once != running  # (the two rules differ here)
    prod = O.OPCODE["prod"]
    for be, want in ((DOUBLE, once), (NP, running)):
        got = be.to_host(be.handlers[prod]([be.from_host(x.copy())], {"axis": 0}))
        assert got.dtype == np.float16 and got == want
        kept = be.to_host(be.handlers[prod]([be.from_host(x.reshape(10, 100))], {"keepdims": True}))
        assert kept.shape == (1, 1)  # keepdims with no axis: every dim kept, as size 1


def test_a_wider_dtype_view_of_misaligned_device_memory_is_made_from_an_aligned_copy():
    # CuPy reinterprets without checking alignment, and a misaligned 4-byte load faults on a GPU
    raw = np.arange(17, dtype=np.uint8)
    x = DOUBLE.from_host(raw.copy())[1:]
    assert x.data.ptr % 4  # as a slice one byte in leaves it
    view = O.OPCODE["view_dtype"]
    got = DOUBLE.handlers[view]([x], {"dtype": "float32"})
    assert got.data.ptr % 4 == 0 and got.shape == (4,)
    np.testing.assert_array_equal(DOUBLE.to_host(got), raw[1:].view(np.float32))
    whole = DOUBLE.from_host(raw[:16].copy())
    shared = DOUBLE.handlers[view]([whole], {"dtype": "float32"})
    assert shared.data.ptr == whole.data.ptr  # aligned: still a view of the same memory
