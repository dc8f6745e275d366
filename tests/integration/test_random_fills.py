"""``cauchy_``, ``log_normal_`` and ``geometric_`` draw from their distributions (checked by
their quantiles and moments on 20,000 samples, well inside five standard errors), and the in-place
forms of ``i0``, ``igamma``, ``igammac`` and ``nextafter`` keep the tensor and take the value."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt


def test_cauchy_log_normal_and_geometric_fills_have_their_distributions(conn):
    gt.manual_seed(7)
    c = gt.empty(20_000).cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(c) - 1.0) < 0.1  # the median's standard error: pi * sigma / (2 sqrt n)
    assert abs(np.quantile(c, 0.75) - 3.0) < 0.15  # median + sigma
    ln = np.log(gt.empty(20_000, dtype=gt.float64).log_normal_(0.5, 0.3).numpy())
    assert abs(ln.mean() - 0.5) < 0.02 and abs(ln.std() - 0.3) < 0.02
    g = gt.empty(20_000).geometric_(0.25).numpy()
    assert g.min() == 1.0 and np.all(g == np.round(g))
    assert abs(g.mean() - 4.0) < 0.15  # mean 1/p, standard deviation sqrt(1-p)/p
    assert abs((g == 1).mean() - 0.25) < 0.02
    with pytest.raises(ValueError, match="p in \\(0, 1\\)"):
        gt.empty(3).geometric_(1.5)


def test_special_functions_in_place_keep_the_tensor(conn):
    x = gt.tensor([0.5, 1.0])
    assert x.i0_() is x
    np.testing.assert_allclose(x.numpy(), [1.0634834, 1.2660659], rtol=1e-6)
    a = gt.tensor([1.0, 2.0])
    a.igamma_(gt.tensor([1.0, 1.0]))
    np.testing.assert_allclose(a.numpy(), [1 - math.exp(-1), 1 - 2 * math.exp(-1)], rtol=1e-6)
    b = gt.tensor([1.0, 2.0])
    b.igammac_(gt.tensor([1.0, 1.0]))
    np.testing.assert_allclose(b.numpy(), [math.exp(-1), 2 * math.exp(-1)], rtol=1e-6)
    y = gt.tensor([1.0, 2.0])
    y.nextafter_(gt.tensor([2.0, 1.0]))
    assert y.numpy().tolist() == [np.nextafter(np.float32(1), np.float32(2)),
                                  np.nextafter(np.float32(2), np.float32(1))]  # fmt: skip
