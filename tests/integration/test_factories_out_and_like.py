"""Factories with PyTorch's ``out=`` (the result written into a given tensor, whose dtype it
takes) and the ``*_like`` factories' strides (``memory_format``: preserved by default)."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_eye_out_fills_a_buffer_of_another_shape_in_place(conn):
    buf = gt.zeros(2, dtype=gt.float64)
    got = gt.eye(3, out=buf)
    assert got is buf
    assert buf.shape == (3, 3) and buf.dtype == gt.float64
    np.testing.assert_array_equal(buf.numpy(), np.eye(3))
    g = gt.ones(4, 5)
    precond = 0.5 * gt.eye(5, out=g.new(5, 5))  # Shampoo's initial preconditioner
    np.testing.assert_allclose(precond.numpy(), 0.5 * np.eye(5))


@pytest.mark.parametrize(
    "make, want",
    [
        (lambda out: gt.zeros(2, 3, out=out), np.zeros((2, 3))),
        (lambda out: gt.ones((2, 3), out=out), np.ones((2, 3))),
        (lambda out: gt.full((2,), 7, out=out), np.full((2,), 7)),
        (lambda out: gt.arange(5, out=out), np.arange(5)),
        (lambda out: gt.linspace(0, 1, 3, out=out), np.linspace(0, 1, 3)),
        (lambda out: gt.eye(2, 3, out=out), np.eye(2, 3)),
    ],
)
def test_factories_write_into_out_with_its_dtype(conn, make, want):
    out = gt.empty(1, dtype=gt.float64)
    assert make(out) is out
    assert out.dtype == gt.float64
    np.testing.assert_array_equal(out.numpy(), want)


def test_random_factories_take_out(conn):
    out = gt.empty(0, dtype=gt.int32)
    gt.randperm(6, out=out)
    assert out.dtype == gt.int32 and sorted(out.tolist()) == list(range(6))
    gt.randint(3, (4,), out=out)
    assert out.shape == (4,) and set(out.tolist()) <= {0, 1, 2}
    f = gt.empty(0, dtype=gt.float64)
    gt.rand(2, 2, out=f)
    assert f.shape == (2, 2) and f.dtype == gt.float64
    gt.randn(3, out=f)
    assert f.shape == (3,)


def test_out_into_a_tensor_that_requires_grad_raises(conn):
    p = gt.zeros(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="out="):
        gt.eye(3, out=p)


@pytest.mark.parametrize("like", [gt.zeros_like, gt.ones_like, gt.empty_like, gt.rand_like])
def test_like_factories_take_memory_format_and_preserve_dense_strides(conn, like):
    x = gt.zeros(2, 3, 4, 5).contiguous(memory_format=gt.channels_last)
    assert like(x, memory_format=gt.preserve_format).stride() == x.stride()
    assert like(x).stride() == x.stride()  # preserve_format is the default
    assert like(x, memory_format=gt.contiguous_format).stride() == (60, 20, 5, 1)
    t = gt.zeros(3, 4).t()
    assert like(t).stride() == (1, 4)
    assert like(gt.zeros(4, 1).expand(4, 3)).stride() == (3, 1)  # not dense: row-major


def test_full_like_keeps_the_layout_and_its_values(conn):
    x = gt.ones(1, 2, 2, 3).contiguous(memory_format=gt.channels_last)
    y = gt.full_like(x, 2.5, memory_format=gt.preserve_format)
    assert y.stride() == x.stride()
    np.testing.assert_array_equal(y.numpy(), np.full((1, 2, 2, 3), 2.5, np.float32))


def test_randint_like_takes_the_dtype_of_its_input_as_pytorchs(conn):
    # (torch 2.13: float32 -> float32, int32 -> int32, bool -> bool; dtype= wins)
    for dt in (gt.float32, gt.int32, gt.bool):
        r = gt.randint_like(gt.zeros(8, dtype=dt), 0, 2)
        assert r.dtype == dt and set(r.tolist()) <= {0, 1}
    assert gt.randint_like(gt.zeros(3), 5, dtype=gt.int16).dtype == gt.int16
