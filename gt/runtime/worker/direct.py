"""Batches a client sends straight to its home worker (protocol 4: :class:`~gt.runtime.protocol.Known`).

A client whose batches the dispatcher forwards whole (no shard config, no placed tensor, no
signal) gains nothing from the hop through it: the worker runs them as they come. Once the
dispatcher has forwarded one such batch (:attr:`Run.ack`), the worker knows the client's token,
number and tenant from a trusted source and tells the client (``Known``) on its direct data link;
the client then sends its batches there, and the worker acknowledges them itself: a sync round
trip takes two messages instead of three. The dispatcher hears of them afterwards, one
:class:`~gt.runtime.protocol.Ran` per client every few ms, for its counters; it never waits for
those.

This module keeps the worker's side of it: who may send here, turning a direct ``Batch`` into a
queued :class:`~gt.runtime.worker.schedule.Entry`, and the acknowledgements.
"""

from __future__ import annotations

import time

import zmq

from gt.runtime import protocol as P
from gt.runtime import security
from gt.runtime.sockets import send_parts
from gt.runtime.worker.schedule import Entry, Scheduler

#: Batches one client may have queued from its direct link. An honest client holds at most its
#: window there (:data:`P.DIRECT_WINDOW`) unacknowledged; past this the batch is refused (with
#: an error, so it cannot hang).
DIRECT_QUEUE_MAX = P.DIRECT_WINDOW
#: The dispatcher hears of direct batches at most this late, or once this many are waiting.
DONE_DELAY_S = 0.005
DONE_BATCH = 256


class DirectLink:
    """The clients that send batches straight to this worker, and what it owes the dispatcher.

    Args:
        data: the worker's data ROUTER (clients' direct links).
        sched: the worker's scheduler (direct batches queue there like forwarded ones).
        guarded: the data socket authenticates with CURVE (TCP): senders' roles are checked.
    """

    def __init__(self, data: zmq.Socket, sched: Scheduler, guarded: bool):
        self.data = data
        self.sched = sched
        self.guarded = guarded
        self.clients: dict[bytes, tuple[int, str | None]] = {}  # token -> (client, tenant)
        # per client, what the dispatcher has not heard of yet: [batches, instructions, errors,
        # dropped] (one Ran message each when it is told)
        self.dones: dict[int, list[int]] = {}
        self.owed = 0  # batches in ``dones``
        self.first_done = 0.0  # when the oldest of them ended (time.monotonic)
        self.batches = 0  # direct batches accepted

    def learn(self, run: P.Run) -> None:
        """The dispatcher forwarded a batch of this client whole: from now on it may send here."""
        tok = run.token
        if tok is None or not run.ack:
            return
        who = (run.client, run.tenant)
        if self.clients.get(tok) == who:
            return
        try:
            send_parts(self.data, [tok, P.encode(P.Known(run.client))])
        except zmq.ZMQError:  # no direct link to us (yet: told at its next batch, if it has one)
            return
        self.clients[tok] = who

    def forget(self, client: int) -> None:
        """The client left (or was dropped): batches from its token are refused from now on."""
        for tok in [t for t, who in self.clients.items() if who[0] == client]:
            del self.clients[tok]

    def accept(self, frames: list, msg: P.Batch) -> Entry:
        """A :class:`Batch` that arrived on the data socket as a queued entry.

        Raises:
            ProtocolError: the sender is no client this worker knows (it is told, so it does not
                wait), the message has no body, or the client has too many batches queued.
        """
        tok = frames[0].bytes
        who = self.clients.get(tok)
        if who is None:
            self._refuse(tok, "the worker does not know this client (its dispatcher dropped it, "
                         "or the worker restarted): reconnect")  # fmt: skip
        client, tenant = who  # type: ignore[misc]
        if self.guarded and (
            security.role_of(frames[1]) not in security.RUNS_PROGRAMS
            or security.tenant_of(frames[1]) != tenant
        ):
            raise P.ProtocolError("a direct batch from a connection that may not run it")
        if len(frames) < 3:
            raise P.ProtocolError("a direct batch without a body")
        q = self.sched.queues.get(client)
        if q is not None and len(q) >= DIRECT_QUEUE_MAX:
            self._refuse(tok, f"more than {DIRECT_QUEUE_MAX} batches queued on the direct link")
        run = P.Run(client, msg.seq, msg.n, tok, False, tenant, True)
        entry = Entry([frames[1:], run, None], run)
        entry.direct = True
        self.batches += 1
        return entry

    def _refuse(self, tok: bytes, why: str) -> None:
        try:
            send_parts(self.data, [tok, P.encode(P.Error(P.E_UNKNOWN_CLIENT, why))])
        except zmq.ZMQError:
            pass
        raise P.ProtocolError(why)

    def finished(
        self, entry: Entry, errors: list, n: int, acked: bool, dropped: bool = False
    ) -> None:
        """A direct batch ended: acknowledge it to its client (unless a fetch that ended it did,
        and it found no error) and owe the dispatcher its count."""
        run = entry.msg
        if not dropped and (errors or not acked):
            try:
                send_parts(self.data, [run.token, P.encode(P.Ack(run.seq, errors, acked))])
            except zmq.ZMQError:  # the client is gone
                pass
        if not self.owed:
            self.first_done = time.monotonic()
        self.owed += 1
        c = self.dones.get(run.client)
        if c is None:
            c = self.dones[run.client] = [0, 0, 0, 0]
        c[0] += 1
        c[1] += n
        c[2] += len(errors)
        c[3] += dropped

    def due(self, now: float) -> bool:
        """Whether the dispatcher should be told now."""
        return self.owed >= DONE_BATCH or (self.owed > 0 and now - self.first_done >= DONE_DELAY_S)

    def wait_ms(self, idle_ms: int) -> int:
        """The main loop's poll timeout with ``idle_ms`` its usual one: short while a count is
        owed."""
        if not self.owed:
            return idle_ms
        left = DONE_DELAY_S - (time.monotonic() - self.first_done)
        return min(idle_ms, max(0, int(left * 1000) + 1))

    def flush(self, sock: zmq.Socket) -> None:
        """Tell the dispatcher (on its socket ``sock``) what ran: one :class:`Ran` per client."""
        dones, self.dones, self.owed = self.dones, {}, 0
        for client, (batches, n, errors, dropped) in dones.items():
            send_parts(sock, [P.encode(P.Ran(client, batches, n, errors, dropped))])


__all__ = ["DONE_BATCH", "DONE_DELAY_S", "DIRECT_QUEUE_MAX", "DirectLink"]
