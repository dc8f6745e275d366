"""``gt.utils.checkpoint``: activation checkpointing, as ``torch.utils.checkpoint``.

``checkpoint(fn, *args, use_reentrant=False)`` returns what ``fn(*args)`` returns, but the
intermediate tensors of ``fn`` are not kept for backward: the workers free them as soon as
``fn`` returns. Backward runs ``fn`` again, with grad enabled and the global seed stream put
back where it stood (so ``dropout`` draws the same mask), and backpropagates through that
recomputation. The gradients, with respect to the inputs and to every parameter or other tensor
``fn`` reads, are those of the same program without checkpointing. ``checkpoint_sequential``
checkpoints the segments of a sequence of modules.

How: ``fn`` runs once with grad mode on, which records its graph; the nodes made by that call
(numbered past the call's start: every node has a sequence number) are then cut away and replaced
by one node whose parents are what they read from outside: the inputs, the parameters, any tensor
of an enclosing scope. Its derivative reruns ``fn`` and asks :func:`gt.autograd.grad` for the
gradients of those parents, with each one held as a dead end so that nothing outside the
recomputation runs twice. Both variants of PyTorch work the same way here: ``use_reentrant=True``
keeps its restrictions (no keyword arguments, no gradient unless an input requires one) but also
works with
``gt.autograd.grad``, where PyTorch raises; ``use_reentrant=False`` takes keyword arguments,
nested structures and inputs that need no gradient, and supports ``create_graph=True``.

Differences from PyTorch: ``context_fn`` may return any two context managers (PyTorch's selective
checkpointing policies, ``create_selective_checkpoint_contexts``, do not exist); recomputation
always runs ``fn`` to its end (``early_stop`` and :func:`set_checkpoint_early_stop` are accepted
and change nothing); ``preserve_rng_state`` restores the global stream of ``gt.manual_seed``, not
an explicit :class:`gt.Generator` passed to a random op (PyTorch restores its global generators
only, too). Not handled yet: random ops inside a checkpoint inside a ``@gt.hot`` step, whose
replays give every random op a fresh seed, so the recomputation draws other numbers than the
forward.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gt import backprop
from gt import grad_graph as _grad_graph
from gt.custom_function import Function, FunctionCtx
from gt.grad_graph import Node
from gt.grad_mode import _mode, enable_grad, no_grad
from gt.nn.containers import Sequential
from gt.ops import random as _random
from gt.ops.base import TensorBase
from gt.tensor import Tensor

__all__ = [
    "CheckpointError",
    "checkpoint",
    "checkpoint_sequential",
    "noop_context_fn",
    "set_checkpoint_early_stop",
]

_DETERMINISM_CHECKS = ("default", "none")
_SAVED = object()  # where a tensor input goes, in a checkpoint's kept inputs


class CheckpointError(RuntimeError):
    """The recomputation of a checkpointed function did not give what its forward gave."""


def noop_context_fn() -> tuple[
    contextlib.AbstractContextManager, contextlib.AbstractContextManager
]:
    """The default ``context_fn``: nothing around the forward and the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Accepted for PyTorch's code: GT's recomputation always runs the function to its end (the
    results are the same either way)."""
    yield


# ----------------------------------------------------------------------------- public API
def checkpoint(
    function: Callable,
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its intermediate tensors for backward;
    backward recomputes them.

    Args:
        function: what to run (a module, a function); it must compute the same thing when run
            again (random ops are handled by ``preserve_rng_state``).
        *args: its positional arguments.
        use_reentrant: which of PyTorch's two variants to follow; pass it explicitly (``None``
            warns, as PyTorch does, and means ``True``). ``True``: positional arguments only, and
            nothing requires grad unless a tensor argument does. ``False`` (recommended): keyword
            arguments, nested structures, inputs that need no gradient, double backward.
        context_fn: returns two context managers, entered around the forward and around the
            recomputation (``use_reentrant=False`` only).
        determinism_check: ``"default"`` compares the shapes and dtypes of the recomputed outputs
            with the forward's and raises :class:`CheckpointError` when they differ; ``"none"``
            skips that (``use_reentrant=False`` only).
        debug: list every output's shape and dtype, forward and recomputed, in such an error
            (``use_reentrant=False`` only).
        early_stop: accepted; the recomputation always runs to the end.
        **kwargs: ``preserve_rng_state`` (default ``True``: the recomputation draws the same
            random numbers as the forward), then the function's keyword arguments.

    Returns:
        What ``function`` returns; its tensors that require grad are differentiable.

    Raises:
        ValueError: an option the chosen variant does not take.
        CheckpointError: (in backward) the recomputation returned something else.

    Example:
        >>> h = gt.utils.checkpoint.checkpoint(block, h, use_reentrant=False)
    """
    if use_reentrant is None:
        warnings.warn(
            "gt.utils.checkpoint: pass use_reentrant explicitly (PyTorch warns the same way and "
            "means use_reentrant=True when it is missing, which is what this call does); "
            "use_reentrant=False is the recommended variant.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = bool(kwargs.pop("preserve_rng_state", True))
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug:
            raise ValueError(
                "checkpoint: context_fn and debug are only supported with use_reentrant=False"
            )
        if not any(isinstance(a, TensorBase) and a.requires_grad for a in args):
            warnings.warn(
                "checkpoint: none of the inputs requires grad, so the result has no gradient "
                "(use_reentrant=True); pass use_reentrant=False to differentiate the function's "
                "parameters anyway",
                stacklevel=2,
            )
            with no_grad():
                return function(*args)
        if not _mode.enabled:
            return function(*args)
        nothing = contextlib.nullcontext()
        return _run(function, args, {}, preserve, nothing, nothing, "default", False)
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(
            f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, but got "
            f"{determinism_check!r}"
        )
    if debug and context_fn is not noop_context_fn:
        raise ValueError("checkpoint: debug=True cannot be combined with a context_fn")
    forward_context, recompute_context = context_fn()
    if not _mode.enabled:
        return function(*args, **kwargs)
    return _run(
        function,
        args,
        kwargs,
        preserve,
        forward_context,
        recompute_context,
        determinism_check,
        bool(debug),
    )


def checkpoint_sequential(
    functions: Any, segments: int, input: Any, use_reentrant: bool | None = None, **kwargs: Any
) -> Any:
    """Run ``functions`` (a ``gt.nn.Sequential`` or a list of modules or functions) one after the
    other on ``input``, in ``segments`` chunks of which all but the last are checkpointed.

    Args:
        functions: the modules or functions, each taking and returning one value.
        segments: how many chunks to cut the sequence into.
        input: what the first one takes.
        use_reentrant: as for :func:`checkpoint` (``None`` warns and means ``True``).
        **kwargs: ``preserve_rng_state`` only.

    Returns:
        The last function's output.
    """
    if use_reentrant is None:
        warnings.warn(
            "gt.utils.checkpoint.checkpoint_sequential: pass use_reentrant explicitly (PyTorch "
            "warns the same way and means use_reentrant=True when it is missing, which is what "
            "this call does); use_reentrant=False is the recommended variant.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)

    def run(start: int, end: int) -> Callable:
        def forward(x: Any) -> Any:
            for f in functions[start : end + 1]:
                x = f(x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run(end + 1, len(functions) - 1)(input)


# ----------------------------------------------------------------------------- the forward
def _run(
    function: Callable,
    args: tuple,
    kwargs: dict,
    preserve: bool,
    forward_context: Any,
    recompute_context: Any,
    check: str,
    debug: bool,
) -> Any:
    """Run ``function`` recorded, then replace the graph it made by one :class:`Checkpoint`
    node."""
    rng = _rng_state() if preserve else None
    first = _grad_graph._next_seq()  # nodes numbered from here on were made by the call
    with forward_context:
        out = function(*args, **kwargs)
    leaves: list = []
    spec = _flatten(out, leaves)
    diff = [i for i, t in enumerate(leaves) if isinstance(t, TensorBase) and t.requires_grad]
    if not diff:
        return out
    outs = [leaves[i] for i in diff]
    handles = _boundary(outs, first)
    kept = []  # the outputs, cut from the graph their call made
    for t in outs:
        if t._node is not None and t._node.seq > first:
            t._node, t._rg = None, False  # (made by this call: no one else holds its node)
            kept.append(t)
        else:
            kept.append(t.detach())  # an input, a parameter ...: handed back as a new handle
    inputs: list = []
    in_spec = _flatten((args, kwargs), inputs)
    frame = _Frame(
        function=function,
        in_spec=in_spec,
        inputs=[_SAVED if isinstance(t, TensorBase) else t for t in inputs],
        rng=rng,
        context=recompute_context,
        spec=spec,
        diff=diff,
        metas=[(tuple(t.shape), t.dtype) for t in outs],
        handles=handles,
        check=check,
        debug=debug,
    )
    frame.outputs = tuple(kept)
    tensors = [t for t in inputs if isinstance(t, TensorBase)]
    del outs, kept
    results = Checkpoint.apply(frame, tensors, *handles)
    for i, t in zip(diff, results):
        leaves[i] = t
    return _rebuild(spec, iter(leaves))


def _boundary(outs: list, first: int) -> list:
    """What the graph made by the call reads from outside it (nodes numbered past ``first``):
    leaf tensors, and a handle (:func:`_handle`) on each older node, in the order first met."""
    found: dict[int, Any] = {}
    stack: list[Node] = []
    for t in outs:
        node = t._node
        if node is None:
            found.setdefault(id(t), t)  # a leaf handed back as it is
        elif node.seq > first:
            stack.append(node)
        elif id(node) not in found:
            found[id(node)] = _handle(node, t.shape, t.dtype, t._conn)
    conn = outs[0]._conn
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for i, p in enumerate(node.parents):
            if p is None:
                continue
            if isinstance(p, Node):
                if p.seq > first:
                    stack.append(p)
                elif id(p) not in found:
                    found[id(p)] = _handle(p, node.shapes[i], node.dtypes[i], conn)
            elif id(p) not in found:
                found[id(p)] = p
    return list(found.values())


def _handle(node: Node, shape: tuple, dtype: str, conn: Any) -> Tensor:
    """A tensor handle whose history is ``node`` (no value of its own): what the checkpoint's node
    takes as a parent, and what the recomputation asks the gradient of."""
    t = Tensor(conn, None, tuple(shape), dtype)
    t._node, t._rg = node, True
    return t


class _Frame:
    """What a checkpointed call keeps for its recomputation."""

    def __init__(self, **fields: Any):
        self.__dict__.update(fields)
        self.outputs: tuple = ()


# ----------------------------------------------------------------------------- the backward
class Checkpoint(Function):
    """The node a checkpointed call leaves in the graph (``CheckpointBackward``): its parents are
    what the call read from outside; its derivative recomputes the call."""

    @staticmethod
    def forward(ctx: FunctionCtx, frame: _Frame, inputs: list, *handles: Any) -> tuple:
        ctx.frame = frame
        ctx.save_for_backward(*inputs)  # (checked for in-place changes; freed after backward)
        ctx.set_materialize_grads(False)
        out, frame.outputs = frame.outputs, ()
        return out

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> tuple:
        frame = ctx.frame
        create_graph = _mode.enabled
        saved = iter(ctx.saved_tensors)
        flat = [next(saved) if x is _SAVED else x for x in frame.inputs]
        args, kwargs = _rebuild(frame.in_spec, iter(flat))
        out = _recompute(frame, args, kwargs)
        leaves: list = []
        spec = _flatten(out, leaves)
        _check(frame, spec, leaves)
        roots, seeds = [], []
        for i, g in zip(frame.diff, grads):
            if g is not None:
                roots.append(leaves[i])
                seeds.append(g)
        wanted = [h for h in frame.handles if h.requires_grad]
        found: dict[int, Any] = {}
        if roots and wanted:
            with _dead_ends(wanted):
                gs = backprop.grad(
                    roots,
                    wanted,
                    seeds,
                    retain_graph=create_graph,
                    create_graph=create_graph,
                    allow_unused=True,
                )
            found = {id(h): g for h, g in zip(wanted, gs)}
        return (None, None, *(found.get(id(h)) for h in frame.handles))


def _recompute(frame: _Frame, args: tuple, kwargs: dict) -> Any:
    """Run the function again, recorded, from the seed stream's position of the forward (then put
    the stream back)."""
    now = _rng_state() if frame.rng is not None else None
    if now is not None:
        _set_rng_state(frame.rng)
    try:
        with enable_grad(), frame.context:
            return frame.function(*args, **kwargs)
    finally:
        if now is not None:
            _set_rng_state(now)


def _check(frame: _Frame, spec: Any, leaves: list) -> None:
    """Raise :class:`CheckpointError` if the recomputation's outputs are not the forward's."""
    if spec != frame.spec:
        raise CheckpointError(
            "gt.utils.checkpoint: the recomputed function returned a different structure than "
            "during the forward pass (the function must compute the same thing when run again)"
        )
    got = []
    for i in frame.diff:
        t = leaves[i]
        ok = isinstance(t, TensorBase) and t.requires_grad
        got.append((tuple(t.shape), t.dtype) if isinstance(t, TensorBase) else type(t).__name__)
        if not ok:
            raise CheckpointError(
                f"gt.utils.checkpoint: output {i} of the recomputed function does not require "
                "grad, but it did during the forward pass"
            )
    if frame.check == "none":
        return
    bad = [k for k, (a, b) in enumerate(zip(frame.metas, got)) if a != b]
    if bad:
        show = range(len(got)) if frame.debug else bad
        lines = "\n".join(
            f"  tensor at position {frame.diff[k]}: forward shape {list(frame.metas[k][0])} "
            f"dtype {frame.metas[k][1]}; recomputed shape {list(got[k][0])} dtype {got[k][1]}"
            for k in show
        )
        raise CheckpointError(
            "gt.utils.checkpoint: recomputed tensors have a different shape or dtype than during "
            f"the forward pass:\n{lines}\n(pass determinism_check='none' to skip this check)"
        )


@contextlib.contextmanager
def _dead_ends(handles: Iterable[Any]) -> Iterator[None]:
    """While the recomputation is differentiated: every parent of the checkpoint is an end of the
    walk. An older node's own inputs and hooks are set aside (the outer backward runs them, once),
    and so are a leaf's gradient hooks (the outer backward runs them on what it hands the leaf)."""
    nodes, hooks = [], {}
    for h in handles:
        node = h._node
        if node is None:
            if id(h) in backprop._LEAF_HOOKS:
                hooks[id(h)] = backprop._LEAF_HOOKS.pop(id(h))
        elif all(node is not n for n, _, _ in nodes):
            nodes.append((node, node.parents, node.hooks))
            node.parents, node.hooks = (None,) * len(node.parents), None
    try:
        yield
    finally:
        for node, parents, node_hooks in nodes:
            node.parents, node.hooks = parents, node_hooks
        backprop._LEAF_HOOKS.update(hooks)


# ----------------------------------------------------------------------------- helpers
def _rng_state() -> tuple[int, int]:
    """Where the global seed stream (``gt.manual_seed``'s) stands."""
    pos = next(_random._seed_counter)
    _random._seed_counter = itertools.count(pos)
    return (_random._seed_base, pos)


def _set_rng_state(state: tuple[int, int]) -> None:
    _random._seed_base = state[0]
    _random._seed_counter = itertools.count(state[1])


def _flatten(tree: Any, leaves: list) -> Any:
    """The structure of ``tree`` (lists, tuples, named tuples and dicts, nested), its other values
    appended to ``leaves`` in order."""
    kind = type(tree)
    if kind is list or kind is tuple or (isinstance(tree, tuple) and hasattr(tree, "_fields")):
        return (kind, None, tuple(_flatten(x, leaves) for x in tree))
    if kind is dict:
        return (dict, tuple(tree), tuple(_flatten(v, leaves) for v in tree.values()))
    leaves.append(tree)
    return None


def _rebuild(spec: Any, leaves: Iterator) -> Any:
    if spec is None:
        return next(leaves)
    kind, keys, children = spec
    values = [_rebuild(c, leaves) for c in children]
    if kind is dict:
        return dict(zip(keys, values))
    if kind is list or kind is tuple:
        return kind(values)
    return kind(*values)  # a named tuple
