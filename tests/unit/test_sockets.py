"""gt.runtime.sockets: take (the next waiting message, or None, without raising) and send_parts
(one multipart message through pyzmq's compiled send, small frames copied)."""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from gt.runtime.sockets import COPY_BELOW, send_parts, take
from tests.helpers import wait_for


@pytest.fixture
def pair():
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    a.bind("inproc://sockets-test")
    b.connect("inproc://sockets-test")
    try:
        yield a, b
    finally:
        a.close(0)
        b.close(0)
        ctx.term()


def _next(sock: zmq.Socket) -> list:
    got: list = []
    wait_for(lambda: (f := take(sock)) is not None and got.extend(f) is None)
    return got


def test_take_returns_none_on_an_empty_socket_and_each_message_once_it_has_arrived(pair):
    a, b = pair
    assert take(a) is None
    b.send_multipart([b"one", b"two"])
    b.send(b"three")
    assert [f.bytes for f in _next(a)] == [b"one", b"two"]
    assert [f.bytes for f in _next(a)] == [b"three"]
    assert take(a) is None


def test_take_ready_receives_a_message_a_poll_reported_without_asking_again(pair):
    a, b = pair
    b.send_multipart([b"x", b"y", b"z"])
    assert a.poll(5000) == zmq.POLLIN
    assert [f.bytes for f in take(a, ready=True)] == [b"x", b"y", b"z"]
    assert take(a, ready=True) is None  # a wrong "ready" still returns None, not zmq.Again


def test_send_parts_sends_one_multipart_message_of_every_kind_of_part(pair):
    a, b = pair
    big = np.arange(COPY_BELOW, dtype=np.float32)  # 4x the threshold: sent without a copy
    send_parts(b, [b"hdr", memoryview(b"small"), bytearray(b"ba"), memoryview(big).cast("B"), b""])
    got = _next(a)
    assert [len(f.bytes) for f in got] == [3, 5, 2, big.nbytes, 0]
    assert np.array_equal(np.frombuffer(got[3].buffer, dtype=np.float32), big)
    send_parts(a, got[:2])  # received frames are forwarded as they are
    assert [f.bytes for f in _next(b)] == [b"hdr", b"small"]


def test_send_parts_copies_a_small_buffer_so_later_changes_do_not_travel(pair):
    a, b = pair
    arr = np.zeros(4, dtype=np.float32)
    send_parts(b, [memoryview(arr).cast("B")])
    arr[:] = 7.0
    (frame,) = _next(a)
    assert np.frombuffer(frame.buffer, dtype=np.float32).tolist() == [0.0] * 4


def test_send_parts_with_noblock_raises_again_when_the_peer_cannot_take_it(pair):
    a, b = pair
    b.setsockopt(zmq.SNDHWM, 1)
    with pytest.raises(zmq.Again):
        for _ in range(100_000):  # inproc queues up to the peer's HWM, then refuses
            send_parts(b, [b"x"], zmq.NOBLOCK)
