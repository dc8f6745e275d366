"""What a probe of ``torch.utils.data`` against PyTorch 2.13 found on Dec 6 (2,798 cases), as
PyTorch behaves: a ``TensorDataset``'s batches of tuples, tensors or arrays of indices (one row per
index, never a key of their own); mixed NumPy dtypes collated as PyTorch promotes them; a
subclass's own ``__getitems__``; and ``num_workers``: each worker's code runs as in a PyTorch
worker (its own dataset copy, ``worker_init_fn``, ``get_worker_info``, its own generators) and the
batches come in PyTorch's order. Also ``random_()``'s default range and its ``generator``."""

from __future__ import annotations

import random

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(90)
D = gt.utils.data


def test_batches_of_tuples_tensors_and_arrays_of_indices_take_rows(conn):
    ds = D.TensorDataset(gt.arange(24).reshape(6, 4))

    class TensorOrder(D.Sampler):
        def __iter__(self):
            return iter(gt.tensor([4, 0, 2, 3]))  # 0-d tensors, as iter(randperm(n)) gives

        def __len__(self):
            return 4

    rows = [b[0].tolist() for b in D.DataLoader(ds, batch_size=2, sampler=TensorOrder())]
    assert rows == [
        [list(range(16, 20)), list(range(4))],
        [list(range(8, 12)), list(range(12, 16))],
    ]
    rows = [b[0].tolist() for b in D.DataLoader(ds, batch_sampler=[(0, 3), (1, 2)])]
    assert rows == [[[0, 1, 2, 3], [12, 13, 14, 15]], [[4, 5, 6, 7], [8, 9, 10, 11]]]
    pairs = D.TensorDataset(gt.arange(12.0).reshape(6, 2), gt.arange(6))
    for batches in ([gt.tensor([0, 1]), gt.tensor([3, 5])], [np.array([0, 1]), np.array([3, 5])]):
        got = [[t.tolist() for t in b] for b in D.DataLoader(pairs, batch_sampler=batches)]
        assert got == [[[[0.0, 1.0], [2.0, 3.0]], [0, 1]], [[[6.0, 7.0], [10.0, 11.0]], [3, 5]]]


def test_mixed_numpy_dtypes_collate_as_pytorch_promotes(conn):
    a = D.default_collate([np.array([1], np.int32), np.array([1.5], np.float32)])
    assert a.dtype == gt.float32 and a.tolist() == [[1.0], [1.5]]
    assert D.default_collate([np.float32(1.5), 2.5]).dtype == gt.float32
    assert D.default_collate([np.float64(1.5), np.float64(2.5)]).dtype == gt.float64


def test_a_tensor_dataset_subclass_with_its_own_getitems_is_used(conn):
    class Tagged(D.TensorDataset):
        def __getitems__(self, idx):
            return [("custom", i) for i in idx]

    batch = next(iter(D.DataLoader(Tagged(gt.arange(4)), batch_size=2)))
    assert batch[0] == ("custom", "custom") and batch[1].tolist() == [0, 1]


class _Range(D.IterableDataset):
    """0..n-1, sharded by worker when ``shard``."""

    def __init__(self, n, shard):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = D.get_worker_info()
        if not self.shard or info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def test_an_iterable_dataset_is_read_once_per_worker_in_pytorchs_order(conn):
    batches = lambda ds, **kw: [b.tolist() for b in D.DataLoader(ds, batch_size=2, **kw)]  # noqa: E731
    assert batches(_Range(4, False), num_workers=2) == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert batches(_Range(11, True), num_workers=3) == [
        [0, 3],
        [1, 4],
        [2, 5],
        [6, 9],
        [7, 10],
        [8],
    ]
    assert batches(_Range(11, True), num_workers=3, drop_last=True)[-1] == [7, 10]
    assert batches(_Range(5, True)) == [[0, 1], [2, 3], [4]]  # no workers: the whole stream
    assert D.get_worker_info() is None


def test_map_style_workers_take_turns_with_their_own_info_and_generators(conn):
    calls = []

    class Seen(D.Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            calls.append((i, D.get_worker_info().id))
            return np.random.rand() + random.random() + i  # the worker's generators, not ours

    np.random.seed(0)
    random.seed(0)
    want = (np.random.rand(), random.random())
    np.random.seed(0)
    random.seed(0)
    init = lambda w: calls.append(("init", w))  # noqa: E731
    batches = list(D.DataLoader(Seen(), batch_size=2, num_workers=2, worker_init_fn=init))
    assert [len(b) for b in batches] == [2, 2, 2, 1]
    assert calls[:2] == [("init", 0), ("init", 1)]
    assert [w for _, w in calls[2:]] == [0, 0, 1, 1, 0, 0, 1]  # batch k by worker k % 2
    assert (np.random.rand(), random.random()) == want  # the program's generators untouched
    calls.clear()
    loader = D.DataLoader(Seen(), batch_size=3, num_workers=2, persistent_workers=True,
                          worker_init_fn=init)  # fmt: skip
    list(loader)
    list(loader)
    assert [c for c in calls if c[0] == "init"] == [("init", 0), ("init", 1)]  # once, kept


def test_random_fills_the_dtypes_exact_integers_by_default(conn):
    gt.manual_seed(0)
    x = gt.empty(20000).random_()
    assert 2**23 < x.max().item() <= 2**24 and x.min().item() >= 0
    assert gt.empty(4000, dtype=gt.float16).random_().max().item() <= 2048
    assert gt.empty(4000, dtype=gt.int8).random_().max().item() == 127
    assert set(gt.empty(50).random_(3).tolist()) == {0.0, 1.0, 2.0}
    same = [gt.empty(5).random_(0, 99, generator=gt.Generator().manual_seed(3)).tolist()
            for _ in range(2)]  # fmt: skip
    assert same[0] == same[1]
