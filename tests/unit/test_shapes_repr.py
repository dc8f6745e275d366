"""Tensor repr in PyTorch's format (pure formatting of NumPy arrays; no cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from gt.ops.format import format_tensor


@pytest.mark.parametrize(
    "data,dtype,want",
    [
        ([[0.1234, -1.2345]], "float32", "tensor([[ 0.1234, -1.2345]])"),
        ([1.0, 2.0, 3.0], "float32", "tensor([1., 2., 3.])"),
        ([1e-5, 1.0], "float32", "tensor([1.0000e-05, 1.0000e+00])"),
        (3.5, "float32", "tensor(3.5000)"),
        (3.5, "float64", "tensor(3.5000, dtype=gt.float64)"),
        ([1, 2, 3], "int64", "tensor([1, 2, 3])"),
        ([1, -2], "int32", "tensor([ 1, -2], dtype=gt.int32)"),
        ([True, False], "bool", "tensor([ True, False])"),
        ([float("nan"), 1.5], "float32", "tensor([   nan, 1.5000])"),
        ([float("inf"), -2.0], "float32", "tensor([inf, -2.])"),
        ([0.0, 0.0], "float16", "tensor([0., 0.], dtype=gt.float16)"),
    ],
)
def test_repr_matches_pytorch_format(data, dtype, want):
    assert format_tensor(np.array(data, dtype=dtype), dtype) == want


def test_repr_of_matrix_aligns_rows_under_the_bracket():
    a = np.array([[1.5, -2.25], [10.0, 0.125]], dtype=np.float32)
    assert (
        format_tensor(a, "float32") == "tensor([[ 1.5000, -2.2500],\n        [10.0000,  0.1250]])"
    )


def test_repr_of_empty_tensors_shows_size_and_non_float_dtype():
    assert format_tensor(np.zeros(0, np.float32), "float32") == "tensor([])"
    assert format_tensor(np.zeros((2, 0), np.float32), "float32") == "tensor([], size=(2, 0))"
    assert format_tensor(np.zeros(0, np.int64), "int64") == "tensor([], dtype=gt.int64)"


def test_repr_summarizes_large_tensors_with_ellipsis():
    text = format_tensor(np.arange(2000, dtype=np.float32), "float32")
    # PyTorch's own output (the range of magnitudes, 1 to 1999 with a 0, is scientific there too)
    assert text == (
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03])"
    )


def test_repr_appends_autograd_suffixes():
    text = format_tensor(np.array([1.0], np.float32), "float32", ["grad_fn=<AddBackward0>"])
    assert text == "tensor([1.], grad_fn=<AddBackward0>)"


def test_repr_wraps_suffixes_where_pytorch_does_measuring_dtype_as_torch_spells_it():
    # PyTorch: "tensor([ 1.3542,  1.0178, -0.4402], dtype=torch.float64," then the grad_fn on the
    # next line (the dtype suffix is 3 columns wider there than "dtype=gt.float64")
    a = np.array([1.3542, 1.0178, -0.4402])
    text = format_tensor(a, "float64", ["grad_fn=<StackBackward0>"])
    assert text == (
        "tensor([ 1.3542,  1.0178, -0.4402], dtype=gt.float64,\n       grad_fn=<StackBackward0>)"
    )
    short = format_tensor(a[:2], "float64", ["grad_fn=<StackBackward0>"])
    assert short == "tensor([1.3542, 1.0178], dtype=gt.float64, grad_fn=<StackBackward0>)"


def test_repr_wraps_long_rows_at_80_columns():
    text = format_tensor(np.arange(30, dtype=np.float32) / 7, "float32")
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.count("\n") >= 2


def test_repr_pads_to_the_finite_values_only_like_pytorch():
    assert format_tensor(np.array([np.nan, np.inf, 1.0], np.float32), "float32") == (
        "tensor([nan, inf, 1.])"
    )
    assert format_tensor(np.array([np.nan, -np.inf, 1.5], np.float32), "float32") == (
        "tensor([   nan,   -inf, 1.5000])"
    )


def test_complex_values_print_as_pytorch_prints_them():
    # (checked against PyTorch 2.13: each part formatted on its own, the imaginary one with its sign)
    assert format_tensor(np.array([1 + 2j, 3 - 1j], np.complex64), "complex64") == (
        "tensor([1.+2.j, 3.-1.j])"
    )
    assert format_tensor(
        np.array([0.5 + 1.25j, -3.125 - 1e-3j, 7j], np.complex64), "complex64"
    ) == ("tensor([ 0.5000+1.2500e+00j, -3.1250-1.0000e-03j,  0.0000+7.0000e+00j])")
    assert format_tensor(np.array(2.5 - 1j), "complex128") == (
        "tensor(2.5000-1.j, dtype=gt.complex128)"
    )
