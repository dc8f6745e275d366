"""Idioms of quantitative-finance code that GT once got wrong (found while writing the
``quant_finance`` programs): NumPy's stride-trick rolling windows ported to ``as_strided`` on a
column of a price panel read the panel's storage, as PyTorch's do. Expected values are
PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_as_strided_on_a_view_reads_its_bases_storage(conn):
    panel = gt.arange(30.0).view(10, 3)
    col = panel[:, 1]  # starts 1 element in, stride 3
    s = col.stride(0)
    windows = col.as_strided((4, 3), (s, s))
    np.testing.assert_array_equal(
        windows.numpy(), [[1, 4, 7], [4, 7, 10], [7, 10, 13], [10, 13, 16]]
    )
    np.testing.assert_array_equal(col.as_strided((2, 2), (3, 3), 4).numpy(), [[4, 7], [7, 10]])
    np.testing.assert_array_equal(col.as_strided((2,), (1,)).numpy(), [1, 2])
    x = gt.arange(10.0)
    np.testing.assert_array_equal(gt.as_strided(x[3:], (2, 2), (1, 1)).numpy(), [[3, 4], [4, 5]])
    np.testing.assert_array_equal(x[::2].as_strided((3, 2), (2, 1)).numpy(), [[0, 1], [2, 3], [4, 5]])  # fmt: skip


def test_as_strided_windows_of_a_view_pass_gradients_to_the_base(conn):
    leaf = gt.arange(6.0, requires_grad=True)
    panel = (leaf * 2).view(2, 3)
    col = panel[:, 1]  # PyTorch's gradient reaches only the column's own elements
    (col.as_strided((2, 2), (1, 1)) * gt.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [0, 2, 0, 0, 0, 0])
