"""The LSTM, GRU and Elman RNN time-loop kernels (``gt.runtime.ops.recurrent``) on NumPy: the forward
against a direct loop of PyTorch's equations, the backward against central differences of the
forward, both directions, with and without the hidden bias."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.worker.backend import Backend

BACKEND = Backend(np, "cpu")


def _h(name: str):
    return BACKEND.handlers[O.OPCODE[name]]


def _inputs(rng, t=4, b=3, n=2, bias=True, kind="lstm"):
    gates, states = {"lstm": (4, 2), "gru": (3, 1), "rnn": (1, 1), "rnn_relu": (1, 1)}[kind]
    shapes = ((t, b, gates * n), *[(b, n)] * states, (gates * n, n))
    v = [rng.standard_normal(s) for s in shapes]
    return v + [rng.standard_normal(gates * n)] if bias else v


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _loop(gi, h, c, w, b=None, reverse=False):
    """PyTorch's LSTM equations, one step at a time: [7, T, B, H] of h, c, i, f, g, o, tanh(c)."""
    t, _, four = gi.shape
    n = four // 4
    y = np.empty((7, t, *h.shape))
    for s in range(t - 1, -1, -1) if reverse else range(t):
        pre = gi[s] + h @ w.T + (0 if b is None else b)
        i, f, g, o = (pre[:, k * n : (k + 1) * n] for k in range(4))
        i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        c = f * c + i * g
        h = o * np.tanh(c)
        y[:, s] = h, c, i, f, g, o, np.tanh(c)
    return y


def _gru_loop(gi, h, w, b=None, reverse=False):
    """PyTorch's GRU equations, one step at a time: [5, T, B, H] of h, r, z, n, h_n."""
    t, _, three = gi.shape
    n = three // 3
    y = np.empty((5, t, *h.shape))
    for s in range(t - 1, -1, -1) if reverse else range(t):
        hh = h @ w.T + (0 if b is None else b)
        r = _sigmoid(gi[s, :, :n] + hh[:, :n])
        z = _sigmoid(gi[s, :, n : 2 * n] + hh[:, n : 2 * n])
        nn = np.tanh(gi[s, :, 2 * n :] + r * hh[:, 2 * n :])
        h = (1 - z) * nn + z * h
        y[:, s] = h, r, z, nn, hh[:, 2 * n :]
    return y


def _rnn_loop(gi, h, w, b=None, reverse=False, relu=False):
    """An Elman RNN's equations, one step at a time: [1, T, B, H] of h."""
    y = np.empty((1, gi.shape[0], *h.shape))
    for s in range(gi.shape[0] - 1, -1, -1) if reverse else range(gi.shape[0]):
        pre = gi[s] + h @ w.T + (0 if b is None else b)
        h = np.maximum(pre, 0) if relu else np.tanh(pre)
        y[0, s] = h
    return y


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn", "rnn_relu"])
def test_the_forward_is_pytorchs_equations_step_by_step(kind, reverse, bias):
    v = _inputs(np.random.default_rng(0), bias=bias, kind=kind)
    relu = kind == "rnn_relu"
    got = _h(f"{kind.removesuffix('_relu')}_scan")(v, {"reverse": reverse, "relu": relu})
    loop = {"lstm": _loop, "gru": _gru_loop}.get(kind)
    want = loop(*v, reverse=reverse) if loop else _rnn_loop(*v, reverse=reverse, relu=relu)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_the_rnn_backward_is_the_derivative_of_the_forward(reverse, relu):
    rng = np.random.default_rng(5)
    gi, h0, w, b = _inputs(rng, kind="rnn")
    at = {"reverse": reverse, "relu": relu}
    y = _h("rnn_scan")([gi, h0, w, b], at)
    gy = rng.standard_normal(y.shape)
    d = _h("rnn_scan_grad")([y, gy, h0, w], at)
    t = gi.shape[0]

    def loss():
        return float((_rnn_loop(gi, h0, w, b, reverse, relu) * gy).sum())

    np.testing.assert_allclose(d[:t], _numeric(loss, gi), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(d[t], _numeric(loss, h0), rtol=1e-6, atol=1e-8)


def _numeric(loss, arr):
    num = np.zeros_like(arr)
    for idx in np.ndindex(arr.shape):
        keep = arr[idx]
        arr[idx] = keep + 1e-6
        up = loss()
        arr[idx] = keep - 1e-6
        down = loss()
        arr[idx] = keep
        num[idx] = (up - down) / 2e-6
    return num


@pytest.mark.parametrize("reverse", [False, True])
def test_the_gru_backward_is_the_derivative_of_the_forward(reverse):
    rng = np.random.default_rng(4)
    gi, h0, w, b = _inputs(rng, kind="gru")
    at = {"reverse": reverse}
    y = _h("gru_scan")([gi, h0, w, b], at)
    gy = rng.standard_normal(y.shape)
    d = _h("gru_scan_grad")([y, gy, h0, w], at)
    t, n = gi.shape[0], h0.shape[1]

    def loss():
        return float((_gru_loop(gi, h0, w, b, reverse) * gy).sum())

    np.testing.assert_allclose(d[:t, :, : 3 * n], _numeric(loss, gi), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(d[t, :, :n], _numeric(loss, h0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(d[:t, :, 3 * n :].sum((0, 1)), _numeric(loss, b), rtol=1e-6,
                               atol=1e-8)  # fmt: skip
    assert not d[t, :, n:].any()


@pytest.mark.parametrize("reverse", [False, True])
def test_the_lstm_backward_is_the_derivative_of_the_forward(reverse):
    rng = np.random.default_rng(1)
    gi, h0, c0, w, b = _inputs(rng)
    at = {"reverse": reverse}
    y = _h("lstm_scan")([gi, h0, c0, w, b], at)
    gy = rng.standard_normal(y.shape)  # every plane: h, c and the gates all reach the loss
    d = _h("lstm_scan_grad")([y, gy, h0, c0, w], at)
    t, n = gi.shape[0], h0.shape[1]

    def loss(gi_, h0_, c0_):
        return float((_loop(gi_, h0_, c0_, w, b, reverse) * gy).sum())

    for arr, want in ((gi, d[:t]), (h0, d[t, :, :n]), (c0, d[t, :, n : 2 * n])):
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            keep = arr[idx]
            arr[idx] = keep + 1e-6
            up = loss(gi, h0, c0)
            arr[idx] = keep - 1e-6
            down = loss(gi, h0, c0)
            arr[idx] = keep
            num[idx] = (up - down) / 2e-6
        np.testing.assert_allclose(want, num, rtol=1e-6, atol=1e-8)
    assert not d[t, :, 2 * n :].any()  # (the rest of the last row is unused)


def test_float32_stays_float32_and_a_bad_shape_is_named():
    v = [a.astype(np.float32) for a in _inputs(np.random.default_rng(2))]
    assert _h("lstm_scan")(v, {}).dtype == np.float32
    op = O.get("lstm_scan")
    with pytest.raises(Exception, match="states .* do not fit gi"):
        op.shape([(4, 3, 8), (3, 3), (3, 2), (8, 2)], {})


@pytest.mark.parametrize("kind, planes", [("lstm", 2), ("gru", 1)])
def test_without_backward_the_result_is_the_states_alone(kind, planes):
    v = _inputs(np.random.default_rng(6), kind=kind)
    full = _h(f"{kind}_scan")(v, {"reverse": True})
    states = _h(f"{kind}_scan")(v, {"reverse": True, "grad": False})
    assert states.shape == (planes, *full.shape[1:])
    np.testing.assert_array_equal(states, full[:planes])
    assert O.get(f"{kind}_scan").shape([a.shape for a in v], {"grad": False}) == states.shape
