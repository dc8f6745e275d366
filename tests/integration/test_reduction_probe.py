"""What a probe of reductions, scans and sorting against PyTorch 2.13 found on Dec 6 (40,343
cases), as PyTorch behaves: NumPy's ``axis``/``keepdims`` and NumPy integers as ``dim`` on every
reduction; a bool first argument of ``std``/``var`` is ``unbiased``; ``bincount``'s weighted sums
are float64 unless the weights are float32/float64; empty inputs to ``histogram``,
``histogramdd``, ``unique_consecutive(dim=)`` and the backward of ``prod`` over an empty
dimension. Every test runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def _x():
    return gt.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))


def test_numpy_names_and_numpy_integers_on_every_reduction(conn):
    x = _x()
    assert x.amax(axis=1).tolist() == [3.0, 7.0, 11.0]
    assert x.amax(1, keepdims=True).shape == (3, 1)
    assert x.any(axis=1).tolist() == [True] * 3 and x.all(axis=0).shape == (4,)
    assert gt.logsumexp(x, axis=1).shape == (3,)
    assert x.argmax(dim=1, keepdims=True).shape == (3, 1)
    assert x.prod(axis=0).shape == (4,) and x.nansum(axis=1, keepdims=True).shape == (3, 1)
    assert x.count_nonzero(axis=0).tolist() == [2, 3, 3, 3]
    assert x.median(axis=1).values.tolist() == [1.0, 5.0, 9.0]
    assert x.cumprod(axis=1).shape == (3, 4)
    with gt.autocast("cpu"):  # (through autocast's marks too)
        assert x.logsumexp(axis=1).shape == (3,)
    assert gt.ones(2, 3, 4).sum(dim=np.int64(1)).shape == (2, 4)
    assert gt.ones(2, 3, 4).amax(dim=np.int32(2)).shape == (2, 3)


def test_a_bool_first_argument_of_std_and_var_is_unbiased(conn):
    x = _x()
    assert x.std(False).item() == pytest.approx(3.452052529534663)
    assert x.var(True).shape == ()
    std, mean = gt.std_mean(x, False)
    assert std.item() == pytest.approx(3.452052529534663) and mean.item() == 5.5


def test_weighted_bincount_sums_in_float64_unless_the_weights_are_float(conn):
    i = gt.tensor([0, 1, 1, 3])
    out = i.bincount(weights=gt.tensor([True, True, True, False]))
    assert out.dtype == gt.float64 and out.tolist() == [1.0, 2.0, 0.0, 0.0]
    assert i.bincount(weights=gt.tensor([1, 2, 3, 4])).dtype == gt.float64
    assert i.bincount(weights=gt.tensor([1.0, 2.0, 3.0, 4.0])).dtype == gt.float32
    assert i.bincount().dtype == gt.int64


def test_empty_inputs_to_histograms_scans_and_unique(conn):
    hist = gt.histogram(gt.tensor([]), bins=4)
    assert hist.hist.tolist() == [0.0] * 4 and hist.bin_edges.tolist() == [0, 0.25, 0.5, 0.75, 1]
    dd = gt.histogramdd(gt.zeros(0, 2), bins=2)
    assert dd.hist.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert gt.tensor([]).unique_consecutive(dim=0).shape == (0,)
    x = gt.zeros(0, 3, dtype=gt.float64, requires_grad=True)
    x.prod(dim=0).sum().backward()
    assert x.grad.shape == (0, 3)
