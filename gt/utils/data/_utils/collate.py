"""Collating samples into batches, as ``torch.utils.data._utils.collate``.

:func:`default_collate` stacks tensors and NumPy arrays along a new first dimension, makes numbers
tensors (Python floats float64, ints int64, bools bool, NumPy scalars their own dtype), keeps
strings as the sequence of them, and walks dicts (any mapping, keeping its type), namedtuples
(keeping their type), tuples (which become lists) and lists field by field. :func:`collate` is the
same walk with a table of handlers by type (``collate_fn_map``) that callers may extend.
:func:`default_convert` turns NumPy arrays and scalars into tensors without batching (the
``DataLoader``'s default with ``batch_size=None``).

A batch of NumPy arrays is stacked on the host and uploaded as one tensor.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from gt.factories import tensor
from gt.ops.shaping import stack
from gt.tensor import Tensor

#: NumPy dtypes (strings, bytes, objects) that do not become tensors.
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

CollateMap = dict[type | tuple[type, ...], Callable]


def default_convert(data: Any) -> Any:
    """NumPy arrays and scalars in ``data`` (nested in mappings, namedtuples, tuples, lists)
    become tensors; tuples become lists; everything else is returned as it is."""
    kind = type(data)
    if isinstance(data, Tensor):
        return data
    if kind.__module__ == "numpy" and kind.__name__ not in ("str_", "string_"):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(data[k]) for k in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple keeps its type
        return kind(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Any:
    """Collate ``batch`` (a sequence of samples) by the type of its first sample: the handler in
    ``collate_fn_map`` for that type (an exact match first, then the first ``isinstance`` match),
    else field by field for mappings, namedtuples and sequences.

    Raises:
        RuntimeError: the samples are sequences of different lengths.
        TypeError: no handler and no structure for the samples' type.
    """
    elem = batch[0]
    kind = type(elem)
    if collate_fn_map is not None:
        if kind in collate_fn_map:
            return collate_fn_map[kind](batch, collate_fn_map=collate_fn_map)
        for key, fn in collate_fn_map.items():
            if isinstance(elem, key):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        fields = {k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem}
        return _rebuild_mapping(elem, fields)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple keeps its type
        return kind(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        return fields if isinstance(elem, tuple) else _rebuild_sequence(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(kind))


def _rebuild_mapping(like: Any, fields: dict) -> Any:
    """``fields`` in a mapping of ``like``'s type (a plain dict where that type cannot be made)."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(fields)
            return clone
        return type(like)(fields)
    except TypeError:
        return fields


def _rebuild_sequence(like: Any, fields: list) -> Any:
    """``fields`` in a sequence of ``like``'s type (a list where that type cannot be made)."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, v in enumerate(fields):
                clone[i] = v
            return clone
        return type(like)(fields)
    except TypeError:
        return fields


def collate_tensor_fn(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Tensors of one shape stacked along a new first dimension."""
    return stack(list(batch), 0)


def collate_numpy_array_fn(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Any:
    """NumPy arrays of one shape stacked into one tensor (uploaded once)."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    handler = (collate_fn_map or {}).get(Tensor, collate_tensor_fn)
    if handler is not collate_tensor_fn:  # a caller's own tensor handler sees tensors
        return collate([tensor(np.asarray(b)) for b in batch], collate_fn_map=collate_fn_map)
    for i, b in enumerate(batch):
        if b.shape != elem.shape:
            raise RuntimeError("stack expects each tensor to be equal size, but got "
                               f"{list(elem.shape)} at entry 0 and {list(b.shape)} at entry {i}")  # fmt: skip
    if any(b.dtype != elem.dtype for b in batch):  # promoted as PyTorch's stack promotes
        return stack([tensor(np.asarray(b)) for b in batch], 0)
    return tensor(np.stack(batch))


def collate_numpy_scalar_fn(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """NumPy scalars as a tensor of their dtype (of several, promoted as PyTorch promotes)."""
    kind = type(batch[0])
    if any(type(b) is not kind for b in batch):
        return stack([tensor(b) for b in batch], 0)
    return tensor(np.asarray(batch))


def collate_float_fn(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Python floats as a float64 tensor."""
    return tensor(np.asarray(batch, dtype=np.float64))


def collate_int_fn(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Python ints (int64) or bools (bool) as a tensor."""
    return tensor(list(batch))


def collate_str_fn(batch: Any, *, collate_fn_map: CollateMap | None = None) -> Any:
    """Strings and bytes stay as they are: the batch is the sequence of them."""
    return batch


#: The handlers of :func:`default_collate`, by sample type (a copy may be extended).
default_collate_fn_map: CollateMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch: Any) -> Any:
    """Samples into a batch, as PyTorch's default ``collate_fn`` (see the module's docs):
    ``[(x0, 0), (x1, 1)]`` becomes ``[stack([x0, x1]), tensor([0, 1])]``."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


__all__ = [
    "collate",
    "collate_float_fn",
    "collate_int_fn",
    "collate_numpy_array_fn",
    "collate_numpy_scalar_fn",
    "collate_str_fn",
    "collate_tensor_fn",
    "default_collate",
    "default_collate_err_msg_format",
    "default_collate_fn_map",
    "default_convert",
    "np_str_obj_array_pattern",
]
