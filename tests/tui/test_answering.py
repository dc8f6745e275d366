"""What makes ``gt top`` answer a key at once on a busy machine: the collector stands aside, the
help screen is not restyled, and frames reach the terminal from the thread that drew them."""

from __future__ import annotations

import fcntl
import io
import os
import threading
import time

import pytest
from pilot_wait import wait_async
from rich.console import Console
from textual.app import App

from gt.trace import events as E
from gt.tui.app import GTApp, make_app
from gt.tui.direct_driver import Backlog, DirectWriteDriver, open_nonblocking
from gt.tui.sample import T_END, sample_batches
from gt.tui.screens import HelpScreen, TopScreen, WorkerScreen
from gt.tui.sources import ListSource, LiveSource, _Collector

pytestmark = pytest.mark.timeout(60)


class _Frame:
    def __init__(self, data: bytes) -> None:
        self.buffer = memoryview(data)


class _QueuedSub:
    """Stands in for the collector's SUB socket: hands out queued event batches."""

    def __init__(self, batches: list[bytes]) -> None:
        self.batches = list(batches)

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> list[_Frame]:
        import zmq

        if not self.batches:
            raise zmq.Again()
        return [_Frame(E.TOPIC), _Frame(self.batches.pop(0))]


def _text(renderable) -> str:
    console = Console(width=140, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _collector_with(batches: list[bytes]) -> tuple[LiveSource, _Collector]:
    src = LiveSource({"events": "ipc:///nonexistent", "control": "ipc:///nonexistent"})
    col = _Collector.__new__(_Collector)  # no sockets: only the drain is under test
    col.src, col.sub, col.last_event = src, _QueuedSub(batches), 0.0
    return src, col


def test_the_collector_leaves_events_in_the_socket_once_a_key_asks_it_to_give_way():
    batches = [E.pack_batch("worker:0", i, [E.event("mark", 1_000 + i, label=f"m{i}")])
               for i in range(100)]  # fmt: skip
    src, col = _collector_with(batches)
    src.give_way_until = time.monotonic() + 60  # a key came while the batches queued up
    col._drain_events()
    assert src.received == 15 and len(col.sub.batches) == 85  # stopped early: nothing lost
    src.give_way_until = 0.0  # answered
    col._drain_events()
    assert src.received == 100 and not col.sub.batches


def test_the_collector_waits_while_the_app_answers_and_not_longer():
    src, col = _collector_with([])
    t0 = time.monotonic()
    col._give_way()
    assert time.monotonic() - t0 < 0.05  # nobody asked
    src.give_way(0.1)
    col._give_way()
    assert time.monotonic() - t0 >= 0.09


def _reader(fd: int, out: bytearray, start: threading.Event) -> threading.Thread:
    def run() -> None:
        start.wait(10)
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            out.extend(chunk)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_the_backlog_writes_at_once_while_the_reader_keeps_up_and_queues_in_order_otherwise():
    r, w = os.pipe()
    os.set_blocking(w, False)
    got, start = bytearray(), threading.Event()
    reader = _reader(r, got, start)
    backlog = Backlog(w, limit=1 << 30)
    try:
        backlog.write(b"first ")
        assert backlog.direct == 1 and backlog.queued == 0
        chunks = [bytes([65 + i % 26]) * 10_000 for i in range(40)]  # 400 kB: over a pipe's 64 kB
        for c in chunks:
            backlog.write(c)  # never blocks: the rest waits in the backlog
        assert backlog.queued > 0
        start.set()  # the terminal starts reading
        assert backlog.drain(10)
        backlog.write(b" last")
        assert backlog.drain(10)
    finally:
        backlog.close()  # closes w: the reader sees the end
    reader.join(10)
    assert bytes(got) == b"first " + b"".join(chunks) + b" last"


def test_the_backlog_holds_the_writer_back_past_its_limit_until_the_terminal_reads():
    r, w = os.pipe()
    os.set_blocking(w, False)
    got, start = bytearray(), threading.Event()
    reader = _reader(r, got, start)
    backlog = Backlog(w, limit=100_000)
    done = threading.Event()

    def write_a_lot() -> None:
        for i in range(30):
            backlog.write(bytes([48 + i % 10]) * 20_000)
        done.set()

    writer = threading.Thread(target=write_a_lot, daemon=True)
    writer.start()
    try:
        time.sleep(0.2)  # long enough to queue far past the limit if nothing held it back
        assert not done.is_set() and backlog.queued <= 100_000 + 20_000
        start.set()
        assert done.wait(10) and backlog.drain(10)
    finally:
        backlog.close()
    reader.join(10)
    assert bytes(got) == b"".join(bytes([48 + i % 10]) * 20_000 for i in range(30))


def test_a_terminal_that_hung_up_drops_frames_instead_of_failing_the_app():
    r, w = os.pipe()
    os.set_blocking(w, False)
    os.close(r)  # nobody reads any more: writes fail with EPIPE
    backlog = Backlog(w)
    try:
        backlog.write(b"a frame")
        backlog.write(b"the next one")
        assert backlog.gone and backlog.queued == 0
    finally:
        backlog.close()


def test_the_terminal_gets_a_non_blocking_descriptor_of_its_own_and_a_file_none():
    master, slave = os.openpty()
    try:
        fd = open_nonblocking(slave)
        assert fd is not None and fd != slave
        try:
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
            assert not fcntl.fcntl(slave, fcntl.F_GETFL) & os.O_NONBLOCK  # the shell's stays
            os.write(fd, b"hello")
            assert os.read(master, 100).endswith(b"hello")
        finally:
            os.close(fd)
    finally:
        os.close(master)
        os.close(slave)
    r, w = os.pipe()
    try:
        assert open_nonblocking(w) is None  # not a terminal: Textual's writer thread as before
    finally:
        os.close(r)
        os.close(w)


def test_gt_top_draws_with_the_direct_driver_where_textual_would_use_linux_driver(monkeypatch):
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    app = make_app(ListSource(sample_batches(), now_ns=T_END, address="sample"))
    assert isinstance(app, GTApp)
    if App().get_driver_class().__name__ == "LinuxDriver":
        assert app.get_driver_class() is DirectWriteDriver


async def test_help_is_restyled_when_shown_again_only_if_the_theme_changed(monkeypatch):
    app = make_app(ListSource(sample_batches(), now_ns=T_END, address="sample"))
    restyled: list[object] = []
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        real = type(app).update_styles

        def spy(self, node=None, animate=True):
            restyled.append(node)
            return real(self, node, animate=animate)

        monkeypatch.setattr(type(app), "update_styles", spy)
        for _ in range(3):
            await pilot.press("escape")
            await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
            await pilot.press("question_mark")
            await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert help_screen not in restyled  # its rendered lines were kept
        await pilot.press("escape")
        await wait_async(pilot, lambda: isinstance(app.screen, TopScreen))
        await pilot.press("t")  # another theme while the help is hidden
        await pilot.pause()
        await pilot.press("question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert help_screen in restyled
        box = app.screen.query_one("#help-box")
        assert box.styles.background == app.current_theme.to_color_system().surface


async def test_help_opens_at_its_top_again_after_it_was_scrolled():
    app = make_app(ListSource(sample_batches(), now_ns=T_END, address="sample"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        box = app.screen.query_one("#help-box")
        await pilot.press("end")
        await wait_async(pilot, lambda: box.scroll_y > 0)
        await pilot.press("escape", "question_mark")
        await wait_async(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        assert box.scroll_y == 0 and box.has_focus


async def test_worker_detail_is_made_once_and_shown_again_for_whichever_worker():
    app = make_app(ListSource(sample_batches(), now_ns=T_END, address="sample"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("down", "enter")  # the cursor on w1
        await wait_async(pilot, lambda: isinstance(app.screen, WorkerScreen))
        first = app.screen
        assert first.wid == 1 and "worker 1" in _text(first.body)
        await pilot.press("escape", "up", "enter")  # now w0
        await wait_async(pilot, lambda: isinstance(app.screen, WorkerScreen))
        await pilot.pause()
        assert app.screen is first and first.wid == 0
        assert "worker 0" in _text(first.body)
