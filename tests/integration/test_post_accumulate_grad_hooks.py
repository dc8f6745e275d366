"""``Tensor.register_post_accumulate_grad_hook``: called once per backward pass with the leaf,
after its ``.grad`` is complete (the optimizer-in-backward pattern), never by ``autograd.grad``."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_the_hook_sees_the_whole_gradient_once_and_can_step_in_backward(conn):
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def step(p: gt.Tensor) -> None:
        seen.append(p.grad.numpy().tolist())
        with gt.no_grad():
            p -= 0.1 * p.grad
        p.grad = None

    handle = w.register_post_accumulate_grad_hook(step)
    ((w * w).sum() + w.sum()).backward()  # w used twice: one call, with 2w + 1
    assert seen == [[3.0, 5.0]] and w.grad is None
    np.testing.assert_allclose(w.detach().numpy(), [0.7, 1.5], rtol=1e-6)
    gt.autograd.grad((w * 3).sum(), w)  # no .grad is accumulated: no call
    assert len(seen) == 1
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 1 and w.grad.numpy().tolist() == [3.0, 3.0]


def test_only_leaves_that_require_grad_take_one(conn):
    w = gt.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        gt.tensor([1.0]).register_post_accumulate_grad_hook(lambda p: None)
    calls = []
    w.register_post_accumulate_grad_hook(calls.append)
    (w * 2).sum().backward(inputs=[w])
    assert calls == [w]
