"""``gt.autograd.gradcheck`` and ``gradgradcheck``: PyTorch's finite-difference checks of a
function's backward pass.

Both follow PyTorch's slow mode: the numerical Jacobian by central differences (each input element
set to ``x - eps`` and ``x + eps``, ``(f(x + eps) - f(x - eps)) / (2 eps)``), the analytical one
row by row from :func:`gt.autograd.grad` with one-hot ``grad_outputs`` (computed twice to check the
backward is reentrant), compared with ``allclose(analytical, numerical, rtol, atol)`` per output and
input. A mismatch raises :class:`GradcheckError` with PyTorch's message, or returns ``False`` with
``raise_exception=False``. ``fast_mode`` is accepted and runs the same slow check;
``check_forward_ad`` compares the same Jacobian (GT's forward mode is built on the double-backward
trick); ``check_batched_grad`` is accepted and not run. ``check_undefined_grad`` runs the backward
with undefined output gradients, as PyTorch's: a ``gt.autograd.Function`` that does not
materialize gradients gets ``None`` for them, and a backward that fails (a ``RuntimeError``) or
gives a nonzero gradient fails the check.

:mod:`gt.autograd` loads this module on first use of ``gradcheck`` (it needs the tensor class).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from gt.backprop import _topo_order, _Walk
from gt.backprop import grad as _grad
from gt.custom_function import _backward_rule, _OutputGrads, _select_rule
from gt.factories import rand, zeros
from gt.grad_graph import FLOAT_DTYPES, Node
from gt.grad_mode import enable_grad, no_grad
from gt.ops.shaping import stack
from gt.tensor import Tensor

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """A gradient check failed (as ``torch.autograd.gradcheck.GradcheckError``)."""


def _as_tuple(x: Any) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _diff_inputs(inputs: tuple) -> list[int]:
    return [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]


def _float_outputs(outputs: tuple) -> list[int]:
    return [i for i, o in enumerate(outputs) if isinstance(o, Tensor) and o.dtype in FLOAT_DTYPES]


def _numerical_jacobians(func: Callable, inputs: tuple, diff: list[int], out_idx: list[int],
                         eps: float) -> list[list[Tensor]]:  # fmt: skip
    """``[output][input]`` -> a ``(input.numel(), output.numel())`` Jacobian by central
    differences, as PyTorch perturbs one input element at a time."""
    cols: list[list[list[Tensor]]] = [[[] for _ in diff] for _ in out_idx]
    for d, i in enumerate(diff):
        x = inputs[i]
        base = x.detach()
        for j in range(x.numel()):
            v = zeros(x.numel(), dtype=x.dtype)
            v[j] = eps
            v = v.reshape(x.shape)
            outs = []
            for sign_v in (base - v, base + v):
                args = list(inputs)
                args[i] = sign_v.requires_grad_(True)
                outs.append(_as_tuple(func(*args)))
            for k, o in enumerate(out_idx):
                a, b = outs[0][o], outs[1][o]
                cols[k][d].append(((b - a) / (2 * eps)).detach().reshape(-1))
    return [[stack(c, 0) if c else None for c in per_out] for per_out in cols]


def _analytical_jacobian(output: Tensor, inputs: tuple, diff: list[int]) -> list[Tensor]:
    """``[input]`` -> ``(input.numel(), output.numel())`` from one backward pass per output
    element."""
    xs = [inputs[i] for i in diff]
    flat_n = output.numel()
    cols: list[list[Tensor]] = [[] for _ in xs]
    for k in range(flat_n):
        g_out = zeros(flat_n, dtype=output.dtype)
        g_out[k] = 1.0
        g_out = g_out.reshape(output.shape)
        if output.requires_grad:
            gs = _grad((output,), xs, (g_out,), retain_graph=True, allow_unused=True)
        else:
            gs = (None,) * len(xs)
        for d, (g, x) in enumerate(zip(gs, xs)):
            cols[d].append((x.new_zeros(x.shape) if g is None else g.detach()).reshape(-1))
    return [stack(c, 1) if c else zeros(x.numel(), 0, dtype=x.dtype)
            for c, x in zip(cols, xs)]  # fmt: skip


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:  # fmt: skip
    """Check ``func``'s gradients at ``inputs`` against finite differences (PyTorch's
    ``torch.autograd.gradcheck``); ``True`` when they match."""
    tupled = _as_tuple(inputs)
    diff = _diff_inputs(tupled)
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")  # fmt: skip
    for i in diff:
        if tupled[i].dtype not in ("float64", "complex128"):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex. ", stacklevel=2)  # fmt: skip
    with enable_grad():
        outputs = _as_tuple(func(*tupled))
    out_idx = _float_outputs(outputs)
    if not check_backward_ad and not check_forward_ad:
        return True
    with enable_grad():
        numerical = _numerical_jacobians(func, tupled, diff, out_idx, eps)
    for k, o in enumerate(out_idx):
        with enable_grad():
            first = _analytical_jacobian(outputs[o], tupled, diff)
            second = _analytical_jacobian(outputs[o], tupled, diff)
        for a1, a2 in zip(first, second):
            if a1.numel() and (a1 - a2).abs().max().item() > nondet_tol:
                return _fail("Backward is not reentrant, i.e., running backward with same input "
                             "and grad_output multiple times gives different values, although "
                             "analytical gradient matches numerical gradient.The tolerance for "
                             f"nondeterminism was {nondet_tol}.", raise_exception)  # fmt: skip
        for d, (a, n) in enumerate(zip(first, numerical[k])):
            n = a.new_zeros(a.shape) if n is None else n
            if not a.allclose(n.to(a.dtype), rtol, atol):
                mode = "computed with forward mode " if check_forward_ad and not check_backward_ad else ""  # fmt: skip
                return _fail(f"Jacobian {mode}mismatch for output {o:d} with respect to input "
                             f"{diff[d]:d},\nnumerical:{n}\nanalytical:{a}\n", raise_exception)  # fmt: skip
    if check_undefined_grad and check_backward_ad:
        return _check_undefined_grads(func, tupled, diff, raise_exception)
    return True


_UNDEFINED_MSG = ("Expected backward function to handle undefined output grads. Please look at "
                  "\"Notes about undefined output gradients\" in "
                  "\"tools/autograd/derivatives.yaml\"")  # fmt: skip


def _check_undefined_grads(func: Callable, inputs: tuple, diff: list[int],
                           raise_exception: bool) -> bool:  # fmt: skip
    """PyTorch's check that backward handles undefined output gradients: once with every
    differentiable output's gradient undefined, then (several outputs) with one at a time
    undefined and the others zero; each must run and give zero (or no) input gradients."""
    checks = [None]  # (None: all undefined; k: only output k)
    n_out = len(_differentiable(func, inputs))
    if n_out > 1:
        checks += list(range(n_out))
    for which in checks:
        outs = _differentiable(func, inputs)
        seeds = [_UNDEFINED if which in (None, k) else o.new_zeros(o.shape)
                 for k, o in enumerate(outs)]  # fmt: skip
        try:
            gs = _undefined_pass(outs, seeds, [inputs[i] for i in diff])
        except RuntimeError as e:
            if raise_exception:
                raise GradcheckError(_UNDEFINED_MSG) from e
            return False
        with no_grad():
            if any(g is not None and bool((g != 0).any()) for g in gs):
                return _fail(_UNDEFINED_MSG, raise_exception)
    return True


def _differentiable(func: Callable, inputs: tuple) -> list[Tensor]:
    with enable_grad():
        outs = _as_tuple(func(*inputs))
    return [o for o in outs if isinstance(o, Tensor) and o.requires_grad]


class _Undefined:
    """An undefined gradient (PyTorch's undefined tensor): added to a gradient, it is that one."""

    def __add__(self, other: Any) -> Any:
        return other

    __radd__ = __add__


_UNDEFINED = _Undefined()


class _UndefinedWalk(_Walk):
    """A backward pass in which gradients may be undefined, as in PyTorch's engine: a node that
    gets only undefined ones hands undefined ones on without running its rule, except a
    ``gt.autograd.Function``, whose ``backward`` gets ``None`` for them (zeros when it
    materializes gradients)."""

    def _walk(self, roots: list[Tensor], seeds: list[Any]) -> None:
        grads: dict = {}
        for root, g in zip(roots, seeds):
            if root._node is None:
                if g is not _UNDEFINED:
                    self._to_leaf(root, g)
            else:
                prev = grads.get(root._node)
                grads[root._node] = g if prev is None else prev + g
        for node in _topo_order(list(grads)):
            g = grads.pop(node, None)
            if g is None:
                continue
            if id(node) in self.want_nodes:  # (a wanted input made by an op: its gradient)
                if g is not _UNDEFINED:
                    self.found[id(node)] = g
                continue
            if node.rule is _select_rule:  # (one output of a Function: None for its backward)
                g = None if g is _UNDEFINED else g
                self._hand(node.parents[0], node.rule(node, g)[0], grads)
            elif node.rule is _backward_rule:
                self._propagate(node, _materialized(node, g), grads)
            elif g is _UNDEFINED:
                for p in node.parents:
                    if isinstance(p, Node):
                        self._hand(p, _UNDEFINED, grads)
            else:
                self._propagate(node, g, grads)

    @staticmethod
    def _hand(node: Node, g: Any, grads: dict) -> None:
        prev = grads.get(node)
        grads[node] = g if prev is None else prev + g


def _materialized(node: Node, g: Any) -> Any:
    """A Function's output gradients, undefined ones as ``None`` (or zeros, when it
    materializes gradients)."""
    grads = list(g.grads) if isinstance(g, _OutputGrads) else [None if g is _UNDEFINED else g]
    _cls, ctx, metas, _n = node.attrs
    if ctx.materialize_grads:
        grads = [zeros(*m[0], dtype=m[1]) if gi is None and m is not None else gi
                 for gi, m in zip(grads, metas)]  # fmt: skip
    return _OutputGrads(grads) if len(grads) > 1 or isinstance(g, _OutputGrads) else grads[0]


def _undefined_pass(outs: list[Tensor], seeds: list[Any], wanted: list[Tensor]) -> list:
    """The gradients of ``wanted`` (``None`` where none reached it) from ``seeds``."""
    walk = _UndefinedWalk(create_graph=False, retain_graph=True, wanted=wanted)
    with enable_grad():
        walk.run(outs, seeds)
    return [walk.found.get(id(t) if t._node is None else id(t._node)) for t in wanted]


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Any = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:  # fmt: skip
    """Check the gradients of ``func``'s gradients (PyTorch's ``gradgradcheck``): ``gradcheck``
    of ``(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs,
    create_graph=True)``. Without ``grad_outputs``, random ones in ``[-1, 1)`` are made."""
    tupled = _as_tuple(inputs)
    if grad_outputs is None:
        with enable_grad():
            outputs = _as_tuple(func(*tupled))
        grad_outputs = tuple(
            (rand(o.shape, dtype=o.dtype) * 2 - 1).requires_grad_(True)
            for o in outputs if isinstance(o, Tensor) and o.requires_grad
        )  # fmt: skip
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_in = len(tupled)
    diff = _diff_inputs(tupled)

    def new_func(*args: Any) -> tuple:
        xs, gos = args[:n_in], args[n_in:]
        outs = [o for o in _as_tuple(func(*xs)) if isinstance(o, Tensor) and o.requires_grad]
        gs = _grad(outs, [xs[i] for i in diff], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(new_func, tupled + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode)  # fmt: skip
