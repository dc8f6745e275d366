"""Max unpooling in 1, 2 and 3-d (``F.max_unpool2d``, ``nn.MaxUnpool2d``): the inverse of max
pooling with ``return_indices=True``, which puts each value back at the flat position its index
names in an output plane of zeros (PyTorch's semantics: the default output size is
``(in - 1) * stride - 2 * padding + kernel``). Written as a ``setitem`` into zeros, so the
gradient of each value is the output gradient at its position (repeated positions, from
overlapping windows, each get it, as in PyTorch)."""

from __future__ import annotations

import math
from typing import Any

from gt.errors import ShapeError
from gt.nn.convolution import _pair
from gt.nn.module import Module
from gt.ops.autocast import autocast_op
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _output_sizes(input: Tensor, dims: int, kernel: tuple, stride: tuple, padding: tuple,
                  output_size: Any) -> list[int]:  # fmt: skip
    sizes = input.shape[-dims:]
    default = [(n - 1) * s - 2 * p + k for n, k, s, p in zip(sizes, kernel, stride, padding)]
    if output_size is None:
        return default
    given = [int(v) for v in output_size][-dims:]
    if len(given) != dims:
        raise ShapeError(f"output_size must have {dims} or {dims + 2} elements, not {len(given)}")
    for g, dflt, s in zip(given, default, stride):
        if not dflt - s < g < dflt + s:
            raise ShapeError(
                f"invalid output_size {list(output_size)} (dim of size {g} must lie between "
                f"{dflt - s + 1} and {dflt + s - 1})"
            )
    return given


def _max_unpool(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any, padding: Any,
                output_size: Any, dims: int) -> Tensor:  # fmt: skip
    if input.ndim not in (dims + 1, dims + 2):
        raise ShapeError(f"max_unpool{dims}d: expected a {dims + 1}-d or {dims + 2}-d input, "
                         f"got {list(input.shape)}")  # fmt: skip
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(f"max_unpool{dims}d: indices {list(indices.shape)} and input "
                         f"{list(input.shape)} must have the same shape")  # fmt: skip
    kernel = _pair(kernel_size, dims)
    stride = kernel if stride is None else _pair(stride, dims)
    outs = _output_sizes(input, dims, kernel, stride, _pair(padding, dims), output_size)
    lead = tuple(input.shape[:-dims])
    planes = math.prod(lead)
    plane = math.prod(outs)
    # one flat output: plane p's element i is at p * plane + i (an index outside its plane is
    # refused on the worker, with PyTorch's message, where it would write into the next plane)
    sizes = outs if dims > 1 else [*outs, 1]  # (PyTorch's 1-d message names the 2-d plane)
    where = indices._apply("max_unpool_positions", [indices], {"planes": planes, "sizes": sizes})
    out = input.new_zeros((planes * plane,))
    out[where] = input.reshape(-1)
    return out.reshape(*lead, *outs)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:  # fmt: skip
    """Undo 1-d max pooling: values back at their indices in ``[N, C, L_out]`` zeros."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


@autocast_op("max_unpool2d")
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:  # fmt: skip
    """Undo 2-d max pooling: values back at their indices in ``[N, C, H_out, W_out]`` zeros."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


@autocast_op("max_unpool3d")
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:  # fmt: skip
    """Undo 3-d max pooling: values back at their indices in ``[N, C, D, H, W]`` zeros."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


class _MaxUnpoolNd(Module):
    _dims = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = _pair(kernel_size, self._dims)
        self.stride = self.kernel_size if stride is None else _pair(stride, self._dims)
        self.padding = _pair(padding, self._dims)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return _max_unpool(input, indices, self.kernel_size, self.stride, self.padding,
                           output_size, self._dims)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Undo ``MaxPool1d(return_indices=True)``."""

    _dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Undo ``MaxPool2d(return_indices=True)``: ``unpool(pooled, indices, output_size=...)``."""


class MaxUnpool3d(_MaxUnpoolNd):
    """Undo ``MaxPool3d(return_indices=True)``."""

    _dims = 3


__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d"]  # fmt: skip
