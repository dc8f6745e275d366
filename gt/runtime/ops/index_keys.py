"""Keys of one integer array per dimension, as ``gather`` and ``scatter_add`` build them (the
index along one dimension, an ``arange`` along each other), read in cheaper forms on NumPy.

* :func:`one_array`: a key of whole slices and one integer array (``embedding``'s,
  ``index_select``'s) goes to ``np.take``, a third sooner than NumPy's indexing (200k rows of
  128 floats: 32 ms, 23 ms by ``np.take``).
* :func:`rows_key`: where the index does not vary along a dimension whose ``arange`` covers it
  (an index expanded over rows, ``idx[..., None].expand(...)``), that ``arange`` is a whole
  slice, and the key addresses rows: ``x[rows]`` copies rows of memory where ``x[key]`` visited
  every element through several index arrays (a gather of 128 rows of 256 floats from 64
  batches: 10.7 ms, 1.5 ms as rows).
* :func:`flat_positions`: any other such key as positions in a C-contiguous array's memory, for
  one ``np.take`` (or ``np.add.at``) on a 1-d array, which runs NumPy's fast one-index loop
  (a [4096, 512] gather from [4096, 2048]: 26 ms with two index arrays, 13 ms so).

Pure: NumPy only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def index_arrays(ndim: int, key: Any) -> list | None:
    """The key as one integer array per dimension, each of ``ndim`` dims, or None."""
    items = key if isinstance(key, tuple) else (key,)
    if len(items) != ndim or not items:
        return None
    for k in items:
        if not (isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.ndim == ndim):
            return None
    return list(items)


def _is_arange_along(k: np.ndarray, j: int, n: int) -> bool:
    """Whether ``k`` is ``0..n-1`` along axis ``j`` and constant (size 1 or stride 0) along the
    others."""
    if k.shape[j] != n:
        return False
    if any(k.shape[i] != 1 and k.strides[i] != 0 for i in range(k.ndim) if i != j):
        return False
    line = k[tuple(slice(None) if i == j else 0 for i in range(k.ndim))]
    return bool(np.array_equal(line, np.arange(n)))


def rows_key(a: Any, key: Any) -> tuple | None:
    """``key`` with each ``arange`` that covers a whole dimension of ``a``, along which the other
    arrays do not vary, as a slice (the other arrays cut to one entry along it); None where there
    is none, or where the arrays left would not sit together (NumPy would move their dims
    first). ``a[rows_key(a, key)]`` is ``a[key]``, element for element."""
    arrays = index_arrays(a.ndim, key)
    if arrays is None or a.ndim < 2 or any(k.size == 0 for k in arrays):
        return None  # (an empty key selects nothing: NumPy's own indexing)
    whole = set()
    for j, k in enumerate(arrays):
        others_flat = all(
            o.shape[j] == 1 or o.strides[j] == 0 for i, o in enumerate(arrays) if i != j
        )
        if others_flat and _is_arange_along(k, j, a.shape[j]):
            whole.add(j)
    left = [i for i in range(a.ndim) if i not in whole]
    if not whole or not left or left != list(range(left[0], left[-1] + 1)):
        return None
    cut = tuple(0 if i in whole else slice(None) for i in range(a.ndim))
    return tuple(slice(None) if i in whole else arrays[i][cut] for i in range(a.ndim))


def flat_positions(shape: tuple, key: Any, at_least: int) -> tuple[np.ndarray, tuple] | None:
    """``(positions, their shape)``: where each element of ``x[key]`` lies in a C-contiguous
    ``x`` of ``shape`` (int64, negative indices wrapped); None where the key is not one integer
    array per dimension, addresses fewer than ``at_least`` elements, or holds an index out of
    range (NumPy's own indexing then raises as it does)."""
    arrays = index_arrays(len(shape), key)
    if arrays is None:
        return None
    try:
        bshape = np.broadcast_shapes(*(k.shape for k in arrays))
    except ValueError:
        return None
    if math.prod(bshape) < max(at_least, 1):
        return None
    flat = None
    for k, n in zip(arrays, shape):
        lo, hi = int(k.min()), int(k.max())
        if lo < -n or hi >= n:
            return None
        if lo < 0:
            k = np.where(k < 0, k + n, k)
        if flat is None:
            flat = np.broadcast_to(k, bshape).astype(np.int64)
        else:
            flat *= n
            flat += k
    return flat, bshape


def one_array(ndim: int, key: Any) -> tuple[int, np.ndarray] | None:
    """``(axis, index)`` for a key of whole slices and one integer array (``x[:, idx]``), which
    ``np.take`` reads as NumPy's indexing does, error included, in two thirds of its time; None
    for any other key."""
    items = key if isinstance(key, tuple) else (key,)
    if len(items) > ndim:
        return None
    found = None
    for axis, k in enumerate(items):
        if isinstance(k, np.ndarray) and k.dtype.kind in "iu" and found is None:
            found = (axis, k)
        elif not (type(k) is slice and k == _WHOLE):
            return None
    return found


_WHOLE = slice(None)


def take(x: np.ndarray, key: Any, at_least: int = 4096) -> np.ndarray | None:
    """``x[key]`` for a key of whole slices and one integer array (by ``np.take``), or of one
    integer array per dimension, as rows or from flat memory (see the module docstring); None
    where none of these applies."""
    single = one_array(x.ndim, key)
    if single is None:
        rows = rows_key(x, key)
        if rows is not None:
            single = one_array(x.ndim, rows)
            if single is None:
                return x[rows]
    if single is not None:
        return np.take(x, single[1], axis=single[0])
    if not x.flags.c_contiguous:
        return None
    found = flat_positions(x.shape, key, at_least)
    if found is None:
        return None
    flat, bshape = found
    return np.take(x.reshape(-1), flat.reshape(-1)).reshape(bshape)
