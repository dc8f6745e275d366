"""What a probe of optimizers, schedulers and their state dicts against PyTorch 2.13 found on
Dec 6 (430 configurations), as PyTorch behaves: a reloaded ``SequentialLR`` steps its own
optimizer, ``Adam(capturable=True)`` keeps a double parameter's precision, ``Adagrad`` takes a
group added later, ``LambdaLR`` loads PyTorch's state dict, ``ReduceLROnPlateau`` follows a group
added later, and ``nn.init._calculate_fan_in_and_fan_out`` exists; a complex parameter's state is
complex and shaped like it (PyTorch views it as real only inside ``step``)."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.optim.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    ExponentialLR,
    LambdaLR,
    ReduceLROnPlateau,
    SequentialLR,
)

pytestmark = pytest.mark.timeout(60)


def test_a_reloaded_sequential_scheduler_steps_its_own_optimizer(conn):
    p = gt.nn.Parameter(gt.ones(2))

    def make(o):
        return SequentialLR(o, [ConstantLR(o, 0.5, total_iters=3), ExponentialLR(o, 0.8)], [4])

    o = gt.optim.SGD([p], lr=0.1)
    s = make(o)
    for _ in range(6):
        o.step()
        s.step()
    before = o.param_groups[0]["lr"]
    o2 = gt.optim.SGD([p], lr=0.1)
    o2.load_state_dict(o.state_dict())
    s2 = make(o2)
    s2.load_state_dict(s.state_dict())
    o2.step()
    s2.step()
    assert o2.param_groups[0]["lr"] == pytest.approx(0.04) and o.param_groups[0]["lr"] == before
    assert all(type(st) is dict for st in s.state_dict()["_schedulers"])  # (no live objects)
    c = ChainedScheduler([ExponentialLR(o2, 0.9)])
    assert all(type(st) is dict for st in c.state_dict()["_schedulers"])


def test_capturable_adam_keeps_a_double_parameters_precision(conn):
    w = gt.tensor([1.0, -2.0], dtype=gt.float64, requires_grad=True)
    opt = gt.optim.Adam([w], lr=0.1, capturable=True)
    w.grad = gt.tensor([0.3, 0.7], dtype=gt.float64)
    opt.step()
    assert w.tolist()[0] == pytest.approx(0.9000000033333332, rel=1e-15, abs=0)


def test_adagrad_and_plateau_follow_a_param_group_added_later(conn):
    p, q = gt.nn.Parameter(gt.ones(2)), gt.nn.Parameter(gt.ones(2))
    ada = gt.optim.Adagrad([p], lr=0.1)
    ada.add_param_group({"params": [q]})
    p.grad, q.grad = gt.ones(2), gt.ones(2)
    ada.step()
    assert q.tolist() == pytest.approx([0.9, 0.9])
    sgd = gt.optim.SGD([p], lr=0.1)
    plateau = ReduceLROnPlateau(sgd, patience=0, min_lr=0.01)
    sgd.add_param_group({"params": [q], "lr": 0.2})
    for metric in (1.0, 2.0, 3.0):
        plateau.step(metric)
    assert [g["lr"] for g in sgd.param_groups] == pytest.approx([0.01, 0.01])


def test_lambda_lr_loads_pytorchs_state_dict_and_init_has_pytorchs_fan_helper(conn):
    sched = LambdaLR(gt.optim.SGD([gt.nn.Parameter(gt.ones(1))], lr=0.1), lambda e: 0.5**e)
    state = sched.state_dict()
    state["lr_lambdas"] = [None]  # (how PyTorch saves a plain function)
    sched.load_state_dict(state)
    sched.step()
    assert sched.get_last_lr() == pytest.approx([0.05])
    assert gt.nn.init._calculate_fan_in_and_fan_out(gt.ones(3, 4, 5)) == (20, 15)


def test_a_parameter_in_two_groups_is_refused_as_pytorch_refuses_it(conn):
    p, q = gt.nn.Parameter(gt.ones(2)), gt.nn.Parameter(gt.ones(2))
    with pytest.raises(ValueError, match="more than one parameter group"):
        gt.optim.SGD([{"params": [p]}, {"params": [p, q]}], lr=0.1)
    opt = gt.optim.Adam([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})  # (it would be stepped once per group)
    assert len(opt.param_groups) == 1
    with pytest.warns(UserWarning, match="duplicate parameters"):
        gt.optim.SGD([q, q], lr=0.1)


def test_optimizer_hooks_as_pytorchs(conn):
    from gt.optim.optimizer import register_optimizer_step_pre_hook

    p = gt.nn.Parameter(gt.ones(2))
    opt = gt.optim.SGD([p], lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    handle = opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    every = register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global"))
    try:
        p.grad = gt.ones(2)
        opt.step()
        assert calls == ["global", "pre", "post"] and p.tolist() == pytest.approx([0.9, 0.9])
        handle.remove()
        every.remove()
        opt.step()
        assert calls == ["global", "pre", "post", "pre"]
    finally:
        every.remove()
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    assert opt.state_dict()["extra"] == 1
    seen = []
    opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append(sorted(sd)) or None)
    opt.register_load_state_dict_post_hook(lambda o: seen.append("loaded"))
    opt.load_state_dict(opt.state_dict())
    assert seen == [["extra", "param_groups", "state"], "loaded"]


def test_named_parameters_and_scheduler_state_dicts_cross_to_pytorch(conn):
    model = gt.nn.Linear(2, 2)
    opt = gt.optim.AdamW(model.named_parameters(), lr=0.01)
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": [gt.nn.Parameter(gt.ones(1))]})
    one_cycle = gt.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    phase = one_cycle.state_dict()["_schedule_phases"][0]
    assert set(phase) == {"end_step", "start_lr", "end_lr", "start_momentum", "end_momentum"}
    sgd = gt.optim.SGD([gt.nn.Parameter(gt.ones(1))], lr=0.1)
    lam = gt.optim.lr_scheduler.LambdaLR(sgd, lambda e: 0.9)
    state = lam.state_dict()
    assert state["lr_lambdas"] == [None] and state["_get_lr_called_within_step"] is False


# PyTorch 2.13: after two steps of ``(w.abs() ** 2).sum()`` from w = [1+2j, -0.5+0.25j] (lr=0.1,
# momentum=0.9 for SGD and RMSprop), the state tensors' names and w.
COMPLEX_STEPS = {
    "Adam": (["exp_avg", "exp_avg_sq"], [0.8004122 + 1.800166j, -0.3011874 + 0.05425099j]),
    "AdamW": (["exp_avg", "exp_avg_sq"], [0.7985191 + 1.796273j, -0.3002979 + 0.05387285j]),
    "RMSprop": (
        ["momentum_buffer", "square_avg"],
        [-0.8999999 - 0.3490134j, 0.6911187 - 0.7008417j],
    ),
    "Adagrad": (["sum"], [0.8331035 + 1.831125j, -0.3375305 + 0.09855042j]),
    "SGD": (["momentum_buffer"], [0.46 + 0.92j, -0.23 + 0.115j]),
    "NAdam": (["exp_avg", "exp_avg_sq"], [0.8199731 + 1.817898j, -0.3246707 + 0.08662026j]),
    "RAdam": (["exp_avg", "exp_avg_sq"], [0.6210526 + 1.242105j, -0.3105263 + 0.1552632j]),
    "Adamax": (["exp_avg", "exp_inf"], [0.8051683 + 1.802534j, -0.3104368 + 0.0709736j]),
    "Adadelta": (["acc_delta", "square_avg"], [0.9993594 + 1.999359j, -0.4993594 + 0.2493595j]),
    "ASGD": (["ax"], [0.6399852 + 1.27997j, -0.3199926 + 0.1599963j]),
    "Rprop": (["prev", "step_size"], [0.78 + 1.78j, -0.28 + 0.03j]),
}


def _complex_run(name, steps, opt=None, w=None):
    w = gt.nn.Parameter(gt.tensor([1 + 2j, -0.5 + 0.25j])) if w is None else w
    kw = {"momentum": 0.9} if name in ("SGD", "RMSprop") else {}
    opt = getattr(gt.optim, name)([w], lr=0.1, **kw) if opt is None else opt
    for _ in range(steps):
        opt.zero_grad()
        (w.abs() ** 2).sum().backward()
        opt.step()
    return w, opt


@pytest.mark.parametrize("name", sorted(COMPLEX_STEPS))
def test_a_complex_parameters_state_is_complex_and_shaped_like_it_as_pytorchs(conn, name):
    keys, expected = COMPLEX_STEPS[name]
    w, opt = _complex_run(name, 2)
    tensors = {k: v for k, v in opt.state[w].items() if isinstance(v, gt.Tensor) and v.ndim}
    assert sorted(tensors) == keys
    assert all(v.shape == (2,) and v.dtype == gt.complex64 for v in tensors.values())
    np.testing.assert_allclose(w.detach().numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("name", ["Adam", "RMSprop", "Rprop"])
def test_a_complex_parameters_state_dict_round_trip_continues_the_same_steps(conn, name):
    w, opt = _complex_run(name, 1)
    saved = opt.state_dict()
    assert all(v.dtype == gt.complex64 for v in saved["state"][0].values() if v.ndim)
    w2 = gt.nn.Parameter(w.detach().clone())
    kw = {"momentum": 0.9} if name == "RMSprop" else {}
    opt2 = getattr(gt.optim, name)([w2], lr=0.1, **kw)
    opt2.load_state_dict(saved)
    _complex_run(name, 1, opt2, w2)
    _complex_run(name, 1, opt, w)
    np.testing.assert_allclose(w2.detach().numpy(), w.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(w.detach().numpy(), COMPLEX_STEPS[name][1], atol=1e-5)
