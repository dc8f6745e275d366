"""``gt.backends``: the switches ported code sets on ``torch.backends`` (accepted, no effect)."""

from __future__ import annotations

from types import SimpleNamespace

#: ``torch.backends.cudnn.benchmark = True`` and friends: kept, not acted on.
cudnn = SimpleNamespace(benchmark=False, deterministic=False, enabled=True, allow_tf32=True)
#: ``torch.backends.mps.is_available()``: False.
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False))

__all__ = ["cuda", "cudnn", "mps"]
