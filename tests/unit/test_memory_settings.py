"""Memory settings as users write them: sizes, fractions, layers and their precedence."""

from __future__ import annotations

import pytest

from gt.runtime import memory_settings as MS


@pytest.mark.parametrize("text, want", [
    ("8GB", 8 * 10**9), ("8GiB", 8 * 2**30), ("512MB", 512 * 10**6), ("1.5G", 1_500_000_000),
    ("100kB", 100_000), ("64KiB", 65536), (" 2 mib ", 2 * 2**20), ("123", 123), (4096, 4096),
    ("1e9", 10**9), ("1e9B", 10**9),
])  # fmt: skip
def test_sizes_parse_with_decimal_and_binary_units(text, want):
    assert MS.parse_size(text) == want


@pytest.mark.parametrize("text, want", [("0.8", 0.8), (0.25, 0.25), (1.0, 1.0), ("1.0", 1.0)])
def test_a_number_up_to_one_is_a_fraction_of_capacity(text, want):
    assert MS.parse_size(text) == want


@pytest.mark.parametrize("text", [None, "none", "off", "", 0, "0"])
def test_none_off_and_zero_mean_no_limit(text):
    assert MS.parse_size(text) is None


@pytest.mark.parametrize("text, match", [
    ("lots", "not a size"), ("8XB", "not a size"), (-1, "negative"), ("8e30", "more than any"),
    (True, "size such as"), ([8], "size such as"),
])  # fmt: skip
def test_what_is_not_a_size_is_refused_with_a_hint(text, match):
    with pytest.raises(MS.SettingError, match=match):
        MS.parse_size(text)


def test_normalize_checks_each_setting_and_refuses_unknown_ones():
    got = MS.normalize({"memory_limit": "2GB", "spill_threshold": "0.5", "prefetch": "0"})
    assert got == {"memory_limit": 2 * 10**9, "spill_threshold": 0.5, "prefetch": 0}
    with pytest.raises(MS.SettingError, match="unknown memory setting 'limit'"):
        MS.normalize({"limit": "1GB"})
    with pytest.raises(MS.SettingError, match=r"in \(0, 1\]"):
        MS.normalize({"spill_threshold": 1.5})
    with pytest.raises(MS.SettingError, match="not a fraction"):
        MS.normalize({"prefetch": 0.5})


def test_environment_variables_are_read_and_named_in_errors():
    assert MS.from_env({"GT_MEMORY_LIMIT": "1GB", "GT_PREFETCH": ""}) == {"memory_limit": 10**9}
    with pytest.raises(MS.SettingError, match=r"\$GT_SPILL_THRESHOLD"):
        MS.from_env({"GT_SPILL_THRESHOLD": "high"})


def test_the_first_layer_that_says_wins_and_fractions_become_bytes():
    runtime, flags, env = (
        {"memory_limit": 0.5},
        {"memory_limit": 10**9, "prefetch": 7},
        {"prefetch": 9, "client_memory_limit": 100},
    )
    got = MS.resolve([runtime, flags, env], capacity=8 * 10**9)
    assert got == {"memory_limit": 4 * 10**9, "client_memory_limit": 100, "spill_threshold": 0.8,
                   "prefetch": 7}  # fmt: skip
    assert MS.resolve([{"memory_limit": 0.5}], capacity=None)["memory_limit"] is None
    assert MS.resolve([], None) == MS.DEFAULTS
