"""``gt.nn.Buffer``: a tensor that a module registers as a buffer when it is assigned to one of the
module's attributes (``self.stats = nn.Buffer(t)``), as ``torch.nn.Buffer`` does (PyTorch 2.5+).

Assigning a plain tensor makes a plain attribute; ``register_buffer`` registers any tensor. A
``Buffer`` records whether it is ``persistent`` (kept in ``state_dict``); once registered it is a
plain tensor (its persistence is the module's), that ``isinstance(t, nn.Buffer)`` still knows, as
in PyTorch. GT tensors have fixed
slots (so that copies and pickles can set their class), so the flag is the class: a non-persistent
buffer is a ``_NonPersistentBuffer``, a ``Buffer`` subclass.
"""

from __future__ import annotations

from gt.factories import empty
from gt.tensor import Tensor


class _BufferMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        # (a registered buffer is a plain tensor, as in PyTorch, and still an ``nn.Buffer``)
        if cls is Buffer and isinstance(obj, Tensor) and "_is_buffer" in obj.__dict__:
            return True
        return super().__instancecheck__(obj)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor that is a module's state but not a parameter (``running_mean`` of BatchNorm).

    Args:
        data: the value (a tensor; an empty one by default); the buffer takes over a handle on
            it, detached from autograd but keeping ``data.requires_grad``.
        persistent: whether the buffer is part of the module's ``state_dict``.
    """

    __slots__ = ()
    _persistent = True

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer expects a Tensor, got {type(data).__name__}")
        alias = data.detach()
        super().__init__(alias._conn, alias.id, alias.shape, alias.dtype)
        alias.id = None  # this buffer holds the handle now
        self.persistent = persistent
        if data.requires_grad:
            self.requires_grad_(True)

    @property
    def persistent(self) -> bool:
        """Whether the buffer is part of its module's ``state_dict`` (when assigned to one)."""
        return type(self)._persistent

    @persistent.setter
    def persistent(self, value: bool) -> None:
        if bool(value) != type(self)._persistent:
            self.__class__ = type(self)._twin


class _NonPersistentBuffer(Buffer):
    """A ``Buffer`` made with ``persistent=False``."""

    __slots__ = ()
    _persistent = False


Buffer._twin, _NonPersistentBuffer._twin = _NonPersistentBuffer, Buffer


__all__ = ["Buffer"]
