"""What GAN training code needs from GT that it once lacked (found while writing the
``gan_style`` programs): ``torch.autograd.profiler.record_function`` around StyleGAN2-ADA's loss
phases, and the legacy ``torch.autograd.profiler.profile(enabled)``."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_autograd_profiler_is_the_profiler_under_its_older_name():
    import gt.autograd.profiler as legacy  # the import statement form works too

    assert gt.autograd.profiler is legacy
    assert legacy.record_function is gt.profiler.record_function
    with legacy.profile() as prof:  # enabled, positional first in the legacy signature
        with legacy.record_function("Dr1_forward"):
            pass
    assert [e.name for e in prof.events()] == ["Dr1_forward"]
    with legacy.profile(False, use_cuda=False, record_shapes=True) as off:
        with legacy.record_function("ignored"):
            pass
    assert off.events() == []
    with legacy.emit_nvtx():
        pass


def test_record_function_blocks_around_a_second_order_penalty(conn):
    x = gt.tensor(np.array([[0.3, -0.2], [0.5, 0.4]], dtype=np.float32)).requires_grad_(True)
    w = gt.tensor(np.array([0.5, -1.5], dtype=np.float32), requires_grad=True)
    with gt.autograd.profiler.record_function("Dreal_Dr1_forward"):
        logits = (x * w).sum(1).tanh()
        (g,) = gt.autograd.grad(outputs=[logits.sum()], inputs=[x], create_graph=True)
        r1 = g.square().sum(1)
    with gt.autograd.profiler.record_function("Dreal_Dr1_backward"):
        (r1 * 5.0).mean().backward()
    # r1_n = (1 - tanh(a_n)^2)^2 |w|^2 with a_n = x_n . w
    a = np.array([0.3 * 0.5 + 0.2 * 1.5, 0.5 * 0.5 - 0.4 * 1.5])
    s = 1 - np.tanh(a) ** 2
    want_r1 = s**2 * (0.25 + 2.25)
    np.testing.assert_allclose(r1.detach().numpy(), want_r1, rtol=1e-5)
    assert w.grad is not None
