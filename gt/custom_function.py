"""Custom differentiable operations: ``gt.autograd.Function``, as ``torch.autograd.Function``.

A subclass gives ``forward`` and ``backward`` as static methods, written with ordinary tensor ops;
``MyOp.apply(*args)`` runs ``forward`` without recording it and attaches one graph node whose
derivative is the subclass's ``backward``. Both styles of PyTorch work: ``forward(ctx, *args)``,
or ``forward(*args)`` with ``setup_context(ctx, inputs, output)``. The context saves tensors
(``save_for_backward`` / ``saved_tensors``, checked for in-place changes as every saved tensor
is), tells which inputs want a gradient (``needs_input_grad``), marks outputs that have none
(``mark_non_differentiable``), which inputs ``forward`` changed in place (``mark_dirty``: such
an input, returned as it is, takes the function's node as its history) and whether missing output
gradients arrive as zeros (``set_materialize_grads``). Since ``backward`` is made of tensor ops, a backward pass with
``create_graph=True`` records it too (unless it is wrapped in :func:`once_differentiable`).

Several outputs share one node: each output has a small node that hands its gradient to the
shared one, which calls ``backward`` once with all of them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from gt.grad_graph import GRAD_DTYPES, SAVED_TENSOR_HOOKS, Node, _pack
from gt.grad_mode import _mode, no_grad
from gt.ops.base import TensorBase
from gt.runtime.ops import sum_to

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """What ``forward`` (or ``setup_context``) leaves for ``backward``; any other attribute may be
    set on it too (``ctx.alpha = alpha``)."""

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self.to_save: tuple = ()
        self.materialize_grads = True
        self._non_differentiable: set[int] = set()
        self._dirty: tuple = ()  # the tensors given to mark_dirty (until apply has read them)
        self._saved: tuple | None = None  # set while backward runs

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep these tensors (or ``None``) for ``backward``, which reads them as
        :attr:`saved_tensors`."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, TensorBase):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type "
                    f"{type(t).__name__}"
                )
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to :meth:`save_for_backward` (read them in ``backward``)."""
        if self._saved is None:
            raise RuntimeError("saved_tensors can only be read inside backward()")
        return self._saved

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """These outputs get no gradient (indices, masks): ``backward`` receives ``None`` (or
        zeros) for them."""
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (the default) or ``None`` for outputs no gradient
        reached."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors: Any) -> None:
        """Say that ``forward`` changed these inputs in place (before or after the call).

        Each must be returned by ``forward`` as it is (``x.mul_(2); ctx.mark_dirty(x); return
        x``): the caller's tensor then holds the new value and, when the function is recorded,
        its history goes through the function (``x.grad_fn`` is its node). Its version counter
        moves on, so a recorded op that saved its old value refuses to backward, as in PyTorch.
        A leaf that requires grad cannot be marked while grad mode is on.
        """
        for i, t in enumerate(tensors):
            if not isinstance(t, TensorBase):
                raise TypeError(
                    f"mark_dirty can only accept variables, but argument {i} is of type "
                    f"{type(t).__name__}"
                )
        self._dirty = tensors


def _setup_context_base(ctx: Any, inputs: tuple, output: Any) -> None:
    raise NotImplementedError("setup_context is not overridden")


class Function:
    """Base class of custom differentiable operations (see the module docstring).

    Example:
        >>> class Clip(gt.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x.clamp(-1, 1)
        ...     @staticmethod
        ...     def backward(ctx, g):           # straight-through inside the range
        ...         (x,) = ctx.saved_tensors
        ...         return g * (x.abs() <= 1)
        >>> y = Clip.apply(w)
    """

    setup_context = staticmethod(_setup_context_base)

    def __init__(self, *args: Any, **kwargs: Any):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method, and call it with "
            f"{type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        """The computation (no op in it is recorded); override it."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        """One gradient (or ``None``) per input of ``forward``, given one per output; override it."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` on ``args`` and record one node whose derivative is ``backward``."""
        wants = tuple(isinstance(a, TensorBase) and a.requires_grad for a in args)
        ctx = FunctionCtx(wants)
        recording = _mode.enabled and any(wants)
        with no_grad():
            if getattr(cls.setup_context, "__func__", cls.setup_context) is not _setup_context_base:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        dirty = _take_dirty(ctx, args, out, recording)
        if not recording:
            return out
        return _record(cls, ctx, args, out, dirty)


def _take_dirty(ctx: FunctionCtx, args: tuple, out: Any, recording: bool) -> set[int]:
    """Check the tensors ``forward`` marked dirty as PyTorch does and move their versions on;
    their ids."""
    dirty, ctx._dirty = ctx._dirty, ()  # (the context outlives forward in the node)
    if not dirty:
        return set()
    returned = {id(o) for o in (out if isinstance(out, tuple) else (out,))}
    inputs = {id(a) for a in args}
    for t in dirty:
        if id(t) not in returned:
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as "
                "output. The inputs that are modified inplace must all be outputs of the Function."
            )
        if id(t) not in inputs:
            warnings.warn(
                "Only input Tensors should be given to ctx.mark_dirty(). If a Tensor is not an "
                "input, there is no need to pass it to mark_dirty().",
                stacklevel=3,
            )
        if recording and t._rg and t._node is None:
            raise RuntimeError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )
    for t in {id(t): t for t in dirty}.values():
        t._version += 1  # (even if forward changed it without an op: through .data, say)
    return {id(t) for t in dirty}


def _record(cls: type, ctx: FunctionCtx, args: tuple, out: Any, dirty: set[int]) -> Any:
    """Attach the node (or nodes) that run ``cls.backward`` to ``forward``'s outputs (a dirty
    input returned keeps its object and takes the node as its history; any other input or
    tensor already in a graph is returned as an alias)."""
    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    seen: set[int] = {id(a) for a in args if isinstance(a, TensorBase)}
    dirty_seen: set[int] = set()
    metas = []  # per output: (shape, dtype) of a differentiable tensor, None for anything else
    zeros = []  # per output: (shape, dtype) of every tensor (the zeros backward gets for it)
    for i, o in enumerate(outs):
        if not isinstance(o, TensorBase):
            metas.append(None)
            zeros.append(None)
            continue
        zeros.append((o.shape, o.dtype))
        if id(o) in ctx._non_differentiable or o.dtype not in GRAD_DTYPES:
            metas.append(None)
            continue
        if id(o) in dirty and id(o) not in dirty_seen:
            dirty_seen.add(id(o))  # (returned twice: the second is an alias)
        elif id(o) in seen or o.requires_grad:
            outs[i] = o = o._alias()  # an input (or a tensor already in a graph) handed back
        seen.add(id(o))
        metas.append((o.shape, o.dtype))
    parents = _parents(args, ctx.needs_input_grad)
    saved, out_slots = _saved(ctx.to_save, outs)
    ctx.to_save = ()
    diff = [i for i, m in enumerate(metas) if m is not None]
    attrs = (cls, ctx, tuple(zeros), len(args))
    node = Node(cls.__name__, parents, saved, args, attrs)
    if not cls.__name__.startswith("_"):  # (GT's private ones stand for PyTorch's built-in ops)
        node.label = f"{cls.__name__}Backward"  # PyTorch's name: the class's, no "0" suffix
    node.outs = out_slots
    node.rule = _backward_rule
    if SAVED_TENSOR_HOOKS:  # (saved_tensors_hooks see what save_for_backward kept, as PyTorch's)
        _pack(node)
    if len(diff) == 1 and len(outs) == 1:
        outs[0]._node, outs[0]._rg = node, True
    else:
        for i in diff:
            sel = Node(cls.__name__, (node,), (), (outs[i],), (i, len(outs)))
            sel.label = node.label
            sel.rule = _select_rule
            outs[i]._node, outs[i]._rg = sel, True
    return outs[0] if single else tuple(outs)


def _parents(args: tuple, wants: tuple[bool, ...]) -> tuple:
    return tuple(
        (a if a._node is None else a._node) if want else None for a, want in zip(args, wants)
    )


def _saved(to_save: tuple, outs: list) -> tuple[tuple, tuple]:
    """The tensors to keep, with outputs replaced by aliases (an output's node must not point
    back at it), and which positions those are."""
    out_ids = {id(o) for o in outs if isinstance(o, TensorBase)}
    saved, slots = [], []
    for i, t in enumerate(to_save):
        if t is not None and id(t) in out_ids:
            t = t._alias()
            slots.append(i)
        saved.append(t)
    return tuple(saved), tuple(slots)


class _OutputGrads:
    """The gradients of a function's several outputs, gathered on their way to its node."""

    __slots__ = ("grads",)

    def __init__(self, grads: list):
        self.grads = grads

    def __add__(self, other: _OutputGrads) -> _OutputGrads:
        return _OutputGrads(
            [a if b is None else b if a is None else a + b for a, b in zip(self.grads, other.grads)]
        )


def _select_rule(node: Node, g: Any) -> tuple:
    i, n = node.attrs
    grads: list = [None] * n
    grads[i] = g
    return (_OutputGrads(grads),)


def _backward_rule(node: Node, g: Any) -> tuple:
    cls, ctx, zeros, n_args = node.attrs
    grads = list(g.grads) if isinstance(g, _OutputGrads) else [g]
    # (zeros for every tensor output without a gradient, non-differentiable ones included, as
    # PyTorch materializes them)
    for i, (gi, meta) in enumerate(zip(grads, zeros)):
        if gi is None and meta is not None and ctx.materialize_grads:
            grads[i] = _zeros_like_meta(meta, node, g)
    ctx._saved = node.saved
    try:
        result = cls.backward(ctx, *grads)
    finally:
        ctx._saved = None
    result = result if isinstance(result, tuple) else (result,)
    name = f"{cls.__name__}Backward"
    if len(result) != n_args:
        if len(result) > n_args and all(r is None for r in result[n_args:]):
            result = result[:n_args]
        else:
            raise RuntimeError(
                f"function {name} returned an incorrect number of gradients (expected {n_args}, "
                f"got {len(result)})"
            )
    out = []
    for i, r in enumerate(result):
        if r is None or not node.needs(i):
            out.append(None)
            continue
        if getattr(r, "is_sparse", False) is True:  # (a gt.sparse.SparseTensor, as PyTorch allows)
            if tuple(r.shape) != tuple(node.shapes[i]):
                raise RuntimeError(
                    f"Function {name} returned an invalid gradient at index {i} - got "
                    f"{list(r.shape)} but expected shape {list(node.shapes[i])}"
                )
            out.append(r if r.dtype == node.dtypes[i] else r.to(node.dtypes[i]))
            continue
        if not isinstance(r, TensorBase):
            raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")  # PyTorch's
        want = tuple(node.shapes[i])
        if tuple(r.shape) != want:
            if not _expands_to(want, tuple(r.shape)):
                raise RuntimeError(
                    f"Function {name} returned an invalid gradient at index {i} - got "
                    f"{list(r.shape)} but expected shape compatible with {list(want)}"
                )
            r = sum_to(r, want)  # (a gradient given for the broadcast shape, as PyTorch allows)
        if r.dtype != node.dtypes[i]:
            r = r.to(node.dtypes[i])
        out.append(r)
    return tuple(out)


def _expands_to(shape: tuple, target: tuple) -> bool:
    """Whether ``shape`` broadcasts to exactly ``target``."""
    if len(shape) > len(target):
        return False
    return all(d == t or d == 1 for d, t in zip(shape[::-1], target[::-1]))


def _zeros_like_meta(meta: tuple, node: Node, g: Any) -> Any:
    shape, dtype = meta
    like = g if isinstance(g, TensorBase) else next(x for x in g.grads if x is not None)
    return like.new_zeros(shape, dtype=dtype)


def once_differentiable(fn: Callable) -> Callable:
    """Decorate a ``backward`` that may not itself be differentiated: it runs without recording,
    even in a backward pass with ``create_graph=True``."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with no_grad():
            return fn(ctx, *grads)

    return wrapper
