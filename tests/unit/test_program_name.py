"""What a client calls itself in monitors: its script, or the command it ran as."""

from __future__ import annotations

import sys

import pytest

from gt.runtime.client.connection import _program_name


@pytest.mark.parametrize(
    ("argv0", "name"),
    [
        ("/home/me/train.py", "train.py"),
        ("/site-packages/gt/__main__.py", "gt"),  # python -m gt demo, gt run ...
        ("/lib/mypkg/__main__.py", "mypkg"),
        ("", "python"),  # an interactive interpreter
    ],
)
def test_a_client_is_named_by_its_script_or_its_package(monkeypatch, argv0, name):
    monkeypatch.setattr(sys, "argv", [argv0, "demo"])
    assert _program_name() == name
