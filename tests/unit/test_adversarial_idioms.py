"""Idioms of adversarial robustness code that GT got wrong: auto_LiRPA and IBP training pad
margins with ``torch.zeros(size=(n, 1), dtype=...)``; GT's factories took the shape only
positionally (``zeros() got an unexpected keyword argument 'size'``)."""

from __future__ import annotations

import numpy as np
import pytest

import gt


def test_factories_take_the_shape_as_the_size_keyword(conn):
    pad = gt.zeros(size=(3, 1), dtype=gt.float64)
    assert pad.shape == (3, 1) and pad.dtype == gt.float64
    np.testing.assert_array_equal(gt.ones(size=[2]).numpy(), [1.0, 1.0])
    assert gt.empty(size=(1, 2)).shape == (1, 2)
    assert gt.full(size=(2,), fill_value=3.0).tolist() == [3.0, 3.0]
    assert gt.rand(size=(4,)).shape == (4,) and gt.randn(size=(2, 2)).shape == (2, 2)
    assert gt.zeros(size=gt.zeros(2, 5).shape).shape == (2, 5)
    lb = gt.tensor([[0.5, -1.0], [2.0, 0.25]])
    padded = gt.cat((gt.zeros(size=(lb.size(0), 1), dtype=lb.dtype), lb), dim=1)
    assert padded.tolist() == [[0.0, 0.5, -1.0], [0.0, 2.0, 0.25]]


def test_size_keyword_errors_read_as_pytorchs():
    with pytest.raises(TypeError, match="multiple values for argument 'size'"):
        gt.zeros(2, size=(3,))
    with pytest.raises(TypeError, match="must be tuple of ints"):
        gt.ones(size=3)
