"""What a probe of 21 realistic PyTorch programs (Dec 7) found where GT differed from PyTorch in
what it tells the user: a regression loss that broadcasts a mismatched target, class indices
stored as floats, negative one-hot labels, probabilities outside [0, 1], ``kl_div``'s "mean".
PyTorch's messages are written out as PyTorch 2.13 printed them."""

from __future__ import annotations

import warnings

import pytest

import gt
import gt.nn.functional as F

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("loss", [F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss])
def test_a_regression_loss_warns_when_its_target_broadcasts(conn, loss):
    with pytest.warns(UserWarning, match=r"Using a target size .* different to the input size"):
        loss(gt.zeros(3, 1), gt.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss(gt.zeros(3), gt.zeros(3))  # (the same shape: nothing to say)


def test_class_indices_stored_as_floats_are_named_as_the_mistake(conn):
    with pytest.raises(
        RuntimeError, match="expected target dtype to be Long or Byte, but got Float"
    ):
        F.cross_entropy(gt.zeros(3, 4), gt.tensor([0.0, 1.0, 2.0]))
    probs = gt.full((3, 4), 0.25)  # (class probabilities: the input's shape, still fine)
    assert F.cross_entropy(gt.zeros(3, 4), probs).item() == pytest.approx(1.3862944)


def test_a_negative_label_is_refused_by_one_hot(conn):
    with pytest.raises(RuntimeError, match="Class values must be non-negative."):
        F.one_hot(gt.tensor([0, -1]))  # (a -1 padding label was an all-zero row)
    assert F.one_hot(gt.tensor([0, 2])).tolist() == [[1, 0, 0], [0, 0, 1]]


def test_binary_cross_entropy_refuses_inputs_that_are_not_probabilities(conn):
    with pytest.raises(gt.WorkerError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(gt.tensor([1.5, 0.5]), gt.tensor([1.0, 0.0])).item()
    ok = F.binary_cross_entropy(gt.tensor([0.5]), gt.tensor([1.0])).item()
    assert ok == pytest.approx(0.6931472)


def test_kl_div_mean_says_batchmean_is_what_is_meant(conn):
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(gt.zeros(2, 3), gt.zeros(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.kl_div(gt.zeros(2, 3), gt.zeros(2, 3), reduction="batchmean")


def test_float_of_a_tensor_that_requires_grad_warns_as_pytorch_does(conn):
    t = gt.ones(1, requires_grad=True)
    with pytest.warns(UserWarning, match="Consider using tensor.detach"):
        assert float(t) == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(t.detach()) == 1.0 and int(t) == 1 and t.item() == 1.0


def test_a_scheduler_stepped_before_its_optimizer_warns_as_pytorch_does(conn):
    m = gt.nn.Linear(2, 1)
    opt = gt.optim.SGD(m.parameters(), lr=0.1)
    sched = gt.optim.lr_scheduler.StepLR(opt, 1)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt = gt.optim.SGD(m.parameters(), lr=0.1)
    sched = gt.optim.lr_scheduler.StepLR(opt, 1)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()
