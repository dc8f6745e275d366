"""``gt.save`` / ``gt.load``: checkpoints of tensors, state dicts and whole objects.

``gt.save`` writes PyTorch's format (the zip archive of ``torch.save``, see
:mod:`gt.serialization_torch`), so ``torch.load`` reads GT's checkpoints and ``gt.load`` reads
PyTorch's; saving is a sync point, and loading uploads to the current connection. As in PyTorch
2.6+, ``gt.load`` reads only tensors and plain containers unless ``weights_only=False``
(unpickling arbitrary objects runs code: only do that for files you trust), or unless the other
globals are allowed with :func:`add_safe_globals`. Files GT wrote before (a plain pickle, also
what ``_use_new_zipfile_serialization=False`` writes) still load; PyTorch's pre-1.6 format does
not (re-save such a file with a recent PyTorch).
"""

from __future__ import annotations

import _compat_pickle
import contextlib
import io
import os
import pickle
from collections.abc import Iterable, Iterator
from typing import IO, Any

from gt import serialization_torch as archive_format

#: The pickle protocol PyTorch writes (``torch.serialization.DEFAULT_PROTOCOL``).
DEFAULT_PROTOCOL = 2

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
    ("builtins", "bytearray"),
    ("_codecs", "encode"),  # (how protocol 2 pickles bytes)
    ("collections", "Counter"),
    ("gt.ops.typeinfo", "Size"),
    ("gt.ops.device", "device"),
}

#: Globals the program allowed (:func:`add_safe_globals`), by ``(module, name)``.
_ALLOWED: dict[tuple[str, str], Any] = {}


def _key(obj: Any) -> tuple[str, str]:
    if isinstance(obj, tuple):  # (PyTorch's ``(obj, "module.name")`` form)
        module, _, name = obj[1].rpartition(".")
        return module, name
    return obj.__module__, obj.__qualname__


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Let ``weights_only`` loads construct these classes or functions too."""
    for obj in safe_globals:
        _ALLOWED[_key(obj)] = obj[0] if isinstance(obj, tuple) else obj


def get_safe_globals() -> list:
    """The globals :func:`add_safe_globals` allowed."""
    return list(_ALLOWED.values())


def clear_safe_globals() -> None:
    """Forget the globals :func:`add_safe_globals` allowed."""
    _ALLOWED.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: Iterable[Any]) -> Iterator[None]:
    """Allow these globals in ``weights_only`` loads inside the block."""
    before = dict(_ALLOWED)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _ALLOWED.clear()
        _ALLOWED.update(before)


def _weights_only_global(module: str, name: str) -> Any:
    # (protocol 2 writes Python 2's names, ``__builtin__.set``: the unpickler maps them back)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    if (module, name) in _ALLOWED:
        return _ALLOWED[(module, name)]
    if (module, name) in _SAFE:
        return pickle.Unpickler.find_class(_NO_FILE, module, name)
    raise pickle.UnpicklingError(
        f"Weights only load failed: {module}.{name} is not allowed (gt.load reads tensors and "
        "plain containers by default; pass weights_only=False for files you trust, or allow it "
        "with gt.serialization.add_safe_globals)"
    )


def _any_global(module: str, name: str) -> Any:
    if module == "torch" or module.startswith("torch."):  # (PyTorch's own classes: GT's twins)
        try:
            return pickle.Unpickler.find_class(_NO_FILE, "gt" + module[len("torch") :], name)
        except (ImportError, AttributeError):
            raise pickle.UnpicklingError(
                f"the checkpoint holds PyTorch's {module}.{name}, which GT does not have (save "
                "its state_dict with PyTorch instead, and load that)"
            ) from None
    return pickle.Unpickler.find_class(_NO_FILE, module, name)


class _WeightsUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global but tensors and plain containers."""

    def find_class(self, module: str, name: str) -> Any:
        return _weights_only_global(module, name)


_NO_FILE = pickle.Unpickler(io.BytesIO(b""))  # (an unpickler whose ``find_class`` we borrow)


def save(obj: Any, f: str | os.PathLike | IO[bytes], pickle_module: Any = None,
         pickle_protocol: int = DEFAULT_PROTOCOL, _use_new_zipfile_serialization: bool = True,
         **_: Any) -> None:  # fmt: skip
    """Write ``obj`` (tensors, state dicts, modules ...) to a path or a binary file object, in
    PyTorch's format (``torch.load`` reads it). ``_use_new_zipfile_serialization=False`` writes
    GT's former format instead (a plain pickle, with ``pickle_module`` and ``pickle_protocol``)."""
    if not _use_new_zipfile_serialization:
        dump = (pickle_module or pickle).dump
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as fh:
                dump(obj, fh, protocol=pickle_protocol)
        else:
            dump(obj, f, protocol=pickle_protocol)
        return
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            archive_format.save_archive(obj, fh)
    else:
        archive_format.save_archive(obj, f)


def load(f: str | os.PathLike | IO[bytes], map_location: Any = None, pickle_module: Any = None,
         *, weights_only: bool = True, mmap: Any = None, **_: Any) -> Any:  # fmt: skip
    """Read what :func:`save` wrote; tensors are uploaded to the current connection.

    Args:
        f: a path or a binary file object.
        map_location: accepted for ported code and ignored (the cluster places data).
        weights_only: only tensors and plain containers (``False``: any pickled object;
            PyTorch's classes in it are read as GT's of the same name).

    Raises:
        pickle.UnpicklingError: with ``weights_only``, the file holds other objects; or the file
            is in PyTorch's legacy format.
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, weights_only, pickle_module)
    if isinstance(f, (bytes, bytearray)):
        return _load(io.BytesIO(f), weights_only, pickle_module)
    return _load(f, weights_only, pickle_module)


def _load(fh: IO[bytes], weights_only: bool, pickle_module: Any) -> Any:
    if not fh.seekable():  # (a pipe: the zip reader seeks)
        fh = io.BytesIO(fh.read())
    head = archive_format.sniff(fh)
    if head.startswith(archive_format.ZIP_MAGIC):
        return archive_format.load_archive(
            fh, _weights_only_global if weights_only else _any_global
        )
    if head == archive_format.LEGACY_MAGIC:
        raise pickle.UnpicklingError(
            "this is a checkpoint in PyTorch's legacy format (before 1.6), which GT does not read: "
            "load it with torch.load and save it again with torch.save (the zip format)"
        )
    if weights_only:
        return _WeightsUnpickler(fh).load()
    return (pickle_module or pickle).load(fh)


__all__ = [
    "DEFAULT_PROTOCOL",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "load",
    "safe_globals",
    "save",
]
