"""Tensor idioms of self-supervised learning code that GT once got wrong (found by the
``self_supervised`` programs): MAE's ``x.reshape(shape=(...))`` and ``view(size=...)``, and DINO's
multi-crop wrapper concatenating onto ``torch.empty(0)`` (PyTorch's legacy rule skips 1-d empty
tensors in ``cat``). Expected values are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_reshape_and_view_take_the_shape_as_a_keyword(conn):
    x = gt.arange(12.0)
    imgs = x.reshape(shape=(1, 1, 2, 6))
    assert imgs.shape == (1, 1, 2, 6)
    patches = imgs.reshape(shape=(imgs.shape[0], 1, 1, 2, 3, 2))
    np.testing.assert_array_equal(patches.numpy().ravel(), np.arange(12.0))
    assert x.view(size=(3, -1)).shape == (3, 4)
    assert x.view(size=[2, 6]).shape == (2, 6)
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        x.reshape(size=(3, 4))
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        x.reshape((3, 4), shape=(3, 4))


def test_reshape_given_by_keyword_is_still_a_view(conn):
    x = gt.zeros(6)
    x.reshape(shape=(2, 3))[1].fill_(1.0)
    np.testing.assert_array_equal(x.numpy(), [0, 0, 0, 1, 1, 1])


def test_cat_skips_legacy_empty_1d_tensors_as_dinos_multicrop_wrapper_does(conn):
    output = gt.empty(0)
    for n in (2, 3):
        part = gt.ones(n, 4) * n
        output = gt.cat((output, part))
    assert output.shape == (5, 4)
    np.testing.assert_array_equal(output.numpy()[:, 0], [2, 2, 3, 3, 3])
    middle = gt.cat([gt.ones(1, 2), gt.empty(0), gt.zeros(2, 2)])
    assert middle.shape == (3, 2)
    assert gt.cat((gt.empty(0), gt.ones(2, 3)), dim=1).shape == (2, 3)  # dim of the kept ones
    assert gt.cat([gt.empty(0), gt.empty(0)]).shape == (0,)


def test_cat_with_a_skipped_empty_tensor_still_promotes_its_dtype_and_backpropagates(conn):
    assert gt.cat([gt.empty(0, dtype=gt.float64), gt.ones(2, 3)]).dtype == gt.float64
    assert gt.cat([gt.empty(0, dtype=gt.int64), gt.ones(2, 3)]).dtype == gt.float32
    a = gt.ones(2, 3, requires_grad=True)
    (gt.cat((gt.empty(0), a)) * 2).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 2.0))
    with pytest.raises(Exception, match="same number of dimensions|must match"):
        gt.cat([gt.empty(0, 2), gt.ones(2, 3)])
