"""``gt.utils``: ``gt.utils.data`` (datasets and loaders), ``gt.utils.checkpoint`` (activation
checkpointing), ``gt.utils.hooks`` and ``gt.utils._pytree``, as ``torch.utils``."""

from __future__ import annotations

from gt.utils import _pytree, checkpoint, data, hooks  # noqa: F401 - (torch.utils._pytree)

__all__ = ["checkpoint", "data", "hooks"]
