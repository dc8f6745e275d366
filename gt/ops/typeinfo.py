"""``gt.finfo``, ``gt.iinfo`` and ``gt.Size``: dtype limits and shapes as PyTorch code asks."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from gt import shapes as S
from gt._dtype import dtype

#: bfloat16's limits (NumPy has no bfloat16 without ml_dtypes): 8 exponent bits, 7 mantissa bits.
_BFLOAT16 = {"bits": 16, "eps": 2.0**-7, "max": (2 - 2.0**-7) * 2.0**127, "tiny": 2.0**-126,
             "precision": 2}  # fmt: skip


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating-point dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (=
    ``smallest_normal``), ``resolution``; a complex dtype gives its real parts' limits."""

    def __init__(self, dtype: Any = None):
        name = S.canonical_dtype(dtype)
        if name not in S.INEXACT_DTYPES:  # (PyTorch's words)
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo "
                            "to handle 'torch.finfo'")  # fmt: skip
        if name == "bfloat16":
            info = _BFLOAT16
        else:
            f = np.finfo(np.dtype(name))
            name = f.dtype.name  # complex64 -> float32, as PyTorch's
            info = {"bits": f.bits, "eps": float(f.eps), "max": float(f.max),
                    "tiny": float(f.smallest_normal), "precision": int(f.precision)}  # fmt: skip
        self.dtype = name
        self.bits = info["bits"]
        self.eps = info["eps"]
        self.max = info["max"]
        self.min = -info["max"]
        self.tiny = self.smallest_normal = info["tiny"]
        self.resolution = 10.0 ** -info["precision"]

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``max``, ``min``."""

    def __init__(self, dtype: Any):
        info = np.iinfo(np.dtype(S.canonical_dtype(dtype)))
        self.dtype = S.canonical_dtype(dtype)
        self.bits, self.max, self.min = info.bits, int(info.max), int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def _size_item(d: Any) -> int:
    """One size as an int (``operator.index``), PyTorch's TypeError for anything else."""
    try:
        return operator.index(d)  # (an integer tensor of one element too: its __index__)
    except TypeError:
        raise TypeError(
            f"gt.Size() takes an iterable of 'int' (an item is '{type(d).__name__}')"
        ) from None


class Size(tuple):
    """A shape (a tuple of ints), as ``torch.Size``: a slice of it, and it joined with a tuple or
    repeated, is a ``Size`` too."""

    __slots__ = ()

    def __new__(cls, sizes: Any = ()) -> Size:
        t = tuple.__new__(cls, sizes)
        for d in t:
            if d.__class__ is not int:  # (NumPy integers, 0-d or one-element integer tensors)
                return tuple.__new__(cls, map(_size_item, t))
        return t

    def numel(self) -> int:
        """Product of the sizes."""
        return S.prod(self)

    def __getitem__(self, key: Any) -> Any:
        item = tuple.__getitem__(self, key)
        return Size(item) if key.__class__ is slice else item

    def __add__(self, other: Any) -> Any:
        joined = tuple.__add__(self, other)
        return joined if joined is NotImplemented else Size(joined)

    def __radd__(self, other: Any) -> Any:
        return Size(tuple(other) + tuple(self)) if isinstance(other, tuple) else NotImplemented

    def __mul__(self, n: Any) -> Any:
        repeated = tuple.__mul__(self, n)
        return repeated if repeated is NotImplemented else Size(repeated)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"gt.Size({list(self)})"


def get_default_dtype() -> str:
    """The dtype of floating-point factories without ``dtype=`` (``gt.float32`` unless
    :func:`gt.set_default_dtype` changed it)."""
    return dtype(S.DEFAULT_FLOAT)


__all__ = ["Size", "finfo", "get_default_dtype", "iinfo"]
