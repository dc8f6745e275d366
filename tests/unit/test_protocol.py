"""The wire protocol: round trips and rejection of malformed input."""

import msgpack
import pytest

from gt.runtime import protocol as P


def test_header_round_trip_keeps_fields():
    frame = P.header(P.BATCH, 7, 3, [[1, "a.py:3"]])
    msg = P.parse_header(frame)
    assert msg == [P.VERSION, P.BATCH, 7, 3, [[1, "a.py:3"]]]


def test_body_round_trip():
    body = P.packb([[[P.OPCODE["add"], 5, [1, 2.0], None, 3]], [4]])
    instrs, frees = P.parse_body(body)
    assert instrs == [[P.OPCODE["add"], 5, [1, 2.0], None, 3]]
    assert frees == [4]


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\xc1",  # reserved msgpack byte
        b"garbage that is not msgpack \xff\xfe",
        msgpack.packb({"not": "a list"}),
        msgpack.packb([P.VERSION]),
        msgpack.packb([P.VERSION + 1, P.HELLO, {}]),
        msgpack.packb([P.VERSION, 999]),
        msgpack.packb([P.VERSION, P.BATCH]),  # too few fields
        msgpack.packb(["1", P.HELLO, {}]),
    ],
)
def test_malformed_headers_raise_protocol_error(frame):
    with pytest.raises(P.ProtocolError):
        P.parse_header(frame)


@pytest.mark.parametrize(
    "body", [b"\x00\x01", msgpack.packb([1, 2, 3]), msgpack.packb([[], 5]), msgpack.packb("x")]
)
def test_malformed_bodies_raise_protocol_error(body):
    with pytest.raises(P.ProtocolError):
        P.parse_body(body)


def test_no_extension_types_are_decoded():
    # msgpack ext types (code-carrying in some serializers) must never become objects.
    frame = msgpack.packb([P.VERSION, P.HELLO, msgpack.ExtType(1, b"payload")])
    msg = P.parse_header(frame)
    assert isinstance(msg[2], msgpack.ExtType)  # inert data, never executed


def test_dtype_and_shape_checks():
    assert P.check_dtype("float32") == "float32"
    with pytest.raises(P.ProtocolError):
        P.check_dtype("object")
    assert P.check_shape([2, 3]) == (2, 3)
    for bad in ([-1], ["2"], (2, 3), [2.0]):
        with pytest.raises(P.ProtocolError):
            P.check_shape(bad)


def test_opcodes_are_unique_and_dense():
    assert len(set(P.OPS)) == len(P.OPS)
    assert all(P.OPCODE[name] == i for i, name in enumerate(P.OPS))
