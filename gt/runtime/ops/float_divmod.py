"""Floor division and remainder of floating-point numbers as NumPy and PyTorch's CPU compute them.

CuPy computes a float ``a // b`` as ``floor(a / b)``, and its remainder from that. When ``a / b``
rounds up to a whole number the two disagree with NumPy and PyTorch: ``-0.9 // 0.3`` is ``-3.0``
on CuPy and ``-4.0`` on the CPU (whose ``a % b`` is then ``0.3``, not ``-5.6e-17``). NumPy's
``npy_divmod`` (and PyTorch's ``div_floor_floating``) start from the exact ``fmod`` instead, so
quotient and remainder always satisfy ``a == q * b + r`` as closely as the format allows. The same
steps, with CuPy's elementwise functions, give CuPy workers the CPU's results.
"""

from __future__ import annotations

from typing import Any


def _operands(xp: Any, a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Both as arrays of one float dtype (half precision computed in float32, as NumPy does),
    and the dtype of the result."""
    arrays = [x for x in (a, b) if hasattr(x, "dtype")]
    out = xp.result_type(*arrays, *[x for x in (a, b) if not hasattr(x, "dtype")])
    work = xp.float32 if xp.dtype(out).itemsize < 4 else out
    # (a Python float becomes the result's dtype first, as NumPy rounds it)
    return xp.asarray(a, dtype=out).astype(work), xp.asarray(b, dtype=out).astype(work), out


def floor_divmod(xp: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """``(a // b, a % b)`` for floating-point ``a``, ``b`` (arrays or scalars), NumPy's way."""
    a, b, out = _operands(xp, a, b)
    mod = xp.fmod(a, b)
    div = (a - mod) / b
    shift = (mod != 0) & ((b < 0) != (mod < 0))  # the remainder takes the divisor's sign
    mod = xp.where(shift, mod + b, mod)
    div = xp.where(shift, div - 1, div)
    mod = xp.where(mod == 0, xp.copysign(xp.zeros_like(mod), b), mod)
    q = xp.floor(div)
    q = xp.where(div - q > 0.5, q + 1, q)  # (div is a whole number up to rounding)
    with_zero = xp.where(div == 0, xp.copysign(xp.zeros_like(q), a / b), q)
    q = xp.where(b == 0, a / b, with_zero)  # division by zero: inf or nan, as a / b
    return q.astype(out, copy=False), mod.astype(out, copy=False)


def is_float(x: Any) -> bool:
    """Whether ``x`` is a floating-point array or a Python float."""
    dt = getattr(x, "dtype", None)
    return type(x) is float if dt is None else dt.kind == "f" or str(dt) == "bfloat16"
