"""What a probe of type promotion against PyTorch 2.13 found on Dec 6 (254,068 cases), as PyTorch
computes: a number given first to ``gt.div``/``float_power``/``add`` keeps its value though the
tensor's dtype cannot hold it, ``ldexp`` of complex numbers and of a wider exponent, half
precision ``addcdiv``/``addcmul``/``lerp`` rounded once (Adam's update of bfloat16 weights), and
``bool_t ** True`` a bool tensor through and through."""

from __future__ import annotations

import pytest

import gt

pytestmark = pytest.mark.timeout(90)


def test_a_number_first_keeps_its_value(conn):
    u8 = gt.tensor([3, 2, 1], dtype=gt.uint8)
    assert gt.div(-2, u8).tolist() == pytest.approx([-2 / 3, -1.0, -2.0])
    assert gt.true_divide(-1, gt.tensor([2], dtype=gt.uint8)).tolist() == [-0.5]
    half = gt.tensor([1.0, 2.0], dtype=gt.float16)
    assert gt.float_power(2**40, half).tolist() == [2.0**40, 2.0**80]
    assert gt.float_power(-2, gt.tensor([1, 3], dtype=gt.uint8)).tolist() == [-2.0, -8.0]
    out = gt.add(2**40 + 1, gt.tensor([1, 2], dtype=gt.int8))
    assert out.dtype == gt.int8 and out.tolist() == [2, 3]  # (wraps, as PyTorch's)


def test_ldexp_of_complex_numbers_and_wider_exponents(conn):
    z = gt.tensor([1 + 1j, 2 - 1j])
    assert gt.ldexp(z, gt.tensor([2, 1])).tolist() == [4 + 4j, 4 - 2j]
    z.ldexp_(gt.tensor([1, 1]))
    assert z.tolist() == [2 + 2j, 4 - 2j]
    out = gt.ldexp(gt.tensor([1.5]), gt.tensor([2.0], dtype=gt.float64))
    assert out.dtype == gt.float64 and out.tolist() == [6.0]
    assert gt.ldexp(gt.tensor([1, 2]), gt.tensor([1.0], dtype=gt.float16)).dtype == gt.float16


def test_half_precision_update_ops_round_once(conn):
    h = gt.float16
    zero, one, three = (gt.tensor([v], dtype=h) for v in (0.0, 1.0, 3.0))
    assert gt.addcdiv(zero, one, three, value=5).tolist() == [1.6669921875]  # (not 1.666015625)
    w = gt.tensor([0.1], dtype=gt.bfloat16)
    ref = gt.tensor([0.1], dtype=gt.float32).addcmul(gt.tensor([0.3]), gt.tensor([0.7]), value=0.5)
    got = w.addcmul(
        gt.tensor([0.3], dtype=gt.bfloat16), gt.tensor([0.7], dtype=gt.bfloat16), value=0.5
    )
    once = (
        gt.tensor([0.1], dtype=gt.bfloat16)
        .float()
        .addcmul(
            gt.tensor([0.3], dtype=gt.bfloat16).float(),
            gt.tensor([0.7], dtype=gt.bfloat16).float(),
            value=0.5,
        )
    )
    assert got.float().tolist() == once.to(gt.bfloat16).float().tolist()
    assert abs(got.float().item() - ref.item()) < 1e-2
    m = gt.tensor([1.0], dtype=h)
    m.lerp_(gt.tensor([2.0], dtype=h), 0.1)
    assert m.dtype == h and m.tolist() == [1.099609375]


def test_bool_to_a_bool_power_stays_bool(conn):
    b = gt.tensor([True, False])
    r = b**True
    assert (
        r.dtype == gt.bool and r.tolist() == [True, False] and repr(r) == "tensor([ True, False])"
    )
    assert (b**False).tolist() == [True, True]
    assert (b**2).dtype == gt.int64
    with pytest.raises(NotImplementedError, match="pow"):
        b ** gt.tensor([True, True])
