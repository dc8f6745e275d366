"""``nn.Module``'s conversions (a mixin of :class:`gt.nn.Module`): dtypes, memory formats and the
device moves PyTorch code makes, which change nothing in GT (placement is the cluster's business).
"""

from __future__ import annotations

from typing import Any

from gt.autograd import no_grad
from gt.ops.inplace import take_value
from gt.ops.layout import restride
from gt.tensor import Tensor


class ModuleConversions:
    """Conversions of a module's floating-point parameters and buffers, in place."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """Convert floating-point parameters and buffers to a dtype, in place (devices, such as
        ``gt.device("cuda")``, are accepted and ignored)."""
        fmt = kwargs.pop("memory_format", None)
        for t in list(self.parameters()) + list(self.buffers()):
            if t.dtype not in ("float16", "float32", "float64"):
                continue
            if fmt is not None:  # PyTorch converts the 4-d and 5-d ones (bookkeeping in GT)
                restride(t, fmt)
            new = Tensor.to(t, *args, **kwargs)
            if new is not t:
                with no_grad():
                    take_value(t, new.detach(), keep_graph=False)
                t.grad = None
        return self

    def type(self, dst_type: Any) -> Any:
        """Convert floating-point parameters and buffers to ``dst_type``."""
        return self.to(dst_type)

    def share_memory(self) -> Any:
        """This module (a no-op in GT)."""
        return self

    def float(self) -> Any:
        """Parameters to float32."""
        return self.to("float32")

    def double(self) -> Any:
        """Parameters to float64."""
        return self.to("float64")

    def half(self) -> Any:
        """Parameters to float16."""
        return self.to("float16")

    def cpu(self) -> Any:
        """This module (placement is the cluster's business)."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Any:
        """This module (placement is the cluster's business)."""
        return self

    def bfloat16(self) -> Any:
        """Parameters to bfloat16 (computed by CuPy workers that support it)."""
        return self.to("bfloat16")

    def to_empty(self, *, device: Any = None, recurse: bool = True) -> Any:
        """This module: PyTorch moves parameters to ``device`` without copying their values; in
        GT they stay where the cluster keeps them, values included."""
        return self
