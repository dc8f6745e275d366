"""Idioms of mixture-of-experts code that GT got wrong: routers are debugged by printing
``probs.topk(k)`` or ``logits.max(dim=-1)``, and PyTorch prints those as its
``torch.return_types.topk(\\nvalues=...,\\nindices=...)`` (one type per op), where GT printed
``SortResult(values=..., indices=...)`` / ``ValuesIndices(...)`` for every op alike."""

from __future__ import annotations

import pickle

import gt
from gt.runtime.ops.return_types import structseq


def test_a_return_type_prints_as_pytorchs_and_stays_a_tuple():
    pair = structseq("demo", ["values", "indices"])(1, 2)
    assert repr(pair) == str(pair) == "gt.return_types.demo(\nvalues=1,\nindices=2)"
    assert isinstance(pair, tuple) and tuple(pair) == (1, 2) and pair.indices == 2
    values, indices = gt.return_types.topk(3, 4)
    assert (values, indices) == (3, 4)
    again = pickle.loads(pickle.dumps(gt.return_types.max(5, 6)))
    assert type(again) is gt.return_types.max and again == (5, 6)


def test_each_op_returns_its_own_named_type(conn):
    x = gt.tensor([[1.0, 3.0], [2.0, 0.5]])
    expected = {
        "max": x.max(dim=1), "min": gt.min(x, 0), "sort": x.sort(1), "topk": gt.topk(x, 1),
        "kthvalue": x.kthvalue(1, 1), "median": x.median(1), "nanmedian": x.nanmedian(0),
        "mode": x.mode(1), "cummax": gt.cummax(x, 1), "cummin": x.cummin(0),
        "aminmax": x.aminmax(),
    }  # fmt: skip
    for name, result in expected.items():
        assert type(result) is getattr(gt.return_types, name), name
        assert type(result).__name__ == name
    assert type(gt.tensor(2.0).topk(1)) is gt.return_types.topk
    assert str(x.max(dim=1)) == (
        "gt.return_types.max(\nvalues=tensor([3., 2.]),\nindices=tensor([1, 0]))"
    )
    assert str(x.aminmax()) == "gt.return_types.aminmax(\nmin=tensor(0.5000),\nmax=tensor(3.))"
    values, indices = x.topk(1, dim=-1)
    assert indices.tolist() == [[1], [0]] and values.tolist() == [[3.0], [2.0]]
