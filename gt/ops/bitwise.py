"""Bitwise ops on the client: ``&``, ``|``, ``^``, ``~``, ``<<``, ``>>`` and their named forms.

The operators of :class:`gt.Tensor` (:mod:`gt.ops.arith`) call :func:`binary` and :func:`invert`,
which promote the operands as PyTorch does and queue one primitive of
:mod:`gt.runtime.ops.integer`. Rules, as in PyTorch:

* integer and bool tensors only; a float operand raises ``TypeError`` naming the op;
* a Python int keeps the tensor's dtype (``int8_tensor & 3`` is int8) and is wrapped into its
  range first (``int8_tensor & 255`` is ``& -1``); with a bool tensor it makes int64;
* two tensors promote as for arithmetic (``uint8 & int8`` is int16, as in PyTorch);
* ``bool & bool`` (and ``|``, ``^``, ``~``) stay the logical ops GT always used for them, so their
  results and instructions are unchanged; shifts are not defined for bool (``bool << 1`` is an
  int64 shift, since the int promotes it).

None of these is differentiable (integer results carry no gradient).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.ops.base import TensorBase
from gt.ops.conversion import host_array
from gt.runtime import ops as O

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: Binary bitwise ops, and for the three that have one, the bool op GT used before (opcode, name).
_LOGICAL = {
    "bitwise_and": (O.OPCODE["mul"], "logical_and"),
    "bitwise_or": (O.OPCODE["add"], "logical_or"),
    "bitwise_xor": (O.OPCODE["ne"], "logical_xor"),
}
SHIFTS = ("bitwise_left_shift", "bitwise_right_shift")


def check_dtype(name: str, dtype: str) -> None:
    """Raise ``TypeError`` unless ``name`` is defined for ``dtype`` (integers; bool but shifts)."""
    if dtype in S.INT_DTYPES or (dtype == "bool" and name not in SHIFTS):
        return
    kinds = "integer tensors" if name in SHIFTS else "integer and bool tensors"
    raise TypeError(f'{name}: "{name}" is not implemented for {dtype} (it takes {kinds})')


def _is_int_scalar(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_)) or isinstance(v, numbers.Integral)


def binary(x: Tensor, other: Any, name: str, reflected: bool = False) -> Tensor:
    """Queue ``x <name> other`` (``other <name> x`` if ``reflected``) for a bitwise primitive.

    Args:
        x: the tensor the operator was called on.
        other: a tensor, a NumPy array or a Python (or NumPy) int or bool.
        name: ``bitwise_and``, ``bitwise_or``, ``bitwise_xor`` or one of :data:`SHIFTS`.
        reflected: ``other`` is the left operand (``3 << x``).

    Returns:
        The result, or ``NotImplemented`` for an operand type it does not know (so Python can try
        the other operand's reflected operator).

    Raises:
        TypeError: an operand is a float tensor or number.
        ShapeError: the shapes do not broadcast.
    """
    if isinstance(other, np.ndarray):
        other = x._upload(host_array(other))
    if isinstance(other, TensorBase):
        if other._conn is not x._conn:
            raise ValueError(f"{name}: tensors belong to different GT connections")
        dtype = S.promote_operands(x.dtype, x.ndim, other.dtype, other.ndim)
        check_dtype(name, dtype)  # (a float operand makes a float dtype; bool << int is int)
        if dtype == "bool" and name in _LOGICAL:
            opcode, logical = _LOGICAL[name]
            return x._compare(opcode, other, logical)
        a, b = x.to(dtype), other.to(dtype)
        return x._apply(name, [b, a] if reflected else [a, b], grad=False)
    if _is_int_scalar(other):
        dtype = S.promote_scalar(x.dtype, bool(other) if isinstance(other, np.bool_) else other)
        check_dtype(name, dtype)
        if dtype == "bool":  # (and, or, xor: check_dtype refused bool shifts)
            opcode, logical = _LOGICAL[name]
            return x._compare(opcode, bool(other), logical)
        a = x.to(dtype)
        imm = bool(other) if dtype == "bool" else S.wrap_int(int(other), dtype)
        return x._apply(name, [imm, a] if reflected else [a, imm], grad=False)
    if isinstance(other, numbers.Number):  # a float (or complex) number
        check_dtype(name, x.dtype)
        raise TypeError(f'{name}: "{name}" is not implemented for {type(other).__name__} operands')
    return NotImplemented


def invert(x: Tensor) -> Tensor:
    """``~x``: bitwise not of an integer tensor, logical not of a bool one."""
    if x.dtype == "bool":
        return x.logical_not()
    check_dtype("bitwise_not", x.dtype)
    return x._apply("bitwise_not", [x], grad=False)
