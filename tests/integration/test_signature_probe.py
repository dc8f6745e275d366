"""What a probe of argument spellings against PyTorch 2.13 found on Dec 6 (11,041 calls), as
PyTorch takes them: NumPy integers and 0-d integer tensors as dims (``x.max(np.int64(1))`` is
values and indices), ``size=`` in the ``new_*`` constructors, ``input=`` in the ``*_like``
factories, ``layout=``/``pin_memory=``/``memory_format=`` in factories, a 0-d tensor as
``full``'s value, ``out=`` in ``cat``/``stack``, ``other=`` in ``max``/``min``, and
``cosine_similarity`` broadcasting its inputs."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(90)


def test_numpy_integer_and_0d_tensor_dims_are_dims(conn):
    x = gt.tensor([[1.0, 5.0], [3.0, 2.0]])
    v, i = x.max(np.int64(1))
    assert v.tolist() == [5.0, 3.0] and i.tolist() == [1, 0]
    v, i = gt.min(x, dim=np.int32(0))
    assert v.tolist() == [1.0, 2.0] and i.tolist() == [0, 1]
    assert x.amax(dim=gt.tensor(1)).tolist() == [5.0, 3.0]
    v, i = x.max(dim=gt.tensor(1))  # (a tensor given as dim= is a dim)
    assert v.tolist() == [5.0, 3.0] and i.tolist() == [1, 0]
    assert x.max(gt.tensor(3.0)).tolist() == [[3.0, 5.0], [3.0, 3.0]]  # (by position: other)
    assert gt.max(x, other=gt.tensor(4.0)).tolist() == [[4.0, 5.0], [4.0, 4.0]]
    assert x.argmax(np.int64(1)).tolist() == [1, 0]
    assert x.prod(np.int64(1)).tolist() == [5.0, 6.0]
    assert x.all(np.int64(1)).tolist() == [True, True]
    assert x.movedim(0, np.int64(1)).tolist() == [[1.0, 3.0], [5.0, 2.0]]
    assert x.repeat_interleave(np.int64(2)).shape == (8,)
    assert len(x.tensor_split(np.int64(2))) == 2
    assert gt.tensordot(x, x, gt.tensor(1)).tolist() == (x @ x).tolist()


def test_new_constructors_take_size_by_keyword_and_refuse_unknown_ones(conn):
    x = gt.ones(3)
    assert x.new_zeros(size=(2, 3)).shape == (2, 3)
    assert x.new_ones(size=[2]).tolist() == [1.0, 1.0]
    assert x.new_empty(2, device="cpu", pin_memory=False).shape == (2,)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sizes'"):
        x.new_zeros(sizes=(2,))


def test_factories_take_pytorchs_placement_keywords(conn):
    assert gt.zeros(2, layout=gt.strided, pin_memory=False).tolist() == [0.0, 0.0]
    assert gt.empty(1, 2, 3, 4, memory_format=gt.channels_last).stride() == (24, 1, 8, 2)
    assert gt.tensor([1], pin_memory=False).tolist() == [1]
    assert gt.zeros_like(input=gt.ones(2)).tolist() == [0.0, 0.0]
    assert gt.full_like(input=gt.ones(2), fill_value=3).tolist() == [3.0, 3.0]


def test_full_of_a_0d_tensor_takes_its_kind(conn):
    pad = gt.tensor(3)
    out = gt.full((2,), pad)
    assert out.dtype == gt.int64 and out.tolist() == [3, 3]
    assert gt.full((1,), gt.tensor(True)).dtype == gt.bool
    assert gt.full((1,), gt.tensor(0.5, dtype=gt.float64)).dtype == gt.float32


def test_cat_and_stack_write_into_out(conn):
    buf = gt.empty(4)
    got = gt.cat([gt.ones(2), gt.zeros(2)], out=buf)
    assert got is buf and buf.tolist() == [1.0, 1.0, 0.0, 0.0]
    buf = gt.empty(0)
    gt.stack([gt.ones(2), gt.zeros(2)], out=buf)
    assert buf.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_cosine_similarity_broadcasts_a_query_against_a_batch(conn):
    f = gt.nn.functional
    sims = f.cosine_similarity(
        gt.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), gt.tensor([1.0, 0.0])
    )
    assert sims.tolist() == pytest.approx([1.0, 0.0, 0.70710677])
    got = f.cosine_similarity(
        gt.tensor([[[1.0, 2.0], [3.0, 4.0]]]), gt.tensor([[1.0, 0.0], [1.0, 1.0]])
    )
    assert got.tolist()[0] == pytest.approx([0.8944272, 0.8944272])


def test_threshold_keeps_an_integer_input_integer_and_shapes_are_sizes(conn):
    out = gt.nn.functional.threshold(gt.tensor([1, 5]), 0.5, 20.0)
    assert out.dtype == gt.int64 and out.tolist() == [1, 5]
    shape = gt.broadcast_shapes((2, 1), (3,))
    assert isinstance(shape, gt.Size) and shape.numel() == 6


def test_numpy_axis_and_the_other_keyword_where_pytorch_takes_them(conn):
    x = gt.tensor([[1.0, 3.0], [2.0, 0.0]])
    assert x.softmax(axis=1).tolist() == x.softmax(1).tolist()
    assert gt.log_softmax(x, axis=0).tolist() == x.log_softmax(0).tolist()
    assert x.argsort(axis=0).tolist() == [[0, 1], [1, 0]]
    assert x.quantile(0.5, axis=0).tolist() == [1.5, 1.5]
    assert x.mode(axis=1).values.tolist() == [1.0, 0.0]
    assert gt.eq(x, other=2.0).tolist() == [[False, False], [True, False]]
    assert x.lt(other=2.0).tolist() == [[True, False], [False, True]]
    assert gt.logical_and(x, other=x).tolist() == [[True, True], [True, False]]
