"""gt.runtime.sockets.take: the next waiting message, or None, without raising."""

from __future__ import annotations

import zmq

from gt.runtime.sockets import take
from tests.helpers import wait_for


def test_take_returns_none_on_an_empty_socket_and_each_message_once_it_has_arrived():
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://take-test")
        b.connect("inproc://take-test")
        assert take(a) is None
        b.send_multipart([b"one", b"two"])
        b.send(b"three")
        got: list = []
        wait_for(lambda: (f := take(a)) is not None and got.append([x.bytes for x in f]) is None)
        wait_for(lambda: (f := take(a)) is not None and got.append([x.bytes for x in f]) is None)
        assert got == [[b"one", b"two"], [b"three"]]
        assert take(a) is None
    finally:
        a.close(0)
        b.close(0)
        ctx.term()
