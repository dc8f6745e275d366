"""``unique(dim=...)`` through a real cluster: the distinct slices along a dimension, sorted
lexicographically as PyTorch sorts them, with the inverse and the counts. The expected values come
from NumPy's ``np.unique(axis=...)`` (an independent implementation) or by hand."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(90)

rng = np.random.default_rng(3)


def _numpy_oracle(a: np.ndarray, axis: int):
    values, inverse, counts = np.unique(a, axis=axis, return_inverse=True, return_counts=True)
    return values, inverse.reshape(-1), counts


def test_unique_rows_are_sorted_lexicographically_by_hand(conn):
    x = gt.tensor([[1, 2], [0, 5], [1, 2], [0, 3]])
    values, inverse, counts = x.unique(dim=0, return_inverse=True, return_counts=True)
    assert values.tolist() == [[0, 3], [0, 5], [1, 2]]
    assert inverse.tolist() == [2, 1, 2, 0] and inverse.dtype == "int64"
    assert counts.tolist() == [1, 1, 2] and counts.dtype == "int64"
    columns = x.unique(dim=1)  # [1,0,1,0] vs [2,5,2,3]: the first element decides
    assert columns.tolist() == [[1, 2], [0, 5], [1, 2], [0, 3]]
    assert x.t().unique(dim=1).tolist() == [[0, 0, 1], [3, 5, 2]]


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_unique_slices_of_a_3d_tensor_match_numpy(conn, dim):
    a = rng.integers(0, 2, (4, 5, 2)).astype(np.float32)
    a = np.concatenate([a, np.take(a, [1, 0], axis=dim)], axis=dim)  # slices certainly repeat
    values, inverse, counts = gt.unique(
        gt.tensor(a), return_inverse=True, return_counts=True, dim=dim
    )
    want_v, want_i, want_c = _numpy_oracle(a, dim)
    np.testing.assert_array_equal(values.numpy(), want_v)
    assert values.dtype == "float32"
    np.testing.assert_array_equal(inverse.numpy(), want_i)
    np.testing.assert_array_equal(counts.numpy(), want_c)
    # the inverse rebuilds the input
    np.testing.assert_array_equal(values.index_select(dim, inverse).numpy(), a)


def test_unique_dim_options_and_return_shapes(conn):
    a = np.array([[3, 1], [3, 1], [2, 9]])
    x = gt.tensor(a)
    assert x.unique(dim=0).tolist() == [[2, 9], [3, 1]]
    assert x.unique(sorted=False, dim=0).tolist() == [[2, 9], [3, 1]]  # always sorted
    only_inverse = x.unique(dim=0, return_inverse=True)
    assert len(only_inverse) == 2 and only_inverse[1].tolist() == [1, 1, 0]
    only_counts = x.unique(dim=0, return_counts=True)
    assert len(only_counts) == 2 and only_counts[1].tolist() == [1, 2]
    b = gt.tensor([True, False, True]).unique(dim=0, return_counts=True)
    assert b[0].tolist() == [False, True] and b[1].tolist() == [1, 2]
    one_d = gt.tensor([4, 1, 4]).unique(dim=0, return_inverse=True)
    assert one_d[0].tolist() == [1, 4] and one_d[1].tolist() == [1, 0, 1]


def test_a_slice_with_nan_is_distinct_from_every_other(conn):
    x = gt.tensor([[np.nan, 1.0], [np.nan, 1.0], [0.0, 1.0]])
    values, counts = x.unique(dim=0, return_counts=True)
    assert values.shape == (3, 2) and counts.tolist() == [1, 1, 1]
    assert values.numpy()[0].tolist() == [0.0, 1.0]  # NaN sorts last


def test_unique_dim_on_empty_tensors_and_bad_dims(conn):
    values, inverse, counts = gt.zeros(0, 3).unique(dim=0, return_inverse=True, return_counts=True)
    assert values.shape == (0, 3) and inverse.shape == (0,) and counts.shape == (0,)
    with pytest.raises(RuntimeError, match="0 sized dimensions, and they aren't selected"):
        gt.zeros(3, 0).unique(dim=0)
    with pytest.raises(RuntimeError, match="zero sized dimensions is more than one"):
        gt.zeros(0, 0).unique(dim=0)
    with pytest.raises(IndexError, match="unique"):
        gt.tensor([[1, 2]]).unique(dim=-3)
    with pytest.raises(IndexError, match="no dimensions"):
        gt.tensor(5).unique(dim=0)
