"""The GT wire protocol: every message kind, defined once, used by every peer (a leaf module).

A message is a ZeroMQ multipart message whose first frame (after any ROUTER identity) is a msgpack
*header*, the list ``[VERSION, kind, *fields]``. Each kind below is a :class:`~typing.NamedTuple`:
its fields are named once, :func:`encode` writes them in order and :func:`parse` reads them back,
checking the version, the kind and the type of every field in one place. Batches carry a second
frame, the msgpack *body* (:func:`parse_body`), and array data travels as further raw frames, sent
with ``copy=False`` and wrapped without copying on the other side. Nothing on the wire is
executable: msgpack only ever yields lists, dicts, strings, numbers and bytes.

An instruction in a body is a flat list ``[opcode, out, args, attrs, src]`` (indices
:data:`I_OP` ...): ``opcode`` is an entry of the op registry (:mod:`gt.runtime.ops`); ``out`` the
client-made id of the result (or a request id for ``fetch``); ``args`` tensor ids (``int``) and
immediates (``float``/``bool``/``None``, or ``[v]`` for an integer scalar, since a bare ``int`` is a
tensor id); ``attrs`` ``None`` or a small dict; ``src`` the client's interned id of the user's
``file:line``; an optional sixth element, the interned id of the active ``gt.signal`` (only in
batches whose header carries a signal table; the planner removes it before a worker sees it).
Positional lists rather than dicts keep per-instruction work small on the hot path.

Who sends what:

=============  ===========================  =======================================================
kind           from -> to                   frames after the header
=============  ===========================  =======================================================
Hello          client -> dispatcher front
Welcome        dispatcher -> client
Batch          client -> dispatcher         body, then upload buffers
               client -> worker data        (a direct batch: see :class:`Known`)
Run            dispatcher -> worker         body, then upload buffers
Done           worker -> dispatcher
Ack            dispatcher -> client
               worker -> client (direct)    (of a direct batch)
Data           worker -> client (direct)    the array's bytes
Relay          worker -> dispatcher         the array's bytes (a Data for a client without a
                                            direct link; the dispatcher forwards it as Data)
Heartbeat      both ways
Bye            client -> dispatcher
Error          dispatcher -> client
Register       worker -> dispatcher back
Registered     dispatcher -> worker
DropClient     dispatcher -> worker
Stop           dispatcher -> worker
Upload         client -> worker data        the array's bytes
Control        tool -> dispatcher           (on the control or the front socket)
Reply          dispatcher -> tool
Stats          worker -> dispatcher
Peers          dispatcher -> worker
Peer           worker -> worker data        the array's bytes
Known          worker -> client (direct)
Route          dispatcher -> client
SourceLines    client -> dispatcher
Ran            worker -> dispatcher
=============  ===========================  =======================================================
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from gt.runtime import field_checks as F
from gt.runtime.field_checks import ANY, Check, compile_checks, opt

#: 3: a fetch that ends a batch acknowledges it (Run.ack, Data.ack, Done.acked, Ack.told);
#: 4: direct batches (Known, Route, SourceLines, Ran).
VERSION = 4

#: Batches a client may have unacknowledged on a worker's direct link (:class:`Known`): the
#: worker refuses more, so a client caps its window there at this.
DIRECT_WINDOW = 64

# Error codes carried by Error messages.
E_WORKER_LOST = "worker_lost"
E_PROTOCOL = "protocol"
E_UNKNOWN_CLIENT = "unknown_client"
E_NO_WORKERS = "no_workers"
E_SHUTDOWN = "shutdown"
E_REVOKED = "revoked"  # the tenant's key was removed from the cluster's keys

# Positions in an instruction list (see the module docstring).
I_OP, I_OUT, I_ARGS, I_ATTRS, I_SRC, I_SIGNAL = range(6)


#: Dtypes travel as short names; the set is closed so a peer never builds arbitrary dtypes.
DTYPES, DTYPE_SET = F.DTYPES, F.DTYPE_SET


class ProtocolError(ValueError):
    """Raised when a frame is not a well-formed GT message."""


# ----------------------------------------------------------------------------- field checks
def _bad_field(cls: type, values: list) -> str:
    for name, v in zip(cls._fields, values):  # type: ignore[attr-defined]
        if not cls._check_one[name]([v]):  # type: ignore[attr-defined]
            return name
    return "?"


_KINDS: dict[int, type] = {}


def _kind(kind: int, /, **checks: Check) -> Callable[[type], type]:
    """Register a message class under wire kind ``kind`` with a check per field."""

    def deco(cls: type) -> type:
        fields = cls._fields  # type: ignore[attr-defined]
        if set(checks) != set(fields):
            raise TypeError(f"{cls.__name__}: checks {sorted(checks)} != fields {fields}")
        cls.KIND = kind  # type: ignore[attr-defined]
        cls._ok = compile_checks(fields, checks)  # type: ignore[attr-defined]
        cls._check_one = {f: compile_checks(("x",), {"x": checks[f]}) for f in fields}  # type: ignore[attr-defined]
        cls._required = len(fields) - len(cls._field_defaults)  # type: ignore[attr-defined]
        cls._defaults = tuple(cls._field_defaults[f] for f in fields[cls._required :])  # type: ignore[attr-defined]
        _KINDS[kind] = cls
        return cls

    return deco


# ----------------------------------------------------------------------------- message kinds
@_kind(1, pid=int, host=str, argv=F.is_str_list, token=bytes)
class Hello(NamedTuple):
    """A client introduces itself; ``token`` is the identity of its direct data sockets."""

    pid: int
    host: str
    argv: list
    token: bytes


@_kind(2, client=int, home=int, workers=list, settings=dict)
class Welcome(NamedTuple):
    """The dispatcher accepts a client: its number, home worker, the workers, timing settings."""

    client: int
    home: int
    workers: list
    settings: dict


@_kind(3, seq=int, n=int, srclocs=opt(F.is_srclocs), signals=opt(F.is_signals))
class Batch(NamedTuple):
    """A client's batch of ``n`` instructions; new source lines ``[[id, text]]`` and new signal
    table entries ``[[id, name, backward, is_backward]]`` ride along."""

    seq: int
    n: int
    srclocs: list | None = None
    signals: list | None = None


@_kind(4, client=int, seq=int, n=int, token=opt(bytes), planned=bool, tenant=opt(F.is_tenant),
       ack=bool)  # fmt: skip
class Run(NamedTuple):
    """The dispatcher hands a worker a client's batch (or this worker's part of a planned one);
    ``token`` identifies the client's direct data socket, if it has one. Only a batch the
    dispatcher's planner wrote (``planned``) may hold transfers between workers: a client's own
    batch, forwarded unread, may not. ``tenant``: whose own key the client holds (its programs
    share one memory quota), ``None`` for a role's key. ``ack``: the whole client batch runs on
    this worker, which may acknowledge it itself with the data of a fetch that ends it (the
    client's sync points end their batch with one): the round trip then takes no :class:`Ack`."""

    client: int
    seq: int
    n: int
    token: bytes | None
    planned: bool = False
    tenant: str | None = None
    ack: bool = False


@_kind(5, client=int, seq=int, errors=F.is_errors, n=int, exec_ns=int, dropped=bool, acked=bool)
class Done(NamedTuple):
    """A worker ran a batch: the errors (``[message, opcode, src]``), instructions, nanoseconds.
    ``dropped``: it did not run to its end because its client left (``n`` of it ran).
    ``acked``: the worker acknowledged it to the client itself (:attr:`Data.ack`); the dispatcher
    then sends an :class:`Ack` only to tell errors."""

    client: int
    seq: int
    errors: list
    n: int
    exec_ns: int
    dropped: bool = False
    acked: bool = False


@_kind(6, seq=int, errors=F.is_errors, told=bool)
class Ack(NamedTuple):
    """The dispatcher tells a client that batch ``seq`` ran everywhere, with its errors.
    ``told``: the worker already acknowledged it (:attr:`Data.ack`); this only brings errors
    found after that (at the batch's device fence)."""

    seq: int
    errors: list
    told: bool = False


@_kind(
    7, req=int, dtype=opt(F.is_dtype), shape=opt(F.is_shape), error=opt(F.is_error), ack=opt(int)
)
class Data(NamedTuple):
    """A fetched array (in the next frame) for request ``req``, or the error that replaced it.
    ``ack``: the client batch this fetch ended, acknowledged with it (see :attr:`Run.ack`)."""

    req: int
    dtype: str | None
    shape: list | None
    error: list | None
    ack: int | None = None


@_kind(8, client=int, req=int, dtype=opt(F.is_dtype), shape=opt(F.is_shape), error=opt(F.is_error),
       ack=opt(int))  # fmt: skip
class Relay(NamedTuple):
    """A :class:`Data` for client ``client``, sent through the dispatcher."""

    client: int
    req: int
    dtype: str | None
    shape: list | None
    error: list | None
    ack: int | None = None

    def data(self) -> Data:
        """The :class:`Data` message the client receives."""
        return Data(self.req, self.dtype, self.shape, self.error, self.ack)


@_kind(9)
class Heartbeat(NamedTuple):
    """I am alive (both ways, on every link that has a liveness timeout)."""


@_kind(10)
class Bye(NamedTuple):
    """A client leaves; the dispatcher frees its tensors."""


@_kind(11, code=str, message=str)
class Error(NamedTuple):
    """The dispatcher tells a client something is broken (codes ``E_*``)."""

    code: str
    message: str


@_kind(12, host=str, pid=int, device=str, backend=str, data=str, hb=bytes, gpu=opt(dict),
       data_key=opt(F.is_key))  # fmt: skip
class Register(NamedTuple):
    """A worker asks to join: where it runs, its data endpoint, its heartbeat socket's identity,
    its GPU (``index``, ``name``, ``uuid``, ``pci_bus_id`` ...; ``None`` on NumPy), and the CURVE
    public key of its data socket (``None`` on ipc)."""

    host: str
    pid: int
    device: str
    backend: str
    data: str
    hb: bytes
    gpu: dict | None = None
    data_key: bytes | None = None


@_kind(13, worker=int, settings=dict)
class Registered(NamedTuple):
    """The dispatcher accepts a worker under id ``worker``."""

    worker: int
    settings: dict


@_kind(14, client=int)
class DropClient(NamedTuple):
    """A client is gone: drop its tensors."""

    client: int


@_kind(15)
class Stop(NamedTuple):
    """Stop now (to a worker), or: you are unknown here (to a heartbeat)."""


@_kind(16, tok=int)
class Upload(NamedTuple):
    """A client's large array (next frame) for the upload instruction with the same ``tok``."""

    tok: int


@_kind(17, request=str, args=ANY)
class Control(NamedTuple):
    """A control request (``ping``, ``stats``, ``snapshot``, ``config_apply`` ...)."""

    request: str
    args: Any = None


@_kind(18, ok=bool, payload=ANY)
class Reply(NamedTuple):
    """The answer to a :class:`Control`: ``ok`` and the payload, or the refusal's message."""

    ok: bool
    payload: Any


@_kind(19, stats=dict)
class Stats(NamedTuple):
    """A worker's counters (tensors, bytes, batches ...), every half second."""

    stats: dict


@_kind(20, endpoints=F.is_endpoints, keys=opt(F.is_keys))
class Peers(NamedTuple):
    """Where every worker's data socket is: ``{worker_id: endpoint}``, and over TCP the CURVE
    public key of each (``{worker_id: key}``)."""

    endpoints: dict
    keys: dict | None = None


@_kind(21, client=int, tag=int, step=int, dtype=opt(F.is_dtype), shape=opt(F.is_shape),
       error=opt(F.is_error))  # fmt: skip
class Peer(NamedTuple):
    """Step ``step`` of transfer ``tag`` for client ``client``: an array (next frame) or an
    error marker, so a collective's participants fail together instead of waiting."""

    client: int
    tag: int
    step: int
    dtype: str | None
    shape: list | None
    error: list | None


@_kind(22, memory=dict)
class Configure(NamedTuple):
    """Settings that change while workers run (to a worker): ``memory`` is the memory settings
    (:mod:`gt.runtime.memory_settings`) the dispatcher was given, merged over its flags."""

    memory: dict


@_kind(23)
class Events(NamedTuple):
    """A client's event batch (the next frame, as :func:`gt.trace.events.pack_batch` makes it),
    for the dispatcher to publish on the bus once it has checked that every event is the
    sender's own."""


@_kind(24, client=int)
class Known(NamedTuple):
    """A worker tells a client (on the direct data link) that it knows it as ``client`` and runs
    the batches it sends there: the dispatcher forwarded one of its batches whole (:attr:`Run.ack`),
    so it does not plan them. From then on, while its dispatcher allows it (:class:`Route`), the
    client sends its batches straight to the worker, which acknowledges them itself (an
    :class:`Ack` on the same link, or the :class:`Data` of a fetch that ends one) and tells the
    dispatcher afterwards (:class:`Ran`): a round trip takes two messages, not three."""

    client: int


@_kind(25, direct=bool)
class Route(NamedTuple):
    """The dispatcher tells a client whether its batches may go straight to its worker
    (``direct``): not while a shard config or a placed tensor makes the dispatcher plan them. The
    client switches once every batch it sent the other way is acknowledged."""

    direct: bool


@_kind(26, srclocs=F.is_srclocs)
class SourceLines(NamedTuple):
    """New source lines ``[[id, text]]`` of a client whose batches go straight to its worker (a
    :class:`Batch` through the dispatcher carries them itself): the dispatcher keeps them for
    monitors that attach later."""

    srclocs: list


@_kind(27, client=int, batches=F.is_count, n=F.is_count, errors=F.is_count, dropped=F.is_count)
class Ran(NamedTuple):
    """A worker ran ``batches`` batches that client ``client`` sent it straight (:class:`Known`),
    ``n`` instructions with ``errors`` errors in all, ``dropped`` of them cut short because the
    client left; it acknowledged them itself, so the dispatcher only counts them (a few ms late,
    one message for many)."""

    client: int
    batches: int
    n: int
    errors: int
    dropped: int = 0


#: Every message kind, in wire-kind order.
KINDS: tuple[type, ...] = tuple(_KINDS[k] for k in sorted(_KINDS))
KIND_NAMES: dict[int, str] = {code: cls.__name__ for code, cls in _KINDS.items()}


# ----------------------------------------------------------------------------- encoding
def packb(obj: Any) -> bytes:
    """Encode one header or body with msgpack (no pickle, no extension types); a NumPy number
    (in an op's attributes, say) travels as its Python value."""
    return msgpack.packb(obj, use_bin_type=True, default=_plain)


def _plain(obj: Any) -> Any:
    """msgpack's hook for objects it cannot encode: NumPy numbers become Python ones."""
    if type(obj).__module__ == "numpy" and getattr(obj, "ndim", None) == 0:
        return obj.item()
    raise TypeError(f"can not serialize {type(obj).__module__}.{type(obj).__qualname__} object")


def unpackb(data: Any) -> Any:
    """Decode msgpack bytes; any failure becomes :class:`ProtocolError`."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}") from None


_local = threading.local()


def encode(msg: Any) -> bytes:
    """The header frame of a message (an instance of one of the kinds above)."""
    try:
        pack = _local.pack
    except AttributeError:  # one Packer per thread: a Packer is not thread-safe, and making
        pack = _local.pack = msgpack.Packer(use_bin_type=True).pack  # one per call costs a lot
    return pack([VERSION, msg.KIND, *msg])


def parse(frame: Any) -> Any:
    """Decode and validate a header frame into its message.

    Raises:
        ProtocolError: the frame is not msgpack, not ``[VERSION, kind, *fields]``, has another
            version, an unknown kind, too few or too many fields, or a field of the wrong type.
    """
    msg = unpackb(frame)
    if type(msg) is not list or len(msg) < 2:
        raise ProtocolError("header is not a list [version, kind, ...]")
    version, kind = msg[0], msg[1]
    if type(version) is not int or version != VERSION:
        raise ProtocolError(f"protocol version {version!r} is not {VERSION}")
    cls = _KINDS.get(kind) if type(kind) is int else None
    if cls is None:
        raise ProtocolError(f"unknown message kind {kind!r}")
    values = msg[2:]
    n = len(values)
    total = len(cls._fields)
    if n != total:
        if not cls._required <= n <= total:
            raise ProtocolError(
                f"{cls.__name__} has {total} fields ({cls._required} required), got {n}"
            )
        values.extend(cls._defaults[n - cls._required :])
    if not cls._ok(values):
        name = _bad_field(cls, values)
        v = values[cls._fields.index(name)] if name != "?" else None
        raise ProtocolError(f"{cls.__name__}.{name} is malformed: {_excerpt(v)}")
    return tuple.__new__(cls, values)


def parse_routed(frames: list) -> tuple[bytes, Any]:
    """``(routing id, message)`` of what a ROUTER socket received: ``[identity, header, ...]``
    (frames with ``.bytes`` and ``.buffer``, as pyzmq receives them without copying).

    Raises:
        ProtocolError: no header frame, or a header :func:`parse` refuses.
    """
    if len(frames) < 2:
        raise ProtocolError("empty message")
    return frames[0].bytes, parse(frames[1].buffer)


def hello_version(frame: Any) -> int | None:
    """The protocol version a header that :func:`parse` refused claims, if it is a ``Hello``
    (so the dispatcher can tell a client of another GT version why it is refused)."""
    try:
        msg = msgpack.unpackb(frame, raw=False, max_bin_len=1 << 10, max_str_len=1 << 16,
                              max_array_len=1 << 10, max_map_len=1 << 10)  # fmt: skip
    except Exception:
        return None
    if type(msg) is list and len(msg) >= 2 and type(msg[0]) is int and msg[1] == 1:
        return msg[0]
    return None


def _excerpt(v: Any, limit: int = 60) -> str:
    """A short, safe rendering of a bad value for an error message (never the whole thing)."""
    text = f"{type(v).__name__} {v!r}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------- bodies and arrays
def parse_body(frame: Any) -> tuple[list, list, list | None]:
    """Decode a batch body ``[instructions, frees]`` or ``[instructions, frees, free_at]``.

    ``free_at[i]``, when present, is how many of the batch's instructions precede the free of
    ``frees[i]``, so a worker drops a tensor where the program did, not at the end of the batch (a
    batch of 20 large matmuls then reuses memory instead of holding 20 results). Frees and their
    positions are checked here; each instruction is checked by the worker as it runs it
    (:func:`check_instruction`), so a malformed one fails alone.

    Raises:
        ProtocolError: not that shape, or a free that is not an int.
    """
    body = unpackb(frame)
    if type(body) is not list or len(body) not in (2, 3):
        raise ProtocolError("batch body is not [instructions, frees(, free_at)]")
    instrs, frees = body[0], body[1]
    free_at = body[2] if len(body) == 3 else None
    if type(instrs) is not list or type(frees) is not list:
        raise ProtocolError("batch body is not [instructions, frees(, free_at)]")
    if not all(type(f) is int for f in frees):
        raise ProtocolError("frees must be tensor ids (ints)")
    if free_at is not None and (
        type(free_at) is not list
        or len(free_at) != len(frees)
        or not all(type(k) is int and k >= 0 for k in free_at)
    ):
        raise ProtocolError("free_at must list one position (an int >= 0) per free")
    return instrs, frees, free_at


def encode_body(instrs: list, frees: list, free_at: list | None = None) -> bytes:
    """The body frame of a batch (see :func:`parse_body`)."""
    return packb([instrs, frees, free_at] if free_at else [instrs, frees])


def check_instruction(ins: Any) -> tuple[int, int, list, Any, int]:
    """``(opcode, out, args, attrs, src)`` of a well-formed instruction.

    Raises:
        ProtocolError: the instruction is not ``[int, int, list, dict|None, int(, int)]``.
    """
    if type(ins) is not list or not 5 <= len(ins) <= 6:
        raise ProtocolError("an instruction is [opcode, out, args, attrs, src]")
    code, out, args, attrs, src = ins[0], ins[1], ins[2], ins[3], ins[4]
    if type(code) is not int or type(out) is not int or type(src) is not int:
        raise ProtocolError("an instruction's opcode, out and src are ints")
    if type(args) is not list or not (attrs is None or type(attrs) is dict):
        raise ProtocolError("an instruction's args is a list and attrs a dict or None")
    return code, out, args, attrs, src


def check_dtype(name: Any) -> str:
    """Return ``name`` if it is a dtype GT transports, else raise :class:`ProtocolError`."""
    if not F.is_dtype(name):
        raise ProtocolError(f"unsupported dtype {_excerpt(name)}")
    return name


def check_shape(shape: Any) -> tuple[int, ...]:
    """Validate a shape from the wire: a list of non-negative ints."""
    if not F.is_shape(shape):
        raise ProtocolError(f"bad shape {_excerpt(shape)}")
    return tuple(shape)
