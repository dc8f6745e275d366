"""Idioms of distillation and continual-learning code that GT got wrong: ``torch.func``'s results
(per-sample gradients from ``vmap(grad(f))``, an EWC Fisher) kept the graph the transform
recorded internally, so they required grad, printed a ``grad_fn`` and could not be
``deepcopy``-ed; and an f-string of a 0-dim tensor (``f"{fisher.max()}"``, ``f"loss {loss}"``)
gave its repr, where PyTorch formats the Python number."""

from __future__ import annotations

import copy

import pytest

import gt


def test_func_transform_results_need_no_grad_unless_something_outside_does(conn):
    fn = gt.func
    x = gt.tensor([0.1, 0.2, 0.3])
    g = fn.grad(lambda v: v.sin().sum())(x)
    assert not g.requires_grad and g.grad_fn is None
    copy.deepcopy(g)  # a graph leaf again (a non-leaf refuses the deepcopy protocol)
    per_sample = fn.vmap(fn.grad(lambda v: (v * v).sum()))(x[:, None].expand(3, 2))
    assert not per_sample.requires_grad
    g, value = fn.grad_and_value(lambda v: v.sin().sum())(x)
    assert not g.requires_grad and not value.requires_grad
    out, vjp_fn = fn.vjp(lambda v: v.sin(), x)
    assert not out.requires_grad and not vjp_fn(gt.ones(3))[0].requires_grad
    assert not any(t.requires_grad for t in fn.jvp(lambda v: v.sin(), (x,), (x,)))
    assert not fn.jacrev(lambda v: v.sin())(x).requires_grad
    assert not fn.hessian(lambda v: v.sin().sum())(x).requires_grad
    assert "grad_fn" not in repr(fn.grad(lambda v: v.sin().sum())(x))


def test_func_transform_results_stay_connected_to_what_requires_grad_outside(conn):
    fn = gt.func
    w = gt.tensor([0.5, 1.0, 2.0], requires_grad=True)
    x = gt.tensor([0.1, 0.2, 0.3])
    gx = fn.grad(lambda v: (w * v.sin()).sum())(x)  # w * cos(x), captured w
    assert gx.requires_grad
    (dw,) = gt.autograd.grad(gx.sum(), w)
    assert gt.allclose(dw, x.cos())
    xr = x.clone().requires_grad_()
    g = fn.grad(lambda v: (v**3).sum())(xr)  # 3 x^2: the input itself requires grad
    assert g.requires_grad
    assert gt.allclose(gt.autograd.grad(g.sum(), xr)[0], 6 * x)
    # nested transforms still see each other's graphs: d/dx of d/dx of x^3 = 6x
    assert gt.allclose(fn.grad(lambda v: fn.grad(lambda u: (u**3).sum())(v).sum())(x), 6 * x)


def test_a_zero_dim_tensor_formats_as_its_number_as_in_pytorch(conn):
    loss = gt.tensor(0.5)
    assert f"{loss}" == "0.5" and f"{loss:.3f}" == "0.500" and format(loss) == "0.5"
    assert f"{gt.tensor(7):03d}" == "007" and f"{gt.tensor(True)}" == "True"
    assert f"{gt.tensor(0.5, requires_grad=True) * 2}" == "1.0"
    assert f"{loss!r}" == "tensor(0.5000)"
    assert f"{gt.tensor([1.0, 2.0])}" == "tensor([1., 2.])"
    p = gt.nn.Parameter(gt.tensor(0.5))
    assert f"{p}".startswith("Parameter containing:")
    assert f"{p.data}" == "0.5"
    for bad in (gt.tensor([1.0]), p):
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{bad:.2f}"
