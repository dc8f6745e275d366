"""``torch.utils.data`` beyond ``TensorDataset``: iterable-style datasets (and the loader's
batching of a stream), ``ChainDataset``, ``StackDataset``, ``ConcatDataset``, ``Subset``,
``random_split`` by fractions, the samplers (``BatchSampler``, ``SubsetRandomSampler``,
``WeightedRandomSampler``, ``DistributedSampler``), ``default_collate``/``default_convert`` on
nested structures, the loader's argument checks and the submodule layout.

Random orders differ between the libraries (each draws from its own RNG), so random samplers are
compared only through what does not depend on the draws: lengths, sorted contents, supports.
"""

from __future__ import annotations

import collections
import warnings

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights


def _err(fn) -> str:
    """``"<ExceptionType>: <message>"`` of what ``fn()`` raises (``"no error"`` otherwise)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type and message are the result
        return f"{type(e).__name__}: {e}"
    return "no error"


def _stream(torch, x: np.ndarray, y: np.ndarray):
    class Rows(torch.utils.data.IterableDataset):
        """Rows of two arrays as dicts, streamed."""

        def __init__(self, lo: int, hi: int):
            self.lo, self.hi = lo, hi

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            assert info is None  # loading in the main process
            for i in range(self.lo, self.hi):
                yield {"x": x[i], "y": int(y[i])}

        def __len__(self):
            return self.hi - self.lo

    return Rows


@program
def iterable_dataset_stream_trains_a_regression(torch):
    """A streamed dataset of dict samples, batched by the loader (the last batch short or
    dropped), chained with ``+`` and ``ChainDataset``, and used to train a linear model."""
    data = torch.utils.data
    x, y = arr(1, 22, 3), ints(2, 5, 22)
    rows = _stream(torch, x, y)
    ds = rows(0, 10)
    sizes = [len(b["y"]) for b in data.DataLoader(ds, batch_size=4)]
    dropped = [b["y"].tolist() for b in data.DataLoader(ds, batch_size=4, drop_last=True)]
    single = list(data.DataLoader(ds, batch_size=None))
    chain = ds + rows(10, 22)
    both = data.ChainDataset([rows(0, 3), rows(20, 22)])
    chained = [b["y"] for b in data.DataLoader(both, batch_size=2)]
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        for batch in data.DataLoader(chain, batch_size=5):
            loss = ((model(batch["x"]).squeeze(1) - batch["y"].float()) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return {
        "sizes": sizes, "dropped": dropped, "single_x": single[0]["x"],
        "single_y_type": type(single[0]["y"]).__name__, "n_single": len(single),
        "lens": [len(data.DataLoader(ds, batch_size=4)), len(data.DataLoader(ds, batch_size=4, drop_last=True)),
                 len(data.DataLoader(chain, batch_size=5)), len(both)],
        "chain_type": type(chain).__name__, "chained": chained, "losses": losses,
        "params": params(model),
        "x_dtype": next(iter(data.DataLoader(ds, batch_size=2)))["x"].dtype == torch.float32,
        "is_dataset": isinstance(ds, data.Dataset),
    }  # fmt: skip


@program
def iterable_dataset_loader_rejects_samplers(torch):
    data = torch.utils.data
    ds = _stream(torch, arr(4, 3, 2), ints(5, 3, 3))(0, 3)
    return {
        "shuffle": _err(lambda: data.DataLoader(ds, shuffle=True)),
        "shuffle_false_ok": len(list(data.DataLoader(ds, shuffle=False))),
        "sampler": _err(lambda: data.DataLoader(ds, sampler=[0, 1])),
        "batch_sampler": _err(lambda: data.DataLoader(ds, batch_sampler=[[0, 1]])),
        "concat": _err(lambda: data.ConcatDataset([ds])),
        "chain_of_map": _err(lambda: list(data.ChainDataset([[1, 2]]))),
        "getitem": _err(lambda: ds[0]),
    }


@program
def stack_concat_and_subset_datasets(torch):
    data = torch.utils.data
    x, y = torch.tensor(arr(6, 8, 2)), torch.tensor(ints(7, 3, 8))
    pair = data.StackDataset(data.TensorDataset(x), y)
    named = data.StackDataset(inputs=x, label=y)
    cat = data.ConcatDataset([data.TensorDataset(x[:3], y[:3]), data.TensorDataset(x[3:], y[3:])])
    summed = data.TensorDataset(x[:2]) + data.TensorDataset(x[2:5])

    class Batched(data.Dataset):
        """A dataset that fetches whole batches through ``__getitems__``."""

        def __init__(self):
            self.calls = 0

        def __getitem__(self, i):
            return x[i] * 10

        def __getitems__(self, idx):
            self.calls += 1
            return [x[i] * 100 for i in idx]

        def __len__(self):
            return 8

    batched = Batched()
    from_items = list(data.DataLoader(data.Subset(batched, [7, 0, 3]), batch_size=2))
    sub = data.Subset(data.TensorDataset(x, y), [5, 1, 2, 6, 0])
    nested = data.Subset(sub, [4, 2, 0])

    class BadSubset(data.Subset):
        def __getitem__(self, i):
            return 0

    return {
        "pair0": pair[3], "named2": named[2], "pair_len": len(pair),
        "pair_batches": list(data.DataLoader(pair, batch_size=3)),
        "named_batches": list(data.DataLoader(named, batch_size=5)),
        "cat": [cat[0], cat[5], cat[-1], cat[-8]], "cat_sizes": cat.cumulative_sizes,
        "cat_loader": list(data.DataLoader(cat, batch_size=3)),
        "summed_len": len(summed), "summed_type": type(summed).__name__,
        "from_items": from_items, "getitems_calls": batched.calls,
        "sub_loader": list(data.DataLoader(sub, batch_size=2)),
        "nested_loader": list(data.DataLoader(nested, batch_size=3)), "nested_one": nested[1],
        "errors": [
            _err(lambda: data.StackDataset(x, y[:3])),
            _err(lambda: data.StackDataset()),
            _err(lambda: data.StackDataset(x, b=y)),
            _err(lambda: data.ConcatDataset([])),
            _err(lambda: cat[-9]),
            _err(lambda: data.TensorDataset(x, y[:2])),
            _err(lambda: BadSubset(cat, [0]))[:80],
        ],
    }  # fmt: skip


@program
def default_collate_nested_structures(torch):
    data = torch.utils.data
    Point = collections.namedtuple("Point", "pos label")
    samples = [
        {"pos": Point(arr(8, 2), 1), "name": "a", "w": 0.5, "flag": True,
         "meta": collections.OrderedDict(k=np.float32(1.5), n=np.int32(3)), "pair": (1, [2.0, 3.0])},
        {"pos": Point(arr(9, 2), 2), "name": "b", "w": 1.5, "flag": False,
         "meta": collections.OrderedDict(k=np.float32(2.5), n=np.int32(4)), "pair": (5, [6.0, 7.0])},
    ]  # fmt: skip
    out = data.default_collate(samples)
    half = data.default_collate([np.ones((2, 2), np.float16), np.zeros((2, 2), np.float16)])
    mixed = data.default_collate([1, 2.5])
    conv = data.default_convert({"a": np.arange(3), "b": (np.float64(2.0), "s"), "c": 4,
                                 "d": np.array(["x", "y"]), "e": Point(np.int8(1), [np.ones(1)])})  # fmt: skip
    collate_mod = torch.utils.data._utils.collate
    custom = {**collate_mod.default_collate_fn_map,
              str: lambda batch, *, collate_fn_map=None: "|".join(batch)}  # fmt: skip
    joined = collate_mod.collate([("ab", 1), ("cd", 2)], collate_fn_map=custom)
    return {
        "pos": out["pos"].pos, "label": out["pos"].label, "pos_type": type(out["pos"]).__name__,
        "name": list(out["name"]), "name_type": type(out["name"]).__name__, "w": out["w"],
        "flag": out["flag"], "meta_type": type(out["meta"]).__name__, "meta_k": out["meta"]["k"],
        "meta_n": out["meta"]["n"], "pair_type": type(out["pair"]).__name__,
        "pair0": out["pair"][0], "pair1": out["pair"][1], "pair1_type": type(out["pair"][1]).__name__,
        "half": half, "mixed": mixed, "conv_a": conv["a"], "conv_b_type": type(conv["b"]).__name__,
        "conv_b0": conv["b"][0], "conv_b1": conv["b"][1], "conv_c": conv["c"],
        "conv_d_type": type(conv["d"]).__name__, "conv_e_type": type(conv["e"]).__name__,
        "conv_e0": conv["e"].pos, "conv_e1": conv["e"].label, "joined": joined,
        "loader_none": list(data.DataLoader([np.float32(1.0), np.float32(2.0)], batch_size=None)),
        "errors": [
            _err(lambda: data.default_collate([object(), object()])),
            _err(lambda: data.default_collate([np.array(["a"]), np.array(["b"])])),
            _err(lambda: data.default_collate([[1, 2], [3]])),
            _err(lambda: data.default_collate([np.zeros(2), np.zeros(3)])),
        ],
    }  # fmt: skip


@program
def distributed_sampler_shards(torch):
    data = torch.utils.data
    DS = data.distributed.DistributedSampler

    def shards(n, k, **kw):
        return [list(DS(range(n), num_replicas=k, rank=r, **kw)) for r in range(k)]

    out = {
        "pad": shards(10, 3, shuffle=False), "drop": shards(10, 3, shuffle=False, drop_last=True),
        "tiny": shards(2, 5, shuffle=False), "even": shards(8, 4, shuffle=False),
        "lens": [len(DS(range(10), 4, 3)), len(DS(range(10), 4, 3, drop_last=True))],
    }  # fmt: skip
    epochs = []
    for epoch in range(3):
        samplers = [DS(range(12), num_replicas=3, rank=r, seed=5) for r in range(3)]
        for s in samplers:
            s.set_epoch(epoch)
        parts = [list(s) for s in samplers]
        epochs.append(sorted(i for p in parts for i in p))
        out[f"lens{epoch}"] = [len(p) for p in parts]
    out["epochs_cover"] = epochs
    s = DS(range(9), num_replicas=2, rank=1)
    out["repeat_same"] = list(s) == list(s)
    out["padded_total"] = sorted(set(i for r in range(2) for i in DS(range(9), 2, r)))
    out["errors"] = [_err(lambda: DS(range(5), num_replicas=2, rank=2)),
                     _err(lambda: DS(range(5), num_replicas=2, rank=-1))]  # fmt: skip
    return out


@program
def distributed_shards_train_in_lockstep(torch):
    """Two simulated replicas, each reading its shard through a ``DataLoader``; their gradients
    are averaged by hand each step, as data-parallel training does."""
    data = torch.utils.data
    x, y = torch.tensor(arr(10, 11, 3)), torch.tensor(arr(11, 11, 1))
    ds = data.StackDataset(x, y)
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=12)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loaders = [data.DataLoader(ds, batch_size=2, sampler=data.DistributedSampler(
        ds, num_replicas=2, rank=r, shuffle=False)) for r in range(2)]  # fmt: skip
    losses = []
    for _ in range(2):
        for batches in zip(*loaders):
            opt.zero_grad()
            total = 0.0
            for xb, yb in batches:
                loss = torch.nn.functional.mse_loss(model(xb), yb) / 2
                loss.backward()
                total += loss.item()
            opt.step()
            losses.append(total)
    return {"losses": losses, "params": params(model), "n_batches": [len(lo) for lo in loaders]}


@program
def weighted_and_random_samplers(torch):
    data = torch.utils.data
    g = torch.Generator().manual_seed(0)
    w = [0.0, 1.0, 3.0, 0.0, 2.0]
    with_rep = list(data.WeightedRandomSampler(w, 50, generator=g))
    without = list(data.WeightedRandomSampler(w, 3, replacement=False, generator=g))
    full = list(data.WeightedRandomSampler([1.0, 2.0, 3.0, 4.0], 4, replacement=False))
    sampler = data.WeightedRandomSampler(torch.tensor([0.5, 1.5]), 7)
    loader = data.DataLoader(list(range(100, 105)), batch_size=2,
                             sampler=data.WeightedRandomSampler(w, 6, generator=g))  # fmt: skip
    drawn = [v for b in loader for v in b.tolist()]
    rs = data.RandomSampler(range(5), replacement=True, num_samples=40, generator=g)
    many = list(data.RandomSampler(range(4), num_samples=10, generator=g))
    sub = list(data.SubsetRandomSampler([9, 4, 7, 1], generator=g))
    return {
        "rep_support": set(with_rep) <= {1, 2, 4},
        "rep_len": len(with_rep), "without": sorted(without), "full": sorted(full),
        "weights": sampler.weights, "weights_dtype": sampler.weights.dtype == torch.float64,
        "sampler_len": len(sampler), "drawn_ok": all(v in (101, 102, 104) for v in drawn),
        "n_drawn": len(drawn), "rs_len": len(rs), "rs_in_range": all(0 <= i < 5 for i in rs),
        "many": [sorted(many[:4]), sorted(many[4:8]), len(many)], "sub": sorted(sub),
        "errors": [
            _err(lambda: data.WeightedRandomSampler(w, 0)),
            _err(lambda: data.WeightedRandomSampler(w, True)),
            _err(lambda: data.WeightedRandomSampler(w, 2, replacement=1)),
            _err(lambda: data.WeightedRandomSampler([[1.0, 2.0]], 2)),
            _err(lambda: list(data.WeightedRandomSampler(w, 6, replacement=False))),
            _err(lambda: list(data.WeightedRandomSampler([-1.0, 2.0], 2))),
            _err(lambda: list(data.WeightedRandomSampler([0.0, 0.0], 2))),
            _err(lambda: list(data.WeightedRandomSampler([float("inf"), 1.0], 2))),
            _err(lambda: data.RandomSampler(range(3), replacement=0)),
            _err(lambda: data.RandomSampler(range(0))),
        ],
    }  # fmt: skip


@program
def batch_sampler_and_random_split(torch):
    data = torch.utils.data
    seq = data.SequentialSampler(range(7))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parts = data.random_split(
            range(11), [0.3, 0.3, 0.4], generator=torch.Generator().manual_seed(1)
        )
        empty = data.random_split(range(2), [0.5, 0.5, 0.0])
    return {
        "keep": list(data.BatchSampler(seq, 3, False)), "drop": list(data.BatchSampler(seq, 3, True)),
        "lens": [len(data.BatchSampler(seq, 3, False)), len(data.BatchSampler(seq, 3, True))],
        "from_list": list(data.BatchSampler([5, 3, 1], 2, False)),
        "split_sizes": [len(p) for p in parts], "split_cover": sorted(i for p in parts for i in p),
        "split_types": type(parts[0]).__name__, "empty_sizes": [len(p) for p in empty],
        "warnings": [str(w.message) for w in caught],
        "loader": list(data.DataLoader(range(7), batch_sampler=data.BatchSampler(seq, 4, False))),
        "errors": [
            _err(lambda: data.BatchSampler(seq, 0, False)),
            _err(lambda: data.BatchSampler(seq, 2, 0)),
            _err(lambda: data.random_split(range(5), [0.5, 0.7])),
            _err(lambda: data.random_split(range(5), [1.2, -0.2])),
            _err(lambda: data.random_split(range(5), [2, 2])),
        ],
    }  # fmt: skip


@program
def dataloader_arguments_and_layout(torch):
    data = torch.utils.data
    from_sub = [data.dataset.Dataset is data.Dataset, data.sampler.Sampler is data.Sampler,
                data.sampler.WeightedRandomSampler is data.WeightedRandomSampler,
                data.dataloader.DataLoader is data.DataLoader,
                data.dataloader.default_collate is data.default_collate,
                data.dataloader.get_worker_info is data.get_worker_info,
                data.distributed.DistributedSampler is data.DistributedSampler]  # fmt: skip

    class Squares(data.Dataset[int]):
        def __getitem__(self, i):
            return i * i

        def __len__(self):
            return 5

    loader = data.DataLoader(Squares(), batch_size=2)
    it = iter(loader)
    first = next(it)

    def set_batch_size():
        loader.batch_size = 3

    return {
        "from_sub": from_sub, "worker_info": str(data.get_worker_info()),
        "squares": [b.tolist() for b in loader], "first": first, "it_len": len(it),
        "loader_len": len(loader), "attrs": [loader.batch_size, loader.drop_last, loader.num_workers],
        "sampler_type": type(loader.sampler).__name__,
        "batch_sampler_type": type(loader.batch_sampler).__name__,
        "no_batch": [type(v).__name__ for v in data.DataLoader(Squares(), batch_size=None)],
        "errors": [
            _err(lambda: data.DataLoader(range(3), num_workers=-1)),
            _err(lambda: data.DataLoader(range(3), prefetch_factor=2)),
            _err(lambda: data.DataLoader(range(3), persistent_workers=True)),
            _err(lambda: data.DataLoader(range(3), timeout=-1)),
            _err(lambda: data.DataLoader(range(3), sampler=[0], shuffle=True)),
            _err(lambda: data.DataLoader(range(3), batch_sampler=[[0]], batch_size=2)),
            _err(lambda: data.DataLoader(range(3), batch_size=None, drop_last=True)),
            _err(set_batch_size),
            _err(lambda: data.Dataset()[0]),
            _err(lambda: iter(data.Sampler())),
        ],
    }  # fmt: skip
