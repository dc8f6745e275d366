"""Shard config schema: normal form, precise errors, sources (file, YAML text, dict, env), and
YAML read within bounds (size, nesting, aliases, duplicate keys, empty text) by both ``parse`` and
the editor's ``check_text``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gt.runtime.sharding import config_text as CE
from gt.runtime.sharding.config import (
    EMPTY,
    MAX_TEXT,
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


# ---------------------------------------------------------------------- YAML within bounds
def _parse_error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return info.value


def _problem(text: str) -> CE.Problem:
    checked = CE.check_text(text, [0, 1])
    assert not checked.ok and len(checked.problems) == 1
    return checked.problems[0]


def _laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", ["a:\n  " + "[" * 5000 + "]" * 5000 + "\n",
                                  "a:\n  " + "{b: " * 5000 + "1" + "}" * 5000 + "\n"],
                         ids=["lists", "maps"])  # fmt: skip
def test_yaml_nested_thousands_deep_is_one_line_error(text):
    exc = _parse_error(text)
    assert "nested deeper than 32 levels" in str(exc) and "\n" not in str(exc) and exc.line == 2
    p = _problem(text)
    assert p.line == 2 and p.message == "YAML: nested deeper than 32 levels"


@pytest.mark.parametrize("levels,what", [(9, "values once aliases are expanded"), (3, None)])
def test_an_alias_bomb_is_refused_quickly_and_briefly(levels, what):
    text = _laughs(levels)
    t0 = time.process_time()  # CPU time: a loaded machine does not make it fail
    if what is None:  # three levels: 729 values, a config's worth; fine (then not a signal)
        assert len(parse(text)["a2"]) == 9
        return
    exc = _parse_error(text)
    assert what in str(exc) and len(str(exc)) < 120
    assert what in _problem(text).message
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    assert "more than 100 aliases" in str(_parse_error(many))
    assert "alias inside the node it names" in str(_parse_error("a: &a [1, *a]\n"))
    assert time.process_time() - t0 < 1.0


def test_a_few_aliases_keep_a_config_dry():
    text = (
        "base: &stage {workers: {part: 0, of: 2}}\n"
        "layer1:\n  <<: *stage\n  backward: layer1_bwd\n"
        "layer1_bwd: *stage\n"
        "layer2:\n  <<: *stage\n  compile: true\n"
    )
    cfg = validate(parse(text), [0, 1])
    assert cfg["signals"]["layer1"]["workers"] == {"part": 0, "of": 2}
    assert cfg["signals"]["layer2"]["compile"] and CE.check_text(text, [0, 1]).ok


@pytest.mark.parametrize(
    "text,line,first",
    [
        ("layer1:\n  shard: {axis: 0}\nlayer2: {}\nlayer1:\n  replicate: {}\n", 4, 1),
        ("layer1:\n  shard: {axis: 0, axis: 1}\n", 2, 2),
        ("layer1:\n  shard:\n    axis: 0\n  backward: x\n  shard: {axis: 1}\n", 5, 2),
    ],
)
def test_duplicate_keys_are_an_error_naming_the_key_and_its_line(text, line, first):
    exc = _parse_error(text)
    key = "layer1" if line == 4 else ("axis" if "axis: 1}" in text.split("\n")[1] else "shard")
    assert str(exc) == f"duplicate key '{key}' on line {line} (first on line {first})"
    assert exc.line == line
    p = _problem(text)
    assert (p.line, p.message) == (line, f"duplicate key '{key}' (first on line {first})")


def test_text_and_files_are_bounded_in_size(tmp_path):
    big = "a: " + "x" * MAX_TEXT + "\n"
    assert "at most 1,048,576 are allowed" in str(_parse_error(big))
    assert "at most 1,048,576" in _problem(big).message
    f = tmp_path / "big.yaml"
    f.write_text("# padding\n" * (MAX_TEXT // 5))
    with pytest.raises(ConfigError, match="is over 1,048,576 bytes"):
        parse(f)


@pytest.mark.parametrize("text", ["", "  \n", "# only a comment\n", "null\n", "~\n", "--- \n"])
def test_an_empty_config_text_or_file_is_an_error(tmp_path, text):
    f = tmp_path / "empty.yaml"
    f.write_text(text)
    for source in (f, str(f)):
        with pytest.raises(ConfigError) as info:
            parse(source)
        assert str(info.value) == EMPTY
    assert _problem(text).message == EMPTY
    if text.strip():
        assert str(_parse_error(text + "\n")) == EMPTY  # as text (a newline: not a path)


def test_clearing_is_explicit(monkeypatch):
    import gt.config

    applied = []

    class Conn:
        def apply_config(self, raw):
            applied.append(raw)
            return validate(raw)

    monkeypatch.setattr(gt.config, "get_connection", lambda: Conn())
    assert gt.config.clear() == validate({}) and applied == [None]
    assert gt.config.load_config({}) == validate({})
    with pytest.raises(ConfigError, match="the config is empty"):
        gt.config.load_config("# nothing\n")
    assert parse(None) is None and applied == [None, {}]
    text = CE.to_text({})  # what an editor shows for no config: applying it clears
    checked = CE.check_text(text)
    assert checked.ok and checked.raw == {} and checked.normal == validate({})


_HUGE = "x" * 100_000
_DEEP: list = []
_DEEP.append(_DEEP)  # a list that holds itself
_SHARED: list = [1] * 10
for _ in range(40):  # 10**40 values once expanded: what a YAML alias bomb builds
    _SHARED = [_SHARED] * 10


@pytest.mark.parametrize(
    "raw",
    [
        {_HUGE: {"shard": {"axis": _SHARED}}},
        {_HUGE: {"shardz": 1}},
        {"a": {_HUGE: 1}},
        {"a": {"shard": _SHARED}},
        {"a": {"shard": {"axis": _DEEP}}},
        {"a": {"workers": {"part": _HUGE, "of": 2}}},
        {"a": {"workers": {"part": 0, "of": _SHARED}}},
        {"a": {"workers": [0, _HUGE]}},
        {"a": {"backward": [_HUGE]}},
        {"a": {"backward": _HUGE}},
        {"a": {"compile": _SHARED}},
        {"a": {"workers": [0], "shard": {"axis": 0, "workers": [*range(4000)]}}},
        {"auto_shard": _HUGE},
        {"auto_shard_min_bytes": _SHARED},
        {(_HUGE,): {}},
        {"settings": _SHARED, "signals": {}},
    ],
    ids=lambda raw: str(list(raw))[:20],
)
def test_every_message_quotes_only_a_short_excerpt(raw):
    t0 = time.process_time()
    with pytest.raises(ConfigError) as info:
        validate(raw, [0, 1])
    assert len(str(info.value)) < 300 and "\n" not in str(info.value)
    assert time.process_time() - t0 < 1.0


def test_the_editor_reports_every_broken_signal_of_a_big_config_quickly():
    t0 = time.process_time()
    text = "".join(f"s{i}:\n  shard: {{axis: 0}}\n  backward: s{i + 1}\n" for i in range(1500))
    problems = CE.check_text(text, [0, 1]).problems
    assert [p.line for p in problems] == [1500 * 3]  # only the last names a missing signal
    over = "".join(f"s{i}: {{}}\n" for i in range(5000))
    assert [p.message for p in CE.check_text(over).problems] == [
        "a config holds at most 4096 signals, this one 5000"]  # fmt: skip
    assert time.process_time() - t0 < 2.0  # was quadratic: seconds, minutes at 4096
