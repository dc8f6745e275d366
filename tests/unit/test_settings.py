"""``gt/settings.py``: the process-wide settings that change what GT does, restored after each."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt import settings
from gt import shapes as S
from gt.ops import format as fmt
from gt.ops import random as rnd
from gt.ops.conversion import host_array


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    for var in ("GT_BLAS_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    yield
    settings.set_default_dtype("float32")
    settings.set_printoptions(profile="default")


def test_the_default_dtype_moves_python_floats_and_complex_numbers_and_refuses_integers():
    settings.set_default_dtype("float64")
    assert S.DEFAULT_FLOAT == "float64" and gt.get_default_dtype() == "float64"
    assert host_array([1.5]).dtype == np.float64 and host_array([1j]).dtype == np.complex128
    assert (
        S.promote_scalar("int64", 0.5) == "float64"
        and S.promote_scalar("int64", 1j) == "complex128"
    )
    assert host_array(np.ones(2, np.float32)).dtype == np.float32  # (arrays keep their dtype)
    with pytest.raises(TypeError, match="floating-point"):
        settings.set_default_dtype("int64")
    settings.set_default_tensor_type("torch.FloatTensor")
    assert S.DEFAULT_FLOAT == "float32"


def test_printoptions_change_the_repr_and_a_profile_restores_it():
    a = np.array([1.23456, 2.5], np.float32)
    settings.set_printoptions(precision=2)
    assert fmt.format_tensor(a, "float32") == "tensor([1.23, 2.50])"
    settings.set_printoptions(sci_mode=True)
    assert fmt.format_tensor(a, "float32") == "tensor([1.23e+00, 2.50e+00])"
    settings.set_printoptions(profile="default")
    assert fmt.format_tensor(a, "float32") == "tensor([1.2346, 2.5000])"
    settings.set_printoptions(profile="loud")  # an unknown profile is ignored, as in PyTorch
    assert fmt.format_tensor(a, "float32") == "tensor([1.2346, 2.5000])"


def test_rng_state_round_trips_the_seed_stream_and_threads_reach_new_workers():
    rnd.manual_seed(7)
    state = settings.rng_bytes()
    first = [rnd.next_seed() for _ in range(3)]
    settings.set_rng_state(state)
    assert [rnd.next_seed() for _ in range(3)] == first and settings.initial_seed() == 7
    settings.set_num_threads(3)
    assert settings.get_num_threads() == 3
    from gt.runtime.launch import worker_env

    env = worker_env(2)
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "3"
