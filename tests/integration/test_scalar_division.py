"""``number / tensor`` as PyTorch computes it: ``tensor.reciprocal() * number`` (two roundings),
the reciprocal's gradient ``g * -(r * r)``, and the node names; ``1 / x`` and ``torch.div`` stay
one correctly rounded division."""

from __future__ import annotations

import numpy as np
import pytest

import gt

rng = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_number_over_a_tensor_is_the_reciprocal_times_the_number(conn, dtype):
    a = (rng.standard_normal(4000) * 10 ** rng.uniform(-3, 3, 4000)).astype(dtype)
    x = gt.tensor(a, requires_grad=True)
    y = 255.0 / x
    r = dtype(1) / a
    want = r * dtype(255.0)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    assert not np.array_equal(want, dtype(255.0) / a)  # (the inputs do tell the two apart)
    y.sum().backward()
    # MulBackward0 gives 255 * g, ReciprocalBackward0 that times -(r * r)
    np.testing.assert_array_equal(x.grad.numpy(), dtype(255.0) * -(r * r))
    assert y.grad_fn.name() == "MulBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"


def test_one_over_a_tensor_and_the_function_form_divide_once(conn):
    a = rng.uniform(0.1, 300.0, 2000).astype(np.float32)
    x = gt.tensor(a, requires_grad=True)
    np.testing.assert_array_equal((1 / x).detach().numpy(), np.float32(1) / a)
    np.testing.assert_array_equal(gt.div(255.0, gt.tensor(a)).numpy(), np.float32(255.0) / a)
    x.reciprocal().sum().backward()
    r = np.float32(1) / a
    np.testing.assert_array_equal(x.grad.numpy(), -(r * r))


def test_integers_and_half_tensors_round_as_pytorch(conn):
    ints = gt.tensor([252, 244, 7], dtype=gt.int32)
    got = (255 / ints).numpy()
    assert got.dtype == np.float32
    r = np.float32(1) / np.array([252, 244, 7], np.float32)
    np.testing.assert_array_equal(got, r * np.float32(255))
    half = (255.0 / gt.tensor(np.array([0.3, 252.0], np.float16))).numpy()
    assert half.dtype == np.float16
    # each op in float32, rounded to half once per op: 1/0.3 (as half) then times 255
    h = np.array([0.3, 252.0], np.float16).astype(np.float32)
    recip = (np.float32(1) / h).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(half, (recip * np.float32(255)).astype(np.float16))
