"""``cauchy_``, ``log_normal_`` and ``geometric_`` draw from their distributions (checked by
their quantiles and moments on 20,000 samples, well inside five standard errors), and the in-place
forms of ``i0``, ``igamma``, ``igammac`` and ``nextafter`` keep the tensor and take the value;
the ``*_like`` factories and the in-place fills draw from a ``generator=`` as PyTorch's do."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt


def test_cauchy_log_normal_and_geometric_fills_have_their_distributions(conn):
    gt.manual_seed(7)
    c = gt.empty(20_000).cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(c) - 1.0) < 0.1  # the median's standard error: pi * sigma / (2 sqrt n)
    assert abs(np.quantile(c, 0.75) - 3.0) < 0.15  # median + sigma
    ln = np.log(gt.empty(20_000, dtype=gt.float64).log_normal_(0.5, 0.3).numpy())
    assert abs(ln.mean() - 0.5) < 0.02 and abs(ln.std() - 0.3) < 0.02
    g = gt.empty(20_000).geometric_(0.25).numpy()
    assert g.min() == 1.0 and np.all(g == np.round(g))
    assert abs(g.mean() - 4.0) < 0.15  # mean 1/p, standard deviation sqrt(1-p)/p
    assert abs((g == 1).mean() - 0.25) < 0.02
    with pytest.raises(RuntimeError, match="p to be in \\(0, 1\\)"):
        gt.empty(3).geometric_(1.5)


def test_special_functions_in_place_keep_the_tensor(conn):
    x = gt.tensor([0.5, 1.0])
    assert x.i0_() is x
    np.testing.assert_allclose(x.numpy(), [1.0634834, 1.2660659], rtol=1e-6)
    a = gt.tensor([1.0, 2.0])
    a.igamma_(gt.tensor([1.0, 1.0]))
    np.testing.assert_allclose(a.numpy(), [1 - math.exp(-1), 1 - 2 * math.exp(-1)], rtol=1e-6)
    b = gt.tensor([1.0, 2.0])
    b.igammac_(gt.tensor([1.0, 1.0]))
    np.testing.assert_allclose(b.numpy(), [math.exp(-1), 2 * math.exp(-1)], rtol=1e-6)
    y = gt.tensor([1.0, 2.0])
    y.nextafter_(gt.tensor([2.0, 1.0]))
    assert y.numpy().tolist() == [np.nextafter(np.float32(1), np.float32(2)),
                                  np.nextafter(np.float32(2), np.float32(1))]  # fmt: skip


SEEDED_DRAWS = {
    "randn_like": lambda x, g: gt.randn_like(x, generator=g),
    "rand_like": lambda x, g: gt.rand_like(x, generator=g),
    "randint_like": lambda x, g: gt.randint_like(x, 10, generator=g),
    "randint_like_low_high": lambda x, g: gt.randint_like(x, 2, 9, generator=g),
    "uniform_": lambda x, g: x.clone().uniform_(-1, 1, generator=g),
    "normal_": lambda x, g: x.clone().normal_(0, 1, generator=g),
    "bernoulli_": lambda x, g: x.clone().bernoulli_(0.5, generator=g),
    "exponential_": lambda x, g: x.clone().exponential_(generator=g),
    "cauchy_": lambda x, g: x.clone().cauchy_(generator=g),
    "log_normal_": lambda x, g: x.clone().log_normal_(generator=g),
    "geometric_": lambda x, g: x.clone().geometric_(0.3, generator=g),
}


@pytest.mark.parametrize("name", sorted(SEEDED_DRAWS))
def test_like_factories_and_fills_draw_from_a_given_generator(conn, name):
    # (PyTorch's randn_like(x, generator=g) etc.: diffusion samplers draw seeded noise this way)
    draw, x = SEEDED_DRAWS[name], gt.zeros(4, 8)
    gt.manual_seed(11)
    a = draw(x, gt.Generator().manual_seed(3)).numpy()
    after = gt.rand(5).numpy()  # the default generator's next draw: not advanced by ``a``
    b = draw(x, gt.Generator().manual_seed(3)).numpy()
    c = draw(x, gt.Generator().manual_seed(4)).numpy()
    gt.manual_seed(11)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(after, gt.rand(5).numpy())
