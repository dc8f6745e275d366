"""``gt.autograd.Variable``, PyTorch's legacy wrapper, as old code still writes it
(``Variable(grid) + flow``, ``Variable(x, requires_grad=True)``).

Since PyTorch 0.4 a Variable is a tensor: calling ``Variable(t)`` gives a new leaf that shares
``t``'s data (``t.detach()``) with the ``requires_grad`` asked for, and every tensor is an instance
of ``Variable``. ``volatile`` is accepted and ignored, as in PyTorch.
"""

from __future__ import annotations

import warnings
from typing import Any

from gt.tensor import Tensor


class _VariableMeta(type):
    def __call__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with gt.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)  # fmt: skip
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor)

    def __subclasscheck__(cls, sub: type) -> bool:
        return isinstance(sub, type) and issubclass(sub, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(tensor, requires_grad=False)``: the tensor's data as a new leaf (see module)."""


__all__ = ["Variable"]
