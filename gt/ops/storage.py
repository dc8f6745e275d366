"""Where a tensor would sit in PyTorch's storage: ``data_ptr()``, ``storage_offset()``,
``untyped_storage()``, ``_base`` and the strides of basic-indexing and diagonal views.

A GT tensor's value lives on a worker, so there is no address to report. What PyTorch code does
with addresses is compare them: tied weights are found by ``data_ptr()`` (safetensors and
accelerate compare ``untyped_storage().data_ptr()``), a view is told from a copy by
``x.data_ptr() == y.data_ptr()`` or ``y._base is x``. So each tensor that is not a view gets a
made-up storage address (stable while it lives, distinct from every other live tensor's), and a
view (see :mod:`gt.ops.views`) is placed in its root's storage at the offset and with the strides
PyTorch's view would have: ``x[1:, 2]`` starts ``1 * x.stride(0) + 2`` elements in, ``x.t()``
at the same address. ``p.data = flat[a:b].view_as(p)`` puts ``p`` inside ``flat``.
"""

from __future__ import annotations

from typing import Any

from gt._dtype import _ITEMSIZE
from gt.ops import layout

#: Made-up addresses start here and are 4 KiB apart per live tensor (``id`` is unique while it
#: lives), so that every address a tensor's elements cover is its own.
_ADDRESS_BASE = 0x7F00_0000_0000


def placement(t: Any) -> tuple[Any, int, tuple]:
    """``(root, offset, strides)``: the tensor whose storage ``t`` is in (``t`` itself when it is
    not a live view), where ``t`` starts in it (in elements) and ``t``'s strides."""
    vb = t._vb
    if vb is None and t._proxy:  # (``p.data``: the storage of the tensor it is a handle on)
        t = t._owner
        vb = t._vb
    root = vb[0]() if vb is not None else None
    if root is None or root.shape != vb[3] or t.shape != vb[2]:
        return t, 0, layout.strides_of(t)
    if root._proxy:
        root = root._owner
    shape, strides = tuple(root.shape), layout.strides_of(root)
    offset, size = 0, root.dtype.itemsize
    for kind, data in vb[1]:
        if kind == "key":
            shape, strides, more = layout.key_geometry(shape, strides, data)
            offset += more
        elif kind == "diag":
            shape, strides, more = layout.diag_geometry(shape, strides, data)
            offset += more
        elif kind == "perm":
            shape = tuple(shape[p] for p in data)
            strides = tuple(strides[p] for p in data)
        elif kind == "reshape":
            new = tuple(data)
            strides = layout.view_strides(shape, strides, new) or layout.row_major(new)
            shape = new
        elif kind == "expand":
            lead = len(data) - len(shape)  # (new leading dimensions, and broadcast ones: stride 0)
            strides = (0,) * lead + tuple(
                st if n == data[lead + i] else 0 for i, (n, st) in enumerate(zip(shape, strides))
            )
            shape = tuple(data)
        elif kind == "unfold":
            d, n, step = data
            count = (shape[d] - n) // step + 1
            shape = (*shape[:d], count, *shape[d + 1 :], n)
            strides = (*strides[:d], strides[d] * step, *strides[d + 1 :], strides[d])
        elif kind == "strided":  # (made of a contiguous root only: counted from its start)
            shape, strides, offset = tuple(data[0]), tuple(data[1]), data[2]
        elif kind == "as_real":  # each complex element as two real ones
            shape, strides, offset = (*shape, 2), (*(2 * s for s in strides), 1), 2 * offset
            size //= 2
        elif kind == "as_complex":
            shape, strides, offset = shape[:-1], tuple(s // 2 for s in strides[:-1]), offset // 2
            size *= 2
        elif kind == "dtype":  # counted in the new dtype's elements (PyTorch's view_dtype)
            new = _ITEMSIZE[data]
            if new != size and shape:
                offset = offset * size // new
                strides = (*(s * size // new for s in strides[:-1]), 1)
                shape = (*shape[:-1], shape[-1] * size // new)
            size = new
    return root, offset, layout.strides_of(t)


def address(root: Any) -> int:
    """The made-up address of the storage of ``root`` (a tensor that is not a view)."""
    return _ADDRESS_BASE + (id(root) << 12)


def data_ptr(t: Any) -> int:
    """``t.data_ptr()``: its storage's address plus its offset in bytes (0 when it is empty)."""
    if t.numel() == 0:
        return 0
    root, offset, _ = placement(t)
    return address(root) + offset * t.dtype.itemsize


class UntypedStorage:
    """The storage a tensor is in, as ``untyped_storage()`` describes it: its address, size in
    bytes and device. Two tensors share storage when their storages' ``data_ptr()`` agree."""

    __slots__ = ("_root",)

    def __init__(self, root: Any) -> None:
        self._root = root

    def data_ptr(self) -> int:
        """The storage's address (the same for every view of one tensor)."""
        return address(self._root) if self._root.numel() else 0

    def nbytes(self) -> int:
        """Its size in bytes."""
        return self._root.numel() * self._root.dtype.itemsize

    size = nbytes
    __len__ = nbytes

    def element_size(self) -> int:
        """1: an untyped storage counts bytes."""
        return 1

    @property
    def device(self) -> Any:
        """The device its tensor reports."""
        return self._root.device

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntypedStorage) and other._root is self._root

    def __hash__(self) -> int:
        return id(self._root)

    def __repr__(self) -> str:
        return f"<storage of {self.nbytes()} bytes at {self.data_ptr():#x} (GT: no host copy)>"


class TypedStorage(UntypedStorage):
    """``storage()``: :class:`UntypedStorage` counted in elements of the tensor's dtype."""

    __slots__ = ()

    @property
    def dtype(self) -> Any:
        """The elements' dtype."""
        return self._root.dtype

    def size(self) -> int:  # type: ignore[override]
        """Its size in elements."""
        return self._root.numel()

    __len__ = size

    def element_size(self) -> int:
        """Bytes per element."""
        return self._root.dtype.itemsize

    def untyped(self) -> UntypedStorage:
        """The same storage counted in bytes."""
        return UntypedStorage(self._root)


def base_of(t: Any) -> Any:
    """``t._base``: the tensor a view was taken from (its root), ``None`` for a tensor that is
    not a view. ``detach()`` and ``view(dtype)`` share storage without being views (outside
    autograd), as in PyTorch."""
    vb = t._vb
    if vb is None or any(kind == "detach" or kind == "dtype" for kind, _ in vb[1]):
        return None
    root, _, _ = placement(t)
    return None if root is t else root


__all__ = ["TypedStorage", "UntypedStorage", "address", "base_of", "data_ptr", "placement"]
