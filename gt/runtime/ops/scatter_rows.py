"""``a[key] += v`` with repeated indices accumulating, on NumPy arrays: ``np.add.at``'s result, bit
for bit, in a fraction of its time where each index reaches a row of many elements.

``np.add.at`` costs about 30 ns an element whatever the key (an embedding's backward of 200k
lookups of 128 floats: 0.9 s), and it sits under every scatter-shaped gradient: embeddings,
``index_select``, ``gather``, interpolation. Here the contributions are sorted by the row they go
to (stably, so each row keeps them in ``add.at``'s order) and added in rounds: the first
contribution of every row, then the second of every row hit twice, and so on, each round one
NumPy addition over a block of rows. Every element gets the same additions in the same order as
``add.at`` gives it, so the same roundings. (``np.add.reduceat`` would be one call, but it sums a
group pairwise, not in sequence.)

Only floating and complex arrays with values of their own dtype, keys of slices and integer arrays
(``Ellipsis`` allowed) and rows of at least :data:`MIN_ROW` elements take this path.

``scatter_add`` along a dimension builds a key of one integer array per dimension (the index,
and an ``arange`` along each other dimension). An index expanded over rows, as message passing
writes it (``idx[:, None].expand_as(src)``), is rewritten as rows and takes the path above; any
other such key, on a contiguous array, is flattened to positions in ``a``'s memory
(:mod:`gt.runtime.ops.index_keys`): ``np.add.at`` on a 1-d array and a 1-d key runs its own fast
loop, the same additions in the same order, 7-10x sooner than with a key of several arrays.
Anything else goes to ``np.add.at`` itself. Pure: NumPy only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt.runtime.ops.index_keys import flat_positions, rows_key

#: Below this many elements a row, ``np.add.at`` is as quick.
MIN_ROW = 8
#: Seconds a round costs beyond its elements (a NumPy call on a slice, about 2 us) and
#: ``np.add.at``'s seconds an element (17 ns for 200k rows of 128 floats, on the CI machine):
#: where the rounds' overhead would cost more than ``add.at``, it is ``add.at``.
ROUND_COST, ELEMENT_COST = 2e-6, 1.5e-8
_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def add_at(a: np.ndarray, key: Any, v: Any) -> None:
    """``np.add.at(a, key, v)``, faster where it can be (see the module docstring)."""
    rows = rows_key(a, key)
    if rows is not None:  # (an index expanded over whole rows: a scatter of rows)
        key = rows
    plan = _plan(a, key, v)
    if plan is None:
        if not _flat_add_at(a, key, v):
            np.add.at(a, key, v)
        return
    view, adv, arrays, bshape, b_pos = plan
    nb, sizes = len(bshape), [view.shape[i] for i in adv]
    rest_shape = tuple(view.shape[i] for i in range(view.ndim) if i not in adv)
    row, m = math.prod(rest_shape), math.prod(bshape)
    # (the index's dims sit where its arrays are when they are adjacent, else first)
    res_shape = (
        (*view.shape[:b_pos], *bshape, *view.shape[b_pos + len(adv) :])
        if b_pos
        else (*bshape, *rest_shape)
    )
    # which target row each contribution goes to, in add.at's order (C order of the index)
    flat = [
        np.broadcast_to(np.where(x < 0, x + n, x), bshape).reshape(-1)
        for x, n in zip(arrays, sizes)
    ]
    where = np.ravel_multi_index(flat, sizes)
    # each row's contributions in their order: a stable sort, or (2.5x sooner) any sort of keys
    # made unique by the position
    if int(where.max(initial=0)) < (1 << 62) // max(m, 1):
        order = np.argsort(where * m + np.arange(m), kind="quicksort")
    else:
        order = np.argsort(where, kind="stable")
    by_row = where[order]
    firsts = np.flatnonzero(np.concatenate(([True], by_row[1:] != by_row[:-1])))
    counts = np.diff(np.append(firsts, m))
    rounds = int(counts.max())
    if rounds * ROUND_COST > m * row * ELEMENT_COST:  # (a few rows hit very often: add.at)
        np.add.at(a, key, v)
        return
    # rows by how often they are hit, most first: round r adds the r-th contribution of every row
    # hit more than r times, and those rows are then a prefix of the accumulator
    rank = np.empty(firsts.size, dtype=np.int64)
    rank[np.argsort(-counts, kind="stable")] = np.arange(firsts.size)
    alive = np.bincount(counts, minlength=rounds + 1)[::-1].cumsum()[::-1][1:]  # rows hit > r times
    starts = np.concatenate(([0], np.cumsum(alive)[:-1]))
    group = np.repeat(np.arange(firsts.size), counts)
    nth = np.arange(m) - firsts[group]
    vals = np.broadcast_to(v, res_shape)
    vals = np.moveaxis(vals, list(range(b_pos, b_pos + nb)), list(range(nb))).reshape(m, row)
    take = np.empty(m, dtype=np.int64)  # (the values' rows, laid out round by round)
    take[starts[nth] + rank[group]] = order
    targets = np.moveaxis(view, adv, list(range(len(adv))))
    at = np.unravel_index(by_row[firsts][np.argsort(rank)], sizes)
    acc = targets[at].reshape(firsts.size, row)
    # Each round's values are gathered into one buffer, the first round's size, and added from
    # there while they are in cache: gathered all at once (51 MB for 100k rows of 128 floats),
    # they were written to memory and read back. With the sort above, 100k rows into 20k took
    # 21-22 ms where they took 29-31.
    buf = np.empty((int(alive[0]), row), dtype=a.dtype)
    for r in range(rounds):
        n = alive[r]
        part = buf[:n]
        np.take(vals, take[starts[r] : starts[r] + n], axis=0, out=part, mode="clip")
        acc[:n] += part
    targets[at] = acc.reshape(firsts.size, *rest_shape)


def _plan(a: np.ndarray, key: Any, v: Any) -> tuple | None:
    """``(view, advanced axes, index arrays, their broadcast shape, where the broadcast dims sit
    in the result)``, or ``None`` where ``np.add.at`` must do it."""
    if a.dtype not in _DTYPES or np.asarray(v).dtype != a.dtype:
        return None
    items = list(key) if isinstance(key, tuple) else [key]
    if any(k is Ellipsis for k in items):
        at = next(i for i, k in enumerate(items) if k is Ellipsis)
        items[at : at + 1] = [slice(None)] * (a.ndim - len(items) + 1)
    if len(items) > a.ndim:
        return None
    items += [slice(None)] * (a.ndim - len(items))
    adv = []
    for i, k in enumerate(items):
        if isinstance(k, np.ndarray) and k.dtype.kind in "iu":
            adv.append(i)
        elif not isinstance(k, slice):
            return None  # (an int, None, a bool mask, a list: add.at's own business)
    if not adv:
        return None
    arrays = [items[i] for i in adv]
    try:
        bshape = np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError:
        return None
    view = a[tuple(k if isinstance(k, slice) else slice(None) for k in items)]
    rest = math.prod(view.shape[i] for i in range(view.ndim) if i not in adv)
    if rest < MIN_ROW or math.prod(bshape) == 0:
        return None
    together = adv == list(range(adv[0], adv[-1] + 1))
    return view, adv, arrays, bshape, (adv[0] if together else 0)


#: Below this many contributions, flattening a key of arrays gains nothing over ``np.add.at``.
MIN_FLAT = 4096


def _flat_add_at(a: np.ndarray, key: Any, v: Any) -> bool:
    """``np.add.at`` on ``a``'s flat memory with the key's positions in it (see the module
    docstring); False, having done nothing, where that does not apply or an index is out of
    range (``np.add.at`` then raises as it does)."""
    if not a.flags.c_contiguous or a.dtype not in _DTYPES:
        return False
    v = np.asarray(v)
    if v.dtype != a.dtype:
        return False
    found = flat_positions(a.shape, key, MIN_FLAT)
    if found is None:
        return False
    flat, bshape = found
    try:
        values = np.broadcast_to(v, bshape)
    except ValueError:
        return False
    np.add.at(a.reshape(-1), flat.reshape(-1), values.reshape(-1))
    return True
