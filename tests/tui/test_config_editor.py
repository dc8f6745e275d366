"""The shard-config editor: pure checks with lines, and Pilot against a real dispatcher."""

from __future__ import annotations

import os
import threading

import pytest
from pilot_wait import wait_async

import gt
from gt.runtime.control import ConfigControl, is_remote, request
from gt.runtime.sharding import config_text as CE
from gt.tui import config_view as CV
from gt.tui.app import make_app
from gt.tui.sample import T_END, sample_batches
from gt.tui.screens import ConfigScreen, TopScreen
from gt.tui.sources import ListSource, LiveSource
from gt.tui.widgets.yaml_area import YamlArea

pytestmark = pytest.mark.timeout(90)
SIZE = (140, 45)


# ---------------------------------------------------------------------- pure
def test_every_problem_has_its_line():
    text = ("layer1:\n  shard: {axis: 0, workers: [0, 5]}\nlayer2:\n  replicate: {workers: [0, 1]}\n"
            "  shrad: 3\nlayer3:\n  shard: {axis: 12}\n")  # fmt: skip
    problems = CE.check_text(text, [0, 1]).problems
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [
        (2, "layer1.shard.workers"), (5, "layer2"), (7, "layer3.shard.axis")]  # fmt: skip
    assert "worker 5 does not exist" in problems[0].message
    assert "out of range" in problems[2].message


def test_broken_yaml_points_at_its_line_and_is_not_applicable():
    checked = CE.check_text("a:\n  shard: {axis: 0\nb: 1\n", [0])
    assert not checked.ok and checked.problems[0].line in (2, 3)
    assert checked.problems[0].message.startswith("YAML:")


def test_text_round_trip_and_diff():
    cfg = {"rows": {"shard": {"axis": 0, "workers": [0, 1]}}, "auto_shard": True}
    text = CE.to_text(cfg)
    assert CE.check_text(text, [0, 1]).ok
    assert CE.normal_yaml(CE.check_text(text).normal) == {"rows": {"shard": {"axis": 0, "workers": [0, 1]}},
                                                        "auto_shard": True}  # fmt: skip
    diff = CV.diff_text(CE.to_text({}), text).plain
    assert "+rows:" in diff and "+  shard: {axis: 0, workers: [0, 1]}" in diff


def test_highlighting_names_keys_numbers_and_comments():
    spans = CE.highlight_spans("a:  # note\n  shard: {axis: 3}\n")
    names = {(row, name) for row, *_x, name in spans}
    assert {(0, "yaml.field"), (0, "comment"), (1, "yaml.field"), (1, "number")} <= names


def test_remote_dispatchers_need_credentials():
    assert not is_remote("ipc:///tmp/x") and not is_remote("tcp://127.0.0.1:5555")
    assert is_remote("tcp://10.255.255.1:5555")
    ctl = ConfigControl("tcp://10.255.255.1:5555", token="")
    assert "credentials" in ctl.refusal()
    assert ConfigControl("tcp://10.255.255.1:5555", token="s3cret").refusal() is None


# ---------------------------------------------------------------------- Pilot, no dispatcher
async def test_config_screen_in_a_recording_is_read_only_with_history():
    app = make_app(ListSource(sample_batches(), now_ns=T_END, address="sample"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ConfigScreen) and screen.readonly
        assert "layer1" in screen.text and len(screen.history) == 1
        assert screen.check_action("apply", ()) is False
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, TopScreen)


# ---------------------------------------------------------------------- Pilot, a real dispatcher
async def test_invalid_yaml_shows_errors_and_cannot_be_applied(cluster):
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10)
    async with app.run_test(size=SIZE) as pilot:
        assert src.ready.wait(10)
        await pilot.press("c")
        screen = app.screen
        await wait_async(pilot, lambda: screen.worker_ids == [0, 1])
        before = request(cluster.endpoints["control"], "config_get")
        screen.load("rows:\n  shard: {axis: 0, workers: [0, 7]}\ncols: [\n")
        await pilot.pause()
        assert not screen.checked.ok
        problems = str(screen.query_one("#problems").render())
        assert "✗" in problems and "line" in problems
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
        assert screen.last_result is None  # nothing was sent
        assert request(cluster.endpoints["control"], "config_get") == before
        screen.load("rows:\n  shard: {axis: 0, workers: [0, 7]}\n")  # valid YAML, unknown worker
        await pilot.pause()
        assert [p.line for p in screen.checked.problems] == [2]
        assert "worker 7 does not exist" in screen.checked.problems[0].message
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
        assert screen.last_result is None


async def test_a_valid_change_is_applied_and_the_next_instructions_follow_it(cluster):
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10)
    conn = gt.connect(cluster.address, timeout=30)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert src.ready.wait(10)
            await pilot.press("c")
            screen = app.screen
            await wait_async(pilot, lambda: screen.worker_ids == [0, 1])
            editor = screen.query_one("#editor")
            editor.load_text("")
            editor.focus()
            await pilot.press(*"stage:", "enter", *"  workers: [1]", "enter")
            await pilot.pause()
            assert screen.checked.ok, screen.checked.problems
            assert "+  workers: [1]" in str(screen.query_one("#diff").render())
            await pilot.press("ctrl+s")
            await wait_async(pilot, lambda: screen.last_result is not None)
            assert screen.last_result == "applied"
            with gt.signal.context("stage"):
                x = gt.arange(12).reshape(3, 4) * 2
            gt.sync()
            layouts = request(cluster.address, "placement")[conn.client_no]
            assert layouts[x.id] == "local(1)"  # the next instructions ran where the config says
            # the change comes back as a config event: in the history and on the timeline
            await wait_async(pilot, lambda: len(screen.history) >= 1)
            assert screen.history[-1].by == "gt top"
            assert screen.history[-1].after == {"stage": {"workers": [1]}}
            # revert: back to what was in force before
            await pilot.press("ctrl+t")
            await wait_async(pilot, lambda: len(screen.history) >= 2)
            assert request(cluster.endpoints["control"], "config_get")["signals"] == {}
            await pilot.press("escape")
            await wait_async(
                pilot, lambda: "▼config" in str(app.screen.query_one("TimelineView").render())
            )
    finally:
        gt.disconnect()
        del conn


async def test_readonly_monitor_cannot_apply(cluster):
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10, readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert screen.readonly and screen.query_one("#editor").read_only
        assert screen.check_action("apply", ()) is False


def test_gt_config_show_validate_apply(cluster, tmp_path, capsys):
    from gt.cli import main as gt_main

    def main(argv: list[str]) -> int:
        return gt_main(["config", *argv])

    good = tmp_path / "good.yaml"
    good.write_text("rows:\n  shard: {axis: 0}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rows:\n  shard: {axis: 0, workers: [3]}\n")
    addr = ["--connect", cluster.address]
    assert main(["validate", str(bad), *addr]) == 1
    assert f"{bad}:2: rows.shard.workers: worker 3 does not exist" in capsys.readouterr().err
    assert main(["validate", str(good), *addr]) == 0
    assert main(["apply", str(good), *addr]) == 0
    assert "applied" in capsys.readouterr().out
    assert main(["show", *addr]) == 0
    assert "rows:\n  shard: {axis: 0, workers: all}" in capsys.readouterr().out
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    assert main(["apply", str(empty), *addr]) == 0
    assert (
        main(["validate", str(bad), "--offline"]) == 0
    )  # the schema alone cannot know the workers


# ---------------------------------------------------------------------- honest checks and edits
def problems_of(screen) -> str:
    return str(screen.query_one("#problems").render())


def diff_of(screen) -> str:
    return str(screen.query_one("#diff").render())


async def test_checks_do_not_say_valid_before_the_dispatcher_said_what_runs(cluster, monkeypatch):
    release = threading.Event()
    real_get = ConfigControl.get

    def slow_get(self):  # a dispatcher that takes its time to answer
        release.wait(10)
        return real_get(self)

    monkeypatch.setattr(ConfigControl, "get", slow_get)
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10)
    async with app.run_test(size=SIZE) as pilot:
        assert src.ready.wait(10)
        await pilot.press("c")
        screen = app.screen
        await pilot.pause()
        assert screen.loading
        assert "valid" not in problems_of(screen) and "asking the dispatcher" in problems_of(screen)
        await pilot.press("ctrl+s")  # nothing is applied against an unknown running config
        await pilot.pause()
        assert screen.last_result is None
        release.set()
        await wait_async(pilot, lambda: "✓ valid" in problems_of(screen))
        assert not screen.loading


async def test_applying_says_so_until_the_answer_and_then_the_diff_is_empty(cluster, monkeypatch):
    release = threading.Event()
    real_apply = ConfigControl.apply

    def slow_apply(self, raw):
        release.wait(10)
        return real_apply(self, raw)

    monkeypatch.setattr(ConfigControl, "apply", slow_apply)
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert src.ready.wait(10)
            await pilot.press("c")
            screen = app.screen
            await wait_async(pilot, lambda: not screen.loading and screen.worker_ids == [0, 1])
            # written shorter than the dispatcher's normal form ("workers: all" is implied)
            screen.load("rows:\n  shard: {axis: 0}\n")
            await pilot.pause()
            assert "+rows:" in diff_of(screen)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "applying" in problems_of(screen) and "valid" not in problems_of(screen)
            release.set()
            await wait_async(pilot, lambda: screen.last_result is not None)
            assert screen.last_result == "applied"
            assert "no changes" in diff_of(screen)  # what the editor holds now runs
            assert "✓ valid" in problems_of(screen)
            assert screen.text == "rows:\n  shard: {axis: 0}\n"  # the user's text stays as written
    finally:
        request(cluster.endpoints["control"], "config_apply", {"config": {}, "by": "test"})


async def test_leaving_the_editor_keeps_unsaved_edits_for_next_time(cluster):
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10)
    async with app.run_test(size=SIZE) as pilot:
        assert src.ready.wait(10)
        await pilot.press("c")
        screen = app.screen
        await wait_async(pilot, lambda: not screen.loading)
        edit = "stage:\n  workers: [1]\n"
        screen.load(edit)
        await pilot.pause()
        assert isinstance(app.focused, YamlArea)  # typing in it: one escape goes back all the same
        await pilot.press("escape")
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        await pilot.press("c")
        screen = app.screen
        await wait_async(pilot, lambda: isinstance(screen, ConfigScreen) and not screen.loading)
        assert screen.text == edit  # nothing was dropped silently
        await pilot.press("ctrl+r")  # the running config instead: now the draft is gone
        await pilot.pause()
        assert screen.text == screen.running_text
        await pilot.press("escape")
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        assert app.config_draft is None


async def test_the_editor_does_not_apply_to_another_users_dispatcher(cluster, monkeypatch):
    me = os.getuid()
    monkeypatch.setattr(CV.os, "getuid", lambda: me + 1)  # as if we were someone else
    src = LiveSource(cluster.endpoints, hz=10)
    app = make_app(src, hz=10)
    async with app.run_test(size=SIZE) as pilot:
        assert src.ready.wait(10)
        await pilot.press("c")
        screen = app.screen
        await wait_async(pilot, lambda: not screen.loading)
        assert screen.owner_refusal and "not by you" in screen.owner_refusal
        before = request(cluster.endpoints["control"], "config_get")
        screen.load("rows:\n  shard: {axis: 0}\n")
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        assert screen.last_result is None
        assert request(cluster.endpoints["control"], "config_get") == before


async def test_the_yaml_editor_takes_each_key_once_and_gives_escape_to_its_screen():
    from textual.app import App
    from textual.screen import Screen

    class Editing(Screen):
        left = False

        def compose(self):
            yield YamlArea("", id="editor")

        def action_back(self) -> None:
            self.left = True

    app = App()
    async with app.run_test() as pilot:
        screen = Editing()
        await app.push_screen(screen)
        screen.query_one(YamlArea).focus()
        await pilot.press("a", "b", "tab", "c", "escape")
        assert screen.query_one(YamlArea).text == "ab  c" and screen.left
