"""Recurrent layers with PyTorch's names, parameters and results: ``RNN``, ``LSTM``, ``GRU`` and
their one-step cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

The input projection of a whole sequence is one matmul per layer and direction; the time loop of
a float32 or float64 layer without a projection is one instruction each way per direction
(``lstm_scan``, ``gru_scan``, ``rnn_scan``: see :mod:`gt.runtime.ops.recurrent`), which runs
the hidden-to-hidden product once per time step on the worker, as PyTorch's own CPU loop does.
Other layers (projections, packed sequences, half precision, and any layer under a shard config
or inside ``vmap``) are composed of ordinary per-step tensor ops, as every layer is with
``GT_FUSED_RNN=0``.
Parameters are registered in PyTorch's order and under its names (``weight_ih_l0``,
``bias_hh_l1_reverse`` ...), so a PyTorch ``state_dict`` loads unchanged.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import warnings
from typing import Any

from gt import factories as F
from gt.autograd import is_grad_enabled, no_grad
from gt.nn import functional as fn
from gt.nn.module import Module, Parameter
from gt.nn.resetting import redraw
from gt.nn.utils.rnn import PackedSequence
from gt.ops.autocast import in_force as autocast_in_force
from gt.ops.autocast import lowered as autocast_lowered
from gt.ops.autocast import suspended as autocast_suspended
from gt.ops.base import BATCHING
from gt.ops.shaping import cat, stack
from gt.tensor import Tensor

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]

#: Rows of the stacked gate weights per hidden unit.
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _uniform(shape: tuple[int, ...], bound: float, dtype: Any) -> Parameter:
    with no_grad():
        return Parameter(F.rand(*shape, dtype=dtype) * (2.0 * bound) - bound)


# ----------------------------------------------------------------------------- one time step
def _rnn_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, relu: bool) -> Tensor:
    pre = gi + fn.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def _lstm_step(
    gi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None
) -> tuple[Tensor, Tensor]:
    i, f, g, o = (gi + fn.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = fn.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (h - n)  # = (1 - z) * n + z * h, one op fewer


def _fused(layer: Any, gi: Tensor, carry: list, w_hh: tuple, b_hh: Tensor | None) -> bool:
    """Whether this direction runs as one ``lstm_scan`` / ``gru_scan`` / ``rnn_scan`` instruction
    (see :mod:`gt.runtime.ops.recurrent`): float32 or float64 throughout, no projection, at least
    one step, no shard config in force (the loops run on one worker; composed, each step's ops
    follow the sharding rules) and not inside ``vmap`` (the loops have no batching rule; each
    step's ops do); ``GT_FUSED_RNN=0`` keeps every layer composed of per-step ops (to compare
    them)."""
    if gi.shape[0] == 0 or not _FUSED_RNN or BATCHING or not gi._conn.plans_nothing():
        return False
    if layer.mode == "LSTM" and w_hh[1] is not None:
        return False
    dtype = gi.dtype
    if dtype not in ("float32", "float64"):
        return False
    return all(t.dtype == dtype for t in (*carry, w_hh[0], *([b_hh] if b_hh is not None else [])))


_FUSED_RNN = os.environ.get("GT_FUSED_RNN", "1") != "0"


# ----------------------------------------------------------------------------- layers
class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: the parameters, the shape checks and the loop
    over layers and directions.

    Args:
        mode: ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``.
        input_size: features of each input step.
        hidden_size: features of the hidden state.
        num_layers: stacked layers; each after the first reads the previous one's output.
        bias: whether the layers learn ``bias_ih`` and ``bias_hh``.
        batch_first: inputs and outputs are ``[batch, seq, feature]`` (else ``[seq, batch,
            feature]``); the hidden states keep ``[layers * directions, batch, hidden]``.
        dropout: dropout on the outputs of every layer but the last, while training.
        bidirectional: also run each layer backwards in time; outputs are concatenated.
        proj_size: with an LSTM, ``h_t`` projected to this many features by ``weight_hr``
            (smaller than ``hidden_size``; the cell state keeps ``hidden_size``).
    """

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        if (
            not isinstance(dropout, numbers.Number)
            or not 0 <= dropout <= 1
            or isinstance(dropout, bool)
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an "
                "element being zeroed"
            )
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=2,
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size  # the features of h (and of each layer's output)
        bound = 1.0 / math.sqrt(hidden_size)
        names = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else out_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [
                    (f"weight_ih{sfx}", (gate_size, layer_in)),
                    (f"weight_hh{sfx}", (gate_size, out_size)),
                ]
                if bias:
                    shapes += [(f"bias_ih{sfx}", (gate_size,)), (f"bias_hh{sfx}", (gate_size,))]
                if proj_size:
                    shapes.append((f"weight_hr{sfx}", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name, _uniform(shape, bound, dtype))
                    names.append(name)
        self._flat_weights_names = names

    def reset_parameters(self) -> None:
        """Draw every weight and bias again, uniform in ``±1/sqrt(hidden_size)``."""
        redraw(self, tuple(self._flat_weights_names), 1.0 / math.sqrt(self.hidden_size))

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters per layer and direction, each ``[w_ih, w_hh(, b_ih, b_hh)]``."""
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        flat = [getattr(self, n) for n in self._flat_weights_names]
        return [flat[i : i + per] for i in range(0, len(flat), per)]

    def flatten_parameters(self) -> None:
        """PyTorch packs weights for cuDNN here; GT's layers need no packing (a no-op)."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ------------------------------------------------------------------ forward
    def _check_input(self, x: Any) -> bool:
        """Check ``x``'s rank and features; returns whether it has a batch dimension."""
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{type(self).__name__}: input must be a gt.Tensor or a PackedSequence, got "
                f"{type(x).__name__}"
            )
        if x.dim() not in (2, 3):
            raise ValueError(
                f"{type(self).__name__}: Expected input to be 2D or 3D, got {x.dim()}D instead"
            )
        if x.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {x.shape[-1]}"
            )
        self._check_dtype(x)
        return x.dim() == 3

    def _check_dtype(self, x: Tensor) -> None:
        """PyTorch's refusal of an input whose dtype is not the weights' (outside autocast): a
        float64 batch from NumPy failed deep inside a gate product, naming its shapes."""
        w = getattr(self, self._flat_weights_names[0], None)
        if w is not None and x.dtype != w.dtype and not autocast_in_force():
            raise ValueError(
                f"RNN input dtype ({x.dtype}) does not match weight dtype ({w.dtype}). Convert "
                f"input: input.to({w.dtype}), or convert model: model.to({x.dtype})"
            )

    def _initial(self, hx: Any, batch: int, like: Tensor, batched: bool, what: str) -> Tensor:
        dirs = 2 if self.bidirectional else 1
        features = self.proj_size if self.proj_size and what == "hidden[0]" else self.hidden_size
        want = (self.num_layers * dirs, batch, features)
        if hx is None:
            return F.zeros(*want, dtype=like.dtype)
        if not isinstance(hx, Tensor):
            raise TypeError(f"{type(self).__name__}: {what} must be a gt.Tensor")
        if not batched:
            if hx.dim() != 2:
                raise RuntimeError(
                    f"For unbatched 2-D input, {what} should also be 2-D but got "
                    f"{hx.dim()}-D tensor"
                )
            hx = hx.unsqueeze(1)
        if tuple(hx.shape) != want:
            raise RuntimeError(f"Expected {what} size {want}, got {tuple(hx.shape)}")
        return hx

    def _weights(self, layer: int, d: int) -> tuple:
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        b_ih = getattr(self, f"bias_ih{sfx}") if self.bias else None
        b_hh = getattr(self, f"bias_hh{sfx}") if self.bias else None
        w_hr = getattr(self, f"weight_hr{sfx}") if self.proj_size else None
        weights = (
            getattr(self, f"weight_ih{sfx}"),
            getattr(self, f"weight_hh{sfx}"),
            w_hr,
            b_ih,
            b_hh,
        )
        rounded = self.__dict__.get("_rounded")  # (an LSTM under autocast: see LSTM.forward)
        if rounded is not None:
            weights = tuple(rounded(w) for w in weights)
        w_ih, w_hh, w_hr, b_ih, b_hh = weights
        return w_ih, (w_hh, w_hr), b_ih, b_hh

    def _run(
        self, x: Tensor, states: list[Tensor], sizes: list[int] | None = None
    ) -> tuple[Tensor, list[list[Tensor]]]:
        """Run every layer and direction over ``x``: ``[seq, batch, feature]``, or with ``sizes``
        a packed sequence's data (``sizes[t]`` sequences run at step ``t``, longest first).

        ``states`` holds the initial states (one tensor for RNN/GRU, h and c for LSTM), each
        ``[layers * directions, batch, hidden]``; returns the last layer's output (laid out as
        ``x``) and the final states as lists per state kind."""
        dirs = 2 if self.bidirectional else 1
        seq = x.shape[0] if sizes is None else len(sizes)
        starts = [0] if sizes is None else [0, *itertools.accumulate(sizes)]
        finals: list[list[Tensor]] = [[] for _ in states]
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
                gi = fn.linear(layer_in, w_ih, b_ih)  # every step's input projection at once
                carry = [s[layer * dirs + d] for s in states]
                if sizes is None and _fused(self, gi, carry, w_hh, b_hh):
                    scan = {"LSTM": "lstm_scan", "GRU": "gru_scan"}.get(self.mode, "rnn_scan")
                    inputs = [gi, *carry, w_hh[0]] + ([b_hh] if b_hh is not None else [])
                    at = {"reverse": bool(d)}
                    if scan == "rnn_scan":
                        at["relu"] = self.mode == "RNN_RELU"
                    elif not (is_grad_enabled() and any(t.requires_grad for t in inputs)):
                        at["grad"] = False  # (no backward: the result holds the states only)
                    y = gi._apply(scan, inputs, at)
                    last = 0 if d else seq - 1
                    outs.append(y[0])  # (each step's h; an LSTM's c at [1])
                    for kind in range(len(carry)):
                        finals[kind].append(y[kind, last])
                    continue
                steps: list[Tensor] = [None] * seq  # type: ignore[list-item]
                for t in range(seq - 1, -1, -1) if d else range(seq):
                    if sizes is None:
                        carry = self._step(gi[t], carry, w_hh, b_hh)
                    else:  # only the first sizes[t] sequences still run; the others keep state
                        carry = self._packed_step(gi[starts[t] : starts[t + 1]], carry, w_hh, b_hh)
                    steps[t] = carry[0] if sizes is None else carry[0][: sizes[t]]
                outs.append(stack(steps) if sizes is None else cat(steps))
                for kind, s in enumerate(carry):
                    finals[kind].append(s)
            layer_in = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = fn.dropout(layer_in, self.dropout, True)
        return layer_in, finals

    def _packed_step(self, gi: Tensor, carry: list[Tensor], w_hh: tuple, b_hh: Any) -> list:
        run = gi.shape[0]
        if run == carry[0].shape[0]:
            return self._step(gi, carry, w_hh, b_hh)
        new = self._step(gi, [s[:run] for s in carry], w_hh, b_hh)
        return [cat([n, s[run:]]) for n, s in zip(new, carry)]

    def _step(self, gi: Tensor, carry: list[Tensor], w_hh: tuple, b_hh: Tensor | None) -> list:
        """One time step; ``w_hh`` is ``(weight_hh, weight_hr or None)``."""
        if self.mode == "LSTM":
            w_hh, w_hr = w_hh
            h, c = _lstm_step(gi, carry[0], carry[1], w_hh, b_hh)
            return [h if w_hr is None else fn.linear(h, w_hr), c]
        w_hh = w_hh[0]
        if self.mode == "GRU":
            return [_gru_step(gi, carry[0], w_hh, b_hh)]
        return [_rnn_step(gi, carry[0], w_hh, b_hh, self.mode == "RNN_RELU")]

    def _forward(self, x: Any, hx: list[Any], names: list[str]) -> tuple[Any, list[Tensor]]:
        if isinstance(x, PackedSequence):
            self._check_dtype(x.data)
            return self._forward_packed(x, hx, names)
        batched = self._check_input(x)
        if not batched:
            x = x.unsqueeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        states = [self._initial(h, x.shape[1], x, batched, n) for h, n in zip(hx, names)]
        out, finals = self._run(x, states)
        final = [stack(f) for f in finals]
        if not batched:
            return out.squeeze(1), [f.squeeze(1) for f in final]
        if self.batch_first:
            out = out.transpose(0, 1)
        return out, final

    def _forward_packed(
        self, x: PackedSequence, hx: list[Any], names: list[str]
    ) -> tuple[PackedSequence, list[Tensor]]:
        data = x.data
        if data.dim() != 2 or data.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {data.shape[-1]}"
            )
        batch = x.sizes[0]
        states = []
        for h, n in zip(hx, names):
            if h is not None and x.sorted_indices is not None:
                h = h.index_select(1, x.sorted_indices)  # states come in the caller's order
            states.append(self._initial(h, batch, data, True, n))
        out, finals = self._run(data, states, x.sizes)
        final = [stack(f) for f in finals]
        if x.unsorted_indices is not None:
            final = [f.index_select(1, x.unsorted_indices) for f in final]
        return x._with_data(out), final


class RNN(RNNBase):
    """An Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ReLU).

    Takes PyTorch's arguments (see :class:`RNNBase`) plus ``nonlinearity`` (``"tanh"`` or
    ``"relu"``). ``forward(input, hx=None)`` returns ``(output, h_n)``.
    """

    def __init__(self, *args: Any, nonlinearity: str = "tanh", **kwargs: Any):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h,) = self._forward(input, [hx], ["hx"])
        return out, h


class LSTM(RNNBase):
    """Long short-term memory, PyTorch's gates in PyTorch's order (input, forget, cell, output).

    ``forward(input, (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if hx is None:
            hx = (None, None)
        elif not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError("LSTM: hx must be a tuple (h_0, c_0)")
        low = autocast_lowered("lstm")
        if low is not None and input.dtype in ("float32", "float16", "bfloat16"):
            return self._forward_lowered(low, input, list(hx))
        out, (h, c) = self._forward(input, list(hx), ["hidden[0]", "hidden[1]"])
        return out, (h, c)

    def _forward_lowered(self, low: str, input: Tensor, hx: list) -> tuple:
        """Under CPU autocast PyTorch runs an LSTM on its inputs and weights rounded to ``low``
        and returns ``low`` tensors; here the recurrence runs in float32 on the rounded values
        and its results are rounded once (PyTorch's oneDNN kernel also rounds between layers:
        values can differ by a few ulps of ``low``)."""

        def rounded(t: Any) -> Any:
            return t.to(low).float() if isinstance(t, Tensor) else t

        self._rounded = rounded
        try:
            with autocast_suspended():
                hx = [rounded(h) for h in hx]
                out, (h, c) = self._forward(rounded(input), hx, ["hidden[0]", "hidden[1]"])
        finally:
            del self._rounded
        return out.to(low), (h.to(low), c.to(low))


class GRU(RNNBase):
    """Gated recurrent unit, PyTorch's gates in PyTorch's order (reset, update, new).

    ``forward(input, hx=None)`` returns ``(output, h_n)``.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h,) = self._forward(input, [hx], ["hx"])
        return out, h


# ----------------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """What the cells share: ``weight_ih``, ``weight_hh`` (and biases), uniform in
    ``±1/sqrt(hidden_size)``, and the input checks."""

    #: Rows of the stacked gate weights per hidden unit.
    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        gates = num_chunks
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = _uniform((gates * hidden_size, input_size), bound, dtype)
        self.weight_hh = _uniform((gates * hidden_size, hidden_size), bound, dtype)
        if bias:
            self.bias_ih = _uniform((gates * hidden_size,), bound, dtype)
            self.bias_hh = _uniform((gates * hidden_size,), bound, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def reset_parameters(self) -> None:
        """Draw every weight and bias again, uniform in ``±1/sqrt(hidden_size)``."""
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        redraw(self, names, 1.0 / math.sqrt(self.hidden_size))

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, x: Any, states: list[Any]) -> tuple[Tensor, list[Tensor], bool]:
        if not isinstance(x, Tensor):
            raise TypeError(f"{type(self).__name__}: input must be a gt.Tensor")
        if x.dim() not in (1, 2):
            raise ValueError(
                f"{type(self).__name__}: Expected input to be 1D or 2D, got {x.dim()}D instead"
            )
        if x.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input has inconsistent input_size: got {x.shape[-1]} expected {self.input_size}"
            )
        batched = x.dim() == 2
        if not batched:
            x = x.unsqueeze(0)
        out = []
        for s in states:
            if s is None:
                s = F.zeros(x.shape[0], self.hidden_size, dtype=x.dtype)
            elif not batched:
                s = s.unsqueeze(0)
            if tuple(s.shape) != (x.shape[0], self.hidden_size):
                raise RuntimeError(
                    f"hidden has inconsistent size: got {tuple(s.shape)}, expected "
                    f"{(x.shape[0], self.hidden_size)}"
                )
            out.append(s)
        return x, out, batched


class RNNCell(RNNCellBase):
    """One step of :class:`RNN`: ``forward(input, hx=None)`` returns ``h'``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, self.gates, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._prepare(input, [hx])
        gi = fn.linear(x, self.weight_ih, self.bias_ih)
        h = _rnn_step(gi, h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One step of :class:`LSTM`: ``forward(input, (h, c)=None)`` returns ``(h', c')``."""

    gates = 4

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__(input_size, hidden_size, bias, self.gates, device, dtype)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:
        x, (h, c), batched = self._prepare(input, [None, None] if hx is None else list(hx))
        gi = fn.linear(x, self.weight_ih, self.bias_ih)
        h, c = _lstm_step(gi, h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One step of :class:`GRU`: ``forward(input, hx=None)`` returns ``h'``."""

    gates = 3

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__(input_size, hidden_size, bias, self.gates, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._prepare(input, [hx])
        gi = fn.linear(x, self.weight_ih, self.bias_ih)
        h = _gru_step(gi, h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
