"""What two probes against PyTorch 2.13 found on Dec 6 (nn.functional argument grids, 3,788
calls; gradients, 1,132 cases), each written out as PyTorch behaves: average pooling whose last
ceil-mode window starts in the padding, softmax's implicit dim, integer hardtanh and pooling,
losses in the input's dtype, repeated labels in multilabel_margin_loss, fully masked attention
rows, std past its count under autograd, clamp's and maximum's gradients at ties and NaN, the
gradients of repeated eigenvalues and singular values, det of a singular matrix, the zero
derivative of div(rounding_mode="floor") and atan2 at the origin, and jvp of functions whose
derivative is zero. Every test runs on NumPy workers and on workers whose CuPy is the test
double."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(120)

cluster = each_backend_cluster(workers=1)
F = gt.nn.functional
NAN = float("nan")


def _grads(f, *values, dtype=gt.float64):
    xs = [gt.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    out = f(*xs)
    out.backward(gt.ones_like(out) if out.ndim else None)
    return [x.grad.numpy() for x in xs]


def test_average_pooling_when_the_last_ceil_window_starts_in_the_padding(conn):
    x = gt.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]])
    # windows [pad, 1], [2, 3], [4, 5]; a fourth would start in the right padding: dropped
    out = F.avg_pool1d(x, 2, stride=2, padding=1, ceil_mode=True)
    assert out.tolist() == [[[0.5, 2.5, 4.5]]]
    out = F.avg_pool1d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)
    assert np.allclose(out.numpy(), [[[1.0, 3.0, 3.0]]])  # (the last window: [4, 5, pad] / 3)
    out = F.avg_pool1d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    assert np.allclose(out.numpy(), [[[1.5, 3.0, 4.5]]])
    grid = gt.arange(49.0).reshape(1, 1, 7, 7)
    assert F.avg_pool2d(grid, 2, 2, 1, ceil_mode=True).shape == (1, 1, 4, 4)


def test_integer_pooling_and_hardtanh_stay_integer(conn):
    x = gt.arange(16).reshape(1, 1, 4, 4)
    out = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    assert (out.dtype, out.tolist()) == (gt.int64, [[[[2, 4, 5], [8, 10, 11], [12, 14, 15]]]])
    h = F.hardtanh(gt.tensor([-3, 0, 3]), -2.5, 2.5)
    assert (h.dtype, h.tolist()) == (gt.int64, [-2, 0, 2])  # (the bounds cut toward zero)
    assert F.relu6(gt.tensor([-3, 4, 9])).tolist() == [0, 4, 6]
    with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
        F.hardtanh(gt.tensor([1], dtype=gt.uint8))


def test_softmax_without_a_dim_takes_pytorchs_implicit_one_and_warns(conn):
    x = gt.arange(24.0).reshape(2, 3, 4)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        implicit = F.softmax(x)
    np.testing.assert_allclose(implicit.numpy(), F.softmax(x, 0).numpy())  # 3-d: dim 0
    with pytest.warns(UserWarning, match="for log_softmax"):
        y = F.log_softmax(x.reshape(6, 4), None)
    np.testing.assert_allclose(y.numpy(), F.log_softmax(x.reshape(6, 4), 1).numpy())  # 2-d: 1
    with pytest.warns(UserWarning, match="for softmin"):
        assert F.softmin(gt.tensor([1.0, 1.0])).tolist() == [0.5, 0.5]


def test_losses_in_the_inputs_dtype_and_multilabel_margin_counts_repeats(conn):
    a, b = gt.tensor([0.5, 2.0]), gt.tensor([1.0, -1.0], dtype=gt.float64)
    assert F.huber_loss(a, b).dtype == gt.float32 and F.huber_loss(b, a).dtype == gt.float64
    assert F.soft_margin_loss(a, b).dtype == gt.float32
    x = gt.tensor([[0.1, 0.2, 0.4, 0.8]])
    assert math.isclose(F.multilabel_margin_loss(x, gt.tensor([[3, 3, -1, 0]])).item(), 0.65,
                        rel_tol=1e-6)  # fmt: skip
    assert math.isclose(F.multilabel_margin_loss(x, gt.tensor([[2, 2, 2, -1]])).item(), 2.175,
                        rel_tol=1e-6)  # fmt: skip


def test_attention_rows_that_may_attend_to_nothing_give_zero_without_weights(conn):
    gt.manual_seed(0)
    m = gt.nn.MultiheadAttention(4, 2, bias=False)
    q = gt.randn(3, 2, 4)
    mask = gt.tensor([[True, True, True], [False, False, True], [False, False, False]])
    out, w = m(q, q, q, attn_mask=mask, need_weights=False)
    assert w is None and out[0].tolist() == [[0.0] * 4] * 2
    assert not np.isnan(out.detach().numpy()).any()
    out, w = m(q, q, q, attn_mask=mask)  # (with weights PyTorch gives NaN there too)
    assert np.isnan(out[0].detach().numpy()).all() and not np.isnan(out[1:].detach().numpy()).any()


def test_attention_rows_that_may_attend_to_nothing_keep_every_gradient_finite(conn):
    # (a causal mask and left padding leave the first query nothing: TransformerEncoderLayer's
    # training call; the softmax of its all -inf scores must not reach backward)
    gt.manual_seed(0)
    layer = gt.nn.TransformerEncoderLayer(4, 1, 8, dropout=0.0, batch_first=True)
    x = gt.randn(1, 3, 4, requires_grad=True)
    mask = gt.nn.Transformer.generate_square_subsequent_mask(3)
    out = layer(x, src_mask=mask, src_key_padding_mask=gt.tensor([[True, False, False]]),
                is_causal=True)  # fmt: skip
    out.sum().backward()
    grads = [x.grad, *(p.grad for p in layer.parameters())]
    assert all(np.isfinite(g.numpy()).all() for g in grads)


def test_std_past_its_count_is_nan_under_autograd_too(conn):
    x = gt.tensor([2.0], dtype=gt.float64, requires_grad=True)
    assert math.isnan(gt.std(x).item()) and math.isnan(gt.std_mean(x)[0].item())
    y = gt.tensor([1.0, 1.0, 1.0], requires_grad=True)
    s = y.std()
    s.backward()
    assert s.item() == 0.0 and y.grad.tolist() == [0.0, 0.0, 0.0]  # (zero, not NaN, at 0)


def test_clamp_with_tensor_bounds_gives_ties_to_the_input(conn):
    x, lo, hi = [0.0, 1.0, 2.0, NAN, 5.0], [0.0, 0.5, 3.0, 0.0, 6.0], [0.0, 2.0, 1.0, 1.0, 4.0]
    gx, glo, ghi = _grads(lambda a, b, c: gt.clamp(a, b, c), x, lo, hi)
    assert gx.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert glo.tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]  # (min > max: everything goes to max)
    assert ghi.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]
    gx, glo = _grads(lambda a, b: gt.clamp(a, min=b), x, lo)
    assert gx.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0] and glo.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]
    assert np.isnan(gt.clamp(gt.tensor([NAN]), gt.tensor([0.0]), gt.tensor([1.0])).tolist()[0])


def test_maximum_and_minimum_pass_a_nans_gradient_to_both_inputs(conn):
    a, b = [NAN, 1.0, 2.0, 3.0], [1.0, NAN, 2.0, 1.0]
    ga, gb = _grads(gt.maximum, a, b)
    assert ga.tolist() == [1.0, 1.0, 0.5, 1.0] and gb.tolist() == [1.0, 1.0, 0.5, 0.0]
    ga, gb = _grads(gt.minimum, a, b)
    assert ga.tolist() == [1.0, 1.0, 0.5, 0.0] and gb.tolist() == [1.0, 1.0, 0.5, 1.0]


def test_repeated_eigenvalues_and_singular_values_have_finite_gradients(conn):
    eye = np.eye(3)
    (g,) = _grads(lambda a: gt.linalg.matrix_norm(a, "nuc"), eye)
    np.testing.assert_allclose(g, eye, atol=1e-12)
    (g,) = _grads(gt.linalg.eigvalsh, np.diag([2.0, 2.0, 5.0]))
    np.testing.assert_allclose(g, eye, atol=1e-12)
    (g,) = _grads(lambda a: gt.linalg.svd(a)[1].sum(), np.diag([2.0, 2.0, 5.0]))
    np.testing.assert_allclose(g, eye, atol=1e-12)
    (g,) = _grads(lambda a: gt.linalg.matrix_norm(a, 2), np.diag([2.0, 2.0, 5.0]))
    np.testing.assert_allclose(g, np.diag([0.0, 0.0, 1.0]), atol=1e-12)


def test_det_of_a_singular_matrix_has_a_zero_gradient(conn):
    singular = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]
    (g,) = _grads(gt.linalg.det, singular)
    assert (g == 0).all()
    batch = [np.zeros((2, 2)), [[2.0, 1.0], [1.0, 3.0]]]
    (g,) = _grads(lambda a: gt.linalg.det(a).sum(), batch)
    np.testing.assert_allclose(g[1], [[3.0, -1.0], [-1.0, 2.0]]) and (g[0] == 0).all()
    (g,) = _grads(lambda a: gt.linalg.slogdet(a)[1], singular)  # log|det| = -inf: undefined
    assert np.isnan(g).all()


def test_div_with_floor_rounding_and_atan2_at_the_origin(conn):
    x = gt.tensor([3.0, -7.5], requires_grad=True)
    y = gt.tensor([2.0, 2.0], requires_grad=True)
    z = gt.div(x, y, rounding_mode="floor")
    assert z.tolist() == [1.0, -4.0] and z.grad_fn.name() == "DivBackward2"
    z.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0] and y.grad.tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="floor_divide is not implemented"):
        (x // y).sum().backward()  # (floor_divide's stays PyTorch's NotImplemented)
    gy, gx = _grads(gt.atan2, [0.0, 1.0], [0.0, 1.0])
    assert gy.tolist() == [0.0, 0.5] and gx.tolist() == [0.0, -0.5]


def test_jvp_of_functions_with_a_zero_derivative_is_zero(conn):
    x = gt.tensor([0.3, -1.2, 2.6], dtype=gt.float64)
    t = gt.tensor([1.0, 2.0, 3.0], dtype=gt.float64)
    for f in (gt.round, gt.floor, gt.sign):
        _, tangent = gt.func.jvp(f, (x,), (t,))
        assert tangent.tolist() == [0.0, 0.0, 0.0]
    _, tangent = gt.func.jvp(lambda a: gt.round(a) + a, (x,), (t,))
    assert tangent.tolist() == [1.0, 2.0, 3.0]
    _, (t1, t2) = gt.func.jvp(lambda a: (gt.floor(a), 2 * a), (x,), (t,))
    assert t1.tolist() == [0.0, 0.0, 0.0] and t2.tolist() == [2.0, 4.0, 6.0]


def test_weighted_loss_modules_keep_their_weights_in_the_state_dict(conn):
    assert list(gt.nn.CrossEntropyLoss().state_dict()) == []
    ce = gt.nn.CrossEntropyLoss(weight=gt.ones(3))
    ce.load_state_dict({"weight": gt.tensor([1.0, 2.0, 3.0])})  # (a PyTorch checkpoint's key)
    assert ce.weight.tolist() == [1.0, 2.0, 3.0]
    bce = gt.nn.BCEWithLogitsLoss(weight=gt.ones(2), pos_weight=gt.ones(2))
    assert sorted(bce.state_dict()) == ["pos_weight", "weight"]
    assert list(gt.nn.NLLLoss(gt.ones(2)).state_dict()) == ["weight"]
    assert list(gt.nn.BCELoss(gt.ones(2)).state_dict()) == ["weight"]


def test_grid_sample_at_nan_and_infinite_positions(conn):
    image = gt.arange(9.0).reshape(1, 1, 3, 3)
    grid = gt.tensor([[[[NAN, 0.0], [float("inf"), 0.0], [0.25, 0.5]]]])
    near = F.grid_sample(image, grid, mode="nearest", align_corners=False)
    assert near.tolist() == [[[[0.0, 0.0, 7.0]]]]  # (out of range: 0; it used to fail the worker)
    border = F.grid_sample(image, grid, mode="nearest", padding_mode="border", align_corners=False)
    assert border.tolist() == [[[[3.0, 5.0, 7.0]]]]  # (NaN clips to 0, inf to the edge)
    lin = F.grid_sample(image, grid, align_corners=False).numpy()
    assert np.isnan(lin[..., :2]).all() and lin[..., 2].tolist() == [[[6.625]]]


def test_a_norm_below_one_has_a_zero_gradient_at_zero_elements(conn):
    (g,) = _grads(lambda a: gt.norm(a, p=0.5), [0.0, 1.0, 4.0])
    assert g.tolist() == [0.0, 3.0, 1.5]
    (g,) = _grads(lambda a: gt.linalg.vector_norm(a, ord=0.3), [0.0, -1.0, 4.0])
    np.testing.assert_allclose(g, [0.0, -8.6075, 3.2616], atol=1e-4)
    (g,) = _grads(lambda a: gt.norm(a, p=0.5), [0.0, 0.0])
    assert g.tolist() == [0.0, 0.0]


def test_activations_pass_a_nans_gradient_as_pytorchs_backward_does(conn):
    x = [NAN, -2.0, 0.5]
    for f, want in [
        (F.hardtanh, [1.0, 0.0, 1.0]),
        (F.relu6, [1.0, 0.0, 1.0]),
        (F.elu, [1.0, math.exp(-2.0), 1.0]),
        (lambda a: F.softshrink(a, 0.5), [1.0, 1.0, 0.0]),
        (F.hardsigmoid, [0.0, 1 / 6, 1 / 6]),  # (its backward counts a NaN as outside)
    ]:
        out = f(gt.tensor(x, dtype=gt.float64))
        assert math.isnan(out.tolist()[0])
        (g,) = _grads(f, x)
        np.testing.assert_allclose(g, want, rtol=1e-7)
    (g,) = _grads(lambda a: F.celu(a, 2.0), x)
    assert g[0] == 1.0
