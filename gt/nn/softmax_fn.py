"""``softmax``, ``log_softmax`` and ``softmin`` as ``torch.nn.functional``'s: a ``dim`` of
``None`` (or none) is PyTorch's deprecated implicit choice, with its warning; ``_stacklevel`` is
PyTorch's third positional parameter."""

from __future__ import annotations

import warnings
from typing import Any

from gt.ops.autocast import autocast_op
from gt.tensor import Tensor


def _implicit_dim(name: str, input: Tensor, dim: int | None, stacklevel: int) -> int:
    """``dim``, or PyTorch's deprecated choice when it is None (0 for 0-, 1- and 3-d inputs, else
    1), with PyTorch's warning."""
    if dim is not None:
        return dim
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
        stacklevel=stacklevel + 1,
    )
    return 0 if input.ndim in (0, 1, 3) else 1


@autocast_op("softmax")
def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """Softmax over ``dim`` (None: PyTorch's deprecated implicit choice, with its warning)."""
    d = _implicit_dim("softmax", input, dim, _stacklevel)
    return (input if dtype is None else input.to(dtype)).softmax(d)


@autocast_op("log_softmax")
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype: Any = None) -> Tensor:  # fmt: skip
    """Log-softmax over ``dim`` (None: PyTorch's deprecated implicit choice, with its warning)."""
    d = _implicit_dim("log_softmax", input, dim, _stacklevel)
    return (input if dtype is None else input.to(dtype)).log_softmax(d)


@autocast_op("softmin")
def softmin(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """Softmax of ``-x`` over ``dim`` (None: PyTorch's deprecated implicit choice)."""
    d = _implicit_dim("softmin", input, dim, _stacklevel)
    return (-(input if dtype is None else input.to(dtype))).softmax(d)


__all__ = ["log_softmax", "softmax", "softmin"]
