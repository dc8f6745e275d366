"""Control requests to a dispatcher (ping, stats, snapshot, endpoints, config) and the shard-config
client (:class:`ConfigControl`) that ``gt config`` and the dashboard's editor use.

Both the control endpoint and the client front endpoint answer ``CONTROL`` requests, so a tool
given only the address that ``gt dispatcher`` printed can find everything else.
"""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

import zmq

from gt.runtime import protocol as P
from gt.runtime import security


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
        try:
            security.secure_connect(s, endpoint, ("admin", "client", "monitor", "worker"))
        except security.KeysMissing as exc:
            raise ControlError(str(exc)) from None
        s.connect(endpoint)
        s.send(P.encode(P.Control(what, args)))
        if not s.poll(int(timeout * 1000)):
            raise ControlError(
                f"no GT dispatcher answered at {endpoint} within {timeout:g}s"
                + security.silence_hint(endpoint)
            )
        try:
            msg = P.parse(s.recv_multipart()[-1])
        except P.ProtocolError as exc:
            raise ControlError(f"{endpoint} answered with a malformed message: {exc}") from None
        if type(msg) is not P.Reply:
            raise ControlError(f"{endpoint} answered {type(msg).__name__} instead of a reply")
        if not msg.ok:
            raise ControlError(f"{what}: {msg.payload}")
        return msg.payload
    finally:
        s.close()


TOKEN_ENV = "GT_CONTROL_TOKEN"
_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "*", ""}


def is_remote(endpoint: str) -> bool:
    """Whether a ZeroMQ endpoint is on another machine (not IPC, loopback or this host's names)."""
    if not endpoint.startswith("tcp://"):
        return False
    host = urlsplit(endpoint).hostname or ""
    if host in _LOCAL_NAMES or host.startswith("127."):
        return False
    try:
        mine = {socket.gethostname(), socket.getfqdn()}
        mine |= {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        mine = set()
    return host not in mine


class ConfigControl:
    """The shard config of the dispatcher at ``endpoint`` (its control or front endpoint).

    Args:
        endpoint: where to send control requests.
        token: the control endpoint's credentials (default ``$GT_CONTROL_TOKEN``).
        by: who applies (shown in every config event).
        timeout: seconds to wait for each answer.
    """

    def __init__(self, endpoint: str, *, token: str | None = None, by: str = "gt top",
                 timeout: float = 5.0) -> None:  # fmt: skip
        self.endpoint = endpoint
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.by = by
        self.timeout = timeout
        self.remote = is_remote(endpoint)

    def refusal(self) -> str | None:
        """Why applying is not allowed from here (``None``: it is)."""
        if self.remote and not self.token:
            return (f"the dispatcher at {self.endpoint} is remote: applying needs its control "
                    f"credentials (--token or ${TOKEN_ENV})")  # fmt: skip
        return None

    def get(self) -> dict:
        """The running config in normal form (``{"settings", "signals"}``).

        Raises:
            ControlError: no answer, or a refusal.
        """
        got = request(self.endpoint, "config_get", timeout=self.timeout)
        return got if isinstance(got, dict) else {}

    def workers(self) -> list[int]:
        """The ids of the live workers (what a config may name)."""
        stats = request(self.endpoint, "stats", timeout=self.timeout)
        ws = stats.get("workers") if isinstance(stats, dict) else None
        return sorted(w["id"] for w in ws or () if isinstance(w, dict) and w.get("alive", True))

    def apply(self, raw: Any) -> dict:
        """Apply a config for new instructions; returns the normal form the dispatcher installed.

        Raises:
            ControlError: not allowed from here (see :meth:`refusal`), no answer, or the
                dispatcher's precise refusal (the running config then stays in force).
        """
        why = self.refusal()
        if why is not None:
            raise ControlError(why)
        args: dict[str, Any] = {"config": raw, "by": self.by}
        if self.token:
            args["token"] = self.token
        got = request(self.endpoint, "config_apply", args, timeout=self.timeout)
        return got if isinstance(got, dict) else {}
