"""``gt.utils``: ``gt.utils.data`` (datasets and loaders), as ``torch.utils``."""

from __future__ import annotations

from gt.utils import data

__all__ = ["data"]
