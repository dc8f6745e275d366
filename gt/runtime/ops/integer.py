"""Registry entries: bitwise ops on integer (and bool) tensors.

``bitwise_and``/``or``/``xor``/``not`` are NumPy's and CuPy's ufuncs of the same names. The client
(:mod:`gt.ops.bitwise`) has already promoted both operands to one integer or bool dtype, and wrapped
a Python-int operand into that dtype's range (``int8 & 255`` is ``int8 & -1``, as in PyTorch), so
an immediate always fits the array's dtype and neither NumPy nor CuPy promotes the result.

Shifts follow PyTorch, not C: a shift by a negative amount or by at least the dtype's width gives
0 for ``<<``, and for ``>>`` the sign fill (``-1`` or ``0``) of a signed value or 0 of an unsigned
one. NumPy and CuPy leave those cases to the hardware (x86 takes the amount modulo the width), so
the kernels mask them. None of these ops is differentiable.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, first_dtype, same_shape
from gt.runtime.ops.elementwise import _binary_kernel, _unary_kernel, broadcast_rule


def _as_array(xp: Any, v: Any, dtype: Any) -> Any:
    """An immediate (a Python int already in ``dtype``'s range) as a 0-d array of ``dtype``."""
    return v if hasattr(v, "dtype") else xp.full((), v, dtype=dtype)


def _k_shift(left: bool) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp

        def h(v: list, at: Any) -> Any:
            a, b = v
            dtype = (a if hasattr(a, "dtype") else b).dtype
            bits = dtype.itemsize * 8
            signed = dtype.kind == "i"
            if not hasattr(b, "dtype") and hasattr(a, "dtype"):  # x << 3: the usual case
                if 0 <= b < bits:
                    fn = xp.left_shift if left else xp.right_shift
                    return fn(a, b).astype(dtype, copy=False)
                if left or not signed:
                    return xp.zeros(a.shape, dtype=dtype)
                return xp.right_shift(a, bits - 1).astype(dtype, copy=False)
            a, b = _as_array(xp, a, dtype), _as_array(xp, b, dtype)
            bad = (b < 0) | (b >= bits)  # PyTorch's out-of-range shift amounts
            zero = xp.zeros((), dtype=dtype)
            if left or not signed:
                fn = xp.left_shift if left else xp.right_shift
                r = fn(a, xp.where(bad, zero, b).astype(dtype, copy=False))
                return xp.where(bad, zero, r).astype(dtype, copy=False)
            fill = xp.full((), bits - 1, dtype=dtype)  # >> width-1: the sign fill of a signed value
            return xp.right_shift(a, xp.where(bad, fill, b).astype(dtype, copy=False)).astype(
                dtype, copy=False
            )

        return h

    return make


def _bitwise(name: str, code: int, ufunc: str, doc: str) -> Op:
    return Op(name, code, arity=2, shape=broadcast_rule(name), dtype=first_dtype,
              kernel=_binary_kernel(ufunc), shard="elementwise", doc=doc)  # fmt: skip


def _shift(name: str, code: int, left: bool, doc: str) -> Op:
    return Op(name, code, arity=2, shape=broadcast_rule(name), dtype=first_dtype,
              kernel=_k_shift(left), shard="elementwise", doc=doc)  # fmt: skip


ENTRIES: list[Op] = [
    _bitwise("bitwise_and", 84, "bitwise_and", "a & b of integer or bool tensors"),
    _bitwise("bitwise_or", 85, "bitwise_or", "a | b of integer or bool tensors"),
    _bitwise("bitwise_xor", 86, "bitwise_xor", "a ^ b of integer or bool tensors"),
    Op(
        "bitwise_not",
        87,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_unary_kernel("invert"),
        shard="elementwise",
        doc="~x of an integer or bool tensor",
    ),
    _shift("bitwise_left_shift", 88, True, "a << b of integers (0 past the width, as PyTorch)"),
    _shift("bitwise_right_shift", 89, False, "a >> b of integers (sign fill past the width)"),
]
