"""``gt.autograd.functional``: PyTorch's higher-level derivative functions (``vjp``, ``jvp``,
``jacobian``, ``hessian``, ``vhp``, ``hvp``), built on :func:`gt.autograd.grad`.

``jacobian`` takes one reverse pass per output element (``vectorize`` and the forward-mode
strategy are accepted and computed the same way); ``jvp`` and ``hvp`` use the double-backward
trick (a reverse pass through a reverse pass), so every function works on any differentiable op.
Inputs are a tensor or a tuple of tensors, as are outputs; results mirror that nesting. With
``strict=False`` (the default), an input the output does not depend on gets zeros; with
``strict=True`` it raises, as in PyTorch.

:mod:`gt.autograd` does not import this module (the tensor class imports :mod:`gt.autograd`, and
this module needs the tensor class): ``gt.autograd.functional`` is loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt.backprop import grad as _grad
from gt.grad_mode import enable_grad
from gt.ops.shaping import stack
from gt.tensor import Tensor

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(x: Any, what: str, fn: str) -> tuple[bool, tuple]:
    if isinstance(x, Tensor):
        return False, (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return True, tuple(x)
    raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors "
                    f"but the given {what} has type {type(x).__name__}.")  # fmt: skip


def dummy_like(out: Tensor) -> Tensor:
    """The zero cotangent of the double-backward trick for ``out`` (requiring grad where its
    dtype can: an integer output's tangent is zeros)."""
    dummy = out.new_zeros(out.shape)
    return dummy.requires_grad_(True) if dummy.is_floating_point() or dummy.is_complex() else dummy


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    """Fresh leaves that require grad (or the inputs themselves when building a graph)."""
    return tuple(t if create_graph and t.requires_grad else t.detach().requires_grad_(True)
                 for t in inputs)  # fmt: skip


def _grads(outputs: tuple, inputs: tuple, grad_outputs: tuple, create_graph: bool, strict: bool,
           fn: str) -> tuple:  # fmt: skip
    # Only outputs with a graph and inputs that require grad take part: a constant output (a
    # bias's gradient in an HVP) adds nothing, and an integer output's dummy (in the
    # double-backward trick) has no gradient; their entries are zeros, as PyTorch's.
    live_out = [i for i, o in enumerate(outputs) if o.requires_grad]
    live_in = [i for i, x in enumerate(inputs) if x.requires_grad]
    gs: list = [None] * len(inputs)
    if live_out and live_in:
        sub = _grad(tuple(outputs[i] for i in live_out), tuple(inputs[i] for i in live_in),
                    tuple(grad_outputs[i] for i in live_out), retain_graph=True,
                    create_graph=create_graph, allow_unused=True)  # fmt: skip
        for i, g in zip(live_in, sub):
            gs[i] = g
    result = []
    for i, (g, x) in enumerate(zip(gs, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode.")  # fmt: skip
            g = x.new_zeros(x.shape)
        result.append(g if create_graph else g.detach())
    return tuple(result)


def _call(func: Callable, inputs: tuple, fn: str) -> tuple[bool, tuple]:
    out = func(*inputs)
    return _as_tuple(out, "outputs of the user-provided function", fn)


def _shape_like(is_tuple: bool, items: tuple) -> Any:
    return items if is_tuple else items[0]


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:  # fmt: skip
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _call(func, xs, "vjp")
        if v is None:
            if any(o.numel() != 1 for o in outs):
                raise RuntimeError("The vector v can only be None if the user-provided function "
                                   "returns a single Tensor with a single element.")  # fmt: skip
            vs = tuple(o.new_ones(o.shape) for o in outs)
        else:
            vs = _as_tuple(v, "v", "vjp")[1]
        res = _grads(outs, xs, vs, create_graph, strict, "vjp")
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _shape_like(out_tuple, outs), _shape_like(in_tuple, res)


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:  # fmt: skip
    """``(func(inputs), J v)``: the Jacobian-vector product (by the double-backward trick)."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    with enable_grad():
        xs = _prepare(xs, True)
        out_tuple, outs = _call(func, xs, "jvp")
        if v is None:
            if any(x.numel() != 1 for x in xs):
                raise RuntimeError("The vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single "
                                   "element.")  # fmt: skip
            vs = tuple(x.new_ones(x.shape) for x in xs)
        else:
            vs = _as_tuple(v, "v", "jvp")[1]
        dummies = tuple(dummy_like(o) for o in outs)
        g = _grads(outs, xs, dummies, True, strict, "jvp")
        res = _grads(g, dummies, vs, create_graph, strict, "jvp")
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _shape_like(out_tuple, outs), _shape_like(out_tuple, res)


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:  # fmt: skip
    """The Jacobian of ``func`` at ``inputs``: for each output and input, a tensor of shape
    ``output.shape + input.shape`` (nested tuples when either is a tuple)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         f'Hint: If your strategy is "{strategy}", did you mean "reverse-mode"?')  # fmt: skip
    in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _call(func, xs, "jacobian")
        blocks = []
        for o in outs:
            flat = o.reshape(-1)
            rows: list[list] = [[] for _ in xs]
            for k in range(flat.numel()):
                gs = _grads((flat[k],), xs, (None,), create_graph, strict, "jacobian")
                for i, g in enumerate(gs):
                    rows[i].append(g)
            per_input = []
            for i, x in enumerate(xs):
                if rows[i]:
                    j = stack(rows[i], 0).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    j = x.new_zeros(tuple(o.shape) + tuple(x.shape))
                per_input.append(j)
            blocks.append(_shape_like(in_tuple, tuple(per_input)))
    return _shape_like(out_tuple, tuple(blocks))


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:  # fmt: skip
    """The Hessian of a scalar ``func`` at ``inputs`` (``input_i.shape + input_j.shape`` blocks)."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*args: Tensor) -> Any:
        out = func(*args)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "with a single element.")  # fmt: skip
        gs = _grads((out.reshape(()),), args, (None,), True, strict, "hessian")
        return _shape_like(in_tuple, gs)

    return jacobian(gradient, _shape_like(in_tuple, xs), create_graph, strict)


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:  # fmt: skip
    """``(func(inputs), v^T H)`` for a scalar ``func``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vhp")
    with enable_grad():
        xs = _prepare(xs, True)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hvp should contain "
                               "a single element")  # fmt: skip
        vs = (
            _as_tuple(v, "v", "vhp")[1] if v is not None else tuple(x.new_ones(x.shape) for x in xs)
        )
        g = _grads((out.reshape(()),), xs, (None,), True, strict, "vhp")
        res = _grads(g, xs, vs, create_graph, strict, "vhp")
    return (out if create_graph else out.detach()), _shape_like(in_tuple, res)


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:  # fmt: skip
    """``(func(inputs), H v)`` for a scalar ``func`` (equal to :func:`vhp`: H is symmetric)."""
    return vhp(func, inputs, v, create_graph, strict)
