"""An op that runs as one instruction each way: the forward, and a backward instruction that
takes the result's gradient and the input (``layer_norm``'s ``normalize``, ``gelu``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt.grad_mode import is_grad_enabled


def one_instruction_each_way(
    x: Any, op: str, attrs: dict | None, backward_op: str, recorded_grad: Callable[..., Any]
) -> Any:
    """``op`` of tensor ``x`` (with ``attrs``) as one instruction, its gradient one
    ``backward_op`` instruction of ``(g, x)`` with the same attrs, or, when the backward pass is
    recorded (``create_graph``), ``recorded_grad(g, x, attrs)`` built of differentiable ops so
    that it can be differentiated again."""
    out = x._apply(op, [x], attrs)
    if out._node is not None:

        def rule(n: Any, g: Any) -> tuple:
            (saved,) = n.saved
            if is_grad_enabled():
                return (recorded_grad(g, saved, n.attrs),)
            return (g._apply(backward_op, [g, saved], n.attrs, grad=False),)

        out._node.rule = rule
    return out
