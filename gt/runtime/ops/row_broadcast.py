"""An exact binary op of a large array and a short row broadcast over its rows (a bias, a norm's
weight), computed with the row tiled to 64 KiB and the array's rows folded to match.

On the 2-core VMs GT is tested on, ``x * w`` with ``x`` of shape ``[4096, 1024]`` and ``w`` of
``[1024]`` float32 took 8-12 ms in most runs, where ``x * x`` took 1.2 ms; which allocations
were slow changed from run to run (a copy of the same ``w`` could be fast or slow), and every
width we tried (768 to 4096) was slow in some runs. A row folded to 64 KiB (``x`` seen as
``[256, 16384]``, ``w`` tiled 16 times) took 1.9 ms in every run. The operation is the same one
per element, so the result is the same, bit for bit; only exact IEEE operations
(:data:`FOLDABLE`) take this path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: NumPy ufuncs whose result per element does not depend on how the loop is split.
FOLDABLE = frozenset(("add", "subtract", "multiply", "divide", "true_divide", "maximum", "minimum"))
#: Outputs smaller than this are left alone (the tile costs a few microseconds).
MIN_ELEMENTS = 1 << 18
#: The folded row's size: past the first-level cache's reach, where the slow cases went away.
TILE_BYTES = 1 << 16


def folded(fn: Any, a: Any, b: Any, out: Any = None) -> Any:
    """``fn(a, b)`` (into ``out``, when given) with the short operand's row tiled, or ``None``
    when this is not that case: both NumPy arrays of one dtype, one C-contiguous of at least
    :data:`MIN_ELEMENTS`, the other one contiguous row as long as its last dimension (``[n]``,
    ``[1, n]`` ...), shorter than :data:`TILE_BYTES`."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype:
        return None
    if a.size >= MIN_ELEMENTS and b.size < a.size:
        big, row = a, b
    elif b.size >= MIN_ELEMENTS and a.size < b.size:
        big, row = b, a
    else:
        return None
    n = big.shape[-1] if big.ndim >= 2 else 0
    if not n or row.size != n or row.ndim > big.ndim or row.shape[-1] != n:
        return None
    if not big.flags.c_contiguous or not row.flags.c_contiguous:
        return None
    if out is not None and (out.shape != big.shape or not out.flags.c_contiguous):
        return None
    k = _fold(big.size // n, n * big.itemsize)
    if k <= 1:
        return None
    tiled = np.tile(row.reshape(-1), k)
    flat = big.reshape(-1, k * n)
    target = None if out is None else out.reshape(flat.shape)
    r = fn(flat, tiled, out=target) if big is a else fn(tiled, flat, out=target)
    return out if out is not None else r.reshape(big.shape)


def _fold(rows: int, row_bytes: int) -> int:
    """How many rows to fold into one: the fewest that reach :data:`TILE_BYTES` and divide
    ``rows`` (trying up to twice as many), else 1 (not folded)."""
    if row_bytes >= TILE_BYTES:
        return 1
    k = -(-TILE_BYTES // row_bytes)
    for c in range(k, min(2 * k, rows) + 1):
        if rows % c == 0:
            return c
    return 1
