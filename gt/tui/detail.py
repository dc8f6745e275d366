"""The worker detail screen's body, drawn purely: identity, time shares, memory (its spill
traffic and who holds it), op histogram,
and the hot paths (``gt.hot`` steps) of the clients it is home to."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gt.trace.state import HotPath, MemoryState, WorkerState
from gt.tui import render as R


def worker_detail(w: WorkerState, width: int = 60, *, connected: bool = True,
                  why: str = "", hot: tuple[HotPath, ...] = ()) -> Group:  # fmt: skip
    """Identity, what it runs, its time shares, device, memory and memory history, op histogram.

    Args:
        w: the worker.
        width: the cells available (bars and the histogram scale to it).
        connected: whether the monitor still hears from the dispatcher; if not, a worker that was
            alive is shown as ``unknown`` with ``why``.
        why: the reason the monitor is disconnected (shown with ``unknown``).
        hot: the hot paths that run on it (:meth:`ClusterState.hot_on`).
    """
    head = Text()
    head.append(f"worker {w.id}  ", style="bold")
    if w.alive and connected:
        head.append("alive", style="green")
    elif w.alive:
        head.append(f"unknown: {why or 'the monitor lost the dispatcher'}", style="bold yellow")
    else:
        head.append(f"dead: {w.reason or 'unknown'}", style="bold red")
    head.append(
        f"\ndevice {R.na(w.device)}  backend {R.na(w.backend)}  host {R.na(w.host)}  pid {R.na(w.pid)}"
    )
    now = f"{w.current_op} at {R.na(w.current_source)}" if w.current_op else "idle"
    head.append(f"\nnow: {now}   queue {R.na(w.queue)}  "
                f"in flight {R.na(w.in_flight)}  {R.human_rate(w.instr_rate, ' instr/s')}  "
                f"moved {R.human_bytes(w.comm_rate) + '/s' if w.comm_rate is not None else R.NA}"
                f"{' via ' + w.via if w.via else ''}")  # fmt: skip
    head.append(
        f"\ntotals: {w.instructions} instr  {w.batches} batches ({w.hot} hot)  errors {w.errors}"
    )
    head.append("\n")
    head.append_text(shares_text(w, max(10, min(40, width - 50))))
    d = w.device_stats
    head.append(f"\ndevice: {R.na(d.name)}  util {R.na(d.util, '{:.0f}%')}  mem "
                f"{R.human_bytes(d.mem_used)}/{R.human_bytes(d.mem_total)}  temp {R.na(d.temp, '{:.0f}°C')}  "
                f"power {R.na(d.power, '{:.0f}W')}")  # fmt: skip
    parts = [head, memory_text(w, width), Text("")]
    if hot:
        parts += [hot_text(hot), Text("")]
    return Group(*parts, op_histogram(w, width))


def hot_text(hot: tuple[HotPath, ...]) -> Text:
    """One line per captured step: its client, name, calls, time per call eager and replayed."""
    t = Text("hot paths", style="bold")
    t.append("  (steps captured with gt.hot; time per call as the program sees it)", style="dim")
    for h in hot:
        t.append(f"\n  c{h.client} {h.name}", style="bold magenta")
        t.append(f"  {h.steps} instr  {h.calls:,} calls  ")
        if h.state != "replaying":
            t.append(h.state, style="yellow")
            continue
        eager = R.human_span(h.eager_ns) if h.eager_ns else R.NA
        replay = R.human_span(h.hot_ns) if h.hot_ns else R.NA
        t.append(f"{eager} → {replay} a call")
        if h.speedup is not None:
            t.append(f"  {h.speedup:.2f}× faster", style="green" if h.speedup >= 1 else "red")
    return t


def shares_text(w: WorkerState, bar: int = 30) -> Text:
    """``time: ████▒░·· compute 40%  comm 10%  wait 5%  idle 45%`` and the totals since attach."""
    t = Text("time:   ")
    t.append_text(R.share_bar(w.compute, w.comm, w.wait, w.idle, bar))
    for name, share, style in (("compute", w.compute, R.COMPUTE_STYLE), ("comm", w.comm, R.COMM_STYLE),
                               ("wait", w.wait, R.WAIT_STYLE), ("idle", w.idle, R.IDLE_STYLE)):  # fmt: skip
        t.append(f"  {name} ", style=style)
        t.append(R.percent(share))
    if w.seen_ns:
        seen = w.seen_ns
        t.append(f"\n        since attach ({R.human_span(seen)}): ", style="dim")
        t.append(f"compute {R.human_span(w.compute_ns)}  comm {R.human_span(w.comm_ns)}  "
                 f"wait {R.human_span(w.wait_ns)}", style="dim")  # fmt: skip
    return t


def memory_text(w: WorkerState, width: int = 60) -> Text:
    """Used against the limit (or the device's memory), cached apart, then the history of used."""
    m = w.memory
    cap = R.memory_capacity(m, w.device_stats.mem_total)
    what = "limit" if m.limit else "device" if cap else None
    t = Text("memory: ")
    if cap:
        t.append_text(R.memory_bar(m.used, cap, max(10, min(30, width - 50))))
        t.append(" ")
    t.append(f"used {R.human_bytes(m.used)}", style="bold")
    if cap:
        t.append(f" of {R.human_bytes(cap)} ({what})")
        if m.used is not None:
            t.append(f" {m.used / cap * 100:.0f}%")
    else:
        t.append("  (no limit, no device size)", style="dim")
    cached = R.memory_cached(m)
    t.append(f"\n        cached {R.human_bytes(cached)} (held for reuse)  reserved "
             f"{R.human_bytes(m.reserved)}  spilled {R.human_bytes(m.spilled)}  tensors {R.na(m.tensors)}")  # fmt: skip
    if m.spill_out or m.spill_in or m.prefetched or m.oom:
        t.append(f"\n        spill out {R.human_bytes(m.spill_out)}  in {R.human_bytes(m.spill_in)}"
                 f"  prefetched {R.human_bytes(m.prefetched)} (hits {m.prefetch_hits}, misses "
                 f"{m.prefetch_misses})  refused {m.oom}", style="dim")  # fmt: skip
    if m.clients:
        t.append_text(clients_text(m))
    t.append("\nhistory: ")
    t.append_text(R.sparkline(m.history, max(10, width - 30), minimum=None))
    if m.history:
        t.append(f"  {R.human_bytes(min(m.history))}..{R.human_bytes(max(m.history))}", style="dim")
    return t


#: Clients listed by name in a worker's memory; the rest are summed on one line.
CLIENTS_SHOWN = 6


def clients_text(m: MemoryState) -> Text:
    """Who holds the pool: one line per client (most held first), its quota where one is set."""
    rows = sorted(m.clients, key=lambda r: (-(r[1] + r[2]), r[0]))
    quota = f" of {R.human_bytes(m.client_limit)} quota" if m.client_limit else ""
    t = Text("\nby client:")
    for c, used, spilled in rows[:CLIENTS_SHOWN]:
        t.append(
            f"\n  c{c:<4} used {R.human_bytes(used):>7}{quota}  spilled {R.human_bytes(spilled)}"
        )
    if len(rows) > CLIENTS_SHOWN:
        rest = rows[CLIENTS_SHOWN:]
        t.append(f"\n  +{len(rest)} more: used {R.human_bytes(sum(r[1] for r in rest))}  spilled "
                 f"{R.human_bytes(sum(r[2] for r in rest))}", style="dim")  # fmt: skip
    return t


def op_histogram(w: WorkerState, width: int = 60, limit: int = 15) -> Table:
    """The op histogram: count and time per op, with a bar of the time share."""
    table = Table(title="ops (since attach)", title_justify="left", expand=False)
    for c, j in (("op", "left"), ("count", "right"), ("time", "right"), ("share", "left")):
        table.add_column(c, justify=j, no_wrap=True)
    total = sum(o.time_ns for o in w.ops) or 1
    bar_w = max(10, min(40, width - 40))
    for o in w.ops[:limit]:
        share = o.time_ns / total
        bar = Text("█" * round(share * bar_w), style=R.op_color(o.name))
        bar.append(f" {share * 100:.1f}%")
        table.add_row(
            Text(o.name, style=R.op_color(o.name)), str(o.count), f"{o.time_ns / 1e6:.1f}ms", bar
        )
    if not w.ops:
        table.add_row(R.na_text(None), R.NA, R.NA, Text(""))
    return table
