"""Registry entries: ordering along an axis.

``argsort`` is the one primitive: ``sort`` and ``topk`` take its indices and pick the values with
``gather`` on the client, so their gradients flow back to the picked positions through
``getitem``'s derivative (as PyTorch's do). ``topk``, ``kthvalue`` and ``median`` ask for only the
positions they need, which a NumPy worker finds without sorting everything (:mod:`.sort_select`). The sort is stable, ascending or descending, with NaN ordered as the
largest value (as in PyTorch).
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, Shape, int64_dtype
from gt.runtime.ops.scan import axis_shape
from gt.runtime.ops.sort_select import stable_positions, worth_it


def _stable_argsort(xp: Any, x: Any, axis: int) -> Any:
    if xp.__name__ == "numpy":
        return xp.argsort(x, axis=axis, kind="stable")
    return xp.argsort(x, axis=axis)  # CuPy's sort is a stable radix sort


def _k_argsort(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x, axis = v[0], at["axis"]
        if x.ndim == 0:
            return xp.zeros((), dtype=xp.int64)
        if at.get("k") is not None:  # a window of the order (topk, kthvalue): [start, start + k)
            return window(x, axis, at.get("start", 0), at["k"], bool(at.get("descending")))
        return order(x, axis, at)

    def window(x: Any, axis: int, start: int, k: int, descending: bool) -> Any:
        n = x.shape[axis]
        if xp.__name__ != "numpy" or not worth_it(n, k):
            full = order(x, axis, {"descending": descending})
            return xp.take(full, xp.arange(start, start + k), axis=axis)
        rows = xp.moveaxis(x, axis, -1)
        lead = rows.shape[:-1]
        idx = stable_positions(rows.reshape(-1, n), start, k, descending)
        return xp.moveaxis(idx.reshape(*lead, k), -1, axis).astype(xp.int64, copy=False)

    def order(x: Any, axis: int, at: Any) -> Any:
        if not at.get("descending"):
            return _stable_argsort(xp, x, axis).astype(xp.int64, copy=False)
        # Descending and still stable: sort the reversed array ascending, read the order backwards
        # and map positions back (ties keep their original order).
        n = x.shape[axis]
        rev = xp.flip(x, axis)
        idx = xp.flip(_stable_argsort(xp, rev, axis), axis)
        return (n - 1 - idx).astype(xp.int64, copy=False)

    return h


def _argsort_shape(shapes: list, attrs: Any) -> Shape:
    if not shapes[0]:
        return ()
    shape = axis_shape(shapes, attrs)
    if attrs.get("k") is None:
        return shape
    ax = attrs["axis"] % len(shape)
    return (*shape[:ax], attrs["k"], *shape[ax + 1 :])


ENTRIES: list[Op] = [
    Op(
        "argsort",
        78,
        shape=_argsort_shape,
        dtype=int64_dtype,
        kernel=_k_argsort,
        shard="along_axis",
        doc="indices that sort x along attrs.axis (stable; attrs.descending); with attrs.k only "
        "the positions [attrs.start, attrs.start + k) of that order",
    ),
]
