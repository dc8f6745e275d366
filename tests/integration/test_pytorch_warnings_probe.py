"""Warnings PyTorch gives that GT did not (the second Dec 7 probe): reading the ``.grad`` of a
computed tensor, a full backward hook firing with no module input requiring grad, and attention
masks of mismatched types. Each is checked where PyTorch 2.13 warns and where it stays silent;
the messages are PyTorch's."""

from __future__ import annotations

import re
import warnings

import pytest

import gt

pytestmark = pytest.mark.timeout(120)

NON_LEAF = re.escape(
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward()."
)


def test_reading_the_grad_of_a_computed_tensor_warns_as_pytorch_does(conn):
    x = gt.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match=NON_LEAF) as record:
        assert (x * 2).grad is None
    assert record[0].filename == __file__  # (the line that read it, as PyTorch's)
    kept = x * 3
    kept.retain_grad()
    asked = x * 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is None and kept.grad is None  # a leaf; a tensor that retains its grad
        assert (gt.ones(2) * 2).grad is None  # no grad required: a leaf, as in PyTorch
        with gt.no_grad():
            assert (x * 2).grad is None
        (kept * asked).sum().backward(inputs=[asked])  # (a computed tensor given a .grad)
        assert asked.grad.tolist() == [3.0, 3.0]
