"""Recurrent networks: an LSTM sequence classifier, a bidirectional GRU with initial states, a
character RNN with ReLU, cells unrolled by hand (batched and not), parameter names and reprs, an
LSTM language model trained by truncated backpropagation with tied weights, a GRU sequence to
sequence model with teacher forcing, stacked Elman RNNs with given states."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


@program(rtol=5e-4, atol=5e-5)
def lstm_sequence_classifier(torch):
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(5, 8, num_layers=2, batch_first=True)
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            out, (h, c) = self.lstm(x)
            return self.head(out[:, -1]), h, c

    model = set_weights(torch, Classifier(), seed=3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.tensor(arr(4, 6, 7, 5))
    y = torch.tensor(ints(5, 3, 6))
    losses = []
    for _ in range(4):
        logits, h, c = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "logits": logits, "h": h, "c": c, **grads(model)}


@program(rtol=5e-4, atol=5e-5)
def gru_bidirectional_with_initial_state(torch):
    gru = set_weights(torch, torch.nn.GRU(4, 6, num_layers=2, bidirectional=True), seed=7)
    x = torch.tensor(arr(8, 5, 3, 4), requires_grad=True)  # [seq, batch, feature]
    h0 = torch.tensor(arr(9, 4, 3, 6, scale=0.5), requires_grad=True)
    out, hn = gru(x, h0)
    (out.pow(2).mean() + hn.sum()).backward()
    return {
        "out": out,
        "hn": hn,
        "x_grad": x.grad,
        "h0_grad": h0.grad,
        "shapes": [list(out.shape), list(hn.shape)],
        **grads(gru),
    }


@program(rtol=5e-4, atol=5e-5)
def char_rnn_relu_training(torch):
    nn = torch.nn
    vocab = 11

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, 6)
            self.rnn = nn.RNN(6, 10, nonlinearity="relu", batch_first=True)
            self.out = nn.Linear(10, vocab)

        def forward(self, idx, h=None):
            o, h = self.rnn(self.emb(idx), h)
            return self.out(o), h

    model = set_weights(torch, CharRNN(), seed=11, scale=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    seq = ints(12, vocab, 4, 9)
    inp, tgt = torch.tensor(seq[:, :-1]), torch.tensor(seq[:, 1:])
    losses = []
    h = None
    for _ in range(3):
        logits, h = model(inp, None if h is None else h.detach())
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "h": h, "emb_grad": model.emb.weight.grad}


@program(rtol=5e-4, atol=5e-5)
def cells_unrolled_by_hand(torch):
    nn = torch.nn
    lstm = set_weights(torch, nn.LSTMCell(3, 5), seed=13)
    gru = set_weights(torch, nn.GRUCell(3, 5, bias=False), seed=14)
    rnn = set_weights(torch, nn.RNNCell(3, 5, nonlinearity="relu"), seed=15)
    xs = torch.tensor(arr(16, 4, 2, 3))
    h, c = torch.zeros(2, 5), torch.zeros(2, 5)
    g = None
    r = torch.tensor(arr(17, 2, 5))
    for t in range(4):
        h, c = lstm(xs[t], (h, c))
        g = gru(xs[t], g)
        r = rnn(xs[t], r)
    total = h.sum() + c.sum() + g.sum() + r.sum()
    total.backward()
    single = torch.tensor(arr(18, 3))  # unbatched: one sample of 3 features
    h1, c1 = lstm(single)
    return {
        "h": h,
        "c": c,
        "g": g,
        "r": r,
        "h1": h1,
        "c1": c1,
        "lstm_w_grad": lstm.weight_ih.grad,
        "gru_w_grad": gru.weight_hh.grad,
        "rnn_b_grad": rnn.bias_hh.grad,
    }


@program
def recurrent_names_shapes_and_reprs(torch):
    nn = torch.nn
    lstm = nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True, dropout=0.25)
    gru = nn.GRU(2, 3, bias=False)
    cells = [nn.RNN(3, 4, nonlinearity="relu"), nn.GRUCell(3, 4, bias=False),
             nn.RNNCell(3, 4, nonlinearity="relu"), nn.LSTMCell(2, 2)]  # fmt: skip
    lstm.eval()
    x = torch.tensor(arr(20, 2, 3, 3))
    out, (h, c) = lstm(x)
    unbatched, hn = gru(torch.tensor(arr(21, 4, 2)))
    return {
        "reprs": [repr(m) for m in [lstm, gru, *cells]],
        "names": [n for n, _ in lstm.named_parameters()],
        "shapes": [list(p.shape) for p in lstm.parameters()],
        "gru_names": list(gru.state_dict().keys()),
        "out_shape": list(out.shape),
        "h_shape": list(h.shape),
        "unbatched_shapes": [list(unbatched.shape), list(hn.shape)],
        "counts": [len(lstm.all_weights), len(lstm.all_weights[0])],
        "init_in_bound": bool(
            np.all(np.abs(lstm.weight_hh_l1.detach().numpy()) <= 0.5 + 1e-6)  # 1/sqrt(4)
        ),
    }


@program(rtol=5e-4, atol=5e-5)
def packed_variable_length_lstm(torch):
    rnn_utils = torch.nn.utils.rnn
    lstm = set_weights(torch, torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True), seed=30)
    seqs = [torch.tensor(arr(31 + i, n, 3), requires_grad=True) for i, n in enumerate([2, 5, 3])]
    padded = rnn_utils.pad_sequence(seqs)  # [5, 3, 3], unsorted lengths
    packed = rnn_utils.pack_padded_sequence(padded, [2, 5, 3], enforce_sorted=False)
    h0 = torch.tensor(arr(35, 4, 3, 4, scale=0.3))
    out, (h, c) = lstm(packed, (h0, torch.zeros(4, 3, 4)))
    unpacked, lengths = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=6)
    (unpacked.pow(2).sum() + h.sum()).backward()
    return {
        "batch_sizes": packed.batch_sizes,
        "sorted": packed.sorted_indices,
        "unsorted": packed.unsorted_indices,
        "data": out.data,
        "unpacked": unpacked,
        "lengths": lengths,
        "h": h,
        "c": c,
        "seq_grads": [s.grad for s in seqs],
        **grads(lstm),
    }


@program(rtol=5e-4, atol=5e-5)
def packed_gru_classifier_sorted_batch(torch):
    nn = torch.nn
    rnn_utils = nn.utils.rnn
    emb = set_weights(torch, nn.Embedding(9, 4), seed=40)
    gru = set_weights(torch, nn.GRU(4, 6, batch_first=True), seed=41)
    head = set_weights(torch, nn.Linear(6, 2), seed=42)
    params = [*emb.parameters(), *gru.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=0.01)
    tokens = torch.tensor(ints(43, 9, 4, 6))
    lengths = [6, 4, 4, 1]  # sorted: enforce_sorted stays True
    labels = torch.tensor(ints(44, 2, 4))
    losses = []
    for _ in range(3):
        packed = rnn_utils.pack_padded_sequence(emb(tokens), lengths, batch_first=True)
        _, h = gru(packed)
        loss = nn.functional.cross_entropy(head(h[-1]), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    seqs = rnn_utils.unpack_sequence(rnn_utils.pack_sequence([tokens[0, :3], tokens[1, :2]]))
    left = rnn_utils.pad_sequence([tokens[0, :2], tokens[1, :3]], True, -1, padding_side="left")
    return {"losses": losses, "h": h, "unpacked": seqs, "left_padded": left}


@program(rtol=5e-4, atol=5e-5)
def lstm_language_model_tbptt_tied_weights(torch):
    # Truncated backpropagation through time: a 2-layer LSTM whose state is carried (detached)
    # from chunk to chunk, decoder tied to the embedding, gradients clipped by norm
    nn = torch.nn
    vocab, dim, chunk, batch = 20, 16, 8, 4

    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.rnn = nn.LSTM(dim, dim, num_layers=2)
            self.dec = nn.Linear(dim, vocab)
            self.dec.weight = self.emb.weight

        def forward(self, x, state):
            out, state = self.rnn(self.emb(x), state)
            return self.dec(out), state

    model = set_weights(torch, LanguageModel(), seed=21, scale=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    data = ints(22, vocab, chunk * 4 + 1, batch)  # [time, batch]
    state = (torch.zeros(2, batch, dim), torch.zeros(2, batch, dim))
    losses = []
    for i in range(4):
        x = torch.tensor(data[i * chunk : (i + 1) * chunk])
        y = torch.tensor(data[i * chunk + 1 : (i + 1) * chunk + 1])
        logits, state = model(x, state)
        state = tuple(s.detach() for s in state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "h": state[0], "c": state[1], **grads(model)}


@program(rtol=5e-4, atol=5e-5)
def seq2seq_bigru_encoder_grucell_decoder_teacher_forcing(torch):
    nn = torch.nn
    vocab, dim = 15, 12

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.enc = nn.GRU(dim, dim, bidirectional=True, batch_first=True)
            self.bridge = nn.Linear(2 * dim, dim)
            self.cell = nn.GRUCell(dim, dim)
            self.out = nn.Linear(dim, vocab)

        def forward(self, src, tgt):
            _, hn = self.enc(self.emb(src))
            h = torch.tanh(self.bridge(torch.cat([hn[0], hn[1]], -1)))
            loss = 0.0
            for t in range(tgt.shape[1] - 1):  # teacher forcing: the true previous token
                h = self.cell(self.emb(tgt[:, t]), h)
                loss = loss + nn.functional.cross_entropy(self.out(h), tgt[:, t + 1])
            return loss / (tgt.shape[1] - 1)

    model = set_weights(torch, Seq2Seq(), seed=23, scale=0.3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    src, tgt = torch.tensor(ints(24, vocab, 5, 9)), torch.tensor(ints(25, vocab, 5, 7))
    losses = []
    for _ in range(4):
        loss = model(src, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, **grads(model)}


@program(rtol=5e-4, atol=5e-5)
def elman_rnn_given_state_reversed_and_clipped(torch):
    # A 2-layer bidirectional tanh RNN and a relu one fed its output, initial states given,
    # gradients clipped by value, RMSprop
    nn = torch.nn
    first = set_weights(torch, nn.RNN(5, 7, num_layers=2, bidirectional=True), seed=26)
    second = set_weights(torch, nn.RNN(14, 6, nonlinearity="relu", bias=False), seed=27)
    head = set_weights(torch, nn.Linear(6, 3), seed=28)
    params = [*first.parameters(), *second.parameters(), *head.parameters()]
    opt = torch.optim.RMSprop(params, lr=1e-2)
    x = torch.tensor(arr(29, 9, 4, 5))
    h1 = torch.tensor(arr(30, 4, 4, 7, scale=0.2))
    h2 = torch.tensor(arr(31, 1, 4, 6, scale=0.2))
    y = torch.tensor(ints(32, 3, 4))
    losses = []
    for _ in range(4):
        out, _ = first(x, h1)
        out, hn = second(out, h2)
        loss = nn.functional.cross_entropy(head(hn[0]), y) + out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(params, 0.5)
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "out": out, "hn": hn, "first_w": first.weight_hh_l1_reverse.grad}
