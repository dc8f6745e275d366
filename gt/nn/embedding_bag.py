"""Embedding lookups: ``F.embedding`` and bags of embeddings, ``F.embedding_bag`` and
``nn.EmbeddingBag`` (PyTorch's arguments and semantics), one bag per output row.

``max_norm`` rescales, in place and without recording, each looked-up row of the table whose norm
exceeds it (PyTorch's ``embedding_renorm_``); ``scale_grad_by_freq`` divides each row's gradient
by how often its index occurs in the batch. Both are made of ordinary instructions: the table's
rows are gathered, never the whole table read back.

A 2-d input ``[B, L]`` is ``B`` bags of ``L`` indices: its rows are gathered ``[B, L, D]`` and
reduced over ``L``. A 1-d input is every bag concatenated, ``offsets`` giving where each starts:
``sum`` and ``mean`` add each looked-up row into its bag with one ``index_add``; ``max`` lays the
bags out padded, ``[B, longest, D]``, with a mask. Entries equal to ``padding_idx`` are left out
(and not counted by ``mean``); empty bags give zeros. The gradient comes from the ops (``max``
sends it to the first maximum of each bag, as PyTorch's CPU kernel does).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt import factories as F
from gt import shapes as S
from gt.autograd import Function, is_grad_enabled, no_grad
from gt.grad_graph import label
from gt.indexing import checked_getitem
from gt.nn.module import Module, Parameter
from gt.nn.resetting import redraw_rows
from gt.ops.arith import where
from gt.sparse import SparseTensor
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def renorm_rows_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` that ``input`` names to a ``norm_type`` norm of at most
    ``max_norm``, in place and unrecorded (PyTorch's ``embedding_renorm_``; its ``1e-7``)."""
    with no_grad():
        flat = input.reshape(-1)
        rows = weight[flat]
        norms = rows.norm(p=norm_type, dim=1, keepdim=True)
        # a repeated index writes the same scaled row each time, so the order does not matter
        weight[flat] = where(norms > max_norm, rows * (max_norm / (norms + 1e-7)), rows)


def lookup(
    weight: Tensor, input: Tensor, scale_grad_by_freq: bool, op: str = "embedding"
) -> Tensor:
    """``weight[input]``; with ``scale_grad_by_freq`` the gradient reaching each row is divided by
    how many times its index occurs in ``input`` (the values are unchanged). An index outside
    ``[0, rows)`` raises on the worker with PyTorch's message for ``op`` (a negative one too)."""
    rows = checked_getitem(weight, (input,), op)
    if not scale_grad_by_freq or not rows.requires_grad:
        return rows
    flat = input.reshape(-1)
    ones = F.ones(flat.shape, dtype=rows.dtype)
    counts = F.zeros(weight.shape[0], dtype=rows.dtype).index_add_(0, flat, ones)
    fixed = rows.detach()
    return fixed + (rows - fixed) * (1.0 / counts[input]).unsqueeze(-1)


class _SparseLookup(Function):
    """``weight[input]`` whose gradient for ``weight`` is sparse: the looked-up indices (those at
    ``padding_idx`` left out) with the output's gradient rows, not coalesced, as PyTorch's
    ``embedding_sparse_backward`` gives them."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, input: Tensor, padding_idx: int | None,
                op: str = "embedding") -> Tensor:  # fmt: skip
        ctx.save_for_backward(input)
        ctx.table, ctx.padding_idx = tuple(weight.shape), padding_idx
        return checked_getitem(weight, (input,), op)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        (input,) = ctx.saved_tensors
        flat, values = input.reshape(-1), grad.reshape(-1, *ctx.table[1:])
        if ctx.padding_idx is not None:
            keep = flat != ctx.padding_idx % ctx.table[0]
            flat, values = flat[keep], values[keep]
        return SparseTensor(flat.unsqueeze(0), values, ctx.table, False), None, None, None


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:  # fmt: skip
    """Rows of ``weight`` picked by the integer tensor ``input``; rows at ``padding_idx`` get no
    gradient, ``max_norm`` renormalizes the picked rows of ``weight`` in place first, and
    ``scale_grad_by_freq`` scales gradients by the inverse frequency of each index (as in
    PyTorch). With ``sparse``, ``weight``'s gradient is a :class:`gt.sparse.SparseTensor` with
    one entry per looked-up index (for :class:`gt.optim.SparseAdam`), as PyTorch's is."""
    if input.dtype not in S.INT_DTYPES:
        raise RuntimeError(
            f"embedding: expected an integer index tensor (Long or Int), got {input.dtype}"
        )
    if max_norm is not None:
        renorm_rows_(weight, input, max_norm, norm_type)
    if sparse and weight.requires_grad and is_grad_enabled() and not scale_grad_by_freq:
        return _SparseLookup.apply(weight, input, padding_idx)
    rows = lookup(weight, input, scale_grad_by_freq)
    if padding_idx is None or not rows.requires_grad:
        return rows if rows is weight else label(rows, "EmbeddingBackward0")
    pad = padding_idx % weight.shape[0]
    # The same values; only the gradient of the padding positions is cut off.
    out = where((input != pad).unsqueeze(-1), rows, rows.detach())
    return label(out, "EmbeddingBackward0")


def _check(input: Tensor, weight: Tensor, offsets: Any, mode: str, scale_grad_by_freq: bool,
           sparse: bool, max_norm: Any, per_sample_weights: Tensor | None) -> None:  # fmt: skip
    """PyTorch's argument checks, in its order and with its messages."""
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
            f"then it must have the same shape as the input ({input.shape})"
        )
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch "
                f"of fixed length sequences. However, found offsets of type {type(offsets)}"
            )
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if (offsets.ndim if isinstance(offsets, Tensor) else np.ndim(offsets)) != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(
            f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}"
        )
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    elif mode not in ("sum", "mean"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub."
        )
    for name, t in (("indices", input), ("offsets", offsets)):
        if isinstance(t, Tensor) and t.dtype not in S.INT_DTYPES:
            raise RuntimeError(
                f"Expected tensor for argument #1 '{name}' to have one of the following scalar "
                f"types: Long, Int; but got {t.dtype} instead (while checking arguments for "
                "embedding_bag)"
            )


def _padding(padding_idx: int | None, rows: int) -> int | None:
    if padding_idx is None:
        return None
    if not -rows <= padding_idx < rows:
        raise RuntimeError(
            f"padding_idx must be within the number of embeddings, -{rows} through {rows - 1}, "
            f"but got {padding_idx}"
        )
    return padding_idx % rows


def _bags(offsets: Any, n: int, include_last_offset: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each bag's start and length on the host (reading ``offsets``: a sync point)."""
    off = offsets._host() if isinstance(offsets, Tensor) else np.asarray(offsets)
    off = off.astype(np.int64).reshape(-1)
    if len(off) and off[0] != 0:
        raise RuntimeError(
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
            f"from position 0. However, got {off[0]}"
        )
    if len(off) and off[-1] > n:
        raise RuntimeError(
            f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of "
            f"{off[-1]}"
        )
    if np.any(np.diff(off) < 0):
        raise RuntimeError(f"embedding_bag: offsets must be non-decreasing, got {off.tolist()}")
    if include_last_offset:
        if len(off) == 0:
            raise RuntimeError("embedding_bag: include_last_offset needs at least one offset")
        return off[:-1], np.diff(off)
    return off, np.diff(np.append(off, n))


def embedding_bag(input: Tensor, weight: Tensor, offsets: Any = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean",
                  sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:  # fmt: skip
    """Sums, means or maxima of bags of embeddings: ``[B, embedding_dim]``.

    Args:
        input: ``[B, L]`` (``B`` bags of ``L`` indices) or 1-d (bags concatenated).
        weight: the ``[num_embeddings, D]`` table.
        offsets: for a 1-d input, where each bag starts (first 0); a tensor, list or tuple.
            Reading it is a sync point (the layout of the bags depends on it).
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: ``weight``'s gradient is a :class:`gt.sparse.SparseTensor` (sum and mean
            modes; PyTorch refuses it with max), one entry per index, as PyTorch's.
        per_sample_weights: a weight per index (``input``'s shape), ``mode="sum"`` only.
        include_last_offset: ``offsets`` has ``B + 1`` entries, the last one the end of the last
            bag (indices after it are ignored).
        padding_idx: indices equal to it are left out of every bag (a mean does not count them).

    ``max_norm`` and ``scale_grad_by_freq`` are as in :func:`embedding`.
    """
    _check(input, weight, offsets, mode, scale_grad_by_freq, sparse, max_norm, per_sample_weights)
    if max_norm is not None:
        renorm_rows_(weight, input, max_norm, norm_type)
    out = _bagged(input, weight, offsets, mode, sparse, scale_grad_by_freq, per_sample_weights,
                  include_last_offset, padding_idx)  # fmt: skip
    return label(out, "EmbeddingBagBackward0")  # (PyTorch's one node, whatever the mode)


def _bagged(input: Tensor, weight: Tensor, offsets: Any, mode: str, sparse: bool,
            scale_grad_by_freq: bool, per_sample_weights: Tensor | None,
            include_last_offset: bool, padding_idx: int | None) -> Tensor:  # fmt: skip
    """:func:`embedding_bag`'s value (arguments checked, rows renormalised)."""
    pad = _padding(padding_idx, weight.shape[0])
    acc = _accumulator(weight.dtype)
    psw = None if per_sample_weights is None else per_sample_weights.to(acc)
    look = _rows_of(weight, sparse, scale_grad_by_freq, pad)
    if input.ndim == 2:
        return _fixed_bags(input, weight, mode, psw, pad, look)
    starts, lengths = _bags(offsets, input.shape[0], include_last_offset)
    b, d = len(starts), weight.shape[1]
    if b == 0 or not lengths.sum():
        return weight.new_zeros((b, d))
    if mode == "max":
        return _max_of_bags(input, weight, starts, lengths, pad)
    # sum / mean: each position's row goes into its bag with one index_add
    used = int(starts[-1] + lengths[-1])  # positions after the last bag's end are ignored
    idx = input[:used] if used < input.shape[0] else input
    bag_of = input._upload(np.repeat(np.arange(b, dtype=np.int64), lengths))
    rows = look(idx).to(acc)
    keep = None if pad is None else (idx != pad).to(acc)
    scale = keep
    if psw is not None:
        w = psw[:used] if used < psw.shape[0] else psw
        scale = w if keep is None else w * keep
    if scale is not None:
        rows = rows * scale.unsqueeze(-1)
    total = rows.new_zeros((b, d)).index_add(0, bag_of, rows).to(weight.dtype)
    if mode == "sum":
        return total
    if keep is None:
        count = input._upload(np.maximum(lengths, 1).astype(np.dtype(acc)))
    else:
        count = keep.new_zeros((b,)).index_add(0, bag_of, keep).clamp(min=1.0)
    return total / count.to(weight.dtype).unsqueeze(-1)


def _rows_of(weight: Tensor, sparse: bool, scale_grad_by_freq: bool, pad: int | None) -> Any:
    """How the bags look their rows up: with ``sparse`` (and a weight to differentiate), as
    :func:`embedding` does, so that ``weight``'s gradient is sparse with one entry per index in
    input order, those at ``padding_idx`` left out (PyTorch's, scaled by the per-sample weights
    and the bags' counts)."""
    if sparse and weight.requires_grad and is_grad_enabled() and not scale_grad_by_freq:
        return lambda idx: _SparseLookup.apply(weight, idx, pad, "embedding_bag")
    return lambda idx: lookup(weight, idx, scale_grad_by_freq, "embedding_bag")


def _fixed_bags(input: Tensor, weight: Tensor, mode: str, psw: Tensor | None,
                pad: int | None, look: Any) -> Tensor:  # fmt: skip
    """``B`` bags of ``L`` indices each (a 2-d input)."""
    b, length = input.shape
    if length == 0:
        return weight.new_zeros((b, weight.shape[1]))
    rows = look(input)  # [B, L, D]
    keep = None if pad is None else input != pad
    if mode == "max":
        if keep is None:
            return rows.max(1).values
        best = where(keep.unsqueeze(-1), rows, -math.inf).max(1).values
        return where(keep.any(1, keepdim=True), best, 0.0)
    acc = _accumulator(weight.dtype)
    rows = rows.to(acc)
    scale = None if keep is None else keep.to(acc)
    if psw is not None:
        scale = psw if scale is None else psw * scale
    total = (rows * scale.unsqueeze(-1)).sum(1) if scale is not None else rows.sum(1)
    total = total.to(weight.dtype)
    if mode == "sum":
        return total
    if keep is None:
        return total / length
    return total / scale.sum(1, keepdim=True).clamp(min=1.0).to(weight.dtype)


def _accumulator(dtype: Any) -> Any:
    """The dtype bags are summed in: float32 for half-precision tables, whose sums (as
    PyTorch's) are rounded once, at the end; the table's own dtype otherwise."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _max_of_bags(input: Tensor, weight: Tensor, starts: np.ndarray, lengths: np.ndarray,
                 pad: int | None) -> Tensor:  # fmt: skip
    """The elementwise maximum of each bag: bags padded to the longest, masked with ``-inf``."""
    longest = int(lengths.max())
    where_in = starts[:, None] + np.arange(longest)[None, :]
    inside = np.arange(longest)[None, :] < lengths[:, None]
    pos = np.where(inside, where_in, 0)
    idx = input[input._upload(np.ascontiguousarray(pos, dtype=np.int64))]  # [B, longest]
    keep = input._upload(inside)
    if pad is not None:
        keep = keep & (idx != pad)
    rows = where(keep.unsqueeze(-1), checked_getitem(weight, (idx,), "embedding_bag"), -math.inf)
    return where(keep.any(1, keepdim=True), rows.max(1).values, 0.0)


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (see :func:`embedding_bag`).

    Args:
        num_embeddings, embedding_dim: the table's shape (initialized N(0, 1); the
            ``padding_idx`` row zero).
        mode: ``"sum"``, ``"mean"`` (default) or ``"max"``.
        include_last_offset: ``offsets`` ends with the end of the last bag.
        padding_idx: an index left out of every bag.
        _weight: an initial table (:meth:`from_pretrained` uses it).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(F.randn(num_embeddings, embedding_dim, dtype=dtype))
            if padding_idx is not None:
                with no_grad():
                    self.weight[padding_idx] = 0.0
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError(
                    "Shape of weight does not match num_embeddings and embedding_dim"
                )
            self.weight = Parameter(_weight)
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:  # fmt: skip
        """A bag whose table is ``embeddings`` (frozen by default)."""
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                  include_last_offset, padding_idx)  # fmt: skip
        bag.weight.requires_grad_(not freeze)
        return bag

    def reset_parameters(self) -> None:
        """Draw the table again (standard normal, the ``padding_idx`` row zero)."""
        redraw_rows(self)

    def forward(self, input: Tensor, offsets: Any = None,
                per_sample_weights: Tensor | None = None) -> Tensor:  # fmt: skip
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                             self.include_last_offset, self.padding_idx)  # fmt: skip

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx!r}"
        return text


__all__ = ["EmbeddingBag", "embedding", "embedding_bag"]
