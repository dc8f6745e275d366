"""Encoding of ``x[key]`` for the wire, with the result shape inferred on the client."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.ops.base import BATCHING, TensorBase

if TYPE_CHECKING:
    from gt.tensor import Tensor


def encode_key(x: Tensor, key: Any, op: str = "getitem") -> tuple[list, list, tuple[int, ...]]:
    """Encode an index for ``x`` as wire items, the index tensors it uses, and the result shape.

    Supports ints, slices (with steps), None, Ellipsis, lists of ints, integer tensors and boolean
    masks. A boolean mask's result shape depends on its data, so the mask is fetched (a sync point)
    and turned into integer indices, as PyTorch does on a GPU.

    Raises:
        IndexError: an int out of range, too many indices, or a bad item type.
    """
    if _sequence_as_tuple(key):  # x[[rows, cols]] is x[rows, cols], as in PyTorch
        key = tuple(key)
    if not isinstance(key, tuple):
        key = (key,)
    wire: list = []
    tensors: list = []
    stand_in: list = []
    dim = 0  # the dimension of x the next item indexes (None once an Ellipsis makes it unknown)
    for item in key:
        if isinstance(item, (range, tuple)):  # x[range(B), a], x[..., (0, 1)]: lists, as in PyTorch
            item = list(item)
        if isinstance(item, bool):
            raise IndexError(f"{op}: a bare bool index is not supported")
        if (
            isinstance(item, TensorBase)
            and item.dtype == "bool"
            or (isinstance(item, (list, np.ndarray)) and np.asarray(item).dtype == bool)
        ):
            _check_mask(x, item, dim, op)
        if item is Ellipsis:
            dim = None
        elif dim is not None and item is not None:
            dim += item.ndim if getattr(item, "dtype", None) in ("bool", np.bool_) else 1
        if isinstance(item, (int, np.integer)):
            wire.append(["i", int(item)])
            stand_in.append(int(item))
        elif isinstance(item, slice):
            parts = [None if v is None else _int(v) for v in (item.start, item.stop, item.step)]
            if parts[2] == 0:
                raise ValueError(f"{op}: slice step cannot be zero")
            if parts[2] is not None and parts[2] < 0:
                raise ValueError(f"{op}: negative slice steps are not supported (as in PyTorch)")
            wire.append(["s", *parts])
            stand_in.append(slice(*parts))
        elif item is None:
            wire.append(["n"])
            stand_in.append(None)
        elif item is Ellipsis:
            wire.append(["e"])
            stand_in.append(Ellipsis)
        elif isinstance(item, TensorBase):
            if item.dtype == "bool":
                for axis_idx in np.nonzero(item._host()):
                    _mask_positions(x, axis_idx, wire, tensors)
                    stand_in.append(axis_idx)
            elif item.dtype in S.INT_DTYPES:
                wire.append(["t", len(tensors)])
                tensors.append(item)
                stand_in.append(S.index_stand_in(item.shape))
            else:
                raise IndexError(
                    f"{op}: tensors used as indices must be integer or bool, not {item.dtype}"
                )
        elif isinstance(item, (list, np.ndarray)):
            arr = np.asarray(item)
            if arr.dtype == bool:
                for axis_idx in np.nonzero(arr):
                    _mask_positions(x, axis_idx, wire, tensors)
                    stand_in.append(axis_idx)
            elif arr.dtype.kind in "iu" or arr.size == 0:
                arr = arr.astype(np.int64)
                wire.append(["l", arr.tolist()])
                stand_in.append(arr)
            else:
                raise IndexError(f"{op}: cannot index with a list of {arr.dtype}")
        else:
            raise IndexError(f"{op}: unsupported index {item!r}")
    shape = S.index_shape(x.shape, tuple(stand_in), op)
    return wire, tensors, shape


def plain_key(key: Any) -> Any:
    """``key`` with the items PyTorch reads as something else made so: a 0-d integer tensor is
    its int (fetched: a sync point, as PyTorch's indexing with a GPU tensor is), so that
    ``x[i][j] = v`` with a tensor ``i`` writes into ``x`` through a view as it does in PyTorch; a
    uint8 tensor is a bool mask (with PyTorch's deprecation warning)."""
    items = key if type(key) is tuple else (key,)
    if not any(isinstance(k, TensorBase) and (k.ndim == 0 or k.dtype == "uint8") for k in items):
        return key
    out = []
    for k in items:
        if isinstance(k, TensorBase) and k.dtype == "uint8":
            warnings.warn(
                "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
                "instead.",
                UserWarning,
                stacklevel=3,
            )
            k = k.to("bool")
        if isinstance(k, TensorBase) and k.ndim == 0 and k.dtype in S.INT_DTYPES and not BATCHING:
            k = int(k.item())  # (under vmap's batching, each entry's index: a tensor it stays)
        out.append(k)
    return tuple(out) if type(key) is tuple else out[0]


def bool_items(key: Any) -> tuple | None:
    """For a tuple key holding bools (or 0-d bool tensors, read: a sync point): ``(first,
    second)``, two keys that index in turn as PyTorch indexes with it, else ``None``. A bool is a
    new dimension of size 1 (``first`` puts it there, as ``None``) indexed by ``[0]`` when true,
    ``[]`` when false (``second`` holds the bool for the caller to make that index tensor): an
    advanced index, broadcast with the key's others, so the result is a copy
    (``x[True, 0]`` is ``x[0]`` with a new first dimension, ``x[0, False]`` has none of it)."""
    if type(key) is not tuple or not any(
        type(k) is bool or (isinstance(k, TensorBase) and k.dtype == "bool" and k.ndim == 0)
        for k in key
    ):
        return None
    first: list = []
    second: list = []
    for k in key:
        if type(k) is bool or (isinstance(k, TensorBase) and k.dtype == "bool" and k.ndim == 0):
            first.append(None)
            second.append(bool(k))
        elif k is None:
            first.append(None)
            second.append(slice(None))
        elif k is Ellipsis:
            first.append(Ellipsis)
            second.append(Ellipsis)
        else:
            first.append(slice(None))
            second.append(k)
    return tuple(first), tuple(second)


#: A mask's positions past this many go to the worker as an index tensor (one binary frame, no
#: Python list on either side), not as a list in the key (msgpack: 4M positions cost 0.4 s).
MASK_LIST_MAX = 4096


def _mask_positions(x: Tensor, positions: np.ndarray, wire: list, tensors: list) -> None:
    """One axis of a boolean mask's positions, as a wire item (and its tensor, if uploaded)."""
    if positions.size > MASK_LIST_MAX:
        wire.append(["t", len(tensors)])
        tensors.append(x._upload(np.ascontiguousarray(positions, dtype=np.int64)))
    else:
        wire.append(["l", positions.tolist()])


def bool_indices(x: Any, second: tuple) -> tuple:
    """:func:`bool_items`' second key with each bool made its index tensor (``[0]`` or ``[]``)."""
    return tuple(x._arange(1 if k else 0) if type(k) is bool else k for k in second)


def _sequence_as_tuple(key: Any) -> bool:
    """PyTorch's rule for a list used as a whole key: short lists (fewer than 32 items) holding a
    tensor, a sequence, a slice, ``...`` or ``None`` are read as a tuple of indices
    (``x[[[0, 1], [1, 0]]]`` is ``x[[0, 1], [1, 0]]``); other lists are one index."""
    if not isinstance(key, list) or len(key) >= 32:
        return False
    return any(
        isinstance(k, (TensorBase, list, tuple, range, slice, np.ndarray))
        or k is None
        or k is Ellipsis
        for k in key
    )


def _check_mask(x: Tensor, mask: Any, dim: int | None, op: str) -> None:
    """A boolean mask must match the shape of the dimensions it indexes, as in PyTorch."""
    shape = tuple(mask.shape) if hasattr(mask, "shape") else np.shape(mask)
    if dim is None:
        return
    have = x.shape[dim : dim + len(shape)]
    if have != shape:
        raise IndexError(
            f"{op}: the shape of the mask {list(shape)} at index {dim} does not match the shape of "
            f"the indexed tensor {list(x.shape)}"
        )


def _int(v: Any) -> int:
    try:
        return int(v.__index__())
    except AttributeError:
        raise TypeError(f"slice indices must be integers or None, not {type(v).__name__}") from None


def checked_getitem(x: Tensor, key: tuple, op: str) -> Tensor:
    """``x[key]`` for an op PyTorch made refuse negative indices (``gather``, ``index_select``,
    ``embedding`` ...): the worker raises ``IndexError`` with PyTorch's message for ``op`` at an
    index outside ``[0, size)``, where ``x[t]`` wraps a negative one around (no round trip: the
    check travels with the instruction, ``attrs.index_op``). ``key``: ints, slices and integer
    index tensors."""
    wire, tensors, shape = encode_key(x, key, op)
    return x._apply("getitem", [x, *tensors], {"key": wire, "index_op": op}, shape=shape)
