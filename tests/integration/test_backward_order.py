"""The backward pass runs its nodes in PyTorch's engine's order (of the nodes ready, the latest
made), so that a gradient with several contributions is summed in PyTorch's order, bit for bit,
and the hooks of independent branches fire in PyTorch's order."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(90)


def test_a_leaf_used_five_times_sums_its_gradients_latest_use_first(conn):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal(1000).astype(np.float32)
    ws = [rng.standard_normal(1000).astype(np.float32) for _ in range(5)]
    x = gt.tensor(xs, requires_grad=True)
    loss = sum(((x * gt.tensor(w)) * (i + 1.37)).sum() for i, w in enumerate(ws))
    loss.backward()
    parts = [w * np.float32(i + 1.37) for i, w in enumerate(ws)]
    expected = parts[4]
    for part in reversed(parts[:4]):  # ((g5 + g4) + g3) ...: PyTorch's engine's order
        expected = expected + part
    assert np.array_equal(x.grad.numpy(), expected)


def test_hooks_of_independent_branches_fire_latest_branch_first(conn):
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    fired = []
    a = x * 2
    a.register_hook(lambda g: fired.append("a"))
    b = x * 3
    b.register_hook(lambda g: fired.append("b"))
    (a.sum() + b.sum()).backward()
    assert fired == ["b", "a"]
