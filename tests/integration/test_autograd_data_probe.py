"""What a probe of the autograd API and ``utils.data`` against PyTorch 2.13 found on Dec 6 (902
cases), as PyTorch behaves: a loader's batch of consecutive rows is a new tensor (it was a view of
the dataset, so changing a batch in place changed the dataset) and an index past the end raises;
a leaf's hook runs once on its summed gradient (it ran once per use); ``@no_grad()`` on a
generator applies inside it; ``retain_grad()`` holds under ``autograd.grad``; the Jacobian of an
output that does not depend on the input is zeros. Every test runs on NumPy workers and on
workers whose CuPy is the test double."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt
from gt.utils.data import DataLoader, TensorDataset

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_a_loader_batch_is_a_new_tensor(conn):
    x = gt.arange(8.0).reshape(4, 2)
    for xb, _ in DataLoader(TensorDataset(x, gt.zeros(4)), batch_size=3):
        xb.mul_(0)
    assert x.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    rows = gt.arange(20.0).reshape(10, 2)
    with pytest.raises(IndexError):
        [b[0].tolist() for b in DataLoader(TensorDataset(rows), batch_sampler=[[8, 9, 10]])]


def test_a_leaf_hook_runs_once_on_the_summed_gradient(conn):
    w = gt.tensor([1.0, -2.0], requires_grad=True)
    calls = []

    def clamp(g):
        calls.append(g.tolist())
        return g.clamp(-0.5, 0.5)

    w.register_hook(clamp)
    h = gt.zeros(2)
    for _ in range(3):
        h = h + w * 0.4
    h.sum().backward()
    assert len(calls) == 1 and calls[0] == pytest.approx([1.2, 1.2])
    assert w.grad.tolist() == [0.5, 0.5]
    (x,) = gt.autograd.grad((w * 3).sum() + (w * 2).sum(), [w])
    assert x.tolist() == [0.5, 0.5] and len(calls) == 2  # (autograd.grad too)


def test_no_grad_on_a_generator_applies_inside_it(conn):
    w = gt.ones(3, requires_grad=True)

    @gt.no_grad()
    def generate(n):
        z = gt.zeros(3)
        for _ in range(n):
            z = z + w
            yield z

    assert [o.requires_grad for o in generate(2)] == [False, False]
    assert gt.is_grad_enabled()


def test_retain_grad_under_autograd_grad_and_independent_jacobians(conn):
    x = gt.ones(2, requires_grad=True)
    h = x * 2
    h.retain_grad()
    gt.autograd.grad((h * h).sum(), [x])
    assert h.grad.tolist() == [4.0, 4.0]
    jac = gt.autograd.functional.jacobian(lambda v: gt.ones(2, dtype=gt.float64), gt.ones(2, dtype=gt.float64))  # fmt: skip
    assert jac.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_grad_fn_next_functions_and_prehooks(conn):
    x = gt.ones(2, requires_grad=True)
    w = gt.ones(2, requires_grad=True)
    y = (x * w + 1).sum()
    ((add, _),) = y.grad_fn.next_functions
    assert type(add).__name__ == "AddBackward0" and add.next_functions[1] == (None, 0)
    mul = add.next_functions[0][0]
    leaves = [f.variable for f, _ in mul.next_functions]
    assert leaves[0] is x and leaves[1] is w
    seen = []
    y.grad_fn.register_prehook(lambda go: seen.append(go[0].tolist()) or (go[0] * 2,))
    y.backward()
    assert seen == [1.0] and x.grad.tolist() == [2.0, 2.0]
