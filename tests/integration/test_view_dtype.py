"""``Tensor.view(dtype)`` (the bytes seen as another dtype, a view sharing the value both ways) and
``linspace``/``logspace`` of complex numbers.

Every expected value, shape, stride and message here is what PyTorch 2.13 (CPU) gives for the
same lines.
"""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.func_batching import RUNS

RNG = np.random.default_rng(11)


# ----------------------------------------------------------------------------- view(dtype)
@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("float32", "int32"),
        ("float32", "uint8"),
        ("int16", "float16"),
        ("float64", "int16"),
        ("uint8", "float32"),
        ("int8", "int64"),
        ("complex64", "float32"),
        ("float32", "complex64"),
        ("complex128", "int32"),
        ("uint8", "bool"),
        ("int32", "float32"),
    ],
)
def test_the_bits_are_numpys_view_and_the_last_dim_scales(conn, src, dst):
    raw = RNG.integers(0, 256, (3, 16), dtype=np.uint8)
    if dst == "bool":
        raw = raw % 2  # (PyTorch's bools are 0 or 1)
    base = raw.view(src)
    x = gt.tensor(base)
    y = x.view(getattr(gt, dst))
    want = base.view(dst)
    assert y.dtype == getattr(gt, dst) and tuple(y.shape) == want.shape
    got = y.numpy()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_float_bits(conn):
    x = gt.tensor([1.0, -2.0, 0.5, float("inf")])
    assert x.view(gt.int32).tolist() == [1065353216, -1073741824, 1056964608, 2139095040]
    assert gt.tensor([1.0, 2.0], dtype=gt.float16).view(gt.int16).tolist() == [15360, 16384]
    h = gt.tensor([15360, -16384], dtype=gt.int16).view(gt.float16)
    assert h.dtype == gt.float16 and h.tolist() == [1.0, -2.0]
    assert tuple(gt.zeros(2, 3).view(gt.uint8).shape) == (2, 12)
    assert tuple(gt.zeros(2, 4).view(gt.float64).shape) == (2, 2)
    assert tuple(gt.zeros(2, 3, 8, dtype=gt.int8).view(gt.int64).shape) == (2, 3, 1)
    assert tuple(gt.zeros(0).view(gt.float64).shape) == (0,)
    assert x.view(dtype=gt.int32).dtype == gt.int32  # (the keyword, as PyTorch's)
    same = x.view(gt.float32)
    assert same.dtype == gt.float32 and same.tolist() == x.tolist()


def test_views_of_other_layouts_get_pytorchs_shapes_and_strides(conn):
    x = gt.zeros(4, 6)
    v = x[:, 2:].view(gt.float64)
    assert tuple(v.shape) == (4, 2) and v.stride() == (3, 1) and v.storage_offset() == 1
    assert x.t().view(gt.int32).stride() == (1, 6)  # (the same size: any layout)
    f = gt.arange(5.0)
    b = f[1:].view(gt.uint8)
    assert tuple(b.shape) == (16,) and b.storage_offset() == 4 and b.stride() == (1,)
    p = gt.zeros(2, 3, 4).permute(1, 0, 2).view(gt.float64)
    assert tuple(p.shape) == (3, 2, 2) and p.stride() == (2, 6, 1)
    d = gt.zeros(4, 3, dtype=gt.float64)
    e = d[1:, 1:].view(gt.float32)
    assert tuple(e.shape) == (3, 4) and e.stride() == (6, 1) and e.storage_offset() == 8
    assert e.data_ptr() == d[1:, 1:].data_ptr()
    assert gt.zeros(5).expand(3, 5).view(gt.int16).stride() == (0, 1)


@pytest.mark.parametrize(
    ("make", "dtype", "message"),
    [
        (lambda: gt.zeros(2, 3), "float64",
         "self.size(-1) must be divisible by 2 to view Float as Double (different element sizes), but got 3"),
        (lambda: gt.zeros(2, 4).t(), "float64",
         "self.stride(-1) must be 1 to view Float as Double (different element sizes), but got 4"),
        (lambda: gt.zeros(2, 4).t(), "int16",
         "self.stride(-1) must be 1 to view Float as Short (different element sizes), but got 4"),
        (lambda: gt.zeros(3, 5)[:, 0:4], "float64",
         "self.stride(0) must be divisible by 2 to view Float as Double (different element sizes), but got 5"),
        (lambda: gt.zeros(4, 1).t(), "float64",
         "self.stride(0) must be divisible by 2 to view Float as Double (different element sizes), but got 1"),
        (lambda: gt.zeros(()), "int16",
         "self.dim() cannot be 0 to view Float as Short (different element sizes)"),
        (lambda: gt.zeros((), dtype=gt.float64), "float32",
         "self.dim() cannot be 0 to view Double as Float (different element sizes)"),
        (lambda: gt.zeros(2, 3, 4, dtype=gt.int8), "int64",
         "self.size(-1) must be divisible by 8 to view Char as Long (different element sizes), but got 4"),
        (lambda: gt.zeros(3, dtype=gt.complex64), "complex128",
         "self.size(-1) must be divisible by 2 to view ComplexFloat as ComplexDouble (different element sizes), but got 3"),
        (lambda: gt.zeros(4, 3, dtype=gt.float64)[:, 1], "float32",
         "self.stride(-1) must be 1 to view Double as Float (different element sizes), but got 3"),
    ],
)  # fmt: skip
def test_pytorchs_errors_for_different_element_sizes(conn, make, dtype, message):
    with pytest.raises(RuntimeError) as info:
        make().view(getattr(gt, dtype))
    assert str(info.value) == message


def test_a_storage_offset_that_is_not_a_whole_element(conn):
    x = gt.zeros(4, 4)
    with pytest.raises(RuntimeError) as info:
        x[:, 1:3].view(gt.float64)
    assert str(info.value) == ("self.storage_offset() must be divisible by 2 to view Float as "
                               "Double (different element sizes), but got 1")  # fmt: skip
    assert x[:, 2:4].view(gt.float64).shape == (4, 1)
    y = gt.zeros(9)
    with pytest.raises(RuntimeError, match=r"storage_offset\(\) must be divisible by 2"):
        y[1::2].view(gt.float64)  # (before the stride, as PyTorch checks)


def test_a_dtype_that_is_not_a_dtype_is_a_type_error(conn):
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        gt.zeros(4).view("int32")
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        gt.zeros(4).view(np.int32)


def test_writes_through_either_side_are_seen_by_the_other(conn):
    x = gt.arange(4, dtype=gt.float32)
    i = x.view(gt.int32)
    i[0] = 1065353216  # the bits of 1.0
    assert x.tolist() == [1.0, 1.0, 2.0, 3.0]
    x[1] = -2.0
    assert i.tolist() == [1065353216, -1073741824, 1073741824, 1077936128]
    x.add_(1)
    assert i.tolist() == [1073741824, -1082130432, 1077936128, 1082130432]
    i.bitwise_xor_(gt.tensor(-(2**31), dtype=gt.int32))  # flip the sign bits
    assert x.tolist() == [-2.0, 1.0, -3.0, -4.0]
    assert x._version == i._version == 4
    b = x.view(gt.uint8)
    assert tuple(b.shape) == (16,)
    b[3] = 0  # the high byte of x[0]
    assert x.tolist() == [0.0, 1.0, -3.0, -4.0]
    assert i.tolist()[0] == 0
    assert b._base is None and i._base is None  # (as PyTorch's: not differentiable views)
    assert b.data_ptr() == x.data_ptr() and b.untyped_storage() == x.untyped_storage()


def test_chains_of_views_through_a_dtype_write_into_the_root(conn):
    x = gt.zeros(2, 4)
    u = x.view(gt.uint8)
    u[0, :4] = gt.tensor([0, 0, 128, 63], dtype=gt.uint8)  # 1.0 in x[0, 0]
    assert x.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    x[1].view(gt.int32).fill_(1073741824)  # 2.0 in all of x[1], through a temporary
    assert x[1].tolist() == [2.0, 2.0, 2.0, 2.0]
    assert u[1].tolist()[:4] == [0, 0, 0, 64]
    w = x.t().view(gt.int32)[1]  # the same size: a transposed view's row is x's column
    w.zero_()
    assert x.tolist() == [[1.0, 0.0, 0.0, 0.0], [2.0, 0.0, 2.0, 2.0]]
    back = u.view(gt.float32)  # a view of a view, back to the root's dtype
    back.mul_(3)
    assert x.tolist() == [[3.0, 0.0, 0.0, 0.0], [6.0, 0.0, 6.0, 6.0]]
    assert u.view(gt.float32).tolist() == x.tolist()


def test_views_through_dtypes_are_outside_autograd(conn):
    w = gt.ones(4, requires_grad=True)
    wi = w.view(gt.int32)
    assert not wi.requires_grad and wi.grad_fn is None and wi.is_leaf
    assert not w.view(gt.float32).requires_grad  # (PyTorch's view.dtype is never differentiable)
    wi.zero_()  # a leaf that requires grad, written through the view: allowed, as in PyTorch
    assert w.tolist() == [0.0, 0.0, 0.0, 0.0] and w.requires_grad
    a = gt.ones(4, requires_grad=True)
    b = a * 3
    b.view(gt.int32).zero_()
    assert b.tolist() == [0.0, 0.0, 0.0, 0.0] and b.grad_fn is not None
    b.sum().backward()  # the write is not recorded: the gradient is MulBackward's
    assert a.grad.tolist() == [3.0, 3.0, 3.0, 3.0]


def test_the_fast_inverse_square_root(conn):
    x = gt.tensor([1.0, 4.0, 0.25, 2.0])
    i = x.view(gt.int32)
    y = (0x5F3759DF - (i >> 1)).view(gt.float32)
    y = y * (1.5 - 0.5 * x * y * y)  # one Newton step
    assert y.tolist() == [0.9983071684837341, 0.49915358424186707, 1.9966143369674683,
                          0.7069300413131714]  # fmt: skip
    np.testing.assert_allclose(y.numpy(), 1 / np.sqrt([1.0, 4.0, 0.25, 2.0]), rtol=2e-3)


def test_an_integer_key_that_sorts_as_the_floats_do(conn):
    f = gt.tensor([-2.5, -0.0, 0.0, 1.0, -1.0, 3.5])
    k = f.view(gt.int32)
    key = gt.where(k < 0, k ^ 0x7FFFFFFF, k)
    assert key.tolist() == [-1075838977, -1, 0, 1065353216, -1065353217, 1080033280]
    assert f[key.argsort()].tolist() == [-2.5, -1.0, -0.0, 0.0, 1.0, 3.5]


def test_vmap_of_a_dtype_view(conn):
    x = gt.tensor(RNG.standard_normal((5, 3, 4)).astype(np.float32))
    before = RUNS["batched"]
    got = gt.func.vmap(lambda t: t.view(gt.int16) & 1)(x)
    assert RUNS["batched"] == before + 1  # (run once on the batch, not per entry)
    assert got.dtype == gt.int16 and tuple(got.shape) == (5, 3, 8)
    assert np.array_equal(got.numpy(), x.numpy().view(np.int16) & 1)
    got = gt.func.vmap(lambda t: t.view(gt.int32), in_dims=1)(x)
    assert np.array_equal(got.numpy(), np.moveaxis(x.numpy(), 1, 0).view(np.int32))


# ----------------------------------------------------------------------------- complex ranges
def test_complex_linspace_is_pytorchs_to_the_bit(conn):
    z = gt.linspace(0.1 + 2j, -3.7 + 0.3j, 7)
    assert z.dtype == gt.complex64
    assert z.view(gt.int32).tolist() == [
        1036831949, 1073741824, -1089959800, 1071365052, -1080732331, 1068988280, -1075419545,
        1066611507, -1071924292, 1063116254, -1069267900, 1058362710, -1066611507, 1050253722,
    ]  # fmt: skip
    d = gt.linspace(0.1 + 2j, -3.7 + 0.3j, 7, dtype=gt.complex128)
    assert d.tolist() == [(0.1 + 2j), (-0.5333333333333334 + 1.7166666666666668j),
                          (-1.1666666666666667 + 1.4333333333333333j), (-1.7999999999999998 + 1.15j),
                          (-2.4333333333333336 + 0.8666666666666667j),
                          (-3.066666666666667 + 0.5833333333333333j), (-3.7 + 0.3j)]  # fmt: skip
    assert gt.linspace(0, 1 + 1j, 5).tolist() == [
        0j,
        0.25 + 0.25j,
        0.5 + 0.5j,
        0.75 + 0.75j,
        1 + 1j,
    ]
    assert gt.linspace(1j, 2, 5).tolist() == [1j, 0.5 + 0.75j, 1 + 0.5j, 1.5 + 0.25j, 2 + 0j]
    r = gt.linspace(0, 1, 5, dtype=gt.complex128)
    assert r.dtype == gt.complex128 and r.tolist() == [0j, 0.25 + 0j, 0.5 + 0j, 0.75 + 0j, 1 + 0j]
    assert gt.linspace(0, 1 + 2j, 1).tolist() == [0j]
    assert gt.linspace(0, 1 + 2j, 0).shape == (0,)
    assert gt.linspace(gt.tensor(0), 1 + 1j, 3).tolist() == [0j, 0.5 + 0.5j, 1 + 1j]
    assert gt.linspace(0, 1 + 1j, 3, requires_grad=True).requires_grad


def test_complex_logspace_is_pytorchs_to_the_bit(conn):
    z = gt.logspace(0.5j, 1 - 0.25j, 5, base=2)
    assert z.dtype == gt.complex64
    assert z.view(gt.int32).tolist() == [
        1064355678, 1051585065, 1066707285, 1048763326, 1068783389, 1039835609, 1071059272,
        -1114297679, 1073490558, -1095725289,
    ]  # fmt: skip
    d = gt.logspace(0.5j, 1 - 0.25j, 5, base=2, dtype=gt.complex128)
    assert d.tolist() == [(0.9405421046832438 + 0.3396771251026685j),
                          (1.1614176785088335 + 0.2555827428060173j),
                          (1.4089085763617757 + 0.1223790155796082j),
                          (1.6802149084967883 - 0.07283533490908917j),
                          (1.970046753091532 - 0.3448416892336428j)]  # fmt: skip
    one = gt.logspace(0.3 + 0.2j, 0, 1, dtype=gt.complex64)
    assert one.view(gt.int32).tolist() == [1071958419, 1063452645]
    c = gt.logspace(0, 1, 3, dtype=gt.complex64)
    np.testing.assert_array_equal(c.numpy(), np.array([1, 3.1622776985168457, 10], np.complex64))
    w = gt.logspace(0, 1 + 1j, 3)
    np.testing.assert_allclose(
        w.numpy(), [1 + 0j, 1.288018822669983 + 2.888080358505249j,
                    -6.682015419006348 + 7.439803123474121j], rtol=1e-7)  # fmt: skip


def test_complex_ends_with_a_real_dtype_raise_pytorchs_error(conn):
    with pytest.raises(RuntimeError) as info:
        gt.linspace(0, 1 + 2j, 5, dtype=gt.float32)
    assert str(info.value) == ("torch.linspace(): inferred dtype c10::complex<float> can't be "
                               "safely cast to passed dtype Float")  # fmt: skip
    with pytest.raises(RuntimeError) as info:
        gt.logspace(0, 1 + 1j, 3, dtype=gt.int64)
    assert str(info.value) == ("torch.logspace(): inferred dtype c10::complex<float> can't be "
                               "safely cast to passed dtype Long")  # fmt: skip


def test_complex_ranges_follow_the_default_dtype(conn):
    gt.set_default_dtype(gt.float64)
    try:
        assert gt.linspace(0, 1j, 3).dtype == gt.complex128
        assert gt.logspace(0, 1j, 3).dtype == gt.complex128
        with pytest.raises(RuntimeError, match=r"c10::complex<double> can't be safely cast"):
            gt.linspace(0, 1 + 2j, 5, dtype=gt.float32)
    finally:
        gt.set_default_dtype(gt.float32)
