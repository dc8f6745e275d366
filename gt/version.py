"""``gt.version``: PyTorch's ``torch.version`` (the build's version strings), for GT.

``cuda``, ``hip``, ``rocm`` and ``xpu`` are None as in a CPU build of PyTorch: the user's process
owns no accelerator (GT's workers choose their own devices, see :mod:`gt.cuda`).
"""

from __future__ import annotations

__version__ = "0.1.0"
debug = False
cuda: str | None = None
git_version = "Unknown"
hip: str | None = None
rocm: str | None = None
xpu: str | None = None

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]
