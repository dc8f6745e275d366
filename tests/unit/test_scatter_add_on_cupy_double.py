"""``a[key] += v`` with repeated indices on a CuPy worker for every dtype: CuPy's ``add.at`` takes
seven dtypes only (the H200 run found complex gradients of ``index_add`` failing), so the worker
splits complex numbers and widens the rest; the double refuses what CuPy refuses."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime.worker.backend import Backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

DTYPES = ["complex128", "complex64", "bool", "int8", "int16", "uint8", "int32", "int64",
          "float16", "float32", "float64"]  # fmt: skip


def _values(dtype: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    if dtype == "bool":
        return rng.random(n) < 0.5
    v = rng.standard_normal(n) * 50
    if dtype.startswith("complex"):
        v = v + 1j * rng.standard_normal(n) * 50
    return v.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeated_indices_accumulate_as_numpys_add_at(dtype):
    be = Backend(cp, name="cupy", cupyx=cp.cupyx)
    idx = np.array([0, 2, 2, 5, 0, 0, 7, 2])
    base, v = _values(dtype, 8), _values(dtype, len(idx))
    want = base.copy()
    np.add.at(want, idx, v)
    a = cp.asarray(base)
    be.scatter_add(a, cp.asarray(idx), cp.asarray(v))
    got = cp.asnumpy(a)
    assert got.dtype == want.dtype
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == "float16" else 1e-6)
    else:  # integers wrap as NumPy's do; booleans are "any"
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["complex128", "bool", "int8"])
def test_cupys_own_scatter_add_refuses_these_dtypes(dtype):
    a = cp.asarray(_values(dtype, 4))
    with pytest.raises(TypeError, match="add.at only supports"):
        cp.cupyx.scatter_add(a, cp.asarray(np.array([0, 0])), cp.asarray(_values(dtype, 2)))
    with pytest.raises(TypeError, match="add.at only supports"):
        cp.add.at(a, cp.asarray(np.array([0, 0])), cp.asarray(_values(dtype, 2)))
