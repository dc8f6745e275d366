"""The max-pooling kernels (``gt.runtime.ops.pooling``) against a direct loop written as PyTorch's
CPU kernel is (first maximum in row-major window order, a later NaN replacing, gradients summed in
output order), in 1 to 3 spatial dimensions, with padding, dilation, strides and ceil mode."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.worker.backend import Backend

BACKEND = Backend(np, "cpu")
rng = np.random.default_rng(3)


def _h(name: str):
    return BACKEND.handlers[O.OPCODE[name]]


def _attrs(k, d, p, s, e) -> dict:
    return {"kernel": k, "dilation": d, "padding": p, "stride": s, "extra": e}


def _loop(x: np.ndarray, at: dict, g: np.ndarray | None = None):
    """PyTorch's loop: per output position, the window's elements in row-major order; returns
    the maxima, the flat indices and (given ``g``) the gradient summed in output order."""
    k, d, p, s, e = (at[n] for n in ("kernel", "dilation", "padding", "stride", "extra"))
    n, c, *sizes = x.shape
    outs = [(m + 2 * pp + ee - dd * (kk - 1) - 1) // ss + 1
            for m, kk, dd, pp, ss, ee in zip(sizes, k, d, p, s, e)]  # fmt: skip
    vals = np.empty((n, c, *outs), x.dtype)
    idx = np.empty((n, c, *outs), np.int64)
    grad = np.zeros_like(x) if g is not None else None
    for b, ch, *o in itertools.product(range(n), range(c), *map(range, outs)):
        best, where = -np.inf, None
        for off in itertools.product(*map(range, k)):
            pos = [oo * ss - pp + ii * dd for oo, ss, pp, ii, dd in zip(o, s, p, off, d)]
            if not all(0 <= q < m for q, m in zip(pos, sizes)):
                continue
            v = x[(b, ch, *pos)]
            if where is None:
                where = pos
            if v > best or np.isnan(v):
                best, where = v, pos
        vals[(b, ch, *o)] = best
        idx[(b, ch, *o)] = sum(q * math.prod(sizes[i + 1 :]) for i, q in enumerate(where))
        if g is not None:
            grad[(b, ch, *where)] += g[(b, ch, *o)]
    return vals, idx, grad


CASES = [
    ([2], [1], [1], [2], [0]),
    ([3], [2], [1], [1], [1]),
    ([2, 2], [1, 1], [0, 0], [2, 2], [0, 0]),
    ([3, 3], [1, 1], [1, 1], [1, 1], [0, 0]),
    ([3, 2], [2, 1], [1, 1], [2, 3], [1, 0]),
    ([2, 3, 2], [1, 2, 1], [1, 1, 0], [1, 2, 2], [0, 1, 1]),
]


@pytest.mark.parametrize("k, d, p, s, e", CASES)
def test_maxima_indices_and_gradient_are_pytorchs_loop(k, d, p, s, e):
    at = _attrs(k, d, p, s, e)
    sizes = [5, 6, 4][: len(k)]
    x = rng.integers(-2, 3, (2, 2, *sizes)).astype(np.float64)  # ties everywhere
    x += rng.standard_normal(x.shape) * (rng.random(x.shape) < 0.3)
    x.flat[rng.integers(0, x.size, 2)] = np.nan
    vals = _h("max_pool")([x], at)
    g = rng.standard_normal(vals.shape)
    want_vals, want_idx, want_grad = _loop(x, at, g)
    np.testing.assert_array_equal(vals, want_vals)
    np.testing.assert_array_equal(_h("max_pool_indices")([x], at), want_idx)
    # bitwise: overlapping windows add in PyTorch's order
    np.testing.assert_array_equal(_h("max_pool_grad")([x, g], at), want_grad)


def test_overlapping_windows_sum_a_shared_gradient_in_output_order():
    # one element picked by three windows; the three gradients do not add associatively in fp32
    x = np.zeros((1, 1, 5), np.float32)
    x[0, 0, 2] = 1.0
    at = _attrs([3], [1], [0], [1], [0])
    g = np.array([[[1.0, 1e8, -1e8]]], np.float32)
    got = _h("max_pool_grad")([x, g], at)
    assert got[0, 0, 2] == 0.0  # (1 + 1e8) - 1e8 in fp32; the reverse order gives 1.0


def test_pick_is_the_adjoint_of_the_gradient_routing():
    at = _attrs([3, 2], [1, 2], [1, 1], [2, 1], [1, 0])
    x = rng.standard_normal((2, 3, 6, 5))
    g = rng.standard_normal(_h("max_pool")([x], at).shape)
    h = rng.standard_normal(x.shape)
    routed = _h("max_pool_grad")([x, g], at)
    picked = _h("max_pool_pick")([x, h], at)
    np.testing.assert_allclose((routed * h).sum(), (g * picked).sum(), rtol=1e-12)


def test_integer_inputs_pad_with_their_smallest_value():
    x = np.full((1, 1, 3, 3), np.iinfo(np.int64).min + 1, np.int64)
    x[0, 0, 0, 0] = np.iinfo(np.int64).min + 2
    at = _attrs([2, 2], [1, 1], [1, 1], [2, 2], [0, 0])
    vals = _h("max_pool")([x], at)
    assert vals.dtype == np.int64
    assert vals[0, 0, 0, 0] == np.iinfo(np.int64).min + 2
    assert (vals[0, 0].ravel()[1:] == np.iinfo(np.int64).min + 1).all()


def test_half_inputs_keep_their_dtype_and_picks():
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float16)
    at = _attrs([2, 2], [1, 1], [0, 0], [2, 2], [0, 0])
    vals = _h("max_pool")([x], at)
    assert vals.dtype == np.float16
    np.testing.assert_array_equal(vals, _loop(x.astype(np.float64), at)[0].astype(np.float16))


def test_a_tie_between_zeros_keeps_the_first_zeros_sign():
    # PyTorch's strict ``>`` keeps the first of equal values: [-0.0, 0.0] pools to -0.0
    x = np.array([[[-0.0, 0.0, 0.0, -0.0]]], np.float32)
    vals = _h("max_pool")([x], _attrs([2], [1], [0], [2], [0]))
    assert np.signbit(vals).tolist() == [[[True, False]]]
