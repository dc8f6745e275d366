"""``sort_select.stable_positions``: a window of the stable order, found without the full sort,
is the full sort's window exactly (NaN last ascending and first descending, ties in index
order), for floats, integers, ties, NaN and infinities."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.ops.sort_select import _full, stable_positions, worth_it


def _rows(rng, kind, rows, n):
    if kind == "float32":
        return rng.standard_normal((rows, n)).astype(np.float32)
    if kind == "ints":
        return rng.integers(-5, 5, (rows, n))
    if kind == "uint8":
        return rng.integers(0, 4, (rows, n)).astype(np.uint8)
    x = rng.integers(-3, 3, (rows, n)).astype(np.float64)  # ties, NaN, inf, signed zeros
    x[rng.random((rows, n)) < rng.random()] = np.nan
    x[rng.random((rows, n)) < 0.05] = np.inf
    x[x == 0] = -0.0 if rng.random() < 0.5 else 0.0
    return x


@pytest.mark.parametrize("first", [False, True], ids=["any window", "the first k (topk)"])
@pytest.mark.parametrize("kind", ["float32", "ints", "uint8", "ties_and_nan"])
def test_windows_of_the_order_are_the_full_sorts(kind, first):
    rng = np.random.default_rng({"float32": 1, "ints": 2, "uint8": 3, "ties_and_nan": 4}[kind])
    for _ in range(150):
        rows, n = int(rng.integers(1, 9)), int(rng.integers(64, 300))
        x = _rows(rng, kind, rows, n)
        if kind == "float32" and rng.random() < 0.5:  # some rows with ties (at a boundary)
            x[: rows // 2] = np.round(x[: rows // 2] * 2)
        k = int(rng.integers(1, n // 8 + 1))
        start = 0 if first else int(rng.integers(0, n - k + 1))
        for descending in (False, True):
            want = _full(x, descending)[:, start : start + k]
            np.testing.assert_array_equal(stable_positions(x, start, k, descending), want)


def test_descending_ties_keep_index_order_and_nan_comes_first():
    x = np.array([[1.0, np.nan, 3.0, 3.0, np.nan, 0.0] * 20])
    assert stable_positions(x, 0, 4, True).tolist() == [[1, 4, 7, 10]]  # the NaNs, in order
    assert stable_positions(x, 40, 3, True).tolist() == [[2, 3, 8]]  # then the 3s
    assert stable_positions(x, 0, 3, False).tolist() == [[5, 11, 17]]  # the 0s


def test_the_selection_runs_only_where_it_pays():
    assert worth_it(2048, 10) and worth_it(2048, 256)
    assert not worth_it(2048, 1024) and not worth_it(32, 2)
