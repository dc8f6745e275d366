"""Idioms of graph neural network code that GT once got wrong (found by the ``gnn_layers``
programs). Expected values are PyTorch's."""

from __future__ import annotations

import math

import numpy as np

import gt


def test_where_with_a_zero_scalar_gives_positive_zero_where_the_mask_is_false(conn):
    # ``torch.where(x > 0, x, 0.)`` masks with +0.0: a product with the mask (GT's fast path)
    # gave -0.0 for negative entries, which prints as "-0." and turns 1 / x into -inf.
    x = gt.tensor([1.0, -2.0, 3.0, -math.inf, -0.0, math.nan])
    keep = gt.tensor([True, False, True, False, True, False])
    got = gt.where(keep, x, 0.0).numpy()
    np.testing.assert_array_equal(got, [1.0, 0.0, 3.0, 0.0, -0.0, 0.0])
    assert np.signbit(got).tolist() == [False, False, False, False, True, False]
    assert (1 / gt.where(x > 0, x, 0.0)).numpy()[1] == math.inf
    assert str(x.where(x > 0, 0.0)) == "tensor([1., 0., 3., 0., 0., 0.])"
    for dtype, np_dtype in ((gt.float64, np.float64), (gt.float16, np.float16)):
        y = gt.tensor([-1.5, 2.0], dtype=dtype)
        z = gt.where(gt.tensor([False, True]), y, 0.0).numpy()
        assert z.dtype == np_dtype
        assert not np.signbit(z).any() and z.tolist() == [0.0, 2.0]
