"""The worker's heartbeat thread waits for the dispatcher's answer in steps, so a stopping worker
never waits a whole heartbeat period for it (closing a local cluster took 1.2 s when it did)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import zmq

from gt.runtime.worker.loop import Worker


def test_a_wait_for_an_answer_ends_soon_after_the_worker_stops():
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.bind("inproc://nobody-answers")
        w = SimpleNamespace(_stop=threading.Event())
        threading.Timer(0.05, w._stop.set).start()
        t0 = time.monotonic()
        assert Worker._poll_unless_stopped(w, sock, 30.0) is False
        assert time.monotonic() - t0 < 10.0  # (30 s without the steps)
    finally:
        sock.close(0)
        ctx.term()


def test_an_answer_is_seen_at_once():
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://answers")
        b.connect("inproc://answers")
        b.send(b"hb")
        w = SimpleNamespace(_stop=threading.Event())
        assert Worker._poll_unless_stopped(w, a, 30.0) is True
        assert a.recv() == b"hb"
    finally:
        a.close(0)
        b.close(0)
        ctx.term()
