"""Bags of half-precision embeddings are summed as PyTorch sums them: in float32, rounded to the
table's dtype once at the end (a mean divides that rounded sum by the bag's size), never rounded
after every addition; and a mean over fixed-length bags divides by the length, as PyTorch does,
rather than multiplying by its reciprocal."""

from __future__ import annotations

import numpy as np
import pytest

import gt

F = gt.nn.functional

# 2048 + 1 is not a float16 (its spacing there is 2): added one at a time in float16 the ones
# vanish, while their float32 sum 2052 is a float16.
TABLE = np.array([[2048.0, -2048.0], [1.0, -1.0], [0.5, 3.0]], dtype=np.float16)


@pytest.mark.parametrize("two_d", [False, True])
def test_half_bags_are_summed_in_float32_and_rounded_once(conn, two_d):
    w = gt.tensor(TABLE)
    idx = [0, 1, 1, 1, 1, 2, 2, 2]
    if two_d:
        args = (gt.tensor([idx[:5], [2, 2, 2, 1, 1]]), w)
        want_sum = [[2052.0, -2052.0], [3.5, 7.0]]
        want_mean = [[410.5, -410.5], [0.7, 1.4]]
    else:
        args = (gt.tensor(idx), w, gt.tensor([0, 5]))
        want_sum = [[2052.0, -2052.0], [1.5, 9.0]]
        want_mean = [[410.5, -410.5], [0.5, 3.0]]
    total = F.embedding_bag(*args, mode="sum")
    assert total.dtype == gt.float16
    np.testing.assert_array_equal(total.numpy(), np.array(want_sum, np.float16))
    mean = F.embedding_bag(*args, mode="mean")
    assert mean.dtype == gt.float16
    np.testing.assert_array_equal(mean.numpy(), np.array(want_mean, np.float16))


def test_half_bags_with_per_sample_weights_and_padding_round_once(conn):
    w = gt.tensor(TABLE)
    idx = gt.tensor([0, 1, 1, 1, 1, 2])
    psw = gt.tensor(np.array([1, 0.5, 0.5, 0.5, 0.5, 2], np.float16))
    got = F.embedding_bag(idx, w, gt.tensor([0, 5]), mode="sum", per_sample_weights=psw)
    np.testing.assert_array_equal(got.numpy(), np.array([[2050, -2050], [1, 6]], np.float16))
    padded = F.embedding_bag(idx, w, gt.tensor([0, 5]), mode="mean", padding_idx=2)
    np.testing.assert_array_equal(padded.numpy(), np.array([[410.5, -410.5], [0, 0]], np.float16))


def test_a_mean_of_fixed_length_bags_divides_by_the_length(conn):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((30, 64)).astype(np.float32)
    idx = rng.integers(0, 30, (30, 7))
    got = F.embedding_bag(gt.tensor(idx), gt.tensor(table), mode="mean").numpy()
    total = F.embedding_bag(gt.tensor(idx), gt.tensor(table), mode="sum").numpy()
    np.testing.assert_array_equal(got, total / np.float32(7))
