"""``gt.backends``: the switches ported code sets on ``torch.backends`` (accepted, no effect)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

#: ``torch.backends.cudnn.benchmark = True`` and friends: kept, not acted on.
cudnn = SimpleNamespace(benchmark=False, deterministic=False, enabled=True, allow_tf32=True,
                        is_available=lambda: False, version=lambda: None)  # fmt: skip
#: ``torch.backends.mps.is_available()``: False.
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False), is_built=lambda: False)

# ``import torch.backends.cudnn as cudnn`` (as common as the attribute)
for _name, _part in (("cudnn", cudnn), ("mps", mps), ("cuda", cuda)):
    sys.modules.setdefault(f"{__name__}.{_name}", _part)  # type: ignore[arg-type]

__all__ = ["cuda", "cudnn", "mps"]
