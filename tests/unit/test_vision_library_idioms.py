"""Idioms of timm, torchvision and kornia that GT once got wrong: ``detach()`` sharing in-place
changes (timm's adaptive gradient clipping writes ``p.grad.detach().copy_(...)``), the keyword
forms of ``_foreach_*`` (``ModelEmaV3``'s ``_foreach_mul_(ts, scalar=d)``) and the strides of
channels-last models (convolution and batch-norm results, ``.grad``, ``deepcopy``)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import gt

CL = gt.channels_last


# ----------------------------------------------------------------------------- detach
def test_in_place_changes_through_detach_reach_the_grad_it_came_from(conn):
    p = gt.nn.Parameter(gt.ones(3))
    (p * 2).sum().backward()
    p.grad.detach().copy_(gt.tensor([5.0, 6.0, 7.0]))
    assert p.grad.tolist() == [5.0, 6.0, 7.0]
    g = p.grad
    g.detach().mul_(2)
    assert p.grad is g and g.tolist() == [10.0, 12.0, 14.0]


def test_detach_of_a_leaf_that_requires_grad_changes_it_outside_autograd(conn):
    w = gt.nn.Parameter(gt.ones(3))
    w.detach().mul_(3)  # allowed in grad mode, as in PyTorch
    assert w.tolist() == [3.0, 3.0, 3.0] and w.requires_grad and w.is_leaf
    y = (w * w).sum()
    w.detach().add_(1)  # w was saved for backward: its version counts the change
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_detach_of_a_temporary_view_writes_into_the_viewed_tensor(conn):
    x = gt.ones(2, 3)
    x[0].detach().zero_()
    x[:, 2].detach().fill_(7.0)
    np.testing.assert_array_equal(x.numpy(), [[0.0, 0.0, 7.0], [1.0, 1.0, 7.0]])


def test_copies_made_from_a_tensor_do_not_write_back(conn):
    x = gt.ones(2)
    gt.tensor(x).add_(5)
    x.clone().add_(5)
    x.detach().clone().add_(5)
    assert x.tolist() == [1.0, 1.0]
    y = x.detach()  # not a copy: it follows x, and x it (PyTorch 2.13 gives the same)
    x.add_(1)
    y.mul_(10)
    assert x.tolist() == [20.0, 20.0] and y.tolist() == [20.0, 20.0]


# ----------------------------------------------------------------------------- _foreach
def test_foreach_takes_pytorchs_keyword_operands(conn):
    a = [gt.ones(2), gt.ones(3)]
    gt._foreach_mul_(a, scalar=2.0)
    gt._foreach_mul_(a, scalars=[2.0, 3.0])
    gt._foreach_add_(a, other=[gt.ones(2), gt.ones(3)], alpha=0.5)
    gt._foreach_addcmul_(a, a, a, scalars=[1.0, 2.0])
    assert [t.tolist() for t in a] == [[24.75, 24.75], [91.0, 91.0, 91.0]]
    assert gt._foreach_pow([gt.tensor([3.0])], exponent=2.0)[0].tolist() == [9.0]
    assert gt._foreach_sub([gt.tensor([3.0])], other=gt.tensor(1.0))[0].tolist() == [2.0]
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        gt._foreach_mul_(a, bogus=2.0)
    with pytest.raises(TypeError, match="one second operand"):
        gt._foreach_mul_(a, 2.0, scalar=2.0)


# ----------------------------------------------------------------------------- channels_last
def test_channels_last_inputs_give_channels_last_conv_and_batch_norm_results(conn):
    x = gt.randn(2, 3, 5, 5)
    xc = x.contiguous(memory_format=CL)
    conv = gt.nn.Conv2d(3, 4, 3)
    assert not conv(x).is_contiguous(memory_format=CL) and conv(x).is_contiguous()
    out = conv(xc)
    assert out.is_contiguous(memory_format=CL) and out.stride() == (36, 1, 12, 4)
    np.testing.assert_allclose(out.detach().numpy(), conv(x).detach().numpy(), rtol=1e-6)
    bn = gt.nn.BatchNorm2d(4)
    assert bn(out).is_contiguous(memory_format=CL) and bn(conv(x)).is_contiguous()
    conv.to(memory_format=CL)  # a channels-last weight is enough
    assert conv(x).is_contiguous(memory_format=CL)
    up = gt.nn.ConvTranspose2d(3, 2, 2, stride=2)
    assert up(xc).is_contiguous(memory_format=CL) and up(x).is_contiguous()
    x3 = gt.randn(1, 2, 3, 3, 3).contiguous(memory_format=gt.channels_last_3d)
    assert gt.nn.Conv3d(2, 2, 1)(x3).is_contiguous(memory_format=gt.channels_last_3d)


def test_grad_of_a_parameter_takes_the_parameters_strides(conn):
    conv = gt.nn.Conv2d(3, 4, 3).to(memory_format=CL)
    conv(gt.randn(2, 3, 5, 5)).sum().backward()
    assert conv.weight.grad.stride() == conv.weight.stride() == (27, 1, 9, 3)
    conv(gt.randn(2, 3, 5, 5)).sum().backward()  # accumulated in place: the same strides
    assert conv.weight.grad.stride() == (27, 1, 9, 3)
    w = gt.randn(3, 4, requires_grad=True)
    (w.t() * gt.randn(4, 3)).sum().backward()  # computed through a transpose: still row-major
    assert w.grad.stride() == (4, 1) and w.grad.is_contiguous()
    e = gt.randn(1, 4).expand(3, 4).detach().requires_grad_()  # not dense: row-major grad
    (e * 2).sum().backward()
    assert e.grad.stride() == (4, 1)


def test_deepcopy_keeps_channels_last_strides(conn):
    model = gt.nn.Sequential(gt.nn.Conv2d(3, 4, 3), gt.nn.Linear(4, 2)).to(memory_format=CL)
    twin = copy.deepcopy(model)
    assert twin[0].weight.is_contiguous(memory_format=CL)
    assert twin[0].weight.stride() == model[0].weight.stride() == (27, 1, 9, 3)
    assert twin[1].weight.stride() == (4, 1)
    np.testing.assert_array_equal(twin[0].weight.detach().numpy(), model[0].weight.detach().numpy())
