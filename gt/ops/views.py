"""Writes through views: an in-place op on a view that PyTorch would share storage with also
changes the tensor the view was taken from.

GT's tensors are values (a worker may hold a view's array apart from its base's), so PyTorch's
shared storage is kept in one direction, the one ported code relies on: ``x[0].zero_()``,
``m.view(-1).index_add_(...)``, ``w.t().mul_(2)``, ``x[:, 1][2] = 5`` change ``x``. A view made
by basic indexing (ints, slices, ``None``, ``...``), a reshape (``view``, ``flatten``,
``squeeze`` ...) or a permutation remembers its base weakly; after an in-place op on the view,
the view's new value is written into the base (recorded for autograd like the in-place op itself:
``base[key] = view``, or the reshape or permutation undone). ``detach()`` is such a view too, but
outside autograd: its changes reach the base as ``base.data`` would take them (no graph, no leaf
check; the base's version still counts the change). A view whose base is gone, or has
changed since the view was taken (the other direction, which GT does not follow), stops writing
back. Advanced indexing makes copies, as in PyTorch.
"""

from __future__ import annotations

import weakref
from typing import Any

from gt.grad_mode import _mode


def link(base: Any, view: Any, kind: str, data: Any) -> None:
    """Record that ``view`` is ``base`` seen through ``kind`` (``"key"``: ``base[data]``,
    ``"reshape"``, ``"perm"``: ``base.permute(data)``, ``"detach"``: ``base.detach()``)."""
    # (a proxy such as ``p.data`` dies with the expression that made it: held strongly; a
    # tensor weakly, so that a view does not keep its base's array alive)
    ref = (lambda: base) if base._proxy else weakref.ref(base)
    view._vb = (ref, _direct_changes(base), kind, data, view.shape)


def link_detached(base: Any, alias: Any) -> None:
    """Record that ``alias`` is ``base.detach()``: its in-place changes reach ``base`` (or, when
    ``base`` is itself a view, the tensor ``base`` was taken from) with autograd off."""
    vb = base._vb
    if vb is None:
        link(base, alias, "detach", ("reshape", None))
    else:  # (the view may be a temporary, ``x[0].detach()``: link to what it writes into)
        ref, version, kind, data, shape = vb
        alias._vb = (ref, version, "detach", data if kind == "detach" else (kind, data), shape)


def _direct_changes(base: Any) -> int:
    """How often ``base`` was changed in place other than through its views: a view taken
    before such a change is stale (GT does not carry the change into it) and stops writing."""
    return base._version - base._vwn


def write_back(view: Any, take_value: Any) -> None:
    """After an in-place op on ``view``: write its value into its base, if it is still linked
    (``take_value``: :func:`gt.ops.inplace.take_value`, which calls this)."""
    vb = view._vb
    if vb is None:
        return
    ref, version, kind, data, shape = vb
    base = ref()
    if (
        base is None
        or base.id is None
        or _direct_changes(base) != version
        or base is view
        or view.shape != shape
    ):  # fmt: skip  (gone, changed since, or reshaped in place)
        view._vb = None
        return
    if kind == "detach":  # shared outside autograd, as PyTorch's detach() shares storage
        kind, data = data
        enabled, _mode.enabled = _mode.enabled, False
        try:
            _write(base, view, kind, data, take_value)
        finally:
            _mode.enabled = enabled
        return
    if _mode.enabled and base.requires_grad and base._node is None:
        view._vb = None
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            "operation (wrap it in `with gt.no_grad():`)"
        )
    _write(base, view, kind, data, take_value)


def _write(base: Any, view: Any, kind: str, data: Any, take_value: Any) -> None:
    if kind == "key":
        base[data] = view
    else:
        if kind == "reshape":
            new = view.reshape(base.shape)
        else:  # "perm": undo the permutation
            inverse = [0] * len(data)
            for i, p in enumerate(data):
                inverse[p] = i
            new = view.permute(inverse)
        take_value(base, new if new is not view else view._alias())
    base._vwn += 1  # that change came through a view: not direct


def is_basic_key(key: Any) -> bool:
    """Whether indexing with ``key`` makes a view in PyTorch (ints, slices, None, Ellipsis)."""
    kind = type(key)
    if kind is int or kind is slice:
        return True
    if kind is not tuple:
        return key is None or key is Ellipsis
    for item in key:
        kind = type(item)
        if not (kind is int or kind is slice or item is None or item is Ellipsis):
            return False
    return True


__all__ = ["is_basic_key", "link", "link_detached", "write_back"]
