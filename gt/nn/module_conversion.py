"""``nn.Module``'s conversions (a mixin of :class:`gt.nn.Module`): dtypes, memory formats and the
device moves PyTorch code makes, which change nothing in GT (placement is the cluster's business).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt import guards
from gt.autograd import no_grad
from gt.ops.layout import restride
from gt.tensor import Tensor

_FLOATING = ("float16", "bfloat16", "float32", "float64")
_COMPLEX = ("complex64", "complex128")


class ModuleConversions:
    """Conversions of a module's parameters (their gradients too) and buffers, in place: the
    Parameter objects stay the same, so an optimizer made before still holds them."""

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Any:
        """PyTorch's: each parameter (in place: the Parameter object stays, and so does its
        gradient's) and each buffer takes the value ``fn(t)``, submodules first. Every conversion
        goes through it, so a module that overrides it (to cast a cache of its own, as rotary
        embeddings do) takes part; a buffer taken out before keeps its old value."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                _take(p, fn(p))
                if p.grad is not None:
                    _take(p.grad, fn(p.grad))
            bufs = self._buffers
            for name, b in bufs.items():
                if b is not None:
                    if getattr(b, "cls_to_become", None) is not None:
                        _take(b, fn(b))  # (an uninitialized buffer stays one, in the dtype)
                    else:
                        bufs[name] = fn(b)
        guards.bump()  # a captured step (gt.hot) holding the old buffers is captured again
        return self

    def _convert(self, fn: Callable[[Tensor], Tensor], kinds: tuple[str, ...] | None) -> Any:
        """:meth:`_apply` of ``fn`` to the tensors of a dtype in ``kinds`` (every one if
        ``None``)."""
        if kinds is None:
            return self._apply(fn)
        return self._apply(lambda t: fn(t) if t.dtype in kinds else t)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """Convert floating-point and complex parameters, gradients and buffers to a dtype, in
        place (devices, such as ``gt.device("cuda")``, are accepted and ignored)."""
        fmt = kwargs.pop("memory_format", None)

        def convert(t: Tensor) -> Tensor:
            if fmt is not None:  # PyTorch converts the 4-d and 5-d ones (bookkeeping in GT)
                restride(t, fmt)
            new = Tensor.to(t, *args, **kwargs)
            if new.dtype not in _FLOATING + _COMPLEX:
                raise TypeError(
                    "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                    f"dtype={new.dtype}"
                )
            return new

        return self._convert(convert, _FLOATING + _COMPLEX)

    def type(self, dst_type: Any) -> Any:
        """Convert every parameter and buffer (integer ones too, as PyTorch does) to
        ``dst_type``."""
        return self._convert(lambda t: Tensor.type(t, dst_type), None)

    def share_memory(self) -> Any:
        """This module (a no-op in GT)."""
        return self

    def float(self) -> Any:
        """Floating-point parameters and buffers to float32."""
        return self._convert(lambda t: Tensor.to(t, "float32"), _FLOATING)

    def double(self) -> Any:
        """Floating-point parameters and buffers to float64."""
        return self._convert(lambda t: Tensor.to(t, "float64"), _FLOATING)

    def half(self) -> Any:
        """Floating-point parameters and buffers to float16."""
        return self._convert(lambda t: Tensor.to(t, "float16"), _FLOATING)

    def cpu(self) -> Any:
        """This module (placement is the cluster's business; a module's own ``_apply`` still
        sees the call, as in PyTorch)."""
        return self._apply(_same)

    def cuda(self, *args: Any, **kwargs: Any) -> Any:
        """This module (placement is the cluster's business; a module's own ``_apply`` still
        sees the call, as in PyTorch)."""
        return self._apply(_same)

    xpu = ipu = mtia = cuda

    def bfloat16(self) -> Any:
        """Floating-point parameters and buffers to bfloat16 (computed by CuPy workers that
        support it)."""
        return self._convert(lambda t: Tensor.to(t, "bfloat16"), _FLOATING)

    def to_empty(self, *, device: Any = None, recurse: bool = True) -> Any:
        """This module: PyTorch moves parameters to ``device`` without copying their values; in
        GT they stay where the cluster keeps them, values included."""
        return self


def _same(t: Tensor) -> Tensor:
    return t


def _take(t: Tensor, new: Tensor) -> None:
    """``t`` takes ``new``'s value (and dtype), keeping its own autograd flags, as PyTorch's
    ``param.data = fn(param)``: what was taken of ``t`` before (a state dict's values, views)
    keeps the old value."""
    if new is not t:
        t.data = new.detach()
