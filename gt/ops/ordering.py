"""Sorting, products and rotations along a dimension (a :class:`Tensor` mixin).

``argsort``, ``prod`` and ``cumprod`` are primitives; ``sort``, ``topk``, ``median`` and
``kthvalue`` take ``argsort``'s indices and ``gather`` the values, so gradients go to the picked
elements as in PyTorch; so do ``quantile`` and ``nanquantile`` (:mod:`gt.ops.quantile`). ``roll``
is two slices joined.
"""

from __future__ import annotations

import operator
from collections import namedtuple
from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt.custom_function import Function
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.grad_mode import is_grad_enabled
from gt.ops.arith import where
from gt.ops.functions import numpy_names
from gt.ops.quantile import quantile
from gt.ops.random import random_attrs
from gt.ops.shaping import cat
from gt.runtime.ops import return_types

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: What ``sort``, ``topk``, ``median(dim)`` and ``kthvalue`` return, as in PyTorch.
SortResult = namedtuple("SortResult", ["values", "indices"])


class _EvenlyDistributed(Function):
    """A reduction's value whose gradient is split evenly among the input's elements equal to it
    (the NaN ones when it is NaN), as PyTorch's ``median()``, ``nanmedian()``, ``max()`` and
    ``min()`` (over all elements) backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, value: Tensor) -> Tensor:
        ctx.save_for_backward(x, value)
        return value

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        x, value = ctx.saved_tensors
        mask = ((x == value) | ((x != x) & (value != value))).to(g.dtype)
        return g * mask / mask.sum(), None


class _Median(_EvenlyDistributed):
    """(Named for its ``grad_fn``.)"""


class _Nanmedian(_EvenlyDistributed):
    """(Named for its ``grad_fn``.)"""


class _Max(_EvenlyDistributed):
    """(Named for its ``grad_fn``.)"""


class _Min(_EvenlyDistributed):
    """(Named for its ``grad_fn``.)"""


_EVENLY = {"median": _Median, "nanmedian": _Nanmedian, "max": _Max, "min": _Min}


def evenly_distributed(x: Tensor, value: Tensor, name: str = "median") -> Tensor:
    """``value`` (0-d, computed from ``x`` by reduction ``name``) with
    :class:`_EvenlyDistributed`'s gradient."""
    if not (x.requires_grad and is_grad_enabled()):
        return value
    return _EVENLY[name].apply(x, value.detach())


def _check_multinomial(p: Tensor, num_samples: int, replacement: bool) -> None:
    """PyTorch's refusals of ``multinomial`` that need no values: the dtype, the number of
    dimensions and the sample count, with PyTorch's messages."""
    if not p.is_floating_point():
        raise RuntimeError(
            "multinomial only supports floating-point dtypes for input, got: "
            + S.SCALAR_NAMES.get(str.__str__(p.dtype), str(p.dtype))
        )
    if p.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )


class OrderingOps:
    """Sorting, products and ``roll`` of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ sorting
    @numpy_names
    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        """Indices that sort ``self`` along ``dim`` (stable; NaN counts as the largest value)."""
        if self.ndim == 0:
            return self._apply("argsort", [self], {"axis": 0, "descending": bool(descending)})
        ax = S.normalize_axis(dim, self.ndim, "argsort")
        return self._apply("argsort", [self], {"axis": ax, "descending": bool(descending)})

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False, *,
             axis: int | None = None) -> SortResult:  # fmt: skip
        """``(values, indices)`` sorted along ``dim`` (``axis``, PyTorch's alias); gradients go
        back to the sorted elements."""
        if axis is not None:
            dim = axis
        idx = self.argsort(dim, descending)
        if self.ndim == 0:
            return return_types.sort(self, idx)
        return return_types.sort(label(self.gather(dim, idx), "SortBackward0"), idx)

    def msort(self) -> Tensor:
        """Values sorted along the first dimension."""
        return self.sort(0).values

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> SortResult:  # noqa: A002
        """The ``k`` largest (or smallest) values along ``dim`` with their indices, in order."""
        if self.ndim == 0:
            if k > 1:
                raise RuntimeError("topk: selected index k out of range")
            return return_types.topk(*self.sort())
        ax = S.normalize_axis(dim, self.ndim, "topk")
        n = self.shape[ax]
        if not 0 <= k <= n:
            raise RuntimeError(
                f"topk: selected index k ({k}) out of range for dimension {ax} of size {n}"
            )
        idx = self._order_window(ax, 0, k, largest)
        return return_types.topk(label(self.gather(ax, idx), "TopkBackward0"), idx)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> SortResult:
        """The ``k``-th smallest value along ``dim`` (1-based) and its index."""
        ax = S.normalize_axis(dim, max(self.ndim, 1), "kthvalue")
        values, indices = self._pick_sorted(k - 1, ax, keepdim)
        if values is not self:
            label(values, "KthvalueBackward0")
        return return_types.kthvalue(values, indices)

    @numpy_names
    def median(self, dim: Any = None, keepdim: bool = False) -> Any:
        """The lower median; with ``dim``, ``(values, indices)`` as in PyTorch. A slice that holds
        a NaN has the median NaN (its index the first NaN's). The gradient of ``median()`` over
        all elements is split evenly among the elements equal to it, as PyTorch's."""
        if dim is None:
            flat = self.reshape(-1)
            if flat.shape[0] == 0:
                return flat.sum() * float("nan")
            return evenly_distributed(self, flat._median_pick(0, False).values)
        ax = S.normalize_axis(dim, max(self.ndim, 1), "median")
        out = self._median_pick(ax, keepdim)
        if out.values is not self:
            label(out.values, "MedianBackward1")
        return return_types.median(*out)

    def _median_pick(self, ax: int, keepdim: bool) -> SortResult:
        if self.ndim == 0 or self.shape[ax] == 0 or self.dtype not in S.INEXACT_DTYPES:
            return self._pick_sorted((max(self.shape[ax] if self.ndim else 1, 1) - 1) // 2, ax,
                                     keepdim)  # fmt: skip
        n = self.shape[ax]
        nan = self != self
        # NaN sorts last: a row that holds one has the first NaN, else the middle of the order
        idx = where(nan.any(ax, keepdim=True), nan.to("int8").argmax(ax, keepdim=True),
                    self._order_window(ax, (n - 1) // 2, 1, False))  # fmt: skip
        values = self.gather(ax, idx)
        if not keepdim:
            values, idx = values.squeeze(ax), idx.squeeze(ax)
        return SortResult(values, idx)

    def _order_window(self, ax: int, start: int, k: int, descending: bool) -> Tensor:
        """``argsort(ax, descending)`` at positions ``[start, start + k)`` only (a tensor of its
        own, as PyTorch's ``topk`` indices are)."""
        attrs = {"axis": ax, "descending": bool(descending), "start": start, "k": k}
        return self._apply("argsort", [self], attrs)

    def _pick_sorted(self, k: int, ax: int, keepdim: bool) -> SortResult:
        if self.ndim == 0:
            return SortResult(self, self.argsort())
        n = self.shape[ax]
        if not 0 <= k < n:
            raise RuntimeError(f"kthvalue: k ({k + 1}) out of range for dimension of size {n}")
        idx = self._order_window(ax, k, 1, False)
        values = self.gather(ax, idx)
        if not keepdim:
            values, idx = values.squeeze(ax), idx.squeeze(ax)
        return SortResult(values, idx)

    # ------------------------------------------------------------------ quantiles
    @numpy_names
    def quantile(self, q: Any, dim: Any = None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> Tensor:  # fmt: skip
        """The ``q``-th quantiles over ``dim`` (all elements if None); ``q`` a float or a 1-d
        tensor (its dimension comes first); differentiable (see :mod:`gt.ops.quantile`)."""
        out = quantile(self, q, dim, keepdim, interpolation=interpolation)
        return out if out is self else label(out, "SqueezeBackward4")  # (PyTorch's last step)

    @numpy_names
    def nanquantile(self, q: Any, dim: Any = None, keepdim: bool = False, *,
                    interpolation: str = "linear") -> Tensor:  # fmt: skip
        """:meth:`quantile` that ignores NaN values (NaN only where a slice is all NaN)."""
        out = quantile(self, q, dim, keepdim, interpolation=interpolation, ignore_nan=True)
        return out if out is self else label(out, "SqueezeBackward4")

    # ------------------------------------------------------------------ sampling
    def multinomial(
        self, num_samples: int, replacement: bool = False, *, generator: Any = None
    ) -> Tensor:
        """Draw ``num_samples`` category indices per row from the weights in the last dimension.

        With replacement: inverse CDF of uniform draws. Without: the Gumbel top-k trick (the
        ``num_samples`` largest ``log(p) + Gumbel noise``). Runs on the workers, no sync point.
        """
        _check_multinomial(self, num_samples, replacement)
        n = self.shape[-1]
        p = self.to("float32") if self.dtype != "float64" else self
        # (negative, inf or NaN entries and rows summing to 0 are refused on the worker: they are
        # values, so the error comes at the next sync point, with no round trip here)
        p = p._apply("multinomial_probs", [p])
        lead = self.shape[:-1]
        if replacement:
            u = self._create("rand", [], random_attrs(lead + (num_samples,), p.dtype, generator))
            cdf = p.cumsum(-1)
            idx = (u.unsqueeze(-1) >= cdf.unsqueeze(-2)).sum(-1)
            return idx.clamp(max=n - 1)
        u = self._create("rand", [], random_attrs(lead + (n,), p.dtype, generator))
        gumbel = -((-(u.clamp(min=1e-20)).log()).log())
        return (p.log() + gumbel).topk(num_samples, -1).indices

    # ------------------------------------------------------------------ products
    @numpy_names
    def prod(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Product over ``dim`` (one dimension, or all); the gradient is exact where factors are 0."""
        x = self if dtype is None else self.to(dtype)
        if dim is None:
            attrs: Any = {"axis": None, "keepdims": bool(keepdim)} if keepdim else None
        else:
            dim = S.as_index(dim)
            if not isinstance(dim, int):
                raise TypeError(f"prod: dim must be an int, not {type(dim).__name__}")
            ax = S.normalize_axis(dim, max(x.ndim, 1), "prod")
            attrs = {"axis": ax if x.ndim else None, "keepdims": bool(keepdim)}
        out = x._apply("prod", [x], attrs)
        # (with dtype=, the product stays in it: int64 products cast down wrap as int16 ones do)
        return out.to(x.dtype) if dtype is not None and out.dtype != x.dtype else out

    @numpy_names
    def cumprod(self, dim: int, *, dtype: Any = None) -> Tensor:
        """Running products along ``dim`` (integers multiply in int64, as in PyTorch)."""
        x = self if dtype is None else self.to(dtype)
        if x.ndim == 0:
            out = x._apply("cumprod", [x.reshape(1)], {"axis": 0}).reshape(())
        else:
            out = x._apply("cumprod", [x], {"axis": S.normalize_axis(dim, x.ndim, "cumprod")})
        return out.to(x.dtype) if dtype is not None and out.dtype != x.dtype else out

    # ------------------------------------------------------------------ rotation
    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        """Rotate elements by ``shifts`` along ``dims`` (the flattened tensor when None)."""
        shifts, dims = (operator.index(v) if getattr(v, "ndim", None) == 0 else v
                        for v in (shifts, dims))  # fmt: skip
        if dims is None:
            if not isinstance(shifts, int):
                (shifts,) = shifts
            out = self.reshape(-1).roll(shifts, 0).reshape(self.shape)
            return label(out, "RollBackward0")
        shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if len(shifts) != len(dims):
            raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
        out = self
        for s, d in zip(shifts, dims):
            ax = S.normalize_axis(d, self.ndim, "roll")
            n = self.shape[ax]
            s = s % n if n else 0
            if s:
                out = cat([out.narrow(ax, n - s, s), out.narrow(ax, 0, n - s)], ax)
        if out is self:  # (a whole turn: still a copy, as PyTorch's)
            out = self.clone()
        return label(out, "RollBackward0")
