"""What a probe of ``nn.utils`` and ``nn.init`` against PyTorch 2.13 found on Dec 6 (6,925 cases),
as PyTorch behaves: a module's hook tables hold the hooks themselves; a state dict taken before
``p.data = ...`` or ``model.double()`` keeps the old values; ``pad_sequence``'s dtype and input
forms, ``unpad_sequence``'s copies; ``get_total_norm`` outside autograd; ``trunc_normal_`` far in
a tail (it looped for ever); the Kaiming inits of empty tensors; ``calculate_gain``'s ints; the
clipping of half gradients in float32. Every test runs on NumPy workers and on workers whose
CuPy is the test double."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt
import gt.nn.utils.prune as prune
from gt import nn
from gt.nn.utils import rnn

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_hook_tables_hold_the_hooks_themselves(conn):
    m = nn.Linear(2, 2)
    prune.l1_unstructured(m, "weight", amount=1)
    (hook,) = m._forward_pre_hooks.values()
    assert isinstance(hook, prune.BasePruningMethod) and m._forward_pre_hooks_with_kwargs == {}
    seen = []
    handle = m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs),
                                     with_kwargs=True)  # fmt: skip
    assert list(m._forward_hooks_with_kwargs.values()) == [True]
    m(gt.ones(2))
    handle.remove()
    assert seen == [{}] and m._forward_hooks == {} and m._forward_hooks_with_kwargs == {}


def test_a_state_dict_keeps_the_values_replaced_after_it(conn):
    m = nn.Linear(2, 2)
    with gt.no_grad():
        m.weight.fill_(1.0)
    before = m.state_dict()
    with gt.no_grad():
        m.bias.fill_(3.0)  # (an in-place update: the state dict follows it, as in PyTorch)
    m.weight.data = gt.zeros(2, 2)
    assert before["weight"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert before["bias"].tolist() == [3.0, 3.0] and type(before["weight"]) is gt.Tensor
    taken = m.state_dict()
    m.double()
    assert taken["weight"].dtype == gt.float32 and m.weight.dtype == gt.float64


def test_pad_sequence_takes_the_first_dtype_and_a_tensor(conn):
    padded = rnn.pad_sequence([gt.tensor([1, 2]), gt.tensor([1.5])])
    assert padded.dtype == gt.int64 and padded.tolist() == [[1, 1], [2, 0]]
    assert rnn.pad_sequence(gt.arange(6.0).reshape(2, 3)).tolist() == [[0, 3], [1, 4], [2, 5]]
    x = gt.arange(6.0).reshape(3, 2)
    parts = rnn.unpad_sequence(x, gt.tensor([3, 2]))
    x.add_(100)
    assert [p.tolist() for p in parts] == [[0.0, 2.0, 4.0], [1.0, 3.0]]


def test_total_norm_is_outside_autograd_and_half_gradients_clip_in_float32(conn):
    a = gt.ones(2, requires_grad=True)
    assert not nn.utils.get_total_norm([a * 2]).requires_grad
    p1 = nn.Parameter(gt.zeros(2, dtype=gt.float16))
    p1.grad = gt.tensor([1.0, 3.0], dtype=gt.float16)
    p2 = nn.Parameter(gt.zeros(3))
    p2.grad = gt.tensor([5.0, -9.0, 9.0])
    nn.utils.clip_grad_norm_([p1, p2], 1.0)
    assert p1.grad.tolist() == [0.07122802734375, 0.2137451171875]  # (PyTorch's bits)


def test_trunc_normal_far_in_a_tail_and_at_a_point(conn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = nn.init.trunc_normal_(gt.empty(2000), 0.0, 1.0, 4.0, 5.0).numpy()
    assert any("more than 2 std" in str(w.message) for w in caught)
    assert t.min() >= 4.0 and t.max() <= 5.0 and 4.1 < t.mean() < 4.4  # (the tail's mean: 4.22)
    assert nn.init.trunc_normal_(gt.empty(3), 0.0, 1.0, 1.0, 1.0).tolist() == [1.0] * 3
    with pytest.raises(RuntimeError, match="uniform_ expects"):
        nn.init.trunc_normal_(gt.empty(3), 0.0, 1.0, 2.0, 1.0)
    body = nn.init.trunc_normal_(gt.empty(4000), 1.0, 2.0, -1.0, 3.0).numpy()
    assert body.min() >= -1.0 and body.max() <= 3.0 and abs(body.mean() - 1.0) < 0.1


def test_kaiming_of_an_empty_tensor_and_the_gains(conn):
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        assert nn.init.kaiming_uniform_(gt.empty(3, 0), a=math.sqrt(5)).shape == (3, 0)
    assert nn.init.orthogonal_(gt.empty(0, 3)).shape == (0, 3)
    assert nn.init._calculate_correct_fan(gt.empty(3, 4), "fan_in") == 4
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_normal_(gt.empty(3, 4), mode="fan_avg")
    gains = [nn.init.calculate_gain(n) for n in ("linear", "conv2d", "sigmoid")]
    assert gains == [1, 1, 1] and all(type(g) is int for g in gains)
    with pytest.raises(ValueError, match="not a valid number"):
        nn.init.calculate_gain("leaky_relu", True)
    np.testing.assert_allclose(nn.init.calculate_gain("leaky_relu", 0.2), math.sqrt(2 / 1.04))
