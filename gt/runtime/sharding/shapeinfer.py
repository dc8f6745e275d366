"""Result shapes, dtypes and sizes of primitive instructions, as the dispatcher's planner sees them.

The client already knows every shape, but only the ids travel on the wire; the planner needs the
shapes to split tensors, so it infers them again from the inputs' shapes and the attributes, with
the op registry's rules (the same ones the client used). Any instruction it cannot read (a
malformed one, an op it does not know) gets shape ``None``, which the planner treats as "keep it on
one worker": the worker reports the real error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt import shapes as S
from gt.runtime import ops as O

Shape = tuple[int, ...]

ITEMSIZE = {
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "complex64": 8,
    "complex128": 16,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
}


def _op(code: Any) -> O.Op | None:
    return O.REGISTRY[code] if type(code) is int and 0 <= code < len(O.REGISTRY) else None


def infer(code: int, args: list, attrs: Any, shapes: Any) -> Shape | None:
    """The result shape of one instruction, or ``None`` when it cannot be known here.

    Args:
        shapes: ``shapes.get(tensor_id)`` gives a known tensor's shape (or ``None``).
    """
    op = _op(code)
    if op is None or op.shape is None:
        return None
    ins = [shapes.get(a) if type(a) is int else () for a in args]
    if any(s is None for s in ins):
        return None
    try:
        return tuple(op.shape(ins, attrs))
    except Exception:  # a malformed or failing instruction: the worker will say what is wrong
        return None


def infer_dtype(code: int, args: list, attrs: Any, dtype_of: Callable[[int], str | None]) -> str:
    """The result dtype as far as the planner cares (for byte counts); a best guess."""
    op = _op(code)
    dtypes = [dtype_of(a) if type(a) is int else None for a in args]
    try:
        if op is not None and op.dtype is not None:
            return op.dtype(dtypes, attrs)
    except Exception:
        pass
    return next((d for d in dtypes if d is not None), "float32")


def nbytes(shape: Shape | None, dtype: str) -> int:
    """Bytes of a tensor (0 when the shape is unknown)."""
    return 0 if shape is None else S.prod(shape) * ITEMSIZE.get(dtype, 4)
