"""``gt.utils.hooks``, where code written for PyTorch imports ``RemovableHandle`` from (Lightning's
model summary, transformers), with PyTorch's two helpers for hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt.grad_hooks import RemovableHandle

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


def unserializable_hook(f: Callable) -> Callable:
    """Mark ``f`` as a hook that is not to be saved with its tensor (GT saves no hooks)."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor: Any) -> None:
    """PyTorch warns when a tensor with hooks is serialized; GT's checkpoints keep no hooks, so
    there is nothing to warn about."""
