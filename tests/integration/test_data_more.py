"""``gt.utils.data`` beyond ``TensorDataset``: iterable-style datasets and the loader's batching of
a stream, ``ChainDataset``, ``StackDataset``, ``ConcatDataset``, ``Subset``, ``random_split``, the
samplers (``WeightedRandomSampler``, ``DistributedSampler``, ``BatchSampler`` ...), the collate
functions, the loader's argument checks and the ``torch.utils.data`` submodule layout.

Expected values are written out here (by hand, with NumPy, or as PyTorch 2.13 printed them for
``DistributedSampler``'s seeded order), never taken from GT.
"""

from __future__ import annotations

import collections
import math
import warnings

import numpy as np
import pytest

import gt
from gt.utils import data

pytestmark = pytest.mark.timeout(120)


def _rows(n: int, sharded: bool = False):
    class Rows(data.IterableDataset):
        """0..n-1 as ``(i, i * 10)``; with ``sharded``, each worker reads its share."""

        def __iter__(self):
            info = data.get_worker_info()
            start, step = (0, 1) if info is None or not sharded else (info.id, info.num_workers)
            for i in range(start, n, step):
                yield (i, i * 10)

        def __len__(self):
            return n

    return Rows()


def _identity(batch):
    return batch


def test_iterable_dataset_batches_its_stream_keeping_or_dropping_the_short_last_batch(conn):
    kept = [a.tolist() for a, _ in data.DataLoader(_rows(7), batch_size=3)]
    assert kept == [[0, 1, 2], [3, 4, 5], [6]]
    dropped = [b.tolist() for _, b in data.DataLoader(_rows(7), batch_size=3, drop_last=True)]
    assert dropped == [[0, 10, 20], [30, 40, 50]]
    assert len(data.DataLoader(_rows(7), batch_size=3)) == 3
    assert len(data.DataLoader(_rows(7), batch_size=3, drop_last=True)) == 2
    unbatched = list(data.DataLoader(_rows(3), batch_size=None))
    assert unbatched == [[0, 0], [1, 10], [2, 20]]  # default_convert: tuples become lists
    again = data.DataLoader(_rows(4), batch_size=4)
    assert [a.tolist() for a, _ in again] == [a.tolist() for a, _ in again] == [[0, 1, 2, 3]]


def test_iterable_dataset_refuses_shuffle_and_samplers_as_pytorch_does():
    ds = _rows(3)
    with pytest.raises(
        ValueError, match="expected unspecified shuffle option, but got shuffle=True"
    ):
        data.DataLoader(ds, shuffle=True)
    with pytest.raises(ValueError, match=r"unspecified sampler option, but got sampler=\[0, 1\]"):
        data.DataLoader(ds, sampler=[0, 1])
    with pytest.raises(ValueError, match="unspecified batch_sampler option"):
        data.DataLoader(ds, batch_sampler=[[0]])
    loader = data.DataLoader(ds, shuffle=False, collate_fn=_identity)
    assert list(loader) == [[(0, 0)], [(1, 10)], [(2, 20)]]
    with pytest.raises(TypeError):
        len(iter(loader))  # an iterable dataset's sampler is endless, as in PyTorch
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        ds[0]


def test_a_stream_longer_than_its_reported_length_warns_once_len_was_asked():
    class Liar(data.IterableDataset):
        def __iter__(self):
            return iter(range(4))

        def __len__(self):
            return 2

    loader = data.DataLoader(Liar(), batch_size=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(loader) == [0, 1, 2, 3]  # len() never asked: no warning
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        assert list(loader) == [0, 1, 2, 3]


def test_chain_dataset_and_plus_read_iterable_datasets_one_after_another():
    chained = _rows(2) + _rows(3)
    assert isinstance(chained, data.ChainDataset) and len(chained) == 5
    assert [i for i, _ in chained] == [0, 1, 0, 1, 2]
    batches = list(data.DataLoader(data.ChainDataset([_rows(2), _rows(2)]), batch_size=3,
                                   collate_fn=_identity))  # fmt: skip
    assert batches == [[(0, 0), (1, 10), (0, 0)], [(1, 10)]]
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        list(data.ChainDataset([[1, 2]]))
    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        data.ConcatDataset([_rows(2)])


def test_a_self_sharding_stream_is_read_once_in_pytorchs_worker_order(conn):
    """Each of ``num_workers`` reads its share of a dataset that splits its stream by worker;
    their batches come round-robin, as from PyTorch's worker processes."""
    assert data.get_worker_info() is None
    loader = data.DataLoader(_rows(5, sharded=True), batch_size=2, num_workers=3)
    assert [a.tolist() for a, _ in loader] == [[0, 3], [1, 4], [2]]
    assert loader.num_workers == 3 and loader.prefetch_factor == 2


def test_stack_dataset_pairs_datasets_as_tuples_or_dicts(conn):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.array([5, 4, 3, 2, 1, 0])
    pair = data.StackDataset(data.TensorDataset(gt.tensor(x)), list(y))
    (xs,), label = pair[4]
    assert xs.tolist() == x[4].tolist() and label == 1 and len(pair) == 6
    named = data.StackDataset(inputs=gt.tensor(x), label=gt.tensor(y))
    batch = next(iter(data.DataLoader(named, batch_size=4)))
    assert sorted(batch) == ["inputs", "label"]
    np.testing.assert_array_equal(batch["inputs"].numpy(), x[:4])
    assert batch["label"].tolist() == [5, 4, 3, 2]
    assert named.__getitems__([1, 0])[0]["label"].item() == 4
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        data.StackDataset(x, y[:2])
    with pytest.raises(ValueError, match="At least one dataset"):
        data.StackDataset()
    with pytest.raises(ValueError, match="but both types are given"):
        data.StackDataset(x, b=y)


def test_loader_fetches_whole_batches_through_getitems():
    class Batched(data.Dataset):
        def __init__(self):
            self.requests = []

        def __getitems__(self, idx):
            self.requests.append(list(idx))
            return [(i * i,) for i in idx]

        def __len__(self):
            return 5

    ds = Batched()
    out = list(data.DataLoader(data.Subset(ds, [4, 3, 2, 1, 0]), batch_size=2,
                               collate_fn=_identity))  # fmt: skip
    assert out == [[(16,), (9,)], [(4,), (1,)], [(0,)]]
    assert ds.requests == [[4, 3], [2, 1], [0]]


def test_concat_dataset_indexes_across_parts_and_from_the_end():
    cat = data.ConcatDataset([[0, 1, 2], [], [3, 4]])
    assert cat.cumulative_sizes == [3, 3, 5] and len(cat) == 5
    assert [cat[i] for i in range(5)] == [0, 1, 2, 3, 4] and cat[-1] == 4 and cat[-5] == 0
    with pytest.raises(ValueError, match="should not exceed dataset length"):
        cat[-6]
    with pytest.raises(AssertionError, match="should not be an empty iterable"):
        data.ConcatDataset([])
    with pytest.warns(FutureWarning):
        assert cat.cummulative_sizes == [3, 3, 5]


def test_subset_chains_of_a_tensor_dataset_load_rows_in_sampler_order(conn):
    x = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    y = np.arange(10) * 3
    base = data.TensorDataset(gt.tensor(x), gt.tensor(y))
    inner = data.Subset(base, [9, 7, 5, 3, 1, 0])
    outer = data.Subset(inner, [5, 4, 0, 2])  # rows 0, 1, 9, 5
    got = [(xb.numpy(), yb.tolist()) for xb, yb in data.DataLoader(outer, batch_size=3)]
    np.testing.assert_array_equal(got[0][0], x[[0, 1, 9]])
    assert [g[1] for g in got] == [[0, 3, 27], [15]]
    sub = data.Subset(base, gt.tensor([2, 3]))
    assert sub.indices == [2, 3] and sub[1][1].item() == 9

    class Doubled(data.Subset):
        def __getitem__(self, i):
            return 2 * super().__getitem__(i)

    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Doubled([1, 2], [0])


def test_tensor_dataset_rejects_tensors_of_different_lengths(conn):
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        data.TensorDataset(gt.zeros(2), gt.zeros(3))


def test_random_split_by_fractions_gives_the_remainder_to_the_first_parts():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parts = data.random_split(
            range(11), [0.3, 0.3, 0.4], generator=gt.Generator().manual_seed(4)
        )
    # floor(3.3), floor(3.3), floor(4.4) = 3, 3, 4; the one left over goes to the first part
    assert [len(p) for p in parts] == [4, 3, 4]
    assert sorted(i for p in parts for i in p) == list(range(11))
    again = data.random_split(range(11), [0.3, 0.3, 0.4], generator=gt.Generator().manual_seed(4))
    assert [p.indices for p in again] == [p.indices for p in parts]
    assert [len(p) for p in data.random_split(range(5), [2, 3])] == [2, 3]
    with pytest.warns(UserWarning, match="Length of split at index 2 is 0"):
        data.random_split(range(2), [0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        data.random_split(range(5), [1.2, -0.2])
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        data.random_split(range(5), [2, 2])


def test_weighted_sampler_with_replacement_follows_the_weights():
    w = [0.0, 1.0, 3.0, 0.0, 4.0]
    draws = list(data.WeightedRandomSampler(w, 40_000, generator=gt.Generator().manual_seed(1)))
    freq = np.bincount(draws, minlength=5) / len(draws)
    np.testing.assert_allclose(freq, np.array(w) / 8, atol=0.01)
    again = list(data.WeightedRandomSampler(w, 40_000, generator=gt.Generator().manual_seed(1)))
    assert again == draws and len(data.WeightedRandomSampler(w, 7)) == 7


def test_weighted_sampler_draws_pytorchs_indices_for_a_seeded_generator():
    # PyTorch 2.13's lists: torch.multinomial's CPU draws (binary search of uniforms with
    # replacement; the largest w / Exp(1) keys without, and for a single sample), epoch after epoch
    w = [3.0, 1, 1, 2, 1, 0.5]
    s = data.WeightedRandomSampler(w, 10, generator=gt.Generator().manual_seed(5))
    assert list(s) == [3, 0, 1, 0, 0, 4, 2, 3, 4, 1]
    assert list(s) == [1, 0, 3, 0, 0, 0, 1, 1, 3, 2]
    s = data.WeightedRandomSampler(w, 4, replacement=False, generator=gt.Generator().manual_seed(5))
    assert [list(s), list(s)] == [[3, 1, 4, 0], [0, 3, 4, 5]]
    s = data.WeightedRandomSampler(w, 1, generator=gt.Generator().manual_seed(8))
    assert [list(s) for _ in range(5)] == [[3], [1], [4], [1], [0]]
    w40 = [((i * 7) % 11) / 3 for i in range(40)]
    g = gt.Generator().manual_seed(123)
    assert list(data.WeightedRandomSampler(w40, 12, generator=g)) == [
        14, 1, 24, 3, 18, 20, 25, 21, 38, 3, 34, 3]  # fmt: skip
    g = gt.Generator().manual_seed(123)
    assert list(data.WeightedRandomSampler(w40, 12, replacement=False, generator=g)) == [
        1, 9, 3, 34, 36, 14, 31, 12, 20, 17, 25, 29]  # fmt: skip


def test_weighted_sampler_without_replacement_takes_each_index_once_zero_weights_last():
    w = [0.0, 1.0, 3.0, 0.0, 2.0]
    g = gt.Generator().manual_seed(2)
    for _ in range(20):
        order = list(data.WeightedRandomSampler(w, 5, replacement=False, generator=g))
        assert sorted(order) == [0, 1, 2, 3, 4] and set(order[3:]) == {0, 3}
    firsts = [next(iter(data.WeightedRandomSampler(w, 1, replacement=False, generator=g)))
              for _ in range(6000)]  # fmt: skip
    np.testing.assert_allclose(np.bincount(firsts, minlength=5) / 6000, np.array(w) / 6,
                               atol=0.02)  # fmt: skip


def test_weighted_sampler_checks_arguments_and_weights_as_pytorch(conn):
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        data.WeightedRandomSampler([1.0], True)
    with pytest.raises(ValueError, match="replacement should be a boolean value"):
        data.WeightedRandomSampler([1.0], 1, replacement=1)
    with pytest.raises(ValueError, match=r"1d sequence but given weights have shape \(1, 2\)"):
        data.WeightedRandomSampler([[1.0, 2.0]], 2)
    for w, k, rep, message in [
        ([1.0, 2.0], 3, False, "cannot sample n_sample > prob_dist.size"),
        ([-1.0, 2.0], 1, True, "probability entry < 0"),
        ([math.nan, 2.0], 1, True, "probability entry < 0"),
        ([math.inf, 2.0], 1, True, "infinity or NaN"),
        ([0.0, 0.0], 1, True, "sum of probabilities <= 0"),
    ]:
        with pytest.raises(RuntimeError, match=message):
            list(data.WeightedRandomSampler(w, k, replacement=rep))
    sampler = data.WeightedRandomSampler(gt.tensor([0.5, 1.5]), 3)
    assert sampler.weights.dtype == "float64" and sampler.weights.tolist() == [0.5, 1.5]
    sampler.weights = [0.0, 1.0]
    assert list(sampler) == [1, 1, 1]


def test_distributed_sampler_pads_or_drops_and_strides_by_rank():
    def shards(n, k, **kw):
        return [
            list(data.DistributedSampler(range(n), k, r, shuffle=False, **kw)) for r in range(k)
        ]

    assert shards(10, 3) == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert shards(10, 3, drop_last=True) == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert shards(2, 5) == [[0], [1], [0], [1], [0]]  # padding repeats the order as often as needed
    assert shards(0, 2) == [[], []]
    assert [len(data.DistributedSampler(range(10), 4, 0, drop_last=d)) for d in (False, True)] == [
        3,
        2,
    ]


def test_distributed_sampler_shuffles_by_seed_and_epoch_in_pytorchs_order():
    def shards(seed, epoch, drop_last=False):
        out = []
        for r in range(3):
            s = data.DistributedSampler(range(10), num_replicas=3, rank=r, seed=seed,
                                        drop_last=drop_last)  # fmt: skip
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    # as printed by PyTorch 2.13: torch.randperm(10, generator=Generator().manual_seed(seed+epoch))
    assert shards(0, 0) == [[4, 5, 0, 2], [1, 3, 8, 4], [7, 9, 6, 1]]
    assert shards(7, 2) == [[0, 7, 9, 3], [5, 6, 1, 0], [8, 2, 4, 5]]
    assert shards(0, 0, drop_last=True) == [[4, 5, 0], [1, 3, 8], [7, 9, 6]]
    s = data.DistributedSampler(range(10), 3, 1)
    assert list(s) == list(s)  # the order changes only with set_epoch


def test_pytorchs_cpu_randperm_is_reproduced_for_any_seed():
    from gt.utils.data._random import torch_randperm

    # torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist(), PyTorch 2.13
    assert torch_randperm(12, 11) == [9, 4, 2, 11, 5, 8, 3, 7, 0, 6, 10, 1]
    assert torch_randperm(12, 2**35 + 11) == torch_randperm(12, 11)  # only the low 32 bits count
    assert torch_randperm(12, -3) == [3, 10, 0, 1, 7, 9, 8, 5, 6, 2, 4, 11]
    assert torch_randperm(300, 4)[-6:] == [69, 9, 184, 26, 204, 173]
    assert torch_randperm(1, 5) == [0] and torch_randperm(0, 5) == []


def test_distributed_sampler_needs_replicas_and_a_valid_rank():
    with pytest.raises(ValueError, match="process group"):
        data.DistributedSampler(range(4))
    with pytest.raises(
        ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"
    ):
        data.DistributedSampler(range(4), num_replicas=2, rank=2)


def test_batch_random_and_subset_samplers_check_arguments_and_cover_their_indices():
    assert list(data.BatchSampler(range(5), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(data.BatchSampler(iter(range(5)), 2, True)) == [[0, 1], [2, 3]]
    assert len(data.BatchSampler(range(5), 2, True)) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        data.BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        data.BatchSampler(range(3), 2, 0)
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        data.RandomSampler(range(3), replacement=0)
    with pytest.raises(ValueError, match="but got num_samples=0"):
        data.RandomSampler(range(0))
    g = gt.Generator().manual_seed(5)
    many = list(data.RandomSampler(range(4), num_samples=10, generator=g))
    assert sorted(many[:4]) == sorted(many[4:8]) == [0, 1, 2, 3] and len(many) == 10
    drawn = list(data.RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    assert sorted(data.SubsetRandomSampler([9, 4, 7], generator=g)) == [4, 7, 9]


def test_default_collate_walks_structures_as_pytorch(conn):
    Point = collections.namedtuple("Point", "pos label")
    out = data.default_collate([
        {"p": Point(np.float32([1, 2]), 1), "s": "a", "w": 0.5, "b": True,
         "m": collections.OrderedDict(k=np.int32(3)), "t": (1, [2.0, 3.0])},
        {"p": Point(np.float32([3, 4]), 2), "s": "b", "w": 1.5, "b": False,
         "m": collections.OrderedDict(k=np.int32(4)), "t": (5, [6.0, 7.0])},
    ])  # fmt: skip
    assert isinstance(out["p"], Point) and out["p"].pos.dtype == "float32"
    assert out["p"].pos.tolist() == [[1, 2], [3, 4]] and out["p"].label.tolist() == [1, 2]
    assert out["p"].label.dtype == "int64" and out["s"] == [
        "a",
        "b",
    ]  # (a list: a dict field is gathered as one)
    assert out["w"].dtype == "float64" and out["w"].tolist() == [0.5, 1.5]
    assert out["b"].dtype == "bool" and out["b"].tolist() == [True, False]
    assert type(out["m"]) is collections.OrderedDict and out["m"]["k"].dtype == "int32"
    assert type(out["t"]) is list and out["t"][0].tolist() == [1, 5]
    assert [v.tolist() for v in out["t"][1]] == [[2.0, 6.0], [3.0, 7.0]]
    assert data.default_collate([1, 2.5]).dtype == "float32"  # torch.tensor([1, 2.5])
    assert data.default_collate([np.float16([1]), np.float16([2])]).dtype == "float16"
    stacked = data.default_collate([gt.ones(2), gt.zeros(2)])
    assert stacked.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_default_collate_errors_name_what_it_cannot_batch(conn):
    with pytest.raises(TypeError, match="batch must contain tensors.*found <class 'object'>"):
        data.default_collate([object()])
    with pytest.raises(TypeError, match="found <U1"):
        data.default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        data.default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match=r"got \[2\] at entry 0 and \[3\] at entry 1"):
        data.default_collate([np.zeros(2), np.zeros(3)])


def test_collate_takes_a_table_of_handlers_by_type(conn):
    from gt.utils.data._utils.collate import collate, default_collate_fn_map

    table = {**default_collate_fn_map, str: lambda batch, *, collate_fn_map=None: "|".join(batch)}
    joined, numbers = collate([("ab", 1), ("cd", 2)], collate_fn_map=table)
    assert joined == "ab|cd" and numbers.tolist() == [1, 2]


def test_default_convert_makes_numpy_values_tensors_without_batching(conn):
    Pair = collections.namedtuple("Pair", "a b")
    out = data.default_convert({"a": np.arange(3), "b": (np.float64(2.0), "s", 4),
                                "c": np.array(["x"]), "d": Pair(np.int8(1), [np.ones(1)])})  # fmt: skip
    assert out["a"].tolist() == [0, 1, 2] and out["a"].dtype == "int64"
    assert type(out["b"]) is list and out["b"][0].dtype == "float64" and out["b"][0].shape == ()
    assert out["b"][1:] == ["s", 4] and type(out["c"]) is np.ndarray
    assert (
        isinstance(out["d"], Pair)
        and out["d"].a.dtype == "int8"
        and out["d"].b[0].tolist() == [1.0]
    )
    unbatched = list(data.DataLoader([np.float32(1.5), np.float32(2.5)], batch_size=None))
    assert [(v.dtype, v.item()) for v in unbatched] == [("float32", 1.5), ("float32", 2.5)]


def test_dataloader_rejects_what_pytorch_rejects():
    for kwargs, message in [
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor option could only be specified"),
        (
            {"num_workers": 1, "prefetch_factor": -1},
            "prefetch_factor option should be non-negative",
        ),
        ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
        ({"timeout": -1}, "timeout option should be non-negative"),
        ({"sampler": [0], "shuffle": True}, "sampler option is mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
        ({"batch_size": None, "drop_last": True}, "disables auto-batching"),
    ]:
        with pytest.raises(ValueError, match=message):
            data.DataLoader(range(3), **kwargs)
    with pytest.raises(TypeError):
        data.DataLoader(range(3), no_such_option=1)
    loader = data.DataLoader(range(3), collate_fn=_identity)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader"):
        loader.batch_size = 2
    loader.collate_fn = _identity  # other attributes may change
    with pytest.raises(AssertionError, match="requires timeout == 0"):
        iter(data.DataLoader(range(3), timeout=1.0))
    it = iter(loader)
    assert len(it) == 3 and next(it) == [0]
    assert isinstance(loader.sampler, data.SequentialSampler)
    assert isinstance(loader.batch_sampler, data.BatchSampler)


def test_the_submodules_hold_the_names_torch_code_imports():
    from gt.utils.data.dataloader import DataLoader, default_collate, get_worker_info
    from gt.utils.data.dataset import Dataset, IterableDataset, StackDataset
    from gt.utils.data.distributed import DistributedSampler
    from gt.utils.data.sampler import Sampler, WeightedRandomSampler

    assert (DataLoader, default_collate, get_worker_info) == (
        data.DataLoader, data.default_collate, data.get_worker_info)  # fmt: skip
    assert (Dataset, IterableDataset, StackDataset) == (
        data.Dataset, data.IterableDataset, data.StackDataset)  # fmt: skip
    assert (Sampler, WeightedRandomSampler, DistributedSampler) == (
        data.Sampler, data.WeightedRandomSampler, data.DistributedSampler)  # fmt: skip
    torch = gt
    assert torch.utils.data.sampler.BatchSampler is data.BatchSampler

    class Squares(data.Dataset[int]):  # the classes are generic, as PyTorch's
        def __getitem__(self, i):
            return i * i

    class Every(data.Sampler[int]):
        def __iter__(self):
            return iter([2, 0])

    assert [b for b in data.DataLoader(Squares(), batch_size=None, sampler=Every())] == [4, 0]


def test_a_seeded_generator_gives_pytorchs_splits_shuffles_and_samples():
    # (GT drew these from its own stream: a model trained with PyTorch and evaluated with GT on
    # the "same" seeded split was scored partly on its training data). Expected values as
    # PyTorch 2.13 printed them for torch.Generator() and the same calls.
    g = gt.Generator().manual_seed(42)
    assert [s.indices for s in data.random_split(range(10), [7, 3], generator=g)] == [
        [2, 6, 1, 8, 4, 5, 0], [9, 3, 7]]  # fmt: skip
    # (the same generator goes on where the first split left it, as PyTorch's does)
    assert data.random_split(range(30), [0.3, 0.3, 0.4], generator=g)[1].indices == [
        18, 16, 24, 20, 9, 21, 1, 14, 7]  # fmt: skip
    loader = data.DataLoader(list(range(10)), batch_size=4, shuffle=True,
                             generator=gt.Generator().manual_seed(0))  # fmt: skip
    # (each pass draws the loader's base seed first, then the sampler's permutation)
    assert [b.tolist() for _ in range(2) for b in loader] == [
        [3, 7, 5, 2], [0, 8, 1, 6], [9, 4], [1, 3, 2, 7], [5, 9, 0, 6], [4, 8]]  # fmt: skip
    g = gt.Generator().manual_seed(5)
    assert list(data.RandomSampler(range(7), replacement=True, num_samples=40, generator=g))[
        30:] == [3, 5, 5, 3, 2, 5, 5, 5, 4, 0]  # fmt: skip
    assert list(data.RandomSampler(range(7), num_samples=17, generator=gt.Generator())) == [
        4,
        3,
        0,
        1,
        2,
        6,
        5,
        5,
        3,
        6,
        4,
        2,
        1,
        0,
        1,
        5,
        4,
    ]  # (unseeded: PyTorch's fixed seed)
    g = gt.Generator().manual_seed(2**40 + 123)  # (PyTorch seeds its twister with the low bits)
    assert list(data.SubsetRandomSampler([10, 20, 30, 40, 50], generator=g)) == [30, 10, 20, 40, 50]
    g.set_state(g.get_state())  # (a state GT restores is not a twister's: its own orders again)
    assert sorted(data.SubsetRandomSampler([1, 2, 3], generator=g)) == [1, 2, 3]
