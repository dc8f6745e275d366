"""What a probe of ``torch.optim.lr_scheduler`` against PyTorch 2.13 found on Dec 6 (2,569
cases), as PyTorch behaves: a tensor learning rate is filled in place (the program's tensor follows
the schedule; ``base_lrs`` and ``get_last_lr()`` are copies), nested ``SequentialLR`` and a
``ChainedScheduler`` inside one undo their first steps, and the argument checks PyTorch makes."""

from __future__ import annotations

import pytest

import gt

pytestmark = pytest.mark.timeout(90)
S = gt.optim.lr_scheduler


def _sgd(lr=0.1, **kw):
    return gt.optim.SGD([gt.nn.Parameter(gt.zeros(2))], lr=lr, **kw)


def test_a_tensor_learning_rate_is_filled_in_place(conn):
    lr = gt.tensor(0.1)
    opt = _sgd(lr)
    sched = S.StepLR(opt, 1, 0.5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is lr and lr.item() == pytest.approx(0.05)
    assert sched.base_lrs[0] is not lr and sched.base_lrs[0].item() == pytest.approx(0.1)
    last = sched.get_last_lr()[0]
    last.mul_(0)  # a copy: the optimizer's rate stays
    assert lr.item() == pytest.approx(0.05)
    opt = _sgd(gt.tensor(0.1), momentum=0.9)
    one = S.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    opt.step()
    one.step()
    rate = opt.param_groups[0]["lr"]
    assert isinstance(rate, gt.Tensor) and rate.item() == pytest.approx(0.052, abs=1e-6)


def test_nested_sequential_schedules_start_where_pytorchs_do(conn):
    opt = _sgd()
    inner = S.SequentialLR(
        opt, [S.LinearLR(opt, start_factor=0.5, total_iters=3), S.ExponentialLR(opt, 0.9)], [3]
    )
    outer = S.SequentialLR(opt, [inner, S.StepLR(opt, 5, 0.5)], milestones=[20])
    rates = [opt.param_groups[0]["lr"]]
    for _ in range(5):
        opt.step()
        outer.step()
        rates.append(opt.param_groups[0]["lr"])
    assert rates == pytest.approx([0.05, 0.1 * 2 / 3, 0.1, 0.09, 0.081, 0.0729])
    opt = _sgd()
    warm = S.ChainedScheduler(
        [S.LinearLR(opt, start_factor=0.1, total_iters=5), S.ExponentialLR(opt, 0.95)]
    )
    S.SequentialLR(opt, [warm, S.CosineAnnealingLR(opt, T_max=50)], milestones=[10])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0095)


def test_the_argument_checks_pytorch_makes(conn):
    opt = _sgd()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.ReduceLROnPlateau(object())
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.OneCycleLR(object(), max_lr=0.1, total_steps=10)
    with pytest.raises(ValueError, match="eta_min"):
        S.CosineAnnealingWarmRestarts(opt, 5, eta_min=None)
    with pytest.raises(ValueError, match="same optimizer"):
        S.SequentialLR(opt, [S.StepLR(opt, 2), S.StepLR(_sgd(), 2)], milestones=[3])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.SequentialLR(opt, [S.StepLR(opt, 2), S.ReduceLROnPlateau(opt)], milestones=[3])
    lam = S.LambdaLR(opt, lambda e: 0.9**e)
    opt.add_param_group({"params": [gt.nn.Parameter(gt.zeros(1))], "lr": 0.3})
    opt.step()
    with pytest.raises(ValueError, match="shorter"):  # a new group has no lambda
        lam.step()
