"""What a probe of result strides against PyTorch 2.13 (Dec 7) found: results GT reported as
views of a temporary, or shared with their input, where PyTorch's are tensors of their own."""

from __future__ import annotations

import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_ravel_of_a_strided_view_is_a_copy_and_of_a_contiguous_tensor_a_view(conn):
    # (ravel was reshape(-1), a view of x[:, ::2]: writing to it changed x)
    x = gt.arange(12.0).reshape(3, 4)
    r = gt.ravel(x[:, ::2])
    r.add_(100)
    assert x[0].tolist() == [0.0, 1.0, 2.0, 3.0] and r.is_contiguous()
    x.ravel().add_(1000)
    assert x[0].tolist() == [1000.0, 1001.0, 1002.0, 1003.0]


def test_diff_of_order_zero_is_a_copy(conn):
    x = gt.arange(4.0)
    d = gt.diff(x, n=0)
    d.add_(1)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and d.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_indices_of_topk_and_kthvalue_are_contiguous(conn):
    # (views of the whole argsort before)
    s = gt.rand(16, 6)
    idx = gt.topk(s, 2, dim=-1).indices
    assert idx.is_contiguous() and idx.stride() == (2, 1)
    assert gt.kthvalue(s, 2, dim=-1).indices.is_contiguous()


@pytest.mark.parametrize(
    "make",
    [
        lambda x: gt.t_copy(x),
        lambda x: gt.transpose_copy(x, 0, 1),
        lambda x: gt.permute_copy(x, (1, 0)),
    ],
)
def test_copy_forms_are_contiguous(conn, make):
    out = make(gt.arange(12.0).reshape(3, 4))
    assert out.is_contiguous() and out.stride() == (3, 1)


@pytest.mark.parametrize(
    "make, stride",
    [
        (lambda x: gt.alias_copy(x.t()), (4, 1)),
        (lambda x: gt.slice_copy(x.t(), 0, 0, 2), (4, 1)),
        (lambda x: gt.split_with_sizes_copy(x.t(), [2, 3])[1], (4, 1)),
        (lambda x: gt.narrow_copy(x, 1, 1, 2), (2, 1)),
        (lambda x: x.narrow_copy(1, 1, 2), (2, 1)),
    ],
)
def test_copy_forms_of_strided_views_are_contiguous(conn, make, stride):
    # (PyTorch 2.13's strides; GT's kept the view's)
    out = make(gt.arange(20.0).reshape(4, 5))
    assert out.is_contiguous() and out.stride() == stride


def test_narrow_copy_is_not_a_view(conn):
    x = gt.arange(20.0).reshape(4, 5)
    x.narrow_copy(1, 1, 2).add_(100)
    assert x[0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_empty_tensors_are_contiguous(conn):
    x = gt.arange(12.0).reshape(3, 4)
    assert x[:, 4:].is_contiguous() and x[:0].t().is_contiguous()


def _input_grad(f, x):
    """``autograd.grad`` of ``f(x)`` with respect to ``x``."""
    x.requires_grad_(True)
    return gt.autograd.grad(f(x), x)[0]


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x.permute(0, 2, 3, 1).exp().sum(),
        lambda x: x.transpose(1, 2).relu().sum(),
        lambda x: x.movedim(1, -1).sin().sum(),
        lambda x: x.mT.sigmoid().sum(),
    ],
)
def test_gradient_through_a_permute_and_an_elementwise_op_is_contiguous(conn, f):
    # (PyTorch 2.13: stride (60, 20, 5, 1); GT reported the permuted strides, so WGAN-GP's
    # g.view(n, -1) would be refused)
    g = _input_grad(f, gt.rand(2, 3, 4, 5))
    assert g.is_contiguous() and g.stride() == (60, 20, 5, 1)
    assert g.view(2, -1).shape == (2, 60)


def test_hooked_gradient_through_a_permute_is_contiguous(conn):
    x = gt.rand(2, 3, 4, 5, requires_grad=True)
    y, box = x * 1, []
    y.register_hook(box.append)
    y.permute(0, 2, 3, 1).pow(2).sum().backward()
    assert box[0].is_contiguous() and box[0].stride() == (60, 20, 5, 1)


def _spd(n: int) -> gt.Tensor:
    m = gt.rand(2, n, n)
    return m @ m.mT + 4 * gt.eye(n)


def test_pieces_of_a_factorization_are_contiguous_where_pytorchs_are(conn):
    # (PyTorch 2.13's strides; GT's were those of slices of its packed result)
    a, b = gt.rand(4, 5), gt.rand(2, 3, 4)
    assert gt.svd(a).V.stride() == (4, 1) and gt.svd(a).V.is_contiguous()
    assert gt.linalg.svd(b).S.stride() == (3, 1) and gt.linalg.svdvals(b).is_contiguous()
    assert gt.geqrf(b)[1].stride() == (3, 1)
    assert gt.linalg.lu(a).P.stride() == (4, 1) and gt.linalg.lu(a).P.is_contiguous()
    assert gt.linalg.eigh(_spd(4)).eigenvalues.stride() == (4, 1)
    assert gt.linalg.eigvals(_spd(4)).stride() == (4, 1)


def test_adaptive_max_pool_indices_of_an_unpooled_size_are_contiguous(conn):
    # (PyTorch 2.13: (192, 64, 8, 1) and (5, 1); GT's were a broadcast, stride 0)
    idx = gt.nn.functional.adaptive_max_pool2d(gt.rand(2, 3, 8, 8), 8, return_indices=True)[1]
    assert idx.is_contiguous() and idx.stride() == (192, 64, 8, 1)
    idx1 = gt.nn.AdaptiveMaxPool1d(5, return_indices=True)(gt.rand(4, 5))[1]
    assert idx1.stride() == (5, 1) and idx1[0].tolist() == [0, 1, 2, 3, 4]


def test_flip_keeps_its_inputs_layout_and_rot90_of_a_transpose_is_contiguous(conn):
    # (PyTorch 2.13's strides; GT's flip was row-major, so rot90 of x.t() came out transposed)
    t = gt.arange(20.0).reshape(5, 4).t()
    assert t.flip(1).stride() == (1, 4) and gt.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1).flip(
        0
    ).stride() == (1, 12, 4)
    assert gt.rot90(t, 1).stride() == (4, 1) and gt.rot90(t, 1).is_contiguous()
    assert gt.rot90(t, 3).stride() == (4, 1) and gt.rot90(t, 0).stride() == (5, 1)


def test_diag_embed_and_cross_along_a_leading_dim_are_contiguous(conn):
    # (PyTorch 2.13: (20, 5, 1) and (5, 1); GT moved a dimension back with a view)
    a = gt.arange(20.0).reshape(4, 5)
    assert gt.diag_embed(a, 0, 0, 2).stride() == (20, 5, 1)
    c = gt.linalg.cross(a[:3], a[:3] + 1, dim=0)
    assert c.is_contiguous() and c.stride() == (5, 1)


def test_slogdet_and_lobpcg_results_are_contiguous(conn):
    # (PyTorch 2.13: (1,) and (1, 1); GT's were columns of a packed result / slices)
    sign, logabs = gt.linalg.slogdet(_spd(4))
    assert sign.stride() == (1,) and logabs.is_contiguous()
    vals, vecs = gt.lobpcg(_spd(4)[0])
    assert vals.is_contiguous() and vecs.shape == (4, 1) and vecs.is_contiguous()


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda x: x.t(), (-1,)),
        (lambda x: x[:, :2], (-1,)),
        (lambda x: x.reshape(2, 3, 2).permute(0, 2, 1), (2, 6)),
    ],
)
def test_view_refuses_strides_that_need_a_copy_as_pytorch(conn, make, shape):
    # (GT copied silently, as reshape does: the "view" then shared nothing with x)
    x = gt.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size"):
        make(x).view(*shape)
