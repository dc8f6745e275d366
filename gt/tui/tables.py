"""Pure table rows and panels built from a :class:`~gt.trace.state.ClusterState`.

The app's widgets put these rows into ``DataTable`` s; ``gt top --once`` prints the same rows as
Rich tables. Sorting and filtering are pure too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gt.trace.state import ClientState, ClusterState, LogEntry, WorkerState
from gt.tui import render as R

WORKER_COLUMNS = ("worker", "device", "state", "compute/comm/idle", "op", "queue", "instr/s",
                  "memory", "util", "temp", "power")  # fmt: skip
CLIENT_COLUMNS = (
    "client",
    "host",
    "pid",
    "script",
    "home",
    "ops/s",
    "in flight",
    "errors",
    "state",
)
WORKER_SORTS = ("id", "compute", "instr/s", "memory", "queue")
CLIENT_SORTS = ("id", "ops/s", "errors")
BAR = 10


@dataclass(frozen=True)
class Status:
    """Where the monitor's data comes from and whether that is working (drawn in the header)."""

    kind: str = "fixture"  # "live", "replay", "fixture"
    address: str | None = None
    connected: bool = True
    detail: str = ""


# ---------------------------------------------------------------------- header
def header_text(
    state: ClusterState, status: Status, *, readonly: bool = False, paused: bool = False
) -> Text:
    """One or two lines: source and connection, uptime, counts, rates, totals, drops."""
    t = Text()
    t.append("GT ", style="bold")
    t.append(status.address or status.kind, style="bold cyan")
    if status.connected:
        t.append(f"  {status.detail or status.kind}", style="green")
    else:
        t.append(f"  {status.detail or 'disconnected'}", style="bold red")
    t.append(f"  up {R.human_duration(state.uptime_s)}")
    alive = sum(w.alive for w in state.workers)
    t.append(f"  workers {alive}/{len(state.workers)}")
    t.append(f"  clients {sum(c.alive for c in state.clients)}")
    rate = _sum_or_none(w.instr_rate for w in state.workers if w.alive)
    t.append(f"  {R.human_rate(rate, ' instr/s')}", style="bold")
    tot = state.totals
    t.append(f"\ntotals: {R.human_count(tot.instructions)} instr  {R.human_count(tot.batches)} batches  "
             f"{R.human_bytes(tot.transfer_bytes)} moved  {R.human_count(tot.events)} events  ")  # fmt: skip
    t.append(f"errors {tot.errors}", style="bold red" if tot.errors else "")
    t.append("  ")
    t.append(f"dropped {tot.dropped}", style="bold yellow" if tot.dropped else "")
    if tot.bad_events:
        t.append(f"  malformed {tot.bad_events}", style="yellow")
    if tot.bad_messages:
        t.append(f"  rejected {tot.bad_messages}", style="yellow")
    if tot.internal_errors:
        t.append(f"  GT bugs {tot.internal_errors} (see the dispatcher's log)", style="bold red")
    if paused:
        t.append("  [timeline paused]", style="bold yellow")
    if readonly:
        t.append("  [read-only]", style="bold")
    return t


def _sum_or_none(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


# ---------------------------------------------------------------------- workers
def worker_cells(w: WorkerState) -> tuple[Text, ...]:
    """The cells of one worker row (see :data:`WORKER_COLUMNS`)."""
    dim = "" if w.alive else "dim"
    mem = w.memory
    dev = w.device_stats
    shares = (
        R.share_bar(w.compute, w.comm, w.idle, BAR) if w.alive else Text("-" * BAR, style="dim")
    )
    if w.alive and w.compute is not None:
        shares.append(f" {R.percent(w.compute):>4}")
    mem_cell = R.memory_bar(mem.used, mem.reserved, mem.limit, BAR)
    mem_cell.append(f" {R.human_bytes(mem.used)}", style=dim)
    op = w.current_op if w.alive else (w.reason or "dead")
    return (
        Text(f"w{w.id}", style="bold" if w.alive else "dim strike"),
        R.na_text(_device_label(w), dim),
        Text("alive", style="green") if w.alive else Text("dead", style="bold red"),
        shares,
        R.na_text(op, "red" if not w.alive else ""),
        R.na_text(R.na(w.queue if w.queue is not None else w.in_flight), dim),
        R.na_text(R.human_rate(w.instr_rate, ""), dim),
        mem_cell,
        R.na_text(R.na(dev.util, "{:.0f}%"), dim),
        R.na_text(R.na(dev.temp, "{:.0f}°C"), dim),
        R.na_text(R.na(dev.power, "{:.0f}W"), dim),
    )


def _device_label(w: WorkerState) -> str | None:
    if w.device is None and w.backend is None:
        return None
    return f"{w.device or '?'}/{w.backend}" if w.backend else str(w.device)


def _matches(needle: str, *hay: object) -> bool:
    n = needle.lower()
    return any(n in str(h).lower() for h in hay if h is not None)


def worker_rows(
    state: ClusterState, sort: str = "id", filter_text: str = ""
) -> list[tuple[int, tuple[Text, ...]]]:
    """``(worker id, cells)`` for every worker that matches the filter, in sort order.

    Dead workers sort after live ones; ``sort`` is one of :data:`WORKER_SORTS` (largest first).
    """
    keys = {
        "compute": lambda w: -(w.compute or 0.0),
        "instr/s": lambda w: -(w.instr_rate or 0.0),
        "memory": lambda w: -(w.memory.used or 0),
        "queue": lambda w: -(w.queue or 0),
    }
    key = keys.get(sort, lambda w: 0)
    ws = [w for w in state.workers
          if not filter_text or _matches(filter_text, f"w{w.id}", w.device, w.backend, w.host, w.current_op,
                                         "alive" if w.alive else "dead")]  # fmt: skip
    ws.sort(key=lambda w: (not w.alive, key(w), w.id))
    return [(w.id, worker_cells(w)) for w in ws]


def workers_table(state: ClusterState) -> Table:
    """All workers as a Rich table (``gt top --once``)."""
    table = Table(title="workers", title_justify="left", expand=False)
    for c in WORKER_COLUMNS:
        table.add_column(c, no_wrap=True)
    for _wid, cells in worker_rows(state):
        table.add_row(*cells)
    return table


# ---------------------------------------------------------------------- clients
def client_cells(c: ClientState) -> tuple[Text, ...]:
    """The cells of one client row (see :data:`CLIENT_COLUMNS`)."""
    dim = "" if c.alive else "dim"
    script = " ".join(c.argv) if c.argv else None
    if script and len(script) > 40:
        script = script[:39] + "…"
    state = (
        Text("alive", style="green") if c.alive else Text(f"left ({c.reason or '?'})", style="dim")
    )
    return (
        Text(f"c{c.id}", style="bold" if c.alive else "dim"),
        R.na_text(c.host, dim),
        R.na_text(R.na(c.pid), dim),
        R.na_text(script, dim),
        R.na_text(R.na(c.home, "w{}"), dim),
        R.na_text(R.human_rate(c.ops_rate, ""), dim),
        R.na_text(R.na(c.in_flight), dim),
        Text(str(c.errors), style="bold red" if c.errors else dim),
        state,
    )


def client_rows(
    state: ClusterState, sort: str = "id", filter_text: str = ""
) -> list[tuple[int, tuple[Text, ...]]]:
    """``(client id, cells)`` for the clients that match the filter, in sort order."""
    keys = {"ops/s": lambda c: -(c.ops_rate or 0.0), "errors": lambda c: -c.errors}
    key = keys.get(sort, lambda c: 0)
    cs = [c for c in state.clients
          if not filter_text or _matches(filter_text, f"c{c.id}", c.host, c.pid, " ".join(c.argv))]  # fmt: skip
    cs.sort(key=lambda c: (not c.alive, key(c), c.id))
    return [(c.id, client_cells(c)) for c in cs]


def clients_table(state: ClusterState) -> Table:
    """All clients as a Rich table (``gt top --once``)."""
    table = Table(title="clients", title_justify="left", expand=False)
    for c in CLIENT_COLUMNS:
        table.add_column(c, no_wrap=True)
    for _cid, cells in client_rows(state):
        table.add_row(*cells)
    return table


# ---------------------------------------------------------------------- log and detail
LOG_STYLES = {"error": "bold red", "worker_left": "red", "client_left": "yellow", "drop": "yellow",
              "mark": "bold yellow", "config": "cyan", "worker_joined": "green", "client_joined": "green"}  # fmt: skip


def log_lines(entries: Sequence[LogEntry], height: int, now_ns: int) -> Text:
    """The newest ``height`` log entries, oldest first, stamped relative to ``now_ns``."""
    text = Text()
    for i, e in enumerate(entries[-height:] if height > 0 else ()):
        if i:
            text.append("\n")
        ago = (now_ns - e.t_ns) / 1e9
        text.append(f"{'-' + R.human_duration(ago) if ago > 0.05 else 'now':>8} ", style="dim")
        text.append(f"{e.kind:<13} ", style=LOG_STYLES.get(e.kind, ""))
        text.append(e.text)
    if not entries:
        text.append("no events yet", style="dim")
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def worker_detail(w: WorkerState, width: int = 60) -> Group:
    """The worker detail screen's body: identity, device, memory history, op histogram."""
    head = Text()
    head.append(f"worker {w.id}  ", style="bold")
    head.append(
        "alive" if w.alive else f"dead: {w.reason or 'unknown'}",
        style="green" if w.alive else "bold red",
    )
    head.append(
        f"\ndevice {R.na(w.device)}  backend {R.na(w.backend)}  host {R.na(w.host)}  pid {R.na(w.pid)}"
    )
    head.append(f"\nnow: {R.na(w.current_op)} at {R.na(w.current_source)}   queue {R.na(w.queue)}  "
                f"in flight {R.na(w.in_flight)}  {R.human_rate(w.instr_rate, ' instr/s')}  "
                f"moved {R.human_bytes(w.comm_rate) + '/s' if w.comm_rate is not None else R.NA}")  # fmt: skip
    head.append(
        f"\ntotals: {w.instructions} instr  {w.batches} batches ({w.hot} hot)  errors {w.errors}"
    )
    head.append("\nshares: ")
    head.append_text(R.share_bar(w.compute, w.comm, w.idle, 30))
    head.append(
        f"  compute {R.percent(w.compute)}  comm {R.percent(w.comm)}  idle {R.percent(w.idle)}"
    )
    d = w.device_stats
    head.append(f"\ndevice: {R.na(d.name)}  util {R.na(d.util, '{:.0f}%')}  mem "
                f"{R.human_bytes(d.mem_used)}/{R.human_bytes(d.mem_total)}  temp {R.na(d.temp, '{:.0f}°C')}  "
                f"power {R.na(d.power, '{:.0f}W')}")  # fmt: skip
    m = w.memory
    mem = Text("\nmemory: ")
    mem.append_text(R.memory_bar(m.used, m.reserved, m.limit, 30))
    mem.append(f"  used {R.human_bytes(m.used)}  reserved {R.human_bytes(m.reserved)}  limit "
               f"{R.human_bytes(m.limit)}  spilled {R.human_bytes(m.spilled)}  tensors {R.na(m.tensors)}")  # fmt: skip
    mem.append("\nhistory: ")
    mem.append_text(R.sparkline(m.history, max(10, width - 30), minimum=None))
    if m.history:
        mem.append(
            f"  {R.human_bytes(min(m.history))}..{R.human_bytes(max(m.history))}", style="dim"
        )
    return Group(head, mem, Text(""), op_histogram(w, width))


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
