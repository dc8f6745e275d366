"""``add``/``sub``/``add_``/``sub_`` with ``alpha=``: one ``add_scaled`` instruction, the same bits
as ``other * alpha`` then the sum, PyTorch's gradients and ``grad_fn`` names, and SGD's update
through it."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.runtime import ops as O

ADD_SCALED = O.OPCODE["add_scaled"]
rng = np.random.default_rng(3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_and_sub_with_alpha_are_one_instruction_with_the_same_bits(conn, sent, dtype):
    a = rng.standard_normal((5, 300)).astype(dtype)
    b = rng.standard_normal((5, 300)).astype(dtype)
    ta, tb = gt.from_numpy(a), gt.from_numpy(b)
    sent.clear()
    plus, minus = ta.add(tb, alpha=0.3), ta.sub(tb, alpha=0.3)
    assert sent == [ADD_SCALED, ADD_SCALED]
    np.testing.assert_array_equal(plus.numpy(), a + b * dtype(0.3))
    np.testing.assert_array_equal(minus.numpy(), a - b * dtype(0.3))


def test_in_place_with_alpha_updates_the_tensor_and_leaves_what_was_taken_from_it(conn, sent):
    p = rng.standard_normal((40, 70)).astype(np.float32)
    g = rng.standard_normal((40, 70)).astype(np.float32)
    tp, tg = gt.from_numpy(p), gt.from_numpy(g)
    before = tp.clone()
    sent.clear()
    tp.add_(tg, alpha=-0.01)
    assert sent == [ADD_SCALED]
    np.testing.assert_array_equal(tp.numpy(), p - g * np.float32(0.01))
    np.testing.assert_array_equal(before.numpy(), p)
    tp.sub_(tg, alpha=2)
    np.testing.assert_array_equal(tp.numpy(), (p - g * np.float32(0.01)) - g * np.float32(2))


def test_a_broadcast_or_other_dtype_takes_the_general_path(conn):
    a = gt.from_numpy(np.ones((3, 4), np.float32))
    row = gt.from_numpy(np.arange(4, dtype=np.float32))
    a.add_(row, alpha=2)
    np.testing.assert_array_equal(
        a.numpy(), 1 + 2 * np.arange(4, dtype=np.float32)[None].repeat(3, 0)
    )
    i = gt.from_numpy(np.arange(4, dtype=np.int64))
    np.testing.assert_array_equal(i.add(i, alpha=3).numpy(), np.arange(4) * 4)
    h = gt.from_numpy(np.ones(4, np.float16))
    assert h.add(h, alpha=0.5).dtype == "float16"


def test_gradients_and_grad_fn_names_are_pytorchs(conn):
    x = gt.from_numpy(rng.standard_normal((3, 4)).astype(np.float64)).requires_grad_()
    y = gt.from_numpy(rng.standard_normal(4).astype(np.float64)).requires_grad_()
    s = x.add(y, alpha=2.5)
    d = x.sub(y, alpha=2.5)
    assert s.grad_fn.name() == "AddBackward0"
    assert d.grad_fn.name() == "SubBackward0"
    (s.sum() + 3 * d.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 4.0))
    np.testing.assert_allclose(y.grad.numpy(), np.full(4, 3 * (2.5 - 3 * 2.5)))


def test_a_recorded_in_place_update_keeps_gradients_flowing(conn):
    w = gt.from_numpy(np.ones(3)).requires_grad_()
    v = gt.from_numpy(np.arange(3.0)).requires_grad_()
    h = w * 1.0  # not a leaf: it may change in place
    h.add_(v, alpha=-4.0)
    assert h.grad_fn.name() == "AddBackward0"
    h.sub_(v, alpha=0.5)
    assert h.grad_fn.name() == "SubBackward0"
    h.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.ones(3))
    np.testing.assert_allclose(v.grad.numpy(), np.full(3, -4.5))


def test_sgd_with_momentum_is_one_fused_update_per_parameter(conn, sent):
    w = gt.nn.Parameter(gt.from_numpy(np.ones((8, 8), np.float32)))
    opt = gt.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = gt.from_numpy(np.full((8, 8), 0.5, np.float32))
    opt.step()
    opt.step()
    assert sent.count(ADD_SCALED) == 2
    # two steps with the same gradient: buf = 0.5, then 0.9 * 0.5 + 0.5
    f = np.float32
    want = f(1) - f(0.5) * f(0.1)
    want = want - (f(0.5) * f(0.9) + f(0.5)) * f(0.1)
    np.testing.assert_array_equal(w.detach().numpy(), np.full((8, 8), want, np.float32))
