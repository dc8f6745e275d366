"""What the op mixins need to know about :class:`gt.Tensor` without importing it.

:class:`TensorBase` is the first base class of ``gt.Tensor``: the mixins in this package recognise
tensors with ``isinstance(x, TensorBase)`` and make new ones through the tensor's own methods
(``_apply``, ``_create``, ``new_tensor`` ...), so nothing here imports :mod:`gt.tensor` (which
imports these mixins).
"""

from __future__ import annotations

from typing import Any


class TensorBase:
    """The base class of every ``gt.Tensor`` (and of nothing else)."""

    __slots__ = ()


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a ``gt.Tensor`` (PyTorch's ``torch.is_tensor``)."""
    return isinstance(x, TensorBase)


def immediate(v: Any) -> Any:
    """A Python number as an instruction argument (a bare int would be a tensor id: ``[v]``)."""
    return [v] if type(v) is int else v
