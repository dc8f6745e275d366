"""``gt.autograd.forward_ad``: PyTorch's dual tensors for forward-mode differentiation.

``with dual_level(): out = f(make_dual(x, v)); jvp = unpack_dual(out).tangent`` gives the
Jacobian-vector product ``J v``. GT computes tangents when they are asked for rather than alongside
each op: a dual tensor is a tensor the autograd graph records from, and ``unpack_dual(out)`` pushes
the tangents of the duals ``out`` depends on through that graph by the double-backward trick (two
backward passes, as :func:`gt.func.jvp`). Results and their gradients are PyTorch's; what differs
is visible only in ``requires_grad`` inside a level (a dual tensor and what is computed from it
report True) and in cost (each ``unpack_dual`` of a computed tensor walks its graph twice).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from gt.backprop import grad
from gt.func import _fresh, _release
from gt.grad_graph import Node
from gt.grad_mode import enable_grad
from gt.tensor import Tensor

#: What :func:`unpack_dual` returns.
UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

#: The levels entered and not yet left, innermost last: each maps id(dual) -> (dual, tangent).
_LEVELS: list[dict[int, tuple[Tensor, Tensor]]] = []


def enter_dual_level() -> int:
    """Open a level (returns its index); tangents made in it live until it is left."""
    _LEVELS.append({})
    return len(_LEVELS) - 1


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the innermost level (``level``, if given, must be it), dropping its tangents."""
    if not _LEVELS:
        raise RuntimeError("Trying to exit a forward AD level that does not exist.")
    if level is not None and level != len(_LEVELS) - 1:
        raise RuntimeError(
            f"Trying to exit a forward AD level that was not the last one that was created "
            f"(level {level}, the last is {len(_LEVELS) - 1})."
        )
    _LEVELS.pop()


class dual_level:  # noqa: N801 - PyTorch's name
    """``with dual_level():`` the region in which dual tensors exist."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()


def _level(level: int | None) -> dict[int, tuple[Tensor, Tensor]]:
    if not _LEVELS:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    return _LEVELS[-1 if level is None else level]


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """``tensor`` carrying ``tangent`` (its directional derivative) in the current level."""
    duals = _level(level)
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual: expected a primal and a tangent that are tensors")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}."
        )
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise RuntimeError(
            "Expected both tensor and its forward grad to be floating point or complex"
        )
    dual = _fresh(tensor)
    duals[id(dual)] = (dual, tangent.to(dual.dtype))
    return dual


def unpack_dual(tensor: Any, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``: the tangent is ``None`` when ``tensor`` depends on no
    dual tensor of the level (or no level is open)."""
    if not isinstance(tensor, Tensor) or not _LEVELS:
        return UnpackedDualTensor(tensor, None)
    duals = _LEVELS[-1 if level is None else level]
    own = duals.get(id(tensor))
    private = set(duals)
    if own is not None and own[0] is tensor:
        return UnpackedDualTensor(_release(tensor, private), own[1])
    reached = _duals_reached(tensor, duals)
    if not reached:
        return UnpackedDualTensor(tensor, None)
    inputs = tuple(d for d, _ in reached)
    with enable_grad():
        dummy = tensor.new_zeros(tensor.shape).requires_grad_(True)
        g = grad((tensor,), inputs, (dummy,), retain_graph=True, create_graph=True,
                 allow_unused=True)  # fmt: skip
        used = [(gi, t) for gi, (_, t) in zip(g, reached) if gi is not None and gi.requires_grad]
        if used:
            (tangent,) = grad(tuple(u for u, _ in used), (dummy,), tuple(t for _, t in used),
                              create_graph=True, allow_unused=True)  # fmt: skip
        else:  # (the output is affine in the duals: its tangent does not depend on the dummy)
            tangent = None
    if tangent is None:
        tangent = tensor.new_zeros(tensor.shape)
    private.add(id(dummy))
    primal, tangent = _release((tensor, tangent), private)
    return UnpackedDualTensor(primal, tangent)


def _duals_reached(t: Tensor, duals: dict[int, tuple[Tensor, Tensor]]) -> list:
    """The level's ``(dual, tangent)`` pairs that ``t``'s graph reaches (a dual made from a
    tensor that required grad is a node of the graph, the others are its leaves)."""
    if t._node is None:
        return []
    by_node = {id(d._node): (d, v) for d, v in duals.values() if d._node is not None}
    found, seen, todo = [], set(), [t._node]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in by_node:
            found.append(by_node[id(node)])
            continue
        for p in node.parents:
            if isinstance(p, Node):
                todo.append(p)
            elif p is not None and id(p) in duals and duals[id(p)][0] is p and id(p) not in seen:
                seen.add(id(p))
                found.append(duals[id(p)])
    return found


__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "make_dual", "unpack_dual"]  # fmt: skip
