"""More elementwise math, predicates and small products (a :class:`Tensor` mixin).

Rounding (``floor``, ``ceil``, ``round``, ``trunc``) is a primitive each, with PyTorch's zero
derivative; everything else here is composed: ``lerp``/``addcmul``/``addcdiv`` (what hand-written
optimizers and EMA updates use), ``isclose``/``allclose``/``equal``, ``isnan``/``isinf``,
``outer``/``dot``/``diag``/``trace``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.ops import layout, views
from gt.ops.arith import alpha_times, legacy_number_first, where
from gt.ops.base import TensorBase, as_float, in_float32

if TYPE_CHECKING:
    from gt.tensor import Tensor

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


class MathOps:
    """Rounding, predicates, interpolation and small products of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ rounding
    def _rounding(self, name: str, attrs: Any = None) -> Tensor:
        if self.dtype in S.COMPLEX_DTYPES:
            raise TypeError(f"{name} is not supported for complex tensors")
        if self.dtype not in S.FLOAT_DTYPES:
            return self  # integers are already whole, as in PyTorch
        return self._apply(name, [self], attrs)

    def floor(self) -> Tensor:
        """Round down, elementwise (zero gradient)."""
        return self._rounding("floor")

    def ceil(self) -> Tensor:
        """Round up, elementwise (zero gradient)."""
        return self._rounding("ceil")

    def round(self, decimals: int = 0) -> Tensor:
        """Round half to even (to ``decimals`` places), elementwise (zero gradient)."""
        return self._rounding("round", {"decimals": int(decimals)} if decimals else None)

    def trunc(self) -> Tensor:
        """Round toward zero, elementwise (zero gradient)."""
        return self._rounding("trunc")

    fix = trunc

    def frac(self) -> Tensor:
        """The fractional part ``x - trunc(x)`` (gradient 1)."""
        return label(self - self.trunc(), "FracBackward0")

    # ------------------------------------------------------------------ more math
    def log2(self) -> Tensor:
        """Elementwise base-2 logarithm (``log2(8)`` is 3 exactly)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return label(self.log() * (1.0 / _LN2), "Log2Backward0")
        return as_float(self)._apply("log2", [as_float(self)])

    def log10(self) -> Tensor:
        """Elementwise base-10 logarithm (``log10(1000)`` is 3 exactly)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return label(self.log() * (1.0 / _LN10), "Log10Backward0")
        return as_float(self)._apply("log10", [as_float(self)])

    def exp2(self) -> Tensor:
        """Elementwise ``2 ** x`` (``exp2(3)`` is 8 exactly)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return label((self * _LN2).exp(), "Exp2Backward0")
        return as_float(self)._apply("exp2", [as_float(self)])

    def sinh(self) -> Tensor:
        """Elementwise hyperbolic sine (tiny values and -0.0 kept, no early overflow)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return (self.exp() - (-self).exp()) * 0.5
        return as_float(self)._apply("sinh", [as_float(self)])

    def cosh(self) -> Tensor:
        """Elementwise hyperbolic cosine (no early overflow)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return (self.exp() + (-self).exp()) * 0.5
        return as_float(self)._apply("cosh", [as_float(self)])

    def tan(self) -> Tensor:
        """Elementwise tangent."""
        return self.sin() / self.cos()

    def logaddexp(self, other: Any) -> Tensor:
        """``log(exp(self) + exp(other))`` without overflow."""
        if self.dtype == "bool":  # (bools are subtracted below: as floats, as PyTorch's kernel)
            return self.to(S.DEFAULT_FLOAT).logaddexp(other)
        if isinstance(other, TensorBase) and other.dtype == "bool":
            other = other.to(self.dtype if self.dtype in S.FLOAT_DTYPES else S.DEFAULT_FLOAT)
        m = self.maximum(other).detach()
        m = m.masked_fill(m.isinf(), 0.0)  # two -inf give -inf, an inf gives inf (not NaN)
        return label(m + ((self - m).exp() + (other - m).exp()).log(), "LogaddexpBackward0")

    def logit(self, eps: float | None = None) -> Tensor:
        """``log(p / (1 - p))`` (``p`` clamped to ``[eps, 1 - eps]`` when given)."""
        x = as_float(self)  # (1 - p of a uint8 p would wrap)
        p = x if eps is None else x.clamp(eps, 1.0 - eps)
        return label(p.log() - (-p).log1p(), "LogitBackward0")

    # ------------------------------------------------------------------ predicates
    def isnan(self) -> Tensor:
        """Where the value is NaN (bool)."""
        return self != self

    def isinf(self) -> Tensor:
        """Where the value is +inf or -inf (bool)."""
        if self.dtype not in S.INEXACT_DTYPES:
            return self != self
        return self.abs() == math.inf

    def isfinite(self) -> Tensor:
        """Where the value is neither NaN nor infinite (bool)."""
        if self.dtype not in S.INEXACT_DTYPES:
            return self == self
        return self.abs() < math.inf

    def isclose(
        self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
    ) -> Tensor:
        """``|self - other| <= atol + rtol * |other|`` elementwise (infinities equal themselves;
        integers and bools compared exactly, their difference taken without wrapping)."""
        if self.dtype == "bool" or self.dtype in S.INT_DTYPES:
            if isinstance(other, TensorBase) and (
                other.dtype == "bool" or other.dtype in S.INT_DTYPES
            ):
                if rtol == 0 and atol == 0:
                    return self == other
                a, b = self.to("float64"), other.to("float64")
                return (a - b).abs() <= atol + rtol * b.abs()
        other_abs = other.abs() if isinstance(other, TensorBase) else abs(other)
        err = (self - other).abs()
        # an infinite error is never within tolerance (inf vs -inf: inf <= atol + rtol * inf)
        close = ((err <= atol + rtol * other_abs) & err.isfinite()) | (self == other)
        if equal_nan:
            other_nan = other.isnan() if isinstance(other, TensorBase) else other != other
            close = close | (self.isnan() & other_nan)
        return close

    def allclose(
        self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
    ) -> bool:
        """Whether every element is close to ``other`` (a sync point)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

    def equal(self, other: Tensor) -> bool:
        """Whether ``other`` has the same shape and values (a sync point)."""
        if tuple(self.shape) != tuple(other.shape):
            return False
        return bool((self == other).all().item())

    # ------------------------------------------------------------------ interpolation
    def lerp(self, end: Any, weight: Any) -> Tensor:
        """``self + weight * (end - self)``, from the nearer end as PyTorch's kernels compute it:
        ``end - (end - self) * (1 - weight)`` once ``|weight| >= 0.5`` (the two round
        differently, and only that one gives ``lerp(inf, 0, 0.5) = inf``)."""
        # (half precision: in float32, rounded once, as PyTorch's kernel computes it)
        if _is_number(weight):
            return label(in_float32(_lerp_number, self, end, weight), "LerpBackward0")
        return label(in_float32(_lerp_tensor, self, end, weight), "LerpBackward1")

    def addcmul(self, tensor1: Tensor, tensor2: Tensor, value: float = 1) -> Tensor:
        """``self + value * tensor1 * tensor2`` (also the deprecated ``addcmul(value, t1, t2)``)."""
        if legacy_number_first("addcmul", tensor1, value):
            tensor1, tensor2, value = tensor2 * tensor1, value, 1
        return label(in_float32(_addcmul, self, tensor1, tensor2, value), "AddcmulBackward0")

    def addcdiv(self, tensor1: Tensor, tensor2: Tensor, value: float = 1) -> Tensor:
        """``self + value * tensor1 / tensor2`` (also the deprecated ``addcdiv(value, t1, t2)``)."""
        if legacy_number_first("addcdiv", tensor1, value):
            tensor1, tensor2, value = tensor2 * tensor1, value, 1
        return label(in_float32(_addcdiv, self, tensor1, tensor2, value), "AddcdivBackward0")

    def addmm(self, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
        """``beta * self + alpha * (mat1 @ mat2)`` (half precision: in float32, rounded once)."""
        return label(in_float32(_addmm, self, mat1, mat2, beta, alpha), "AddmmBackward0")

    # ------------------------------------------------------------------ small products
    def outer(self, other: Tensor) -> Tensor:
        """Outer product of two vectors."""
        if self.ndim != 1 or other.ndim != 1:
            raise ShapeError(
                f"outer: expected two 1-d tensors, got shapes {list(self.shape)} and {list(other.shape)}"
            )
        return self.reshape(-1, 1) * other.reshape(1, -1)

    ger = outer

    def dot(self, other: Tensor) -> Tensor:
        """Inner product of two vectors."""
        if self.ndim != 1 or other.ndim != 1:
            raise ShapeError(
                f"dot: 1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors"
            )
        out = (self * other).sum()
        if out.dtype != self.dtype and self.dtype == other.dtype:  # (int8 dot int8 is int8)
            out = out.to(self.dtype)
        return label(out, "DotBackward0")

    def diag(self, diagonal: int = 0) -> Tensor:
        """A vector's diagonal matrix, or a matrix's ``diagonal``-th diagonal."""
        if self.ndim == 1:
            n = self.shape[0] + abs(diagonal)
            out = self.new_zeros(n, n)
            rows = [i + max(0, -diagonal) for i in range(self.shape[0])]
            cols = [i + max(0, diagonal) for i in range(self.shape[0])]
            out[rows, cols] = self
            return label(out, "DiagEmbedBackward0")
        if self.ndim != 2:
            raise ShapeError(f"diag: expected a 1-d or 2-d tensor, got shape {list(self.shape)}")
        out = self._diagonal(diagonal, 0, 1)  # (a copy, as PyTorch's diag of a matrix is)
        return label(out, "DiagonalBackward0_copy")  # (PyTorch's name, diagonal_copy's node)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The ``offset``-th diagonal over ``dim1`` and ``dim2`` (as the last dimension); a view,
        as in PyTorch: ``a.diagonal().add_(eps)`` changes ``a`` (see :mod:`gt.ops.views`)."""
        d1 = S.normalize_axis(dim1, self.ndim, "diagonal")
        d2 = S.normalize_axis(dim2, self.ndim, "diagonal")
        out = self._diagonal(offset, d1, d2)
        if out is not self:
            label(out, "DiagonalBackward0")
        if out.numel():
            views.link(self, out, "diag", (offset, d1, d2))
            layout.viewed(self, out, "diag", (offset, d1, d2))
        return out

    def _diagonal(self, offset: int, dim1: int, dim2: int) -> Tensor:
        d1 = S.normalize_axis(dim1, self.ndim, "diagonal")
        d2 = S.normalize_axis(dim2, self.ndim, "diagonal")
        rest = [i for i in range(self.ndim) if i not in (d1, d2)]
        x = self.permute(*rest, d1, d2)
        r0, c0 = max(0, -offset), max(0, offset)
        n = max(0, min(x.shape[-2] - r0, x.shape[-1] - c0))
        rows = list(range(r0, r0 + n))
        cols = list(range(c0, c0 + n))
        lead = (slice(None),) * len(rest)
        if not n:
            return x.reshape(*x.shape[:-2], -1)[lead + (slice(0, 0),)]
        return x[lead + (rows, cols)]

    def trace(self) -> Tensor:
        """Sum of a matrix's diagonal."""
        if self.ndim != 2:
            raise ShapeError(f"trace: expected a matrix, got shape {list(self.shape)}")
        return label(self._diagonal(0, 0, 1).sum(), "TraceBackward0")


def _is_number(x: Any) -> bool:
    return not isinstance(x, TensorBase)


def where_or_nonzero(condition: Tensor, input: Any = None, other: Any = None) -> Any:  # noqa: A002
    """``gt.where(cond, a, b)``; ``gt.where(cond)`` alone is ``cond.nonzero(as_tuple=True)``."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    return where(condition, input, other)


def _addmm(x: Tensor, mat1: Tensor, mat2: Tensor, beta: Any, alpha: Any) -> Tensor:
    prod = mat1 @ mat2
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:  # (``x`` is not read, as in PyTorch: its NaN and inf do not reach the result)
        return prod
    return (x if beta == 1 else x * beta) + prod


# (the composites of lerp, addcmul and addcdiv: in_float32 runs them on float32 copies of half
# precision operands and rounds once)
def _lerp_number(x: Tensor, end: Any, weight: float) -> Tensor:
    diff = end - x
    wide = np.float64 if x.dtype == "float64" else np.float32  # (PyTorch's opmath)
    w = wide(weight)
    return x + diff * float(w) if abs(w) < 0.5 else end - diff * float(wide(1) - w)


def lerp_term(x: Tensor, end: Any, weight: float) -> Any:
    """What ``lerp`` with a number ``weight`` below 0.5 in magnitude adds to ``x`` (an
    exponential moving average's update), rounded as :func:`_lerp_number` rounds it; ``None``
    for a larger weight, which lerp computes from ``end``."""
    wide = np.float64 if x.dtype == "float64" else np.float32
    w = wide(weight)
    return (end - x) * float(w) if abs(w) < 0.5 else None


def _lerp_tensor(x: Tensor, end: Any, weight: Tensor) -> Tensor:
    diff = end - x
    return where(weight.abs() < 0.5, x + diff * weight, end - diff * (1 - weight))


def addcmul_term(x: Tensor, tensor1: Any, tensor2: Any, value: Any) -> Any:
    """What ``addcmul`` adds to ``x``: ``value * tensor1 * tensor2``, rounded as it rounds it."""
    prod = tensor1 * tensor2
    return prod if value == 1 else alpha_times(x, prod, value)


def addcdiv_term(x: Tensor, tensor1: Any, tensor2: Any, value: Any) -> Any:
    """What ``addcdiv`` adds to ``x``: ``value * tensor1 / tensor2``, rounded as it rounds it."""
    q = tensor1 / tensor2
    return q if value == 1 else q * value


def _addcmul(x: Tensor, tensor1: Any, tensor2: Any, value: Any) -> Tensor:
    return x + addcmul_term(x, tensor1, tensor2, value)


def _addcdiv(x: Tensor, tensor1: Any, tensor2: Any, value: Any) -> Tensor:
    return x + addcdiv_term(x, tensor1, tensor2, value)
