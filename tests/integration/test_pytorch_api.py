"""PyTorch behaviours ported code relies on that the differential programs do not pin down: what
``.data`` shares, copying and pickling, ``gt.load``'s safety, flag errors, loaders, sampling."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

import gt
import gt.nn as nn
from gt.tensor import Tensor


def test_data_is_a_live_view_of_the_parameter(conn):
    p = nn.Parameter(gt.tensor([1.0, 2.0, 3.0]))
    view = p.data
    assert not view.requires_grad and view.is_leaf and view.shape == (3,)
    view.add_(gt.ones(3), alpha=2.0)  # one in-place instruction on the parameter's value
    view[0] = -1.0
    assert p.tolist() == [-1.0, 4.0, 5.0]
    with gt.no_grad():
        p.mul_(2.0)  # a change of the parameter shows through the view made before it
    assert view.tolist() == [-2.0, 8.0, 10.0] and view.data.tolist() == view.tolist()
    del view  # the view owns nothing: the parameter's value survives it
    assert p.data.clone().tolist() == [-2.0, 8.0, 10.0]


def test_data_changes_are_invisible_to_autograd_version_checks(conn):
    w = gt.tensor([2.0, 3.0], requires_grad=True)
    y = (w * w).sum()
    w.data.fill_(1.0)  # as in PyTorch: no "modified by an inplace operation" error
    y.backward()
    assert w.grad.tolist() == [2.0, 2.0]


def test_deepcopy_copies_leaves_and_refuses_computed_tensors(conn):
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    (w * 3).sum().backward()
    twin = copy.deepcopy(w)
    assert twin is not w and twin.requires_grad and twin.grad.tolist() == [3.0, 3.0]
    with gt.no_grad():
        w.add_(1.0)
    assert twin.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(w * 2)
    shared = nn.Linear(2, 2)
    pair = copy.deepcopy(nn.ModuleList([shared, shared]))
    assert pair[0] is pair[1] and pair[0].weight is not shared.weight


def test_pickled_parameters_keep_their_class_and_flag(conn):
    p = nn.Parameter(gt.tensor([[1.5, -2.0]]))
    back = pickle.loads(pickle.dumps(p))
    assert type(back) is nn.Parameter and back.requires_grad and back.tolist() == [[1.5, -2.0]]
    frozen = pickle.loads(pickle.dumps(gt.arange(3)))
    assert frozen.dtype == "int64" and not frozen.requires_grad


def test_a_half_built_tensor_is_garbage_collected_quietly():
    seen = []
    import sys

    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        t = Tensor.__new__(Tensor)
        del t
    finally:
        sys.unraisablehook = old
    assert seen == []


def test_load_reads_only_tensors_and_containers_unless_told_otherwise(conn):
    buf = io.BytesIO()
    gt.save({"w": gt.ones(2), "step": 3, "names": ["a"]}, buf)
    buf.seek(0)
    back = gt.load(buf, map_location="cpu")
    assert back["w"].tolist() == [1.0, 1.0] and back["step"] == 3 and back["names"] == ["a"]
    buf = io.BytesIO()
    gt.save(nn.Linear(2, 1), buf)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        gt.load(io.BytesIO(buf.getvalue()))
    model = gt.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert isinstance(model, nn.Linear) and model.weight.requires_grad


def test_requires_grad_flags_raise_pytorchs_errors(conn):
    y = gt.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad = False
    assert y.requires_grad_(True) is y  # a no-op on a computed tensor that requires grad
    with pytest.raises(RuntimeError, match="floating point"):
        gt.arange(3).requires_grad = True
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        gt.ones(2).retain_grad()


def test_retained_gradients_of_computed_tensors(conn):
    x = gt.tensor([1.0, -2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    out = (h.relu() ** 2).sum()
    out.backward()
    assert h.retains_grad and h.grad.tolist() == [6.0, 0.0] and x.grad.tolist() == [18.0, 0.0]


def test_dataloader_shuffles_every_sample_once_per_epoch_reproducibly(conn):
    ds = gt.utils.data.TensorDataset(gt.arange(10), gt.arange(10) * 2)
    g = gt.Generator().manual_seed(3)
    loader = gt.utils.data.DataLoader(ds, batch_size=4, shuffle=True, generator=g)
    epochs = [[int(v) for xb, yb in loader for v in xb.tolist()] for _ in range(2)]
    assert [sorted(e) for e in epochs] == [list(range(10))] * 2 and len(loader) == 3
    again = gt.utils.data.DataLoader(ds, batch_size=4, shuffle=True,
                                     generator=gt.Generator().manual_seed(3))  # fmt: skip
    assert [int(v) for xb, _ in again for v in xb.tolist()] == epochs[0]
    pairs = gt.utils.data.DataLoader([(1.0, 2), (3.0, 4)], batch_size=2)
    ((xb, yb),) = list(pairs)
    assert xb.dtype == "float64" and yb.dtype == "int64" and yb.tolist() == [2, 4]


def test_multinomial_respects_zero_weights_and_distinctness(conn):
    probs = gt.tensor([[0.0, 1.0, 3.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    draws = gt.multinomial(probs, 200, replacement=True).numpy()
    assert set(np.unique(draws[0])) <= {1, 2} and draws.shape == (2, 200)
    assert abs((draws[0] == 2).mean() - 0.75) < 0.15
    picks = probs.multinomial(2).numpy()
    assert set(picks[0].tolist()) == {1, 2} and len(set(picks[1].tolist())) == 2


BAD_ENTRY = "probability tensor contains either `inf`, `nan` or element < 0"


@pytest.mark.parametrize(
    ("probs", "replacement", "message"),
    [
        ([0.5, -0.1], False, BAD_ENTRY),
        ([0.5, float("inf")], False, BAD_ENTRY),
        ([0.5, float("nan")], True, BAD_ENTRY),
        ([0.0, 0.0], False, r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
        ([[0.0, 0.0], [1.0, 1.0]], True, r"sum of probabilities <= 0"),
    ],
    ids=["negative", "inf", "nan", "zero_sum", "one_zero_row"],
)
def test_multinomial_refuses_what_pytorch_refuses_at_the_next_sync_point(
    conn, monkeypatch, probs, replacement, message
):
    """Bad weights are values on the worker: the call fetches nothing, the next read raises."""
    fetches = []
    monkeypatch.setattr(type(conn), "fetch", lambda self, tid: fetches.append(tid))
    draws = gt.multinomial(gt.tensor(probs), 1, replacement)
    monkeypatch.undo()
    assert fetches == []
    with pytest.raises(RuntimeError, match=message):
        draws.tolist()
    assert gt.tensor([-0.0, 1.0]).multinomial(1).tolist() == [1]  # (-0 is not below 0)


def test_multinomial_refuses_bad_shapes_and_counts_at_the_call(conn):
    ones = gt.ones(2)
    with pytest.raises(RuntimeError, match=r"cannot sample n_sample > prob_dist.size\(-1\)"):
        ones.multinomial(3)
    with pytest.raises(RuntimeError, match="cannot sample n_sample <= 0 samples"):
        gt.multinomial(ones, 0, True)
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        gt.ones(2, 2, 2).multinomial(1)
    with pytest.raises(
        RuntimeError, match="only supports floating-point dtypes for input, got: Long"
    ):
        gt.tensor([1, 2]).multinomial(1)
    assert ones.multinomial(3, True).shape == (3,)


def test_new_primitives_give_the_same_results_sharded_over_two_workers(conn):
    gt.load_config({"rows": {"shard": {"axis": 0}}})
    try:
        base = np.arange(1.0, 13.0).reshape(6, 2)
        with gt.signal.context("rows"):
            x = gt.tensor(base) * 1.0
            y = x.cumprod(1) + x.log1p().floor() + x.argsort(1, descending=True) + x.softplus()
            p = x.prod(1)
        want = np.cumprod(base, 1) + np.floor(np.log1p(base)) + [1, 0] + np.logaddexp(0, base)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(p.numpy(), base.prod(1))
    finally:
        gt.config.clear()


def test_device_objects_and_cuda_queries_are_accepted(conn):
    dev = gt.device("cuda:1")
    assert (dev.type, dev.index, str(dev)) == ("cuda", 1, "cuda:1") and dev == gt.device(1)
    assert not gt.cuda.is_available() and gt.cuda.device_count() == 0
    x = gt.ones(2).to(dev).cuda().to("cpu", non_blocking=True)
    assert x.tolist() == [1.0, 1.0] and x.device.type == "cpu" and x.device == gt.device("cpu")
    assert (
        gt.finfo(gt.float32).eps == np.finfo(np.float32).eps and gt.iinfo(gt.int32).max == 2**31 - 1
    )
