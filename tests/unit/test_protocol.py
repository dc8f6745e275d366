"""The wire protocol: every message kind round-trips, and every malformed shape is refused."""

from __future__ import annotations

import msgpack
import pytest

from gt.runtime import ops as O
from gt.runtime import protocol as P

ERR = ["ValueError: boom", 9, 3]

#: One well-formed message of every kind.
SAMPLES = {
    P.Hello: P.Hello(41, "host-a", ["train.py", "--lr", "0.1"], b"\x01" * 16),
    P.Welcome: P.Welcome(3, 0, [{"id": 0, "host": "h", "data": "tcp://x:1"}], {"heartbeat": 1.0}),
    P.Batch: P.Batch(7, 2, [[1, "a.py:3"]], [[1, "layer1", None, False]]),
    P.Run: P.Run(3, 7, 2, b"\x02" * 16, True, "alice", True),
    P.Done: P.Done(3, 7, [ERR], 2, 12_345, True, True),
    P.Ack: P.Ack(7, [ERR], True),
    P.Data: P.Data(5, "float32", [2, 3], None, 7),
    P.Relay: P.Relay(3, 5, None, None, ERR, 7),
    P.Heartbeat: P.Heartbeat(),
    P.Bye: P.Bye(),
    P.Error: P.Error(P.E_WORKER_LOST, "worker 0 died"),
    P.Register: P.Register(
        "host-b",
        99,
        "cuda:0 NVIDIA H200",
        "cupy",
        "tcp://127.0.0.1:5",
        b"id/hb",
        {"index": 0, "uuid": "8f3a0000-0000-0000-0000-000000000001"},
        b"d" * 40,
    ),
    P.Registered: P.Registered(0, {"heartbeat": 0.5}),
    P.DropClient: P.DropClient(3),
    P.Stop: P.Stop(),
    P.Upload: P.Upload(12),
    P.Control: P.Control("stats", {"x": 1}),
    P.Reply: P.Reply(True, {"uptime": 1.5}),
    P.Stats: P.Stats({"tensors": 4}),
    P.Peers: P.Peers({0: "tcp://127.0.0.1:1", 1: "tcp://127.0.0.1:2"}, {0: b"k" * 40}),
    P.Peer: P.Peer(3, 1, 0, "float64", [4], None),
    P.Configure: P.Configure({"memory_limit": 1000000, "spill_threshold": 0.8}),
    P.Events: P.Events(),
    P.Known: P.Known(3),
    P.Route: P.Route(True),
    P.SourceLines: P.SourceLines([[1, "train.py:12"]]),
    P.Ran: P.Ran(3, 40, 80, 1, 2),
}

#: A wrong value for every field of every kind (the protocol must refuse each one).
WRONG = {
    "pid": "41", "host": 5, "argv": ["ok", 3], "token": "not bytes", "client": "3", "home": 0.5,
    "workers": {"not": "a list"}, "settings": [], "seq": True, "n": None,
    "srclocs": [[1, 2]], "signals": [[1, "x", None, "no"]], "errors": [["msg", 1]],
    "exec_ns": 1.5, "req": "5", "dtype": "object", "shape": [-1], "error": ["msg"],
    "code": 7, "message": b"bytes", "device": None, "backend": 1, "data": None, "hb": "str",
    "worker": "0", "tok": [1], "request": 5, "ok": 1, "stats": [], "endpoints": {"0": "x"},
    "tag": 1.0, "step": None, "args": object(), "payload": object(), "planned": 1, "dropped": 0,
    "gpu": [0], "memory": [1], "data_key": b"short", "keys": {0: b"not 40 bytes"},
    "tenant": "x" * 33, "ack": "7", "acked": 1, "told": 0, "direct": 1, "batches": -1,
}  # fmt: skip
#: Where one kind reads a field name as another type (a count, not a flag).
WRONG_FOR = {(P.Ran, "dropped"): -2, (P.Ran, "errors"): True}


def test_every_kind_has_a_sample():
    assert set(SAMPLES) == set(P.KINDS)


@pytest.mark.parametrize("kind", P.KINDS, ids=lambda k: k.__name__)
def test_every_kind_round_trips(kind):
    msg = SAMPLES[kind]
    back = P.parse(P.encode(msg))
    assert type(back) is kind and back == msg


@pytest.mark.parametrize(
    ("kind", "field"),
    [(k, f) for k in P.KINDS for f in k._fields if f not in ("args", "payload")],
    ids=lambda x: x if isinstance(x, str) else x.__name__,
)
def test_a_wrong_field_type_is_refused_naming_the_field(kind, field):
    values = list(SAMPLES[kind])
    values[kind._fields.index(field)] = WRONG_FOR.get((kind, field), WRONG[field])
    frame = msgpack.packb([P.VERSION, kind.KIND, *values], use_bin_type=True)
    with pytest.raises(P.ProtocolError, match=f"{kind.__name__}.{field}"):
        P.parse(frame)


@pytest.mark.parametrize("kind", [k for k in P.KINDS if k._fields], ids=lambda k: k.__name__)
def test_missing_and_extra_fields_are_refused(kind):
    values = list(SAMPLES[kind])
    short = msgpack.packb([P.VERSION, kind.KIND, *values[: kind._required - 1]])
    if kind._required:
        with pytest.raises(P.ProtocolError, match="fields"):
            P.parse(short)
    with pytest.raises(P.ProtocolError, match="fields"):
        P.parse(msgpack.packb([P.VERSION, kind.KIND, *values, 0, 0], use_bin_type=True))


def test_optional_trailing_fields_take_their_defaults():
    msg = P.parse(msgpack.packb([P.VERSION, P.Batch.KIND, 7, 3]))
    assert msg == P.Batch(7, 3, None, None)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\xc1",  # reserved msgpack byte
        b"garbage that is not msgpack \xff\xfe",
        msgpack.packb({"not": "a list"}),
        msgpack.packb([P.VERSION]),
        msgpack.packb([P.VERSION + 1, P.Heartbeat.KIND]),
        msgpack.packb([True, P.Heartbeat.KIND]),  # a bool is not version 1 or 2
        msgpack.packb([str(P.VERSION), P.Heartbeat.KIND]),
        msgpack.packb([P.VERSION, 999]),
        msgpack.packb([P.VERSION, [P.Heartbeat.KIND]]),  # a list where the kind goes
        msgpack.packb([P.VERSION, "HELLO"]),
        msgpack.packb([P.VERSION, P.Batch.KIND]),  # too few fields
    ],
)
def test_malformed_headers_raise_protocol_error(frame):
    with pytest.raises(P.ProtocolError):
        P.parse(frame)


def test_error_messages_quote_only_an_excerpt_of_a_bad_value():
    frame = msgpack.packb([P.VERSION, P.Upload.KIND, "x" * 100_000])
    with pytest.raises(P.ProtocolError) as info:
        P.parse(frame)
    assert len(str(info.value)) < 200


def test_body_round_trip_keeps_frees_and_positions():
    ins = [O.OPCODE["add"], 5, [1, 2.0], None, 3]
    instrs, frees, free_at = P.parse_body(P.encode_body([ins], [4], [1]))
    assert instrs == [ins] and frees == [4] and free_at == [1]
    assert P.parse_body(P.encode_body([ins], [])) == ([ins], [], None)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x01",
        msgpack.packb([1, 2, 3]),
        msgpack.packb([[], 5]),
        msgpack.packb("x"),
        msgpack.packb([[], ["not an id"]]),
        msgpack.packb([[], [1, 2], [0]]),  # one position per free
        msgpack.packb([[], [1], ["0"]]),
        msgpack.packb([[], [1], [-1]]),
    ],
)
def test_malformed_bodies_raise_protocol_error(body):
    with pytest.raises(P.ProtocolError):
        P.parse_body(body)


def test_instructions_are_checked_field_by_field():
    good = [O.OPCODE["add"], 5, [1, 2.0], None, 3]
    assert P.check_instruction(good) == tuple(good)
    for bad in (None, [1, 2, 3], ["add", 5, [], None, 3], [1, 5, (1,), None, 3],
                [1, 5, [], [], 3], [1, 5, [], None, "a.py"], [1, 5, [], None, 3, 4, 5]):  # fmt: skip
        with pytest.raises(P.ProtocolError):
            P.check_instruction(bad)


def test_no_extension_types_are_decoded():
    # msgpack ext types (code-carrying in some serializers) must never become objects.
    frame = msgpack.packb([P.VERSION, P.Control.KIND, "x", msgpack.ExtType(1, b"payload")])
    msg = P.parse(frame)
    assert isinstance(msg.args, msgpack.ExtType)  # inert data, never executed


def test_dtype_and_shape_checks():
    assert P.check_dtype("float32") == "float32"
    for bad in ("object", ["float32"], None):
        with pytest.raises(P.ProtocolError):
            P.check_dtype(bad)
    assert P.check_shape([2, 3]) == (2, 3)
    for bad in ([-1], ["2"], (2, 3), [2.0]):
        with pytest.raises(P.ProtocolError):
            P.check_shape(bad)


def test_kinds_have_unique_wire_numbers():
    assert len({k.KIND for k in P.KINDS}) == len(P.KINDS)
