"""``gt.save`` / ``gt.load``: checkpoints of tensors, state dicts and whole objects.

A checkpoint is a pickle in which every tensor is its raw bytes, dtype, shape and class (saving is a
sync point; loading uploads to the current connection). As in PyTorch 2.6+, ``gt.load`` reads only
tensors and plain containers unless ``weights_only=False`` (unpickling arbitrary objects runs
code: only do that for files you trust). The format is GT's own, not PyTorch's zip archive.
"""

from __future__ import annotations

import io
import os
import pickle
from typing import IO, Any

#: What a ``weights_only`` load may construct (module, name).
_SAFE = {
    ("gt.tensor", "rebuild_tensor"),
    ("gt.tensor", "Tensor"),
    ("gt._dtype", "dtype"),  # a dtype kept in a checkpoint (as torch.load allows torch.float32)
    ("gt.nn.module", "Parameter"),
    ("collections", "OrderedDict"),
    ("builtins", "dict"),
    ("builtins", "list"),
    ("builtins", "tuple"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "int"),
    ("builtins", "float"),
    ("builtins", "complex"),
    ("builtins", "str"),
    ("builtins", "bytes"),
    ("builtins", "bool"),
    ("builtins", "slice"),
    ("builtins", "range"),
}


class _WeightsUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global but tensors and plain containers."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"Weights only load failed: {module}.{name} is not allowed (gt.load reads tensors and "
            "plain containers by default; pass weights_only=False for files you trust)"
        )


def save(obj: Any, f: str | os.PathLike | IO[bytes], pickle_module: Any = None,
         pickle_protocol: int = pickle.HIGHEST_PROTOCOL, **_: Any) -> None:  # fmt: skip
    """Write ``obj`` (tensors, state dicts, modules ...) to a path or a binary file object."""
    dump = (pickle_module or pickle).dump
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            dump(obj, fh, protocol=pickle_protocol)
    else:
        dump(obj, f, protocol=pickle_protocol)


def load(f: str | os.PathLike | IO[bytes], map_location: Any = None, pickle_module: Any = None,
         *, weights_only: bool = True, mmap: Any = None, **_: Any) -> Any:  # fmt: skip
    """Read what :func:`save` wrote; tensors are uploaded to the current connection.

    Args:
        f: a path or a binary file object.
        map_location: accepted for ported code and ignored (the cluster places data).
        weights_only: only tensors and plain containers (``False``: any pickled object).

    Raises:
        pickle.UnpicklingError: with ``weights_only``, the file holds other objects.
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, weights_only, pickle_module)
    if isinstance(f, (bytes, bytearray)):
        return _load(io.BytesIO(f), weights_only, pickle_module)
    return _load(f, weights_only, pickle_module)


def _load(fh: IO[bytes], weights_only: bool, pickle_module: Any) -> Any:
    if weights_only:
        return _WeightsUnpickler(fh).load()
    return (pickle_module or pickle).load(fh)


__all__ = ["load", "save"]
