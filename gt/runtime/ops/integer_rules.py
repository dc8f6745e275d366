"""PyTorch's integer rules that NumPy's and CuPy's arithmetic kernels do not share: an integer
divided by zero raises (on NumPy workers, as PyTorch's CPU kernels), an integer to a negative
integer power is 0 (but for 1 and -1), and ``div(rounding_mode="floor")`` has a zero derivative
where ``floor_divide`` has none. Wrappers of :mod:`.elementwise`'s kernels and derivatives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def zero_divisor_checked(make_kernel: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A binary kernel that refuses an integer divisor holding a zero on NumPy, as PyTorch's CPU
    kernels do (NumPy would give 0 and a warning). On CuPy it is left to the kernel, as PyTorch's
    CUDA kernels leave it: a check there would wait for the device."""

    def make(be: Any) -> Any:
        h = make_kernel(be)
        if be.name == "cupy":
            return h

        def checked(v: list, at: Any) -> Any:
            b = v[1]
            kind = getattr(getattr(b, "dtype", None), "kind", "")
            if (kind in "iu" and kind and not b.all()) or (type(b) is int and b == 0):
                raise ZeroDivisionError("integer division by zero")
            return h(v, at)

        return checked

    return make


def _integer_pow(make_kernel: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``power`` that takes an integer base to negative integer exponents as PyTorch does: 1 and
    -1 give 1 and +-1, every other base 0 (NumPy raises). On NumPy only when an exponent is
    negative; on CuPy always (asking would wait for the device)."""

    def make(be: Any) -> Any:
        h, xp, ask = make_kernel(be), be.xp, be.name != "cupy"

        def k(v: list, at: Any) -> Any:
            a, b = v[0], v[1]
            if getattr(getattr(b, "dtype", None), "kind", "") != "i" or not (
                type(a) is int or getattr(getattr(a, "dtype", None), "kind", "") in ("i", "u")
            ):
                return h(v, at)
            neg = b < 0
            if ask and not neg.any():
                return h(v, at)
            r = h([a, xp.where(neg, 0, b)], None)
            odd = (b % 2).astype(bool)
            small = xp.where(xp.asarray(a) == 1, 1, xp.where(xp.asarray(a) == -1, 1 - 2 * odd, 0))
            return xp.where(neg, small, r).astype(r.dtype, copy=False)

        return k

    return make


def _d_floor_divide(n: Any, g: Any) -> tuple:
    """PyTorch records ``floor_divide`` with a ``NotImplemented`` node: backward raises; but
    ``div(rounding_mode="floor")`` (recorded with attrs ``{"rounding": "floor"}``) has a zero
    derivative."""
    if n.attrs == DIV_FLOOR:
        return tuple([g.new_zeros(s) if n.needs(i) else None for i, s in enumerate(n.shapes)])
    raise RuntimeError("derivative for aten::floor_divide is not implemented")


#: The attrs of a ``floor_divide`` node that ``div(rounding_mode="floor")`` recorded.
DIV_FLOOR = {"rounding": "floor"}
