"""``unique_slices``, the host half of ``unique(dim=...)``, against NumPy's ``np.unique(axis=...)``
on many random shapes (no cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from gt.ops.selection import unique_slices


@pytest.mark.parametrize("seed", range(20))
def test_unique_slices_match_numpy_on_random_shapes(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, rng.integers(1, 4)))
    a = rng.integers(-2, 3, shape).astype(rng.choice([np.int64, np.float32, np.int8]))
    d = int(rng.integers(0, a.ndim))
    a = np.concatenate([a, np.flip(a, d)], axis=d)  # repeats, out of order
    values, inverse, counts = unique_slices(a, d)
    want_v, want_i, want_c = np.unique(a, axis=d, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values, want_v)
    assert values.dtype == a.dtype
    np.testing.assert_array_equal(inverse, want_i.reshape(-1))
    np.testing.assert_array_equal(counts, want_c)
