"""The worker's inbox reads each queued message's header once, and loses none of them."""

from __future__ import annotations

import zmq

from gt.runtime import protocol as P
from gt.runtime.worker.loop import Worker


def _item(payload: bytes) -> list:
    return [[zmq.Frame(payload)], None, None]


def test_a_message_kind_without_fields_is_read_not_dropped():
    # Stop and Heartbeat have no fields: an empty tuple, which is falsy.
    for msg in (P.Stop(), P.Heartbeat()):
        item = _item(P.encode(msg))
        assert Worker._parsed(item) == msg
        assert Worker._parsed(item) == msg  # parsed once, kept


def test_a_malformed_header_reads_as_nothing():
    item = _item(b"\x00not msgpack")
    assert Worker._parsed(item) is None
    assert item[1] is False
