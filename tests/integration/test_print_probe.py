"""What a probe of printing and Python conversions against PyTorch 2.13 found on Dec 6 (7,393
cases), as PyTorch behaves: a repr names the dtype unless it is the *current* default one,
``torch._tensor_str``'s print-option helpers, ``Size`` of NumPy integers and integer tensors,
numbers out of complex tensors with no imaginary part, complex type names, and devices that are not
equal to strings."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def float64_default():
    gt.set_default_dtype(gt.float64)
    try:
        yield
    finally:
        gt.set_default_dtype(gt.float32)


def test_a_repr_names_the_dtype_unless_it_is_the_default_one_now(conn, float64_default):
    assert repr(gt.tensor([1.5, 2.0])) == "tensor([1.5000, 2.0000])"
    assert repr(gt.tensor([1.5], dtype=gt.float32)) == "tensor([1.5000], dtype=gt.float32)"
    assert repr(gt.tensor([1j])) == "tensor([0.+1.j])"  # complex128, float64's partner
    assert repr(gt.tensor([1j], dtype=gt.complex64)) == "tensor([0.+1.j], dtype=gt.complex64)"
    assert repr(gt.empty(0)) == "tensor([])"
    assert repr(gt.empty(0, dtype=gt.float32)) == "tensor([], dtype=gt.float32)"


def test_print_options_from_the_private_module_programs_reach_into(conn):
    x = gt.tensor([1.23456])
    before = gt._tensor_str.get_printoptions()
    assert before["precision"] == 4 and before["sci_mode"] is None
    with gt._tensor_str.printoptions(precision=1, sci_mode=False):
        assert repr(x) == "tensor([1.2])"
        assert gt._tensor_str.PRINT_OPTS.precision == 1
    assert repr(x) == "tensor([1.2346])" and gt._tensor_str.get_printoptions() == before
    gt.set_printoptions(profile="no such profile")  # ignored, as PyTorch ignores it
    assert gt._tensor_str.get_printoptions() == before


def test_a_size_of_numpy_integers_and_integer_tensors_holds_ints(conn):
    s = gt.Size([np.int64(2), np.int32(3), gt.tensor(4), True])
    assert s == (2, 3, 4, 1) and all(type(d) is int for d in s)
    assert repr(s) == "gt.Size([2, 3, 4, 1])"
    for bad in (2.5, gt.tensor(2.0), "a"):
        with pytest.raises(TypeError, match="iterable of 'int'"):
            gt.Size([bad])


def test_numbers_of_complex_tensors_without_an_imaginary_part(conn):
    z = gt.tensor(3.5 + 0j)
    assert int(z) == 3 and float(z) == 3.5 and math.floor(z) == 3 and not math.isnan(z)
    assert float(gt.tensor([2 + 0j], dtype=gt.complex128)) == 2.0
    for conv in (int, float):
        with pytest.raises(RuntimeError, match="cannot be converted"):
            conv(gt.tensor(3 + 1j))


def test_complex_type_names(conn):
    assert gt.zeros(1, dtype=gt.complex64).type() == "gt.ComplexFloatTensor"
    assert gt.zeros(1, dtype=gt.complex128).type() == "gt.ComplexDoubleTensor"
    assert gt.zeros(1).type("torch.ComplexDoubleTensor").dtype == gt.complex128


def test_a_device_is_not_equal_to_a_string(conn):
    d = gt.zeros(1).device
    assert d == gt.device("cpu") and d.type == "cpu" and str(d) == "cpu"
    assert not d == "cpu" and d != "cpu" and "cpu" not in [d]
    assert gt.device("cuda:1") != "cuda:1"


def test_no_edge_items_prints_only_the_size(conn):
    gt.set_printoptions(edgeitems=0, threshold=5)
    try:
        assert repr(gt.arange(10.0)) == "tensor([...], size=(10,))"
        assert repr(gt.arange(40.0).reshape(8, 5)) == "tensor([...], size=(8, 5))"
        assert repr(gt.arange(3.0)) == "tensor([0., 1., 2.], size=(3,))"  # (PyTorch's too)
        gt.set_printoptions(edgeitems=1)
        assert repr(gt.arange(10.0)) == "tensor([0.,  ..., 9.])"  # (two spaces, as PyTorch)
    finally:
        gt.set_printoptions(profile="default")
