"""``gt.func.vmap`` runs a function once over the whole batch (``gt/func_batching.py``), with the
same results as running it once per entry, and runs it per entry whenever it cannot batch it."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.func_batching import RUNS

pytestmark = pytest.mark.timeout(120)
F = gt.nn.functional
RNG = np.random.default_rng(7)


def _t(*shape, dtype=np.float64):
    return gt.tensor(RNG.standard_normal(shape).astype(dtype))


def _per_entry(f, args, dims):
    n = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    return gt.stack([f(*[a if d is None else a.select(d, i) for a, d in zip(args, dims)])
                     for i in range(n)])  # fmt: skip


def _vmapped(f, args, dims, **kw):
    before = dict(RUNS)
    out = gt.func.vmap(f, in_dims=dims, **kw)(*args)
    return out, RUNS["batched"] - before["batched"], RUNS["per_entry"] - before["per_entry"]


CASES = {
    "elementwise with broadcasting": (lambda a, b: (a * b + 1).tanh() - b.exp(), ((5, 3, 4), (4,)),
                                      (0, None)),
    "an unmapped operand of higher rank": (lambda a, b: a + b, ((5, 4), (3, 4)), (0, None)),
    "both mapped, mapped on dim 1": (lambda a, b: a.maximum(b), ((3, 5, 4), (5, 4)), (1, 0)),
    "dot of mapped vectors": (lambda a, b: gt.dot(a, b), ((5, 4), (5, 4)), (0, 0)),
    "matrix times a fixed vector": (lambda a, b: a @ b, ((5, 3, 4), (4,)), (0, None)),
    "vector times a fixed matrix": (lambda a, b: a @ b, ((5, 4), (4, 3)), (0, None)),
    "vector times a stack of fixed matrices": (lambda a, b: a @ b, ((5, 4), (2, 4, 3)), (0, None)),
    "fixed matrix times a mapped vector": (lambda a, b: b @ a, ((5, 4), (3, 4)), (0, None)),
    "fixed vector times a mapped matrix": (lambda a, b: b @ a, ((5, 4, 3), (4,)), (0, None)),
    "mapped matrix times mapped vector": (lambda a, b: a @ b, ((5, 3, 4), (5, 4)), (0, 0)),
    "batched products of different ranks": (lambda a, b: a @ b, ((5, 2, 3, 4), (5, 4, 6)), (0, 0)),
    "gram matrix": (lambda a: a @ a.T, ((5, 3, 4),), (0,)),
    "einsum": (lambda a, b: gt.einsum("ij,jk->ik", a, b), ((5, 3, 4), (4, 2)), (0, None)),
    "reductions": (lambda a: a.sum() + a.mean(0).sum() + a.amax(-1).sum() + a.prod(), ((5, 2, 3),), (0,)),
    "argmax over everything": (lambda a: a.argmax(), ((4, 5, 3),), (2,)),
    "softmax, log_softmax, cumsum": (lambda a: a.softmax(-1) + a.log_softmax(0) + a.cumsum(1), ((5, 3, 4),), (0,)),
    "norms": (lambda a: a.norm(dim=1) + gt.linalg.vector_norm(a, dim=0).sum(), ((5, 3, 4),), (0,)),
    "reshape, transpose, expand": (lambda a: a.reshape(2, 6).t().unsqueeze(0).expand(3, 6, 2).flatten(), ((5, 3, 4),), (0,)),
    "slices and integer lists": (lambda a: a[1:, [0, 2]] * a[0, :2].unsqueeze(1), ((5, 3, 4),), (0,)),
    "cat and stack with a fixed tensor": (lambda a, b: gt.cat([a, b, a * 2]).sum(0) + gt.stack([a, b]).mean(0), ((5, 4), (4,)), (0, None)),
    "linear algebra": (lambda a, b: gt.linalg.solve(a @ a.mT + gt.eye(3, dtype=a.dtype) * 3, b) + gt.linalg.det(a @ a.mT), ((5, 3, 3), (3,)), (0, None)),
    "a tensor of the function written in place": (lambda a: gt.zeros(3, 4, dtype=a.dtype).index_add_(0, gt.tensor([2, 0, 2]), a), ((5, 3, 4),), (0,)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_a_batched_run_gives_what_running_each_entry_gives(conn, name):
    f, shapes, dims = CASES[name]
    args = [_t(*s) for s in shapes]
    got, batched, per_entry = _vmapped(f, args, dims)
    assert (batched, per_entry) == (1, 0), RUNS["why"]
    want = _per_entry(f, args, dims)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_indexing_by_mapped_indices_picks_each_entrys_own(conn):
    x, idx = _t(6, 4), gt.tensor([3, 0, 1, 1, 2, 0])
    got, batched, _ = _vmapped(lambda row, i: row[i] * 2, (x, idx), (0, 0))
    assert batched == 1, RUNS["why"]
    np.testing.assert_array_equal(got.numpy(), 2 * x.numpy()[np.arange(6), idx.numpy()])
    table = _t(4, 3)  # a fixed table looked up by each entry's index
    got, batched, _ = _vmapped(lambda i: table[i].sum(), (idx,), (0,))
    assert batched == 1, RUNS["why"]
    np.testing.assert_allclose(got.numpy(), table.numpy()[idx.numpy()].sum(1), rtol=1e-12)


def test_per_sample_gradients_of_a_classifier_come_from_one_batched_pass(conn):
    model = gt.nn.Sequential(gt.nn.Linear(6, 8), gt.nn.Tanh(), gt.nn.Linear(8, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = _t(5, 6, dtype=np.float32), gt.tensor([0, 2, 1, 1, 0])

    def loss(p, xb, yb):
        out = gt.func.functional_call(model, p, (xb.unsqueeze(0),))
        return F.cross_entropy(out, yb.unsqueeze(0))

    grads, batched, _ = _vmapped(gt.func.grad(loss), (params, x, y), (None, 0, 0))
    assert batched == 1, RUNS["why"]
    for i in range(5):
        one = gt.func.grad(loss)(params, x[i], y[i])
        for k in params:
            assert tuple(grads[k].shape) == (5, *params[k].shape)
            np.testing.assert_allclose(grads[k][i].numpy(), one[k].numpy(), rtol=1e-5, atol=1e-6)


def test_out_dims_and_nested_vmap(conn):
    a = _t(4, 3, 2)
    got, batched, _ = _vmapped(lambda r: r * 3, (a,), (0,), out_dims=1)
    assert batched == 1 and tuple(got.shape) == (3, 4, 2)
    np.testing.assert_allclose(got.numpy(), 3 * a.numpy().transpose(1, 0, 2))
    inner = gt.func.vmap(lambda v: v.sum() * v)
    got, batched, _ = _vmapped(inner, (a,), (0,))
    assert batched == 1  # the outer run batches; the inner one runs per entry inside it
    want = a.numpy().sum(-1, keepdims=True) * a.numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_results_that_do_not_depend_on_the_batch_are_repeated(conn):
    a, c = _t(4, 3), _t(2)
    got, batched, _ = _vmapped(lambda r: (r.sum(), c * 2), (a,), (0,))
    assert batched == 1
    np.testing.assert_allclose(got[1].numpy(), np.tile(2 * c.numpy(), (4, 1)))


def test_what_cannot_be_batched_runs_per_entry_with_the_same_results(conn):
    a = _t(4, 3)

    def reads_a_value(r):  # data-dependent control flow
        return r * 2 if r.sum().item() > 0 else -r

    got, batched, per_entry = _vmapped(reads_a_value, (a,), (0,))
    assert (batched, per_entry) == (0, 1) and "reads a value" in RUNS["why"]
    np.testing.assert_allclose(got.numpy(), _per_entry(reads_a_value, (a,), (0,)).numpy())

    counter = gt.zeros(3, dtype=gt.float64)

    def writes_outside(r):
        counter.add_(r)  # a side effect on a tensor the caller holds: once per entry, as before
        return r + 1

    got, batched, per_entry = _vmapped(writes_outside, (a,), (0,))
    assert (batched, per_entry) == (0, 1)
    np.testing.assert_allclose(counter.numpy(), a.numpy().sum(0), rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), a.numpy() + 1)


def test_mapped_inputs_that_require_grad_keep_their_graph(conn):
    a = _t(4, 3).requires_grad_()
    out, batched, per_entry = _vmapped(lambda r: (r * r).sum(), (a,), (0,))
    assert (batched, per_entry) == (0, 1)
    out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.detach().numpy())


def test_per_sample_gradients_of_a_convolutional_network_are_batched(conn):
    # PyTorch's per-sample-gradient tutorial uses a CNN: convolutions fold the batch into theirs
    net = gt.nn.Sequential(gt.nn.Conv2d(2, 3, 3, padding=1), gt.nn.ReLU(), gt.nn.MaxPool2d(2),
                           gt.nn.Flatten(), gt.nn.Linear(12, 2))  # fmt: skip
    params = {k: v.detach() for k, v in net.named_parameters()}
    x, y = _t(4, 2, 4, 4, dtype=np.float32), gt.tensor([1, 0, 0, 1])

    def loss(p, xb, yb):
        return F.cross_entropy(gt.func.functional_call(net, p, (xb[None],)), yb[None])

    grads, batched, _ = _vmapped(gt.func.grad(loss), (params, x, y), (None, 0, 0))
    assert batched == 1, RUNS["why"]
    for i in range(4):
        one = gt.func.grad(loss)(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(grads[k][i].numpy(), one[k].numpy(), rtol=1e-5, atol=1e-6)


def test_random_draws_follow_randomness(conn):
    x = gt.zeros(4, 3, dtype=gt.float32)
    got, batched, _ = _vmapped(lambda r: r + gt.rand(3), (x,), (0,), randomness="different")
    assert batched == 1, RUNS["why"]
    rows = got.numpy()
    assert len({tuple(r) for r in rows}) == 4 and ((rows >= 0) & (rows < 1)).all()
    got, batched, _ = _vmapped(lambda r: r + gt.randn(3), (x,), (0,), randomness="same")
    assert batched == 1, RUNS["why"]
    rows = got.numpy()
    assert (rows == rows[0]).all() and rows[0].std() > 0
    got, batched, per_entry = _vmapped(lambda r: r + gt.rand(3), (x,), (0,))
    assert (batched, per_entry) == (0, 1)  # (the default runs per entry, as it did before)


@pytest.mark.parametrize("write", ["copy_", "fill_", "zero_", "setitem"])
def test_a_batched_tensor_of_the_function_given_one_value_again_is_one_value(conn, write):
    a = _t(4, 3)
    ones = gt.ones(3, dtype=gt.float64)
    writes = {
        "copy_": lambda h: h.copy_(ones),
        "fill_": lambda h: h.fill_(1.0),
        "zero_": lambda h: h.zero_().add_(1.0),
        "setitem": lambda h: h.__setitem__(..., 1.0),
    }

    def f(r):
        h = r * 2
        writes[write](h)  # every entry's h is ones now
        return h + r

    got, batched, _ = _vmapped(f, (a,), (0,))
    assert batched == 1, RUNS["why"]
    np.testing.assert_allclose(got.numpy(), a.numpy() + 1, rtol=1e-12)
