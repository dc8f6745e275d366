"""``scaled_dot_product_attention`` with a mask: one safe softmax instruction, where a query that
may attend to nothing gets zeros, and so does its gradient (PyTorch's safe softmax)."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn.functional as F
from gt.runtime import ops as O

rng = np.random.default_rng(6)


def _reference(q, k, v, allowed):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(allowed, scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    m[~np.isfinite(m)] = 0
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - m)
    s = e.sum(-1, keepdims=True)
    w = np.divide(e, s, out=np.zeros_like(e), where=s > 0)
    return w @ v


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_query_with_nothing_to_attend_to_gets_zeros_from_one_softmax(conn, sent, kind):
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    allowed = rng.random((5, 5)) < 0.6
    allowed[2] = False  # query 2 may attend to nothing
    allowed[0, 0] = True
    mask = allowed if kind == "bool" else np.where(allowed, 0.0, -np.inf)
    Q, K, V = (gt.tensor(a, requires_grad=True) for a in (q, k, v))
    sent.clear()
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=gt.tensor(mask))
    assert sent.count(O.OPCODE["softmax"]) == 1
    # (the bool mask's own masked_fill is the one where; finding and masking blocked rows took
    # two more, a comparison and a reduction)
    assert sent.count(O.OPCODE["where"]) == (1 if kind == "bool" else 0)
    got = out.detach().numpy()
    np.testing.assert_allclose(got, _reference(q, k, v, allowed), rtol=1e-12, atol=1e-12)
    assert not np.any(got[:, :, 2])
    out.sum().backward()
    for t in (Q, K, V):
        assert np.all(np.isfinite(t.grad.numpy()))
    assert not np.any(Q.grad.numpy()[:, :, 2])  # (nothing flows through a query that sees nothing)


def test_the_safe_softmax_kernel_leaves_other_rows_bit_for_bit():
    from gt.runtime.ops.reduce import _k_softmax

    class NumPy:
        xp = np
        name = "numpy"

    h = _k_softmax(NumPy)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    x[1] = -np.inf
    x[3, ::2] = -np.inf
    with np.errstate(all="ignore"):  # (as on a worker: -inf - -inf is NaN, quietly)
        plain = h([x.copy()], {"axis": 1})
        safe = h([x.copy()], {"axis": 1, "safe": True})
    assert np.all(np.isnan(plain[1])) and not np.any(safe[1])
    keep = [0, 2, 3, 4, 5]
    assert np.array_equal(plain[keep], safe[keep])
