"""Shard config schema: normal form, precise errors, sources (file, YAML text, dict, env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gt.runtime.sharding.config import (
    ConfigError,
    from_env,
    parse,
    resolve_workers,
    to_yaml_dict,
    validate,
)

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def test_the_example_configs_exist_for_every_parallelism():
    names = {p.stem for p in CONFIGS}
    assert {"dp", "tp_column", "tp_row", "tp2", "pipeline", "hybrid"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
@pytest.mark.parametrize("workers", [[0], [0, 1], [0, 1, 2, 3]])
def test_every_example_config_is_valid_on_1_2_and_4_workers(path, workers):
    cfg = validate(parse(path), workers)
    assert cfg["signals"]
    for rule in cfg["signals"].values():
        assert resolve_workers(rule["workers"], workers)


def test_normal_form_and_back():
    raw = {
        "layer1": {"shard": {"axis": 0, "workers": [1, 0]}, "compile": True},
        "params": {"replicate": None},
        "stage": {"workers": {"part": 1, "of": 2}, "backward": "params"},
        "auto_shard": True,
    }
    cfg = validate(raw, [0, 1])
    assert cfg["signals"]["layer1"] == {
        "kind": "shard",
        "axis": 0,
        "workers": [1, 0],
        "backward": None,
        "compile": True,
    }
    assert cfg["signals"]["params"]["workers"] == "all"
    assert cfg["signals"]["stage"]["kind"] == "stage"
    assert cfg["settings"]["auto_shard"] is True
    assert validate(to_yaml_dict(cfg), [0, 1]) == cfg
    assert validate(cfg, [0, 1]) == cfg  # a normal form is accepted as input


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"l": {"shards": {"axis": 0}}}, "l: unknown key 'shards'"),
        ({"l": {"shard": {"axis": 0, "worker": [0]}}}, "l.shard: unknown key 'worker'"),
        ({"l": {"shard": {"axis": "x"}}}, "l.shard.axis must be an integer"),
        ({"l": {"shard": {}}}, "l.shard.axis must be an integer, got None"),
        ({"l": {"shard": {"axis": 0}, "replicate": {}}}, "shard and replicate exclude each other"),
        (
            {"l": {"replicate": {"workers": [0, 7]}}},
            "l.replicate.workers: worker 7 does not exist (workers: 0, 1)",
        ),
        ({"l": {"workers": [0, 0]}}, "worker 0 is listed twice"),
        ({"l": {"workers": {"part": 2, "of": 2}}}, "l.workers.part must be an integer in 0..1"),
        ({"l": {"workers": []}}, "must be a non-empty list"),
        ({"l": {"backward": "nope"}}, "l.backward names 'nope', which is not a signal"),
        ({"l": {"compile": "yes"}}, "l.compile must be true or false"),
        (
            {"l": {"workers": [0], "shard": {"axis": 0, "workers": [1]}}},
            "differs from the stage's workers",
        ),
        ({"auto_shard": 1}, "auto_shard must be true or false"),
        ({"l": 3}, "l must be a mapping"),
        ([1, 2], "a config is a mapping"),
    ],
)
def test_errors_name_the_key_that_is_wrong(raw, message):
    with pytest.raises(ConfigError) as info:
        validate(raw, [0, 1])
    assert message in str(info.value)


def test_worker_ids_are_only_checked_when_the_workers_are_known():
    validate({"l": {"workers": [9]}})
    with pytest.raises(ConfigError):
        validate({"l": {"workers": [9]}}, [0])


@pytest.mark.parametrize(
    "alive,parts",
    [
        ([0], [(0,), (0,)]),
        ([0, 1], [(0,), (1,)]),
        ([0, 1, 2, 3], [(0, 1), (2, 3)]),
        ([0, 1, 2], [(0,), (1, 2)]),
    ],
)
def test_parts_of_the_workers_fit_any_cluster_size(alive, parts):
    got = [resolve_workers({"part": i, "of": 2}, alive) for i in range(2)]
    assert got == parts
    assert resolve_workers("all", alive) == tuple(alive)
    assert resolve_workers([0, 9], alive) == (0,)


def test_sources_file_text_dict_and_errors(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("layer1:\n  shard: {axis: 1}\n")
    assert (
        parse(str(f))
        == parse(f)
        == parse("layer1:\n  shard: {axis: 1}\n")
        == {"layer1": {"shard": {"axis": 1}}}
    )
    assert parse({"a": {}}) == {"a": {}}
    with pytest.raises(ConfigError, match="cannot read config file"):
        parse(str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse("a: [1\n")


def test_environment_variables(monkeypatch, tmp_path):
    monkeypatch.delenv("GT_CONFIG", raising=False)
    monkeypatch.delenv("GT_AUTO_SHARD", raising=False)
    assert from_env() is None
    f = tmp_path / "c.yaml"
    f.write_text("p:\n  replicate: {}\n")
    monkeypatch.setenv("GT_CONFIG", str(f))
    monkeypatch.setenv("GT_AUTO_SHARD", "1")
    assert from_env() == {"p": {"replicate": {}}, "auto_shard": True}


def test_huge_or_repetitive_configs_are_refused_quickly_with_a_short_message():
    import time

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="listed twice"):
        validate({"a": {"workers": [*range(4095), 7]}})
    with pytest.raises(ConfigError, match="100000 worker ids; at most 4096"):
        validate({"a": {"workers": list(range(100_000))}})
    with pytest.raises(ConfigError, match="at most 4096 signals"):
        validate({f"s{i}": {"replicate": {}} for i in range(5000)})
    with pytest.raises(ConfigError) as info:
        validate({"a": {"workers": "x" * 100_000}})
    assert len(str(info.value)) < 300
    assert time.perf_counter() - t0 < 2.0  # was minutes for a long list with a duplicate
