"""``gt.nn.RNN``/``LSTM``/``GRU`` and their cells: a NumPy reference of the LSTM equations, the
states' layouts, the errors PyTorch gives, and loading weights by PyTorch's names. (Agreement with
PyTorch itself on whole training runs is in ``tests/api/programs/recurrent.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn as nn


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _lstm_reference(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One layer, one direction, ``x`` as ``[seq, batch, feature]``."""
    outs = []
    for t in range(x.shape[0]):
        gates = x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = np.split(gates, 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


def test_lstm_follows_the_gate_equations_in_pytorchs_order(conn):
    gt.manual_seed(1)
    lstm = nn.LSTM(3, 4)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((1, 2, 4)).astype(np.float32)
    c0 = rng.standard_normal((1, 2, 4)).astype(np.float32)
    out, (h, c) = lstm(gt.tensor(x), (gt.tensor(h0), gt.tensor(c0)))
    w = {n: p.detach().numpy() for n, p in lstm.named_parameters()}
    ref_out, ref_h, ref_c = _lstm_reference(
        x, h0[0], c0[0], w["weight_ih_l0"], w["weight_hh_l0"], w["bias_ih_l0"], w["bias_hh_l0"]
    )
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.detach().numpy()[0], ref_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.detach().numpy()[0], ref_c, rtol=1e-5, atol=1e-6)


def test_reverse_direction_reads_the_sequence_backwards(conn):
    gt.manual_seed(3)
    rnn = nn.RNN(2, 3, bidirectional=True, bias=False)
    x = np.random.default_rng(4).standard_normal((4, 1, 2)).astype(np.float32)
    out, hn = rnn(gt.tensor(x))
    w_ih, w_hh = (
        rnn.weight_ih_l0_reverse.detach().numpy(),
        rnn.weight_hh_l0_reverse.detach().numpy(),
    )
    h = np.zeros((1, 3), np.float32)
    back = [None] * 4
    for t in (3, 2, 1, 0):
        h = np.tanh(x[t] @ w_ih.T + h @ w_hh.T)
        back[t] = h
    assert out.shape == (4, 1, 6) and hn.shape == (2, 1, 3)
    np.testing.assert_allclose(out.detach().numpy()[:, :, 3:], np.stack(back), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        hn.detach().numpy()[1], back[0], rtol=1e-5, atol=1e-6
    )  # its last step is t=0


def test_batch_first_moves_only_the_input_and_output(conn):
    gt.manual_seed(5)
    gru = nn.GRU(3, 2, num_layers=2, batch_first=True)
    seq_first = nn.GRU(3, 2, num_layers=2)
    seq_first.load_state_dict(gru.state_dict())
    x = gt.randn(4, 6, 3)  # [batch, seq, feature]
    out, hn = gru(x)
    assert out.shape == (4, 6, 2) and hn.shape == (2, 4, 2)  # the state stays [layers, batch, H]
    out_t, hn_t = seq_first(x.transpose(0, 1))
    np.testing.assert_allclose(
        out.detach().numpy(), out_t.transpose(0, 1).detach().numpy(), rtol=1e-6
    )
    np.testing.assert_allclose(hn.detach().numpy(), hn_t.detach().numpy(), rtol=1e-6)


def test_state_dict_in_pytorchs_layout_loads_and_changes_the_result(conn):
    gt.manual_seed(6)
    a, b = nn.LSTM(2, 3, num_layers=2), nn.LSTM(2, 3, num_layers=2)
    x = gt.randn(3, 1, 2)
    assert not np.allclose(a(x)[0].detach().numpy(), b(x)[0].detach().numpy())
    state = {k: v.numpy() for k, v in a.state_dict().items()}  # plain arrays, as from torch
    assert list(state) == [
        f"{kind}_l{layer}" for layer in (0, 1)
        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    ]  # fmt: skip
    b.load_state_dict({k: gt.tensor(v) for k, v in state.items()})
    np.testing.assert_array_equal(a(x)[0].detach().numpy(), b(x)[0].detach().numpy())


def test_recurrent_layers_refuse_what_pytorch_refuses(conn):
    lstm = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        lstm(gt.randn(2, 1, 5))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D"):
        lstm(gt.randn(2, 1, 1, 3))
    with pytest.raises(RuntimeError, match="Expected hidden\\[0\\] size"):
        lstm(gt.randn(2, 1, 3), (gt.zeros(1, 2, 4), gt.zeros(1, 1, 4)))
    with pytest.raises(TypeError, match="a gt.Tensor or a PackedSequence"):
        lstm([gt.randn(2, 3)])
    with pytest.raises(TypeError, match="tuple \\(h_0, c_0\\)"):
        lstm(gt.randn(2, 1, 3), gt.zeros(1, 1, 4))
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)
    with pytest.raises(RuntimeError, match="hidden has inconsistent size"):
        nn.GRUCell(3, 4)(gt.randn(2, 3), gt.zeros(3, 4))


def test_dropout_between_layers_only_while_training(conn):
    gt.manual_seed(7)
    lstm = nn.LSTM(3, 5, num_layers=2, dropout=0.9)
    x = gt.randn(4, 2, 3)
    lstm.eval()
    first, second = lstm(x)[0].detach().numpy(), lstm(x)[0].detach().numpy()
    np.testing.assert_array_equal(first, second)
    lstm.train()
    assert not np.allclose(lstm(x)[0].detach().numpy(), first)


def test_a_packed_batch_gives_each_sequence_what_it_gives_alone(conn):
    rnn_utils = nn.utils.rnn
    gt.manual_seed(8)
    gru = nn.GRU(2, 3, bidirectional=True)
    rng = np.random.default_rng(9)
    seqs = [gt.tensor(rng.standard_normal((n, 2)).astype(np.float32)) for n in (3, 5, 1)]
    packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 2, 2, 1, 1]
    out, hn = gru(packed)
    padded, lengths = rnn_utils.pad_packed_sequence(out)
    assert lengths.tolist() == [3, 5, 1] and padded.shape == (5, 3, 6)
    for i, s in enumerate(seqs):
        alone, h_alone = gru(s.unsqueeze(1))  # a batch of one, no padding at all
        n = s.shape[0]
        np.testing.assert_allclose(
            padded.detach().numpy()[:n, i], alone.detach().numpy()[:, 0], rtol=1e-5, atol=1e-6
        )
        assert not padded.detach().numpy()[n:, i].any()  # padding stays padding
        np.testing.assert_allclose(
            hn.detach().numpy()[:, i], h_alone.detach().numpy()[:, 0], rtol=1e-5, atol=1e-6
        )


def test_packing_refuses_what_pytorch_refuses(conn):
    rnn_utils = nn.utils.rnn
    x = gt.zeros(4, 2, 3)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(x, [2, 4])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        rnn_utils.pack_padded_sequence(x, [4, 0])
    with pytest.raises(RuntimeError, match="equal to batch_size"):
        rnn_utils.pack_padded_sequence(x, [4, 3, 1])
    packed = rnn_utils.pack_padded_sequence(x, [4, 2])
    with pytest.raises(ValueError, match="total_length to be at least"):
        rnn_utils.pad_packed_sequence(packed, total_length=3)
    assert [t.shape for t in rnn_utils.unpack_sequence(packed)] == [(4, 3), (2, 3)]
    assert packed.to("float64").data.dtype == "float64" and packed.to("float64").sizes == [
        2,
        2,
        1,
        1,
    ]
