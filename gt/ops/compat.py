"""More of PyTorch's tensor methods, composed from GT's primitives (a :class:`Tensor` mixin, and
their ``gt.<name>`` functions). No new primitives: each derivative is what composing gives.

Reductions: ``aminmax``, ``nanmedian`` and ``mode`` (no sync point: picked with ``argsort`` and
``gather``, so gradients go to the element whose index is returned), ``fmax``/``fmin``.
Splitting and flipping: ``tensor_split``, ``hsplit``/``vsplit``/``dsplit``, ``split_with_sizes``,
``fliplr``/``flipud``, ``unfold``. Indexing: ``take``, ``select``, ``index_copy``, ``index_put``,
``put``, ``masked_scatter``, ``select_scatter``/``slice_scatter``/``diagonal_scatter``,
``narrow_copy``. Products (``addmv``, ``mv``, ``matrix_power`` ...) are in
:mod:`gt.ops.compat_products`. Others: ``diagflat``, ``sum_to_size``, ``renorm``, ``mvlgamma``,
``unique_consecutive`` (a sync point). Aliases, predicates and in-place forms are in
:mod:`gt.ops.compat_inplace`; ``torch.*`` functions that are not methods (``column_stack``,
``combinations``, ``as_tensor`` ...) in :mod:`gt.ops.compat_functions`.
"""

from __future__ import annotations

import itertools
import math
from collections import namedtuple
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.grad_graph import label, labels
from gt.indexing import checked_getitem
from gt.ops import layout, views
from gt.ops import storage as storage_of
from gt.ops.arith import where
from gt.ops.base import TensorBase, zero_dim_as_one
from gt.ops.compat_inplace import CompatInplaceOps
from gt.ops.compat_products import CompatProductOps
from gt.ops.functions import method_function, numpy_names
from gt.ops.inplace import apply_inplace
from gt.ops.ordering import evenly_distributed
from gt.runtime.ops import return_types

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: What ``aminmax`` returns (PyTorch's ``torch.return_types.aminmax``).
MinMax = return_types.aminmax
#: What ``mode`` and ``nanmedian(dim)`` return.
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def _dims(args: tuple) -> tuple:
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _along(x: Tensor, d: int, n: int) -> Tensor:
    """``0 .. n-1`` (int64) laid along dim ``d`` of a tensor of ``x``'s rank."""
    return x._arange(n).reshape([n if i == d else 1 for i in range(x.ndim)])


def _part_strides(z: Any, part: Tensor) -> None:
    """``z.real``/``z.imag``: PyTorch's strides, twice the complex tensor's (a part is every
    other float of it), so ``contiguous()`` of one is a copy, not ``z``'s own value."""
    if z.ndim:  # (a 0-d part has no strides to speak of)
        part._st = tuple(2 * s for s in layout.strides_of(z))


class CompatOps(CompatProductOps, CompatInplaceOps):
    """More of PyTorch's methods of :class:`gt.Tensor`, composed from primitives."""

    __slots__ = ()

    # ------------------------------------------------------------------ complex numbers
    # (PyTorch's real/imag are views and its conj is lazy: ``real``/``imag`` are linked views here
    # (see gt.ops.views), so ``H.imag[0, 1] = -1`` or ``z.real.mul_(2)`` change the complex
    # tensor; a real tensor's real part and conjugate are the tensor itself, as in PyTorch.)
    @property
    def real(self) -> Tensor:
        """The real part, a view (a real tensor is its own real part)."""
        if self.dtype not in S.COMPLEX_DTYPES:
            return self
        out = self._apply("real", [self])
        _part_strides(self, out)
        views.link(self, out, "real", None)
        return out

    @property
    def imag(self) -> Tensor:
        """The imaginary part, a view; refused for real tensors, as PyTorch refuses it."""
        if self.dtype not in S.COMPLEX_DTYPES:
            raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
        out = self._apply("imag", [self])
        _part_strides(self, out)
        views.link(self, out, "imag", None)
        return out

    @real.setter
    def real(self, value: Any) -> None:
        """``z.real = v`` (and ``z.real += v``): ``v`` copied into the real part."""
        self._set_part("real", value)

    @imag.setter
    def imag(self, value: Any) -> None:
        """``z.imag = v`` (and ``z.imag += v``): ``v`` copied into the imaginary part."""
        self._set_part("imag", value)

    def _set_part(self, kind: str, value: Any) -> None:
        vb = getattr(value, "_vb", None)
        if vb is not None and vb[0]() is self and vb[1] == ((kind, None),):
            return  # (``z.real += v``: the in-place op has written the view into ``z`` already)
        part = getattr(self, kind)
        part.copy_(value)

    def conj(self) -> Tensor:
        """The complex conjugate (a real tensor is its own): a view, as PyTorch's lazy one is
        (``z``'s later changes reach it, and a change of it reaches ``z``, conjugated)."""
        if self.dtype not in S.COMPLEX_DTYPES:
            return self
        out = self._apply("conj", [self])
        views.link(self, out, "conj", None)
        return out

    def conj_physical(self) -> Tensor:
        """The complex conjugate, always a new tensor (not a view, unlike :meth:`conj`)."""
        return self._apply("conj", [self]) if self.dtype in S.COMPLEX_DTYPES else self.clone()

    def conj_physical_(self) -> Tensor:
        """Conjugate in place (a real tensor stays as it is)."""
        if self.dtype not in S.COMPLEX_DTYPES:
            return self
        return apply_inplace(self, "conj_physical_", lambda x: x._apply("conj", [x]))

    def resolve_conj(self) -> Tensor:
        """The tensor itself (no lazy conjugation in GT)."""
        return self

    def resolve_neg(self) -> Tensor:
        """The tensor itself (no lazy negation in GT)."""
        return self

    def is_conj(self) -> bool:
        """False: GT has no lazily conjugated tensors."""
        return False

    def isreal(self) -> Tensor:
        """Where the imaginary part is 0 (everywhere, for a real tensor)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return self.imag == 0
        return self.new_ones(self.shape, dtype="bool")

    def angle(self) -> Tensor:
        """The argument of each value: of a complex one in ``(-pi, pi]``; of a real one 0 for
        ``x >= 0`` and pi below (NaN stays NaN)."""
        if self.dtype in S.COMPLEX_DTYPES:
            return self._apply("angle", [self])
        x = self if self.dtype in S.FLOAT_DTYPES else self.to(S.DEFAULT_FLOAT)
        return where(x < 0, math.pi, where(x != x, x * 0, 0.0))  # (+0 for -0.0 and inf too)

    def bernoulli(self, p: Any = None, *, generator: Any = None) -> Tensor:
        """1 with probability ``self`` (or ``p`` when given), else 0, in this tensor's dtype."""
        from gt.ops.random import (  # noqa: PLC0415 - (a leaf of gt.ops)
            BAD_PROBABILITY,
            check_probability,
            checked_values,
            random_attrs,
        )

        if p is None or isinstance(p, TensorBase):
            prob = checked_values(self if p is None else p, "probability", BAD_PROBABILITY)
        else:
            check_probability("bernoulli_", p)
            prob = p
        u = self._create("rand", [], random_attrs(self.shape, "float64", generator))
        return (u < prob).to(self.dtype)

    # ------------------------------------------------------------------ reductions
    @numpy_names
    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> MinMax:
        """``(min, max)`` over ``dim`` (all elements when None)."""
        return MinMax(self.amin(dim, keepdim), self.amax(dim, keepdim))

    def fmax(self, other: Tensor) -> Tensor:
        """Elementwise maximum that ignores NaN (NaN only where both are); ties pick ``self``."""
        return label(where((self >= other) | (other != other), self, other), "FmaxBackward0")

    def fmin(self, other: Tensor) -> Tensor:
        """Elementwise minimum that ignores NaN (NaN only where both are); ties pick ``self``."""
        return label(where((self <= other) | (other != other), self, other), "FminBackward0")

    @numpy_names
    def nanmedian(self, dim: Any = None, keepdim: bool = False) -> Any:
        """The lower median of the values that are not NaN (NaN where all are); with ``dim``,
        ``(values, indices)`` (of an all-NaN slice: its first index; PyTorch's varies)."""
        if dim is None:
            if self.numel() == 0 and self.is_floating_point():  # (PyTorch: NaN, as median's)
                return self.new_full((), float("nan"))
            return evenly_distributed(
                self, self.reshape(-1)._nan_pick(0, False).values, "nanmedian"
            )
        out = self._nan_pick(S.normalize_axis(dim, max(self.ndim, 1), "nanmedian"), keepdim)
        return return_types.nanmedian(*out)

    def _nan_pick(self, ax: int, keepdim: bool) -> ValuesIndices:
        if self.ndim == 0:
            return ValuesIndices(self, self.new_zeros((), dtype="int64"))
        k = ((self == self).sum(ax, keepdim=True) - 1).clamp(min=0) // 2
        idx = self.argsort(ax).gather(ax, k)  # (NaN sorts last)
        values = self.gather(ax, idx)
        if not keepdim:
            values, idx = values.squeeze(ax), idx.squeeze(ax)
        return ValuesIndices(values, idx)

    @numpy_names
    def mode(self, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
        """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the
        index of its last occurrence, as PyTorch. Compares every pair: ``n^2`` per slice.

        Each NaN counts once, as a value of its own, and loses ties to numbers (PyTorch's CPU
        result with NaNs depends on how its sort happens to place them)."""
        if self.ndim == 0:
            return return_types.mode(self, self.new_zeros((), dtype="int64"))
        ax = S.normalize_axis(dim, self.ndim, "mode")
        x = self.detach() if self.dtype != "bool" else self.detach().to("uint8")
        counts = (x.unsqueeze(ax) == x.unsqueeze(ax + 1)).sum(ax + 1)
        if x.is_floating_point():
            nan = x != x
            counts = counts + nan.to(counts.dtype)
            top = (counts == counts.amax(ax, keepdim=True)) & ~nan
            value = where(top, x, float("inf")).amin(ax, keepdim=True)
            value = where(top.any(ax, keepdim=True), value, float("nan"))
            hit = (x == value) | (nan & (value != value))
        else:
            top = counts == counts.amax(ax, keepdim=True)
            value = where(top, x, x.amax(ax, keepdim=True)).amin(ax, keepdim=True)
            hit = x == value
        idx = where(hit, _along(x, ax, x.shape[ax]), -1).amax(ax, keepdim=True)
        values = self.gather(ax, idx)
        if not keepdim:
            values, idx = values.squeeze(ax), idx.squeeze(ax)
        return return_types.mode(values, idx)

    # ------------------------------------------------------------------ splitting and flipping
    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple:
        """Split along ``dim`` into ``n`` nearly equal parts (the first ``size % n`` one longer)
        or at the given indices; an int or 0-d tensor is ``n``, a list or 1-d tensor indices."""
        d = S.normalize_axis(dim, self.ndim, "tensor_split")
        size = self.shape[d]
        spec = indices_or_sections
        if isinstance(spec, TensorBase):
            spec = spec.tolist()
        elif isinstance(spec, np.integer):
            spec = int(spec)
        if isinstance(spec, int):
            if spec <= 0:
                raise ValueError(
                    f"tensor_split: number of sections must be larger than 0, got {spec}"
                )
            q, r = divmod(size, spec)
            bounds = list(itertools.accumulate([q + 1] * r + [q] * (spec - r)))[:-1]
        else:
            bounds = [int(i) for i in spec]
        lead = (slice(None),) * d
        edges = [0, *bounds, None]
        return tuple(self[lead + (slice(a, b),)] for a, b in zip(edges, edges[1:]))

    def _split_even(self, spec: Any, d: int, name: str) -> tuple:
        if isinstance(spec, int) and (spec == 0 or self.shape[d] % spec):
            raise RuntimeError(
                f"torch.{name} attempted to split along dimension {d}, but the size of the "
                f"dimension {self.shape[d]} is not divisible by the split_size {spec}!"
            )
        return self.tensor_split(spec, d)

    def hsplit(self, indices_or_sections: Any) -> tuple:
        """:meth:`tensor_split` along dim 1 (dim 0 of a 1-d tensor); sections must divide it."""
        if self.ndim < 1:
            raise ShapeError("torch.hsplit requires a tensor with at least 1 dimension, but got "
                             "a tensor with 0 dimensions!")  # fmt: skip
        return self._split_even(indices_or_sections, 1 if self.ndim > 1 else 0, "hsplit")

    def vsplit(self, indices_or_sections: Any) -> tuple:
        """:meth:`tensor_split` along dim 0 of a tensor of 2 or more dims."""
        if self.ndim < 2:
            raise ShapeError("torch.vsplit requires a tensor with at least 2 dimension, but got "
                             f"a tensor with {self.ndim} dimensions!")  # fmt: skip
        return self._split_even(indices_or_sections, 0, "vsplit")

    def dsplit(self, indices_or_sections: Any) -> tuple:
        """:meth:`tensor_split` along dim 2 of a tensor of 3 or more dims."""
        if self.ndim < 3:
            raise ShapeError("torch.dsplit requires a tensor with at least 3 dimension, but got "
                             f"a tensor with {self.ndim} dimensions!")  # fmt: skip
        return self._split_even(indices_or_sections, 2, "dsplit")

    def split_with_sizes(self, split_sizes: Any, dim: int = 0) -> tuple:
        """Split into pieces of the given sizes along ``dim`` (they must add up to its size)."""
        return self.split(list(split_sizes), dim)

    def fliplr(self) -> Tensor:
        """Columns reversed (dim 1)."""
        if self.ndim < 2:
            raise ShapeError("fliplr: Input must be >= 2-d.")
        return self.flip(1)

    def flipud(self) -> Tensor:
        """Rows reversed (dim 0)."""
        if self.ndim < 1:
            raise ShapeError("flipud: Input must be >= 1-d.")
        return self.flip(0)

    def unfold(self, dimension: int, size: int, step: int) -> Tensor:
        """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new last
        dimension (``dimension`` becomes the number of windows)."""
        if step <= 0:
            raise RuntimeError(f"unfold: step is {step} but must be > 0")
        if self.ndim == 0:
            if size > 1:
                raise RuntimeError(f"unfold: maximum size for tensor at dimension 0 is 1 but size is {size}")  # fmt: skip
            return self.reshape(1)
        d = S.normalize_axis(dimension, self.ndim, "unfold")
        n = self.shape[d]
        if not 0 <= size <= n:
            raise RuntimeError(
                f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}"
            )
        count = (n - size) // step + 1
        idx = (self._arange(count) * step).reshape(count, 1) + self._arange(size).reshape(1, size)
        out = label(self[(slice(None),) * d + (idx,)].movedim(d + 1, -1), "UnfoldBackward0")
        out._st = ("unfold", self._st, self.shape, d, step)  # PyTorch's view strides
        views.link(self, out, "unfold", (d, size, step))
        return out

    # ------------------------------------------------------------------ indexing
    def take(self, index: Tensor) -> Tensor:
        """The elements at ``index`` in the flattened tensor (negative indices count from the
        end), in ``index``'s shape."""
        return label(self.reshape(-1)[index], "TakeBackward0")

    def select(self, dim: int, index: int) -> Tensor:
        """The slice at ``index`` along ``dim``, that dimension removed."""
        d = S.normalize_axis(dim, self.ndim, "select")
        return self[(slice(None),) * d + (int(index),)]

    def as_strided(self, size: Any, stride: Any, storage_offset: int | None = None) -> Tensor:
        """The elements PyTorch's ``as_strided`` would read, gathered (a view of a contiguous
        tensor that is no view itself, see :mod:`gt.ops.views`; else a copy): the
        storage is that of the tensor this is a view of (itself if none, see
        :mod:`gt.ops.storage`), its values in the order of its strides (see :mod:`gt.ops.layout`),
        element ``i`` of the result at ``storage_offset + sum(i_k * stride[k])``; the offset and
        strides count from the storage's start, the offset by default where this tensor starts
        (a column ``x[:, 1]`` starts 1 in, its windows ``stride=(x.stride(0),) * 2`` apart)."""
        size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
        if len(size) != len(stride):
            raise RuntimeError(
                f"mismatch in length of strides and shape ({len(stride)} vs {len(size)})"
            )
        root, offset, own = storage_of.placement(self)
        if storage_offset is None:
            storage_offset = offset
        strides = root.stride()
        order = sorted(range(root.ndim), key=lambda d: -strides[d])  # outermost first
        storage = (root.permute(order) if order != sorted(order) else root).reshape(-1)
        if root is not self:  # a view: its own elements (and gradients) in the base's storage
            at = np.full(tuple(self.shape), offset, dtype=np.int64)
            for k, (n, st) in enumerate(zip(self.shape, own)):
                at = at + (np.arange(n, dtype=np.int64) * st).reshape([-1 if i == k else 1 for i in range(self.ndim)])  # fmt: skip
            key = self._upload(np.ascontiguousarray(at.reshape(-1)))
            storage = storage.detach().index_put((key,), self.reshape(-1))
        where_at = np.full(size, int(storage_offset), dtype=np.int64)
        for k, (n, st) in enumerate(zip(size, stride)):
            shape = [1] * len(size)
            shape[k] = n
            where_at = where_at + (np.arange(n, dtype=np.int64) * st).reshape(shape)
        if where_at.size and (where_at.min() < 0 or where_at.max() >= storage.shape[0]):
            raise RuntimeError(
                f"setStorage: sizes {list(size)}, strides {list(stride)} and storage offset "
                f"{storage_offset} are out of bounds for storage of {storage.shape[0]} elements"
            )
        out = storage[self._upload(np.ascontiguousarray(where_at))]
        if stride:
            out._st = stride  # (PyTorch's strides, whatever GT's copy holds)
        if root is self and self.is_contiguous():  # (its storage is its row-major order)
            views.link(self, out, "strided", (size, stride, int(storage_offset)))
        return out

    def narrow_copy(self, dim: int, start: int, length: int) -> Tensor:
        """:meth:`narrow`'s values in a new contiguous tensor (a narrow is a view: writes into
        it would reach ``self``, and its strides are ``self``'s)."""
        return views.as_new(self.narrow(dim, start, length).clone())

    @labels("IndexCopyBackward0")
    @zero_dim_as_one
    def index_copy(self, dim: int, index: Tensor, source: Tensor) -> Tensor:
        """A copy with the entries ``index`` of ``dim`` replaced by ``source``'s slices."""
        d = S.normalize_axis(dim, max(self.ndim, 1), "index_copy")
        out = self.clone()
        out._setitem((slice(None),) * d + (index,), source, "index_copy_")
        return out

    def index_put(self, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
        """A copy with ``out[indices] = values`` (``accumulate``: added, repeats accumulating)."""
        key = tuple(indices)
        if accumulate:
            src = values if isinstance(values, TensorBase) else self.new_full((), values)
            return self._scatter_add_at(key, src)
        out = self.clone()
        out[key] = values
        return out

    @labels("PutBackward0")
    def put(self, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
        """A copy with the elements at the flat ``index`` set to (or, ``accumulate``, increased
        by) ``source``'s."""
        flat = self.reshape(-1).index_put((index.reshape(-1),), source.reshape(-1), accumulate)
        return flat.reshape(self.shape)

    @labels("MaskedScatterBackward0")
    def masked_scatter(self, mask: Tensor, source: Tensor) -> Tensor:
        """A copy whose elements where the bool ``mask`` is true are, in order, ``source``'s
        first elements (no sync point: each one's position is a running count of the mask)."""
        if not isinstance(mask, TensorBase) or mask.dtype != "bool":
            raise TypeError("masked_scatter: expected mask to be a bool tensor")
        m = mask.expand(self.shape).reshape(-1)
        if source.numel() == 0:
            return self.clone()
        pos = (m.to("int64").cumsum(0) - 1).clamp(min=0)
        # (a source too short raises on the worker, PyTorch's message)
        picked = checked_getitem(source.reshape(-1), (pos,), "masked_scatter_").to(self.dtype)
        new = where(m, picked, self.reshape(-1)).reshape(self.shape)
        if new.requires_grad:
            return new
        # Nothing recorded: a copy that one in-place instruction overwrites with the result, so
        # that when the result failed the worker keeps the copy as it was and masked_scatter_'s
        # tensor is usable again once the error is caught, as in PyTorch.
        out = self.clone()
        out._setitem(Ellipsis, new)
        return out

    def select_scatter(self, src: Tensor, dim: int, index: int) -> Tensor:
        """A copy with ``src`` at ``index`` along ``dim`` (what :meth:`select` reads)."""
        d = S.normalize_axis(dim, self.ndim, "select_scatter")
        out = self.clone()
        out[(slice(None),) * d + (int(index),)] = src
        return out

    def slice_scatter(self, src: Tensor, dim: int = 0, start: int | None = None,
                      end: int | None = None, step: int = 1) -> Tensor:  # fmt: skip
        """A copy with ``src`` in ``start:end:step`` along ``dim``."""
        d = S.normalize_axis(dim, self.ndim, "slice_scatter")
        out = self.clone()
        out[(slice(None),) * d + (slice(start, end, step),)] = src
        return out

    def diagonal_scatter(
        self, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
    ) -> Tensor:
        """A copy with ``src`` on the diagonal that :meth:`diagonal` with these arguments reads."""
        d1 = S.normalize_axis(dim1, self.ndim, "diagonal_scatter")
        d2 = S.normalize_axis(dim2, self.ndim, "diagonal_scatter")
        x = self.movedim((d1, d2), (-2, -1)).clone()
        r0, c0 = max(0, -offset), max(0, offset)
        n = max(0, min(x.shape[-2] - r0, x.shape[-1] - c0))
        if n:
            lead = (slice(None),) * (x.ndim - 2)
            x[lead + (list(range(r0, r0 + n)), list(range(c0, c0 + n)))] = src
        return x.movedim((-2, -1), (d1, d2))

    # ------------------------------------------------------------------ others
    def diagflat(self, offset: int = 0) -> Tensor:
        """A matrix with the flattened tensor on its ``offset`` diagonal."""
        return self.reshape(-1).diag(offset)

    def sum_to_size(self, *size: Any) -> Tensor:
        """Sums over the dimensions that ``size`` (which must expand to this shape) broadcasts."""
        size = tuple(int(s) for s in _dims(size))
        try:
            S.expand(size, self.shape)
        except (ShapeError, ValueError):
            raise RuntimeError(f"size {list(size)} is not expandable to size {list(self.shape)}")  # noqa: B904
        lead = self.ndim - len(size)
        axes = [*range(lead), *(lead + i for i, s in enumerate(size) if s == 1 and self.shape[lead + i] != 1)]  # fmt: skip
        return (self.sum(tuple(axes), keepdims=True) if axes else self).reshape(size)

    def renorm(self, p: float, dim: int, maxnorm: float) -> Tensor:
        """Each slice along ``dim`` scaled down to ``p``-norm ``maxnorm`` if its norm exceeds it."""
        if self.ndim < 2:
            raise ShapeError(
                f"renorm: input needs at least 2 dimensions, got {self.ndim} dimensions"
            )
        d = S.normalize_axis(dim, self.ndim, "renorm")
        norms = self.norm(p, tuple(i for i in range(self.ndim) if i != d), keepdim=True)
        return self * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)

    def mvlgamma(self, p: int) -> Tensor:
        """The multivariate log-gamma of dimension ``p``: ``p (p - 1) / 4 log(pi) +
        sum_i lgamma(self - i / 2)`` for ``i`` in ``0 .. p - 1``."""
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise ValueError(f"mvlgamma: p has to be greater than or equal to 1, not {p!r}")
        out = self.lgamma()
        for i in range(1, p):
            out = out + (self - i / 2).lgamma()
        return label(out + p * (p - 1) / 4 * math.log(math.pi), "MvlgammaBackward0")

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None) -> Any:  # fmt: skip
        """The elements (or, with ``dim``, slices) with each run of equal neighbours collapsed
        to one; optionally each element's run index and each run's length. A sync point."""
        a = self._host()
        d = None if dim is None else S.normalize_axis(dim, self.ndim, "unique_consecutive")
        rows = (a.reshape(-1, 1) if d is None else
                np.moveaxis(a, d, 0).reshape(a.shape[d], math.prod(np.delete(a.shape, d))))  # fmt: skip
        starts = np.ones(len(rows), bool)
        starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        first = np.flatnonzero(starts)
        values = a.reshape(-1)[first] if d is None else np.take(a, first, axis=d)
        out = self._upload(np.ascontiguousarray(values))
        inverse = (np.cumsum(starts) - 1).reshape(a.shape if d is None else -1)
        extra = [np.diff(np.append(first, len(rows)))] if return_counts else []
        extra = ([inverse] if return_inverse else []) + extra
        if not extra:
            return out
        return (out, *(self._upload(np.array(e, dtype=np.int64)) for e in extra))  # (0-d stays 0-d)


# ----------------------------------------------------------------------------- gt.<name> functions
_MIXINS = (CompatOps, CompatProductOps, CompatInplaceOps)


def _as_function(name: str) -> Any:
    own = next((c.__dict__[name] for c in _MIXINS if name in c.__dict__), None)
    return method_function(name, own.__doc__ if own is not None else None)


_METHOD_FUNCTIONS = (
    "absolute", "adjoint", "divide", "multiply", "subtract", "negative", "positive", "greater",
    "greater_equal", "less", "less_equal", "not_equal", "true_divide", "floor_divide", "swapdims",
    "ravel", "aminmax", "fmax", "fmin", "nanmedian", "mode", "tensor_split", "hsplit", "vsplit",
    "dsplit", "split_with_sizes", "as_strided", "fliplr", "flipud", "take", "select", "narrow_copy",
    "index_copy", "index_put", "masked_scatter", "select_scatter", "slice_scatter",
    "diagonal_scatter", "addmv", "addr", "addbmm", "baddbmm", "mv", "vdot", "matrix_power",
    "logdet", "diagflat", "renorm", "unique_consecutive", "is_signed", "is_complex",
    "is_nonzero", "is_same_size", "clamp_min", "clamp_max",
    # PyTorch's in-place functions (torch.relu_(x) ...)
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
    "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
    "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_", "erfc_", "exp2_",
    "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "lcm_", "ldexp_", "log10_",
    "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_",
    "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_", "addmv_", "index_put_", "put",
)  # fmt: skip
globals().update({name: _as_function(name) for name in _METHOD_FUNCTIONS})

__all__ = list(_METHOD_FUNCTIONS)
