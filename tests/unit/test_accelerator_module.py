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


def test_a_dtype_in_an_f_string_reads_as_print_gives_it():
    y = gt.int64
    assert f"Shape of y: {y}" == "Shape of y: gt.int64"  # PyTorch: torch.int64
    assert f"{gt.float32:>14}" == "    gt.float32"
    assert "{}".format(gt.bool) == str(gt.bool)  # noqa: UP032 == repr(gt.bool) == "gt.bool"
    assert gt.float32 == "float32"  # still its name as a string
