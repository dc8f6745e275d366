"""Fractional max pooling (Graham, 2014): ``F.fractional_max_pool2d/3d`` (and ``_with_indices``)
and the ``nn.FractionalMaxPool2d/3d`` modules, with PyTorch's arguments, checks and windows.

Each plane ``(n, c)`` has one random sample ``u`` in ``[0, 1)`` per spatial dimension (``[N, C, 2]``
or ``[N, C, 3]``: width then height in 2-d, time, height, width in 3-d, as PyTorch orders them).
Output ``i`` of a dimension pools the ``k`` inputs from ``int((i + u) * a) - int(u * a)`` with
``a = (in - k) / (out - 1)``, computed in the input's dtype as PyTorch does, and the last output
starts at ``in - k``. The samples come from GT's seeded ``rand`` unless ``_random_samples`` is given
(then the result is deterministic and equals PyTorch's for the same samples). Everything runs on the
workers: the window starts are computed there from the samples, one gather collects every window
and one ``max`` picks the first maximum of each in row-major order, which is where the gradient goes
(``return_indices`` gives its flat position in the input plane, what ``max_unpool`` takes).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt.errors import ShapeError
from gt.factories import rand
from gt.nn.module import Module
from gt.ops.autocast import autocast_op
from gt.ops.shaping import cat
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _tuple(v: Any, n: int, what: str, op: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return tuple(v) * n
        if len(v) != n:
            raise ShapeError(f"{op}: {what} must either be a single Int or tuple of Ints")
        return tuple(v)
    return (v,) * n


def _starts(u: Tensor, size: int, out: int, k: int) -> Tensor:
    """``[N, C, out]`` int64 window starts along one dimension, from samples ``u`` ``[N, C]``."""
    last = u._upload(np.full((1, 1, 1), size - k, dtype=np.int64)).expand(*u.shape, 1)
    if out == 1:
        return last
    ftype = np.dtype(u.dtype).type
    alpha = float(ftype(size - k) / ftype(out - 1))  # in the samples' dtype, as PyTorch
    steps = u._upload(np.arange(out - 1, dtype=np.dtype(u.dtype)))
    first = (u * alpha).long().unsqueeze(-1)
    starts = ((u.unsqueeze(-1) + steps) * alpha).long() - first
    return cat([starts, last], -1)


def _fractional(input: Tensor, kernel_size: Any, output_size: Any, output_ratio: Any,
                samples: Tensor | None, dims: int) -> tuple[Tensor, Tensor]:  # fmt: skip
    op = f"fractional_max_pool{dims}d"
    if input.ndim not in (dims + 1, dims + 2):
        raise ShapeError(
            f"{op}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(input.shape)}"
        )
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    sizes = tuple(int(s) for s in input.shape[-dims:])
    if output_size is None:
        if isinstance(output_ratio, (tuple, list)) and len(output_ratio) > dims:
            raise ValueError(
                f"{op} requires output_ratio to either be a single Int or tuple of Ints."
            )
        ratio = _tuple(output_ratio, dims, "output_ratio", op)
        output_size = [int(s * r) for s, r in zip(sizes, ratio)]
    kernel = tuple(int(k) for k in _tuple(kernel_size, dims, "kernel_size", op))
    outs = tuple(int(o) for o in _tuple(output_size, dims, "output_size", op))
    names = ("height", "width") if dims == 2 else ("time", "height", "width")
    # PyTorch's checks: 2-d height then width (out + k - 1 <= in); 3-d time, width, height (<).
    order = (0, 1) if dims == 2 else (0, 2, 1)
    for d in order:
        too_big = outs[d] + kernel[d] - 1 > sizes[d] if dims == 2 else (
            outs[d] + kernel[d] - 1 >= sizes[d])  # fmt: skip
        if too_big:
            where = op + ("()" if dims == 2 else "_out()")
            raise ShapeError(
                f"{where}: pool {names[d]} {kernel[d]} too large relative to input "
                f"{names[d]} {sizes[d]}"
            )
    x = input if input.ndim == dims + 2 else input.unsqueeze(0)
    n, c = int(x.shape[0]), int(x.shape[1])
    if samples is None:
        samples = rand(n, c, dims, dtype=x.dtype)
    else:
        _check_samples(samples, x, dims)
        if samples.shape[0] != n:
            samples = samples[:n]
    # PyTorch's sample order: (w, h) in 2-d, (t, h, w) in 3-d.
    which = (1, 0) if dims == 2 else (0, 1, 2)
    starts = [_starts(samples[:, :, which[d]], sizes[d], outs[d], kernel[d]) for d in range(dims)]
    # Flat input position of every window element: [N, C, *outs, *kernel].
    strides = [math.prod(sizes[d + 1 :]) for d in range(dims)]
    pos = None
    for d in range(dims):
        grid = [1] * dims
        grid[d] = outs[d]
        s = starts[d].reshape(n, c, *grid, *([1] * dims))
        offsets = np.arange(kernel[d], dtype=np.int64).reshape(
            [1] * (2 + dims) + [kernel[d] if e == d else 1 for e in range(dims)]
        )
        term = (s + x._upload(offsets)) * strides[d]
        pos = term if pos is None else pos + term
    pos = pos.reshape(n, c, math.prod(outs) * math.prod(kernel))
    flat = x.reshape(n, c, math.prod(sizes))
    windows = flat.gather(2, pos).reshape(n, c, math.prod(outs), math.prod(kernel))
    best = windows.max(3)
    out = best.values.reshape(n, c, *outs)
    where = pos.reshape(n, c, math.prod(outs), math.prod(kernel))
    where = where.gather(3, best.indices.unsqueeze(3)).reshape(n, c, *outs)
    if input.ndim == dims + 1:
        return out.squeeze(0), where.squeeze(0)
    return out, where


def _check_samples(samples: Tensor, x: Tensor, dims: int) -> None:
    if samples.dtype != x.dtype:
        raise ShapeError("Expect _random_samples to have the same dtype as input")
    if samples.ndim != 3:
        raise ShapeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    if samples.shape[0] < x.shape[0]:
        raise ShapeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != x.shape[1]:
        raise ShapeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != dims:
        raise ShapeError(
            f"Expect _random_samples.size(2) equals to {dims}; got {samples.shape[2]}."
        )


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None) -> tuple[Tensor, Tensor]:  # fmt: skip
    """2-d fractional max pooling of ``[N, C, H, W]`` (or ``[C, H, W]``) to ``output_size`` (or
    ``output_ratio`` times the input size): ``(values, flat positions h * W + w)``."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None) -> tuple[Tensor, Tensor]:  # fmt: skip
    """3-d fractional max pooling of ``[N, C, T, H, W]`` (or ``[C, T, H, W]``): ``(values, flat
    positions (t * H + h) * W + w)``."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)


@autocast_op("fractional_max_pool2d")
def fractional_max_pool2d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Any:  # fmt: skip
    """2-d fractional max pooling; with ``return_indices`` also the maxima's positions."""
    out = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)
    return out if return_indices else out[0]


@autocast_op("fractional_max_pool3d")
def fractional_max_pool3d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Any:  # fmt: skip
    """3-d fractional max pooling; with ``return_indices`` also the maxima's positions."""
    out = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)
    return out if return_indices else out[0]


class _FractionalMaxPoolNd(Module):
    _dims = 2

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None):  # fmt: skip
        super().__init__()
        n, name = self._dims, type(self).__name__
        if n == 3 and any(int(k) <= 0 for k in _tuple(kernel_size, n, "kernel_size", name)):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        self.kernel_size = _tuple(kernel_size, n, "kernel_size", name)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _tuple(output_size, n, "output_size", name) if output_size is not None else None  # fmt: skip
        self.output_ratio = _tuple(output_ratio, n, "output_ratio", name) if output_ratio is not None else None  # fmt: skip
        if output_size is None and output_ratio is None:
            raise ValueError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:
        out = _fractional(input, self.kernel_size, self.output_size, self.output_ratio,
                          self._random_samples, self._dims)  # fmt: skip
        return out if self.return_indices else out[0]


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-d fractional max pooling (exactly one of ``output_size`` and ``output_ratio``); a given
    ``_random_samples`` ``[N, C, 2]`` is a buffer and fixes the windows."""

    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-d fractional max pooling (exactly one of ``output_size`` and ``output_ratio``); a given
    ``_random_samples`` ``[N, C, 3]`` is a buffer and fixes the windows."""

    _dims = 3


__all__ = [
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
]
