"""``scatter_rows.add_at``: ``np.add.at``'s bits for every key it takes (and ``add.at`` itself for
the rest), whatever the order, repetition and sign of the indices."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime.ops import scatter_rows as sr
from gt.runtime.ops.index_keys import rows_key


def _values(rng, shape, dtype):
    v = (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 3, shape)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape).astype(dtype)
    return v


def _same_bits(key, a, v):
    want, got = a.copy(), a.copy()
    np.add.at(want, key, v)
    sr.add_at(got, key, v)
    return np.array_equal(want.view(np.uint8), got.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_random_keys_give_add_ats_bits(dtype):
    rng = np.random.default_rng(7)
    fast = 0
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(2, 7, rng.integers(2, 5)))
        shape = (*shape[:-1], int(rng.integers(8, 24)))  # rows long enough for the fast path
        a = _values(rng, shape, dtype)
        n = int(rng.integers(1, 80))
        key = []
        for size in shape:
            r = rng.random()
            if r < 0.4:
                key.append(rng.integers(-size, size, n))  # repeats, negatives
            elif r < 0.55:
                key.append(slice(int(rng.integers(0, size)), None, int(rng.integers(1, 3))))
            else:
                key.append(slice(None))
        key = tuple(key)
        v = _values(rng, a[key].shape, dtype)
        fast += sr._plan(a, key, v) is not None
        assert _same_bits(key, a, v), key
    assert fast > 100  # (most keys took the fast path)


def test_ellipsis_broadcast_values_and_arrays_apart():
    rng = np.random.default_rng(3)
    a = _values(rng, (6, 5, 40), np.float32)
    idx = rng.integers(0, 6, 500)
    assert _same_bits((idx, Ellipsis), a, _values(rng, (500, 5, 40), np.float32))
    assert _same_bits((idx,), a, _values(rng, (1, 40), np.float32))  # broadcast over the rest
    apart = (rng.integers(0, 6, 30), slice(None), rng.integers(-40, 40, 30))
    b = _values(rng, (6, 9, 40), np.float64)
    assert sr._plan(b, apart, np.zeros(b[apart].shape)) is not None
    assert _same_bits(apart, b, _values(rng, b[apart].shape, np.float64))
    # a 2-d index array (an embedding's [batch, seq] ids)
    ids = rng.integers(0, 6, (20, 7))
    assert _same_bits((ids,), a, _values(rng, (20, 7, 5, 40), np.float32))


def test_what_it_does_not_take_goes_to_add_at():
    rng = np.random.default_rng(4)
    a = _values(rng, (50, 4), np.float32)  # rows of 4: add.at's
    idx = rng.integers(0, 50, 300)
    assert sr._plan(a, (idx,), np.zeros((300, 4), np.float32)) is None
    assert _same_bits((idx,), a, _values(rng, (300, 4), np.float32))
    ints = np.arange(40 * 16).reshape(40, 16)
    assert sr._plan(ints, (idx % 40,), np.ones((300, 16), np.int64)) is None
    b = _values(rng, (30, 16), np.float32)
    mixed = np.ones((300, 16))  # float64 values into float32: add.at's own casting
    assert sr._plan(b, (idx % 30,), mixed) is None
    assert _same_bits((idx % 30,), b, mixed)
    assert sr._plan(b[None], (0, idx % 30), np.zeros((300, 16), np.float32)) is None  # an int
    assert _same_bits((0, idx % 30), b[None], _values(rng, (300, 16), np.float32))


def test_one_row_hit_by_everything_is_add_ats_sum_in_order():
    rng = np.random.default_rng(5)
    a = _values(rng, (3, 256), np.float32)
    idx = np.full(2000, 1)
    assert _same_bits((idx,), a, _values(rng, (2000, 256), np.float32))
    few = _values(rng, (3, 8), np.float32)  # many rounds over short rows: add.at does it
    assert _same_bits((np.full(5000, 2),), few, _values(rng, (5000, 8), np.float32))


def _along(index: np.ndarray, dim: int) -> tuple:
    """``scatter_add``'s key: ``index`` along ``dim``, an ``arange`` along each other dim."""
    key = []
    for i, n in enumerate(index.shape):
        shape = [1] * index.ndim
        shape[i] = n
        key.append(index if i == dim else np.arange(n).reshape(shape))
    return tuple(key)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_an_index_expanded_over_rows_scatters_rows_with_add_ats_bits(monkeypatch, dim):
    rng = np.random.default_rng(8)
    a = _values(rng, (6, 7, 24), np.float32)
    n = 50
    shape = list(a.shape)
    shape[dim] = n
    one = [1, 1, 1]
    one[dim] = n
    index = np.broadcast_to(rng.integers(-a.shape[dim], a.shape[dim], one), shape)  # expanded
    key = _along(index, dim)
    v = _values(rng, tuple(shape), np.float32)
    rows = rows_key(a, key)
    assert rows is not None and sum(isinstance(k, slice) for k in rows) == 2
    calls = []
    monkeypatch.setattr(np.add, "at", lambda *args: calls.append(args))  # (must not be needed)
    got = a.copy()
    sr.add_at(got, key, v)
    monkeypatch.undo()
    assert not calls
    want = a.copy()
    np.add.at(want, key, v)
    assert np.array_equal(want.view(np.uint8), got.view(np.uint8))


def test_an_elementwise_index_is_added_on_flat_memory_with_add_ats_bits():
    rng = np.random.default_rng(9)
    a = _values(rng, (40, 130), np.float32)
    index = rng.integers(-40, 40, (300, 130))  # (a different row for every element)
    key = _along(index, 0)
    assert rows_key(a, key) is None
    v = _values(rng, (300, 130), np.float32)
    assert _same_bits(key, a, v)
    with_ints = (index % 40, np.broadcast_to(np.arange(130) % 7, (300, 130)))
    assert _same_bits(with_ints, a, v)  # (not an arange: flattened, not rows)
    assert sr._flat_add_at(a.copy(), with_ints, v)


def test_flat_memory_is_left_alone_where_add_at_must_decide():
    rng = np.random.default_rng(10)
    a = _values(rng, (40, 130), np.float32)
    v = _values(rng, (300, 130), np.float32)
    bad = _along(rng.integers(0, 41, (300, 130)), 0)  # 40 is out of range
    b = a.copy()
    assert not sr._flat_add_at(b, bad, v) and np.array_equal(b, a)
    with pytest.raises(IndexError):
        sr.add_at(b, bad, v)
    ok = _along(rng.integers(0, 40, (300, 130)), 0)
    assert not sr._flat_add_at(a[:, ::2].copy().T, ok[::-1], v.T)  # not C-contiguous
    assert not sr._flat_add_at(a.copy(), ok, v.astype(np.float64))  # values of another dtype
    strided = np.asfortranarray(a)
    assert _same_bits(ok, strided, v)  # (add.at itself)
