"""The GT wire protocol: the one module every peer imports.

Every message is a ZeroMQ multipart message whose first frame (after any ROUTER identity) is a
msgpack *header*: a positional list ``[VERSION, kind, *fields]``. Batches carry a second frame, the
msgpack *body* (the instruction list), and array data travels as further raw frames that are sent
with ``copy=False`` and wrapped without copying on the other side. Nothing on the wire is
executable: msgpack only ever yields lists, dicts, strings, numbers and bytes.

An instruction is a flat list ``[opcode, out, args, attrs, src]``:

* ``opcode`` indexes :data:`OPS`;
* ``out`` is the client-made id of the result (or a request id for ``fetch``);
* ``args`` holds tensor ids (``int``) and immediates (``float``/``bool``/``None``, or a one-element
  list ``[v]`` for an integer scalar, since a bare ``int`` is a tensor id);
* ``attrs`` is ``None`` or a small dict (axis, keepdims, shape, dtype, slice key ...);
* ``src`` is the client's interned id for the user's ``file:line``;
* an optional sixth element, the interned id of the active ``gt.signal`` (only in batches whose
  header carries a signal table; the dispatcher's planner removes it before a worker sees it).

Positional lists rather than dicts keep per-message Python work small, which matters on the hot path.
"""

from __future__ import annotations

from typing import Any

import msgpack

VERSION = 1

# Message kinds (the second header field).
HELLO = 1  # client -> dispatcher: [V, HELLO, info]
WELCOME = 2  # dispatcher -> client: [V, WELCOME, client_no, home_worker, workers, settings]
BATCH = 3  # client -> dispatcher: [V, BATCH, seq, n_instr, srclocs(, signals)]  + body + buffers
#            (signals: new [id, name, backward, is_backward] entries; present only in annotated batches)
#            dispatcher -> worker: [V, BATCH, client_no, seq, n_instr] + body + buffers
DONE = 4  # worker -> dispatcher: [V, DONE, client_no, seq, errors, exec_ns]
ACK = 5  # dispatcher -> client: [V, ACK, seq, errors]
DATA = 6  # worker -> client (direct) [V, DATA, req, dtype, shape, error] + buffer
#           worker -> dispatcher [V, DATA, req, dtype, shape, error, client_no] + buffer
HEARTBEAT = 7  # both ways: [V, HEARTBEAT]
BYE = 8  # client -> dispatcher: [V, BYE]
ERROR = 9  # dispatcher -> client: [V, ERROR, code, message]
REGISTER = 10  # worker -> dispatcher: [V, REGISTER, info]
REGISTERED = 11  # dispatcher -> worker: [V, REGISTERED, worker_id, settings]
DROP_CLIENT = 12  # dispatcher -> worker: [V, DROP_CLIENT, client_no]
STOP = 13  # dispatcher -> worker: [V, STOP]
UPLOAD = 14  # client -> worker data socket: [V, UPLOAD, token] + buffer
CONTROL = 15  # tool -> dispatcher control socket: [V, CONTROL, request, args]
REPLY = 16  # dispatcher -> tool: [V, REPLY, ok, payload]
STATS = 17  # worker -> dispatcher: [V, STATS, stats]
PEERS = 18  # dispatcher -> worker: [V, PEERS, {worker_id: data_endpoint}]
PEER = 19  # worker -> worker data socket: [V, PEER, client_no, tag, step, dtype, shape, error] + buffer

KIND_NAMES = {
    v: k
    for k, v in dict(globals()).items()
    if k.isupper() and isinstance(v, int) and k not in ("VERSION",)
}

# Error codes carried by ERROR messages.
E_WORKER_LOST = "worker_lost"
E_PROTOCOL = "protocol"
E_UNKNOWN_CLIENT = "unknown_client"
E_NO_WORKERS = "no_workers"
E_SHUTDOWN = "shutdown"

# The primitive instruction set that workers execute. Everything else is composed on the client.
OPS: tuple[str, ...] = (
    # data movement and creation
    "upload",
    "fetch",
    "full",
    "arange",
    "eye",
    "randn",
    "rand",
    "randint",
    "copy",
    # elementwise binary
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "where",
    # elementwise unary
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "sign",
    "cast",
    # linear algebra and reductions
    "matmul",
    "sum",
    "max",
    "min",
    "argmax",
    "argmin",
    # shape and indexing
    "reshape",
    "transpose",
    "expand",
    "getitem",
    "setitem",
    "concat",
    "index_add",
    "clip",
    "floor_divide",
    "remainder",
    "logical_not",
    "mark",
    "erf",
    # placement and worker-to-worker movement (planned by the dispatcher; see gt/runtime/peers.py)
    "place",
    "chunk",
    "send",
    "recv",
    "bcast",
    "scatter",
    "gather",
    "all_gather",
    "all_reduce",
    "reduce_scatter",
    "free",
    "log_softmax",
)
OPCODE: dict[str, int] = {name: i for i, name in enumerate(OPS)}

# Transfers and collectives: instructions the planner inserts and workers run over peer links.
SEND, RECV, BCAST, SCATTER, GATHER = (
    OPCODE[n] for n in ("send", "recv", "bcast", "scatter", "gather")
)
ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, CHUNK = (
    OPCODE[n] for n in ("all_gather", "all_reduce", "reduce_scatter", "chunk")
)
COMM_OPS = frozenset(
    (SEND, RECV, BCAST, SCATTER, GATHER, ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, CHUNK)
)

# Dtypes travel as short names; the set is closed so a peer never builds arbitrary dtypes.
DTYPES: tuple[str, ...] = (
    "float32",
    "float64",
    "float16",
    "int32",
    "int64",
    "bool",
    "uint8",
    "int8",
)
DTYPE_SET = frozenset(DTYPES)

_packer = msgpack.Packer(use_bin_type=True)
pack = _packer.pack


class ProtocolError(ValueError):
    """Raised when a frame is not a well-formed GT message."""


def packb(obj: Any) -> bytes:
    """Encode one header or body with msgpack (no pickle, no extension types)."""
    return msgpack.packb(obj, use_bin_type=True)


def unpackb(data: Any) -> Any:
    """Decode msgpack bytes; any failure becomes :class:`ProtocolError`."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}") from None


def header(kind: int, *fields: Any) -> bytes:
    """Build a header frame ``[VERSION, kind, *fields]``."""
    return msgpack.packb([VERSION, kind, *fields], use_bin_type=True)


# Minimum number of header fields (after version and kind) per message kind.
_MIN_FIELDS = {
    HELLO: 1,
    WELCOME: 4,
    BATCH: 2,
    DONE: 3,
    ACK: 2,
    DATA: 4,
    HEARTBEAT: 0,
    BYE: 0,
    ERROR: 2,
    REGISTER: 1,
    REGISTERED: 2,
    DROP_CLIENT: 1,
    STOP: 0,
    UPLOAD: 1,
    CONTROL: 2,
    REPLY: 2,
    STATS: 1,
    PEERS: 1,
    PEER: 6,
}


def parse_header(frame: Any) -> list:
    """Decode and validate a header frame, returning ``[VERSION, kind, *fields]``.

    Raises:
        ProtocolError: the frame is not msgpack, not a list, has the wrong version, an unknown kind,
            or too few fields for its kind.
    """
    msg = unpackb(frame)
    if type(msg) is not list or len(msg) < 2:
        raise ProtocolError("header is not a list [version, kind, ...]")
    if msg[0] != VERSION:
        raise ProtocolError(f"protocol version {msg[0]!r} is not {VERSION}")
    need = _MIN_FIELDS.get(msg[1])
    if need is None:
        raise ProtocolError(f"unknown message kind {msg[1]!r}")
    if len(msg) - 2 < need:
        raise ProtocolError(f"{KIND_NAMES[msg[1]]} needs {need} fields, got {len(msg) - 2}")
    return msg


def check_dtype(name: Any) -> str:
    """Return ``name`` if it is a dtype GT transports, else raise :class:`ProtocolError`."""
    if name not in DTYPE_SET:
        raise ProtocolError(f"unsupported dtype {name!r}")
    return name


def check_shape(shape: Any) -> tuple[int, ...]:
    """Validate a shape from the wire: a list of non-negative ints."""
    if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        raise ProtocolError(f"bad shape {shape!r}")
    return tuple(shape)


def parse_body(frame: Any) -> tuple[list, list]:
    """Decode a batch body and return ``(instructions, frees)`` (see :func:`parse_body_ordered`)."""
    instrs, frees, _ = parse_body_ordered(frame)
    return instrs, frees


def parse_body_ordered(frame: Any) -> tuple[list, list, list | None]:
    """Decode a batch body ``[instructions, frees]`` or ``[instructions, frees, free_at]``.

    ``free_at[i]``, when present, is how many of the batch's instructions precede the free of
    ``frees[i]``, so a worker can drop a tensor as soon as the program did, not at the end of the
    batch (a batch of 20 large matmuls then reuses memory instead of holding 20 results).
    Individual instructions are validated by the worker as it executes them, so a malformed one
    fails alone, with an error reported for its output.
    """
    body = unpackb(frame)
    if type(body) is not list or len(body) not in (2, 3):
        raise ProtocolError("batch body is not [instructions, frees(, free_at)]")
    instrs, frees = body[0], body[1]
    free_at = body[2] if len(body) == 3 else None
    if type(instrs) is not list or type(frees) is not list:
        raise ProtocolError("batch body is not [instructions, frees(, free_at)]")
    if free_at is not None and (type(free_at) is not list or len(free_at) != len(frees)):
        raise ProtocolError("free_at must list one position per free")
    return instrs, frees, free_at
