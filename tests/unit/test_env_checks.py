"""The GT_* variables a local cluster's processes read, checked before any starts (pure)."""

from __future__ import annotations

import pytest

from gt.runtime import env_checks
from gt.runtime.memory_settings import SettingError
from gt.trace.emit import trace_level


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GT_BACKEND": "tpu"}, r"\$GT_BACKEND must be auto, numpy or cupy, not 'tpu'"),
        ({"GT_BACKEND": "NumPy"}, r"\$GT_BACKEND must be"),  # (the worker takes no other case)
        ({"GT_TRACE": "bogus"}, r"\$GT_TRACE must be off, summary or full, not 'bogus'"),
        ({"GT_RAM_CAP": "lots"}, r"\$GT_RAM_CAP 'lots' is not a size"),
        ({"GT_RAM_CAP": "100MB"}, r"\$GT_RAM_CAP=100MB is below what a worker needs"),
        ({"GT_TIMEOUT": "abc"}, r"\$GT_TIMEOUT must be a number of seconds such as 300"),
        ({"GT_TIMEOUT": "-1"}, r"\$GT_TIMEOUT must be a number of seconds"),
        ({"GT_TIMEOUT": "nan"}, r"\$GT_TIMEOUT must be a number of seconds"),
    ],
)
def test_a_variable_that_would_stop_a_worker_or_a_wait_is_refused_naming_it(env, message):
    with pytest.raises(SettingError, match=message):
        env_checks.check(env)


def test_good_and_unset_values_pass():
    env_checks.check({})
    env_checks.check({"GT_BACKEND": "numpy", "GT_TRACE": "Summary", "GT_RAM_CAP": "0.5",
                      "GT_TIMEOUT": "0.5", "GT_WORKERS": "2"})  # fmt: skip
    env_checks.check({"GT_RAM_CAP": "off", "GT_BACKEND": " ", "GT_TRACE": ""})
    assert env_checks.seconds("2.5", "GT_TIMEOUT") == 2.5
    assert env_checks.ram_cap_size("1GB") == 10**9


def test_the_trace_level_refuses_a_typo_instead_of_recording_everything(monkeypatch):
    monkeypatch.setenv("GT_TRACE", "sumary")
    with pytest.raises(ValueError, match="GT_TRACE must be off, summary or full"):
        trace_level()
    monkeypatch.setenv("GT_TRACE", " OFF ")
    assert trace_level() == "off"
    monkeypatch.delenv("GT_TRACE")
    assert trace_level() == "full"
