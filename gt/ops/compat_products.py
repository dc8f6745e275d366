"""PyTorch's product methods composed from GT's primitives (a :class:`Tensor` mixin, a base of
:class:`gt.ops.compat.CompatOps`): ``addmv``, ``addr``, ``addbmm``, ``baddbmm``, ``mv``, ``vdot``,
``matrix_power``, ``logdet``. No new primitives: each derivative is what composing gives.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.ops import views
from gt.ops.arith import where
from gt.ops.base import in_float32

if TYPE_CHECKING:
    from gt.tensor import Tensor


def _scaled_sum(x: Tensor, prod: Tensor, beta: Any, alpha: Any, name: str) -> Tensor:
    """``beta * x + alpha * prod`` (``x`` is not read when ``beta == 0``, as in PyTorch)."""
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:  # (a new tensor, as PyTorch's: no view of ``prod``)
        return views.as_new(prod.expand(S.broadcast(x.shape, prod.shape, name)).clone())
    return (x if beta == 1 else x * beta) + prod


class CompatProductOps:
    """PyTorch's product methods of :class:`gt.Tensor`, composed from primitives."""

    __slots__ = ()

    # ------------------------------------------------------------------ products
    def addmv(self, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * (mat @ vec)``."""
        return label(_scaled_sum(self, mat.mv(vec), beta, alpha, "addmv"), "AddmvBackward0")

    def addr(self, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * outer(vec1, vec2)``."""
        return label(_scaled_sum(self, vec1.outer(vec2), beta, alpha, "addr"), "AddrBackward0")

    def addbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * sum_b(batch1[b] @ batch2[b])``."""
        if batch1.dtype not in ("float16", "bfloat16") or batch1.ndim != 3 or not len(batch1):
            out = _scaled_sum(self, batch1.bmm(batch2).sum(0), beta, alpha, "addbmm")
            return label(out, "AddbmmBackward0")
        # PyTorch's CPU kernel adds one product at a time into the result (each rounded once)
        out = self
        for i in range(len(batch1)):
            out = in_float32(lambda x, b1, b2, b: _scaled_sum(x, b1 @ b2, b, alpha, "addbmm"),
                             out, batch1[i], batch2[i], beta if i == 0 else 1)  # fmt: skip
        return label(out, "AddbmmBackward0")

    def baddbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * (batch1 @ batch2)``, batch by batch."""
        out = in_float32(lambda x, b1, b2: _scaled_sum(x, b1.bmm(b2), beta, alpha, "baddbmm"),
                         self, batch1, batch2)  # fmt: skip
        return label(out, "BaddbmmBackward0")

    def mv(self, vec: Tensor) -> Tensor:
        """Matrix times vector."""
        if self.ndim != 2 or vec.ndim != 1:
            raise ShapeError(f"mv: expected a matrix and a vector, got shapes {list(self.shape)} "
                             f"and {list(vec.shape)}")  # fmt: skip
        return self @ vec

    def vdot(self, other: Tensor) -> Tensor:
        """The dot product of two vectors, this one conjugated (of real ones: :meth:`dot`)."""
        return label(self.conj().dot(other), "VdotBackward0")

    def matrix_power(self, n: int) -> Tensor:
        """The square matrix (or batch) multiplied by itself ``n`` times (``n < 0``: its
        inverse's power; 0: the identity)."""
        if self.ndim < 2 or self.shape[-1] != self.shape[-2]:
            raise ShapeError(f"matrix_power: expected a batch of square matrices, got shape "
                             f"{list(self.shape)}")  # fmt: skip
        if n == 0:
            k = self.shape[-1]
            eye = self._create("eye", [], {"n": k, "m": k, "dtype": self.dtype})
            return eye.expand(self.shape) + 0 * self
        base, n, out = (self.inverse() if n < 0 else self), abs(n), None
        while True:  # square and multiply
            if n & 1:
                out = base if out is None else out @ base
            n >>= 1
            if not n:
                return out
            base = base @ base

    def logdet(self) -> Tensor:
        """``log(det(self))``: NaN for a negative determinant, -inf for a singular matrix; for
        complex matrices the complex logarithm ``log(sign) + logabsdet``."""
        sign, logabs = self.slogdet()
        if self.dtype.is_complex:
            return sign.log() + logabs
        return where(sign < 0, math.nan, logabs)
