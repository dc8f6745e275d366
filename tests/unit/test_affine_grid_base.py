"""``F.affine_grid``'s base coordinates are PyTorch's to the last bit (no cluster needed).

With an identity ``theta`` (how a spatial transformer starts) every sampling point lies on a pixel
centre, where ``grid_sample``'s gradient for the grid depends on which side of the centre the point
falls; a correctly rounded grid therefore gives other gradients than PyTorch's. The values below
are PyTorch 2's (``F.affine_grid(torch.eye(2, 3)[None], (1, 1, 1, 28))`` and ``torch.linspace(-1,
1, 7, dtype=torch.float64)``)."""

from __future__ import annotations

import numpy as np

from gt.nn.grid_sampling import _linspace


def test_float32_centres_without_align_corners_round_as_pytorchs():
    got = _linspace(28, False, "float32")
    want = [float.fromhex(h) for h in ("-0x1.124926p-1", "-0x1.492490p-2", "-0x1.b6db6cp-4",
                                       "-0x1.249246p-5", "0x1.249246p-5", "0x1.124926p-1")]  # fmt: skip
    assert got.dtype == np.float32
    assert got[[6, 9, 12, 13, 14, 21]].tolist() == want
    # (the correctly rounded value of -15/28 is one ulp away from PyTorch's)
    assert got[6] != np.float32(-15 / 28)


def test_float64_linspace_halves_as_pytorchs_kernel():
    got = _linspace(7, True, "float64")
    third = float.fromhex("0x1.5555555555556p-2")
    assert got.tolist() == [-1.0, -2 * third, -third, 2.0**-54, third, 2 * third, 1.0]


def test_one_point_is_the_centre():
    assert _linspace(1, False, "float32").tolist() == [0.0]
