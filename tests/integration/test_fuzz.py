"""Fuzzing every socket of a live cluster (the small form of ``scripts/fuzz_sockets.py``): no
process dies, bad input is counted (never logged as a bug), and a legitimate client's results stay
exact throughout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import fuzz_sockets  # noqa: E402 - the script's own fuzzer, small


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_fuzzed_messages_on_every_socket_kill_nothing_and_are_counted(seed):
    rep = fuzz_sockets.fuzz(1500, seed)
    assert all(rep.alive.values()), rep.alive
    assert rep.internal_errors == 0
    assert rep.bad_messages > 2000 and rep.worker_bad_messages > 1000
    assert rep.checks == 6 * 1500 // 500 + 1
