"""The ends of a ``linspace``/``logspace`` range, numbers or 0-d tensors: whether the range is
complex, and its complex dtype (used by :mod:`gt.factories` and :mod:`gt.torch_functions`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.tensor import Tensor

#: How PyTorch's messages name the dtypes a complex range may not be cast to.
_SCALAR = S.SCALAR_NAMES


def _value(v: Any) -> Any:
    """A Python number for a range's end (a 0-d tensor's value)."""
    return v.item() if isinstance(v, Tensor) else v


def as_complex(v: Any) -> complex:
    """A range's end (a number or a 0-d tensor) as a Python complex number."""
    return complex(_value(v))


def _is_complex(v: Any) -> bool:
    if isinstance(v, Tensor):
        return v.dtype in S.COMPLEX_DTYPES
    return isinstance(v, (complex, np.complexfloating))


def complex_dtype(start: Any, end: Any, dtype: Any, op: str) -> str | None:
    """The complex dtype of ``linspace``/``logspace`` (``op``) from ``start`` to ``end``: the one
    asked for, or the default float's complex dtype for a complex end (``None``: a real range).

    Raises:
        RuntimeError: complex ends and a real ``dtype``, with PyTorch's message.
    """
    ends = _is_complex(start) or _is_complex(end)
    asked = None if dtype is None else S.canonical_dtype(dtype)
    if asked in S.COMPLEX_DTYPES:
        return asked
    if not ends:
        return None
    inferred = S.complex_of(S.canonical_dtype(None))
    if asked is not None:
        part = "double" if inferred == "complex128" else "float"
        raise RuntimeError(f"torch.{op}(): inferred dtype c10::complex<{part}> can't be safely "
                           f"cast to passed dtype {_SCALAR.get(asked, asked)}")  # fmt: skip
    return inferred
