"""``gt.nn`` modules and losses against hand-written NumPy references, and an MLP that learns."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F


def _np(t):
    return t.detach().numpy().astype(np.float64)


def _log_softmax(z):
    s = z - z.max(1, keepdims=True)
    return s - np.log(np.exp(s).sum(1, keepdims=True))


def test_linear_forward_backward_and_init_match_numpy(conn):
    gt.manual_seed(0)
    layer = nn.Linear(64, 32)
    w, b = _np(layer.weight), _np(layer.bias)
    bound = 1 / np.sqrt(64)
    assert layer.weight.shape == (32, 64) and layer.bias.shape == (32,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.1 * bound  # uniform(-k, k) has std k/sqrt(3)
    x = np.random.default_rng(1).standard_normal((5, 64))
    y = np.random.default_rng(2).standard_normal((5, 32))
    out = layer(gt.tensor(x, dtype="float32"))
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-4, atol=1e-5)
    F.mse_loss(out, gt.tensor(y, dtype="float32")).backward()
    d = 2 * (x @ w.T + b - y) / y.size
    np.testing.assert_allclose(layer.weight.grad.numpy(), d.T @ x, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.numpy(), d.sum(0), rtol=1e-4, atol=1e-6)
    assert nn.Linear(3, 2, bias=False).bias is None


def test_module_registry_names_and_modes(conn):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.5))
            self.head = nn.Linear(4, 2)
            self.scale = nn.Parameter(gt.ones(1))
            self.register_buffer("steps", gt.zeros(1, dtype="int64"))
            self.note = "plain attributes stay plain"

        def forward(self, x):
            return self.head(self.body(x)) * self.scale

    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "head.weight", "head.bias"]
    assert len(list(net.parameters())) == 5 and [n for n, _ in net.named_buffers()] == ["steps"]
    assert [type(m).__name__ for m in net.children()] == ["Sequential", "Linear"]
    assert len(list(net.modules())) == 6
    assert net.training and all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert net.body[2].training and net(gt.randn(2, 3)).shape == (2, 2)
    assert isinstance(net.scale, nn.Parameter) and net.note.startswith("plain")
    assert "(head): Linear(in_features=4, out_features=2, bias=True)" in repr(net)


def test_state_dict_holds_tensors_and_round_trips_keeping_parameter_objects(conn):
    a = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    b = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    sd = {k: v.clone() for k, v in a.state_dict().items()}  # PyTorch's snapshot idiom
    assert list(sd) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert all(isinstance(v, gt.Tensor) and not v.requires_grad for v in sd.values())
    w_obj = b[0].weight
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b[0].weight is w_obj and b[0].weight.requires_grad and b[0].weight.is_leaf
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())
    live = b.state_dict()["0.weight"]  # as in PyTorch, state dict values follow the model
    with gt.no_grad():
        b[0].weight.fill_(123.0)
    assert live[0, 0].item() == 123.0 and sd["0.weight"][0, 0].item() != 123.0
    sd = {k: v.numpy() for k, v in sd.items()}  # NumPy arrays load too
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "1.bias"'):
        b.load_state_dict({k: v for k, v in sd.items() if k != "1.bias"})
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.bias: .*\[5\].*\[4\]"):
        b.load_state_dict({**sd, "0.bias": np.zeros(5, np.float32)})
    assert b.load_state_dict({"0.bias": np.ones(4, np.float32)}, strict=False).missing_keys == [
        "0.weight",
        "1.weight",
        "1.bias",
    ]
    assert b[0].bias.tolist() == [1.0] * 4


def test_containers_and_dtype_conversion(conn):
    seq = nn.Sequential(nn.Linear(2, 3))
    seq.append(nn.Tanh())
    assert len(seq) == 2 and isinstance(seq[-1], nn.Tanh) and len(seq[:1]) == 1
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    holder = nn.Module()
    holder.blocks = blocks
    holder.heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
    assert len(list(holder.parameters())) == 8
    w = seq[0].weight
    seq.double()
    assert seq[0].weight is w and w.dtype == "float64" and w.requires_grad
    assert seq(gt.ones(1, 2, dtype="float64")).dtype == "float64"


@pytest.mark.parametrize(
    "module,ref",
    [
        (nn.ReLU(), lambda x: np.maximum(x, 0)),
        (nn.Tanh(), np.tanh),
        (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
        (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
        (
            nn.GELU(approximate="tanh"),
            lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        ),
        (nn.Softmax(dim=1), lambda x: np.exp(_log_softmax(x))),
        (nn.LogSoftmax(1), _log_softmax),
        (nn.Flatten(), lambda x: x.reshape(len(x), -1)),
        (nn.Identity(), lambda x: x),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "",
)
def test_activation_modules_match_numpy(conn, module, ref):
    x = np.random.default_rng(0).standard_normal((4, 5))
    np.testing.assert_allclose(module(gt.tensor(x)).numpy(), ref(x), rtol=1e-5, atol=1e-6)


def test_layer_norm_matches_numpy(conn):
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    ln = nn.LayerNorm((3, 4), eps=1e-5)
    with gt.no_grad():
        ln.weight.copy_(np.linspace(0.5, 2, 12, dtype=np.float32).reshape(3, 4))
        ln.bias.fill_(0.25)
    mu = x.mean((1, 2), keepdims=True)
    var = x.var((1, 2), keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5) * _np(ln.weight) + 0.25
    np.testing.assert_allclose(ln(gt.tensor(x)).detach().numpy(), want, rtol=1e-4, atol=1e-5)
    assert len(list(nn.LayerNorm(4, elementwise_affine=False).parameters())) == 0


def test_embedding_gathers_rows_and_accumulates_repeated_gradients(conn):
    emb = nn.Embedding(5, 3)
    idx = np.array([[1, 4], [1, 1]])
    w = _np(emb.weight)
    out = emb(gt.tensor(idx))
    np.testing.assert_allclose(out.detach().numpy(), w[idx], rtol=1e-6)
    out.sum().backward()
    want = np.zeros((5, 3))
    np.add.at(want, idx, 1.0)
    np.testing.assert_allclose(emb.weight.grad.numpy(), want)


def test_dropout_scales_survivors_in_training_and_is_identity_in_eval(conn):
    gt.manual_seed(3)
    drop = nn.Dropout(0.25)
    y = drop(gt.ones(4000)).numpy()
    kept = y != 0
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    drop.eval()
    x = gt.randn(10)
    assert drop(x) is x
    assert F.dropout(x, 0.0) is x and F.dropout(x, 1.0).abs().sum().item() == 0.0


def test_losses_match_numpy_references(conn):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((6, 4))
    t = np.array([0, 3, 1, 1, 2, 0])
    p = 1 / (1 + np.exp(-rng.standard_normal(6)))
    y = (rng.random(6) > 0.5).astype(np.float64)
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    logp = _log_softmax(z)
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    checks = [
        (F.mse_loss(gt.tensor(a), gt.tensor(b)), ((a - b) ** 2).mean()),
        (F.mse_loss(gt.tensor(a), gt.tensor(b), reduction="sum"), ((a - b) ** 2).sum()),
        (nn.MSELoss(reduction="none")(gt.tensor(a), gt.tensor(b)), (a - b) ** 2),
        (nn.L1Loss()(gt.tensor(a), gt.tensor(b)), np.abs(a - b).mean()),
        (F.cross_entropy(gt.tensor(z), gt.tensor(t)), -logp[np.arange(6), t].mean()),
        (nn.CrossEntropyLoss(reduction="none")(gt.tensor(z), gt.tensor(t)), -logp[np.arange(6), t]),
        (
            F.cross_entropy(gt.tensor(z), gt.tensor(np.where(t == 1, -100, t))),
            -logp[t != 1, t[t != 1]].mean(),
        ),
        (F.cross_entropy(gt.tensor(z[0]), gt.tensor(t[0])), -logp[0, t[0]]),
        (nn.NLLLoss()(gt.tensor(logp), gt.tensor(t)), -logp[np.arange(6), t].mean()),
        (F.binary_cross_entropy(gt.tensor(p), gt.tensor(y)), bce.mean()),
        (nn.BCELoss(reduction="sum")(gt.tensor(p), gt.tensor(y)), bce.sum()),
        (nn.BCEWithLogitsLoss()(gt.tensor(np.log(p / (1 - p))), gt.tensor(y)), bce.mean()),
        (nn.cross_entropy_loss(gt.tensor(z), gt.tensor(t)), -logp[np.arange(6), t].mean()),
        (nn.mse_loss(gt.tensor(a), gt.tensor(b)), ((a - b) ** 2).mean()),
    ]
    for got, want in checks:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_binary_cross_entropy_clamps_log_at_minus_100(conn):
    loss = F.binary_cross_entropy(gt.tensor([0.0, 1.0]), gt.tensor([1.0, 0.0]))
    assert loss.item() == pytest.approx(100.0)


def test_clip_grad_norm_scales_gradients_without_sync(conn):
    w = gt.tensor([3.0, 4.0], requires_grad=True)
    (w * w).sum().backward()  # grad [6, 8], norm 10
    total = nn.utils.clip_grad_norm_([w], max_norm=5.0)
    assert total.item() == pytest.approx(10.0)
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 4.0], rtol=1e-5)


def test_init_functions_follow_pytorch_formulas(conn):
    w = nn.Parameter(gt.zeros(200, 100))
    nn.init.xavier_uniform_(w)
    bound = np.sqrt(6 / 300)
    v = w.detach().numpy()
    assert np.abs(v).max() <= bound and v.std() > 0.5 * bound / np.sqrt(3)
    nn.init.zeros_(w)
    assert w.detach().numpy().max() == 0.0 and w.is_leaf and w.requires_grad
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.detach().numpy().std() - np.sqrt(2 / 100)) < 0.02


def test_two_layer_mlp_trains_to_a_low_loss(conn):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 2)).astype(np.float32)
    labels = ((x[:, 0] * x[:, 1]) > 0).astype(np.int64)  # XOR of the signs: not linearly separable
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = gt.optim.Adam(model.parameters(), lr=0.03)
    xs, ys = gt.tensor(x), gt.tensor(labels)
    first = None
    for step in range(300):
        opt.zero_grad()
        loss = F.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        if step == 0:
            first = loss.item()
    final = loss.item()
    accuracy = (model(xs).argmax(1) == ys).float().mean().item()
    assert first > 0.6 and final < 0.1 and accuracy > 0.97


def test_prototype_style_training_loop_runs_unchanged(conn):
    """The GT prototype's MLP example: manual SGD on model.parameters() under no_grad."""

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 1)

        def forward(self, x):
            return nn.sigmoid(self.fc2(nn.relu(self.fc1(x))))

    rng = np.random.default_rng(42)
    x_np = rng.standard_normal((100, 4)).astype(np.float32)
    y_np = (x_np.sum(axis=1) > 0).astype(np.float32).reshape(-1, 1)
    gt.manual_seed(1)
    model = MLP()
    x, y = gt.from_numpy(x_np), gt.from_numpy(y_np)
    params = list(model.parameters())
    for _ in range(150):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        with gt.no_grad():
            for param in model.parameters():
                param -= 0.5 * param.grad
                param.grad.zero_()
    assert all(a is b for a, b in zip(model.parameters(), params))
    with gt.no_grad():
        pred = model(x)
        accuracy = (
            (pred > gt.from_numpy(np.array(0.5, dtype="float32"))).data.numpy() == y_np
        ).mean()
    assert loss.item() < 0.1 and accuracy > 0.9
