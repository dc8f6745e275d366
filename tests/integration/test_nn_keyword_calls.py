"""``gt.nn`` modules called and built with PyTorch's keyword names give what positional calls give
(the names themselves are checked for every module in ``tests/unit/test_nn_signatures.py``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gt
import gt.nn as nn


def _same(a, b):
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_linear_conv_layernorm_embedding_take_input_by_keyword(conn):
    gt.manual_seed(0)
    x = gt.randn(2, 4)
    lin = nn.Linear(in_features=4, out_features=3, bias=True)
    _same(lin(input=x), lin(x))
    ln = nn.LayerNorm(normalized_shape=4, eps=1e-5, elementwise_affine=True)
    _same(ln(input=x), ln(x))
    img = gt.randn(1, 3, 5, 5)
    conv = nn.Conv2d(in_channels=3, out_channels=8, kernel_size=3, padding=1, bias=False)
    assert conv.bias is None
    out = conv(input=img)
    assert tuple(out.shape) == (1, 8, 5, 5)
    _same(out, conv(img))
    emb = nn.Embedding(num_embeddings=10, embedding_dim=3, padding_idx=0)
    idx = gt.tensor([[1, 0, 9]])
    _same(emb(input=idx), emb(idx))
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    _same(seq(input=x), seq(x))


def test_multihead_attention_and_losses_take_pytorch_keywords(conn):
    gt.manual_seed(0)
    mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)
    q = gt.randn(2, 3, 8)
    out, weights = mha(query=q, key=q, value=q, need_weights=False)
    assert weights is None
    _same(out, mha(q, q, q, need_weights=False)[0])
    logits, target = gt.randn(4, 5), gt.tensor([0, 1, 4, 2])
    ce = nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.1)
    _same(ce(input=logits, target=target), ce(logits, target))
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        nn.CrossEntropyLoss(label_smoothing=1.5)(logits, target)  # (PyTorch checks at the call)
    a, b, y = gt.randn(4), gt.randn(4), gt.tensor([1.0, -1.0, 1.0, -1.0])
    rank = nn.MarginRankingLoss(0.5, None, None, "sum")  # PyTorch's positional order
    assert rank.reduction == "sum"
    _same(rank(input1=a, input2=b, target=y), rank(a, b, y))


def test_pytorch_constructor_keywords(conn):
    bn = nn.BatchNorm1d(num_features=3, bias=False)
    assert bn.weight is not None and bn.bias is None
    assert "bias" not in dict(bn.named_parameters())
    x = gt.randn(4, 3)
    np.testing.assert_allclose(
        bn(input=x).detach().numpy(),
        nn.functional.batch_norm(x, None, None, bn.weight, None, True).detach().numpy(),
    )
    gn = nn.GroupNorm(num_groups=1, num_channels=4, bias=False)
    assert gn.bias is None and gn.weight is not None
    lazy = nn.LazyBatchNorm2d(bias=False)
    lazy(gt.randn(2, 3, 2, 2))
    assert type(lazy) is nn.BatchNorm2d and lazy.bias is None and tuple(lazy.weight.shape) == (3,)
    with pytest.warns(FutureWarning, match="min_value"):
        ht = nn.Hardtanh(min_value=-2.0)
    assert ht.min_val == -2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nn.Hardtanh(-0.5, 0.5).max_val == 0.5
    cell = nn.GRUCell(input_size=3, hidden_size=2, bias=False)
    assert tuple(cell.weight_ih.shape) == (6, 3) and cell.bias_ih is None
    assert tuple(nn.LSTMCell(3, 2).weight_hh.shape) == (8, 2)
    assert tuple(nn.RNNCell(3, 2, True, "relu").weight_ih.shape) == (2, 3)
    tconv = nn.ConvTranspose2d(2, 3, kernel_size=3, stride=2, output_padding=1)
    assert tconv.output_padding == (1, 1)
    assert tuple(tconv(input=gt.randn(1, 2, 4, 4)).shape) == (1, 3, 10, 10)
