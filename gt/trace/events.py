"""The instrumentation event schema (a leaf module: imports nothing from GT).

Every process publishes *event batches* to the dispatcher's event bus. One batch is one ZeroMQ
message of two frames: the topic :data:`TOPIC` and a msgpack list::

    [source, first_seq, [event, event, ...]]

``source`` names the publisher (``"dispatcher"``, ``"worker:0"``, ``"client:3"``); the i-th event
of the batch has sequence number ``first_seq + i``, and sequence numbers of one source are
contiguous, so a subscriber sees every loss as a gap. Each event is ``[kind, t_ns, fields]``:
``kind`` one of the names below, ``t_ns`` monotonic nanoseconds on the run's clock (the
dispatcher's), ``fields`` a dict whose keys are listed per kind in :data:`FIELDS`.

Per-instruction facts travel in per-batch events (``exec`` carries columns of opcodes, output
ids, source-line ids and durations) so that instrumentation costs little enough to stay on.

Time. A worker's wall time splits into four parts that add up to 100 %: *compute* (inside an
``exec`` batch and not in a transfer), *communication* (a ``transfer`` with direction ``send`` or
``recv``: bytes moving to or from a peer or client), *waiting* (a ``transfer`` with direction
``wait``: blocked on data that has not arrived) and *idle* (no batch). Where they overlap, waiting
wins over communication and communication over compute. :mod:`gt.trace.timeshare` computes it,
once, for every tool. An instruction's ``durs`` entry excludes the waits inside it.
"""

from __future__ import annotations

from typing import Any

import msgpack

TOPIC = b"gt"
SCHEMA_VERSION = 1

# Event kinds.
CLIENT_JOINED = "client_joined"
CLIENT_LEFT = "client_left"
WORKER_JOINED = "worker_joined"
WORKER_LEFT = "worker_left"
QUEUED = "queued"
SRCLOC = "srcloc"
DISPATCHED = "dispatched"
EXEC = "exec"
TRANSFER = "transfer"
MEMORY = "memory"
DEVICE = "device"
CONFIG = "config"
ERROR = "error"
MARK = "mark"
DROP = "drop"
STATS = "stats"
HOT = "hot"
BUSY = "busy"

#: The fields each kind carries (all keys of ``fields``; a value may be ``None`` = not available).
FIELDS: dict[str, tuple[str, ...]] = {
    # dispatcher: a client connected (its home worker, host, pid, command line, and the tenant
    # whose own key it holds: None for a role's key or over ipc)
    CLIENT_JOINED: ("client", "home", "host", "pid", "argv", "tenant"),
    # dispatcher: a client left ("bye", "timeout", "worker lost")
    CLIENT_LEFT: ("client", "reason"),
    # dispatcher: a worker registered
    WORKER_JOINED: ("worker", "host", "pid", "device", "backend"),
    # dispatcher: a worker left or died
    WORKER_LEFT: ("worker", "reason"),
    # client: a batch of n instructions was sent (ops: reserved, None; exec events carry opcodes)
    QUEUED: ("client", "batch", "n", "ops", "first_id"),
    # client: new interned source locations {id: "file.py:12"}
    SRCLOC: ("client", "locs"),
    # dispatcher: a batch went to worker(s); rewrite says how the planner changed it
    DISPATCHED: ("client", "batch", "workers", "n", "rewrite", "queued_ns"),
    # worker: a batch ran from t0 to t1 (ns). Columns, one entry per instruction: ops (opcodes),
    # outs (output ids), srcs (source-location ids), durs (ns; empty at the "summary" level).
    # hot: how many captured steps (gt.hot) the batch replayed, each one "hot" instruction.
    # queue: batches still waiting on this worker. more: true for a slice of a batch that goes
    # on later (the worker ran another client's batch between; the last slice has it false).
    EXEC: (
        "worker",
        "client",
        "batch",
        "t0",
        "t1",
        "n",
        "ops",
        "outs",
        "srcs",
        "durs",
        "hot",
        "queue",
        "errors",
        "more",
    ),
    # worker: bytes moved to/from a peer ("send"/"recv") or a client ("to_client": a fetch's reply,
    # from the copy to host on; "from_client": an upload taken; peer None), or blocked on data that had not arrived
    # ("wait"; bytes 0; peer None for a client's upload), from t0 to t1; "reduce" (bytes 0, peer
    # None) is the completion of a background all-reduce when an op needs its result (its own
    # communication, not the op's). The memory pool's traffic
    # to its spill tier has peer None: "spill" (out), "unspill" (read back when an op needed it),
    # "prefetch" (read back ahead of need, beside compute). via: how a send/recv moved its bytes,
    # "zmq" (host buffers over ZeroMQ) or "zmq+pinned" (a GPU's data staged through pinned host
    # memory, then ZeroMQ); None for the other directions and in traces from before it existed.
    TRANSFER: (
        "worker",
        "peer",
        "bytes",
        "t0",
        "t1",
        "direction",
        "what",
        "client",
        "batch",
        "via",
    ),  # fmt: skip
    # worker: memory pool sample in bytes. used: held by tensors, each buffer once however many
    # views; cached: kept free by the allocator for reuse (reserved = used + cached); limit and
    # client_limit: the pool's limit and per-client quota (None: none); capacity: the device's
    # memory (RAM on NumPy); spilled: in the spill tier now; peak: the most ever held; clients
    # and clients_spilled: {client: bytes}. Counters since the worker started: spill_out and
    # spill_in (bytes to and from the spill tier), prefetched (bytes read back ahead of need),
    # prefetch_hits / prefetch_misses (reads that found their buffer back / had to wait), oom
    # (results refused).
    MEMORY: (
        "worker",
        "used",
        "reserved",
        "limit",
        "spilled",
        "tensors",
        "cached",
        "client_limit",
        "capacity",
        "peak",
        "clients",
        "clients_spilled",
        "spill_out",
        "spill_in",
        "prefetched",
        "prefetch_hits",
        "prefetch_misses",
        "oom",
    ),  # fmt: skip
    # worker: NVML device sample (None where the device offers no such counter)
    DEVICE: (
        "worker",
        "util",
        "mem_used",
        "mem_total",
        "temp",
        "power",
        "pcie_tx",
        "pcie_rx",
        "name",
    ),
    # dispatcher: a shard config was applied
    CONFIG: ("before", "after", "by"),
    # anyone: an op failed (message, op name, user's file:line)
    ERROR: ("client", "worker", "message", "op", "source"),
    # client: gt.mark(label)
    MARK: ("client", "label"),
    # subscriber-made: a gap in a source's sequence numbers
    DROP: ("source", "missing"),
    # anyone: aggregate counters, published at a fixed rate
    STATS: ("counters",),
    # client: a step captured by gt.hot (plan: its id on the home worker; steps: instructions per
    # call), what it does now (state: "replaying", or "eager: <why>"), replays so far (calls) and
    # the program's time per call, median, before capture (eager_ns) and replayed (hot_ns).
    HOT: ("client", "plan", "name", "steps", "state", "calls", "eager_ns", "hot_ns"),
    # worker: a batch has been running since t0 (ns; the start of its current slice) and is in
    # instruction op (opcode) from source location src; published every 0.1 s while a batch runs
    # longer than that (its exec event comes when it ends), so a monitor shows the worker busy.
    BUSY: ("worker", "client", "batch", "t0", "op", "src"),
}

KINDS = tuple(FIELDS)
#: What a client publishes (through the dispatcher, which checks that each names that client).
CLIENT_KINDS = frozenset({QUEUED, SRCLOC, MARK, HOT})
#: Kinds that describe a span of time (t0..t1) rather than an instant.
SPAN_KINDS = frozenset({EXEC, TRANSFER})


#: Sequence numbers and times stay well inside 64 bits, so sums and indexes of them always fit.
_LIMIT = 1 << 62


class EventFormatError(ValueError):
    """An event batch is not well formed."""


def pack_batch(source: str, first_seq: int, events: list) -> bytes:
    """Encode one event batch."""
    return msgpack.packb([source, first_seq, events], use_bin_type=True)


def unpack_batch(data: Any) -> tuple[str, int, list]:
    """Decode and validate one event batch: ``(source, first_seq, events)``.

    Raises:
        EventFormatError: not msgpack, or not ``[str, int, [[str, int, dict], ...]]``.
    """
    try:
        msg = msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:
        raise EventFormatError(f"undecodable event batch: {type(exc).__name__}") from None
    if type(msg) is not list or len(msg) != 3:
        raise EventFormatError("event batch is not [source, first_seq, events]")
    source, first_seq, events = msg
    if type(source) is not str or type(first_seq) is not int or type(events) is not list:
        raise EventFormatError("event batch is not [source, first_seq, events]")
    if not 0 <= first_seq < _LIMIT or len(source) > 200:
        raise EventFormatError("event batch has a sequence number or a source out of range")
    for ev in events:
        if (
            type(ev) is not list
            or len(ev) != 3
            or type(ev[0]) is not str
            or type(ev[1]) is not int
            or not -_LIMIT < ev[1] < _LIMIT
            or type(ev[2]) is not dict
        ):
            raise EventFormatError(f"malformed event in batch from {source[:40]}")
    return source, first_seq, events


#: The largest event batch a client may hand the dispatcher to publish.
MAX_CLIENT_BATCH = 1 << 20


def check_client_batch(data: Any, client: int) -> None:
    """Check that a batch a client asks the dispatcher to publish is that client's own: its
    source is ``client:N``, every event is of a kind clients publish (:data:`CLIENT_KINDS`) and
    names client ``N``.

    Raises:
        EventFormatError: anything else (too large, malformed, another source or client).
    """
    if len(data) > MAX_CLIENT_BATCH:
        raise EventFormatError(f"a client's event batch is over {MAX_CLIENT_BATCH} bytes")
    source, _first, events = unpack_batch(data)
    if source != f"client:{client}":
        raise EventFormatError(f"client {client} may not publish as {source[:40]!r}")
    for kind, _t, fields in events:
        if kind not in CLIENT_KINDS or fields.get("client") != client:
            raise EventFormatError(f"client {client} may not publish a {kind[:20]!r} event "
                                   f"for client {fields.get('client')!r:.20}")  # fmt: skip


def event(kind: str, t_ns: int, **fields: Any) -> list:
    """Build one event (handy in tests and fixtures)."""
    return [kind, t_ns, fields]
