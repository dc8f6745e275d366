"""Idioms of ported PyTorch code that GT once refused or got wrong (found by the differential
suite's generative, transformer, vision and graph programs): dtype objects with attributes,
``torch._foreach_*``, ``inference_mode``, ``Embedding(max_norm=...)``, every ``interpolate``
mode, ``scatter_reduce`` beyond sums, and the small signatures scripts rely on."""

from __future__ import annotations

import inspect
import io
import math
import pickle

import numpy as np
import pytest

import gt
import gt.nn.functional as F


# ----------------------------------------------------------------------------- dtypes
def test_a_dtype_is_its_name_with_pytorchs_attributes(conn):
    x = gt.ones(2)
    assert x.dtype == "float32" and x.dtype == gt.float32 and x.dtype is gt.float32
    assert isinstance(x.dtype, gt.dtype) and isinstance(x.dtype, str)
    assert str(x.dtype) == repr(x.dtype) == "gt.float32"
    assert (x.dtype.is_floating_point, x.dtype.is_complex, x.dtype.itemsize) == (True, False, 4)
    assert not gt.int64.is_floating_point and gt.int64.is_signed and not gt.uint8.is_signed
    assert gt.complex64.to_real() is gt.float32 and gt.float64.to_complex() is gt.complex128
    assert (x > 0).dtype is gt.bool and x.long().dtype is gt.int64
    assert {gt.float32: 1}["float32"] == 1 and {"float32": 1}[x.dtype] == 1
    assert gt.get_default_dtype() is gt.float32
    assert pickle.loads(pickle.dumps(x.dtype)) is gt.float32


def test_a_checkpoint_holding_a_dtype_loads_with_weights_only(conn, tmp_path):
    path = tmp_path / "ckpt.pt"
    gt.save({"dtype": gt.float64, "w": gt.arange(3.0, dtype=gt.float64)}, path)
    back = gt.load(path)
    assert back["dtype"] is gt.float64 and back["w"].dtype is gt.float64


# ----------------------------------------------------------------------------- _foreach
def test_foreach_ops_equal_the_loop_they_stand_for(conn):
    a = [gt.tensor([1.0, 2.0]), gt.tensor([[3.0], [4.0]])]
    b = [gt.tensor([0.5, -1.0]), gt.tensor([[2.0], [8.0]])]
    gt._foreach_mul_(a, 2.0)
    gt._foreach_add_(a, b, alpha=0.5)
    gt._foreach_lerp_(a, b, [0.25, 0.5])
    gt._foreach_addcmul_(a, b, b, value=-1.0)
    want = [np.array([1.0, 2.0]), np.array([[3.0], [4.0]])]
    bs = [np.array([0.5, -1.0]), np.array([[2.0], [8.0]])]
    for i, w in enumerate((0.25, 0.5)):
        want[i] = want[i] * 2.0 + 0.5 * bs[i]
        want[i] = want[i] + w * (bs[i] - want[i])
        want[i] = want[i] - bs[i] * bs[i]
    for got, w in zip(a, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-6)
    norms = gt._foreach_norm(b)
    assert [round(n.item(), 5) for n in norms] == [
        round(math.hypot(0.5, 1.0), 5),
        round(math.hypot(2, 8), 5),
    ]
    assert [t.tolist() for t in gt._foreach_sqrt([gt.tensor([4.0, 9.0])])] == [[2.0, 3.0]]
    gt._foreach_maximum_(b, 1.0)  # no Tensor.maximum_ in PyTorch either: computed, then copied
    assert b[0].tolist() == [1.0, 1.0]


def test_foreach_refuses_lists_of_different_lengths(conn):
    with pytest.raises(RuntimeError, match="has 1 entries where the tensor list has 2"):
        gt._foreach_add_([gt.ones(1), gt.ones(1)], [gt.ones(1)])


# ----------------------------------------------------------------------------- inference_mode
def test_inference_mode_marks_its_tensors_and_can_be_turned_off_inside(conn):
    w = gt.ones(3, requires_grad=True)
    with gt.inference_mode():
        a = w * 2
        assert gt.is_inference_mode_enabled() and not gt.is_grad_enabled()
        with gt.inference_mode(False):
            b = w * 2
            assert not gt.is_inference_mode_enabled() and gt.is_grad_enabled()
    assert a.is_inference() and not a.requires_grad
    assert not b.is_inference() and b.requires_grad and not w.is_inference()
    assert not gt.is_inference_mode_enabled() and gt.is_grad_enabled()

    @gt.inference_mode
    def plain(x):
        return x * 3

    @gt.inference_mode(mode=True)
    def called(x):
        return x * 3

    assert plain(w).is_inference() and called(w).is_inference()


# ----------------------------------------------------------------------------- embeddings
def test_embedding_max_norm_renormalizes_the_looked_up_rows_in_place(conn):
    e = gt.nn.Embedding(3, 2, max_norm=1.0)
    with gt.no_grad():
        e.weight.copy_(gt.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]]))
    out = e(gt.tensor([0, 1, 0]))
    np.testing.assert_allclose(
        out.detach().numpy(), [[0.6, 0.8], [0.3, 0.4], [0.6, 0.8]], rtol=1e-6
    )
    # row 2 was not looked up: it keeps its norm of 10
    np.testing.assert_allclose(e.weight.detach().numpy()[2], [6.0, 8.0])
    assert "max_norm=1.0" in repr(e)


def test_embedding_scale_grad_by_freq_divides_by_the_count_in_the_batch(conn):
    e = gt.nn.Embedding(3, 2, scale_grad_by_freq=True)
    idx = gt.tensor([[0, 0, 1], [0, 2, 1]])
    (e(idx) * gt.arange(12.0).reshape(2, 3, 2)).sum().backward()
    # row 0 at positions 0, 1, 3 (three times), row 1 at 2 and 5, row 2 at 4
    g = np.arange(12.0).reshape(6, 2)
    want = [(g[0] + g[1] + g[3]) / 3, (g[2] + g[5]) / 2, g[4]]
    np.testing.assert_allclose(e.weight.grad.numpy(), want, rtol=1e-6)


# ----------------------------------------------------------------------------- interpolate
def test_antialiased_resizing_keeps_a_constant_image_constant(conn):
    x = gt.full((1, 2, 9, 13), 2.5)
    for mode in ("bilinear", "bicubic"):
        for size in ((3, 4), (4, 13), (18, 5)):
            y = F.interpolate(x, size=size, mode=mode, antialias=True)
            np.testing.assert_allclose(y.numpy(), 2.5, rtol=1e-6)


def test_area_resizing_is_adaptive_average_pooling(conn):
    x = gt.tensor(np.random.default_rng(0).standard_normal((2, 3, 7, 9)).astype(np.float32))
    np.testing.assert_allclose(
        F.interpolate(x, size=(3, 4), mode="area").numpy(),
        F.adaptive_avg_pool2d(x, (3, 4)).numpy(),
    )


def test_bicubic_and_antialiased_resizing_give_pytorchs_values(conn):
    """Reference values from PyTorch 2.13 (``F.interpolate`` on this 4x4 input)."""
    x = gt.arange(16.0).reshape(1, 1, 4, 4) ** 2
    cubic = F.interpolate(x, size=(3, 3), mode="bicubic", align_corners=False)
    np.testing.assert_allclose(
        cubic.numpy().ravel(),
        [1.6817, 5.1018, 12.6979, 35.6053, 54.1250, 76.8206, 136.3438, 169.9630, 207.7582],
        atol=2e-4,
    )
    aa = F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True)
    np.testing.assert_allclose(
        aa.numpy().ravel(), [21.0816, 34.7755, 105.4898, 138.9388], atol=2e-4
    )


def test_interpolate_refuses_what_pytorch_refuses(conn):
    x = gt.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(x, size=(2, 2), mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=(2, 2), mode="nearest", align_corners=False)


# ----------------------------------------------------------------------------- scatter_reduce
def test_scatter_reduce_amax_amin_prod_with_and_without_self(conn):
    base = gt.tensor([0.5, 4.0, 3.0])
    idx = gt.tensor([0, 0, 1, 1])
    src = gt.tensor([1.0, 5.0, 2.0, 4.0])
    got = {
        (r, inc): base.scatter_reduce(0, idx, src, r, include_self=inc).tolist()
        for r in ("amax", "amin", "prod")
        for inc in (True, False)
    }
    assert got == {
        ("amax", True): [5.0, 4.0, 3.0],
        ("amax", False): [5.0, 4.0, 3.0],
        ("amin", True): [0.5, 2.0, 3.0],
        ("amin", False): [1.0, 2.0, 3.0],
        ("prod", True): [2.5, 32.0, 3.0],
        ("prod", False): [5.0, 8.0, 3.0],
    }
    ints = gt.tensor([[1, 9, 3], [4, 5, 6]])
    where = gt.tensor([[0, 0, 2], [1, 1, 0]])
    vals = gt.tensor([[7, 8, 1], [2, 3, 10]])
    assert ints.scatter_reduce(1, where, vals, "amin", include_self=False).tolist() == [
        [7, 9, 1],
        [10, 2, 6],
    ]
    assert gt.ones(3).scatter_(0, gt.tensor([0, 2, 0]), gt.tensor([2.0, 3.0, 4.0]),
                               reduce="multiply").tolist() == [8.0, 1.0, 3.0]  # fmt: skip


def test_scatter_reduce_gradients_share_ties_and_survive_zeros(conn):
    base = gt.tensor([5.0, 1.0, 2.0], requires_grad=True)
    src = gt.tensor([5.0, 5.0, 2.0, 0.0, 0.0, 3.0], requires_grad=True)
    idx = gt.tensor([0, 0, 1, 2, 2, 2])
    gx, gs = gt.autograd.grad(base.scatter_reduce(0, idx, src, "amax").sum(), (base, src))
    # position 0: self and two sources tie at 5 and share its gradient in thirds
    np.testing.assert_allclose(gx.numpy(), [1 / 3, 0.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(gs.numpy(), [1 / 3, 1 / 3, 1.0, 0.0, 0.0, 1.0], rtol=1e-6)
    gx, gs = gt.autograd.grad(base.scatter_reduce(0, idx, src, "prod").sum(), (base, src))
    # position 2 has two zero factors: every gradient there is zero
    np.testing.assert_allclose(gx.numpy(), [25.0, 2.0, 0.0])
    np.testing.assert_allclose(gs.numpy(), [25.0, 25.0, 1.0, 0.0, 0.0, 0.0])
    one = gt.tensor([2.0, 0.0, 3.0], requires_grad=True)
    start = gt.tensor([0.0, 1.0], requires_grad=True)
    gx, gs = gt.autograd.grad(start.scatter_reduce(0, gt.tensor([0, 1, 1]), one, "prod").sum(),
                              (start, one))  # fmt: skip
    # a lone zero factor: its gradient is the product of the others (1 * 3)
    np.testing.assert_allclose(gx.numpy(), [2.0, 0.0])
    np.testing.assert_allclose(gs.numpy(), [0.0, 3.0, 0.0])


def test_scatter_reduce_names_the_reductions_it_knows(conn):
    with pytest.raises(RuntimeError, match="sum, prod, mean, amax or amin, got median"):
        gt.zeros(2).scatter_reduce(0, gt.tensor([0]), gt.ones(1), "median")


# ----------------------------------------------------------------------------- small signatures
def test_signatures_ported_scripts_call(conn):
    from collections import OrderedDict

    nn = gt.nn
    seq = nn.Sequential(OrderedDict([("conv", nn.Conv2d(1, 2, 3)), ("act", nn.ReLU()),
                                     ("flat", nn.Flatten())]))  # fmt: skip
    assert [name for name, _ in seq[:2].named_children()] == ["conv", "act"]
    v = gt.arange(6).reshape(2, 3)
    assert gt.flip(v, dims=[1]).tolist() == [[2, 1, 0], [5, 4, 3]]
    assert v.flip(dims=(0,)).tolist() == [[3, 4, 5], [0, 1, 2]]
    assert gt.repeat_interleave(gt.tensor([2, 0, 3])).tolist() == [0, 0, 2, 2, 2]
    pts = gt.tensor([[0.0, 0.0], [3.0, 4.0]])
    assert gt.cdist(pts, pts, compute_mode="donot_use_mm_for_euclid_dist").tolist() == [
        [0.0, 5.0],
        [5.0, 0.0],
    ]
    with nn.attention.sdpa_kernel(nn.attention.SDPBackend.MATH):
        pass
    with pytest.raises(ValueError, match="SDPBackend"):
        with nn.attention.sdpa_kernel("flash"):
            pass
    w = nn.Parameter(gt.ones(2))
    for opt in (gt.optim.Adam, gt.optim.AdamW, gt.optim.SGD):
        assert {"foreach", "fused", "differentiable"} <= set(inspect.signature(opt).parameters)
        opt([w], lr=0.1, foreach=None, fused=False)
        with pytest.raises(NotImplementedError, match="differentiable=True"):
            opt([w], lr=0.1, differentiable=True)


def test_a_module_state_dict_round_trips_through_bytes(conn):
    m = gt.nn.Linear(2, 2)
    buf = io.BytesIO()
    gt.save(m.state_dict(), buf)
    buf.seek(0)
    state = gt.load(buf)
    assert {k: v.dtype for k, v in state.items()} == {"weight": gt.float32, "bias": gt.float32}


# ----------------------------------------------------------------------------- strides
def test_views_report_pytorchs_strides_and_contiguous_makes_them_row_major(conn):
    x = gt.arange(24.0).reshape(1, 2, 3, 4)
    p = x.permute(0, 2, 3, 1)
    assert (p.is_contiguous(), p.stride()) == (False, (24, 4, 1, 12))
    assert (p.contiguous().is_contiguous(), p.contiguous().stride()) == (True, (24, 8, 2, 1))
    assert p.clone().stride() == (24, 4, 1, 12)  # a dense layout survives a clone
    assert (
        not x.transpose(2, 3).is_contiguous()
        and x.transpose(2, 3).transpose(2, 3).stride() == x.stride()
    )
    e = gt.ones(3, 1).expand(3, 4)
    assert (e.stride(), e.is_contiguous(), e.clone().is_contiguous()) == ((1, 0), False, True)
    assert gt.ones(1, 3, 1, 1).permute(0, 2, 3, 1).is_contiguous()  # size-1 dims do not count
    w = gt.ones(2, 3, requires_grad=True)
    w.t().contiguous().sum().backward()
    assert w.grad.tolist() == [[1.0] * 3] * 2


def test_channels_last_is_reported_for_tensors_and_module_parameters(conn):
    x = gt.arange(24.0).reshape(1, 2, 3, 4)
    cl = x.to(memory_format=gt.channels_last)
    assert cl.stride() == (24, 1, 8, 2)
    assert cl.is_contiguous(memory_format=gt.channels_last) and not cl.is_contiguous()
    assert not x.is_contiguous(memory_format=gt.channels_last)
    assert x.contiguous(memory_format=gt.channels_last).stride() == (24, 1, 8, 2)
    np.testing.assert_array_equal(cl.numpy(), x.numpy())  # the values do not move
    m = gt.nn.Conv2d(3, 4, 3).to(memory_format=gt.channels_last)
    assert m.weight.stride() == (27, 1, 9, 3) and m.bias.stride() == (1,)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        gt.ones(2, 3).to(memory_format=gt.channels_last)


# ----------------------------------------------------------------------------- more of the same
def test_instance_norm_tracks_running_statistics_and_uses_them_in_eval(conn):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)
    m = gt.nn.InstanceNorm2d(3, track_running_stats=True, momentum=0.5)
    m(gt.tensor(data))
    per_sample = data.reshape(4, 3, -1)
    want_mean = 0.5 * per_sample.mean(2).mean(0)
    want_var = 0.5 + 0.5 * per_sample.var(2, ddof=1).mean(0)
    np.testing.assert_allclose(m.running_mean.numpy(), want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.running_var.numpy(), want_var, rtol=1e-5)
    m.eval()
    got = m(gt.tensor(data)).numpy()
    want = (data - want_mean[None, :, None, None]) / np.sqrt(want_var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert "num_batches_tracked" in m.state_dict()


def test_grads_batched_gives_one_gradient_per_row_of_grad_outputs(conn):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (jac,) = gt.autograd.grad(x**2, x, gt.eye(3), is_grads_batched=True)
    np.testing.assert_allclose(jac.numpy(), np.diag([2.0, 4.0, 6.0]))


def test_index_reduce_and_take_along_dim_without_dim(conn):
    src = gt.tensor([[2.0, 3.0], [4.0, 5.0], [6.0, 7.0]])
    idx = gt.tensor([0, 2, 0])
    assert gt.ones(3, 2).index_reduce(0, idx, src, "prod").tolist() == [
        [12.0, 21.0],
        [1.0, 1.0],
        [4.0, 5.0],
    ]
    assert gt.ones(3, 2).index_reduce(0, idx, src, "amax", include_self=False).tolist() == [
        [6.0, 7.0],
        [1.0, 1.0],
        [4.0, 5.0],
    ]
    t = gt.ones(3, 2)
    t.index_reduce_(1, gt.tensor([1]), gt.tensor([[2.0], [4.0], [6.0]]), "mean")
    assert t.tolist() == [[1.0, 1.5], [1.0, 2.5], [1.0, 3.5]]
    grid = gt.tensor([[10, 30, 20], [60, 40, 50]])
    assert gt.take_along_dim(grid, gt.tensor([5, 0])).tolist() == [50, 10]
    m = gt.nn.Linear(2, 2)
    assert m.to_empty(device="cpu") is m


def test_lstm_projections_shape_states_and_outputs_as_pytorch(conn):
    m = gt.nn.LSTM(5, 8, num_layers=2, proj_size=3, bidirectional=True, batch_first=True)
    names = [(n, tuple(p.shape)) for n, p in m.named_parameters()][:5]
    assert names == [("weight_ih_l0", (32, 5)), ("weight_hh_l0", (32, 3)), ("bias_ih_l0", (32,)),
                     ("bias_hh_l0", (32,)), ("weight_hr_l0", (3, 8))]  # fmt: skip
    assert tuple(m.weight_ih_l1.shape) == (32, 6)  # the next layer reads both projected directions
    out, (h, c) = m(gt.randn(2, 4, 5))
    assert (tuple(out.shape), tuple(h.shape), tuple(c.shape)) == ((2, 4, 6), (4, 2, 3), (4, 2, 8))
    assert repr(m).startswith("LSTM(5, 8, proj_size=3, num_layers=2")
    # one step by hand: h = W_hr (o * tanh(c)) with c = i * g (zero initial state)
    one = gt.nn.LSTM(2, 4, proj_size=1, bias=False)
    x = gt.tensor([[[0.5, -1.0]]])
    y, _ = one(x)
    gates = (x[0, 0] @ one.weight_ih_l0.T).detach().numpy()
    i, _, g, o = (gates[k * 4 : (k + 1) * 4] for k in range(4))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    cell = sig(i) * np.tanh(g)
    want = one.weight_hr_l0.detach().numpy() @ (sig(o) * np.tanh(cell))
    np.testing.assert_allclose(y.detach().numpy().ravel(), want, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- round two
def test_function_forms_take_a_number_first_and_an_out_tensor(conn):
    x = gt.tensor([0.0, 1.0, 2.0])
    ints = gt.tensor([1, 2, 3])
    assert gt.pow(10.0, x).tolist() == [1.0, 10.0, 100.0]
    assert gt.pow(2, ints).tolist() == [2, 4, 8] and gt.pow(2, ints).dtype is gt.int64
    assert gt.add(1.0, x, alpha=2).tolist() == [1.0, 3.0, 5.0] and gt.sub(1, ints).tolist() == [
        0,
        -1,
        -2,
    ]
    a = gt.ones(3)
    assert gt.add(a, gt.arange(3.0), alpha=2, out=a) is a and a.tolist() == [1.0, 3.0, 5.0]
    wide = gt.zeros(3, dtype=gt.float64)
    gt.exp(x, out=wide)
    assert wide.dtype is gt.float64 and round(wide.tolist()[1], 4) == 2.7183
    with pytest.raises(
        RuntimeError, match="out=... arguments don't support automatic differentiation"
    ):
        gt.add(gt.ones(2, requires_grad=True), 1, out=gt.zeros(2))
    assert gt.div(gt.tensor([-7, 7]), 2, rounding_mode="trunc").tolist() == [-3, 3]
    t = gt.tensor([-7.0, 7.0])
    t.div_(2, rounding_mode="trunc")
    assert t.tolist() == [-3.0, 3.0]


def test_function_forms_of_two_numbers_give_a_0d_tensor_usable_as_a_size(conn):
    # Longformer: chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1
    n = gt.div(16, 2, rounding_mode="trunc")
    assert n.dtype is gt.int64 and n.shape == () and n.item() == 8
    assert gt.div(16, 2).dtype is gt.float32 and gt.div(7, 2).item() == 3.5
    assert gt.add(1, 2.5).dtype is gt.float32 and gt.pow(2, 3).item() == 8
    assert gt.zeros(2, n - 1).shape == (2, 7) and gt.arange(16.0).view(n, -1).shape == (8, 2)


def test_legacy_typed_constructors_and_type_names(conn):
    x = gt.FloatTensor([[1, 2]])
    assert x.dtype is gt.float32 and gt.LongTensor([1, 2]).dtype is gt.int64
    assert tuple(gt.FloatTensor(2, 3).shape) == (2, 3) and tuple(gt.ByteTensor().shape) == (0,)
    assert isinstance(x, gt.FloatTensor) and not isinstance(x, gt.LongTensor)
    assert x.type() == "gt.FloatTensor" and x.type(gt.LongTensor).dtype is gt.int64
    assert x.type("torch.DoubleTensor").dtype is gt.float64


def test_indexing_and_assignment_as_pytorch_casts_and_broadcasts(conn):
    x = gt.arange(12.0).view(3, 4)
    assert x[range(3), gt.tensor([0, 2, 1])].tolist() == [0.0, 6.0, 9.0]
    z = gt.zeros(3, 4)
    z[0] = gt.ones(1, 4)  # leading size-1 dimensions are dropped first
    z[1:3] = gt.full((1, 1, 4), 2.0)
    assert z.sum().item() == 20.0
    i = gt.zeros(2, dtype=gt.int64)
    i[0] = 2.7  # cast to the tensor's dtype (truncated), as PyTorch does
    b = gt.zeros(2, 3, dtype=gt.bool)
    b[..., :1] = 1
    assert i.tolist() == [2, 0] and b[:, 0].tolist() == [True, True]
    X, Y = gt.meshgrid(gt.tensor([0.0, 1.0, 2.0]), gt.tensor([10.0, 20.0]), indexing="xy")
    assert X.tolist() == [[0.0, 1.0, 2.0]] * 2 and Y.tolist() == [[10.0] * 3, [20.0] * 3]
    v = gt.tensor([[1.0, 5.0], [7.0, 2.0]])
    assert v.max(axis=1).indices.tolist() == [1, 0] and v.sort(axis=1).values.tolist() == [
        [1.0, 5.0],
        [2.0, 7.0],
    ]
    assert gt.arange(6.0).as_strided((2, 3), (2, 1)).tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0]]


def test_log_space_reductions_and_attention_survive_infinities(conn):
    inf = math.inf
    assert gt.logsumexp(gt.tensor([[-inf, -inf], [0.0, -inf]]), 1).tolist() == [-inf, 0.0]
    assert gt.logsumexp(gt.tensor([inf, 1.0]), 0).item() == inf
    assert gt.logaddexp(gt.tensor(-inf), gt.tensor(-inf)).item() == -inf
    q = gt.ones(1, 2, 4, requires_grad=True)
    k, v = gt.ones(1, 3, 4), gt.arange(12.0).view(1, 3, 4)
    mask = gt.tensor([[True, True, False], [False, False, False]])  # query 1 may see nothing
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.sum().backward()
    assert out[0, 1].tolist() == [0.0] * 4 and not np.isnan(q.grad.numpy()).any()


def test_gradient_with_coordinates_and_second_order_edges(conn):
    x = gt.tensor([0.0, 0.1, 0.3, 0.6, 1.0])
    (g,) = gt.gradient(x**2, spacing=(x,))
    np.testing.assert_allclose(g.numpy(), [0.1, 0.2, 0.6, 1.2, 1.6], rtol=1e-5)
    (g2,) = gt.gradient(gt.tensor([0.0, 1.0, 4.0, 9.0, 16.0]), spacing=0.5, edge_order=2)
    np.testing.assert_allclose(g2.numpy(), [0.0, 4.0, 8.0, 12.0, 16.0], atol=1e-5)


def test_grad_accumulates_into_the_tensor_a_program_holds(conn):
    w = gt.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    held = w.grad
    (w * 3).sum().backward()
    assert held is w.grad and held.tolist() == [5.0] * 3


def test_signal_windows_and_module_aliases(conn):
    np.testing.assert_allclose(
        gt.signal.windows.hann(4, sym=False).numpy(), [0.0, 0.5, 1.0, 0.5], atol=1e-7
    )
    w = gt.signal.windows.kaiser(5, beta=5.0)
    np.testing.assert_allclose(w.numpy(), np.kaiser(5, 5.0), rtol=1e-6)
    from gt.distributions.categorical import Categorical
    from gt.distributions.normal import Normal

    assert Categorical is gt.distributions.Categorical and gt.distributions.normal.Normal is Normal
    with gt.autocast("cpu", dtype=gt.bfloat16):
        assert gt.is_autocast_cpu_enabled() and gt.get_autocast_dtype("cpu") is gt.bfloat16
    assert not gt.is_autocast_cpu_enabled() and not gt.is_inference(gt.ones(1))


def test_conv_tbc_and_nonzero_static(conn):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = gt.conv_tbc(gt.tensor(x), gt.tensor(w), gt.tensor(b), 1).numpy()
    padded = np.pad(x, ((1, 1), (0, 0), (0, 0)))
    want = np.stack([sum(padded[t + k] @ w[k] for k in range(3)) + b for t in range(5)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    t = gt.tensor([[0, 1], [2, 0]])
    assert gt.nonzero_static(t, size=4).tolist() == [[0, 1], [1, 0], [-1, -1], [-1, -1]]
    assert gt.nonzero_static(t, size=1).tolist() == [[0, 1]]


def test_checkpoint_shapes_pytorch_scripts_read(conn):
    p = gt.nn.Parameter(gt.ones(2))
    opt = gt.optim.AdamW([p], lr=0.1)
    p.sum().backward()
    opt.step()
    saved = opt.state_dict()["state"][0]["step"]
    assert saved.dtype is gt.float32 and saved.item() == 1.0  # a tensor, as PyTorch saves it
    opt.load_state_dict(opt.state_dict())
    opt.step()
    assert opt.state_dict()["state"][0]["step"].item() == 2.0
    m = gt.nn.Sequential(gt.nn.Linear(2, 2), gt.nn.BatchNorm1d(2))
    assert (
        m.get_parameter("0.bias") is m[0].bias
        and m.get_buffer("1.running_mean") is m[1].running_mean
    )
    with pytest.raises(AttributeError):
        m.get_parameter("1.running_mean")
    with pytest.raises(RuntimeError) as err:
        gt.nn.Linear(2, 2).load_state_dict({"weight": gt.zeros(2, 2), "extra": gt.zeros(1)})
    assert str(err.value) == (
        'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". '
        '\n\tUnexpected key(s) in state_dict: "extra". '
    )


def test_bicubic_grid_sample_and_unfold_strides(conn):
    """Reference values from PyTorch 2.13."""
    x = gt.arange(16.0).view(1, 1, 4, 4)
    grid = gt.tensor([[[[-0.3, 0.2], [0.55, -0.7]]]])
    out = F.grid_sample(x, grid, mode="bicubic", align_corners=False)
    np.testing.assert_allclose(out.numpy().ravel(), [8.3636, 3.5242], atol=1e-4)
    ones = F.grid_sample(gt.ones(1, 2, 5, 5), gt.zeros(1, 3, 3, 2), mode="bicubic",
                         padding_mode="border")  # fmt: skip
    np.testing.assert_allclose(ones.numpy(), 1.0, rtol=1e-6)  # cubic weights sum to one
    w = gt.arange(30.0).reshape(3, 10).unfold(1, 4, 3)
    assert (w.stride(), w.is_contiguous()) == ((10, 3, 1), False)


def test_transformer_encoder_zeroes_padding_where_pytorch_runs_nested_tensors(conn):
    layer = gt.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    enc = gt.nn.TransformerEncoder(layer, 2)
    x = gt.randn(2, 3, 4)
    pad = gt.tensor([[False, False, False], [False, False, True]])
    enc.eval()
    with gt.no_grad():
        out = enc(x, src_key_padding_mask=pad)
        assert out[1, 2].tolist() == [0.0] * 4 and out[1, 1].abs().sum().item() > 0
        inner = gt.tensor([[False, True, False], [False, False, False]])  # not at the end
        assert enc(x, src_key_padding_mask=inner)[0, 1].abs().sum().item() > 0
    assert enc(x, src_key_padding_mask=pad)[1, 2].abs().sum().item() > 0  # gradients wanted
    odd = gt.nn.TransformerEncoder(gt.nn.TransformerEncoderLayer(4, 1, 8, batch_first=True), 1)
    assert not odd.use_nested_tensor and enc.use_nested_tensor
