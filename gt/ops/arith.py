"""Elementwise arithmetic, comparisons, bitwise ops, math functions and activations (a
:class:`Tensor` mixin).

Operators go through ``Tensor._binary`` / ``_unary``, which queue one primitive each; the bitwise
ones (``&``, ``|``, ``^``, ``~``, ``<<``, ``>>``) through :mod:`gt.ops.bitwise`. Activations
that are not primitives (``gelu``, ``silu``, ``softplus``, ...) are compositions of primitives, so
their gradients come from the primitives' derivative rules.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.errors import DtypeError, ShapeError
from gt.grad_graph import label
from gt.ops import bitwise
from gt.ops.base import TensorBase
from gt.ops.fused import one_instruction_each_way
from gt.ops.scaled import scaled_add, wire_alpha
from gt.runtime import ops as O
from gt.runtime.ops.base import real_float
from gt.runtime.ops.gelu import gelu_grad
from gt.runtime.ops.integer_rules import DIV_FLOOR

if TYPE_CHECKING:
    from gt.tensor import Tensor

_OP = O.OPCODE
_ADD, _SUB, _MUL, _DIV, _POW = _OP["add"], _OP["sub"], _OP["mul"], _OP["div"], _OP["pow"]
_LT, _LE, _GT, _GE, _EQ, _NE = _OP["lt"], _OP["le"], _OP["gt"], _OP["ge"], _OP["eq"], _OP["ne"]
_SQRT1_2 = 1.0 / math.sqrt(2.0)


def _truth(v: Any) -> Any:
    """A bool tensor (or bool) saying where ``v`` is nonzero, for the logical ops (which, unlike
    the bitwise ones, look only at truth values)."""
    if isinstance(v, TensorBase):
        return v if v.dtype == "bool" else v != 0
    return bool(v)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool)) or isinstance(v, numbers.Number)


def legacy_number_first(name: str, number: Any, tensor: Any) -> bool:
    """Whether ``x.<name>(number, tensor, ...)`` is the deprecated overload that puts the scale
    first (``p.data.add_(-lr, d_p)``, ``exp_avg_sq.addcmul_(1 - beta2, g, g)``, as DARTS' and
    older optimizers' code writes it; the number may be a 0-d tensor, as DARTS' ``R``), which
    PyTorch still accepts with a warning."""
    is_number = _is_scalar(number) or (isinstance(number, TensorBase) and number.dim() == 0)
    if not (is_number and isinstance(tensor, TensorBase)):
        return False
    warnings.warn(
        f"This overload of {name} is deprecated: put the tensor first and the number as "
        f"{'alpha' if name.startswith(('add', 'sub')) else 'value'}=",
        UserWarning,
        stacklevel=3,
    )
    return True


class ArithmeticOps:
    """Elementwise ops of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ operators
    def __add__(self, o: Any) -> Tensor:
        return self._binary(_ADD, o, "add")

    def __radd__(self, o: Any) -> Tensor:
        return self._binary(_ADD, o, "add", reflected=True)

    def __sub__(self, o: Any) -> Tensor:
        return self._binary(_SUB, o, "sub")

    def __rsub__(self, o: Any) -> Tensor:
        return self._binary(_SUB, o, "sub", reflected=True)

    def __mul__(self, o: Any) -> Tensor:
        return self._binary(_MUL, o, "mul")

    def __rmul__(self, o: Any) -> Tensor:
        return self._binary(_MUL, o, "mul", reflected=True)

    def __truediv__(self, o: Any) -> Tensor:
        return self._binary(_DIV, o, "div", true_div=True)

    def __rtruediv__(self, o: Any) -> Tensor:
        # PyTorch's ``number / tensor`` is ``tensor.reciprocal() * number`` (``Tensor.__rdiv__``):
        # rounded twice, which code that rounds to integers shows (255 / 252.0 is 1.0119048 there,
        # 1.0119047 correctly rounded). ``1 / x`` is the reciprocal itself.
        if isinstance(o, TensorBase) or (type(o) in (int, float) and o == 1):
            return self._binary(_DIV, o, "div", reflected=True, true_div=True)
        return self.reciprocal() * o

    def __pow__(self, o: Any) -> Tensor:
        if isinstance(o, int) and not isinstance(o, bool) and o < 0 and self.dtype in S.INT_DTYPES:
            raise RuntimeError(
                f"pow: integers to negative integer powers are not allowed (tensor of dtype {self.dtype} ** {o})"
            )
        if self.dtype == "bool" and (isinstance(o, bool) or getattr(o, "dtype", None) == "bool"):
            if not isinstance(o, bool):
                raise NotImplementedError("\"pow\" not implemented for 'Bool'")
            return self | (not o)  # (x ** True is x, x ** False is True: a bool tensor still)
        return self._binary(_POW, o, "pow")

    def __rpow__(self, o: Any) -> Tensor:
        return self._binary(_POW, o, "pow", reflected=True)

    def __floordiv__(self, o: Any) -> Tensor:
        return self._binary(_OP["floor_divide"], o, "floor_divide")

    def __rfloordiv__(self, o: Any) -> Tensor:
        return self._binary(_OP["floor_divide"], o, "floor_divide", reflected=True)

    def __mod__(self, o: Any) -> Tensor:
        return self._binary(_OP["remainder"], o, "remainder")

    def __rmod__(self, o: Any) -> Tensor:
        return self._binary(_OP["remainder"], o, "remainder", reflected=True)

    def __neg__(self) -> Tensor:
        if self.dtype == "bool":
            raise DtypeError(
                "neg: negation, the `-` operator, on a bool tensor is not supported; use `~` or logical_not()"
            )
        return self._unary("neg")

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self.abs()

    def __lt__(self, o: Any) -> Tensor:
        return self._compare(_LT, o, "lt")

    def __le__(self, o: Any) -> Tensor:
        return self._compare(_LE, o, "le")

    def __gt__(self, o: Any) -> Tensor:
        return self._compare(_GT, o, "gt")

    def __ge__(self, o: Any) -> Tensor:
        return self._compare(_GE, o, "ge")

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(_EQ, o, "eq")

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return self._compare(_NE, o, "ne")

    # Bitwise operators: integer and bool tensors (see gt.ops.bitwise for the promotion rules).
    def __and__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_and")

    def __rand__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_and", reflected=True)

    def __or__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_or")

    def __ror__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_or", reflected=True)

    def __xor__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_xor")

    def __rxor__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_xor", reflected=True)

    def __lshift__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_left_shift")

    def __rlshift__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_left_shift", reflected=True)

    def __rshift__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_right_shift")

    def __rrshift__(self, o: Any) -> Tensor:
        return bitwise.binary(self, o, "bitwise_right_shift", reflected=True)

    def __invert__(self) -> Tensor:
        return bitwise.invert(self)

    def bitwise_and(self, other: Any) -> Tensor:
        """Elementwise ``self & other`` of integer or bool tensors (logical and for bools)."""
        return bitwise.binary(self, other, "bitwise_and")

    def bitwise_or(self, other: Any) -> Tensor:
        """Elementwise ``self | other`` of integer or bool tensors (logical or for bools)."""
        return bitwise.binary(self, other, "bitwise_or")

    def bitwise_xor(self, other: Any) -> Tensor:
        """Elementwise ``self ^ other`` of integer or bool tensors (logical xor for bools)."""
        return bitwise.binary(self, other, "bitwise_xor")

    def bitwise_not(self) -> Tensor:
        """Elementwise ``~self`` of an integer or bool tensor (logical not for bools)."""
        return bitwise.invert(self)

    def bitwise_left_shift(self, other: Any) -> Tensor:
        """Elementwise ``self << other`` of integers (shifts past the width give 0, as PyTorch)."""
        return bitwise.binary(self, other, "bitwise_left_shift")

    def bitwise_right_shift(self, other: Any) -> Tensor:
        """Elementwise ``self >> other`` of integers (arithmetic for signed dtypes)."""
        return bitwise.binary(self, other, "bitwise_right_shift")

    # ------------------------------------------------------------------ named arithmetic
    def add(self, other: Any, alpha: Any = 1) -> Tensor:
        """``self + alpha * other`` (also the deprecated ``add(alpha, other)``)."""
        if legacy_number_first("add", other, alpha):
            other, alpha = alpha * other, 1
        if scaled_add(self, other, alpha):
            return self._apply("add_scaled", [self, other], {"alpha": wire_alpha(self, alpha)})
        return self + (other if alpha == 1 else alpha_times(self, other, alpha))

    def sub(self, other: Any, alpha: Any = 1) -> Tensor:
        """``self - alpha * other`` (also the deprecated ``sub(alpha, other)``)."""
        if legacy_number_first("sub", other, alpha):
            other, alpha = alpha * other, 1
        if scaled_add(self, other, alpha):  # a - alpha*b == a + (-alpha)*b, bit for bit
            return label(self._apply("add_scaled", [self, other], {"alpha": -wire_alpha(self, alpha)}),
                         "SubBackward0")  # fmt: skip
        return self - (other if alpha == 1 else alpha_times(self, other, alpha))

    def mul(self, other: Any) -> Tensor:
        """``self * other``."""
        return self * other

    def div(self, other: Any, rounding_mode: str | None = None) -> Tensor:
        """``self / other``; ``rounding_mode="floor"`` rounds down (``//``), ``"trunc"`` toward
        zero."""
        if rounding_mode is None:
            return self / other
        if rounding_mode == "floor":
            out = self // other
            if out._node is not None:  # (unlike floor_divide's, its derivative is zero)
                out._node.attrs = dict(DIV_FLOOR)
                out._node.label = "DivBackward2"
            return out
        if rounding_mode == "trunc":
            return self.divide(other, rounding_mode="trunc")
        raise ValueError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"'{rounding_mode}'"
        )

    def true_divide(self, other: Any) -> Tensor:
        """``self / other``."""
        return self / other

    def pow(self, exponent: Any) -> Tensor:
        """``self ** exponent``."""
        return self**exponent

    def neg(self) -> Tensor:
        """``-self``."""
        return -self

    def square(self) -> Tensor:
        """``self * self`` (of bools, an int64 result, as PyTorch's ``pow(x, 2)``)."""
        x = self.to("int64") if self.dtype == "bool" else self
        return label(x * x, "PowBackward0")

    def reciprocal(self) -> Tensor:
        """``1 / self``."""
        return label(1.0 / self, "ReciprocalBackward0")

    def eq(self, other: Any) -> Tensor:
        """Elementwise ``==``."""
        return self == other

    def ne(self, other: Any) -> Tensor:
        """Elementwise ``!=``."""
        return self != other

    def lt(self, other: Any) -> Tensor:
        """Elementwise ``<``."""
        return self < other

    def le(self, other: Any) -> Tensor:
        """Elementwise ``<=``."""
        return self <= other

    def gt(self, other: Any) -> Tensor:
        """Elementwise ``>``."""
        return self > other

    def ge(self, other: Any) -> Tensor:
        """Elementwise ``>=``."""
        return self >= other

    def logical_not(self) -> Tensor:
        """Elementwise not (the result is bool)."""
        return self._apply("logical_not", [self])

    def logical_and(self, other: Any) -> Tensor:
        """Elementwise and of the truth values (nonzero) of ``self`` and ``o`` (a bool result)."""
        return _truth(self) & _truth(other)

    def logical_or(self, other: Any) -> Tensor:
        """Elementwise or of the truth values (nonzero) of ``self`` and ``o`` (a bool result)."""
        return _truth(self) | _truth(other)

    def logical_xor(self, other: Any) -> Tensor:
        """Elementwise xor of the truth values (nonzero) of ``self`` and ``o`` (a bool result)."""
        return _truth(self) ^ _truth(other)

    # ------------------------------------------------------------------ math
    def abs(self) -> Tensor:
        """Elementwise absolute value (the modulus, a real tensor, for complex ones)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return self._apply("abs", [self])
        return self._unary("abs")

    def sign(self) -> Tensor:
        """Elementwise sign (-1, 0 or 1; its gradient is zero)."""
        return self._apply("sign", [self])

    def exp(self) -> Tensor:
        """Elementwise exponential."""
        return self._unary("exp", True)

    def log(self) -> Tensor:
        """Elementwise natural logarithm."""
        return self._unary("log", True)

    def log1p(self) -> Tensor:
        """Elementwise ``log(1 + self)``, exact for tiny values."""
        return self._unary("log1p", True)

    def expm1(self) -> Tensor:
        """Elementwise ``exp(self) - 1``, exact for tiny values."""
        return self._unary("expm1", True)

    def sqrt(self) -> Tensor:
        """Elementwise square root."""
        return self._unary("sqrt", True)

    def rsqrt(self) -> Tensor:
        """Elementwise ``1 / sqrt(self)``."""
        return label(1.0 / self.sqrt(), "RsqrtBackward0")

    def sin(self) -> Tensor:
        """Elementwise sine."""
        return self._unary("sin", True)

    def cos(self) -> Tensor:
        """Elementwise cosine."""
        return self._unary("cos", True)

    def erf(self) -> Tensor:
        """Elementwise error function."""
        return self._unary("erf", True)

    # ------------------------------------------------------------------ activations
    def tanh(self) -> Tensor:
        """Elementwise hyperbolic tangent."""
        return self._unary("tanh", True)

    def sigmoid(self) -> Tensor:
        """Elementwise logistic sigmoid."""
        return self._unary("sigmoid", True)

    def relu(self) -> Tensor:
        """Elementwise ``max(self, 0)``."""
        return self._unary("relu")

    def gelu(self, approximate: str = "none") -> Tensor:
        """Gaussian error linear unit: ``x * Phi(x)`` (``approximate="tanh"``: PyTorch's tanh form);
        half tensors in float32, rounded once, as PyTorch's kernel."""
        if self.dtype in ("float16", "bfloat16"):
            return label(self.float().gelu(approximate).to(self.dtype), "GeluBackward0")
        if approximate == "none":
            if self.dtype in ("float32", "float64"):
                # one instruction each way (PyTorch's CPU formula: gt.runtime.ops.gelu)
                out = one_instruction_each_way(self, "gelu", None, "gelu_backward", gelu_grad)
                return label(out, "GeluBackward0")
            return label(self * 0.5 * (1.0 + (self * _SQRT1_2).erf()), "GeluBackward0")
        if approximate == "tanh":
            k = math.sqrt(2.0 / math.pi)
            out = self * 0.5 * (1.0 + (k * (self + 0.044715 * self * self * self)).tanh())
            return label(out, "GeluBackward0")
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")

    def silu(self) -> Tensor:
        """``x * sigmoid(x)`` (half tensors in float32, rounded once)."""
        if self.dtype in ("float16", "bfloat16"):
            return label(self.float().silu().to(self.dtype), "SiluBackward0")
        return label(self * self.sigmoid(), "SiluBackward0")

    def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
        """``log(1 + exp(beta * x)) / beta`` (``x`` itself where ``beta * x > threshold``), without
        overflow; its derivative is ``sigmoid(beta * x)`` everywhere, 0 included."""
        x = real_float(self, "softplus")
        attrs = (
            None
            if beta == 1 and threshold == 20
            else {"beta": float(beta), "threshold": float(threshold)}
        )
        return x._apply("softplus", [x], attrs)

    # ------------------------------------------------------------------ selection
    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - PyTorch's names
        """Limit values to ``[min, max]`` (either bound may be None, a number or a tensor)."""
        if min is None and max is None:
            raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
        if self.dtype in S.COMPLEX_DTYPES:
            raise TypeError("clamp is not supported for complex tensors")
        if not (min is None or _is_scalar(min)) or not (max is None or _is_scalar(max)):
            return label(self._clamp_tensors(min, max), "ClampBackward0")
        dtype = self.dtype
        for b in (min, max):
            if b is not None:
                dtype = S.promote_scalar(dtype, b)
        x = self.to(dtype)
        lo, hi = (
            None
            if b is None
            else (float(b) if dtype in S.FLOAT_DTYPES else S.fill_int(int(b), dtype))
            for b in (min, max)
        )
        return x._apply("clip", [x, lo, hi])

    clip = clamp

    def _clamp_tensors(self, min: Any, max: Any) -> Tensor:  # noqa: A002
        """``clamp`` with a tensor bound, with PyTorch's gradients: all of it to ``self`` where it
        lies within the bounds (ties included), to ``min`` where ``self`` is below it (and
        ``min < max``), to ``max`` where ``self`` is above it (or ``max < min``); none through a
        NaN. The value is ``minimum(maximum(self, min), max)``'s (NaN propagates)."""
        value = self
        if min is not None:
            value = value.maximum(min)
        if max is not None:
            value = value.minimum(max)
        value = value.detach()
        if max is None:
            return where(self >= min, self, where(self < min, min, value))
        if min is None:
            return where(self <= max, self, where(self > max, max, value))
        inside = (self >= min) & (self <= max)
        below = (self < min) & (min < max)
        above = (self > max) | (max < min)
        return where(inside, self, where(below, min, where(above, max, value)))

    def clamp_min(self, min: Any) -> Tensor:  # noqa: A002
        """``clamp(min=min)``."""
        return label(self.clamp(min=min), "ClampMinBackward0")

    def clamp_max(self, max: Any) -> Tensor:  # noqa: A002
        """``clamp(max=max)``."""
        return label(self.clamp(max=max), "ClampMaxBackward0")

    def maximum(self, other: Any) -> Tensor:
        """Elementwise maximum (ties split the gradient evenly)."""
        return self._binary(_OP["maximum"], other, "maximum")

    def minimum(self, other: Any) -> Tensor:
        """Elementwise minimum (ties split the gradient evenly)."""
        return self._binary(_OP["minimum"], other, "minimum")

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        """``value`` where the bool ``mask`` is true, else ``self`` (the two broadcast together,
        as in PyTorch; ``masked_fill_`` needs a mask that broadcasts to this shape)."""
        if isinstance(value, float) and not math.isfinite(value) and self.dtype in S.INT_DTYPES:
            raise RuntimeError(
                f"value cannot be converted to type {_C_TYPES.get(self.dtype, self.dtype)} "
                "without overflow"
            )
        out = where(mask, value, self)
        return label(out.to(self.dtype), "MaskedFillBackward0")

    def tril(self, diagonal: int = 0) -> Tensor:
        """Zero the elements above the ``diagonal``-th diagonal of the last two dimensions."""
        return self._triangle(diagonal, lower=True)

    def triu(self, diagonal: int = 0) -> Tensor:
        """Zero the elements below the ``diagonal``-th diagonal of the last two dimensions."""
        return self._triangle(diagonal, lower=False)

    def _triangle(self, k: int, lower: bool) -> Tensor:
        if len(self.shape) < 2:
            raise ShapeError(
                f"{'tril' if lower else 'triu'}: input must have at least 2 dimensions, got shape {list(self.shape)}"
            )
        rows, cols = self.shape[-2:]
        diff = self._arange(cols).reshape(1, cols) - self._arange(rows).reshape(rows, 1)
        keep = diff <= k if lower else diff >= k
        out = where(keep, self, 0 if self.dtype not in S.FLOAT_DTYPES else 0.0).to(self.dtype)
        return label(out, "TrilBackward0" if lower else "TriuBackward0")

    def where(self, condition: Tensor, other: Any) -> Tensor:
        """``self`` where ``condition`` holds, else ``other``."""
        return where(condition, self, other)


def alpha_times(x: Tensor, other: Any, alpha: Any) -> Any:
    """``alpha * other``, the term of ``x + alpha * other`` (``add``, ``sub``, ``addcmul``'s
    value), as PyTorch computes it: ``other`` first in the sum's dtype (``add(f16, int64,
    alpha=1.5)`` stays float16), and an int ``alpha`` as that dtype takes it (a bool for bools,
    checked to fit an integer dtype)."""
    if isinstance(other, TensorBase):
        dtype = S.promote_operands(x.dtype, x.ndim, other.dtype, other.ndim)
        if other.dtype != dtype and dtype not in S.COMPLEX_DTYPES:
            other = other.to(dtype)
    elif isinstance(other, (int, float, bool)):
        dtype = S.promote_scalar(x.dtype, other)
    else:
        return other * alpha
    if type(alpha) is int:
        if dtype == "bool":
            alpha = bool(alpha)
        elif dtype in S.INT_RANGE:
            S.fill_int(alpha, dtype)
    return other * alpha


#: How PyTorch's messages name the integer dtypes (their C types).
_C_TYPES = {"int64": "int64_t", "int32": "int", "int16": "int16_t", "int8": "int8_t",
            "uint8": "uint8_t"}  # fmt: skip


def where(condition: Tensor, input: Any, other: Any) -> Tensor:  # noqa: A002 - PyTorch's names
    """Pick from ``input`` where ``condition`` is true and from ``other`` elsewhere, broadcasting.

    Args:
        condition: a bool tensor.
        input: a tensor or a number.
        other: a tensor or a number.

    Raises:
        TypeError: ``condition`` is not a bool tensor.
        ShapeError: the three shapes do not broadcast.
    """
    if not isinstance(condition, TensorBase) or condition.dtype != "bool":
        got = condition.dtype if isinstance(condition, TensorBase) else type(condition).__name__
        raise TypeError(f"where: expected condition to be a bool tensor, but got {got}")
    tensors = [v for v in (input, other) if isinstance(v, TensorBase)]
    shape = condition.shape
    for t in tensors:
        shape = S.broadcast(shape, t.shape, "where")
    if len(tensors) == 2:
        dtype = S.promote_operands(input.dtype, input.ndim, other.dtype, other.ndim)
    elif len(tensors) == 1:
        t = tensors[0]
        s = other if t is input else input
        dtype = S.promote_scalar(t.dtype, s)
    elif all(isinstance(v, (bool, np.bool_)) for v in (input, other)):
        dtype = "bool"  # where(c, True, False)
    elif any(isinstance(v, complex) for v in (input, other)):
        dtype = S.complex_of(S.DEFAULT_FLOAT)
    else:
        dtype = S.DEFAULT_FLOAT if any(isinstance(v, float) for v in (input, other)) else "int64"
    inputs: list = [condition]
    for v in (input, other):
        if isinstance(v, TensorBase):
            inputs.append(v.to(dtype))
        elif isinstance(v, complex):  # (complex numbers travel as 0-d tensors)
            inputs.append(condition._upload(np.array(v, dtype=dtype)))
        elif dtype in S.COMPLEX_DTYPES:
            inputs.append(float(v))
        else:
            inputs.append(
                float(v)
                if dtype in S.FLOAT_DTYPES
                else (bool(v) if dtype == "bool" else S.fill_int(int(v), dtype))
            )
    return condition._apply("where", inputs, {"dtype": dtype}, shape=shape)
