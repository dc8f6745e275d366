"""``gt.optim.Optimizer`` as the base of optimizers written for PyTorch: the ``required``
sentinel, state that the subclass's own ``step`` keeps (a step-count tensor stays a tensor
through a state-dict round trip, an int stays an int), and ``copy.deepcopy`` through a
``__setstate__`` override."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import gt
from gt.optim.optimizer import Optimizer, required

pytestmark = pytest.mark.timeout(120)


class _Counting(Optimizer):
    """SGD written as repositories write it: its own ``step``, a step count of its own kind."""

    def __init__(self, params, lr=required, tensor_step=True):
        super().__init__(params, dict(lr=lr))
        self.tensor_step = tensor_step

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    @gt.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = gt.tensor(0.0) if self.tensor_step else 0
                state["step"] += 1
                p.add_(p.grad, alpha=-group["lr"])


def _param(conn):
    p = gt.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)
    p.grad = gt.tensor(np.array([0.5, 0.5, -1.0], np.float32))
    return p


def test_required_hyperparameter_must_be_given_by_every_group(conn):
    assert repr(required) == "<required parameter>"
    p = _param(conn)
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        _Counting([p])
    opt = _Counting([{"params": [p], "lr": 0.1}])
    assert opt.param_groups[0]["lr"] == 0.1
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        opt.add_param_group({"params": [_param(conn)]})


def test_a_subclass_step_tensor_stays_a_tensor_through_load_state_dict(conn):
    p = _param(conn)
    opt = _Counting([p], lr=0.1, tensor_step=True)
    opt.step()
    fresh = _Counting([p], lr=0.1, tensor_step=True)
    fresh.load_state_dict(opt.state_dict())
    fresh.step()
    step = fresh.state[p]["step"]
    assert isinstance(step, gt.Tensor) and step.dtype == gt.float32
    assert step.item() == 2.0


def test_a_subclass_int_step_is_saved_as_an_int(conn):
    p = _param(conn)
    opt = _Counting([p], lr=0.1, tensor_step=False)
    opt.step()
    saved = opt.state_dict()
    assert saved["state"][0]["step"] == 1 and type(saved["state"][0]["step"]) is int
    fresh = _Counting([p], lr=0.1, tensor_step=False)
    fresh.load_state_dict(saved)
    assert fresh.state[p]["step"] == 1


def test_builtin_optimizers_still_save_step_tensors_and_load_ints(conn):
    p = _param(conn)
    opt = gt.optim.Adam([p], lr=0.1)
    opt.step()
    saved = opt.state_dict()
    assert isinstance(saved["state"][0]["step"], gt.Tensor)
    fresh = gt.optim.Adam([p], lr=0.1)
    fresh.load_state_dict(saved)
    assert fresh.state[p]["step"] == 1


def test_deepcopy_goes_through_a_setstate_override_and_keeps_params_shared(conn):
    p = _param(conn)
    opt = _Counting([p], lr=0.5)
    opt.step()
    assert opt.__getstate__().keys() == {"defaults", "state", "param_groups"}
    p2, opt2 = copy.deepcopy((p, opt))
    assert opt2.param_groups[0]["nesterov"] is False  # the override ran
    assert opt2.param_groups[0]["params"][0] is p2 and p2 is not p
    assert isinstance(opt2.state, type(opt.state)) and p2 in opt2.state
    assert not hasattr(opt2, "tensor_step")  # PyTorch keeps only defaults, state and groups
    np.testing.assert_allclose(opt2.state[p2]["step"].item(), 1.0)
    np.testing.assert_allclose(p2.detach().numpy(), p.detach().numpy())
