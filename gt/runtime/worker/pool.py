"""A worker's memory pool: a limit that holds, spilling, prefetch and per-client quotas.

The executor keeps each client's tensors in a table ``id -> array``. Once a limit is set, those
tables are :class:`TrackedTable` s, which tell the :class:`MemoryPool` what is stored and dropped:

* **Counting.** Bytes are counted once per *buffer* (see :func:`~gt.runtime.worker.spill.root_of`):
  a transpose or a broadcast view adds nothing; the buffer goes when its last tensor does.
* **Spilling.** When what is held passes ``spill_threshold × limit`` (or a client's quota times the
  threshold), buffers move to the spill tier until it is back under: first those no queued
  instruction needs, least recently used first; else the one needed furthest ahead (the worker can
  see its queue). The inputs of the running instruction are never spilled.
* **Unspilling.** A spilled tensor is not in the table; reading it (``table[id]``) brings its buffer
  back, with every view over it, and that time is a *wait* on the timeline.
* **Prefetch.** A thread walks the queued instructions ahead of the executor and brings back the
  spilled buffers they need, up to ``prefetch`` bytes and the headroom between the threshold and
  the limit; a read that finds its buffer already back is a prefetch hit. It runs below the
  executor's priority, for the running client only, and not at all while clients share the worker
  (their reads on demand then fall in their own turns).
* **Clean copies.** A buffer read back from the spill file keeps its extent there (its views are
  read-only), so spilling it again writes nothing.
* **Out of memory.** A result that does not fit even after spilling everything else it may spill
  fails its op with :class:`OutOfMemory`; nothing else is affected and the worker keeps running.

On NumPy workers the result of an op exists for a moment before it is refused (the limit is checked
as results are stored); on CuPy the pool's own limit refuses the allocation, and the executor
spills and retries once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from gt.runtime.memory_settings import human
from gt.runtime.worker.pool_table import (
    Accounts,
    OutOfMemory,
    PoolBuffer,
    SpilledBuffer,
    TrackedTable,
    allocation_size,
    device_out_of_memory,
    over_limit,
)
from gt.runtime.worker.prefetch import Prefetcher
from gt.runtime.worker.spill import FileExtent, SpillStore, root_of, spillable, view_of

#: Buffers smaller than this are never spilled (moving them costs more than they hold).
SPILL_MIN_BYTES = 4096
#: Candidates looked at (oldest first) when choosing what to spill.
VICTIM_SCAN = 64
#: Instructions ahead that the prefetch thread and the spill choice look at.
LOOKAHEAD = 2048
_FAR = 1 << 62


_LIMIT = "this worker's memory limit of {} (--memory-limit, GT_MEMORY_LIMIT)"


class MemoryPool(Accounts, Prefetcher):
    """The books of one worker's memory, and the spill tier and prefetch thread behind them.

    Args:
        limit: bytes the worker may hold (``None``: no limit).
        client_limit: bytes each client may hold on this worker (``None``: no quota); the
            programs of one tenant (``account``: a tenant's own key) share one quota.
        threshold: spill when above ``threshold × limit`` (keeping the rest free for results and
            prefetches).
        prefetch: bytes the prefetch thread may bring back ahead of need (0: no prefetch).
        store: the spill tier.
        transfer: ``transfer(direction, t0, t1, nbytes, cno)``, told of every spill (``"spill"``),
            read back on demand (``"unspill"``) and prefetch (``"prefetch"``).
    """

    def __init__(
        self,
        *,
        limit: int | None = None,
        client_limit: int | None = None,
        threshold: float = 0.8,
        prefetch: int = 0,
        store: SpillStore | None = None,
        transfer: Callable[[str, int, int, int, int], None] | None = None,
    ) -> None:
        self.limit, self.client_limit, self.threshold = limit, client_limit, threshold
        self.prefetch = prefetch
        self.ram_cap: int | None = (
            None  # a NumPy worker's (gt.runtime.worker.ram_cap): named in errors
        )
        self.store = store or SpillStore()
        self.transfer = transfer
        self.tables: dict[int, TrackedTable] = {}
        self.bufs: OrderedDict[int, PoolBuffer] = OrderedDict()  # least recently used first
        self.where: dict[tuple[int, int], int] = {}  # (client, tensor) -> buffer key
        self.spilled: dict[tuple[int, int], SpilledBuffer] = {}
        self.used = 0
        self.client_used: dict[int, int] = {}
        self.accounts: dict[int, str] = {}  # client -> its tenant (see Accounts)
        self.peak = 0
        self.spilled_bytes = 0
        self.tier_error: str | None = None  # why the last spill failed (the tier is full)
        self.ready_bytes = 0  # prefetched, not yet claimed (counts against the limit)
        self.loading_bytes = 0
        self.counters = dict.fromkeys(
            ("spill_out", "spill_in", "prefetched", "prefetch_hits", "prefetch_misses", "oom",
             "spill_reused"), 0
        )  # fmt: skip
        self.op = -1  # opcode of the running instruction (named in out-of-memory errors)
        self.running: int | None = None  # the client whose batch runs (or ran last)
        self._turns: dict[int, float] = {}  # client -> when its last turn began (monotonic s)
        self.cursor = 0  # index into upcoming of the running instruction
        # What :meth:`plan` was given, and what it makes of it once asked (see ``upcoming``).
        self._queued: list[tuple] = []
        self._planned = True
        self._upcoming: list[tuple] = []
        self._positions: dict[tuple[int, int], list[int]] = {}
        self._dying: set[tuple[int, int]] = set()
        self._current: tuple = ()
        self.lock = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        if prefetch:
            self._start_prefetch()

    # ------------------------------------------------------------------ settings
    def configure(self, *, limit: Any = ..., client_limit: Any = ..., threshold: Any = ...,
                  prefetch: Any = ...) -> None:  # fmt: skip
        """Change settings while running (``...``: unchanged); a lower limit spills at once."""
        if limit is not ...:
            self.limit = limit
        if client_limit is not ...:
            self.client_limit = client_limit
        if threshold is not ...:
            self.threshold = threshold
        if prefetch is not ...:
            self.prefetch = prefetch
            if prefetch and self._thread is None:
                self._start_prefetch()
        self.relieve()

    def table(self, cno: int, existing: dict | None = None) -> TrackedTable:
        """The tracked table of client ``cno`` (taking over the tensors of ``existing``)."""
        t = TrackedTable(self, cno)
        self.tables[cno] = t
        for tid, arr in (existing or {}).items():
            dict.__setitem__(t, tid, arr)
            self.ref(cno, tid, arr, check=False)
        return t

    # ------------------------------------------------------------------ books
    def ref(self, cno: int, tid: int, arr: Any, check: bool = True) -> None:
        """Tensor ``tid`` of ``cno`` now holds ``arr`` (spills or raises if it does not fit)."""
        r = root_of(arr)
        if r is None:
            return
        key, root, nbytes = r
        buf = self.bufs.get(key)
        if buf is None:
            buf = self.bufs[key] = PoolBuffer(root, nbytes, cno)
            self.used += nbytes
            self.client_used[cno] = self.client_used.get(cno, 0) + nbytes
            if check:
                buf.refs.add(tid)
                self.where[(cno, tid)] = key
                self._fit(cno, key, nbytes)
                if self.used > self.peak:  # (what is held once a result is in; see the module doc)
                    self.peak = self.used
                return
        else:
            self.bufs.move_to_end(key)
        buf.refs.add(tid)
        self.where[(cno, tid)] = key

    def unref(self, cno: int, tid: int) -> None:
        """Tensor ``tid`` of ``cno`` no longer holds its array."""
        key = self.where.pop((cno, tid), None)
        if key is None:
            return
        buf = self.bufs.get(key)
        if buf is None:
            return
        buf.refs.discard(tid)
        if not buf.refs:
            del self.bufs[key]
            self._uncount(buf)
            if buf.clean is not None:
                self.store.drop(buf.clean)

    def _uncount(self, buf: PoolBuffer) -> None:
        self.used -= buf.nbytes
        left = self.client_used.get(buf.cno, 0) - buf.nbytes
        if left > 0:
            self.client_used[buf.cno] = left
        else:
            self.client_used.pop(buf.cno, None)

    def step(self, cno: int, args: list, op: int) -> None:
        """The executor is about to run an instruction reading ``args``: they are now the most
        recently used, and never spilled while it runs."""
        self.op = op
        self.cursor += 1
        cur = []
        where, bufs = self.where, self.bufs
        for a in args:
            if type(a) is int:
                k = where.get((cno, a))
                if k is not None:
                    bufs.move_to_end(k)
                    cur.append(k)
        self._current = tuple(cur)

    def plan(self, batches: list[tuple]) -> None:
        """The instructions queued, in the order they will run: ``[(client, instrs, frees), ...]``
        (the running batch first; ``frees`` may be left out). Spill choices and prefetches look at
        them, and what a queued batch frees is not worth spilling (it is about to go).

        Only kept here: what they read and when is worked out the first time a spill or a
        prefetch asks (:attr:`upcoming`), which under no pressure is never. Working it out for
        every batch cost a few µs an instruction: a limit made tiny ops 4.5x slower."""
        with self.lock:
            self._queued, self._planned, self.cursor = batches, False, -1
            self.running = batches[0][0] if batches else None
            if self.running is not None:
                self._turns[self.running] = time.monotonic()
            if self.spilled:
                self.lock.notify_all()

    @property
    def upcoming(self) -> list[tuple]:
        """Per queued instruction (up to ``LOOKAHEAD``), the ``(client, tensor)`` keys it reads."""
        self._make_plan()
        return self._upcoming

    @property
    def positions(self) -> dict[tuple[int, int], list[int]]:
        """Per ``(client, tensor)``, the indices into :attr:`upcoming` of the instructions that
        read it, in order."""
        self._make_plan()
        return self._positions

    @property
    def dying(self) -> set[tuple[int, int]]:
        """The ``(client, tensor)`` keys a queued batch frees: never worth spilling."""
        self._make_plan()
        return self._dying

    def _make_plan(self) -> None:
        if self._planned:
            return
        with self.lock:  # (the prefetch thread asks too: never a plan of batches since replaced)
            if self._planned:
                return
            upcoming: list[tuple] = []
            positions: dict[tuple[int, int], list[int]] = {}
            dying: set[tuple[int, int]] = set()
            for cno, instrs, *rest in self._queued:
                for tid in (rest[0] if rest else ()) or ():
                    if type(tid) is int:
                        dying.add((cno, tid))
                for ins in instrs:
                    if len(upcoming) >= LOOKAHEAD:
                        break
                    try:
                        args = ins[2]
                        keys = tuple((cno, a) for a in args if type(a) is int)
                    except (TypeError, IndexError):
                        keys = ()
                    for k in keys:
                        positions.setdefault(k, []).append(len(upcoming))
                    upcoming.append(keys)
            self._upcoming, self._positions, self._dying = upcoming, positions, dying
            self._queued, self._planned = [], True

    def _next_use(self, cno: int, tids: set[int]) -> int:
        best = _FAR
        cur = self.cursor
        for t in tids:
            for p in self.positions.get((cno, t), ()):
                if p > cur:
                    best = min(best, p)
                    break
        return best

    # ------------------------------------------------------------------ pressure
    def _fit(self, cno: int, protect: int, requested: int) -> None:
        """Spill until under the thresholds; raise :class:`OutOfMemory` if over a limit after."""
        cl = self.client_limit
        a = self.accounts.get(cno, cno)
        if cl is not None and self.account_used(a) > cl * self.threshold:
            self._spill_down(lambda: self.account_used(a) <= cl * self.threshold,
                             self._account_members(a), protect)  # fmt: skip
            if self.account_used(a) > cl:
                whose = f"client {cno}'s" if a == cno else f"tenant {a}'s (all its programs')"
                self._oom(cno, requested, cl, f"{whose} quota of {human(cl)} on this "
                          "worker (--client-memory-limit)", self.account_used(a))  # fmt: skip
        lim = self.limit
        if lim is not None and self.used > lim * self.threshold:
            # Prefetched buffers do not count here: they were read into the headroom between the
            # threshold and the limit, and spilling to make room for them would undo the prefetch.
            self._spill_down(lambda: self.used <= lim * self.threshold, None, protect)
            if self.used + self.ready_bytes > lim:
                self._drop_ready()
            if self.used > lim:
                self._oom(cno, requested, lim, _LIMIT.format(human(lim)))

    def relieve(self) -> None:
        """Spill down to the thresholds now (after a setting changed, or the device ran out)."""
        if self.limit is not None and self.used > self.limit * self.threshold:
            self._spill_down(lambda: self.used <= self.limit * self.threshold, None, None)
        if self.client_limit is not None:
            for a in [a for a in self._accounts() if self.account_used(a) > self.client_limit]:
                self._spill_down(
                    lambda a=a: self.account_used(a) <= self.client_limit * self.threshold,
                    self._account_members(a), None,
                )  # fmt: skip

    def make_room(self) -> bool:
        """The device refused an allocation: spill a quarter of what is held (least needed
        first). Returns whether anything was spilled."""
        before = self.used
        goal = before * 3 // 4
        self._spill_down(lambda: self.used <= goal, None, None)
        return self.used < before

    def _spill_down(self, done: Callable[[], bool], who: set[int] | None,
                    protect: int | None) -> None:  # fmt: skip
        """Spill buffers of the clients ``who`` (``None``: anyone's, over-quota accounts' first)
        until ``done()``."""
        while not done():
            key = None
            if who is None and self.client_limit is not None:  # over-quota accounts go first
                for a in self._accounts():
                    if self.account_used(a) > self.client_limit * self.threshold:
                        key = self._victim(self._account_members(a), protect)
                        if key is not None:
                            break
            if key is None:
                key = self._victim(who, protect)
            if key is None:
                return
            try:
                self._spill(key)
            except OSError as exc:  # the tier is full (or gone): nothing more can go there now
                self.tier_error = exc.strerror or str(exc)
                return

    def _victim(self, who: set[int] | None, protect: int | None) -> int | None:
        """What to spill: unneeded and least recently used first, else needed furthest ahead.

        A buffer a queued batch frees is spilled only when nothing else can go: writing it out
        would be wasted I/O."""
        best, best_use, seen, doomed = None, -1, 0, None
        current, dying = self._current, self.dying
        for key, buf in self.bufs.items():
            if seen >= VICTIM_SCAN:
                break
            if (key == protect or buf.nbytes < SPILL_MIN_BYTES or key in current
                    or (who is not None and buf.cno not in who) or not spillable(buf.root)):  # fmt: skip
                continue
            seen += 1
            if dying and all((buf.cno, t) in dying for t in buf.refs):
                doomed = doomed if doomed is not None else key
                continue
            use = self._next_use(buf.cno, buf.refs)
            if use == _FAR:
                return key
            if use > best_use:
                best, best_use = key, use
        return best if best is not None else doomed

    def _spill(self, key: int) -> None:
        """Move one buffer to the tier. Raises ``OSError`` (the tier full) before changing
        anything: the buffer then stays where it was, whole."""
        buf = self.bufs[key]
        table = self.tables[buf.cno]
        views = {tid: view_of(dict.__getitem__(table, tid), buf.root) for tid in buf.refs}
        handle = buf.clean
        if handle is None:
            t0 = time.monotonic_ns()
            handle = self.store.put(buf.root)
            t1 = time.monotonic_ns()
            self.tier_error = None
        else:  # its bytes are in the tier already, unchanged since they were read back
            self.counters["spill_reused"] += buf.nbytes
        del self.bufs[key]
        for tid in buf.refs:
            dict.pop(table, tid, None)
            self.where.pop((buf.cno, tid), None)
        rec = SpilledBuffer(buf.cno, buf.nbytes, handle, views)
        with self.lock:
            for tid in views:
                self.spilled[(buf.cno, tid)] = rec
            self.spilled_bytes += buf.nbytes
            self.lock.notify_all()
        self._uncount(buf)
        self.counters["spill_out"] += buf.nbytes
        if self.transfer is not None and buf.clean is None:
            self.transfer("spill", t0, t1, buf.nbytes, buf.cno)

    def _drop_ready(self) -> None:
        """Give back prefetched buffers nobody has claimed yet (they stay in the spill tier)."""
        with self.lock:
            for rec in set(self.spilled.values()):
                if rec.state == "ready":
                    rec.state, rec.data = "out", None
                    self.ready_bytes -= rec.nbytes

    def device_refused(self, exc: MemoryError, op: int) -> OutOfMemory:
        """The error for an allocation the device refused although nothing more could be spilled.

        When the allocation would pass the worker's limit, the error is the limit's, with the
        size the allocator asked for: the device's pool holds that limit, and refuses before the
        result exists to be counted. Otherwise the device itself is full (other processes, or
        tensors that cannot be spilled)."""
        self.counters["oom"] += 1
        requested, lim = allocation_size(exc), self.limit
        if lim is not None and requested is not None and self.used + requested > lim:
            return over_limit(op, requested, lim, _LIMIT.format(human(lim)) + ", which the "
                              "device's memory pool holds", self.used, self.spilled_bytes)  # fmt: skip
        return device_out_of_memory(exc, op, self.used, self.spilled_bytes, self.ram_cap)

    def _oom(self, cno: int, requested: int, limit: int, what: str,
             held: int | None = None) -> None:  # fmt: skip
        """Raise :class:`OutOfMemory` for ``limit`` (``held``: what counts against it, by
        default everything resident)."""
        self.counters["oom"] += 1
        held = self.used if held is None else held
        err = over_limit(self.op, requested, limit, what, held, self.spilled_bytes)
        if self.tier_error is not None:  # (why more could not be spilled)
            where = getattr(self.store, "parent", None) or "the temp folder"
            err.args = (f"{err.args[0]}. The spill tier refused more ({self.tier_error}: "
                        f"{where}; GT_SPILL_DIR picks another)", *err.args[1:])  # fmt: skip
        raise err

    # ------------------------------------------------------------------ back from the tier
    def _read_back(self, rec: SpilledBuffer) -> Any:
        """A spilled buffer's bytes in a new allocation. When the device refuses it (its pool's
        limit: GT's accounting lets prefetched buffers fill the headroom), others are spilled to
        make room; if nothing more can go, the buffer stays spilled and the op fails."""
        while True:
            try:
                return self.store.get(rec.handle, rec.nbytes)
            except OutOfMemory:
                raise
            except MemoryError as exc:
                if self.make_room():
                    continue
                with self.lock:  # still in the tier: a later op may bring it back
                    rec.state = "out"
                    for t in rec.views:
                        self.spilled[(rec.cno, t)] = rec
                    self.spilled_bytes += rec.nbytes
                raise self.device_refused(exc, self.op) from None

    def unspill(self, cno: int, tid: int) -> Any:
        """Bring a spilled tensor back (with every view over its buffer); ``KeyError`` if it is
        not spilled."""
        key = (cno, tid)
        with self.lock:
            rec = self.spilled.get(key)
            if rec is None:
                raise KeyError(tid)
            t0 = time.monotonic_ns()
            # A read the prefetch thread has begun is not waited for: that thread runs below the
            # executor's priority and may be starved by the very work waiting on it. The executor
            # reads the buffer itself; the thread's copy is discarded when it arrives.
            raw = None
            if rec.state == "ready":
                raw, rec.data = rec.data, None
                self.ready_bytes -= rec.nbytes
                self.counters["prefetch_hits"] += 1
            rec.state = "gone"
            for t in rec.views:
                self.spilled.pop((rec.cno, t), None)
            self.spilled_bytes -= rec.nbytes
        missed = raw is None
        if missed:
            self.counters["prefetch_misses"] += 1
            raw = self._read_back(rec)
        # The extent stays as the buffer's clean copy: the views come back read-only (no kernel writes
        # into them; an in-place op works on a copy, see ops.base.private), so spilling the buffer
        # again needs no write. Other tiers' copies are let go.
        keep = isinstance(rec.handle, FileExtent) and isinstance(raw, np.ndarray)
        if not keep:
            self.store.drop(rec.handle)
        t1 = time.monotonic_ns()
        # Every read is on the timeline once: a prefetch hit was read (and shown) by the prefetch
        # thread, a miss is read here, however quickly (the page cache often answers in < 50 us).
        if missed and self.transfer is not None:
            self.transfer("unspill", t0, t1, rec.nbytes, cno)
        self.counters["spill_in"] += rec.nbytes
        table = self.tables[cno]
        r = root_of(raw)
        if r is not None:
            self._current += (r[0],)  # an input of the running instruction: never spilled under it
        out = None
        for t, view in rec.views.items():
            arr = self.store.rebuild(raw, view)
            if keep:
                arr.flags.writeable = False
            dict.__setitem__(table, t, arr)
            self.ref(cno, t, arr, check=False)
            if t == tid:
                out = arr
        if keep and r is not None:
            buf = self.bufs.get(r[0])
            if buf is not None and buf.root is raw:
                buf.clean = rec.handle
            else:  # (no view was stored over it)
                self.store.drop(rec.handle)
        self._fit_quietly(cno, r[0] if r else None)
        self.peak = max(self.peak, self.used)
        return out

    def _fit_quietly(self, cno: int, protect: int | None) -> None:
        try:
            self._fit(cno, protect, 0)
        except OutOfMemory:
            self.counters["oom"] -= 1  # inputs must be resident; the result's check decides

    def forget_spilled(self, cno: int, tid: int) -> bool:
        """Free a spilled tensor; whether it was spilled."""
        if not self.spilled:  # (only this thread adds to it: no lock needed to see it empty)
            return False
        with self.lock:
            rec = self.spilled.pop((cno, tid), None)
            if rec is None:
                return False
            rec.views.pop(tid, None)
            if not rec.views:
                self._discard(rec)
        return True

    def _discard(self, rec: SpilledBuffer) -> None:
        """(Under the lock.) The last tensor of a spilled buffer is gone."""
        if rec.state == "ready":
            self.ready_bytes -= rec.nbytes
        self.spilled_bytes -= rec.nbytes
        rec.state, rec.data = "gone", None
        self.store.drop(rec.handle)

    def drop_client(self, cno: int) -> None:
        """Forget everything of a client that left (resident and spilled)."""
        self.tables.pop(cno, None)
        self._turns.pop(cno, None)
        for key in [k for k, b in self.bufs.items() if b.cno == cno]:
            buf = self.bufs.pop(key)
            self._uncount(buf)
            if buf.clean is not None:
                self.store.drop(buf.clean)
        for k in [k for k in self.where if k[0] == cno]:
            del self.where[k]
        with self.lock:
            recs = {id(r): r for k, r in self.spilled.items() if k[0] == cno}
            for k in [k for k in self.spilled if k[0] == cno]:
                del self.spilled[k]
            for rec in recs.values():
                self._discard(rec)
        self.client_used.pop(cno, None)
        with self.lock:
            self.accounts.pop(cno, None)

    # ------------------------------------------------------------------ reporting
    def client_spilled(self) -> dict[int, int]:
        """Bytes in the spill tier per client."""
        out: dict[int, int] = {}
        with self.lock:
            for rec in {id(r): r for r in self.spilled.values()}.values():
                out[rec.cno] = out.get(rec.cno, 0) + rec.nbytes
        return out

    def snapshot(self) -> dict:
        """The numbers a memory event carries."""
        return {
            "used": self.used,
            "limit": self.limit,
            "client_limit": self.client_limit,
            "spilled": self.spilled_bytes,
            "prefetched_ready": self.ready_bytes,
            "peak": self.peak,
            "clients": {c: [u, 0] for c, u in self.client_used.items()},
            **self.counters,
        }

    def close(self) -> None:
        """Stop the prefetch thread and remove the spill tier."""
        with self.lock:
            self._stop = True
            self.lock.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.store.close()
