"""PyTorch's checkpoint format, read and written without PyTorch: what ``torch.save`` writes (since
1.6) and ``torch.load`` reads, so checkpoints move both ways between the two libraries.

The file is an uncompressed zip archive. Its ``<prefix>/data.pkl`` is a protocol-2 pickle in which
each tensor is ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
hooks)`` (``_rebuild_tensor_v3`` with a trailing dtype for the dtypes that have no typed storage
class, such as uint16), and each storage a persistent id ``("storage", torch.FloatStorage, key,
location, numel)`` whose bytes are the entry ``<prefix>/data/<key>``; ``<prefix>/byteorder`` says
their byte order. Parameters wrap their tensor in ``torch._utils._rebuild_parameter``.

Reading maps those globals to GT's (a storage becomes a host array; a tensor the contiguous copy
of its strided view, uploaded to the current connection; ``torch.Size``, ``torch.device`` and the
dtypes their GT equals). Two tensors viewing one storage load as two tensors (GT uploads each).
Writing emits the same globals by name (a pickler that writes ``GLOBAL`` opcodes for them, so
PyTorch need not be importable) and one storage per tensor, in the tensor's own dtype, row-major.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import sys
import zipfile
from typing import IO, Any

import numpy as np

from gt._dtype import dtype as _GtDtype
from gt._dtype import name_of

#: How the file starts: a zip archive (PyTorch's format since 1.6, and GT's) ...
ZIP_MAGIC = b"PK\x03\x04"
#: ... or PyTorch's legacy format (a pickled magic number first), which GT does not read.
LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"

#: PyTorch's typed storage classes and the dtype of their elements.
_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}  # fmt: skip
_STORAGE_OF = {dtype: name for name, dtype in _STORAGES.items()}
_DTYPES = frozenset((*_STORAGES.values(), "uint16", "uint32", "uint64"))


def _np_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes  # noqa: PLC0415 - only checkpoints holding bfloat16 need it

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class _StorageKind:
    """What ``torch.FloatStorage`` (or ``torch.storage.UntypedStorage``, bytes) unpickles to."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype


# ------------------------------------------------------------------------------------ reading
def _tensor(
    storage: np.ndarray, offset: int, size: tuple, stride: tuple, requires_grad: bool
) -> Any:
    from gt.session import get_connection  # noqa: PLC0415 - the API level imports this module
    from gt.tensor import upload  # noqa: PLC0415

    size = tuple(int(s) for s in size)
    if 0 in size:
        view = np.zeros(size, storage.dtype)
    else:
        item = storage.itemsize
        view = np.lib.stride_tricks.as_strided(
            storage[int(offset) :], shape=size, strides=tuple(int(s) * item for s in stride)
        )
    t = upload(get_connection(), np.ascontiguousarray(view).reshape(size))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor_v2(storage: Any, offset: int, size: tuple, stride: tuple, requires_grad: bool,
                       hooks: Any, metadata: Any = None) -> Any:  # fmt: skip
    return _tensor(storage, offset, size, stride, requires_grad)


def _rebuild_tensor_v3(storage: Any, offset: int, size: tuple, stride: tuple, requires_grad: bool,
                       hooks: Any, dtype: Any, metadata: Any = None) -> Any:  # fmt: skip
    typed = storage.view(_np_dtype(str.__str__(dtype)))  # (an untyped storage is its bytes)
    return _tensor(typed, offset, size, stride, requires_grad)


def _rebuild_parameter(data: Any, requires_grad: bool, hooks: Any, state: Any = None) -> Any:
    from gt.nn.module import Parameter  # noqa: PLC0415

    p = Parameter(data, requires_grad)
    for key, value in (state or {}).items():
        setattr(p, key, value)
    return p


def _rebuild_from_type_v2(func: Any, new_type: type, args: tuple, state: Any) -> Any:
    t = func(*args)
    for key, value in (state or {}).items():  # (attributes a program set on the tensor)
        setattr(t, key, value)
    return t


def _get_layout(name: str) -> str:
    return name.rpartition(".")[2]  # ("torch.sparse_coo" -> "sparse_coo")


def _rebuild_sparse_tensor(layout: Any, data: tuple) -> Any:
    name = str(layout)
    if name == "sparse_coo":
        from gt.sparse import SparseTensor  # noqa: PLC0415

        return SparseTensor(
            data[0], data[1], tuple(data[2]), bool(data[3]) if len(data) > 3 else False
        )
    if name == "sparse_csr":
        from gt.sparse_csr import SparseCsrTensor  # noqa: PLC0415

        return SparseCsrTensor(data[0], data[1], data[2], tuple(data[3]))
    raise pickle.UnpicklingError(f"a sparse tensor of layout {name}, which GT does not have")


def _torch_names() -> dict[tuple[str, str], Any]:
    """PyTorch's globals in a checkpoint, and what each reads as here."""
    from gt._dtype import BY_NAME  # noqa: PLC0415
    from gt.nn.module import Parameter  # noqa: PLC0415
    from gt.ops.device import device  # noqa: PLC0415
    from gt.ops.typeinfo import Size  # noqa: PLC0415
    from gt.tensor import Tensor  # noqa: PLC0415

    names: dict[tuple[str, str], Any] = {
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
        ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
        ("torch.serialization", "_get_layout"): _get_layout,
        ("torch._tensor", "Tensor"): Tensor,
        ("torch", "Tensor"): Tensor,
        ("torch.nn.parameter", "Parameter"): Parameter,
        ("torch", "Size"): Size,
        ("torch", "device"): device,
        ("torch.storage", "UntypedStorage"): _StorageKind("uint8"),
    }
    names.update({("torch", k): _StorageKind(v) for k, v in _STORAGES.items()})
    names.update({("torch", d): BY_NAME[d] for d in _DTYPES})
    return names


class _ArchiveUnpickler(pickle.Unpickler):
    """Reads ``data.pkl``: PyTorch's globals as GT's, storages from the archive's entries, and
    every other global through ``find_other`` (the ``weights_only`` rules, or any)."""

    def __init__(self, fh: IO[bytes], archive: zipfile.ZipFile, prefix: str, swap: bool,
                 find_other: Any):  # fmt: skip
        super().__init__(fh)
        self._archive, self._prefix, self._swap = archive, prefix, swap
        self._find_other = find_other
        self._names = _torch_names()
        self._storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:
        found = self._names.get((module, name))
        return found if found is not None else self._find_other(module, name)

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id in a checkpoint: {pid!r}")
        kind, key = pid[1], str(pid[2])
        if not isinstance(kind, _StorageKind):
            raise pickle.UnpicklingError(f"unsupported storage type in a checkpoint: {kind!r}")
        if key not in self._storages:
            raw = self._archive.read(f"{self._prefix}data/{key}")
            dtype = _np_dtype(kind.dtype)
            arr = np.frombuffer(raw, dtype=dtype.newbyteorder(">") if self._swap else dtype)
            self._storages[key] = arr.astype(dtype) if self._swap else arr
        return self._storages[key]


def load_archive(fh: IO[bytes], find_other: Any) -> Any:
    """The object in a zip checkpoint (PyTorch's, or one :func:`save_archive` wrote)."""
    with zipfile.ZipFile(fh) as archive:
        names = archive.namelist()
        pkl = next((n for n in names if n.endswith("data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise pickle.UnpicklingError("a zip file without a data.pkl: not a checkpoint")
        prefix = pkl[: -len("data.pkl")]
        order = (archive.read(prefix + "byteorder").decode().strip()
                 if prefix + "byteorder" in names else "little")  # fmt: skip
        swap = order != sys.byteorder
        body = io.BytesIO(archive.read(pkl))
        return _ArchiveUnpickler(body, archive, prefix, swap, find_other).load()


# ------------------------------------------------------------------------------------ writing
class _Global:
    """A global of PyTorch's, written by name (``torch._utils._rebuild_tensor_v2``)."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:  # (the pickler wants a callable; it is only named)
        raise TypeError(f"{self.module}.{self.name} is written by name, not called")


_V2 = _Global("torch._utils", "_rebuild_tensor_v2")
_V3 = _Global("torch._utils", "_rebuild_tensor_v3")
_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_SIZE, _DEVICE = _Global("torch", "Size"), _Global("torch", "device")
_UNTYPED = _Global("torch.storage", "UntypedStorage")
_SPARSE = _Global("torch._utils", "_rebuild_sparse_tensor")
_GET_LAYOUT = _Global("torch.serialization", "_get_layout")
_GLOBALS: dict[str, _Global] = {}


def _named(module: str, name: str) -> _Global:
    key = f"{module}.{name}"
    if key not in _GLOBALS:
        _GLOBALS[key] = _Global(module, name)
    return _GLOBALS[key]


class _Layout:
    """A sparse layout, written as ``torch.serialization._get_layout("torch.sparse_coo")``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class _Plain:
    """A tensor to write as a plain one (the data of a Parameter)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any):
        self.tensor = tensor


class _ArchivePickler(pickle._Pickler):  # (the Python pickler: it lets ``save`` be extended)
    """Writes ``data.pkl``: plain tensors and parameters as PyTorch's, their bytes as entries."""

    def __init__(self, fh: IO[bytes], archive: zipfile.ZipFile, prefix: str):
        super().__init__(fh, protocol=2)
        self._archive, self._prefix, self._count = archive, prefix, 0
        # (the classes it rewrites, looked up once: ``reducer_override`` sees every object)
        from gt.nn.module import Parameter  # noqa: PLC0415 - gt.nn builds on this layer's peers
        from gt.ops.device import device  # noqa: PLC0415
        from gt.ops.typeinfo import Size  # noqa: PLC0415
        from gt.sparse import SparseTensor  # noqa: PLC0415
        from gt.sparse_csr import SparseCsrTensor  # noqa: PLC0415
        from gt.tensor import DataView, Tensor  # noqa: PLC0415

        self._parameter, self._device, self._size = Parameter, device, Size
        self._coo, self._csr, self._plain_kinds = SparseTensor, SparseCsrTensor, (Tensor, DataView)

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if type(obj) is _GtDtype and str.__str__(obj) in _DTYPES:
            obj = _named("torch", str.__str__(obj))  # (a dtype: PyTorch's, by name)
        if type(obj) is _Global:
            if self.memo.get(id(obj)) is not None:
                self.write(self.get(self.memo[id(obj)][0]))
                return
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            self.memoize(obj)
            return
        super().save(obj, save_persistent_id)

    def persistent_id(self, obj: Any) -> Any:
        return obj if type(obj) is tuple and len(obj) == 5 and obj[0] == "storage" and (
            type(obj[1]) is _Global) else None  # fmt: skip

    def reducer_override(self, obj: Any) -> Any:
        kind, Size = type(obj), self._size  # noqa: N806 - the class

        if kind is _Plain:
            return self._tensor(obj.tensor)
        if kind is _Layout:
            return (_GET_LAYOUT, (obj.name,))
        if kind is self._coo:
            # (detached: a loaded sparse tensor does not require grad, as PyTorch's)
            data = (obj._indices(), obj._values().detach(), Size(obj.shape), obj.is_coalesced())
            return (_SPARSE, (_Layout("torch.sparse_coo"), data))
        if kind is self._csr:
            data = (obj.crow_indices(), obj.col_indices(), obj.values().detach(), Size(obj.shape))
            return (_SPARSE, (_Layout("torch.sparse_csr"), data))
        if kind is self._parameter and not obj.__dict__:
            return (_PARAMETER, (_Plain(obj), obj.requires_grad, collections.OrderedDict()))
        if kind in self._plain_kinds and not obj.__dict__:
            return self._tensor(obj)
        if kind is Size:
            return (_SIZE, (tuple(obj),))
        if kind is self._device:
            return (_DEVICE, (str(obj),))
        return NotImplemented

    def _tensor(self, t: Any) -> tuple:
        value = t.detach().numpy()
        data = np.ascontiguousarray(value).reshape(value.shape)  # (0-d stays 0-d)
        dtype, key = name_of(t.dtype), str(self._count)
        self._count += 1
        write_entry(self._archive, f"{self._prefix}data/{key}", data.tobytes(), align=True)
        shape = tuple(int(s) for s in data.shape)
        strides = _row_major(shape)  # (the bytes are written row-major)
        hooks = collections.OrderedDict()
        if dtype in _STORAGE_OF:
            storage = ("storage", _named("torch", _STORAGE_OF[dtype]), key, "cpu", data.size)
            return (_V2, (storage, 0, shape, strides, t.requires_grad, hooks))
        storage = ("storage", _UNTYPED, key, "cpu", data.nbytes)
        return (_V3, (storage, 0, shape, strides, t.requires_grad, hooks, _named("torch", dtype)))


def _row_major(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def write_entry(archive: zipfile.ZipFile, name: str, payload: bytes, align: bool = False) -> None:
    """One stored (uncompressed) entry; ``align``: its data starts at a multiple of 64 bytes, as
    PyTorch's writer places storages (for memory-mapped loading)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    if align and archive.fp is not None:
        start = archive.fp.tell() + 30 + len(name.encode()) + 4  # (header, name, extra's head)
        pad = -start % 64
        info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    archive.writestr(info, payload)


def save_archive(obj: Any, fh: IO[bytes], prefix: str = "archive") -> None:
    """Write ``obj`` to ``fh`` in PyTorch's zip format (see the module's docstring)."""
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as archive:
        body = io.BytesIO()
        _ArchivePickler(body, archive, f"{prefix}/").dump(obj)
        write_entry(archive, f"{prefix}/data.pkl", body.getvalue())
        write_entry(archive, f"{prefix}/byteorder", sys.byteorder.encode())
        write_entry(archive, f"{prefix}/.format_version", b"1")
        write_entry(archive, f"{prefix}/.storage_alignment", b"64")
        write_entry(archive, f"{prefix}/version", b"3\n")
        write_entry(archive, f"{prefix}/.data/serialization_id", os.urandom(20).hex().encode())


def sniff(fh: IO[bytes]) -> bytes:
    """The first bytes of a file object (put back for the reader)."""
    head = fh.read(len(LEGACY_MAGIC))
    fh.seek(-len(head), io.SEEK_CUR)
    return head


__all__ = ["LEGACY_MAGIC", "ZIP_MAGIC", "load_archive", "save_archive", "sniff", "write_entry"]
