"""Anomaly detection: the first derivative rule that returns NaN raises PyTorch's error while it
is on, and nothing is checked (or changed) while it is off."""

from __future__ import annotations

import pytest

import gt


def test_a_nan_gradient_names_its_rule_only_while_detection_is_on(conn):
    x = gt.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = gt.autograd.detect_anomaly()
    with mode:
        assert gt.is_anomaly_enabled() and gt.is_anomaly_check_nan_enabled()
        with pytest.raises(
            RuntimeError, match="Function 'SqrtBackward0' returned nan values in its 0th output"
        ):
            (x.sqrt() * 0).sum().backward()
    assert not gt.is_anomaly_enabled()
    x.grad = None
    (x.sqrt() * 0).sum().backward()  # off: PyTorch's NaN, no error
    assert str(x.grad.tolist()[0]) == "nan"


def test_set_detect_anomaly_switches_now_and_as_a_block(conn):
    try:
        gt.autograd.set_detect_anomaly(True, check_nan=False)
        assert gt.is_anomaly_enabled() and not gt.is_anomaly_check_nan_enabled()
        x = gt.tensor([0.0], requires_grad=True)
        (x.sqrt() * 0).sum().backward()  # no NaN check asked for
        with gt.autograd.set_detect_anomaly(False):
            assert not gt.is_anomaly_enabled()
        assert gt.is_anomaly_enabled()
    finally:
        gt.set_anomaly_enabled(False)

    @gt.autograd.set_detect_anomaly(True)
    def step():
        return gt.is_anomaly_enabled()

    gt.set_anomaly_enabled(False)
    assert step() and not gt.is_anomaly_enabled()
