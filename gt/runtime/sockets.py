"""Small helpers for the runtime's ZeroMQ sockets."""

from __future__ import annotations

from typing import Any

import zmq

_EVENTS, _POLLIN, _NOBLOCK = zmq.EVENTS, zmq.POLLIN, zmq.NOBLOCK


def take(sock: zmq.Socket) -> Any:
    """The next message waiting on ``sock`` (frames, not copied), or ``None`` if there is none.

    Asks the socket first instead of letting a non-blocking receive raise ``zmq.Again``: the
    poll loops end every drain with an empty socket, and building that exception costs about
    twice as much as the question (measured: 7-8 µs against 4-5 µs in pyzmq 27).
    """
    if not sock.get(_EVENTS) & _POLLIN:
        return None
    try:
        return sock.recv_multipart(_NOBLOCK, copy=False)
    except zmq.Again:  # (another reader took it, or the socket changed its mind)
        return None
