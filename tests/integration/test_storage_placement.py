"""Where a tensor sits in PyTorch's storage (gt.ops.storage): offsets, strides, addresses and
``_base`` of views, as PyTorch code compares them.

Every expected value here is what PyTorch 2.13 gives for the same lines.
"""

from __future__ import annotations

import gt


def _placed(x, t):
    """(storage_offset, stride, is_contiguous, element distance from x's start) of ``t``."""
    start = (t.data_ptr() - x.data_ptr()) // x.dtype.itemsize
    return t.storage_offset(), t.stride(), t.is_contiguous(), start


def test_basic_indexing_views_start_and_stride_as_pytorchs(conn):
    x = gt.zeros(4, 5)
    assert _placed(x, x[1:, 2]) == (7, (5,), False, 7)
    assert _placed(x, x[:, 1:3]) == (1, (5, 1), False, 1)
    assert _placed(x, x[::2, 1::2]) == (1, (10, 2), False, 1)
    assert _placed(x, x[None, 2, None]) == (10, (20, 5, 1), True, 10)
    assert _placed(x, x[..., 3]) == (3, (5,), False, 3)
    assert _placed(x, x.t()[1]) == (1, (5,), False, 1)
    assert _placed(x, x[1:3].view(10)) == (5, (1,), True, 5)
    assert _placed(x, x[:, :2].reshape(4, 2, 1)) == (0, (5, 1, 1), False, 0)


def test_diagonals_start_at_their_offset_and_step_over_both_dimensions(conn):
    x = gt.zeros(4, 5)
    assert _placed(x, x.diagonal(1)) == (1, (6,), False, 1)
    assert _placed(x, x.diagonal(-2)) == (10, (6,), False, 10)
    e = gt.zeros(3, 4, 2)
    d = e.diagonal(0, 1, 2)
    assert d.stride() == (8, 3) and d.storage_offset() == 0


def test_a_reshape_that_pytorch_would_copy_is_a_copy(conn):
    x = gt.zeros(4, 5)
    flat = x[:, 1:3].reshape(-1)
    assert flat._base is None and flat.stride() == (1,)
    flat.fill_(1.0)
    assert x.sum().item() == 0.0  # (a view would have written into x)
    y = gt.zeros(3, 4).t()
    assert y.reshape(12).stride() == (1,) and y.reshape(12)._base is None
    z = y.reshape(2, 2, 3)  # viewable: PyTorch's view strides, and shared
    assert z.stride() == (2, 1, 4) and z._base is not None
    z.fill_(2.0)
    assert y.sum().item() == 24.0


def test_base_and_is_view_name_the_tensor_a_view_came_from(conn):
    x = gt.zeros(4, 5)
    assert x[1]._base is x and x[1][2:]._base is x and x.t()._is_view()
    assert x._base is None and not x._is_view()
    assert x.detach()._base is None and not x.detach()._is_view()  # shares, but not a view


def test_storages_are_shared_by_views_and_distinct_between_tensors(conn):
    x, other = gt.zeros(4, 5), gt.zeros(4, 5)
    assert x[2:].untyped_storage().data_ptr() == x.data_ptr() == x.t().data_ptr()
    assert x.untyped_storage().nbytes() == 80 and x.storage().size() == len(x[1:].storage()) == 20
    assert other.data_ptr() != x.data_ptr()
    assert x[1:].data_ptr() != x.data_ptr() and x.detach().data_ptr() == x.data_ptr()
    assert x[1:].is_set_to(x[1:]) and x.is_set_to(x[:]) and not x.is_set_to(other)
    assert gt.zeros(0).data_ptr() == 0


def test_tied_weights_are_found_by_data_ptr_as_accelerate_finds_them(conn):
    emb = gt.nn.Embedding(10, 4)
    head = gt.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    seen: dict[int, str] = {}
    tied = []
    model = gt.nn.ModuleDict({"emb": emb, "head": head})
    for name, p in model.named_parameters(remove_duplicate=False):
        ptr = p.untyped_storage().data_ptr()
        if ptr in seen:
            tied.append((seen[ptr], name))
        seen.setdefault(ptr, name)
    assert tied == [("emb.weight", "head.weight")]


def test_a_parameter_set_into_a_flat_buffer_sits_inside_it(conn):
    flat = gt.zeros(10)
    p = gt.nn.Parameter(gt.zeros(2, 3))
    p.data = flat[4:].view_as(p)
    assert p.data_ptr() == flat.data_ptr() + 4 * 4 and p.storage_offset() == 4
