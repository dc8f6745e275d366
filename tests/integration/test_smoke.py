"""The issue's first example, end to end against a real cluster."""

import numpy as np

import gt


def test_matmul_plus_scalar_matches_numpy(conn):
    a_np = np.random.default_rng(0).standard_normal((100, 80)).astype(np.float32)
    b_np = np.random.default_rng(1).standard_normal((80, 60)).astype(np.float32)
    c = gt.from_numpy(a_np) @ gt.from_numpy(b_np) + 1
    np.testing.assert_allclose(c[:4, :4].numpy(), (a_np @ b_np + 1)[:4, :4], rtol=1e-5, atol=1e-5)
