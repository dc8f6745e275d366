"""Small helpers for the runtime's ZeroMQ sockets: receiving and sending on the hot paths.

pyzmq's convenience layer (``recv_multipart``, ``send_multipart``, option reads that return
enums) costs several microseconds per call in Python, more than the C work beneath it; on a round
trip that crosses three processes on two cores that is most of the latency GT adds (measured with
``benchmarks/profile_runtime.py``). These helpers call pyzmq's C-level socket methods directly,
with plain-int flags, and keep the semantics of the calls they replace.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import zmq

try:  # pyzmq's compiled socket (the base class of zmq.Socket): its methods skip the sugar
    from zmq.backend import Socket as _Base

    _recv, _send, _get = _Base.recv, _Base.send, _Base.get
except (ImportError, AttributeError):  # pragma: no cover - another pyzmq backend
    _recv, _send, _get = zmq.Socket.recv, zmq.Socket.send, zmq.Socket.get

_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
_NOBLOCK, _SNDMORE = int(zmq.NOBLOCK), int(zmq.SNDMORE)

#: Below this many bytes a frame is copied into the message: cheaper than tracking a buffer
#: (pyzmq's own ``copy_threshold``).
COPY_BELOW = 65536


def take(sock: zmq.Socket, ready: bool = False) -> Any:
    """The next message waiting on ``sock`` (frames, not copied), or ``None`` if there is none.

    Asks the socket first instead of letting a non-blocking receive raise ``zmq.Again``: the
    poll loops end every drain with an empty socket, and building that exception costs about
    twice as much as the question. ``ready``: a poll has just said a message waits, so the
    question (a system call or two in libzmq) is skipped.
    """
    if not ready and not _get(sock, _EVENTS) & _POLLIN:
        return None
    try:
        frame = _recv(sock, _NOBLOCK, False)
    except zmq.Again:  # (another reader took it, or the socket changed its mind)
        return None
    parts = [frame]
    while frame.more:  # the rest of a multipart message is already here: never blocks
        frame = _recv(sock, 0, False)
        parts.append(frame)
    return parts


def send_parts(sock: zmq.Socket, parts: list, flags: int = 0) -> None:
    """Send ``parts`` as one multipart message, like ``send_multipart`` with ``copy=False`` for
    large buffers: a received :class:`zmq.Frame` or a buffer of ``COPY_BELOW`` bytes or more
    travels without a copy (the caller must not change it until ZeroMQ is done with it), smaller
    ones are copied. ``flags`` may add ``NOBLOCK``; ``zmq.Again`` then means nothing was sent
    only if it comes from the first part (as with ``send_multipart``)."""
    last = len(parts) - 1
    more = flags | _SNDMORE
    for i, part in enumerate(parts):
        copy = type(part) is bytes or (type(part) is not zmq.Frame and _nbytes(part) < COPY_BELOW)
        _send(sock, part, more if i < last else flags, copy)


def raw_bytes(array: np.ndarray) -> Any:
    """The bytes of a C-contiguous array without a copy (empty arrays have none to view). Viewed
    as bytes first: ml_dtypes' bfloat16 has no buffer-protocol format for ``memoryview``."""
    return memoryview(array.reshape(-1).view(np.uint8)) if array.size else b""


def _nbytes(buf: Any) -> int:
    return buf.nbytes if type(buf) is memoryview else memoryview(buf).nbytes


#: The transports a GT address may name.
_SCHEMES = ("tcp://", "ipc://", "inproc://")


def check_address(address: str, where: str) -> str:
    """``address`` if it is a ZeroMQ endpoint GT can connect to; else a ``ValueError`` that says
    what one looks like (ZeroMQ's own is a bare "Invalid argument")."""
    if not isinstance(address, str) or not address.startswith(_SCHEMES):
        raise ValueError(
            f"{where}: {address!r} is not a dispatcher address; it looks like tcp://HOST:PORT "
            "(as `gt dispatcher` prints it) or ipc:///PATH"
        )
    return address
