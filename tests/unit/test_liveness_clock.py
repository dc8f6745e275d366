"""Telling slow from dead: the running clock stands still while its own process was not running."""

from __future__ import annotations

import pytest

from gt.runtime.liveness import RunningClock, env_seconds


def test_the_running_clock_follows_time_while_the_process_runs():
    c = RunningClock(period=0.1, stall=1.0, now=0.0)
    for i in range(1, 21):
        c.tick(i * 0.1)
    assert c.now(2.0) == pytest.approx(2.0)


def test_a_pause_of_the_process_itself_is_not_counted_against_its_peers():
    c = RunningClock(period=0.1, stall=1.0, now=0.0)
    c.tick(0.1)
    heard = c.now(0.1)
    c.tick(10.1)  # stopped for 10 s (SIGSTOP, a long GC, a starved scheduler)
    assert c.now(10.1) - heard == pytest.approx(0.1)  # the peer was silent for one tick only
    c.tick(10.2)
    assert c.now(10.2) - heard == pytest.approx(0.2)


def test_a_gap_shorter_than_the_stall_limit_counts():
    c = RunningClock(period=0.1, stall=1.0, now=0.0)
    c.tick(0.9)
    assert c.now(0.9) == pytest.approx(0.9)


def test_durations_from_the_environment_fall_back_on_bad_values(monkeypatch):
    monkeypatch.setenv("GT_TEST_S", "12.5")
    assert env_seconds("GT_TEST_S", 60.0) == 12.5
    for bad in ("soon", "-3", "0"):
        monkeypatch.setenv("GT_TEST_S", bad)
        assert env_seconds("GT_TEST_S", 60.0) == 60.0


def test_processes_of_one_boot_share_the_run_clock_exactly_and_others_read_the_stamp():
    import time

    from gt.runtime import liveness as L

    stale = time.monotonic_ns() - 50_000_000  # a stamp delivered 50 ms late (a busy machine)
    if L.BOOT_ID:  # Linux: the same boot, the same CLOCK_MONOTONIC: no delivery time added
        assert L.run_clock_offset(stale, L.BOOT_ID) == 0
    other = L.run_clock_offset(stale, "another machine's boot id")
    assert -60_000_000 < other <= -50_000_000  # the stamp is the estimate
    assert L.run_clock_offset(None, L.BOOT_ID) == 0 and L.run_clock_offset(True, None) == 0
