"""``gt.signal``: naming parts of a program for placement (``context``, ``tensor``, see
:mod:`gt.signal_scope`), and, under PyTorch's name ``torch.signal``, the window functions
(``gt.signal.windows``)."""

from __future__ import annotations

from gt import signal_windows as windows
from gt.signal_scope import backward_context, capture, context, current, tensor

__all__ = ["backward_context", "capture", "context", "current", "tensor", "windows"]
