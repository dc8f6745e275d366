"""``gt.nn.grad``: the gradients of a convolution with respect to its input and its weight, as
``torch.nn.grad`` gives them to custom backward functions. Each is the derivative of the
convolution itself (which is linear in both), taken by GT's autograd."""

from __future__ import annotations

from typing import Any

from gt import backprop
from gt.grad_mode import enable_grad
from gt.nn import functional as F


def _wrt_input(conv: Any, input_size: Any, weight: Any, grad_output: Any, **kw: Any) -> Any:
    with enable_grad():
        x = weight.new_zeros(tuple(input_size)).requires_grad_()
        out = conv(x, weight.detach(), None, **kw)
        return backprop.grad(out, x, grad_output)[0]


def _wrt_weight(conv: Any, input: Any, weight_size: Any, grad_output: Any, **kw: Any) -> Any:  # noqa: A002
    with enable_grad():
        w = input.new_zeros(tuple(weight_size)).requires_grad_()
        out = conv(input.detach(), w, None, **kw)
        return backprop.grad(out, w, grad_output)[0]


def _pair(d: int) -> tuple[Any, Any]:
    conv = getattr(F, f"conv{d}d")

    def input_grad(input_size: Any, weight: Any, grad_output: Any, stride: Any = 1,
                   padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:  # fmt: skip
        """The gradient of ``conv{d}d`` with respect to its input."""
        return _wrt_input(conv, input_size, weight, grad_output, stride=stride, padding=padding,
                          dilation=dilation, groups=groups)  # fmt: skip

    def weight_grad(input: Any, weight_size: Any, grad_output: Any, stride: Any = 1,  # noqa: A002
                    padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:  # fmt: skip
        """The gradient of ``conv{d}d`` with respect to its weight."""
        return _wrt_weight(conv, input, weight_size, grad_output, stride=stride, padding=padding,
                           dilation=dilation, groups=groups)  # fmt: skip

    for fn, what in ((input_grad, "input"), (weight_grad, "weight")):
        fn.__name__ = fn.__qualname__ = f"conv{d}d_{what}"
        fn.__doc__ = (fn.__doc__ or "").replace("{d}", str(d))
    return input_grad, weight_grad


conv1d_input, conv1d_weight = _pair(1)
conv2d_input, conv2d_weight = _pair(2)
conv3d_input, conv3d_weight = _pair(3)

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]  # fmt: skip
