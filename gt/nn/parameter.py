"""``gt.nn.parameter``: where code written for PyTorch imports ``Parameter`` and the lazy
placeholders from (``from torch.nn.parameter import Parameter, UninitializedParameter``)."""

from __future__ import annotations

from gt.nn.buffer import Buffer
from gt.nn.module import Parameter
from gt.nn.uninitialized import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["Buffer", "Parameter", "UninitializedBuffer", "UninitializedParameter", "is_lazy"]
