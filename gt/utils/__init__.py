"""``gt.utils``: ``gt.utils.data`` (datasets and loaders) and ``gt.utils.checkpoint`` (activation
checkpointing), as ``torch.utils``."""

from __future__ import annotations

from gt.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
