"""One definition of a worker's time (pure): compute, communication, waiting and idle.

For each worker, wall time splits into four parts that add up to 100 %:

* **waiting**: the worker is blocked on something that has not arrived -- a peer's part of a
  transfer or collective, the data of a direct upload (``transfer`` events with
  ``direction == "wait"``), or its memory pool moving buffers to and from the spill tier
  (``"spill"``, ``"unspill"``; a ``"prefetch"`` runs beside compute and is no one's time);
* **communication**: bytes move to or from a peer or a client and nothing computes (the other
  ``transfer`` events: ``send``, ``recv``), where it does not overlap waiting;
* **compute**: the rest of the time inside instruction batches (``exec`` events, ``t0..t1``): kernels
  and the worker's own bookkeeping between them;
* **idle**: everything else: no batch is running on the worker.

Where intervals overlap, waiting wins over communication and communication over compute, so every
instant belongs to exactly one part. :class:`TimeAccount` turns one worker's events into such a
partition; the cluster model (``gt top``, ``gt top --json``, ``gt replay``), ``gt trace stats`` and
the Perfetto export all read it, so they show the same numbers.

Events arrive in their publisher's order: a batch's transfer events come before its ``exec`` event
(which is published when the batch ends), so a batch claims the transfers inside it when it ends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

COMPUTE, COMM, WAIT = "compute", "comm", "wait"
KINDS = (COMPUTE, COMM, WAIT)
#: ``transfer`` directions of a worker's memory pool: buffers written to the spill tier or read
#: back when an op needed them (both block the worker: *waiting*), and read back ahead of need by
#: the prefetch thread (in the *background*: it overlaps compute and takes none of the worker's time).
MEMORY_TRAFFIC = frozenset({"spill", "unspill", "prefetch"})
BACKGROUND = frozenset({"prefetch"})

#: Segments kept per worker for windows (the totals keep counting past it).
SEGMENT_HISTORY = 16384
#: Transfers waiting for their batch at most; older ones are counted on their own.
PENDING_LIMIT = 4096


class TimeAccount:
    """One worker's time, as segments ``(t0, t1, part)`` that never overlap, plus running totals.

    Args:
        keep: how many recent segments to keep for :meth:`window` (the totals count them all).

    Attributes:
        segments: the newest segments, oldest first.
        total: nanoseconds per part since the first event.
        first, last: the earliest start and latest end seen (``None`` before any event).
    """

    __slots__ = ("segments", "total", "first", "last", "added", "_pending")

    def __init__(self, keep: int = SEGMENT_HISTORY) -> None:
        self.segments: deque[tuple[int, int, str]] = deque(maxlen=max(1, keep))
        self.total = dict.fromkeys(KINDS, 0)
        self.first: int | None = None
        self.last: int | None = None
        self.added = 0  # segments appended so far (one extended in place does not count)
        self._pending: list[tuple[int, int, str]] = []

    def transfer(self, t0: int, t1: int, waiting: bool) -> None:
        """A transfer (or a wait for one) from ``t0`` to ``t1``."""
        if t1 <= t0:
            return
        self._pending.append((t0, t1, WAIT if waiting else COMM))
        if len(self._pending) > PENDING_LIMIT:  # no batch claims them: count them on their own
            self._settle(self._pending[: PENDING_LIMIT // 2], None)
            del self._pending[: PENDING_LIMIT // 2]

    def batch(self, t0: int, t1: int) -> None:
        """A batch ran from ``t0`` to ``t1``: it claims the transfers inside it."""
        if self.last is not None and t0 < self.last:
            t0 = self.last  # a worker runs one batch at a time: time is never counted twice
        if t1 < t0:
            return
        if not self._pending:  # the usual case: nothing to claim, the batch is all compute
            self._add(t0, t1, COMPUTE)
            if self.first is None or t0 < self.first:
                self.first = t0
            if self.last is None or t1 > self.last:
                self.last = t1
            return
        inside, before, after = [], [], []
        done = self.last
        for a, b, kind in self._pending:
            if done is not None:
                a = max(a, done)  # time already accounted for stays as it was
            if b <= a:
                continue
            if a < t0:  # the part before the batch stands on its own
                before.append((a, min(b, t0), kind))
            if b > t1:  # the part after it waits for the next batch
                after.append((max(a, t1), b, kind))
            if a < t1 and b > t0:
                inside.append((a, b, kind))
        self._pending = after
        if before:
            self._settle(before, None)
        self._settle(inside, (t0, t1))

    def _settle(self, pieces: list[tuple[int, int, str]], within: tuple[int, int] | None) -> None:
        """Add segments: ``pieces`` resolved by rank, and compute for the rest of ``within``."""
        lo = within[0] if within else min(p[0] for p in pieces)
        hi = within[1] if within else max(p[1] for p in pieces)
        if within:
            pieces = [(max(a, lo), min(b, hi), k) for a, b, k in pieces]
        for seg in _partition(lo, hi, pieces, COMPUTE if within else None):
            self._add(*seg)
        if self.first is None or lo < self.first:
            self.first = lo
        if self.last is None or hi > self.last:
            self.last = hi

    def _add(self, t0: int, t1: int, part: str) -> None:
        if t1 <= t0:
            return
        segs = self.segments
        if segs and segs[-1][2] == part and segs[-1][1] == t0:
            segs[-1] = (segs[-1][0], t1, part)  # extend: keeps long runs of batches cheap
        else:
            segs.append((t0, t1, part))
            self.added += 1
        self.total[part] += t1 - t0

    def window(self, lo: int, hi: int) -> dict[str, int]:
        """Nanoseconds of each part inside ``[lo, hi]`` (idle is what remains), counting the
        transfers no batch has claimed yet as they are."""
        out = dict.fromkeys(KINDS, 0)
        for a, b, part in self.parts(lo, hi):
            out[part] += b - a
        return out

    def parts(self, lo: int, hi: int) -> list[tuple[int, int, str]]:
        """The segments inside ``[lo, hi]``, clipped to it, newest first (idle is the gaps), with
        the transfers no batch has claimed yet as they are: what :meth:`window` adds up."""
        out = []
        for t0, t1, part in reversed(self.segments):
            if t1 <= lo:
                break
            a, b = max(t0, lo), min(t1, hi)
            if b > a:
                out.append((a, b, part))
        return out + self.loose(lo, hi)

    def loose(self, lo: int, hi: int) -> list[tuple[int, int, str]]:
        """The transfers no batch has claimed yet, inside ``[lo, hi]``, as segments."""
        if not self._pending:
            return []
        after = self.last if self.last is not None else lo
        loose = [(max(a, after), b, k) for a, b, k in self._pending if b > max(a, after)]
        return _partition(max(lo, after), hi, loose, None) if loose else []

    def totals(self) -> dict[str, int]:
        """Nanoseconds of each part since the first event, unclaimed transfers included."""
        out = dict(self.total)
        if self._pending:
            after = self.last if self.last is not None else min(p[0] for p in self._pending)
            loose = [(max(a, after), b, k) for a, b, k in self._pending if b > max(a, after)]
            hi = max((b for _, b, _ in loose), default=after)
            for a, b, part in _partition(after, hi, loose, None) if loose else ():
                out[part] += b - a
        return out

    def pending(self) -> list[list]:
        """The transfers no batch has claimed yet, as plain data (for keyframes)."""
        return [list(p) for p in self._pending]

    def start(self) -> int | None:
        """The earliest time this account knows about (claimed or not)."""
        firsts = [p[0] for p in self._pending]
        if self.first is not None:
            firsts.append(self.first)
        return min(firsts) if firsts else None


def _partition(
    lo: int, hi: int, pieces: Iterable[tuple[int, int, str]], rest: str | None
) -> list[tuple[int, int, str]]:
    """Split ``[lo, hi]`` into non-overlapping segments: each instant takes the best-ranked piece
    covering it, else ``rest`` (``None``: uncovered time is left out). A sweep over the edges."""
    edges = []
    for a, b, kind in pieces:
        if b > a:
            edges.append((a, 1, kind))
            edges.append((b, -1, kind))
    edges.sort(key=lambda e: e[0])
    active = {WAIT: 0, COMM: 0}
    out: list[tuple[int, int, str]] = []

    def emit(a: int, b: int) -> None:
        part = WAIT if active[WAIT] else (COMM if active[COMM] else rest)
        if part is None or b <= a:
            return
        if out and out[-1][2] == part and out[-1][1] == a:
            out[-1] = (out[-1][0], b, part)
        else:
            out.append((a, b, part))

    t = lo
    for x, delta, kind in edges:
        x = min(max(x, lo), hi)
        emit(t, x)
        t = max(t, x)
        active[kind] += delta
    emit(t, hi)
    return out


def lifetime(lo: int, hi: int, joined: int | None, left: int | None) -> int:
    """The part of ``[lo, hi]`` a worker was there for: from when it joined (``None``: before
    ``lo``) to when it left (``None``: after ``hi``). Its shares are of this, not of ``hi - lo``:
    time before it started or after it died is none of its own, idle included."""
    start = lo if joined is None else max(lo, joined)
    end = hi if left is None else min(hi, left)
    return max(0, end - start)


def shares(parts: dict[str, int], span: int) -> dict[str, float] | None:
    """Fractions of ``span`` per part plus ``idle``: they add up to exactly 1 (None: no span)."""
    if span <= 0:
        return None
    out = {k: min(1.0, parts.get(k, 0) / span) for k in KINDS}
    busy = sum(out.values())
    if busy > 1.0:  # only by rounding: scale, so the four still add up
        out = {k: v / busy for k, v in out.items()}
        busy = 1.0
    out["idle"] = 1.0 - busy
    return out
