"""Client-side shape and dtype inference, checked against NumPy's own rules (no cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from gt import shapes as S
from gt.errors import ShapeError


@pytest.mark.parametrize(
    "a,b",
    [
        ((2, 3), (3,)),
        ((4, 1, 3), (2, 1)),
        ((), (5,)),
        ((0, 3), (1, 3)),
        ((1,), (7, 1, 1)),
        ((3,), (3,)),
    ],
)
def test_broadcast_matches_numpy(a, b):
    assert S.broadcast(a, b) == np.broadcast_shapes(a, b)


def test_broadcast_mismatch_names_op_and_shapes():
    with pytest.raises(ShapeError, match=r"add: .*\(3\).*\(4\).*\[2, 3\] and \[4\]"):
        S.broadcast((2, 3), (4,), "add")


@pytest.mark.parametrize(
    "a,b",
    [
        ((2, 3), (3, 4)),
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((3,), (3,)),
        ((5, 2, 3), (3, 4)),
        ((2, 1, 2, 3), (4, 3, 5)),
    ],
)
def test_matmul_shape_matches_numpy(a, b):
    assert S.matmul(a, b) == np.matmul(np.zeros(a), np.zeros(b)).shape


@pytest.mark.parametrize("a,b", [((2, 3), (4, 5)), ((), (3,)), ((2, 2, 3), (3, 3, 1))])
def test_matmul_mismatch_raises_shape_error(a, b):
    with pytest.raises(ShapeError, match="matmul"):
        S.matmul(a, b)


@pytest.mark.parametrize(
    "axes,keep", [(None, False), (None, True), ((0,), False), ((1, 2), True), ((2,), False)]
)
def test_reduce_shape_matches_numpy(axes, keep):
    x = np.zeros((2, 3, 4))
    assert S.reduce(x.shape, axes, keep) == x.sum(axis=axes, keepdims=keep).shape


def test_normalize_axes_handles_negative_and_rejects_repeats():
    assert S.normalize_axes((-1, 0), 3) == (0, 2)
    assert S.normalize_axes(None, 3) is None
    with pytest.raises(ShapeError, match="repeated"):
        S.normalize_axes((1, -2), 3, "sum")
    with pytest.raises(
        IndexError,
        match=r"sum: dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)",
    ):
        S.normalize_axes(3, 3, "sum")


@pytest.mark.parametrize("new", [(6,), (-1,), (3, -1), (1, 2, 3), (6, 1)])
def test_reshape_infers_minus_one(new):
    assert S.reshape((2, 3), new) == np.zeros((2, 3)).reshape(new).shape


@pytest.mark.parametrize("new", [(4,), (5, -1), (0, -1)])
def test_reshape_rejects_wrong_sizes(new):
    with pytest.raises(
        ShapeError, match=r"reshape: shape .* is invalid for input of size 6 \(shape \[2, 3\]\)"
    ):
        S.reshape((2, 3), new)


def test_reshape_rejects_two_inferred_dimensions():
    with pytest.raises(ShapeError, match=r"reshape: only one dimension can be inferred .*\[2, 3\]"):
        S.reshape((2, 3), (-1, -1))


def test_expand_keeps_minus_one_and_stretches_singletons():
    assert S.expand((3, 1), (2, -1, 4)) == (2, 3, 4)
    with pytest.raises(ShapeError, match="expand"):
        S.expand((3, 2), (3, 4))
    with pytest.raises(ShapeError, match="expand"):
        S.expand((3,), (-1, 3))


def test_concat_shape_and_mismatch_message():
    assert S.concat([(2, 3), (4, 3)], 0) == (6, 3)
    with pytest.raises(ShapeError, match="Expected size 3 but got size 4 for tensor number 1"):
        S.concat([(2, 3), (2, 4)], 0)
    with pytest.raises(ShapeError, match="same number of dimensions"):
        S.concat([(2, 3), (2,)], 0)


@pytest.mark.parametrize(
    "key",
    [
        (1,),
        (slice(None, None, 2),),
        (None, Ellipsis, 0),
        (np.array([0, 2, 2]),),
        (slice(5, 1),),
        (Ellipsis, -1),
    ],
)
def test_index_shape_matches_numpy(key):
    x = np.zeros((3, 4, 5))
    assert S.index_shape(x.shape, key) == x[key].shape


def test_index_shape_out_of_range_names_op_and_shape():
    with pytest.raises(IndexError, match=r"getitem: .*out of bounds.*\[3, 4\]"):
        S.index_shape((3, 4), (5,))
    with pytest.raises(IndexError, match="too many indices"):
        S.index_shape((3,), (0, 0))


def _random_large_key(rng, ndim):
    """A key of slices, None, an Ellipsis and integer arrays, some of them large."""
    key, dim, ellipsis = [], 0, False
    while dim < ndim:
        r = rng.random()
        if r < 0.15:
            key.append(None)
            continue
        if r < 0.25 and not ellipsis:
            key.append(Ellipsis)
            ellipsis = True
            dim += int(rng.integers(0, ndim - dim + 1))  # (what it will stand for)
            continue
        if r < 0.55:
            key.append(slice(int(rng.integers(-3, 3)), None, int(rng.choice([1, 2, -1]))))
        else:
            shape = tuple(int(n) for n in rng.choice([1, 3, 70], rng.integers(1, 4)))
            key.append(np.broadcast_to(rng.integers(-2, 2, shape[-1:]), shape))
        dim += 1
    return tuple(key)


def test_index_shape_of_large_index_arrays_follows_numpys_rules():
    rng = np.random.default_rng(12)
    ruled = 0
    for _ in range(600):
        shape = tuple(int(n) for n in rng.integers(2, 6, rng.integers(1, 5)))
        key = _random_large_key(rng, len(shape))
        x = np.zeros(shape, dtype=np.int8)
        try:
            want = x[key].shape
        except (IndexError, ValueError) as exc:
            with pytest.raises(IndexError, match=str(exc)[:20].replace("(", ".")):
                S.index_shape(shape, key)
            continue
        ruled += sum(k.size for k in key if isinstance(k, np.ndarray)) > S.LARGE_INDEX
        assert S.index_shape(shape, key) == want, key
    assert ruled > 50  # (the rules, not NumPy, answered for many of them)


def test_a_large_index_out_of_range_is_refused_as_numpy_refuses_it():
    idx = np.zeros((100, 100), dtype=np.int64)
    idx[40, 7] = 3
    with pytest.raises(
        IndexError, match=r"getitem: index 3 is out of bounds for axis 1 with size 3"
    ):
        S.index_shape((5, 3), (slice(None), idx))
    assert S.index_shape((5, 3), (slice(None), S.index_stand_in((100, 100)))) == (5, 100, 100)


@pytest.mark.parametrize(
    "a,b,want",
    [
        ("float32", "float64", "float64"),
        ("int64", "float16", "float16"),
        ("bool", "int32", "int32"),
        ("int32", "int64", "int64"),
        ("uint8", "int8", "int16"),  # (PyTorch: neither holds the other)
        ("int16", "uint8", "int16"),
        ("int16", "int32", "int32"),
        ("complex64", "float32", "complex64"),
        ("complex64", "float64", "complex128"),  # (its parts must hold a double)
        ("complex128", "float16", "complex128"),
        ("complex64", "int64", "complex64"),
    ],
)
def test_promote_follows_pytorch_categories(a, b, want):
    assert S.promote(a, b) == want == S.promote(b, a)


def test_zero_dim_tensors_only_promote_across_categories():
    assert S.promote_operands("float32", 1, "float64", 0) == "float32"
    assert S.promote_operands("int64", 2, "float64", 0) == "float64"
    assert S.promote_operands("float16", 0, "float64", 0) == "float64"
    # a complex 0-d tensor next to an n-d float one: the complex of the float (torch 2.13)
    assert S.promote_operands("float32", 1, "complex128", 0) == "complex64"
    assert S.promote_operands("int64", 1, "complex128", 0) == "complex128"
    assert S.promote_operands("float64", 1, "complex64", 0) == "complex128"
    assert S.promote_operands("complex64", 1, "complex128", 0) == "complex64"


@pytest.mark.parametrize(
    "dtype,value,want",
    [
        ("int64", 2.5, "float32"),
        ("int32", 3, "int32"),
        ("bool", 1, "int64"),
        ("float16", 3.0, "float16"),
        ("bool", True, "bool"),
        ("float32", 1j, "complex64"),
        ("float64", 1j, "complex128"),
        ("int64", 2 + 0j, "complex64"),
        ("complex64", 2.5, "complex64"),
    ],
)
def test_python_scalars_only_move_the_category_up(dtype, value, want):
    assert S.promote_scalar(dtype, value) == want


def test_canonical_dtype_accepts_aliases_and_rejects_unknown():
    assert S.canonical_dtype("double") == "float64"
    assert S.canonical_dtype(np.int32) == "int32"
    assert S.canonical_dtype(None) == "float32"
    assert S.canonical_dtype("cfloat") == "complex64" == S.canonical_dtype(np.complex64)
    assert S.canonical_dtype("cdouble") == "complex128"
    with pytest.raises(TypeError, match="unsupported dtype"):
        S.canonical_dtype("complex32")


@pytest.mark.parametrize(
    ("value", "dtype", "want"),
    [(300, "uint8", 44), (-1, "uint8", 255), (200, "int8", -56), (-129, "int8", 127),
     (2**63, "int64", -(2**63)), (2**64 - 1, "int64", -1), (2654435761, "int32", -1640531535),
     (70000, "int16", 4464), (5, "uint64", 5), (-1, "uint64", 2**64 - 1)],
)  # fmt: skip
def test_wrap_int_casts_a_python_int_as_c_does(value, dtype, want):
    assert S.wrap_int(value, dtype) == want
    assert S.wrap_int(value, dtype) == np.array(value % 2**64, np.uint64).astype(dtype).item()


def test_fill_int_takes_what_fits_and_negatives_of_unsigned_dtypes_only():
    assert S.fill_int(-255, "uint8") == 1 and S.fill_int(255, "uint8") == 255
    assert S.fill_int(-128, "int8") == -128 and S.fill_int(2**31 - 1, "int32") == 2**31 - 1
    for value, dtype, name in ((256, "uint8", "uint8_t"), (-256, "uint8", "uint8_t"),
                               (128, "int8", "int8_t"), (2**31, "int32", "int"),
                               (2**63, "int64", "int64_t")):  # fmt: skip
        with pytest.raises(RuntimeError, match=f"to type {name} without overflow"):
            S.fill_int(value, dtype)
    with pytest.raises(RuntimeError, match="to type uint8 without"):
        S.fill_int(300, "uint8", type_name="uint8")
    with pytest.raises(RuntimeError, match="int too big"):
        S.wrap_int(2**64, "int64")
    with pytest.raises(RuntimeError, match="negative int"):
        S.wrap_int(-(2**63) - 1, "int64")
