"""``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh`` and ``torch.rnn_relu``: the flat recurrent
entry points that take the weights as one list (``torch.lstm(input, hx, params, has_biases,
num_layers, dropout, train, bidirectional, batch_first)`` and the packed form), run by
:mod:`gt.nn.recurrent`'s own layers. Probed against PyTorch 2.13 on the CPU. Imported by
:mod:`gt.torch_level` only."""

from __future__ import annotations

import builtins
from typing import Any

from gt.nn.recurrent import RNNBase as _RNNBase
from gt.tensor import Tensor


# ----------------------------------------------------------------------------- flat RNNs
class _FlatRNN:
    """What :meth:`RNNBase._run` reads of a recurrent module, over a flat weight list in
    PyTorch's order (per layer and direction ``w_ih, w_hh[, b_ih, b_hh][, w_hr]``)."""

    _run = _RNNBase._run
    _step = _RNNBase._step
    _packed_step = _RNNBase._packed_step

    def __init__(self, mode: str, params: Any, has_biases: bool, num_layers: int,
                 dropout: float, train: bool, bidirectional: bool, n_states: int):  # fmt: skip
        params = list(params)
        dirs = 2 if bidirectional else 1
        if bidirectional and len(params) % 2:
            raise RuntimeError("Odd number of params or hiddens given to a bidirectional RNN")
        per = 4 if has_biases else 2
        units = num_layers * dirs
        if mode == "LSTM" and len(params) == units * (per + 1):
            per += 1  # projections (w_hr)
        if len(params) < units * per:
            raise RuntimeError("Expected more weights in stacked_rnn")
        self.mode, self.params, self.per, self.bias = mode, params, per, bool(has_biases)
        self.num_layers, self.bidirectional = builtins.int(num_layers), bool(bidirectional)
        self.dropout, self.training = builtins.float(dropout), bool(train)

    def _weights(self, layer: int, d: int) -> tuple:
        at = (layer * (2 if self.bidirectional else 1) + d) * self.per
        w = self.params[at : at + self.per]
        b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
        w_hr = w[-1] if self.per in (3, 5) else None
        return w[0], (w[1], w_hr), b_ih, b_hh


def _flat_rnn(mode: str, name: str, args: tuple, kwargs: dict, n_states: int) -> tuple:
    from gt.ops.shaping import stack  # noqa: PLC0415 - (imported with the tensor methods)

    names = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train",
             "bidirectional", "batch_first")  # fmt: skip
    packed = len(args) >= 4 and isinstance(args[3], (list, tuple))  # (data, batch_sizes, hx, params
    if packed:
        names = ("data", "batch_sizes", *names[1:-1])
    given = dict(zip(names, args))
    if len(args) > len(names) or set(given) & set(kwargs) or len({**given, **kwargs}) != len(names):
        got = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args)
        hx = "tuple of Tensors hx" if n_states == 2 else "Tensor hx"
        raise TypeError(
            f"{name}() received an invalid combination of arguments - got ({got}), but expected "
            f"one of:\n * (Tensor data, Tensor batch_sizes, {hx}, tuple of Tensors params, bool "
            "has_biases, int num_layers, float dropout, bool train, bool bidirectional)\n"
            f" * (Tensor input, {hx}, tuple of Tensors params, bool has_biases, int num_layers, "
            "float dropout, bool train, bool bidirectional, bool batch_first)\n"
        )
    a = {**given, **kwargs}
    hx = list(a["hx"]) if n_states == 2 else [a["hx"]]
    rnn = _FlatRNN(mode, a["params"], a["has_biases"], a["num_layers"], a["dropout"], a["train"],
                   a["bidirectional"], n_states)  # fmt: skip
    if packed:
        sizes = [builtins.int(s) for s in a["batch_sizes"].tolist()]
        out, finals = rnn._run(a["data"], hx, sizes)
        return (out, *(stack(f) for f in finals))
    x = a["input"]
    if a["batch_first"]:
        x = x.transpose(0, 1)
    if x.shape[0] == 0:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    out, finals = rnn._run(x, hx)
    if a["batch_first"]:
        out = out.transpose(0, 1)
    return (out, *(stack(f) for f in finals))


def lstm(*args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
    """``torch.lstm(input, (h0, c0), params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first)`` (or ``(data, batch_sizes, hx, ...)`` of a packed sequence, no
    ``batch_first``): ``(output, h_n, c_n)``."""
    return _flat_rnn("LSTM", "lstm", args, kwargs, 2)


def gru(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``torch.gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first)`` (or the packed form): ``(output, h_n)``."""
    return _flat_rnn("GRU", "gru", args, kwargs, 1)


def rnn_tanh(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``torch.rnn_tanh``: :func:`gru`'s arguments, an Elman RNN with tanh."""
    return _flat_rnn("RNN_TANH", "rnn_tanh", args, kwargs, 1)


def rnn_relu(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``torch.rnn_relu``: :func:`gru`'s arguments, an Elman RNN with ReLU."""
    return _flat_rnn("RNN_RELU", "rnn_relu", args, kwargs, 1)
