"""What a probe of ``nn`` modules as objects against PyTorch 2.13 found on Dec 6 (4,031 cases),
as PyTorch behaves: every built-in layer has ``reset_parameters()``; ``nn.modules.<part>`` paths
and their private bases (``_BatchNorm``, ``_ConvNd``, ``_Loss`` ...); ``MultiheadAttention``'s
``out_proj`` is an ``nn.Linear``; the dropout layers share ``_DropoutNd`` (not ``Dropout``) and
``inplace=True`` changes the input. Every test runs on NumPy workers and on workers whose CuPy is
the test double."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt
from gt import nn

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_every_built_in_layer_draws_its_parameters_again(conn):
    layers = [
        nn.Linear(64, 32), nn.Conv2d(4, 8, 3), nn.ConvTranspose1d(4, 8, 3), nn.Bilinear(8, 3, 4),
        nn.LSTM(8, 16, 2), nn.GRUCell(8, 16), nn.Embedding(50, 8, padding_idx=1),
        nn.EmbeddingBag(50, 8),
    ]  # fmt: skip
    for layer in layers:
        before = [p.detach().clone() for p in layer.parameters()]
        layer.reset_parameters()
        after = list(layer.parameters())
        assert all(not gt.equal(b, a) for b, a in zip(before, after)), type(layer).__name__
    bound = 1 / 64**0.5
    lin = layers[0]
    assert lin.weight.abs().max().item() <= bound and lin.weight.abs().max().item() > bound / 2
    assert layers[6].weight[1].abs().sum().item() == 0  # (the padding row stays zero)
    with gt.no_grad():
        norms = [nn.BatchNorm1d(3), nn.LayerNorm(3), nn.GroupNorm(1, 3), nn.RMSNorm(3),
                 nn.InstanceNorm1d(3, affine=True, track_running_stats=True)]  # fmt: skip
        for m in norms:
            for p in m.parameters():
                p.fill_(5.0)
    norms[0].running_mean.fill_(2.0)
    for m in norms:
        m.reset_parameters()
        assert all(p.abs().sum().item() in (0.0, 3.0) for p in m.parameters())
    assert norms[0].running_mean.tolist() == [0.0] * 3
    prelu = nn.PReLU(init=0.1)
    with gt.no_grad():
        prelu.weight.fill_(3.0)
    prelu.reset_parameters()
    assert prelu.init == 0.1 and prelu.weight.item() == pytest.approx(0.1)
    assert nn.InstanceNorm1d(3).running_mean is None


def test_nn_modules_parts_and_their_private_bases(conn):
    from gt.nn.modules.conv import _ConvNd
    from gt.nn.modules.linear import Linear
    from gt.nn.modules.loss import _Loss

    assert isinstance(nn.BatchNorm2d(3), nn.modules.batchnorm._BatchNorm)
    assert isinstance(nn.InstanceNorm2d(3), nn.modules.batchnorm._NormBase)
    assert isinstance(nn.Conv2d(1, 1, 1), _ConvNd) and Linear is nn.Linear
    assert isinstance(nn.MSELoss(), _Loss) and nn.modules.rnn.RNNBase is nn.RNNBase
    with pytest.raises(AttributeError):
        nn.modules.batchnorm.NotALayer  # noqa: B018


def test_attention_out_proj_is_a_linear(conn):
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    linears = [n for n, m in layer.named_modules() if isinstance(m, nn.Linear)]
    assert linears == ["self_attn.out_proj", "linear1", "linear2"]
    assert repr(layer.self_attn.out_proj).startswith("NonDynamicallyQuantizableLinear(")


def test_dropout_layers_share_a_base_and_drop_in_place(conn):
    assert not isinstance(nn.Dropout2d(), nn.Dropout)
    assert isinstance(nn.Dropout2d(), nn.modules.dropout._DropoutNd)
    assert isinstance(nn.AlphaDropout(), nn.modules.dropout._DropoutNd)
    x = gt.ones(64, 8)
    out = nn.Dropout(0.5, inplace=True)(x)
    values = set(x.flatten().tolist())
    assert values == {0.0, 2.0} and out.tolist() == x.tolist()
    y = gt.ones(4, 6, 5)
    nn.Dropout1d(0.5, inplace=True)(y)
    assert set(y.flatten().tolist()) <= {0.0, 2.0} and len(set(y.flatten().tolist())) == 2


def test_class_relations_as_in_pytorch(conn):
    relu6 = nn.ReLU6()
    assert isinstance(relu6, nn.Hardtanh) and (relu6.min_val, relu6.max_val) == (0.0, 6.0)
    relu6.max_val = 1.0
    assert relu6(gt.tensor([0.5, 3.0])).tolist() == [0.5, 1.0]
    assert nn.ReLU6()(gt.tensor([-1, 9])).tolist() == [0, 6]
    assert isinstance(nn.ZeroPad2d(1), nn.ConstantPad2d) and nn.ZeroPad2d(1).value == 0.0
    for child, parent in ((nn.LogSoftmax(1), nn.Softmax), (nn.Softmin(1), nn.Softmax),
                          (nn.CELU(), nn.ELU), (nn.Softshrink(), nn.Hardshrink),
                          (nn.Fold(4, 2), nn.Unfold)):  # fmt: skip
        assert not isinstance(child, parent), type(child).__name__
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
    model.set_submodule("1.0", nn.Tanh())
    assert isinstance(model[1][0], nn.Tanh)
    table = nn.ModuleDict({"a": nn.ReLU()})
    table.clear()
    assert len(table) == 0


def test_a_deep_copied_module_has_no_gradients(conn):
    import copy

    layer = nn.Linear(2, 2)
    layer(gt.ones(1, 2)).sum().backward()
    assert layer.weight.grad is not None and copy.deepcopy(layer).weight.grad is None
    leaf = gt.ones(2, requires_grad=True)
    leaf.grad = gt.ones(2)
    assert copy.deepcopy(leaf).grad.tolist() == [1.0, 1.0]  # (a plain tensor keeps its own)
