"""Reverse-mode automatic differentiation on the client, executed on the workers.

Every op whose inputs require grad attaches a :class:`Node` to its output: the primitive's name,
edges to the inputs' nodes (or to leaf tensors, whose ``.grad`` receives the result), the tensors
the derivative needs, and small attributes. :func:`backward` sorts the nodes topologically and
walks them in reverse, calling one derivative rule per primitive (the op registry's ``grad``, :mod:`gt.runtime.ops`). Each
rule is written with ordinary tensor ops, so the backward pass is just more instructions for the
workers. Gradients of a tensor used several times are summed; gradients of leaves accumulate
across calls until they are reset.

Nodes point at their inputs, never at their outputs, so the graph has no reference cycles and a
tensor's worker memory is freed as soon as the last Python reference to it goes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt import signal as _signal
from gt.runtime import ops as O
from gt.runtime.ops import Past, sum_to

if TYPE_CHECKING:
    from gt.tensor import Tensor

FLOAT_DTYPES = ("float16", "float32", "float64")


class _GradMode(threading.local):
    enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    """Whether ops are being recorded for backward in this thread."""
    return _mode.enabled


class set_grad_enabled:
    """Turn recording on or off, as a context manager, a decorator, or a plain call.

    Args:
        mode: ``True`` to record ops for backward, ``False`` not to.
    """

    def __init__(self, mode: bool):
        self.prev = _mode.enabled
        self.mode = bool(mode)
        _mode.enabled = self.mode

    def __enter__(self) -> None:
        _mode.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        _mode.enabled = self.prev

    def __call__(self, fn: Callable) -> Callable:
        _mode.enabled = self.prev  # used as a decorator: undo the switch made by __init__

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(self.mode):
                return fn(*args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        wrapper.__doc__ = fn.__doc__
        return wrapper


class no_grad(set_grad_enabled):
    """Context manager (or decorator) in which no op is recorded for backward.

    Example:
        >>> with gt.no_grad():
        ...     w -= 0.1 * w.grad
    """

    def __new__(cls, fn: Callable | None = None) -> Any:
        self = object.__new__(cls)
        if fn is None:
            return self
        self.__init__()  # used as @gt.no_grad, without parentheses: decorate fn now
        return self(fn)

    def __init__(self, fn: Callable | None = None) -> None:
        self.prev = _mode.enabled
        self.mode = False

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = False


class inference_mode(no_grad):
    """PyTorch's ``inference_mode``: in GT, the same as :class:`no_grad`."""


class enable_grad(set_grad_enabled):
    """Context manager (or decorator) that turns recording back on inside :class:`no_grad`."""

    def __init__(self) -> None:
        self.prev = _mode.enabled
        self.mode = True

    def __enter__(self) -> None:
        self.prev = _mode.enabled
        _mode.enabled = True


class Node:
    """One recorded op: how to send the output's gradient back to its inputs.

    Attributes:
        op: the primitive's name (its registry entry holds the derivative rule).
        parents: per input, the input's :class:`Node`, the leaf tensor itself, or ``None`` when
            that input needs no gradient (a constant, an integer tensor, a Python number).
        saved: the tensors the rule reads; ``None`` once the graph is freed.
        versions: ``_version`` of each saved tensor when recorded, to detect in-place changes.
        shapes: the shape of every input (``()`` for Python numbers).
        dtypes: the dtype of every input (``None`` for Python numbers).
        attrs: the instruction's attributes (axes, permutation, index key, ...).
        retain: a weak reference to the output tensor when it asked for its gradient
            (``retain_grad()``), else ``None``.
    """

    __slots__ = (
        "op",
        "parents",
        "saved",
        "versions",
        "shapes",
        "dtypes",
        "attrs",
        "signal",
        "retain",
    )

    def __init__(self, op: str, parents: tuple, saved: tuple, inputs: tuple, attrs: Any):
        self.op = op
        self.parents = parents
        self.saved = saved
        self.versions = tuple(getattr(t, "_version", 0) for t in saved)
        self.shapes = tuple(getattr(t, "shape", ()) for t in inputs)
        self.dtypes = tuple(getattr(t, "dtype", None) for t in inputs)
        self.attrs = attrs
        self.signal = _signal.capture()  # its gradient ops run under the signal's backward rule
        self.retain = None  # a weak reference to the output, once it called retain_grad()

    def needs(self, i: int) -> bool:
        """Whether input ``i`` wants a gradient."""
        return self.parents[i] is not None

    def check_versions(self) -> None:
        """Raise if a tensor this node saved was changed in place since it was recorded."""
        for t, v in zip(self.saved, self.versions):
            now = getattr(t, "_version", 0)
            if now != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [gt.{t.dtype} {list(t.shape)}] is at version {now}; "
                    f"expected version {v} instead (in {self.name()})"
                )

    def name(self) -> str:
        """PyTorch-style name, e.g. ``MulBackward0``."""
        return "".join(p.capitalize() for p in self.op.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"


def record(
    out: Tensor, op: str, inputs: tuple, attrs: Any = None, saved: tuple | None = None
) -> Tensor:
    """Attach a backward node for primitive ``op`` to ``out`` when grad mode is on.

    Args:
        out: the op's result.
        op: the primitive's name (an entry of the op registry).
        inputs: the op's operands in order (tensors or Python numbers).
        attrs: the instruction's attributes (the derivative rule reads them).
        saved: tensors the rule reads; default: what the registry entry's ``saves`` says.

    Returns:
        ``out``, now requiring grad if any input does.
    """
    if not _mode.enabled or out.dtype not in FLOAT_DTYPES:
        return out
    parents = []
    wanted = False
    for t in inputs:
        if getattr(t, "_rg", False):
            parents.append(t if t._node is None else t._node)
            wanted = True
        else:
            parents.append(None)
    if not wanted:
        return out
    if saved is None:
        saved = O.BY_NAME[op].saved(inputs, out)
    out._node = Node(op, tuple(parents), tuple(saved), inputs, attrs)
    out._rg = True
    return out


def _topo_order(root: Node) -> list[Node]:
    """Nodes reachable from ``root``, each before the nodes of its inputs."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for p in node.parents:
            if type(p) is Node and id(p) not in seen:
                stack.append((p, False))
    order.reverse()
    return order


def _accumulate(leaf: Tensor, g: Tensor, handed: set[int]) -> None:
    if g.dtype != leaf.dtype:
        g = g.to(leaf.dtype)
    if leaf.grad is None:
        if id(g) in handed:  # the same tensor object must not become two leaves' .grad
            g = g.detach()
        handed.add(id(g))
        leaf.grad = g
    else:
        leaf.grad = leaf.grad + g


def backward(root: Tensor, gradient: Any = None, retain_graph: bool | None = None) -> None:
    """Compute the gradient of ``root`` with respect to every leaf that requires grad.

    Args:
        root: the tensor to differentiate (usually a scalar loss).
        gradient: d(something)/d(root); required unless ``root`` has one element.
        retain_graph: keep the graph's saved tensors so ``backward`` can run through it again.

    Raises:
        RuntimeError: ``root`` does not require grad, ``gradient`` is missing or has the wrong
            shape, the graph was already freed, or a saved tensor was modified in place.
    """
    if not root.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    handed: set[int] = set()
    with no_grad():
        gradient = _seed(root, gradient, handed)
        if root._node is None:
            _accumulate(root, gradient, handed)
            return
        grads: dict[Node, Tensor] = {root._node: gradient}
        for node in _topo_order(root._node):
            g = grads.pop(node, None)
            if g is not None:
                if node.retain is not None:
                    _retain(node, g, handed)
                _propagate(node, g, grads, handed)
                if not retain_graph:
                    node.saved = None


def _retain(node: Node, g: Tensor, handed: set[int]) -> None:
    """Give a computed tensor that called ``retain_grad()`` its gradient."""
    out = node.retain()
    if out is None:
        return
    if out.grad is None:
        out.grad = g.detach() if id(g) in handed else g
        handed.add(id(out.grad))
    else:
        out.grad = out.grad + g


def _seed(root: Tensor, gradient: Any, handed: set[int]) -> Tensor:
    """The gradient backward starts from: ones for a scalar, else the one given, checked."""
    if gradient is None:
        if root.numel() != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs (got shape {list(root.shape)})"
            )
        return root.new_ones(root.shape)
    if not hasattr(gradient, "_conn"):
        gradient = root.new_tensor(gradient, dtype=root.dtype)
    if tuple(gradient.shape) != root.shape:
        raise RuntimeError(
            f"backward: mismatch in shape: gradient has a shape of {list(gradient.shape)} "
            f"and output has a shape of {list(root.shape)}"
        )
    if gradient.dtype != root.dtype:
        gradient = gradient.to(root.dtype)
    handed.add(id(gradient))
    return gradient


def _propagate(node: Node, g: Tensor, grads: dict, handed: set[int]) -> None:
    """Run ``node``'s derivative rule and hand each input its gradient."""
    if node.saved is None:
        raise RuntimeError(
            "Trying to backward through the graph a second time (or directly access saved "
            "tensors after they have already been freed). Specify retain_graph=True if you "
            "need to backward through the graph a second time."
        )
    node.check_versions()
    rule = O.BY_NAME[node.op].grad
    if node.signal is None:
        in_grads = rule(node, g)
    else:
        with _signal.backward_context(node.signal):
            in_grads = rule(node, g)
    for p, pg in zip(node.parents, in_grads):
        if p is None or pg is None:
            continue
        if type(pg) is Past:  # already the gradient of that input's own input
            p, pg = p.parents[0], pg.grad
            if p is None:
                continue
        if type(p) is Node:
            prev = grads.get(p)
            grads[p] = pg if prev is None else prev + pg
        else:
            _accumulate(p, pg, handed)


__all__ = [
    "Node",
    "Past",
    "backward",
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "no_grad",
    "record",
    "set_grad_enabled",
    "sum_to",
]
