"""Reading the cluster model: per-worker and per-client state as of a moment (pure functions).

:meth:`gt.trace.model.ClusterModel.state` calls these; they read the model's records and never
change them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gt.trace.records import ClientRecord, WorkerRecord, as_int, as_num
from gt.trace.state import ClientState, DeviceState, MemoryState, OpStat, WorkerState
from gt.trace.timeshare import COMM, COMPUTE, MEMORY_TRAFFIC, WAIT, shares

#: A worker's last op is its current op for this long after its batch ended (then it runs nothing)
CURRENT_NS = 1_000_000_000

if TYPE_CHECKING:
    from gt.trace.model import ClusterModel


def worker_state(model: ClusterModel, w: WorkerRecord, now: int) -> WorkerState:
    """What a worker is doing as of ``now``: shares, rates, memory and device over the model's window."""
    lo = now - model.window_ns
    win = model.window_ns or 1
    n_recent = 0
    for t0, t1, n, *_ in reversed(w.execs):
        if t1 < lo:
            break
        if t0 <= now and t1 <= now:
            n_recent += n
    moved = 0
    for t0, t1, _peer, nbytes, d in reversed(w.xfers):
        if t1 < lo:
            break
        if t0 <= now and d not in MEMORY_TRAFFIC:
            moved += nbytes
    # Shares over the window, or over the part of it since the worker was first seen.
    known = [t for t in (w.seen, w.time.start()) if t is not None]
    since = max(lo, min(known)) if known else lo
    run = w.running if w.alive and w.running is not None and w.running[0] < now else None
    raw = w.time.window(since, now) if (w.execs or w.xfers or run) else None
    if run is not None:  # a batch still running (busy events): computing since it began
        begun = max(run[0], since, w.time.last or run[0])
        raw = {**raw, COMPUTE: raw.get(COMPUTE, 0) + max(0, now - begun)}
    parts = shares(raw, now - since) if raw is not None else None
    rate = n_recent / (win / 1e9) if w.execs else None
    tot = w.time.totals()
    since_ever = min(known) if known else None
    if rate is None and len(w.snaps) == 2 and w.snaps[1][0] > w.snaps[0][0]:
        (ta, ia), (tb, ib) = w.snaps
        rate = (ib - ia) / ((tb - ta) / 1e9)
    current = src = None
    if run is not None and run[1] is not None:
        current = model.op_name(run[1])
        src = model.srclocs.get((run[2], run[3])) if run[3] is not None else None
    elif w.last_ops and w.execs and now - w.execs[-1][1] <= CURRENT_NS:
        current = model.op_name(w.last_ops[-1])
        if w.last_srcs:
            src = model.srclocs.get((w.last_client, w.last_srcs[-1]))
    ops = tuple(sorted((OpStat(model.op_name(o), k, int(w.times.get(o, 0))) for o, k in w.counts.items()),
                       key=lambda s: (-s.time_ns, -s.count, s.name)))  # fmt: skip
    m = w.memory or (None,) * 5
    extras = m[5] if len(m) > 5 and isinstance(m[5], dict) else {}
    d = w.device_stats or {}
    dev = DeviceState(
        name=d.get("name") if isinstance(d.get("name"), str) else None, util=as_num(d.get("util")),
        mem_used=as_int(d.get("mem_used")), mem_total=as_int(d.get("mem_total")),
        temp=as_num(d.get("temp")), power=as_num(d.get("power")),
    )  # fmt: skip
    return WorkerState(
        id=w.wid, device=w.device, backend=w.backend, host=w.host, pid=w.pid, alive=w.alive,
        reason=w.reason, current_op=current, current_source=src,
        compute=parts and parts[COMPUTE], comm=parts and parts[COMM],
        wait=parts and parts[WAIT], idle=parts and parts["idle"], queue=w.queue, in_flight=w.in_flight, instr_rate=rate,
        comm_rate=moved / (win / 1e9) if w.xfers else None,
        instructions=w.instructions + w.base[0], batches=w.batches + w.base[1], errors=w.errors, hot=w.hot, ops=ops,
        memory=MemoryState(*m[:5], history=tuple(w.mem_hist), **extras), device_stats=dev,
        compute_ns=tot[COMPUTE], comm_ns=tot[COMM], wait_ns=tot[WAIT], sent_bytes=w.sent,
        received_bytes=w.received, via=w.via,
        seen_ns=max(0, now - since_ever) if since_ever is not None else 0,
    )  # fmt: skip


def client_state(c: ClientRecord, now: int, window_ns: int, running: bool = False) -> ClientState:
    """A client as of ``now``, its op rate over ``window_ns``; ``running``: a worker is inside a
    batch of it (busy events), so at least one is in flight."""
    lo = now - window_ns
    n = 0
    for t, k in reversed(c.rate):
        if t < lo:
            break
        if t <= now:
            n += k
    if c.last_batch is not None:
        in_flight = max(0, c.last_batch - (c.done_batch if c.done_batch is not None else -1))
    else:
        in_flight = c.snap_in_flight
    if running:
        in_flight = max(in_flight or 0, 1)
    return ClientState(
        id=c.cno, host=c.host, pid=c.pid, argv=c.argv, home=c.home, alive=c.alive,
        reason=c.reason, ops_rate=n / (window_ns / 1e9) if c.rate else None,
        in_flight=in_flight if c.alive else 0, queued=c.queued, errors=c.errors,
    )  # fmt: skip
