"""Shape ops, indexing and joining (a :class:`Tensor` mixin plus ``cat``/``stack``).

Primitives: ``reshape``, ``transpose`` (a permutation), ``expand``, ``getitem`` and ``concat``.
``squeeze``, ``unsqueeze``, ``flatten``, ``view`` are reshapes; ``split``, ``chunk``, ``unbind`` and
``narrow`` are slices; ``repeat`` is reshape + expand + reshape; ``stack`` is reshape + concat.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt._dtype import _ITEMSIZE, name_of
from gt._dtype import dtype as _DType
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.indexing import bool_indices, bool_items, checked_getitem, encode_key, plain_key
from gt.ops import layout, storage, views
from gt.ops.base import TensorBase

if TYPE_CHECKING:
    from gt.tensor import Tensor


def _dims(args: tuple) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _shape_keyword(op: str, name: str, shape: tuple, kw: dict) -> tuple:
    """The positional shape of ``reshape``/``view``, or the one given as the keyword ``name``."""
    if not kw:
        return shape
    if set(kw) != {name} or shape:
        bad = next((k for k in kw if k != name), name)
        raise TypeError(f"{op}() got an unexpected keyword argument {bad!r}")
    return (kw[name],)


def _refuse_unviewable(t: Any, new: tuple) -> None:
    """Refuse ``t.view(new)`` where PyTorch's view would refuse: ``t``'s strides do not let
    ``new`` be laid over its elements without a copy (``x.t().view(-1)``); ``reshape`` copies."""
    old = tuple(t.shape)
    if layout.view_strides(old, layout.resolve(t._st, old), tuple(new)) is None:
        raise ShapeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )


class ShapeOps:
    """Shape and indexing ops of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ reshaping
    def reshape(self, *shape: Any, **kw: Any) -> Tensor:
        """A tensor with the same data and a new shape (one ``-1`` is inferred); the shape may
        also be given as ``shape=`` (``x.reshape(shape=(n, -1))``, as MAE's ``patchify`` does)."""
        shape = _shape_keyword("reshape", "shape", shape, kw)
        new = S.reshape(self.shape, _dims(shape))
        if new == self.shape:
            return self
        out = self._apply("reshape", [self], {"shape": list(new)}, shape=new)
        st = self._st
        if st is not None:  # (a row-major tensor always reshapes into a view)
            old = tuple(self.shape)
            if layout.view_strides(old, layout.resolve(st, old), new) is None:
                # a copy, as PyTorch's reshape of ``x.t()`` or ``x[:, 1:3]`` is
                return label(out, "UnsafeViewBackward0")
            layout.viewed(self, out, "view", None)
        views.link(self, out, "reshape", None)
        return out

    def view(self, *shape: Any, **kw: Any) -> Tensor:
        """Same as :meth:`reshape`: an in-place op on the result also changes this tensor (see
        :mod:`gt.ops.views`). The shape may also be given as ``size=``."""
        if not shape and set(kw) == {"dtype"}:
            shape = (kw.pop("dtype"),)
        shape = _shape_keyword("view", "size", shape, kw)
        if len(shape) == 1 and isinstance(shape[0], _DType):
            return self._view_dtype(shape[0])
        if (
            len(shape) == 1
            and not isinstance(shape[0], (tuple, list))
            and (not hasattr(shape[0], "__index__") or isinstance(shape[0], type))
        ):
            raise TypeError(
                f"view() received an invalid combination of arguments - got "
                f"({type(shape[0]).__name__}), but expected one of:\n * (gt.dtype dtype)\n"
                " * (tuple of ints size)"
            )
        if self._st is not None:
            _refuse_unviewable(self, S.reshape(self.shape, _dims(shape)))
        out = self.reshape(*shape)
        if out is self:  # (a new tensor even with the same shape, as PyTorch's: not a leaf)
            out = self._apply("reshape", [self], {"shape": list(self.shape)}, shape=self.shape)
            if self._st is not None:
                layout.viewed(self, out, "view", None)
            views.link(self, out, "reshape", None)
        return out

    def _view_dtype(self, dtype: Any) -> Tensor:
        """``view(dtype)``: the same bytes seen as ``dtype`` (NumPy's ``arr.view(dtype)``), with
        PyTorch's rules and messages where the element sizes differ (the last dim scales; it must
        be laid out contiguously). A view sharing the value both ways (:mod:`gt.ops.views`),
        outside autograd, as PyTorch's (never differentiable, ``_base`` is ``None``)."""
        old, new = name_of(self.dtype), name_of(dtype)
        a, b = _ITEMSIZE[old], _ITEMSIZE[new]
        strides = layout.strides_of(self)
        if a != b:
            what = f"to view {_SCALAR[old]} as {_SCALAR[new]} (different element sizes)"
            if self.ndim == 0:
                raise ShapeError(f"self.dim() cannot be 0 {what}")
            if a > b:
                if strides[-1] != 1:
                    raise ShapeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
                r = a // b
                strides = (*(s * r for s in strides[:-1]), 1)
            else:
                r = b // a
                if self.shape[-1] % r:
                    raise ShapeError(
                        f"self.size(-1) must be divisible by {r} {what}, but got {self.shape[-1]}"
                    )
                offset = storage.placement(self)[1] if self._vb is not None else 0
                if offset % r:
                    raise ShapeError(
                        f"self.storage_offset() must be divisible by {r} {what}, but got {offset}"
                    )
                if strides[-1] != 1:
                    raise ShapeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
                for d, s in enumerate(strides[:-1]):
                    if s % r:
                        raise ShapeError(
                            f"self.stride({d}) must be divisible by {r} {what}, but got {s}"
                        )
                strides = (*(s // r for s in strides[:-1]), 1)
        out = self._apply("view_dtype", [self], {"dtype": new, "from": old}, grad=False)
        if self._st is not None and strides != layout.row_major(tuple(out.shape)):
            out._st = strides
        views.link(self, out, "dtype", new)
        return out

    def view_as(self, other: Tensor) -> Tensor:
        """:meth:`view` to ``other``'s shape (a new tensor even when the shape is the same)."""
        return self.view(other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        """:meth:`reshape` to ``other``'s shape."""
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Merge dimensions ``start_dim..end_dim`` into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s = S.normalize_axis(start_dim, self.ndim, "flatten")
        e = S.normalize_axis(end_dim, self.ndim, "flatten")
        if s > e:
            raise ShapeError(
                f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim}) for shape {list(self.shape)}"
            )
        return self.reshape(self.shape[:s] + (S.prod(self.shape[s : e + 1]),) + self.shape[e + 1 :])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """Split dimension ``dim`` into ``sizes``."""
        d = S.normalize_axis(dim, self.ndim, "unflatten")
        inner = S.reshape((self.shape[d],), tuple(sizes))
        return self.reshape(self.shape[:d] + inner + self.shape[d + 1 :])

    def squeeze(self, dim: Any = None) -> Tensor:
        """Remove size-1 dimensions (all of them, or those in ``dim`` that have size 1)."""
        if dim is None:
            keep = [d for d in self.shape if d != 1]
        else:
            axes = S.normalize_axes(dim, self.ndim, "squeeze") or ()
            keep = [d for i, d in enumerate(self.shape) if not (i in axes and d == 1)]
        out = self.reshape(tuple(keep))
        if out is self:
            return out
        return label(out, _SQUEEZE_NODE[0 if dim is None else 1 + isinstance(dim, (tuple, list))])

    def unsqueeze(self, dim: int) -> Tensor:
        """Insert a size-1 dimension at ``dim`` (in ``-ndim-1 .. ndim``)."""
        d = S.normalize_axis(dim, self.ndim + 1, "unsqueeze")
        return label(self.reshape(self.shape[:d] + (1,) + self.shape[d:]), "UnsqueezeBackward0")

    # ------------------------------------------------------------------ permuting
    def permute(self, *dims: Any) -> Tensor:
        """Reorder dimensions."""
        dims = _dims(dims)
        nd = len(self.shape)
        if len(dims) != nd:
            raise ShapeError(
                f"permute: number of dims {len(dims)} doesn't match the tensor's {nd} dimensions "
                f"(shape {list(self.shape)})"
            )
        perm = [S.normalize_axis(d, nd, "permute") for d in dims]
        if len(set(perm)) != nd:
            raise ShapeError(f"permute: dims {list(dims)} are not a permutation of {nd} dimensions")
        return self._permute(perm)

    def _permute(self, perm: list[int]) -> Tensor:
        """Queue a (validated) permutation."""
        if perm == sorted(perm):
            return self
        shape = tuple([self.shape[p] for p in perm])
        out = self._apply("transpose", [self], {"perm": perm}, shape=shape)
        layout.permuted(self, out, perm)
        views.link(self, out, "perm", perm)
        return out

    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        """Swap two dimensions (with no arguments: the last two, as in the GT prototype)."""
        nd = len(self.shape)
        if nd < 2 and dim0 in (-2, -1, 0) and dim1 in (-2, -1, 0):
            return self
        d0 = dim0 + nd if -nd <= dim0 < 0 else dim0
        d1 = dim1 + nd if -nd <= dim1 < 0 else dim1
        if not (0 <= d0 < nd and 0 <= d1 < nd):
            d0 = S.normalize_axis(dim0, nd, "transpose")
            d1 = S.normalize_axis(dim1, nd, "transpose")
        perm = list(range(nd))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        out = self._permute(perm)
        return out if out is self else label(out, "TransposeBackward0")

    swapaxes = transpose

    def t(self) -> Tensor:
        """Transpose of a matrix (0-d and 1-d tensors are returned as they are)."""
        if self.ndim > 2:
            raise ShapeError(
                f"t: expects a tensor with <= 2 dimensions, but got shape {list(self.shape)}"
            )
        out = self.transpose()
        return out if out is self else label(out, "TBackward0")

    @property
    def T(self) -> Tensor:
        """The transpose of a matrix; every dimension reversed otherwise, with PyTorch's
        deprecation warning (``x.mT`` transposes a batch of matrices)."""
        if self.ndim == 2:
            return label(self.transpose(), "PermuteBackward0")
        if self.ndim == 0:
            warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity "
                          "in these cases.", UserWarning, stacklevel=2)  # fmt: skip
            return self
        warnings.warn(
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
            "deprecated and it will throw an error in a future release. Consider `x.mT` to "
            "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to "
            "reverse the dimensions of a tensor.",
            UserWarning,
            stacklevel=2,
        )
        return self if self.ndim < 2 else label(self.permute(*range(self.ndim - 1, -1, -1)), "PermuteBackward0")  # fmt: skip

    @property
    def mT(self) -> Tensor:  # noqa: N802 - PyTorch's name
        """The last two dimensions swapped (a batch of matrices transposed)."""
        if self.ndim < 2:
            raise ShapeError(f"mT: tensor of shape {list(self.shape)} has fewer than 2 dimensions")
        return self.transpose()

    # ------------------------------------------------------------------ broadcasting
    def expand(self, *sizes: Any) -> Tensor:
        """Broadcast to ``sizes`` (``-1`` keeps a dimension) without copying."""
        shape = S.expand(self.shape, _dims(sizes))
        if shape == self.shape:
            return self
        out = self._apply("expand", [self], {"shape": list(shape)}, shape=shape)
        layout.expanded(self, out)
        views.link(self, out, "expand", shape)
        return out

    def expand_as(self, other: Tensor) -> Tensor:
        """Broadcast to ``other``'s shape: a new view even when the shape is the same, as
        PyTorch's (``p.expand_as(p).grad_fn.next_functions[0][0]`` is how Megatron and DeepSpeed
        reach a parameter's ``AccumulateGrad`` to hook it)."""
        out = self.expand(other.shape)
        if out is self:
            out = self._apply("expand", [self], {"shape": list(self.shape)}, shape=self.shape)
            layout.expanded(self, out)
            views.link(self, out, "expand", self.shape)
        return out

    broadcast_to = expand

    def repeat(self, *sizes: Any) -> Tensor:
        """Tile the tensor ``sizes[i]`` times along each dimension (as ``torch.Tensor.repeat``)."""
        sizes = tuple(int(s) for s in _dims(sizes))
        if len(sizes) < self.ndim:
            raise ShapeError(
                f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than the number of dimensions of the tensor ({self.ndim})"
            )
        if any(s < 0 for s in sizes):
            raise ShapeError(f"repeat: repeats must be non-negative, got {list(sizes)}")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        inter = tuple(x for pair in ((1, d) for d in shape) for x in pair)
        big = tuple(x for pair in zip(sizes, shape) for x in pair)
        out = self.reshape(inter).expand(big).reshape(tuple(r * d for r, d in zip(sizes, shape)))
        return out if out is self else label(views.as_new(out), "RepeatBackward0")

    def repeat_interleave(self, repeats: Any, dim: int | None = None, *,
                          output_size: int | None = None) -> Tensor:  # fmt: skip
        """Repeat each element ``repeats`` times along ``dim`` (the flattened tensor when None);
        ``repeats`` may be per element (a list or tensor: a sync point for a tensor)."""
        x = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else S.normalize_axis(S.as_index(dim), x.ndim, "repeat_interleave")
        n = x.shape[d]
        if isinstance(repeats, np.integer):
            repeats = int(repeats)
        if isinstance(repeats, int) or (  # (a 1-element tensor of repeats applies to each)
            hasattr(repeats, "numel") and repeats.numel() == 1 and repeats.ndim <= 1
        ):
            r = int(repeats)
            if r < 0:
                raise RuntimeError(
                    "Repeats must be non-negative" if isinstance(repeats, int)
                    else "repeats can not be negative"
                )  # fmt: skip
            shape = x.shape
            big = shape[: d + 1] + (r,) + shape[d + 1 :]
            out = x.unsqueeze(d + 1).expand(big).reshape(shape[:d] + (n * r,) + shape[d + 1 :])
            return label(views.as_new(out), "ViewBackward0")
        counts = [int(c) for c in (repeats.tolist() if hasattr(repeats, "tolist") else repeats)]
        if any(c < 0 for c in counts):
            raise RuntimeError("repeats can not be negative")
        if len(counts) != n:
            raise ShapeError(
                f"repeat_interleave: repeats must have {n} elements, got {len(counts)}"
            )
        idx = [i for i, c in enumerate(counts) for _ in range(c)]
        return x[(slice(None),) * d + (idx,)]

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> Tensor:
        if type(key) is bool or (
            isinstance(key, TensorBase) and key.dtype == "bool" and key.ndim == 0
        ):  # x[True] is x with a new first dimension, x[False] the same with none of it: copies,
            # as any mask's result is in PyTorch
            taken = self.unsqueeze(0)
            return taken.clone() if bool(key) else taken[0:0]  # (a 0-d mask's value: a sync)
        key = plain_key(key)
        two = bool_items(key)
        if two is not None:
            return self[two[0]][bool_indices(self, two[1])]
        wire, tensors, shape = encode_key(self, key)
        out = self._apply("getitem", [self, *tensors], {"key": wire}, shape=shape)
        if not tensors and views.is_basic_key(key):  # a view in PyTorch (advanced: a copy)
            views.link(self, out, "key", key)
            layout.viewed(self, out, "key", key)
        return out

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """``length`` elements of ``dim`` starting at ``start``."""
        d = S.normalize_axis(dim, self.ndim, "narrow")
        size = self.shape[d]
        if start < 0:
            start += size
        if not (0 <= start <= size and 0 <= length and start + length <= size):
            raise IndexError(
                f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}) of shape {list(self.shape)}"
            )
        return label(self[(slice(None),) * d + (slice(start, start + length),)], "SliceBackward0")

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        """Split into pieces of ``split_size`` along ``dim`` (or into the given section sizes).

        The keyword is ``split_size``, as PyTorch's method's; ``gt.split`` names it
        ``split_size_or_sections``, as ``torch.split`` does.
        """
        d = S.normalize_axis(dim, self.ndim, "split")
        size = self.shape[d]
        split_size_or_sections = split_size
        if getattr(split_size, "ndim", None) == 0:  # (a 0-d tensor: its number, a sync point)
            split_size_or_sections = operator.index(split_size)
        if isinstance(split_size_or_sections, int):
            step = split_size_or_sections
            if step <= 0:
                raise ValueError(f"split: split_size must be positive, got {step}")
            sections = [min(step, size - i) for i in range(0, size, step)] or [0]
        else:
            sections = [int(s) for s in split_size_or_sections]
            if sum(sections) != size or any(s < 0 for s in sections):
                raise ShapeError(
                    f"split: sizes {sections} do not add up to {size}, the size of dimension {d} of shape {list(self.shape)}"
                )
        out = []
        start = 0
        lead = (slice(None),) * d
        name = "SplitBackward0" if isinstance(split_size, int) else "SplitWithSizesBackward0"
        for s in sections:
            out.append(label(self[lead + (slice(start, start + s),)], name))
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """Split into ``chunks`` nearly equal pieces along ``dim`` (fewer when it does not divide)."""
        if chunks <= 0:
            raise ValueError(f"chunk: chunks must be positive, got {chunks}")
        d = S.normalize_axis(dim, self.ndim, "chunk")
        size = self.shape[d]
        if size == 0:  # (PyTorch: ``chunks`` empty pieces)
            return tuple(self.narrow(d, 0, 0) for _ in range(chunks))
        step = max(1, -(-size // chunks))
        return self.split(step, d)

    def unbind(self, dim: int = 0) -> tuple:
        """The slices along ``dim``, with that dimension removed."""
        d = S.normalize_axis(dim, self.ndim, "unbind")
        lead = (slice(None),) * d
        return tuple(label(self[lead + (i,)], "UnbindBackward0") for i in range(self.shape[d]))

    # ------------------------------------------------------------------ selection by index tensors
    def index_select(self, dim: int, index: Any) -> Tensor:
        """The entries of ``index`` (a 1-d integer tensor or list) along ``dim``."""
        d = S.normalize_axis(dim, len(self.shape), "index_select")
        if getattr(index, "ndim", 1) == 0:  # (a 0-d index selects one entry, kept as a dimension)
            index = index.reshape(1)
        if getattr(index, "ndim", 1) != 1:
            raise IndexError(f"index_select: index must be 1-d, got shape {list(index.shape)}")
        return label(
            checked_getitem(self, (slice(None),) * d + (index,), "index_select"),
            "IndexSelectBackward0",
        )

    def gather(self, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
        """``out[i][j] = self[i][index[i][j]]`` for ``dim=1`` (and likewise for any ``dim``;
        ``sparse_grad`` is accepted and ignored: GT's gradients are dense). An index outside
        ``[0, size)`` raises (a negative one too, as in PyTorch)."""
        return self._gather(dim, index, "gather")

    def _gather(self, dim: int, index: Tensor, check: str | None) -> Tensor:
        """:meth:`gather`; ``check``: the op named when an index is outside ``[0, size)``
        (``None``: a negative index counts from the end, as ``take_along_dim``'s does)."""

        def at(key: tuple) -> Tensor:
            return self[key] if check is None else checked_getitem(self, key, check)

        nd = len(self.shape)
        d = S.normalize_axis(dim, max(nd, 1), "gather")
        if nd == 1 and len(index.shape) == 0 and index.dtype in S.INT_DTYPES:  # (as PyTorch)
            # (as a 1-d index: a 0-d one in a key is read as an int, which would be a sync)
            return label(at((index.reshape(1),)).reshape(()), "GatherBackward0")
        if index.dtype not in S.INT_DTYPES:  # (PyTorch's RuntimeError)
            raise RuntimeError("gather(): Expected dtype int32/int64 for index")
        if len(index.shape) != nd:
            raise IndexError(
                f"gather: index must be an integer tensor with {nd} dimensions like the input "
                f"(got {index.dtype} of shape {list(index.shape)} for input of shape {list(self.shape)})"
            )
        for i, (n, m) in enumerate(zip(self.shape, index.shape)):
            if i != d and m > n:
                raise IndexError(
                    f"gather: index shape {list(index.shape)} is larger than input shape "
                    f"{list(self.shape)} in dimension {i}"
                )
        key = []
        for i in range(nd):
            if i == d:
                key.append(index)
            else:
                shape = [1] * nd
                shape[i] = index.shape[i]
                key.append(self._arange(index.shape[i]).reshape(shape))
        return label(at(tuple(key)), "GatherBackward0")

    def flip(self, *dims: Any, **kw: Any) -> Tensor:
        """Reverse the order of elements along ``dims`` (positional, or ``dims=``)."""
        if kw:
            if set(kw) != {"dims"} or dims:
                raise TypeError(f"flip() got an unexpected keyword argument {next(iter(kw))!r}")
            dims = (kw["dims"],)
        out = self
        axes, seen = set(), set()
        for d in _dims(dims):
            ax = S.normalize_axis(d, max(len(self.shape), 1), "flip")  # (0-d: dims 0 and -1)
            if ax in seen:
                raise RuntimeError(f"dim {ax} appears multiple times in the list of dims")
            seen.add(ax)
            if self.shape and self.shape[ax] > 1:
                axes.add(ax)
        if axes:
            # one basic index with negative steps: a strided view on the worker (no index list
            # on the wire, no gather), which the worker never writes through (an in-place op
            # on either side copies first); its gradient is the same reversal of g
            wire = [["s", None, None, -1 if a in axes else None] for a in range(self.ndim)]
            out = self._apply("getitem", [self], {"key": wire}, shape=tuple(self.shape))
        if out is self:  # (nothing to reverse: still a copy, as PyTorch's)
            out = self.clone()
        else:  # (PyTorch's flip keeps its input's layout: rot90 of a transpose is contiguous)
            out = layout.like_layout(self, out)
        return label(out, "FlipBackward0")


#: PyTorch's scalar type names (its messages name dtypes so).
_SCALAR = S.SCALAR_NAMES
#: PyTorch's node of ``squeeze()``, ``squeeze(dim)`` and ``squeeze(dims)``.
_SQUEEZE_NODE = ("SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2")


def cat(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """Concatenate tensors along an existing dimension (dtypes are promoted).

    Raises:
        ShapeError: the list is empty, or the shapes differ outside ``dim``.
    """
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("cat: expected a non-empty list of tensors")
    if axis is not None:
        dim = axis
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise ShapeError(
                f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated"
            )
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = S.promote(dtype, t.dtype)
    # PyTorch's legacy rule: 1-d empty tensors are skipped (``out = torch.empty(0)`` then
    # ``out = torch.cat((out, x))`` in a loop), though they still take part in the dtype
    kept = [t for t in tensors if tuple(t.shape) != (0,)]
    tensors = kept or tensors[:1]
    first = tensors[0]
    d = S.normalize_axis(dim, first.ndim, "cat")
    shape = S.concat([t.shape for t in tensors], d, "cat")
    ts = [t.to(dtype) for t in tensors]
    return first._apply("concat", ts, {"axis": d}, shape=shape)


def stack(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """Join tensors of one shape along a new dimension ``dim``.

    Raises:
        ShapeError: the list is empty or the shapes differ.
    """
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: expected a non-empty list of tensors")
    if axis is not None:
        dim = axis
    shape = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.shape != shape:
            raise ShapeError(
                f"stack: expects each tensor to be equal size, but got {list(shape)} at entry 0 and {list(t.shape)} at entry {i}"
            )
    d = S.normalize_axis(dim, len(shape) + 1, "stack")
    return label(cat([t.unsqueeze(d) for t in tensors], d), "StackBackward0")
