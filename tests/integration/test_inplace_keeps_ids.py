"""In-place updates where nothing is recorded keep the tensor's id (its array on the worker is
written, not replaced), with the bits of the out-of-place op: ``addcmul_``, ``addcdiv_``,
``lerp_``, ``copy_``, ``zero_``, ``clamp_``; so every GT optimizer's step leaves its parameters
and state the tensors they were (what a step captured without the optimizer reads,
:mod:`gt.hotpath`)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import optimizers_of_every_kind

import gt

pytestmark = pytest.mark.timeout(120)


def _pair(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(dtype)
    b = (rng.random((5, 7)) + 0.5).astype(dtype)
    return gt.tensor(a), gt.tensor(b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "op",
    [
        ("addcmul_", lambda x, a, b: x.addcmul(a, b, value=-0.3), lambda x, a, b: x.addcmul_(a, b, value=-0.3)),
        ("addcdiv_", lambda x, a, b: x.addcdiv(a, b, value=0.7), lambda x, a, b: x.addcdiv_(a, b, value=0.7)),
        ("addcdiv_ broadcast", lambda x, a, b: x.addcdiv(a[0], b[0]), lambda x, a, b: x.addcdiv_(a[0], b[0])),
        ("lerp_", lambda x, a, b: x.lerp(a, 0.1), lambda x, a, b: x.lerp_(a, 0.1)),
        ("lerp_ far end", lambda x, a, b: x.lerp(a, 0.9), lambda x, a, b: x.lerp_(a, 0.9)),
        ("copy_", lambda x, a, b: a.clone(), lambda x, a, b: x.copy_(a)),
        ("zero_", lambda x, a, b: x * 0, lambda x, a, b: x.zero_()),
        ("clamp_", lambda x, a, b: x.clamp(-0.5, 1.25), lambda x, a, b: x.clamp_(-0.5, 1.25)),
    ],
    ids=lambda o: o[0] if isinstance(o, tuple) else None,
)  # fmt: skip
def test_an_in_place_update_under_no_grad_keeps_the_id_and_the_bits(conn, op, dtype):
    _, out_of_place, in_place = op
    a, b = _pair(dtype)
    x = gt.tensor(np.linspace(-2, 2, 35).reshape(5, 7).astype(dtype))
    want = out_of_place(x, a, b).numpy()
    before = x.id
    with gt.no_grad():
        in_place(x, a, b)
    np.testing.assert_array_equal(x.numpy(), want)
    if op[0] != "lerp_ far end":  # (computed from the far end: out of place, a new id)
        assert x.id == before


OPTIMIZERS = optimizers_of_every_kind()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_optimizer_step_leaves_parameters_and_state_where_they_are(conn, name):
    p = gt.nn.Parameter(gt.randn(6, 4))
    opt = OPTIMIZERS[name]([p])
    ids = None
    for k in range(6):  # (Adafactor's first steps move its averages by more than half: new ones)
        p.grad = gt.randn(6, 4)
        opt.step()
        now = {"param": p.id} | {
            key: v.id for key, v in opt.state[p].items() if isinstance(v, gt.Tensor)
        }
        if k >= 4:
            assert now == ids, f"step {k} gave new tensors: {set(now.items()) - set(ids.items())}"
        ids = now
    opt.zero_grad(set_to_none=False)
    held = p.grad.id
    opt.zero_grad(set_to_none=False)
    assert p.grad.id == held and not p.grad.numpy().any()
