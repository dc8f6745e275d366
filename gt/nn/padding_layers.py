"""Padding modules with PyTorch's names: ``ZeroPad1d/2d/3d``, ``ConstantPad1d/2d/3d``,
``ReflectionPad1d/2d/3d``, ``ReplicationPad1d/2d/3d`` and ``CircularPad1d/2d/3d``. Each pads the last 1, 2 or 3 dimensions with ``F.pad``;
``padding`` is one size for every side or PyTorch's (left, right, top, bottom, front, back)."""

from __future__ import annotations

from typing import Any

from gt.nn.convolution import pad
from gt.nn.module import Module
from gt.tensor import Tensor


def _padding(padding: Any, n: int) -> tuple:
    if isinstance(padding, (tuple, list)):
        if len(padding) != 2 * n:
            raise ValueError(f"padding must have {2 * n} entries, got {len(padding)}")
        return tuple(padding)
    return (padding,) * (2 * n)


class _PadNd(Module):
    """Shared by the padding modules: ``_dims`` padded dimensions, ``_mode`` for ``F.pad``."""

    _dims = 1
    _mode = "constant"

    def __init__(self, padding: Any):
        super().__init__()
        self.padding = _padding(padding, self._dims)

    def _check(self, x: Tensor) -> None:
        n = self._dims
        if x.ndim not in (n + 1, n + 2):
            raise NotImplementedError(
                f"Padding size {2 * n} is not supported for {x.ndim}D input tensor."
            )
        for k in range(n):
            d = x.ndim - 1 - k
            before, after, size = self.padding[2 * k], self.padding[2 * k + 1], x.shape[d]
            if self._mode == "reflect" and (before >= size or after >= size):
                raise RuntimeError(
                    "Argument #4: Padding size should be less than the corresponding input "
                    f"dimension, but got: padding ({before}, {after}) at dimension {d} of input "
                    f"{list(x.shape)}"
                )
            if self._mode == "circular" and (before > size or after > size):
                raise RuntimeError("Padding value causes wrapping around more than once.")

    def forward(self, input: Tensor) -> Tensor:
        if self._mode != "constant":
            self._check(input)
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with ``value``."""

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dimensions with ``value``."""

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dimensions with ``value``."""

    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension with zeros."""

    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dimensions with zeros (``padding``: one size or left, right, top,
    bottom)."""

    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dimensions with zeros."""

    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pad the last dimension with its reflection (the edge is not repeated)."""

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dimensions with their reflection."""

    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pad the last three dimensions with their reflection."""

    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dimension by repeating its edge values."""

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last two dimensions by repeating their edge values."""

    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pad the last three dimensions by repeating their edge values."""

    _dims, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Pad the last dimension by wrapping around (periodic boundary)."""

    _dims, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Pad the last two dimensions by wrapping around."""

    _dims, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Pad the last three dimensions by wrapping around."""

    _dims, _mode = 3, "circular"
