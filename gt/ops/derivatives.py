"""The derivative table: one rule per differentiable primitive.

A rule takes the backward :class:`~gt.autograd.Node` and the gradient of the op's output, and
returns one gradient per input (``None`` where the input needs none). Rules are written with
ordinary tensor ops, so they run on the workers like any other instruction. Composite ops
(``mean``, ``softmax``, ``gelu``, ``layer_norm``, ...) need no rules of their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt.autograd import Node, Past, _check_versions, sum_to
from gt.runtime import protocol as P

if TYPE_CHECKING:
    from gt.tensor import Tensor

Grads = tuple
Rule = Callable[[Node, Any], Grads]
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _add(n: Node, g: Tensor) -> Grads:
    return (
        sum_to(g, n.shapes[0]) if n.needs(0) else None,
        sum_to(g, n.shapes[1]) if n.needs(1) else None,
    )


def _sub(n: Node, g: Tensor) -> Grads:
    return (
        sum_to(g, n.shapes[0]) if n.needs(0) else None,
        sum_to(-g, n.shapes[1]) if n.needs(1) else None,
    )


def _mul(n: Node, g: Tensor) -> Grads:
    a, b = n.saved
    return (
        sum_to(g * b, n.shapes[0]) if n.needs(0) else None,
        sum_to(g * a, n.shapes[1]) if n.needs(1) else None,
    )


def _div(n: Node, g: Tensor) -> Grads:
    a, b = n.saved
    ga = g / b
    gb = sum_to(-(ga * (a / b)), n.shapes[1]) if n.needs(1) else None
    return (sum_to(ga, n.shapes[0]) if n.needs(0) else None, gb)


def _pow(n: Node, g: Tensor) -> Grads:
    a, b = n.saved
    ga = gb = None
    if n.needs(0):
        if isinstance(b, float) and b == 2.0:
            ga = g * (a * 2.0)
        elif isinstance(b, float) and b == 1.0:
            ga = g
        else:
            ga = sum_to(g * (b * a ** (b - 1.0)), n.shapes[0])
    if n.needs(1):
        gb = sum_to(g * (a**b) * _log(a), n.shapes[1])
    return (ga, gb)


def _log(a: Any) -> Any:
    return a.log() if hasattr(a, "_conn") else math.log(a)


def _extreme2(n: Node, g: Tensor, pick: str) -> Grads:
    """maximum/minimum: the gradient goes to the chosen input; ties split it evenly."""
    a, b = n.saved
    win = (a > b) if pick == "max" else (a < b)
    tie = a == b
    dt = g.dtype
    wa = win.to(dt) + tie.to(dt) * 0.5
    ga = sum_to(g * wa, n.shapes[0]) if n.needs(0) else None
    gb = sum_to(g * (1.0 - wa), n.shapes[1]) if n.needs(1) else None
    return (ga, gb)


def _where(n: Node, g: Tensor) -> Grads:
    from gt.ops.arith import where  # noqa: PLC0415

    cond = n.saved[0]
    ga = sum_to(where(cond, g, 0.0), n.shapes[1]) if n.needs(1) else None
    gb = sum_to(where(cond, 0.0, g), n.shapes[2]) if n.needs(2) else None
    return (None, ga, gb)


def _clip(n: Node, g: Tensor) -> Grads:
    from gt.ops.arith import where  # noqa: PLC0415

    x, lo, hi = n.saved
    mask = None
    if lo is not None:
        mask = x >= lo
    if hi is not None:
        m2 = x <= hi
        mask = m2 if mask is None else mask & m2
    return (where(mask, g, 0.0), None, None)


def _swaps_last_two(parent: Any) -> bool:
    """Whether an input was made by swapping its last two dimensions (``W.T`` in ``x @ W.T``)."""
    if type(parent) is not Node or parent.op != "transpose":
        return False
    perm = parent.ctx
    k = len(perm)
    return k >= 2 and perm[:-2] == list(range(k - 2)) and perm[-2:] == [k - 1, k - 2]


def _unswapped(parent: Any, t: Tensor) -> Tensor:
    """``t.mT``, free when ``t`` was itself made by swapping the last two dimensions of a tensor."""
    if _swaps_last_two(parent) and parent.saved:
        _check_versions(parent)
        return parent.saved[0]
    return t.mT


def _matmul(n: Node, g: Tensor) -> Grads:
    # When an input is a transposed view (W.T in Linear), its gradient goes straight to the tensor
    # it was made from, already in that tensor's layout: (a.mT @ g).mT is computed as g.mT @ a. That
    # saves three instructions per layer, and a weight gradient laid out like its weight keeps the
    # optimizer's elementwise updates fast.
    a, b = n.saved
    pa, pb = n.parents
    ga = gb = None
    if n.needs(0):
        if _swaps_last_two(pa):
            ga = Past(sum_to(b @ g.mT, pa.shapes[0]))
        else:
            ga = sum_to(g @ _unswapped(pb, b), n.shapes[0])
    if n.needs(1):
        if _swaps_last_two(pb):
            gb = Past(sum_to(g.mT @ a, pb.shapes[0]))
        else:
            gb = sum_to(_unswapped(pa, a) @ g, n.shapes[1])
    return (ga, gb)


def _sum(n: Node, g: Tensor) -> Grads:
    axes, keep = n.ctx
    shape = n.shapes[0]
    if not keep and shape:
        kd = tuple(1 if axes is None or i in axes else d for i, d in enumerate(shape))
        g = g.reshape(kd)
    return (g.expand(shape),)


def _extreme(n: Node, g: Tensor) -> Grads:
    """max/min over axes: the gradient is split evenly among the elements equal to the result."""
    axes, keep = n.ctx
    x, out = n.saved
    shape = n.shapes[0]
    kd = tuple(1 if axes is None or i in axes else d for i, d in enumerate(shape))
    mask = (x == out.reshape(kd)).to(g.dtype)
    count = mask.sum(axes, keepdims=True)
    return (g.reshape(kd) * (mask / count),)


def _getitem(n: Node, g: Tensor) -> Grads:
    from gt.factories import zeros  # noqa: PLC0415

    z = zeros(n.shapes[0], dtype=g.dtype)
    idx = n.saved
    # In place on the fresh zeros: out id == input id, so the worker may write into it.
    z._conn.emit(
        P.OPCODE["index_add"],
        z.id,
        [z.id, g.id, *(t.id for t in idx)],
        {"key": n.ctx, "inplace": True},
    )
    return (z,) + (None,) * len(idx)


def _setitem(n: Node, g: Tensor) -> Grads:
    idx = n.saved
    key, key_shape = n.ctx
    gx = gv = None
    if n.needs(0):
        gx = g._emit(
            P.OPCODE["setitem"], [g.id, 0.0, *(t.id for t in idx)], g.shape, g.dtype, {"key": key}
        )
    if n.needs(1):
        sel = g._emit(
            P.OPCODE["getitem"], [g.id, *(t.id for t in idx)], key_shape, g.dtype, {"key": key}
        )
        gv = sum_to(sel, n.shapes[1])
    return (gx, gv) + (None,) * len(idx)


def _concat(n: Node, g: Tensor) -> Grads:
    axis = n.ctx
    out = []
    start = 0
    lead = (slice(None),) * axis
    for i, s in enumerate(n.shapes):
        size = s[axis]
        out.append(g[lead + (slice(start, start + size),)] if n.needs(i) else None)
        start += size
    return tuple(out)


def _transpose(n: Node, g: Tensor) -> Grads:
    perm = n.ctx
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (g._permute(inv),)


def _log_softmax(n: Node, g: Tensor) -> Grads:
    out = n.saved[0]
    return (g - out.exp() * g.sum(n.ctx, keepdims=True),)


def _relu(n: Node, g: Tensor) -> Grads:
    from gt.ops.arith import where  # noqa: PLC0415

    return (where(n.saved[0] > 0, g, 0.0),)


def _remainder(n: Node, g: Tensor) -> Grads:
    a, b = n.saved
    ga = sum_to(g, n.shapes[0]) if n.needs(0) else None
    gb = sum_to(-g * ((a - a % b) / b), n.shapes[1]) if n.needs(1) else None
    return (ga, gb)


RULES: dict[str, Rule] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "maximum": lambda n, g: _extreme2(n, g, "max"),
    "minimum": lambda n, g: _extreme2(n, g, "min"),
    "where": _where,
    "clip": _clip,
    "neg": lambda n, g: (-g,),
    "abs": lambda n, g: (g * n.saved[0].sign(),),
    "exp": lambda n, g: (g * n.saved[0],),
    "log": lambda n, g: (g / n.saved[0],),
    "sqrt": lambda n, g: ((g / n.saved[0]) * 0.5,),
    "sin": lambda n, g: (g * n.saved[0].cos(),),
    "cos": lambda n, g: (-(g * n.saved[0].sin()),),
    "tanh": lambda n, g: (g * (1.0 - n.saved[0] * n.saved[0]),),
    "sigmoid": lambda n, g: (g * (n.saved[0] * (1.0 - n.saved[0])),),
    "relu": _relu,
    "erf": lambda n, g: (g * ((-(n.saved[0] * n.saved[0])).exp() * _TWO_OVER_SQRT_PI),),
    "cast": lambda n, g: (g.to(n.ctx),),
    "copy": lambda n, g: (g,),
    "floor_divide": lambda n, g: (None, None),
    "remainder": _remainder,
    "matmul": _matmul,
    "sum": _sum,
    "max": _extreme,
    "min": _extreme,
    "reshape": lambda n, g: (g.reshape(n.shapes[0]),),
    "transpose": _transpose,
    "expand": lambda n, g: (sum_to(g, n.shapes[0]),),
    "getitem": _getitem,
    "setitem": _setitem,
    "concat": _concat,
    "log_softmax": _log_softmax,
}
