"""The last ``torch.nn`` names through a real cluster, against NumPy references written here:
fractional max pooling, ``AdaptiveLogSoftmaxWithLoss``, ``CrossMapLRN2d``, the deprecated and
pass-through modules, lazy transposed convolutions and instance norms, ``nn.Buffer`` and the
uninitialized placeholders, ``F.multi_head_attention_forward`` and the linear cross entropy."""

from __future__ import annotations

import copy
import itertools
import math
import warnings

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F

pytestmark = pytest.mark.timeout(120)


def _r(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _close(t, ref, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(t.detach().numpy(), ref, rtol=rtol, atol=atol)


def _log_softmax(z, axis=-1):
    z = z - z.max(axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis, keepdims=True))


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        g.flat[i] = (f(up) - f(down)) / (2 * eps)
    return g


# ------------------------------------------------------------------ fractional max pooling
def _starts(u, size, out, k, dtype):
    """PyTorch's window starts, in the input's float type."""
    if out == 1:
        return [size - k]
    f = np.dtype(dtype).type
    alpha = f(size - k) / f(out - 1)
    return [int((f(i) + f(u)) * alpha) - int(f(u) * alpha) for i in range(out - 1)] + [size - k]


def _fractional_ref(x, kernel, outs, samples, grad_out):
    """Values, flat indices and the input gradient of fractional max pooling of ``[N, C, *sp]``;
    ``samples[n, c]`` in PyTorch's order (w, h in 2-d; t, h, w in 3-d)."""
    n, c, *sizes = x.shape
    dims = len(sizes)
    order = (1, 0) if dims == 2 else (0, 1, 2)
    vals = np.zeros((n, c, *outs), x.dtype)
    idx = np.zeros((n, c, *outs), np.int64)
    grad = np.zeros_like(x)
    for b, ch in itertools.product(range(n), range(c)):
        st = [_starts(samples[b, ch, order[d]], sizes[d], outs[d], kernel[d], x.dtype)
              for d in range(dims)]  # fmt: skip
        for o in itertools.product(*[range(v) for v in outs]):
            box = tuple(slice(st[d][o[d]], st[d][o[d]] + kernel[d]) for d in range(dims))
            win = x[b, ch][box]
            at = np.unravel_index(int(np.argmax(win)), win.shape)
            pos = tuple(st[d][o[d]] + at[d] for d in range(dims))
            vals[(b, ch, *o)] = x[(b, ch, *pos)]
            idx[(b, ch, *o)] = np.ravel_multi_index(pos, sizes)
            grad[(b, ch, *pos)] += grad_out[(b, ch, *o)]
    return vals, idx, grad


@pytest.mark.parametrize(
    ("shape", "kernel", "outs"),
    [((2, 3, 10, 9), (2, 2), (4, 5)), ((1, 2, 7, 7), (3, 3), (5, 5)), ((2, 2, 9, 8), (2, 3), (3, 1)),
     ((2, 3, 6, 7, 8), (2, 2, 2), (3, 4, 5)), ((1, 2, 5, 6, 7), (2, 1, 3), (2, 3, 2))],
)  # fmt: skip
def test_fractional_max_pool_matches_reference_with_fixed_samples(conn, shape, kernel, outs):
    dims = len(kernel)
    x = _r(*shape, seed=1, dtype=np.float32)
    u = np.random.default_rng(2).random((shape[0], shape[1], dims)).astype(np.float32)
    g = _r(*shape[:2], *outs, seed=3, dtype=np.float32)
    vals, idx, grad = _fractional_ref(x, kernel, outs, u, g)
    xt = gt.tensor(x, requires_grad=True)
    fn = F.fractional_max_pool2d if dims == 2 else F.fractional_max_pool3d
    y, where = fn(xt, kernel, outs, return_indices=True, _random_samples=gt.tensor(u))
    (y * gt.tensor(g)).sum().backward()
    _close(y, vals, 0, 0)
    np.testing.assert_array_equal(where.numpy(), idx)
    _close(xt.grad, grad, 1e-6, 1e-6)


def test_fractional_max_pool_unbatched_ratio_and_with_indices(conn):
    x = _r(3, 8, 10, seed=4)
    u = np.random.default_rng(5).random((1, 3, 2))
    vals, idx, _ = _fractional_ref(x[None], (2, 2), (4, 6), u, np.zeros((1, 3, 4, 6)))
    out, where = F.fractional_max_pool2d_with_indices(
        gt.tensor(x), 2, output_ratio=(0.5, 0.6), _random_samples=gt.tensor(u)
    )
    _close(out, vals[0], 0, 0)
    np.testing.assert_array_equal(where.numpy(), idx[0])
    assert tuple(F.fractional_max_pool2d(gt.tensor(x), 2, output_size=3).shape) == (3, 3, 3)


def test_fractional_max_pool_draws_seeded_samples(conn):
    x = gt.tensor(_r(2, 3, 9, 9, seed=6))
    gt.manual_seed(7)
    a, ia = F.fractional_max_pool2d(x, 2, output_size=(4, 4), return_indices=True)
    gt.manual_seed(7)
    b = F.fractional_max_pool2d(x, 2, output_size=(4, 4))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    flat = x.numpy().reshape(2, 3, -1)
    picked = np.take_along_axis(flat, ia.numpy().reshape(2, 3, -1), 2).reshape(a.shape)
    np.testing.assert_array_equal(a.numpy(), picked)  # each output is the input at its index


def test_fractional_max_pool_checks_as_pytorch(conn):
    x = gt.tensor(_r(2, 3, 7, 6))
    with pytest.raises(RuntimeError, match="pool height 3 too large relative to input height 7"):
        F.fractional_max_pool2d(x, 3, output_size=(6, 4))
    with pytest.raises(ValueError, match="requires specifying either an output_size"):
        F.fractional_max_pool2d(x, 3)
    bad = gt.tensor(np.random.default_rng(0).random((2, 4, 2)))
    with pytest.raises(RuntimeError, match=r"size\(1\) equals to input channel size"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=bad)
    with pytest.raises(RuntimeError, match="pool width 2 too large relative to input width 7"):
        F.fractional_max_pool3d(gt.tensor(_r(2, 3, 5, 6, 7)), 2, output_size=(3, 5, 6))
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        nn.FractionalMaxPool2d(3, output_ratio=1.5)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool2d(3, 3, 0.5)


def test_fractional_max_pool_modules_keep_samples_as_buffer(conn):
    u = np.random.default_rng(8).random((1, 2, 3))
    m = nn.FractionalMaxPool3d(2, output_size=(2, 3, 3), return_indices=True,
                               _random_samples=gt.tensor(u))  # fmt: skip
    assert repr(m) == "FractionalMaxPool3d()" and list(m.state_dict()) == ["_random_samples"]
    assert list(nn.FractionalMaxPool2d(2, output_ratio=0.5).state_dict()) == []
    x = _r(1, 2, 5, 6, 6, seed=9)
    vals, idx, _ = _fractional_ref(x, (2, 2, 2), (2, 3, 3), u, np.zeros((1, 2, 2, 3, 3)))
    y, where = m(gt.tensor(x))
    _close(y, vals, 0, 0)
    np.testing.assert_array_equal(where.numpy(), idx)


# ------------------------------------------------------------------ adaptive softmax
def _asm_ref(sd, x, t, shortlist, cutoffs):
    head = x @ sd["head.weight"].T + sd.get("head.bias", 0.0)
    head_lp = _log_softmax(head)
    out = np.zeros(len(t))
    full = [head_lp[:, :shortlist]]
    for i in range(len(cutoffs) - 1):
        z = x @ sd[f"tail.{i}.0.weight"].T @ sd[f"tail.{i}.1.weight"].T
        full.append(_log_softmax(z) + head_lp[:, shortlist + i : shortlist + i + 1])
    full = np.concatenate(full, 1)
    out = full[np.arange(len(t)), t]
    return out, -out.mean(), full


def test_adaptive_log_softmax_matches_reference(conn):
    asm = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10, 15], div_value=2.0, head_bias=True,
                                        dtype="float64")  # fmt: skip
    assert list(asm.state_dict()) == ["head.weight", "head.bias"] + [
        f"tail.{i}.{j}.weight" for i in range(3) for j in range(2)
    ]
    assert [tuple(asm.tail[i][0].weight.shape) for i in range(3)] == [(4, 8), (2, 8), (1, 8)]
    sd = {k: v.numpy() for k, v in asm.state_dict().items()}
    x, t = _r(7, 8, seed=10), np.array([0, 5, 3, 12, 19, 2, 6])
    out_ref, loss_ref, full = _asm_ref(sd, x, t, 4, asm.cutoffs)
    xt = gt.tensor(x, requires_grad=True)
    res = asm(xt, gt.tensor(t))
    assert res._fields == ("output", "loss")
    _close(res.output, out_ref)
    _close(res.loss, loss_ref)
    res.loss.backward()
    dx = _fd(lambda v: _asm_ref(sd, v.reshape(7, 8), t, 4, asm.cutoffs)[1], x.copy())
    _close(xt.grad, dx, 1e-5, 1e-7)
    _close(asm.log_prob(gt.tensor(x)), full)
    np.testing.assert_array_equal(asm.predict(gt.tensor(x)).numpy(), full.argmax(1))
    single = asm(gt.tensor(x[3]), gt.tensor(np.array(12)))
    assert single.output.shape == () and np.isclose(single.output.item(), out_ref[3])


def test_adaptive_log_softmax_unused_clusters_get_no_gradient(conn):
    asm = nn.AdaptiveLogSoftmaxWithLoss(6, 12, [3, 8])
    x = gt.tensor(_r(4, 6, seed=11, dtype=np.float32))
    asm(x, gt.tensor(np.array([0, 1, 2, 1]))).loss.backward()
    assert asm.head.weight.grad is not None
    assert all(p.grad is None for p in asm.tail.parameters())
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 11\]"):
        asm(x[:2], gt.tensor(np.array([0, 12])))
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        nn.AdaptiveLogSoftmaxWithLoss(6, 12, [8, 3])


# ------------------------------------------------------------------ CrossMapLRN2d
def _lrn_ref(x, g, size, alpha, beta, k):
    """PyTorch's CrossMapLRN2d: the running-sum forward and its hand-written backward."""
    c = x.shape[1]
    sq = x * x
    pre = int((size - 1) / 2 + 1)
    scale = np.zeros_like(x)
    scale[:, 0] = sq[:, : min(pre, c)].sum(1)
    for ch in range(1, c):
        scale[:, ch] = scale[:, ch - 1]
        if ch < c - pre + 1:
            scale[:, ch] += sq[:, ch + pre - 1]
        if ch > pre:
            scale[:, ch] -= sq[:, ch - pre]
    scale = scale * (alpha / size) + k
    out = x * scale**-beta
    ratio = g * out / scale
    shift = int(size - (size - 1) / 2)
    grad = g * scale**-beta
    for ch in range(c):
        lo, hi = max(ch - shift, 0), min(ch - shift + size - 1, c - 1)
        acc = ratio[:, lo : hi + 1].sum(1) if hi >= lo else 0.0
        grad[:, ch] -= 2 * alpha * beta / size * x[:, ch] * acc
    return out, grad


@pytest.mark.parametrize(("channels", "size"), [(8, 5), (6, 4), (3, 5), (10, 2)])
def test_cross_map_lrn2d_forward_and_gradient_match_pytorch_formulas(conn, channels, size):
    x, g = _r(2, channels, 3, 4, seed=12), _r(2, channels, 3, 4, seed=13)
    out, grad = _lrn_ref(x, g, size, 0.5, 0.75, 1.5)
    m = nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.5)
    xt = gt.tensor(x, requires_grad=True)
    y = m(xt)
    (y * gt.tensor(g)).sum().backward()
    _close(y, out)
    _close(xt.grad, grad)
    assert repr(nn.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D instead"):
        m(gt.tensor(x[0]))


# ------------------------------------------------------------------ deprecated, pass-through
def test_nll_loss_2d_and_container_warn_and_work(conn):
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        crit = nn.NLLLoss2d(ignore_index=1)
    logp = _log_softmax(_r(2, 4, 3, 3, seed=14), 1)
    t = np.random.default_rng(15).integers(0, 4, (2, 3, 3))
    picked = np.take_along_axis(logp, t[:, None], 1)[:, 0]
    keep = t != 1
    _close(crit(gt.tensor(logp), gt.tensor(t)), -(picked * keep).sum() / keep.sum())
    assert isinstance(crit, nn.NLLLoss) and repr(crit) == "NLLLoss2d()"
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        box = nn.Container(a=nn.Linear(2, 3), b=nn.ReLU())
    assert [n for n, _ in box.named_children()] == ["a", "b"]
    assert list(box.state_dict()) == ["a.weight", "a.bias"]


def test_data_parallel_calls_the_module(conn):
    lin = nn.Linear(4, 2)
    dp = nn.DataParallel(lin, device_ids=[0, 1])
    x = _r(3, 4, seed=16, dtype=np.float32)
    ref = x @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    _close(dp(gt.tensor(x)), ref, 1e-5, 1e-6)
    assert dp.module is lin and dp.device_ids == [0, 1]
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    assert repr(dp) == (
        "DataParallel(\n  (module): Linear(in_features=4, out_features=2, bias=True)\n)"
    )


# ------------------------------------------------------------------ lazy modules
def test_lazy_conv_transpose_materializes_in_place(conn):
    m = nn.LazyConvTranspose1d(3, 2, stride=2)
    assert repr(m) == "LazyConvTranspose1d(0, 3, kernel_size=(2,), stride=(2,))"
    assert isinstance(m.weight, nn.UninitializedParameter) and m.has_uninitialized_params()
    w, b = m.weight, m.bias
    opt = gt.optim.SGD(m.parameters(), lr=0.5)
    x = _r(2, 5, 4, seed=17, dtype=np.float32)
    y = m(gt.tensor(x))
    assert type(m) is nn.ConvTranspose1d and m.in_channels == 5
    assert m.weight is w and type(w) is nn.Parameter and tuple(w.shape) == (5, 3, 2)
    bound = 1 / math.sqrt(3 * 2)
    assert np.abs(w.detach().numpy()).max() <= bound and np.abs(b.detach().numpy()).max() <= bound
    wn, bn = w.detach().numpy(), b.detach().numpy()
    ref = np.zeros((2, 3, 8), np.float32)  # stride 2, kernel 2: no overlap
    for i in range(4):
        ref[:, :, 2 * i : 2 * i + 2] = np.einsum("nc,cok->nok", x[:, :, i], wn)
    _close(y, ref + bn[None, :, None], 1e-5, 1e-6)
    y.sum().backward()
    opt.step()
    _close(w, wn - 0.5 * np.einsum("nci->c", x)[:, None, None], 1e-5, 1e-6)
    t2 = nn.LazyConvTranspose2d(4, 3, stride=2, padding=1, groups=2)
    assert tuple(t2(gt.tensor(_r(1, 6, 5, 5, dtype=np.float32)), output_size=[10, 10]).shape) == (
        1,
        4,
        10,
        10,
    )
    assert tuple(t2.weight.shape) == (6, 2, 3, 3)
    t3 = nn.LazyConvTranspose3d(2, 2, bias=False)
    assert (
        tuple(t3(gt.tensor(_r(3, 2, 2, 2, dtype=np.float32))).shape) == (2, 3, 3, 3)
        and t3.bias is None
    )


def test_lazy_instance_norm_tracks_running_stats(conn):
    m = nn.LazyInstanceNorm2d(momentum=0.2)
    assert repr(m) == (
        "LazyInstanceNorm2d(0, eps=1e-05, momentum=0.2, affine=True, bias=True, "
        "track_running_stats=True)"
    )
    x = _r(4, 3, 5, 5, seed=18)
    y = m(gt.tensor(x))
    assert isinstance(m, nn.InstanceNorm2d) and m.num_features == 3
    assert repr(m).startswith("InstanceNorm2d(3, eps=1e-05, momentum=0.2")
    assert list(m.state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked"
    ]  # fmt: skip
    mean, var = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    _close(y, (x - mean) / np.sqrt(var + 1e-5), 1e-6, 1e-7)
    rm = 0.2 * mean.mean((0, 2, 3))
    rv = 0.8 + 0.2 * (x.var((2, 3), ddof=1)).mean(0)
    _close(m.running_mean, rm)
    _close(m.running_var, rv)
    assert m.num_batches_tracked.item() == 0  # as PyTorch: instance norm does not count
    m.eval()
    _close(m(gt.tensor(x)), (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5))
    _close(m(gt.tensor(x[0])), (x[0] - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5))


def test_lazy_instance_norm_without_stats_becomes_instance_norm(conn):
    m = nn.LazyInstanceNorm1d(affine=True, track_running_stats=False, bias=False)
    x = _r(3, 7, seed=19)  # unbatched [C, L]
    y = m(gt.tensor(x))
    assert type(m) is nn.InstanceNorm1d and m.num_features == 3 and m.bias is None
    _close(y, (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5))
    bare = nn.LazyInstanceNorm3d(affine=False, track_running_stats=False)
    bare(gt.tensor(_r(1, 2, 2, 2, 2)))
    assert type(bare) is nn.InstanceNorm3d and bare.num_features == 0  # nothing to size: as PyTorch


# ------------------------------------------------------------------ Buffer, placeholders
def test_buffer_assignment_registers_with_persistence(conn):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Buffer(gt.tensor(np.array([2.0, 3.0])))
            self.offset = nn.Buffer(gt.zeros(2, dtype="float64"), persistent=False)
            self.plain = gt.ones(2)

    m = Scaled()
    assert [n for n, _ in m.named_buffers()] == ["scale", "offset"]
    assert list(m.state_dict()) == ["scale"] and isinstance(m.scale, nn.Buffer)
    m.scale = nn.Buffer(gt.tensor(np.array([1.0, -1.0])), persistent=False)
    assert list(m.state_dict()) == [] and m.scale.persistent is False
    m.scale = gt.tensor(np.array([5.0, 6.0]))  # a registered buffer takes a plain tensor
    assert "scale" in dict(m.named_buffers())
    _close(copy.deepcopy(m).scale, [5.0, 6.0])
    quiet = copy.deepcopy(nn.Buffer(gt.ones(2), persistent=False))
    assert isinstance(quiet, nn.Buffer) and not quiet.persistent
    with pytest.raises(TypeError, match="cannot assign 'Buffer' as parameter 'w'"):
        lin = nn.Linear(2, 2)
        lin.w = nn.Parameter(gt.ones(2))
        lin.w = nn.Buffer(gt.ones(2))
    b = nn.Buffer(gt.ones(3, requires_grad=True))
    assert b.requires_grad and b.persistent


def test_uninitialized_placeholders_materialize_in_place(conn):
    p, b = nn.UninitializedParameter(dtype="float64"), nn.UninitializedBuffer()
    assert (repr(p), repr(b)) == ("<UninitializedParameter>", "<UninitializedBuffer>")
    assert p.requires_grad and not b.requires_grad
    p.materialize((2, 3))
    b.materialize(4)
    assert type(p) is nn.Parameter and tuple(p.shape) == (2, 3) and p.dtype == "float64"
    assert type(b) is gt.Tensor and tuple(b.shape) == (4,) and b.dtype == "float32"  # (as PyTorch)


# ------------------------------------------------------------------ multi-head attention
def _mha_ref(q, k, v, h, w_in, b_in, bias_k, bias_v, zero_attn, w_out, b_out, pad, mask):
    ln, n, e = q.shape
    hd = e // h
    qp, kp, vp = (t @ w_in[i * e : (i + 1) * e].T + b_in[i * e : (i + 1) * e]
                  for i, t in enumerate((q, k, v)))  # fmt: skip
    kp = np.concatenate([kp, np.repeat(bias_k, n, 1)], 0)
    vp = np.concatenate([vp, np.repeat(bias_v, n, 1)], 0)
    hide = np.concatenate([mask, np.zeros((ln, 1), bool)], 1)[None, None]
    hide = hide | np.concatenate([pad, np.zeros((n, 1), bool)], 1)[:, None, None]
    qh = qp.reshape(ln, n, h, hd).transpose(1, 2, 0, 3)
    kh = kp.reshape(-1, n, h, hd).transpose(1, 2, 0, 3)
    vh = vp.reshape(-1, n, h, hd).transpose(1, 2, 0, 3)
    if zero_attn:
        kh = np.concatenate([kh, np.zeros((n, h, 1, hd))], 2)
        vh = np.concatenate([vh, np.zeros((n, h, 1, hd))], 2)
        hide = np.concatenate([hide, np.zeros(hide.shape[:3] + (1,), bool)], 3)
    s = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    s = np.where(hide, -np.inf, s)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    o = (w @ vh).transpose(2, 0, 1, 3).reshape(ln, n, e)
    return o @ w_out.T + b_out, w.mean(1)


def test_multi_head_attention_forward_matches_reference(conn):
    e, h, ln, sn, n = 8, 2, 4, 5, 3
    q, k, v = _r(ln, n, e, seed=20), _r(sn, n, e, seed=21), _r(sn, n, e, seed=22)
    w_in, b_in = _r(3 * e, e, seed=23) * 0.3, _r(3 * e, seed=24) * 0.1
    bias_k, bias_v = _r(1, 1, e, seed=25), _r(1, 1, e, seed=26)
    w_out, b_out = _r(e, e, seed=27) * 0.3, _r(e, seed=28) * 0.1
    pad = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    mask = np.triu(np.ones((ln, sn), bool), 1)
    ref, ref_w = _mha_ref(q, k, v, h, w_in, b_in, bias_k, bias_v, True, w_out, b_out, pad, mask)
    T = gt.tensor
    out, w = F.multi_head_attention_forward(
        T(q), T(k), T(v), e, h, T(w_in), T(b_in), T(bias_k), T(bias_v), True, 0.0, T(w_out),
        T(b_out), key_padding_mask=T(pad), attn_mask=T(mask),
    )  # fmt: skip
    _close(out, ref, 1e-6, 1e-9)
    _close(w, ref_w, 1e-6, 1e-9)
    out2, none = F.multi_head_attention_forward(
        T(q), T(k), T(v), e, h, T(w_in), T(b_in), T(bias_k), T(bias_v), True, 0.9, T(w_out),
        T(b_out), training=False, key_padding_mask=T(pad), attn_mask=T(mask), need_weights=False,
    )  # fmt: skip
    assert none is None
    _close(out2, ref, 1e-6, 1e-9)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        F.multi_head_attention_forward(T(q), T(q), T(q), e, h, T(w_in), T(b_in), None, None,
                                       False, 0.0, T(w_out), T(b_out), is_causal=True)  # fmt: skip


def test_multihead_attention_module_with_bias_kv_and_zero_attn(conn):
    mha = nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True, dtype="float64")
    assert [n for n, _ in mha.named_parameters()] == [
        "in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj.weight", "out_proj.bias"
    ]  # fmt: skip
    assert tuple(mha.bias_k.shape) == (1, 1, 8) and mha.add_zero_attn
    sd = {k: v.numpy() for k, v in mha.state_dict().items()}
    x = _r(4, 3, 8, seed=29)
    pad = np.zeros((3, 4), bool)
    pad[1, 3] = True
    ref, ref_w = _mha_ref(x, x, x, 2, sd["in_proj_weight"], sd["in_proj_bias"], sd["bias_k"],
                          sd["bias_v"], True, sd["out_proj.weight"], sd["out_proj.bias"], pad,
                          np.zeros((4, 4), bool))  # fmt: skip
    out, w = mha(gt.tensor(x), gt.tensor(x), gt.tensor(x), key_padding_mask=gt.tensor(pad))
    _close(out, ref, 1e-6, 1e-9)
    _close(w, ref_w, 1e-6, 1e-9)
    out.sum().backward()
    assert mha.bias_k.grad is not None and mha.bias_v.grad is not None


# ------------------------------------------------------------------ linear cross entropy
def _ce_ref(logits, t, ignore=-100):
    lp = _log_softmax(logits, 1)
    keep = t != ignore
    picked = np.take_along_axis(lp, np.where(keep, t, 0)[:, None], 1)[:, 0]
    return -(picked * keep).sum() / keep.sum()


def test_linear_cross_entropy_matches_reference(conn):
    x, w, b = _r(6, 5, seed=30), _r(7, 5, seed=31), _r(7, seed=32)
    t = np.random.default_rng(33).integers(0, 7, 6)
    t[2] = -100
    xt = gt.tensor(x, requires_grad=True)
    loss = F.linear_cross_entropy(xt, gt.tensor(w), gt.tensor(t), linear_bias=gt.tensor(b))
    _close(loss, _ce_ref(x @ w.T + b, t))
    loss.backward()
    _close(xt.grad, _fd(lambda v: _ce_ref(v.reshape(6, 5) @ w.T + b, t), x.copy()), 1e-5, 1e-7)
    wk = _r(7, 2, 5, seed=34)
    tk = np.random.default_rng(35).integers(0, 7, (6, 2))
    lk = F.linear_cross_entropy(gt.tensor(x), gt.tensor(wk), gt.tensor(tk), reduction="sum")
    logits = np.einsum("ni,cdi->ncd", x, wk)
    ref = sum(_ce_ref(logits[:, :, d], tk[:, d]) * 6 for d in range(2))
    _close(lk, ref)
    with pytest.raises(RuntimeError, match="ignore_index cannot be specified"):
        probs = gt.tensor(np.full((6, 7), 1 / 7))
        F.linear_cross_entropy(gt.tensor(x), gt.tensor(w), probs, ignore_index=0)


def test_linear_cross_entropy_module_and_options(conn):
    mod = nn.LinearCrossEntropyLoss(5, 7, out_features=(2,), bias=True)
    assert list(mod.state_dict()) == ["linear.weight", "linear.bias"]
    assert tuple(mod.linear.weight.shape) == (14, 5)
    assert repr(mod).startswith(
        "LinearCrossEntropyLoss(\n  in_features=5, num_classes=7, out_features=(2,), bias=True, "
        "reduction=mean, ignore_index=None, label_smoothing=0.0, options=None\n  (linear): Linear"
    )
    x = _r(3, 5, seed=36, dtype=np.float32)
    t = np.random.default_rng(37).integers(0, 7, (3, 2))
    wn, bn = mod.linear.weight.detach().numpy(), mod.linear.bias.detach().numpy()
    logits = (x @ wn.T + bn).reshape(3, 7, 2)
    ref = np.mean([_ce_ref(logits[:, :, d], t[:, d]) for d in range(2)])
    _close(mod(gt.tensor(x), gt.tensor(t)), ref, 1e-5, 1e-6)
    opts = nn.LinearCrossEntropyOptions(batch_chunk_size=4, chunking_method=None)
    assert repr(opts) == (
        "LinearCrossEntropyOptions(allow_retain_graph=False, batch_chunk_size=4, "
        "chunking_method=None, acc_policy='auto', acc_dtype=None)"
    )
    with pytest.raises(ValueError, match="invalid acc_policy"):
        nn.LinearCrossEntropyOptions(acc_policy="fast")
    with pytest.raises(ValueError, match="invalid chunking_method"):
        nn.LinearCrossEntropyOptions(chunking_method="rows")
    with pytest.raises(RuntimeError, match="expected label_smoothing to be in range"):
        nn.LinearCrossEntropyLoss(5, 7, label_smoothing=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # GT ignores the options silently: same values
        nn.LinearCrossEntropyLoss(5, 7, options=opts)(gt.tensor(x), gt.tensor(t[:, 0]))
