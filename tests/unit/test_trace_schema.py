"""The event schema: batches round-trip through msgpack and malformed ones are rejected."""

from __future__ import annotations

import msgpack
import pytest

from gt.trace import events as E


def test_pack_unpack_round_trip_keeps_every_field():
    evs = [
        E.event(
            E.EXEC,
            10,
            worker=0,
            client=1,
            batch=2,
            t0=1,
            t1=9,
            n=2,
            ops=[3, 4],
            outs=[5, 6],
            srcs=[1, 1],
            durs=[4, 4],
            hot=False,
            queue=0,
            errors=0,
        ),
        E.event(E.MARK, 11, client=1, label="epoch 3"),
        E.event(E.SRCLOC, 12, client=1, locs={1: "train.py:10"}),
    ]
    assert E.unpack_batch(E.pack_batch("worker:0", 7, evs)) == ("worker:0", 7, evs)


def test_unpack_keeps_integer_map_keys():
    _, _, evs = E.unpack_batch(E.pack_batch("client:1", 0, [E.event(E.QUEUED, 1, ops={3: 2})]))
    assert evs[0][2]["ops"] == {3: 2}


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1 not msgpack",
        msgpack.packb({"source": "x"}),
        msgpack.packb(["x", 0]),
        msgpack.packb([1, 0, []]),
        msgpack.packb(["x", "0", []]),
        msgpack.packb(["x", 0, [["mark", 1]]]),
        msgpack.packb(["x", 0, [["mark", "1", {}]]]),
        msgpack.packb(["x", 0, [[1, 1, {}]]]),
    ],
)
def test_unpack_rejects_malformed_batches(data):
    with pytest.raises(E.EventFormatError):
        E.unpack_batch(data)


def test_event_builds_kind_time_fields():
    assert E.event(E.MARK, 5, client=1, label="x") == ["mark", 5, {"client": 1, "label": "x"}]


def test_every_kind_lists_its_fields():
    assert set(E.KINDS) == set(E.FIELDS)
    assert E.SPAN_KINDS <= set(E.KINDS)
    assert all("t0" in E.FIELDS[k] and "t1" in E.FIELDS[k] for k in E.SPAN_KINDS)


def test_a_clients_batch_is_published_only_when_every_event_is_that_clients_own():
    mine = [[E.MARK, 5, {"client": 3, "label": "x"}], [E.QUEUED, 6, {"client": 3, "n": 1}]]
    E.check_client_batch(E.pack_batch("client:3", 0, mine), 3)  # its own: fine
    refused = [
        E.pack_batch("worker:0", 0, mine),  # another source
        E.pack_batch("client:4", 0, mine),  # another tenant's name
        E.pack_batch("client:3", 0, [[E.MARK, 5, {"client": 4, "label": "x"}]]),  # another's mark
        E.pack_batch("client:3", 0, [[E.MARK, 5, {"label": "x"}]]),  # nobody's
        E.pack_batch("client:3", 0, [[E.MEMORY, 5, {"client": 3, "used": 1}]]),  # a worker's kind
        E.pack_batch(
            "client:3", 0, [[E.MARK, 5, {"client": 3, "label": "x" * E.MAX_CLIENT_BATCH}]]
        ),
        b"\x93garbage",
    ]
    for batch in refused:
        with pytest.raises(E.EventFormatError):
            E.check_client_batch(batch, 3)
