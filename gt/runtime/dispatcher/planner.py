"""The dispatcher's pure core: who is connected, where each client's tensors live, what to send next.

No sockets here. The dispatcher shell feeds it facts (a worker registered, a batch arrived, a batch
finished, a peer went silent) and carries out the sends it returns. That keeps fairness,
backpressure and failure handling testable without a network.

Placement: every client has a *home worker*, chosen when it connects (the alive worker with the
fewest clients). Its tensors live there unless a shard config places them elsewhere, so a batch of
unannotated instructions is forwarded whole, without decoding each instruction. A batch that the
placement planner rewrote becomes a :class:`MultiBatch`: one part per worker, sent together (so
every worker sees multi-worker batches in the same global order, which keeps their transfers from
deadlocking) once all of those workers have room, and acknowledged once every part is done.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from gt.runtime import protocol as P


@dataclass
class MultiBatch:
    """A client batch rewritten into per-worker parts.

    Attributes:
        seq: the client's batch number.
        parts: worker id -> the payload to send it (``(seq, n_instructions, frames)``).
        errors: planner errors to report in the batch's ACK, with the workers' own errors.
    """

    seq: int
    parts: dict[int, Any]
    errors: list = field(default_factory=list)

    @staticmethod
    def from_program(prog: Any, seq: int, home: int, bufs: list, n_client: int) -> Any:
        """Encode a planned batch (:class:`gt.runtime.sharding.layout.Program`) into per-worker payloads.

        The home worker's part carries the client's upload buffers. A plan that is one part on the
        home worker with no planner errors comes back as a plain single-worker batch.
        """
        targets = set(prog.parts) | set(prog.frees) or {home}
        rewrite = None
        if prog.moves or targets != {home}:
            rewrite = {"moves": dict(prog.moves), "client_n": n_client,
                       "parts": {w: len(prog.parts.get(w, ())) for w in targets}}  # fmt: skip
        parts = {}
        for w in sorted(targets):
            ins = prog.parts.get(w, [])
            body = P.encode_body(ins, prog.frees.get(w, []), prog.free_at.get(w))
            parts[w] = (seq, len(ins), [body, *bufs] if w == home else [body], rewrite)
        if len(parts) == 1 and home in parts and not prog.errors:
            return parts[home]
        return MultiBatch(seq, parts, prog.errors)


@dataclass
class WorkerState:
    """What the dispatcher knows about one worker."""

    wid: int
    ident: bytes
    info: dict
    last_seen: float  # on the dispatcher's running clock (gt.runtime.liveness)
    in_flight: int = 0
    alive: bool = True
    reason: str | None = None  # why it is no longer alive
    local: bool = False  # our own child process: watched through the OS, never timed out
    clients: set[int] = field(default_factory=set)
    running: Counter = field(default_factory=Counter)  # (client, seq) of the batches it holds
    batches_done: int = 0  # run to their end (what the worker's own stats count)
    batches_dropped: int = 0  # cut short because their client left
    instructions_done: int = 0
    stats: dict = field(default_factory=dict)

    def count(self, n_instructions: int, dropped: bool) -> None:
        """A batch of this worker ended (``dropped``: cut short because its client left)."""
        if dropped:
            self.batches_dropped += 1
        else:
            self.batches_done += 1
        self.instructions_done += n_instructions


@dataclass
class ClientState:
    """What the dispatcher knows about one client connection."""

    cno: int
    ident: bytes
    info: dict
    home: int
    last_seen: float
    queue: deque = field(default_factory=deque)
    in_flight: int = 0
    broken: str | None = None
    batches: int = 0
    instructions: int = 0
    errors: int = 0
    direct: bool = False  # whether it was last told its batches may go straight to its worker


class Planner:
    """Fair, bounded scheduling of client batches onto workers.

    Args:
        max_in_flight: batches a worker may hold before the dispatcher stops sending to it. Clients
            whose home worker is full wait in their own queue; round-robin over those queues
            keeps one busy client from starving the others.
    """

    def __init__(self, max_in_flight: int = 4):
        self.max_in_flight = max_in_flight
        self.workers: dict[int, WorkerState] = {}
        self.clients: dict[int, ClientState] = {}
        self._next_wid = 0
        self._next_cno = 1
        self._rr: deque[int] = deque()  # clients with queued batches, in round-robin order
        self.direct_batches = 0  # batches clients sent straight to their workers (count_direct)
        self.pending: dict[tuple[int, int], list] = {}  # (client, seq) -> [parts left, errors]

    # ------------------------------------------------------------------ membership
    def add_worker(self, ident: bytes, info: dict, now: float) -> int:
        """Register a worker; returns its new, never reused id."""
        wid = self._next_wid
        self._next_wid += 1
        self.workers[wid] = WorkerState(wid, ident, info, now)
        return wid

    def alive_workers(self) -> list[WorkerState]:
        """Workers that have not been declared dead, in id order."""
        return [w for w in self.workers.values() if w.alive]

    def add_client(self, ident: bytes, info: dict, now: float) -> ClientState | None:
        """Register a client on the least-loaded alive worker; ``None`` if there is no worker."""
        alive = self.alive_workers()
        if not alive:
            return None
        home = min(alive, key=lambda w: (len(w.clients), w.wid))
        c = ClientState(self._next_cno, ident, info, home.wid, now)
        self._next_cno += 1
        self.clients[c.cno] = c
        home.clients.add(c.cno)
        return c

    def remove_client(self, cno: int) -> ClientState | None:
        """Forget a client (it left or went silent); its queued batches are dropped."""
        c = self.clients.pop(cno, None)
        if c is None:
            return None
        w = self.workers.get(c.home)
        if w is not None:
            w.clients.discard(cno)
        c.queue.clear()
        try:
            self._rr.remove(cno)
        except ValueError:
            pass
        for key in [k for k in self.pending if k[0] == cno]:
            del self.pending[key]
        return c

    def remove_worker(self, wid: int, reason: str) -> list[ClientState]:
        """Declare a worker dead; returns the clients whose tensors lived on it (now broken)."""
        w = self.workers.get(wid)
        if w is None or not w.alive:
            return []
        w.alive, w.reason = False, reason
        w.in_flight = 0
        lost = []
        for cno in sorted(w.clients):
            c = self.clients.get(cno)
            if c is not None and c.broken is None:
                c.broken = reason
                c.queue.clear()
                lost.append(c)
        return lost

    # ------------------------------------------------------------------ scheduling
    def submit(self, cno: int, batch: Any) -> list[tuple[WorkerState, ClientState, Any]]:
        """Queue a client batch (or a :class:`MultiBatch`); returns the sends that may happen now."""
        c = self.clients[cno]
        c.batches += 1
        if not c.queue:
            if type(batch) is not MultiBatch:
                w = self.workers[c.home]
                if w.in_flight < self.max_in_flight and not self._rr:
                    # Fast path: nothing waiting anywhere, send at once.
                    w.in_flight += 1
                    c.in_flight += 1
                    return [(w, c, batch)]
            elif not self._rr and self._room(c, batch):
                return self._take(c, batch)
            self._rr.append(cno)
        c.queue.append(batch)
        return self.schedule()

    def _room(self, c: ClientState, batch: Any) -> bool:
        if type(batch) is MultiBatch:
            ws = [self.workers.get(wid) for wid in batch.parts]
        else:
            ws = [self.workers[c.home]]
        return all(w is not None and w.alive and w.in_flight < self.max_in_flight for w in ws)

    def _take(self, c: ClientState, batch: Any) -> list[tuple[WorkerState, ClientState, Any]]:
        c.in_flight += 1
        if type(batch) is not MultiBatch:
            w = self.workers[c.home]
            w.in_flight += 1
            return [(w, c, batch)]
        self.pending[(c.cno, batch.seq)] = [len(batch.parts), list(batch.errors)]
        sends = []
        for wid, payload in batch.parts.items():
            w = self.workers[wid]
            w.in_flight += 1
            sends.append((w, c, payload))
        return sends

    def done(
        self, wid: int, cno: int, n_instructions: int
    ) -> list[tuple[WorkerState, ClientState, Any]]:
        """A worker finished a (single-worker) batch; returns the sends this frees up."""
        return self.finish(wid, cno, None, n_instructions, [])[0]

    def finish(
        self,
        wid: int,
        cno: int,
        seq: int | None,
        n_instructions: int,
        errors: list,
        dropped: bool = False,
    ) -> tuple[list[tuple[WorkerState, ClientState, Any]], list | None]:
        """A worker finished a batch or a part of one (``dropped``: its client left first).

        Returns:
            The sends this frees up, and the errors to acknowledge the client batch with -- or
            ``None`` while other parts of it are still running.
        """
        w = self.workers.get(wid)
        if w is not None and w.in_flight > 0:
            w.in_flight -= 1
            w.count(n_instructions, dropped)
        c = self.clients.get(cno)
        ack: list | None = errors
        pend = self.pending.get((cno, seq)) if seq is not None else None
        if pend is not None:
            pend[0] -= 1
            pend[1].extend(errors)
            if pend[0] > 0:
                ack = None
            else:
                del self.pending[(cno, seq)]
                ack = pend[1]
        if c is not None:
            c.instructions += n_instructions
            if ack is not None and c.in_flight > 0:
                c.in_flight -= 1
        return (self.schedule() if self._rr else []), ack

    def count_direct(self, wid: int, ran: Any) -> None:
        """Count the batches a client sent straight to its worker, which ran them (and
        acknowledged them): ``ran`` is the worker's :class:`~gt.runtime.protocol.Ran`. They never
        held a place in the dispatcher's queues."""
        w = self.workers.get(wid)
        if w is not None:
            w.batches_done += ran.batches - ran.dropped
            w.batches_dropped += ran.dropped
            w.instructions_done += ran.n
        c = self.clients.get(ran.client)
        if c is not None:
            c.batches += ran.batches
            c.instructions += ran.n
            c.errors += ran.errors
        self.direct_batches += ran.batches

    def schedule(self) -> list[tuple[WorkerState, ClientState, Any]]:
        """Round-robin over clients with queued batches while their workers have room.

        A client that sends goes to the back of the line; one whose worker is full keeps its place.
        """
        sends = []
        progress = True
        while progress and self._rr:
            progress = False
            waiting: list[int] = []
            served: list[int] = []
            for cno in self._rr:
                c = self.clients.get(cno)
                if c is None or not c.queue:
                    continue
                if self._room(c, c.queue[0]):
                    sends.extend(self._take(c, c.queue.popleft()))
                    progress = True
                    if c.queue:
                        served.append(cno)
                else:
                    waiting.append(cno)
            self._rr = deque(waiting + served)
        return sends
