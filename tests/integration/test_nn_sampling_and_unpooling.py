"""Max pooling's indices, max unpooling, ``affine_grid`` and ``grid_sample`` through a real
cluster, against NumPy written out here (PyTorch's own results for every mode are in the
differential programs of ``tests/api/programs/spatial.py``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F
from gt.errors import ShapeError

pytestmark = pytest.mark.timeout(120)
rng = np.random.default_rng(8)


def _pool_reference(x, k, s, p):
    """Max and flat argmax of each 2-d window (first maximum in row-major order, -inf padding)."""
    n, c, h, w = x.shape
    padded = np.full((n, c, h + 2 * p, w + 2 * p), -np.inf)
    padded[:, :, p : p + h, p : p + w] = x
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    vals, idx = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow), dtype=np.int64)
    for a, b, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        win = padded[a, b, i * s : i * s + k, j * s : j * s + k]
        r, q = np.unravel_index(np.argmax(win), win.shape)
        vals[a, b, i, j] = win[r, q]
        idx[a, b, i, j] = (i * s + r - p) * w + (j * s + q - p)
    return vals, idx


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 1, 1), (3, 2, 1)])
def test_max_pool_indices_are_flat_positions_of_the_first_maximum(conn, k, s, p):
    x = rng.standard_normal((2, 3, 7, 6))
    x[0, 0, :2, :2] = 5.0  # a tie: the first maximum wins
    out, idx = F.max_pool2d(gt.tensor(x), k, s, p, return_indices=True)
    want, want_idx = _pool_reference(x, k, s, p)
    np.testing.assert_allclose(out.numpy(), want.astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    assert idx.dtype == "int64"


def test_unpooling_puts_each_maximum_back_and_passes_its_gradient(conn):
    x = gt.tensor(rng.standard_normal((2, 3, 6, 6)), requires_grad=True)
    out, idx = nn.MaxPool2d(2, return_indices=True)(x)
    back = nn.MaxUnpool2d(2)(out, idx)
    dense = back.detach().numpy()
    xv = x.detach().numpy()
    kept = dense != 0
    np.testing.assert_array_equal(dense[kept], xv[kept])
    assert kept.reshape(2, 3, -1).sum(-1).tolist() == [[9] * 3] * 2
    back.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), kept.astype(np.float32))
    one_d = F.max_unpool1d(
        *F.max_pool1d(gt.tensor([[1.0, 3.0, 2.0, 0.0]]), 2, return_indices=True), 2
    )
    assert one_d.numpy().tolist() == [[0.0, 3.0, 2.0, 0.0]]
    v = gt.tensor(rng.standard_normal((1, 1, 4, 4, 4)))
    o3, i3 = F.max_pool3d(v, 2, return_indices=True)
    assert F.max_unpool3d(o3, i3, 2).shape == (1, 1, 4, 4, 4)
    with pytest.raises(ShapeError, match="output_size"):
        F.max_unpool2d(out, idx, 2, output_size=(9, 9))


def test_the_identity_grid_samples_the_input_back(conn):
    img = rng.standard_normal((2, 3, 5, 4))
    theta = gt.tensor(np.tile(np.eye(2, 3), (2, 1, 1)))
    for ac in (False, True):
        grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=ac)
        assert grid.shape == (2, 5, 4, 2)
        xs = np.linspace(-1, 1, 4) * (1 if ac else 3 / 4)
        np.testing.assert_allclose(grid.numpy()[0, 2, :, 0], xs, rtol=1e-12)
        for mode in ("bilinear", "nearest"):
            back = F.grid_sample(gt.tensor(img), grid, mode=mode, align_corners=ac)
            np.testing.assert_allclose(back.numpy(), img, atol=1e-12)


def test_bilinear_weights_and_zero_padding_by_hand(conn):
    img = np.arange(12.0).reshape(1, 1, 3, 4)
    # align_corners=True: x = -1 + 2 * 1.25 / 3 is column 1.25, y = 0 is row 1
    grid = np.array([[[[-1 + 2 * 1.25 / 3, 0.0], [1.5, 0.0], [-1.0, -1.0]]]])
    got = F.grid_sample(gt.tensor(img), gt.tensor(grid), align_corners=True).numpy()
    want_first = 0.75 * img[0, 0, 1, 1] + 0.25 * img[0, 0, 1, 2]
    # x = 1.5 is column 3.75: a quarter of column 3, and column 4 (outside) counts as 0
    want = [want_first, 0.25 * img[0, 0, 1, 3], img[0, 0, 0, 0]]
    np.testing.assert_allclose(got[0, 0, 0], want, atol=1e-12)
    border = F.grid_sample(
        gt.tensor(img), gt.tensor(grid), padding_mode="border", align_corners=True
    )
    assert border.numpy()[0, 0, 0, 1] == img[0, 0, 1, 3]


@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
def test_a_position_exactly_on_the_edge_gives_the_grid_no_gradient(conn, padding_mode):
    # PyTorch counts the first and last pixel as outside when clipping: a point sampled exactly
    # there (a semi-Lagrangian back-trace with zero velocity at a wall) has a zero x-gradient,
    # while its y-gradient and a point just inside are untouched
    img = gt.tensor(np.arange(12.0).reshape(1, 1, 3, 4) ** 2)
    grid = gt.tensor(np.array([[[[-1.0, 0.3], [1.0, 0.3], [1.0 - 1e-3, 0.3]]]]), requires_grad=True)
    out = F.grid_sample(img, grid, padding_mode=padding_mode, align_corners=True)
    out.sum().backward()
    g = grid.grad.numpy()[0, 0]
    assert g[0, 0] == 0.0 and g[1, 0] == 0.0
    # rows 1 and 2 weigh 0.7 and 0.3 (y = 0.3 is row 1.3); d column / dx = 3 / 2
    assert g[2, 0] == pytest.approx(1.5 * (0.7 * (7.0**2 - 6.0**2) + 0.3 * (11.0**2 - 10.0**2)))
    assert g[0, 1] != 0.0 and g[1, 1] != 0.0


def test_grid_sample_refuses_what_it_does_not_do(conn):
    img, grid = gt.zeros(1, 1, 2, 2), gt.zeros(1, 1, 1, 2)
    with pytest.raises(ShapeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(gt.zeros(1, 1, 2, 2, 2), gt.zeros(1, 1, 1, 1, 3), mode="bicubic")
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(img, grid, padding_mode="wrap")
    with pytest.raises(ShapeError, match="batch size"):
        F.grid_sample(gt.zeros(2, 1, 2, 2), grid)
    with pytest.raises(ShapeError, match="affine matrices"):
        F.affine_grid(gt.zeros(1, 3, 3), (1, 1, 4, 4))
