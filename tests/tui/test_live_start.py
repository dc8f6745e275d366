"""How a live monitor starts: subscribed before the snapshot, and the snapshot shown at once."""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from helpers import wait_for

from gt.runtime import protocol as P
from gt.trace import events as E
from gt.tui.sources import LiveSource

pytestmark = pytest.mark.timeout(60)


class LateBus:
    """A fake dispatcher whose event bus comes up ``delay`` seconds after its control endpoint.

    It answers ``snapshot`` with one worker, then emits a mark 50 ms later: an event after the
    snapshot, which a monitor must see. A monitor that asked for the snapshot before its
    subscription was up loses it (a PUB drops what no subscriber has asked for yet).
    """

    def __init__(self, where: str, delay: float = 0.3) -> None:
        self.ctx = zmq.Context()
        self.ctl = self.ctx.socket(zmq.ROUTER)
        self.ctl.setsockopt(zmq.LINGER, 0)
        self.ctl.bind(f"ipc://{where}/control")  # (ipc, as a local cluster: no keys needed)
        self.bus = f"ipc://{where}/events"
        self.pub: zmq.Socket | None = None
        self.delay = delay
        self.snapshots = 0
        self.endpoints = {"front": f"ipc://{where}/control", "control": f"ipc://{where}/control",
                          "events": self.bus}  # fmt: skip
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        start = time.monotonic()
        mark_at: float | None = None
        while not self.stop.is_set():
            if self.pub is None and time.monotonic() - start > self.delay:
                self.pub = self.ctx.socket(zmq.PUB)
                self.pub.setsockopt(zmq.LINGER, 0)
                self.pub.bind(self.bus)
            if mark_at is not None and time.monotonic() >= mark_at:
                mark_at = None
                if self.pub is not None:  # no bus yet: the event is lost, as a PUB would lose it
                    ev = E.event(E.MARK, time.monotonic_ns(), client=1, label="after the snapshot")
                    self.pub.send_multipart([E.TOPIC, E.pack_batch("client:1", 0, [ev])])
            if not self.ctl.poll(10):
                continue
            frames = self.ctl.recv_multipart()
            what = P.parse(frames[-1]).request
            payload: object = {"pid": 1, "uptime": 1.0}
            if what == "snapshot":
                self.snapshots += 1
                payload = {"uptime": 1.0, "clock": time.monotonic_ns(),
                           "workers": [{"id": 0, "alive": True, "device": "cpu"}], "clients": []}  # fmt: skip
                mark_at = time.monotonic() + 0.05
            self.ctl.send_multipart([*frames[:-1], P.encode(P.Reply(True, payload))])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for s in (self.ctl, self.pub):
            if s is not None:
                s.close(0)
        self.ctx.term()


def test_events_right_after_the_snapshot_are_not_lost(tmp_path):
    bus = LateBus(str(tmp_path), delay=0.3)
    src = LiveSource(bus.endpoints, hz=20, subscribe_s=5.0)
    src.start()
    try:
        assert src.ready.wait(10)
        assert src.subscribed.is_set()  # the snapshot was asked for once the subscription was up
        assert wait_for(
            lambda: any(m.label == "after the snapshot" for m in src.snapshot().marks), timeout=5
        )
        assert bus.snapshots == 1
    finally:
        src.stop()
        bus.close()


def test_an_events_endpoint_that_never_answers_does_not_keep_the_screen_empty(tmp_path):
    bus = LateBus(str(tmp_path), delay=1_000)  # the bus never comes up
    src = LiveSource(bus.endpoints, hz=20, subscribe_s=0.3)
    src.start()
    try:
        assert src.ready.wait(10)  # the snapshot is asked for anyway, after subscribe_s
        assert [w.id for w in src.snapshot().workers] == [0]
    finally:
        src.stop()
        bus.close()


def test_the_snapshot_is_shown_at_once_not_at_the_next_period(cluster):
    src = LiveSource(cluster.endpoints, hz=0.5)  # a new state only every 2 s otherwise
    updates: list[float] = []
    src.on_update = lambda: updates.append(time.monotonic())
    src.start()
    try:
        assert src.ready.wait(10)
        # ready means: the snapshot's state is already what the UI reads
        assert [w.id for w in src.snapshot().workers] == [0, 1]
        assert updates, "the app was not told to draw the snapshot"
    finally:
        src.stop()
