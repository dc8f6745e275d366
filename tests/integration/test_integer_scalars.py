"""Python integers with integer tensors, as PyTorch takes them: the number of ``tensor <op>
number`` is cast into the tensor's dtype in two's complement (``uint8 + 300`` adds 44,
``uint8 > -1`` compares with 255), a fill value must fit (a negative one may wrap into an
unsigned dtype), an integer divided by zero raises, and ``-`` refuses bool operands. Expected
values are written with NumPy's explicit casts. Every test runs on NumPy workers and on workers
whose CuPy is the test double (a zero divisor inside a tensor is checked on NumPy only, as
PyTorch's CPU kernels check it and its CUDA kernels do not)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt
from gt.errors import DtypeError, WorkerError

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)

U8 = np.array([0, 1, 44, 254, 255], dtype=np.uint8)
S8 = np.array([-128, -1, 0, 1, 127], dtype=np.int8)


def _as(dtype: str, value: int) -> np.ndarray:
    """``value`` cast into ``dtype`` as C casts it (two's complement)."""
    return np.array(value, dtype=np.int64).astype(np.uint64).astype(dtype)


@pytest.mark.parametrize(
    ("values", "number"),
    [(U8, 300), (U8, -1), (U8, -300), (U8, 2**40), (S8, 200), (S8, -129), (S8, 70000)],
)
def test_arithmetic_with_an_out_of_range_number_wraps_the_number(conn, values, number):
    x = gt.tensor(values)
    n = _as(values.dtype.name, number)
    with np.errstate(over="ignore"):
        cases = {
            "add": (x + number, values + n),
            "sub": (x - number, values - n),
            "rsub": (number - x, n - values),
            "mul": (x * number, values * n),
            "iadd": (x.clone().__iadd__(number), values + n),
        }
    for name, (got, want) in cases.items():
        out = got.numpy()
        assert out.dtype == values.dtype, name
        np.testing.assert_array_equal(out, want, err_msg=name)


def test_comparisons_and_bitwise_ops_see_the_wrapped_number(conn):
    x = gt.tensor(U8)
    np.testing.assert_array_equal((x == 300).numpy(), U8 == 44)
    np.testing.assert_array_equal((x < 300).numpy(), U8 < 44)
    np.testing.assert_array_equal((x > -1).numpy(), U8 > 255)  # -1 is 255: nothing is greater
    np.testing.assert_array_equal((x ^ 300).numpy(), U8 ^ np.uint8(44))
    np.testing.assert_array_equal((x // 300).numpy(), U8 // np.uint8(44))
    np.testing.assert_array_equal((x % 300).numpy(), U8 % np.uint8(44))


def test_a_hash_constant_past_int32_multiplies_as_it_wraps(conn):
    ids = np.array([1, 7, -3, 123456], dtype=np.int32)
    got = (gt.tensor(ids) * 2654435761).numpy()  # Knuth's multiplicative hash on int32 ids
    with np.errstate(over="ignore"):
        want = ids * np.int32(2654435761 - 2**32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_a_number_no_64_bit_int_holds_is_refused_at_the_call(conn):
    x = gt.tensor(U8)
    with pytest.raises(RuntimeError, match="int too big to convert"):
        _ = x + 2**64


@pytest.mark.parametrize(
    "fill",
    [
        lambda x: x.clone().fill_(300),
        lambda x: x.masked_fill(x > 1, 300),
        lambda x: gt.where(x > 1, x, 300),
        lambda x: x.clamp(max=300),
        lambda x: gt.full((2,), 300, dtype=gt.uint8),
        lambda x: x.new_full((2,), 300),
        lambda x: x.clone().__setitem__(0, 300),
        lambda x: x.add(x, alpha=300),
        lambda x: gt.addcmul(x, x, x, value=300),
    ],
    ids=["fill_", "masked_fill", "where", "clamp", "full", "new_full", "setitem", "alpha", "value"],
)
def test_a_fill_value_that_does_not_fit_is_refused_at_the_call(conn, fill):
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t without"):
        fill(gt.tensor(U8))


def test_a_negative_fill_value_wraps_into_an_unsigned_dtype_and_must_fit_a_signed_one(conn):
    x = gt.tensor(U8)
    assert x.clone().fill_(-1).tolist() == [255] * 5
    assert gt.tensor([-1, -255], dtype=gt.uint8).tolist() == [255, 1]
    assert x.masked_fill(x == 0, -2).tolist() == [254, 1, 44, 254, 255]
    with pytest.raises(RuntimeError, match="uint8_t without overflow"):
        x.fill_(-256)
    with pytest.raises(RuntimeError, match="int8 without overflow"):
        gt.tensor([200], dtype=gt.int8)
    with pytest.raises(RuntimeError, match="int8_t without overflow"):
        gt.tensor(S8).clamp(min=-129)


def test_an_integer_divided_by_a_zero_number_raises_at_the_call(conn):
    x = gt.tensor([7, -3])
    for op in (lambda: x // 0, lambda: x % 0, lambda: gt.fmod(x, 0), lambda: x // 256 * 0 + x % 0):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op()
    assert (gt.tensor([7.0]) // 0).tolist() == [float("inf")]  # floats divide by zero
    u = gt.tensor(U8)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _ = u // 256  # (256 is 0 in uint8)


def test_an_integer_divided_by_a_tensor_holding_zero_raises_on_numpy_workers(conn, cluster):
    from gt.runtime.control import request

    backend = request(cluster.address, "stats", timeout=10.0)["workers"][0]["backend"]
    x, zero_in = gt.tensor([7, -3]), gt.tensor([2, 0])
    if backend == "cupy":  # as PyTorch's CUDA kernels: no check (it would wait for the device)
        (x // zero_in).numpy()
        return
    for op in (lambda: x // zero_in, lambda: x % zero_in, lambda: gt.fmod(x, zero_in)):
        with pytest.raises(WorkerError, match="ZeroDivisionError"):
            op().numpy()
    assert (x // gt.tensor([2, -2])).tolist() == [3, 1]  # (and the connection goes on)


def test_subtraction_with_a_bool_operand_is_refused_as_in_pytorch(conn):
    b, i = gt.tensor([True, False]), gt.tensor([1, 2])
    for op in (lambda: b - 1, lambda: 1 - b, lambda: i - b, lambda: b - i, lambda: b - 0.5):
        with pytest.raises(DtypeError, match="with a bool tensor is not supported"):
            op()
    with pytest.raises(DtypeError, match="two bool tensors"):
        _ = b - b
    assert isinstance(DtypeError("x"), RuntimeError)


def test_alpha_of_bool_tensors_is_a_bool(conn):
    b = gt.tensor([True, False, False])
    c = gt.tensor([False, True, False])
    out = b.add(c, alpha=2)
    assert out.dtype == gt.bool
    assert out.tolist() == [True, True, False]


def test_fft_frequencies_are_multiplied_by_the_reciprocal_as_pytorch_rounds_them(conn):
    for n, d in ((7, 1.0), (100, 1 / 3)):
        step = np.float32(1.0 / (n * d))
        k = np.fft.fftfreq(n, 1.0 / n).astype(np.float32)  # the integers 0, 1, ..., -1
        np.testing.assert_array_equal(gt.fft.fftfreq(n, d).numpy(), k * step)
        kr = np.arange(n // 2 + 1, dtype=np.float32)
        np.testing.assert_array_equal(gt.fft.rfftfreq(n, d).numpy(), kr * step)
