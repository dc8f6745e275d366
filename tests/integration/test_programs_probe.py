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
    with pytest.raises(gt.WorkerError, match="all elements of target should be between 0 and 1"):
        F.binary_cross_entropy(gt.tensor([0.5]), gt.tensor([2.0])).item()
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


def test_numpy_of_a_tensor_that_requires_grad_is_refused_as_in_pytorch(conn):
    w = gt.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        w.numpy()
    assert w.numpy(force=True).tolist() == [1.0, 1.0]
    assert w.detach().numpy().tolist() == [1.0, 1.0]
    # GT's own sync points on such a tensor still work, as PyTorch's do
    assert w.tolist() == [1.0, 1.0] and w.sum().item() == 2.0
    assert "requires_grad=True" in repr(w)
    assert w.nonzero().tolist() == [[0], [1]]


def test_index_add_refuses_a_source_of_another_dtype(conn):
    x = gt.zeros(3)
    with pytest.raises(
        RuntimeError,
        match=r"index_add_\(\): self \(Float\) and source \(Double\) must have the same scalar",
    ):
        x.index_add_(0, gt.tensor([0, 1]), gt.ones(2, dtype=gt.float64))
    assert x.index_add_(0, gt.tensor([0, 1]), gt.ones(2)).tolist() == [1.0, 1.0, 0.0]


def test_an_inference_tensor_saved_for_backward_is_refused(conn):
    layer = gt.nn.Linear(3, 3)
    with gt.inference_mode():
        x = gt.ones(2, 3)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        layer(x)
    layer(x.clone()).sum().backward()  # (PyTorch's way out: a clone is a normal tensor)
    assert layer.weight.grad.shape == (3, 3)
    assert (layer.bias + x).shape == (2, 3)  # (nothing saved for an addition)


def test_soft_margin_loss_refuses_a_target_that_widens_the_input(conn):
    with pytest.raises(
        RuntimeError, match=r"output with shape \[4, 1\] doesn't match the broadcast shape \[4, 4\]"
    ):
        F.soft_margin_loss(gt.ones(4, 1), gt.ones(4))
    assert F.soft_margin_loss(gt.zeros(4, 4), gt.ones(4)).item() == pytest.approx(0.6931472)


@pytest.mark.parametrize("bad", [3, -1])
def test_one_hot_with_num_classes_refuses_a_label_outside_them(conn, bad):
    # (an all-zero row before; the check is the worker's, so it surfaces at the sync point)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"):
        F.one_hot(gt.tensor([0, bad]), 3).tolist()
    assert F.one_hot(gt.tensor([[0], [2]]), 3).tolist() == [[[1, 0, 0]], [[0, 0, 1]]]


# --- the second probe of realistic programs (Dec 7, afternoon): messages and refusals


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: gt.nn.BatchNorm1d(3)(gt.ones(4, 5)), "running_mean should contain 5 elements not 3"),
        (lambda: gt.nn.BatchNorm1d(3).eval()(gt.ones(4, 5)), "running_mean should contain 5"),
        (lambda: gt.nn.BatchNorm1d(3, track_running_stats=False)(gt.ones(4, 5)),
         "weight should contain 5 elements not 3"),
        (lambda: gt.nn.GroupNorm(2, 4)(gt.ones(2, 6, 3)),
         r"Expected weight to be a vector of size equal to the number of channels in input, but "
         r"got weight of shape \[4\] and input of shape \[2, 6, 3\]"),
    ],
)  # fmt: skip
def test_a_norm_layer_built_for_other_channels_says_so(conn, make, message):
    # (the messages named an internal add_ or reshape the user never called)
    with pytest.raises(RuntimeError, match=message):
        make()


def test_instance_norm_names_its_features_and_refuses_one_spatial_element(conn):
    with pytest.raises(ValueError, match=r"to match num_features \(3\), but got: 4\."):
        gt.nn.InstanceNorm2d(3, affine=True)(gt.ones(2, 4, 5, 5))
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        gt.nn.InstanceNorm1d(4)(gt.ones(2, 4, 1))
    assert gt.nn.InstanceNorm1d(4)(gt.ones(0, 4, 3)).shape == (0, 4, 3)


def test_a_float64_batch_into_a_float32_layer_names_the_dtypes(conn):
    # (it failed in a matmul of the convolution's or the gates' internal shapes)
    x = gt.ones(1, 3, 5, 5, dtype=gt.float64)
    with pytest.raises(RuntimeError, match=r"Input type \(double\) and bias type \(float\)"):
        gt.nn.Conv2d(3, 4, 3)(x)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        gt.nn.Conv2d(3, 4, 3, bias=False)(x)
    for layer in (gt.nn.LSTM(3, 4), gt.nn.GRU(3, 4)):
        with pytest.raises(
            ValueError, match=r"RNN input dtype \(gt.float64\) does not match weight"
        ):
            layer(gt.ones(2, 1, 3, dtype=gt.float64))
    assert gt.nn.Conv2d(3, 4, 3).double()(x).shape == (1, 4, 3, 3)


def test_targets_of_a_dtype_pytorchs_losses_refuse_are_refused(conn):
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        F.cross_entropy(gt.zeros(2, 3), gt.tensor([0, 1], dtype=gt.int32))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        F.binary_cross_entropy_with_logits(gt.zeros(4), gt.tensor([0, 1, 1, 0]))
    with pytest.raises(RuntimeError, match="Found dtype Long but expected Float"):
        F.binary_cross_entropy(gt.full((4,), 0.5), gt.tensor([0, 1, 1, 0]))
    byte = F.cross_entropy(gt.zeros(2, 3), gt.tensor([0, 1], dtype=gt.uint8))
    assert byte.item() == pytest.approx(1.0986123)


def test_negative_repeats_are_refused(conn):
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        gt.repeat_interleave(gt.tensor([1, 2]), gt.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="Repeats must be non-negative"):
        gt.ones(3).repeat_interleave(-1)
    assert gt.tensor([1, 2]).repeat_interleave(gt.tensor([0, 2])).tolist() == [2, 2]


def test_uneven_nested_lists_get_pytorchs_message(conn):
    # (NumPy's "inhomogeneous shape after 1 dimensions" before)
    with pytest.raises(ValueError, match=r"expected sequence of length 2 at dim 1 \(got 1\)"):
        gt.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match=r"expected sequence of length 1 at dim 2 \(got 2\)"):
        gt.tensor([[[1], [2, 3]]])
