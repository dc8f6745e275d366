"""Idioms of classical image processing (kornia, torchvision, optical flow) that GT once got wrong:
``linspace`` values to PyTorch's last bit, which sampling grids built with ``meshgrid`` and
``grid_sample`` depend on (PWC-Net's backward warp puts every point on a pixel centre, where the
grid's gradient changes with the side of the centre the point falls on)."""

from __future__ import annotations

import numpy as np
import pytest

import gt


def _floats(hexes: list[str], dtype: str) -> np.ndarray:
    return np.array([float.fromhex(h) for h in hexes], dtype=dtype)


# PyTorch 2.13's CPU linspace, as float.hex() (start + step * i on the first half, end - step *
# (steps - 1 - i) on the second, each with one rounding)
LINSPACES = [
    ((-1.0, 1.0, 8), "float32", ["-0x1.0p+0", "-0x1.6db6dcp-1", "-0x1.b6db6cp-2", "-0x1.249244p-3",
                                 "0x1.249244p-3", "0x1.b6db6cp-2", "0x1.6db6dcp-1", "0x1.0p+0"]),
    ((0.0, 1.0, 7), "float32", ["0x0.0p+0", "0x1.555556p-3", "0x1.555556p-2", "0x1.0p-1",
                                "0x1.555554p-1", "0x1.aaaaaap-1", "0x1.0p+0"]),
    ((3.0, -1.0, 16), "float32", ["0x1.8p+1", "0x1.5dddde0p+1", "0x1.3bbbbcp+1", "0x1.19999ap+1",
                                  "0x1.eeeeeep+0", "0x1.aaaaaap+0", "0x1.666664p+0",
                                  "0x1.222220p+0", "0x1.bbbbc0p-1", "0x1.333336p-1",
                                  "0x1.55555ap-2", "0x1.11112p-4", "-0x1.999994p-3",
                                  "-0x1.dddddcp-2", "-0x1.777778p-1", "-0x1.0p+0"]),
    ((-1.0, 1.0, 11), "float64", ["-0x1.0p+0", "-0x1.999999999999ap-1", "-0x1.3333333333333p-1",
                                  "-0x1.9999999999999p-2", "-0x1.9999999999998p-3", "-0x1.0p-54",
                                  "0x1.9999999999998p-3", "0x1.9999999999999p-2",
                                  "0x1.3333333333333p-1", "0x1.999999999999ap-1", "0x1.0p+0"]),
]  # fmt: skip


@pytest.mark.parametrize(("args", "dtype", "hexes"), LINSPACES)
def test_linspace_gives_pytorchs_values_to_the_last_bit(conn, args, dtype, hexes):
    got = gt.linspace(*args, dtype=getattr(gt, dtype)).numpy()
    assert got.dtype == np.dtype(dtype)
    assert got.tobytes() == _floats(hexes, dtype).tobytes()


def test_linspace_keeps_requires_grad_out_and_the_degenerate_sizes(conn):
    x = gt.linspace(0, 1, 5, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.dtype == gt.float32
    assert gt.linspace(2.5, 7, 1).tolist() == [2.5]
    assert gt.linspace(0, 1, 0).shape == (0,)
    out = gt.empty(3, dtype=gt.float64)
    gt.linspace(-1, 1, 3, out=out)
    assert out.tolist() == [-1.0, 0.0, 1.0]
    assert gt.linspace(gt.tensor(1.0), gt.tensor(2.0), 3).tolist() == [1.0, 1.5, 2.0]


def test_a_meshgrid_backward_warp_gives_the_grid_pytorchs_gradient(conn):
    """An identity warp with align_corners=True: each point sits on a pixel centre, up to the last
    bit of ``linspace``; PyTorch's y-gradient takes the backward difference on the rows whose
    coordinate rounds just below the centre (rows 1 and 4 of 8)."""
    h, w = 8, 9
    gy, gx = gt.meshgrid(gt.linspace(-1, 1, h), gt.linspace(-1, 1, w), indexing="ij")
    grid = gt.stack([gx, gy], -1)[None].requires_grad_(True)
    img = gt.arange(h * w, dtype=gt.float32).view(1, 1, h, w) ** 2 / 10
    gt.nn.functional.grid_sample(img, grid, align_corners=True).sum().backward()
    want = [28.35, 28.35, 141.75, 198.45, 198.45, 311.85, 368.55, -1389.15]
    np.testing.assert_allclose(grid.grad[0, :, 0, 1].numpy(), want, rtol=1e-5)


# ------------------------------------------------------------------- uint8 resizing
# torchvision's resize hands uint8 images to F.interpolate as they are (bilinear on the CPU);
# PyTorch resizes them with PIL's fixed-point separable passes (width, then height), so the
# results are not the float results rounded: 17 here where the float path gives 17.6 -> 18
U8_IMAGE = [[[[0, 1, 4, 9, 16], [25, 36, 49, 64, 81], [100, 121, 144, 169, 196],
              [225, 5, 38, 73, 110]]]]  # fmt: skip
BICUBIC = [[3, 9, 21], [65, 111, 147], [148, 55, 115]]  # (the clamped a = -0.75 cubic)
U8_RESIZES = [
    ({"size": (3, 3), "mode": "bilinear"}, [[5, 11, 24], [68, 97, 131], [145, 56, 113]]),
    ({"size": (3, 3), "mode": "bilinear", "antialias": True},
     [[9, 17, 31], [70, 97, 129], [124, 70, 121]]),
    ({"size": (6, 7), "mode": "bilinear", "align_corners": True},
     [[0, 1, 2, 4, 7, 11, 16], [15, 20, 25, 31, 38, 46, 55], [40, 48, 58, 68, 79, 92, 104],
      [85, 98, 111, 125, 141, 156, 173], [150, 100, 84, 102, 121, 141, 162],
      [225, 78, 16, 38, 61, 85, 110]]),
    ({"size": (2, 3), "mode": "bicubic", "antialias": True}, [[21, 40, 59], [113, 85, 138]]),
    ({"size": (3, 3), "mode": "bicubic"}, BICUBIC),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "want"), U8_RESIZES)
def test_uint8_images_resize_with_pytorchs_fixed_point_passes(conn, kwargs, want):
    x = gt.tensor(U8_IMAGE, dtype=gt.uint8)
    out = gt.nn.functional.interpolate(x, **kwargs)
    assert out.dtype == gt.uint8
    assert out[0, 0].tolist() == want


def test_uint8_resizes_without_a_fixed_point_rule_say_so(conn):
    x = gt.tensor(U8_IMAGE, dtype=gt.uint8)
    with pytest.raises(NotImplementedError, match="uint8"):
        gt.nn.functional.interpolate(x[0], size=6, mode="linear")
    assert gt.nn.functional.interpolate(x, size=(2, 2), mode="nearest")[0, 0].tolist() == [
        [0, 4],
        [100, 144],
    ]


# ------------------------------------------------------------------ border padding
def test_border_padding_refuses_what_pytorch_refuses(conn):
    F = gt.nn.functional
    x = gt.zeros(1, 2, 7, 9)
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 4D"):
        F.pad(x, (2, 1), mode="reflect")
    with pytest.raises(RuntimeError, match=r"Argument #6: .* padding \(7, 0\) at dimension 2"):
        F.pad(x, (0, 0, 7, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(x, (0, 0, 0, 8), mode="circular")
    assert F.pad(x, (8, 8, 6, 6), mode="reflect").shape == (1, 2, 19, 25)
    assert F.pad(x, (9, 9, 7, 7), mode="circular").shape == (1, 2, 21, 27)
    assert F.pad(x, (20, 0, 0, 30), mode="replicate").shape == (1, 2, 37, 29)
    assert F.pad(gt.zeros(2, 3, 6), (5, 5), mode="reflect").shape == (2, 3, 16)
    assert F.pad(x, (9, 9), value=1.0).shape == (1, 2, 7, 27)  # constant: any rank


def test_resizing_and_padding_keep_a_channels_last_layout(conn):
    """PyTorch's interpolate (every mode) and border/constant padding give a channels-last input
    a channels-last result (circular padding, made by concatenation, does not)."""
    F = gt.nn.functional
    x = gt.rand(1, 3, 6, 8).contiguous(memory_format=gt.channels_last)

    def cl(y):
        return y.is_contiguous(memory_format=gt.channels_last)

    for mode in ("nearest", "nearest-exact", "bilinear", "bicubic", "area"):
        assert cl(F.interpolate(x, size=(4, 5), mode=mode)), mode
    assert F.interpolate(x, size=(4, 5), mode="bilinear").stride() == (60, 1, 15, 3)
    assert cl(F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True))
    for mode in ("constant", "reflect", "replicate"):
        assert cl(F.pad(x, (1, 1, 1, 1), mode=mode)), mode
    assert not cl(F.pad(x, (1, 1, 1, 1), mode="circular"))
    assert not cl(F.interpolate(gt.rand(1, 3, 6, 8), size=(4, 5)))
    v = gt.rand(1, 2, 3, 4, 5).contiguous(memory_format=gt.channels_last_3d)
    out = F.interpolate(v, size=(2, 3, 4), mode="trilinear")
    assert out.is_contiguous(memory_format=gt.channels_last_3d)


# -------------------------------------------------------------- half-precision resizing
def test_half_precision_linear_and_bicubic_resizes_round_like_pytorch(conn):
    """PyTorch computes the weights of 1-d linear and of bicubic resizing in half precision
    (sums in float, one rounding at the end): not the float result rounded to half."""
    F = gt.nn.functional
    x = gt.tensor([[[0.1, 0.7, 0.35, 0.9, 0.2, 0.55]]]).half()
    want = [0.0999755859375, 0.290771484375, 0.61865234375, 0.55712890625, 0.365966796875, 0.625,
            0.8681640625, 0.486328125, 0.2476806640625, 0.4384765625, 0.5498046875]  # fmt: skip
    out = F.interpolate(x, size=11, mode="linear")
    assert out.dtype == gt.float16 and out.float()[0, 0].tolist() == want
    y = gt.tensor([[[[0.1, 0.7, 0.35], [0.9, 0.2, 0.55], [0.33, 0.61, 0.05]]]]).half()
    want = [
        [-0.05609130859375, 0.11639404296875, 0.487548828125, 0.748046875, 0.64892578125,
         0.390869140625, 0.285400390625],
        [0.44873046875, 0.45458984375, 0.46728515625, 0.476806640625, 0.473876953125,
         0.465576171875, 0.46240234375],
        [0.9765625, 0.810546875, 0.45703125, 0.199951171875, 0.273193359375, 0.498291015625,
         0.58837890625],
        [0.63037109375, 0.58740234375, 0.5126953125, 0.4150390625, 0.328857421875,
         0.274658203125, 0.2412109375],
        [0.2344970703125, 0.3291015625, 0.56005859375, 0.64892578125, 0.416748046875,
         0.085205078125, -0.0687255859375],
    ]  # fmt: skip
    assert F.interpolate(y, size=(5, 7), mode="bicubic").float()[0, 0].tolist() == want
