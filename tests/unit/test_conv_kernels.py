"""A convolution's column gradient on NumPy: ``W.T @ g`` folded into one GEMM with the batch
innermost, and ``col2im`` adding those columns in that layout. Run on NumPy, no cluster."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.ops.conv import out_size
from gt.runtime.ops.reduce import matmul_numpy
from gt.runtime.worker.backend import Backend

COL2IM = Backend(np, "cpu").handlers[O.OPCODE["col2im"]]
rng = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_weights_transpose_times_a_batch_is_one_gemm_with_the_batch_innermost(dtype):
    w = rng.standard_normal((64, 576)).astype(dtype)  # a 3x3 conv's weight, 64 -> 64 channels
    g = rng.standard_normal((32, 64, 256)).astype(dtype)  # its output gradient, 16x16
    got = matmul_numpy(w.T, g)
    assert got.shape == (32, 576, 256)
    assert got.strides == (got.itemsize, 256 * 32 * got.itemsize, 32 * got.itemsize)
    tol = 1e-4 if dtype is np.float32 else 1e-12
    np.testing.assert_allclose(got, w.T @ g, rtol=tol, atol=tol)


def test_other_batched_products_keep_numpys_layout():
    w = rng.standard_normal((64, 576)).astype(np.float32)
    cols = rng.standard_normal((32, 576, 256)).astype(np.float32)
    assert matmul_numpy(w, cols).flags.c_contiguous  # the forward product: its result is small
    small = rng.standard_normal((2, 8, 5)).astype(np.float32)
    assert matmul_numpy(rng.standard_normal((40, 8)).astype(np.float32), small).flags.c_contiguous


GEOMETRIES = [  # (batch, channels, kernel, size, padding, stride, dilation)
    (32, 4, (3, 3), (16, 16), (1, 1), (1, 1), (1, 1)),
    (8, 3, (3, 2), (11, 7), (2, 1), (2, 1), (2, 1)),
    (3, 2, (4,), (10,), (1,), (3,), (1,)),
    (4, 2, (9,), (10,), (0,), (1,), (1,)),  # fewer window positions than kernel offsets
    (2, 2, (2, 2, 2), (5, 4, 6), (1, 0, 1), (1, 2, 1), (1, 1, 2)),
]


@pytest.mark.parametrize("n,c,kernel,size,padding,stride,dilation", GEOMETRIES)
def test_col2im_of_batch_innermost_columns_gives_the_same_bits(n, c, kernel, size, padding,
                                                               stride, dilation):  # fmt: skip
    length = math.prod(map(out_size, size, kernel, dilation, padding, stride))
    x = rng.standard_normal((n, c * math.prod(kernel), length)).astype(np.float32)
    last = np.ascontiguousarray(x.transpose(1, 2, 0)).transpose(2, 0, 1)  # [K, L, N] in memory
    at = {"kernel": list(kernel), "dilation": list(dilation), "padding": list(padding),
          "stride": list(stride), "output_size": list(size)}  # fmt: skip
    got, want = COL2IM([last], at), COL2IM([x], at)
    assert got.flags.c_contiguous and got.shape == (n, c, *size)
    np.testing.assert_array_equal(got, want)
