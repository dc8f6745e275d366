"""PyTorch's legacy typed constructors: ``gt.FloatTensor([[1, 2]])``, ``gt.LongTensor(3)``,
``isinstance(x, gt.FloatTensor)`` (true for a float32 tensor), and ``x.type()`` naming them.

They are not classes of their own in GT: calling one makes an ordinary :class:`gt.Tensor` of its
dtype (from data, from sizes, or empty), and ``isinstance`` compares the dtype, as PyTorch's
``torch.FloatTensor`` does for CPU tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt._dtype import TYPED, dtype_of_type_name, type_name
from gt.factories import tensor as _tensor
from gt.factories import zeros
from gt.ops.typeinfo import Size
from gt.tensor import Tensor


class _TypedMeta(type):
    dtype: str

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __repr__(cls) -> str:
        return f"<class 'gt.{cls.__name__}'>"


def _make(dtype: str, args: tuple) -> Tensor:
    if not args:
        return zeros(0, dtype=dtype)
    first = args[0]
    if isinstance(first, Size) or all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                       for a in args):  # fmt: skip
        sizes = tuple(first) if isinstance(first, Size) else tuple(int(a) for a in args)
        return zeros(*sizes, dtype=dtype)  # PyTorch leaves them uninitialised
    if len(args) != 1:
        raise TypeError("a typed tensor constructor takes data, or sizes as integers")
    if isinstance(first, Tensor):
        return first.to(dtype)
    return _tensor(first, dtype=dtype)


def _typed(name: str, dtype: str) -> type:
    def new(cls: type, *args: Any, device: Any = None) -> Tensor:
        return _make(dtype, args)

    doc = f"``gt.{name}(data)`` or ``gt.{name}(*sizes)``: a {dtype} tensor (PyTorch's legacy form)."
    return _TypedMeta(name, (), {"__new__": new, "__doc__": doc, "dtype": dtype})


globals().update({name: _typed(name, dtype) for name, dtype in TYPED.items()})

__all__ = [*TYPED, "dtype_of_type_name", "type_name"]
