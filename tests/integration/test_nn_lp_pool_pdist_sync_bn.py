"""``F.lp_pool1d/2d/3d`` and ``nn.LPPool*``, ``F.pdist`` and ``nn.SyncBatchNorm`` through a real
cluster, against NumPy references written here (gradients against central finite differences
of those references)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F

pytestmark = pytest.mark.timeout(120)
rng = np.random.default_rng(12)
EPS = 1e-6


def _fd(f, x, eps=EPS):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        g.flat[i] = (f(up) - f(down)) / (2 * eps)
    return g


# ------------------------------------------------------------------ LP pooling
def _lp_ref(x, p, kernel, stride, ceil_mode=False):
    """PyTorch's LP pooling over the trailing ``len(kernel)`` dimensions: the mean of ``x^p``
    over the part of each window inside the input, times the kernel size, to the ``1/p``."""
    dims = len(kernel)
    sizes = x.shape[-dims:]
    outs = []
    for n, k, s in zip(sizes, kernel, stride):
        o = (-(-(n - k) // s) if ceil_mode else (n - k) // s) + 1
        if ceil_mode and (o - 1) * s >= n:
            o -= 1
        outs.append(o)
    out = np.zeros(x.shape[:-dims] + tuple(outs))
    for pos in itertools.product(*[range(o) for o in outs]):
        box = tuple(
            slice(i * s, min(i * s + k, n)) for i, s, k, n in zip(pos, stride, kernel, sizes)
        )
        win = x[(...,) + box].reshape(x.shape[:-dims] + (-1,))
        if p == math.inf:
            out[(...,) + pos] = np.abs(win).max(-1)
        else:
            total = (win**p).mean(-1) * math.prod(kernel)
            out[(...,) + pos] = total ** (1.0 / p)
    return out


CASES = [
    (1, (2, 3, 9), 2, (3,), None, False),
    (1, (2, 3, 9), 3, (2,), (1,), True),
    (2, (2, 2, 7, 8), 2, (2, 3), None, False),
    (2, (1, 2, 7, 8), 1.5, (3, 3), (2, 2), True),
    (2, (2, 6, 5), 4, (2, 2), (1, 2), False),  # unbatched
    (2, (1, 2, 6, 6), math.inf, (2, 2), None, False),
    (3, (1, 2, 4, 5, 6), 2, (2, 2, 2), None, False),
    (3, (1, 1, 5, 6, 5), 3, (2, 3, 2), (1, 2, 2), True),
]


@pytest.mark.parametrize(("dims", "shape", "p", "kernel", "stride", "ceil"), CASES)
def test_lp_pool_matches_reference_with_gradient(conn, dims, shape, p, kernel, stride, ceil):
    x = rng.uniform(0.2, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    if p not in (2, 4, math.inf):  # odd and fractional powers: sums that stay positive
        x = np.abs(x)
    s = kernel if stride is None else stride
    ref = _lp_ref(x, p, kernel, s, ceil)
    k = kernel[0] if dims == 1 else kernel
    xt = gt.tensor(x, requires_grad=True)
    out = getattr(F, f"lp_pool{dims}d")(xt, p, k, stride, ceil)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10)
    g = rng.standard_normal(ref.shape)
    (out * gt.tensor(g)).sum().backward()
    fd = _fd(lambda a: (_lp_ref(a, p, kernel, s, ceil) * g).sum(), x)
    np.testing.assert_allclose(xt.grad.numpy(), fd, atol=1e-6)


def test_lp_pool_zero_window_has_zero_gradient_and_modules(conn):
    x = rng.standard_normal((1, 1, 4, 4))
    x[..., :2, :2] = 0.0
    xt = gt.tensor(x, requires_grad=True)
    out = nn.LPPool2d(2, 2)(xt)
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), _lp_ref(x, 2, (2, 2), (2, 2)))
    assert np.isfinite(xt.grad.numpy()).all() and not xt.grad.numpy()[..., :2, :2].any()
    assert repr(nn.LPPool2d(1.5, (2, 3), stride=1, ceil_mode=True)) == (
        "LPPool2d(norm_type=1.5, kernel_size=(2, 3), stride=1, ceil_mode=True)"
    )
    assert (
        repr(nn.LPPool1d(2, 3))
        == "LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
    )
    y = np.abs(rng.standard_normal((2, 3, 8)))
    np.testing.assert_allclose(nn.LPPool1d(3, 2)(gt.tensor(y)).numpy(), _lp_ref(y, 3, (2,), (2,)))
    z = rng.standard_normal((1, 2, 4, 4, 4))
    np.testing.assert_allclose(nn.LPPool3d(2, 2, stride=2)(gt.tensor(z)).numpy(),
                               _lp_ref(z, 2, (2, 2, 2), (2, 2, 2)))  # fmt: skip


# ------------------------------------------------------------------ pdist
def _pdist_ref(x, p):
    n = x.shape[0]
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            d = np.abs(x[i] - x[j])
            if p == 0:
                out.append(float((d != 0).sum()))
            elif p == math.inf:
                out.append(d.max())
            else:
                out.append((d**p).sum() ** (1.0 / p))
    return np.array(out)


@pytest.mark.parametrize("p", [0, 0.5, 1, 1.5, 2, 3, math.inf])
def test_pdist_matches_reference_with_gradient(conn, p):
    x = rng.standard_normal((5, 4))
    xt = gt.tensor(x, requires_grad=True)
    out = F.pdist(xt, p)
    np.testing.assert_allclose(out.detach().numpy(), _pdist_ref(x, p), rtol=1e-10)
    g = rng.standard_normal(out.shape)
    (out * gt.tensor(g)).sum().backward()
    fd = _fd(lambda a: (_pdist_ref(a, p) * g).sum(), x)
    np.testing.assert_allclose(xt.grad.numpy(), fd, atol=1e-6)


def test_pdist_equal_rows_have_zero_gradient_and_errors(conn):
    x = rng.standard_normal((4, 3))
    x[2] = x[0]
    xt = gt.tensor(x, requires_grad=True)
    out = F.pdist(xt)
    assert out.shape == (6,) and out.detach().numpy()[1] == 0.0
    out.sum().backward()
    assert np.isfinite(xt.grad.numpy()).all()
    np.testing.assert_allclose(xt.grad.numpy(), _grad_without_pair(x, (0, 2)), atol=1e-12)
    assert F.pdist(gt.tensor(x[:1])).shape == (0,)
    with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 1D"):
        F.pdist(gt.tensor(x[0]))
    with pytest.raises(RuntimeError, match="pdist only supports non-negative p values"):
        F.pdist(xt, -1.0)


def _grad_without_pair(x, pair):
    """The gradient of the sum of Euclidean distances, the coinciding pair contributing 0."""
    g = np.zeros_like(x)
    for i, j in itertools.combinations(range(len(x)), 2):
        if (i, j) == pair:
            continue
        d = x[i] - x[j]
        u = d / np.linalg.norm(d)
        g[i] += u
        g[j] -= u
    return g


# ------------------------------------------------------------------ SyncBatchNorm
def _bn_ref(x, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean.reshape(-1), x.var(axes, ddof=1)


@pytest.mark.parametrize(
    "shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 4), (2, 3, 2, 2, 2, 2)]
)
def test_sync_batch_norm_normalizes_any_rank_and_tracks_statistics(conn, shape):
    x = rng.standard_normal(shape) * 2 + 1
    bn = nn.SyncBatchNorm(3, momentum=0.25)
    with gt.no_grad():
        bn.weight.copy_(gt.tensor([1.0, 2.0, 0.5], dtype="float32"))
        bn.bias.copy_(gt.tensor([0.0, -1.0, 3.0], dtype="float32"))
    xt = gt.tensor(x.astype(np.float32))
    out = bn(xt)
    norm, mean, unbiased = _bn_ref(x)
    cs = (1, 3) + (1,) * (len(shape) - 2)
    ref = norm * np.array([1.0, 2.0, 0.5]).reshape(cs) + np.array([0.0, -1.0, 3.0]).reshape(cs)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.25 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.75 + 0.25 * unbiased, rtol=1e-5)
    assert int(bn.num_batches_tracked.item()) == 1
    bn.eval()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    ev = (x - rm.reshape(cs)) / np.sqrt(rv.reshape(cs) + 1e-5)
    ev = ev * np.array([1.0, 2.0, 0.5]).reshape(cs) + np.array([0.0, -1.0, 3.0]).reshape(cs)
    np.testing.assert_allclose(bn(xt).detach().numpy(), ev, rtol=1e-4, atol=1e-5)


def test_sync_batch_norm_gradient_and_errors(conn):
    x = rng.standard_normal((4, 2, 3))
    bn = nn.SyncBatchNorm(2, affine=False, dtype="float64")
    xt = gt.tensor(x, requires_grad=True)
    g = rng.standard_normal(x.shape)
    (bn(xt) * gt.tensor(g)).sum().backward()
    fd = _fd(lambda a: (_bn_ref(a)[0] * g).sum(), x)
    np.testing.assert_allclose(xt.grad.numpy(), fd, atol=1e-6)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        bn(gt.tensor(x[0, 0]))
    with pytest.raises(ValueError, match="number of input channels should be non-zero"):
        nn.SyncBatchNorm(0)(gt.tensor(np.zeros((2, 0, 3))))
    no_bias = nn.SyncBatchNorm(4, bias=False)
    assert no_bias.bias is None and no_bias.weight is not None
    assert repr(no_bias) == (
        "SyncBatchNorm(4, eps=1e-05, momentum=0.1, affine=True, bias=False, "
        "track_running_stats=True)"
    )


def test_convert_sync_batchnorm_swaps_batch_norms_sharing_state(conn):
    model = nn.Sequential(nn.Conv2d(2, 4, 1), nn.BatchNorm2d(4, eps=1e-3),
                          nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, affine=False)))  # fmt: skip
    model[2][1].eval()
    old_bn, old_inner = model[1], model[2][1]
    out = nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group="group")
    assert out is model
    bn, inner = out[1], out[2][1]
    assert type(bn) is nn.SyncBatchNorm and type(inner) is nn.SyncBatchNorm
    assert bn.weight is old_bn.weight and bn.bias is old_bn.bias
    assert bn.running_mean is old_bn.running_mean and bn.eps == 1e-3
    assert bn.process_group == "group"
    assert inner.weight is None and inner.bias is None and inner.training is False
    assert inner.running_var is old_inner.running_var and inner is not old_inner
    assert type(out[0]) is nn.Conv2d
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm3d(5))
    assert type(single) is nn.SyncBatchNorm and single.num_features == 5
    assert set(dict(single.state_dict())) == {
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    }
