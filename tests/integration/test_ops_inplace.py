"""``__setitem__`` and in-place ops against NumPy, and GT's value semantics.

GT tensors never share memory observably: an in-place change to a tensor leaves tensors made from
it (slices, reshapes, detached copies) and the tensor it was made from unchanged. This differs from
PyTorch's views on purpose (tensors may live on different workers), and is tested here.
"""

from __future__ import annotations

import numpy as np
import pytest

import gt


def _pair(shape=(3, 4), dtype=np.float32, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return gt.from_numpy(a.copy()), a


SETITEM_CASES = [
    ("int_row_scalar", lambda: 1, 5.0),
    ("slice_step", lambda: (slice(None), slice(None, None, 2)), -1.0),
    ("negative_int", lambda: (-1, -1), 3.0),
    ("ellipsis", lambda: (Ellipsis, 0), 2.0),
    ("list_rows", lambda: [0, 2], 9.0),
    ("row_from_vector", lambda: 0, np.arange(4, dtype=np.float32)),
    ("broadcast_column", lambda: (slice(None), slice(1, 3)), np.ones((3, 1), np.float32)),
    ("empty_slice", lambda: slice(2, 1), 7.0),
]


@pytest.mark.parametrize("case", SETITEM_CASES, ids=[c[0] for c in SETITEM_CASES])
def test_setitem_matches_numpy(conn, case):
    _, key_fn, value = case
    t, a = _pair()
    key = key_fn()
    t[key] = gt.from_numpy(value) if isinstance(value, np.ndarray) else value
    a[key] = value
    np.testing.assert_array_equal(t.numpy(), a)


def test_setitem_with_tensor_index_and_bool_mask(conn):
    t, a = _pair()
    idx = np.array([2, 0])
    t[gt.from_numpy(idx)] = 0.5
    a[idx] = 0.5
    t[t > 1.0] = 1.0  # full-shape mask: no sync needed
    a[a > 1.0] = 1.0
    t[gt.tensor([True, False, True])] = gt.tensor(-2.0)
    a[[True, False, True]] = -2.0
    np.testing.assert_array_equal(t.numpy(), a)


def test_setitem_casts_int_values_into_float_tensor(conn):
    t = gt.zeros(3)
    t[1] = 4
    t[2] = gt.tensor(2)
    assert t.dtype == "float32" and t.tolist() == [0.0, 4.0, 2.0]


@pytest.mark.parametrize(
    "op,np_op",
    [
        (lambda t, o: t.__iadd__(o), lambda a, o: a + o),
        (lambda t, o: t.__isub__(o), lambda a, o: a - o),
        (lambda t, o: t.__imul__(o), lambda a, o: a * o),
        (lambda t, o: t.__itruediv__(o), lambda a, o: a / o),
        (lambda t, o: t.add_(o, alpha=2), lambda a, o: a + 2 * o),
        (lambda t, o: t.clamp_(-0.5, 0.5), lambda a, o: np.clip(a, -0.5, 0.5)),
    ],
    ids=["iadd", "isub", "imul", "itruediv", "add_alpha", "clamp_"],
)
def test_inplace_arithmetic_keeps_the_object_and_matches_numpy(conn, op, np_op):
    t, a = _pair()
    o, b = _pair((4,), seed=1)
    before = t
    result = op(t, o)
    assert result is before and t is before
    np.testing.assert_allclose(t.numpy(), np_op(a, b), rtol=1e-6)


def test_zero_fill_copy_keep_shape_and_dtype(conn):
    t = gt.ones(2, 3, dtype="float64")
    assert t.zero_() is t and t.numpy().sum() == 0 and t.dtype == "float64"
    t.fill_(2.5)
    assert t.tolist() == [[2.5] * 3] * 2
    t.copy_(gt.arange(3))  # broadcast and cast
    assert t.dtype == "float64" and t.tolist() == [[0.0, 1.0, 2.0]] * 2
    t.copy_(np.full((2, 3), 7.0))
    assert t.numpy().tolist() == [[7.0] * 3] * 2


def test_inplace_integer_ops_stay_integer(conn):
    t = gt.arange(5)
    t += 2
    t *= 3
    assert t.dtype == "int64" and t.tolist() == [6, 9, 12, 15, 18]


def test_inplace_change_reaches_slices_reshapes_and_detached_views_but_not_results(conn):
    # (the values PyTorch 2.13 gives)
    x = gt.arange(6, dtype="float32")
    s = x[1:3]
    r = x.reshape(2, 3)
    d = x.detach()
    y = x * 1  # a result, not a view: keeps its value
    x += 10
    x[0] = -1.0
    assert s.tolist() == [11.0, 12.0]
    assert r.tolist() == [[-1.0, 11.0, 12.0], [13.0, 14.0, 15.0]]
    assert d.tolist() == [-1.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert x.tolist() == [-1.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_setitem_on_a_view_writes_into_its_base_but_a_copy_does_not(conn):
    x = gt.zeros(2, 3)
    row = x[0]
    row[1] = 5.0
    t = x.T
    t[0, 0] = 9.0  # through x, into its other view too
    assert row.tolist() == [9.0, 5.0, 0.0]
    assert x.tolist() == [[9.0, 5.0, 0.0], [0.0, 0.0, 0.0]]
    assert t.tolist()[0] == [9.0, 0.0]
    picked = x[[1]]  # advanced indexing copies, in PyTorch too
    picked[0, 0] = 7.0
    assert x[1].tolist() == [0.0, 0.0, 0.0]
    x.add_(1)  # the views follow, and still write back
    row[0] = 100.0
    assert x[0].tolist() == [100.0, 6.0, 1.0] and row.tolist() == [100.0, 6.0, 1.0]
    assert t.tolist() == [[100.0, 1.0], [6.0, 1.0], [1.0, 1.0]]


def test_repeated_setitem_builds_the_expected_tensor(conn):
    x = gt.zeros(50)
    for i in range(50):
        x[i] = float(i)
    np.testing.assert_array_equal(x.numpy(), np.arange(50, dtype=np.float32))


def test_setitem_on_uploaded_tensor_does_not_touch_the_source_array(conn):
    a = np.arange(4, dtype=np.float32)
    t = gt.from_numpy(a)
    t[0] = 100.0
    assert t.tolist()[0] == 100.0 and a[0] == 0.0


def test_inplace_op_on_a_tensor_saved_for_backward_is_detected(conn):
    w = gt.ones(3, requires_grad=True)
    x = gt.arange(3, dtype="float32")
    y = (w * x).sum()
    x += 1  # x was saved by the multiplication
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.parametrize(
    "change",
    [
        lambda y: y.mul_(2),
        lambda y: y.__setitem__(0, 1.0),
        lambda y: y.view(-1).add_(1),
        lambda y: y.detach().zero_(),
    ],
    ids=["mul_", "setitem", "a_view", "detach"],
)
@pytest.mark.parametrize("op", ["sigmoid", "tanh", "exp", "relu", "sqrt"])
def test_an_inplace_change_of_an_output_its_derivative_reads_is_detected(conn, op, change):
    # (PyTorch saves these ops' outputs, so it raises; GT kept a copy of the old value and
    # computed the gradient of a result the program no longer had)
    x = gt.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = getattr(x, op)()
    change(y)
    with pytest.raises(RuntimeError, match="output 0 of .* is at version 1; expected version 0"):
        y.sum().backward()


def test_an_inplace_op_whose_derivative_reads_its_output_still_differentiates(conn):
    x = gt.tensor([0.5, 1.0, 2.0], requires_grad=True)
    (x * 1).sigmoid_().sum().backward()  # (its output is the tensor it changed: version 1)
    np.testing.assert_allclose(x.grad.tolist(), [0.235004, 0.196612, 0.104994], rtol=1e-5)
    y = (x * 1).sigmoid_()
    y.mul_(2)
    with pytest.raises(RuntimeError, match="is at version 2; expected version 1"):
        y.sum().backward()
    x.relu().clone().mul_(2).sum().backward()  # a clone's change is its own


def test_optimizer_style_update_under_no_grad_keeps_leaf_identity(conn):
    w = gt.ones(3, requires_grad=True)
    (w * w).sum().backward()
    ident = id(w)
    with gt.no_grad():
        w -= 0.5 * w.grad
    assert id(w) == ident and w.is_leaf and w.requires_grad
    assert w.tolist() == [0.0, 0.0, 0.0]


def test_worker_writes_setitem_in_place_only_when_nothing_else_sees_the_array():
    """The worker's setitem reuses the array when no view or other entry refers to it."""
    from gt.runtime import ops as O
    from gt.runtime.worker.backend import load_backend

    handler = load_backend("numpy").handlers[O.OPCODE["setitem"]]
    attrs = {"key": [["i", 0]], "inplace": True}
    table = {1: np.zeros(4)}
    arr_id = id(table[1])
    # as the worker loop does: resolve the arguments, run, store under the output id
    table[1] = handler([table[1], 5.0], attrs)
    assert id(table[1]) == arr_id and table[1][0] == 5.0
    view = table[1][1:]
    table[1] = handler([table[1], 6.0], attrs)
    assert id(table[1]) != arr_id and view[0] == 0.0 and table[1][0] == 6.0
    table[2] = handler([table[1], 7.0], {"key": [["i", 0]]})  # not in place: a new tensor
    assert table[1][0] == 6.0 and table[2][0] == 7.0


def test_worker_masking_keeps_where_semantics_for_non_finite_values():
    """where(c, a, 0.0) may be computed as a product, but never turns a masked-out nan into nan."""
    from gt.runtime import ops as O
    from gt.runtime.worker.backend import load_backend

    handler = load_backend("numpy").handlers[O.OPCODE["where"]]
    c = np.array([True, False, True, False])
    a = np.array([1.5, np.nan, -2.0, np.inf], np.float32)
    np.testing.assert_array_equal(
        handler([c, a, 0.0], {"dtype": "float32"}), np.where(c, a, np.float32(0))
    )
    finite = np.array([1.5, 3.0, -2.0, 4.0], np.float32)
    got = handler([c[:, None], finite, 0.0], {"dtype": "float32"})  # broadcasting like np.where
    np.testing.assert_array_equal(got, np.where(c[:, None], finite, np.float32(0)))
    assert got.dtype == np.float32


def test_worker_inplace_arithmetic_reuses_private_arrays_only():
    from gt.runtime import ops as O
    from gt.runtime.worker.backend import load_backend

    add = load_backend("numpy").handlers[O.OPCODE["add"]]
    table = {1: np.zeros(3), 2: np.ones(3)}
    arr_id = id(table[1])
    table[1] = add([table[1], table[2]], {"inplace": True})
    assert id(table[1]) == arr_id and table[1].tolist() == [1.0, 1.0, 1.0]
    view = table[1][:2]
    table[1] = add([table[1], 1.0], {"inplace": True})
    assert id(table[1]) != arr_id and view.tolist() == [1.0, 1.0] and table[1].tolist() == [2.0] * 3
    assert add([table[1], table[1]], None).tolist() == [4.0] * 3  # the plain form is untouched
