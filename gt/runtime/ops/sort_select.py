"""A few positions of a stable sort without sorting everything: ``topk``'s first ``k`` and
``kthvalue``'s one position, on NumPy rows.

``stable_positions(x, start, k, descending)`` is ``argsort(x, stable)[:, start:start + k]`` (NaN
the largest value, ties in index order, as ``argsort``'s kernel orders them) for a 2-d ``x``,
along its last axis. ``np.partition`` finds the values at the two ends of the window in linear
time; every element strictly between them is in the window, and of the elements equal to an end
value those whose rank among their ties (in index order) falls inside; then only the ``k`` chosen
ones are sorted. For ``topk(10)`` of 2048 columns that is about a tenth of the full sort's time.
The first ``k`` positions (``topk``) take ``np.argpartition``'s ``k`` instead wherever no value
left out ties with the boundary, which a full comparison with the boundary value tells: ``topk(10)``
of [4096, 2048] float32 took 116 ms through GT with the two ends' masks, 44 ms so (PyTorch: 21-23).
Pure: NumPy only.
"""

from __future__ import annotations

import numpy as np

#: The window must be at most this share of a row (and rows this long) for the selection to pay.
MAX_SHARE = 0.125
MIN_ROW = 64


def worth_it(n: int, k: int) -> bool:
    """Whether selecting ``k`` of ``n`` beats sorting all ``n``."""
    return n >= MIN_ROW and k <= MAX_SHARE * n


def _full(x: np.ndarray, descending: bool) -> np.ndarray:
    """The stable argsort along the last axis (descending: ties still in index order)."""
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    n = x.shape[-1]
    return n - 1 - np.flip(np.argsort(np.flip(x, -1), axis=-1, kind="stable"), -1)


def _ends(x: np.ndarray, first_at: int, last_at: int) -> tuple[np.ndarray, np.ndarray]:
    """The ascending order's values at positions ``first_at`` and ``last_at`` of each row, as
    columns: one partition at the inner one, then a small one among what lies beyond it."""
    lo, hi = min(first_at, last_at), max(first_at, last_at)
    n = x.shape[-1]
    if n - 1 - hi < lo:  # (the window is near the top: partition at lo, look above it)
        part = np.partition(x, lo, axis=-1)
        inner, above = part[:, lo : lo + 1], part[:, lo:]
        outer = (
            np.partition(above, hi - lo, axis=-1)[:, hi - lo : hi - lo + 1] if hi > lo else inner
        )
        return (inner, outer) if first_at == lo else (outer, inner)
    part = np.partition(x, hi, axis=-1)
    inner, below = part[:, hi : hi + 1], part[:, : hi + 1]
    outer = np.partition(below, lo, axis=-1)[:, lo : lo + 1] if hi > lo else inner
    return (outer, inner) if first_at == lo else (inner, outer)


def _tie_ranks(eq: np.ndarray) -> np.ndarray:
    """Each element's rank (from 1, in index order) among its row's ``True``s; where no row holds
    two (floats seldom tie), the mask itself is that rank."""
    if eq.sum(-1).max(initial=0) <= 1:
        return eq
    return np.cumsum(eq, axis=-1, dtype=np.int32)


def _first_k(x: np.ndarray, k: int, descending: bool) -> np.ndarray:
    """The first ``k`` positions of the stable order: ``np.argpartition``'s ``k`` (which, among
    values tied at the boundary, keeps any), kept for every row where no value outside them ties
    with the boundary, and sorted; the rows where one does go to the window's general way."""
    n = x.shape[-1]
    if descending:
        cand = np.argpartition(x, n - k, axis=-1)[:, n - k :]
    else:
        cand = np.argpartition(x, k - 1, axis=-1)[:, :k]
    cand.sort(axis=-1)  # (index order, so that the stable sort below orders ties by index)
    vals = np.take_along_axis(x, cand, axis=-1)
    if x.dtype.kind == "f" and np.isnan(vals).any():  # (NaN ties with NaN: the general way)
        return _window(x, 0, k, descending)
    bound = vals.min(-1, keepdims=True) if descending else vals.max(-1, keepdims=True)
    tied = (x == bound).sum(-1) != (vals == bound).sum(-1)  # a tie left out: maybe not first
    if tied.any():
        cand[tied] = _window(x[tied], 0, k, descending)
        sure = ~tied
        cand[sure] = np.take_along_axis(cand[sure], _full(vals[sure], descending), axis=-1)
        return cand
    return np.take_along_axis(cand, _full(vals, descending), axis=-1)


def stable_positions(x: np.ndarray, start: int, k: int, descending: bool) -> np.ndarray:
    """Indices at positions ``[start, start + k)`` of ``x``'s stable sort along its last axis."""
    rows, n = x.shape
    if not (x.dtype.kind in "fiub" and worth_it(n, k)) or k == 0:
        return _full(x, descending)[:, start : start + k]
    if start == 0 and x.dtype.kind != "b":  # (topk: bools tie too often to gain)
        return _first_k(x, k, descending)
    return _window(x, start, k, descending)


def _window(x: np.ndarray, start: int, k: int, descending: bool) -> np.ndarray:
    """:func:`stable_positions` by partitions at the window's two ends (the module docstring)."""
    rows, n = x.shape
    stop = start + k - 1  # the window's last position
    # the values at the window's ends: a descending position p holds the ascending n - 1 - p's
    first_at, last_at = (n - 1 - start, n - 1 - stop) if descending else (start, stop)
    first, last = _ends(x, first_at, last_at)
    nan = np.isnan(x) if x.dtype.kind == "f" else None
    if nan is not None and nan.any():  # (NaN is the largest value, and equal to itself)
        nan_first, nan_last = np.isnan(first), np.isnan(last)
        if descending:
            before_first, before_last = (
                (x > first) | (nan & ~nan_first),
                (x > last) | (nan & ~nan_last),
            )
        else:
            before_first, before_last = (
                (x < first) | (~nan & nan_first),
                (x < last) | (~nan & nan_last),
            )
        eq_first, eq_last = (x == first) | (nan & nan_first), (x == last) | (nan & nan_last)
    else:
        cmp = np.greater if descending else np.less
        before_first, before_last = cmp(x, first), cmp(x, last)
        eq_first, eq_last = x == first, x == last
    # strictly between the ends; then the ties of each end whose rank (in index order) is inside
    take = ~before_first & ~eq_first & before_last
    # a tie of rank r (from 1, in index order) of a value preceded by b elements sits at b + r - 1
    skip = start - before_first.sum(-1, keepdims=True)  # the first value's ties before the window
    upto = stop + 1 - before_last.sum(-1, keepdims=True)  # the last value's ties inside it
    rank_first = _tie_ranks(eq_first)
    rank_last = rank_first if first_at == last_at else _tie_ranks(eq_last)
    take |= eq_first & (rank_first > skip) & (~eq_last | (rank_last <= upto))
    take |= eq_last & ~eq_first & (rank_last <= upto)
    chosen = np.nonzero(take)[1].reshape(rows, k)  # (each row's in index order)
    order = _full(np.take_along_axis(x, chosen, axis=-1), descending)
    return np.take_along_axis(chosen, order, axis=-1)
