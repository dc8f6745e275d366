"""``F.affine_grid`` and ``F.grid_sample`` (spatial transformer networks, deformable sampling,
optical-flow warping), in 2-d and 3-d, PyTorch's conventions.

``grid_sample`` reads ``input`` at the normalised positions of ``grid`` (``-1`` and ``1`` are the
centres of the corner pixels with ``align_corners=True``, their outer edges otherwise). Each output
value is a weighted sum of the ``2**d`` neighbouring input values (``bilinear``; ``trilinear`` for
5-d input) or the nearest one (``nearest``, half to even as PyTorch's ``nearbyint``), gathered from
the flattened input with one ``gather`` per neighbour; a neighbour outside the input contributes
0. ``padding_mode`` moves the positions first: ``zeros`` leaves them, ``border`` clamps them into
the input, ``reflection`` reflects them at its edges. Everything is composed from differentiable
ops, so the gradient reaches both ``input`` and ``grid`` (PyTorch's, including its zero gradient
for clamped coordinates and for ``nearest``). ``bicubic`` is not supported.
"""

from __future__ import annotations

import math
from typing import Any

from gt.errors import ShapeError
from gt.grad_graph import label
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.ops.shaping import stack
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _base_coords(theta: Tensor, n: int, align_corners: bool) -> Tensor:
    """The ``n`` normalised positions of one axis (pixel centres)."""
    return theta._upload(_linspace(n, align_corners, theta.dtype))


def _linspace(n: int, align_corners: bool, dtype: str) -> Any:
    """PyTorch's own ``linspace(-1, 1, n)`` (``* (n - 1) / n`` without ``align_corners``), to the
    last bit: with the sampling points on pixel centres (an identity ``theta``, as spatial
    transformers start), ``grid_sample``'s gradient for the grid depends on which side of the
    centre a point falls, so a correctly rounded grid would not give PyTorch's gradients."""
    import numpy as np  # noqa: PLC0415 - host-side constants only

    t = np.dtype(dtype).type
    if n <= 1:
        return np.zeros(n, dtype)
    step = t((t(1.0) - t(-1.0)) / t(n - 1))
    i = np.arange(n)
    # start + step * i on the first half, end - step * (n - 1 - i) on the second, each rounded once
    # (PyTorch's CPU kernel, compiled with fused multiply-adds), so worked out in extended precision
    wide = np.longdouble(step)
    lo = wide * i - 1
    hi = 1 - wide * (n - 1 - i)
    out = np.where(i < n // 2, lo, hi).astype(dtype)
    if not align_corners:
        out = (out * t(n - 1)).astype(dtype) / t(n)
    return out.astype(dtype)


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of the affine maps ``theta``: ``(N, 2, 3)`` for a 2-d ``size`` ``(N, C, H,
    W)`` gives ``(N, H, W, 2)``; ``(N, 3, 4)`` for ``(N, C, D, H, W)`` gives ``(N, D, H, W, 3)``.
    Each position is ``theta @ [x, y, (z,) 1]`` of the output pixel's normalised coordinates."""
    align_corners = bool(align_corners)
    size = [int(s) for s in size]
    dims = len(size) - 2
    if dims not in (2, 3):
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    if theta.is_floating_point() is False:
        raise TypeError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (dims, dims + 1) or theta.shape[0] != size[0]:
        raise ShapeError(
            f"Expected a batch of {dims}D affine matrices of shape Nx{dims}x{dims + 1} for size "
            f"{size}. Got {list(theta.shape)}."
        )
    spatial = size[2:][::-1]  # x (width) first
    axes = [_base_coords(theta, n, align_corners) for n in spatial]
    out_shape = tuple(size[2:])
    columns = []
    for i, axis in enumerate(axes):  # axis i varies along spatial dim dims - 1 - i
        view = [1] * dims
        view[dims - 1 - i] = spatial[i]
        columns.append(axis.reshape(view).expand(out_shape))
    columns.append(theta.new_ones(out_shape))
    base = stack(columns, -1).reshape(1, -1, dims + 1)  # [1, P, dims + 1]
    grid = base @ theta.mT  # [N, P, dims]
    return grid.reshape(size[0], *out_shape, dims)


def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1.0) * (0.5 * (size - 1))
    return ((coord + 1.0) * size - 1.0) * 0.5


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """``coord`` reflected into ``[twice_low / 2, twice_high / 2]`` (PyTorch's rule)."""
    if twice_low == twice_high:
        return coord * 0.0
    low = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    dist = (coord - low).abs()
    extra = dist.fmod(span)
    flips = (dist / span).floor()
    even = flips % 2.0 == 0
    return where(even, extra + low, (span - extra) + low)


def _source_coord(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    return _padded(_unnormalize(coord, size, align_corners), size, padding_mode, align_corners)


def _clip(x: Tensor, size: int) -> Tensor:
    """``x`` clamped into ``[0, size - 1]`` (NaN to 0), with gradient 1 strictly inside and 0 on the edges
    and beyond (PyTorch's ``clip_coordinates_set_grad`` counts the borders as outside, so a
    position exactly on the first or last pixel gives the grid no gradient)."""
    inside = (x > 0.0) & (x < size - 1.0)
    # (NaN clips to 0, as PyTorch's clip_coordinates gives it)
    return where(inside, x, x.detach().nan_to_num(0.0).clamp(0.0, size - 1.0))


def _padded(x: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """A source position moved inside by ``padding_mode`` (``zeros``: left as it is)."""
    if padding_mode == "border":
        x = _clip(x, size)
    elif padding_mode == "reflection":
        if align_corners:
            x = _reflect(x, 0, 2 * (size - 1))
        else:
            x = _reflect(x, -1, 2 * size - 1)
        x = _clip(x, size)
    return x


@autocast_op("grid_sample")
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:  # fmt: skip
    """Sample ``input`` (``(N, C, H, W)`` or ``(N, C, D, H, W)``) at ``grid`` (``(N, Ho, Wo, 2)``
    or ``(N, Do, Ho, Wo, 3)``, last dim ``x, y[, z]`` in ``[-1, 1]``); returns ``(N, C, Ho, Wo)``
    or ``(N, C, Do, Ho, Wo)``."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' "
                         f"or 'bicubic', but got: '{mode}'")  # fmt: skip
    if padding_mode not in _PADDING:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")  # fmt: skip
    align_corners = bool(align_corners)
    out = _grid_sample(input, grid, mode, padding_mode, align_corners)
    # PyTorch's node (its one kernel per rank) whatever the mode
    return label(out, f"GridSampler{input.ndim - 2}DBackward0") if out is not input else out


def _grid_sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                 align_corners: bool) -> Tensor:  # fmt: skip
    """:func:`grid_sample`'s value (arguments checked)."""
    if mode == "bicubic":
        return _bicubic(input, grid, padding_mode, align_corners)
    dims = input.ndim - 2
    if dims not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != dims:
        raise ShapeError(
            f"grid_sample(): expected a 4-D or 5-D input and a grid with the same number of "
            f"dimensions whose last has size {dims}, got input {list(input.shape)} and grid "
            f"{list(grid.shape)}"
        )
    if grid.shape[0] != input.shape[0]:
        raise ShapeError(f"grid_sample(): expected grid and input to have same batch size, but "
                         f"got input with sizes {list(input.shape)} and grid with sizes "
                         f"{list(grid.shape)}")  # fmt: skip
    n, c = input.shape[0], input.shape[1]
    sizes = list(input.shape[2:])  # (D,) H, W
    out_sizes = list(grid.shape[1:-1])
    points = math.prod(out_sizes)
    flat_in = input.reshape(n, c, -1)
    g = grid.reshape(n, points, dims)
    # coords[i]: the source position along spatial dim i (grid's last dim is x, y, z: reversed)
    coords = [_source_coord(g[:, :, dims - 1 - i], sizes[i], padding_mode, align_corners)
              for i in range(dims)]  # fmt: skip
    strides = [math.prod(sizes[i + 1 :]) for i in range(dims)]
    if mode == "nearest":
        # (weight 1 through round's zero derivative: grid gets a zero gradient, as in PyTorch)
        taps = [[(r, r * 0.0 + 1.0)] for r in (coord.round() for coord in coords)]
    else:
        taps = []
        for coord in coords:
            low = coord.floor()
            frac = coord - low
            taps.append([(low, 1.0 - frac), (low + 1.0, frac)])
    out = None
    for corner in range(2**dims if mode != "nearest" else 1):
        index = None
        weight = None
        valid = None
        for i in range(dims):
            pos, w = taps[i][(corner >> (dims - 1 - i)) & 1]
            inside = (pos >= 0) & (pos <= sizes[i] - 1)
            valid = inside if valid is None else valid & inside
            # (a NaN or infinite position reads element 0, weighted 0 below: as PyTorch's bounds
            # check, it adds nothing; cast to an integer it would be an index out of range)
            term = where(inside, pos, 0.0).clamp(0, sizes[i] - 1).long() * strides[i]
            index = term if index is None else index + term
            if w is not None:
                weight = w if weight is None else weight * w
        picked = flat_in.gather(2, index.unsqueeze(1).expand(n, c, points))
        if mode == "nearest":  # (weight 1: a position out of range adds 0, NaN or infinite)
            scale = where(valid, weight, 0.0)
        else:  # (a NaN weight, from a NaN or infinite position, makes NaN, as PyTorch's)
            scale = weight * valid.to(input.dtype)
        term = picked * scale.unsqueeze(1)
        out = term if out is None else out + term
    return out.reshape(n, c, *out_sizes)


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """PyTorch's cubic convolution weights (``A = -0.75``) of the taps at -1, 0, 1, 2."""
    a = -0.75

    def near(x: Tensor) -> Tensor:
        return ((x * (a + 2.0) - (a + 3.0)) * x) * x + 1.0

    def far(x: Tensor) -> Tensor:
        return ((x * a - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _bicubic(input: Tensor, grid: Tensor, padding_mode: str, align_corners: bool) -> Tensor:
    """``grid_sample(mode="bicubic")`` of a 4-d input: 16 taps around each point, each moved by
    ``padding_mode`` on its own (PyTorch's order: the centre is not), out-of-range ones zero."""
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise ShapeError("grid_sample(): bicubic interpolation only supports 4D input")
    n, c, h, w = input.shape
    out_sizes = list(grid.shape[1:-1])
    points = math.prod(out_sizes)
    flat_in = input.reshape(n, c, -1)
    g = grid.reshape(n, points, 2)
    x = _unnormalize(g[:, :, 0], w, align_corners)
    y = _unnormalize(g[:, :, 1], h, align_corners)
    x0, y0 = x.floor(), y.floor()
    wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)
    out = None
    for i in range(4):
        py = _padded(y0 + (i - 1.0), h, padding_mode, align_corners)
        for j in range(4):
            px = _padded(x0 + (j - 1.0), w, padding_mode, align_corners)
            inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
            index = (where(inside, py, 0.0).clamp(0, h - 1).long() * w
                     + where(inside, px, 0.0).clamp(0, w - 1).long())  # fmt: skip
            picked = flat_in.gather(2, index.unsqueeze(1).expand(n, c, points))
            term = picked * (wy[i] * wx[j] * inside.to(input.dtype)).unsqueeze(1)
            out = term if out is None else out + term
    return out.reshape(n, c, *out_sizes)


__all__ = ["affine_grid", "grid_sample"]
