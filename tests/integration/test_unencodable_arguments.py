"""An argument GT cannot send costs its own op, at the user's line, and nothing else: a NumPy
array where an op takes a tensor raises ``TypeError`` at the call (it used to fail the whole
pending batch at some later flush, losing every tensor made since the last one); NumPy numbers
travel as Python numbers; and an op whose attributes cannot be encoded is dropped from its batch
with an error that names it, whichever thread flushes."""

from __future__ import annotations

import time

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(60)
F = gt.nn.functional


@pytest.fixture(scope="module")
def cluster():
    from gt.runtime.launch import LocalCluster

    with LocalCluster(workers=1) as c:
        yield c


def test_a_numpy_array_as_an_op_input_is_refused_at_the_call(conn):
    kept = gt.ones(3) * 2
    with pytest.raises(TypeError, match=r"numpy\.ndarray: GT's ops take tensors"):
        F.nll_loss(gt.ones(2, 3), np.array([1, 2]))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        F.cross_entropy(gt.ones(5), np.int64(2))
    assert kept.tolist() == [2.0, 2.0, 2.0]  # (the batch it was queued in was not lost)
    assert (gt.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]


def test_numpy_numbers_are_sent_as_python_numbers(conn):
    x = gt.tensor([1.0, 2.0])
    assert (x * np.float32(2.0)).tolist() == [2.0, 4.0]
    assert (x + np.int64(1)).tolist() == [2.0, 3.0]
    assert x.clamp(np.float64(1.5), np.float64(1.75)).tolist() == [1.5, 1.75]
    ln = F.layer_norm(gt.tensor([[1.0, 3.0]]), (2,), eps=np.float64(1e-5))
    np.testing.assert_allclose(ln.numpy(), [[-1.0, 1.0]], rtol=1e-4)


def test_an_op_that_cannot_be_encoded_is_dropped_alone_and_named(conn):
    x, y = gt.ones(3), gt.ones(3) * 2
    bad = x._apply("add_scaled", [x, y], {"alpha": np.array([1.0, 2.0])})
    after = x + 5
    with pytest.raises(
        TypeError, match=r"add_scaled at .*test_unencodable_arguments.py:\d+ was not sent"
    ):
        after.tolist()
    assert after.tolist() == [6.0, 6.0, 6.0] and y.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(gt.errors.WorkerError, match="does not exist"):
        bad.tolist()
    assert (x * 3).tolist() == [3.0, 3.0, 3.0]


def test_the_timer_threads_flush_reports_it_at_the_programs_next_sync(conn):
    x = gt.ones(2)
    x._apply("add_scaled", [x, x], {"alpha": np.array([1.0, 2.0])})
    deadline = time.monotonic() + 30
    while conn._unsent is None:  # (the timer thread sends a pending batch within 2 ms)
        assert time.monotonic() < deadline, "the timer thread never flushed"
        time.sleep(0.005)
    with pytest.raises(TypeError, match="add_scaled"):
        gt.sync()
    gt.sync()  # (reported once)
    assert (x + 1).tolist() == [2.0, 2.0]
