"""The quickstart's first print, ``f"Shape of X [N, C, H, W]: {X.shape}"``, reads as PyTorch's:
``x.shape`` is a ``gt.Size`` for every tensor (made by a factory, an op, a view, an in-place op or
a data loader), still equal to the plain tuple."""

from __future__ import annotations

import numpy as np

import gt


def test_shape_is_a_size_wherever_the_tensor_came_from(conn):
    x = gt.tensor(np.zeros((8, 1, 6, 6), np.float32))
    y = gt.tensor(np.arange(8))
    assert f"Shape of X [N, C, H, W]: {x.shape}" == "Shape of X [N, C, H, W]: gt.Size([8, 1, 6, 6])"
    assert f"Shape of y: {y.shape}" == "Shape of y: gt.Size([8])"
    made = [x, gt.zeros(2, 3), x + 1, x.flatten(1), x[0], x.view(8, -1), x.sum(), y.float()]
    for t in made:
        assert type(t.shape) is gt.Size, t
        assert t.shape == tuple(t.size())
    assert x.shape.numel() == 288 and x.shape == (8, 1, 6, 6) and x.shape[1:] == (1, 6, 6)
    z = gt.zeros(3)
    z.unsqueeze_(0)
    assert type(z.shape) is gt.Size and repr(z.shape) == "gt.Size([1, 3])"
    loader = gt.utils.data.DataLoader(gt.utils.data.TensorDataset(x, y), batch_size=4)
    xb, yb = next(iter(loader))
    assert repr(xb.shape) == "gt.Size([4, 1, 6, 6])" and repr(yb.shape) == "gt.Size([4])"
