"""Activations with PyTorch's derivatives where a composition's would differ.

``hardswish`` is one node (a private :class:`~gt.custom_function.Function`) whose rule is
PyTorch's ``hardswish_backward``. ``hardtanh`` (and ``relu6``, and inside ``hardsigmoid``) runs as
a ``clamp``, whose gradient passes at the bounds, and ``leaky_relu`` as a ``maximum``, whose
gradient splits ties: their derivatives, as PyTorch computes them, are set as those nodes' rules
(``node.rule``), with PyTorch's second derivatives and node names."""

from __future__ import annotations

from typing import Any

from gt import shapes as S
from gt.custom_function import Function
from gt.grad_graph import label, zero_link
from gt.grad_mode import is_grad_enabled
from gt.ops.arith import where
from gt.tensor import Tensor


def clamped_hardtanh(
    input: Tensor, min_val: float, max_val: float, nan_passes: bool = True
) -> Tensor:
    """``hardtanh``'s values as one clamp, its derivative as the node's rule
    (:func:`hardtanh_rule`). Integer tensors stay integer, their bounds cut toward zero, as
    PyTorch's kernel casts them."""
    if input.dtype in S.INT_DTYPES:
        if input.dtype.startswith("uint") and (min_val < 0 or max_val < 0):
            raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
        min_val, max_val = int(min_val), int(max_val)
    out = input.clamp(min_val, max_val)  # (one pass: a where on a random mask took ten times it)
    if out._node is not None:  # clamp's gradient passes at the bounds, hardtanh's does not
        out._node.rule = hardtanh_rule(min_val, max_val, nan_passes)
    return out


def hardtanh_rule(lo: float, hi: float, nan_passes: bool) -> Any:
    """``hardtanh``'s derivative on a ``clamp`` node: ``g`` strictly inside the bounds, else 0
    (as PyTorch's backward tests it: for hardtanh a NaN is not outside and keeps its gradient;
    for hardsigmoid, ``nan_passes=False``, it is not inside and gets none); recorded, a gradient
    that depends on the input with a zero derivative, as PyTorch's ``hardtanh_backward`` (inside
    ``hardswish`` and ``hardsigmoid``, whose own rules say what comes next, not linked)."""

    def rule(n: Any, g: Tensor) -> tuple:
        x = n.saved[0]
        if is_grad_enabled() and n.label is not None:  # (hardtanh itself, not a composite's)
            g = zero_link(n, g, inputs=(0,))
        keep = ~((x <= lo) | (x >= hi)) if nan_passes else (x > lo) & (x < hi)
        return (_second_order_name(n, where(keep, g, 0.0)),) + (None,) * (len(n.parents) - 1)

    return rule


def leaky_relu_rule(slope: float) -> Any:
    """``leaky_relu``'s derivative on its ``maximum`` node: PyTorch's ``x > 0 ? g : g * slope``,
    all of it to ``x`` (none through ``x * slope``); recorded, with a zero second derivative."""

    def rule(n: Any, g: Tensor) -> tuple:
        x = n.saved[0]
        if is_grad_enabled():
            g = zero_link(n, g, inputs=(0,))
        return _second_order_name(n, where(x > 0, g, g * slope)), None

    return rule


def _second_order_name(n: Any, grad: Tensor) -> Tensor:
    """A recorded gradient named as PyTorch's backward op (``LeakyReluBackwardBackward0``), where
    the node carries the op's name (not inside a composite such as ``hardsigmoid``)."""
    if not grad.requires_grad or getattr(n, "label", None) is None:
        return grad
    return label(grad, n.name().removesuffix("0") + "Backward0")


class _Hardswish(Function):
    """``hardswish`` as PyTorch computes it: ``x * relu6(x + 3) / 6`` multiplied, then divided
    (``x * (relu6(x + 3) * (1 / 6))`` differed in the last bit for 43 % of random float32
    inputs), and one node whose derivative is PyTorch's ``hardswish_backward``:
    0 for ``x <= -3``, ``g`` from 3 up, else ``g * (x / 3 + 0.5)`` (NaN for a NaN). Written in
    differentiable ops, it gives PyTorch's second derivative, ``1/3`` strictly inside."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return (x * (x + 3.0).clamp(0.0, 6.0)) / 6.0

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        # (PyTorch's vectorised kernel's order, which nearly every element takes: a NaN gets
        # the formula, NaN; its scalar tail loop would give it ``g``)
        return where(x <= -3.0, 0.0, where(x >= 3.0, g, g * (x / 3.0 + 0.5)))


def hardswish_node(x: Tensor) -> Tensor:
    """``hardswish`` of a float32 or float64 tensor (see :class:`_Hardswish`)."""
    return label(_Hardswish.apply(x), "HardswishBackward0")
