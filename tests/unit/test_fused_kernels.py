"""NumPy kernels that take a faster route to the same bits: ``x @ W.T`` with its operands swapped,
and ``add_scaled`` (``a + alpha * b``) in cache-sized chunks. Run on NumPy, no cluster."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.ops.elementwise import _AXPY_CHUNK
from gt.runtime.ops.reduce import _swap_keeps_bits, matmul_numpy
from gt.runtime.worker.backend import Backend

BACKEND = Backend(np, "cpu")
ADD_SCALED = BACKEND.handlers[O.OPCODE["add_scaled"]]
rng = np.random.default_rng(5)


@pytest.mark.parametrize("rows,inner,out", [(1, 64, 64), (8, 784, 512), (64, 784, 512),
                                            (3, 5, 7), (64, 512, 10), (256, 128, 4096)])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_linear_layers_product_equals_numpys_bit_for_bit(rows, inner, out, dtype):
    x = rng.standard_normal((rows, inner)).astype(dtype)
    w = rng.standard_normal((out, inner)).astype(dtype)
    got = matmul_numpy(x, w.T)
    np.testing.assert_array_equal(got, np.matmul(x, w.T))
    # the swapped call only where it was measured faster: float32, 2 <= rows < outputs, a large W,
    # and where this CPU's BLAS kernels give it the same bits (Intel's: yes; AMD's: no)
    swapped = dtype is np.float32 and 1 < rows < out and w.size >= 1 << 16 and _swap_keeps_bits()
    assert got.flags.f_contiguous if swapped else got.flags.c_contiguous


def test_the_swap_is_taken_only_where_this_machines_blas_keeps_the_bits(monkeypatch):
    import gt.runtime.ops.reduce as R

    x = rng.standard_normal((8, 784)).astype(np.float32)
    w = rng.standard_normal((512, 784)).astype(np.float32)
    monkeypatch.setattr(R, "_SWAP_OK", False)  # (as on an AMD CPU)
    assert matmul_numpy(x, w.T).flags.c_contiguous
    monkeypatch.setattr(R, "_SWAP_OK", True)
    assert matmul_numpy(x, w.T).flags.f_contiguous
    monkeypatch.setattr(R, "_SWAP_OK", None)  # (probed at the first product that could swap)
    matmul_numpy(x, w.T)
    assert R._SWAP_OK is R._swap_keeps_bits()


def test_other_layouts_and_ranks_are_numpys_own_product():
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 9)).astype(np.float32)  # C-ordered: not a transposed weight
    assert matmul_numpy(a, b).flags.c_contiguous
    np.testing.assert_array_equal(matmul_numpy(a, b), a @ b)
    s = rng.standard_normal((2, 4, 6)).astype(np.float32)
    np.testing.assert_array_equal(matmul_numpy(s, b), s @ b)
    ai = np.arange(12, dtype=np.int64).reshape(3, 4)
    bi = ai.copy().T  # a transposed int matrix: NumPy's own loop, not BLAS
    np.testing.assert_array_equal(matmul_numpy(ai, bi), ai @ bi)


def _ref(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    return a + b * alpha  # what add(b * alpha) rounds to: the product, then the sum


@pytest.mark.parametrize("size", [7, _AXPY_CHUNK * 2 + 1, _AXPY_CHUNK * 5 - 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_scaled_in_place_rounds_as_the_product_then_the_sum(size, dtype):
    a = rng.standard_normal(size).astype(dtype)
    b = rng.standard_normal(size).astype(dtype)
    want = _ref(a, b, -0.01)
    x = a.copy()
    got = ADD_SCALED([x, b], {"alpha": -0.01, "inplace": True})
    np.testing.assert_array_equal(got, want)
    assert got is x  # written into the private array, not a new one


def test_add_scaled_leaves_a_shared_array_and_broadcasts():
    a = rng.standard_normal((3, 4)).astype(np.float32)
    row = rng.standard_normal(4).astype(np.float32)
    keep = a.copy()
    view = a[:]  # someone else sees a: it must not be written
    got = ADD_SCALED([a, row], {"alpha": 2.5, "inplace": True})
    np.testing.assert_array_equal(got, _ref(keep, row, 2.5))
    np.testing.assert_array_equal(view, keep)
    np.testing.assert_array_equal(ADD_SCALED([keep, row], {"alpha": 3}), _ref(keep, row, 3.0))


@pytest.mark.parametrize("alpha", [True, "2", [2.0], None])
def test_add_scaled_refuses_an_alpha_that_is_not_a_number(alpha):
    a = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="alpha"):
        ADD_SCALED([a, a], {"alpha": alpha})


WHERE = BACKEND.handlers[O.OPCODE["where"]]


@pytest.mark.parametrize("mask_order,values_order", [("F", "C"), ("C", "F"), ("F", "F")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_mask_of_another_layout_selects_as_numpys_where(mask_order, values_order, dtype):
    # relu's gradient of a Linear layer's transposed result: where(out != 0, g, 0)
    h = np.asarray(rng.standard_normal((64, 48)), dtype, order=mask_order)
    g = np.asarray(rng.standard_normal((64, 48)), dtype, order=values_order)
    g[0, :3] = (np.inf, np.nan, -0.0)
    h[0, :3] = -1.0
    got = WHERE([h > 0, g, 0.0], {"dtype": np.dtype(dtype).name})
    want = np.where(h > 0, g, dtype(0))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
