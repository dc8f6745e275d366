"""Which batch a worker runs next (pure): each client's batches in order, clients in turn.

A worker serves many clients. Their batches wait in one queue per client; the clients with work
take turns, one batch each, so a client that sends many batches does not hold up one that sends
few. A batch that runs long while another client waits is cut into *slices*: the executor stops
between two instructions after :data:`SLICE_S` and the other client's batch goes first (the long
one resumes where it stopped). A slice can only end between instructions, so it runs past
:data:`SLICE_S` by part of one; what a client's slices overran is taken off its next ones (its
*debt*), so a client whose instructions are long (spilling, say) gets the same share of the
worker's time as one whose instructions are short.

Batches the dispatcher's planner wrote (``planned``) hold transfers and collectives that pair up
with other workers' parts of the same batch. They are never cut, and they start in the order they
arrived, whoever sent them: the dispatcher sends planned batches to every worker in one order, so
every worker runs them in that order. Turn-taking alone could order two clients' planned batches
differently on two workers, each then waiting for the other's part: a deadlock.
"""

from __future__ import annotations

from collections import deque
from typing import Any

#: Seconds a batch runs, at most, while another client's batch waits (then it yields).
SLICE_S = 0.005
#: Seconds between two looks for a waiting client once a slice is over and none was waiting.
RECHECK_S = 0.001
#: The most overrun a client carries into its next slices (so a very long instruction costs its
#: client a few short turns, not a long wait).
DEBT_MAX_S = 4 * SLICE_S


class Entry:
    """One queued batch: its message, the executor's job once started, its time so far."""

    __slots__ = ("item", "msg", "job", "busy_ns", "planned", "n", "direct")

    def __init__(self, item: Any, msg: Any, planned: bool = False) -> None:
        self.item, self.msg, self.planned = item, msg, planned
        self.direct = False  # sent straight to this worker (gt.runtime.worker.direct)
        self.job: Any = None
        self.busy_ns = 0
        self.n = 0  # arrival number, set by the scheduler


class Scheduler:
    """Per-client queues and the round-robin order of the clients that have work."""

    def __init__(self) -> None:
        self.queues: dict[int, deque[Entry]] = {}
        self.order: deque[int] = deque()
        self._planned: deque[int] = deque()  # arrival numbers of the planned batches queued
        self._arrivals = 0
        self._current: int | None = None
        self.debt: dict[int, float] = {}  # seconds each client's slices ran past their budget

    def budget(self, client: int) -> float:
        """Seconds the client's next slice may run while another client waits (at least one
        instruction always runs)."""
        return max(0.0, SLICE_S - self.debt.get(client, 0.0))

    def charge(self, client: int, ran_s: float) -> None:
        """The client's slice ran ``ran_s`` seconds while another client waited: what it ran past
        :data:`SLICE_S` (less what earlier slices left unused, never below nothing) is its debt."""
        d = min(DEBT_MAX_S, self.debt.get(client, 0.0) + ran_s - SLICE_S)
        if d > 0:
            self.debt[client] = d
        else:
            self.debt.pop(client, None)

    def add(self, client: int, entry: Entry) -> None:
        """Queue a batch behind the client's earlier ones."""
        self._arrivals += 1
        entry.n = self._arrivals
        if entry.planned:
            self._planned.append(entry.n)
        q = self.queues.setdefault(client, deque())
        q.append(entry)
        if len(q) == 1:
            self.order.append(client)

    def next(self) -> Entry | None:
        """The batch to run (or resume) now: the first client in turn whose next batch may start.

        There always is one when anything is queued: the oldest planned batch's client has it,
        or an earlier batch of its own, at the head of its queue.
        """
        for client in self.order:
            e = self.queues[client][0]
            if not e.planned or e.n == self._planned[0]:
                self._current = client
                return e
        return None

    def others_waiting(self, client: int) -> bool:
        """Whether a client other than ``client`` has a batch waiting."""
        return any(c != client for c in self.order)

    def finished(self) -> None:
        """The current batch ended: its client goes to the back of the line (if it has more)."""
        client = self._take_current()
        q = self.queues[client]
        if q.popleft().planned:
            self._planned.popleft()  # planned batches end in arrival order
        if q:
            self.order.append(client)
        else:
            del self.queues[client]
            self.debt.pop(client, None)  # idle now: its next turn starts afresh

    def yielded(self) -> None:
        """The current batch stopped for another client's: the others go first."""
        self.order.append(self._take_current())

    def _take_current(self) -> int:
        client, self._current = self._current, None
        if client is None:
            raise RuntimeError("no batch is running: call next() first")
        self.order.remove(client)
        return client

    def drop(self, client: int) -> list[Entry]:
        """Forget a client's batches (it left); returns them (each still needs its Done)."""
        self.debt.pop(client, None)
        q = self.queues.pop(client, None)
        if q is None:
            return []
        self.order.remove(client)
        gone = {e.n for e in q if e.planned}
        if gone:
            self._planned = deque(n for n in self._planned if n not in gone)
        if self._current == client:
            self._current = None
        return list(q)

    def count(self) -> int:
        """Batches queued, the one running (or resuming) included."""
        return sum(map(len, self.queues.values()))

    def waiting(self) -> list[Entry]:
        """Every queued batch not started yet, in about the order they will start."""
        out = []
        for client in self.order:
            out.extend(e for e in self.queues[client] if e.job is None)
        return out

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values())
