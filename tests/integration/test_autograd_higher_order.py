"""Second derivatives: ``gt.autograd.grad(..., create_graph=True)`` through every case of the
first-order suite, against finite differences of the first derivative, in float64.

For a case ``f`` and fixed random ``w`` and ``v``, let ``s(x) = <grad_x <f(x), w>, v>``: autograd
gives its gradient (a Hessian-vector product) by differentiating the recorded backward pass;
finite differences give it from first-order gradients at perturbed points. They must agree, so
every derivative rule must itself be built from differentiable ops (or be linear in its inputs).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_autograd_ops import CASES

import gt

EPS = 1e-6


def _s(fn, inputs, w, vs, create_graph):
    """``<grad <f, w>, v>`` summed over inputs, and the first-order gradients."""
    out = fn(*inputs)
    gs = gt.autograd.grad((out * w).sum(), inputs, create_graph=create_graph, allow_unused=True)
    total = None
    for g, v in zip(gs, vs):
        if g is not None:
            term = (g * v).sum()
            total = term if total is None else total + term
    return total


def second_order_check(fn, *arrays, atol=1e-5, rtol=1e-4, seed=0):
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    rng = np.random.default_rng(seed)
    inputs = [gt.tensor(a, requires_grad=True) for a in arrays]
    probe = fn(*inputs)
    w = gt.tensor(rng.standard_normal(probe.shape))
    vs = [gt.tensor(rng.standard_normal(a.shape)) for a in arrays]
    s = _s(fn, inputs, w, vs, create_graph=True)
    if s is None or not s.requires_grad:
        hv = [np.zeros_like(a) for a in arrays]  # linear in every input: no curvature
    else:
        got = gt.autograd.grad(s, inputs, allow_unused=True)
        hv = [g.numpy() if g is not None else np.zeros_like(a) for g, a in zip(got, arrays)]
    values = []
    for i, a in enumerate(arrays):
        for j in range(a.size):
            for sign in (1.0, -1.0):
                moved = [x.copy() for x in arrays]
                moved[i].flat[j] += sign * EPS
                leaves = [gt.tensor(m, requires_grad=True) for m in moved]
                val = _s(fn, leaves, w, vs, create_graph=False)
                values.append(val if val is not None else gt.zeros((), dtype="float64"))
    numeric = gt.stack(values).numpy() if values else np.zeros(0)
    k = 0
    for i, a in enumerate(arrays):
        fd = (numeric[k : k + 2 * a.size : 2] - numeric[k + 1 : k + 2 * a.size : 2]) / (2 * EPS)
        k += 2 * a.size
        np.testing.assert_allclose(
            hv[i].reshape(-1), fd, atol=atol, rtol=rtol, err_msg=f"input {i}"
        )


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_second_derivative_matches_finite_differences(conn, case):
    _name, fn, arrays = case
    second_order_check(fn, *arrays)
