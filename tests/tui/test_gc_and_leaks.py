"""The dashboard's garbage-collection pacing and its remedies for Textual's leaks."""

from __future__ import annotations

import asyncio
import gc

from helpers import HandClock
from textual.app import App
from textual.screen import Screen
from textual.widgets._footer import FooterKey

from gt.tui.gcpace import NEVER, IdlePacer
from gt.tui.textual_leaks import Footer, uncycle_strips, unpin_styles_caches


def test_pacer_collects_when_input_is_quiet_then_after_an_answer_then_regardless():
    clock, runs, quiet = HandClock(), [], []
    p = IdlePacer(every_s=2.0, idle_s=1.0, at_most_s=10.0, answer_s=0.15, late_s=5.0,
                  clock=clock, collect=lambda: (runs.append(round(clock.t, 2)),
                                                quiet.append(clock.t - p.last_input)),
                  freeze=lambda: None, unfreeze=lambda: None)  # fmt: skip
    clock.t += 1.0
    assert not p.tick()  # too soon after the last one
    clock.t += 1.5
    p.saw_input()
    assert not p.tick()  # due, but a key just came
    clock.t += 0.5
    assert not p.tick()  # half a second later the user may still be pressing keys
    clock.t += 0.5
    assert p.tick() and runs == [103.5]
    # Someone pressing a key every 0.5 s: never a quiet second; 10 s on, the collection runs
    # just after a key is answered, not at any moment (which may be just before the next key).
    for _ in range(30):
        clock.t += 0.1
        p.saw_input()
        for _ in range(4):  # repaints 0.1, 0.2, 0.3, 0.4 s after the key
            clock.t += 0.1
            p.tick()
    assert len(runs) == 2 and 113.5 <= runs[1] < 114.2
    assert 0.15 <= quiet[1] < 0.25  # after the answer, not late in the pause before the next key
    # Keys every 0.1 s (auto-repeat): no answer is ever left alone; at_most_s + late_s it runs.
    for _ in range(200):
        clock.t += 0.1
        p.saw_input()
        p.tick()
    assert len(runs) == 3 and abs(runs[2] - (runs[1] + 15.0)) < 0.11 and p.collections == 3


def test_an_overdue_collection_waits_for_the_next_answer_rather_than_run_late_in_a_pause():
    clock, runs = HandClock(), []
    p = IdlePacer(every_s=2.0, idle_s=1.0, at_most_s=10.0, answer_s=0.15, answer_window_s=0.1,
                  clock=clock, collect=lambda: runs.append(clock.t),
                  freeze=lambda: None, unfreeze=lambda: None)  # fmt: skip
    clock.t += 10.0
    p.saw_input()
    clock.t += 0.3  # the timer meant for 0.15 s after the key came late (a busy machine)
    assert not p.tick() and not runs  # the next key may be about to come
    clock.t += 0.2
    p.saw_input()
    clock.t += 0.15
    assert p.tick() and len(runs) == 1


def test_pacer_freezes_survivors_and_walks_everything_every_thaw_every_th_collection():
    clock, calls = HandClock(), []
    p = IdlePacer(every_s=1.0, idle_s=0.0, thaw_every=3, clock=clock,
                  collect=lambda: calls.append("collect"), freeze=lambda: calls.append("freeze"),
                  unfreeze=lambda: calls.append("unfreeze"))  # fmt: skip
    for _ in range(7):
        clock.t += 1.0
        assert p.tick()
    light, thaw = ["collect", "freeze"], ["unfreeze", "collect", "freeze"]
    # collections 3 and 6 (counting from 0) walk everything; 0 has nothing frozen yet
    assert calls == light * 3 + thaw + light * 2 + thaw
    assert p.froze
    p.uninstall()
    assert calls[-1] == "unfreeze" and not p.froze  # nothing is left frozen behind the app


def test_pacer_install_stops_full_collections_and_uninstall_restores_the_thresholds():
    before = gc.get_threshold()
    p = IdlePacer()
    try:
        p.install()
        p.install()  # idempotent: the saved thresholds stay the first ones
        assert gc.get_threshold() == (before[0], before[1], NEVER)
    finally:
        p.uninstall()
    assert gc.get_threshold() == before


class _Other(Screen):
    BINDINGS = [("x", "app.pop_screen", "back")]

    def compose(self):
        yield Footer()


class _Main(Screen):
    BINDINGS = [("a", "app.push_screen('other')", "other"), ("b", "app.bell", "bell")]

    def compose(self):
        yield Footer()


class _App(App):
    SCREENS = {"other": _Other}

    def on_mount(self) -> None:
        self.push_screen(_Main())


def _footer_keys() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is FooterKey)


def test_footer_leaves_no_key_widgets_behind_across_screen_changes():
    async def run() -> tuple[int, int]:
        app = _App()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            for _ in range(3):
                await pilot.press("a")
                await pilot.pause()
                await pilot.press("x")
                await pilot.pause()
            first = _footer_keys()
            for _ in range(15):
                await pilot.press("a")
                await pilot.pause()
                await pilot.press("x")
                await pilot.pause()
            return first, _footer_keys()

    first, after = asyncio.run(run())
    # Textual's own Footer kept every rebuilt key: 2+ more per screen change (15 pairs: 60+)
    assert after <= first + 4, (first, after)


class _Toggling(Screen):
    BINDINGS = [("a", "app.push_screen('other')", "other"), ("b", "ring", "ring")]
    bell_on = True

    def compose(self):
        yield Footer()

    def action_ring(self) -> None:
        self.app.bell()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # None: shown, but greyed out (False would hide the key)
        return None if action == "ring" and not self.bell_on else True


class _ToggleApp(App):
    SCREENS = {"other": _Other}
    ENABLE_COMMAND_PALETTE = False  # as in gt top: only the screen's own keys

    def on_mount(self) -> None:
        self.push_screen(_Toggling())


def test_footer_rebuilds_only_when_the_bindings_it_shows_change():
    async def run() -> tuple[bool, bool, bool]:
        app = _ToggleApp()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            footer = app.screen.query_one(Footer)
            keys = list(footer.query(FooterKey))
            for _ in range(3):  # shown again with the same bindings: the same key widgets
                await pilot.press("a")
                await pilot.pause()
                await pilot.press("x")
                await pilot.pause()
            kept = list(footer.query(FooterKey)) == keys and len(keys) == 2
            app.screen.bell_on = False  # a binding turns off: the footer must show it
            app.screen.refresh_bindings()
            await pilot.pause()
            await pilot.pause()
            after = list(footer.query(FooterKey))
            rebuilt = after != keys and [k.has_class("-disabled") for k in after] == [False, True]
            await pilot.press("a")
            await pilot.pause()
            return kept, rebuilt, [k.key for k in app.screen.query(FooterKey)] == ["x"]

    kept, rebuilt, other_drawn = asyncio.run(run())
    assert kept, "the footer rebuilt its keys although its bindings had not changed"
    assert rebuilt, "the footer kept showing a binding as enabled after it was turned off"
    assert other_drawn


def test_styles_cache_helper_caches_by_colour_not_by_instance():
    from textual._styles_cache import StylesCache
    from textual.color import Color

    assert unpin_styles_caches() and unpin_styles_caches()  # idempotent
    a, b = StylesCache(), StylesCache()
    base, bg = Color(10, 20, 30), Color(1, 2, 3, 0.5)
    inner, outer = a.get_inner_outer(base, bg)
    assert (inner, outer) == b.get_inner_outer(base, bg)
    assert outer.background == base and inner.background == base + bg
    import weakref

    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None  # the cache does not keep the widget's styles cache alive


def test_strips_cut_or_cropped_to_themselves_are_freed_without_the_cyclic_collector():
    from rich.segment import Segment
    from textual.strip import Strip

    def churn() -> int:
        gc.collect()
        gc.disable()
        try:
            for i in range(200):
                s = Strip([Segment("ab" * (i % 7 + 1)), Segment("cd")])
                n = s.cell_length
                assert s.divide([n]) == [s] and s.crop_extend(0, n, None) is s
                assert s.divide([1, n])[0].text == "a"  # other cuts still divide
                del s
            return gc.collect()  # what only the cyclic collector could free
        finally:
            gc.enable()

    assert uncycle_strips() and uncycle_strips()  # idempotent
    assert churn() < 50  # Textual's own methods left each strip in a cycle: 200 strips, 2,000+


def test_a_footer_rebuild_queued_before_its_screen_went_away_does_nothing():
    async def run() -> bool:
        app = _ToggleApp()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await app.push_screen(_Other())  # not installed: removed when popped
            await pilot.pause()
            footer = app.screen.query_one(Footer)
            await app.pop_screen()
            await pilot.pause()
            await footer.recompose()  # what a late bindings signal does (under load, CI saw it)
            return footer.is_attached

    assert asyncio.run(run()) is False
