"""``gt.autograd.profiler``: the older path to the profiler, as ``torch.autograd.profiler``.

Training code written against it (StyleGAN2-ADA's loss phases, fairseq, older examples) wraps
blocks in ``torch.autograd.profiler.record_function(name)`` and profiles with
``torch.autograd.profiler.profile(enabled=...)``. ``record_function`` is
:class:`gt.profiler.record_function` itself; ``profile`` is :class:`gt.profiler.profile` with the
legacy signature (``enabled`` first and positional). ``emit_nvtx`` and ``emit_itt`` are contexts
that change nothing (GT's own timelines already show every instruction).
"""

from __future__ import annotations

import contextlib
from typing import Any

from gt import profiler as _profiler
from gt.profiler import record_function

__all__ = ["emit_itt", "emit_nvtx", "profile", "record_function"]


class profile(_profiler.profile):  # noqa: N801 - PyTorch's name
    """``torch.autograd.profiler.profile(enabled=True, *, use_cuda=False, record_shapes=False,
    ...)``: :class:`gt.profiler.profile` (the keyword arguments are accepted and ignored there)."""

    def __init__(self, enabled: bool = True, **kwargs: Any) -> None:
        super().__init__(enabled=enabled, **kwargs)


class emit_nvtx(contextlib.nullcontext):  # noqa: N801 - PyTorch's name
    """``torch.autograd.profiler.emit_nvtx(enabled=True, record_shapes=False)``: no effect."""

    def __init__(self, enabled: bool = True, record_shapes: bool = False) -> None:
        super().__init__()


emit_itt = emit_nvtx
