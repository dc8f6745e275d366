"""``resize_``/``resize_as_`` keep the first elements and fill new ones with zeros; ``apply_`` and
``map_`` run a Python function over the elements on the host; ``new_empty_strided`` makes a tensor
of the size asked for."""

from __future__ import annotations

import pytest

import gt


def test_resize_keeps_the_leading_elements_and_refuses_tensors_that_require_grad(conn):
    x = gt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.resize_(3, 2) is x and x.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert x.resize_(4).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert x.resize_((2, 3)).tolist() == [[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]
    assert gt.tensor([]).resize_(2).tolist() == [0.0, 0.0]
    y = gt.tensor([7.0, 8.0])
    assert y.resize_as_(gt.zeros(1, 1)).tolist() == [[7.0]]
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        gt.tensor([1.0], requires_grad=True).resize_(2)


def test_apply_and_map_run_python_per_element(conn):
    z = gt.tensor([1.0, 2.0, 3.0])
    assert z.apply_(lambda v: v * v + 1).tolist() == [2.0, 5.0, 10.0]
    assert z.map_(gt.tensor([10.0]), lambda a, b: a + b).tolist() == [12.0, 15.0, 20.0]
    i = gt.tensor([3, 4])
    assert i.apply_(lambda v: v // 2).tolist() == [1, 2] and i.dtype == "int64"


def test_new_empty_strided_has_the_size_and_dtype_asked_for(conn):
    t = gt.ones(2).new_empty_strided((3, 4), (4, 1), dtype=gt.float64)
    assert tuple(t.shape) == (3, 4) and t.dtype == "float64"
