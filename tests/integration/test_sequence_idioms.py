"""Idioms of sequence-model code that GT once refused (found by the differential suite's
``sequence_models`` programs): ``x.split(split_size=...)``, attributes on parameters
(``p._optim``, ``p._no_weight_decay``), ``PackedSequence._replace``."""

from __future__ import annotations

import copy
import io

import pytest

import gt
from gt.nn.utils import rnn


def test_split_keywords_are_pytorchs_for_the_method_and_the_function(conn):
    x = gt.arange(10.0)
    a, b = x.split(split_size=[3, 7], dim=-1)
    assert a.tolist() == [0.0, 1.0, 2.0] and b.shape == (7,)
    parts = gt.split(tensor=x, split_size_or_sections=4, dim=0)
    assert [p.shape[0] for p in parts] == [4, 4, 2]
    with pytest.raises(TypeError):
        x.split(split_size_or_sections=4)  # (the function's name, not the method's)


def test_a_parameter_takes_attributes_as_pytorchs_do(conn, tmp_path):
    p = gt.nn.Parameter(gt.ones(2))
    p._optim = {"weight_decay": 0.0, "lr": 1e-3}  # S4's per-parameter hyperparameters
    assert hasattr(p, "_optim") and not hasattr(gt.nn.Parameter(gt.ones(2)), "_optim")
    assert not hasattr(p.detach(), "_optim") and not hasattr(p * 2, "_optim")
    assert not hasattr(copy.deepcopy(p), "_optim")  # as PyTorch's Parameter.__deepcopy__
    t = gt.ones(3)
    t.tag = "x"
    assert copy.deepcopy(t).tag == "x"  # a plain tensor's copy keeps them
    f = io.BytesIO()
    gt.save({"p": p, "t": t}, f)
    f.seek(0)
    back = gt.load(f)
    assert back["p"]._optim == p._optim and back["t"].tag == "x"
    assert isinstance(back["p"], gt.nn.Parameter) and back["p"].requires_grad


def test_packed_sequence_replace_and_asdict_as_a_namedtuple(conn):
    packed = rnn.pack_sequence([gt.ones(3, 2), gt.ones(2, 2), gt.ones(1, 2)], enforce_sorted=False)
    doubled = packed._replace(data=packed.data * 2)
    assert isinstance(doubled, rnn.PackedSequence) and doubled.batch_sizes.tolist() == [3, 2, 1]
    assert doubled.data.sum().item() == 24.0 and doubled.sorted_indices is packed.sorted_indices
    lstm = gt.nn.LSTM(2, 3)
    out, (h, _) = lstm(doubled)  # the host-side lengths came along: it runs
    assert out.data.shape == (6, 3) and h.shape == (1, 3, 3)
    plain = packed._replace(sorted_indices=None, unsorted_indices=None)
    assert plain.sorted_indices is None and plain.batch_sizes.tolist() == [3, 2, 1]
    assert list(packed._asdict()) == list(packed._fields) == [
        "data", "batch_sizes", "sorted_indices", "unsorted_indices"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unexpected field names"):
        packed._replace(lengths=None)
