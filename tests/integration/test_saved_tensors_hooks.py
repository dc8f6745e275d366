"""``gt.autograd.graph``: pack/unpack hooks on the tensors backward keeps, ``save_on_cpu`` and
``disable_saved_tensors_hooks``; gradients are those without hooks."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn as nn

pytestmark = pytest.mark.timeout(120)


def _grads(model: nn.Module, x: gt.Tensor) -> list[np.ndarray]:
    model.zero_grad(set_to_none=True)
    model(x).pow(2).sum().backward()
    return [p.grad.numpy() for p in model.parameters()]


def test_pack_and_unpack_see_every_saved_tensor_and_gradients_do_not_change(conn):
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    x = gt.randn(4, 5)
    plain = _grads(model, x)
    packed, unpacked = [], []

    def pack(t: gt.Tensor) -> tuple:
        packed.append(tuple(t.shape))
        return ("box", t)

    def unpack(box: tuple) -> gt.Tensor:
        unpacked.append(box[0])
        return box[1]

    with gt.autograd.graph.saved_tensors_hooks(pack, unpack):
        model.zero_grad(set_to_none=True)
        loss = model(x).pow(2).sum()
    assert packed and not unpacked  # packed while recording, unpacked only by backward
    loss.backward()
    # (unpacked when a rule reads them: a transpose whose gradient matmul computes is never read)
    assert 0 < len(unpacked) <= len(packed)
    for a, b in zip([p.grad.numpy() for p in model.parameters()], plain):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_save_on_cpu_keeps_the_gradients(conn):
    gt.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2))
    x = gt.randn(3, 6)
    plain = _grads(model, x)
    with gt.autograd.graph.save_on_cpu(pin_memory=True):
        model.zero_grad(set_to_none=True)
        loss = model(x).pow(2).sum()
    loss.backward()
    for a, b in zip([p.grad.numpy() for p in model.parameters()], plain):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_disabled_hooks_raise_with_the_given_message(conn):
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    with gt.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with gt.autograd.graph.disable_saved_tensors_hooks("no hooks in this block"):
            with pytest.raises(RuntimeError, match="no hooks in this block"):
                (w * w).sum()
    (w * w).sum().backward()  # outside: fine
    assert w.grad.numpy().tolist() == [2.0, 4.0]
