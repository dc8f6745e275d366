"""Registry entries: an LSTM, GRU or Elman RNN layer's time loop as one kernel, forward and
backward.

Composed from per-step ops, an LSTM layer over 32 steps sent 782 instructions forward and 1,226
backward (counted at the client's ``emit``), each a round through the client's autograd and the
worker's dispatch: on the perf probe's LSTM (Dec 7; hidden 128, batch 32) GT took 2x PyTorch's
step under ``@gt.hot`` and 5x eagerly. Here the loop runs on the worker: one instruction forward
and one back per direction (18 and 30 for that layer, with the input projection and the views).

The arithmetic is the composed layer's, op for op (``gi + (h @ W.T + b)``, ``f * c + i * g``,
``o * tanh(c)``, ``n + z * (h - n)``, GT's own ``matmul`` and ``sigmoid`` kernels), so the
forward gives the same bits. Only the hidden weight's and bias's gradients differ in rounding: one
GEMM and one sum over every step, where the composed layer added one per step.

* ``lstm_scan(gi, h0, c0, w_hh[, b_hh])``: ``gi`` is ``[T, B, 4H]`` (every step's input
  projection ``x @ W_ih.T + b_ih``, gates in PyTorch's order i, f, g, o), ``h0`` and ``c0``
  ``[B, H]``, ``w_hh`` ``[4H, H]``, ``b_hh`` ``[4H]``; ``attrs.reverse`` runs the steps from last
  to first (a bidirectional layer's second direction). The result is ``[7, T, B, H]``: each
  step's ``h``, ``c``, its gates after their activations (``i``, ``f``, ``g``, ``o``) and
  ``tanh(c)``, what backward needs; the layer's output is its first plane, contiguous, as
  PyTorch's.
* ``lstm_scan_grad(y, gy, h0, c0, w_hh)``: the gradient of the gate pre-activations (= of ``gi``)
  given ``gy``, the gradient of the whole result: ``[T + 1, B, 4H]``, whose last row holds the
  gradients of ``h0`` (its first ``H`` columns) and ``c0`` (the next ``H``). The weight and bias
  gradients are products and sums of it, left to ordinary ops.
* ``gru_scan(gi, h0, w_hh[, b_hh])``: the same for a GRU (gates r, z, n; ``gi`` ``[T, B, 3H]``):
  ``[5, T, B, H]`` of each step's ``h``, ``r``, ``z``, ``n`` and ``h_n`` (the hidden product's
  n part, bias included, which ``r`` multiplies).
* ``gru_scan_grad(y, gy, h0, w_hh)``: ``[T + 1, B, 6H]``: per step the gradient of ``gi`` (its
  first ``3H`` columns) and of ``h @ w_hh.T + b_hh`` (the next ``3H``: they differ in the n
  part); the last row's first ``H`` columns hold the gradient of ``h0``.
* ``rnn_scan(gi, h0, w_hh[, b_hh])`` and ``rnn_scan_grad(y, gy, h0, w_hh)``: an Elman RNN
  (``tanh``, or ``relu`` with ``attrs.relu``): ``[1, T, B, H]`` of each step's ``h``; the
  gradient ``[T + 1, B, H]``, the pre-activations' then ``h0``'s.

With ``attrs.grad`` False (no graph: inference, ``no_grad``) the LSTM's and GRU's results keep
only the states (``[2, T, B, H]``: h, c; ``[1, T, B, H]``: h), so an inference run does not hold
the gates' planes.

A second derivative (``create_graph=True``) does not use the ``_grad`` kernels: the rules then
write the same recurrences in differentiable ops, step by step.
"""

from __future__ import annotations

from typing import Any

from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape, first_dtype, sigmoid_into
from gt.runtime.ops.reduce import _k_matmul

#: Per kind: gates G, states (h, and an LSTM's c), the result's planes with and without what
#: backward needs, and the backward result's width per step in units of H.
_KINDS = {"lstm": (4, 2, 7, 2, 4), "gru": (3, 1, 5, 1, 6), "rnn": (1, 1, 1, 1, 1)}


def _sizes(shapes: list, name: str = "lstm_scan") -> tuple[int, int, int]:
    """``(T, B, H)`` of a scan's inputs: ``gi [T, B, G*H]``, its states ``[B, H]`` (LSTM: h0 and
    c0; GRU and RNN: h0), ``w_hh [G*H, H]`` and an optional ``b_hh [G*H]`` (G: 4 gates, 3, 1)."""
    gates, states = _KINDS[name[: name.index("_")]][:2]
    if len(shapes) not in (2 + states, 3 + states):
        raise ShapeError(f"{name} takes {2 + states} or {3 + states} inputs, got {len(shapes)}")
    gi, *hx, w = shapes[: 2 + states]
    if len(gi) != 3 or gi[2] % gates:
        raise ShapeError(f"{name}: gi must be [T, B, {gates}H], got {list(gi)}")
    t, b, wide = gi
    h = wide // gates
    if any(tuple(s) != (b, h) for s in hx) or tuple(w) != (wide, h):
        raise ShapeError(
            f"{name}: states {[list(s) for s in hx]} and w_hh {list(w)} do not fit gi {list(gi)} "
            f"([B, H] each and [{gates}H, H] with B={b}, H={h})"
        )
    if len(shapes) == 3 + states and tuple(shapes[-1]) != (wide,):
        raise ShapeError(f"{name}: b_hh must be [{wide}], got {list(shapes[-1])}")
    return t, b, h


def _for_backward(attrs: Any) -> bool:
    """Whether the result keeps what backward needs (``attrs.grad``, default True), or only the
    states (no graph: an inference run holds 2 planes of an LSTM, 1 of a GRU, not 7 or 5)."""
    return not (attrs and attrs.get("grad") is False)


def _scan_shape(kind: str) -> Any:
    """The shape rule of ``<kind>_scan``: ``[planes, T, B, H]``."""
    full, states_only = _KINDS[kind][2:4]

    def rule(shapes: list, attrs: Any) -> Shape:
        t, b, h = _sizes(shapes, f"{kind}_scan")
        return (full if _for_backward(attrs) else states_only, t, b, h)

    return rule


def _grad_shape(kind: str) -> Any:
    """The shape rule of ``<kind>_scan_grad(y, gy, h0[, c0], w_hh)``: ``[T + 1, B, width*H]``."""
    gates, _, planes, _, width = _KINDS[kind]

    def rule(shapes: list, attrs: Any) -> Shape:
        y, gy, *rest = shapes
        if len(y) != 4 or y[0] != planes or tuple(gy) != tuple(y):
            raise ShapeError(f"{kind}_scan_grad: y and gy must both be [{planes}, T, B, H], got "
                             f"{list(y)}, {list(gy)}")  # fmt: skip
        _, t, b, h = y
        _sizes([(t, b, gates * h), *rest], f"{kind}_scan")
        return (t + 1, b, width * h)

    return rule


def _steps(t: int, reverse: bool) -> range:
    return range(t - 1, -1, -1) if reverse else range(t)


def _k_lstm_scan(be: Any) -> Any:
    xp = be.xp
    mm = _k_matmul(be)

    def h(v: list, at: Any) -> Any:
        gi, h_, c, w = v[:4]
        b = v[4] if len(v) == 5 else None
        t, batch, four = gi.shape
        n = four // 4
        keep = _for_backward(at)
        y = xp.empty((7 if keep else 2, t, batch, n), dtype=gi.dtype)
        scratch = None if keep else xp.empty((5, batch, n), dtype=gi.dtype)
        wt = w.T
        for s in _steps(t, bool(at and at.get("reverse"))):
            hh = mm([h_, wt], None)
            pre = gi[s] + (hh if b is None else hh + b)
            gates = y[2:, s] if keep else scratch  # (i, f, g, o, tanh c)
            i, f, g, o, tc = (sigmoid_into(xp, pre[:, :n], gates[0]),
                              sigmoid_into(xp, pre[:, n : 2 * n], gates[1]),
                              xp.tanh(pre[:, 2 * n : 3 * n], out=gates[2]),
                              sigmoid_into(xp, pre[:, 3 * n :], gates[3]), gates[4])  # fmt: skip
            ig = i * g
            c = xp.add(xp.multiply(f, c, out=y[1, s]), ig, out=y[1, s])
            h_ = xp.multiply(o, xp.tanh(c, out=tc), out=y[0, s])
        return y

    return h


def _k_lstm_scan_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        y, gy, _h0, c0, w = v
        _, t, batch, n = y.shape
        out = xp.zeros((t + 1, batch, 4 * n), dtype=y.dtype)
        reverse = bool(at and at.get("reverse"))
        gates = bool(gy[2:].any())  # (gradients of the gates themselves: a second derivative)
        dh = dc = None
        for s in reversed(_steps(t, reverse)):
            i, f, g, o, tc = y[2, s], y[3, s], y[4, s], y[5, s], y[6, s]
            first = s == (t - 1 if reverse else 0)
            c_prev = c0 if first else y[1, s + 1 if reverse else s - 1]
            dh_s = gy[0, s] if dh is None else gy[0, s] + dh
            dc_s = dh_s * o
            if gates:
                dc_s += gy[6, s]
            dc_s *= 1 - tc * tc
            dc_s += gy[1, s] if dc is None else gy[1, s] + dc
            d = out[s]
            di, df, dg, do = d[:, :n], d[:, n : 2 * n], d[:, 2 * n : 3 * n], d[:, 3 * n :]
            xp.multiply(dc_s, g, out=di)
            xp.multiply(dc_s, c_prev, out=df)
            xp.multiply(dc_s, i, out=dg)
            xp.multiply(dh_s, tc, out=do)
            if gates:
                d += gy[2:6, s].transpose(1, 0, 2).reshape(batch, 4 * n)
            di *= i * (1 - i)
            df *= f * (1 - f)
            dg *= 1 - g * g
            do *= o * (1 - o)
            dc = dc_s * f
            dh = d @ w
        out[t, :, :n] = dh
        out[t, :, n : 2 * n] = dc
        return out

    return h


def _k_gru_scan(be: Any) -> Any:
    xp = be.xp
    mm = _k_matmul(be)

    def h(v: list, at: Any) -> Any:
        gi, h_, w = v[:3]
        b = v[3] if len(v) == 4 else None
        t, batch, three = gi.shape
        n = three // 3
        keep = _for_backward(at)
        y = xp.empty((5 if keep else 1, t, batch, n), dtype=gi.dtype)
        scratch = None if keep else xp.empty((4, batch, n), dtype=gi.dtype)
        wt = w.T
        for s in _steps(t, bool(at and at.get("reverse"))):
            hh = mm([h_, wt], None)
            if b is not None:
                hh = hh + b
            x = gi[s]
            r_, z_, n_, hn = y[1:, s] if keep else scratch  # (r, z, n, h_n)
            r = sigmoid_into(xp, xp.add(x[:, :n], hh[:, :n], out=r_), r_)
            z = sigmoid_into(xp, xp.add(x[:, n : 2 * n], hh[:, n : 2 * n], out=z_), z_)
            hn[...] = hh[:, 2 * n :]
            nn = xp.tanh(xp.add(x[:, 2 * n :], r * hn, out=n_), out=n_)
            h_ = xp.add(nn, z * (h_ - nn), out=y[0, s])
        return y

    return h


def _k_gru_scan_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        y, gy, h0, w = v
        _, t, batch, n = y.shape
        out = xp.zeros((t + 1, batch, 6 * n), dtype=y.dtype)
        reverse = bool(at and at.get("reverse"))
        gates = bool(gy[1:].any())  # (gradients of the gates themselves: a second derivative)
        dh = None
        for s in reversed(_steps(t, reverse)):
            r, z, nn, hn = y[1, s], y[2, s], y[3, s], y[4, s]
            first = s == (t - 1 if reverse else 0)
            h_prev = h0 if first else y[0, s + 1 if reverse else s - 1]
            dh_s = gy[0, s] if dh is None else gy[0, s] + dh
            d = out[s]  # [d gi (r, z, n) | d (h @ w.T + b) (r, z, n)]
            d_r, d_z, d_n = d[:, :n], d[:, n : 2 * n], d[:, 2 * n : 3 * n]
            xp.multiply(dh_s, 1 - z, out=d_n)
            xp.multiply(dh_s, h_prev - nn, out=d_z)
            if gates:
                d_n += gy[3, s]
                d_z += gy[2, s]
            d_n *= 1 - nn * nn
            xp.multiply(d_n, hn, out=d_r)
            if gates:
                d_r += gy[1, s]
            d_r *= r * (1 - r)
            d_z *= z * (1 - z)
            d[:, 3 * n : 5 * n] = d[:, : 2 * n]
            xp.multiply(d_n, r, out=d[:, 5 * n :])
            if gates:
                d[:, 5 * n :] += gy[4, s]
            dh = dh_s * z + d[:, 3 * n :] @ w
        out[t, :, :n] = dh
        return out

    return h


def _k_rnn_scan(be: Any) -> Any:
    xp = be.xp
    mm = _k_matmul(be)

    def h(v: list, at: Any) -> Any:
        gi, h_, w = v[:3]
        b = v[3] if len(v) == 4 else None
        t, batch, n = gi.shape
        y = xp.empty((1, t, batch, n), dtype=gi.dtype)
        wt, relu = w.T, bool(at and at.get("relu"))
        zero = xp.zeros((), dtype=gi.dtype)
        for s in _steps(t, bool(at and at.get("reverse"))):
            hh = mm([h_, wt], None)
            pre = xp.add(gi[s], hh if b is None else hh + b, out=y[0, s])
            h_ = xp.maximum(pre, zero, out=pre) if relu else xp.tanh(pre, out=pre)
        return y

    return h


def _k_rnn_scan_grad(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        y, gy, _h0, w = v
        _, t, batch, n = y.shape
        out = xp.zeros((t + 1, batch, n), dtype=y.dtype)
        reverse, relu = bool(at and at.get("reverse")), bool(at and at.get("relu"))
        dh = None
        for s in reversed(_steps(t, reverse)):
            hs = y[0, s]
            dh_s = gy[0, s] if dh is None else gy[0, s] + dh
            if relu:  # (relu's derivative as GT's: the gradient where the output is not 0)
                d = xp.where(hs != 0, dh_s, xp.zeros((), dtype=y.dtype))
                out[s] = d
            else:
                d = xp.multiply(dh_s, 1 - hs * hs, out=out[s])
            dh = d @ w
        out[t] = dh
        return out

    return h


def _saved(inputs: tuple, out: Any) -> tuple:
    return (*inputs[1:4], out._alias())


def _weight_grads(n: Any, d_hh: Any, y: Any, h0: Any, w_at: int, reverse: bool) -> tuple:
    """The gradients of ``w_hh`` and ``b_hh`` from ``d_hh`` (``[T, B, G*H]``, the gradient of
    every step's ``h @ w_hh.T + b_hh``): one product over all steps, one sum."""
    gw = gb = None
    if n.needs(w_at):
        hs, hidden = y[0], y.shape[3]
        h_prev = (hs._apply("concat", [hs[1:], h0.unsqueeze(0)], {"axis": 0}) if reverse else
                  hs._apply("concat", [h0.unsqueeze(0), hs[:-1]], {"axis": 0}))  # fmt: skip
        gw = d_hh.reshape(-1, d_hh.shape[-1]).mT @ h_prev.reshape(-1, hidden)
    if len(n.shapes) == w_at + 2 and n.needs(w_at + 1):
        gb = d_hh.sum((0, 1))
    return gw, gb


def _saved_rnn(inputs: tuple, out: Any) -> tuple:
    return (*inputs[1:3], out._alias())


def _d_rnn_scan(n: Any, g: Any) -> tuple:
    h0, w, y = n.saved
    t = y.shape[1]
    reverse = bool(n.attrs and n.attrs.get("reverse"))
    if _recorded(y, g):
        d_pre, dh0 = _composed_rnn_grad(y, g, h0, w, reverse, bool(n.attrs.get("relu")))
    else:
        d = y._apply("rnn_scan_grad", [y, g, h0, w], n.attrs)
        d_pre, dh0 = d[:t], d[t]
    gw, gb = _weight_grads(n, d_pre, y, h0, 2, reverse)
    return (d_pre, dh0, gw, gb)[: len(n.shapes)]


def _recorded(y: Any, g: Any) -> bool:
    """Backward runs with ``create_graph``: the rule must be differentiable ops."""
    return y.requires_grad or g.requires_grad


def _d_lstm_scan(n: Any, g: Any) -> tuple:
    h0, c0, w, y = n.saved
    t, hidden = y.shape[1], y.shape[3]
    reverse = bool(n.attrs and n.attrs.get("reverse"))
    if _recorded(y, g):
        d_pre, dh0, dc0 = _composed_lstm_grad(y, g, h0, c0, w, reverse)
    else:
        d = y._apply("lstm_scan_grad", [y, g, h0, c0, w], n.attrs)
        d_pre, dh0, dc0 = d[:t], d[t, :, :hidden], d[t, :, hidden : 2 * hidden]
    gw, gb = _weight_grads(n, d_pre, y, h0, 3, reverse)
    return (d_pre, dh0, dc0, gw, gb)[: len(n.shapes)]


def _d_gru_scan(n: Any, g: Any) -> tuple:
    h0, w, y = n.saved
    t, hidden = y.shape[1], y.shape[3]
    reverse = bool(n.attrs and n.attrs.get("reverse"))
    if _recorded(y, g):
        d_gi, d_hh, dh0 = _composed_gru_grad(y, g, h0, w, reverse)
    else:
        d = y._apply("gru_scan_grad", [y, g, h0, w], n.attrs)
        d_gi, d_hh, dh0 = d[:t, :, : 3 * hidden], d[:t, :, 3 * hidden :], d[t, :, :hidden]
    gw, gb = _weight_grads(n, d_hh, y, h0, 2, reverse)
    return (d_gi, dh0, gw, gb)[: len(n.shapes)]


def _composed_lstm_grad(y: Any, g: Any, h0: Any, c0: Any, w: Any, reverse: bool) -> tuple:
    """``lstm_scan_grad``'s recurrence in differentiable ops (for a second derivative)."""
    t = y.shape[1]
    dh = dc = None
    rows: list = [None] * t
    for s in reversed(_steps(t, reverse)):
        i, f, gg, o = y[2, s], y[3, s], y[4, s], y[5, s]
        first = s == (t - 1 if reverse else 0)
        c_prev = c0 if first else y[1, s + 1 if reverse else s - 1]
        dh_s = g[0, s] if dh is None else g[0, s] + dh
        dc_s = g[1, s] if dc is None else g[1, s] + dc
        tc = y[1, s].tanh()
        dc_s = dc_s + (dh_s * o + g[6, s]) * (1 - tc * tc)
        parts = [
            (dc_s * gg + g[2, s]) * (i * (1 - i)),
            (dc_s * c_prev + g[3, s]) * (f * (1 - f)),
            (dc_s * i + g[4, s]) * (1 - gg * gg),
            (dh_s * tc + g[5, s]) * (o * (1 - o)),
        ]
        rows[s] = y._apply("concat", parts, {"axis": -1})
        dc = dc_s * f
        dh = rows[s] @ w
    d_pre = y._apply("concat", [r.unsqueeze(0) for r in rows], {"axis": 0})
    return d_pre, dh, dc


def _composed_gru_grad(y: Any, g: Any, h0: Any, w: Any, reverse: bool) -> tuple:
    """``gru_scan_grad``'s recurrence in differentiable ops (for a second derivative)."""
    t = y.shape[1]
    dh = None
    gis: list = [None] * t
    hhs: list = [None] * t
    for s in reversed(_steps(t, reverse)):
        r, z, nn, hn = y[1, s], y[2, s], y[3, s], y[4, s]
        first = s == (t - 1 if reverse else 0)
        h_prev = h0 if first else y[0, s + 1 if reverse else s - 1]
        dh_s = g[0, s] if dh is None else g[0, s] + dh
        d_n = (dh_s * (1 - z) + g[3, s]) * (1 - nn * nn)
        d_r = (d_n * hn + g[1, s]) * (r * (1 - r))
        d_z = (dh_s * (h_prev - nn) + g[2, s]) * (z * (1 - z))
        gis[s] = y._apply("concat", [d_r, d_z, d_n], {"axis": -1})
        hhs[s] = y._apply("concat", [d_r, d_z, d_n * r + g[4, s]], {"axis": -1})
        dh = dh_s * z + hhs[s] @ w
    d_gi = y._apply("concat", [a.unsqueeze(0) for a in gis], {"axis": 0})
    d_hh = y._apply("concat", [a.unsqueeze(0) for a in hhs], {"axis": 0})
    return d_gi, d_hh, dh


def _composed_rnn_grad(y: Any, g: Any, h0: Any, w: Any, reverse: bool, relu: bool) -> tuple:
    """``rnn_scan_grad``'s recurrence in differentiable ops (for a second derivative)."""
    t = y.shape[1]
    dh = None
    rows: list = [None] * t
    for s in reversed(_steps(t, reverse)):
        hs = y[0, s]
        dh_s = g[0, s] if dh is None else g[0, s] + dh
        rows[s] = dh_s * (hs != 0) if relu else dh_s * (1 - hs * hs)
        dh = rows[s] @ w
    return y._apply("concat", [r.unsqueeze(0) for r in rows], {"axis": 0}), dh


ENTRIES: list[Op] = [
    Op(
        "lstm_scan",
        172,
        arity=None,
        shape=_scan_shape("lstm"),
        dtype=first_dtype,
        kernel=_k_lstm_scan,
        grad=_d_lstm_scan,
        saves=_saved,
        doc="an LSTM direction's time loop: [7, T, B, H] of each step's h, c, gates, tanh(c)",
    ),
    Op(
        "lstm_scan_grad",
        173,
        arity=5,
        shape=_grad_shape("lstm"),
        dtype=first_dtype,
        kernel=_k_lstm_scan_grad,
        doc="lstm_scan's backward: the gates' pre-activation gradients, then dh0 and dc0",
    ),
    Op(
        "gru_scan",
        174,
        arity=None,
        shape=_scan_shape("gru"),
        dtype=first_dtype,
        kernel=_k_gru_scan,
        grad=_d_gru_scan,
        saves=_saved_rnn,
        doc="a GRU direction's time loop: [5, T, B, H] of each step's h, r, z, n and h_n",
    ),
    Op(
        "gru_scan_grad",
        175,
        arity=4,
        shape=_grad_shape("gru"),
        dtype=first_dtype,
        kernel=_k_gru_scan_grad,
        doc="gru_scan's backward: the gradients of gi and of h @ w_hh.T + b_hh, then dh0",
    ),
    Op(
        "rnn_scan",
        176,
        arity=None,
        shape=_scan_shape("rnn"),
        dtype=first_dtype,
        kernel=_k_rnn_scan,
        grad=_d_rnn_scan,
        saves=_saved_rnn,
        doc="an Elman RNN direction's time loop (tanh, or relu with attrs.relu): [1, T, B, H]",
    ),
    Op(
        "rnn_scan_grad",
        177,
        arity=4,
        shape=_grad_shape("rnn"),
        dtype=first_dtype,
        kernel=_k_rnn_scan_grad,
        doc="rnn_scan's backward: the pre-activation gradients, then dh0",
    ),
]
