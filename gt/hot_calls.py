"""What a call of a hot function is (:mod:`gt.hotpath`): the signature that picks its capture,
its tensor arguments (also inside lists, tuples and dicts), the structure of its results, and
what it did to tensors' ``.grad``."""

from __future__ import annotations

from typing import Any

from gt import autograd as A
from gt.ops import autocast
from gt.runtime.client.capture import CallRecord, NotCapturable
from gt.tensor import TensorBase


def flatten(value: Any, leaves: list) -> Any:
    """The shape of a result with each tensor replaced by its index in ``leaves``.

    Raises:
        NotCapturable: the result holds something other than tensors, ``None`` and containers.
    """
    if isinstance(value, TensorBase):
        leaves.append(value)
        return ("t", len(leaves) - 1)
    if value is None:
        return ("n",)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(flatten(v, leaves) for v in value))
    if isinstance(value, dict):
        return ("d", tuple((k, flatten(v, leaves)) for k, v in value.items()))
    raise NotCapturable(f"it returns a {type(value).__name__} (return tensors, or nothing)")


def unflatten(spec: tuple, leaves: list) -> Any:
    kind = spec[0]
    if kind == "t":
        return leaves[spec[1]]
    if kind == "n":
        return None
    if kind == "d":
        return {k: unflatten(v, leaves) for k, v in spec[1]}
    items = [unflatten(v, leaves) for v in spec[1]]
    return tuple(items) if kind == "tuple" else items


def signature(args: tuple, kwargs: dict) -> tuple | None:
    """What a capture is for: each argument's shape and dtype, or its value, and which tensor
    arguments are the same tensor; ``None`` when an argument cannot be compared (the call then
    runs eagerly)."""
    sig: list = []
    first: dict[int, int] = {}
    alias: list[int] = []
    for v in (*args, *(kwargs[k] for k in sorted(kwargs))):
        if isinstance(v, TensorBase):
            sig.append(("T", v.shape, v.dtype, v._rg))
            alias.append(first.setdefault(v.id, len(alias)))
        elif not describe(v, sig, first, alias):
            return None
    # (autocast decides each op's dtype: a step captured outside a region differs inside it)
    amp = (tuple(autocast.REGIONS), tuple(sorted(autocast.BASE.items())))
    return (tuple(sig), tuple(sorted(kwargs)), tuple(alias), A._mode.enabled, amp)


def describe(v: Any, sig: list, first: dict, alias: list) -> bool:
    """Add argument ``v`` to a signature (see :func:`signature`): a tensor by its shape and
    dtype, a list, tuple or dict (a batch as a data loader gives it) by its structure and what it
    holds, anything else by its value; False when it cannot be compared."""
    if isinstance(v, TensorBase):
        sig.append(("T", v.shape, v.dtype, v._rg))
        alias.append(first.setdefault(v.id, len(alias)))
        return True
    if isinstance(v, (list, tuple)):  # (a namedtuple too: its tensors are never compared by ==)
        sig.append((type(v), len(v)))
        return all(describe(x, sig, first, alias) for x in v)
    if type(v) is dict:
        sig.append((dict, tuple(v)))
        return all(describe(x, sig, first, alias) for x in v.values())
    try:
        hash(v)
    except TypeError:
        return False
    sig.append(("V", type(v).__name__, v))
    return True


def tensor_args(args: tuple, kwargs: dict) -> list:
    """The tensor arguments, in order, with those in lists, tuples and dicts where they are."""
    out: list = []
    stack = [*(kwargs[k] for k in reversed(sorted(kwargs))), *reversed(args)]
    while stack:
        v = stack.pop()
        if isinstance(v, TensorBase):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif type(v) is dict:
            stack.extend(reversed(list(v.values())))
    return out


def grad_effects(rec: CallRecord, grads_set: list) -> dict:
    """What a recorded call did to tensors' ``.grad`` (``grads_set``: :data:`guards.grads_set`
    of the call), written into ``rec`` (:attr:`CallRecord.grads`, :attr:`~CallRecord.grad_args`):
    a gradient it made where the tensor had none (``zero_grad()`` ran outside the step) is bound
    anew by every replay; one it made or updated from the tensor's old gradient (accumulating:
    the old one becomes an argument of the call) or after freeing it (``zero_grad()`` inside)
    is written over whichever gradient the tensor holds when a replay runs. Returns, for each,
    the old gradient's id (or the new one's, where there was none) -> its tensor."""
    first: dict[int, tuple] = {}
    for h, old in grads_set:
        first.setdefault(id(h), (h, old))
    if not first:
        return {}
    read = {a for ins in rec.instrs for a in ins[2] if type(a) is int}
    holders = {}
    for h, old in first.values():
        g = h._grad
        if g is None:
            continue
        made = g.id in rec.made
        if old is not None and old < rec.lo and old in read:  # (into a new tensor or in place)
            if old not in rec.args:
                rec.args.append(old)
            rec.grad_args.append(old)
            holders[old] = h
            if made:
                rec.grads[g.id] = old
        elif made and old is None:
            rec.grads[g.id] = None
            holders[g.id] = h
        elif made and old < rec.lo and old in rec.freed:
            rec.grads[g.id] = old
            holders[old] = h
    return holders


def carries_graph(t: Any) -> bool:
    """Whether tensor ``t`` carries a gradient graph that backward has not yet run through."""
    node = t._node
    return (
        node is not None
        and getattr(node, "saved", None) is not None
        and not getattr(node, "spent", False)
    )


def tensor_ids(args: tuple, kwargs: dict) -> list[int]:
    """The ids of the tensor arguments, each tensor once, in order (as the template has them)."""
    return list(dict.fromkeys(t.id for t in tensor_args(args, kwargs)))
