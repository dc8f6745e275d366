"""``index_keys.take``: ``x[key]`` for gather-shaped keys (one integer array per dimension),
as rows where an ``arange`` covers a dimension the index does not vary along, else from flat
memory, and ``None`` (NumPy's own indexing) for anything else."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.ops.index_keys import flat_positions, one_array, rows_key, take

rng = np.random.default_rng(17)


def _gather_key(shape: tuple, dim: int, n: int, expanded: bool) -> tuple:
    """``gather``'s key: an index of ``n`` along ``dim`` (the same along every other dimension
    when ``expanded``), an ``arange`` along the others."""
    out = list(shape)
    out[dim] = n
    if expanded:
        one = [1] * len(shape)
        one[dim] = n
        index = np.broadcast_to(rng.integers(-shape[dim], shape[dim], one), out)
    else:
        index = rng.integers(-shape[dim], shape[dim], out)
    key = []
    for i, size in enumerate(out):
        line = [1] * len(shape)
        line[i] = size
        key.append(index if i == dim else np.arange(size).reshape(line))
    return tuple(key)


@pytest.mark.parametrize("expanded", [True, False], ids=["index expanded", "index per element"])
def test_take_is_numpys_indexing_element_for_element(expanded):
    taken = 0
    for _ in range(200):
        shape = tuple(int(s) for s in rng.integers(2, 40, rng.integers(2, 4)))
        x = rng.standard_normal(shape).astype(np.float32)
        dim = int(rng.integers(0, len(shape)))
        key = _gather_key(shape, dim, int(rng.integers(1, 30)), expanded)
        got = take(x, key, at_least=1)
        if got is not None:
            taken += 1
            assert got.base is None or not np.shares_memory(got, x)  # (a copy, as x[key])
            np.testing.assert_array_equal(got, x[key])
    assert taken == 200


def test_an_expanded_index_is_read_as_rows():
    x = rng.standard_normal((4, 50, 16)).astype(np.float32)
    key = _gather_key(x.shape, 1, 30, expanded=True)
    rows = rows_key(x, key)
    assert [isinstance(k, slice) for k in rows] == [True, False, True]
    assert rows[1].shape == (30,)  # (the index, cut to one entry along the whole dims)


def test_one_index_array_among_whole_slices_is_taken_along_its_axis():
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    idx = rng.integers(-6, 6, (3, 4))
    for key in [(slice(None), idx), (idx % 5,), (slice(None), slice(None), idx % 7)]:
        np.testing.assert_array_equal(take(x, key), x[key])
    assert one_array(3, (slice(1, None), idx)) is None  # (not a whole slice)
    assert one_array(3, (idx, idx)) is None
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 1 with size 6"):
        take(x, (slice(None), np.array([0, 6])))


@pytest.mark.parametrize("empty", [0, 1, 2])
def test_an_empty_gather_is_empty(empty):
    shape = [2, 3, 4]
    shape[empty] = 0
    x = np.zeros(shape, np.float32)
    for expanded in (True, False):
        key = _gather_key(tuple(shape), 1, 3 if empty != 1 else 0, expanded)
        got = take(x, key, at_least=0)
        assert got is None or got.shape == x[key].shape


def test_what_take_leaves_to_numpy():
    x = rng.standard_normal((6, 7)).astype(np.float32)
    key = _gather_key(x.shape, 0, 9, expanded=False)
    assert take(x, key) is None  # (too few elements to gain: the default threshold)
    assert take(np.asfortranarray(x), key, at_least=1) is None  # not C-contiguous memory
    past = (np.full((9, 7), 6), key[1])  # 6 is out of range: NumPy raises its own error
    assert flat_positions(x.shape, past, 1) is None
    assert take(x, (key[0][:, 0], slice(1, None)), at_least=1) is None  # (a partial slice)
