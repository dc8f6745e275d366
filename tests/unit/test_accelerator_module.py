"""What the official PyTorch tutorials ask before any tensor exists, answered as PyTorch answers it
on a machine without an accelerator (no cluster needed): ``torch.accelerator`` for the device, and
``f"{y.dtype}"`` in the quickstart's first print."""

from __future__ import annotations

import pytest

import gt


def test_the_quickstarts_device_line_picks_cpu():
    device = gt.accelerator.current_accelerator().type if gt.accelerator.is_available() else "cpu"
    assert device == "cpu"
    assert gt.accelerator.current_accelerator() is None
    assert gt.accelerator.device_count() == 0


def test_asking_for_an_accelerator_index_raises_as_pytorch_does():
    with pytest.raises(RuntimeError, match="none is available"):
        gt.accelerator.current_device_index()
    with pytest.raises(RuntimeError, match="none is available"):
        gt.accelerator.set_device_index(0)
    with gt.accelerator.device_index(None):
        pass
