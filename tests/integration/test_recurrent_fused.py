"""A recurrent layer's time loop as one instruction each way (``lstm_scan``, ``gru_scan``,
``rnn_scan``), through the client, the dispatcher and a worker: the same forward bits as the
layer composed of per-step ops, the same gradients to rounding, second derivatives, a captured
training step, and the layers that stay composed (half precision, projections, packed
sequences)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import wait_for

import gt
from gt import func_batching
from gt.nn import recurrent
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster


@pytest.fixture
def fused_calls(monkeypatch):
    """How often each direction ran fused (``True``) or composed (``False``)."""
    calls: list[bool] = []
    real = recurrent._fused

    def spy(*args):
        calls.append(real(*args))
        return calls[-1]

    monkeypatch.setattr(recurrent, "_fused", spy)
    return calls


def _layer(kind, *args, **kw):
    if kind == "RNN_RELU":
        return gt.nn.RNN(*args, nonlinearity="relu", **kw)
    return getattr(gt.nn, kind)(*args, **kw)


def _run(kind, layer_kw, fused, monkeypatch, hx=False):
    monkeypatch.setattr(recurrent, "_FUSED_RNN", fused)
    gt.manual_seed(0)
    m = _layer(kind, 5, 6, **layer_kw).double()
    x = gt.randn(4, 3, 5, dtype=gt.float64, requires_grad=True)
    states = None
    if hx:
        layers = m.num_layers * (2 if m.bidirectional else 1)
        states = tuple(gt.randn(layers, 4 if m.batch_first else 3, 6, dtype=gt.float64)
                       .requires_grad_() for _ in range(2 if kind == "LSTM" else 1))  # fmt: skip
    out, hc = m(x, states if kind == "LSTM" or states is None else states[0])
    h, c = hc if kind == "LSTM" else (hc, hc * 0.5)
    ((out * out).sum() + h.sin().sum() + c.cos().sum()).backward()
    leaves = [x, *(states or ()), *m.parameters()]
    return [t.detach().numpy() for t in (out, h, c)], [t.grad.numpy() for t in leaves]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN", "RNN_RELU"])
@pytest.mark.parametrize(
    "layer_kw, hx",
    [
        ({}, False),
        ({"batch_first": True}, True),
        ({"bidirectional": True, "num_layers": 2}, True),
        ({"bias": False, "bidirectional": True, "batch_first": True}, False),
    ],  # fmt: skip
)
def test_a_fused_layer_gives_the_composed_layers_results(conn, monkeypatch, fused_calls, kind,
                                                        layer_kw, hx):  # fmt: skip
    outs, grads = _run(kind, layer_kw, True, monkeypatch, hx)
    assert fused_calls and all(fused_calls)
    want_outs, want_grads = _run(kind, layer_kw, False, monkeypatch, hx)
    for got, want in zip(outs, want_outs):
        np.testing.assert_array_equal(got, want)  # the same ops in the same order
    for got, want in zip(grads, want_grads):  # (the weight's: one GEMM instead of T)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_a_second_derivative_through_a_fused_layer_is_the_composed_ones(conn, monkeypatch, kind):
    def penalty(fused):
        monkeypatch.setattr(recurrent, "_FUSED_RNN", fused)
        gt.manual_seed(1)
        m = _layer(kind, 3, 4, bidirectional=True).double()
        x = gt.randn(5, 2, 3, dtype=gt.float64, requires_grad=True)
        out, hc = m(x)
        last = hc[1] if kind == "LSTM" else hc
        (gx,) = gt.autograd.grad((out**2).sum() + last.exp().sum(), x, create_graph=True)
        (gx**2).sum().backward()
        return [x.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]

    for got, want in zip(penalty(True), penalty(False)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_captured_training_step_replays_the_eager_steps(conn, kind):
    def make():
        gt.manual_seed(2)
        m = getattr(gt.nn, kind)(4, 8, batch_first=True)
        head = gt.nn.Linear(8, 3)
        opt = gt.optim.Adam([*m.parameters(), *head.parameters()], lr=0.01)

        def step(x, y):
            opt.zero_grad()
            out, _ = m(x)
            loss = gt.nn.functional.cross_entropy(head(out[:, -1]), y)
            loss.backward()
            opt.step()
            return loss

        return step

    rng = np.random.default_rng(3)
    data = [(gt.tensor(rng.standard_normal((6, 7, 4)).astype(np.float32)),
             gt.tensor(rng.integers(0, 3, 6))) for _ in range(5)]  # fmt: skip
    eager, hot = make(), gt.hot(make())
    want = [eager(x, y).item() for x, y in data]
    got = [hot(x, y).item() for x, y in data]
    assert got == want
    (state,) = hot.state.values()
    assert state["state"] == "replaying"


def test_layers_the_kernel_does_not_cover_stay_composed_and_run(conn, fused_calls):
    # (under CPU autocast the layer runs in float32 on rounded values: fused, as it is composed)
    x = gt.randn(3, 2, 4)
    gt.nn.LSTM(4, 6, proj_size=3)(x)[0].sum().backward()
    gt.nn.LSTM(4, 6).to(gt.float16)(x.half())
    packed = gt.nn.utils.rnn.pack_padded_sequence(x, [3, 2])
    gt.nn.LSTM(4, 6)(packed)
    gt.nn.GRU(4, 6)(packed)
    assert fused_calls == [False, False]  # (packed sequences never ask)


def test_without_a_graph_the_output_does_not_hold_the_gates_memory():
    # The loop's result keeps 7 planes (h, c, the gates, tanh c) for backward; with no graph to
    # keep them for, it holds h and c only.
    with LocalCluster(workers=1) as c:
        gt.connect(c.address, timeout=60)
        try:
            gt.config.set(memory_limit="256MB")
            m = gt.nn.LSTM(8, 64)
            with gt.no_grad():
                out, (h, c_n) = m(gt.randn(200, 16, 8))
            assert out.is_contiguous() and out.sum().item() == out.numpy().sum(dtype=np.float32)
            out_bytes = 200 * 16 * 64 * 4  # (the frees went with that sync; stats come twice a s)
            wait_for(lambda: 0 < _stats(c).get("bytes", 0) < 3 * out_bytes, 15)  # (7 planes: 7x)
            assert h.shape == c_n.shape == (1, 16, 64)
        finally:
            gt.disconnect()


def _stats(cluster) -> dict:
    return request(cluster.address, "stats", timeout=10.0)["workers"][0]["stats"] or {}


def test_under_a_shard_config_a_layer_stays_composed_so_its_ops_follow_the_rules(conn, fused_calls):
    gt.load_config({"rows": {"shard": {"axis": 0}}})
    try:
        with gt.signal.context("rows"):
            out, h = gt.nn.GRU(4, 6)(gt.randn(3, 2, 4))
        assert out.shape == (3, 2, 6) and np.isfinite(out.sum().item())
        assert fused_calls == [False]  # (the loops run on one worker)
    finally:
        gt.config.clear()


def test_per_sample_gradients_through_a_layer_run_batched(conn, fused_calls):
    # (the loops have no batching rule: inside vmap the layer is composed, whose ops batch)
    rng = np.random.default_rng(4)
    xs = gt.tensor(rng.standard_normal((3, 5, 2, 4)))
    m = gt.nn.LSTM(4, 3).double()
    params = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p, x):
        out, _ = gt.func.functional_call(m, p, (x,))
        return (out**2).sum()

    before = dict(func_batching.RUNS)
    per_sample = gt.func.vmap(gt.func.grad(loss), in_dims=(None, 0))(params, xs)
    assert func_batching.RUNS["batched"] == before["batched"] + 1, func_batching.RUNS["why"]
    for i in range(3):
        one = gt.func.grad(loss)(params, xs[i])
        for k in params:
            np.testing.assert_allclose(per_sample[k][i].numpy(), one[k].numpy(), rtol=1e-10,
                                       atol=1e-12)  # fmt: skip
