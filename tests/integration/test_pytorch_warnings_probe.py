"""Warnings PyTorch gives that GT did not (the second Dec 7 probe): reading the ``.grad`` of a
computed tensor, a full backward hook firing with no module input requiring grad, and attention
masks of mismatched types. Each is checked where PyTorch 2.13 warns and where it stays silent;
the messages are PyTorch's."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import gt
from gt import nn

pytestmark = pytest.mark.timeout(120)

NON_LEAF = re.escape(
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward()."
)
NO_INPUT_GRAD = re.escape(
    "Full backward hook is firing when gradients are computed with respect to module outputs "
    "since no inputs require gradients."
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


def _hooked_linear() -> nn.Linear:
    lin = nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda *a: None)
    return lin


def test_a_full_backward_hook_warns_when_no_module_input_requires_grad(conn):
    lin = _hooked_linear()
    with pytest.warns(UserWarning, match=NO_INPUT_GRAD) as record:
        lin(gt.ones(1, 2)).sum().backward()
    assert record[0].filename == __file__  # (the program's backward(), as PyTorch's)
    assert lin.weight.grad is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lin(gt.ones(1, 2, requires_grad=True)).sum().backward()
        lin(gt.ones(1, 2))  # (no backward: the hook never fires)
        pre = nn.Linear(2, 2)  # pre-hooks alone, and an input that requires grad
        pre.register_full_backward_pre_hook(lambda *a: None)
        pre(gt.ones(1, 2, requires_grad=True)).sum().backward()


def _mismatched(mask_name: str, other_name: str) -> str:
    return re.escape(
        f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for "
        "both instead."
    )


def test_mismatched_attention_masks_warn_once_under_the_outermost_modules_names(conn):
    gt.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    src = gt.randn(1, 3, 4)
    causal = nn.Transformer.generate_square_subsequent_mask(3)  # float: 0 and -inf
    pad = gt.tensor([[False, False, True]])
    float_pad = gt.zeros(1, 3).masked_fill(pad, float("-inf"))
    with pytest.warns(UserWarning, match=_mismatched("src_key_padding_mask", "mask")) as record:
        out = enc(src, mask=causal, src_key_padding_mask=pad)
    assert len(record) == 1  # (the layers and their attention get float masks: no more)
    with pytest.warns(UserWarning, match=_mismatched("src_key_padding_mask", "src_mask")):
        layer(src, src_mask=causal, src_key_padding_mask=pad)
    mha = layer.self_attn
    with pytest.warns(UserWarning, match=_mismatched("key_padding_mask", "attn_mask")):
        mha(src, src, src, attn_mask=causal, key_padding_mask=pad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = enc(src, mask=causal, src_key_padding_mask=float_pad)
        enc(src, mask=causal < 0, src_key_padding_mask=pad)
        enc(src, mask=causal)
    np.testing.assert_allclose(out.detach().numpy(), same.detach().numpy(), rtol=1e-6)
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask"):
        mha(src, src, src, attn_mask=gt.zeros(3, 3, dtype=gt.int64))
