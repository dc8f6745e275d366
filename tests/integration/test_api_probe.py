"""What a probe of the everyday tensor API against PyTorch 2.13 found on Dec 6 (4,170 cases), as
PyTorch behaves: a float ``arange`` is ``start + i * step`` rounded once; a slice of a ``Size``,
and a ``Size`` joined or repeated, is a ``Size``. Every test runs on NumPy workers and on workers
whose CuPy is the test double."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_a_float_arange_is_start_plus_i_steps_rounded_once(conn):
    assert gt.arange(0, 1, 0.1)[9].item() == 0.8999999761581421  # (float32's 0.9)
    assert gt.arange(0, 1, 0.1, dtype=gt.float64).tolist()[-3:] == [0.7000000000000001, 0.8, 0.9]
    assert gt.arange(1.5, 4.0, 0.5).tolist() == [1.5, 2.0, 2.5, 3.0, 3.5]
    assert gt.arange(5).dtype == gt.int64 and gt.arange(0, 10, 3).tolist() == [0, 3, 6, 9]


def test_a_slice_of_a_size_is_a_size(conn):
    s = gt.zeros(2, 3, 4).shape
    assert isinstance(s[1:], gt.Size) and s[1:].numel() == 12 and repr(s[1:]) == "gt.Size([3, 4])"
    assert isinstance(s + (5,), gt.Size) and s + (5,) == (2, 3, 4, 5)
    assert isinstance((5,) + s, gt.Size) and (5,) + s == (5, 2, 3, 4)
    assert isinstance(s * 2, gt.Size) and isinstance(2 * s, gt.Size) and len(s * 2) == 6
    assert type(s[0]) is int and s == (2, 3, 4) and hash(s) == hash((2, 3, 4))


def test_a_same_shape_view_is_a_new_tensor(conn):
    x = gt.ones(2, 2, requires_grad=True)
    y = x.view(2, 2)
    assert y is not x and not y.is_leaf and y.grad_fn.name() == "ViewBackward0"
    a = gt.ones(3)
    v = a.view(3)
    v.add_(1)
    assert a.tolist() == [2.0] * 3
    v.requires_grad_()
    assert not a.requires_grad


def test_tensor_of_a_list_of_tensors_reads_each_as_a_number(conn):
    assert gt.tensor([gt.tensor([1.0]), gt.tensor([2.0])]).shape == (2,)
    assert gt.tensor([gt.tensor(1.0, dtype=gt.float16), 1]).dtype == gt.float16
    assert gt.tensor([gt.tensor([1], dtype=gt.int32), 2]).dtype == gt.int64
    assert gt.tensor([gt.tensor(1, dtype=gt.uint8), gt.tensor(2, dtype=gt.int8)]).dtype == gt.int16
    with pytest.raises(ValueError, match="only one element tensors"):
        gt.tensor([gt.tensor([1.0, 2.0]), gt.tensor([3.0, 4.0])])


def test_one_element_tensors_as_sizes_dims_and_bounds(conn):
    lengths = gt.tensor([1, 3, 2])
    mask = gt.arange(lengths.max())[None, :] < lengths[:, None]
    assert mask.tolist() == [[True, False, False], [True, True, True], [True, True, False]]
    assert gt.arange(end=4).tolist() == [0, 1, 2, 3]
    assert gt.ones(2, 3).sum(gt.tensor(1)).tolist() == [3.0, 3.0]
    assert gt.ones(2, 3).mean(dim=gt.tensor(0)).shape == (3,)
    assert len(gt.ones(4).split(gt.tensor(2))) == 2
    assert gt.arange(3.0).roll(gt.tensor(1)).tolist() == [2.0, 0.0, 1.0]
    assert [10, 20, 30][gt.tensor(True)] == 20


def test_conversions_and_options_pytorch_programs_use(conn):
    assert gt.tensor([0.5j, 0]).bool().tolist() == [True, False]  # (either part nonzero)
    u8 = gt.tensor([3], dtype=gt.uint8)
    assert gt.isclose(u8, gt.tensor([5], dtype=gt.uint8), atol=2).tolist() == [True]
    assert gt.allclose(gt.tensor([True, False]), gt.tensor([True, False]))
    assert gt.linspace(0, 10, 5, dtype=gt.int64).tolist() == [0, 2, 5, 7, 10]
    assert gt.linspace(10, 0, 4, dtype=gt.int64).tolist() == [10, 6, 3, 0]
    big_endian = np.array([1, 2], dtype=">i4")
    assert gt.from_numpy(big_endian).tolist() == [1, 2] and gt.tensor(big_endian).tolist() == [1, 2]
    assert gt.ones(2).numpy(force=True).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t without overflow"):
        gt.tensor([1, 2]).masked_fill(gt.tensor([True, False]), float("-inf"))
    gt.set_printoptions(threshold=float("inf"))
    try:
        assert "..." not in repr(gt.arange(2000))
    finally:
        gt.set_printoptions(profile="default")


def test_the_cuda_and_cudnn_spellings_of_older_scripts_import():
    import gt.backends.cudnn as cudnn
    from gt.cuda.amp import GradScaler, autocast

    cudnn.benchmark = True
    assert gt.backends.cudnn.benchmark and not cudnn.is_available()
    assert callable(autocast) and callable(GradScaler)
    assert gt.cuda.memory_allocated() == 0 and gt.cuda.max_memory_allocated() == 0
    assert issubclass(gt.cuda.OutOfMemoryError, MemoryError)
    with gt.cuda.device(0):
        pass
