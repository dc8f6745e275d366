"""Reverse-mode automatic differentiation on the client, executed on the workers.

Every op whose inputs require grad attaches a :class:`Node` to its output: the primitive's name,
edges to the inputs' nodes (or to leaf tensors, whose ``.grad`` receives the result), the tensors
the derivative needs, and small attributes (:mod:`gt.grad_graph`). :func:`backward` and
:func:`grad` (the walk, :mod:`gt.backprop`) sort the nodes topologically and walk them in
reverse, calling one derivative rule per primitive (the op registry's ``grad``,
:mod:`gt.runtime.ops`). Each rule is written with ordinary tensor ops, so the backward pass is
just more instructions for the workers, and with ``create_graph=True`` it is recorded like any
other computation (higher-order gradients). Gradients of a tensor used several times are summed;
gradients of leaves accumulate across calls until they are reset.

Nodes point at their inputs, never at their outputs, so the graph has no reference cycles and a
tensor's worker memory is freed as soon as the last Python reference to it goes.
"""

from __future__ import annotations

import sys

from gt import custom_function as function
from gt.anomaly import detect_anomaly, set_detect_anomaly
from gt.autograd._engine_modes import (
    is_multithreading_enabled,
    is_view_replay_enabled,
    set_multithreading_enabled,
)
from gt.backprop import RemovableHandle, backward, grad, register_hook
from gt.custom_function import Function, FunctionCtx, once_differentiable
from gt.grad_graph import FLOAT_DTYPES, Node, record
from gt.grad_mode import (
    _mode,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from gt.runtime.ops import Past, sum_to

# `from gt.autograd.function import once_differentiable`, as from torch.autograd.function
sys.modules.setdefault(f"{__name__}.function", function)


def __getattr__(name: str) -> object:
    """``gt.autograd.functional``, ``graph``, ``variable``, ``profiler``, ``forward_ad``, ``Variable`` and
    ``gradcheck`` on first use (importing them here would be a cycle: they need the tensor class,
    which imports this package)."""
    if name in ("functional", "graph", "variable", "profiler", "forward_ad"):
        import importlib  # noqa: PLC0415

        return importlib.import_module(f"{__name__}.{name}")
    if name == "Variable":  # the legacy wrapper (it needs the tensor class too)
        from gt.autograd.variable import Variable  # noqa: PLC0415

        return Variable
    if name in ("gradcheck", "gradgradcheck", "GradcheckError"):  # (they need the tensor class)
        from gt.autograd import _gradcheck  # noqa: PLC0415

        return getattr(_gradcheck, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "detect_anomaly",
    "set_detect_anomaly",
    "FLOAT_DTYPES",
    "Function",
    "FunctionCtx",
    "_mode",  # for gt.tensor and gt.ops.inplace
    "Node",
    "Past",
    "RemovableHandle",
    "backward",
    "enable_grad",
    "function",
    "grad",
    "inference_mode",
    "is_inference_mode_enabled",
    "is_grad_enabled",
    "is_multithreading_enabled",
    "is_view_replay_enabled",
    "no_grad",
    "once_differentiable",
    "record",
    "register_hook",
    "set_grad_enabled",
    "set_multithreading_enabled",
    "sum_to",
]
