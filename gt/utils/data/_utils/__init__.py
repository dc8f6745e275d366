"""``gt.utils.data._utils``: the collate functions and worker information, where
``torch.utils.data._utils`` keeps them (``from torch.utils.data._utils.collate import collate``)."""

from __future__ import annotations

from gt.utils.data._utils import collate, worker

__all__ = ["collate", "worker"]
