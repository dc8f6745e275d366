"""``gt.utils.checkpoint`` on a real cluster: a checkpointed model gives the gradients of the same
model without checkpointing (both variants, ``checkpoint_sequential``, ``autograd.grad``, double
backward, tensors read from an enclosing scope, dropout with the same mask), one case against
gradients written out in NumPy, the errors PyTorch raises, and the point of it all: after the
forward, the worker holds far fewer bytes for a checkpointed deep MLP."""

from __future__ import annotations

import gc
import time
import warnings
from typing import Any

import numpy as np
import pytest

import gt
from gt.runtime.control import request
from gt.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

pytestmark = pytest.mark.timeout(180)

nn = gt.nn
F = gt.nn.functional


def _arr(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _mlp(depth: int = 4, width: int = 8) -> nn.Sequential:
    gt.manual_seed(0)
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())])


def _grads(model: nn.Module) -> dict[str, np.ndarray]:
    return {n: p.grad.numpy() for n, p in model.named_parameters()}


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7, err_msg=k)


def _plain(model: nn.Module, x0: np.ndarray) -> tuple[dict, np.ndarray]:
    model.zero_grad(set_to_none=True)
    x = gt.tensor(x0, requires_grad=True)
    (model(x) ** 2).sum().backward()
    return _grads(model), x.grad.numpy()


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_model_gets_the_gradients_of_the_plain_one(conn, reentrant):
    model, x0 = _mlp(), _arr(1, 5, 8)
    want, want_x = _plain(model, x0)
    model.zero_grad(set_to_none=True)
    x = gt.tensor(x0, requires_grad=True)
    y = checkpoint(model, x, use_reentrant=reentrant)
    assert y.requires_grad and repr(y.grad_fn) == "<CheckpointBackward>"
    (y**2).sum().backward()
    _assert_same(_grads(model), want)
    np.testing.assert_allclose(x.grad.numpy(), want_x, rtol=1e-6)


def test_a_garbage_collection_inside_the_call_still_cuts_its_graph(conn):
    model, x0 = _mlp(), _arr(2, 5, 8)
    want, want_x = _plain(model, x0)
    model.zero_grad(set_to_none=True)
    x = gt.tensor(x0, requires_grad=True)

    def run(h):
        gc.collect()
        return model(h)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = checkpoint(run, x, use_reentrant=False)
    assert repr(y.grad_fn) == "<CheckpointBackward>"
    (y**2).sum().backward()
    _assert_same(_grads(model), want)
    np.testing.assert_allclose(x.grad.numpy(), want_x, rtol=1e-6)


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("segments", [1, 2, 3, 8])
def test_checkpoint_sequential_gets_the_gradients_of_the_plain_model(conn, segments, reentrant):
    model, x0 = _mlp(), _arr(2, 5, 8)
    want, want_x = _plain(model, x0)
    for functions in (model, list(model)):
        model.zero_grad(set_to_none=True)
        x = gt.tensor(x0, requires_grad=True)
        y = checkpoint_sequential(functions, segments, x, use_reentrant=reentrant)
        (y**2).sum().backward()
        _assert_same(_grads(model), want)
        np.testing.assert_allclose(x.grad.numpy(), want_x, rtol=1e-6)


def test_gradients_match_numpy_for_a_two_layer_net(conn):
    x0, w1, b1, w2, b2 = _arr(3, 6, 4), _arr(4, 5, 4), _arr(5, 5), _arr(6, 3, 5), _arr(7, 3)
    params = [gt.tensor(a, requires_grad=True) for a in (w1, b1, w2, b2)]
    x = gt.tensor(x0, requires_grad=True)

    def net(t: gt.Tensor) -> gt.Tensor:
        return F.linear(F.linear(t, params[0], params[1]).tanh(), params[2], params[3])

    loss = 0.5 * (checkpoint(net, x, use_reentrant=False) ** 2).sum()
    loss.backward()
    h = np.tanh(x0 @ w1.T + b1)
    y = h @ w2.T + b2  # d loss / d y = y
    dh = (y @ w2) * (1 - h**2)
    want = [dh.T @ x0, dh.sum(0), y.T @ h, y.sum(0)]
    for p, w in zip(params, want):
        np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), dh @ w1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss.item(), 0.5 * (y**2).sum(), rtol=1e-5)


def test_nonreentrant_takes_kwargs_nested_inputs_and_inputs_without_grad(conn):
    enc, mix = nn.Linear(4, 4), nn.Linear(4, 4)
    a, b0, c0 = _arr(8, 5, 4), _arr(9, 5, 4), _arr(10, 4)

    def block(feats: dict, scale: float = 1.0, extra: list | None = None) -> dict:
        h = enc(feats["a"]).tanh() * scale
        return {"out": h * mix(feats["b"] + extra[0]), "idx": feats["b"].argmax(1), "n": 3}

    results = []
    for use_checkpoint in (False, True):
        enc.zero_grad(set_to_none=True)
        mix.zero_grad(set_to_none=True)
        feats = {"a": gt.tensor(a), "b": gt.tensor(b0, requires_grad=True)}
        extra = [gt.tensor(c0, requires_grad=True)]
        if use_checkpoint:
            out = checkpoint(block, feats, use_reentrant=False, scale=0.5, extra=extra)
        else:
            out = block(feats, scale=0.5, extra=extra)
        (out["out"] ** 2).sum().backward()
        assert out["n"] == 3 and out["idx"].dtype == gt.int64 and not out["idx"].requires_grad
        assert feats["a"].grad is None
        results.append({
            "out": out["out"].detach().numpy(), "b": feats["b"].grad.detach().numpy(), "c": extra[0].grad.detach().numpy(),
            **{f"enc.{k}": v for k, v in _grads(enc).items()},
            **{f"mix.{k}": v for k, v in _grads(mix).items()},
        })  # fmt: skip
    _assert_same(results[1], results[0])


def test_autograd_grad_reaches_inputs_parameters_and_tensors_from_an_enclosing_scope(conn):
    model, x0 = _mlp(depth=2), _arr(11, 5, 8)
    w = gt.tensor(_arr(12, 5, 1), requires_grad=True)
    gate = (w * 3).tanh()  # a computed tensor the function reads from outside

    def f(t: gt.Tensor) -> gt.Tensor:
        return (model(t) * gate).sin()

    got = []
    for use_checkpoint in (False, True):
        x = gt.tensor(x0, requires_grad=True)
        y = checkpoint(f, x, use_reentrant=False) if use_checkpoint else f(x)
        wanted = [x, w, gate, model[2].bias]
        got.append(gt.autograd.grad(y.sum() + gate.sum(), wanted, retain_graph=True))
    for a, b in zip(*got):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    assert w.grad is None and model[0].weight.grad is None  # grad() touches no .grad


def test_double_backward_through_a_checkpoint(conn):
    x0 = _arr(13, 4, 3)
    x = gt.tensor(x0, requires_grad=True)
    y = checkpoint(lambda t: (t**3).sum(), x, use_reentrant=False)
    (g,) = gt.autograd.grad(y, x, create_graph=True)
    (h,) = gt.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x0**2, rtol=1e-5)
    np.testing.assert_allclose(h.numpy(), 6 * x0, rtol=1e-5)


def test_dropout_draws_the_same_mask_when_recomputed_and_the_stream_moves_on_as_without(conn):
    lin = nn.Linear(16, 16)
    x0 = _arr(14, 8, 16)

    def body(t: gt.Tensor) -> gt.Tensor:
        return F.dropout(lin(t).tanh(), 0.5)

    def run(how: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lin.zero_grad(set_to_none=True)
        gt.manual_seed(5)
        x = gt.tensor(x0, requires_grad=True)
        if how == "plain":
            y = body(x)
        else:
            y = checkpoint(body, x, use_reentrant=how == "reentrant",
                           preserve_rng_state=how != "unpreserved")  # fmt: skip
        y.sum().backward()
        return x.grad.numpy(), lin.weight.grad.numpy(), gt.rand(4).numpy()

    plain = run("plain")
    for how in ("nonreentrant", "reentrant"):
        for a, b in zip(run(how), plain):
            np.testing.assert_array_equal(a, b)
    unpreserved = run("unpreserved")  # the recomputation draws a new mask: other gradients
    assert not np.array_equal(unpreserved[0], plain[0])


def test_a_hot_step_with_checkpointed_dropout_trains_as_the_eager_one(conn):
    # a replay draws fresh seeds, but the recomputation must share the forward's (one slot)
    x0, y0 = _arr(15, 8, 16), _arr(16, 8, 4)

    def train(hot: bool) -> np.ndarray:
        gt.manual_seed(3)
        lin, head = nn.Linear(16, 16), nn.Linear(16, 4)
        opt = gt.optim.SGD([*lin.parameters(), *head.parameters()], lr=0.1)
        x, y = gt.tensor(x0), gt.tensor(y0)

        def block(t: gt.Tensor) -> gt.Tensor:
            return F.dropout(lin(t).tanh(), 0.3)

        def step() -> gt.Tensor:
            opt.zero_grad()
            loss = (head(checkpoint(block, x, use_reentrant=False)) - y).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = gt.hot(step) if hot else step
        for _ in range(6):
            fn()
        return np.concatenate(
            [lin.weight.detach().numpy().ravel(), head.weight.detach().numpy().ravel()]
        )

    np.testing.assert_allclose(train(True), train(False), rtol=1e-5, atol=1e-6)


def test_a_leaf_hook_and_nested_checkpoints_run_once(conn):
    l1, l2 = nn.Linear(4, 4), nn.Linear(4, 4)
    calls = []
    l1.weight.register_hook(lambda g: (calls.append(1), g * 2)[1])

    def inner(t: gt.Tensor) -> gt.Tensor:
        return l2(t).tanh()

    def outer(t: gt.Tensor, nested: bool) -> gt.Tensor:
        h = l1(t).relu()
        return (checkpoint(inner, h, use_reentrant=False) if nested else inner(h)) * 2

    x0, got = _arr(15, 3, 4), []
    for nested in (False, True):
        l1.zero_grad(set_to_none=True)
        l2.zero_grad(set_to_none=True)
        calls.clear()
        x = gt.tensor(x0, requires_grad=True)
        y = checkpoint(outer, x, nested, use_reentrant=False) if nested else outer(x, False)
        y.sum().backward()
        assert len(calls) == 1
        got.append([l1.weight.grad.numpy(), l2.weight.grad.numpy(), x.grad.numpy()])
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def test_a_function_that_returns_its_input_or_several_outputs(conn):
    x0 = _arr(16, 3, 4)
    x, b = gt.tensor(x0, requires_grad=True), gt.tensor(x0 + 1)
    same, prod, idx, text = checkpoint(
        lambda t, u: (t, (t * u).sum(1), t.argmax(1), "s"), x, b, use_reentrant=False
    )
    assert same is not x and same.requires_grad and text == "s" and not idx.requires_grad
    (same.sum() * 3 + prod.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 + x0 + 1, rtol=1e-6)


def test_reentrant_checkpoint_without_grad_inputs_warns_and_gives_no_gradient(conn):
    lin = nn.Linear(3, 2)
    x = gt.tensor(_arr(17, 4, 3))
    with pytest.warns(UserWarning, match="none of the inputs requires grad"):
        y = checkpoint(lin, x, use_reentrant=True)
    assert not y.requires_grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert checkpoint(lin, x, use_reentrant=False).requires_grad
        with gt.no_grad():
            assert not checkpoint(lin, x, use_reentrant=False).requires_grad


def test_use_reentrant_missing_warns_and_means_true(conn):
    lin = nn.Linear(3, 2)
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lin, gt.tensor(_arr(18, 4, 3), requires_grad=True))
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint_sequential([lin], 1, gt.tensor(_arr(18, 4, 3), requires_grad=True))
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        with pytest.warns(UserWarning, match="use_reentrant"):
            checkpoint(lambda t, scale: t * scale, gt.ones(2), scale=2)  # (reentrant: no kwargs)


def test_options_the_variant_does_not_take_raise(conn):
    lin, x = nn.Linear(3, 2), gt.tensor(_arr(19, 4, 3), requires_grad=True)
    with pytest.raises(ValueError, match="use_reentrant=False"):
        checkpoint(lin, x, use_reentrant=True, context_fn=lambda: (None, None))
    with pytest.raises(ValueError, match="use_reentrant=False"):
        checkpoint(lin, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(lin, x, use_reentrant=False, determinism_check="shapes")
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        checkpoint_sequential([lin], 1, x, use_reentrant=False, scale=2)


def test_context_fn_wraps_the_forward_and_the_recomputation(conn):
    seen = []

    class Mark:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self) -> None:
            seen.append(self.name)

        def __exit__(self, *exc: object) -> None:
            pass

    x = gt.tensor(_arr(20, 3), requires_grad=True)
    y = checkpoint(lambda t: t.exp(), x, use_reentrant=False,
                   context_fn=lambda: (Mark("forward"), Mark("recompute")))  # fmt: skip
    assert seen == ["forward"]
    y.sum().backward()
    assert seen == ["forward", "recompute"]
    np.testing.assert_allclose(x.grad.numpy(), np.exp(_arr(20, 3)), rtol=1e-6)


def test_a_recomputation_that_differs_raises_checkpoint_error(conn):
    calls = []

    def shrinking(t: gt.Tensor) -> gt.Tensor:
        calls.append(1)
        return t[: 4 - len(calls)].sin()

    y = checkpoint(shrinking, gt.tensor(_arr(21, 4, 3), requires_grad=True), use_reentrant=False)
    with pytest.raises(CheckpointError, match=r"forward shape \[3, 3\].*recomputed shape \[2, 3\]"):
        y.sum().backward()
    assert issubclass(CheckpointError, RuntimeError)


def test_backward_twice_needs_retain_graph_and_inputs_changed_in_place_raise(conn):
    lin, x0 = nn.Linear(3, 2), _arr(22, 4, 3)
    x = gt.tensor(x0, requires_grad=True)
    y = checkpoint(lin, x, use_reentrant=False).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.detach().numpy(), 2 * np.tile(lin.weight.detach().numpy().sum(0), (4, 1)),
                               rtol=1e-6)  # fmt: skip
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    h = gt.tensor(x0, requires_grad=True) * 1.0
    y = checkpoint(lin, h, use_reentrant=False).sum()
    with gt.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ----------------------------------------------------------------------------- memory
def _held_bytes(address: str, conn: Any) -> int:
    """What this client holds on the workers (call it after ``gt.sync()``): the total from stats
    that have caught up with every batch sent (the dispatcher has heard of all of this client's,
    and each worker's report counts every batch the dispatcher knows it ran), or else the same
    total in three reports in a row (workers report every half second; after a sync nothing this
    client holds changes)."""
    client = conn.client_no
    deadline = time.monotonic() + 30
    last: list[int] = []
    while time.monotonic() < deadline:
        total = 0
        stats = request(address, "stats", timeout=10.0)
        mine = [c for c in stats["clients"] if c["id"] == client]
        fresh = bool(mine) and mine[0]["batches"] >= conn.sent_batches
        for w in stats["workers"]:
            st = w["stats"]
            if not st:
                fresh = False
                continue
            fresh = fresh and st["batches"] == w["batches"]
            per = st.get("memory_clients") or {}
            total += (per.get(client) or per.get(str(client)) or [0, 0])[0]
        last = [*last[-2:], total]
        if fresh or (len(last) == 3 and len(set(last)) == 1):
            return total
        time.sleep(0.6)
    raise AssertionError(f"the workers' stats did not settle within 30 s (last totals {last})")


def test_a_checkpointed_deep_mlp_holds_far_fewer_bytes_after_forward(cluster, conn):
    width, depth, batch = 512, 12, 64
    gt.manual_seed(0)
    # (GELU keeps its input, as PyTorch's does; a ReLU keeps its output, which is the next
    # layer's input, and checkpointing Linear+ReLU blocks one by one would save nothing)
    layers = [nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth)]
    model = nn.Sequential(*layers)
    x = gt.randn(batch, width)
    act = batch * width * 4  # one activation: 131 kB

    def per_layer() -> gt.Tensor:
        h = x
        for layer in layers:
            h = checkpoint(layer, h, use_reentrant=False)
        return h

    runs = {
        "plain": lambda: model(x),
        "per_layer": per_layer,
        "sequential_4": lambda: checkpoint_sequential(model, 4, x, use_reentrant=False),
        "whole": lambda: checkpoint(model, x, use_reentrant=False),
    }
    held, grads = {}, {}
    for name, run in runs.items():
        model.zero_grad(set_to_none=True)
        gt.sync()
        before = _held_bytes(cluster.address, conn)
        y = run()
        gt.sync()
        held[name] = _held_bytes(cluster.address, conn) - before
        y.sum().backward()
        grads[name] = {n: p.grad.numpy() for n, p in model.named_parameters()}
        del y
    # plain: each layer keeps its input and its GELU's input (24 activations); checkpointed,
    # only the checkpoints' inputs and the output stay (12, 2 + the last segment's 6 + 1, 1)
    assert held["plain"] >= 2 * depth * act
    assert held["per_layer"] <= 0.55 * held["plain"]
    assert held["sequential_4"] <= 0.4 * held["plain"]
    assert held["whole"] <= 2 * act
    for name in runs:
        _assert_same(grads[name], grads["plain"])
