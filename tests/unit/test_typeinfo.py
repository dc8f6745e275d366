"""``gt.finfo`` and ``gt.iinfo``: PyTorch's numbers and reprs, bfloat16 included (no cluster)."""

from __future__ import annotations

import gt


def test_finfo_bfloat16_has_pytorchs_limits_without_numpy_knowing_the_dtype():
    f = gt.finfo(gt.bfloat16)
    assert (f.bits, f.eps, f.resolution, f.dtype) == (16, 0.0078125, 0.01, "bfloat16")
    assert f.max == 3.3895313892515355e38 and f.min == -f.max
    assert f.tiny == f.smallest_normal == 1.1754943508222875e-38


def test_finfo_resolution_is_a_power_of_ten_and_complex_gives_its_parts():
    assert gt.finfo(gt.float32).resolution == 1e-06 and gt.finfo(gt.float16).resolution == 0.001
    assert gt.finfo(gt.complex64).dtype == "float32" and gt.finfo(gt.complex128).bits == 64
    assert gt.finfo().dtype == "float32" and gt.finfo(gt.float16).min == -65504.0


def test_finfo_and_iinfo_print_as_pytorch():
    assert repr(gt.finfo(gt.float16)) == (
        "finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, "
        "smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)"
    )
    assert repr(gt.iinfo(gt.int32)) == "iinfo(min=-2.14748e+09, max=2.14748e+09, dtype=int32)"
    assert repr(gt.iinfo(gt.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    assert gt.iinfo(gt.int64).max == 2**63 - 1
