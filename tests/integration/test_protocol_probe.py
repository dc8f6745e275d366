"""What a probe of serialization and Python protocols against PyTorch 2.13 found on Dec 6 (4,875
cases), as PyTorch behaves: an optimizer's step count read as a tensor is kept and followed; SGD
without momentum keeps no state; an ndarray operand promotes as NumPy does (PyTorch's operators
leave it to NumPy), and NumPy functions of a tensor give tensors; ``reversed``, ``as_subclass``,
``view_as`` and the number conversions. Every test runs on NumPy workers and on workers whose
CuPy is the test double."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def _adam(p, grads, steps, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    """Adam in float64 NumPy, with the step count given per update (as the program set it)."""
    m = v = 0.0
    for g, t in zip(grads, steps):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


def test_the_step_tensor_read_from_the_state_is_kept_followed_and_obeyed(conn):
    p = gt.nn.Parameter(gt.ones(2, dtype=gt.float64))
    opt = gt.optim.Adam([p], lr=0.1)
    for i in range(3):
        p.grad = gt.full((2,), float(i + 1), dtype=gt.float64)
        opt.step()
    state = opt.state[p]
    step = state["step"]
    assert step is state["step"] and step.item() == 3.0
    assert state.get("step") is step and dict(state)["step"] is step and {**state}["step"] is step
    assert all(isinstance(v, gt.Tensor) for v in state.values())
    p.grad = gt.full((2,), 4.0, dtype=gt.float64)
    opt.step()
    assert step.item() == 4.0 and state["step"] is step  # (the held tensor counts on)
    step.zero_()  # a warmup restarted by the program: the next update is its step 1
    p.grad = gt.full((2,), 5.0, dtype=gt.float64)
    opt.step()
    assert step.item() == 1.0
    expected = _adam(1.0, [1.0, 2.0, 3.0, 4.0, 5.0], [1, 2, 3, 4, 1])
    np.testing.assert_allclose(p.detach().numpy(), [expected] * 2, rtol=1e-12)
    assert opt.state_dict()["state"][0]["step"].item() == 1.0


def test_sgd_without_momentum_keeps_no_state(conn):
    m = gt.nn.Linear(3, 2)
    opt = gt.optim.SGD(m.parameters(), lr=0.1)
    m(gt.ones(4, 3)).sum().backward()
    opt.step()
    assert len(opt.state) == 0 and opt.state_dict()["state"] == {}
    with_momentum = gt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    with_momentum.step()
    assert len(with_momentum.state) == 2


def test_an_ndarray_operand_promotes_as_numpy_does(conn):
    x = gt.tensor([1.0, 2.0])
    assert (x * np.array([2, 3])).dtype == gt.float64  # (float32 with int64: float64 in NumPy)
    assert (x - np.array(1.0)).dtype == gt.float64  # (a 0-d float64 array is not a weak scalar)
    assert (x @ np.ones(2)).dtype == gt.float64
    assert (gt.tensor([3, 4]) / np.array([2, 4])).tolist() == [1.5, 1.0]
    assert (gt.tensor([3, 4]) / np.array([2, 4])).dtype == gt.float64
    assert (x + np.array([1, 2], dtype=np.float32)).dtype == gt.float32
    assert (x * np.float64(2)).dtype == gt.float32  # (a NumPy scalar is a scalar)
    assert (x == np.array([1.0, 5.0])).tolist() == [True, False]
    assert (x * np.array([2, 3])).tolist() == [2.0, 6.0]


def test_numpy_functions_of_a_tensor_give_tensors(conn):
    x = gt.tensor([1.0, 2.0])
    e = np.exp(x)
    assert isinstance(e, gt.Tensor) and e.dtype == gt.float32
    np.testing.assert_allclose(e.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    nan = np.isnan(x)  # (bool results as uint8, PyTorch's quirk)
    assert isinstance(nan, gt.Tensor) and nan.dtype == gt.uint8 and nan.tolist() == [0, 0]
    arg = np.argmax(x)
    assert isinstance(arg, gt.Tensor) and arg.shape == () and arg.item() == 1
    assert np.add(np.ones(2), x).tolist() == [2.0, 3.0]


def test_reversed_flips_the_first_dimension(conn):
    r = reversed(gt.arange(6).view(2, 3))
    assert isinstance(r, gt.Tensor) and r.tolist() == [[3, 4, 5], [0, 1, 2]]
    assert reversed(gt.tensor(2.0)).item() == 2.0


def test_as_subclass_and_view_as_make_new_tensors(conn):
    class Marked(gt.Tensor):
        pass

    x = gt.ones(2)
    y = x.as_subclass(Marked)
    assert y is not x and type(x) is gt.Tensor and type(y) is Marked
    layer = gt.nn.Linear(2, 2)
    layer.weight.as_subclass(Marked)
    assert type(layer.weight) is gt.nn.Parameter
    w = gt.ones(3, requires_grad=True)
    v = w.view_as(w)
    assert v is not w and not v.is_leaf and v.grad_fn is not None


def test_number_conversions_raise_as_pytorchs(conn):
    with pytest.raises(ValueError, match="only one element tensors"):
        int(gt.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="only one element tensors"):
        float(gt.ones(3))
    with pytest.raises(RuntimeError, match="without overflow"):
        float(gt.tensor(1 + 2j))
    with pytest.raises(RuntimeError, match="with no values is ambiguous"):
        bool(gt.ones(0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(gt.ones(2))
    assert int(gt.tensor([7])) == 7 and float(gt.tensor([[0.5]])) == 0.5


def test_rng_states_are_uint8_tensors_that_checkpoints_keep(conn):
    import io  # noqa: PLC0415

    state = gt.get_rng_state()
    assert isinstance(state, gt.Tensor) and state.dtype == gt.uint8 and state.shape == (16,)
    drawn = gt.rand(3).tolist()
    buf = io.BytesIO()
    gt.save({"rng": state}, buf)
    gt.set_rng_state(gt.load(io.BytesIO(buf.getvalue()))["rng"])  # (a weights_only load)
    assert gt.rand(3).tolist() == drawn
    g = gt.Generator().manual_seed(5)
    kept = g.get_state()
    first = gt.rand(2, generator=g).tolist()
    assert kept.dtype == gt.uint8 and gt.rand(2, generator=g.set_state(kept)).tolist() == first


def test_a_worker_error_a_fetch_raised_is_not_raised_again_at_the_next_sync(conn):
    y = gt.ones(2)
    for _ in range(3):  # (the same op on the same line each time: each failure is raised once)
        with pytest.raises(gt.errors.WorkerError):
            y[gt.tensor([5])].tolist()
    gt.sync()  # (it raised the first of them again)
    x = gt.zeros(3)
    x[gt.tensor([7])] = 1.0  # (not fetched: the sync point reports it)
    with pytest.raises(gt.errors.WorkerError):
        gt.sync()
    gt.sync()
    assert (x + 1).tolist() == [1.0, 1.0, 1.0]


def test_a_loss_that_failed_fails_its_backward_with_the_same_error_raised_once(conn):
    # (the errors probe: nll_loss_backward checked the target again and failed with its own
    # error, which the next gt.sync() raised after the program had caught the loss's)
    lin = gt.nn.Linear(2, 3)
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        loss = gt.nn.functional.cross_entropy(lin(gt.ones(1, 2)), gt.tensor([5]))
        loss.backward()
        loss.item()
    gt.sync()  # nothing more to raise
    assert (lin(gt.ones(1, 2)).sum() * 0).item() == 0.0  # and the weights are as they were


class Boxes(gt.Tensor):
    """A subclass as torchvision's ``tv_tensors`` make them."""


class Logged(gt.Tensor):
    calls: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        cls.calls.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_methods_of_a_subclass_give_the_subclass(conn):
    boxes = gt.tensor([[0.0, 0.0, 2.0, 2.0]]).as_subclass(Boxes)
    for result in (boxes + 1, 1 + boxes, boxes * boxes, boxes[0], boxes.sum(), boxes.split(1)[0]):
        assert type(result) is Boxes
    assert type(gt.ones(2)) is gt.Tensor and repr(boxes[0, :2]) == "Boxes([0., 0.])"
    assert {boxes: 1}[boxes] == 1  # (still hashable)
    Logged.calls.clear()
    total = (gt.ones(2).as_subclass(Logged) + 1).sum()
    assert type(total) is Logged and total.item() == 4.0 and Logged.calls[:2] == ["__add__", "sum"]
    layer = gt.nn.Linear(2, 2)
    assert type(layer.weight * 2) is gt.Tensor  # (a Parameter's results are plain)
