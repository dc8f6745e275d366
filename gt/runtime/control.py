"""Request/reply helper for a dispatcher's control requests (ping, stats, snapshot, endpoints).

Both the control endpoint and the client front endpoint answer ``CONTROL`` requests, so a tool
given only the address that ``gt dispatcher`` printed can find everything else.
"""

from __future__ import annotations

from typing import Any

import zmq

from gt.runtime import protocol as P


class ControlError(RuntimeError):
    """The dispatcher did not answer, or answered with an error."""


def request(
    endpoint: str,
    what: str,
    args: Any = None,
    *,
    timeout: float = 5.0,
    ctx: zmq.Context | None = None,
) -> Any:
    """Send one control request and return the reply's payload.

    Raises:
        ControlError: no answer within ``timeout`` seconds, or the dispatcher refused the request.
    """
    ctx = ctx or zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    try:
        s.connect(endpoint)
        s.send(P.header(P.CONTROL, what, args))
        if not s.poll(int(timeout * 1000)):
            raise ControlError(f"no GT dispatcher answered at {endpoint} within {timeout:g}s")
        try:
            msg = P.parse_header(s.recv_multipart()[-1])
        except P.ProtocolError as exc:
            raise ControlError(f"{endpoint} answered with a malformed message: {exc}") from None
        if msg[1] != P.REPLY:
            raise ControlError(f"{endpoint} answered {P.KIND_NAMES.get(msg[1])} instead of a reply")
        if not msg[2]:
            raise ControlError(f"{what}: {msg[3]}")
        return msg[3]
    finally:
        s.close()
