"""A tensor uploaded from the host computes as the same values made on the worker: its bytes may
arrive at an odd address inside the message (where they land depends on what else the batch
carries), and NumPy's matmul leaves BLAS for unaligned arrays and rounds otherwise (found by a
helper's probe of cluster arrangements on Dec 6)."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_a_product_of_an_upload_has_the_bits_of_the_same_values_made_on_the_worker(conn):
    rng = np.random.default_rng(0)
    x = gt.tensor(rng.standard_normal((12, 64)).astype(np.float32))
    w_np = rng.standard_normal((16, 64)).astype(np.float32)
    differ = 0
    for trial in range(12):
        gt.zeros(5) + 1  # (an instruction before the upload, in the same batch)
        w = gt.tensor(w_np[: 16 - trial % 3])
        uploaded = (x @ w.T).numpy()
        fresh = (x @ w.neg().neg().T).numpy()  # (the same values, made on the worker)
        differ += not np.array_equal(uploaded, fresh)
    assert differ == 0
