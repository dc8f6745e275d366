"""Shape, dtype and index errors raise on the client, at the user's line, naming the op and shapes.

Each check also verifies that nothing reached a worker: the connection sent no instruction for the
failing call, and a later sync finds no worker error.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import gt
from gt.errors import ShapeError


def _t(*shape, dtype="float32"):
    return gt.zeros(*shape, dtype=dtype)


# (id, make operands, the failing call, exception type, message regex)
CASES = [
    (
        "add_broadcast",
        lambda: (_t(2, 3), _t(4)),
        lambda a, b: a + b,
        ShapeError,
        r"add: .*\[2, 3\] and \[4\]",
    ),
    (
        "mul_broadcast_reflected",
        lambda: (_t(2, 3), _t(2)),
        lambda a, b: b * a,
        ShapeError,
        r"mul: .*\[2\] and \[2, 3\]",
    ),
    (
        "where_shapes",
        lambda: (_t(2, 3) > 0, _t(4)),
        lambda c, b: gt.where(c, 1.0, b),
        ShapeError,
        r"where: .*\[2, 3\] and \[4\]",
    ),
    (
        "matmul_inner",
        lambda: (_t(2, 3), _t(4, 5)),
        lambda a, b: a @ b,
        ShapeError,
        r"matmul: shapes \[2, 3\] and \[4, 5\] cannot be multiplied \(3 != 4\)",
    ),
    (
        "matmul_batch",
        lambda: (_t(2, 2, 3), _t(3, 3, 1)),
        lambda a, b: a @ b,
        ShapeError,
        r"matmul: .*\[2\].*\[3\]",
    ),
    (
        "matmul_zero_dim",
        lambda: (_t(), _t(3)),
        lambda a, b: a @ b,
        ShapeError,
        r"matmul: both arguments need at least 1 dimension, got shapes \[\] and \[3\]",
    ),
    (
        "matmul_dtype",
        lambda: (_t(2, 3), _t(3, 2, dtype="float64")),
        lambda a, b: a @ b,
        RuntimeError,
        r"matmul: .*gt.float32 and gt.float64 \(shapes \[2, 3\] and \[3, 2\]\)",
    ),
    (
        "reshape_size",
        lambda: (_t(2, 3),),
        lambda a: a.reshape(4, 2),
        ShapeError,
        r"reshape: shape \[4, 2\] is invalid for input of size 6 \(shape \[2, 3\]\)",
    ),
    (
        "view_two_inferred",
        lambda: (_t(2, 3),),
        lambda a: a.view(-1, -1),
        ShapeError,
        r"reshape: only one dimension can be inferred",
    ),
    (
        "sum_axis_range",
        lambda: (_t(2, 3),),
        lambda a: a.sum(2),
        IndexError,
        r"sum: dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
    ),
    (
        "mean_repeated_axis",
        lambda: (_t(2, 3),),
        lambda a: a.mean((0, -2)),
        ShapeError,
        r"mean: repeated dimension",
    ),
    (
        "max_empty",
        lambda: (_t(0, 3),),
        lambda a: a.max(),
        RuntimeError,
        r"max: cannot reduce an empty tensor of shape \[0, 3\]",
    ),
    (
        "argmax_tuple_dim",
        lambda: (_t(2, 3),),
        lambda a: a.argmax((0, 1)),
        TypeError,
        r"argmax: dim must be an int",
    ),
    (
        "softmax_dim",
        lambda: (_t(2, 3),),
        lambda a: a.softmax(3),
        IndexError,
        r"softmax: dimension out of range",
    ),
    (
        "transpose_dim",
        lambda: (_t(2, 3),),
        lambda a: a.transpose(0, 5),
        IndexError,
        r"transpose: dimension out of range",
    ),
    (
        "permute_not_permutation",
        lambda: (_t(2, 3, 4),),
        lambda a: a.permute(0, 0, 1),
        ShapeError,
        r"permute: dims \[0, 0, 1\] are not a permutation",
    ),
    (
        "permute_count",
        lambda: (_t(2, 3),),
        lambda a: a.permute(1, 0, 2),
        ShapeError,
        r"permute: number of dims 3 .* \[2, 3\]",
    ),
    (
        "expand_non_singleton",
        lambda: (_t(3, 2),),
        lambda a: a.expand(3, 4),
        ShapeError,
        r"expand: .*\(4\).*\(2\).*\[3, 2\]",
    ),
    (
        "repeat_too_few",
        lambda: (_t(2, 3),),
        lambda a: a.repeat(2),
        ShapeError,
        r"repeat: number of repeat dims \(1\)",
    ),
    (
        "flatten_order",
        lambda: (_t(2, 3, 4),),
        lambda a: a.flatten(2, 1),
        ShapeError,
        r"flatten: start_dim \(2\) cannot come after end_dim \(1\)",
    ),
    (
        "unsqueeze_range",
        lambda: (_t(2, 3),),
        lambda a: a.unsqueeze(4),
        IndexError,
        r"unsqueeze: dimension out of range",
    ),
    (
        "split_sections",
        lambda: (_t(5),),
        lambda a: a.split([2, 2]),
        ShapeError,
        r"split: sizes \[2, 2\] do not add up to 5",
    ),
    (
        "cat_sizes",
        lambda: (_t(2, 3), _t(2, 4)),
        lambda a, b: gt.cat([a, b]),
        ShapeError,
        r"cat: sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1",
    ),
    (
        "cat_empty_list",
        lambda: (),
        lambda: gt.cat([]),
        ShapeError,
        r"cat: expected a non-empty list",
    ),
    (
        "stack_shapes",
        lambda: (_t(2, 3), _t(3, 2)),
        lambda a, b: gt.stack([a, b]),
        ShapeError,
        r"stack: expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[3, 2\] at entry 1",
    ),
    (
        "getitem_int_range",
        lambda: (_t(3, 4),),
        lambda a: a[3],
        IndexError,
        r"getitem: index 3 is out of bounds for axis 0 with size 3 \(tensor of shape \[3, 4\]\)",
    ),
    (
        "getitem_too_many",
        lambda: (_t(3),),
        lambda a: a[0, 0],
        IndexError,
        r"getitem: too many indices .*\[3\]",
    ),
    (
        "getitem_list_range",
        lambda: (_t(3, 4),),
        lambda a: a[:, [1, 4]],
        IndexError,
        r"getitem: .*out of bounds.*\[3, 4\]",
    ),
    (
        "getitem_float_index",
        lambda: (_t(3, 4), _t(2)),
        lambda a, i: a[i],
        IndexError,
        r"getitem: tensors used as indices must be integer or bool, not gt.float32",
    ),
    (
        "getitem_mask_shape",
        lambda: (_t(3, 4), gt.ones(4, dtype="bool")),
        lambda a, m: a[m],
        IndexError,
        r"getitem: the shape of the mask \[4\] at index 0 does not match the shape of the indexed tensor \[3, 4\]",
    ),
    (
        "getitem_step_zero",
        lambda: (_t(3),),
        lambda a: a[::0],
        ValueError,
        r"getitem: slice step cannot be zero",
    ),
    (
        "setitem_value_shape",
        lambda: (_t(3, 4), _t(3)),
        lambda a, v: a.__setitem__(0, v),
        ShapeError,
        r"setitem: shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[4\]",
    ),
    (
        "setitem_index_range",
        lambda: (_t(3, 4),),
        lambda a: a.__setitem__((0, 9), 1.0),
        IndexError,
        r"setitem: index 9 is out of bounds",
    ),
    (
        "setitem_complex_into_float",
        lambda: (_t(3),),
        lambda a: a.__setitem__(0, 1.5j),
        TypeError,
        r"setitem: value 1.5j can't be cast to the tensor's dtype gt.float32",
    ),
    (
        "iadd_grows_shape",
        lambda: (_t(3), _t(2, 3)),
        lambda a, b: a.__iadd__(b),
        ShapeError,
        r"add_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]",
    ),
    (
        "iadd_float_into_int",
        lambda: (_t(3, dtype="int64"),),
        lambda a: a.__iadd__(0.5),
        TypeError,
        r"add_: result type gt.float32 can't be cast to the desired output type gt.int64",
    ),
    (
        "copy_shape",
        lambda: (_t(3), _t(4)),
        lambda a, b: a.copy_(b),
        ShapeError,
        r"copy_: source of shape \[4\] cannot be broadcast to \[3\]",
    ),
    (
        "where_condition_dtype",
        lambda: (_t(3),),
        lambda a: gt.where(a, a, a),
        TypeError,
        r"where: expected condition to be a bool tensor, but got gt.float32",
    ),
    ("neg_bool", lambda: (gt.ones(3, dtype="bool"),), lambda a: -a, TypeError, r"neg: .*bool"),
    (
        "bitwise_on_float",
        lambda: (_t(3), _t(3)),
        lambda a, b: a & b,
        TypeError,
        r'bitwise_and: "bitwise_and" is not implemented for gt.float32',
    ),
    (
        "int_negative_power",
        lambda: (_t(3, dtype="int64"),),
        lambda a: a**-1,
        RuntimeError,
        r"pow: integers to negative integer powers",
    ),
    (
        "requires_grad_int",
        lambda: (_t(3, dtype="int64"),),
        lambda a: a.requires_grad_(),
        RuntimeError,
        r"only Tensors of floating point and complex dtype can require gradients \(got gt.int64\)",
    ),
    (
        "randn_int_dtype",
        lambda: (),
        lambda: gt.randn(3, dtype="int64"),
        TypeError,
        r"randn: expected a floating point dtype, got int64",
    ),
    (
        "unknown_dtype",
        lambda: (_t(3),),
        lambda a: a.to("complex32"),
        TypeError,
        r"unsupported dtype 'complex32'",
    ),
    (
        "mse_target_float_vs_ce",
        lambda: (_t(4, 3), _t(4)),
        lambda a, t: gt.nn.functional.cross_entropy(a, t),
        RuntimeError,  # (PyTorch's words: class indices stored as floats)
        r"expected target dtype to be Long or Byte, but got Float",
    ),
    (
        "nll_target_shape",
        lambda: (_t(4, 3), gt.zeros(3, dtype="int64")),
        lambda a, t: gt.nn.functional.nll_loss(a, t),
        ShapeError,
        r"nll_loss: expected target of shape \[4\] for input of shape \[4, 3\], got \[3\]",
    ),
    (
        "linear_features",
        lambda: (_t(2, 5),),
        lambda a: gt.nn.Linear(4, 3)(a),
        ShapeError,
        r"linear: input of shape \[2, 5\] does not match weight of shape \[3, 4\]",
    ),
    (
        "layer_norm_shape",
        lambda: (_t(2, 5),),
        lambda a: gt.nn.LayerNorm(4)(a),
        ShapeError,
        r"layer_norm: input of shape \[2, 5\] does not end with normalized_shape \[4\]",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error_raised_on_client_with_op_and_shapes(conn, case):
    _, make, call, exc, pattern = case
    operands = make()
    gt.sync()
    before = conn.sent_instructions + len(conn._instrs)
    with pytest.raises(exc, match=pattern) as info:
        call(*operands)
    assert re.search(pattern, str(info.value))
    if case[0] not in ("getitem_mask_shape", "linear_features", "layer_norm_shape"):
        # nothing was queued for the failing call (a mask is fetched first; a layer builds weights)
        assert conn.sent_instructions + len(conn._instrs) == before
    gt.sync()  # and no worker saw anything bad


def test_shape_error_is_both_runtime_and_value_error(conn):
    with pytest.raises(RuntimeError):
        _t(2) + _t(3)
    with pytest.raises(ValueError):
        _t(2) + _t(3)


def test_backward_errors_follow_pytorch(conn):
    x = gt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        gt.ones(3).sum().backward()
    with pytest.raises(
        RuntimeError,
        match=r"grad can be implicitly created only for scalar outputs \(got shape \[3\]\)",
    ):
        (x * 2).backward()
    with pytest.raises(
        RuntimeError,
        match=r"mismatch in shape: gradient has a shape of \[2\] and output has a shape of \[3\]",
    ):
        (x * 2).backward(gt.ones(2))
    with pytest.raises(
        RuntimeError,
        match="leaf Variable that requires grad is being used in an in-place operation",
    ):
        x += 1
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x[0] = 2.0
    (g,) = gt.autograd.grad(x.prod(), x, create_graph=True)
    (h,) = gt.autograd.grad(g.sum(), x, create_graph=True)  # (the second derivative is there)
    with pytest.raises(NotImplementedError, match="the third derivative through prod and cumprod"):
        gt.autograd.grad(h.sum(), x)


def test_integer_index_out_of_range_in_a_tensor_fails_at_the_next_sync(conn):
    """Index values that live on a worker cannot be checked on the client (as on a PyTorch GPU)."""
    x = gt.zeros(3)
    bad = x[gt.tensor([0, 7])]
    with pytest.raises(gt.WorkerError, match="getitem"):
        bad.numpy()


def test_ndarray_operands_are_uploaded(conn):
    a = np.arange(3, dtype=np.float32)
    assert (gt.ones(3) + a).tolist() == [1.0, 2.0, 3.0]
    assert (a * gt.ones(3)).tolist() == [0.0, 1.0, 2.0]
