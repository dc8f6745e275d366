"""The backward walk's set-up (:mod:`gt.backprop`): the roots' seeds, and the order in which the
walk visits the nodes (PyTorch's engine's order) and which of them must run for ``grad()``."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from gt.grad_graph import Node

_COMPLEX = frozenset(("complex64", "complex128"))

if TYPE_CHECKING:
    from gt.tensor import Tensor


def _as_list(x: Any, what: str) -> list:
    if x is None:
        return []
    if hasattr(x, "_conn"):
        return [x]
    if isinstance(x, (str, bytes)) or not hasattr(x, "__iter__"):
        raise TypeError(f"{what} must be a tensor or a sequence of tensors, got {type(x).__name__}")
    return list(x)  # (a list, a tuple, or a generator such as model.parameters())


def _seeds_for(given: Any, roots: list, gradients: Any) -> list:
    """One gradient (or ``None``) per root: a single root takes its gradient as it is given (a
    tensor, an array, a number), several take a sequence."""
    if gradients is None:
        return [None] * len(roots)
    if hasattr(given, "_conn"):
        if (
            isinstance(gradients, (list, tuple))
            and len(gradients) == 1
            and (gradients[0] is None or hasattr(gradients[0], "_conn"))
        ):
            return list(gradients)  # grad_tensors=[g] for one tensor, as PyTorch allows
        return [gradients]
    if not isinstance(gradients, (list, tuple)):
        raise TypeError("grad_tensors must be a sequence with one gradient (or None) per tensor")
    return list(gradients)


def _seed(root: Tensor, gradient: Any) -> Tensor:
    """The gradient the walk starts from at ``root``: ones for a scalar, else the one given."""
    if gradient is None:
        if root.numel() != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs (got shape {list(root.shape)})"
            )
        if root.dtype in _COMPLEX:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")
        # ones that read the root (x ** 0 is 1 for every x, NaN and inf too): when the op that
        # made the root failed on its worker, the whole backward fails with that error, reported
        # once, instead of each backward op that repeats its check (nll_loss's target) failing
        # again with its own
        return root.detach() ** 0
    if not hasattr(gradient, "_conn"):
        gradient = root.new_tensor(gradient, dtype=root.dtype)
    if tuple(gradient.shape) != root.shape:
        raise RuntimeError(
            f"backward: mismatch in shape: gradient has a shape of {list(gradient.shape)} "
            f"and output has a shape of {list(root.shape)}"
        )
    return gradient.to(root.dtype) if gradient.dtype != root.dtype else gradient


def _topo_order(roots: list[Node]) -> list[Node]:
    """Nodes reachable from ``roots``, latest made first: each before the nodes of its inputs
    (those were made before it), and in the order PyTorch's engine runs them (of the nodes
    ready, the latest made), so that hooks of independent branches (a module called twice)
    fire as PyTorch's do."""
    order: list[Node] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        for p in node.parents:
            if isinstance(p, Node) and id(p) not in seen:
                stack.append(p)
    order.sort(key=_SEQ, reverse=True)
    return order


_SEQ = attrgetter("seq")


def _to_run(order: list[Node], nodes: set[int], leaves: set[int]) -> set[int]:
    """The nodes of ``order`` whose derivative rule must run for a gradient to reach one of
    ``nodes`` (by id) or ``leaves`` (by id): those with an input that is wanted or leads to one."""
    run: set[int] = set()
    for node in reversed(order):  # inputs before the nodes that use them
        for p in node.parents:
            if isinstance(p, Node):
                if id(p) in run or id(p) in nodes:
                    run.add(id(node))
                    break
            elif p is not None and id(p) in leaves:
                run.add(id(node))
                break
    return run
