"""One random-number generator for every backend: Philox4x32-10 on ``xp`` (known-answer vectors,
identical words on NumPy and the CuPy double, draws in the target dtype)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.ops import creation as C
from gt.runtime.worker.backend import Backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double  # noqa: E402

NP = Backend(np)
DOUBLE = Backend(cupy_double, name="cupy", cupyx=cupy_double.cupyx)

# Random123's known-answer vectors for philox4x32_R(10, ctr, key).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]  # fmt: skip


@pytest.mark.parametrize(("ctr", "key", "want"), KAT)
def test_philox_matches_the_known_answer_vectors(ctr, key, want):
    counter = np.array([ctr[0] | ctr[1] << 32], dtype=np.uint64)
    got = C.philox4x32(np, counter, key[0] | key[1] << 32, high=(ctr[2], ctr[3]))
    assert tuple(int(w[0]) for w in got) == want


def _run(be, name, **attrs):
    h = be.handlers[O.OPCODE[name]]
    out = h([], {"shape": [33, 7], "seed": 987654321, **attrs})
    return be.to_host(out)


@pytest.mark.parametrize(
    ("name", "attrs"),
    [
        ("randn", {"dtype": "float32"}),
        ("randn", {"dtype": "float64"}),
        ("randn", {"dtype": "float16"}),
        ("rand", {"dtype": "float32"}),
        ("rand", {"dtype": "float64"}),
        ("rand", {"dtype": "float16"}),
        ("randint", {"dtype": "int64", "low": -5, "high": 17}),
        ("randint", {"dtype": "int32", "low": 0, "high": 2**31 - 1}),
        ("randint", {"dtype": "int64", "low": -(2**62), "high": 2**62}),
    ],
)
def test_the_same_seed_gives_the_same_bits_on_numpy_and_cupy_workers(name, attrs):
    a, b = _run(NP, name, **attrs), _run(DOUBLE, name, **attrs)
    assert a.dtype == np.dtype(attrs["dtype"]) and a.shape == (33, 7)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, _run(NP, name, **{**attrs, "seed": 987654322}))


def test_words_can_be_drawn_from_any_offset_and_elements_follow_words():
    whole = C.random_words(np, 103, seed=5)
    np.testing.assert_array_equal(C.random_words(np, 40, seed=5, offset=37), whole[37:77])
    u = C.draw_rand(np, 103, 5, "float32", np.float32)
    np.testing.assert_array_equal(u, (whole >> np.uint64(8)).astype(np.float32) * 2.0**-24)


def test_uniforms_are_drawn_in_their_own_precision_and_stay_below_one():
    for name, dt, bits in (("float16", np.float16, 11), ("float32", np.float32, 24)):
        u = C.draw_rand(np, 200_000, 11, name, dt)
        assert u.dtype == dt and u.min() >= 0 and u.max() < 1
        assert np.all((u * 2.0**bits) == np.floor(u * 2.0**bits))  # exact multiples of 2**-bits
        assert abs(float(u.astype(np.float64).mean()) - 0.5) < 0.01
    u64 = C.draw_rand(np, 100_000, 11, "float64", np.float64)
    assert len(np.unique(u64)) == 100_000 and 0 <= u64.min() and u64.max() < 1


def test_normals_have_the_right_moments_and_tails():
    z = C.draw_randn(np, 1_000_001, 3, "float32", np.float32)
    assert z.dtype == np.float32 and z.shape == (1_000_001,)
    assert abs(float(z.mean())) < 0.005 and abs(float(z.std()) - 1) < 0.005
    assert 0.0025 < float(np.mean(np.abs(z) > 3)) < 0.0029  # P(|z| > 3) = 0.0027
    assert np.isfinite(z).all()


def test_integers_cover_the_range_evenly():
    k = C.draw_randint(np, 100_000, 8, -3, 7, np.int64)
    counts = np.bincount(k + 3)
    assert len(counts) == 10 and counts.min() > 9_500 and counts.max() < 10_500
    with pytest.raises(ValueError, match="must be greater"):
        C.draw_randint(np, 3, 8, 5, 5, np.int64)


def test_bfloat16_random_numbers_need_ml_dtypes_on_numpy(monkeypatch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    got = _run(Backend(np), "randn", dtype="bfloat16")  # (normals in float32, rounded once)
    want = _run(Backend(np), "randn", dtype="float32").astype(ml_dtypes.bfloat16)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and (got == want).all()
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    with pytest.raises(TypeError, match="bfloat16"):
        _run(Backend(np), "randn", dtype="bfloat16")
