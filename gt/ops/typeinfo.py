"""``gt.finfo``, ``gt.iinfo`` and ``gt.Size``: dtype limits and shapes as PyTorch code asks."""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt._dtype import dtype


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating-point dtype: ``eps``, ``max``, ``min``, ``tiny``, ``resolution``."""

    def __init__(self, dtype: Any = None):
        info = np.finfo(np.dtype(S.canonical_dtype(dtype)))
        self.dtype = S.canonical_dtype(dtype)
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = float(info.tiny)
        self.smallest_normal = float(info.tiny)
        self.resolution = float(info.resolution)

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``max``, ``min``."""

    def __init__(self, dtype: Any):
        info = np.iinfo(np.dtype(S.canonical_dtype(dtype)))
        self.dtype = S.canonical_dtype(dtype)
        self.bits, self.max, self.min = info.bits, int(info.max), int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class Size(tuple):
    """A shape (a tuple of ints), as ``torch.Size``."""

    def numel(self) -> int:
        """Product of the sizes."""
        return S.prod(self)

    def __repr__(self) -> str:
        return f"gt.Size({list(self)})"


def get_default_dtype() -> str:
    """The dtype of floating-point factories without ``dtype=`` (``gt.float32`` unless
    :func:`gt.set_default_dtype` changed it)."""
    return dtype(S.DEFAULT_FLOAT)


__all__ = ["Size", "finfo", "get_default_dtype", "iinfo"]
