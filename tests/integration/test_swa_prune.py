"""``gt.optim.swa_utils`` (``AveragedModel``, the averaging functions, ``SWALR``, ``update_bn``)
and ``gt.nn.utils.prune`` (PyTorch's ``_orig`` / ``_mask`` layout, the pruning methods, repeated
and global pruning, ``remove``), against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.nn as nn
from gt.nn.utils import prune
from gt.optim import swa_utils as swa

pytestmark = pytest.mark.timeout(120)


def _arr(seed, *shape, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _set(module, values):
    with gt.no_grad():
        for p, v in zip(module.parameters(), values):
            p.copy_(gt.tensor(v))


# ---------------------------------------------------------------------- swa_utils
def test_averaged_model_default_is_the_mean_of_the_snapshots(conn):
    model = nn.Linear(3, 2)
    avg = swa.AveragedModel(model)
    snaps = [(_arr(i, 2, 3), _arr(10 + i, 2)) for i in range(4)]
    for w, b in snaps:
        _set(model, (w, b))
        avg.update_parameters(model)
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), np.mean([w for w, _ in snaps], 0),
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    np.testing.assert_allclose(avg.module.bias.detach().numpy(), np.mean([b for _, b in snaps], 0),
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    assert int(avg.n_averaged.item()) == 4
    assert list(avg.state_dict()) == ["n_averaged", "module.weight", "module.bias"]
    x = _arr(20, 5, 3)
    np.testing.assert_allclose(
        avg(gt.tensor(x)).detach().numpy(), x @ avg.module.weight.detach().numpy().T + avg.module.bias.detach().numpy(),
        rtol=1e-5, atol=1e-6,
    )  # fmt: skip


def test_averaged_model_is_a_copy_and_copies_buffers(conn):
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    avg = swa.AveragedModel(model)
    with gt.no_grad():
        model[0].weight.fill_(1.0)
        model[1].running_mean.fill_(5.0)
    assert not np.allclose(avg.module[0].weight.detach().numpy(), 1.0)
    avg.update_parameters(model)
    np.testing.assert_allclose(avg.module[1].running_mean.numpy(), 5.0)
    np.testing.assert_allclose(avg.module[0].weight.detach().numpy(), 1.0)


def test_ema_multi_avg_fn_averages_parameters_and_buffers(conn):
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    avg = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.75), use_buffers=True)
    want_w = None
    for i in range(3):
        w = _arr(i, 2, 2)
        with gt.no_grad():
            model[0].weight.copy_(gt.tensor(w))
            model[1].running_mean.copy_(gt.tensor(np.full(2, float(i), np.float32)))
        avg.update_parameters(model)
        want_w = w if want_w is None else 0.75 * want_w + 0.25 * w
    np.testing.assert_allclose(avg.module[0].weight.detach().numpy(), want_w, rtol=1e-5, atol=1e-6)
    # running_mean: 0, then 0.75*0 + 0.25*1 = 0.25, then 0.75*0.25 + 0.25*2 = 0.6875
    np.testing.assert_allclose(avg.module[1].running_mean.numpy(), 0.6875, rtol=1e-6)


def test_avg_fn_functions_and_arguments(conn):
    a, p = gt.tensor(np.array([1.0, 2.0], np.float32)), gt.tensor(np.array([3.0, 6.0], np.float32))
    np.testing.assert_allclose(swa.get_ema_avg_fn(0.9)(a, p, 1).numpy(), [1.2, 2.4], rtol=1e-6)
    np.testing.assert_allclose(swa.get_swa_avg_fn()(a, p, 3).numpy(), [1.5, 3.0], rtol=1e-6)
    lst = [gt.tensor(np.array([1.0, 2.0], np.float32))]
    swa.get_swa_multi_avg_fn()(lst, [p], gt.tensor(1))
    np.testing.assert_allclose(lst[0].numpy(), [2.0, 4.0], rtol=1e-6)
    with pytest.raises(ValueError):
        swa.get_ema_multi_avg_fn(1.5)
    with pytest.raises(AssertionError):
        swa.AveragedModel(nn.Linear(1, 1), avg_fn=swa.get_swa_avg_fn(),
                          multi_avg_fn=swa.get_swa_multi_avg_fn())  # fmt: skip


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_swalr_anneals_to_swa_lr(conn, strategy):
    w = nn.Parameter(gt.zeros(2))
    opt = gt.optim.SGD([w], lr=0.5)
    sched = swa.SWALR(opt, swa_lr=0.1, anneal_epochs=4, anneal_strategy=strategy)
    rates = [opt.param_groups[0]["lr"]]
    for _ in range(6):
        opt.step()
        sched.step()
        rates.append(sched.get_last_lr()[0])

    def alpha(t):
        return (1 - math.cos(math.pi * t)) / 2 if strategy == "cos" else t

    want = [0.1 * alpha(min(s / 4, 1)) + 0.5 * (1 - alpha(min(s / 4, 1))) for s in range(7)]
    np.testing.assert_allclose(rates, want, rtol=1e-12, atol=1e-12)
    assert opt.param_groups[0]["swa_lr"] == 0.1
    state = sched.state_dict()
    assert "anneal_func" not in state and state["_anneal_strategy"] == strategy
    with pytest.raises(ValueError):
        swa.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError):
        swa.SWALR(opt, swa_lr=[0.1, 0.2])


def test_update_bn_recomputes_running_statistics(conn):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    _set(model, (_arr(0, 4, 3), _arr(1, 4), np.ones(4, np.float32), np.zeros(4, np.float32)))
    model.eval()
    batches = [_arr(10 + i, 6, 3) for i in range(3)]
    loader = [(gt.tensor(b), gt.zeros(6)) for b in batches]
    swa.update_bn(loader, model)
    h = [b @ _arr(0, 4, 3).T + _arr(1, 4) for b in batches]
    np.testing.assert_allclose(model[1].running_mean.numpy(), np.mean([x.mean(0) for x in h], 0),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    np.testing.assert_allclose(model[1].running_var.numpy(),
                               np.mean([x.var(0, ddof=1) for x in h], 0), rtol=1e-4, atol=1e-5)  # fmt: skip
    assert model[1].momentum == 0.1 and not model.training
    assert int(model[1].num_batches_tracked.item()) == 3


# ---------------------------------------------------------------------- prune
def _smallest(values, k):
    order = np.argsort(np.abs(values).reshape(-1), kind="stable")[:k]
    mask = np.ones(values.size, np.float32)
    mask[order] = 0
    return mask.reshape(values.shape)


def test_l1_unstructured_layout_forward_and_grad(conn):
    lin = nn.Linear(4, 3)
    w, b = _arr(0, 3, 4), _arr(1, 3)
    _set(lin, (w, b))
    prune.l1_unstructured(lin, "weight", amount=0.25)
    mask = _smallest(w, 3)
    assert list(lin.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in lin.named_parameters()] == ["bias", "weight_orig"]
    np.testing.assert_array_equal(lin.weight_mask.numpy(), mask)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w * mask)
    x = _arr(2, 5, 4)
    out = lin(gt.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), x @ (w * mask).T + b, rtol=1e-5, atol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(lin.weight_orig.grad.numpy(), mask * x.sum(0)[None, :] * 1.0,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    assert prune.is_pruned(lin)
    prune.remove(lin, "weight")
    assert not prune.is_pruned(lin)
    assert list(lin.state_dict()) == ["bias", "weight"]
    assert isinstance(lin.weight, nn.Parameter)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w * mask)


def test_pruning_twice_prunes_what_is_left(conn):
    lin = nn.Linear(5, 4)
    w = _arr(3, 4, 5)
    _set(lin, (w, _arr(4, 4)))
    prune.l1_unstructured(lin, "weight", amount=0.5)  # 10 of 20
    prune.l1_unstructured(lin, "weight", amount=0.5)  # 5 of the 10 left
    hooks = list(lin._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == 2
    np.testing.assert_array_equal(lin.weight_mask.numpy(), _smallest(w, 15))


def test_ln_structured_prunes_channels_of_smallest_norm(conn):
    conv = nn.Conv2d(2, 4, 2)
    w = _arr(5, 4, 2, 2, 2)
    _set(conv, (w, _arr(6, 4)))
    prune.ln_structured(conv, "weight", amount=0.5, n=2, dim=0)
    norms = np.sqrt((w**2).sum(axis=(1, 2, 3)))
    keep = np.zeros(4, np.float32)
    keep[np.argsort(-norms)[:2]] = 1
    np.testing.assert_array_equal(
        conv.weight_mask.numpy(), np.broadcast_to(keep[:, None, None, None], w.shape)
    )
    # then along the input channels (L1), on top of the first mask
    prune.ln_structured(conv, "weight", amount=1, n=1, dim=1)
    l1 = np.abs(w * conv.weight_mask.numpy()).sum(axis=(0, 2, 3))
    assert conv.weight_mask.numpy()[:, int(np.argmin(l1))].sum() == 0


def test_global_unstructured_and_custom_mask(conn):
    a, b = nn.Linear(3, 2), nn.Linear(2, 2)
    wa, wb = _arr(7, 2, 3), _arr(8, 2, 2)
    _set(a, (wa, _arr(9, 2)))
    _set(b, (wb, _arr(10, 2)))
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured, amount=4)
    both = _smallest(np.concatenate([wa.ravel(), wb.ravel()]), 4)
    np.testing.assert_array_equal(a.weight_mask.numpy().ravel(), both[:6])
    np.testing.assert_array_equal(b.weight_mask.numpy().ravel(), both[6:])
    prune.custom_from_mask(a, "bias", mask=gt.tensor(np.array([0.0, 1.0], np.float32)))
    prune.custom_from_mask(a, "bias", mask=gt.tensor(np.array([1.0, 0.0], np.float32)))
    np.testing.assert_array_equal(a.bias_mask.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(a.bias.detach().numpy(), [0.0, 0.0])


def test_random_pruning_is_seeded_and_counts_right(conn):
    def masks():
        gt.manual_seed(3)
        lin = nn.Linear(6, 5)
        prune.random_unstructured(lin, "weight", amount=0.4)
        first = lin.weight_mask.numpy().copy()
        prune.random_structured(lin, "weight", amount=2, dim=0)
        return first, lin.weight_mask.numpy()

    (f1, m1), (f2, m2) = masks(), masks()
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(m1, m2)
    assert (f1 == 0).sum() == 12
    assert (m1.sum(axis=1) == 0).sum() == 2


def test_pruning_errors(conn):
    lin = nn.Linear(3, 2)
    with pytest.raises(ValueError):
        prune.remove(lin, "weight")
    with pytest.raises(ValueError):
        prune.l1_unstructured(lin, "weight", amount=1.5)
    with pytest.raises(TypeError):
        prune.l1_unstructured(lin, "weight", amount="half")
    with pytest.raises(ValueError):
        prune.l1_unstructured(lin, "weight", amount=7)
    assert "weight" in dict(lin.named_parameters())  # a failed pruning is rolled back
    with pytest.raises(ValueError):
        prune.ln_structured(lin, "bias", amount=1, n=2, dim=0)
    t = gt.tensor(np.array([3.0, -1.0, 2.0, 0.5], np.float32))
    np.testing.assert_array_equal(prune.L1Unstructured(amount=2).prune(t).numpy(), [3, 0, 2, 0])
