"""``gt.nn.utils``: parametrizations (``register_parametrization``, ``weight_norm``,
``spectral_norm``, ``orthogonal``), the hook-based weight and spectral norms, ``functional_call``,
batch-norm fusion, ``get_total_norm`` / ``clip_grads_with_norm_``, ``skip_init`` and
``nn.init``'s deprecated aliases, against NumPy."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import gt
import gt.nn as nn
from gt.nn.utils import parametrizations as PZ
from gt.nn.utils import parametrize as P

pytestmark = pytest.mark.timeout(120)


def _arr(seed, *shape, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _set(module, seed=0):
    rng = np.random.default_rng(seed)
    with gt.no_grad():
        for p in module.parameters():
            p.copy_(gt.tensor(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32)))
    return module


def _unit(seed, n):
    v = _arr(seed, n)
    return v / np.linalg.norm(v)


def _keys(m):
    return list(m.state_dict().keys())


# ------------------------------------------------------------------------------- parametrize
class Symmetric(nn.Module):
    def forward(self, X):  # noqa: N803
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):  # noqa: N803
        return A.triu()


class RankOne(nn.Module):
    def forward(self, x, y):
        return x.unsqueeze(-1) @ y.unsqueeze(-2)

    def right_inverse(self, Z):  # noqa: N803
        return Z[:, 0], Z[0, :] / Z[0, 0]


def test_register_parametrization_layout_and_values(conn):
    m = _set(nn.Linear(3, 3), 1)
    w = m.weight.detach().numpy()
    P.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, nn.Linear)
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert P.type_before_parametrizations(m) is nn.Linear
    assert _keys(m) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    assert isinstance(m.parametrizations, nn.ModuleDict)
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), np.triu(w))
    np.testing.assert_allclose(m.weight.detach().numpy(), np.triu(w) + np.triu(w, 1).T)
    assert "(0): Symmetric()" in repr(m)
    # assigning goes through right_inverse
    a = _arr(2, 3, 3)
    m.weight = gt.tensor(a + a.T)
    np.testing.assert_allclose(m.weight.detach().numpy(), a + a.T, rtol=1e-6)
    # the gradient reaches the original
    x = _arr(3, 4, 3)
    m(gt.tensor(x)).sum().backward()
    g = np.ones((4, 3), np.float32).T @ x  # d(sum)/dW
    np.testing.assert_allclose(m.parametrizations.weight.original.grad.numpy(),
                               np.triu(g) + np.triu(g.T, 1), rtol=1e-5)  # fmt: skip


def test_the_original_stays_the_optimizers_parameter(conn):
    m = _set(nn.Linear(3, 3), 4)
    param = m.weight
    opt = gt.optim.SGD(m.parameters(), lr=0.1)
    P.register_parametrization(m, "weight", Symmetric())
    assert m.parametrizations.weight.original is param
    m(gt.tensor(_arr(5, 2, 3))).pow(2).sum().backward()
    before = param.detach().numpy().copy()
    opt.step()
    assert not np.allclose(param.detach().numpy(), before)
    P.remove_parametrizations(m, "weight")
    assert m.weight is param and type(m) is nn.Linear
    np.testing.assert_allclose(
        param.detach().numpy(), param.detach().numpy().T
    )  # left parametrized: symmetric


def test_several_originals_stacked_parametrizations_and_removal(conn):
    m = nn.Linear(3, 3)
    z = np.outer([1.0, 2.0, 3.0], [2.0, -1.0, 0.5]).astype(np.float32)
    with gt.no_grad():
        m.weight.copy_(gt.tensor(z))
    P.register_parametrization(m, "weight", RankOne())
    assert _keys(m) == ["bias", "parametrizations.weight.original0",
                        "parametrizations.weight.original1"]  # fmt: skip
    np.testing.assert_allclose(m.weight.detach().numpy(), z, rtol=1e-6)
    with pytest.raises(ValueError, match="sequence of tensors"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
    P.remove_parametrizations(m, "weight")
    assert _keys(m) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), z, rtol=1e-6)

    m2 = _set(nn.Linear(3, 3), 6)
    w = m2.weight.detach().numpy()
    P.register_parametrization(m2, "weight", Symmetric())
    P.register_parametrization(m2, "weight", Symmetric())
    assert len(m2.parametrizations.weight) == 2
    P.remove_parametrizations(m2, "weight", leave_parametrized=False)
    np.testing.assert_allclose(m2.weight.detach().numpy(), np.triu(w))


def test_registration_errors(conn):
    class Grow(nn.Module):
        def forward(self, x):
            return x.repeat(2, 1)

    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "weight", Grow())
    assert not P.is_parametrized(m)
    P.register_parametrization(m, "weight", Grow(), unsafe=True)
    assert m.weight.shape == (4, 2)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
        P.register_parametrization(m, "nope", Symmetric())
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        P.remove_parametrizations(m, "bias")


def test_cached_computes_each_parametrization_once(conn):
    calls = []

    class Count(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1.0

    m = nn.Linear(2, 2)
    P.register_parametrization(m, "weight", Count())
    calls.clear()
    assert m.weight is not m.weight
    assert len(calls) == 2
    calls.clear()
    with P.cached():
        a, b = m.weight, m.weight
        with P.cached():
            assert m.weight is a
    assert len(calls) == 1 and a is b
    assert m.weight is not a
    assert len(calls) == 2


def test_buffers_deepcopy_and_transfer(conn):
    m2 = nn.Module()
    m2.register_buffer("b", gt.ones(2, 2))

    class Double(nn.Module):
        def forward(self, x):
            return x * 2

    P.register_parametrization(m2, "b", Double())
    assert _keys(m2) == ["parametrizations.b.original"]
    np.testing.assert_allclose(m2.b.numpy(), 2 * np.ones((2, 2)))
    lin = _set(nn.Linear(3, 3), 7)
    P.register_parametrization(lin, "weight", Symmetric())
    clone = copy.deepcopy(lin)
    assert type(clone) is type(lin)
    np.testing.assert_allclose(clone.weight.detach().numpy(), lin.weight.detach().numpy())
    assert clone.parametrizations.weight.original is not lin.parametrizations.weight.original
    target = nn.Linear(3, 3)
    P.transfer_parametrizations_and_params(lin, target)
    assert target.parametrizations.weight.original is lin.parametrizations.weight.original
    np.testing.assert_allclose(target.weight.detach().numpy(), lin.weight.detach().numpy())


# ------------------------------------------------------------------------------- weight norm
def _np_weight_norm(v, g, dim):
    if dim is None:
        return v * (g / np.linalg.norm(v))
    axes = tuple(i for i in range(v.ndim) if i != dim)
    return v * (g / np.sqrt((v * v).sum(axis=axes, keepdims=True)))


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(conn, dim):
    m = _set(nn.Conv2d(2, 3, 2), 8)
    w = m.weight.detach().numpy()
    PZ.weight_norm(m, dim=dim)
    assert _keys(m) == ["bias", "parametrizations.weight.original0",
                        "parametrizations.weight.original1"]  # fmt: skip
    g = m.parametrizations.weight.original0.detach().numpy()
    want_g = {0: (3, 1, 1, 1), 1: (1, 2, 1, 1), None: ()}[dim]
    assert g.shape == want_g
    np.testing.assert_allclose(m.weight.detach().numpy(), w, rtol=1e-5, atol=1e-6)
    with gt.no_grad():
        m.parametrizations.weight.original0.mul_(2.0)
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w, rtol=1e-5, atol=1e-6)
    # gradients: d sum(W * C) / dg and / dv
    c = _arr(9, *w.shape)
    (m.weight * gt.tensor(c)).sum().backward()
    v = m.parametrizations.weight.original1.detach().numpy()
    g = m.parametrizations.weight.original0.detach().numpy()
    eps = 1e-3
    num = np.zeros_like(g).reshape(-1)
    for i in range(num.size):
        gp, gm = g.copy().reshape(-1), g.copy().reshape(-1)
        gp[i] += eps
        gm[i] -= eps
        num[i] = ((_np_weight_norm(v, gp.reshape(g.shape), dim)
                   - _np_weight_norm(v, gm.reshape(g.shape), dim)) * c).sum() / (2 * eps)  # fmt: skip
    np.testing.assert_allclose(m.parametrizations.weight.original0.grad.numpy().reshape(-1), num,
                               rtol=1e-2, atol=1e-3)  # fmt: skip


def test_hook_weight_norm_keys_values_and_removal(conn):
    m = _set(nn.Linear(3, 4), 10)
    w = m.weight.detach().numpy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.utils.weight_norm(m)
    assert caught and caught[0].category is FutureWarning
    assert "parametrizations.weight_norm" in str(caught[0].message)
    assert _keys(m) == ["bias", "weight_g", "weight_v"]
    np.testing.assert_allclose(m.weight_g.detach().numpy(), np.linalg.norm(w, axis=1, keepdims=True),
                               rtol=1e-6)  # fmt: skip
    with gt.no_grad():
        m.weight_g.mul_(3.0)
    x = _arr(11, 2, 3)
    out = m(gt.tensor(x)).detach().numpy()  # the hook recomputes the weight before forward
    np.testing.assert_allclose(out, x @ (3 * w).T + m.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nn.utils.weight_norm(m)
    nn.utils.remove_weight_norm(m)
    assert _keys(m) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), 3 * w, rtol=1e-5)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(m)


# ------------------------------------------------------------------------------- spectral norm
def _np_power(w, u, v, iters, v_first):
    for _ in range(iters):
        if v_first:
            v = w.T @ u
            v = v / max(np.linalg.norm(v), 1e-12)
            u = w @ v
            u = u / max(np.linalg.norm(u), 1e-12)
        else:
            u = w @ v
            u = u / max(np.linalg.norm(u), 1e-12)
            v = w.T @ u
            v = v / max(np.linalg.norm(v), 1e-12)
    return u, v


def test_spectral_norm_parametrization_power_iteration(conn):
    m = _set(nn.Linear(5, 3), 12)
    w = m.weight.detach().numpy().astype(np.float64)
    PZ.spectral_norm(m)
    assert _keys(m) == ["bias", "parametrizations.weight.original",
                        "parametrizations.weight.0._u", "parametrizations.weight.0._v"]  # fmt: skip
    sn = m.parametrizations.weight[0]
    u0, v0 = _unit(13, 3), _unit(14, 5)
    with gt.no_grad():
        sn._u.copy_(gt.tensor(u0))
        sn._v.copy_(gt.tensor(v0))
    got = m.weight.detach().numpy()  # training mode: one power iteration
    u, v = _np_power(w, u0, v0, 1, v_first=False)
    np.testing.assert_allclose(got, w / (u @ w @ v), rtol=1e-5)
    np.testing.assert_allclose(sn._u.numpy(), u, rtol=1e-5)
    m.eval()
    np.testing.assert_allclose(m.weight.detach().numpy(), got, rtol=1e-6)  # no iteration in eval
    m.train()
    for _ in range(30):
        _ = m.weight
    assert np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0] == pytest.approx(
        1.0, rel=1e-4
    )


def test_spectral_norm_training_backward_twice(conn):
    """Each forward's power iteration changes the buffers in place; the graph of an earlier
    forward keeps the values it used."""
    m = _set(nn.Linear(4, 4), 15)
    PZ.spectral_norm(m)
    x = gt.tensor(_arr(16, 3, 4))
    y1 = m(x).sum()
    y2 = m(x).sum()
    (y1 + y2).backward()
    assert np.isfinite(m.parametrizations.weight.original.grad.numpy()).all()


def test_hook_spectral_norm_keys_values_and_removal(conn):
    m = _set(nn.Conv2d(2, 3, 2), 17)
    w = m.weight.detach().numpy().reshape(3, -1).astype(np.float64)
    nn.utils.spectral_norm(m, n_power_iterations=2)
    assert _keys(m) == ["bias", "weight_orig", "weight_u", "weight_v"]
    u0, v0 = _unit(18, 3), _unit(19, 8)
    with gt.no_grad():
        m.weight_u.copy_(gt.tensor(u0))
        m.weight_v.copy_(gt.tensor(v0))
    x = _arr(20, 1, 2, 3, 3)
    m(gt.tensor(x))
    u, v = _np_power(w, u0, v0, 2, v_first=True)
    want = (w / (u @ w @ v)).reshape(3, 2, 2, 2)
    np.testing.assert_allclose(m.weight.detach().numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(m.weight_v.numpy(), v, rtol=1e-5)
    nn.utils.remove_spectral_norm(m)
    assert _keys(m) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), want, rtol=1e-5)
    t = nn.ConvTranspose2d(3, 2, 2)
    nn.utils.spectral_norm(t)
    assert t.weight_u.shape == (2,)  # dim=1 for transposed convolutions


# ------------------------------------------------------------------------------- orthogonal
@pytest.mark.parametrize(
    "shape,kw",
    [((4, 4), {}), ((4, 4), dict(orthogonal_map="cayley")), ((6, 3), {}),
     ((3, 6), dict(orthogonal_map="householder")),
     ((5, 3), dict(orthogonal_map="householder", use_trivialization=False))],
    ids=["exp", "cayley", "tall-householder", "wide-householder", "householder-no-base"],
)  # fmt: skip
def test_orthogonal_stays_orthogonal_while_training(conn, shape, kw):
    m = _set(nn.Linear(shape[1], shape[0]), 21)
    PZ.orthogonal(m, **kw)
    opt = gt.optim.SGD(m.parameters(), lr=0.2)
    for step in range(3):
        q = m.weight.detach().numpy().astype(np.float64)
        gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
        np.testing.assert_allclose(gram, np.eye(min(shape)), atol=2e-5)
        loss = (m(gt.tensor(_arr(22 + step, 8, shape[1]))) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if kw.get("use_trivialization", True):
        assert "parametrizations.weight.0.base" in _keys(m)


def test_orthogonal_starts_from_the_q_factor(conn):
    m = _set(nn.Linear(4, 4), 23)
    w = m.weight.detach().numpy().astype(np.float64)
    PZ.orthogonal(m)
    q, r = np.linalg.qr(w)
    np.testing.assert_allclose(m.weight.detach().numpy(), q * np.sign(np.diag(r)), atol=1e-5)
    with pytest.raises(ValueError, match="Expected a matrix"):
        PZ.orthogonal(nn.Linear(3, 3), "bias")


# ------------------------------------------------------------------------------- functional_call
def test_functional_call_swaps_and_restores(conn):
    m = _set(nn.Linear(3, 2), 24)
    own_w = m.weight
    w, b = _arr(25, 2, 3), _arr(26, 2)
    x = _arr(27, 4, 3)
    wt = gt.tensor(w, requires_grad=True)
    out = gt.func.functional_call(m, {"weight": wt, "bias": gt.tensor(b)}, (gt.tensor(x),))
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-5)
    assert m.weight is own_w and m._parameters["weight"] is own_w
    out.sum().backward()
    np.testing.assert_allclose(wt.grad.numpy(), np.ones((4, 2)).T @ x, rtol=1e-5)
    assert own_w.grad is None
    with pytest.warns(FutureWarning, match="gt.func.functional_call"):
        legacy = nn.utils.stateless.functional_call(m, {"weight": gt.tensor(w)}, gt.tensor(x))
    np.testing.assert_allclose(
        legacy.detach().numpy(), x @ w.T + m.bias.detach().numpy(), rtol=1e-5
    )
    with pytest.raises(RuntimeError, match="Missing key"):
        gt.func.functional_call(m, {"weight": gt.tensor(w)}, gt.tensor(x), strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        gt.func.functional_call(m, ({"bias": gt.tensor(b)}, {"bias": gt.tensor(b)}), gt.tensor(x))


def test_functional_call_tied_weights_and_restores_after_errors(conn):
    seq = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False))
    seq[1].weight = seq[0].weight
    w = _arr(28, 2, 2)
    x = _arr(29, 3, 2)
    tied = gt.func.functional_call(seq, {"0.weight": gt.tensor(w)}, gt.tensor(x)).numpy()
    np.testing.assert_allclose(tied, x @ w.T @ w.T, rtol=1e-5)
    own = seq[0].weight.detach().numpy()
    untied = gt.func.functional_call(seq, {"0.weight": gt.tensor(w)}, gt.tensor(x),
                                     tie_weights=False).detach().numpy()  # fmt: skip
    np.testing.assert_allclose(untied, x @ w.T @ own.T, rtol=1e-5)
    with pytest.raises(ValueError, match="which are tied"):
        gt.func.functional_call(seq, {"0.weight": gt.tensor(w), "1.weight": gt.tensor(w + 1)},
                                gt.tensor(x))  # fmt: skip

    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            raise RuntimeError("boom")

    b = Boom()
    own_w = b.lin.weight
    with pytest.raises(RuntimeError, match="boom"):
        gt.func.functional_call(b, {"lin.weight": gt.tensor(w)}, gt.tensor(x))
    assert b.lin.weight is own_w


# ------------------------------------------------------------------------------- fusion, norms
def test_fuse_conv_and_linear_bn_match_numpy(conn):
    conv = _set(nn.Conv2d(2, 3, 3), 30).eval()
    bn = nn.BatchNorm2d(3).eval()
    mean, var = _arr(31, 3, scale=0.5), np.abs(_arr(32, 3)) + 0.5
    gamma, beta = _arr(33, 3) + 1.0, _arr(34, 3)
    with gt.no_grad():
        bn.running_mean.copy_(gt.tensor(mean))
        bn.running_var.copy_(gt.tensor(var))
        bn.weight.copy_(gt.tensor(gamma))
        bn.bias.copy_(gt.tensor(beta))
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    scale = gamma / np.sqrt(var + bn.eps)
    np.testing.assert_allclose(fused.weight.detach().numpy(), conv.weight.detach().numpy() * scale[:, None, None, None],
                               rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(fused.bias.detach().numpy(), (conv.bias.detach().numpy() - mean) * scale + beta,
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    x = gt.tensor(_arr(35, 2, 2, 5, 5))
    np.testing.assert_allclose(
        fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-4, atol=1e-5
    )
    assert fused is not conv and isinstance(fused.weight, nn.Parameter)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        nn.utils.fuse_conv_bn_eval(conv.train(), bn)

    lin = _set(nn.Linear(4, 3, bias=False), 36).eval()
    bn1 = nn.BatchNorm1d(3).eval()
    with gt.no_grad():
        bn1.running_mean.copy_(gt.tensor(mean))
        bn1.running_var.copy_(gt.tensor(var))
    fl = nn.utils.fuse_linear_bn_eval(lin, bn1)
    xl = gt.tensor(_arr(37, 5, 4))
    np.testing.assert_allclose(
        fl(xl).detach().numpy(), bn1(lin(xl)).detach().numpy(), rtol=1e-4, atol=1e-5
    )


def test_total_norm_and_clipping_in_two_steps(conn):
    gs = [_arr(38, 3, 2), _arr(39, 4)]
    ps = []
    for g in gs:
        p = gt.zeros(*g.shape, requires_grad=True)
        p.grad = gt.tensor(g)
        ps.append(p)
    flat = np.concatenate([g.ravel() for g in gs])
    for t, want in ((2.0, np.linalg.norm(flat)), (1.0, np.abs(flat).sum()),
                    (float("inf"), np.abs(flat).max())):  # fmt: skip
        got = nn.utils.get_total_norm([p.grad for p in ps], norm_type=t)
        assert got.item() == pytest.approx(want, rel=1e-5)
    total = nn.utils.get_total_norm([p.grad for p in ps])
    nn.utils.clip_grads_with_norm_(ps, 1.0, total)
    scale = min(1.0, 1.0 / (np.linalg.norm(flat) + 1e-6))
    for p, g in zip(ps, gs):
        np.testing.assert_allclose(p.grad.numpy(), g * scale, rtol=1e-5)
    assert nn.utils.get_total_norm([]).item() == 0.0
    p = gt.zeros(2, requires_grad=True)
    p.grad = gt.tensor(np.array([np.inf, 1.0], np.float32))
    with pytest.raises(RuntimeError, match="is non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.warns(FutureWarning):
        nn.utils.clip_grad_norm([ps[0]], 1.0)
    assert nn.utils.convert_parameters.parameters_to_vector is nn.utils.parameters_to_vector


# ------------------------------------------------------------------------------- init, skip_init
def test_init_deprecated_aliases_warn_and_fill(conn):
    t = gt.zeros(3, 4)
    for name, args in (("constant", (0.5,)), ("eye", ()), ("uniform", (0.0, 1.0)),
                       ("normal", ()), ("xavier_uniform", ()), ("xavier_normal", ()),
                       ("kaiming_uniform", ()), ("kaiming_normal", ()), ("orthogonal", ()),
                       ("sparse", (0.5,))):  # fmt: skip
        with pytest.warns(FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of "
                                               f"`nn.init.{name}_`"):  # fmt: skip
            assert getattr(nn.init, name)(t, *args) is t
        assert getattr(nn.init, name).__name__ == name
    with pytest.warns(FutureWarning):
        nn.init.dirac(gt.zeros(2, 2, 3), groups=1)
    with pytest.warns(FutureWarning):
        np.testing.assert_array_equal(nn.init.eye(gt.zeros(2, 3)).numpy(), np.eye(2, 3))


def test_sparse_init_zeroes_a_fraction_of_each_column(conn):
    t = nn.init.sparse_(gt.zeros(10, 7), sparsity=0.25, std=0.1)
    values = t.numpy()
    assert ((values == 0).sum(axis=0) == 3).all()
    assert 0.01 < values[values != 0].std() < 0.3
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        nn.init.sparse_(gt.zeros(3), 0.5)
    g1 = nn.init.normal_(gt.zeros(50), generator=gt.Generator().manual_seed(3)).numpy()
    g2 = nn.init.normal_(gt.zeros(50), generator=gt.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(g1, g2)


def test_skip_init_builds_the_module(conn):
    m = nn.utils.skip_init(nn.Linear, 4, 3, bias=False)
    assert isinstance(m, nn.Linear) and m.weight.shape == (3, 4) and m.bias is None
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)
