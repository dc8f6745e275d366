"""``UninitializedParameter`` and ``UninitializedBuffer``: the placeholders a lazy module holds
until its first input tells it the sizes (see :mod:`gt.nn.lazy`).

``materialize`` gives the placeholder a value of the given shape in place and turns it into a
``Parameter`` (a ``Buffer``), so the object stays the same: an optimizer made before the first call
holds the parameter that is trained. Unlike PyTorch, a placeholder is an empty tensor of shape
``(0,)`` rather than an object on which every operation raises.
"""

from __future__ import annotations

from typing import Any

from gt.autograd import no_grad
from gt.factories import empty
from gt.nn.buffer import Buffer
from gt.nn.module import Parameter
from gt.ops.inplace import take_value
from gt.tensor import Tensor


def _take(t: Tensor, value: Tensor) -> None:
    with no_grad():
        take_value(t, value.detach(), keep_graph=False)
    t.grad = None


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (``materialize`` gives it one).

    Args:
        requires_grad: whether the parameter, once materialized, is trained.
        dtype: the dtype ``materialize`` uses by default (float32).
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None):
        super().__init__(empty(0, dtype=dtype), requires_grad)

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Become a ``Parameter`` of ``shape`` (uninitialized values, ``dtype`` by default this
        placeholder's), in place."""
        _take(self, empty(*_dims(shape), dtype=dtype or self.dtype))
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedBuffer(Buffer):
    """A buffer whose shape is not known yet (``materialize`` gives it one).

    Args:
        requires_grad: whether the buffer requires grad.
        dtype: the dtype ``materialize`` uses by default (float32).
        persistent: whether the buffer is part of ``state_dict``.
    """

    __slots__ = ()
    cls_to_become = Tensor  # (a plain tensor once materialized, as PyTorch's)

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None,
                 persistent: bool = True):  # fmt: skip
        super().__init__(empty(0, dtype=dtype, requires_grad=requires_grad), persistent=persistent)

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Become a buffer of ``shape`` (``dtype`` by default this placeholder's), in place: a
        plain tensor that is still an ``nn.Buffer`` to ``isinstance``, as PyTorch's."""
        _take(self, empty(*_dims(shape), dtype=dtype or self.dtype))
        _become(self)

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"


class _NonPersistentUninitializedBuffer(UninitializedBuffer):
    """An ``UninitializedBuffer`` made with ``persistent=False``."""

    __slots__ = ()
    _persistent = False
    cls_to_become = Tensor


UninitializedBuffer._twin = _NonPersistentUninitializedBuffer
_NonPersistentUninitializedBuffer._twin = UninitializedBuffer


def _dims(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def fill_placeholder(t: Tensor, value: Tensor) -> None:
    """Materialize the placeholder ``t`` with ``value`` (taken over; its shape and dtype)."""
    _take(t, value)
    _become(t)


def _become(t: Tensor) -> None:
    """The class a materialized placeholder takes (a buffer stays an ``nn.Buffer`` to
    ``isinstance``)."""
    was_buffer = isinstance(t, UninitializedBuffer)
    t.__class__ = t.cls_to_become
    if was_buffer:
        t.__dict__["_is_buffer"] = True


def is_lazy(t: Any) -> bool:
    """Whether ``t`` is a placeholder still waiting for its shape."""
    return isinstance(t, (UninitializedParameter, UninitializedBuffer))


__all__ = ["UninitializedBuffer", "UninitializedParameter"]
